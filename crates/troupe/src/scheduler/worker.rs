//! A worker thread: takes runnable actors from its LIFO slot, its local queue, the pool's
//! injector, or other workers, and runs one turn of each.
//!
//! # Order of looking for work
//! 1. Every [`GLOBAL_INTERVAL`] ticks, the injector and the outside threads' queues first, so
//!    actors scheduled from outside are not starved by a busy local queue.
//! 2. The run-next position (LIFO slot): the first actor the last turn made runnable (with the
//!    message handed to it, if it was idle; see `raw/run_next.rs`). Runs of LIFO turns are
//!    unbounded while nothing else waits; after [`LIFO_STREAK`] in a row, the oldest actor of
//!    the local queue goes first, and the LIFO actor waits in its position for one tick.
//! 3. The local queue (front).
//! 4. A batch from the injector, or from an outside thread's queue (`external.rs`).
//! 5. A batch stolen from another worker, starting at a rotating victim.
//!
//! # Panics
//! A handler's panic never reaches the worker: `Runnable::run` catches it at the turn boundary,
//! records the failure, and gives the right to run back (`Ran::Yield`), so the actor runs
//! again and its next turn reports the failure. The worker thread never dies.
//!
//! # Shutdown
//! The pool sets `shutdown` and wakes every worker; a worker exits when it finds no work and
//! sees the flag. The system stops all actors before it stops the pools, so no runnable actor
//! is left behind.

use std::cell::Cell;
use std::ptr;
use std::sync::Arc;

use crossbeam_deque::{Steal, Stealer, Worker as LocalQueue};
use crossbeam_utils::sync::Parker;

use super::idle::Park;
use super::PoolShared;
use crate::give_way;
use crate::loom::Ordering;
use crate::raw::{self, Executor, HandedOff, Ran, RunNext, Runnable};
use crate::role::{self, Role};

/// Ticks between looks at the injector ahead of local work (as async-executor and tokio do).
const GLOBAL_INTERVAL: u32 = 61;
/// How long a worker parks when the wake-up handshake's barrier was refused (never seen:
/// the kernel refuses it only to a process that did not register): it looks again then.
const REFUSED_BARRIER_NAP: std::time::Duration = std::time::Duration::from_millis(1);

/// LIFO turns in a row after which waiting work elsewhere takes precedence.
const LIFO_STREAK: u32 = 64;
/// Rounds of stealing before a worker with nothing to do parks: the first half after short
/// spins, the rest after a yield each (ended early by a yield that lost the core, `give_way`).
const SEARCH_ROUNDS: u32 = 16;

/// A batch from `queue` into `local`, and one actor to run now.
fn steal_from(queue: &Stealer<Runnable>, local: &LocalQueue<Runnable>) -> Option<Runnable> {
    loop {
        match queue.steal_batch_and_pop(local) {
            Steal::Success(runnable) => return Some(runnable),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// What the current thread knows about the worker it is, if any.
pub(super) struct Local {
    pool: *const PoolShared,
    /// This worker's index in the pool (workers `0..width` take work, `narrow.rs`).
    pub(super) index: usize,
    pub(super) queue: LocalQueue<Runnable>,
    pub(super) run_next: RunNext,
}

thread_local! {
    static CURRENT: Cell<*const Local> = const { Cell::new(ptr::null()) };
}

/// The calling thread's worker, if it is one of `pool`'s.
#[inline]
pub(super) fn local_of(pool: &PoolShared) -> Option<&Local> {
    let local = CURRENT.with(|current| current.get());
    if local.is_null() {
        return None;
    }
    // SAFETY: CURRENT is set only by `run` below, to a `Local` that lives on that worker's stack
    // until `run` returns (and clears CURRENT first); this is that thread. The reference is
    // tied to `pool`, which the caller holds for the length of its call on this thread, and
    // `Local` is neither `Send` nor `Sync` (its run-next position), so it cannot leave it.
    let local = unsafe { &*local };
    ptr::eq(local.pool, pool).then_some(local)
}

/// The body of a worker thread.
pub(super) fn run(
    shared: Arc<PoolShared>,
    executor: Arc<Executor>,
    index: usize,
    queue: LocalQueue<Runnable>,
    parker: Parker,
) {
    let local = Local {
        pool: Arc::as_ptr(&shared),
        index,
        queue,
        run_next: RunNext::counting(shared.handled[index].clone()),
    };
    let _role = role::enter(Role::Worker {
        may_block: shared.may_block,
    });
    CURRENT.with(|c| c.set(&local));
    // Hand-offs to this pool's actors land in this worker's run-next position (a pool for
    // blocking code has none: what it schedules must stay stealable).
    let _run_next = (!shared.may_block).then(|| raw::enter_run_next(&executor, &local.run_next));
    let mut worker = WorkerLoop {
        shared: &shared,
        local: &local,
        index,
        parker,
        until_global: GLOBAL_INTERVAL,
        lifo_streak: 0,
        outside_start: 0,
        searching: true,
        turns: 0,
        steals: 0,
        parks: 0,
    };
    worker.run();
    worker.publish_counters();
    CURRENT.with(|c| c.set(ptr::null()));
}

struct WorkerLoop<'a> {
    shared: &'a PoolShared,
    local: &'a Local,
    index: usize,
    parker: Parker,
    /// Ticks left until the injector is looked at first.
    until_global: u32,
    lifo_streak: u32,
    /// The outside thread's queue looked at last (see `steal_outside`).
    outside_start: usize,
    /// Counted in `Idle::num_searching`.
    searching: bool,
    /// Counters kept locally and published now and then (see `publish_counters`).
    turns: u64,
    steals: u64,
    parks: u64,
}

/// An actor to run, and the message handed to it if any.
type Task<'a> = (Runnable, Option<HandedOff<'a>>);

impl<'a> WorkerLoop<'a> {
    fn run(&mut self) {
        loop {
            if self.index >= self.shared.width.load(Ordering::Relaxed) && !self.step_aside() {
                return;
            }
            let next = self
                .next_local()
                .or_else(|| self.find_elsewhere().map(|runnable| (runnable, None)));
            match next {
                Some(task) => {
                    if self.searching {
                        self.searching = false;
                        if self.shared.idle.stop_searching() && self.more_work_visible() {
                            self.shared.idle.notify_ordered();
                        }
                    }
                    self.run_turn(task);
                }
                None => {
                    if !self.search_then_park() {
                        return;
                    }
                }
            }
        }
    }

    #[inline]
    fn run_turn(&mut self, (runnable, handoff): Task<'a>) {
        let ran = if self.shared.may_block {
            // Handlers here may block: a wait for the running actor's own reply is refused.
            let _running = role::run_turn_of(runnable.id());
            runnable.run(self.shared.throughput, handoff)
        } else {
            runnable.run(self.shared.throughput, handoff)
        };
        self.turns += 1;
        if self.turns.is_multiple_of(1024) {
            self.publish_counters();
        }
        if let Ran::Yield(again) = ran {
            // An actor that catches up waits in the run-next position, if it is free: senders
            // on this worker lend it turns only there. In the local queue it would wait behind
            // whatever runs next, however long that sends to it (on a narrowed pool nobody
            // else takes it from there). The LIFO streak goes on counting, so after
            // `LIFO_STREAK` such turns the local queue goes first.
            let again = if again.catches_up() {
                match self.local.run_next.put(again) {
                    Ok(()) => return,
                    Err(again) => again,
                }
            } else {
                again
            };
            self.lifo_streak = 0;
            self.local.queue.push(again);
            // Only wake a helper if this worker now has more than it can run next.
            if self.local.queue.len() > 1 {
                self.shared.idle.notify_one();
            }
        }
    }

    /// Work this worker already holds: the run-next position or its local queue (or,
    /// periodically, the injector first).
    #[inline]
    fn next_local(&mut self) -> Option<Task<'a>> {
        self.until_global -= 1;
        if self.until_global == 0 {
            self.until_global = GLOBAL_INTERVAL;
            if let Some(runnable) = self.steal_outside() {
                return Some((runnable, None));
            }
        }
        let local: &'a Local = self.local;
        if local.run_next.is_occupied() {
            if self.lifo_streak < LIFO_STREAK {
                self.lifo_streak += 1;
                return local.run_next.take();
            }
            self.lifo_streak = 0;
            // Others are waiting: run the oldest local one first; the LIFO actor (and any
            // message handed to it) stays in its position for the next tick.
            if let Some(runnable) = local.queue.pop() {
                return Some((runnable, None));
            }
            return local.run_next.take();
        }
        self.lifo_streak = 0;
        local.queue.pop().map(|runnable| (runnable, None))
    }

    /// What was scheduled from outside the pool: the injector, then the outside threads' own
    /// queues (a batch from one of them).
    fn steal_outside(&mut self) -> Option<Runnable> {
        if let Some(runnable) = self
            .shared
            .injector
            .take_batch(&self.local.queue, self.shared.stealers.len())
        {
            return Some(runnable);
        }
        let outside = self.shared.external.stealers();
        let n = outside.len();
        // Start after the queue looked at last, so no outside thread's queue waits behind
        // another's.
        for _ in 0..n {
            self.outside_start = (self.outside_start + 1) % n;
            if let Some(runnable) = steal_from(&outside[self.outside_start], &self.local.queue) {
                return Some(runnable);
            }
        }
        None
    }

    /// What was scheduled from outside, then other workers' queues.
    fn find_elsewhere(&mut self) -> Option<Runnable> {
        if let Some(runnable) = self.steal_outside() {
            return Some(runnable);
        }
        let stealers = &self.shared.stealers;
        let n = stealers.len();
        let start = (self.index + self.until_global as usize) % n;
        for i in 0..n {
            let victim = (start + i) % n;
            if victim == self.index {
                continue;
            }
            if let Some(runnable) = steal_from(&stealers[victim], &self.local.queue) {
                self.steals += 1;
                return Some(runnable);
            }
        }
        None
    }

    /// The pool narrowed past this worker (`narrow.rs`): hands back what it holds and parks
    /// until the pool widens again. Returns false when the pool shuts down.
    #[cold]
    fn step_aside(&mut self) -> bool {
        let local = self.local;
        // Nothing new lands in the run-next position; what waits there (perhaps with a
        // handed-off message, which cannot go to a queue) runs now, and the actors its turn
        // wakes go to the local queue.
        local.run_next.set_closed(true);
        while let Some(task) = local.run_next.take() {
            self.run_turn(task);
        }
        while let Some(runnable) = local.queue.pop() {
            self.shared.injector.push(runnable);
        }
        self.shared.idle.step_aside(self.searching);
        self.searching = false;
        // A working worker may be parked: it takes what was handed back from the injector.
        // Even with nothing handed back: a notifier may have left work to this worker as a
        // searcher, which it no longer is; `notify_ordered` after the count fell wakes a
        // sleeper for it (the read-modify-write pairing of `idle.rs`).
        self.shared.idle.notify_ordered();
        self.publish_counters();
        let back = loop {
            if self.shared.shutdown.load(Ordering::SeqCst) {
                break false;
            }
            if self.index < self.shared.width.load(Ordering::SeqCst) {
                break true;
            }
            // The monitor nudges this worker when the pool widens (and shutdown wakes all).
            self.parker.park();
        };
        local.run_next.set_closed(false);
        self.shared.idle.step_back();
        self.searching = true;
        back
    }

    /// Publishes this worker's counters with plain stores (no read-modify-write on the hot
    /// path): every 1024 turns, before parking, and on exit.
    fn publish_counters(&self) {
        let counters = &self.shared.counters[self.index];
        counters.turns.store(self.turns, Ordering::Relaxed);
        counters.steals.store(self.steals, Ordering::Relaxed);
        counters.parks.store(self.parks, Ordering::Relaxed);
        counters
            .lent
            .store(self.local.run_next.lent_turns(), Ordering::Relaxed);
    }

    fn more_work_visible(&self) -> bool {
        !self.local.queue.is_empty() || self.outside_work_visible()
    }

    fn outside_work_visible(&self) -> bool {
        !self.shared.injector.is_empty()
            || self
                .shared
                .external
                .stealers()
                .iter()
                .any(|s| !s.is_empty())
    }

    fn any_work_visible(&self) -> bool {
        self.outside_work_visible() || self.shared.stealers.iter().any(|s| !s.is_empty())
    }

    /// Searches briefly, then parks until woken. Returns false when the pool shuts down.
    #[cold]
    fn search_then_park(&mut self) -> bool {
        if !self.searching {
            self.searching = true;
            // Out of work: published before it counts as searching, so a reader that sees
            // every worker idle (`PoolMetrics::idle_workers`) reads every turn they ran.
            self.publish_counters();
            // Counted as searching from here; undone by `give_up_searching` or `stop_searching`.
            self.shared.idle.start_searching();
        }
        for round in 0..SEARCH_ROUNDS {
            if self.any_work_visible() {
                return true;
            }
            if round < SEARCH_ROUNDS / 2 {
                for _ in 0..(1 << round.min(6)) {
                    std::hint::spin_loop();
                }
            } else if !give_way::yield_now() {
                // Beside busy threads a yield costs a time slice: park, and be woken by the
                // next work at once (see `give_way`).
                break;
            }
        }
        if self.shared.shutdown.load(Ordering::SeqCst) {
            return false;
        }

        self.searching = false;
        self.shared.idle.give_up_searching();
        let park = self.shared.idle.register_sleeper(self.index);
        // Look once more after registering: pairs with the notifier's fence (see idle.rs).
        if !self.any_work_visible() && !self.shared.shutdown.load(Ordering::SeqCst) {
            self.parks += 1;
            self.publish_counters();
            match park {
                Park::ForGood => self.parker.park(),
                Park::Briefly => self.parker.park_timeout(REFUSED_BARRIER_NAP),
            }
        }
        self.shared.idle.wake_up(self.index);
        self.searching = true;
        !self.shared.shutdown.load(Ordering::SeqCst) || self.any_work_visible()
    }
}
