//! # troupe
//!
//! An actor runtime: typed actors that own their state, lock-free mailboxes, a work-stealing
//! scheduler, `tell` and `ask`, and actors on threads of their own when they need one.
//!
//! ```
//! use troupe::{Actor, Context, Handler, Message, System};
//!
//! struct Counter { total: u64 }
//! impl Actor for Counter {}
//!
//! struct Add(u64);
//! impl Message for Add { type Reply = (); }
//! impl Handler<Add> for Counter {
//!     fn handle(&mut self, msg: Add, _ctx: &mut Context<Self>) { self.total += msg.0 }
//! }
//!
//! struct GetAndReset;
//! impl Message for GetAndReset { type Reply = u64; }
//! impl Handler<GetAndReset> for Counter {
//!     fn handle(&mut self, _: GetAndReset, _ctx: &mut Context<Self>) -> u64 {
//!         std::mem::take(&mut self.total)
//!     }
//! }
//!
//! let system = System::new();
//! let counter = system.spawn(Counter { total: 0 });
//! for _ in 0..1000 {
//!     counter.tell(Add(100)).unwrap();
//! }
//! assert_eq!(counter.ask(GetAndReset).wait(), Ok(100_000));
//! system.shutdown();
//! ```
//!
//! See `ARCHITECTURE.md` in the repository for how a message travels from `tell` to a handler.

#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

// The layers, bottom first. A module uses only modules listed above it (a test,
// `tests/layers.rs`, checks every `crate::` path against this order).

// 1. Foundations: the model-checker shim, ids, failures, errors, the calling thread's role.
mod loom;
mod id;
mod failure;
mod error;
mod role;

// 2. Concurrent building blocks, each standing alone: the mailbox, the signal lane, bounded
//    admission, lazily allocated state, timers, the ask reply slot.
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

// 5. What a system's actors share: type-erased actors and their extras, the named registry,
//    the system's shared state.
mod erased;
mod names;
mod runtime;

// 6. The actor model: supervision, the user's traits and context, an actor's life, its turn.
mod supervision;
mod actor;
mod life;
mod turn;

// 7. The public API: metrics, addresses, spawning, the system, the context's methods.
mod metrics;
mod addr;
mod spawn;
mod system;
mod context;

pub use actor::{Actor, Context, Handler, Message, Terminated, WatchId};
pub use addr::{Addr, Recipient};
pub use bounded::Overflow;
pub use context::StreamHandle;
pub use error::{AskError, BuildError, SendError, ShutdownError};
pub use failure::{Failure, StopReason};
pub use id::ActorId;
pub use metrics::{ActorMetrics, PoolMetrics};
pub use names::RegistryError;
pub use reply::{Ask, Deferred};
pub use spawn::{Placement, SpawnOptions};
pub use supervision::{Backoff, Restart, StrategyKind, SupervisorStrategy};
pub use system::{System, SystemBuilder, WORKERS_ENV};
pub use timer::TimerId;
/// `#[derive(Message)]`, with `#[reply(T)]` for the reply type (default `()`).
pub use troupe_macros::Message;
