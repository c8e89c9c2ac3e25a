//! The raw actor: a cell that holds a target's state and mailbox, the move-only right to run
//! its turns, type-erased messages, and the hand-off of a message with a turn.
//!
//! This layer knows nothing of actors, supervision or systems. It is generic over a
//! [`Target`] (implemented for every actor type by the actor layer) and reaches the scheduler
//! only through the [`Schedule`] trait, which pools and actor threads implement: the scheduler
//! depends on this layer, not the other way round, as tokio's task module knows its scheduler
//! only through its own `Schedule`.
//!
//! - `envelope.rs`: messages with their type erased, delivered or discarded exactly once;
//! - `cell.rs`: the cell, [`Runnable`] (the right to run a turn), [`Turn`] (a turn's access,
//!   whose idle transition is its last act);
//! - `run_next.rs`: a worker's run-next position, and the handed-off message a turn owns.
//!
//! All the `unsafe` of type erasure and raw cell access lives in these three files.

mod cell;
mod envelope;
mod run_next;

pub(crate) use cell::{Cell, End, IdleMode, Inbox, Panic, Ran, Runnable, Taken, Turn};
pub(crate) use envelope::{Deliver, Discard, Envelope};
pub(crate) use run_next::{enter as enter_run_next, put_here as put_run_next, HandedOff, RunNext};

/// What a cell holds and how its turns run; implemented by the actor layer for every actor.
pub(crate) trait Target: Sized + Send + 'static {
    /// What a message is delivered with, beside the target itself (the actor's context).
    type Ctx;
    /// What any thread may read (signals, bound, links...).
    type Shared: Send + Sync;
    /// What only the running turn touches (the actor value, its context, its life).
    type Private: Send;

    /// Runs one turn. The only ways to end it are the consuming methods of [`Turn`].
    fn turn(turn: Turn<'_, '_, Self>) -> End;

    /// A panic unwound out of `turn`: record it, so the next turn deals with it. Must not run
    /// user code. The actor is run again afterwards.
    fn failed(turn: Turn<'_, '_, Self>, panic: Panic);
}

/// Where an actor's turns run: a pool of workers, or a thread of its own.
pub(crate) trait Schedule: Send + Sync + 'static {
    /// Runs the actor's next turn, some time soon.
    fn schedule(&self, runnable: Runnable);

    /// This executor as `Any`, so the layer that made it can recognise it.
    fn as_any(&self) -> &dyn std::any::Any;

    /// True for a pool (whose actors' children inherit it); false for an actor's own thread.
    fn is_pool(&self) -> bool;

    /// A send on the calling thread found a catch-up actor of this executor behind and could
    /// not lend it a turn: if the thread is a worker of this pool that the pool narrowed past
    /// while it ran a turn, wait a little for the workers that take work (`PoolShared`'s
    /// implementation says how long). Nothing elsewhere.
    fn wait_aside(&self) {}
}

/// An executor as cells hold it: one allocation per pool (or actor thread), shared by its
/// actors, so a cell's header holds a thin pointer and "does the calling worker run this
/// actor's pool?" (the hand-off's question, asked on every send to an idle actor) is a pointer
/// comparison rather than a call.
pub(crate) struct Executor {
    inner: std::sync::Arc<dyn Schedule>,
    /// Sends from threads outside every pool that waited for a catch-up actor of this
    /// executor to read half its backlog (`Cell::wait_to_catch_up`).
    catch_up_waits: crate::loom::AtomicU64,
}

impl Executor {
    pub(crate) fn new(inner: std::sync::Arc<dyn Schedule>) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            inner,
            catch_up_waits: crate::loom::AtomicU64::new(0),
        })
    }

    /// A send from a thread outside every pool waits for one of this executor's actors.
    fn count_catch_up_wait(&self) {
        self.catch_up_waits
            .fetch_add(1, crate::loom::Ordering::Relaxed);
    }

    /// Sends from threads outside every pool that waited for one of this executor's catch-up
    /// actors (`SpawnOptions::catch_up`) so far.
    pub(crate) fn catch_up_waits(&self) -> u64 {
        self.catch_up_waits.load(crate::loom::Ordering::Relaxed)
    }

    /// Runs the actor's next turn, some time soon.
    #[inline]
    pub(crate) fn schedule(&self, runnable: Runnable) {
        self.inner.schedule(runnable)
    }

    /// See `Schedule::wait_aside`.
    #[inline]
    pub(crate) fn wait_aside(&self) {
        self.inner.wait_aside()
    }

    /// The executor behind this handle, as `Any`.
    pub(crate) fn as_any(&self) -> &dyn std::any::Any {
        self.inner.as_any()
    }

    /// True for a pool; false for an actor's own thread.
    pub(crate) fn is_pool(&self) -> bool {
        self.inner.is_pool()
    }
}

/// Runs actors' turns on the calling thread until each has gone idle or stopped (for a cell
/// that has no executor able to run it, such as an actor whose thread could not be started).
pub(crate) fn run_here(mut runnable: Runnable, budget: usize) {
    loop {
        match runnable.run(budget, None) {
            Ran::Yield(again) => runnable = again,
            Ran::Idle | Ran::Stopped => return,
        }
    }
}
