//! An actor's life outside the hot loop: starting, failing, being supervised and restarted,
//! awaiting a future, stopping, and finishing.
//!
//! ```text
//!            started
//! Starting ──────────► Running ◄─────────────────────────┐
//!                       │  │ │                             │ Restart (new instance from the
//!            ctx.await_ │  │ └─ panic ─► Suspended ────────┘ factory) / Resume
//!            then       ▼  │            (supervisor told)
//!                   Awaiting ──────────────────────────────┘
//!                          │ stop requested (any phase but Starting)
//!                          ▼
//!                       Stopping ── children all stopped ──► finished (cell released)
//! ```
//!
//! Every function here runs on the actor's own turn, so it may touch `Private` freely.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::actor::{Actor, Context};
use crate::cell::{ActorCell, ChildRef, ParentLink, Private, Turn};
use crate::envelope::{Envelope, RawEnvelope};
use crate::mailbox::Consumer;
use crate::signal::Signal;
use crate::supervisor::{Failure, Restart, StopReason, StrategyKind};

/// Where an actor is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Phase {
    /// Spawned; `started` has not run yet.
    Starting,
    /// Handling messages.
    Running,
    /// Failed; its supervisor has been told and decides (restart or stop). Messages wait.
    Suspended,
    /// Holding its mailbox while a future it chose to await runs. Messages wait.
    Awaiting,
    /// Stopping: mailbox closed, waiting for its children to stop.
    Stopping,
}

impl Phase {
    /// Phases in which the actor sleeps with messages waiting in its mailbox.
    pub(crate) fn holds_messages(self) -> bool {
        matches!(self, Phase::Suspended | Phase::Awaiting)
    }
}

/// The rarely needed part of an actor's private state, allocated when first needed: for
/// supervised children (their factory), failures, parked messages and awaited futures.
pub(crate) struct Cold<A: Actor> {
    /// A failure waiting to be reported to the supervisor, or the one that stopped the actor.
    pub(crate) failure: Option<Failure>,
    /// Rebuilds the actor on restart (supervised children only).
    pub(crate) factory: Option<Box<dyn FnMut() -> A + Send>>,
    pub(crate) restart: Restart,
    /// A message handed off while the actor could not take it (failed or awaiting), delivered
    /// first when it runs again.
    pub(crate) parked: Option<RawEnvelope>,
    /// What runs when an awaited future finishes (`Context::await_then`).
    pub(crate) resume: Option<Resume<A>>,
}

impl<A: Actor> Default for Cold<A> {
    fn default() -> Self {
        Self {
            failure: None,
            factory: None,
            restart: Restart::Permanent,
            parked: None,
            resume: None,
        }
    }
}

/// A continuation of `await_then`.
pub(crate) type Resume<A> = Box<dyn FnOnce(&mut A, &mut Context<A>) + Send>;

/// A child as its parent knows it.
pub(crate) struct ChildEntry {
    pub(crate) cell: ChildRef,
    pub(crate) restart: Restart,
    /// Spawned with a factory, so it can be rebuilt.
    pub(crate) restartable: bool,
    /// Spawn order, for rest-for-one.
    pub(crate) seq: u64,
}

/// A parent's children and its recent restarts (for the intensity limit).
#[derive(Default)]
pub(crate) struct Children {
    pub(crate) slab: slab::Slab<ChildEntry>,
    pub(crate) next_seq: u64,
    restarts: VecDeque<Instant>,
}

/// Records a failure (a panic in a turn, a linked actor's failure, an escalation); the next
/// turn reports it to the supervisor.
pub(crate) fn record_failure<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    failure: Failure,
) {
    if private.ctx.phase == Phase::Stopping {
        return; // already on its way out; hooks are guarded one by one
    }
    tracing::warn!(actor = %cell.id(), %failure, "actor failed");
    private.ctx.cold_mut().failure = Some(failure);
    private.ctx.attention = true;
}

/// Reads every pending signal.
#[cold]
pub(crate) fn read_signals<A: Actor>(cell: &ActorCell<A>, private: &mut Private<A>) {
    // `change_phase` looks at what the signals changed, and recomputes the flag.
    private.ctx.attention = true;
    for signal in cell.signals.take_all() {
        match signal {
            Signal::Stop => {
                private.ctx.stop_requested = true;
                private.ctx.stop_external = true;
            }
            Signal::ChildStopped { key, reason } => {
                if let Some(children) = private.ctx.children.as_mut() {
                    if let Some(child) = children.slab.try_remove(key) {
                        tracing::trace!(actor = %cell.id(), child = %child.cell.actor_id(), %reason, "child stopped");
                    }
                }
            }
            Signal::ChildFailed { key, failure } => supervise(cell, private, key, failure),
            Signal::Restart(failure) => restart(cell, private, failure),
            Signal::LinkFailed(id) => record_failure(cell, private, Failure::LinkFailed(id)),
            Signal::Resume => {
                // The future may finish before the turn that started it has even ended (the
                // phase is then still Running): `suspended` is what counts.
                if private.ctx.suspended {
                    private.ctx.suspended = false;
                    if private.ctx.phase == Phase::Awaiting {
                        private.ctx.phase = Phase::Running;
                    }
                    let resume = private.ctx.cold.as_mut().and_then(|c| c.resume.take());
                    if let (Some(resume), Some(actor)) = (resume, private.actor.as_mut()) {
                        resume(actor, &mut private.ctx);
                    }
                }
            }
        }
    }
}

/// The lifecycle outside the hot loop. Returns the end of the turn when the actor has stopped.
#[cold]
pub(crate) fn change_phase<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    rx: &mut Consumer<'_, Envelope<A>>,
    handled: &mut usize,
) -> Option<Turn> {
    if private.ctx.phase == Phase::Starting {
        private.ctx.phase = Phase::Running;
        tracing::debug!(actor = %cell.id(), "actor started");
        if let Some(actor) = private.actor.as_mut() {
            actor.started(&mut private.ctx);
        }
    }
    if private.ctx.failure().is_some()
        && matches!(private.ctx.phase, Phase::Running | Phase::Awaiting)
    {
        report_failure(cell, private);
    }
    if private.ctx.suspended && private.ctx.phase == Phase::Running {
        private.ctx.phase = Phase::Awaiting;
    }
    if private.ctx.stop_requested && private.ctx.phase != Phase::Stopping {
        let self_stop = !private.ctx.stop_external;
        let exits_to_supervisor = self_stop
            && private
                .ctx
                .cold
                .as_ref()
                .is_some_and(|c| c.restart == Restart::Permanent && c.factory.is_some())
            && matches!(cell.parent, ParentLink::Actor { .. })
            && private.ctx.phase == Phase::Running;
        if exits_to_supervisor {
            // A permanent child that stops itself is restarted by its supervisor (Erlang's
            // "permanent" child type): report the exit and wait, like a failure.
            private.ctx.stop_requested = false;
            if let ParentLink::Actor { parent, key } = &cell.parent {
                parent.signal(Signal::ChildFailed {
                    key: *key,
                    failure: None,
                });
            }
            private.ctx.phase = Phase::Suspended;
        } else {
            begin_stop(cell, private, rx);
        }
    }
    if private.ctx.phase == Phase::Stopping && private.ctx.children_count() == 0 {
        if let Some(actor) = private.actor.as_mut() {
            guarded(|| actor.stopped(&mut private.ctx));
        }
        finish(cell, private, rx);
        return Some(Turn::Stopped);
    }
    // A message handed off while the actor could not take it goes first, ahead of the mailbox.
    if private.ctx.phase == Phase::Running
        && !private.ctx.stop_requested
        && !private.ctx.suspended
        && private.ctx.failure().is_none()
    {
        if let Some(parked) = private.ctx.cold.as_mut().and_then(|c| c.parked.take()) {
            if let Some(actor) = private.actor.as_mut() {
                // SAFETY: parked by this cell's turn from a hand-off built for `A`.
                unsafe { parked.deliver(actor, &mut private.ctx) };
                *handled += 1;
            }
        }
    }
    private.ctx.attention = private.ctx.phase != Phase::Running
        || private.ctx.stop_requested
        || private.ctx.suspended
        || private
            .ctx
            .cold
            .as_ref()
            .is_some_and(|c| c.failure.is_some() || c.parked.is_some());
    None
}

/// Tells the supervisor about a recorded failure and suspends; a top-level actor (supervised by
/// the system) is stopped instead.
fn report_failure<A: Actor>(cell: &ActorCell<A>, private: &mut Private<A>) {
    let failure = private.ctx.failure().cloned().expect("a failure to report");
    match &cell.parent {
        ParentLink::Actor { parent, key } => {
            parent.signal(Signal::ChildFailed {
                key: *key,
                failure: Some(failure),
            });
            private.ctx.phase = Phase::Suspended;
        }
        ParentLink::Root { .. } => {
            private.ctx.stop_requested = true;
            private.ctx.stop_external = true;
        }
    }
}

fn begin_stop<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    rx: &mut Consumer<'_, Envelope<A>>,
) {
    private.ctx.phase = Phase::Stopping;
    if let Some(cold) = private.ctx.cold.as_mut() {
        cold.parked = None; // dropped like the queued messages
        cold.resume = None;
    }
    if let Some(actor) = private.actor.as_mut() {
        guarded(|| actor.stopping(&mut private.ctx));
    }
    // Messages still queued are dropped: their destructors run, askers get errors, and senders
    // waiting for room in a bounded mailbox wake to find it closed.
    rx.close(|message| {
        drop(message);
        if let Some(bound) = &cell.bound {
            bound.release(1);
        }
    });
    if let Some(children) = private.ctx.children.as_ref() {
        for (_, child) in children.slab.iter() {
            child.cell.signal(Signal::Stop);
        }
    }
}

/// Applies this actor's supervisor strategy to a failed (or, `None`, self-stopped permanent)
/// child.
fn supervise<A: Actor>(
    cell: &ActorCell<A>,
    private: &mut Private<A>,
    key: usize,
    failure: Option<Failure>,
) {
    let Some(children) = private.ctx.children.as_mut() else {
        return;
    };
    let Some(entry) = children.slab.get(key) else {
        return; // stopped meanwhile
    };
    let restartable = entry.restartable
        && private.ctx.phase != Phase::Stopping
        && match entry.restart {
            Restart::Permanent => true,
            Restart::Transient => failure.is_some(),
            Restart::Temporary => false,
        };
    if !restartable {
        entry.cell.signal(Signal::Stop);
        return;
    }
    let strategy = private
        .actor
        .as_ref()
        .map(|actor| actor.supervisor_strategy())
        .unwrap_or_default();

    let now = Instant::now();
    while children
        .restarts
        .front()
        .is_some_and(|t| now.duration_since(*t) > strategy.within)
    {
        children.restarts.pop_front();
    }
    children.restarts.push_back(now);
    if children.restarts.len() > strategy.max_restarts as usize {
        // Too many restarts too fast: this actor fails, and its own supervisor decides. Its
        // children (the failing one included) stop when it is restarted or stopped.
        children.restarts.clear();
        let child = failure.unwrap_or(Failure::Panicked("exited".into()));
        tracing::warn!(actor = %cell.id(), "restart intensity exceeded: escalating");
        record_failure(
            cell,
            private,
            Failure::Escalated {
                child: Box::new(child),
            },
        );
        return;
    }

    let failed_seq = entry.seq;
    let targets: Vec<usize> = match strategy.kind {
        StrategyKind::OneForOne => vec![key],
        StrategyKind::OneForAll => children.slab.iter().map(|(k, _)| k).collect(),
        StrategyKind::RestForOne => children
            .slab
            .iter()
            .filter(|(_, c)| c.seq >= failed_seq)
            .map(|(k, _)| k)
            .collect(),
    };
    let delay = strategy.backoff.map(|b| {
        let doublings = (children.restarts.len() - 1).min(30) as u32;
        b.min.saturating_mul(1 << doublings).min(b.max)
    });
    for target in targets {
        let Some(child) = children.slab.get(target) else {
            continue;
        };
        let reason = if target == key { failure.clone() } else { None };
        let child_cell = child.cell.clone();
        match delay {
            Some(delay) if !delay.is_zero() => {
                cell.system.timers().schedule(
                    delay,
                    Box::new(move || child_cell.signal(Signal::Restart(reason))),
                );
            }
            _ => child_cell.signal(Signal::Restart(reason)),
        }
    }
}

/// Rebuilds this actor from its factory, in place: same cell, same address, same mailbox.
fn restart<A: Actor>(cell: &ActorCell<A>, private: &mut Private<A>, reason: Option<Failure>) {
    if private.ctx.phase == Phase::Stopping {
        return;
    }
    // (An actor restarted before its first turn is simply built anew: the first instance never
    // ran, and the new one's `restarted` hook runs in place of `started`.)
    // Children of the old instance are stopped; they report later and leave the table then.
    if let Some(children) = private.ctx.children.as_ref() {
        for (_, child) in children.slab.iter() {
            child.cell.signal(Signal::Stop);
        }
    }
    // The old instance may be inconsistent (it panicked): dropped without hooks.
    drop(private.actor.take());
    private.ctx.suspended = false;
    private.ctx.attention = true;
    let Some(factory) = private.ctx.cold.as_mut().and_then(|c| {
        c.resume = None;
        c.factory.as_mut()
    }) else {
        private.ctx.stop_requested = true;
        return;
    };
    match catch_unwind(AssertUnwindSafe(factory)) {
        Ok(fresh) => {
            private.ctx.cold_mut().failure = None;
            private.ctx.phase = Phase::Running;
            cell.extras
                .get_or_init()
                .restarts
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(actor = %cell.id(), "actor restarted");
            let actor = private.actor.insert(fresh);
            // A panic here is a new failure, caught by the worker like any other.
            actor.restarted(&mut private.ctx, reason.as_ref());
        }
        Err(panic) => {
            private.ctx.phase = Phase::Running; // reported (and suspended) by `change_phase`
            private.ctx.cold_mut().failure =
                Some(Failure::FactoryPanicked(Failure::from_panic(&*panic)));
        }
    }
}

/// Runs a lifecycle hook of a stopping actor; a panic in it is contained, and stopping goes on.
fn guarded(hook: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(hook));
}

/// The end of an actor: drop its state, stop accepting signals, tell its watchers, links and
/// parent.
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
    let reason = match private.ctx.cold.as_mut().and_then(|c| c.failure.take()) {
        Some(failure) => StopReason::Failed(failure),
        None => StopReason::Normal,
    };
    tracing::debug!(actor = %cell.id(), %reason, "actor stopped");
    let id = cell.id();
    if let Some(extras) = cell.extras.get() {
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
            cell.system.names().release(&name, id);
        }
        if matches!(reason, StopReason::Failed(_)) {
            for (_, link) in links {
                if let Some(other) = link.upgrade() {
                    other.signal(Signal::LinkFailed(id));
                }
            }
        }
        for (_, watcher) in watchers {
            let _ = catch_unwind(AssertUnwindSafe(|| watcher(id, &reason)));
        }
    }
    match &cell.parent {
        ParentLink::Root { shard, key } => cell.system.unregister(*shard, *key),
        ParentLink::Actor { parent, key } => {
            parent.signal(Signal::ChildStopped { key: *key, reason })
        }
    }
    cell.system.actor_finished();
}

/// Makes `Context` aware of the types above.
impl<A: Actor> Context<A> {
    pub(crate) fn children_mut(&mut self) -> &mut Children {
        self.children.get_or_insert_with(Box::default)
    }

    pub(crate) fn cold_mut(&mut self) -> &mut Cold<A> {
        self.cold.get_or_insert_with(Box::default)
    }

    pub(crate) fn failure(&self) -> Option<&Failure> {
        self.cold.as_ref().and_then(|c| c.failure.as_ref())
    }
}
