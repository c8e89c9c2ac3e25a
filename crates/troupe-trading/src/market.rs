//! The market's static configuration: which instruments exist, the price band of each, and
//! which matching-engine pair owns each order book (the market is sharded by book).
//!
//! It is immutable once built and shared by every receiver (`Arc<Market>`), so receivers stay
//! stateless: validating and routing an order reads it and changes nothing.

use crate::order::{InstrumentId, NewOrder, Order, RejectReason};

/// One instrument: an order book and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instrument {
    /// A human name, e.g. `A1`.
    pub symbol: String,
    /// The matching-engine pair that owns the book (0-based).
    pub pair: usize,
    /// Lowest accepted price, in ticks (at least 1).
    pub min_price: u32,
    /// Highest accepted price, in ticks.
    pub max_price: u32,
}

/// Why a market configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketError {
    /// A market needs at least one engine pair.
    #[error("a market needs at least one matching-engine pair")]
    NoPairs,
    /// Instrument ids are 16 bits.
    #[error("{0} instruments is more than the 65,536 a market can hold")]
    TooManyInstruments(usize),
    /// An instrument names a pair that does not exist.
    #[error("instrument {symbol} is on pair {pair}, but the market has {pairs} pair(s)")]
    NoSuchPair {
        /// The instrument.
        symbol: String,
        /// The pair it names.
        pair: usize,
        /// Pairs in the market.
        pairs: usize,
    },
    /// Empty band, or a band that includes zero or exceeds `i32::MAX`.
    #[error("instrument {symbol} has an invalid price band {min}..={max} (need 1 <= min <= max <= 2^31-1)")]
    BadBand {
        /// The instrument.
        symbol: String,
        /// Its lowest price.
        min: u32,
        /// Its highest price.
        max: u32,
    },
    /// Two instruments share a symbol.
    #[error("symbol {0} is used twice")]
    DuplicateSymbol(String),
}

/// Instruments, price bands and the book-to-pair routing.
///
/// ```
/// use troupe_trading::{ClientId, Market, NewOrder, RejectReason, Side};
/// let market = Market::seed();
/// let a1 = market.lookup("A1").unwrap();
/// assert!(market.validate(&NewOrder::limit(ClientId(0), 1, a1, Side::Buy, 99, 10)).is_ok());
/// assert_eq!(
///     market.validate(&NewOrder::limit(ClientId(0), 2, a1, Side::Buy, 99, -5)),
///     Err(RejectReason::NonPositiveVolume(-5))
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Market {
    instruments: Vec<Instrument>,
    pairs: usize,
}

impl Market {
    /// A market of `pairs` engine pairs holding `instruments` (instrument `i` gets id `i`).
    pub fn new(pairs: usize, instruments: Vec<Instrument>) -> Result<Self, MarketError> {
        if pairs == 0 {
            return Err(MarketError::NoPairs);
        }
        if instruments.len() > usize::from(u16::MAX) + 1 {
            return Err(MarketError::TooManyInstruments(instruments.len()));
        }
        let mut symbols = std::collections::HashSet::new();
        for i in &instruments {
            if i.pair >= pairs {
                return Err(MarketError::NoSuchPair {
                    symbol: i.symbol.clone(),
                    pair: i.pair,
                    pairs,
                });
            }
            if i.min_price == 0 || i.min_price > i.max_price || i.max_price > i32::MAX as u32 {
                return Err(MarketError::BadBand {
                    symbol: i.symbol.clone(),
                    min: i.min_price,
                    max: i.max_price,
                });
            }
            if !symbols.insert(i.symbol.as_str()) {
                return Err(MarketError::DuplicateSymbol(i.symbol.clone()));
            }
        }
        Ok(Market { instruments, pairs })
    }

    /// The seed's market: 15 order books `A1..A5`, `B1..B5`, `C1..C5` on 3 engine pairs (one
    /// letter per pair), prices from 1 to 1,000,000 ticks.
    pub fn seed() -> Self {
        let instruments = ["A", "B", "C"]
            .iter()
            .enumerate()
            .flat_map(|(pair, prefix)| {
                (1..=5).map(move |i| Instrument {
                    symbol: format!("{prefix}{i}"),
                    pair,
                    min_price: 1,
                    max_price: 1_000_000,
                })
            })
            .collect();
        Market::new(3, instruments).expect("the seed market is valid")
    }

    /// Checks an order against the market's rules (the checks that need no book state: the
    /// duplicate check happens in the book).
    pub fn validate(&self, order: &NewOrder) -> Result<Order, RejectReason> {
        let instrument = self
            .instrument(order.instrument)
            .ok_or(RejectReason::UnknownInstrument(order.instrument.0))?;
        if order.volume <= 0 {
            return Err(RejectReason::NonPositiveVolume(order.volume));
        }
        let in_band = u32::try_from(order.price)
            .ok()
            .filter(|p| (instrument.min_price..=instrument.max_price).contains(p));
        let Some(price) = in_band else {
            return Err(RejectReason::PriceOutOfRange(order.price));
        };
        Ok(Order::new_checked(
            order.client,
            order.client_order_id,
            order.instrument,
            order.side,
            price,
            order.volume as u32,
        ))
    }

    /// Checks an order read back from a log against the market (the log may predate a change
    /// of configuration).
    pub(crate) fn recheck(&self, order: &Order) -> Result<(), RejectReason> {
        let instrument = self
            .instrument(order.instrument())
            .ok_or(RejectReason::UnknownInstrument(order.instrument().0))?;
        if !(instrument.min_price..=instrument.max_price).contains(&order.price()) {
            return Err(RejectReason::PriceOutOfRange(order.price() as i32));
        }
        Ok(())
    }

    /// The instrument with this id.
    pub fn instrument(&self, id: InstrumentId) -> Option<&Instrument> {
        self.instruments.get(usize::from(id.0))
    }

    /// The id of the instrument with this symbol.
    pub fn lookup(&self, symbol: &str) -> Option<InstrumentId> {
        self.instruments
            .iter()
            .position(|i| i.symbol == symbol)
            .map(|i| InstrumentId(i as u16))
    }

    /// Every instrument, in id order.
    pub fn instruments(&self) -> &[Instrument] {
        &self.instruments
    }

    /// The ids of the instruments owned by `pair`.
    pub fn instruments_of(&self, pair: usize) -> impl Iterator<Item = InstrumentId> + '_ {
        self.instruments
            .iter()
            .enumerate()
            .filter(move |(_, i)| i.pair == pair)
            .map(|(id, _)| InstrumentId(id as u16))
    }

    /// Number of matching-engine pairs.
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// The pair owning an instrument's book.
    pub fn pair_of(&self, id: InstrumentId) -> Option<usize> {
        self.instrument(id).map(|i| i.pair)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::{ClientId, Side};

    fn order(instrument: u16, price: i32, volume: i32) -> NewOrder {
        NewOrder::limit(
            ClientId(1),
            7,
            InstrumentId(instrument),
            Side::Sell,
            price,
            volume,
        )
    }

    #[test]
    fn seed_market_routes_by_letter() {
        let m = Market::seed();
        assert_eq!(m.instruments().len(), 15);
        assert_eq!(m.pair_of(m.lookup("A5").unwrap()), Some(0));
        assert_eq!(m.pair_of(m.lookup("B1").unwrap()), Some(1));
        assert_eq!(m.pair_of(m.lookup("C3").unwrap()), Some(2));
        assert_eq!(m.instruments_of(2).count(), 5);
    }

    #[test]
    fn every_bad_field_has_its_reason() {
        let m = Market::seed();
        assert_eq!(
            m.validate(&order(99, 10, 1)),
            Err(RejectReason::UnknownInstrument(99))
        );
        assert_eq!(
            m.validate(&order(0, 10, 0)),
            Err(RejectReason::NonPositiveVolume(0))
        );
        assert_eq!(
            m.validate(&order(0, 0, 1)),
            Err(RejectReason::PriceOutOfRange(0))
        );
        assert_eq!(
            m.validate(&order(0, -3, 1)),
            Err(RejectReason::PriceOutOfRange(-3))
        );
        assert_eq!(
            m.validate(&order(0, 1_000_001, 1)),
            Err(RejectReason::PriceOutOfRange(1_000_001))
        );
        let ok = m.validate(&order(0, 1_000_000, i32::MAX)).unwrap();
        assert_eq!((ok.price(), ok.volume()), (1_000_000, i32::MAX as u32));
    }

    #[test]
    fn bad_configurations_are_refused() {
        let inst = |symbol: &str, pair, min, max| Instrument {
            symbol: symbol.into(),
            pair,
            min_price: min,
            max_price: max,
        };
        assert_eq!(Market::new(0, vec![]), Err(MarketError::NoPairs));
        assert!(matches!(
            Market::new(1, vec![inst("X", 1, 1, 2)]),
            Err(MarketError::NoSuchPair { .. })
        ));
        assert!(matches!(
            Market::new(1, vec![inst("X", 0, 0, 2)]),
            Err(MarketError::BadBand { .. })
        ));
        assert!(matches!(
            Market::new(1, vec![inst("X", 0, 1, 2), inst("X", 0, 1, 2)]),
            Err(MarketError::DuplicateSymbol(_))
        ));
    }
}
