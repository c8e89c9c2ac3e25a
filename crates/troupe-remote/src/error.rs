use std::time::Duration;

use troupe::AskError;

use crate::wire::Refusal;

/// Why a remote tell, ask, export or watch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// No process exports the name now, or the connection to NATS is gone.
    #[error("no process exports `{0}`, or it cannot be reached")]
    Unreachable(String),
    /// An exporter was there, and no reply came in time. The request may still be handled.
    #[error("no reply within {0:?}")]
    TimedOut(Duration),
    /// The remote actor answered the request with the error an in-process ask would give.
    #[error("the remote actor: {0}")]
    Actor(AskError),
    /// The far node refused the request (unknown type, version mismatch, bad payload).
    #[error("the far node refused the request: {0}")]
    Refused(Refusal),
    /// The message did not encode.
    #[error("the message does not encode: {0}")]
    Encode(String),
    /// The reply did not decode as the reply type.
    #[error("the reply does not decode: {0}")]
    Decode(String),
    /// The encoded message is larger than a frame may be.
    #[error("an encoded message of {size} bytes is over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// So many bytes already wait to be published that the message was not queued.
    #[error("{0} bytes already wait for the connection; the message was not queued")]
    Backlogged(usize),
    /// The node was closed.
    #[error("the node is closed")]
    Closed,
    /// A name that cannot be a NATS subject token sequence.
    #[error("invalid name `{0}`: use 1-200 characters from A-Z a-z 0-9 . _ - with no empty part between dots")]
    InvalidName(String),
    /// An option out of its bounds.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The NATS server could not be reached at connect time.
    #[error("cannot connect to NATS at {url}: {detail}")]
    Connect { url: String, detail: String },
}
