//! Sessions: where acknowledgements for a client go.
//!
//! A client connects once and gets a [`ClientId`]; every order it sends carries that id, and
//! engines and receivers look the id up here to deliver [`Ack`]s. Carrying an id (4 bytes)
//! instead of a reply address keeps each order message inside the runtime's 24-byte inline
//! envelope, so the hot path does not allocate.
//!
//! The table has a fixed capacity chosen when the exchange starts; each slot is written once
//! (`OnceLock`), so looking a session up is a single acquire load with no lock and no shared
//! write, from any number of engines at once. Sessions last as long as the exchange.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, OnceLock};

use troupe::{Addr, Handler};

use crate::order::{Ack, ClientId};

/// Something that accepts a client's acknowledgements: an actor's address, a channel...
pub trait AckSink: Send + Sync + 'static {
    /// Hands over one acknowledgement. Returns false if the client is gone.
    fn deliver(&self, ack: Ack) -> bool;
}

impl<A: Handler<Ack>> AckSink for Addr<A> {
    #[inline]
    fn deliver(&self, ack: Ack) -> bool {
        self.tell(ack).is_ok()
    }
}

impl AckSink for mpsc::Sender<Ack> {
    fn deliver(&self, ack: Ack) -> bool {
        self.send(ack).is_ok()
    }
}

/// The session table was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("all {capacity} sessions are in use; start the exchange with a larger session capacity")]
pub struct ConnectError {
    /// The table's capacity.
    pub capacity: usize,
}

/// The table of connected sessions. See the module note.
pub(crate) struct Sessions {
    slots: Box<[OnceLock<Box<dyn AckSink>>]>,
    next: AtomicU32,
}

impl Sessions {
    pub(crate) fn new(capacity: usize) -> Self {
        Sessions {
            slots: (0..capacity).map(|_| OnceLock::new()).collect(),
            next: AtomicU32::new(0),
        }
    }

    pub(crate) fn connect(&self, sink: Box<dyn AckSink>) -> Result<ClientId, ConnectError> {
        let capacity = self.slots.len();
        // Relaxed: the counter only hands out distinct numbers; the slot's OnceLock publishes
        // the sink itself.
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = self
            .slots
            .get(id as usize)
            .ok_or(ConnectError { capacity })?;
        // A slot is set once; it can only be taken already if the counter wrapped around.
        slot.set(sink).map_err(|_| ConnectError { capacity })?;
        Ok(ClientId(id))
    }

    /// Delivers an ack; false if the session is unknown or gone.
    #[inline]
    pub(crate) fn deliver(&self, client: ClientId, ack: Ack) -> bool {
        match self.slots.get(client.0 as usize).and_then(OnceLock::get) {
            Some(sink) => sink.deliver(ack),
            None => false,
        }
    }

    #[inline]
    pub(crate) fn is_connected(&self, client: ClientId) -> bool {
        self.slots
            .get(client.0 as usize)
            .is_some_and(|s| s.get().is_some())
    }
}
