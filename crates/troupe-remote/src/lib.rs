//! troupe actors across processes, over NATS.
//!
//! A [`Node`] is one NATS connection. It exports actors under names
//! ([`Node::export`]), and gives typed addresses of actors exported anywhere
//! ([`Node::recipient`]): `tell` and `ask` as in-process, with the same errors plus
//! [`RemoteError::Unreachable`] and [`RemoteError::TimedOut`]. [`Node::watch`] learns when a
//! remote actor stops or its process goes silent.
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use troupe::{Actor, Context, Handler, Message, System};
//! use troupe_remote::{Node, NodeOptions, RemoteMessage};
//!
//! #[derive(Message, Serialize, Deserialize)]
//! #[reply(u64)]
//! struct Add(u64);
//! impl RemoteMessage for Add {
//!     const NAME: &'static str = "counter.add";
//! }
//!
//! struct Counter(u64);
//! impl Actor for Counter {}
//! impl Handler<Add> for Counter {
//!     fn handle(&mut self, m: Add, _: &mut Context<Self>) -> u64 {
//!         self.0 += m.0;
//!         self.0
//!     }
//! }
//!
//! // In one process:
//! let system = System::new();
//! let node = Node::connect_blocking("nats://127.0.0.1:4222", NodeOptions::default()).unwrap();
//! node.export("counter", system.spawn(Counter(0))).accept::<Add, _>().start_blocking().unwrap();
//!
//! // In another:
//! let node = Node::connect_blocking("nats://127.0.0.1:4222", NodeOptions::default()).unwrap();
//! let counter = node.recipient::<Add>("counter").unwrap();
//! counter.tell(Add(2)).unwrap();
//! assert_eq!(counter.ask(Add(3)).wait(), Ok(5));
//! ```
//!
//! Messages are encoded with postcard (see the crate README for the measurement behind the
//! choice) inside versioned frames ([`wire`]); bad input from the wire is refused, logged and
//! counted ([`NodeStats`]), and never panics. What one frame can make a node do is bounded
//! (entries per frame, asks in flight per sender and in all: [`NodeOptions`]).
//!
//! # Traces across processes (feature `otel`)
//!
//! With the `otel` feature, a tell or an ask sent from inside a `tracing` span that has an
//! OpenTelemetry context (a `tracing-opentelemetry` layer records it) carries that context,
//! W3C trace context fields in the message's entry ([`wire`]). The receiving node tells or asks
//! its actor inside a span (`troupe.receive`, named `receive <export>`) whose parent is that
//! context; with [`trace_messages`](troupe::SystemBuilder::trace_messages) on the receiving
//! system, the actor's `troupe.handle` span is that span's child. One request then makes one
//! trace, through every actor and process it reaches.
//!
//! It is a feature because reading and writing the context of a `tracing` span takes
//! `opentelemetry`, its SDK's propagator and `tracing-opentelemetry`, which a program that does
//! not export traces need not build. The frame layout does not depend on it: a node built
//! without it reads traced frames (and delivers their messages without a parent), and sends
//! nothing traced. A message sent from no span, or with tracing off, carries no context and
//! costs what it did before. A context that does not read never refuses its message: the
//! message goes without a parent, and the node counts it ([`NodeStats::traces_ignored`]).
//!
//! A node signs in to NATS with [`Credentials`] (an nkey, a credentials file, or a user and
//! password), over TLS when given a certificate authority ([`NodeOptions::tls_ca`]); its
//! subjects are laid out so that a server's per-user permissions can give each role only what
//! it needs (see the crate README).

mod access;
mod error;
mod node;
pub mod server;
mod trace;
pub mod wire;

pub use access::Credentials;
pub use error::RemoteError;
pub use node::{
    Down, ExportBuilder, Node, NodeOptions, NodeStats, RemoteAsk, RemoteRecipient, RemoteWatch,
};
pub use wire::{Refusal, RefusalKind, RemoteMessage};
