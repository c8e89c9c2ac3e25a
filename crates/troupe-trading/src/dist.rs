//! The trading system across processes, over NATS (`troupe-remote`): each engine of a pair
//! runs in its own process (a *node*), order receivers form a NATS queue group, and a lease on
//! NATS key-value decides which node of a pair is primary.
//!
//! ## Who is primary, and why two primaries cannot both acknowledge
//! - Two key-value buckets: `trading_lease` (entries expire `lease` after their last write) and
//!   `trading_sync` (no expiry). The lease key `pair-<p>` names the primary; the sync key
//!   `pair-<p>` names the nodes that hold every acknowledged order of the pair (the primary,
//!   and the standby once it is in step).
//! - A node takes the lease only with a create (it fails if any node holds it), and only if the
//!   sync key names it (or the store says it does not exist: a new pair; a read that fails is
//!   no answer), read *after* the create: once the lease is its own no other node
//!   acknowledges, so that read is final. Its epoch is the revision of that create, which only
//!   grows. It then writes the sync key naming itself alone, and only over the record it just
//!   read (compare-and-set on that revision): if the record changed since (its primary dropped
//!   it, or the primary took its own lease again and rewrote the record), it is not primary.
//!   A primary writes the key only while the key names it primary. (A write over whatever was
//!   there let a node whose write arrived after its lease had run out name itself over the
//!   primary that had taken the lease after it: found by the 100,000-seed run, see
//!   `dist_sim`.)
//! - The primary renews every `lease / 4` with a compare-and-set on the revision it holds. If
//!   another node holds the lease, it exits at once (code 3). If the lease expired while the
//!   store could not be reached and nobody took it, it takes it again (a new epoch) only while
//!   the sync key still names it primary (a standby that took over in between named itself
//!   there before acknowledging anything), and it rewrites the key at its new epoch before it
//!   acknowledges again, so that a late takeover write finds the record changed. That write
//!   changes only the epoch of the record it reads before each try: which standby is named
//!   is the engine's to say (a value made once and written again after a conflict named a
//!   standby the engine had just dropped: seed `22159:pct3:-`). It acknowledges nothing once `lease - margin` has
//!   passed since it sent its last successful renewal (its own clock), since by then the entry
//!   may have expired on the server; orders in flight then wait, their sequence numbers taken,
//!   until the lease is renewed or lost.
//! - Replication is apply-after-ack: the primary sends `Replicate { epoch, seq, order, .. }`, the
//!   standby applies and logs it and answers, and only then does the primary apply, log and
//!   acknowledge. So the standby always holds every order the primary holds, a killed primary's
//!   log is a prefix of the survivor's, and a restarted node catches up by fetching what follows
//!   its last order.
//! - A standby that stops answering is dropped: the primary first rewrites the sync key without
//!   it (compare-and-set), and only then acknowledges alone; if a write naming it is still on
//!   its way, the key is rewritten without it once that write ends. A dropped standby cannot
//!   take over. A standby is named only when it confirms holding at least as many orders as
//!   the primary has applied (every acknowledged one among them), and only answers sent on its
//!   current link count (a node dropped and joined again gets a new link).
//! - A standby refuses `Replicate` from an epoch older than one it has seen.
//! - One history: every node keeps a digest of its history at each sequence number (a chain
//!   over the orders' keys, [`digest`]). `Replicate { .., prev }` carries the primary's digest
//!   before the order; the standby applies it only after the same history, and confirms an
//!   order it already holds only if it is the same order after the same history (and then only
//!   that number). `Join` carries the joining node's digest, which must be the primary's at
//!   that number; the catch-up that answers it is compared with what the node applied since.
//!   So a standby that confirms sequence number `n` holds the primary's orders `1..=n`, and the
//!   sync key never names a node whose history left the primary's. (Comparing only the last
//!   order's key, and confirming any number already held, let such a node be named and take
//!   over without an acknowledged order: found in simulation, see `dist_sim`.)
//! - A history that left the primary's is cut back to where they part, then catches up. It
//!   happens after a kill: a standby applies each order before its primary does, so when the
//!   primary dies (or is paused past its lease) with orders in flight, the standby may hold
//!   orders the primary never acknowledged, and a primary that comes back (or another node)
//!   goes on without them. `Join` carries points of the node's history (its digest at its end,
//!   1, 2, 4, ... orders back, and at 0); the primary answers from the last point it shares,
//!   with its epoch and its length. The node compares the answered orders with its own, cuts
//!   its history and its log back at the first that differs ([`OrderLog::cut_back`]), and
//!   applies the primary's from there; if the answer reached the primary's end and the node
//!   holds more, it cuts the rest too, except what the primary has confirmed to it since
//!   (`vouched`). Why no acknowledged order is cut: a primary's history holds every order
//!   acknowledged so far at its place (the sync key rules above), the node cuts only places
//!   where its order is not that primary's, and an answer from a primary of an older epoch
//!   than the node has seen is ignored. (Before, such a node was refused for good and never
//!   rejoined; one whose catch-up hit a key it held elsewhere crash-looped. Found in
//!   simulation: `dist_sim`, seeds in `tests/suite/dist_simulation.rs`.)
//!
//! ## Where it runs
//! The node logic is generic over [`Cluster`]: NATS in production
//! (`nats_cluster.rs`), a simulated cluster in `troupe::sim` tests (`sim_cluster.rs`,
//! `dist_sim.rs`).
//!
//! ## Clients
//! A client asks `Submit` of any receiver (the queue group `trading.receive`), which validates
//! and forwards `Place` to the primary of the order's pair. On an error or time-out the client
//! sends the same order again (same client order id); a try times out after the client's
//! estimate of the round trip (`RoundTrip`), so a receiver that hangs costs little. The books remember every accepted key,
//! so an order already applied answers `Duplicate`, which the client counts as acknowledged:
//! an order is applied at most once, and every acknowledged order is on every node the sync
//! key names.

/// A node's line on stderr (the operator's view of leases and failovers); silent in a
/// simulation, whose thousands of runs would flood it.
macro_rules! note {
    ($($arg:tt)*) => {
        if $crate::dist::notes_shown() {
            eprintln!($($arg)*)
        }
    };
}

/// Whether a node's notes go to stderr: always in a process of its own; in a simulation (many
/// nodes, thousands of runs) only when `TROUPE_SIM_NOTES` is set, to follow one replayed seed.
pub(crate) fn notes_shown() -> bool {
    static IN_SIMULATION: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !troupe::sim::is_simulated()
        || *IN_SIMULATION.get_or_init(|| std::env::var_os("TROUPE_SIM_NOTES").is_some())
}

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use troupe::{Actor, Addr, Context, Deferred, DeferredHandler, Handler, Message, System};
use troupe_remote::{Credentials, Node, NodeOptions, RemoteError, RemoteMessage};

use crate::cluster::{Cluster, Export, KeyValue, KvError, Network, NodeEvent, OrderLog, Peer};
use crate::log::{Journal, LogMode};
use crate::market::Market;
use crate::nats_cluster::{JournalLog, NatsCluster};
use crate::order::{ClientId, InstrumentId, NewOrder, Order, OrderKey, RejectReason, Role, Side};
use crate::shard::Shard;

/// An order on the wire (validated again by whoever receives it).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireOrder {
    /// The client.
    pub client: u32,
    /// The client's id for the order.
    pub client_order_id: u64,
    /// The instrument.
    pub instrument: u16,
    /// Buy (true) or sell.
    pub buy: bool,
    /// Limit price in ticks.
    pub price: i32,
    /// Volume.
    pub volume: i32,
}

impl WireOrder {
    fn new_order(&self) -> NewOrder {
        NewOrder::limit(
            ClientId(self.client),
            self.client_order_id,
            InstrumentId(self.instrument),
            if self.buy { Side::Buy } else { Side::Sell },
            self.price,
            self.volume,
        )
    }

    fn of(order: &Order) -> Self {
        WireOrder {
            client: order.client().0,
            client_order_id: order.client_order_id(),
            instrument: order.instrument().0,
            buy: order.side() == Side::Buy,
            price: order.price() as i32,
            volume: order.volume() as i32,
        }
    }
}

/// The digest of a history after `order`, given the digest before it (0 for the empty
/// history): a chain over the orders' keys, so that two histories with equal digests at
/// sequence number `n` hold the same orders `1..=n` (collisions aside: 64 bits, not
/// adversarial). A standby checks it before it applies or confirms an order, and a primary
/// before it lets a node join: comparing only the last order's key let a standby whose
/// history differed further back join, be named in the sync record and take over without an
/// acknowledged order (found in simulation: `dist_sim`, seed `1:pct3:-`).
pub fn digest(before: u64, order: &Order) -> u64 {
    let mut z = before
        ^ (u64::from(order.client().0) << 32 | 0x5851_F42D)
        ^ order.client_order_id().rotate_left(17);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// An acknowledged order.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct DistAck {
    /// The client's id for the order.
    pub client_order_id: u64,
    /// Its sequence number in its pair's history.
    pub seq: u64,
    /// Volume traded on arrival.
    pub filled: u32,
    /// The epoch of the primary that acknowledged it.
    pub epoch: u64,
}

/// Why an order was not acknowledged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DistError {
    /// Refused for good (bad order, or the key was used by another order).
    #[error("rejected: {0}")]
    Rejected(String),
    /// The key was already applied: a resend of an order that is in the book.
    #[error("already applied")]
    Duplicate,
    /// No primary can acknowledge now (failover, lease lost, order in flight): send again.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// The client's order, to any receiver.
#[derive(Message, Serialize, Deserialize, Clone, Debug)]
#[reply(Result<DistAck, DistError>)]
pub struct Submit(pub WireOrder);
impl RemoteMessage for Submit {
    const NAME: &'static str = "trading.submit";
}

/// A receiver's order, to the primary of its pair.
#[derive(Message, Serialize, Deserialize, Clone, Debug)]
#[reply(Result<DistAck, DistError>)]
pub struct Place(pub WireOrder);
impl RemoteMessage for Place {
    const NAME: &'static str = "trading.place";
}

/// The primary's order, to its standby.
#[derive(Message, Serialize, Deserialize, Clone, Debug)]
#[reply(Result<u64, String>)]
pub struct Replicate {
    /// The sender's epoch.
    pub epoch: u64,
    /// The order's sequence number.
    pub seq: u64,
    /// The order.
    pub order: WireOrder,
    /// The digest of the sender's history before the order (orders `1..seq`): the standby
    /// applies or confirms the order only where its own history is the same.
    pub prev: u64,
}
impl RemoteMessage for Replicate {
    const NAME: &'static str = "trading.replicate";
    const VERSION: u16 = 2;
}

/// A node asks the primary to be its standby: the primary's orders after the last point of
/// its history the node shares come back.
#[derive(Message, Serialize, Deserialize, Clone, Debug)]
#[reply(Result<JoinAnswer, String>)]
pub struct Join {
    /// The node's name.
    pub node: String,
    /// Points of the node's history, newest first: (orders, the [`digest`] of those orders),
    /// at its end, then 1, 2, 4, ... orders back, then 0 (at most [`MAX_MARKS`]).
    pub marks: Vec<(u64, u64)>,
}
impl RemoteMessage for Join {
    const NAME: &'static str = "trading.join";
    const VERSION: u16 = 3;
}

/// The most points a [`Join`] may carry (a history of 2^62 orders needs 64).
pub const MAX_MARKS: usize = 80;

/// The primary's answer to [`Join`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswer {
    /// The primary's epoch.
    pub epoch: u64,
    /// The last point of the node's history the primary shares: both hold the same first
    /// `after` orders.
    pub after: u64,
    /// The primary's orders from `after + 1` (at most a chunk: join again for the rest).
    pub orders: Vec<WireOrder>,
    /// How many orders the primary held when it answered.
    pub holds: u64,
}

/// What a node holds, with one page of its history's keys: those of orders `keys_from + 1 ..`,
/// at most [`STATE_PAGE`] of them (none if `keys_from` is at or past its end). Exported apart
/// from the engine's other messages (`trading.pair.<p>.state.<node>`), so that a server can let
/// an operator read states without letting it send orders to a standby.
#[derive(Message, Serialize, Deserialize, Clone, Debug)]
#[reply(NodeState)]
pub struct GetState {
    /// How many of the history's first keys to skip.
    pub keys_from: u64,
}
impl RemoteMessage for GetState {
    const NAME: &'static str = "trading.state";
    const VERSION: u16 = 2;
}

/// The most keys one [`NodeState`] carries. Every answer is small and costs the engine the
/// same whatever the history's length: one NATS message of asks cannot make a node build
/// answers of its whole history, however many it holds (a million-byte message of 36,137
/// asks took a node of 17 k orders from 25 to 494 MB and held up orders for seconds when
/// every answer carried every key).
pub const STATE_PAGE: usize = 256;

/// A node's state, for tests and operators.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// The node's name.
    pub node: String,
    /// Its pair.
    pub pair: usize,
    /// True if it is the primary now.
    pub primary: bool,
    /// Its epoch as primary, or the highest epoch it has seen as standby.
    pub epoch: u64,
    /// Orders applied.
    pub applied: u64,
    /// The state hash of its books (equal on nodes with equal histories).
    pub hash: u64,
    /// The place in its history of the first key below.
    pub keys_from: u64,
    /// The keys of orders it has applied, in order, from `keys_from` on: one page (see
    /// [`GetState`]), or every one from [`node_history`].
    pub keys: Vec<(u32, u64)>,
}

/// A node's configuration.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// NATS server URL(s), comma-separated.
    pub nats: String,
    /// Who the node is to the NATS server (its nkey seed file, say).
    pub credentials: Credentials,
    /// The certificate authority of the server's TLS certificate (TLS if given).
    pub tls_ca: Option<PathBuf>,
    /// The engine pair this node serves.
    pub pair: usize,
    /// The node's name: stable across restarts (its log directory is its own).
    pub name: String,
    /// Its log directory.
    pub log_dir: PathBuf,
    /// Its log mode.
    pub log: LogMode,
    /// The lease: how long a silent primary keeps the pair.
    pub lease: Duration,
}

pub(crate) fn primary_name(pair: usize) -> String {
    format!("trading.pair.{pair}.primary")
}

pub(crate) fn node_export(pair: usize, node: &str) -> String {
    format!("trading.pair.{pair}.node.{node}")
}

/// Where a node answers [`GetState`].
pub(crate) fn state_export(pair: usize, node: &str) -> String {
    format!("trading.pair.{pair}.state.{node}")
}

/// The receivers' queue group name.
pub const RECEIVE: &str = "trading.receive";

/// Orders in one answer to `Join` (about 20 bytes each on the wire).
const JOIN_CHUNK: usize = 20_000;

/// The sync key's value: who holds every acknowledged order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct InSync {
    pub(crate) primary: String,
    pub(crate) standby: Option<String>,
    pub(crate) epoch: u64,
}

/// The key of a pair in the lease and sync buckets.
pub(crate) fn pair_key(pair: usize) -> String {
    format!("pair-{pair}")
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// NATS or its key-value store.
    #[error("nats: {0}")]
    Nats(String),
    /// The log.
    #[error("log: {0}")]
    Log(String),
    /// The configuration.
    #[error("{0}")]
    Config(String),
}

fn nats<E: std::fmt::Display>(e: E) -> NodeError {
    NodeError::Nats(e.to_string())
}

/// A running node. Dropping it does not stop it: a node runs until its process ends.
pub struct NodeHandle {
    /// The node's NATS connection.
    pub remote: Node,
    /// The actor system.
    pub system: System,
}

/// Checks a node's pair and lease against the market and the lease's bounds.
pub(crate) fn check_node(market: &Market, pair: usize, lease: Duration) -> Result<(), NodeError> {
    if pair >= market.pairs() {
        return Err(NodeError::Config(format!(
            "pair {} does not exist (the market has {})",
            pair,
            market.pairs()
        )));
    }
    if lease < Duration::from_millis(200) || lease > Duration::from_secs(60) {
        return Err(NodeError::Config(format!(
            "lease {lease:?} is outside 200 ms ..= 60 s"
        )));
    }
    Ok(())
}

/// Starts a node: replays its log, exports its engine and a receiver, and contends for its
/// pair's lease. A node that loses the lease while primary ends the process (exit code 3).
pub fn start_node(config: NodeConfig) -> Result<NodeHandle, NodeError> {
    let market = Arc::new(Market::seed());
    check_node(&market, config.pair, config.lease)?;
    std::fs::create_dir_all(&config.log_dir).map_err(|e| NodeError::Log(e.to_string()))?;
    let recovered = Journal::open(&config.log_dir, config.pair, Role::Primary, config.log)
        .map_err(|e| NodeError::Log(e.to_string()))?;

    let system = System::new();
    let options = NodeOptions {
        ask_timeout: Duration::from_secs(2),
        credentials: config.credentials.clone(),
        tls_ca: config.tls_ca.clone(),
        ..NodeOptions::default()
    };
    let remote = Node::connect_blocking(&config.nats, options.clone()).map_err(nats)?;
    let cluster = remote.block_on(NatsCluster::open(remote.clone(), &config, &options))?;
    spawn_node(
        &cluster,
        &system,
        market,
        NodeSetup {
            pair: config.pair,
            name: config.name.clone(),
            lease: config.lease,
            history: recovered.orders,
            log: Box::new(JournalLog(recovered.journal)),
        },
    )?;
    Ok(NodeHandle { remote, system })
}

/// What a node starts from: who it is, and what its log holds.
pub(crate) struct NodeSetup {
    pub(crate) pair: usize,
    pub(crate) name: String,
    pub(crate) lease: Duration,
    /// The orders its log holds, in sequence order.
    pub(crate) history: Vec<Order>,
    /// Its log, positioned after them.
    pub(crate) log: Box<dyn OrderLog>,
}

/// Spawns a node's actors on `system` in `cluster`: replays its history, exports its engine
/// and a receiver, starts its lease keeper. Returns its engine and its receiver.
pub(crate) fn spawn_node<C: Cluster>(
    cluster: &C,
    system: &System,
    market: Arc<Market>,
    setup: NodeSetup,
) -> Result<NodeActors<C>, NodeError> {
    check_node(&market, setup.pair, setup.lease)?;
    let mut shard = Shard::new(&market, setup.pair, Role::Primary);
    for order in &setup.history {
        shard
            .replay(order)
            .map_err(|e| NodeError::Log(format!("replaying the log: {e}")))?;
    }
    let engine = system.spawn(Engine {
        market: market.clone(),
        pair: setup.pair,
        name: setup.name.clone(),
        cluster: cluster.clone(),
        shard,
        log: setup.log,
        chain: chain_of(&setup.history),
        history: setup.history,
        mode: Mode::Standby,
        epoch: 0,
        lease_until: cluster.now(),
        standby: None,
        inflight: VecDeque::new(),
        inflight_keys: HashSet::new(),
        standby_holds: 0,
        links: 0,
        buffered: BTreeMap::new(),
        vouched: 0,
        lease: None,
        me: None,
        hash_of: None,
    });
    cluster
        .export(&node_export(setup.pair, &setup.name), engine.clone())
        .accept::<Replicate, _>()
        .start()
        .map_err(nats)?;
    cluster
        .export(&state_export(setup.pair, &setup.name), engine.clone())
        .accept::<GetState, _>()
        .start()
        .map_err(nats)?;
    let receiver = system.spawn(Receiver {
        market,
        cluster: cluster.clone(),
        primaries: Vec::new(),
    });
    cluster
        .export(RECEIVE, receiver.clone())
        .accept::<Submit, _>()
        .in_group("receivers")
        .start()
        .map_err(nats)?;
    let lease = Lease {
        cluster: cluster.clone(),
        key: pair_key(setup.pair),
        name: setup.name,
        lease: setup.lease,
        engine: engine.clone(),
    };
    engine
        .tell(UseLease(lease.clone()))
        .map_err(|_| NodeError::Config("the engine stopped".into()))?;
    cluster.spawn(lease.run());
    Ok(NodeActors { engine, receiver })
}

/// The digests of a history's prefixes (see [`digest`]).
fn chain_of(history: &[Order]) -> Vec<u64> {
    let mut chain = Vec::with_capacity(history.len() + 1);
    chain.push(0);
    for order in history {
        chain.push(digest(*chain.last().expect("not empty"), order));
    }
    chain
}

/// A node's actors, as [`spawn_node`] started them.
pub(crate) struct NodeActors<C: Cluster> {
    pub(crate) engine: Addr<Engine<C>>,
    pub(crate) receiver: Addr<Receiver<C>>,
}

/// The lease keeper: a future of the node's.
pub(crate) struct Lease<C: Cluster> {
    cluster: C,
    key: String,
    name: String,
    lease: Duration,
    engine: Addr<Engine<C>>,
}

impl<C: Cluster> Clone for Lease<C> {
    fn clone(&self) -> Self {
        Lease {
            cluster: self.cluster.clone(),
            key: self.key.clone(),
            name: self.name.clone(),
            lease: self.lease,
            engine: self.engine.clone(),
        }
    }
}

impl<C: Cluster> Lease<C> {
    /// The sync record: `Ok(None)` only if the store says there is none (a new pair); a store
    /// that cannot answer, or a record that does not read, is an error.
    async fn read_sync(&self) -> Result<Option<(InSync, u64)>, KvError> {
        let Some(entry) = self.cluster.syncs().entry(&self.key).await? else {
            return Ok(None);
        };
        let value = serde_json::from_slice(&entry.value).map_err(|e| KvError(e.to_string()))?;
        Ok(Some((value, entry.revision)))
    }

    /// Writes the sync key as `claim` allows (a compare-and-set on the revision it checked). A
    /// store that cannot answer (its buckets electing a leader after a NATS server went) is
    /// asked again for up to about 3 s, then false; a value already there (an answer lost on
    /// the way) is true.
    async fn write_sync(&self, value: &InSync, claim: Claim) -> bool {
        self.change_sync(claim, |_| value.clone()).await
    }

    /// Writes the sync key as `claim` allows, the value made by `make` from the record read
    /// just before each try (see [`Lease::write_sync`]).
    async fn change_sync(&self, claim: Claim, make: impl Fn(Option<&InSync>) -> InSync) -> bool {
        let syncs = self.cluster.syncs();
        for _ in 0..30 {
            let Ok(entry) = syncs.entry(&self.key).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let current = entry
                .as_ref()
                .map(|e| (serde_json::from_slice::<InSync>(&e.value).ok(), e.revision));
            let value = make(current.as_ref().and_then(|(c, _)| c.as_ref()));
            if matches!(&current, Some((Some(c), _)) if *c == value) {
                return true;
            }
            let bytes = Bytes::from(serde_json::to_vec(&value).expect("plain struct"));
            let written = match (claim, current) {
                // Taking over: only the record read after the lease was created, unchanged.
                (Claim::Takeover(expected), current) => {
                    if current.as_ref().map(|(_, r)| *r) != expected {
                        return false;
                    }
                    match expected {
                        None => syncs.create(&self.key, bytes).await.is_ok(),
                        Some(revision) => syncs.update(&self.key, bytes, revision).await.is_ok(),
                    }
                }
                // The primary: only a record that names it primary.
                (Claim::Primary, Some((Some(c), revision))) if c.primary == self.name => {
                    syncs.update(&self.key, bytes, revision).await.is_ok()
                }
                (Claim::Primary, _) => return false,
            };
            if written {
                return true;
            }
            // A conflict or a lost answer: the next read decides.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    async fn run(self) {
        let leases = self.cluster.leases();
        let poll = (self.lease / 10).max(Duration::from_millis(20));
        // What kept this node from taking a free lease, said once each time it changes (an
        // operator reading the log sees why a pair has no primary).
        let mut held_back: Option<String> = None;
        let mut hold = |why: Option<String>| {
            if why != held_back {
                if let Some(why) = &why {
                    note!("node {}: the lease is free but {why}", self.name);
                }
                held_back = why;
            }
        };
        loop {
            // Standby: take the lease when it is free and the sync key names this node.
            tokio::time::sleep(poll).await;
            if leases.entry(&self.key).await.ok().flatten().is_some() {
                continue;
            }
            // Only a record the store says is absent makes any node eligible: a read that
            // failed (a store electing a leader, a lost answer) is not "no record" (taking it
            // for one let a node without the acknowledged orders take over: found in
            // simulation, `dist_sim` seed `9:pct3:-`).
            let eligible = match self.read_sync().await {
                Ok(None) => Ok(()),
                Ok(Some((sync, _))) => {
                    if sync.primary == self.name || sync.standby.as_deref() == Some(&self.name) {
                        Ok(())
                    } else {
                        Err(format!(
                            "the sync record names {} primary and {} standby at epoch {}",
                            sync.primary,
                            sync.standby.as_deref().unwrap_or("no"),
                            sync.epoch
                        ))
                    }
                }
                Err(e) => Err(format!("the sync record cannot be read: {e}")),
            };
            if let Err(why) = eligible {
                hold(Some(why));
                continue;
            }
            hold(None);
            let sent = self.cluster.now();
            let Ok(revision) = leases
                .create(&self.key, Bytes::from(self.name.clone()))
                .await
            else {
                continue;
            };
            // Read again, now that the lease is this node's: the read above may be old (the
            // primary may have dropped this node from the record since, and acknowledged
            // alone while its lease lasted: found in simulation, `dist_sim` seed
            // `86:random:-`). From the create on, no other node acknowledges, so this read
            // is the last word. Not named: the lease is left to expire unused.
            let read = match self.read_sync().await {
                Ok(None) => Some(None),
                Ok(Some((sync, at)))
                    if sync.primary == self.name || sync.standby.as_deref() == Some(&self.name) =>
                {
                    Some(Some(at))
                }
                _ => None,
            };
            let Some(read) = read else {
                hold(Some(
                    "the sync record changed once the lease was taken".into(),
                ));
                continue;
            };
            let epoch = revision;
            // The sync key names this node alone until a standby is in step. Written only over
            // the record just read: if it changed since (its primary dropped this node, or
            // another node took over), this node is not primary. (A write over whatever was
            // there let a node whose lease had run out while its write was on its way name
            // itself over the primary that took the lease after it: found in simulation,
            // `dist_sim` seed `11301:pct3:-`.)
            let sync = InSync {
                primary: self.name.clone(),
                standby: None,
                epoch,
            };
            if !self.write_sync(&sync, Claim::Takeover(read)).await {
                self.cluster.exit(
                    3,
                    &format!(
                        "node {}: the sync key changed under a new primary; exiting",
                        self.name
                    ),
                );
                return;
            }
            let until = sent + self.lease.saturating_sub(self.margin());
            if self.engine.tell(BecomePrimary { epoch, until }).is_err() {
                return;
            }
            self.keep(revision).await;
            return;
        }
    }

    fn margin(&self) -> Duration {
        self.lease / 4
    }

    /// Primary: renews until the lease is lost, then ends the process.
    async fn keep(&self, mut revision: u64) {
        let leases = self.cluster.leases();
        let every = self.lease / 4;
        loop {
            tokio::time::sleep(every).await;
            let sent = self.cluster.now();
            match leases
                .update(&self.key, Bytes::from(self.name.clone()), revision)
                .await
            {
                Ok(next) => {
                    revision = next;
                    let until = sent + self.lease.saturating_sub(self.margin());
                    let _ = self.engine.tell(Renewed { until });
                }
                Err(e) => {
                    // The engine stops acknowledging at `until` whatever happens here.
                    note!("node {}: lease renewal failed: {}", self.name, e);
                    match leases.entry(&self.key).await {
                        // Ours still (an answer lost on the way): carry on from its revision.
                        Ok(Some(entry)) if entry.value == self.name.as_bytes() => {
                            revision = entry.revision;
                        }
                        // Expired while the server could not be reached, and nobody took it:
                        // take it again, as any eligible node may (a create fails if another
                        // node was faster). A new epoch.
                        Ok(None) => {
                            let sent = self.cluster.now();
                            let Ok(next) = leases
                                .create(&self.key, Bytes::from(self.name.clone()))
                                .await
                            else {
                                self.cluster.exit(
                                    3,
                                    &format!("node {}: lost the lease; exiting", self.name),
                                );
                                return;
                            };
                            // Only while the sync record still names this node primary: a
                            // standby that took over meanwhile named itself before it
                            // acknowledged anything, and its orders are not here. Read once
                            // the lease is taken again, so that no takeover can slip in
                            // between the read and the create.
                            let read = match self.read_sync().await {
                                Ok(Some((sync, _))) if sync.primary == self.name => Some(sync),
                                _ => None,
                            };
                            // The record is written again, at the new epoch: a node whose
                            // takeover write is still on its way (its lease ran out before this
                            // create) finds the record changed and gives up, instead of naming
                            // itself over this primary.
                            // Only the epoch changes: which standby is named is the engine's
                            // to say, and it may change it meanwhile (a value made from the
                            // read above, written again after a conflict, named a standby the
                            // engine had just dropped, and it took over without the orders
                            // acknowledged alone since: seed `22159:pct3:-`).
                            let renamed = match read {
                                Some(sync) => {
                                    self.change_sync(Claim::Primary, |current| InSync {
                                        epoch: next,
                                        ..current.unwrap_or(&sync).clone()
                                    })
                                    .await
                                }
                                None => false,
                            };
                            if !renamed {
                                self.cluster.exit(
                                    3,
                                    &format!(
                                        "node {}: another node was primary meanwhile; exiting",
                                        self.name
                                    ),
                                );
                                return;
                            }
                            revision = next;
                            let until = sent + self.lease.saturating_sub(self.margin());
                            let _ = self.engine.tell(BecomePrimary { epoch: next, until });
                        }
                        Ok(Some(_)) => {
                            self.cluster.exit(
                                3,
                                &format!(
                                    "node {}: another node holds the lease; exiting",
                                    self.name
                                ),
                            );
                            return;
                        }
                        // The server cannot be reached: try again next round.
                        Err(_) => {}
                    }
                }
            }
        }
    }
}

/// Which writes of the sync record a writer may make.
#[derive(Clone, Copy)]
enum Claim {
    /// A node taking over: only over the record it read after creating the lease (its
    /// revision; `None`: there was none), unchanged since.
    Takeover(Option<u64>),
    /// The primary: only over a record that names it primary.
    Primary,
}

enum Mode {
    Standby,
    Primary,
}

struct StandbyLink<C: Cluster> {
    /// This link's number: answers to `Replicate`s sent on an earlier link (the same node,
    /// dropped and joined again) are not this link's.
    id: u64,
    name: String,
    replicate: C::Peer<Replicate>,
    /// Named in the sync key.
    listed: bool,
    /// A sync-key change for this standby is under way.
    changing: bool,
    /// Being dropped: once a write naming it ends, the key is written again without it.
    dropping: bool,
}

/// Standby: an order ahead of a gap, the digest before it, the epoch that sent it, and where
/// its answer goes.
type Buffered = (Order, u64, u64, Deferred<Result<u64, String>>);

/// Where a primary's answer to `Place` goes once the order is settled.
type PlaceReply = Deferred<Result<DistAck, DistError>>;

/// One node's engine: a primary or a standby of its pair.
pub(crate) struct Engine<C: Cluster> {
    market: Arc<Market>,
    pair: usize,
    name: String,
    cluster: C,
    shard: Shard,
    log: Box<dyn OrderLog>,
    history: Vec<Order>,
    /// `chain[n]`: the digest of the first `n` orders of `history` (`chain[0] == 0`).
    chain: Vec<u64>,
    mode: Mode,
    epoch: u64,
    lease_until: Instant,
    standby: Option<StandbyLink<C>>,
    /// Primary: orders sent to the standby, not yet applied here.
    /// (seq, order, reply, the digest of the history after it).
    inflight: VecDeque<(u64, Order, PlaceReply, u64)>,
    inflight_keys: HashSet<OrderKey>,
    /// Primary: the most orders the standby has said it holds.
    standby_holds: u64,
    /// Primary: standby links made so far (numbers them).
    links: u64,
    /// Standby: orders that arrived ahead of a gap, by sequence number.
    buffered: BTreeMap<u64, Buffered>,
    /// Standby: how many of the first orders of its history the primary of `epoch` has
    /// confirmed are its own (by a catch-up or a `Replicate`); never cut back.
    vouched: u64,
    lease: Option<Lease<C>>,
    me: Option<Addr<Engine<C>>>,
    /// The books' state hash for (orders applied, digest of the history): it reads every
    /// accepted key, so it is worked out once per history, not once per [`GetState`].
    hash_of: Option<(u64, u64, u64)>,
}

impl<C: Cluster> Actor for Engine<C> {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(ctx.myself());
        // A standby (re)joins its primary every so often: at start, after a restart, after
        // being dropped. Joining an in-step standby again costs one round trip.
        ctx.send_interval(Duration::from_millis(300), || JoinTick);
    }
}

struct JoinTick;
impl Message for JoinTick {
    type Reply = ();
}
impl<C: Cluster> Handler<JoinTick> for Engine<C> {
    fn handle(&mut self, _: JoinTick, _: &mut Context<Self>) {
        self.join();
    }
}

struct UseLease<C: Cluster>(Lease<C>);
impl<C: Cluster> Message for UseLease<C> {
    type Reply = ();
}
impl<C: Cluster> Handler<UseLease<C>> for Engine<C> {
    fn handle(&mut self, m: UseLease<C>, _: &mut Context<Self>) {
        self.lease = Some(m.0);
    }
}

struct BecomePrimary {
    epoch: u64,
    until: Instant,
}
impl Message for BecomePrimary {
    type Reply = ();
}
impl<C: Cluster> Handler<BecomePrimary> for Engine<C> {
    fn handle(&mut self, m: BecomePrimary, ctx: &mut Context<Self>) {
        self.cluster.observe(NodeEvent::Primary {
            node: &self.name,
            epoch: m.epoch,
            applied: self.shard.applied(),
        });
        if matches!(self.mode, Mode::Primary) {
            // The lease taken again after it expired unreachable: a new epoch, same primary.
            // Orders in flight carry the old epoch, which the standby still accepts (it only
            // refuses older ones than it has seen).
            self.epoch = m.epoch;
            self.lease_until = m.until;
            note!("node {}: primary again at epoch {}", self.name, m.epoch);
            self.settle();
            return;
        }
        self.mode = Mode::Primary;
        self.epoch = m.epoch;
        self.lease_until = m.until;
        self.standby = None;
        // Orders held for a gap will never be filled by the old primary.
        for (_, (_, _, _, reply)) in std::mem::take(&mut self.buffered) {
            let _ = reply.send(Err("the standby became primary".into()));
        }
        note!(
            "node {}: primary of pair {} at epoch {} with {} orders",
            self.name,
            self.pair,
            m.epoch,
            self.shard.applied()
        );
        let exported = self
            .cluster
            .export(&primary_name(self.pair), ctx.myself())
            .accept::<Place, _>()
            .accept::<Join, _>()
            .start();
        if let Err(e) = exported {
            self.cluster.exit(
                3,
                &format!("node {}: cannot export the primary: {}", self.name, e),
            );
        }
    }
}

struct Renewed {
    until: Instant,
}
impl Message for Renewed {
    type Reply = ();
}
impl<C: Cluster> Handler<Renewed> for Engine<C> {
    fn handle(&mut self, m: Renewed, _: &mut Context<Self>) {
        self.lease_until = self.lease_until.max(m.until);
        self.settle();
    }
}

impl<C: Cluster> Engine<C> {
    fn leased(&self) -> bool {
        matches!(self.mode, Mode::Primary) && self.cluster.now() < self.lease_until
    }

    /// Primary: the digest of the history once the orders in flight are applied.
    fn inflight_head(&self) -> u64 {
        self.inflight.back().map_or(self.head(), |(_, _, _, d)| *d)
    }

    /// The digest of the whole history.
    fn head(&self) -> u64 {
        *self.chain.last().expect("chain[0] is always there")
    }

    /// Applies and logs an order here (every engine, in sequence order).
    fn apply(&mut self, order: &Order) -> Result<u32, String> {
        let fill = self.shard.apply(order).map_err(|e| e.to_string())?;
        self.log.append(order)?;
        self.chain.push(digest(self.head(), order));
        self.history.push(*order);
        Ok(fill.filled)
    }

    fn join(&mut self) {
        if matches!(self.mode, Mode::Primary) {
            return;
        }
        let Ok(primary) = self.cluster.recipient::<Join>(&primary_name(self.pair)) else {
            return;
        };
        let ask = primary.ask(
            Join {
                node: self.name.clone(),
                marks: self.marks(),
            },
            Duration::from_secs(1),
        );
        let Some(me) = self.me.clone() else { return };
        self.cluster.spawn(async move {
            if let Ok(Ok(answer)) = ask.await {
                let _ = me.tell(Joined(answer));
            }
        });
    }

    /// The points of this history a join offers: its end, 1, 2, 4, ... orders back, what the
    /// primary vouched for, and 0; newest first.
    fn marks(&self) -> Vec<(u64, u64)> {
        let applied = self.shard.applied();
        let mut at: Vec<u64> = (0..62)
            .map(|i| applied.saturating_sub((1u64 << i) - 1))
            .chain([self.vouched, 0])
            .collect();
        at.sort_unstable_by(|a, b| b.cmp(a));
        at.dedup();
        at.into_iter()
            .map(|n| (n, self.chain[n as usize]))
            .collect()
    }

    /// Standby: a primary of a later epoch is heard from. Nothing of this history is vouched
    /// for by it yet, and orders buffered from an earlier one will not be filled.
    fn see_epoch(&mut self, epoch: u64) {
        if epoch <= self.epoch {
            return;
        }
        self.epoch = epoch;
        self.vouched = 0;
        let older: Vec<u64> = self
            .buffered
            .iter()
            .filter(|(_, (_, _, from, _))| *from < epoch)
            .map(|(seq, _)| *seq)
            .collect();
        for seq in older {
            if let Some((_, _, from, reply)) = self.buffered.remove(&seq) {
                let _ = reply.send(Err(format!("epoch {from} is older than {epoch}")));
            }
        }
    }

    /// Standby: cuts the history, the books and the log back to the first `keep` orders (the
    /// rest are an earlier primary's, never acknowledged at those places: see the module
    /// note). False if the log could not be cut, and the node has ended to start again from
    /// its log.
    fn cut_back(&mut self, keep: u64) -> bool {
        let cut = self.shard.applied() - keep;
        note!(
            "node {}: its last {cut} orders are not the primary's; cutting its log back to {keep} \
             orders to rejoin",
            self.name
        );
        self.cluster.observe(NodeEvent::CutBack {
            node: &self.name,
            keep,
            cut,
        });
        let mut shard = Shard::new(&self.market, self.pair, Role::Primary);
        let replayed = self.history[..keep as usize]
            .iter()
            .try_for_each(|order| shard.replay(order).map(drop).map_err(|e| e.to_string()));
        if let Err(e) = replayed.and_then(|()| self.log.cut_back(keep)) {
            self.cluster
                .exit(3, &format!("node {}: cutting its log back: {e}", self.name));
            return false;
        }
        self.shard = shard;
        self.history.truncate(keep as usize);
        self.chain.truncate(keep as usize + 1);
        self.vouched = self.vouched.min(keep);
        true
    }

    /// Standby: applies buffered orders that now follow.
    fn drain_buffered(&mut self) {
        while let Some(entry) = self.buffered.first_entry() {
            if *entry.key() != self.shard.applied() + 1 {
                break;
            }
            let (order, prev, epoch, reply) = entry.remove();
            let result = if prev == self.head() {
                self.apply(&order).map(|_| {
                    if epoch == self.epoch {
                        self.vouched = self.shard.applied();
                    }
                    self.shard.applied()
                })
            } else {
                Err(self.diverged(self.shard.applied() + 1))
            };
            let _ = reply.send(result);
        }
    }

    /// Primary: applies and acknowledges the in-flight orders the standby holds (all of them
    /// once no standby is named). Without a valid lease nothing is settled: the orders stay in
    /// flight (the standby may hold them, so their sequence numbers are taken) until the lease
    /// is renewed or taken again, or another node takes it and this process ends.
    fn settle(&mut self) {
        if !self.leased() {
            return;
        }
        let upto = if self.standby.is_some() {
            self.standby_holds
        } else {
            u64::MAX
        };
        while let Some((seq, _, _, _)) = self.inflight.front() {
            if *seq > upto {
                break;
            }
            let (seq, order, reply, _) = self.inflight.pop_front().expect("front");
            self.inflight_keys.remove(&order.key());
            let result = self
                .apply(&order)
                .map_err(DistError::Rejected)
                .map(|filled| DistAck {
                    client_order_id: order.client_order_id(),
                    seq,
                    filled,
                    epoch: self.epoch,
                });
            if result.is_ok() {
                self.cluster.observe(NodeEvent::Acked {
                    node: &self.name,
                    epoch: self.epoch,
                    seq,
                    key: (order.client().0, order.client_order_id()),
                });
            }
            let _ = reply.send(result);
        }
    }
}

struct Joined(JoinAnswer);
impl Message for Joined {
    type Reply = ();
}
impl<C: Cluster> Handler<Joined> for Engine<C> {
    fn handle(&mut self, Joined(answer): Joined, _: &mut Context<Self>) {
        if matches!(self.mode, Mode::Primary) || answer.epoch < self.epoch {
            // Primary now, or the answer of a primary older than one heard from since.
            return;
        }
        self.see_epoch(answer.epoch);
        // Both held the first `after` orders when the join was answered. From there, the
        // primary's orders are compared with those held here, and the history is cut back at
        // the first that differs.
        let mut seq = answer.after;
        for wire in &answer.orders {
            seq += 1;
            let applied = self.shard.applied();
            if seq <= applied {
                if WireOrder::of(&self.history[seq as usize - 1]) == *wire {
                    continue;
                }
                if !self.cut_back(seq - 1) {
                    return;
                }
            } else if seq != applied + 1 {
                // Cut back since the join was asked: the next join takes it from there.
                return;
            }
            let applied = self
                .market
                .validate(&wire.new_order())
                .map_err(|e| e.to_string())
                .and_then(|order| self.apply(&order));
            if let Err(e) = applied {
                // Cannot happen while the digests hold; the next join starts again.
                note!("node {}: catching up at seq {seq}: {e}", self.name);
                return;
            }
        }
        self.vouched = self.vouched.max(seq.min(self.shard.applied()));
        // The answer reached the primary's end, and this node holds more: an earlier
        // primary's orders, unless the primary has confirmed them since.
        if seq == answer.holds
            && self.shard.applied() > self.vouched
            && !self.cut_back(self.vouched)
        {
            return;
        }
        self.drain_buffered();
    }
}

impl<C: Cluster> DeferredHandler<Replicate> for Engine<C> {
    fn handle(
        &mut self,
        m: Replicate,
        reply: Deferred<Result<u64, String>>,
        _: &mut Context<Self>,
    ) {
        match self.replicate(&m) {
            Ok(Taken::Holds(seq)) => {
                let _ = reply.send(Ok(seq));
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
            Ok(Taken::AheadOfGap(order)) => {
                // Answered once applied, when the catch-up on its way fills the gap.
                self.buffered.insert(m.seq, (order, m.prev, m.epoch, reply));
                if self.buffered.len() > 100_000 {
                    self.cluster.exit(
                        3,
                        &format!(
                            "node {}: too far behind its primary; exiting to rejoin",
                            self.name
                        ),
                    );
                }
            }
        }
    }
}

/// What a standby did with a `Replicate`.
enum Taken {
    /// It holds the primary's orders up to this sequence number.
    Holds(u64),
    /// The order is ahead of a gap: kept until the gap is filled.
    AheadOfGap(Order),
}

impl<C: Cluster> Engine<C> {
    /// Standby: takes the primary's order `m`, or says why not.
    fn replicate(&mut self, m: &Replicate) -> Result<Taken, String> {
        if matches!(self.mode, Mode::Primary) {
            return Err(format!("{} is primary", self.name));
        }
        if m.epoch < self.epoch {
            return Err(format!("epoch {} is older than {}", m.epoch, self.epoch));
        }
        self.see_epoch(m.epoch);
        let order = self
            .market
            .validate(&m.order.new_order())
            .map_err(|e| e.to_string())?;
        let applied = self.shard.applied();
        if m.seq == 0 {
            return Err("sequence number 0".into());
        }
        if m.seq <= applied {
            // Held already (a resend, a copy): confirmed only if it is the same order after
            // the same history. Only `seq` is confirmed: what follows it here has not been
            // compared with the primary's.
            let n = m.seq as usize;
            return if self.chain[n - 1] == m.prev && self.chain[n] == digest(m.prev, &order) {
                self.vouched = self.vouched.max(m.seq);
                Ok(Taken::Holds(m.seq))
            } else {
                Err(self.diverged(m.seq))
            };
        }
        if m.seq == applied + 1 {
            if m.prev != self.head() {
                return Err(self.diverged(m.seq));
            }
            let result = self.apply(&order).map(|_| {
                self.vouched = self.shard.applied();
                Taken::Holds(self.shard.applied())
            });
            self.drain_buffered();
            return result;
        }
        Ok(Taken::AheadOfGap(order))
    }
}

impl<C: Cluster> Engine<C> {
    /// Standby: the answer when this history is not the primary's before `seq`.
    fn diverged(&self, seq: u64) -> String {
        format!(
            "node {}: its history differs from the primary's before or at seq {seq}",
            self.name
        )
    }
}

impl<C: Cluster> Handler<GetState> for Engine<C> {
    fn handle(&mut self, m: GetState, _: &mut Context<Self>) -> NodeState {
        self.state(m.keys_from)
    }
}

impl<C: Cluster> Engine<C> {
    /// The state, with one page of keys from `keys_from`: bounded work and a bounded answer.
    fn state(&mut self, keys_from: u64) -> NodeState {
        let applied = self.shard.applied();
        let head = self.head();
        let hash = match self.hash_of {
            Some((n, h, hash)) if n == applied && h == head => hash,
            _ => {
                let hash = self.shard.state_hash();
                self.hash_of = Some((applied, head, hash));
                hash
            }
        };
        let from = usize::try_from(keys_from)
            .unwrap_or(usize::MAX)
            .min(self.history.len());
        let to = self.history.len().min(from + STATE_PAGE);
        NodeState {
            node: self.name.clone(),
            pair: self.pair,
            primary: matches!(self.mode, Mode::Primary),
            epoch: self.epoch,
            applied,
            hash,
            keys_from: from as u64,
            keys: self.history[from..to]
                .iter()
                .map(|o| (o.client().0, o.client_order_id()))
                .collect(),
        }
    }
}

impl<C: Cluster> Handler<Join> for Engine<C> {
    fn handle(&mut self, m: Join, _: &mut Context<Self>) -> Result<JoinAnswer, String> {
        if !self.leased() {
            return Err("not primary".into());
        }
        if !self.inflight.is_empty() {
            return Err("orders in flight; join again".into());
        }
        if m.marks.len() > MAX_MARKS {
            return Err(format!("more than {MAX_MARKS} marks"));
        }
        // The last point both histories share (0 at least: the empty history).
        let after = m
            .marks
            .iter()
            .filter(|(n, d)| self.chain.get(*n as usize) == Some(d))
            .map(|(n, _)| *n as usize)
            .max()
            .unwrap_or(0);
        let same = self.standby.as_ref().is_some_and(|s| s.name == m.node);
        if !same
            && self
                .standby
                .as_ref()
                .is_some_and(|s| s.listed || s.changing)
        {
            // The sync key names another standby: it is dropped (unnamed first) when it stops
            // answering, and only then may another node join.
            return Err("another standby is named; join again later".into());
        }
        if !same {
            let replicate = self
                .cluster
                .recipient::<Replicate>(&node_export(self.pair, &m.node))
                .map_err(|e| e.to_string())?;
            self.standby_holds = self.shard.applied();
            self.links += 1;
            self.standby = Some(StandbyLink {
                id: self.links,
                name: m.node.clone(),
                replicate,
                listed: false,
                changing: false,
                dropping: false,
            });
        }
        // At most `JOIN_CHUNK` orders per answer (a NATS message is 1 MB at most); a standby
        // further behind gets the rest by joining again (it does every 300 ms).
        let end = self.history.len().min(after + JOIN_CHUNK);
        Ok(JoinAnswer {
            epoch: self.epoch,
            after: after as u64,
            orders: self.history[after..end].iter().map(WireOrder::of).collect(),
            holds: self.history.len() as u64,
        })
    }
}

struct Replicated {
    /// The standby link it was sent on.
    link: u64,
    seq: u64,
    result: Result<u64, String>,
}
impl Message for Replicated {
    type Reply = ();
}

struct SyncWritten {
    standby: Option<String>,
    ok: bool,
}
impl Message for SyncWritten {
    type Reply = ();
}

impl<C: Cluster> DeferredHandler<Place> for Engine<C> {
    fn handle(&mut self, m: Place, reply: PlaceReply, ctx: &mut Context<Self>) {
        match self.place(m, ctx) {
            Ok(Placing::Acked(ack)) => {
                let _ = reply.send(Ok(ack));
            }
            // Answered when the standby holds it (or at once when no standby is named).
            Ok(Placing::InFlight { seq, order, after }) => {
                self.inflight_keys.insert(order.key());
                self.inflight.push_back((seq, order, reply, after));
                self.settle();
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// What a primary did with an order.
enum Placing {
    /// Applied and acknowledged.
    Acked(DistAck),
    /// Numbered and in flight: applied and acknowledged once the standby holds it. `after`
    /// is the digest of the history once it is applied.
    InFlight { seq: u64, order: Order, after: u64 },
}

impl<C: Cluster> Engine<C> {
    /// Primary: takes a client's order: applies it at once when alone, else sends it to the
    /// standby and puts it in flight.
    fn place(&mut self, m: Place, ctx: &mut Context<Self>) -> Result<Placing, DistError> {
        if !self.leased() {
            return Err(DistError::Unavailable("not primary".into()));
        }
        let order = self
            .market
            .validate(&m.0.new_order())
            .map_err(|e| DistError::Rejected(e.to_string()))?;
        if self.inflight_keys.contains(&order.key()) {
            return Err(DistError::Unavailable("the same order is in flight".into()));
        }
        match self.shard.check(&order) {
            Err(RejectReason::DuplicateClientOrderId) => return Err(DistError::Duplicate),
            Err(e) => return Err(DistError::Rejected(e.to_string())),
            Ok(()) => {}
        }
        let Some(standby) = &self.standby else {
            if !self.inflight.is_empty() {
                // Behind orders still in flight: in sequence after them.
                let seq = self.shard.applied() + self.inflight.len() as u64 + 1;
                let after = digest(self.inflight_head(), &order);
                return Ok(Placing::InFlight { seq, order, after });
            }
            // Alone (the sync key names only this node): apply and acknowledge.
            let filled = self.apply(&order).map_err(DistError::Rejected)?;
            self.cluster.observe(NodeEvent::Acked {
                node: &self.name,
                epoch: self.epoch,
                seq: self.shard.applied(),
                key: (order.client().0, order.client_order_id()),
            });
            return Ok(Placing::Acked(DistAck {
                client_order_id: order.client_order_id(),
                seq: self.shard.applied(),
                filled,
                epoch: self.epoch,
            }));
        };
        let seq = self.shard.applied() + self.inflight.len() as u64 + 1;
        let prev = self.inflight_head();
        let ask = standby.replicate.ask(
            Replicate {
                epoch: self.epoch,
                seq,
                order: WireOrder::of(&order),
                prev,
            },
            Duration::from_millis(500),
        );
        let link = standby.id;
        let me = ctx.myself();
        self.cluster.spawn(async move {
            let result = match ask.await {
                Ok(r) => r,
                Err(e) => Err(e.to_string()),
            };
            let _ = me.tell(Replicated { link, seq, result });
        });
        Ok(Placing::InFlight {
            seq,
            order,
            after: digest(prev, &order),
        })
    }
}

impl<C: Cluster> Handler<Replicated> for Engine<C> {
    fn handle(&mut self, m: Replicated, ctx: &mut Context<Self>) {
        let Some(standby) = self.standby.as_mut().filter(|s| s.id == m.link) else {
            return;
        };
        let name = standby.name.clone();
        let idle = !standby.changing;
        let listed = standby.listed;
        let result = match m.result {
            Ok(applied) if applied < m.seq => Err(format!("answered {applied} for {}", m.seq)),
            other => other,
        };
        match result {
            Ok(applied) => {
                if !listed && idle && !standby.dropping && applied >= self.shard.applied() {
                    // The standby holds every order up to `applied`, every order acknowledged
                    // so far among them, and every later acknowledgement waits for it: name it
                    // in the sync key. (Naming it on any confirmation named, in seed
                    // `20112:random:-`, a standby that held 75 orders while the primary had
                    // acknowledged 81 alone: the answer to a `Replicate` of its earlier link,
                    // and it took over without 6 of them.)
                    standby.changing = true;
                    self.write_sync(Some(name), ctx);
                }
                self.standby_holds = self.standby_holds.max(applied);
                self.settle();
            }
            Err(e) => {
                note!("node {}: dropping the standby {name}: {e}", self.name);
                if listed || !idle {
                    // Acknowledge alone only once the sync key no longer names it. A write
                    // naming it may be on its way (`!idle`): it would name it after the
                    // primary went on alone, so the key is written again once it ends (found
                    // in simulation, `dist_sim` seed `151:pct3:-`).
                    standby.dropping = true;
                    if idle {
                        standby.changing = true;
                        self.write_sync(None, ctx);
                    }
                } else {
                    self.standby = None;
                    self.settle();
                }
            }
        }
    }
}

impl<C: Cluster> Engine<C> {
    fn write_sync(&mut self, standby: Option<String>, ctx: &mut Context<Self>) {
        let Some(lease) = self.lease.clone() else {
            return;
        };
        let value = InSync {
            primary: self.name.clone(),
            standby: standby.clone(),
            epoch: self.epoch,
        };
        note!(
            "node {}: writing the sync record: {} standby at epoch {}",
            self.name,
            standby.as_deref().unwrap_or("no"),
            self.epoch
        );
        let me = ctx.myself();
        self.cluster.spawn(async move {
            let ok = lease.write_sync(&value, Claim::Primary).await;
            let _ = me.tell(SyncWritten { standby, ok });
        });
    }
}

impl<C: Cluster> Handler<SyncWritten> for Engine<C> {
    fn handle(&mut self, m: SyncWritten, ctx: &mut Context<Self>) {
        if !m.ok {
            self.cluster.exit(
                3,
                &format!(
                    "node {}: the sync key changed under this primary; exiting",
                    self.name
                ),
            );
            return;
        }
        match m.standby {
            Some(name) => {
                if let Some(s) = self.standby.as_mut().filter(|s| s.name == name) {
                    s.listed = true;
                    s.changing = false;
                    if s.dropping {
                        s.changing = true;
                        self.write_sync(None, ctx);
                    }
                }
            }
            None => {
                // The standby is no longer named: what it has not acknowledged is applied here
                // alone.
                self.standby = None;
                self.settle();
            }
        }
    }
}

/// A stateless order receiver: validates and forwards to the primary of the order's pair.
pub(crate) struct Receiver<N: Network> {
    market: Arc<Market>,
    cluster: N,
    primaries: Vec<N::Peer<Place>>,
}

impl<N: Network> Actor for Receiver<N> {}

impl<N: Network> DeferredHandler<Submit> for Receiver<N> {
    fn handle(
        &mut self,
        m: Submit,
        reply: Deferred<Result<DistAck, DistError>>,
        _: &mut Context<Self>,
    ) {
        let primary = match self.primary_of(&m.0) {
            Ok(primary) => primary,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        self.cluster.spawn(async move {
            let result = match primary.ask(Place(m.0), Duration::from_secs(2)).await {
                Ok(r) => r,
                Err(RemoteError::Unreachable(_)) => {
                    Err(DistError::Unavailable("no primary for the pair now".into()))
                }
                Err(e) => Err(DistError::Unavailable(e.to_string())),
            };
            let _ = reply.send(result);
        });
    }
}

impl<N: Network> Receiver<N> {
    /// Validates a client's order; the primary of its pair.
    fn primary_of(&mut self, wire: &WireOrder) -> Result<N::Peer<Place>, DistError> {
        let order = self
            .market
            .validate(&wire.new_order())
            .map_err(|e| DistError::Rejected(e.to_string()))?;
        let pair = self
            .market
            .pair_of(order.instrument())
            .ok_or_else(|| DistError::Rejected("no pair".into()))?;
        if self.primaries.is_empty() {
            for p in 0..self.market.pairs() {
                match self.cluster.recipient::<Place>(&primary_name(p)) {
                    Ok(r) => self.primaries.push(r),
                    Err(e) => return Err(DistError::Unavailable(e.to_string())),
                }
            }
        }
        Ok(self.primaries[pair].clone())
    }
}

/// A client of the distributed system: resends an order until it is acknowledged. Over NATS
/// (`DistClient::new(&node)`), or over any [`Network`] (`DistClient::over`), such as a
/// simulated one.
pub struct DistClient<N: Network = Node> {
    net: N,
    submit: N::Peer<Submit>,
    /// How long answers have taken: how long a try waits before it sends again.
    round_trip: RoundTrip,
    /// Resends made so far (errors and time-outs).
    pub resends: u64,
}

/// The longest a try of [`DistClient::place`] waits for its answer (and the wait before the
/// first answer has been timed).
const MAX_TRY_WAIT: Duration = Duration::from_millis(500);
/// The shortest: above a busy node's answer, so that a slow answer is not taken for a lost one.
const MIN_TRY_WAIT: Duration = Duration::from_millis(50);

/// Tries of an order that wait as long as [`RoundTrip::wait`] before waits double.
const TRIES_AT_THE_ESTIMATE: u32 = 4;

/// A client's estimate of its answers' round trip, as TCP keeps it for its retransmission
/// time-out (RFC 6298): a smoothed time and its mean deviation, from every answer that came.
/// A try waits for the time plus four deviations, within [`MIN_TRY_WAIT`, `MAX_TRY_WAIT`];
/// an order's tries after the first [`TRIES_AT_THE_ESTIMATE`] wait twice as long each time.
/// A receiver that hangs (a paused node's, which keeps its share of the receivers' queue
/// group until NATS notices) then costs an order tens of milliseconds rather than half a
/// second for each try it takes.
#[derive(Debug, Default)]
struct RoundTrip {
    smoothed: Option<Duration>,
    deviation: Duration,
}

impl RoundTrip {
    /// How long a first try waits.
    fn wait(&self) -> Duration {
        match self.smoothed {
            None => MAX_TRY_WAIT,
            Some(smoothed) => (smoothed + 4 * self.deviation).clamp(MIN_TRY_WAIT, MAX_TRY_WAIT),
        }
    }

    /// An answer came `took` after its try was sent.
    fn answered(&mut self, took: Duration) {
        match self.smoothed {
            None => {
                self.smoothed = Some(took);
                self.deviation = took / 2;
            }
            Some(smoothed) => {
                let off = smoothed.abs_diff(took);
                self.deviation = (3 * self.deviation + off) / 4;
                self.smoothed = Some((7 * smoothed + took) / 8);
            }
        }
    }
}

/// An order's final answer at the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// Acknowledged (by the primary of `epoch`), or found already applied on a resend.
    Acked(Option<DistAck>),
    /// Refused for good.
    Rejected(String),
}

impl DistClient<Node> {
    /// A client on `node`'s connection.
    pub fn new(node: &Node) -> Result<Self, RemoteError> {
        Self::over(node.clone())
    }
}

impl<N: Network> DistClient<N> {
    /// A client on this network.
    pub fn over(net: N) -> Result<Self, RemoteError> {
        Ok(DistClient {
            submit: net.recipient::<Submit>(RECEIVE)?,
            net,
            round_trip: RoundTrip::default(),
            resends: 0,
        })
    }

    /// Places `order`, resending it until it is acknowledged or `deadline` passes.
    pub async fn place(
        &mut self,
        order: WireOrder,
        deadline: Duration,
    ) -> Result<Placed, DistError> {
        let end = self.net.now() + deadline;
        let mut sent_before = false;
        // A short wait, then a resend: a receiver or primary that hangs (paused, cut off)
        // still gets its share of the queue group until NATS notices, and an order costs
        // well under a millisecond when all is well. How short: `RoundTrip`.
        let mut wait = self.round_trip.wait();
        let mut timeouts = 0;
        loop {
            let sent = self.net.now();
            let answer = self.submit.ask(Submit(order), wait).await;
            let timed_out = matches!(answer, Err(RemoteError::TimedOut(_)));
            if answer.is_ok() {
                self.round_trip.answered(self.net.now() - sent);
            }
            match answer {
                Ok(Ok(ack)) => return Ok(Placed::Acked(Some(ack))),
                // Applied by an earlier send whose answer was lost.
                Ok(Err(DistError::Duplicate)) if sent_before => return Ok(Placed::Acked(None)),
                Ok(Err(DistError::Rejected(why))) => return Ok(Placed::Rejected(why)),
                Ok(Err(DistError::Duplicate)) => {
                    return Ok(Placed::Rejected("duplicate key".into()))
                }
                Ok(Err(e @ DistError::Unavailable(_))) if self.net.now() >= end => return Err(e),
                Err(e) if self.net.now() >= end => {
                    return Err(DistError::Unavailable(e.to_string()))
                }
                _ => {
                    sent_before = true;
                    self.resends += 1;
                    if timed_out {
                        // The try's wait has passed: send again at once. The first tries
                        // wait as long as the estimate (a receiver that hangs takes a try
                        // at random, one in as many as there are receivers), then each twice
                        // as long as the one before (a slow system is not sent more).
                        timeouts += 1;
                        if timeouts >= TRIES_AT_THE_ESTIMATE {
                            wait = (2 * wait).min(MAX_TRY_WAIT);
                        }
                    } else {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
    }
}

/// The state of a node, without keys, asked over the network (NATS, or a simulated one).
pub async fn node_state<N: Network>(
    net: &N,
    pair: usize,
    name: &str,
) -> Result<NodeState, RemoteError> {
    net.recipient::<GetState>(&state_export(pair, name))?
        .ask(
            GetState {
                keys_from: u64::MAX,
            },
            Duration::from_secs(2),
        )
        .await
}

/// The state of a node with the keys of its whole history, asked page by page. The history
/// may grow while it is read (the pages read before still hold: a history only grows at its
/// end), or be cut back (a standby rejoining): then it is read again from the start, up to
/// three times.
pub async fn node_history<N: Network>(
    net: &N,
    pair: usize,
    name: &str,
) -> Result<NodeState, RemoteError> {
    let states = net.recipient::<GetState>(&state_export(pair, name))?;
    let mut tries = 0;
    'again: loop {
        tries += 1;
        let mut keys = Vec::new();
        loop {
            let page = states
                .ask(
                    GetState {
                        keys_from: keys.len() as u64,
                    },
                    Duration::from_secs(2),
                )
                .await?;
            if page.applied < keys.len() as u64 || page.keys_from != keys.len() as u64 {
                if tries < 3 {
                    continue 'again;
                }
                return Err(RemoteError::Decode(format!(
                    "node {name}'s history was cut back while it was read, three times"
                )));
            }
            keys.extend_from_slice(&page.keys);
            if page.keys.is_empty() || keys.len() as u64 >= page.applied {
                return Ok(NodeState {
                    keys_from: 0,
                    keys,
                    ..page
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_try_waits_long_until_an_answer_is_timed() {
        assert_eq!(RoundTrip::default().wait(), MAX_TRY_WAIT);
    }

    #[test]
    fn quick_answers_bring_the_wait_down_to_its_floor_and_slow_ones_raise_it() {
        let mut rt = RoundTrip::default();
        rt.answered(ms(1));
        // 1 ms + 4 x 0.5 ms, under the floor.
        assert_eq!(rt.wait(), MIN_TRY_WAIT);
        for _ in 0..20 {
            rt.answered(ms(1));
        }
        assert_eq!(rt.wait(), MIN_TRY_WAIT);
        // A node that has become slow: the wait follows the answers up, never past the cap.
        let mut waits = Vec::new();
        for _ in 0..40 {
            rt.answered(ms(80));
            waits.push(rt.wait());
        }
        assert!(waits[0] > MIN_TRY_WAIT, "{waits:?}");
        assert!(waits.iter().all(|w| *w <= MAX_TRY_WAIT));
        let last = *waits.last().unwrap();
        assert!(
            last >= ms(80) && last < ms(100),
            "settles near the answers: {last:?}"
        );
        for _ in 0..10 {
            rt.answered(Duration::from_secs(3));
        }
        assert_eq!(rt.wait(), MAX_TRY_WAIT);
    }
}
