//! What an observed system keeps about its actors (`SystemBuilder::observe`): a directory of the
//! live actors by id ([`Observer`]), each actor's own counters and life state ([`ActorWatch`]),
//! and the asks actors are waiting on (the wait-for graph). A system that is not observed has
//! none of it: its actors carry no watch, its sends take the path they always took.
//!
//! Costs, when on: a spawn inserts into one ordered map (a lock), a finish removes from it; a
//! message is boxed with the name of its type (and, with spans, the sender's span) and its
//! handler is timed into the receiving actor's own table (a lock nobody else takes but a
//! reader); an ask from an actor adds an edge to the wait-for table. Readers (a page of the
//! directory, the waits) take the same locks briefly and build their answer outside them.
//!
//! The public types of what is read (`ActorInfo`, `Wait`, ...) live here too, so the layers
//! below the public API can fill them; `observe.rs` adds the `System` methods that read them.

use std::cell::Cell as StdCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::id::ActorId;
use crate::loom::{AtomicU64, AtomicU8, Ordering};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is an insert, a removal, a lookup or a copy: a poisoned lock
    // is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where an actor is in its life, as an observer sees it (published by the actor's own turns,
/// so it may trail the truth by the turn under way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LifeState {
    /// Spawned; its first turn has not run.
    Starting,
    /// Handling messages (or idle, ready to).
    Running,
    /// Holding its mailbox while a future it awaits runs (`Context::await_then`).
    Awaiting,
    /// Failed; its supervisor has not been told yet.
    Failed,
    /// Failed and reported; its supervisor decides. Messages wait.
    Suspended,
    /// Stopping: waiting for its children to stop.
    Stopping,
    /// Finished.
    Stopped,
}

impl LifeState {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => LifeState::Starting,
            1 => LifeState::Running,
            2 => LifeState::Awaiting,
            3 => LifeState::Failed,
            4 => LifeState::Suspended,
            5 => LifeState::Stopping,
            _ => LifeState::Stopped,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            LifeState::Starting => 0,
            LifeState::Running => 1,
            LifeState::Awaiting => 2,
            LifeState::Failed => 3,
            LifeState::Suspended => 4,
            LifeState::Stopping => 5,
            LifeState::Stopped => 6,
        }
    }

    /// A short lower-case name (`running`, `awaiting`, ...), as the console shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            LifeState::Starting => "starting",
            LifeState::Running => "running",
            LifeState::Awaiting => "awaiting",
            LifeState::Failed => "failed",
            LifeState::Suspended => "suspended",
            LifeState::Stopping => "stopping",
            LifeState::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for LifeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One live actor of an observed system, as [`System::actors`](crate::System::actors) lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActorInfo {
    /// The actor.
    pub id: ActorId,
    /// Its supervisor, if it is a child (a top-level actor has none).
    pub parent: Option<ActorId>,
    /// The actor's Rust type (`std::any::type_name`).
    pub type_name: &'static str,
    /// Names it is registered under.
    pub names: Vec<String>,
    /// The pool it runs on (`default`, `blocking`, a named pool), or `thread` for an actor on a
    /// thread of its own.
    pub pool: String,
    /// Where it is in its life.
    pub state: LifeState,
    /// Messages waiting in its mailbox (approximate).
    pub mailbox_len: usize,
    /// Messages its handlers have handled.
    pub processed: u64,
    /// Times its supervisor restarted it.
    pub restarts: u64,
    /// Times it failed (a handler or hook panicked, a link failed, ...).
    pub failures: u64,
    /// Asks to it that timed out before it answered.
    pub asks_timed_out: u64,
    /// Time spent in its handlers since it was spawned.
    pub handler_time: Duration,
}

/// A page of the live actors, in the order of their ids.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActorPage {
    /// The actors of this page, in id order.
    pub actors: Vec<ActorInfo>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next: Option<ActorId>,
}

/// An actor waiting on another: it asked, and the answer has not come.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Wait {
    /// The actor whose handler asked.
    pub asker: ActorId,
    /// The actor asked.
    pub target: ActorId,
    /// The type of the message asked.
    pub message: &'static str,
    /// How long it has waited so far.
    pub waited: Duration,
}

/// Time in one actor type's handler of one message type, over every actor of that type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerStats {
    /// The actor type (`std::any::type_name`).
    pub actor_type: &'static str,
    /// The message type.
    pub message: &'static str,
    /// Messages handled.
    pub count: u64,
    /// Time in the handler, all messages together.
    pub total: Duration,
    /// The longest single message.
    pub max: Duration,
    /// Half the messages took at most this (to within a factor of two: the upper edge of a
    /// power-of-two bucket).
    pub p50: Duration,
    /// 99 % took at most this (as `p50`).
    pub p99: Duration,
}

/// Why an observation could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    #[error("the system is not observed: build it with `SystemBuilder::observe`")]
    /// The system was built without `observe`.
    NotObserved,
    #[error("a page holds 1 to {max} actors, not {asked}")]
    /// A page size out of bounds.
    PageSize {
        /// The size asked for.
        asked: usize,
        /// The largest page.
        max: usize,
    },
}

/// Buckets of the handler-time histogram: bucket `i` counts times below `2^i` ns (the last
/// counts everything longer, about 17 minutes and up).
pub(crate) const BUCKETS: usize = 40;

/// One message type's handler times at one actor.
#[derive(Clone)]
pub(crate) struct HandlerTimes {
    pub(crate) message: &'static str,
    pub(crate) count: u64,
    pub(crate) total_nanos: u64,
    pub(crate) max_nanos: u64,
    pub(crate) buckets: [u64; BUCKETS],
    /// The `metrics` handles its messages are counted and timed on (made with its first).
    #[cfg(feature = "metrics")]
    meters: Option<meters::Meters>,
}

impl HandlerTimes {
    fn new(message: &'static str) -> Self {
        Self {
            message,
            count: 0,
            total_nanos: 0,
            max_nanos: 0,
            buckets: [0; BUCKETS],
            #[cfg(feature = "metrics")]
            meters: None,
        }
    }

    fn add(&mut self, other: &HandlerTimes) {
        self.count += other.count;
        self.total_nanos = self.total_nanos.saturating_add(other.total_nanos);
        self.max_nanos = self.max_nanos.max(other.max_nanos);
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
    }

    /// The upper edge of the bucket that holds the `q`-quantile.
    fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let wanted = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= wanted {
                let edge = 1u64 << i;
                return Duration::from_nanos(edge.min(self.max_nanos.max(1)));
            }
        }
        Duration::from_nanos(self.max_nanos)
    }
}

/// The bucket of a time of `nanos` nanoseconds.
pub(crate) fn bucket_of(nanos: u64) -> usize {
    ((u64::BITS - nanos.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// One actor's observed state: made at its spawn, kept in its extras, read by observers.
pub(crate) struct ActorWatch {
    pub(crate) observer: Arc<Observer>,
    pub(crate) type_name: &'static str,
    pub(crate) parent: Option<ActorId>,
    pub(crate) pool: Arc<str>,
    state: AtomicU8,
    failures: AtomicU64,
    asks_timed_out: AtomicU64,
    handler_nanos: AtomicU64,
    /// Written by the actor's own turns; read by observers.
    handlers: Mutex<Vec<HandlerTimes>>,
    /// The first name it was registered under (a label of its metrics).
    name: Mutex<Option<Arc<str>>>,
}

impl ActorWatch {
    pub(crate) fn new(
        observer: Arc<Observer>,
        type_name: &'static str,
        parent: Option<ActorId>,
        pool: Arc<str>,
    ) -> Self {
        Self {
            observer,
            type_name,
            parent,
            pool,
            state: AtomicU8::new(LifeState::Starting.as_u8()),
            failures: AtomicU64::new(0),
            asks_timed_out: AtomicU64::new(0),
            handler_nanos: AtomicU64::new(0),
            handlers: Mutex::new(Vec::new()),
            name: Mutex::new(None),
        }
    }

    /// The actor was registered under `name` (the first name is the one its metrics carry).
    pub(crate) fn named(&self, name: &str) {
        lock(&self.name).get_or_insert_with(|| Arc::from(name));
    }

    /// The first name it was registered under, if any.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn name(&self) -> Option<Arc<str>> {
        lock(&self.name).clone()
    }

    /// Its supervisor restarted it.
    pub(crate) fn restarted(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!("troupe_actor_restarts_total", meters::labels(self)).increment(1);
    }

    /// The actor's turn moved it to `state`.
    pub(crate) fn set_state(&self, state: LifeState) {
        self.state.store(state.as_u8(), Ordering::Relaxed);
    }

    /// The actor failed (counted once per failure, however long it stays failed).
    pub(crate) fn failed(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!("troupe_actor_failures_total", meters::labels(self)).increment(1);
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.set_state(LifeState::Failed);
    }

    pub(crate) fn state(&self) -> LifeState {
        LifeState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    pub(crate) fn asks_timed_out(&self) -> u64 {
        self.asks_timed_out.load(Ordering::Relaxed)
    }

    /// An ask to this actor timed out.
    pub(crate) fn ask_timed_out(&self) {
        #[cfg(feature = "metrics")]
        metrics::counter!("troupe_asks_timed_out_total", meters::labels(self)).increment(1);
        self.asks_timed_out.fetch_add(1, Ordering::Relaxed);
        self.observer.asks_timed_out.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handler_time(&self) -> Duration {
        Duration::from_nanos(self.handler_nanos.load(Ordering::Relaxed))
    }

    /// A message of type `message` took `took` in its handler (called by the actor's turn).
    pub(crate) fn handled(&self, message: &'static str, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.handler_nanos.fetch_add(nanos, Ordering::Relaxed);
        let mut handlers = lock(&self.handlers);
        // Few message types per actor: a scan by the name's address, then by its text.
        let at = match handlers
            .iter()
            .position(|h| std::ptr::eq(h.message, message) || h.message == message)
        {
            Some(at) => at,
            None => {
                #[allow(unused_mut)]
                let mut times = HandlerTimes::new(message);
                #[cfg(feature = "metrics")]
                {
                    times.meters = Some(meters::Meters::new(self, message));
                }
                handlers.push(times);
                handlers.len() - 1
            }
        };
        let times = &mut handlers[at];
        #[cfg(feature = "metrics")]
        if let Some(meters) = &times.meters {
            meters.handled.increment(1);
            meters.seconds.record(took.as_secs_f64());
        }
        times.count += 1;
        times.total_nanos = times.total_nanos.saturating_add(nanos);
        times.max_nanos = times.max_nanos.max(nanos);
        times.buckets[bucket_of(nanos)] += 1;
    }

    /// A copy of its handler times.
    pub(crate) fn handler_times(&self) -> Vec<HandlerTimes> {
        lock(&self.handlers).clone()
    }
}

/// What a listed actor tells of itself (implemented by every actor's cell, in `life.rs`).
pub(crate) trait Listed: Send + Sync {
    /// Its counters and names now.
    fn describe(&self) -> Described;
}

/// The facts a listed actor gives; the watch adds the rest.
pub(crate) struct Described {
    pub(crate) id: ActorId,
    pub(crate) watch: Option<Arc<ActorWatch>>,
    pub(crate) names: Vec<String>,
    pub(crate) mailbox_len: usize,
    pub(crate) processed: u64,
    pub(crate) restarts: u64,
    pub(crate) closed: bool,
}

/// An outstanding ask from one actor to another.
struct WaitEdge {
    asker: ActorId,
    target: ActorId,
    message: &'static str,
    since: Instant,
    /// True while the answer has not come (nor has the asker given up).
    open: Box<dyn Fn() -> bool + Send>,
}

/// The observer of one system. See the module note.
pub(crate) struct Observer {
    /// The system's name (a label of every metric).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) system: Arc<str>,
    /// A span per handled message, parented to the sender's.
    pub(crate) spans: bool,
    directory: Mutex<BTreeMap<ActorId, Weak<dyn Listed>>>,
    waits: Mutex<Vec<WaitEdge>>,
    /// Size of the wait table after its last sweep: the next sweep comes at twice that.
    swept_at: Mutex<usize>,
    /// Cycles of waits seen as they formed (the latest few).
    cycles: Mutex<Vec<Vec<ActorId>>>,
    pub(crate) dead_letters: AtomicU64,
    pub(crate) asks_timed_out: AtomicU64,
    /// The label sets of the gauges the last `publish_metrics` set (zeroed when they go).
    #[cfg(feature = "metrics")]
    pub(crate) published: Mutex<HashSet<meters::Group>>,
}

/// Cycles kept for readers (the oldest go first).
const CYCLES_KEPT: usize = 64;

thread_local! {
    /// The observed actor whose handler runs on this thread, for the asks it makes.
    static HANDLING: StdCell<Option<ActorId>> = const { StdCell::new(None) };
}

/// The observed actor whose handler runs on this thread, if any.
pub(crate) fn handling() -> Option<ActorId> {
    HANDLING.with(StdCell::get)
}

/// Records that `actor`'s handler runs on this thread until the guard drops.
pub(crate) fn handle_as(actor: ActorId) -> Handling {
    Handling {
        before: HANDLING.with(|h| h.replace(Some(actor))),
    }
}

/// Restores the thread's previous handling actor when dropped (handlers nest when a turn is
/// lent inside another's handler).
pub(crate) struct Handling {
    before: Option<ActorId>,
}

impl Drop for Handling {
    fn drop(&mut self) {
        HANDLING.with(|h| h.set(self.before));
    }
}

impl Observer {
    pub(crate) fn new(system: &str, spans: bool) -> Self {
        Self {
            system: Arc::from(system),
            spans,
            directory: Mutex::new(BTreeMap::new()),
            waits: Mutex::new(Vec::new()),
            swept_at: Mutex::new(0),
            cycles: Mutex::new(Vec::new()),
            dead_letters: AtomicU64::new(0),
            asks_timed_out: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            published: Mutex::new(HashSet::new()),
        }
    }

    /// An actor was spawned.
    pub(crate) fn spawned(&self, id: ActorId, cell: Weak<dyn Listed>) {
        lock(&self.directory).insert(id, cell);
    }

    /// An actor finished.
    pub(crate) fn finished(&self, id: ActorId) {
        let gone = lock(&self.directory).remove(&id);
        drop(gone);
    }

    /// Up to `limit` live actors with ids above `after`, and the cursor for the next page.
    pub(crate) fn page(
        &self,
        after: Option<ActorId>,
        limit: usize,
    ) -> (Vec<Described>, Option<ActorId>) {
        use std::ops::Bound;
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        type Page = (Vec<(ActorId, Weak<dyn Listed>)>, Option<ActorId>);
        let (cells, next): Page = {
            let directory = lock(&self.directory);
            let mut range = directory.range((start, Bound::Unbounded));
            let cells: Vec<_> = range
                .by_ref()
                .take(limit)
                .map(|(id, cell)| (*id, cell.clone()))
                .collect();
            let more = range.next().is_some();
            let next = if more {
                cells.last().map(|(id, _)| *id)
            } else {
                None
            };
            (cells, next)
        };
        // Described outside the directory's lock: each takes its actor's own locks.
        let described = cells
            .into_iter()
            .filter_map(|(_, cell)| cell.upgrade())
            .map(|cell| cell.describe())
            .collect();
        (described, next)
    }

    /// One live actor.
    pub(crate) fn lookup(&self, id: ActorId) -> Option<Described> {
        let cell = lock(&self.directory).get(&id).and_then(Weak::upgrade)?;
        Some(cell.describe())
    }

    /// Every live actor's watch (for the sums over all of them).
    pub(crate) fn watches(&self) -> Vec<Arc<ActorWatch>> {
        let cells: Vec<Weak<dyn Listed>> = lock(&self.directory).values().cloned().collect();
        cells
            .into_iter()
            .filter_map(|cell| cell.upgrade())
            .filter_map(|cell| cell.describe().watch)
            .collect()
    }

    /// Live actors listed.
    pub(crate) fn len(&self) -> usize {
        lock(&self.directory).len()
    }

    /// `asker` asked `target` a `message`; `open` says whether the answer is still to come.
    /// If the new edge closes a cycle of waits, the cycle is logged and kept.
    pub(crate) fn asked(
        &self,
        asker: ActorId,
        target: ActorId,
        message: &'static str,
        open: Box<dyn Fn() -> bool + Send>,
    ) {
        let cycle = {
            let mut waits = lock(&self.waits);
            let mut swept_at = lock(&self.swept_at);
            if waits.len() >= (*swept_at * 2).max(64) {
                waits.retain(|w| (w.open)());
                *swept_at = waits.len();
            }
            waits.push(WaitEdge {
                asker,
                target,
                message,
                since: Instant::now(),
                open,
            });
            // A cycle needs the target to be waiting itself (most are not).
            if waits.iter().any(|w| w.asker == target) {
                path(&waits, target, asker)
            } else {
                None
            }
        };
        if let Some(mut cycle) = cycle {
            // `path` runs from the target back round to the asker; the cycle starts at the asker.
            cycle.insert(0, asker);
            cycle.pop();
            let shown: Vec<String> = cycle.iter().map(ActorId::to_string).collect();
            tracing::warn!(
                cycle = %shown.join(" -> "),
                "actors wait on each other in a cycle of asks: none can answer while it waits"
            );
            let mut cycles = lock(&self.cycles);
            if cycles.len() == CYCLES_KEPT {
                cycles.remove(0);
            }
            cycles.push(cycle);
        }
    }

    /// The asks still unanswered.
    pub(crate) fn waits(&self) -> Vec<Wait> {
        let now = Instant::now();
        let mut waits = lock(&self.waits);
        waits.retain(|w| (w.open)());
        waits
            .iter()
            .map(|w| Wait {
                asker: w.asker,
                target: w.target,
                message: w.message,
                waited: now.saturating_duration_since(w.since),
            })
            .collect()
    }

    /// Cycles in the graph of unanswered asks now, each from its lowest actor id.
    pub(crate) fn cycles_now(&self) -> Vec<Vec<ActorId>> {
        let waits = self.waits();
        let mut edges: BTreeMap<ActorId, Vec<ActorId>> = BTreeMap::new();
        for wait in &waits {
            edges.entry(wait.asker).or_default().push(wait.target);
        }
        let mut found: Vec<Vec<ActorId>> = Vec::new();
        let mut seen: HashSet<Vec<ActorId>> = HashSet::new();
        for &start in edges.keys() {
            if let Some(mut cycle) = cycle_through(&edges, start) {
                let lowest = (0..cycle.len())
                    .min_by_key(|&i| cycle[i])
                    .expect("a cycle has an actor");
                cycle.rotate_left(lowest);
                if seen.insert(cycle.clone()) {
                    found.push(cycle);
                }
            }
        }
        found
    }

    /// The cycles seen as they formed (the latest 64), oldest first.
    pub(crate) fn cycles_seen(&self) -> Vec<Vec<ActorId>> {
        lock(&self.cycles).clone()
    }
}

/// A path of open waits from `from` to `to` (both included), if there is one.
fn path(waits: &[WaitEdge], from: ActorId, to: ActorId) -> Option<Vec<ActorId>> {
    let mut edges: HashMap<ActorId, Vec<ActorId>> = HashMap::new();
    for wait in waits {
        edges.entry(wait.asker).or_default().push(wait.target);
    }
    let mut back: HashMap<ActorId, ActorId> = HashMap::new();
    let mut frontier = vec![from];
    let mut visited: HashSet<ActorId> = HashSet::from([from]);
    while let Some(at) = frontier.pop() {
        if at == to {
            let mut path = vec![to];
            let mut step = to;
            while let Some(&before) = back.get(&step) {
                path.push(before);
                step = before;
            }
            path.reverse();
            // Only edges still open count (checked last: the check runs the slot's probe).
            let still_open = path.windows(2).all(|pair| {
                waits
                    .iter()
                    .any(|w| w.asker == pair[0] && w.target == pair[1] && (w.open)())
            });
            return still_open.then_some(path);
        }
        for &next in edges.get(&at).into_iter().flatten() {
            if visited.insert(next) {
                back.insert(next, at);
                frontier.push(next);
            }
        }
    }
    None
}

/// A cycle through `start` in `edges`, if there is one.
fn cycle_through(edges: &BTreeMap<ActorId, Vec<ActorId>>, start: ActorId) -> Option<Vec<ActorId>> {
    let mut back: HashMap<ActorId, ActorId> = HashMap::new();
    let mut frontier = vec![start];
    let mut visited: HashSet<ActorId> = HashSet::new();
    while let Some(at) = frontier.pop() {
        for &next in edges.get(&at).into_iter().flatten() {
            if next == start {
                let mut cycle = vec![at];
                let mut step = at;
                while let Some(&before) = back.get(&step) {
                    cycle.push(before);
                    step = before;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if visited.insert(next) {
                back.insert(next, at);
                frontier.push(next);
            }
        }
    }
    None
}

/// Handler times summed by actor type and message type, longest total first.
pub(crate) fn handler_stats(watches: &[Arc<ActorWatch>]) -> Vec<HandlerStats> {
    let mut sums: HashMap<(&'static str, &'static str), HandlerTimes> = HashMap::new();
    for watch in watches {
        for times in watch.handler_times() {
            sums.entry((watch.type_name, times.message))
                .or_insert_with(|| HandlerTimes::new(times.message))
                .add(&times);
        }
    }
    let mut stats: Vec<HandlerStats> = sums
        .into_iter()
        .map(|((actor_type, message), times)| HandlerStats {
            actor_type,
            message,
            count: times.count,
            total: Duration::from_nanos(times.total_nanos),
            max: Duration::from_nanos(times.max_nanos),
            p50: times.quantile(0.5),
            p99: times.quantile(0.99),
        })
        .collect();
    stats.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then(a.actor_type.cmp(b.actor_type))
            .then(a.message.cmp(b.message))
    });
    stats
}

/// An `ActorInfo` from what a cell described (`None` if it carries no watch).
pub(crate) fn info(described: Described) -> Option<ActorInfo> {
    let watch = described.watch?;
    let mut state = watch.state();
    if described.closed && !matches!(state, LifeState::Stopping | LifeState::Stopped) {
        state = LifeState::Stopping;
    }
    Some(ActorInfo {
        id: described.id,
        parent: watch.parent,
        type_name: watch.type_name,
        names: described.names,
        pool: watch.pool.to_string(),
        state,
        mailbox_len: described.mailbox_len,
        processed: described.processed,
        restarts: described.restarts,
        failures: watch.failures(),
        asks_timed_out: watch.asks_timed_out(),
        handler_time: watch.handler_time(),
    })
}

/// What an observed system records through the `metrics` facade. Every metric carries the
/// labels `system`, `actor_type`, `name` (the actor's first registered name, or empty) and
/// `pool`; per message type, `message` too:
///
/// | metric | kind | when |
/// |---|---|---|
/// | `troupe_messages_handled_total` | counter | each handled message (labels + `message`) |
/// | `troupe_handler_seconds` | histogram | each handled message's time in its handler |
/// | `troupe_actor_failures_total` | counter | each failure |
/// | `troupe_actor_restarts_total` | counter | each restart by a supervisor |
/// | `troupe_asks_timed_out_total` | counter | each ask that timed out unanswered |
/// | `troupe_mailbox_depth` | gauge | at `System::publish_metrics`: messages waiting, summed |
/// | `troupe_actors` | gauge | at `publish_metrics`: live actors of the labels |
/// | `troupe_dead_letters_total` | counter | at `publish_metrics` (label `system` only) |
/// | `troupe_live_actors` | gauge | at `publish_metrics` (label `system` only) |
/// | `troupe_pool_workers`, `troupe_pool_turns_total`, `troupe_pool_steals_total`, `troupe_pool_parks_total` | gauge, counters | at `publish_metrics` (labels `system`, `pool`) |
#[cfg(feature = "metrics")]
pub(crate) mod meters {
    use std::sync::Arc;

    use metrics::Label;

    use super::ActorWatch;

    /// The labels of an actor's metrics.
    pub(crate) fn labels(watch: &ActorWatch) -> Vec<Label> {
        group(watch).labels()
    }

    /// The label set of an actor (what gauges are summed over).
    #[derive(Clone, PartialEq, Eq, Hash)]
    pub(crate) struct Group {
        system: Arc<str>,
        actor_type: &'static str,
        name: Option<Arc<str>>,
        pool: Arc<str>,
    }

    impl Group {
        pub(crate) fn labels(&self) -> Vec<Label> {
            vec![
                Label::new("system", self.system.to_string()),
                Label::new("actor_type", self.actor_type),
                Label::new(
                    "name",
                    self.name.as_deref().map(str::to_owned).unwrap_or_default(),
                ),
                Label::new("pool", self.pool.to_string()),
            ]
        }
    }

    pub(crate) fn group(watch: &ActorWatch) -> Group {
        Group {
            system: watch.observer.system.clone(),
            actor_type: watch.type_name,
            name: watch.name(),
            pool: watch.pool.clone(),
        }
    }

    /// The handles one message type of one actor is counted and timed on.
    #[derive(Clone)]
    pub(crate) struct Meters {
        pub(crate) handled: metrics::Counter,
        pub(crate) seconds: metrics::Histogram,
    }

    impl Meters {
        pub(crate) fn new(watch: &ActorWatch, message: &'static str) -> Self {
            let mut labels = labels(watch);
            labels.push(Label::new("message", message));
            Self {
                handled: metrics::counter!("troupe_messages_handled_total", labels.clone()),
                seconds: metrics::histogram!("troupe_handler_seconds", labels),
            }
        }
    }
}
