//! How a run picks its next step among what is ready: the strategies of systematic testing
//! tools (Coyote, shuttle), applied to actors, futures and timers.
//!
//! - [`Strategy::Random`]: uniformly among everything ready.
//! - [`Strategy::Pct`]: probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010):
//!   every actor, future and timer has a random priority and the highest ready one always
//!   runs; at `depth - 1` random steps the one about to run drops below all others. A bug that
//!   needs `d` ordering constraints is found with probability at least 1/(n·k^(d-1)) per run
//!   (n things, k steps), which is why it finds in hundreds of runs what random scheduling
//!   needs many thousands for.
//! - [`Strategy::Fair`]: random, but nothing waits more than [`FAIR_BOUND`] steps while it is
//!   ready: for liveness checks, where a starved actor would be a false alarm.
//! - [`Strategy::Fifo`]: the oldest ready step first, no randomness at all: a plain test on a
//!   manual clock, whose only freedom is the one the test gives it.

use std::collections::HashMap;

use super::rng::{mix, Rng};

/// How a simulated run picks its next step. See the module note.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Uniformly among everything ready.
    Random,
    /// Random priorities with `depth - 1` priority-change points (PCT).
    Pct {
        /// The number of ordering constraints a bug may need (at least 1; 3 finds most).
        depth: u32,
    },
    /// Random, with every ready step run within a bounded number of steps.
    Fair,
    /// The oldest ready step first: no randomness.
    Fifo,
}

impl Strategy {
    /// A short name, as in a replay line (`random`, `pct3`, `fair`, `fifo`).
    pub fn name(&self) -> String {
        match self {
            Strategy::Random => "random".to_owned(),
            Strategy::Pct { depth } => format!("pct{depth}"),
            Strategy::Fair => "fair".to_owned(),
            Strategy::Fifo => "fifo".to_owned(),
        }
    }

    /// Reads a name written by [`Strategy::name`].
    pub fn parse(name: &str) -> Option<Strategy> {
        match name {
            "random" => Some(Strategy::Random),
            "fair" => Some(Strategy::Fair),
            "fifo" => Some(Strategy::Fifo),
            _ => {
                let depth: u32 = name.strip_prefix("pct")?.parse().ok()?;
                (depth >= 1).then_some(Strategy::Pct { depth })
            }
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Steps a ready step may wait under [`Strategy::Fair`].
pub(super) const FAIR_BOUND: u64 = 64;

/// What may run: an actor's turn, a future's poll, a timer. The key names it across steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Key {
    /// An actor, by its number in the run (spawn order).
    Actor(u32),
    /// A future, by its number in the run.
    Task(u64),
    /// A timer firing, by its number in the run.
    Timer(u64),
}

impl Key {
    fn code(self) -> u64 {
        match self {
            Key::Actor(n) => u64::from(n) << 2,
            Key::Task(n) => (n << 2) | 1,
            Key::Timer(n) => (n << 2) | 2,
        }
    }
}

/// A ready step as the chooser sees it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidate {
    pub(super) key: Key,
    /// The step at which it became ready.
    pub(super) since: u64,
}

/// The state of a strategy over one run.
pub(super) struct Chooser {
    strategy: Strategy,
    /// PCT: priorities are a hash of the key and this salt, unless lowered at a change point.
    salt: u64,
    lowered: HashMap<Key, u64>,
    /// PCT: the steps at which the next step's priority drops, in order.
    change_points: Vec<u64>,
}

impl Chooser {
    /// `expected_steps`: how long a run is thought to be (PCT spreads its change points over
    /// it).
    pub(super) fn new(strategy: Strategy, rng: &mut Rng, expected_steps: u64) -> Self {
        let mut change_points = Vec::new();
        if let Strategy::Pct { depth } = strategy {
            for _ in 1..depth {
                change_points.push(rng.below(expected_steps.max(1)));
            }
            change_points.sort_unstable_by(|a, b| b.cmp(a));
        }
        Self {
            strategy,
            salt: rng.next_u64(),
            lowered: HashMap::new(),
            change_points,
        }
    }

    /// The index of the candidate to run at `step`. `candidates` is not empty.
    pub(super) fn choose(&mut self, rng: &mut Rng, step: u64, candidates: &[Candidate]) -> usize {
        debug_assert!(!candidates.is_empty());
        match self.strategy {
            Strategy::Random => rng.below(candidates.len() as u64) as usize,
            Strategy::Fifo => oldest(candidates),
            Strategy::Fair => {
                let old = oldest(candidates);
                if step.saturating_sub(candidates[old].since) > FAIR_BOUND {
                    old
                } else {
                    rng.below(candidates.len() as u64) as usize
                }
            }
            Strategy::Pct { .. } => {
                let mut best = self.highest(candidates);
                while self.change_points.last().is_some_and(|&at| at <= step) {
                    self.change_points.pop();
                    // Below every priority given so far (the initial ones have the top bit).
                    let low = self.lowered.len() as u64 + 1;
                    self.lowered.insert(candidates[best].key, low);
                    best = self.highest(candidates);
                }
                best
            }
        }
    }

    fn priority(&self, key: Key) -> u64 {
        match self.lowered.get(&key) {
            Some(&low) => low,
            None => mix(self.salt ^ key.code()) | (1 << 63),
        }
    }

    fn highest(&self, candidates: &[Candidate]) -> usize {
        let mut best = 0;
        let mut best_priority = self.priority(candidates[0].key);
        for (i, c) in candidates.iter().enumerate().skip(1) {
            let p = self.priority(c.key);
            if p > best_priority {
                (best, best_priority) = (i, p);
            }
        }
        best
    }
}

/// The candidate that became ready first (the first listed among equals).
fn oldest(candidates: &[Candidate]) -> usize {
    let mut best = 0;
    for (i, c) in candidates.iter().enumerate().skip(1) {
        if c.since < candidates[best].since {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(keys: &[Key]) -> Vec<Candidate> {
        keys.iter()
            .enumerate()
            .map(|(i, &key)| Candidate {
                key,
                since: i as u64,
            })
            .collect()
    }

    #[test]
    fn names_read_back() {
        for s in [
            Strategy::Random,
            Strategy::Pct { depth: 3 },
            Strategy::Fair,
            Strategy::Fifo,
        ] {
            assert_eq!(Strategy::parse(&s.name()), Some(s));
        }
        assert_eq!(Strategy::parse("pct0"), None);
        assert_eq!(Strategy::parse("lifo"), None);
    }

    #[test]
    fn pct_runs_the_highest_priority_until_a_change_point_lowers_it() {
        let mut rng = Rng::new(11);
        let mut chooser = Chooser::new(Strategy::Pct { depth: 2 }, &mut rng, 10);
        let at = chooser.change_points[0];
        let candidates = ready(&[Key::Actor(0), Key::Actor(1), Key::Task(0)]);
        let before: Vec<usize> = (0..at)
            .map(|step| chooser.choose(&mut rng, step, &candidates))
            .collect();
        assert!(
            before.windows(2).all(|w| w[0] == w[1]),
            "one priority order"
        );
        let after = chooser.choose(&mut rng, at, &candidates);
        if let Some(&first) = before.first() {
            assert_ne!(
                after, first,
                "the change point lowered the one about to run"
            );
        }
        assert_eq!(chooser.choose(&mut rng, at + 1, &candidates), after);
    }

    #[test]
    fn fair_never_lets_a_ready_step_wait_past_its_bound() {
        let mut rng = Rng::new(5);
        let mut chooser = Chooser::new(Strategy::Fair, &mut rng, 0);
        let mut candidates = ready(&[Key::Actor(0), Key::Actor(1), Key::Actor(2)]);
        for step in 0..10_000u64 {
            let i = chooser.choose(&mut rng, step, &candidates);
            // Past the bound, the oldest goes first: one may wait behind the others.
            for c in &candidates {
                let bound = FAIR_BOUND + candidates.len() as u64;
                assert!(step.saturating_sub(c.since) <= bound, "waited too long");
            }
            candidates[i].since = step + 1;
        }
    }

    #[test]
    fn fifo_takes_the_oldest() {
        let mut rng = Rng::new(0);
        let mut chooser = Chooser::new(Strategy::Fifo, &mut rng, 0);
        let mut candidates = ready(&[Key::Actor(0), Key::Timer(4), Key::Task(2)]);
        candidates[0].since = 9;
        assert_eq!(chooser.choose(&mut rng, 10, &candidates), 1);
    }
}
