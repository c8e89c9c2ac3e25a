//! A worker thread: takes runnable actors from its LIFO slot, its local queue, the pool's
//! injector, or other workers, and runs one turn of each.
//!
//! # Order of looking for work
//! 1. Every [`GLOBAL_INTERVAL`] ticks, the injector first, so actors scheduled from outside are
//!    not starved by a busy local queue.
//! 2. The LIFO slot: the actor the last turn made runnable. Runs of LIFO turns are unbounded
//!    while nothing else waits; after [`LIFO_STREAK`] in a row, if the local queue or the
//!    injector holds work, the LIFO actor goes to the back of the local queue instead.
//! 3. The local queue (front).
//! 4. A batch from the injector.
//! 5. A batch stolen from another worker, starting at a rotating victim.
//!
//! # Shutdown
//! The pool sets `shutdown` and wakes every worker; a worker exits when it finds no work and
//! sees the flag. The system stops all actors before it stops the pools, so no runnable actor
//! is left behind.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_deque::{Steal, Worker as LocalQueue};
use crossbeam_utils::sync::Parker;

use super::PoolShared;
use crate::cell::{RawActor, Turn};

/// Ticks between looks at the injector ahead of local work (as async-executor and tokio do).
const GLOBAL_INTERVAL: u32 = 61;
/// LIFO turns in a row after which waiting work elsewhere takes precedence.
const LIFO_STREAK: u32 = 64;
/// Rounds of stealing before a worker with nothing to do parks.
const SEARCH_ROUNDS: u32 = 16;

/// What the current thread knows about the worker it is, if any.
struct Local {
    pool: *const PoolShared,
    queue: LocalQueue<RawActor>,
    lifo: Cell<Option<RawActor>>,
}

thread_local! {
    static CURRENT: Cell<*const Local> = const { Cell::new(ptr::null()) };
}

/// If the calling thread is a worker of `pool`, puts `actor` in its LIFO slot and returns
/// true; otherwise returns false and the caller injects it.
#[inline]
pub(super) fn schedule_local(pool: &Arc<PoolShared>, actor: RawActor) -> bool {
    CURRENT.with(|current| {
        let local = current.get();
        if local.is_null() {
            return false;
        }
        // SAFETY: CURRENT is set only by `run` below, to a `Local` that lives on that worker's
        // stack until `run` returns (and clears CURRENT first); this is that thread.
        let local = unsafe { &*local };
        if local.pool != Arc::as_ptr(pool) {
            return false;
        }
        if let Some(previous) = local.lifo.replace(Some(actor)) {
            local.queue.push(previous);
            pool.idle.notify_one();
        }
        true
    })
}

/// The body of a worker thread.
pub(super) fn run(
    shared: Arc<PoolShared>,
    index: usize,
    queue: LocalQueue<RawActor>,
    parker: Parker,
) {
    let local = Local {
        pool: Arc::as_ptr(&shared),
        queue,
        lifo: Cell::new(None),
    };
    CURRENT.with(|c| c.set(&local));
    let mut worker = WorkerLoop {
        shared: &shared,
        local: &local,
        index,
        parker,
        until_global: GLOBAL_INTERVAL,
        lifo_streak: 0,
        searching: true,
        current: None,
    };
    // Panics are caught here, once for the whole loop, not around every turn: a handler's
    // panic unwinds out of `run`, the actor that was running is marked failed and queued again
    // (its next turn stops it), and the loop resumes. The worker thread never dies.
    while let Err(_panic) = catch_unwind(AssertUnwindSafe(|| worker.run())) {
        if let Some(actor) = worker.current.take() {
            // SAFETY: the panicking turn is over; this worker still holds the right to run the
            // actor, which is still scheduled (it never went idle).
            unsafe { actor.fail() };
            local.queue.push(actor);
        }
    }
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
    /// Counted in `Idle::num_searching`.
    searching: bool,
    /// The actor whose turn is running (to mark it failed if the turn panics).
    current: Option<RawActor>,
}

impl WorkerLoop<'_> {
    fn run(&mut self) {
        loop {
            let next = self.next_local().or_else(|| self.find_elsewhere());
            match next {
                Some(actor) => {
                    if self.searching {
                        self.searching = false;
                        if self.shared.idle.stop_searching() && self.more_work_visible() {
                            self.shared.idle.notify_one();
                        }
                    }
                    self.run_turn(actor);
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
    fn run_turn(&mut self, actor: RawActor) {
        self.current = Some(actor);
        // SAFETY: the actor came out of a run queue, where only the party that cleared its IDLE
        // bit (or its spawner) put it, exactly once; it is alive until its final turn.
        let turn = unsafe { actor.run(self.shared.throughput) };
        self.current = None;
        if turn == Turn::Yield {
            self.lifo_streak = 0;
            self.local.queue.push(actor);
            // Only wake a helper if this worker now has more than it can run next.
            if self.local.queue.len() > 1 {
                self.shared.idle.notify_one();
            }
        }
    }

    /// Work this worker already holds: the LIFO slot or its local queue (or, periodically,
    /// the injector first).
    #[inline]
    fn next_local(&mut self) -> Option<RawActor> {
        self.until_global -= 1;
        if self.until_global == 0 {
            self.until_global = GLOBAL_INTERVAL;
            if let Some(actor) = self.steal_injector() {
                return Some(actor);
            }
        }
        if let Some(actor) = self.local.lifo.take() {
            if self.lifo_streak < LIFO_STREAK {
                self.lifo_streak += 1;
                return Some(actor);
            }
            self.lifo_streak = 0;
            if self.local.queue.is_empty() && self.shared.injector.is_empty() {
                return Some(actor);
            }
            // Others are waiting: this one goes to the back.
            self.local.queue.push(actor);
        } else {
            self.lifo_streak = 0;
        }
        self.local.queue.pop()
    }

    fn steal_injector(&self) -> Option<RawActor> {
        loop {
            match self.shared.injector.steal_batch_and_pop(&self.local.queue) {
                Steal::Success(actor) => return Some(actor),
                Steal::Empty => return None,
                Steal::Retry => continue,
            }
        }
    }

    /// The injector, then other workers' queues.
    fn find_elsewhere(&mut self) -> Option<RawActor> {
        if let Some(actor) = self.steal_injector() {
            return Some(actor);
        }
        let stealers = &self.shared.stealers;
        let n = stealers.len();
        let start = (self.index + self.until_global as usize) % n;
        for i in 0..n {
            let victim = (start + i) % n;
            if victim == self.index {
                continue;
            }
            loop {
                match stealers[victim].steal_batch_and_pop(&self.local.queue) {
                    Steal::Success(actor) => return Some(actor),
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        None
    }

    fn more_work_visible(&self) -> bool {
        !self.local.queue.is_empty() || !self.shared.injector.is_empty()
    }

    fn any_work_visible(&self) -> bool {
        !self.shared.injector.is_empty() || self.shared.stealers.iter().any(|s| !s.is_empty())
    }

    /// Searches briefly, then parks until woken. Returns false when the pool shuts down.
    #[cold]
    fn search_then_park(&mut self) -> bool {
        if !self.searching {
            self.searching = true;
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
            } else {
                std::thread::yield_now();
            }
        }
        if self.shared.shutdown.load(Ordering::SeqCst) {
            return false;
        }

        self.searching = false;
        self.shared.idle.give_up_searching();
        self.shared.idle.register_sleeper(self.index);
        // Look once more after registering: pairs with the notifier's fence (see idle.rs).
        if !self.any_work_visible() && !self.shared.shutdown.load(Ordering::SeqCst) {
            self.parker.park();
        }
        self.shared.idle.wake_up(self.index);
        self.searching = true;
        !self.shared.shutdown.load(Ordering::SeqCst) || self.any_work_visible()
    }
}
