//! The vocabulary of the market: what a client sends ([`NewOrder`]), what the system works
//! with once the order has passed validation ([`Order`]), and what comes back ([`Ack`]).
//!
//! Every message on the hot path fits in 24 bytes, the runtime's inline envelope, so placing an
//! order allocates nothing. A compile-time assertion at the bottom of this file keeps it so.
//!
//! A [`NewOrder`] is untrusted: its price and volume are signed so that a negative volume is
//! representable and can be rejected with a reason. An [`Order`] can only be made by
//! [`Market::validate`](crate::Market::validate) (or read back from a checked log record), so a
//! function that takes an `Order` never sees a bad one.

use std::fmt;

/// A client's identity: its session number, handed out by
/// [`Exchange::connect`](crate::Exchange::connect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u32);

/// An instrument (one order book), by its index in the [`Market`](crate::Market).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrumentId(pub u16);

/// Buy (bid) or sell (ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Side {
    /// A bid: buy at the limit price or lower.
    Buy = 0,
    /// An ask: sell at the limit price or higher.
    Sell = 1,
}

impl Side {
    /// The side this side trades against.
    pub fn opposite(self) -> Side {
        match self {
            Side::Buy => Side::Sell,
            Side::Sell => Side::Buy,
        }
    }
}

/// A limit order as a client sends it, before validation.
///
/// ```
/// use troupe_trading::{ClientId, InstrumentId, NewOrder, Side};
/// let order = NewOrder::limit(ClientId(0), 1, InstrumentId(0), Side::Buy, 99, 1000);
/// assert_eq!(order.volume, 1000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewOrder {
    /// The client's own id for this order; unique per client and instrument.
    pub client_order_id: u64,
    /// Who sends it (acknowledgements go to this session).
    pub client: ClientId,
    /// Limit price in ticks.
    pub price: i32,
    /// Quantity; must be positive.
    pub volume: i32,
    /// The order book it is for.
    pub instrument: InstrumentId,
    /// Buy or sell.
    pub side: Side,
}

impl NewOrder {
    /// A limit order with every field given.
    pub fn limit(
        client: ClientId,
        client_order_id: u64,
        instrument: InstrumentId,
        side: Side,
        price: i32,
        volume: i32,
    ) -> Self {
        NewOrder {
            client_order_id,
            client,
            price,
            volume,
            instrument,
            side,
        }
    }
}

/// A validated limit order: positive volume, a known instrument, a price inside its band.
///
/// Made by [`Market::validate`](crate::Market::validate); its fields are read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Order {
    client_order_id: u64,
    client: ClientId,
    price: u32,
    volume: u32,
    instrument: InstrumentId,
    side: Side,
}

impl Order {
    /// Builds an order whose fields have already been checked (by the market, or by the log's
    /// checksum and the market on replay).
    pub(crate) fn new_checked(
        client: ClientId,
        client_order_id: u64,
        instrument: InstrumentId,
        side: Side,
        price: u32,
        volume: u32,
    ) -> Self {
        debug_assert!(volume > 0);
        Order {
            client_order_id,
            client,
            price,
            volume,
            instrument,
            side,
        }
    }

    /// The client's id for this order.
    pub fn client_order_id(&self) -> u64 {
        self.client_order_id
    }
    /// The session that sent it.
    pub fn client(&self) -> ClientId {
        self.client
    }
    /// The key that must be unique within an order book.
    pub fn key(&self) -> OrderKey {
        OrderKey {
            client: self.client,
            client_order_id: self.client_order_id,
        }
    }
    /// Limit price in ticks (at least 1).
    pub fn price(&self) -> u32 {
        self.price
    }
    /// Quantity (at least 1).
    pub fn volume(&self) -> u32 {
        self.volume
    }
    /// The order book.
    pub fn instrument(&self) -> InstrumentId {
        self.instrument
    }
    /// Buy or sell.
    pub fn side(&self) -> Side {
        self.side
    }
}

/// Identifies an order across the system: the client and its own order id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OrderKey {
    /// The session.
    pub client: ClientId,
    /// The client's id for the order.
    pub client_order_id: u64,
}

/// Why an order was refused. A refused order never reaches a book.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RejectReason {
    /// Volume must be at least 1.
    #[error("volume {0} is not positive; send a volume of at least 1")]
    NonPositiveVolume(i32),
    /// No order book has this instrument id.
    #[error("unknown instrument {0}; use an instrument listed by the market")]
    UnknownInstrument(u16),
    /// The price is outside the instrument's band (see the market's configuration).
    #[error("price {0} ticks is outside the instrument's price band")]
    PriceOutOfRange(i32),
    /// This client already used this client order id on this instrument.
    #[error("client order id already used on this instrument; use a new id")]
    DuplicateClientOrderId,
    /// The client id is not a connected session.
    #[error("unknown session; connect to the exchange first")]
    UnknownSession,
    /// The matching engine for the instrument has stopped.
    #[error("the matching engine for this instrument is not running; retry later")]
    EngineUnavailable,
}

/// Which engine of a pair speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    /// The engine receivers route to; it forwards every order to its standby.
    Primary = 0,
    /// The engine that mirrors the primary.
    Standby = 1,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Primary => "primary",
            Role::Standby => "standby",
        })
    }
}

/// The result of an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// In the book's history for good (logged as the run's log mode requires); `filled` is the
    /// volume that traded on arrival, the rest (if any) rests in the book.
    Accepted {
        /// Volume traded on arrival.
        filled: u32,
    },
    /// Refused; the order touched no book.
    Rejected(RejectReason),
}

/// An acknowledgement, delivered to the client's session.
///
/// In request-reply style the primary sends one when both engines are done; in one-way style
/// each engine sends its own (`from` says which), and a rejection comes once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// The client's id for the order.
    pub client_order_id: u64,
    /// What happened.
    pub outcome: Outcome,
    /// Who acknowledges.
    pub from: Role,
}

impl troupe::Message for Ack {
    type Reply = ();
}

// The hot messages must stay inline in the runtime's envelopes (24 bytes) to avoid an
// allocation per hop.
const _: () = assert!(std::mem::size_of::<NewOrder>() <= 24);
const _: () = assert!(std::mem::size_of::<Order>() <= 24);
const _: () = assert!(std::mem::size_of::<Ack>() <= 24);
