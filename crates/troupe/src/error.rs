//! Typed errors. Each says what happened and what the caller can do about it.

use std::fmt;
use std::time::Duration;

/// A message was not delivered. The message is handed back, untouched, so nothing is lost:
/// retry later or elsewhere, or drop it knowingly.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::SendError;
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// counter.stop();
/// counter.stopped().wait().unwrap();
/// match counter.tell(Add(5)) {
///     Err(SendError::Stopped(Add(n))) => assert_eq!(n, 5), // the message, back
///     other => panic!("{other:?}"),
/// }
/// system.shutdown();
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
#[non_exhaustive]
pub enum SendError<M> {
    /// The actor has stopped.
    Stopped(M),
    /// The actor's bounded mailbox is full (overflow policy `Fail`); `send(..).await` waits for
    /// room instead.
    Full(M),
}

impl<M> SendError<M> {
    /// Takes the undelivered message back.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// let Add(n) = counter.tell(Add(5)).unwrap_err().into_inner();
    /// assert_eq!(n, 5);
    /// system.shutdown();
    /// ```
    pub fn into_inner(self) -> M {
        match self {
            SendError::Stopped(m) | SendError::Full(m) => m,
        }
    }

    /// True if the actor has stopped (as opposed to being momentarily full).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::{Overflow, SpawnOptions};
    /// let system = System::new();
    /// let counter = system.spawn_with(Counter(0), SpawnOptions::new().bounded(1, Overflow::Fail));
    /// let refused = (0..1000).filter_map(|_| counter.tell(Add(1)).err()).next();
    /// if let Some(error) = refused {
    ///     assert!(!error.is_stopped()); // full, not stopped: worth retrying
    /// }
    /// system.shutdown();
    /// ```
    pub fn is_stopped(&self) -> bool {
        matches!(self, SendError::Stopped(_))
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Stopped(_) => f.write_str("SendError::Stopped(..)"),
            SendError::Full(_) => f.write_str("SendError::Full(..)"),
        }
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Stopped(_) => {
                f.write_str("the actor has stopped; the message was not delivered and is returned")
            }
            SendError::Full(_) => f.write_str(
                "the actor's mailbox is full; the message was not delivered and is returned",
            ),
        }
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why an `ask` produced no reply.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use std::time::Duration;
/// use troupe::AskError;
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// let status = match counter.ask_timeout(Get, Duration::from_secs(1)).wait() {
///     Ok(_) => 200,
///     Err(AskError::Timeout(_)) => 504,
///     Err(AskError::MailboxFull | AskError::Dropped) => 503,
///     Err(_) => 500, // stopped, panicked, no reply; more may come (non-exhaustive)
/// };
/// assert_eq!(status, 200);
/// system.shutdown();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AskError {
    /// The actor stopped before it handled the request (or was already stopped).
    #[error("the actor has stopped; the request was not handled")]
    Stopped,
    /// The handler panicked while handling the request, or the actor failed while it held the
    /// request's deferred reply (its instance was dropped with the reply unsent).
    #[error("the actor's handler panicked while handling the request")]
    Panicked,
    /// No reply arrived in time. The request may still be handled later; its reply is dropped.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The actor's bounded mailbox was full; the request was not sent.
    #[error("the actor's mailbox is full; the request was not sent")]
    MailboxFull,
    /// The actor's bounded mailbox dropped the request to make room (overflow policy
    /// `DropNewest` or `DropOldest`); the actor is still running, and a later ask may succeed.
    #[error(
        "the actor's bounded mailbox dropped the request (overflow policy); the actor is running"
    )]
    Dropped,
    /// A deferred handler (`DeferredHandler`) dropped its request's `Deferred`
    /// handle without sending it.
    #[error("the handler deferred its reply and never sent it")]
    NoReply,
}

/// `System::shutdown_timeout` did not see every actor stop.
///
/// ```
/// use std::time::Duration;
/// use troupe::{Actor, Context, Handler, Message, ShutdownError, System};
/// struct Stuck;
/// impl Actor for Stuck {}
/// #[derive(Message)]
/// struct Block;
/// impl Handler<Block> for Stuck {
///     fn handle(&mut self, _: Block, _: &mut Context<Self>) {
///         std::thread::sleep(Duration::from_millis(300)); // a handler that will not stop soon
///     }
/// }
/// let system = System::new();
/// system.spawn(Stuck).tell(Block).unwrap();
/// std::thread::sleep(Duration::from_millis(20));
/// match system.shutdown_timeout(Duration::from_millis(10)) {
///     Err(ShutdownError::Timeout { remaining, .. }) => assert_eq!(remaining, 1),
///     other => panic!("{other:?}"),
/// }
/// system.shutdown(); // waits for the rest
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Some actors had not finished stopping in time (a handler may be blocked).
    #[error("{remaining} actor(s) still running after {waited:?}; a handler may be blocked")]
    Timeout {
        /// Actors still alive when the wait ended.
        remaining: usize,
        /// How long shutdown waited.
        waited: Duration,
    },
    /// Called from inside an actor (a handler on a worker, or an actor on its own thread),
    /// which cannot stop while it waits: shutdown has begun (every actor is asked to stop, and
    /// the system's threads are joined in the background once they have) but was not waited for.
    #[error(
        "shutdown was called from inside an actor: it has begun, but cannot be waited for there"
    )]
    InsideActor,
}

/// A system could not be built as configured.
///
/// ```
/// use troupe::{BuildError, System};
/// match System::builder().workers(0).build() {
///     Err(BuildError::Config(why)) => assert!(why.contains("worker"), "{why}"),
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The configuration is invalid (for example zero workers).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The operating system refused to start a thread.
    #[error("could not start a worker thread: {0}")]
    Thread(#[from] std::io::Error),
}
