//! Property test: the order book against a naive reference book.
//!
//! The reference keeps every resting order in one list and, for each incoming order, scans
//! the whole list for the best opposite order (best price, then earliest arrival): slow and
//! obviously right. Random streams of orders (valid and invalid, with reused ids) go through
//! the market's validation and the real books, and through the reference's own validation and
//! book; rejections, trades and the final books must be equal.

use proptest::prelude::*;
use troupe_trading::{
    ClientId, Instrument, InstrumentId, Market, NewOrder, OrderBook, OrderKey, RejectReason, Side,
    Trade,
};

const INSTRUMENTS: u16 = 3;
const MIN_PRICE: i32 = 1;
const MAX_PRICE: i32 = 10;

fn market() -> Market {
    let instruments = (0..INSTRUMENTS)
        .map(|i| Instrument {
            symbol: format!("I{i}"),
            pair: usize::from(i) % 2,
            min_price: MIN_PRICE as u32,
            max_price: MAX_PRICE as u32,
        })
        .collect();
    Market::new(2, instruments).unwrap()
}

#[derive(Debug, Clone)]
struct RefOrder {
    arrival: u64,
    side: Side,
    price: u32,
    key: OrderKey,
    remaining: u32,
}

/// The naive reference: one list per instrument, full scans.
#[derive(Default)]
struct Reference {
    books: Vec<Vec<RefOrder>>,
    seen: Vec<Vec<OrderKey>>,
    arrivals: u64,
}

impl Reference {
    fn new() -> Self {
        Reference {
            books: vec![Vec::new(); usize::from(INSTRUMENTS)],
            seen: vec![Vec::new(); usize::from(INSTRUMENTS)],
            arrivals: 0,
        }
    }

    fn submit(&mut self, o: &NewOrder, trades: &mut Vec<Trade>) -> Result<u32, RejectReason> {
        if o.instrument.0 >= INSTRUMENTS {
            return Err(RejectReason::UnknownInstrument(o.instrument.0));
        }
        if o.volume <= 0 {
            return Err(RejectReason::NonPositiveVolume(o.volume));
        }
        if o.price < MIN_PRICE || o.price > MAX_PRICE {
            return Err(RejectReason::PriceOutOfRange(o.price));
        }
        let i = usize::from(o.instrument.0);
        let key = OrderKey {
            client: o.client,
            client_order_id: o.client_order_id,
        };
        if self.seen[i].contains(&key) {
            return Err(RejectReason::DuplicateClientOrderId);
        }
        self.seen[i].push(key);
        let limit = o.price as u32;
        let mut remaining = o.volume as u32;
        let book = &mut self.books[i];
        while remaining > 0 {
            let best = book
                .iter()
                .enumerate()
                .filter(|(_, r)| r.side != o.side)
                .filter(|(_, r)| match o.side {
                    Side::Buy => r.price <= limit,
                    Side::Sell => r.price >= limit,
                })
                .min_by_key(|(_, r)| {
                    let price_rank = match o.side {
                        Side::Buy => i64::from(r.price),
                        Side::Sell => -i64::from(r.price),
                    };
                    (price_rank, r.arrival)
                })
                .map(|(at, _)| at);
            let Some(at) = best else { break };
            let maker = &mut book[at];
            let volume = remaining.min(maker.remaining);
            trades.push(Trade {
                price: maker.price,
                volume,
                maker: maker.key,
                taker: key,
                taker_side: o.side,
            });
            maker.remaining -= volume;
            remaining -= volume;
            if maker.remaining == 0 {
                book.remove(at);
            }
        }
        if remaining > 0 {
            self.arrivals += 1;
            book.push(RefOrder {
                arrival: self.arrivals,
                side: o.side,
                price: limit,
                key,
                remaining,
            });
        }
        Ok(o.volume as u32 - remaining)
    }

    /// One side in priority order, as `(price, key, remaining)`.
    fn side(&self, instrument: usize, side: Side) -> Vec<(u32, OrderKey, u32)> {
        let mut orders: Vec<_> = self.books[instrument]
            .iter()
            .filter(|r| r.side == side)
            .cloned()
            .collect();
        orders.sort_by_key(|r| {
            let price_rank = match side {
                Side::Buy => -i64::from(r.price),
                Side::Sell => i64::from(r.price),
            };
            (price_rank, r.arrival)
        });
        orders
            .into_iter()
            .map(|r| (r.price, r.key, r.remaining))
            .collect()
    }
}

fn new_order() -> impl Strategy<Value = NewOrder> {
    (
        0..=INSTRUMENTS,                   // INSTRUMENTS itself is unknown
        any::<bool>(),                     // side
        (MIN_PRICE - 1)..=(MAX_PRICE + 1), // a little out of band at both ends
        -2i32..=25,                        // volume, sometimes not positive
        0u32..3,                           // client
        0u64..40,                          // client order id: reuse is likely
    )
        .prop_map(|(instrument, buy, price, volume, client, id)| {
            let side = if buy { Side::Buy } else { Side::Sell };
            NewOrder::limit(
                ClientId(client),
                id,
                InstrumentId(instrument),
                side,
                price,
                volume,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn book_matches_the_naive_reference(orders in prop::collection::vec(new_order(), 1..250)) {
        let market = market();
        let mut books: Vec<OrderBook> =
            (0..INSTRUMENTS).map(|i| OrderBook::new(InstrumentId(i))).collect();
        let mut reference = Reference::new();
        for o in &orders {
            let mut expected_trades = Vec::new();
            let expected = reference.submit(o, &mut expected_trades);
            let mut trades = Vec::new();
            let got = market.validate(o).and_then(|valid| {
                books[usize::from(valid.instrument().0)]
                    .submit(&valid, |t| trades.push(t))
                    .map(|fill| fill.filled)
            });
            prop_assert_eq!(got, expected, "outcome of {:?}", o);
            prop_assert_eq!(&trades, &expected_trades, "trades of {:?}", o);
        }
        for (i, book) in books.iter().enumerate() {
            for side in [Side::Buy, Side::Sell] {
                let got: Vec<_> = book
                    .side(side)
                    .into_iter()
                    .map(|(price, r)| (price, r.key, r.remaining))
                    .collect();
                prop_assert_eq!(got, reference.side(i, side));
            }
            // Never crossed.
            if let (Some(bid), Some(ask)) = (book.best_bid(), book.best_ask()) {
                prop_assert!(bid < ask);
            }
        }
    }
}
