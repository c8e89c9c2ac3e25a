//! The scheduler: pools of worker threads that run actor turns.
//!
//! A pool has one worker per thread. Each worker owns a FIFO run queue (a crossbeam-deque
//! `Worker`, which other workers steal from), and a one-slot LIFO "next" position; the pool
//! has a global injector (`injector.rs`) for actors scheduled from outside it.
//!
//! Where a newly runnable actor goes:
//! - scheduled by an actor running on a worker of the same pool: into that worker's LIFO slot if
//!   it is free, so it runs next, on the same core, with the message still in cache; if the slot
//!   is taken, to the back of the local queue (where other workers can steal it). An actor woken
//!   from idle this way takes its message with it, not through its mailbox (a hand-off);
//! - scheduled from anywhere else (a plain thread, another pool, a dedicated actor thread):
//!   into the injector, and a sleeping worker is woken;
//! - an actor whose turn used its whole budget (`throughput` messages): to the back of its
//!   worker's local queue, so others get their turn.
//!
//! Actors placed on their own thread are in [`dedicated`]; parking is in [`idle`] (see its
//! README for the protocol).

pub(crate) mod dedicated;
mod idle;
mod injector;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_deque::Stealer;
use crossbeam_utils::sync::Parker;
use crossbeam_utils::CachePadded;

use crate::cell::{Executor, RawActor};
use crate::error::BuildError;

pub(crate) use idle::Idle;
use injector::Injector;

/// State shared by the workers of one pool and by everyone who schedules onto it.
pub(crate) struct PoolShared {
    /// Keeps the `Arc`'s reference counts, which every spawn and every stop of an actor on
    /// this pool changes, off the cache line of the fields idle workers poll.
    _counts_apart: CachePadded<()>,
    injector: Injector,
    stealers: Box<[Stealer<RawActor>]>,
    idle: Idle,
    /// Messages an actor may handle in one turn before it yields.
    throughput: usize,
    shutdown: AtomicBool,
    /// One per worker, written only by that worker.
    counters: Box<[CachePadded<WorkerCounters>]>,
}

/// A worker's published counters.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    turns: AtomicU64,
    steals: AtomicU64,
    parks: AtomicU64,
}

impl PoolShared {
    /// The pool's counters (workers publish theirs every 1024 turns and before parking).
    pub(crate) fn metrics(&self, name: &str) -> crate::metrics::PoolMetrics {
        let sum = |f: fn(&WorkerCounters) -> &AtomicU64| -> u64 {
            self.counters
                .iter()
                .map(|c| f(c).load(std::sync::atomic::Ordering::Relaxed))
                .sum()
        };
        crate::metrics::PoolMetrics {
            name: name.to_owned(),
            workers: self.stealers.len(),
            turns: sum(|c| &c.turns),
            steals: sum(|c| &c.steals),
            parks: sum(|c| &c.parks),
            injected_waiting: self.injector.len(),
        }
    }

    /// Schedules onto this pool from a thread that is not one of its workers.
    fn inject(&self, actor: RawActor) {
        self.injector.push(actor);
        self.idle.notify_one();
    }
}

/// A running pool: its shared state and its threads.
pub(crate) struct Pool {
    pub(crate) shared: Arc<PoolShared>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts `workers` threads named `<name>-<i>`.
    pub(crate) fn start(name: &str, workers: usize, throughput: usize) -> Result<Self, BuildError> {
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
        let queues: Vec<_> = (0..workers)
            .map(|_| crossbeam_deque::Worker::new_fifo())
            .collect();
        let parkers: Vec<_> = (0..workers).map(|_| Parker::new()).collect();
        let shared = Arc::new(PoolShared {
            _counts_apart: CachePadded::new(()),
            injector: Injector::new(),
            stealers: queues.iter().map(|q| q.stealer()).collect(),
            idle: Idle::new(&parkers),
            throughput,
            shutdown: AtomicBool::new(false),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
        });
        let mut threads = Vec::with_capacity(workers);
        for (index, (queue, parker)) in queues.into_iter().zip(parkers).enumerate() {
            let for_worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || worker::run(for_worker, index, queue, parker));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => {
                    let pool = Pool { shared, threads };
                    pool.stop();
                    return Err(BuildError::Thread(e));
                }
            }
        }
        Ok(Pool { shared, threads })
    }

    /// Stops the workers and joins them. Actors must already have stopped.
    pub(crate) fn stop(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        self.shared
            .shutdown
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shared.idle.wake_all();
        for handle in self.threads.drain(..) {
            // A worker never panics (turns catch handler panics); if one did, there is nothing
            // better to do during shutdown than to carry on joining the rest.
            let _ = handle.join();
        }
    }

    /// Worker threads in this pool.
    pub(crate) fn size(&self) -> usize {
        self.shared.stealers.len()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop_threads();
        }
    }
}

/// The calling worker's free LIFO slot for a hand-off (see `ActorCell::push`), if any.
#[inline]
pub(crate) fn hand_off_slot(pool: &Arc<PoolShared>) -> Option<worker::HandOff> {
    worker::hand_off_slot(pool)
}

/// Makes `actor` runnable on its executor. Called only by the party that cleared the actor's
/// IDLE bit (or by the spawner, for the first turn).
#[inline]
pub(crate) fn schedule(actor: RawActor) {
    // SAFETY: whoever may schedule the actor holds a reference that keeps it alive (a sender's
    // `Addr`, the spawner, or the running turn), and the executor never changes.
    match unsafe { &actor.header().executor } {
        Executor::Pool(pool) => {
            if !worker::schedule_local(pool, actor) {
                pool.inject(actor);
            }
        }
        Executor::Thread(waker) => waker.wake(),
    }
}
