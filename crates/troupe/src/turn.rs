//! One turn of an actor: the hot loop, and how every actor type becomes a `raw::Target`.
//!
//! 1. A message handed off with the turn is delivered first, before anything else runs: the
//!    turn owns it from its first instruction. (The actor took the hand-off as it went idle,
//!    running with nothing to attend to, and only this turn has touched its state since, so it
//!    can take the message now; signals that came meanwhile were sent after it.)
//! 2. Pending signals and anything else that needs attention (`life.rs`).
//! 3. Running: up to `budget` messages from the mailbox, one at a time, in place.
//! 4. Try to go idle (`Turn::try_idle`, the turn's last access to the cell); if a message or
//!    signal slipped in meanwhile, go round again.
//!
//! A panic in a handler unwinds out of the turn to `Runnable::run`, which catches it and calls
//! `Target::failed` (`life::record_panic`): the next turn reports it to the supervisor.

use crate::actor::{Actor, Context};
use crate::life::{self, ActorShared, ActorState, Attended, Life};
use crate::loom::{Backoff, Ordering};
use crate::raw::{Cell, Discard, End, IdleMode, Inbox, Panic, Taken, Target, Turn};

impl<A: Actor> Target for A {
    type Ctx = Context<A>;
    type Shared = ActorShared;
    type Private = ActorState<A>;

    #[inline]
    fn turn(turn: Turn<'_, '_, Self>) -> End {
        run(turn)
    }

    fn failed(mut turn: Turn<'_, '_, Self>, panic: Panic) {
        life::record_panic(&mut turn, &*panic);
    }
}

/// How a run of messages ended.
enum Batch {
    /// No message ready.
    Drained,
    /// `budget` messages handled this turn.
    BudgetSpent,
    /// A handler asked for something (stop, await) or failed a link.
    Interrupted,
}

fn run<A: Actor>(mut turn: Turn<'_, '_, A>) -> End {
    take_handoff(&mut turn);
    let budget = turn.budget();
    let mut backoff = Backoff::new();
    loop {
        {
            let (cell, mut inbox, state) = turn.parts();
            if inbox.take_signaled() {
                state.pending.append(cell.shared.signals.take_all());
                state.ctx.attention = true;
            }
        }
        if turn.parts().2.ctx.attention {
            if let Attended::Finished = life::attend(&mut turn) {
                return turn.finish();
            }
            let (cell, _, state) = turn.parts();
            life::publish(cell, &state.life);
        }
        let (cell, mut inbox, state) = turn.parts();
        if state.takes_messages_now() {
            let batch = if state.ctx.timed {
                let started = std::time::Instant::now();
                let batch = run_messages(cell, &mut inbox, state, budget);
                record_time(cell, started);
                batch
            } else {
                run_messages(cell, &mut inbox, state, budget)
            };
            match batch {
                Batch::Interrupted => continue,
                Batch::BudgetSpent => return turn.yield_now(),
                Batch::Drained => {}
            }
        }
        let (_, mut inbox, state) = turn.parts();
        let running = matches!(state.life, Life::Running);
        if state.ctx.attention && running {
            continue;
        }
        let mode = if state.takes_messages_now() {
            IdleMode::Open
        } else {
            IdleMode::Holding
        };
        // A producer that claimed a slot but has not written it yet: wait a moment, then yield
        // rather than spin.
        let mid_write = running && !inbox.is_drained() && !inbox.has_ready();
        turn = match turn.try_idle(mode) {
            Ok(end) => return end,
            Err(back) => back,
        };
        if mid_write {
            backoff.snooze();
            if backoff.is_completed() {
                return turn.yield_now();
            }
        }
    }
}

/// Takes the message handed off with this turn, as its first act: delivered at once if the
/// actor takes messages now (always, when it accepted the hand-off as it went idle), else
/// kept for it.
#[inline]
fn take_handoff<A: Actor>(turn: &mut Turn<'_, '_, A>) {
    let (cell, mut inbox, state) = turn.parts();
    if !inbox.has_handoff() {
        return;
    }
    if state.takes_messages_now() {
        let actor = state.actor.as_mut().expect("checked by takes_messages_now");
        if state.ctx.timed {
            let started = std::time::Instant::now();
            inbox.deliver_handoff(actor, &mut state.ctx);
            record_time(cell, started);
        } else {
            inbox.deliver_handoff(actor, &mut state.ctx);
        }
    } else if let Some(envelope) = inbox.take_handoff() {
        life::park(state, envelope);
    }
}

/// The hot loop: the mailbox, one message at a time, up to the budget.
#[inline(always)]
fn run_messages<A: Actor>(
    cell: &Cell<A>,
    inbox: &mut Inbox<'_, '_, A>,
    state: &mut ActorState<A>,
    budget: usize,
) -> Batch {
    let Some(actor) = state.actor.as_mut() else {
        return Batch::Interrupted;
    };
    let ctx = &mut state.ctx;
    let bound = cell.shared.bound();
    while (inbox.handled() as usize) < budget {
        let taken = inbox.deliver_next(actor, ctx, || {
            let bound = bound?;
            bound.release(1);
            // Overflow policy `DropOldest`, counted.
            bound.take_drop_oldest().then_some(Discard::Overflow)
        });
        match taken {
            Taken::Empty => return Batch::Drained,
            Taken::Delivered if ctx.attention => return Batch::Interrupted,
            Taken::Delivered | Taken::Discarded => {}
        }
    }
    Batch::BudgetSpent
}

/// Adds the time since `started` to the actor's handler time (actors spawned with
/// `measure_time`). Only the actor's own turns write it, so a load and a store suffice.
fn record_time<A: Actor>(cell: &Cell<A>, started: std::time::Instant) {
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let total = &cell.shared.extras.get_or_init().handler_nanos;
    total.store(total.load(Ordering::Relaxed) + nanos, Ordering::Relaxed);
}

/// Every actor pays for its cell: an idle actor whose own state is one pointer costs 216 bytes
/// of resident memory (a 184-byte cell, its reference counts, the allocator's header, its
/// address in a `Vec`; `troupe-bench spawn` measures it). A field added to the cell must come
/// out of somewhere else, or this says so.
#[cfg(all(test, not(troupe_loom), target_pointer_width = "64"))]
mod tests {
    #[test]
    fn a_one_pointer_actor_cell_fits_184_bytes() {
        struct OnePointer(#[allow(dead_code)] Box<u8>);
        impl crate::Actor for OnePointer {}
        let size = std::mem::size_of::<crate::raw::Cell<OnePointer>>();
        assert!(size <= 184, "the cell grew to {size} bytes");
    }
}
