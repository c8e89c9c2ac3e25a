//! A worker's run-next position (its LIFO slot): the actor it runs next, and a message handed
//! to that actor with its turn.
//!
//! The hand-off is the ring's fast path: an actor running on a worker tells an idle actor of
//! the same pool; instead of writing the mailbox, the sender wakes the actor and leaves the
//! message here, and the worker runs that actor next, delivering the message in place.
//!
//! # States
//! ```text
//!   Empty ──put(r)──────────► Plain(r) ──take──► Empty
//!   Empty ──hand_off(r, m)──► WithMessage(r) ──take──► Empty + a HandedOff (owns m)
//!   HandedOff delivered, taken or dropped ──► the message space is free again
//! ```
//! A hand-off needs the position `Empty` *and* no `HandedOff` alive: while a turn still owns
//! a handed-off message (it sits in `message` until the turn delivers it), user code run by
//! that turn cannot give another one and overwrite it. The `HandedOff` is a move-only value
//! created only by `take`; it frees the space as it hands the payload out (before any user
//! code runs), so the handler of a handed-off message may hand off again, and the ring keeps
//! its fast path.
//!
//! Everything here is used by one thread only (the worker's): `RunNext` is neither `Send` nor
//! `Sync`, and a `HandedOff` borrows it.

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

use super::cell::{Header, Runnable};
use super::envelope::RawEnvelope;
use super::Executor;

/// The calling worker's run-next position, and the executor (pool) whose actors it runs.
#[derive(Clone, Copy)]
struct Current {
    executor: *const Executor,
    next: *const RunNext,
}

thread_local! {
    static CURRENT: Cell<Current> = const {
        Cell::new(Current {
            executor: ptr::null(),
            next: ptr::null(),
        })
    };
}

/// Makes `next` the calling thread's run-next position for actors of `executor`, until the
/// guard is dropped (which the worker does before `next` goes away).
pub(crate) fn enter(executor: &Executor, next: &RunNext) -> RunNextGuard {
    CURRENT.with(|c| c.set(Current { executor, next }));
    RunNextGuard {
        _not_send: std::marker::PhantomData,
    }
}

/// Clears the calling thread's run-next position when dropped.
pub(crate) struct RunNextGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for RunNextGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            c.set(Current {
                executor: ptr::null(),
                next: ptr::null(),
            })
        });
    }
}

/// Permission to hand a message off on the calling thread, if it is a worker of `executor`
/// whose run-next position is free.
#[inline]
pub(super) fn permit_for(executor: &Executor) -> Option<HandOffPermit<'_>> {
    let current = CURRENT.with(Cell::get);
    if !ptr::eq(current.executor, executor) {
        return None;
    }
    // SAFETY: `next` was set by `enter` on this thread to a `RunNext` that outlives its guard,
    // and the guard clears it first; it is non-null since the executor matched (a null
    // executor never equals a reference). The permit is used at once on this thread (it is
    // neither `Send` nor `Sync`) while the caller's `executor` borrow lasts, within the worker's
    // loop that keeps the `RunNext` alive.
    let next = unsafe { &*current.next };
    next.hand_off_permit()
}

/// What waits in the run-next position.
enum Next {
    Empty,
    /// An actor to run next.
    Plain(Runnable),
    /// An actor to run next, and the message in `RunNext::message` given to it.
    WithMessage(Runnable),
}

/// A worker's run-next position. See the module note.
pub(crate) struct RunNext {
    next: Cell<Next>,
    /// A `HandedOff` owns `message` (taken out with its actor, not yet delivered).
    message_owned: Cell<bool>,
    /// Initialised exactly while `next` is `WithMessage` or `message_owned` is set.
    message: UnsafeCell<MaybeUninit<RawEnvelope>>,
}

impl RunNext {
    pub(crate) fn new() -> Self {
        Self {
            next: Cell::new(Next::Empty),
            message_owned: Cell::new(false),
            message: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// True if an actor waits here.
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        // SAFETY: only this thread touches the position (`RunNext` is not `Sync`), and no
        // reference into the cell is alive across this read.
        !matches!(unsafe { &*self.next.as_ptr() }, Next::Empty)
    }

    /// Puts `runnable` here to run next; gives it back if the position is taken.
    #[inline]
    pub(crate) fn put(&self, runnable: Runnable) -> Result<(), Runnable> {
        match self.next.replace(Next::Empty) {
            Next::Empty => {
                self.next.set(Next::Plain(runnable));
                Ok(())
            }
            taken => {
                self.next.set(taken);
                Err(runnable)
            }
        }
    }

    /// Takes the actor waiting here, with the message handed to it if any.
    #[inline]
    pub(crate) fn take(&self) -> Option<(Runnable, Option<HandedOff<'_>>)> {
        match self.next.replace(Next::Empty) {
            Next::Empty => None,
            Next::Plain(runnable) => Some((runnable, None)),
            Next::WithMessage(runnable) => {
                self.message_owned.set(true);
                let owner = runnable.header();
                Some((runnable, Some(HandedOff { slot: self, owner })))
            }
        }
    }

    /// Permission to hand a message off here: the position is empty and no turn owns a message.
    #[inline]
    pub(crate) fn hand_off_permit(&self) -> Option<HandOffPermit<'_>> {
        (!self.message_owned.get() && !self.is_occupied()).then_some(HandOffPermit { slot: self })
    }

    fn message_ptr(&self) -> *mut RawEnvelope {
        self.message.get().cast()
    }
}

impl Drop for RunNext {
    fn drop(&mut self) {
        // A worker exits only when its pool shuts down, after every actor has stopped, so
        // nothing can wait here; a message left behind would still be released.
        if let Next::WithMessage(_) = self.next.replace(Next::Empty) {
            // SAFETY: `WithMessage` means the message space holds a live envelope nobody owns.
            drop(unsafe { self.message_ptr().read() });
        }
    }
}

/// The right to hand one message off to the run-next position (see `RunNext::hand_off_permit`).
pub(crate) struct HandOffPermit<'a> {
    slot: &'a RunNext,
}

impl HandOffPermit<'_> {
    /// Puts `runnable` here with `message`, built for that actor's cell.
    #[inline]
    pub(super) fn give(self, runnable: Runnable, message: RawEnvelope) {
        let slot = self.slot;
        // SAFETY: the permit was issued with the position empty and no message owned, and only
        // this thread touches the slot, without user code in between: the space is free.
        unsafe { slot.message_ptr().write(message) };
        slot.next.set(Next::WithMessage(runnable));
    }
}

/// A handed-off message, owned by the turn of the actor it was given to. Move-only; it frees
/// the slot's message space when it hands the payload out, or when dropped (discarding it).
pub(crate) struct HandedOff<'a> {
    slot: &'a RunNext,
    /// The actor it was given to.
    owner: NonNull<Header>,
}

impl HandedOff<'_> {
    /// The actor this message was given to.
    pub(super) fn owner(&self) -> NonNull<Header> {
        self.owner
    }

    /// The message's place, handed to the caller with the space marked free: the caller must
    /// move the payload out (deliver, discard or read it) before any user code runs.
    pub(super) fn release(self) -> *mut RawEnvelope {
        let slot = self.slot;
        std::mem::forget(self);
        slot.message_owned.set(false);
        slot.message_ptr()
    }
}

impl Drop for HandedOff<'_> {
    fn drop(&mut self) {
        self.slot.message_owned.set(false);
        // SAFETY: this value owned the live envelope in the message space; reading it out moves
        // ownership to the local, whose drop discards the payload (after the space was freed).
        drop(unsafe { self.slot.message_ptr().read() });
    }
}
