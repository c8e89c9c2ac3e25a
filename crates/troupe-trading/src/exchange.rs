//! The exchange: builds the whole system on a troupe [`System`], after recovering its state
//! from the logs.
//!
//! # Start-up
//! For each engine pair, both logs are first read without changing them ([`Journal::scan`]).
//! Because the standby receives orders in the primary's order, each log holds a prefix of one
//! and the same sequence; a crash can leave one log longer than the other, and a torn tail on
//! either (see `log.rs` for torn tails and mid-file damage).
//!
//! 1. The pair's history is rebuilt from both logs: sequence number by sequence number, the
//!    record is taken from whichever log holds a valid one, up to the first number neither
//!    holds. A record both logs hold must be the same in both, or they do not come from one
//!    pair: start-up refuses them ([`StartError::Diverged`]). So a record damaged in one log
//!    is taken from the other: an acknowledged order is in both logs (the primary acknowledges
//!    only once its standby's watermark covers the order; in one-way style the client waits
//!    for both engines), and it is lost only if both logs lost it. Records after a number
//!    neither log holds cannot be replayed consistently and are not kept (counted in the
//!    report).
//! 2. Mid-file damage in either log stops the start with [`StartError::Damaged`], which says
//!    what salvage would keep and drop, before anything is written to either log; unless
//!    [`ExchangeConfig::recovery`] is [`Recovery::Salvage`].
//! 3. Each log is brought to the history: a torn tail is cut, a shorter log is caught up (the
//!    missing records appended and synced), a log with mid-file damage is rebuilt (the
//!    damaged file kept as `<log>.damaged`). Both engines replay the same history and start
//!    with equal states.
//!
//! With [`ExchangeConfig::disk`] the logs live on a simulated disk ([`SimDisk`], for
//! deterministic simulation: see the `simulation` module) instead of in `log_dir`; recovery
//! and everything after it are the same code.
//!
//! With [`ExchangeConfig::read_only`] none of step 3 is written: the logs are only scanned,
//! the engines replay the history in memory and run without a log; the report says what a
//! start for writing would do. `troupe-trading inspect` starts the exchange so.
//!
//! Then the actors are spawned: each standby, then its primary (which knows its standby), then
//! the receivers (which share one [`Router`], which knows every primary; a client actor in
//! this process may run the router itself, [`Exchange::router`]). Everything shares the
//! system's worker pool; in
//! fsync mode each engine's log also has a flusher thread of its own (`flush.rs`), which runs
//! the log's `fdatasync`s so that no engine waits for the disk.
//!
//! # Shutdown
//! [`Exchange::shutdown`] stops the receivers, then the engines; an engine flushes its log to
//! disk as it stops, then stops its log's flusher and joins its thread.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe::{Addr, AskError, System};

use crate::engine::{Engine, EngineState, GetAcceptedKeys, GetState, SetPrimary, Style, SyncLog};
use crate::flush::LogObserver;
use crate::log::{Journal, LogEnd, LogError, LogMode, LogScan, Place, Recovery, Salvaged, TailCut};
use crate::market::Market;
use crate::order::{ClientId, NewOrder, Order, OrderKey, RejectReason, Role};
use crate::receiver::{Receiver, Router, Submit};
use crate::session::{AckSink, ConnectError, Sessions};
use crate::shard::Shard;
use crate::sim_disk::SimDisk;

/// How to build an exchange.
#[derive(Debug, Clone)]
pub struct ExchangeConfig {
    /// Instruments and routing.
    pub market: Market,
    /// Order receivers to run (the seed ran 10).
    pub receivers: usize,
    /// Request-reply or one-way.
    pub style: Style,
    /// Durability of the transaction logs.
    pub log: LogMode,
    /// Directory of the logs (required unless `log` is `None`, or `disk` is set).
    pub log_dir: Option<PathBuf>,
    /// A simulated disk to keep the logs on instead of `log_dir` (deterministic simulation:
    /// see [`SimDisk`] and the crate's `simulation` module). `None`: files in `log_dir`.
    pub disk: Option<SimDisk>,
    /// Most sessions that may connect.
    pub max_sessions: usize,
    /// What to do with a log that has mid-file damage: refuse to start (the default), or
    /// salvage it (see the module note).
    pub recovery: Recovery,
    /// Only read the logs: nothing is cut, caught up, rebuilt or appended, and the engines run
    /// without a log. For inspecting logs.
    pub read_only: bool,
    /// Watches every fsync log's writes and flushes (for tests and diagnostics); see
    /// [`LogObserver`].
    pub log_observer: Option<Arc<dyn LogObserver>>,
}

impl ExchangeConfig {
    /// The seed's system: its market, 10 receivers, request-reply, no log.
    pub fn seed() -> Self {
        ExchangeConfig {
            market: Market::seed(),
            receivers: 10,
            style: Style::RequestReply,
            log: LogMode::None,
            log_dir: None,
            disk: None,
            max_sessions: 1024,
            recovery: Recovery::Strict,
            read_only: false,
            log_observer: None,
        }
    }
}

/// Why an exchange could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A log mode was chosen without a directory for the logs.
    #[error("log mode {0} needs a log directory")]
    NoLogDir(&'static str),
    /// The configuration asks for no receivers.
    #[error("an exchange needs at least one order receiver")]
    NoReceivers,
    /// A log could not be opened or repaired.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A log of the pair has mid-file damage and salvage was not asked for. Nothing was
    /// written to either log.
    #[error(
        "{log}\npair {pair}: its two logs together hold sequence 1 to {salvage_keeps} \
         without a gap; salvage would rebuild both logs with those records{}",
        dropped_note(*.salvage_drops)
    )]
    Damaged {
        /// The pair.
        pair: usize,
        /// The refusal of the (first) damaged log: file, offset, sequence, valid records after.
        log: LogError,
        /// Records salvage would keep in both logs (the pair's history).
        salvage_keeps: u64,
        /// Sequence numbers after the history that some log holds a valid record for, which
        /// salvage would not keep (they follow a number neither log holds).
        salvage_drops: u64,
    },
    /// The two logs of a pair disagree before either ends: they are not one pair's logs.
    #[error("the logs of pair {pair} differ at sequence {seq}; they do not belong together")]
    Diverged {
        /// The pair.
        pair: usize,
        /// The first sequence number where they differ.
        seq: u64,
    },
    /// A logged order does not fit the market (its configuration changed since).
    #[error("pair {pair} {role} log, sequence {seq}: {reason} (does the market configuration match the logs?)")]
    Replay {
        /// The pair.
        pair: usize,
        /// Which log.
        role: Role,
        /// The record.
        seq: u64,
        /// Why the order does not apply.
        reason: RejectReason,
    },
}

fn dropped_note(drops: u64) -> String {
    if drops == 0 {
        ", and drop no valid record".to_owned()
    } else {
        format!(
            "; the valid records of {drops} later sequence numbers would be dropped (they \
             follow a number neither log holds; the damaged files are kept as .damaged copies)"
        )
    }
}

/// What start-up found in one engine's log, and did to it (in a read-only start: would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecovery {
    /// The pair.
    pub pair: usize,
    /// Which engine.
    pub role: Role,
    /// The log file.
    pub path: PathBuf,
    /// Good records at the start of this engine's own log (before any damage).
    pub records: u64,
    /// Records taken from the other engine's log: to catch up, or to fill a gap left by
    /// damage.
    pub copied_from_peer: u64,
    /// Records the engine replayed: the pair's history (its log holds them now, except in a
    /// read-only start).
    pub replayed: u64,
    /// The torn tail cut off (read-only: found and left), if any.
    pub cut: Option<TailCut>,
    /// The mid-file damage salvaged (read-only: what salvage would do), if any.
    pub salvaged: Option<Salvaged>,
}

/// The state of both engines of one pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairState {
    /// The primary.
    pub primary: EngineState,
    /// The standby.
    pub standby: EngineState,
}

/// A running trading system. See the module note.
///
/// ```
/// use std::sync::mpsc;
/// use troupe_trading::{Exchange, ExchangeConfig, NewOrder, Outcome, Side};
///
/// let system = troupe::System::builder().workers(2).build().unwrap();
/// let exchange = Exchange::start(&system, ExchangeConfig::seed()).unwrap();
/// let (acks, inbox) = mpsc::channel();
/// let me = exchange.connect(acks).unwrap();
/// let a1 = exchange.market().lookup("A1").unwrap();
/// exchange.submit(NewOrder::limit(me, 1, a1, Side::Sell, 99, 10)).unwrap();
/// let ack = inbox.recv().unwrap();
/// assert_eq!(ack.outcome, Outcome::Accepted { filled: 0 });
/// exchange.shutdown();
/// system.shutdown();
/// ```
pub struct Exchange {
    market: Arc<Market>,
    sessions: Arc<Sessions>,
    receivers: Vec<Addr<Receiver>>,
    router: Router,
    pairs: Vec<(Addr<Engine>, Addr<Engine>)>,
    style: Style,
    recovery: Vec<LogRecovery>,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("pairs", &self.pairs.len())
            .field("receivers", &self.receivers.len())
            .field("style", &self.style)
            .finish()
    }
}

/// The exchange's actors have stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the exchange has stopped")]
pub struct Stopped;

impl From<AskError> for Stopped {
    fn from(_: AskError) -> Self {
        Stopped
    }
}

impl Exchange {
    /// Recovers the logs and starts every actor on `system`.
    pub fn start(system: &System, config: ExchangeConfig) -> Result<Exchange, StartError> {
        if config.receivers == 0 {
            return Err(StartError::NoReceivers);
        }
        let market = Arc::new(config.market.clone());
        let sessions = Arc::new(Sessions::new(config.max_sessions));
        // A read-only exchange replays its logs but runs without one.
        let engine_log = if config.read_only {
            LogMode::None
        } else {
            config.log
        };
        let mut recovery = Vec::new();
        let mut shards = Vec::new();
        for pair in 0..market.pairs() {
            let (primary, standby, report) = open_pair(&market, pair, &config)?;
            recovery.extend(report);
            shards.push((primary, standby));
        }
        let mut pairs = Vec::new();
        for (primary, standby) in shards {
            let standby = system.spawn(Engine::new(
                standby,
                config.style,
                engine_log,
                sessions.clone(),
                None,
            ));
            let primary = system.spawn(Engine::new(
                primary,
                config.style,
                engine_log,
                sessions.clone(),
                Some(standby.clone()),
            ));
            if config.style == Style::RequestReply {
                // Sent before any order exists, so the standby knows its primary in time.
                let _ = standby.tell(SetPrimary(primary.clone()));
            }
            pairs.push((primary, standby));
        }
        let primaries: Arc<[Addr<Engine>]> = pairs.iter().map(|(p, _)| p.clone()).collect();
        let router = Router::new(market.clone(), primaries, sessions.clone());
        let receivers = (0..config.receivers)
            .map(|_| system.spawn(Receiver::new(router.clone())))
            .collect();
        Ok(Exchange {
            market,
            sessions,
            receivers,
            router,
            pairs,
            style: config.style,
            recovery,
        })
    }

    /// Opens a session whose acknowledgements go to `sink`.
    pub fn connect(&self, sink: impl AckSink) -> Result<ClientId, ConnectError> {
        self.sessions.connect(Box::new(sink))
    }

    /// The market the exchange trades.
    pub fn market(&self) -> &Market {
        &self.market
    }

    /// The messaging style.
    pub fn style(&self) -> Style {
        self.style
    }

    /// Every order receiver.
    pub fn receivers(&self) -> &[Addr<Receiver>] {
        &self.receivers
    }

    /// The receivers' work as a value, to run in a client actor's own turn: an order goes
    /// straight to its primary, one message fewer than through a receiver (see [`Router`]).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The receiver a client uses by default (clients are spread round-robin, as in the seed).
    pub fn receiver_for(&self, client: ClientId) -> &Addr<Receiver> {
        &self.receivers[client.0 as usize % self.receivers.len()]
    }

    /// Sends an order through the client's default receiver.
    pub fn submit(&self, order: NewOrder) -> Result<(), Stopped> {
        self.receiver_for(order.client)
            .tell(Submit(order))
            .map_err(|_| Stopped)
    }

    /// True while every receiver and engine is running (an engine stops for good if its log
    /// fails).
    pub fn is_running(&self) -> bool {
        self.receivers.iter().all(|r| !r.is_stopped())
            && self
                .pairs
                .iter()
                .all(|(p, s)| !p.is_stopped() && !s.is_stopped())
    }

    /// Messages the receivers and engines have handled so far (each actor's count as of its
    /// last turn's end): with the orders acknowledged, the messages an order costs.
    pub fn messages_handled(&self) -> u64 {
        let engines = self.pairs.iter().flat_map(|(p, s)| [p, s]);
        self.receivers
            .iter()
            .map(|r| r.metrics().processed)
            .sum::<u64>()
            + engines.map(|e| e.metrics().processed).sum::<u64>()
    }

    /// What start-up found in each log (empty without logs).
    pub fn recovery(&self) -> &[LogRecovery] {
        &self.recovery
    }

    /// The state of every pair, asked of the engines (waits for them to reach the question).
    pub fn pair_states(&self) -> Result<Vec<PairState>, Stopped> {
        let timeout = Duration::from_secs(60);
        self.pairs
            .iter()
            .map(|(p, s)| {
                Ok(PairState {
                    primary: p.ask(GetState).wait_timeout(timeout)?,
                    standby: s.ask(GetState).wait_timeout(timeout)?,
                })
            })
            .collect()
    }

    /// The keys of every order an engine has accepted, sorted.
    pub fn accepted_keys(&self, pair: usize, role: Role) -> Result<Vec<OrderKey>, Stopped> {
        let (p, s) = self.pairs.get(pair).ok_or(Stopped)?;
        let engine = if role == Role::Primary { p } else { s };
        Ok(engine
            .ask(GetAcceptedKeys)
            .wait_timeout(Duration::from_secs(60))?)
    }

    /// Writes and fsyncs every engine's log, whatever the mode.
    pub fn sync(&self) -> Result<(), String> {
        for (p, s) in &self.pairs {
            for e in [p, s] {
                e.ask(SyncLog)
                    .wait_timeout(Duration::from_secs(60))
                    .map_err(|e| e.to_string())??;
            }
        }
        Ok(())
    }

    /// Stops the receivers, then the engines (each flushes its log to disk as it stops, and
    /// joins its log's flusher).
    pub fn shutdown(self) {
        for r in &self.receivers {
            r.stop();
        }
        for (p, s) in &self.pairs {
            p.stop();
            s.stop();
        }
    }
}

type PairOpen = (Shard, Shard, Vec<LogRecovery>);

/// Opens, repairs and reconciles the two logs of a pair, and replays them into two shards.
/// See the module note.
fn open_pair(
    market: &Market,
    pair: usize,
    config: &ExchangeConfig,
) -> Result<PairOpen, StartError> {
    let mut primary = Shard::new(market, pair, Role::Primary);
    let mut standby = Shard::new(market, pair, Role::Standby);
    if config.log == LogMode::None {
        return Ok((primary, standby, Vec::new()));
    }
    let place = match (&config.disk, &config.log_dir) {
        (Some(disk), _) => Place::Sim(disk),
        (None, Some(dir)) => Place::Dir(dir),
        (None, None) => return Err(StartError::NoLogDir(config.log.name())),
    };
    // Read both before writing either: a refusal leaves both logs as they were.
    let scans = [
        Journal::scan_in(place, pair, Role::Primary)?,
        Journal::scan_in(place, pair, Role::Standby)?,
    ];
    let (history, drops) = pair_history(pair, &scans)?;
    if config.recovery == Recovery::Strict {
        if let Some(log) = scans.iter().find_map(LogScan::refusal) {
            return Err(StartError::Damaged {
                pair,
                log,
                salvage_keeps: history.len() as u64,
                salvage_drops: drops,
            });
        }
    }

    let mut report = Vec::new();
    let mut journals = Vec::new();
    for (scan, role) in scans.iter().zip([Role::Primary, Role::Standby]) {
        let records = scan.orders.len() as u64;
        let mut recovery = LogRecovery {
            pair,
            role,
            path: scan.path.clone(),
            records,
            copied_from_peer: 0,
            replayed: history.len() as u64,
            cut: match scan.end {
                LogEnd::TornTail(cut) => Some(cut),
                _ => None,
            },
            salvaged: scan.salvage_report(&history, None),
        };
        if !config.read_only {
            let (mut journal, salvaged) = bring_to(place, pair, role, config.log, scan, &history)?;
            if let Some(observer) = &config.log_observer {
                journal.observe(observer.clone());
            }
            journals.push(journal);
            recovery.salvaged = salvaged;
        }
        let kept_after = recovery.salvaged.as_ref().map_or(0, |s| s.kept_after);
        recovery.copied_from_peer = history.len() as u64 - records - kept_after;
        report.push(recovery);
    }

    for (shard, role) in [(&mut primary, Role::Primary), (&mut standby, Role::Standby)] {
        for (i, order) in history.iter().enumerate() {
            let replayed = market.recheck(order).and_then(|()| shard.replay(order));
            if let Err(reason) = replayed {
                return Err(StartError::Replay {
                    pair,
                    role,
                    seq: i as u64 + 1,
                    reason,
                });
            }
        }
    }
    let mut journals = journals.into_iter();
    if let (Some(p), Some(s)) = (journals.next(), journals.next()) {
        primary.attach(p);
        standby.attach(s);
    }
    Ok((primary, standby, report))
}

/// The records one log holds, by sequence number: its good records, then (after mid-file
/// damage) the valid records whose sequence numbers rise.
struct Held<'a> {
    good: &'a [Order],
    later: BTreeMap<u64, Order>,
}

impl<'a> Held<'a> {
    fn new(scan: &'a LogScan) -> Self {
        Held {
            good: &scan.orders,
            later: scan.usable_later().map(|r| (r.seq, r.order)).collect(),
        }
    }

    fn get(&self, seq: u64) -> Option<Order> {
        match seq.checked_sub(1).and_then(|i| self.good.get(i as usize)) {
            Some(order) => Some(*order),
            None => self.later.get(&seq).copied(),
        }
    }

    /// Every sequence number held, rising.
    fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        (1..=self.good.len() as u64).chain(self.later.keys().copied())
    }
}

/// The pair's history from its two logs (each record from whichever log holds it, up to the
/// first sequence number neither holds), and how many later sequence numbers some log holds
/// that the history cannot keep.
fn pair_history(pair: usize, scans: &[LogScan; 2]) -> Result<(Vec<Order>, u64), StartError> {
    let [p, s] = [Held::new(&scans[0]), Held::new(&scans[1])];
    for seq in p.seqs() {
        if let (Some(a), Some(b)) = (p.get(seq), s.get(seq)) {
            if a != b {
                return Err(StartError::Diverged { pair, seq });
            }
        }
    }
    let mut history = Vec::with_capacity(p.good.len().max(s.good.len()));
    while let Some(order) = {
        let seq = history.len() as u64 + 1;
        p.get(seq).or_else(|| s.get(seq))
    } {
        history.push(order);
    }
    let end = history.len() as u64;
    let drops = p
        .seqs()
        .chain(s.seqs())
        .filter(|&seq| seq > end)
        .collect::<BTreeSet<u64>>()
        .len() as u64;
    Ok((history, drops))
}

/// Opens one log for writing and makes it hold exactly `history`: cuts a torn tail and
/// appends what it lacks, or rebuilds it if it has mid-file damage.
fn bring_to(
    place: Place<'_>,
    pair: usize,
    role: Role,
    mode: LogMode,
    scan: &LogScan,
    history: &[Order],
) -> Result<(Journal, Option<Salvaged>), StartError> {
    if let (LogEnd::MidFile(_), Place::Dir(dir)) = (scan.end, place) {
        let r = Journal::rebuild(dir, pair, role, mode, scan, history)?;
        return Ok((r.journal, r.salvaged));
    }
    let mut r = Journal::open_in(place, pair, role, mode)?;
    if !history.starts_with(&r.orders) {
        // The file changed since it was scanned.
        let seq = r
            .orders
            .iter()
            .zip(history)
            .take_while(|(a, b)| a == b)
            .count() as u64
            + 1;
        return Err(StartError::Diverged { pair, seq });
    }
    let missing = &history[r.orders.len()..];
    if !missing.is_empty() {
        for order in missing {
            r.journal.append(order);
        }
        r.journal.sync()?;
    }
    Ok((r.journal, None))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;
    use crate::order::{Ack, InstrumentId, Outcome, Side};

    /// A standby that stops while orders flow (its mailbox full of them, the primary holding
    /// orders that wait for its watermark) leaves no order unanswered: each is accepted by
    /// every engine its style needs, or refused with `EngineUnavailable`.
    fn standby_stopped_under_load(style: Style, log: LogMode) {
        const ORDERS: u64 = 20_000;
        let dir = tempfile::tempdir().unwrap();
        let system = System::builder().workers(2).build().unwrap();
        let exchange = Exchange::start(
            &system,
            ExchangeConfig {
                style,
                receivers: 2,
                log,
                log_dir: Some(dir.path().to_path_buf()),
                ..ExchangeConfig::seed()
            },
        )
        .unwrap();
        let (tx, rx) = mpsc::channel::<Ack>();
        let client = exchange.connect(tx).unwrap();
        // Pair 0's books are A1..A5 (instruments 0..5); buys and sells at one price cross.
        for id in 0..ORDERS {
            let side = if id % 2 == 0 { Side::Buy } else { Side::Sell };
            let instrument = InstrumentId((id % 5) as u16);
            exchange
                .submit(NewOrder::limit(client, id, instrument, side, 100, 1))
                .unwrap();
            if id == ORDERS / 4 {
                exchange.pairs[0].1.stop();
            }
        }
        let needed = style.acks_per_order();
        let mut answers: HashMap<u64, (usize, bool)> = HashMap::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        let settled = |answers: &HashMap<u64, (usize, bool)>| {
            answers.len() as u64 == ORDERS
                && answers
                    .values()
                    .all(|&(accepted, refused)| refused || accepted == needed)
        };
        while !settled(&answers) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(ack) = rx.recv_timeout(left) else {
                break;
            };
            let entry = answers.entry(ack.client_order_id).or_default();
            match ack.outcome {
                Outcome::Accepted { .. } => entry.0 += 1,
                Outcome::Rejected(RejectReason::EngineUnavailable) => entry.1 = true,
                Outcome::Rejected(other) => panic!("order {}: {other}", ack.client_order_id),
            }
        }
        let unanswered = (0..ORDERS)
            .filter(|id| {
                answers
                    .get(id)
                    .is_none_or(|&(accepted, refused)| !refused && accepted < needed)
            })
            .count();
        let refused = answers.values().filter(|a| a.1).count();
        assert_eq!(
            unanswered, 0,
            "{style:?} {log:?}: orders left without an answer ({refused} refused)"
        );
        assert!(
            refused > 0,
            "{style:?} {log:?}: the stop came after every order was done"
        );
        exchange.shutdown();
        system.shutdown();
    }

    #[test]
    fn request_reply_standby_stopped_under_load_leaves_no_order_unanswered() {
        for log in [LogMode::None, LogMode::Fsync] {
            standby_stopped_under_load(Style::RequestReply, log);
        }
    }

    #[test]
    fn one_way_standby_stopped_under_load_leaves_no_order_unanswered() {
        for log in [LogMode::None, LogMode::Fsync] {
            standby_stopped_under_load(Style::OneWay, log);
        }
    }
}
