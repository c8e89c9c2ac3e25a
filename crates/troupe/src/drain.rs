//! An orderly stop: an actor handles what was sent to it before the stop was asked for, waits
//! for the work it started with `pipe`, then stops; its children drain the same way first.
//! Akka's `PoisonPill`, kameo's `stop_gracefully` and Erlang's orderly shutdown, with one more
//! promise: piped work in flight is finished, not dropped.
//!
//! # Protocol
//! 1. A [`DrainMark`] goes at the end of the actor's mailbox. `Addr::drain` pushes it from the
//!    caller's thread, so everything that thread sent before is ahead of it (per-sender order).
//!    A draining parent and `System::shutdown_draining` send the `Drain` signal instead
//!    (signals overtake messages), which the actor answers by pushing its own mark
//!    ([`Drain::Marked`]): what was sent before the signal was handled is ahead of it.
//! 2. The actor handles its messages as usual until the mark ([`Drain::Reached`]).
//! 3. From then on it stops as soon as no `pipe` it started is still on its way
//!    ([`Rare::pipes`](crate::actor::Rare)). Until then it handles what comes, piped results
//!    included. (`await_then` needs nothing: it holds the mailbox, so the mark waits for it.)
//! 4. The stop is `begin_stop`'s, except that children are drained rather than stopped; what is
//!    left in the mailbox then (sent after the drain was asked for) is discarded as by any stop:
//!    askers get `Stopped`.
//!
//! A stop (`Addr::stop`, a deadline passed) during a drain makes it a plain stop, children
//! included. Every pipe ends in exactly one delivery to its actor, its result ([`Piped`]) or,
//! if its future was dropped unfinished (it panicked, the runtime shut down), a [`PipeGone`]:
//! so the count cannot stay above zero for a pipe that will never deliver.

use std::marker::PhantomData;

use crate::actor::kind::Kind;
use crate::actor::{Accepts, Actor, Context, Drain, Message};
use crate::erased::ErasedRef;
use crate::raw::{Cell, Deliver, Discard};
use crate::reply::Deferred;
use crate::signal::Signal;

/// The end of what a drain handles, in the actor's own mailbox. A mailbox that drops its
/// oldest messages when full may drop it too: everything ahead of it is gone then, and the
/// actor is told the mark was reached.
pub(crate) struct DrainMark(pub(crate) ErasedRef);

impl<A: Actor> Deliver<A> for DrainMark {
    fn deliver(self, _actor: &mut A, ctx: &mut Context<A>) {
        ctx.drain_reached();
    }

    fn discard(self, why: Discard) {
        if let Discard::Overflow = why {
            self.0.signal(Signal::DrainReached);
        }
    }
}

/// A piped future's result, on its way to the actor that started it (`Context::pipe`).
pub(crate) struct Piped<M, K> {
    msg: M,
    me: ErasedRef,
    kind: PhantomData<fn() -> K>,
}

impl<M, K> Piped<M, K> {
    pub(crate) fn new(msg: M, me: ErasedRef) -> Self {
        Piped {
            msg,
            me,
            kind: PhantomData,
        }
    }
}

impl<A: Accepts<M, K>, M: Message, K: Kind> Deliver<A> for Piped<M, K> {
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        // Counted out before the handler runs: a handler that pipes again counts in again, and
        // the drain, checked after the handler, sees both.
        ctx.pipe_ended();
        actor.accept(self.msg, Deferred::nowhere(), ctx);
    }

    fn discard(self, why: Discard) {
        // Dropped by a full mailbox's policy: still counted out. (Any other discard: the actor
        // is stopping, and counts nothing any more.)
        if let Discard::Overflow = why {
            self.me.signal(Signal::PipeEnded);
        }
    }

    /// The message's type, not this wrapper's: its span and its handler time are the
    /// message's, as for a tell.
    fn message_name(&self) -> &'static str {
        std::any::type_name::<M>()
    }
}

/// A piped future dropped before it finished (it panicked, or its runtime shut down).
pub(crate) struct PipeGone(pub(crate) ErasedRef);

impl<A: Actor> Deliver<A> for PipeGone {
    fn deliver(self, _actor: &mut A, ctx: &mut Context<A>) {
        ctx.pipe_ended();
    }

    fn discard(self, why: Discard) {
        if let Discard::Overflow = why {
            self.0.signal(Signal::PipeEnded);
        }
    }
}

/// Puts one of the runtime's own payloads (a drain's mark, a pipe's result) in `cell`'s
/// mailbox, counted in by a bounded mailbox whatever the room (the turn counts it out like any
/// message). Gives it back if the actor stopped.
pub(crate) fn push_own<A: Actor, P: Deliver<A>>(cell: &Cell<A>, payload: P) -> Result<(), P> {
    match cell.shared.bound() {
        None => cell.push(payload),
        Some(bound) => {
            bound.admit_anyway();
            cell.push_queued(payload).inspect_err(|_| bound.release(1))
        }
    }
}

impl<A: Actor> Context<A> {
    /// The drain's mark was reached (or dropped by an overflow policy).
    pub(crate) fn drain_reached(&mut self) {
        let rare = self.rare_mut();
        if rare.drain != Drain::Reached {
            rare.drain = Drain::Reached;
            self.attention = true;
        }
    }

    /// A pipe this actor started delivered (or was dropped).
    pub(crate) fn pipe_ended(&mut self) {
        let rare = self.rare_mut();
        rare.pipes = rare.pipes.saturating_sub(1);
        if rare.pipes == 0 && rare.drain == Drain::Reached {
            self.attention = true;
        }
    }

    /// True when a drain has reached its mark and nothing it waits for is left: the actor stops.
    pub(crate) fn drain_done(&self) -> bool {
        self.rare
            .as_ref()
            .is_some_and(|r| r.drain == Drain::Reached && r.pipes == 0 && r.awaiting.is_none())
    }

    /// True from the moment a drain was asked for.
    pub(crate) fn draining(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.drain != Drain::No)
    }
}
