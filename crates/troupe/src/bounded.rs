//! Bounded mailboxes: a capacity per actor and what a full mailbox does.
//!
//! The mailbox queue itself stays the lock-free unbounded one; a bounded actor adds an admission
//! counter in front of it. A sender first counts itself in (`admit`); the actor's turn counts
//! each message out as it takes it (`release`). What happens when the count is at capacity is
//! the [`Overflow`] policy:
//!
//! - [`Overflow::Fail`]: `tell` returns [`SendError::Full`](crate::SendError::Full) with the
//!   message; `send(..).await` waits for room instead.
//! - [`Overflow::DropNewest`]: the new message is dropped (its destructor runs) and counted.
//! - [`Overflow::DropOldest`]: the new message is queued and the oldest waiting one is dropped
//!   when the actor next takes a message, and counted. So that memory stays bounded even while
//!   the actor is busy in a long handler, at twice the capacity the newest are dropped instead.
//!
//! Every refusal and drop is counted exactly, and visible in the actor's metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::Waker;

/// What a full bounded mailbox does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Refuse it: `tell` fails with `SendError::Full` (the message comes back); `send().await`
    /// waits for room.
    #[default]
    Fail,
    /// Drop the new message (counted).
    DropNewest,
    /// Keep the new message and drop the oldest waiting one (counted).
    DropOldest,
}

/// The admission counter of a bounded mailbox.
pub(crate) struct Bound {
    pub(crate) capacity: usize,
    pub(crate) overflow: Overflow,
    /// Messages admitted and not yet taken by the actor.
    len: AtomicUsize,
    /// Oldest messages the actor must drop before handling the next one (`DropOldest`).
    to_drop: AtomicUsize,
    pub(crate) rejected: AtomicU64,
    pub(crate) dropped: AtomicU64,
    has_waiters: AtomicBool,
    waiters: Mutex<Vec<Waker>>,
}

/// What `admit` decided.
pub(crate) enum Admit {
    /// Queue it.
    Yes,
    /// Refuse it (`Overflow::Fail`).
    Full,
    /// Drop it, already counted (`Overflow::DropNewest`, or `DropOldest` past twice capacity).
    DropIt,
}

impl Bound {
    pub(crate) fn new(capacity: usize, overflow: Overflow) -> Self {
        Self {
            capacity: capacity.max(1),
            overflow,
            len: AtomicUsize::new(0),
            to_drop: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            has_waiters: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// Counts one message in, or decides what to do with it. A refusal is counted unless the
    /// sender will wait and retry (`send().await`).
    pub(crate) fn admit(&self, count_refusal: bool) -> Admit {
        let before = self.len.fetch_add(1, Ordering::AcqRel);
        if before < self.capacity {
            return Admit::Yes;
        }
        match self.overflow {
            Overflow::Fail => {
                self.len.fetch_sub(1, Ordering::AcqRel);
                if count_refusal {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                }
                Admit::Full
            }
            Overflow::DropNewest => {
                self.len.fetch_sub(1, Ordering::AcqRel);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
            Overflow::DropOldest if before < 2 * self.capacity => {
                self.to_drop.fetch_add(1, Ordering::AcqRel);
                Admit::Yes
            }
            Overflow::DropOldest => {
                self.len.fetch_sub(1, Ordering::AcqRel);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
        }
    }

    /// The actor took `n` messages (or a send was undone): room for `n` more.
    pub(crate) fn release(&self, n: usize) {
        self.len.fetch_sub(n, Ordering::AcqRel);
        // SeqCst pairs with the one in `wait_for_room`: either the waiter sees the room we made
        // or we see its registration.
        if self.has_waiters.load(Ordering::SeqCst) {
            let waiters = std::mem::take(&mut *self.lock());
            self.has_waiters.store(false, Ordering::SeqCst);
            for waker in waiters {
                waker.wake();
            }
        }
    }

    /// True if the message just taken is one of the oldest to drop (`DropOldest`); counts it.
    pub(crate) fn take_drop_oldest(&self) -> bool {
        if self.overflow != Overflow::DropOldest || self.to_drop.load(Ordering::Acquire) == 0 {
            return false;
        }
        let taken = self
            .to_drop
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if taken {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Registers `waker` to be woken when room is made. Returns true if there is room now
    /// (the caller should try again rather than wait).
    pub(crate) fn wait_for_room(&self, waker: &Waker) -> bool {
        {
            let mut waiters = self.lock();
            if !waiters.iter().any(|w| w.will_wake(waker)) {
                waiters.push(waker.clone());
            }
        }
        self.has_waiters.store(true, Ordering::SeqCst);
        self.len.load(Ordering::SeqCst) < self.capacity
    }

    /// Messages waiting (admitted, not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}
