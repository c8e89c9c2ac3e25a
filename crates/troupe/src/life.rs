//! An actor's life outside the hot loop: one data-carrying state machine ([`Life`]), and the
//! functions that move it, each run on the actor's own turn.
//!
//! # States
//! ```text
//!   Starting ──first turn: `started`──► Running ◄──────────── Restart: new instance, `restarted`
//!                                        │  ▲  │                          ▲
//!                      ctx.await_then    │  │  │ panic, link failed,      │
//!                                        ▼  │  │ escalation, or a         │
//!                Awaiting(continuation) ─┘  │  │ permanent child's        │
//!                 Resume(its id): runs it   │  ▼ own ctx.stop() (Exited) │
//!                                           │ Failed(f) ──report──► Suspended(f) (supervisor told;
//!                                           │   (top-level: stops)      messages wait)
//!   any state but Stopping ──Stop signal, ctx.stop()──► Stopping(reason) ──children all
//!                                                        stopped──► finished (cell released)
//! ```
//!
//! # Transitions
//! | from                   | event                                  | to                      |
//! |------------------------|----------------------------------------|-------------------------|
//! | `Starting`             | first turn (`started` runs)            | `Running`               |
//! | `Running`              | `ctx.await_then`                       | `Awaiting`              |
//! | `Awaiting(id)`         | `Resume(id)` (continuation runs)       | `Running`               |
//! | `Awaiting(id)`         | `Resume(other id)` (stale)             | unchanged               |
//! | `Starting`, `Running`, `Awaiting`, `Suspended` | panic, `LinkFailed`, escalation | `Failed`  |
//! | `Running`, `Awaiting`  | `ctx.stop()` of a permanent supervised child | `Failed(Exited)`  |
//! | `Failed(f)`            | reported (child of an actor)           | `Suspended(f)`          |
//! | `Failed(f)`            | reported (top-level)                   | `Stopping(Failed(f))`   |
//! | any but `Stopping`     | `Restart` (factory builds, `restarted` runs) | `Running`         |
//! | any but `Stopping`     | `Restart`, factory panics              | `Failed(FactoryPanicked)` |
//! | any but `Stopping`     | `Stop` signal, `ctx.stop()`            | `Stopping`              |
//! | `Stopping`             | its last child reports it stopped      | finished                |
//!
//! Every transition sets the new state before it runs user code (a hook, a factory, a
//! continuation, a destructor), so a panic in that code is recorded against a consistent state
//! (`record_panic`), and the next turn carries on from there. Signals are handled one at a time
//! from the batch kept in [`ActorState::pending`], so one that panics does not lose the rest.
//!
//! The hot loop (`turn.rs`) looks at none of this: it runs messages while `Context::attention`
//! is clear, and calls [`attend`] when it is set.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use crate::actor::{Actor, Awaiting, Context, Drain, Factory};
use crate::bounded::Bound;
use crate::drain::{push_own, DrainMark};
use crate::erased::{ErasedCell, ErasedRef, Extras};
use crate::failure::{Failure, StopReason};
use crate::id::ActorId;
use crate::lazy::LazyBox;
use crate::loom::Ordering;
use crate::raw::{Cell, Discard, Envelope, Turn};
use crate::runtime::{RootKey, SystemShared};
use crate::signal::{Signal, SignalBatch, SignalStack};
use crate::supervision::children::Decision;
use crate::supervision::Restart;
use crate::watch::{ActorWatch, Described, LifeState, Listed};

/// An actor's cell: the raw cell of the actor type (see `raw/cell.rs`).
pub(crate) type ActorCell<A> = Cell<A>;

/// Where an actor is in its life. See the module note for the transitions.
pub(crate) enum Life<A: Actor> {
    /// Spawned; `started` has not run yet.
    Starting,
    /// Handling messages.
    Running,
    /// Holding its mailbox while a future it chose to await runs.
    Awaiting(Box<Awaiting<A>>),
    /// Failed; not yet reported to its supervisor.
    Failed(Box<Failure>),
    /// Failed and reported; its supervisor decides (restart or stop). Messages wait.
    Suspended(Box<Failure>),
    /// Mailbox closed, waiting for its children to stop; then it finishes.
    Stopping(Box<StopReason>),
}

impl<A: Actor> Life<A> {
    fn is_stopping(&self) -> bool {
        matches!(self, Life::Stopping(_))
    }
}

/// What any thread may read of an actor (`Target::Shared`),
/// `repr(C)` with `extras` first: every send reads that pointer, and the fields after it keep
/// it a cache line away from the actor's private state, which its turn writes with every
/// message (see the `layout` test below).
#[repr(C)]
pub(crate) struct ActorShared {
    /// Watchers, links, names, counters, and a bounded mailbox's admission.
    pub(crate) extras: LazyBox<Extras>,
    pub(crate) signals: SignalStack,
    pub(crate) parent: ParentLink,
    pub(crate) system: Arc<SystemShared>,
}

impl ActorShared {
    /// Admission to the actor's mailbox, if it is bounded.
    #[inline]
    pub(crate) fn bound(&self) -> Option<&Bound> {
        self.extras.get().and_then(|extras| extras.bound.as_ref())
    }

    /// What an observed system keeps of the actor, if the system is observed.
    #[inline]
    pub(crate) fn watch(&self) -> Option<&ActorWatch> {
        self.extras.get().and_then(|extras| extras.watch.as_deref())
    }
}

/// What an actor reports to when it fails or stops.
pub(crate) enum ParentLink {
    /// A top-level actor: supervised by the system, registered here.
    Root(RootKey),
    /// A child: its parent, and its key in the parent's children.
    Actor { parent: ErasedRef, key: usize },
}

impl ParentLink {
    /// The parent's id, for a child.
    pub(crate) fn actor_id(&self) -> Option<ActorId> {
        match self {
            ParentLink::Root(_) => None,
            ParentLink::Actor { parent, .. } => Some(parent.actor_id()),
        }
    }
}

/// What only the running turn touches (`Target::Private`).
pub(crate) struct ActorState<A: Actor> {
    /// `None` only while it is being rebuilt, or after it finished.
    pub(crate) actor: Option<A>,
    pub(crate) ctx: Context<A>,
    pub(crate) life: Life<A>,
    /// Signals taken from the stack and not yet handled, oldest first.
    pub(crate) pending: SignalBatch,
}

impl<A: Actor> ActorState<A> {
    pub(crate) fn new(actor: A, ctx: Context<A>) -> Self {
        Self {
            actor: Some(actor),
            ctx,
            life: Life::Starting,
            pending: SignalBatch::new(),
        }
    }

    /// True when the next message can be handled at once: running, with its value, and nothing
    /// else to do. `attention` is clear only then (`settle` keeps it so, and everything that
    /// changes the life or asks for a change sets it), so one flag answers.
    #[inline]
    pub(crate) fn takes_messages_now(&self) -> bool {
        debug_assert!(
            self.ctx.attention || (matches!(self.life, Life::Running) && self.actor.is_some())
        );
        !self.ctx.attention
    }

    /// Recomputes whether the hot loop must call [`attend`].
    fn settle(&mut self) {
        self.ctx.attention = !matches!(self.life, Life::Running)
            || self.ctx.stop_requested
            || self.ctx.drain_done()
            || self
                .ctx
                .rare
                .as_ref()
                .is_some_and(|r| r.awaiting.is_some() || r.parked.is_some())
            || !self.pending.is_empty()
            || self.actor.is_none();
    }
}

impl<A: Actor> ErasedCell for Cell<A> {
    fn signal(&self, signal: Signal) {
        self.shared.signals.push(signal);
        // After termination the signal stays in the stack and is freed with the cell.
        self.notify();
    }

    fn actor_id(&self) -> ActorId {
        self.id()
    }

    fn extras(&self) -> &Extras {
        self.shared.extras.get_or_init()
    }
}

impl<A: Actor> Listed for Cell<A> {
    fn describe(&self) -> Described {
        let extras = self.shared.extras.get();
        Described {
            id: self.id(),
            watch: extras.and_then(|e| e.watch.clone()),
            names: extras.map_or_else(Vec::new, |e| e.lock().names.clone()),
            mailbox_len: match self.shared.bound() {
                Some(bound) => bound.len(),
                None => self.mailbox_len(),
            },
            processed: self.processed(),
            restarts: extras.map_or(0, |e| e.restarts.load(Ordering::Relaxed)),
            closed: self.is_closed(),
        }
    }
}

/// Tells an observer where the actor's life is now (only an observed actor has a watch).
pub(crate) fn publish<A: Actor>(cell: &Cell<A>, life: &Life<A>) {
    if let Some(watch) = cell.shared.watch() {
        watch.set_state(match life {
            Life::Starting => LifeState::Starting,
            Life::Running => LifeState::Running,
            Life::Awaiting(_) => LifeState::Awaiting,
            Life::Failed(_) => LifeState::Failed,
            Life::Suspended(_) => LifeState::Suspended,
            Life::Stopping(_) => LifeState::Stopping,
        });
    }
}

/// What `attend` found.
pub(crate) enum Attended {
    /// Carry on (run messages if running, else try to go idle).
    Continue,
    /// The actor has finished and its mailbox is terminated: end the turn with `finish`.
    Finished,
}

/// Handles everything that needs attention: pending signals, the first turn, requests made by
/// handlers, a failure to report, a stop to complete, a parked message. Runs on the actor's
/// turn.
#[cold]
pub(crate) fn attend<A: Actor>(turn: &mut Turn<'_, '_, A>) -> Attended {
    // The first turn runs `started` (before any signal: an actor stopped before it started
    // still starts, then stops).
    if let Life::Starting = turn.parts().2.life {
        let me = turn.arc();
        let (_, _, state) = turn.parts();
        state.ctx.me = Some(me);
        state.life = Life::Running;
        if let Some(actor) = state.actor.as_mut() {
            actor.started(&mut state.ctx);
        }
    }
    // An await a handler began: before the signals, one of which may already be its result
    // (the future can finish before the turn that started it has ended).
    {
        let (_, _, state) = turn.parts();
        if let Some(awaiting) = state.ctx.take_awaiting() {
            if matches!(state.life, Life::Running) {
                state.life = Life::Awaiting(awaiting);
            }
        }
    }
    // Signals, one at a time: the rest stay in `pending` if one panics.
    loop {
        let (_, _, state) = turn.parts();
        let Some(signal) = state.pending.pop() else {
            break;
        };
        on_signal(turn, signal);
        // A continuation run by `Resume` may itself begin an await.
        let (_, _, state) = turn.parts();
        if let Some(awaiting) = state.ctx.take_awaiting() {
            if matches!(state.life, Life::Running) {
                state.life = Life::Awaiting(awaiting);
            }
        }
    }
    // A stop the handler asked for (ignored if it also failed: the failure wins), which may
    // be a permanent child's exit, a failure to report.
    if std::mem::take(&mut turn.parts().2.ctx.stop_requested) {
        on_stop_request(turn);
    }
    // A failure to report.
    let failed = {
        let (_, _, state) = turn.parts();
        match std::mem::replace(&mut state.life, Life::Running) {
            Life::Failed(failure) => Some(failure),
            other => {
                state.life = other;
                None
            }
        }
    };
    if let Some(failure) = failed {
        report_failure(turn, failure);
    }
    // A drain that has reached its mark with nothing left in flight.
    if matches!(turn.parts().2.life, Life::Running) && turn.parts().2.ctx.drain_done() {
        begin_stop(turn, StopReason::Normal);
    }
    // A stop to complete.
    {
        let (_, _, state) = turn.parts();
        if state.life.is_stopping() && state.ctx.children_count() == 0 {
            finish(turn);
            return Attended::Finished;
        }
    }
    // A message handed off while the actor could not take it goes first, ahead of the mailbox.
    let (_, _, state) = turn.parts();
    if matches!(state.life, Life::Running) && !state.ctx.stop_requested {
        if let Some(actor) = state.actor.as_mut() {
            if let Some(parked) = state.ctx.rare.as_mut().and_then(|r| r.parked.take()) {
                parked.deliver(actor, &mut state.ctx);
            }
        }
    }
    state.settle();
    Attended::Continue
}

fn on_signal<A: Actor>(turn: &mut Turn<'_, '_, A>, signal: Signal) {
    match signal {
        Signal::Stop => stop(turn),
        Signal::Drain => begin_drain(turn),
        Signal::PipeEnded => turn.parts().2.ctx.pipe_ended(),
        Signal::DrainReached => turn.parts().2.ctx.drain_reached(),
        Signal::ChildStopped { key, reason } => {
            let (cell, _, state) = turn.parts();
            if let Some(child) = state.ctx.rare.as_mut().and_then(|r| r.children.remove(key)) {
                tracing::trace!(actor = %cell.id(), child = %child.cell.actor_id(), %reason, "child stopped");
            }
        }
        Signal::ChildFailed { key, failure } => supervise(turn, key, failure),
        Signal::Restart(reason) => restart(turn, reason),
        Signal::LinkFailed(id) => {
            let (cell, _, state) = turn.parts();
            record_failure(cell, state, Failure::LinkFailed(id));
        }
        Signal::Resume { id, output } => resume(turn, id, output),
        Signal::Crash => crash(turn),
    }
}

/// A crash a simulation injected: the actor, if running, fails as it takes its next message,
/// before handling it (a told one goes back to the instance's `undelivered`, an asker is told
/// `Panicked`).
fn crash<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let (cell, mut inbox, state) = turn.parts();
    if !matches!(state.life, Life::Running) {
        return;
    }
    if let Some(actor) = state.actor.as_mut() {
        let ctx = &mut state.ctx;
        // A panic in the hook is contained: the failure reported is the crash.
        let given = catch_unwind(AssertUnwindSafe(|| {
            inbox.give_back_next(actor, ctx, Discard::Panicked)
        }));
        if let (Ok(true) | Err(_), Some(bound)) = (given, cell.shared.bound()) {
            bound.release(1);
        }
    }
    record_failure(
        cell,
        state,
        Failure::Panicked("a crash injected by the simulation".to_owned()),
    );
}

/// Runs the continuation of the await numbered `id`, if the actor still awaits it.
fn resume<A: Actor>(turn: &mut Turn<'_, '_, A>, id: u32, output: Box<dyn Any + Send>) {
    let (_, _, state) = turn.parts();
    let awaiting = match std::mem::replace(&mut state.life, Life::Running) {
        Life::Awaiting(awaiting) if awaiting.id == id => awaiting,
        other => {
            // A late result of an await the actor no longer waits for (it was restarted, or
            // stopped): dropped.
            state.life = other;
            return;
        }
    };
    if let Some(actor) = state.actor.as_mut() {
        (awaiting.resume)(actor, &mut state.ctx, output);
    }
}

/// Records a failure (a panic in a turn, a linked actor's failure, an escalation); `attend`
/// reports it.
fn record_failure<A: Actor>(cell: &Cell<A>, state: &mut ActorState<A>, failure: Failure) {
    let id = cell.id();
    let registered = cell
        .shared
        .extras
        .get()
        .and_then(|extras| extras.lock().names.first().cloned());
    let name = registered.as_deref();
    match state.life {
        // Already on its way out: its hooks are guarded one by one.
        Life::Stopping(_) => return,
        // The first failure is the one reported.
        Life::Failed(_) => return,
        _ => {}
    }
    tracing::warn!(actor = %id, actor_type = std::any::type_name::<A>(), name = name.unwrap_or(""), %failure, "actor failed");
    // An await in progress is abandoned with the instance that started it.
    state.life = Life::Failed(Box::new(failure));
    state.ctx.attention = true;
    if let Some(watch) = cell.shared.watch() {
        watch.failed();
    }
}

/// `Target::failed`: a panic unwound out of a turn. Runs no user code.
pub(crate) fn record_panic<A: Actor>(turn: &mut Turn<'_, '_, A>, panic: &(dyn Any + Send)) {
    let (cell, _, state) = turn.parts();
    record_failure(cell, state, Failure::Panicked(Failure::from_panic(panic)));
}

/// Tells the supervisor about a failure and suspends; a top-level actor (supervised by the
/// system) stops instead.
fn report_failure<A: Actor>(turn: &mut Turn<'_, '_, A>, failure: Box<Failure>) {
    let (cell, _, state) = turn.parts();
    match &cell.shared.parent {
        ParentLink::Actor { parent, key } => {
            state.life = Life::Suspended(failure.clone());
            parent.signal(Signal::ChildFailed {
                key: *key,
                failure: *failure,
            });
        }
        ParentLink::Root(_) => match supervise_self(state, &failure, cell.shared.system.now()) {
            // A top-level supervised actor: the system restarts it, as a parent would.
            Ok(delay) => {
                state.life = Life::Suspended(failure.clone());
                let me = turn.arc();
                let restart = Signal::Restart(Some(*failure));
                match delay {
                    Some(delay) => {
                        let timers = me.shared.system.timers().clone();
                        timers.schedule(delay, Box::new(move || me.signal(restart)));
                    }
                    None => me.signal(restart),
                }
            }
            Err(failure) => {
                if matches!(failure, Failure::Escalated { .. }) {
                    // Past its restart intensity there is no supervisor above to decide: it
                    // stops for good, and its callers will only see `Stopped`. Said loudly, and
                    // counted (`System::escalations`).
                    cell.shared.system.escalated();
                    let name = cell
                        .shared
                        .extras
                        .get()
                        .and_then(|extras| extras.lock().names.first().cloned());
                    tracing::error!(
                        actor = %cell.id(),
                        actor_type = std::any::type_name::<A>(),
                        name = name.as_deref().unwrap_or(""),
                        %failure,
                        "a top-level supervised actor failed more often than its restart intensity allows: it stops for good"
                    );
                }
                begin_stop(turn, StopReason::Failed(failure))
            }
        },
    }
}

/// The system's decision for a failed top-level actor: restart it (after this delay), or stop
/// it with this failure (it is not supervised, its restart policy says no, or it failed too
/// often: escalated).
fn supervise_self<A: Actor>(
    state: &mut ActorState<A>,
    failure: &Failure,
    now: Instant,
) -> Result<Option<std::time::Duration>, Failure> {
    let factory = state.ctx.rare.as_mut().and_then(|r| r.factory.as_mut());
    let Some(Factory {
        restart,
        own: Some((strategy, intensity)),
        ..
    }) = factory
    else {
        return Err(failure.clone());
    };
    if !restart.restarts_after(failure) {
        return Err(failure.clone());
    }
    intensity
        .admit(strategy, now)
        .ok_or_else(|| Failure::Escalated {
            child: Box::new(failure.clone()),
        })
}

/// `ctx.stop()`: a permanent supervised child exits to its supervisor (Erlang's permanent child
/// type: it is restarted); any other actor stops.
fn on_stop_request<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let (cell, _, state) = turn.parts();
    if matches!(
        state.life,
        Life::Stopping(_) | Life::Failed(_) | Life::Suspended(_)
    ) {
        // Stopping already, or failed: its supervisor decides.
        return;
    }
    // Supervised by a parent, or by the system (a top-level supervised actor).
    let permanent_child = state
        .ctx
        .rare
        .as_ref()
        .and_then(|r| r.factory.as_ref())
        .is_some_and(|f| {
            f.restart == Restart::Permanent
                && (matches!(cell.shared.parent, ParentLink::Actor { .. }) || f.own.is_some())
        });
    if permanent_child && matches!(state.life, Life::Running | Life::Awaiting(_)) {
        state.life = Life::Failed(Box::new(Failure::Exited));
        if let Some(watch) = cell.shared.watch() {
            watch.failed();
        }
    } else {
        begin_stop(turn, StopReason::Normal);
    }
}

/// A stop asked for (`Addr::stop`, a stopping parent, shutdown). During a drain it makes the
/// drain a plain stop: an actor already stopping after its drain stops its children now.
fn stop<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let (_, _, state) = turn.parts();
    if state.ctx.draining() {
        state.ctx.rare_mut().drain = Drain::No;
        if state.life.is_stopping() {
            if let Some(children) = state.ctx.children() {
                for child in children.cells() {
                    child.signal(Signal::Stop);
                }
            }
            return;
        }
    }
    begin_stop(turn, StopReason::Normal);
}

/// A drain asked for: a mark goes at the end of the mailbox (`drain.rs`). A stopping actor is
/// past draining.
fn begin_drain<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let (_, _, state) = turn.parts();
    if state.life.is_stopping() || state.ctx.draining() {
        return;
    }
    state.ctx.rare_mut().drain = Drain::Marked;
    let me: ErasedRef = turn.arc();
    let _ = push_own(turn.parts().0, DrainMark(me));
}

/// Begins stopping: `stopping` runs, the mailbox closes (queued messages are discarded and their
/// askers told), and the children are asked to stop (to drain, if this actor drained).
fn begin_stop<A: Actor>(turn: &mut Turn<'_, '_, A>, reason: StopReason) {
    {
        let (_, _, state) = turn.parts();
        if state.life.is_stopping() {
            return;
        }
        state.life = Life::Stopping(Box::new(reason));
        let parked = state.ctx.rare.as_mut().and_then(|rare| {
            rare.awaiting = None;
            rare.parked.take()
        });
        if let Some(actor) = state.actor.as_mut() {
            guarded(|| actor.stopping(&mut state.ctx));
        }
        // Taken before anything still in the mailbox: it goes back first.
        if let Some(parked) = parked {
            give_back(state, parked);
        }
    }
    let discarded = turn.close(give_back);
    let (cell, _, state) = turn.parts();
    // Messages it will never take: an observer's dead letters.
    if let Some(watch) = cell.shared.watch() {
        watch
            .observer
            .dead_letters
            .fetch_add(discarded as u64, Ordering::Relaxed);
    }
    // Its names go now, not when it finishes: a new actor may take them while this one waits
    // for its children.
    if let Some(extras) = cell.shared.extras.get() {
        let names = {
            let mut inner = extras.lock();
            inner.stopping = true;
            std::mem::take(&mut inner.names)
        };
        for name in names {
            cell.shared.system.names().release(&name, cell.id());
        }
    }
    if let Some(bound) = cell.shared.bound() {
        // Senders waiting for room wake to find the mailbox closed.
        bound.release(discarded);
    }
    let how = if state.ctx.draining() {
        || Signal::Drain
    } else {
        || Signal::Stop
    };
    if let Some(children) = state.ctx.children() {
        for child in children.cells() {
            child.signal(how());
        }
    }
    // Its streams end now: nothing pulled from them could be delivered any more.
    for stream in state.ctx.take_streams() {
        stream.abort();
    }
}

/// Applies this actor's supervisor strategy to a failed (or exited) child.
fn supervise<A: Actor>(turn: &mut Turn<'_, '_, A>, key: usize, failure: Failure) {
    let (cell, _, state) = turn.parts();
    let stopping = state.life.is_stopping();
    let strategy = match state.actor.as_ref() {
        Some(actor) => match catch_unwind(AssertUnwindSafe(|| actor.supervisor_strategy())) {
            Ok(strategy) => strategy,
            Err(panic) => {
                // The child cannot be left waiting for a decision: it stops, and this actor
                // fails (its own supervisor decides about it).
                if let Some(child) = state.ctx.children().and_then(|c| c.get(key)) {
                    child.signal(Signal::Stop);
                }
                record_failure(cell, state, Failure::Panicked(Failure::from_panic(&*panic)));
                return;
            }
        },
        None => Default::default(),
    };
    let Some(children) = state.ctx.rare.as_mut().map(|r| &mut r.children) else {
        return;
    };
    let now = cell.shared.system.now();
    match children.decide(key, &failure, &strategy, stopping, now) {
        Decision::Nothing => {}
        Decision::Stop(child) => child.signal(Signal::Stop),
        Decision::Escalate(escalated) => {
            tracing::warn!(actor = %cell.id(), "restart intensity exceeded: escalating");
            record_failure(cell, state, escalated);
        }
        Decision::Restart { targets, delay } => {
            for (child, reason) in targets {
                match delay {
                    Some(delay) => {
                        cell.shared.system.timers().schedule(
                            delay,
                            Box::new(move || child.signal(Signal::Restart(reason))),
                        );
                    }
                    None => child.signal(Signal::Restart(reason)),
                }
            }
        }
    }
}

/// Rebuilds this actor from its factory, in place: same cell, same address, same mailbox.
fn restart<A: Actor>(turn: &mut Turn<'_, '_, A>, reason: Option<Failure>) {
    let (cell, _, state) = turn.parts();
    if state.life.is_stopping() {
        return;
    }
    if state.ctx.rare.as_ref().is_none_or(|r| r.factory.is_none()) {
        // Not restartable (nothing to rebuild it from): it stops.
        begin_stop(turn, StopReason::Normal);
        return;
    }
    // Children of the old instance are stopped; they report later and leave the table then.
    if let Some(children) = state.ctx.children() {
        for child in children.cells() {
            child.signal(Signal::Stop);
        }
    }
    // Suspended until the new instance exists: a panic below is recorded against this (and
    // reported again), and no message is handled meanwhile.
    let suspended = reason.clone().unwrap_or(Failure::Exited);
    if let Life::Suspended(previous) =
        std::mem::replace(&mut state.life, Life::Suspended(Box::new(suspended)))
    {
        tracing::debug!(actor = %cell.id(), failure = %previous, "restarting after a failure");
    }
    let rare = state.ctx.rare_mut();
    rare.awaiting = None;
    // The old instance's timers end with it; the new one sets its own (`restarted`).
    if let Some(alive) = rare.timers_alive.take() {
        alive.store(false, Ordering::Relaxed);
    }
    // The old instance may be inconsistent (it panicked): dropped without hooks. (An actor
    // restarted before its first turn is simply built anew; `restarted` runs in place of
    // `started`.)
    crate::reply::drop_failed(state.actor.take());
    let factory = state
        .ctx
        .rare_mut()
        .factory
        .as_mut()
        .expect("checked above");
    match catch_unwind(AssertUnwindSafe(|| (factory.make)())) {
        Ok(fresh) => {
            let actor = state.actor.insert(fresh);
            state.life = Life::Running;
            cell.shared
                .extras
                .get_or_init()
                .restarts
                .fetch_add(1, Ordering::Relaxed);
            if let Some(watch) = cell.shared.watch() {
                watch.restarted();
            }
            tracing::debug!(actor = %cell.id(), "actor restarted");
            // A panic here is a new failure, recorded like any other.
            actor.restarted(&mut state.ctx, reason.as_ref());
        }
        Err(panic) => {
            state.life = Life::Failed(Box::new(Failure::FactoryPanicked(Failure::from_panic(
                &*panic,
            ))));
            if let Some(watch) = cell.shared.watch() {
                watch.failed();
            }
        }
    }
}

/// A message the stopping actor will never handle: a told one goes to its handler's
/// `undelivered` (askers are told `Stopped`); with no instance left, it is discarded. A panic
/// in the hook is contained.
fn give_back<A: Actor>(state: &mut ActorState<A>, envelope: Envelope<A>) {
    let _ = catch_unwind(AssertUnwindSafe(|| match state.actor.as_mut() {
        Some(actor) => envelope.undelivered(actor, &mut state.ctx, Discard::Stopped),
        None => envelope.discard(Discard::Stopped),
    }));
}

/// Runs a hook of a stopping actor (or a watcher); a panic in it is contained, and stopping goes
/// on.
fn guarded(hook: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(hook));
}

/// The end of an actor: `stopped` runs, its state is dropped, its mailbox terminated, and its
/// watchers, links and parent are told.
fn finish<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let reason = {
        let (_, _, state) = turn.parts();
        if let Some(actor) = state.actor.as_mut() {
            guarded(|| actor.stopped(&mut state.ctx));
        }
        // Dropped outside any hook: it may hold addresses of other actors.
        let actor = state.actor.take();
        let failed = matches!(&state.life, Life::Stopping(reason) if matches!(**reason, StopReason::Failed(_)));
        guarded(move || {
            if failed {
                crate::reply::drop_failed(actor);
            } else {
                drop(actor);
            }
        });
        match std::mem::replace(
            &mut state.life,
            Life::Stopping(Box::new(StopReason::Normal)),
        ) {
            Life::Stopping(reason) => *reason,
            _ => unreachable!("an actor finishes only from Stopping"),
        }
    };
    turn.terminate();
    let (cell, _, state) = turn.parts();
    // Signals that came after the stop began are moot now.
    drop(std::mem::replace(&mut state.pending, SignalBatch::new()));
    drop(cell.shared.signals.take_all());
    // A child spawned after the stop began sweeping the children (in `stopped`, say) would
    // outlive its parent unseen by anyone, and keep a shutdown waiting for ever: every child
    // still in the table is stopped now (its report will find this actor gone).
    if let Some(children) = state.ctx.children() {
        for child in children.cells() {
            child.signal(Signal::Stop);
        }
    }
    // Attached streams end with the actor, not at their next item.
    for stream in state.ctx.take_streams() {
        stream.abort();
    }
    state.ctx.rare = None;
    // Its own address: the alive reference still holds the cell until the turn returns.
    state.ctx.me = None;
    tracing::debug!(actor = %cell.id(), %reason, "actor stopped");
    let id = cell.id();
    // The end is recorded even when nothing watched the actor yet: `stopped()` called later
    // creates no fresh extras but finds this one, and is answered at once.
    {
        let extras = cell.shared.extras.get_or_init();
        let (watchers, links, names) = {
            let mut inner = extras.lock();
            inner.ended = Some(reason.clone());
            (
                std::mem::take(&mut inner.watchers),
                std::mem::take(&mut inner.links),
                std::mem::take(&mut inner.names),
            )
        };
        for name in names {
            cell.shared.system.names().release(&name, id);
        }
        if matches!(reason, StopReason::Failed(_)) {
            for (_, link) in links {
                if let Some(other) = link.upgrade() {
                    other.signal(Signal::LinkFailed(id));
                }
            }
        }
        for (_, watcher) in watchers {
            guarded(|| watcher(id, &reason));
        }
    }
    match &cell.shared.parent {
        ParentLink::Root(root) => cell.shared.system.unregister(*root),
        ParentLink::Actor { parent, key } => {
            parent.signal(Signal::ChildStopped { key: *key, reason })
        }
    }
    if let Some(watch) = cell.shared.watch() {
        watch.set_state(LifeState::Stopped);
        watch.observer.finished(id);
    }
    cell.shared.system.actor_finished();
}

/// Keeps a handed-off message the actor cannot take at once (see `turn.rs`).
pub(crate) fn park<A: Actor>(state: &mut ActorState<A>, envelope: Envelope<A>) {
    // At most one message is ever parked: a hand-off reaches only an actor that takes messages
    // at once (`IdleMode::Open`), and a parked one is delivered before it can idle open again.
    let rare = state.ctx.rare_mut();
    debug_assert!(rare.parked.is_none(), "two parked messages");
    if let Some(earlier) = rare.parked.replace(envelope) {
        rare.parked = Some(earlier);
        tracing::error!("a second message was handed off to an actor that could not take it");
    }
    state.ctx.attention = true;
}

/// What a sender reads of a cell (the header, the mailbox's producer side, and the actor's
/// extras pointer) and what the actor's turn writes with every message (its private state)
/// never share a cache line: a cell starts 16 bytes into a 16-byte-aligned allocation (its
/// reference counts first), so 48 bytes between the two put a line boundary between them
/// whatever the address. Before, the extras pointer sat in the line of the private state for
/// one address in four, and every send to a busy actor then waited for the line to come back
/// from the core running it (the counting actor's two speeds).
#[cfg(all(test, not(troupe_loom), target_pointer_width = "64"))]
mod layout {
    #[test]
    fn what_senders_read_is_a_line_away_from_the_private_state() {
        struct OnePointer(#[allow(dead_code)] Box<u8>);
        impl crate::Actor for OnePointer {}
        let (mailbox, shared, private) = super::ActorCell::<OnePointer>::offsets();
        let extras_end = shared
            + std::mem::offset_of!(super::ActorShared, extras)
            + std::mem::size_of::<usize>();
        // The header and the mailbox come first; the extras pointer is the last thing a
        // sender reads.
        assert!(mailbox < shared);
        assert!(
            extras_end + 48 <= private,
            "senders read up to byte {extras_end}, the private state starts at {private}"
        );
    }
}
