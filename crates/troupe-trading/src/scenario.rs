//! The seed's benchmark scenario, as a deterministic order generator.
//!
//! The seed puts buy and sell orders of equal volume (1000) into its 15 books: in each
//! *round* a client sends one sell order to every book, then one buy order to every book.
//! Book `X<i>` is priced around `100 - i` ticks. The seed used one price per book; here the
//! price moves over [`LEVELS`] levels from round to round (sells at or below the book's
//! reference price, buys at or above it), so with several clients the depth builds up on
//! several levels, as the issue asks.
//!
//! Every buy is priced at or above every sell of its book, and all volumes are equal, so any
//! resting order is crossed by the next opposite order and every trade fills both orders
//! completely. Each book gets as many buys as sells, so at the end every order has traded
//! and the books are empty: **trades = orders / 2**, the seed's own check.

use crate::market::Market;
use crate::order::{ClientId, InstrumentId, NewOrder, Side};

/// Price levels each side spreads over.
pub const LEVELS: u64 = 5;
/// Volume of every order.
pub const VOLUME: i32 = 1000;

/// The seed scenario over a market's books. See the module note.
///
/// ```
/// use troupe_trading::{ClientId, Market, SeedScenario, Side};
/// let scenario = SeedScenario::new(&Market::seed());
/// assert_eq!(scenario.orders_per_round(), 30);
/// let first = scenario.order(ClientId(0), 0, 0);
/// assert_eq!((first.side, first.price, first.client_order_id), (Side::Sell, 99, 1));
/// ```
#[derive(Debug, Clone)]
pub struct SeedScenario {
    books: Vec<(InstrumentId, i32)>,
}

impl SeedScenario {
    /// The scenario over every instrument of `market`: instrument `n` has reference price
    /// `100 - (n % 5 + 1)`, as the seed's `A1..A5` have 99..95.
    pub fn new(market: &Market) -> Self {
        let books = (0..market.instruments().len())
            .map(|n| (InstrumentId(n as u16), 100 - (n as i32 % 5 + 1)))
            .collect();
        SeedScenario { books }
    }

    /// Orders a client sends per round: one sell and one buy per book.
    pub fn orders_per_round(&self) -> usize {
        2 * self.books.len()
    }

    /// The `k`-th order (`0..orders_per_round()`) of a client's `round`. Client order ids
    /// count up from 1 in sending order.
    pub fn order(&self, client: ClientId, round: u64, k: usize) -> NewOrder {
        let n = self.books.len();
        let (instrument, reference) = self.books[k % n];
        let level = (round % LEVELS) as i32;
        let (side, price) = if k < n {
            (Side::Sell, reference - level)
        } else {
            (Side::Buy, reference + level)
        };
        let id = round * self.orders_per_round() as u64 + k as u64 + 1;
        NewOrder::limit(client, id, instrument, side, price, VOLUME)
    }

    /// Rounds each of `clients` runs so that all together send about `total` orders (the
    /// seed: 750,000 orders = 25,000 rounds shared by the clients).
    pub fn rounds_per_client(&self, total: u64, clients: usize) -> u64 {
        let per_round = self.orders_per_round() as u64 * clients as u64;
        total.div_ceil(per_round).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_sizes() {
        let s = SeedScenario::new(&Market::seed());
        for clients in [1, 2, 4, 8, 10, 20, 40] {
            let rounds = s.rounds_per_client(750_000, clients);
            assert_eq!(rounds * clients as u64 * 30, 750_000, "{clients} clients");
        }
    }

    #[test]
    fn every_buy_crosses_every_sell() {
        let s = SeedScenario::new(&Market::seed());
        for round in 0..LEVELS {
            for k in 0..15 {
                let sell = s.order(ClientId(0), round, k);
                for r2 in 0..LEVELS {
                    let buy = s.order(ClientId(0), r2, k + 15);
                    assert_eq!(sell.instrument, buy.instrument);
                    assert!(buy.price >= sell.price);
                }
            }
        }
    }
}
