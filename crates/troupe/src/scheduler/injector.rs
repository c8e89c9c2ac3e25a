//! The pool's global queue: actors scheduled from outside the pool (a plain thread spawning or
//! sending, another pool, a timer) by a thread that holds none of the pool's outside queues
//! (`external.rs`: a pool has a few, leased to the first threads that schedule onto it) wait
//! here until a worker takes a batch of them.
//!
//! A mutex around a ring buffer, with the length mirrored in an atomic so that workers looking
//! for work, and the parking protocol's last look, can see "empty" without taking the lock.
//! The lock is held for a push, or for moving one batch into a worker's local queue: a few
//! dozen nanoseconds, so contention is short and the std mutex's spinning absorbs it.
//!
//! Why not crossbeam-deque's `Injector`: it is a list of blocks of 63 slots, and the worker
//! that takes a block's last entry frees it. The blocks are allocated by the pushing thread, so
//! with glibc's allocator every such free takes the pusher's arena lock, and a thread spawning
//! a million actors (16,000 blocks) kept waking workers blocked on that lock: the futex wakes
//! were 16 % of the spawning thread's time (`perf record --call-graph dwarf` on the spawn
//! benchmark). The ring buffer here keeps its memory, so a steady flow allocates nothing;
//! after a burst has drained, a capacity far above the usual is given back.
//!
//! # Ordering
//! `len` is written under the lock after each change. Readers load it with Acquire: a worker
//! that sees it non-zero takes the lock and finds the entries; a zero may be stale, which the
//! parking protocol covers (a pusher calls `Idle::notify_one` after its push, see
//! `idle.rs`).

use std::collections::VecDeque;

use crossbeam_deque::Worker as LocalQueue;

use crate::loom::{AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::raw::Runnable;

/// Most actors a worker moves from the injector into its local queue at once (plus the one it
/// runs), so one worker does not take everything a burst brought.
const MAX_BATCH: usize = 32;
/// After a burst, capacity above this is released once the queue is empty again.
const KEEP_CAPACITY: usize = 4096;

pub(crate) struct Injector {
    queue: Mutex<VecDeque<Runnable>>,
    /// Entries in `queue`, written under the lock (see the module note).
    len: AtomicUsize,
}

impl Injector {
    pub(crate) fn new() -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Runnable>> {
        // Every critical section is one push or one batch move: a poisoned lock is consistent.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn push(&self, runnable: Runnable) {
        let mut queue = self.lock();
        queue.push_back(runnable);
        // Release: a worker that reads this length (Acquire) and then locks sees the entry;
        // the lock orders it in any case.
        self.len.store(queue.len(), Ordering::Release);
    }

    /// Takes the oldest actor to run now and moves up to a fair share of the rest (at most
    /// [`MAX_BATCH`]) into `local`, oldest first. `workers` is the pool's size.
    pub(crate) fn take_batch(
        &self,
        local: &LocalQueue<Runnable>,
        workers: usize,
    ) -> Option<Runnable> {
        // Acquire pairs with the Release store in `push`.
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut queue = self.lock();
        let first = queue.pop_front()?;
        let share = (queue.len() / workers.max(1)).min(MAX_BATCH);
        for actor in queue.drain(..share) {
            local.push(actor);
        }
        if queue.is_empty() && queue.capacity() > KEEP_CAPACITY {
            queue.shrink_to(KEEP_CAPACITY);
        }
        self.len.store(queue.len(), Ordering::Release);
        Some(first)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}
