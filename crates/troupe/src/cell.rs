//! The actor cell: one allocation holding everything an actor is, and the turn that runs it.
//!
//! ```text
//! ActorCell<A> (one Arc allocation)
//! ├── Header      run fn, executor (pool or own thread), id   <- run queues hold *Header
//! ├── Mailbox     lock-free MPSC queue of Envelope<A>, plus the IDLE/SIGNALED/CLOSED bits
//! ├── signals     lock-free stack of control signals (stop, child stopped)
//! ├── parent      where to report when stopped
//! └── private     the actor value and its Context; touched only by the running turn
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
//! 1. Read pending signals (stop requests, children reporting they stopped).
//! 2. First turn only: `started`.
//! 3. Handle up to `budget` messages, one at a time.
//! 4. If a stop was requested: `stopping`, close the mailbox (dropping what is left, which
//!    fails its askers), ask every child to stop, and wait for them to report.
//! 5. When stopping and no children are left: `stopped`, drop the actor, terminate the mailbox,
//!    tell the parent, give up the alive reference.
//! 6. Otherwise try to go idle; if a message or signal slipped in meanwhile, go round again.
//!
//! A panic in a handler or hook is caught at the turn boundary: the worker thread survives, the
//! message's asker gets `AskError::Panicked`, and the actor is stopped.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::actor::{Actor, Context};
use crate::envelope::{Envelope, RawEnvelope};
use crate::loom::{AtomicPtr, Backoff, Ordering, UnsafeCell};
use crate::mailbox::{Consumer, Mailbox};
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
    /// # Safety
    /// The caller must hold the right to run this actor (it was handed out by the scheduling
    /// rule and not yet run), and the actor's alive reference must not have been released.
    ///
    /// `handoff` points to a message handed to the actor with its turn (built for this actor's
    /// type by `ActorCell::push`); the turn takes it (delivers or drops it) before any user
    /// code runs, then reads the mailbox.
    ///
    /// A panic in a handler unwinds out of this call; the caller must catch it and then call
    /// [`RawActor::fail`] (see `run_catching` for the simple form of that).
    #[inline]
    pub(crate) unsafe fn run(self, budget: usize, handoff: Option<NonNull<RawEnvelope>>) -> Turn {
        // SAFETY: the header is live while the alive reference is held (caller's contract).
        let run = unsafe { self.0.as_ref().run };
        // SAFETY: forwarded contract.
        unsafe { run(self, budget, handoff) }
    }

    /// Marks the actor failed after a panic unwound out of its turn: it will stop. The caller
    /// still holds the right to run it and must run it again (it is still scheduled).
    ///
    /// # Safety
    /// As for `run`, and no turn of this actor is in progress.
    #[cold]
    pub(crate) unsafe fn fail(self) {
        // SAFETY: the header is live while the alive reference is held (caller's contract).
        let fail = unsafe { self.0.as_ref().fail };
        // SAFETY: forwarded contract.
        unsafe { fail(self) }
    }

    /// `run`, with a panic caught and turned into a failed actor that must run again.
    ///
    /// # Safety
    /// As for `run`.
    pub(crate) unsafe fn run_catching(self, budget: usize) -> Turn {
        // SAFETY: forwarded contract.
        match catch_unwind(AssertUnwindSafe(|| unsafe { self.run(budget, None) })) {
            Ok(turn) => turn,
            Err(_panic) => {
                // SAFETY: the turn that panicked is over; we still hold the right to run it.
                unsafe { self.fail() };
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
    /// The mailbox was empty and the actor went idle; the next sender schedules it.
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
    run: unsafe fn(RawActor, usize, Option<NonNull<RawEnvelope>>) -> Turn,
    fail: unsafe fn(RawActor),
    pub(crate) executor: Executor,
    pub(crate) id: ActorId,
}

/// Control signals, delivered ahead of messages.
pub(crate) enum Signal {
    /// Stop (from `Addr::stop`, a stopping parent, or shutdown).
    Stop,
    /// A child reports it has stopped; the key is its slot among its parent's children.
    ChildStopped(usize),
}

struct SignalNode {
    signal: Signal,
    next: *mut SignalNode,
}

/// A lock-free stack of signals: any thread pushes, the actor's turn takes all at once (so
/// there is no ABA problem) and reverses them into sending order.
pub(crate) struct SignalStack {
    head: AtomicPtr<SignalNode>,
}

impl SignalStack {
    fn new() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn push(&self, signal: Signal) {
        let node = Box::into_raw(Box::new(SignalNode {
            signal,
            next: ptr::null_mut(),
        }));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours until the compare-and-swap publishes it.
            unsafe { (*node).next = head };
            // Release pairs with the Acquire swap in `take_all`.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Takes every pushed signal, oldest first.
    fn take_all(&self) -> Vec<Signal> {
        let mut node = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut out = Vec::new();
        while !node.is_null() {
            // SAFETY: the swap made this thread the owner of the whole list.
            let boxed = unsafe { Box::from_raw(node) };
            node = boxed.next;
            out.push(boxed.signal);
        }
        out.reverse();
        out
    }
}

impl Drop for SignalStack {
    fn drop(&mut self) {
        drop(self.take_all());
    }
}

/// What an actor reports to when it stops.
pub(crate) enum ParentLink {
    /// A top-level actor: remove it from the system registry.
    Root { shard: usize, key: usize },
    /// A child: signal the parent.
    Actor { parent: ChildRef, key: usize },
}

/// A type-erased reference to an actor, used by parents and the registry.
pub(crate) type ChildRef = Arc<dyn ErasedCell>;

/// Operations on an actor whose type is not known.
pub(crate) trait ErasedCell: Send + Sync {
    fn signal(&self, signal: Signal);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Starting,
    Running,
    Stopping,
}

/// State only the running turn touches.
pub(crate) struct Private<A: Actor> {
    actor: Option<A>,
    ctx: Context<A>,
    phase: Phase,
}

/// One actor. See the module note.
#[repr(C)]
pub(crate) struct ActorCell<A: Actor> {
    header: Header,
    pub(crate) mailbox: Mailbox<Envelope<A>>,
    signals: SignalStack,
    parent: ParentLink,
    private: UnsafeCell<Private<A>>,
}

// SAFETY: `private` is only accessed by the actor's current turn, and turns are serialised by
// the mailbox's scheduling rule with happens-before between them; everything else is Sync.
unsafe impl<A: Actor> Sync for ActorCell<A> {}
// SAFETY: as above; the actor and messages are Send.
unsafe impl<A: Actor> Send for ActorCell<A> {}

impl<A: Actor> ActorCell<A> {
    pub(crate) fn new(
        actor: A,
        executor: Executor,
        id: ActorId,
        parent: ParentLink,
        system: Arc<SystemShared>,
    ) -> Self {
        Self {
            header: Header {
                run: run::<A>,
                fail: fail::<A>,
                executor,
                id,
            },
            // Not idle: the spawner schedules the first turn, which runs `started`.
            mailbox: Mailbox::new(false),
            signals: SignalStack::new(),
            parent,
            private: UnsafeCell::new(Private {
                actor: Some(actor),
                ctx: Context::new(system),
                phase: Phase::Starting,
            }),
        }
    }

    pub(crate) fn id(&self) -> ActorId {
        self.header.id
    }

    pub(crate) fn raw(&self) -> RawActor {
        RawActor(NonNull::from(&self.header))
    }

    /// Sends an envelope; `Err` gives it back if the actor has stopped.
    #[inline]
    pub(crate) fn push(&self, envelope: Envelope<A>) -> Result<(), Envelope<A>> {
        // Hand-off: an idle actor on this worker's own pool, with this worker's LIFO slot free,
        // gets the message directly with its turn: no mailbox slot is written or read. Safe for
        // order: the mailbox of an idle actor is empty, so this message is the oldest, and any
        // message sent after it goes to the mailbox, which the turn reads after the hand-off.
        if self.mailbox.looks_idle() {
            if let Executor::Pool(pool) = &self.header.executor {
                if crate::scheduler::can_hand_off(pool) {
                    match self.mailbox.wake_idle() {
                        Ok(true) => {
                            crate::scheduler::hand_off(self.raw(), envelope.into_raw());
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

    pub(crate) fn header_executor(&self) -> &Executor {
        &self.header.executor
    }

    /// Asks the actor to stop (see `Addr::stop`).
    pub(crate) fn signal_stop(&self) {
        ErasedCell::signal(self, Signal::Stop);
    }

    /// Hands the actor to its executor. Only the party that cleared IDLE may call this.
    #[inline]
    fn schedule(&self) {
        crate::scheduler::schedule(self.raw());
    }

    /// True once the actor no longer accepts messages.
    pub(crate) fn is_stopped(&self) -> bool {
        self.mailbox.is_closed()
    }
}

impl<A: Actor> ErasedCell for ActorCell<A> {
    fn signal(&self, signal: Signal) {
        self.signals.push(signal);
        // After termination the signal stays in the stack and is freed with the cell.
        if let Ok(true) = self.mailbox.signal() {
            self.schedule();
        }
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

/// After a handler (or `started`) panicked, the actor's state may be inconsistent: stop it. Its
/// next turn runs the stop sequence, whose hooks are guarded one by one.
///
/// # Safety
/// As for `run`; no turn is in progress.
unsafe fn fail<A: Actor>(raw: RawActor) {
    let cell_ptr: *mut ActorCell<A> = raw.0.as_ptr().cast();
    // SAFETY: as in `run`.
    let cell = unsafe { &*cell_ptr };
    // SAFETY: the turn that panicked is over and nobody else runs this actor.
    let private = cell.private.with_mut(|p| unsafe { &mut *p });
    private.ctx.stop_requested = true;
}

fn turn<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    budget: usize,
    mut handoff: Option<NonNull<RawEnvelope>>,
) -> Turn {
    // SAFETY: this turn is the only consumer (scheduling rule).
    let mut rx = unsafe { cell.mailbox.consumer() };
    let mut handled = 0;
    let mut backoff = Backoff::new();
    loop {
        if rx.take_signaled() {
            read_signals(cell, private);
        }
        if private.phase != Phase::Running || private.ctx.stop_requested {
            if let (true, Some(message)) = (private.ctx.stop_requested, handoff.take()) {
                // A message handed off to a stopping actor is dropped like the queued ones.
                // SAFETY: the hand-off slot holds a live envelope this turn owns (`run`).
                unsafe { std::ptr::drop_in_place(message.as_ptr()) };
            }
            if let Some(end) = change_phase(cell, private, &mut rx) {
                return end;
            }
        }

        if private.phase == Phase::Running {
            // The hot loop: one message at a time, up to the budget.
            let actor = private
                .actor
                .as_mut()
                .expect("a running actor has its state");
            if let Some(message) = handoff.take() {
                // SAFETY: `ActorCell::<A>::push` built it from an `Envelope<A>`; this turn owns it
                // and delivers it in place, before any user code could refill the slot.
                unsafe { RawEnvelope::deliver_in_place(message.as_ptr(), actor, &mut private.ctx) };
                handled += 1;
                if private.ctx.stop_requested {
                    continue;
                }
            }
            while handled < budget {
                let Some(envelope) = rx.pop() else { break };
                envelope.deliver(actor, &mut private.ctx);
                handled += 1;
                if private.ctx.stop_requested {
                    break;
                }
            }
            if private.ctx.stop_requested {
                continue; // stop at once: `change_phase` begins it
            }
            if handled >= budget {
                return Turn::Yield;
            }
        }

        if rx.try_idle() {
            return Turn::Idle;
        }
        // Something arrived since we last looked. A signal or a ready message: go round at once.
        // A producer still writing its slot: wait a moment, then yield rather than spin.
        if private.phase == Phase::Running && !rx.is_drained() && !rx.has_ready() {
            backoff.snooze();
            if backoff.is_completed() {
                return Turn::Yield;
            }
        }
    }
}

/// Reads every pending signal.
#[cold]
fn read_signals<A: Actor>(cell: &ActorCell<A>, private: &mut Private<A>) {
    for signal in cell.signals.take_all() {
        match signal {
            Signal::Stop => private.ctx.stop_requested = true,
            Signal::ChildStopped(key) => {
                if let Some(children) = private.ctx.children.as_mut() {
                    children.try_remove(key);
                }
            }
        }
    }
}

/// The lifecycle outside the hot loop: starting, beginning to stop, finishing. Returns the end
/// of the turn when the actor has stopped.
#[cold]
fn change_phase<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    rx: &mut Consumer<'_, Envelope<A>>,
) -> Option<Turn> {
    let actor = private.actor.as_mut().expect("a live actor has its state");
    if private.phase == Phase::Starting {
        private.phase = Phase::Running;
        actor.started(&mut private.ctx);
    }
    if private.phase == Phase::Running && private.ctx.stop_requested {
        private.phase = Phase::Stopping;
        guarded(|| actor.stopping(&mut private.ctx));
        // Messages still queued are dropped: their destructors run, askers get errors.
        rx.close(drop);
        if let Some(children) = private.ctx.children.as_ref() {
            for (_, child) in children.iter() {
                child.signal(Signal::Stop);
            }
        }
    }
    if private.phase == Phase::Stopping && private.ctx.children_count() == 0 {
        guarded(|| actor.stopped(&mut private.ctx));
        finish(cell, private, rx);
        return Some(Turn::Stopped);
    }
    None
}

/// Runs a lifecycle hook of a stopping actor; a panic in it is contained, and stopping goes on.
fn guarded(hook: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(hook));
}

/// The end of an actor: drop its state, stop accepting signals, report to the parent.
fn finish<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    rx: &mut Consumer<'_, Envelope<A>>,
) {
    // Drop the state outside any hook: it may hold addresses of other actors.
    drop(private.actor.take());
    rx.terminate();
    drop(cell.signals.take_all());
    private.ctx.children = None;
    match &cell.parent {
        ParentLink::Root { shard, key } => private.ctx.system.unregister(*shard, *key),
        ParentLink::Actor { parent, key } => parent.signal(Signal::ChildStopped(*key)),
    }
    private.ctx.system.actor_finished();
}
