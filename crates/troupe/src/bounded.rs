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
//! The admission count and a "senders are waiting" flag share one atomic word (`state`: the
//! count below [`WAITERS`], the flag in it), so the two sides of the wake-up need no fence:
//! - a sender that found the mailbox full pushes its waker under the `waiters` lock and, still
//!   holding it, sets the flag with a read-modify-write that also returns the count;
//! - the actor counts a message out with a read-modify-write that also returns the flag; if it
//!   was set, it takes the lock, clears the flag and takes the wakers.
//!
//! Read-modify-writes of one word are totally ordered: either the actor's comes after the
//! sender's (it sees the flag, and the lock hands it the waker pushed before the flag was set),
//! or before (the sender's returns the lower count, sees the room, and retries rather than
//! waits). The flag is set and cleared only under the lock, so a registration cannot slip
//! between a take and a clear and be hidden by it. (An earlier version kept the flag in its own
//! atomic with `SeqCst` accesses and cleared it after unlocking; a sender registering in that
//! gap waited for ever. The loom model below checks this protocol.)

use std::task::Waker;

use crate::loom::{AtomicU64, AtomicUsize, Mutex, MutexGuard, Ordering};

/// The flag bit of `Bound::state`: senders wait for room (their wakers are in `waiters`).
const WAITERS: usize = 1 << (usize::BITS - 1);

/// What a full bounded mailbox does with one more message.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::{Overflow, SpawnOptions};
/// let system = System::new();
/// // Keep only the freshest 100 readings when the consumer falls behind.
/// let latest = system.spawn_with(Counter(0), SpawnOptions::new().bounded(100, Overflow::DropOldest));
/// for _ in 0..10_000 {
///     latest.tell(Add(1)).unwrap(); // never refused
/// }
/// // An ask is subject to the policy too: let the backlog drain first.
/// while latest.mailbox_len() > 0 { std::thread::yield_now() }
/// let kept = latest.ask(Get).wait().unwrap();
/// assert_eq!(kept + latest.metrics().dropped, 10_000); // each dropped message is counted
/// system.shutdown();
/// ```
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
    /// Messages admitted and not yet taken by the actor, plus the [`WAITERS`] flag.
    state: AtomicUsize,
    /// Oldest messages the actor must drop before handling the next one (`DropOldest`).
    to_drop: AtomicUsize,
    pub(crate) rejected: AtomicU64,
    pub(crate) dropped: AtomicU64,
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
            state: AtomicUsize::new(0),
            to_drop: AtomicUsize::new(0),
            rejected: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// Counts one message in, or decides what to do with it. A refusal is counted unless the
    /// sender will wait and retry (`send().await`).
    pub(crate) fn admit(&self, count_refusal: bool) -> Admit {
        let before = self.state.fetch_add(1, Ordering::AcqRel) & !WAITERS;
        if before < self.capacity {
            return Admit::Yes;
        }
        match self.overflow {
            Overflow::Fail => {
                self.state.fetch_sub(1, Ordering::AcqRel);
                if count_refusal {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                }
                Admit::Full
            }
            Overflow::DropNewest => {
                self.state.fetch_sub(1, Ordering::AcqRel);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
            Overflow::DropOldest if before < 2 * self.capacity => {
                self.to_drop.fetch_add(1, Ordering::AcqRel);
                Admit::Yes
            }
            Overflow::DropOldest => {
                self.state.fetch_sub(1, Ordering::AcqRel);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Admit::DropIt
            }
        }
    }

    /// The actor took `n` messages (or a send was undone): room for `n` more.
    /// Counts one message in whatever the room: the runtime's own (a drain's mark, a pipe's
    /// result), which the turn counts out like any other.
    pub(crate) fn admit_anyway(&self) {
        self.state.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn release(&self, n: usize) {
        // AcqRel: pairs with the registration's `fetch_or` (see the module note).
        if self.state.fetch_sub(n, Ordering::AcqRel) & WAITERS != 0 {
            let waiters = {
                let mut waiters = self.lock();
                // Cleared under the lock that registrations hold while setting it.
                self.state.fetch_and(!WAITERS, Ordering::AcqRel);
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
        let mut waiters = self.lock();
        if !waiters.iter().any(|w| w.will_wake(waker)) {
            waiters.push(waker.clone());
        }
        // Set while holding the lock; returns the count as of now (see the module note).
        let count = self.state.fetch_or(WAITERS, Ordering::AcqRel) & !WAITERS;
        drop(waiters);
        count < self.capacity
    }

    /// Messages waiting (admitted, not yet taken).
    pub(crate) fn len(&self) -> usize {
        self.state.load(Ordering::Relaxed) & !WAITERS
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
    use loom::sync::Notify;
    use std::task::Wake;

    /// Wakes a waiting loom thread. (A `Notify` rather than park/unpark: loom treats an unpark
    /// as waking a thread blocked on a mutex too, which a real thread is not.)
    struct Wakeup(Arc<Notify>);
    impl Wake for Wakeup {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.notify();
        }
    }

    /// A sender that waits for room as `Addr::send` does, until it has sent `n` messages
    /// (counted into `queued`, the mailbox the actor reads, whose arrivals `actor` hears of).
    fn send_waiting(bound: &Bound, queued: &AtomicUsize, actor: &Notify, n: usize) {
        let room = Arc::new(Notify::new());
        let waker = Waker::from(std::sync::Arc::new(Wakeup(room.clone())));
        let mut sent = 0;
        while sent < n {
            match bound.admit(false) {
                Admit::Yes => {
                    queued.fetch_add(1, Ordering::SeqCst);
                    actor.notify();
                    sent += 1;
                }
                Admit::Full => {
                    if !bound.wait_for_room(&waker) {
                        room.wait();
                    }
                }
                Admit::DropIt => unreachable!("overflow policy Fail"),
            }
        }
    }

    /// Senders racing for one slot, each sending `PER` messages.
    const SENDERS: usize = 2;
    const PER: usize = 2;

    #[test]
    fn loom_bounded_wakes_every_waiting_sender() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(2);
        }
        builder.check(|| {
            let actor = Arc::new(Notify::new());
            let bound = Arc::new(Bound::new(1, Overflow::Fail));
            let queued = Arc::new(AtomicUsize::new(0));
            assert!(
                matches!(bound.admit(false), Admit::Yes),
                "the mailbox is full"
            );
            queued.fetch_add(1, Ordering::SeqCst);
            let senders: Vec<_> = (0..SENDERS)
                .map(|_| {
                    let (bound, queued, actor) = (bound.clone(), queued.clone(), actor.clone());
                    thread::spawn(move || send_waiting(&bound, &queued, &actor, PER))
                })
                .collect();
            // The actor takes the messages as they come, one at a time.
            let mut taken = 0;
            while taken < SENDERS * PER + 1 {
                if queued.load(Ordering::SeqCst) > 0 {
                    queued.fetch_sub(1, Ordering::SeqCst);
                    bound.release(1);
                    taken += 1;
                } else {
                    // Woken by the next sender that queues.
                    actor.wait();
                }
            }
            for sender in senders {
                sender.join().unwrap();
            }
        });
    }
}
