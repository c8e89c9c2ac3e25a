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
//!
//! # Waking senders that wait for room
//! A sender that found the mailbox full registers its waker under the `waiters` lock and sets
//! `has_waiters` while still holding it, then reads `len` again. The actor, after counting a
//! message out of `len`, reads `has_waiters`; if set, it takes the wakers and clears the flag
//! under the same lock. Both `len` and `has_waiters` are accessed with `SeqCst`, so either the
//! releaser sees the flag (and finds the waker under the lock, which the registration held
//! while setting it), or the sender's second read of `len` sees the room. Clearing the flag
//! outside the lock would let a registration slip between the take and the clear and be hidden
//! by it: that sender would wait for ever (the loom model below finds it).

use std::task::Waker;

use crate::loom::{AtomicBool, AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};

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
        let before = self.len.fetch_add(1, Ordering::SeqCst);
        if before < self.capacity {
            return Admit::Yes;
        }
        match self.overflow {
            Overflow::Fail => {
                self.len.fetch_sub(1, Ordering::SeqCst);
                if count_refusal {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                }
                Admit::Full
            }
            Overflow::DropNewest => {
                self.len.fetch_sub(1, Ordering::SeqCst);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
            Overflow::DropOldest if before < 2 * self.capacity => {
                self.to_drop.fetch_add(1, Ordering::AcqRel);
                Admit::Yes
            }
            Overflow::DropOldest => {
                self.len.fetch_sub(1, Ordering::SeqCst);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
        }
    }

    /// The actor took `n` messages (or a send was undone): room for `n` more.
    pub(crate) fn release(&self, n: usize) {
        // SeqCst, with the flag's load below, pairs with the registration in `wait_for_room`
        // (see the module note).
        self.len.fetch_sub(n, Ordering::SeqCst);
        if self.has_waiters.load(Ordering::SeqCst) {
            let waiters = {
                let mut waiters = self.lock();
                // Cleared under the lock that registrations hold while setting it.
                self.has_waiters.store(false, Ordering::SeqCst);
                std::mem::take(&mut *waiters)
            };
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
            // Set while holding the lock: see the module note.
            self.has_waiters.store(true, Ordering::SeqCst);
        }
        self.len.load(Ordering::SeqCst) < self.capacity
    }

    /// Messages waiting (admitted, not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Waker>> {
        // Every critical section is a push or a take: a poisoned lock is still consistent.
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Model check of the wake-up protocol in the module note: a sender finds the mailbox full,
/// registers and parks; the actor takes a message and releases. If a registration could be
/// hidden, the sender would park for ever and loom would report the deadlock. Run with
/// `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_`.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc};
    use std::task::Wake;

    /// Wakes a parked loom thread.
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }

    /// A sender that waits for room as `Addr::send` does, until it has sent `n` messages.
    fn send_waiting(bound: &Bound, n: usize) {
        let waker = Waker::from(std::sync::Arc::new(Unpark(thread::current())));
        let mut sent = 0;
        while sent < n {
            match bound.admit(false) {
                Admit::Yes => sent += 1,
                Admit::Full => {
                    if !bound.wait_for_room(&waker) {
                        thread::park();
                    }
                }
                Admit::DropIt => unreachable!("overflow policy Fail"),
            }
        }
    }

    #[test]
    fn loom_bounded_wakes_every_waiting_sender() {
        loom::model(|| {
            let bound = Arc::new(Bound::new(1, Overflow::Fail));
            assert!(
                matches!(bound.admit(false), Admit::Yes),
                "the mailbox is full"
            );
            let senders: Vec<_> = (0..2)
                .map(|_| {
                    let bound = bound.clone();
                    thread::spawn(move || send_waiting(&bound, 1))
                })
                .collect();
            // The actor takes the three messages as they come, one at a time.
            let mut taken = 0;
            while taken < 3 {
                if bound.len() > 0 {
                    bound.release(1);
                    taken += 1;
                } else {
                    thread::yield_now();
                }
            }
            for sender in senders {
                sender.join().unwrap();
            }
        });
    }
}
