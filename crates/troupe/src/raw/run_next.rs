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
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::cell::{Header, Ran, Runnable};
use super::envelope::RawEnvelope;
use super::Executor;
use crate::loom::{AtomicU64, Ordering};

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
/// guard is dropped. The guard borrows both, so neither can go away while it is entered.
pub(crate) fn enter<'a>(executor: &'a Executor, next: &'a RunNext) -> RunNextGuard<'a> {
    CURRENT.with(|c| c.set(Current { executor, next }));
    RunNextGuard {
        _entered: std::marker::PhantomData,
    }
}

/// Clears the calling thread's run-next position when dropped; borrows what was entered (and,
/// through the raw pointer, is neither `Send` nor `Sync`).
pub(crate) struct RunNextGuard<'a> {
    _entered: std::marker::PhantomData<(&'a Executor, &'a RunNext, *const ())>,
}

impl Drop for RunNextGuard<'_> {
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
    // SAFETY: `next` was set by `enter` on this thread to a `RunNext` that outlives its guard
    // (the guard borrows it), and the guard clears it first; it is non-null since the executor matched (a null
    // executor never equals a reference). The permit is used at once on this thread (it is
    // neither `Send` nor `Sync`) while the caller's `executor` borrow lasts, within the worker's
    // loop (or a waiting thread's help, `scheduler/external.rs`) that keeps the guard alive.
    let next = unsafe { &*current.next };
    next.hand_off_permit()
}

/// Puts `runnable` in the calling thread's run-next position, if the thread has one for the
/// actor's executor and it is free; gives it back otherwise. For a thread that is not one of
/// the pool's workers but has entered a position for it (a waiting thread running turns it
/// scheduled, `scheduler/external.rs`): an actor its turns wake, or one that must run again,
/// stays on it as on a worker, so a catch-up actor goes on being lent turns there.
pub(crate) fn put_here(runnable: Runnable) -> Result<(), Runnable> {
    let current = CURRENT.with(Cell::get);
    if !ptr::eq(current.executor, &**runnable.executor()) {
        return Err(runnable);
    }
    // SAFETY: as in `permit_for`: set by `enter` on this thread to a live `RunNext`, non-null
    // since the executor matched; used only on this thread within this call.
    let next = unsafe { &*current.next };
    next.put(runnable)
}

/// Counts `handled` messages for the calling thread's worker, if it is one (see
/// `RunNext::handled`).
#[inline]
pub(super) fn note_handled(handled: u64) {
    let current = CURRENT.with(Cell::get);
    if current.next.is_null() {
        return;
    }
    // SAFETY: as in `permit_for`: a non-null `next` was set by `enter` on this thread to a live
    // `RunNext`, and the guard clears it first; used only on this thread within this call.
    let next = unsafe { &*current.next };
    if let Some(counter) = &next.handled {
        // Written by this thread only: a load and a store, no read-modify-write.
        let before = counter.load(Ordering::Relaxed);
        counter.store(before + handled, Ordering::Relaxed);
    }
}

thread_local! {
    /// Set while this thread runs a turn lent by `lend_turn`: a lent turn lends no further.
    static LENDING: Cell<bool> = const { Cell::new(false) };
}

/// Upper bound of the messages a lent turn takes.
const LENT_TURN_MAX: usize = 1 << 16;

/// Catch-up: a sender on a worker has found `owner` (an actor of this worker's pool that
/// opted in) far behind, with `waiting` messages queued. If `owner` waits in this worker's
/// run-next position, the worker runs a turn of it now, inside the send, before the sender
/// goes on; otherwise (it runs elsewhere, or waits in a queue) nothing happens.
///
/// Why: a handler that sends millions of messages in one turn keeps its worker for as long,
/// and its consumer, woken by the first of them, waits in that worker's run-next position
/// until the handler ends; the messages pile up and are read back cold, from memory the
/// mailbox had to fault in. Lending the worker keeps the backlog near `catch_up` messages, in
/// cache, on the memory of a few recycled blocks.
///
/// The lent turn runs another actor than the sender's (the sender is running, so no right to
/// run it is queued anywhere), on the same thread, nested in the sender's handler; it is an
/// ordinary turn (its panics are caught at its boundary, its own sends may hand off into the
/// position it came from) and does not lend again. If it must run again it is scheduled as
/// any other (`Runnable::schedule`: back into the run-next position when that is free).
#[inline(never)]
pub(super) fn lend_turn(owner: &Header, waiting: usize) {
    let current = CURRENT.with(Cell::get);
    if !ptr::eq(current.executor, owner.executor()) || LENDING.with(Cell::get) {
        return;
    }

    // SAFETY: as in `permit_for`: set by `enter` on this thread to a live `RunNext`, non-null
    // since the executor matched; used only on this thread within this call.
    let next = unsafe { &*current.next };
    if !next.holds(NonNull::from(owner)) {
        // Not ours to run. If nothing waits in the position either, the sender may be a
        // worker its pool narrowed past in a long turn: it waits for the pool's other
        // workers as a thread outside would (`Schedule::wait_aside`). With an actor waiting
        // in the position it goes on: the actor runs only once this turn ends.
        if !next.is_occupied() {
            owner.executor().wait_aside();
        }
        return;
    }
    let Some((runnable, handoff)) = next.take() else {
        return;
    };
    next.lent.set(next.lent.get() + 1);
    let _lending = Lending::enter();
    if let Ran::Yield(again) = runnable.run(waiting.clamp(1, LENT_TURN_MAX), handoff) {
        again.schedule();
    }
}

/// Marks the calling thread as running a lent turn, until dropped (on unwinding too).
struct Lending;

impl Lending {
    fn enter() -> Self {
        LENDING.with(|l| l.set(true));
        Lending
    }
}

impl Drop for Lending {
    fn drop(&mut self) {
        LENDING.with(|l| l.set(false));
    }
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
    /// Takes hand-offs (a worker's); a waiting thread's position takes none, so that what is
    /// left in it when the thread's reply comes can go back to the pool without running.
    hand_off: bool,
    /// Turns lent from here (`lend_turn`), read by the worker when it publishes its counters.
    lent: Cell<u64>,
    /// Closed while its worker is set aside (`scheduler/narrow.rs`): it takes no actor and no
    /// hand-off, so what the worker's last turns wake goes to a queue others take from.
    closed: Cell<bool>,
    /// Messages handled by turns run on this thread, published for the pool's monitor (a
    /// worker's position only; plain stores by this one thread).
    handled: Option<Arc<CachePadded<AtomicU64>>>,
    /// A `HandedOff` owns `message` (taken out with its actor, not yet delivered).
    message_owned: Cell<bool>,
    /// Initialised exactly while `next` is `WithMessage` or `message_owned` is set.
    message: UnsafeCell<MaybeUninit<RawEnvelope>>,
}

impl RunNext {
    pub(crate) fn new() -> Self {
        Self::with_hand_off(true)
    }

    /// A position that takes no hand-off: only actors to run next, without a message.
    pub(crate) fn without_hand_off() -> Self {
        Self::with_hand_off(false)
    }

    /// A worker's position that publishes the messages its turns handle in `handled`.
    pub(crate) fn counting(handled: Arc<CachePadded<AtomicU64>>) -> Self {
        let mut next = Self::new();
        next.handled = Some(handled);
        next
    }

    fn with_hand_off(hand_off: bool) -> Self {
        Self {
            next: Cell::new(Next::Empty),
            hand_off,
            lent: Cell::new(0),
            closed: Cell::new(false),
            handled: None,
            message_owned: Cell::new(false),
            message: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Turns lent from this position so far (`lend_turn`).
    pub(crate) fn lent_turns(&self) -> u64 {
        self.lent.get()
    }

    /// True if an actor waits here.
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        // SAFETY: only this thread touches the position (`RunNext` is not `Sync`), and no
        // reference into the cell is alive across this read.
        !matches!(unsafe { &*self.next.as_ptr() }, Next::Empty)
    }

    /// True if the actor waiting here is the one whose header is `owner`.
    #[inline]
    fn holds(&self, owner: NonNull<Header>) -> bool {
        // SAFETY: as in `is_occupied`.
        match unsafe { &*self.next.as_ptr() } {
            Next::Empty => false,
            Next::Plain(runnable) | Next::WithMessage(runnable) => runnable.header() == owner,
        }
    }

    /// Closes or reopens the position (see `closed`). Closing leaves what waits here.
    pub(crate) fn set_closed(&self, closed: bool) {
        self.closed.set(closed);
    }

    /// Puts `runnable` here to run next; gives it back if the position is taken or closed.
    #[inline]
    pub(crate) fn put(&self, runnable: Runnable) -> Result<(), Runnable> {
        if self.closed.get() {
            return Err(runnable);
        }
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
        (self.hand_off && !self.closed.get() && !self.message_owned.get() && !self.is_occupied())
            .then_some(HandOffPermit { slot: self })
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
