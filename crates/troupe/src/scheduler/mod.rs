//! The scheduler: pools of worker threads that run actor turns, and actors on threads of their
//! own. Both are executors: they implement `raw::Schedule`, the only way the layer below
//! reaches them, and they handle actors only as [`Runnable`]s (the move-only right to run one
//! turn).
//!
//! A pool has one worker per thread. Each worker owns a FIFO run queue (a crossbeam-deque
//! `Worker`, which other workers steal from), and a run-next position (its LIFO slot,
//! `raw::RunNext`); the pool has a global injector (`injector.rs`) for actors scheduled from
//! outside it.
//!
//! Where a newly runnable actor goes:
//! - scheduled by an actor running on a worker of the same pool: into that worker's run-next
//!   position if it is free, so it runs next, on the same core, with the message still in
//!   cache; if it is taken, to the back of the local queue (where other workers can steal it).
//!   An actor woken from idle this way may take its message with it, not through its mailbox
//!   (a hand-off, see `raw/cell.rs`);
//! - scheduled from anywhere else (a plain thread, another pool, an actor's own thread, a
//!   timer): into that thread's own run queue of this pool (`external.rs`; the injector when
//!   the pool's few such queues are all leased), and a sleeping worker is woken;
//! - an actor whose turn used its whole budget (`throughput` messages): to the back of its
//!   worker's local queue, so others get their turn.
//!
//! A pool meant for blocking code (`blocking`) has no run-next position: everything it
//! schedules goes to a queue other workers can steal from, so a worker blocked in a handler
//! (an `Ask::wait`, say) never holds back an actor queued behind it.
//!
//! Actors placed on their own thread are in [`dedicated`]; parking is in [`idle`] (see its
//! README for the protocol).

pub(crate) mod dedicated;
mod counter;
mod external;
mod idle;
mod injector;
mod narrow;
mod worker;

use std::any::Any;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_deque::Stealer;
use crossbeam_utils::sync::Parker;
use crossbeam_utils::CachePadded;

use crate::error::BuildError;
use crate::loom::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::raw::{self, Executor, Runnable, Schedule};

use external::External;
pub(crate) use idle::Idle;
use injector::Injector;

/// Whether an async task awaiting an ask may run the turn of its request itself, as a waiting
/// thread does (`SystemBuilder::tasks_help`; `external.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum TasksHelp {
    Never,
    Always,
    /// Until runs of turns by a task held its thread for long twice in a row
    /// (`external::LONG_HELP`); then `Never` on that pool.
    WhileShort,
}

impl TasksHelp {
    /// The value `self as u8` stored (a pool keeps it in an atomic, `External`).
    fn from_u8(value: u8) -> Self {
        match value {
            v if v == Self::Always as u8 => Self::Always,
            v if v == Self::WhileShort as u8 => Self::WhileShort,
            _ => Self::Never,
        }
    }
}

/// How a pool is set up.
#[derive(Debug, Clone)]
pub(crate) struct PoolConfig {
    /// Thread names are `<name>-<i>`.
    pub(crate) name: String,
    pub(crate) workers: usize,
    /// Messages an actor may handle in one turn before it yields.
    pub(crate) throughput: usize,
    /// For blocking code: handlers may block (`Ask::wait`), and there is no run-next position.
    pub(crate) may_block: bool,
    /// The async runtime whose context handlers run in (so they can make tokio timers and
    /// sockets directly).
    pub(crate) io: Option<tokio::runtime::Handle>,
    /// A plain thread waiting for a reply may run the turns it scheduled onto this pool
    /// itself (`external.rs`, `help_until`); never on a pool for blocking code.
    pub(crate) waiters_help: bool,
    /// So may an async task awaiting a reply (`SystemBuilder::tasks_help`).
    pub(crate) tasks_help: TasksHelp,
    /// Runs on as many workers as handle the most messages (`narrow.rs`); never for blocking
    /// code, and only with two workers or more.
    pub(crate) narrowing: bool,
}

/// State shared by the workers of one pool and by everyone who schedules onto it.
pub(crate) struct PoolShared {
    /// Keeps the `Arc`'s reference counts, which every spawn and every stop of an actor on
    /// this pool changes, off the cache line of the fields idle workers poll.
    _counts_apart: CachePadded<()>,
    injector: Injector,
    /// Run queues of the outside threads that schedule onto this pool (`external.rs`).
    external: Arc<External>,
    stealers: Box<[Stealer<Runnable>]>,
    idle: Idle,
    throughput: usize,
    may_block: bool,
    shutdown: AtomicBool,
    /// One per worker, written only by that worker.
    counters: Box<[CachePadded<WorkerCounters>]>,
    /// Times the monitor changed `width`.
    width_changes: AtomicU64,
    /// Workers that take work: `0..width` (`narrow.rs`); the others step aside. Written only
    /// by the pool's monitor, read by every worker once per turn.
    width: CachePadded<AtomicUsize>,
    /// Messages handled by each worker's turns, lent turns included (`RunNext::counting`).
    handled: Box<[Arc<CachePadded<AtomicU64>>]>,
    /// Sends from a worker set aside mid-turn that waited (`wait_aside`).
    aside_waits: AtomicU64,
}

/// A worker's published counters.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    turns: AtomicU64,
    steals: AtomicU64,
    parks: AtomicU64,
    lent: AtomicU64,
}

/// A pool's counters at one moment (published by workers every 1024 turns, when they run
/// out of work, and before they park).
pub(crate) struct PoolCounters {
    pub(crate) workers: usize,
    pub(crate) turns: u64,
    pub(crate) steals: u64,
    pub(crate) parks: u64,
    pub(crate) lent: u64,
    pub(crate) aside_waits: u64,
    pub(crate) helped: u64,
    pub(crate) tasks_help: bool,
    pub(crate) idle_workers: usize,
    pub(crate) injected_waiting: usize,
    pub(crate) width: usize,
    pub(crate) width_changes: u64,
}

impl PoolShared {
    /// The pool's counters.
    pub(crate) fn counters(&self) -> PoolCounters {
        let sum = |f: fn(&WorkerCounters) -> &AtomicU64| -> u64 {
            self.counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        PoolCounters {
            workers: self.stealers.len(),
            turns: sum(|c| &c.turns),
            steals: sum(|c| &c.steals),
            parks: sum(|c| &c.parks),
            lent: sum(|c| &c.lent),
            aside_waits: self.aside_waits.load(Ordering::Relaxed),
            helped: self.external.helped(),
            tasks_help: self.external.tasks_help() != TasksHelp::Never,
            idle_workers: self.idle.idle_workers(),
            injected_waiting: self.injector.len() + self.external.len(),
            width: self.width.load(Ordering::Relaxed),
            width_changes: self.width_changes.load(Ordering::Relaxed),
        }
    }

    /// Something waits in a queue a working worker could take it from.
    fn work_waiting(&self) -> bool {
        !self.injector.is_empty()
            || self.external.stealers().iter().any(|s| !s.is_empty())
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Sets the pool's width (`narrow.rs`) from `before`, and nudges the workers that must
    /// step aside or come back.
    fn set_width(&self, width: usize, before: usize) {
        self.width.store(width, Ordering::SeqCst);
        self.width_changes.fetch_add(1, Ordering::Relaxed);
        for index in width.min(before)..width.max(before) {
            self.idle.nudge(index);
        }
    }
}

impl Schedule for PoolShared {
    #[inline]
    fn schedule(&self, runnable: Runnable) {
        match worker::local_of(self) {
            Some(local) => {
                let runnable = if self.may_block {
                    runnable
                } else {
                    match local.run_next.put(runnable) {
                        Ok(()) => return,
                        Err(taken) => taken,
                    }
                };
                local.queue.push(runnable);
                self.idle.notify_one();
            }
            None => {
                // A waiting thread running turns it scheduled keeps the actors they wake (see
                // `external.rs`, `help_until`); anyone else queues them for the workers.
                let Err(runnable) = raw::put_run_next(runnable) else {
                    return;
                };
                if let Err(runnable) = self.external.push(runnable) {
                    self.injector.push(runnable);
                }
                self.idle.notify_one();
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn is_pool(&self) -> bool {
        true
    }

    /// A worker that the pool narrowed past while it ran a turn (`narrow.rs`) is, until the
    /// turn ends, a thread beside the workers that take work. When that turn sends to a
    /// catch-up actor that runs elsewhere and is behind, it waits: while the workers taking
    /// work keep handling messages, for at most [`ASIDE_WAIT`]; it goes on at once when they
    /// handled nothing in a look (they are idle, or stuck in a handler: the turn may be what
    /// they wait for), when the pool widens past it again, or at shutdown.
    ///
    /// Why: a worker steps aside only between turns, so a turn that sends millions of
    /// messages (a counting actor's producer) keeps the pool as wide as when it began for as
    /// long as it runs, whatever the monitor decided: a trial of two workers that took the
    /// second producer to the other worker left both producers pushing into one mailbox from
    /// two cores to the end of the run (BENCHMARKS.md, "A turn the pool narrowed past").
    /// Waiting, it sends at most one burst per wait; the actor keeps up with the sender on
    /// the working worker, and once that one is done, this turn runs on alone.
    fn wait_aside(&self) {
        let Some(local) = worker::local_of(self) else {
            return;
        };
        let width = self.width.load(Ordering::Relaxed);
        if local.index < width {
            return;
        }
        self.aside_waits.fetch_add(1, Ordering::Relaxed);
        let working = |width: usize| -> u64 {
            self.handled[..width.min(self.handled.len())]
                .iter()
                .map(|h| h.load(Ordering::Relaxed))
                .sum()
        };
        let start = std::time::Instant::now();
        let mut seen = working(width);
        loop {
            std::thread::sleep(ASIDE_LOOK);
            let width = self.width.load(Ordering::Relaxed);
            if local.index < width
                || self.shutdown.load(Ordering::Relaxed)
                || start.elapsed() >= ASIDE_WAIT
            {
                return;
            }
            let now = working(width);
            if now == seen {
                return;
            }
            seen = now;
        }
    }
}

/// The longest a send from a worker set aside mid-turn waits (`PoolShared::wait_aside`).
const ASIDE_WAIT: std::time::Duration = std::time::Duration::from_millis(1);
/// How often such a wait looks at the working workers' progress.
const ASIDE_LOOK: std::time::Duration = std::time::Duration::from_micros(100);

/// A running pool: its shared state, the handle its actors hold, and its threads.
pub(crate) struct Pool {
    pub(crate) shared: Arc<PoolShared>,
    pub(crate) executor: Arc<Executor>,
    threads: Vec<JoinHandle<()>>,
    /// The narrowing monitor's thread, and how to wake it (`narrow.rs`).
    monitor: Option<(JoinHandle<()>, crossbeam_utils::sync::Unparker)>,
}

impl Pool {
    /// Starts the pool's threads.
    pub(crate) fn start(config: &PoolConfig) -> Result<Self, BuildError> {
        let PoolConfig {
            name,
            workers,
            throughput,
            may_block,
            io,
            waiters_help,
            tasks_help,
            narrowing,
        } = config;
        let (workers, throughput) = (*workers, *throughput);
        if workers == 0 {
            return Err(BuildError::Config(format!(
                "pool `{name}` needs at least one worker"
            )));
        }
        if throughput == 0 {
            return Err(BuildError::Config(format!(
                "pool `{name}` needs a throughput of at least one message per turn"
            )));
        }
        let narrows = *narrowing && !*may_block && workers >= 2;
        let queues: Vec<_> = (0..workers)
            .map(|_| crossbeam_deque::Worker::new_fifo())
            .collect();
        let parkers: Vec<_> = (0..workers).map(|_| Parker::new()).collect();
        let shared = Arc::new(PoolShared {
            _counts_apart: CachePadded::new(()),
            injector: Injector::new(),
            external: External::new(
                throughput,
                *waiters_help && !*may_block,
                if *may_block {
                    TasksHelp::Never
                } else {
                    *tasks_help
                },
                io.clone(),
            ),
            stealers: queues.iter().map(|q| q.stealer()).collect(),
            idle: Idle::new(&parkers),
            throughput,
            may_block: *may_block,
            shutdown: AtomicBool::new(false),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
            width_changes: AtomicU64::new(0),
            // A pool that narrows starts on one worker and widens as soon as a trial shows
            // that a second handles more (the first comes after ~40 ms of work), or at once
            // if a turn holds the one worker while work waits (`narrow.rs`).
            width: CachePadded::new(AtomicUsize::new(if narrows { 1 } else { workers })),
            handled: (0..workers)
                .map(|_| Arc::new(CachePadded::new(AtomicU64::new(0))))
                .collect(),
            aside_waits: AtomicU64::new(0),
        });
        let executor = Executor::new(shared.clone());
        let mut threads = Vec::with_capacity(workers);
        for (index, (queue, parker)) in queues.into_iter().zip(parkers).enumerate() {
            let (for_worker, handle, io) = (shared.clone(), executor.clone(), io.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || {
                    let _io = io.as_ref().map(|io| io.enter());
                    worker::run(for_worker, handle, index, queue, parker)
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    let pool = Pool {
                        shared,
                        executor,
                        threads,
                        monitor: None,
                    };
                    pool.stop();
                    return Err(BuildError::Thread(e));
                }
            }
        }
        let mut pool = Pool {
            shared,
            executor,
            threads,
            monitor: None,
        };
        if narrows {
            let parker = Parker::new();
            let unparker = parker.unparker().clone();
            let shared = pool.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-monitor"))
                .spawn(move || narrow::run(shared, parker));
            match spawned {
                Ok(thread) => pool.monitor = Some((thread, unparker)),
                Err(e) => {
                    pool.stop();
                    return Err(BuildError::Thread(e));
                }
            }
        }
        Ok(pool)
    }

    /// Stops the workers and joins them. Actors must already have stopped.
    pub(crate) fn stop(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        if let Some((monitor, unparker)) = self.monitor.take() {
            unparker.unpark();
            let _ = monitor.join();
        }
        self.shared.external.close();
        self.shared.idle.wake_all();
        for handle in self.threads.drain(..) {
            // A worker never panics (turns catch handler panics); if one did, there is nothing
            // better to do during shutdown than to carry on joining the rest.
            let _ = handle.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if !self.threads.is_empty() || self.monitor.is_some() {
            self.stop_threads();
        }
    }
}
