//! A shard: the order books one matching engine owns, the count of orders it has applied,
//! and its transaction log. This is the engine's deterministic state machine, with no
//! messaging: the actor in `engine.rs` drives it, and so do the benchmark's baselines (plain
//! method calls, and threads with locks).
//!
//! Determinism is what makes primary and standby agree: both start from the same log, apply
//! the same orders in the same order, and so hold equal books and equal [`Shard::state_hash`]es.
//! Sequence number `n` is the `n`-th accepted order; rejected orders change nothing and are
//! not logged.

use crate::book::{Fill, OrderBook};
use crate::hash::StateHasher;
use crate::log::{Journal, LogError};
use crate::market::Market;
use crate::order::{InstrumentId, Order, OrderKey, RejectReason, Role};

/// The books and log of one matching engine. See the module note.
///
/// ```
/// use troupe_trading::{ClientId, Market, NewOrder, Role, Shard, Side};
/// let market = Market::seed();
/// let a1 = market.lookup("A1").unwrap();
/// let mut primary = Shard::new(&market, 0, Role::Primary);
/// let mut standby = Shard::new(&market, 0, Role::Standby);
/// for (id, side) in [(1, Side::Sell), (2, Side::Buy)] {
///     let order = market.validate(&NewOrder::limit(ClientId(0), id, a1, side, 99, 10)).unwrap();
///     primary.apply(&order).unwrap();
///     standby.apply(&order).unwrap();
/// }
/// assert_eq!(primary.trades(), 1);
/// assert_eq!(primary.state_hash(), standby.state_hash());
/// ```
#[derive(Debug)]
pub struct Shard {
    pair: usize,
    role: Role,
    /// Indexed by instrument id; `None` for instruments of other pairs.
    books: Vec<Option<OrderBook>>,
    applied: u64,
    journal: Option<Journal>,
}

impl Shard {
    /// An empty shard holding the books of `pair`, with no log.
    pub fn new(market: &Market, pair: usize, role: Role) -> Self {
        let mut books: Vec<Option<OrderBook>> = vec![None; market.instruments().len()];
        for id in market.instruments_of(pair) {
            books[usize::from(id.0)] = Some(OrderBook::new(id));
        }
        Shard {
            pair,
            role,
            books,
            applied: 0,
            journal: None,
        }
    }

    /// Attaches the log that new orders are appended to. Its next sequence number must follow
    /// the orders already applied (replay first, then attach).
    pub fn attach(&mut self, journal: Journal) {
        assert_eq!(
            journal.next_seq(),
            self.applied + 1,
            "a log is attached after replaying it"
        );
        self.journal = Some(journal);
    }

    /// Checks that `order` would be accepted (its book is here and its key is new) without
    /// changing anything.
    pub fn check(&self, order: &Order) -> Result<(), RejectReason> {
        match self.book(order.instrument()) {
            None => Err(RejectReason::UnknownInstrument(order.instrument().0)),
            Some(book) if book.contains(&order.key()) => Err(RejectReason::DuplicateClientOrderId),
            Some(_) => Ok(()),
        }
    }

    /// Matches `order` in its book and, if accepted, appends it to the log (written at the
    /// next [`commit`](Shard::commit)). Returns the fill; the order's sequence number is then
    /// [`applied`](Shard::applied).
    pub fn apply(&mut self, order: &Order) -> Result<Fill, RejectReason> {
        let fill = self.replay(order)?;
        if let Some(journal) = &mut self.journal {
            journal.append(order);
        }
        Ok(fill)
    }

    /// Applies an order read from the log (it is not appended again).
    pub fn replay(&mut self, order: &Order) -> Result<Fill, RejectReason> {
        let book = self
            .books
            .get_mut(usize::from(order.instrument().0))
            .and_then(Option::as_mut)
            .ok_or(RejectReason::UnknownInstrument(order.instrument().0))?;
        let fill = book.submit(order, |_| {})?;
        self.applied += 1;
        Ok(fill)
    }

    /// Makes every applied order as durable as the log mode promises (see [`Journal::commit`]).
    pub fn commit(&mut self) -> Result<(), LogError> {
        match &mut self.journal {
            Some(journal) => journal.commit(),
            None => Ok(()),
        }
    }

    /// Starts the log's flusher (fsync mode; see [`Journal::start_flusher`]): from then on
    /// [`submit`](Shard::submit) does not wait for the disk, and `on_durable` reports what is
    /// durable. Without a log, or in another mode, does nothing.
    pub fn start_flusher(
        &mut self,
        on_durable: impl FnMut(Result<u64, LogError>) + Send + 'static,
    ) -> Result<(), LogError> {
        match &mut self.journal {
            Some(journal) => journal.start_flusher(on_durable),
            None => Ok(()),
        }
    }

    /// Writes the applied orders to the log and hands them to its flusher (see
    /// [`Journal::submit`]); without a flusher, [`commit`](Shard::commit).
    pub fn submit(&mut self) -> Result<(), LogError> {
        match &mut self.journal {
            Some(journal) => journal.submit(),
            None => Ok(()),
        }
    }

    /// Log commits made (in fsync mode: each is one `fdatasync`, covering a batch).
    pub fn commits(&self) -> u64 {
        self.journal.as_ref().map_or(0, Journal::commits)
    }

    /// True if applied orders wait for a commit.
    pub fn has_uncommitted(&self) -> bool {
        self.journal.as_ref().is_some_and(Journal::has_pending)
    }

    /// Flushes everything to disk whatever the mode (for a clean stop).
    pub fn sync(&mut self) -> Result<(), LogError> {
        match &mut self.journal {
            Some(journal) => journal.sync(),
            None => Ok(()),
        }
    }

    /// Flushes everything to disk whatever the mode, and stops the log's flusher, joining its
    /// thread (for a clean stop; see [`Journal::close`]).
    pub fn close(&mut self) -> Result<(), LogError> {
        match &mut self.journal {
            Some(journal) => journal.close(),
            None => Ok(()),
        }
    }

    /// Orders accepted so far (the sequence number of the last one).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The engine pair this shard belongs to.
    pub fn pair(&self) -> usize {
        self.pair
    }

    /// Primary or standby.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The book of an instrument, if this shard owns it.
    pub fn book(&self, id: InstrumentId) -> Option<&OrderBook> {
        self.books.get(usize::from(id.0)).and_then(Option::as_ref)
    }

    /// Every book this shard owns, in instrument order.
    pub fn books(&self) -> impl Iterator<Item = &OrderBook> {
        self.books.iter().flatten()
    }

    /// Trades made in all books.
    pub fn trades(&self) -> u64 {
        self.books().map(OrderBook::trades).sum()
    }

    /// Volume traded in all books.
    pub fn traded_volume(&self) -> u64 {
        self.books().map(OrderBook::traded_volume).sum()
    }

    /// Orders resting in all books.
    pub fn resting(&self) -> usize {
        self.books()
            .map(|b| b.side(crate::Side::Buy).len() + b.side(crate::Side::Sell).len())
            .sum()
    }

    /// The keys of every accepted order, sorted.
    pub fn accepted_keys(&self) -> Vec<OrderKey> {
        let mut keys: Vec<_> = self.books().flat_map(OrderBook::accepted_keys).collect();
        keys.sort_unstable();
        keys
    }

    /// A stable hash of the whole state: the applied count and every book's hash. Primary and
    /// standby with the same history have the same hash.
    pub fn state_hash(&self) -> u64 {
        let mut h = StateHasher::new();
        h.word(self.pair as u64).word(self.applied);
        for book in self.books() {
            h.word(book.state_hash());
        }
        h.finish()
    }
}
