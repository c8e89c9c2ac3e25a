//! Run queues for threads outside the pool: a plain thread, a tokio worker, a timer, another
//! pool's worker. Each such thread that schedules actors onto this pool gets one of a few
//! queues of its own, as a worker has: the thread pushes to the back without a lock or a
//! read-modify-write, and the pool's workers steal batches from the front.
//!
//! Why: a thread handing work to many actors (`troupe-bench fanout`) used to take the
//! injector's mutex for every actor it woke, and the workers took the same mutex to drain it;
//! `perf` put `Injector::push` at 30 % of the sending thread's time. A queue per sending
//! thread has a single producer, so the push is a store.
//!
//! # The queues
//! The pool makes [`QUEUES`] of them up front, each a crossbeam-deque FIFO `Worker` (the
//! producer's end, move-only) and its `Stealer`. A thread *claims* a queue the first time it
//! schedules onto the pool: it takes the producer's end out of the slot, and keeps it in a
//! thread-local lease until the thread ends, when the lease puts the end back in the slot.
//! What is still queued stays visible to the workers throughout (the stealer never moves),
//! so a thread may end with actors queued. When every queue is leased, a thread uses the
//! injector, as every outside thread did before.
//!
//! Workers look at queues `0..claimed` only: `claimed` is the highest slot ever leased plus
//! one, raised before the lessee's first push.
//!
//! # Waking
//! Unchanged from the injector: the pusher calls `Idle::notify_one` after its push, and a
//! worker's last look before parking covers these queues (`PoolShared::any_work_visible`), so
//! the argument of `README.md` holds with "pushed to a queue" in place of "pushed to the
//! injector".
//!
//! # Identity
//! A lease names its pool by the `Arc` of the pool's [`External`]: the lease holds that `Arc`,
//! so no other pool's can live at the same address while the lease exists.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::{Stealer, Worker as LocalQueue};

use super::counter;
use crate::id::ActorId;
use crate::loom::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Mutex, Ordering};
use crate::raw::{self, Ran, RunNext, Runnable};
use crate::role::{self, Role, Waiter};
use crate::scheduler::TasksHelp;

/// Queues per pool for outside threads (more sending threads than this share the injector).
pub(super) const QUEUES: usize = 8;

/// A pool's queues for outside threads.
pub(super) struct External {
    /// The consumers' ends, which never move.
    stealers: Box<[Stealer<Runnable>]>,
    /// The producers' ends while no thread holds them.
    free: Box<[Mutex<Option<LocalQueue<Runnable>>>]>,
    /// Slots ever leased: workers look at `0..claimed`.
    claimed: AtomicUsize,
    /// Set when the pool stops: leases of a stopped pool are dropped on the next miss.
    closed: AtomicBool,
    /// The pool's budget of messages per turn, for turns a waiting thread runs (`help_until`).
    throughput: usize,
    /// Waiting threads may run its actors (not on a pool for blocking code, nor where the
    /// system's builder said no: `SystemBuilder::waiters_help`).
    helped_by_waiters: bool,
    /// Whether tasks awaiting a reply may run its actors too (`SystemBuilder::tasks_help`): a
    /// [`TasksHelp`] as `u8`, which goes from `WhileShort` to `Never` for good once turns run
    /// by a task held its thread for long ([`LONG_HELP`]).
    helped_by_tasks: AtomicU8,
    /// The async runtime the pool's handlers run in, entered for turns a waiting thread runs.
    io: Option<tokio::runtime::Handle>,
    /// Turns run by waiting threads rather than by the pool's workers.
    helped: AtomicU64,
    /// When the pool began, by the clock and by [`counter::read`] (to turn a count into time).
    began: (Instant, u64),
}

/// A thread's claim on one pool's queues: the producer's end of one of them, or none when
/// all were leased when the thread first scheduled onto the pool (it uses the injector).
struct Lease {
    external: Arc<External>,
    queue: Option<(usize, LocalQueue<Runnable>)>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Give the producer's end back: what is queued stays where the workers look.
        if let Some((index, queue)) = self.queue.take() {
            let mut free = self.external.free[index]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            *free = Some(queue);
        }
    }
}

thread_local! {
    /// The calling thread's leases, one per pool it has scheduled onto.
    static LEASES: RefCell<Vec<Lease>> = const { RefCell::new(Vec::new()) };
}

impl External {
    pub(super) fn new(
        throughput: usize,
        helped_by_waiters: bool,
        helped_by_tasks: TasksHelp,
        io: Option<tokio::runtime::Handle>,
    ) -> Arc<Self> {
        let queues: Vec<LocalQueue<Runnable>> =
            (0..QUEUES).map(|_| LocalQueue::new_fifo()).collect();
        Arc::new(Self {
            stealers: queues.iter().map(LocalQueue::stealer).collect(),
            free: queues.into_iter().map(|q| Mutex::new(Some(q))).collect(),
            claimed: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            throughput,
            helped_by_waiters,
            helped_by_tasks: AtomicU8::new(helped_by_tasks as u8),
            io,
            helped: AtomicU64::new(0),
            began: (Instant::now(), counter::read()),
        })
    }

    /// Pushes `runnable` to the calling thread's queue of this pool, leasing one first if
    /// needed. Gives it back when the thread holds none (all were leased, or the thread is
    /// ending): the caller then uses the injector.
    #[inline]
    pub(super) fn push(self: &Arc<Self>, runnable: Runnable) -> Result<(), Runnable> {
        let mut runnable = Some(runnable);
        let pushed = LEASES.try_with(|leases| {
            // Pushing runs no user code, so the borrow cannot be taken already; if it ever
            // were, the injector is the answer, not a panic.
            let Ok(mut leases) = leases.try_borrow_mut() else {
                return false;
            };
            let lease = match leases.iter().position(|l| Arc::ptr_eq(&l.external, self)) {
                Some(i) => &leases[i],
                None => {
                    leases.retain(|l| !l.external.closed.load(Ordering::Relaxed));
                    leases.push(self.lease());
                    &leases[leases.len() - 1]
                }
            };
            match &lease.queue {
                Some((_, queue)) => {
                    queue.push(runnable.take().expect("pushed once"));
                    true
                }
                None => false,
            }
        });
        match (pushed, runnable) {
            (Ok(true), None) => Ok(()),
            (_, Some(runnable)) => Err(runnable),
            (_, None) => unreachable!("a runnable is pushed only when the push is reported"),
        }
    }

    #[cold]
    fn lease(self: &Arc<Self>) -> Lease {
        role::install_help(help_until);
        let queue = self.free.iter().enumerate().find_map(|(index, free)| {
            let queue = free.try_lock().ok()?.take()?;
            // Raised before the lessee's first push (program order), which the pusher's
            // `notify_one` publishes to any worker about to park.
            self.claimed.fetch_max(index + 1, Ordering::AcqRel);
            Some((index, queue))
        });
        Lease {
            external: self.clone(),
            queue,
        }
    }

    /// The consumers' ends of the queues ever leased.
    #[inline]
    pub(super) fn stealers(&self) -> &[Stealer<Runnable>] {
        // Acquire pairs with `fetch_max` in `lease`. `claimed` never exceeds the slots.
        &self.stealers[..self.claimed.load(Ordering::Acquire)]
    }

    /// Actors waiting in these queues (a moment's reading).
    pub(super) fn len(&self) -> usize {
        self.stealers().iter().map(Stealer::len).sum()
    }

    /// Whether this kind of waiter may run the pool's actors (`SystemBuilder::waiters_help`,
    /// `SystemBuilder::tasks_help`).
    fn helped_by(&self, by: Waiter) -> bool {
        match by {
            Waiter::Thread => self.helped_by_waiters,
            Waiter::Task => self.tasks_help() != TasksHelp::Never,
        }
    }

    /// Whether tasks may run this pool's actors now (`Never` once they held their threads for
    /// long where it was `WhileShort`).
    pub(super) fn tasks_help(&self) -> TasksHelp {
        TasksHelp::from_u8(self.helped_by_tasks.load(Ordering::Relaxed))
    }

    /// Turns run by waiting threads so far.
    pub(super) fn helped(&self) -> u64 {
        self.helped.load(Ordering::Relaxed)
    }

    /// The pool stopped: leases of it are dropped when their thread next leases elsewhere.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

/// How many of the calling thread's queued actors a waiting thread looks through for the one
/// it waits for: the request was most often the last thing it scheduled, and a thread that
/// scheduled many actors (a fan-out) leaves them to the workers rather than sort its queue.
const LOOK_THROUGH: usize = 4;

/// The turn of `target`, if the calling thread scheduled it onto a running pool that waiting
/// threads may help and no worker has taken it yet, with that pool's queues. Actors taken out
/// ahead of it go back to the pool (`Runnable::schedule`: to the back of this thread's queue,
/// and a worker is woken for them).
fn take_own(target: ActorId, by: Waiter) -> Option<(Runnable, Arc<External>)> {
    for _ in 0..LOOK_THROUGH {
        let (runnable, external) = LEASES
            .try_with(|leases| {
                let leases = leases.try_borrow().ok()?;
                leases.iter().find_map(|lease| {
                    let external = &lease.external;
                    if !external.helped_by(by) || external.closed.load(Ordering::Relaxed) {
                        return None;
                    }
                    let (_, queue) = lease.queue.as_ref()?;
                    Some((queue.pop()?, external.clone()))
                })
            })
            .ok()
            .flatten()?;
        if runnable.id() == target {
            return Some((runnable, external));
        }
        runnable.schedule();
    }
    None
}

/// A plain thread that waits for a reply from `target` runs, itself, the target's turn if it
/// scheduled it and no worker has taken it yet, then what that turn wakes, until `done` holds
/// (`role::Help`); so does an async task awaiting the reply, where the system allows it
/// (`SystemBuilder::tasks_help`).
///
/// Why: the thread would otherwise park until a worker runs the actor and the reply wakes it,
/// two hand-overs between threads per round trip. On a machine whose cores are all busy each
/// hand-over waits for the OS to give the woken thread a core (tens of microseconds), so asks
/// from a thread fell from millions to tens of thousands a second. A turn run here needs no
/// hand-over: the asker computes its own reply with the time it would have spent waiting.
///
/// Turns run as a worker's would: a handler that blocks on an ask is refused the same way, a
/// panic is caught at the turn's boundary, the system's async runtime is entered, and the
/// thread has a run-next position of its own for as long as it helps, so an actor a turn wakes
/// (or one that must run again) runs next here and a catch-up actor (`SpawnOptions::catch_up`)
/// is lent turns, as on a worker. Only the target is taken from the queue: the thread would
/// wait for that turn anyway, so running it cannot hold up anything the thread would do after
/// its reply; what is left in the position when the reply comes goes back to the pool without
/// running (the position takes no hand-off, so nothing in it carries a message). Nothing of a
/// pool for blocking code (whose handlers may block for long).
fn help_until(target: ActorId, done: &dyn Fn() -> bool, by: Waiter) -> bool {
    if done() {
        return true;
    }
    let Some((runnable, external)) = take_own(target, by) else {
        return false;
    };
    // A task's runs are timed while the pool lets tasks help only while turns are short.
    let timed =
        (by == Waiter::Task && external.tasks_help() == TasksHelp::WhileShort).then(counter::read);
    run_helped(runnable, &external, done);
    if let Some(start) = timed {
        external.task_helped_for(counter::read().saturating_sub(start));
    }
    done()
}

/// A run of turns by a task longer than this holds up its thread's other tasks for longer
/// than a task should run between two awaits; twice in a row on one thread, and tasks stop
/// running the pool's actors ([`TasksHelp::WhileShort`]).
///
/// Why twice: an OS that takes the core from a thread in the middle of a short turn (a slice
/// of 1-4 ms on a machine whose cores are all busy, the very case helping is for) makes that
/// one run look long; the thread's next run starts a fresh slice, so two in a row are a
/// handler's doing. A handler that sleeps or blocks on every message holds two of a task's
/// asks, then never again.
const LONG_HELP: Duration = Duration::from_millis(1);

thread_local! {
    /// The pool of this thread's last run of turns by a task (its `External`'s address), and
    /// how many of its runs in a row, up to that one, lasted [`LONG_HELP`] or more.
    static LONG_RUNS: Cell<(usize, u8)> = const { Cell::new((0, 0)) };
}

impl External {
    /// A task's run of this pool's turns lasted `counted` ticks of [`counter::read`] (see
    /// [`LONG_HELP`]).
    fn task_helped_for(&self, counted: u64) {
        let took = if counted < counter::SURELY_SHORT {
            Duration::ZERO
        } else {
            // Rare: the counter's rate since the pool began, which needs a clock read.
            let (began, began_count) = self.began;
            let rate = counter::read().saturating_sub(began_count).max(1) as f64
                / began.elapsed().as_nanos().max(1) as f64;
            Duration::from_nanos((counted as f64 / rate) as u64)
        };
        let pool = std::ptr::from_ref(self) as usize;
        let long_runs = LONG_RUNS.try_with(|last| {
            let runs = match last.get() {
                _ if took < LONG_HELP => 0,
                (same, runs) if same == pool => runs.saturating_add(1),
                _ => 1,
            };
            last.set((pool, runs));
            runs
        });
        let stopped = long_runs.unwrap_or(0) >= 2
            && self
                .helped_by_tasks
                .compare_exchange(
                    TasksHelp::WhileShort as u8,
                    TasksHelp::Never as u8,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        if stopped {
            tracing::warn!(
                took_us = took.as_micros() as u64,
                "turns run by a task awaiting an ask held its thread for long twice in a row: \
                 tasks no longer run this pool's actors (SystemBuilder::tasks_help)"
            );
        }
    }
}

/// Runs `first`, then what its turns put in this thread's run-next position, until `done`
/// holds or the position is empty; what is left there then goes back to the pool.
fn run_helped(first: Runnable, external: &External, done: &dyn Fn() -> bool) {
    let _worker = role::enter(Role::Worker { may_block: false });
    let _io = external.io.as_ref().map(tokio::runtime::Handle::enter);
    // Held so that the position names a live pool while it is entered (a pool allocated later
    // at the same address could otherwise be taken for this one).
    let executor = first.executor().clone();
    let next = RunNext::without_hand_off();
    let mut turns = 0;
    {
        let _entered = raw::enter_run_next(&executor, &next);
        let mut runnable = first;
        loop {
            turns += 1;
            if let Ran::Yield(again) = runnable.run(external.throughput, None) {
                again.schedule();
            }
            if done() {
                break;
            }
            match next.take() {
                Some((taken, _)) => runnable = taken,
                None => break,
            }
        }
    }
    // The position is no longer entered: this goes to the pool's queues, and wakes a worker.
    if let Some((runnable, _)) = next.take() {
        runnable.schedule();
    }
    external.helped.fetch_add(turns, Ordering::Relaxed);
}
