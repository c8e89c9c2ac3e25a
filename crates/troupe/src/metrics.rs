//! Counters a user can read at run time, per actor and per pool.
//!
//! They cost the hot path almost nothing: a turn adds the messages it handled once, before it
//! goes idle (a plain store: only turns write it), restarts and drops are counted where they
//! happen (rare), and time in handlers is measured only for actors spawned with
//! `SpawnOptions::measure_time`.

use std::time::Duration;

use crate::actor::Actor;
use crate::life::ActorCell;
use crate::loom::Ordering;

/// An actor's counters at one moment.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::SpawnOptions;
/// let system = System::new();
/// let counter = system.spawn_with(Counter(0), SpawnOptions::new().measure_time());
/// counter.tell(Add(1)).unwrap();
/// counter.ask(Get).wait().unwrap();
/// // Counted when the turn ends, which may be just after the reply.
/// while counter.metrics().handler_time.is_none() { std::thread::yield_now() }
/// let m = counter.metrics();
/// println!("processed {} (queue {}), {:?} in handlers", m.processed, m.mailbox_len, m.handler_time);
/// assert!(m.handler_time.is_some());
/// system.shutdown();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ActorMetrics {
    /// Messages its handlers have handled (counted at the end of each turn; a message whose
    /// handler panicked is not counted).
    pub processed: u64,
    /// Messages waiting in its mailbox (approximate).
    pub mailbox_len: usize,
    /// Times its supervisor restarted it.
    pub restarts: u64,
    /// Messages refused because its bounded mailbox was full (`Overflow::Fail`).
    pub rejected: u64,
    /// Messages dropped by its bounded mailbox's overflow policy.
    pub dropped: u64,
    /// Time spent in its handlers, if it was spawned with `SpawnOptions::measure_time`.
    pub handler_time: Option<Duration>,
    /// True once it has begun stopping.
    pub stopped: bool,
}

pub(crate) fn actor_metrics<A: Actor>(cell: &ActorCell<A>) -> ActorMetrics {
    let extras = cell.shared.extras.get();
    let mut m = ActorMetrics {
        processed: cell.processed(),
        mailbox_len: cell.mailbox_len(),
        restarts: extras.map_or(0, |e| e.restarts.load(Ordering::Relaxed)),
        stopped: cell.is_closed(),
        ..ActorMetrics::default()
    };
    if let Some(bound) = cell.shared.bound() {
        m.mailbox_len = bound.len();
        m.rejected = bound.rejected.load(Ordering::Relaxed);
        m.dropped = bound.dropped.load(Ordering::Relaxed);
    }
    if let Some(nanos) = extras.map(|e| e.handler_nanos.load(Ordering::Relaxed)) {
        if nanos > 0 {
            m.handler_time = Some(Duration::from_nanos(nanos));
        }
    }
    m
}

/// A pool's counters at one moment.
///
/// ```
/// let system = troupe::System::builder().workers(2).build().unwrap();
/// for pool in system.pool_metrics() {
///     println!("{}: {} workers, {} turns, {} steals, {} parks", pool.name, pool.workers, pool.turns, pool.steals, pool.parks);
/// }
/// let default = system.pool_metrics().into_iter().find(|p| p.name == "default").unwrap();
/// assert_eq!((default.started, default.workers), (true, 2));
/// system.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PoolMetrics {
    /// The pool's name (`default`, `blocking`, or one given to `SystemBuilder::pool`).
    pub name: String,
    /// Its threads have started (pools other than `default` start with their first actor).
    pub started: bool,
    /// Worker threads.
    pub workers: usize,
    /// Actor turns run.
    pub turns: u64,
    /// Batches of actors stolen from other workers.
    pub steals: u64,
    /// Times a worker parked for lack of work.
    pub parks: u64,
    /// Turns a worker lent, inside a handler that sends, to the actor it holds to run next once
    /// that actor fell behind (`SpawnOptions::catch_up`; not counted in `turns`).
    pub lent_turns: u64,
    /// Sends from a thread outside every pool (a plain thread, or a task's) that found an
    /// actor of this pool behind (`SpawnOptions::catch_up`) and waited, briefly, for it to read
    /// half its backlog.
    pub catch_up_waits: u64,
    /// Sends from a worker that the pool narrowed past while it ran a turn (`SystemBuilder::
    /// narrowing`: a worker steps aside only between turns) that found an actor of this pool
    /// behind (`SpawnOptions::catch_up`) running elsewhere, and waited, for at most a
    /// millisecond, while the workers taking work handled messages.
    pub aside_waits: u64,
    /// Turns run not by a worker but by a plain thread waiting for a reply, on the actors it
    /// had scheduled itself and no worker had taken yet (not counted in `turns`).
    pub helped_turns: u64,
    /// Tasks awaiting an ask may run this pool's actors at this moment
    /// (`SystemBuilder::tasks_help`): false where the builder said no, on a pool for blocking
    /// code, and once turns run by a task held its thread for long (the default's rule).
    pub tasks_help: bool,
    /// Workers running no turn at this moment: looking for work, or parked. A worker
    /// publishes its counters as it runs out of work, so once every worker is idle the
    /// counters above hold every turn run so far. Approximate while workers change state
    /// (one moving between looking and parking may be counted twice): read it twice.
    pub idle_workers: usize,
    /// Actors waiting in the pool's global queue.
    pub injected_waiting: usize,
    /// Workers taking work at this moment: fewer than `workers` while the pool runs narrowed
    /// (`SystemBuilder::narrowing`).
    pub width: usize,
    /// Times the pool's width changed (each trial of another width counts, and each return).
    pub width_changes: u64,
}
