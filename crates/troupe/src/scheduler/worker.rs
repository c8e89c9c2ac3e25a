//! A worker thread: takes runnable actors from its LIFO slot, its local queue, the pool's
//! injector, or other workers, and runs one turn of each.
//!
//! # Order of looking for work
//! 1. Every [`GLOBAL_INTERVAL`] ticks, the injector first, so actors scheduled from outside are
//!    not starved by a busy local queue.
//! 2. The LIFO slot: the first actor the last turn made runnable (with the message handed to
//!    it, if it was idle; see `ActorCell::push`). Runs of LIFO turns are unbounded while nothing
//!    else waits; after [`LIFO_STREAK`] in a row, the oldest actor of the local queue goes
//!    first, and the LIFO task waits in its slot for one tick.
//! 3. The local queue (front).
//! 4. A batch from the injector.
//! 5. A batch stolen from another worker, starting at a rotating victim.
//!
//! # Shutdown
//! The pool sets `shutdown` and wakes every worker; a worker exits when it finds no work and
//! sees the flag. The system stops all actors before it stops the pools, so no runnable actor
//! is left behind.

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_deque::{Steal, Worker as LocalQueue};
use crossbeam_utils::sync::Parker;

use super::PoolShared;
use crate::cell::{RawActor, Turn};
use crate::envelope::RawEnvelope;

/// Ticks between looks at the injector ahead of local work (as async-executor and tokio do).
const GLOBAL_INTERVAL: u32 = 61;
/// LIFO turns in a row after which waiting work elsewhere takes precedence.
const LIFO_STREAK: u32 = 64;
/// Rounds of stealing before a worker with nothing to do parks.
const SEARCH_ROUNDS: u32 = 16;

/// An actor to run, and whether a message was handed to it (it waits in `lifo_message`).
struct Task {
    actor: RawActor,
    handoff: bool,
}

/// What the current thread knows about the worker it is, if any.
struct Local {
    pool: *const PoolShared,
    queue: LocalQueue<RawActor>,
    /// The LIFO slot: the actor to run next...
    lifo: Cell<Option<RawActor>>,
    /// ...and whether it was handed a message...
    lifo_has_message: Cell<bool>,
    /// ...which waits here until its turn takes it in place (no copies on the hot path).
    lifo_message: UnsafeCell<MaybeUninit<RawEnvelope>>,
}

impl Local {
    #[inline]
    fn take_lifo(&self) -> Option<Task> {
        let actor = self.lifo.take()?;
        Some(Task {
            actor,
            handoff: self.lifo_has_message.replace(false),
        })
    }
}

/// The calling thread's worker, if it is one of `pool`'s.
#[inline]
fn local_of(pool: &Arc<PoolShared>) -> Option<&'static Local> {
    let local = CURRENT.with(|current| current.get());
    if local.is_null() {
        return None;
    }
    // SAFETY: CURRENT is set only by `run` below, to a `Local` that lives on that worker's stack
    // until `run` returns (and clears CURRENT first); this is that thread, and the reference is
    // used only within the current call on it (never stored), so 'static does not outlive it.
    let local = unsafe { &*local };
    (local.pool == Arc::as_ptr(pool)).then_some(local)
}

thread_local! {
    static CURRENT: Cell<*const Local> = const { Cell::new(ptr::null()) };
}

/// If the calling thread is a worker of `pool`, makes `actor` runnable there: in the LIFO slot
/// if it is free (it runs next), else at the back of the local queue (stealable; a sleeping
/// worker is woken). Returns false if the caller must inject it instead.
#[inline]
pub(super) fn schedule_local(pool: &Arc<PoolShared>, actor: RawActor) -> bool {
    let Some(local) = local_of(pool) else {
        return false;
    };
    if local.lifo.get().is_none() {
        local.lifo.set(Some(actor));
    } else {
        local.queue.push(actor);
        pool.idle.notify_one();
    }
    true
}

/// The calling worker's free LIFO slot, if the caller is a worker of `pool` and the slot is free:
/// an idle actor of the pool can then be handed a message directly with its next turn.
#[inline]
pub(super) fn hand_off_slot(pool: &Arc<PoolShared>) -> Option<HandOff> {
    local_of(pool)
        .filter(|local| local.lifo.get().is_none())
        .map(|local| HandOff {
            local,
            _not_send: std::marker::PhantomData,
        })
}

/// A free LIFO slot of the current worker (see `hand_off_slot`); used at once, on this thread.
pub(crate) struct HandOff {
    local: &'static Local,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl HandOff {
    /// Puts `actor`, just woken from idle by the caller, in the slot with `message`.
    #[inline]
    pub(crate) fn give(self, actor: RawActor, message: RawEnvelope) {
        let local = self.local;
        debug_assert!(local.lifo.get().is_none(), "the slot was checked free");
        // SAFETY: the slot is free (no actor in the LIFO slot means no message waiting: a turn
        // takes its message before running any user code), and only this thread touches it.
        unsafe { (*local.lifo_message.get()).write(message) };
        local.lifo_has_message.set(true);
        local.lifo.set(Some(actor));
    }
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
        lifo_has_message: Cell::new(false),
        lifo_message: UnsafeCell::new(MaybeUninit::uninit()),
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
        turns: 0,
        steals: 0,
        parks: 0,
    };
    // Panics are caught here, once for the whole loop, not around every turn: a handler's
    // panic unwinds out of `run`, the actor that was running is marked failed and queued again
    // (its next turn stops it), and the loop resumes. The worker thread never dies.
    while let Err(panic) = catch_unwind(AssertUnwindSafe(|| worker.run())) {
        if let Some(actor) = worker.current.take() {
            // SAFETY: the panicking turn is over; this worker still holds the right to run the
            // actor, which is still scheduled (it never went idle).
            unsafe { actor.fail(&*panic) };
            local.queue.push(actor);
        }
    }
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
    /// Counted in `Idle::num_searching`.
    searching: bool,
    /// The actor whose turn is running (to mark it failed if the turn panics).
    current: Option<RawActor>,
    /// Counters kept locally and published now and then (see `publish_counters`).
    turns: u64,
    steals: u64,
    parks: u64,
}

impl WorkerLoop<'_> {
    fn run(&mut self) {
        loop {
            let next = self.next_local().or_else(|| {
                self.find_elsewhere().map(|actor| Task {
                    actor,
                    handoff: false,
                })
            });
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
    fn run_turn(&mut self, task: Task) {
        let actor = task.actor;
        self.current = Some(actor);
        let message = task
            .handoff
            .then(|| NonNull::new(self.local.lifo_message.get().cast::<RawEnvelope>()))
            .flatten();
        // SAFETY: the actor came out of a run queue, where only the party that cleared its IDLE
        // bit (or its spawner) put it, exactly once; it is alive until its final turn. A
        // hand-off message was built for this actor by `ActorCell::push`, and the turn takes it
        // out of the slot before any user code can refill it.
        let turn = unsafe { actor.run(self.shared.throughput, message) };
        self.current = None;
        self.turns += 1;
        if self.turns % 1024 == 0 {
            self.publish_counters();
        }
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
    fn next_local(&mut self) -> Option<Task> {
        let plain = |actor| Task {
            actor,
            handoff: false,
        };
        self.until_global -= 1;
        if self.until_global == 0 {
            self.until_global = GLOBAL_INTERVAL;
            if let Some(actor) = self.steal_injector() {
                return Some(plain(actor));
            }
        }
        if self.local.lifo.get().is_some() {
            if self.lifo_streak < LIFO_STREAK {
                self.lifo_streak += 1;
                return self.local.take_lifo();
            }
            self.lifo_streak = 0;
            // Others are waiting: run the oldest local one first; the LIFO task (and any
            // message handed to it) stays in its slot for the next tick.
            if let Some(actor) = self.local.queue.pop() {
                return Some(plain(actor));
            }
            return self.local.take_lifo();
        }
        self.lifo_streak = 0;
        self.local.queue.pop().map(plain)
    }

    fn steal_injector(&self) -> Option<RawActor> {
        self.shared
            .injector
            .take_batch(&self.local.queue, self.shared.stealers.len())
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
                    Steal::Success(actor) => {
                        self.steals += 1;
                        return Some(actor);
                    }
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        None
    }

    /// Publishes this worker's counters with plain stores (no read-modify-write on the hot
    /// path): every 1024 turns, before parking, and on exit.
    fn publish_counters(&self) {
        let counters = &self.shared.counters[self.index];
        counters.turns.store(self.turns, Ordering::Relaxed);
        counters.steals.store(self.steals, Ordering::Relaxed);
        counters.parks.store(self.parks, Ordering::Relaxed);
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
            self.parks += 1;
            self.publish_counters();
            self.parker.park();
        }
        self.shared.idle.wake_up(self.index);
        self.searching = true;
        !self.shared.shutdown.load(Ordering::SeqCst) || self.any_work_visible()
    }
}
