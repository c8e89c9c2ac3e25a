//! One order book with price-time priority.
//!
//! Each side is an ordered map from price (in ticks) to a FIFO queue of resting orders. An
//! incoming order first trades against the opposite side while it crosses: best price first
//! (lowest ask for a buy, highest bid for a sell), and within a price, oldest first. Every
//! trade is at the resting (maker) order's price, for the smaller of the two remaining
//! volumes, so orders fill partially or fully. Whatever is left rests at the order's own price,
//! behind the orders already there.
//!
//! The book also remembers every order key it has accepted, so a client cannot reuse a client
//! order id on this instrument; a duplicate is rejected before it touches either side.
//!
//! Invariants: no level is empty (a level is removed when its last order fills); after every
//! `submit`, the best bid is below the best ask (the book is never crossed); every resting
//! order has a positive remaining volume.
//!
//! Queues of emptied levels are kept for reuse, so a book that fills and empties levels in a
//! steady state does not allocate.

use std::collections::{BTreeMap, VecDeque};

use crate::hash::{mix64, StateHasher};
use crate::keys::KeySet;
use crate::order::{InstrumentId, Order, OrderKey, RejectReason, Side};

/// An order waiting in the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resting {
    /// Whose order it is.
    pub key: OrderKey,
    /// Volume not yet traded.
    pub remaining: u32,
}

/// A trade between an incoming (taker) order and a resting (maker) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trade {
    /// The maker's price, in ticks.
    pub price: u32,
    /// Traded volume.
    pub volume: u32,
    /// The resting order.
    pub maker: OrderKey,
    /// The incoming order.
    pub taker: OrderKey,
    /// The taker's side.
    pub taker_side: Side,
}

/// What became of an accepted order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// Volume traded on arrival.
    pub filled: u32,
    /// Volume left resting in the book.
    pub resting: u32,
}

type Level = VecDeque<Resting>;

/// A limit order book for one instrument. See the module note.
///
/// ```
/// use troupe_trading::{ClientId, InstrumentId, Market, NewOrder, OrderBook, Side};
/// let market = Market::seed();
/// let a1 = market.lookup("A1").unwrap();
/// let mut book = OrderBook::new(a1);
/// let ask = market.validate(&NewOrder::limit(ClientId(0), 1, a1, Side::Sell, 99, 10)).unwrap();
/// let bid = market.validate(&NewOrder::limit(ClientId(1), 1, a1, Side::Buy, 100, 4)).unwrap();
/// book.submit(&ask, |_| {}).unwrap();
/// let mut trades = Vec::new();
/// let fill = book.submit(&bid, |t| trades.push(t)).unwrap();
/// assert_eq!(fill.filled, 4);
/// assert_eq!(trades[0].price, 99); // the resting order's price
/// assert_eq!(book.best_ask(), Some(99));
/// ```
#[derive(Debug, Clone)]
pub struct OrderBook {
    instrument: InstrumentId,
    bids: BTreeMap<u32, Level>,
    asks: BTreeMap<u32, Level>,
    seen: KeySet,
    trades: u64,
    traded_volume: u64,
    spare_levels: Vec<Level>,
}

impl OrderBook {
    /// An empty book.
    pub fn new(instrument: InstrumentId) -> Self {
        OrderBook {
            instrument,
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            seen: KeySet::new(),
            trades: 0,
            traded_volume: 0,
            spare_levels: Vec::new(),
        }
    }

    /// The instrument this book is for.
    pub fn instrument(&self) -> InstrumentId {
        self.instrument
    }

    /// Matches `order` against the book, calling `on_trade` for each trade in the order they
    /// happen, and rests the remainder. A reused order key is rejected and changes nothing.
    ///
    /// # Panics
    /// If `order` is for another instrument (a routing bug, not bad input).
    pub fn submit(
        &mut self,
        order: &Order,
        mut on_trade: impl FnMut(Trade),
    ) -> Result<Fill, RejectReason> {
        assert_eq!(
            order.instrument(),
            self.instrument,
            "order routed to the wrong book"
        );
        if !self.seen.insert(order.key()) {
            return Err(RejectReason::DuplicateClientOrderId);
        }
        let taker = order.key();
        let mut remaining = order.volume();
        let limit = order.price();
        let side = order.side();
        while remaining > 0 {
            let (opposite, spare) = match side {
                Side::Buy => (&mut self.asks, &mut self.spare_levels),
                Side::Sell => (&mut self.bids, &mut self.spare_levels),
            };
            let best = match side {
                Side::Buy => opposite.first_entry(),
                Side::Sell => opposite.last_entry(),
            };
            let Some(mut best) = best else { break };
            let price = *best.key();
            let crosses = match side {
                Side::Buy => price <= limit,
                Side::Sell => price >= limit,
            };
            if !crosses {
                break;
            }
            let level = best.get_mut();
            while remaining > 0 {
                let Some(maker) = level.front_mut() else {
                    break;
                };
                let volume = remaining.min(maker.remaining);
                maker.remaining -= volume;
                remaining -= volume;
                self.trades += 1;
                self.traded_volume += u64::from(volume);
                on_trade(Trade {
                    price,
                    volume,
                    maker: maker.key,
                    taker,
                    taker_side: side,
                });
                if maker.remaining == 0 {
                    level.pop_front();
                }
            }
            if level.is_empty() {
                spare.push(best.remove());
            }
        }
        if remaining > 0 {
            let own = match side {
                Side::Buy => &mut self.bids,
                Side::Sell => &mut self.asks,
            };
            let spare = &mut self.spare_levels;
            own.entry(limit)
                .or_insert_with(|| spare.pop().unwrap_or_default())
                .push_back(Resting {
                    key: taker,
                    remaining,
                });
        }
        Ok(Fill {
            filled: order.volume() - remaining,
            resting: remaining,
        })
    }

    /// Highest bid price.
    pub fn best_bid(&self) -> Option<u32> {
        self.bids.keys().next_back().copied()
    }

    /// Lowest ask price.
    pub fn best_ask(&self) -> Option<u32> {
        self.asks.keys().next().copied()
    }

    /// One side's resting orders in priority order: best price first, oldest first within a
    /// price. Each entry is `(price, order)`.
    pub fn side(&self, side: Side) -> Vec<(u32, Resting)> {
        let mut out = Vec::new();
        let mut push = |(price, level): (&u32, &Level)| {
            out.extend(level.iter().map(|r| (*price, *r)));
        };
        match side {
            Side::Buy => self.bids.iter().rev().for_each(&mut push),
            Side::Sell => self.asks.iter().for_each(&mut push),
        }
        out
    }

    /// True if no order rests on either side.
    pub fn is_empty(&self) -> bool {
        self.bids.is_empty() && self.asks.is_empty()
    }

    /// Trades made so far.
    pub fn trades(&self) -> u64 {
        self.trades
    }

    /// Volume traded so far.
    pub fn traded_volume(&self) -> u64 {
        self.traded_volume
    }

    /// Orders accepted so far.
    pub fn accepted(&self) -> usize {
        self.seen.len()
    }

    /// True if the book has accepted an order with this key.
    pub fn contains(&self, key: &OrderKey) -> bool {
        self.seen.contains(key)
    }

    /// The keys of every order the book has accepted, sorted.
    pub fn accepted_keys(&self) -> Vec<OrderKey> {
        let mut keys: Vec<_> = self.seen.iter().collect();
        keys.sort_unstable();
        keys
    }

    /// A stable hash of the book's whole state: both sides in priority order, the trade
    /// counters and the set of accepted keys. Equal books give equal hashes in any process.
    pub fn state_hash(&self) -> u64 {
        let mut h = StateHasher::new();
        h.word(u64::from(self.instrument.0));
        for (tag, side) in [(1u64, Side::Buy), (2, Side::Sell)] {
            h.word(tag);
            for (price, r) in self.side(side) {
                h.word(u64::from(price))
                    .word(u64::from(r.key.client.0))
                    .word(r.key.client_order_id)
                    .word(u64::from(r.remaining));
            }
        }
        // The set has no order of its own: combine its members with a commutative sum.
        let keys = self.seen.iter().fold(0u64, |sum, k| {
            sum.wrapping_add(mix64(
                mix64(u64::from(k.client.0)) ^ k.client_order_id.rotate_left(17),
            ))
        });
        h.word(3)
            .word(self.trades)
            .word(self.traded_volume)
            .word(self.seen.len() as u64)
            .word(keys);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::ClientId;

    fn order(client: u32, id: u64, side: Side, price: u32, volume: u32) -> Order {
        Order::new_checked(ClientId(client), id, InstrumentId(0), side, price, volume)
    }

    fn submit(book: &mut OrderBook, o: Order) -> (Fill, Vec<Trade>) {
        let mut trades = Vec::new();
        let fill = book.submit(&o, |t| trades.push(t)).unwrap();
        (fill, trades)
    }

    #[test]
    fn price_then_time_priority() {
        let mut book = OrderBook::new(InstrumentId(0));
        submit(&mut book, order(1, 1, Side::Sell, 101, 5));
        submit(&mut book, order(2, 1, Side::Sell, 100, 5));
        submit(&mut book, order(3, 1, Side::Sell, 100, 5));
        let (fill, trades) = submit(&mut book, order(4, 1, Side::Buy, 101, 12));
        assert_eq!(
            fill,
            Fill {
                filled: 12,
                resting: 0
            }
        );
        let makers: Vec<_> = trades
            .iter()
            .map(|t| (t.maker.client.0, t.price, t.volume))
            .collect();
        assert_eq!(makers, vec![(2, 100, 5), (3, 100, 5), (1, 101, 2)]);
        assert_eq!(book.side(Side::Sell), vec![(101, resting(1, 1, 3))]);
    }

    fn resting(client: u32, id: u64, remaining: u32) -> Resting {
        Resting {
            key: OrderKey {
                client: ClientId(client),
                client_order_id: id,
            },
            remaining,
        }
    }

    #[test]
    fn remainder_rests_and_book_never_crosses() {
        let mut book = OrderBook::new(InstrumentId(0));
        submit(&mut book, order(1, 1, Side::Buy, 99, 5));
        let (fill, trades) = submit(&mut book, order(2, 1, Side::Sell, 98, 8));
        assert_eq!(
            fill,
            Fill {
                filled: 5,
                resting: 3
            }
        );
        assert_eq!(trades[0].price, 99);
        assert_eq!(book.best_bid(), None);
        assert_eq!(book.best_ask(), Some(98));
    }

    #[test]
    fn duplicates_are_rejected_without_effect() {
        let mut book = OrderBook::new(InstrumentId(0));
        submit(&mut book, order(1, 1, Side::Buy, 99, 5));
        let before = book.state_hash();
        assert_eq!(
            book.submit(&order(1, 1, Side::Sell, 99, 5), |_| {}),
            Err(RejectReason::DuplicateClientOrderId)
        );
        assert_eq!(book.state_hash(), before);
        // Another client may use the same number.
        assert!(book.submit(&order(2, 1, Side::Sell, 99, 5), |_| {}).is_ok());
        assert!(book.is_empty());
    }

    #[test]
    fn equal_histories_hash_equal() {
        let mut a = OrderBook::new(InstrumentId(0));
        let mut b = OrderBook::new(InstrumentId(0));
        for (i, o) in [(Side::Buy, 99), (Side::Sell, 101), (Side::Sell, 99)]
            .into_iter()
            .enumerate()
        {
            let o = order(1, i as u64, o.0, o.1, 3);
            submit(&mut a, o);
            submit(&mut b, o);
        }
        assert_eq!(a.state_hash(), b.state_hash());
        submit(&mut b, order(1, 9, Side::Buy, 50, 1));
        assert_ne!(a.state_hash(), b.state_hash());
    }
}
