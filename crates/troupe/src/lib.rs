#![doc = include_str!("guide.md")]
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The layers, bottom first. A module uses only modules listed above it (a test,
// `tests/suite/layers.rs`, checks every `crate::` path against this order).

// 1. Foundations: the model-checker shim, ids, failures, errors, the calling thread's role,
//    yields that give way to a busy machine.
mod loom;
mod id;
mod failure;
mod error;
mod role;
mod give_way;

// 2. Concurrent building blocks, each standing alone: shelves of free values (reply slots,
//    mailbox blocks), the mailbox, the signal lane, bounded admission, lazily allocated
//    state, timers, the ask reply slot.
mod shelf;
mod mailbox;
mod signal;
mod bounded;
mod lazy;
mod timer;
mod reply;

// 3. The raw actor: a cell generic over what it holds, the move-only right to run a turn,
//    type-erased messages, the hand-off (all the unsafe of type erasure and raw cell access).
mod raw;

// 4. The scheduler: pools of workers and actor threads, executors of `raw::Runnable`s.
mod scheduler;

// 5. What a system's actors share: what an observed system keeps of them, type-erased actors
//    and their extras, the named registry, the system's shared state.
mod watch;
mod erased;
mod names;
mod runtime;

// 6. The actor model: supervision, the user's traits and context, an actor's life, its turn.
mod supervision;
mod actor;
mod drain;
mod life;
mod turn;

// 7. The public API: metrics, observation, addresses, spawning, the system, the context's
//    methods, routers.
mod metrics;
mod observe;
mod addr;
mod spawn;
mod system;
mod inspect;
mod context;
mod router;

// 8. Deterministic simulation: a system run from a seed on one thread, in simulated time.
pub mod sim;

pub use actor::{
    kind, Accepts, Actor, Context, DeferredHandler, Handler, Message, Terminated, WatchId,
};
pub use addr::{Addr, Recipient};
pub use bounded::Overflow;
pub use context::StreamHandle;
pub use error::{AskError, BuildError, SendError, ShutdownError};
pub use failure::{Failure, StopReason};
pub use id::ActorId;
pub use inspect::MAX_PAGE;
pub use metrics::{ActorMetrics, PoolMetrics};
pub use names::RegistryError;
pub use observe::TRACE_DEPTH;
pub use reply::{Ask, Deferred};
pub use router::{NoRoutees, Router};
pub use spawn::{Placement, SpawnOptions};
pub use supervision::{Backoff, Restart, StrategyKind, SupervisorStrategy};
pub use system::{System, SystemBuilder, WORKERS_ENV};
pub use timer::TimerId;
/// `#[derive(Message)]`, with `#[reply(T)]` for the reply type (default `()`).
pub use troupe_macros::Message;
pub use watch::{ActorInfo, ActorPage, HandlerStats, LifeState, ObserveError, Wait};
