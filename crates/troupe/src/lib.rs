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

mod actor;
mod addr;
mod bounded;
mod cell;
mod envelope;
mod error;
mod extras;
mod lifecycle;
mod loom;
mod mailbox;
mod metrics;
mod names;
mod reply;
mod scheduler;
mod signal;
mod supervisor;
mod system;
mod timer;

pub use actor::{Actor, Context, Handler, Message, Terminated, WatchId};
pub use addr::Addr;
pub use bounded::Overflow;
pub use error::{AskError, BuildError, SendError, ShutdownError};
pub use metrics::{ActorMetrics, PoolMetrics};
pub use names::RegistryError;
pub use reply::Ask;
pub use supervisor::{Backoff, Failure, Restart, StopReason, StrategyKind, SupervisorStrategy};
pub use system::{ActorId, Placement, SpawnOptions, System, SystemBuilder};
pub use timer::TimerId;
