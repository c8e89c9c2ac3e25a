//! Typed errors. Each says what happened and what the caller can do about it.

use std::fmt;
use std::time::Duration;

/// A message could not be delivered because the actor has stopped. The message is handed
/// back, untouched, so nothing is lost: retry elsewhere, or drop it knowingly.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<M>(pub M);

impl<M> SendError<M> {
    /// Takes the undelivered message back.
    pub fn into_inner(self) -> M {
        self.0
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the actor has stopped; the message was not delivered and is returned")
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why an `ask` produced no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The actor stopped before it handled the request (or was already stopped).
    #[error("the actor has stopped; the request was not handled")]
    Stopped,
    /// The handler panicked while handling the request.
    #[error("the actor's handler panicked while handling the request")]
    Panicked,
    /// No reply arrived in time. The request may still be handled later; its reply is dropped.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
}

/// `System::shutdown_timeout` gave up waiting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownError {
    /// Some actors had not finished stopping in time (a handler may be blocked).
    #[error("{remaining} actor(s) still running after {waited:?}; a handler may be blocked")]
    Timeout {
        /// Actors still alive when the wait ended.
        remaining: usize,
        /// How long shutdown waited.
        waited: Duration,
    },
}

/// A system could not be built as configured.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The configuration is invalid (for example zero workers).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The operating system refused to start a thread.
    #[error("could not start a worker thread: {0}")]
    Thread(#[from] std::io::Error),
}
