//! The exchange: builds the whole system on a troupe [`System`], after recovering its state
//! from the logs.
//!
//! # Start-up
//! For each engine pair, both logs are opened (a damaged tail is cut and reported, see
//! `log.rs`). Because the standby receives orders in the primary's order, each log holds a
//! prefix of one and the same sequence; a crash can leave one log longer than the other. The
//! shorter one is brought up to the longer (the missing records are appended and synced), so
//! both engines replay the same orders and start with equal states. Logs whose common prefix
//! differs cannot come from one pair: start-up refuses them ([`StartError::Diverged`]).
//!
//! Then the actors are spawned: each standby, then its primary (which knows its standby), then
//! the receivers (which know every primary). In fsync mode engines run on threads of their
//! own, since they block on the disk; otherwise everything shares the system's worker pool.
//!
//! # Shutdown
//! [`Exchange::shutdown`] stops the receivers, then the engines; an engine flushes its log to
//! disk as it stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use troupe::{Addr, AskError, Placement, System};

use crate::engine::{Engine, EngineState, GetAcceptedKeys, GetState, SetPrimary, Style, SyncLog};
use crate::log::{Journal, LogError, LogMode, TailCut};
use crate::market::Market;
use crate::order::{ClientId, NewOrder, Order, OrderKey, RejectReason, Role};
use crate::receiver::{Receiver, Submit};
use crate::session::{AckSink, ConnectError, Sessions};
use crate::shard::Shard;

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
    /// Directory of the logs (required unless `log` is `None`).
    pub log_dir: Option<PathBuf>,
    /// Most sessions that may connect.
    pub max_sessions: usize,
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
            max_sessions: 1024,
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

/// What start-up found in one engine's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecovery {
    /// The pair.
    pub pair: usize,
    /// Which engine.
    pub role: Role,
    /// Good records found in this engine's own log.
    pub records: u64,
    /// Records copied from the other engine's log to catch up.
    pub copied_from_peer: u64,
    /// The damaged tail cut off, if any.
    pub cut: Option<TailCut>,
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
        let placement = match config.log {
            LogMode::Fsync => Placement::Thread,
            LogMode::None | LogMode::Buffered => Placement::Pool,
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
            let standby = system.spawn_on(
                Engine::new(standby, config.style, config.log, sessions.clone(), None),
                placement,
            );
            let primary = system.spawn_on(
                Engine::new(
                    primary,
                    config.style,
                    config.log,
                    sessions.clone(),
                    Some(standby.clone()),
                ),
                placement,
            );
            if config.style == Style::RequestReply {
                // Sent before any order exists, so the standby knows its primary in time.
                let _ = standby.tell(SetPrimary(primary.clone()));
            }
            pairs.push((primary, standby));
        }
        let primaries: Arc<[Addr<Engine>]> = pairs.iter().map(|(p, _)| p.clone()).collect();
        let receivers = (0..config.receivers)
            .map(|_| {
                system.spawn(Receiver::new(
                    market.clone(),
                    primaries.clone(),
                    sessions.clone(),
                ))
            })
            .collect();
        Ok(Exchange {
            market,
            sessions,
            receivers,
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

    /// Stops the receivers, then the engines (each flushes its log to disk as it stops).
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
    let dir = config
        .log_dir
        .as_deref()
        .ok_or(StartError::NoLogDir(config.log.name()))?;
    let mut p = Journal::open(dir, pair, Role::Primary, config.log)?;
    let mut s = Journal::open(dir, pair, Role::Standby, config.log)?;
    let common = p.orders.len().min(s.orders.len());
    if let Some(i) = (0..common).find(|&i| p.orders[i] != s.orders[i]) {
        return Err(StartError::Diverged {
            pair,
            seq: i as u64 + 1,
        });
    }
    let mut report = vec![
        LogRecovery {
            pair,
            role: Role::Primary,
            records: p.orders.len() as u64,
            copied_from_peer: 0,
            cut: p.cut,
        },
        LogRecovery {
            pair,
            role: Role::Standby,
            records: s.orders.len() as u64,
            copied_from_peer: 0,
            cut: s.cut,
        },
    ];
    // Bring the shorter log up to the longer one.
    let (longer, shorter, short_index) = if p.orders.len() >= s.orders.len() {
        (&mut p, &mut s, 1)
    } else {
        (&mut s, &mut p, 0)
    };
    let missing = &longer.orders[common..];
    if !missing.is_empty() {
        for order in missing {
            shorter.journal.append(order);
        }
        shorter.journal.sync()?;
        report[short_index].copied_from_peer = missing.len() as u64;
    }
    let orders: &[Order] = &longer.orders;
    for (shard, role) in [(&mut primary, Role::Primary), (&mut standby, Role::Standby)] {
        for (i, order) in orders.iter().enumerate() {
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
    primary.attach(p.journal);
    standby.attach(s.journal);
    Ok((primary, standby, report))
}
