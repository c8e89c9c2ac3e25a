//! How an actor fails and how it ends: [`Failure`] and [`StopReason`], the data that signals,
//! watchers and supervisors pass around.

use std::fmt;

use crate::id::ActorId;

/// Why an actor failed.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::{Failure, SpawnOptions, StopReason};
/// #[derive(Message)]
/// struct Crash;
/// impl Handler<Crash> for Counter {
///     fn handle(&mut self, _: Crash, _: &mut Context<Self>) { panic!("out of range") }
/// }
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// counter.tell(Crash).unwrap();
/// assert_eq!(
///     counter.stopped().wait(),
///     Ok(StopReason::Failed(Failure::Panicked("out of range".into())))
/// );
/// system.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// A handler or hook panicked, with this message.
    Panicked(String),
    /// Its factory panicked while rebuilding it.
    FactoryPanicked(String),
    /// A child failed more often than the supervisor's intensity limit allows.
    Escalated {
        /// The child's own failure.
        child: Box<Failure>,
    },
    /// An actor it was linked to failed.
    LinkFailed(ActorId),
    /// A supervised child spawned with `Restart::Permanent` stopped itself (`ctx.stop()`):
    /// Erlang's permanent child exiting, which its supervisor restarts.
    Exited,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Panicked(msg) => write!(f, "handler panicked: {msg}"),
            Failure::FactoryPanicked(msg) => write!(f, "factory panicked: {msg}"),
            Failure::Escalated { child } => {
                write!(f, "a child failed too often (last: {child})")
            }
            Failure::LinkFailed(id) => write!(f, "linked actor {id} failed"),
            Failure::Exited => f.write_str("a permanent child stopped itself"),
        }
    }
}

impl Failure {
    /// The message of a panic payload (`&str` or `String`, as `panic!` makes them).
    pub(crate) fn from_panic(payload: &(dyn std::any::Any + Send)) -> String {
        if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        }
    }
}

/// How an actor ended.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::StopReason;
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// counter.stop();
/// let reason = counter.stopped().wait().unwrap();
/// assert_eq!(reason, StopReason::Normal);
/// assert_eq!(reason.to_string(), "stopped normally");
/// system.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// It stopped normally: `ctx.stop()`, `addr.stop()`, its parent stopping, or shutdown.
    Normal,
    /// It failed and was not restarted.
    Failed(Failure),
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Normal => f.write_str("stopped normally"),
            StopReason::Failed(failure) => write!(f, "failed: {failure}"),
        }
    }
}
