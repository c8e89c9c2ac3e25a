//! A blocking client for plain threads: place an order, wait for its acknowledgement.
//!
//! It numbers its orders itself (client order ids 1, 2, 3...), sends each through its
//! receiver, and waits on a channel for the acks: one in request-reply style, one from each
//! engine in one-way style (a rejection comes once and ends the wait). One order is in flight
//! at a time, the seed's closed loop; acks of an order that timed out are recognised by their
//! id and skipped.
//!
//! Actors that place orders (like the benchmark's clients) do not block: they connect their
//! own address as the session sink and handle [`Ack`] messages.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use troupe::Addr;

use crate::exchange::Exchange;
use crate::order::{Ack, ClientId, InstrumentId, NewOrder, Outcome, RejectReason, Side};
use crate::receiver::{Receiver, Submit};
use crate::session::ConnectError;

/// Why an order did not go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// The exchange refused it.
    #[error("order rejected: {0}")]
    Rejected(RejectReason),
    /// No (complete) acknowledgement in time; the order may still be processed.
    #[error("no acknowledgement within {0:?}; the order's outcome is unknown")]
    Timeout(Duration),
    /// The exchange has stopped.
    #[error("the exchange has stopped")]
    Stopped,
}

/// What an accepted order did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmation {
    /// The client order id it was given.
    pub client_order_id: u64,
    /// Volume traded on arrival.
    pub filled: u32,
}

/// A client on a plain thread. See the module note.
///
/// ```
/// use std::time::Duration;
/// use troupe_trading::{BlockingClient, Exchange, ExchangeConfig, Side};
///
/// let system = troupe::System::builder().workers(2).build().unwrap();
/// let exchange = Exchange::start(&system, ExchangeConfig::seed()).unwrap();
/// let mut client = BlockingClient::connect(&exchange).unwrap();
/// let b1 = exchange.market().lookup("B1").unwrap();
/// let t = Duration::from_secs(10);
/// client.place(b1, Side::Sell, 50, 5, t).unwrap();
/// assert_eq!(client.place(b1, Side::Buy, 50, 5, t).unwrap().filled, 5);
/// assert!(client.place(b1, Side::Buy, 50, 0, t).is_err());
/// exchange.shutdown();
/// system.shutdown();
/// ```
pub struct BlockingClient {
    id: ClientId,
    receiver: Addr<Receiver>,
    acks: mpsc::Receiver<Ack>,
    acks_per_order: usize,
    next_id: u64,
}

impl BlockingClient {
    /// Opens a session on `exchange`.
    pub fn connect(exchange: &Exchange) -> Result<Self, ConnectError> {
        let (tx, acks) = mpsc::channel();
        let id = exchange.connect(tx)?;
        Ok(BlockingClient {
            id,
            receiver: exchange.receiver_for(id).clone(),
            acks,
            acks_per_order: exchange.style().acks_per_order(),
            next_id: 1,
        })
    }

    /// This client's session id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// Places a limit order under the next client order id and waits for it to be
    /// acknowledged.
    pub fn place(
        &mut self,
        instrument: InstrumentId,
        side: Side,
        price: i32,
        volume: i32,
        timeout: Duration,
    ) -> Result<Confirmation, OrderError> {
        let id = self.next_id;
        self.next_id += 1;
        self.place_order(
            NewOrder::limit(self.id, id, instrument, side, price, volume),
            timeout,
        )
    }

    /// Sends `order` as given (its `client` is set to this session) and waits for its
    /// acknowledgement.
    pub fn place_order(
        &mut self,
        mut order: NewOrder,
        timeout: Duration,
    ) -> Result<Confirmation, OrderError> {
        order.client = self.id;
        self.receiver
            .tell(Submit(order))
            .map_err(|_| OrderError::Stopped)?;
        let deadline = Instant::now() + timeout;
        let mut seen = 0;
        let mut filled = 0;
        while seen < self.acks_per_order {
            let left = deadline.saturating_duration_since(Instant::now());
            let ack = match self.acks.recv_timeout(left) {
                Ok(ack) => ack,
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(OrderError::Timeout(timeout)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(OrderError::Stopped),
            };
            if ack.client_order_id != order.client_order_id {
                continue;
            }
            match ack.outcome {
                Outcome::Rejected(reason) => return Err(OrderError::Rejected(reason)),
                Outcome::Accepted { filled: f } => {
                    filled = f;
                    seen += 1;
                }
            }
        }
        Ok(Confirmation {
            client_order_id: order.client_order_id,
            filled,
        })
    }
}
