//! The cell: one allocation holding everything an actor is, and the rights that govern it.
//!
//! ```text
//! Cell<T> (one Arc allocation)
//! ├── Header     vtable (T's turn), executor (where it runs), id      <- Runnable points here
//! ├── Mailbox    lock-free MPSC queue of Envelope<T>, plus IDLE/HOLD/SIGNALED/CLOSED/TERMINATED
//! ├── shared     T::Shared: what any thread may read (the actor layer's signals, bound, links)
//! ├── processed  messages handled, written by turns only, before they go idle
//! └── private    T::Private: touched only by the running turn
//! ```
//!
//! # Rights, as values
//! - **The right to run** a turn is a [`Runnable`]: move-only, created in this file only, by
//!   whoever wins the race to wake the actor (the mailbox says so: the push, signal or
//!   hand-off whose compare-and-swap cleared `IDLE`) or by the spawner for the first turn;
//!   consumed by [`Runnable::run`], which gives it back only if the actor must run again
//!   (`Ran::Yield`). So at most one turn of an actor runs at a time, with no caller re-arguing
//!   it, and a run queue can hold an actor at most once.
//! - **The turn's access** to the cell is a [`Turn`], lent to `T::turn` and taken back by
//!   value: [`Turn::try_idle`] consumes it, so the idle transition is its last access to the
//!   cell by structure (every reference the turn handed out borrows from it). It is the only
//!   way to produce the `End` that `T::turn` must return, along with [`Turn::yield_now`] and
//!   [`Turn::finish`].
//! - **A handed-off message** is a `HandedOff` (see `run_next.rs`), checked against the cell it
//!   runs with, and taken by the turn as its first act (before any user code could run and
//!   hand off again).
//!
//! # References
//! `Cell::new` returns an `Arc<Cell<T>>` and keeps one more strong count, the *alive*
//! reference, which the actor's final turn gives up ([`Turn::finish`], then `run` drops it
//! after the turn). A `Runnable` is a plain pointer: runnables exist only while the actor has
//! not finished (none is made after `TERMINATED`, and the final turn consumes the last), so the
//! alive reference keeps every runnable's cell allocated, and scheduling costs no reference
//! counting.
//!
//! All the `unsafe` of type erasure and raw cell access in the crate is here and in the two
//! files beside it.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::Arc;

use super::envelope::{Deliver, Discard, Envelope};
use super::run_next;
use super::run_next::HandedOff;
use super::{Executor, Target};
use crate::id::ActorId;
use crate::loom::{AtomicU64, Ordering, UnsafeCell};
use crate::mailbox::{Closed, Consumer, Mailbox, Pushed};

/// The part of the cell the scheduler sees. The first field of `Cell`, so a pointer to it is a
/// pointer to the cell.
pub(crate) struct Header {
    vtable: &'static VTable,
    executor: Arc<Executor>,
    id: ActorId,
}

impl Header {
    /// Where the actor runs.
    pub(super) fn executor(&self) -> &Executor {
        &self.executor
    }
}

/// The function that knows the cell's type, one static table per target type.
struct VTable {
    run: for<'h> unsafe fn(NonNull<Header>, usize, Option<HandedOff<'h>>) -> Ran,
    catches_up: unsafe fn(NonNull<Header>) -> bool,
}

/// One actor. See the module note.
#[repr(C)]
pub(crate) struct Cell<T: Target> {
    // Field order is chosen for cache lines: senders read the header, the mailbox's
    // producer side and `shared`'s extras pointer (its first field); the turn writes
    // `private` on every message, so it comes last, at least a line away from all of that
    // (see the `layout` test in `life.rs`).
    header: Header,
    mailbox: Mailbox<Envelope<T>>,
    /// What any thread may read.
    pub(crate) shared: T::Shared,
    /// Messages handled; only turns write it, one at a time, before they go idle.
    processed: AtomicU64,
    private: UnsafeCell<T::Private>,
}

// SAFETY: `private` is touched only by the turn holding the actor's `Runnable` (one at a time,
// with happens-before between turns through the mailbox's tail word); everything else is `Sync`
// (atomics, `T::Shared: Sync`, the executor).
unsafe impl<T: Target> Sync for Cell<T> {}
// SAFETY: as above; the private state and messages are `Send`.
unsafe impl<T: Target> Send for Cell<T> {}

impl<T: Target> Cell<T> {
    const VTABLE: VTable = VTable {
        run: run::<T>,
        catches_up: catches_up::<T>,
    };

    /// Builds a cell, not idle, and the right to run its first turn; the cell keeps its alive
    /// reference until its final turn.
    ///
    /// `catch_up` (0: off): once this many messages wait, a sender running on a worker of the
    /// actor's pool that holds the actor in its run-next position runs a turn of it before its
    /// send returns (see `run_next::lend_turn`), and a sender outside every pool waits for
    /// half of them to be read (`wait_to_catch_up`).
    pub(crate) fn new(
        executor: Arc<Executor>,
        id: ActorId,
        shared: T::Shared,
        private: T::Private,
        catch_up: u32,
    ) -> (Arc<Self>, Runnable) {
        let cell = Arc::new(Self {
            header: Header {
                vtable: &Self::VTABLE,
                executor,
                id,
            },
            // Not idle: the spawner holds the right to run the first turn.
            mailbox: Mailbox::with_behind_at(false, catch_up),
            shared,
            processed: AtomicU64::new(0),
            private: UnsafeCell::new(private),
        });
        // The alive reference: released by `run` after the final turn.
        let alive = Arc::into_raw(cell.clone());
        debug_assert_eq!(alive, Arc::as_ptr(&cell));
        let first = Runnable::new(&cell);
        (cell, first)
    }

    pub(crate) fn id(&self) -> ActorId {
        self.header.id
    }

    /// Where this actor runs.
    pub(crate) fn executor(&self) -> &Arc<Executor> {
        &self.header.executor
    }

    /// Sends a message; gives it back if the mailbox is closed.
    ///
    /// If the actor is idle and ready for it (not holding its mailbox, nothing queued), belongs
    /// to the calling worker's pool, and the worker's run-next position is free, the message
    /// goes there with the actor instead of into the mailbox (a hand-off): the actor runs next
    /// on this core and takes it first. Order holds: nothing was queued, and anything sent
    /// later goes to the mailbox, which the turn reads after the hand-off.
    #[inline]
    pub(crate) fn push<P: Deliver<T>>(&self, payload: P) -> Result<(), P> {
        self.mailbox.prefetch_tail_for_write();
        let envelope = Envelope::new(payload);
        if self.mailbox.looks_open_idle() {
            if let Some(permit) = run_next::permit_for(&self.header.executor) {
                match self.mailbox.wake_idle() {
                    Ok(true) => {
                        permit.give(Runnable::new(self), envelope.into_raw());
                        return Ok(());
                    }
                    Ok(false) => {}
                    // SAFETY: built just above from a `P`.
                    Err(Closed(())) => return Err(unsafe { envelope.into_payload::<P>() }),
                }
            }
        }
        self.enqueue(envelope)
    }

    /// Sends through the mailbox only (no hand-off): for bounded mailboxes, whose turns count
    /// each message out of the mailbox.
    #[inline]
    pub(crate) fn push_queued<P: Deliver<T>>(&self, payload: P) -> Result<(), P> {
        self.mailbox.prefetch_tail_for_write();
        self.enqueue(Envelope::new(payload))
    }

    #[inline(always)]
    fn enqueue<P: Deliver<T>>(&self, envelope: Envelope<T>) -> Result<(), P> {
        match self.mailbox.push_reporting(envelope) {
            Ok(Pushed::Queued) => Ok(()),
            Ok(Pushed::Woke) => {
                // This push cleared IDLE: the right to run is ours to hand over.
                Runnable::new(self).schedule();
                Ok(())
            }
            Ok(Pushed::Behind) => {
                self.catch_up();
                Ok(())
            }
            // SAFETY: every caller built the envelope from a `P` just before.
            Err(Closed(envelope)) => Err(unsafe { envelope.into_payload::<P>() }),
        }
    }

    /// The actor is behind a sender that may run a turn of it (see `run_next::lend_turn`).
    #[cold]
    #[inline(never)]
    fn catch_up(&self) {
        if !crate::role::runs_actors() && !crate::role::drives_simulation() {
            self.wait_to_catch_up();
        } else {
            run_next::lend_turn(&self.header, self.mailbox.len());
        }
    }

    /// A thread outside every pool (a plain thread, or a task's) found the actor behind: it
    /// cannot run the actor's turn (the right to run it is queued on the pool), so it waits
    /// until half the backlog is read, for at most [`CATCH_UP_WAIT`], as a full bounded
    /// channel holds its sender.
    ///
    /// Why: such a sender is faster than the actor's worker as soon as the actor never idles
    /// (its sends wake nobody), or runs while the worker does not where the kernel put both on
    /// one CPU, and its lead only grows: the backlog takes fresh memory (a page fault per four
    /// kilobytes) and the worker reads it back cold, at half its rate. On one CPU the wait is
    /// also what hands the CPU to the worker (BENCHMARKS.md, "Three modes").
    /// Held near `catch_up` messages, the backlog lives on the blocks the mailbox recycles.
    ///
    /// Never for long: the actor may be waiting for this very thread (a lock it holds, a
    /// reply it has not sent), so after [`CATCH_UP_WAIT`] the send returns regardless, as it
    /// does when the actor stops.
    #[cold]
    #[inline(never)]
    fn wait_to_catch_up(&self) {
        let target = self.mailbox.behind_at() / 2;
        if self.mailbox.len() <= target {
            return;
        }
        self.header.executor().count_catch_up_wait();
        let start = std::time::Instant::now();
        let mut looks = 0u32;
        let mut nap = false;
        while self.mailbox.len() > target && !self.mailbox.is_closed() {
            looks += 1;
            // A few microseconds of spinning first (the worker reads on another core).
            if looks <= SPIN_LOOKS {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
                continue;
            }
            let waited = start.elapsed();
            if waited >= CATCH_UP_WAIT {
                return;
            }
            if nap {
                std::thread::sleep(CATCH_UP_NAP.min(CATCH_UP_WAIT - waited));
            } else {
                // Then yields, which come straight back on a quiet machine. One that kept
                // the core away (`give_way::LOST`, the one bound of a lost yield) means other
                // threads want it: short sleeps from then on, which
                // come back as soon as they end, where a yield may hand the core to a busy
                // thread for its whole time slice.
                let before = std::time::Instant::now();
                std::thread::yield_now();
                nap = before.elapsed() >= crate::give_way::LOST;
            }
        }
    }

    /// After a signal was put where the turn will find it (`T::Shared`): wakes the actor if it
    /// was idle. False if the actor has terminated (it will never read the signal).
    pub(crate) fn notify(&self) -> bool {
        match self.mailbox.signal() {
            Ok(true) => {
                // This signal cleared IDLE: the right to run is ours to hand over.
                Runnable::new(self).schedule();
                true
            }
            Ok(false) => true,
            Err(Closed(())) => false,
        }
    }

    /// True once the mailbox is closed (the actor is stopping or has stopped).
    pub(crate) fn is_closed(&self) -> bool {
        self.mailbox.is_closed()
    }

    /// Messages waiting in the mailbox (approximate; may lag by a turn).
    pub(crate) fn mailbox_len(&self) -> usize {
        self.mailbox.len()
    }

    /// Messages handled so far (as of the last turn's end).
    pub(crate) fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }
}

/// The longest a send from a thread outside every pool waits for a catch-up actor to read
/// half its backlog (`Cell::wait_to_catch_up`): a worker drains 512 messages of each of 60
/// actors in about 0.4 ms (`troupe-bench fanout --actors 60`).
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_millis(1);
/// Looks at the backlog, each after 32 spin hints, before such a wait yields.
const SPIN_LOOKS: u32 = 64;
/// One sleep of such a wait, between looks at the backlog.
const CATCH_UP_NAP: std::time::Duration = std::time::Duration::from_micros(50);

/// The right to run one turn of an actor. See the module note.
pub(crate) struct Runnable {
    header: NonNull<Header>,
}

// SAFETY: a Runnable may run its actor on any thread (the actor and its messages are `Send`);
// it is the one right to do so (not `Clone`, not `Copy`).
unsafe impl Send for Runnable {}

/// How a turn ended, for whoever ran it.
pub(crate) enum Ran {
    /// The actor went idle; the next sender (or signaller) gets the right to run it.
    Idle,
    /// It must run again (budget spent, or a panic was recorded): the right comes back.
    Yield(Runnable),
    /// The actor finished; its cell may be gone.
    Stopped,
}

impl Runnable {
    /// Only this file makes runnables: at spawn, and for whoever cleared `IDLE`.
    fn new<T: Target>(cell: &Cell<T>) -> Self {
        Runnable {
            header: NonNull::from(&cell.header),
        }
    }

    pub(super) fn header(&self) -> NonNull<Header> {
        self.header
    }

    /// The actor this is the right to run.
    pub(crate) fn id(&self) -> ActorId {
        self.header_ref().id
    }

    /// Where the actor runs.
    pub(crate) fn executor(&self) -> &Arc<Executor> {
        &self.header_ref().executor
    }

    /// True if senders on its worker lend it turns once it falls behind
    /// (`SpawnOptions::catch_up`, `run_next::lend_turn`).
    pub(crate) fn catches_up(&self) -> bool {
        let catches_up = self.header_ref().vtable.catches_up;
        // SAFETY: the vtable's function for this cell's type, on its live header (`header_ref`).
        unsafe { catches_up(self.header) }
    }

    fn header_ref(&self) -> &Header {
        // SAFETY: a Runnable exists only while its actor has not finished, so the alive
        // reference keeps the cell (and its header) allocated (module note).
        unsafe { self.header.as_ref() }
    }

    /// Hands this actor to its executor to be run.
    #[inline]
    pub(crate) fn schedule(self) {
        let executor = self.header.as_ptr();
        // SAFETY: as in `header_ref`; the reference is to the cell, not to `self`, and the cell
        // stays allocated at least until the turn this schedules has run.
        unsafe { (*executor).executor.schedule(self) }
    }

    /// Runs one turn. `handoff` is the message handed to this actor with its turn (see
    /// `run_next.rs`); it must belong to this actor.
    #[inline]
    pub(crate) fn run(self, budget: usize, handoff: Option<HandedOff<'_>>) -> Ran {
        if let Some(handed) = &handoff {
            assert_eq!(
                handed.owner(),
                self.header,
                "a handed-off message runs with the actor it was given to"
            );
        }
        let run = self.header_ref().vtable.run;
        // SAFETY: `run` is the vtable's function for this cell's type; `self` is the right to
        // run the turn (consumed here), and the hand-off was built by this cell's `push`.
        unsafe { run(self.header, budget, handoff) }
    }
}

/// Whether a `Cell<T>` catches up; the function in `T`'s vtable.
///
/// # Safety
/// `header` is the header of a live `Cell<T>`.
unsafe fn catches_up<T: Target>(header: NonNull<Header>) -> bool {
    // SAFETY: `Header` is the first field of the `repr(C)` cell; the cell is live (contract).
    let cell = unsafe { header.cast::<Cell<T>>().as_ref() };
    cell.mailbox.catches_up()
}

/// Runs one turn of a `Cell<T>`; the function in `T`'s vtable.
///
/// # Safety
/// `header` is the header of a live `Cell<T>`, the caller held its `Runnable` (consumed), and
/// `handoff`, if any, was handed to this cell.
unsafe fn run<T: Target>(
    header: NonNull<Header>,
    budget: usize,
    handoff: Option<HandedOff<'_>>,
) -> Ran {
    let cell_ptr = header.cast::<Cell<T>>();
    let end = {
        // SAFETY: `Header` is the first field of the `repr(C)` cell, so the pointers coincide;
        // the cell is live (function contract).
        let cell = unsafe { cell_ptr.as_ref() };
        let turn = move || {
            // SAFETY: this thread holds the right to run the actor.
            let mut state = unsafe { TurnState::open(cell, budget, handoff) };
            T::turn(Turn { state: &mut state })
        };
        match catch_unwind(AssertUnwindSafe(turn)) {
            Ok(End(end)) => end,
            Err(panic) => {
                // The turn that panicked is over (its state was dropped while unwinding); the
                // right to run is still ours.
                // SAFETY: as above.
                let mut state = unsafe { TurnState::open(cell, 0, None) };
                // `failed` records the failure and runs no user code; a panic here would be a
                // bug of the runtime, and the actor runs again either way.
                let _ = catch_unwind(AssertUnwindSafe(|| {
                    T::failed(Turn { state: &mut state }, panic)
                }));
                EndKind::Yield
            }
        }
    };
    match end {
        EndKind::Idle => Ran::Idle,
        EndKind::Yield => Ran::Yield(Runnable { header }),
        EndKind::Stopped => {
            // SAFETY: this is the alive reference made by `Arc::into_raw` in `Cell::new`; the
            // final turn is over, every borrow of the cell ended with the block above, and no
            // runnable of this actor remains.
            drop(unsafe { Arc::from_raw(cell_ptr.as_ptr()) });
            Ran::Stopped
        }
    }
}

/// How `T::turn` ended; made only by the consuming methods of `Turn`.
pub(crate) struct End(EndKind);

enum EndKind {
    Idle,
    Yield,
    Stopped,
}

/// Whether an idle actor takes the next message at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdleMode {
    /// Running and drained: the next message may be handed off to it.
    Open,
    /// Holding its mailbox (suspended, awaiting, or stopping): messages may wait; no hand-off.
    Holding,
}

/// A turn's exclusive access to its cell. See the module note. A pointer to the turn's state,
/// which lives in `run`'s frame: cheap to move, and consumed by the methods that end the turn.
pub(crate) struct Turn<'t, 'a, T: Target> {
    state: &'t mut TurnState<'a, T>,
}

/// What a turn holds; dropped in `run` when `T::turn` returns (or unwinds).
struct TurnState<'a, T: Target> {
    cell: &'a Cell<T>,
    private: &'a mut T::Private,
    rx: Consumer<'a, Envelope<T>>,
    handoff: Option<HandedOff<'a>>,
    budget: usize,
    /// Messages handled this turn, not yet added to `processed`.
    handled: u64,
    /// Set when the turn has given up its access (idle, or the mailbox terminated).
    released: bool,
}

impl<'a, T: Target> TurnState<'a, T> {
    /// # Safety
    /// The caller holds the right to run this actor, and no other turn of it exists.
    unsafe fn open(cell: &'a Cell<T>, budget: usize, handoff: Option<HandedOff<'a>>) -> Self {
        TurnState {
            cell,
            // SAFETY: the right to run makes this turn the only one touching `private`, with
            // happens-before from the previous turn (function contract).
            private: cell.private.with_mut(|p| unsafe { &mut *p }),
            // SAFETY: as above, this turn is the mailbox's only consumer.
            rx: unsafe { cell.mailbox.consumer() },
            handoff,
            budget,
            handled: 0,
            released: false,
        }
    }

    /// Adds this turn's handled messages to `processed`. Only turns write the counter, one at a
    /// time and ordered by the scheduling rule, so a load and a store suffice (no locked
    /// read-modify-write on the hot path).
    #[inline]
    fn flush(&mut self) {
        if self.handled > 0 && !self.released {
            let before = self.cell.processed.load(Ordering::Relaxed);
            self.cell
                .processed
                .store(before + self.handled, Ordering::Relaxed);
            super::run_next::note_handled(self.handled);
            self.handled = 0;
        }
    }
}

impl<T: Target> Drop for TurnState<'_, T> {
    fn drop(&mut self) {
        // Reached with the access still held (a panic unwinding, or after `yield_now`), or
        // after the turn released it, when `flush` touches nothing (and the consumer does not
        // publish its head).
        self.flush();
    }
}

impl<'t, 'a, T: Target> Turn<'t, 'a, T> {
    /// A new strong reference to the cell (for the actor's own address).
    pub(crate) fn arc(&self) -> Arc<Cell<T>> {
        let ptr: *const Cell<T> = self.state.cell;
        // SAFETY: every cell lives in an `Arc` (`Cell::new`), and its alive reference is held
        // while a turn runs, so the count is at least one: adding one makes a new owner.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }

    /// Messages this turn may handle before it yields.
    pub(crate) fn budget(&self) -> usize {
        self.state.budget
    }

    /// The turn's parts: the cell, its inbox (mailbox consumer and hand-off), its private
    /// state. They borrow the turn, so they are gone before it ends.
    #[inline]
    pub(crate) fn parts(&mut self) -> (&Cell<T>, Inbox<'_, 'a, T>, &mut T::Private) {
        let state = &mut *self.state;
        (
            state.cell,
            Inbox {
                rx: &mut state.rx,
                handoff: &mut state.handoff,
                handled: &mut state.handled,
            },
            state.private,
        )
    }

    /// Closes the mailbox and hands every message still in it to `each`, in order (a hand-off
    /// still owned first), with the turn's private state. Returns how many there were.
    pub(crate) fn close(&mut self, mut each: impl FnMut(&mut T::Private, Envelope<T>)) -> usize {
        let (_, mut inbox, private) = self.parts();
        let mut closed = 0;
        if let Some(handed) = inbox.take_handoff() {
            closed += 1;
            each(private, handed);
        }
        inbox.rx.close(|envelope| {
            closed += 1;
            each(private, envelope);
        });
        closed
    }

    /// Marks the actor gone for good: later signals are refused and nothing schedules it.
    /// Call after `close`, in the final turn, then end it with `finish`.
    pub(crate) fn terminate(&mut self) {
        self.state.flush();
        self.state.rx.terminate();
    }

    /// Ends the final turn (after `terminate`): the cell's alive reference is released when
    /// `T::turn` has returned.
    pub(crate) fn finish(self) -> End {
        assert!(
            self.state.cell.mailbox.is_terminated(),
            "a turn finishes only after terminating its mailbox"
        );
        self.state.flush();
        self.state.released = true;
        End(EndKind::Stopped)
    }

    /// Ends the turn with the actor still scheduled: it runs again later.
    pub(crate) fn yield_now(self) -> End {
        self.state.flush();
        End(EndKind::Yield)
    }

    /// Tries to go idle: succeeds only if no signal is pending and, for `IdleMode::Open`, every
    /// message has been read. On success the actor may at once run elsewhere, so this is the
    /// turn's last access to the cell (it consumes the turn, and with it every borrow). On
    /// failure the turn comes back, to go round again.
    #[inline]
    pub(crate) fn try_idle(self, mode: IdleMode) -> Result<End, Self> {
        debug_assert!(
            self.state.handoff.is_none(),
            "a turn takes its handed-off message before it can go idle"
        );
        // Counted before the idle transition, whose Release publishes it to the next turn.
        self.state.flush();
        let idle = match mode {
            IdleMode::Open => self.state.rx.try_idle(),
            IdleMode::Holding => self.state.rx.try_idle_holding(),
        };
        if idle {
            self.state.released = true;
            Ok(End(EndKind::Idle))
        } else {
            Err(self)
        }
    }
}

/// What a turn reads: its handed-off message and its mailbox, with the count of messages
/// handled. Borrowed from the `Turn`.
pub(crate) struct Inbox<'t, 'a, T: Target> {
    rx: &'t mut Consumer<'a, Envelope<T>>,
    handoff: &'t mut Option<HandedOff<'a>>,
    handled: &'t mut u64,
}

/// What `Inbox::deliver_next` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// A message was delivered.
    Delivered,
    /// A message was discarded (the caller's choice).
    Discarded,
    /// No message is ready.
    Empty,
}

impl<T: Target> Inbox<'_, '_, T> {
    /// Consumes the mailbox's `SIGNALED` flag: true if signals were sent since the last look.
    #[inline]
    pub(crate) fn take_signaled(&mut self) -> bool {
        self.rx.take_signaled()
    }

    /// True if a message was handed off with this turn and not yet taken.
    #[inline]
    pub(crate) fn has_handoff(&self) -> bool {
        self.handoff.is_some()
    }

    /// Delivers the handed-off message, if any. True if one was delivered.
    #[inline]
    pub(crate) fn deliver_handoff(&mut self, target: &mut T, ctx: &mut T::Ctx) -> bool {
        let Some(handed) = self.handoff.take() else {
            return false;
        };
        let at = handed.release();
        // SAFETY: the hand-off was checked to belong to this cell (`Runnable::run`), whose
        // `push` built it as an `Envelope<T>` (transparent over `RawEnvelope`); `release` gave
        // this turn its ownership, and the payload is moved out before user code runs.
        unsafe { Envelope::<T>::deliver_in_place(at.cast(), target, ctx) };
        // Counted once handled: a message whose handler panicked is not.
        *self.handled += 1;
        true
    }

    /// Takes the handed-off message out, undelivered (to keep it for later).
    pub(crate) fn take_handoff(&mut self) -> Option<Envelope<T>> {
        let handed = self.handoff.take()?;
        let at = handed.release();
        // SAFETY: as in `deliver_handoff`; read out once, the space is free afterwards.
        Some(unsafe { Envelope::<T>::from_raw(at.read()) })
    }

    /// Delivers the next ready message of the mailbox to `target`, unless `before` (run first,
    /// with the message taken) says to discard it and why. The slot is released even if the
    /// handler panics, so a message whose handler panicked is never seen twice.
    #[inline(always)]
    pub(crate) fn deliver_next(
        &mut self,
        target: &mut T,
        ctx: &mut T::Ctx,
        before: impl FnOnce() -> Option<Discard>,
    ) -> Taken {
        let mut taken = Taken::Empty;
        let handled = &mut *self.handled;
        self.rx.take_in_place(|slot| match before() {
            Some(why) => {
                taken = Taken::Discarded;
                // SAFETY: the slot holds a live `Envelope<T>`, given up once, here.
                unsafe { Envelope::<T>::discard_in_place(slot, why) };
            }
            None => {
                taken = Taken::Delivered;
                // SAFETY: the slot holds a live `Envelope<T>`, delivered once, in place.
                unsafe { Envelope::<T>::deliver_in_place(slot, target, ctx) };
                // Counted once handled: a message whose handler panicked is not.
                *handled += 1;
            }
        });
        taken
    }

    /// Takes the next ready message and gives it back to `target` for `why` (it will not be
    /// handled: see `Deliver::undelivered`). False if none is ready.
    pub(crate) fn give_back_next(
        &mut self,
        target: &mut T,
        ctx: &mut T::Ctx,
        why: Discard,
    ) -> bool {
        let mut taken = false;
        self.rx.take_in_place(|slot| {
            taken = true;
            // SAFETY: the slot holds a live `Envelope<T>`, given back once, in place.
            unsafe { Envelope::<T>::undelivered_in_place(slot, target, ctx, why) };
        });
        taken
    }

    /// Messages handled so far this turn.
    #[inline]
    pub(crate) fn handled(&self) -> u64 {
        *self.handled
    }

    /// True if the next message is written and ready.
    pub(crate) fn has_ready(&mut self) -> bool {
        self.rx.has_ready()
    }

    /// True if every claimed slot has been read.
    pub(crate) fn is_drained(&self) -> bool {
        self.rx.is_drained()
    }
}

/// The panic payload type `T::failed` receives.
pub(crate) type Panic = Box<dyn Any + Send>;

#[cfg(all(test, not(troupe_loom), target_pointer_width = "64"))]
impl<T: Target> Cell<T> {
    /// Offsets of the mailbox, of `shared` and of `private`, for the layout test of the layer
    /// that defines `shared` (`life.rs`, built under the same conditions).
    pub(crate) fn offsets() -> (usize, usize, usize) {
        (
            std::mem::offset_of!(Self, mailbox),
            std::mem::offset_of!(Self, shared),
            std::mem::offset_of!(Self, private),
        )
    }
}
