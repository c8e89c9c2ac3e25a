//! The actor cell: one allocation holding everything an actor is, and the turn that runs it.
//!
//! ```text
//! ActorCell<A> (one Arc allocation)
//! ├── Header      vtable (run, fail), executor (pool or own thread), id   <- queues hold *Header
//! ├── Mailbox     lock-free MPSC queue of Envelope<A>, plus the IDLE/SIGNALED/CLOSED bits
//! ├── signals     lock-free stack of control signals (stop, child failed, restart...)
//! ├── parent      where to report when failed or stopped
//! ├── bound       capacity and overflow policy, for bounded mailboxes only
//! ├── processed   messages handled (read by metrics)
//! ├── extras      watchers, links, names, counters: allocated on first use
//! └── private     the actor value, its Context, its phase — touched only by the running turn
//! ```
//!
//! # References
//! `Addr<A>` is an `Arc<ActorCell<A>>`. One extra strong reference, the *alive* reference,
//! is created at spawn (`Arc::into_raw`) and given up by the actor's final turn. Run queues
//! hold plain pointers: while the actor can be scheduled it is alive, and after it stops nobody
//! can schedule it (the mailbox is closed and terminated), so the pointers never dangle and
//! scheduling costs no reference-count traffic.
//!
//! # A turn
//! 1. Read pending signals (stop, children failing or stopping, restart orders, links).
//! 2. Lifecycle work outside the hot path (`lifecycle.rs`): `started` on the first turn;
//!    reporting a failure to the supervisor; restarting; beginning and finishing a stop.
//! 3. Running: handle the message handed off with the turn, if any, then up to `budget`
//!    messages from the mailbox, one at a time.
//! 4. Try to go idle; if a message or signal slipped in meanwhile, go round again.
//!
//! A panic in a handler unwinds out of the turn to the worker, which catches it (once per
//! worker loop, not per turn) and calls `fail`: the actor is suspended and its supervisor
//! decides (see `supervisor.rs`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::actor::{Actor, Context};
use crate::bounded::Bound;
use crate::envelope::{Envelope, RawEnvelope};
use crate::extras::{Extras, LazyBox};
use crate::lifecycle::{self, Phase};
use crate::loom::{Backoff, Ordering, UnsafeCell};
use crate::mailbox::{Consumer, Mailbox};
use crate::signal::{Signal, SignalStack};
use crate::supervisor::{Failure, Restart};
use crate::system::{ActorId, SystemShared};

/// A type-erased pointer to an actor cell, as held by run queues.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RawActor(NonNull<Header>);

// SAFETY: a RawActor is a handle to a `Sync` cell; which thread may *run* it is governed by the
// scheduling rule (one turn at a time), not by who holds the pointer.
unsafe impl Send for RawActor {}

impl RawActor {
    /// Runs one turn of the actor.
    ///
    /// `handoff` points to a message handed to the actor with its turn (built for this actor's
    /// type by `ActorCell::push`); the turn takes it (delivers or drops it) before any user
    /// code runs, then reads the mailbox.
    ///
    /// A panic in a handler unwinds out of this call; the caller must catch it and then call
    /// [`RawActor::fail`] (see `run_catching` for the simple form of that).
    ///
    /// # Safety
    /// The caller must hold the right to run this actor (it was handed out by the scheduling
    /// rule and not yet run), and the actor's alive reference must not have been released.
    #[inline]
    pub(crate) unsafe fn run(self, budget: usize, handoff: Option<NonNull<RawEnvelope>>) -> Turn {
        // SAFETY: the header is live while the alive reference is held (caller's contract).
        let run = unsafe { self.0.as_ref().vtable.run };
        // SAFETY: forwarded contract.
        unsafe { run(self, budget, handoff) }
    }

    /// Records that a panic unwound out of the actor's turn: the actor is suspended and its
    /// supervisor told on its next turn. The caller still holds the right to run it and must
    /// run it again (it is still scheduled).
    ///
    /// # Safety
    /// As for `run`, and no turn of this actor is in progress.
    #[cold]
    pub(crate) unsafe fn fail(self, panic: &(dyn std::any::Any + Send)) {
        // SAFETY: the header is live while the alive reference is held (caller's contract).
        let fail = unsafe { self.0.as_ref().vtable.fail };
        // SAFETY: forwarded contract.
        unsafe { fail(self, Failure::from_panic(panic)) }
    }

    /// `run`, with a panic caught and recorded, the actor then to be run again.
    ///
    /// # Safety
    /// As for `run`.
    pub(crate) unsafe fn run_catching(self, budget: usize) -> Turn {
        // SAFETY: forwarded contract.
        match catch_unwind(AssertUnwindSafe(|| unsafe { self.run(budget, None) })) {
            Ok(turn) => turn,
            Err(panic) => {
                // SAFETY: the turn that panicked is over; we still hold the right to run it.
                unsafe { self.fail(&*panic) };
                Turn::Yield
            }
        }
    }

    /// The executor that runs this actor.
    ///
    /// # Safety
    /// As for `run`: the alive reference must still be held.
    pub(crate) unsafe fn header(&self) -> &Header {
        // SAFETY: per the function contract.
        unsafe { self.0.as_ref() }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The actor went idle; the next sender (or signaller) schedules it.
    Idle,
    /// The budget ran out (or a sender is mid-write): run it again later.
    Yield,
    /// The actor has stopped; its alive reference is gone.
    Stopped,
}

/// Where an actor runs.
pub(crate) enum Executor {
    Pool(Arc<crate::scheduler::PoolShared>),
    Thread(Arc<crate::scheduler::dedicated::ThreadWaker>),
}

/// The part of the cell the scheduler sees. Must stay the first field of `ActorCell`.
pub(crate) struct Header {
    vtable: &'static VTable,
    pub(crate) executor: Executor,
    pub(crate) id: ActorId,
}

/// The functions that know the actor's type, one static table per actor type (one pointer
/// in every cell rather than one per function).
struct VTable {
    run: unsafe fn(RawActor, usize, Option<NonNull<RawEnvelope>>) -> Turn,
    fail: unsafe fn(RawActor, String),
}

/// What an actor reports to when it fails or stops.
pub(crate) enum ParentLink {
    /// A top-level actor: remove it from the system registry.
    Root { shard: usize, key: usize },
    /// A child: signal the parent.
    Actor { parent: ChildRef, key: usize },
}

/// A type-erased reference to an actor, used by parents, links and the registry.
pub(crate) type ChildRef = Arc<dyn ErasedCell>;

/// Operations on an actor whose type is not known.
pub(crate) trait ErasedCell: Send + Sync {
    fn signal(&self, signal: Signal);
    fn actor_id(&self) -> ActorId;
    fn extras(&self) -> &Extras;
}

/// State only the running turn touches.
pub(crate) struct Private<A: Actor> {
    pub(crate) actor: Option<A>,
    pub(crate) ctx: Context<A>,
}

/// One actor. See the module note.
#[repr(C)]
pub(crate) struct ActorCell<A: Actor> {
    // Field order is chosen for cache lines. Senders read the header, the mailbox's producer
    // side and `bound`, which come first (with the 16 bytes of reference counts, the header and
    // the mailbox's `tail` fill the first line). The fields senders never touch come between
    // them and `private`, which the actor's handlers write on every message: a handler
    // updating its own state must not share a cache line with what senders on other cores
    // read, or a fan-in (the counting actor) pays a cache miss per message.
    header: Header,
    pub(crate) mailbox: Mailbox<Envelope<A>>,
    pub(crate) bound: Option<Box<Bound>>,
    pub(crate) signals: SignalStack,
    pub(crate) parent: ParentLink,
    pub(crate) system: Arc<SystemShared>,
    pub(crate) extras: LazyBox<Extras>,
    /// Messages handled, updated once per turn.
    pub(crate) processed: AtomicU64,
    pub(crate) private: UnsafeCell<Private<A>>,
}

// SAFETY: `private` is only accessed by the actor's current turn, and turns are serialised by
// the mailbox's scheduling rule with happens-before between them; everything else is Sync.
unsafe impl<A: Actor> Sync for ActorCell<A> {}
// SAFETY: as above; the actor and messages are Send.
unsafe impl<A: Actor> Send for ActorCell<A> {}

/// What a new cell is made of.
pub(crate) struct CellParts<A: Actor> {
    pub(crate) actor: A,
    pub(crate) executor: Executor,
    pub(crate) id: ActorId,
    pub(crate) parent: ParentLink,
    pub(crate) system: Arc<SystemShared>,
    pub(crate) factory: Option<Box<dyn FnMut() -> A + Send>>,
    pub(crate) restart: Restart,
    pub(crate) bound: Option<Box<Bound>>,
    pub(crate) timed: bool,
}

impl<A: Actor> ActorCell<A> {
    const VTABLE: VTable = VTable {
        run: run::<A>,
        fail: fail::<A>,
    };

    pub(crate) fn new(parts: CellParts<A>) -> Self {
        Self {
            header: Header {
                vtable: &Self::VTABLE,
                executor: parts.executor,
                id: parts.id,
            },
            // Not idle: the spawner schedules the first turn, which runs `started`.
            mailbox: Mailbox::new(false),
            signals: SignalStack::new(),
            parent: parts.parent,
            system: parts.system,
            bound: parts.bound,
            processed: AtomicU64::new(0),
            extras: LazyBox::new(),
            private: UnsafeCell::new(Private {
                actor: Some(parts.actor),
                ctx: {
                    let mut ctx = Context::new();
                    ctx.timed = parts.timed;
                    if parts.factory.is_some() || parts.restart != Restart::Permanent {
                        let cold = ctx.cold_mut();
                        cold.factory = parts.factory;
                        cold.restart = parts.restart;
                    }
                    ctx
                },
            }),
        }
    }

    pub(crate) fn id(&self) -> ActorId {
        self.header.id
    }

    pub(crate) fn header_executor(&self) -> &Executor {
        &self.header.executor
    }

    pub(crate) fn system(&self) -> &Arc<SystemShared> {
        &self.system
    }

    pub(crate) fn raw(&self) -> RawActor {
        RawActor(NonNull::from(&self.header))
    }

    /// Sends an envelope; `Err` gives it back if the actor has stopped (or, for a bounded
    /// mailbox, is full and refuses).
    #[inline]
    pub(crate) fn push(&self, envelope: Envelope<A>) -> Result<(), (Envelope<A>, Refusal)> {
        if let Some(bound) = &self.bound {
            return self.push_bounded(bound, envelope, true);
        }
        self.push_unbounded(envelope)
            .map_err(|e| (e, Refusal::Stopped))
    }

    #[inline]
    fn push_unbounded(&self, envelope: Envelope<A>) -> Result<(), Envelope<A>> {
        // Hand-off: an idle actor on this worker's own pool, with this worker's LIFO slot free,
        // gets the message directly with its turn: no mailbox slot is written or read. Safe for
        // order: `wake_idle` only succeeds when the mailbox is empty, so this message is the
        // oldest, and any message sent after it goes to the mailbox, which the turn reads after
        // the hand-off.
        if self.mailbox.looks_idle() {
            if let Executor::Pool(pool) = &self.header.executor {
                if let Some(slot) = crate::scheduler::hand_off_slot(pool) {
                    match self.mailbox.wake_idle() {
                        Ok(true) => {
                            slot.give(self.raw(), envelope.into_raw());
                            return Ok(());
                        }
                        Ok(false) => {}
                        Err(_closed) => return Err(envelope),
                    }
                }
            }
        }
        match self.mailbox.push(envelope) {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.schedule();
                Ok(())
            }
            Err(closed) => Err(closed.0),
        }
    }

    /// Sends to a bounded mailbox without counting a refusal (the caller waits and retries).
    pub(crate) fn push_waiting(&self, envelope: Envelope<A>) -> Result<(), (Envelope<A>, Refusal)> {
        match &self.bound {
            Some(bound) => self.push_bounded(bound, envelope, false),
            None => self.push(envelope),
        }
    }

    #[cold]
    fn push_bounded(
        &self,
        bound: &Bound,
        envelope: Envelope<A>,
        count_refusal: bool,
    ) -> Result<(), (Envelope<A>, Refusal)> {
        match bound.admit(count_refusal) {
            crate::bounded::Admit::Yes => match self.mailbox.push(envelope) {
                Ok(woke) => {
                    if woke {
                        self.schedule();
                    }
                    Ok(())
                }
                Err(closed) => {
                    bound.release(1);
                    Err((closed.0, Refusal::Stopped))
                }
            },
            crate::bounded::Admit::Full => Err((envelope, Refusal::Full)),
            crate::bounded::Admit::DropIt => {
                // Dropped on purpose (overflow policy `DropNewest`), counted by `admit`.
                drop(envelope);
                Ok(())
            }
        }
    }

    /// Asks the actor to stop (see `Addr::stop`).
    pub(crate) fn signal_stop(&self) {
        ErasedCell::signal(self, Signal::Stop);
    }

    /// Hands the actor to its executor. Only the party that cleared IDLE may call this.
    #[inline]
    pub(crate) fn schedule(&self) {
        crate::scheduler::schedule(self.raw());
    }

    /// True once the actor no longer accepts messages.
    pub(crate) fn is_stopped(&self) -> bool {
        self.mailbox.is_closed()
    }
}

/// Why a send was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Stopped,
    Full,
}

impl<A: Actor> ErasedCell for ActorCell<A> {
    fn signal(&self, signal: Signal) {
        self.signals.push(signal);
        // After termination the signal stays in the stack and is freed with the cell.
        if let Ok(true) = self.mailbox.signal() {
            self.schedule();
        }
    }

    fn actor_id(&self) -> ActorId {
        self.header.id
    }

    fn extras(&self) -> &Extras {
        self.extras.get_or_init()
    }
}

/// Runs one turn of an `ActorCell<A>`; the function pointer in every `Header`.
///
/// # Safety
/// `raw` points to the header of a live `ActorCell<A>` whose alive reference is held, and the
/// caller has the exclusive right to run it (see `RawActor::run`).
unsafe fn run<A: Actor>(
    raw: RawActor,
    budget: usize,
    handoff: Option<NonNull<RawEnvelope>>,
) -> Turn {
    let cell_ptr: *mut ActorCell<A> = raw.0.as_ptr().cast();
    // SAFETY: `Header` is the first field of the `repr(C)` cell, so the pointers coincide; the
    // cell is live (function contract).
    let cell = unsafe { &*cell_ptr };
    // SAFETY: only the running turn touches `private`, and this is the running turn.
    let private = cell.private.with_mut(|p| unsafe { &mut *p });
    private.ctx.cell = NonNull::new(cell_ptr);

    // A panic unwinds from here to the runner, which catches it once per worker loop rather
    // than once per turn, and then calls `fail`.
    let outcome = turn(cell, private, budget, handoff);
    if outcome == Turn::Stopped {
        // SAFETY: this is the alive reference created by `Arc::into_raw` at spawn; the final
        // turn is over and `cell` is not used again.
        drop(unsafe { Arc::from_raw(cell_ptr) });
    }
    outcome
}

/// Records a panic's failure; the actor's next turn reports it to its supervisor.
///
/// # Safety
/// As for `run`; no turn is in progress.
unsafe fn fail<A: Actor>(raw: RawActor, panic: String) {
    let cell_ptr: *mut ActorCell<A> = raw.0.as_ptr().cast();
    // SAFETY: as in `run`.
    let cell = unsafe { &*cell_ptr };
    // SAFETY: the turn that panicked is over and nobody else runs this actor.
    let private = cell.private.with_mut(|p| unsafe { &mut *p });
    lifecycle::record_failure(cell, private, Failure::Panicked(panic));
}

fn turn<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    budget: usize,
    mut handoff: Option<NonNull<RawEnvelope>>,
) -> Turn {
    // SAFETY: this turn is the only consumer (scheduling rule).
    let mut rx = unsafe { cell.mailbox.consumer() };
    // Counted into `processed` when the turn ends, even if a handler panics.
    let mut count = Processed {
        counter: &cell.processed,
        handled: 0,
    };
    let handled = &mut count.handled;
    let mut backoff = Backoff::new();
    let turn = loop {
        if rx.take_signaled() {
            lifecycle::read_signals(cell, private);
        }
        if private.ctx.attention {
            if let Some(message) = handoff.take() {
                if private.ctx.stop_requested {
                    // Dropped like the queued messages of a stopping actor.
                    // SAFETY: the hand-off slot holds a live envelope this turn owns (`run`).
                    unsafe { std::ptr::drop_in_place(message.as_ptr()) };
                } else {
                    // Failed or suspended: keep it for the (restarted or resumed) actor, ahead of
                    // the mailbox, which was empty when it was handed off.
                    // SAFETY: as above; moved out once, the slot is free afterwards.
                    private.ctx.cold_mut().parked = Some(unsafe { message.as_ptr().read() });
                }
            }
            if let Some(end) = lifecycle::change_phase(cell, private, &mut rx, handled) {
                break end;
            }
            if private.ctx.attention && private.ctx.phase == Phase::Running {
                continue; // e.g. a parked message's handler stopped the actor
            }
        }

        if private.ctx.phase == Phase::Running {
            let batch = if private.ctx.timed {
                let started = std::time::Instant::now();
                let batch = run_messages(cell, private, &mut rx, budget, handled, &mut handoff);
                let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                // Single writer (this actor's turns), as for `processed`.
                let total = &cell.extras.get_or_init().handler_nanos;
                total.store(total.load(Ordering::Relaxed) + nanos, Ordering::Relaxed);
                batch
            } else {
                run_messages(cell, private, &mut rx, budget, handled, &mut handoff)
            };
            match batch {
                Batch::Interrupted => continue, // `change_phase` handles stops and suspensions
                Batch::BudgetSpent => break Turn::Yield,
                Batch::Drained => {}
            }
        }

        let idle = if private.ctx.phase.holds_messages() {
            // A suspended actor keeps its messages and waits for a signal.
            rx.try_idle_keeping_messages()
        } else {
            rx.try_idle()
        };
        if idle {
            break Turn::Idle;
        }
        // Something arrived since we last looked. A signal or a ready message: go round at once.
        // A producer still writing its slot: wait a moment, then yield rather than spin.
        if private.ctx.phase == Phase::Running && !rx.is_drained() && !rx.has_ready() {
            backoff.snooze();
            if backoff.is_completed() {
                break Turn::Yield;
            }
        }
    };
    turn
}

/// Adds the messages a turn handled to the actor's `processed` counter when dropped, so the
/// count stays exact when a handler panics and unwinds out of the turn.
struct Processed<'a> {
    counter: &'a AtomicU64,
    handled: usize,
}

impl Drop for Processed<'_> {
    fn drop(&mut self) {
        if self.handled > 0 {
            // Only the actor's own turns write this counter, one at a time and ordered by the
            // scheduling rule, so a plain load and store suffice: no locked read-modify-write
            // (which would cost as much as the mailbox's compare-and-swap) on the hot path.
            let before = self.counter.load(Ordering::Relaxed);
            self.counter
                .store(before + self.handled as u64, Ordering::Relaxed);
        }
    }
}

/// How a run of messages ended.
enum Batch {
    /// No message ready.
    Drained,
    /// `budget` messages handled this turn.
    BudgetSpent,
    /// A handler stopped the actor or made it await a future.
    Interrupted,
}

/// The hot loop: the handed-off message, then the mailbox, one message at a time, up to the
/// budget.
#[inline(always)]
fn run_messages<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    rx: &mut Consumer<'_, Envelope<A>>,
    budget: usize,
    handled: &mut usize,
    handoff: &mut Option<NonNull<RawEnvelope>>,
) -> Batch {
    let actor = private
        .actor
        .as_mut()
        .expect("a running actor has its state");
    let ctx = &mut private.ctx;
    if let Some(message) = handoff.take() {
        // SAFETY: `ActorCell::<A>::push` built it from an `Envelope<A>`; this turn owns it and
        // delivers it in place, before any user code could refill the slot.
        unsafe { RawEnvelope::deliver_in_place(message.as_ptr(), actor, ctx) };
        *handled += 1;
        if ctx.attention {
            return Batch::Interrupted;
        }
    }
    let bound = cell.bound.as_deref();
    while *handled < budget {
        let mut delivered = false;
        let took = rx.take_in_place(|slot| {
            if let Some(bound) = bound {
                bound.release(1);
                if bound.take_drop_oldest() {
                    // Overflow policy `DropOldest`, counted.
                    // SAFETY: the slot holds a live envelope, dropped once here.
                    unsafe { std::ptr::drop_in_place(slot) };
                    return;
                }
            }
            // SAFETY: the slot holds a live `Envelope<A>` (transparent over `RawEnvelope`),
            // delivered once, in place.
            unsafe { RawEnvelope::deliver_in_place(slot.cast(), actor, ctx) };
            delivered = true;
        });
        if !took {
            return Batch::Drained;
        }
        if delivered {
            *handled += 1;
            if ctx.attention {
                return Batch::Interrupted;
            }
        }
    }
    Batch::BudgetSpent
}
