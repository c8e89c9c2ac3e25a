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

use std::cell::RefCell;
use std::sync::Arc;

use crossbeam_deque::{Stealer, Worker as LocalQueue};

use crate::loom::{AtomicBool, AtomicUsize, Mutex, Ordering};
use crate::raw::Runnable;

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
    pub(super) fn new() -> Arc<Self> {
        let queues: Vec<LocalQueue<Runnable>> =
            (0..QUEUES).map(|_| LocalQueue::new_fifo()).collect();
        Arc::new(Self {
            stealers: queues.iter().map(LocalQueue::stealer).collect(),
            free: queues.into_iter().map(|q| Mutex::new(Some(q))).collect(),
            claimed: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
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

    /// The pool stopped: leases of it are dropped when their thread next leases elsewhere.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}
