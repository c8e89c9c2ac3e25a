//! What a run did, step by step: a hash of every step for the determinism check and replay, and,
//! when asked for, the steps themselves to print.
//!
//! Events name actors and futures by their number in the run (spawn order), never by process-
//! wide ids or addresses, and times by their offset from the run's start, so two runs of one
//! seed give the same events in any process, beside any other test.

use std::fmt;

use super::rng::mix;

/// One thing a step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// An actor was spawned (its number, its type).
    Spawn { actor: u32, type_name: &'static str },
    /// A turn of an actor: its budget, and how it ended (0 idle, 1 yield, 2 stopped).
    Turn { actor: u32, budget: u32, end: u8 },
    /// A poll of a future: whether it finished (or was dropped, aborted).
    Poll { task: u64, done: bool },
    /// A timer fired.
    Timer { timer: u64 },
    /// The clock moved to this offset from the start (nanoseconds).
    Clock { at: u64 },
    /// A fault: an actor crashed (as if a handler panicked).
    Crash { actor: u32 },
    /// A fault: an actor stalled for this long (nanoseconds).
    Stall { actor: u32, nanos: u64 },
    /// A fault: an actor was stopped.
    Stop { actor: u32 },
    /// A fault point was reached, and fired or not.
    Buggify { site: &'static str, fired: bool },
}

impl Event {
    fn words(&self) -> [u64; 3] {
        match *self {
            Event::Spawn { actor, type_name } => [1, u64::from(actor), text_hash(type_name)],
            Event::Turn { actor, budget, end } => {
                [2, u64::from(actor), u64::from(budget) << 8 | u64::from(end)]
            }
            Event::Poll { task, done } => [3, task, u64::from(done)],
            Event::Timer { timer } => [4, timer, 0],
            Event::Clock { at } => [5, at, 0],
            Event::Crash { actor } => [6, u64::from(actor), 0],
            Event::Stall { actor, nanos } => [7, u64::from(actor), nanos],
            Event::Stop { actor } => [8, u64::from(actor), 0],
            Event::Buggify { site, fired } => [9, text_hash(site), u64::from(fired)],
        }
    }

    /// True for an injected fault.
    pub(super) fn is_fault(&self) -> bool {
        matches!(
            self,
            Event::Crash { .. }
                | Event::Stall { .. }
                | Event::Stop { .. }
                | Event::Buggify { fired: true, .. }
        )
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Spawn { actor, type_name } => write!(f, "spawn   actor {actor} ({type_name})"),
            Event::Turn { actor, budget, end } => {
                let end = ["idle", "yield", "stopped"][usize::from(*end).min(2)];
                write!(f, "turn    actor {actor}, budget {budget}, then {end}")
            }
            Event::Poll { task, done } => {
                write!(
                    f,
                    "poll    future {task}{}",
                    if *done { ", finished" } else { "" }
                )
            }
            Event::Timer { timer } => write!(f, "timer   {timer} fired"),
            Event::Clock { at } => write!(f, "clock   {}", Offset(*at)),
            Event::Crash { actor } => write!(f, "FAULT   actor {actor} crashes"),
            Event::Stall { actor, nanos } => {
                write!(f, "FAULT   actor {actor} stalls for {}", Offset(*nanos))
            }
            Event::Stop { actor } => write!(f, "FAULT   actor {actor} is stopped"),
            Event::Buggify { site, fired } => write!(
                f,
                "{}  fault point `{site}`",
                if *fired { "FAULT " } else { "passed" }
            ),
        }
    }
}

/// Nanoseconds from the run's start, printed readably.
pub(super) struct Offset(pub(super) u64);

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.3} s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{:.3} ms", ns as f64 / 1e6)
        } else {
            write!(f, "{:.1} µs", ns as f64 / 1e3)
        }
    }
}

fn text_hash(text: &str) -> u64 {
    text.bytes()
        .fold(0xCBF2_9CE4_8422_2325, |h, b| mix(h ^ u64::from(b)))
}

/// A run's trace.
pub(super) struct Trace {
    hash: u64,
    /// Every event with its step, when recording.
    events: Option<Vec<(u64, Event)>>,
    /// The hash after each step, when recording (the determinism check compares them).
    step_hashes: Option<Vec<u64>>,
    /// Faults injected so far.
    pub(super) faults: u32,
}

impl Trace {
    pub(super) fn new(record: bool) -> Self {
        Self {
            hash: 0x7E0_0BE5,
            events: record.then(Vec::new),
            step_hashes: record.then(Vec::new),
            faults: 0,
        }
    }

    pub(super) fn push(&mut self, step: u64, event: Event) {
        for word in event.words() {
            self.hash = mix(self.hash ^ word);
        }
        if event.is_fault() {
            self.faults += 1;
        }
        if let Some(events) = &mut self.events {
            events.push((step, event));
        }
    }

    /// Marks the end of step `step` (the steps' hashes are compared by the determinism check).
    pub(super) fn end_step(&mut self, step: u64) {
        self.hash = mix(self.hash ^ step);
        if let Some(hashes) = &mut self.step_hashes {
            hashes.push(self.hash);
        }
    }

    pub(super) fn hash(&self) -> u64 {
        self.hash
    }

    pub(super) fn take(&mut self) -> Recorded {
        Recorded {
            events: self.events.take().unwrap_or_default(),
            step_hashes: self.step_hashes.take().unwrap_or_default(),
            hash: self.hash,
        }
    }
}

/// What a recording run kept.
#[derive(Clone, Debug, Default)]
pub(super) struct Recorded {
    pub(super) events: Vec<(u64, Event)>,
    pub(super) step_hashes: Vec<u64>,
    pub(super) hash: u64,
}

impl Recorded {
    /// The first step at which `other` differs from this one (`None`: identical).
    pub(super) fn first_difference(&self, other: &Recorded) -> Option<u64> {
        let common = self.step_hashes.len().min(other.step_hashes.len());
        (0..common)
            .find(|&i| self.step_hashes[i] != other.step_hashes[i])
            .map(|i| i as u64 + 1)
            .or_else(|| {
                (self.step_hashes.len() != other.step_hashes.len()).then_some(common as u64 + 1)
            })
            .or_else(|| (self.hash != other.hash).then_some(common as u64))
    }

    /// The events of step `step`.
    pub(super) fn events_of(&self, step: u64) -> impl Iterator<Item = &Event> {
        self.events
            .iter()
            .filter(move |(s, _)| *s == step)
            .map(|(_, e)| e)
    }

    /// The last `n` events, one per line, with their steps.
    pub(super) fn tail(&self, n: usize) -> String {
        let skip = self.events.len().saturating_sub(n);
        self.events[skip..]
            .iter()
            .map(|(step, e)| format!("  step {step:>7}  {e}\n"))
            .collect()
    }
}
