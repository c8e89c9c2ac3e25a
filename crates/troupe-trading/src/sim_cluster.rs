//! A simulated cluster for the distributed mode: node processes, the network between them and
//! the NATS key-value buckets, all inside one `troupe::sim` simulation (one thread, simulated
//! time, every choice from the seed). The node logic of `dist.rs` runs on it unchanged, through
//! the [`cluster`](crate::cluster) traits, as it runs on NATS in production.
//!
//! # Processes
//! Every node (and every client) is a *process*: a name, and an incarnation number that grows
//! each time it starts. A process's actors, futures and exports belong to its incarnation.
//! - **kill** ([`SimulatedCluster::kill`], and a node's own `exit`): the incarnation ends at
//!   once: its exports go (as a closed NATS connection's subscriptions do), its actors are
//!   stopped, its futures are dropped at their next poll, its log writes are refused, and what
//!   was on its way to it is lost. Only its log ([`SimulatedCluster::history`]) survives;
//!   [`SimulatedCluster::start_node`] starts a new incarnation from it.
//! - **pause** (a frozen process, SIGSTOP): everything it sends and everything sent to it, on
//!   the network and to the buckets, waits until the pause ends; its exports stay. What runs
//!   inside it meanwhile (its timers) is as if it ran just before the freeze and its sends left
//!   after it, which is the case a lease must survive: a decision taken on a clock reading,
//!   then acted on after a pause.
//! - **cut** (a partition): for a while, what it sends and what is sent to it is lost: on the
//!   network, to the buckets, or both.
//!
//! # The network (NATS core, as the node logic may rely on it)
//! An ask is routed when it is sent: to every live export of the name, or to one member of a
//! queue group, chosen at random. Each copy travels with a delay drawn from the seed; asks
//! from one process to one name keep their order (a link's deliveries never overtake each
//! other), asks on different links may. A copy may be dropped; it may be delivered twice (more
//! than NATS does). The reply travels back the same way. An ask with no reply fails at its
//! timeout (`Unreachable` if nothing exports the name any more, else `TimedOut`).
//!
//! # The buckets (JetStream key-value)
//! Each request travels to the store and back as a message does (lost, delayed, in order per
//! process), and is applied when it arrives: create-if-absent, compare-and-set on the
//! revision, revisions from one counter per bucket that only grows. The lease bucket forgets
//! an entry `lease` after its last write plus a small lag drawn from the seed (never earlier).
//! A request whose answer is lost fails at the client's timeout (5 s, async-nats's default for
//! JetStream requests), though it may have been applied.
//!
//! # Observing
//! Every [`NodeEvent`] a node reports is checked at once against the store's truth: an
//! acknowledgement must come from the node that holds the pair's lease in the store at that
//! instant, and two acknowledgements of one pair must not give one sequence number to two
//! orders. Violations are kept ([`SimulatedCluster::violations`]).

use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;
use troupe::kind::Kind;
use troupe::{Accepts, Actor, Addr, Context, Handler, Message, Recipient, System};
use troupe_remote::RemoteError;

use crate::cluster::{
    Cluster, Export, KeyValue, KvEntry, KvError, Network, NodeEvent, OrderLog, Peer, Wire,
};
use crate::dist::{self, pair_key, NodeError, NodeSetup};
use crate::market::Market;
use crate::order::Order;

/// How long a key-value request waits for its answer (async-nats's JetStream default).
pub const KV_TIMEOUT: Duration = Duration::from_secs(5);

/// The network's behaviour, drawn per run by [`NetFaults::draw`] or set by a test.
#[derive(Clone, Debug, PartialEq)]
pub struct NetFaults {
    /// Chance that one copy of a message (or a key-value request or answer) is lost.
    pub drop: f64,
    /// Chance that a message is delivered twice.
    pub duplicate: f64,
    /// The usual one-way delay: uniform between these bounds.
    pub delay: (Duration, Duration),
    /// Chance that a copy is slow instead, uniform up to `slow`.
    pub slow_chance: f64,
    /// The longest slow delay.
    pub slow: Duration,
}

impl NetFaults {
    /// A network that loses, doubles and delays nothing beyond its usual delay (the liveness
    /// phase's network).
    pub fn calm() -> Self {
        NetFaults {
            drop: 0.0,
            duplicate: 0.0,
            delay: (Duration::from_micros(50), Duration::from_micros(1_500)),
            slow_chance: 0.0,
            slow: Duration::ZERO,
        }
    }

    /// A run's faulty network, drawn from `random` (swarm testing: each kind on in about
    /// half the runs, at rates up to 5 % for losses and duplicates, 2 % for slow copies of up
    /// to 400 ms).
    pub fn draw(random: &mut impl FnMut() -> u64) -> Self {
        let mut rate = |high: f64| {
            if random().is_multiple_of(2) {
                0.0
            } else {
                high * (random() % 1_000) as f64 / 1_000.0
            }
        };
        let drop = rate(0.05);
        let duplicate = rate(0.05);
        let slow_chance = rate(0.02);
        NetFaults {
            drop,
            duplicate,
            slow_chance,
            slow: Duration::from_millis(400),
            ..Self::calm()
        }
    }
}

/// The simulated world: processes, network, buckets, logs. Clone it freely (clones share the
/// world). See the module note.
#[derive(Clone)]
pub struct SimulatedCluster {
    world: Arc<World>,
}

struct World {
    system: System,
    spawner: Addr<Spawner>,
    market: Arc<Market>,
    lease: Duration,
    /// When the world was made: traces give simulated time from here.
    origin: Instant,
    state: Mutex<State>,
}

impl World {
    /// With `TROUPE_SIM_NOTES` set (see `dist::notes_shown`), says what happened and when, in
    /// simulated time: faults, starts, exits, primaries, acknowledgements, cuts.
    fn trace(&self, what: std::fmt::Arguments<'_>) {
        if crate::dist::notes_shown() {
            let at = self.system.now().saturating_duration_since(self.origin);
            eprintln!("[{:>9.3} s] {what}", at.as_secs_f64());
        }
    }
}

struct State {
    rng: Rng,
    faults: NetFaults,
    processes: Vec<Process>,
    exports: BTreeMap<String, Vec<ExportEntry>>,
    /// Per link (from process, to process, name): when its last delivery arrives.
    links: BTreeMap<(usize, usize, Arc<str>), Instant>,
    leases: Bucket,
    syncs: Bucket,
    /// Each node's log, by name: what survives its process.
    logs: BTreeMap<String, Vec<Order>>,
    /// Acknowledgements seen, by (pair, sequence number).
    acks: BTreeMap<(usize, u64), AckRecord>,
    violations: Vec<String>,
    counters: Counters,
}

/// An acknowledgement a primary made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckRecord {
    /// The order's key (client, client order id).
    pub key: (u32, u64),
    /// The primary's epoch.
    pub epoch: u64,
    /// The primary.
    pub node: String,
}

/// What the network and the nodes did in a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Message copies sent (asks and replies, key-value requests and answers).
    pub messages: u64,
    /// Copies lost (dropped, or to or from a process cut off or ended).
    pub lost: u64,
    /// Copies delivered twice.
    pub duplicated: u64,
    /// Times a node became primary (or took its lease again).
    pub primaries: u64,
    /// Acknowledgements made by primaries.
    pub acks: u64,
    /// Node processes that ended by themselves (`exit`).
    pub exits: u64,
    /// Times a standby cut its history back to rejoin its primary.
    pub cut_backs: u64,
    /// Orders those cuts dropped.
    pub orders_cut: u64,
}

struct Process {
    name: String,
    pair: Option<usize>,
    incarnation: u64,
    alive: bool,
    paused_until: Option<Instant>,
    net_cut_until: Option<Instant>,
    kv_cut_until: Option<Instant>,
    /// Stops its actors.
    stop: Vec<Box<dyn FnOnce() + Send>>,
    /// Ended by its own `exit` (and not started again yet).
    exited: bool,
}

impl Process {
    fn paused(&self, now: Instant) -> Option<Instant> {
        self.paused_until.filter(|&t| t > now)
    }

    fn net_cut(&self, now: Instant) -> bool {
        self.net_cut_until.is_some_and(|t| t > now)
    }

    fn kv_cut(&self, now: Instant) -> bool {
        self.kv_cut_until.is_some_and(|t| t > now)
    }
}

struct ExportEntry {
    process: usize,
    incarnation: u64,
    group: Option<String>,
    routes: Arc<Routes>,
}

/// Message type -> the in-process `Recipient<M>` of the exported actor.
type Routes = Vec<(TypeId, Box<dyn Any + Send + Sync>)>;

/// One bucket's state: the entries and the revision counter.
struct Bucket {
    max_age: Option<Duration>,
    revision: u64,
    entries: BTreeMap<String, StoredEntry>,
}

struct StoredEntry {
    value: Bytes,
    revision: u64,
    /// When the server forgets it (lease bucket only).
    expires: Option<Instant>,
}

impl Bucket {
    fn new(max_age: Option<Duration>) -> Self {
        Bucket {
            max_age,
            revision: 0,
            entries: BTreeMap::new(),
        }
    }

    fn live(&mut self, key: &str, now: Instant) -> Option<&StoredEntry> {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.expires.is_some_and(|t| t <= now))
        {
            self.entries.remove(key);
        }
        self.entries.get(key)
    }

    fn write(&mut self, key: &str, value: Bytes, now: Instant, lag: Duration) -> u64 {
        self.revision += 1;
        let expires = self.max_age.map(|age| now + age + lag);
        self.entries.insert(
            key.to_string(),
            StoredEntry {
                value,
                revision: self.revision,
                expires,
            },
        );
        self.revision
    }

    fn apply(&mut self, op: &KvOp, now: Instant, lag: Duration) -> Result<KvAnswer, KvError> {
        match op {
            KvOp::Entry(key) => Ok(KvAnswer::Entry(self.live(key, now).map(|e| KvEntry {
                value: e.value.clone(),
                revision: e.revision,
            }))),
            KvOp::Create(key, value) => {
                if self.live(key, now).is_some() {
                    return Err(KvError("key exists".into()));
                }
                Ok(KvAnswer::Revision(self.write(key, value.clone(), now, lag)))
            }
            KvOp::Update(key, value, revision) => match self.live(key, now) {
                Some(e) if e.revision == *revision => {
                    Ok(KvAnswer::Revision(self.write(key, value.clone(), now, lag)))
                }
                Some(e) => Err(KvError(format!(
                    "wrong last sequence: {} (expected {revision})",
                    e.revision
                ))),
                None => Err(KvError(format!(
                    "wrong last sequence: 0 (expected {revision})"
                ))),
            },
        }
    }
}

enum KvOp {
    Entry(String),
    Create(String, Bytes),
    Update(String, Bytes, u64),
}

enum KvAnswer {
    Entry(Option<KvEntry>),
    Revision(u64),
}

/// A small generator (splitmix64), seeded from the simulation.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let (low, high) = (low.as_nanos() as u64, high.as_nanos() as u64);
        Duration::from_nanos(low + self.next() % (high - low).max(1))
    }
}

/// Runs the world's futures as simulation tasks (`ctx.pipe`).
struct Spawner;
impl Actor for Spawner {}

struct Run(Pin<Box<dyn Future<Output = ()> + Send>>);
impl Message for Run {
    type Reply = ();
}
impl Handler<Run> for Spawner {
    fn handle(&mut self, m: Run, ctx: &mut Context<Self>) {
        ctx.pipe(m.0, |()| Ran);
    }
}
struct Ran;
impl Message for Ran {
    type Reply = ();
}
impl Handler<Ran> for Spawner {
    fn handle(&mut self, _: Ran, _: &mut Context<Self>) {}
}

/// A future of one incarnation of a process: dropped at its first poll after the
/// incarnation ended.
struct Guarded<F> {
    link: SimulatedLink,
    future: Pin<Box<F>>,
}

impl<F: Future<Output = ()>> Future for Guarded<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if !self.link.alive() {
            return Poll::Ready(());
        }
        self.future.as_mut().poll(cx)
    }
}

/// One delivery's fate.
enum Fate {
    Lost,
    /// Arrives after this delay (once or twice).
    Delayed(Duration, bool),
}

impl SimulatedCluster {
    /// A world on `system` (a simulation's), whose lease bucket expires entries `lease` after
    /// their last write, with this network. Panics outside a simulation.
    pub fn new(system: &System, lease: Duration, faults: NetFaults) -> Self {
        let seed = troupe::sim::random().expect("a SimulatedCluster runs inside a simulation");
        let spawner = system.spawn(Spawner);
        SimulatedCluster {
            world: Arc::new(World {
                system: system.clone(),
                spawner,
                market: Arc::new(Market::seed()),
                lease,
                origin: system.now(),
                state: Mutex::new(State {
                    rng: Rng(seed),
                    faults,
                    processes: Vec::new(),
                    exports: BTreeMap::new(),
                    links: BTreeMap::new(),
                    leases: Bucket::new(Some(lease)),
                    syncs: Bucket::new(None),
                    logs: BTreeMap::new(),
                    acks: BTreeMap::new(),
                    violations: Vec::new(),
                    counters: Counters::default(),
                }),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.world.state()
    }

    fn now(&self) -> Instant {
        self.world.system.now()
    }

    /// The market the nodes serve.
    pub fn market(&self) -> &Arc<Market> {
        &self.world.market
    }

    /// Sets the network's behaviour from now on.
    pub fn set_faults(&self, faults: NetFaults) {
        self.state().faults = faults;
    }

    fn process(&self, name: &str, pair: Option<usize>) -> usize {
        let mut state = self.state();
        if let Some(i) = state.processes.iter().position(|p| p.name == name) {
            return i;
        }
        state.processes.push(Process {
            name: name.to_string(),
            pair,
            incarnation: 0,
            alive: false,
            paused_until: None,
            net_cut_until: None,
            kv_cut_until: None,
            stop: Vec::new(),
            exited: false,
        });
        state.processes.len() - 1
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.state().processes.iter().position(|p| p.name == name)
    }

    /// A new incarnation of the process `name` (made if new): its link into the world.
    fn incarnate(&self, name: &str, pair: Option<usize>) -> SimulatedLink {
        let index = self.process(name, pair);
        let mut state = self.state();
        let process = &mut state.processes[index];
        process.incarnation += 1;
        process.alive = true;
        process.exited = false;
        process.paused_until = None;
        let incarnation = process.incarnation;
        drop(state);
        SimulatedLink::new(self.world.clone(), index, incarnation)
    }

    /// A client process's link (a client never fails here): for `DistClient::over` and
    /// `node_state`.
    pub fn client(&self, name: &str) -> SimulatedLink {
        match self.index(name) {
            Some(i) if self.state().processes[i].alive => {
                let incarnation = self.state().processes[i].incarnation;
                SimulatedLink::new(self.world.clone(), i, incarnation)
            }
            _ => self.incarnate(name, None),
        }
    }

    /// Starts (or starts again) the node `name` of `pair` from its log: a new incarnation.
    /// Does nothing if it runs already.
    pub fn start_node(&self, name: &str, pair: usize) -> Result<(), NodeError> {
        if self.is_running(name) {
            return Ok(());
        }
        let link = self.incarnate(name, Some(pair));
        let history = self.history(name);
        self.world.trace(format_args!(
            "start {name} with {} orders in its log",
            history.len()
        ));
        let dist::NodeActors { engine, receiver } = dist::spawn_node(
            &link,
            &self.world.system,
            self.world.market.clone(),
            NodeSetup {
                pair,
                name: name.to_string(),
                lease: self.world.lease,
                history,
                log: Box::new(SimulatedLog { link: link.clone() }),
            },
        )?;
        let mut state = self.state();
        let process = &mut state.processes[link.process];
        process.stop.push(Box::new(move || engine.stop()));
        process.stop.push(Box::new(move || receiver.stop()));
        Ok(())
    }

    /// True if the process `name` runs.
    pub fn is_running(&self, name: &str) -> bool {
        self.index(name)
            .is_some_and(|i| self.state().processes[i].alive)
    }

    /// True if the node ended by itself (its `exit`) and has not been started again.
    pub fn has_exited(&self, name: &str) -> bool {
        self.index(name)
            .is_some_and(|i| self.state().processes[i].exited)
    }

    /// Kills the process `name` (SIGKILL): see the module note. False if it was not running.
    pub fn kill(&self, name: &str) -> bool {
        self.world.trace(format_args!("kill {name}"));
        match self.index(name) {
            Some(i) => self.world.end(i, None),
            None => false,
        }
    }

    /// Freezes the process `name` for `d` (SIGSTOP, then SIGCONT).
    pub fn pause(&self, name: &str, d: Duration) {
        self.world.trace(format_args!("pause {name} for {d:?}"));
        let until = self.now() + d;
        if let Some(i) = self.index(name) {
            let process = &mut self.state().processes[i];
            process.paused_until = Some(process.paused_until.map_or(until, |t| t.max(until)));
        }
    }

    /// Cuts the process `name` off for `d`: from the other processes (`network`), from the
    /// key-value store (`store`), or both.
    pub fn cut(&self, name: &str, d: Duration, network: bool, store: bool) {
        self.world.trace(format_args!(
            "cut {name} off for {d:?} (network: {network}, store: {store})"
        ));
        let until = self.now() + d;
        if let Some(i) = self.index(name) {
            let process = &mut self.state().processes[i];
            if network {
                process.net_cut_until = Some(until);
            }
            if store {
                process.kv_cut_until = Some(until);
            }
        }
    }

    /// Ends every pause and cut now.
    pub fn mend(&self) {
        let now = self.now();
        for process in &mut self.state().processes {
            for until in [
                &mut process.paused_until,
                &mut process.net_cut_until,
                &mut process.kv_cut_until,
            ] {
                if until.is_some_and(|t| t > now) {
                    *until = Some(now);
                }
            }
        }
    }

    /// The orders in the log of node `name` (what it starts from).
    pub fn history(&self, name: &str) -> Vec<Order> {
        self.state().logs.get(name).cloned().unwrap_or_default()
    }

    /// The sync record of `pair`: (primary, standby, epoch), as the store holds it now.
    pub fn sync_record(&self, pair: usize) -> Option<(String, Option<String>, u64)> {
        let now = self.now();
        let mut state = self.state();
        let entry = state.syncs.live(&pair_key(pair), now)?;
        let sync: dist::InSync = serde_json::from_slice(&entry.value).ok()?;
        Some((sync.primary, sync.standby, sync.epoch))
    }

    /// The holder of `pair`'s lease in the store now.
    pub fn lease_holder(&self, pair: usize) -> Option<String> {
        let now = self.now();
        let mut state = self.state();
        let entry = state.leases.live(&pair_key(pair), now)?;
        Some(String::from_utf8_lossy(&entry.value).into_owned())
    }

    /// Every acknowledgement the primaries made, by (pair, sequence number).
    pub fn acks(&self) -> BTreeMap<(usize, u64), AckRecord> {
        self.state().acks.clone()
    }

    /// What the invariant checks made at each event found wrong (empty if nothing).
    pub fn violations(&self) -> Vec<String> {
        self.state().violations.clone()
    }

    /// What the network and the nodes did so far.
    pub fn counters(&self) -> Counters {
        self.state().counters.clone()
    }

    /// A number from the world's generator (seeded by the simulation).
    pub fn random(&self) -> u64 {
        self.state().rng.next()
    }
}

impl World {
    fn alive(&self, process: usize, incarnation: u64) -> bool {
        let state = self.state();
        let p = &state.processes[process];
        p.alive && p.incarnation == incarnation
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        let _ = self.spawner.tell(Run(Box::pin(future)));
    }

    /// Ends the incarnation of process `index` (of `incarnation` if given): a kill or an
    /// exit. False if it was not running.
    fn end(&self, index: usize, incarnation: Option<u64>) -> bool {
        let stop = {
            let mut state = self.state();
            let process = &mut state.processes[index];
            if !process.alive || incarnation.is_some_and(|i| i != process.incarnation) {
                return false;
            }
            process.alive = false;
            process.paused_until = None;
            let stop = std::mem::take(&mut process.stop);
            for entries in state.exports.values_mut() {
                entries.retain(|e| e.process != index);
            }
            stop
        };
        for stop in stop {
            stop();
        }
        true
    }

    /// The fate of one copy sent now on the link `(from, to, name)`: lost, or its delay to
    /// arrival, keeping the link's order. Pauses hold a copy until they end; cuts lose it.
    fn route(
        &self,
        state: &mut State,
        from: usize,
        to: usize,
        name: &Arc<str>,
        store: bool,
    ) -> Fate {
        let now = self.system.now();
        state.counters.messages += 1;
        let depart = match state.processes.get(from) {
            Some(p) => p.paused(now).unwrap_or(now),
            None => now, // the store
        };
        let cut = |p: &Process, at: Instant| {
            if store {
                p.kv_cut_until.is_some_and(|t| t > at)
            } else {
                p.net_cut_until.is_some_and(|t| t > at)
            }
        };
        let cut_off = state.processes.get(from).is_some_and(|p| cut(p, depart));
        if cut_off || state.rng.chance(state.faults.drop) {
            state.counters.lost += 1;
            return Fate::Lost;
        }
        let faults = &state.faults;
        let (low, high, slow_chance, slow, duplicate) = (
            faults.delay.0,
            faults.delay.1,
            faults.slow_chance,
            faults.slow,
            faults.duplicate,
        );
        let mut delay = state.rng.between(low, high);
        if state.rng.chance(slow_chance) {
            delay += state.rng.between(Duration::ZERO, slow);
        }
        let mut at = depart + delay;
        let link = (from, to, name.clone());
        if let Some(&last) = state.links.get(&link) {
            at = at.max(last);
        }
        state.links.insert(link, at);
        let twice = state.rng.chance(duplicate);
        if twice {
            state.counters.duplicated += 1;
        }
        Fate::Delayed(at - now, twice)
    }

    /// On arrival at process `to` (of `incarnation`): waits out its pause; false if the copy
    /// is lost there (ended, or cut off).
    async fn arrive(&self, to: usize, incarnation: u64, store: bool) -> bool {
        loop {
            let now = self.system.now();
            let pause = {
                let state = self.state();
                let p = &state.processes[to];
                if !p.alive || p.incarnation != incarnation {
                    return false;
                }
                if (!store && p.net_cut(now)) || (store && p.kv_cut(now)) {
                    drop(state);
                    self.state().counters.lost += 1;
                    return false;
                }
                p.paused(now)
            };
            match pause {
                Some(until) => tokio::time::sleep(until - now).await,
                None => return true,
            }
        }
    }

    fn observe(&self, process: usize, event: NodeEvent<'_>) {
        let now = self.system.now();
        let mut state = self.state();
        let Some(pair) = state.processes[process].pair else {
            return;
        };
        match event {
            NodeEvent::Primary { node, epoch, .. } => {
                state.counters.primaries += 1;
                // It holds every order acknowledged so far, each at its sequence number.
                let log = state.logs.get(node).map(Vec::as_slice).unwrap_or_default();
                let mut lost = Vec::new();
                for ((_, seq), a) in state.acks.range((pair, 0)..=(pair, u64::MAX)) {
                    let held = log
                        .get(*seq as usize - 1)
                        .map(|o| (o.client().0, o.client_order_id()));
                    if held != Some(a.key) {
                        lost.push(format!(
                            "lost: {node} became primary of pair {pair} at epoch {epoch} \
                             holding {held:?} at seq {seq}, where {:?} was acknowledged by {} \
                             (epoch {})",
                            a.key, a.node, a.epoch
                        ));
                    }
                }
                state.violations.extend(lost);
            }
            NodeEvent::CutBack { node, keep, cut } => {
                state.counters.cut_backs += 1;
                state.counters.orders_cut += cut;
                // A cut starts where the node's history leaves the acknowledged one: if its
                // first `keep + 1` orders are each the one acknowledged at its place (where
                // one is, and one is at `keep + 1`), the cut drops an acknowledged order.
                let log = state.logs.get(node).map(Vec::as_slice).unwrap_or_default();
                let key = |o: &Order| (o.client().0, o.client_order_id());
                let acked_at = |seq: u64| state.acks.get(&(pair, seq)).map(|a| a.key);
                let mut wrong = Vec::new();
                if let Some(first) = log.get(keep as usize) {
                    let seq = keep + 1;
                    let same_before = log[..keep as usize]
                        .iter()
                        .enumerate()
                        .all(|(i, o)| acked_at(i as u64 + 1).is_none_or(|k| k == key(o)));
                    if same_before && acked_at(seq) == Some(key(first)) {
                        wrong.push(format!(
                            "lost: {node} cut back to {keep} orders, dropping {:?}, \
                             acknowledged at seq {seq} of pair {pair} after the same orders",
                            key(first)
                        ));
                    }
                }
                state.violations.extend(wrong);
            }
            NodeEvent::Acked {
                node,
                epoch,
                seq,
                key,
            } => {
                state.counters.acks += 1;
                let holder = state
                    .leases
                    .live(&pair_key(pair), now)
                    .map(|e| String::from_utf8_lossy(&e.value).into_owned());
                if holder.as_deref() != Some(node) {
                    let v = format!(
                        "two primaries: {node} acknowledged seq {seq} of pair {pair} at epoch \
                         {epoch} while the store's lease was held by {holder:?}"
                    );
                    state.violations.push(v);
                }
                match state.acks.get(&(pair, seq)) {
                    Some(a) if a.key != key => {
                        let v = format!(
                            "two primaries: seq {seq} of pair {pair} acknowledged for {:?} by \
                             {} (epoch {}) and for {key:?} by {node} (epoch {epoch})",
                            a.key, a.node, a.epoch
                        );
                        state.violations.push(v);
                    }
                    _ => {
                        let record = AckRecord {
                            key,
                            epoch,
                            node: node.to_string(),
                        };
                        state.acks.insert((pair, seq), record);
                    }
                }
            }
        }
    }
}

/// One process incarnation's link into the world: what a node (or a client) sees of the
/// cluster. Implements [`Cluster`].
#[derive(Clone)]
pub struct SimulatedLink {
    world: Arc<World>,
    process: usize,
    incarnation: u64,
    buckets: Arc<[SimulatedBucket; 2]>,
}

impl SimulatedLink {
    fn new(world: Arc<World>, process: usize, incarnation: u64) -> Self {
        let bucket = |lease| SimulatedBucket {
            world: world.clone(),
            process,
            incarnation,
            lease,
        };
        let buckets = Arc::new([bucket(true), bucket(false)]);
        SimulatedLink {
            world,
            process,
            incarnation,
            buckets,
        }
    }

    fn alive(&self) -> bool {
        self.world.alive(self.process, self.incarnation)
    }
}

/// A bucket as one process incarnation reaches it. Implements [`KeyValue`].
#[derive(Clone)]
pub struct SimulatedBucket {
    world: Arc<World>,
    process: usize,
    incarnation: u64,
    lease: bool,
}

impl SimulatedBucket {
    /// Sends a key-value request to the store and waits for its answer (see the module note).
    async fn request(&self, op: KvOp) -> Result<KvAnswer, KvError> {
        let world = self.world.clone();
        let (tx, rx) = oneshot::channel();
        let lease = self.lease;
        let store: Arc<str> = Arc::from(if lease { "kv.lease" } else { "kv.sync" });
        let (fate, lag) = {
            let mut state = world.state();
            // The store is process `STORE` on its links.
            let fate = world.route(&mut state, self.process, STORE, &store, true);
            let lag = state.rng.between(Duration::ZERO, Duration::from_millis(50));
            (fate, lag)
        };
        if let Fate::Delayed(delay, _) = fate {
            let (process, incarnation) = (self.process, self.incarnation);
            let me = world.clone();
            world.spawn(async move {
                tokio::time::sleep(delay).await;
                let now = me.system.now();
                let (answer, back) = {
                    let mut state = me.state();
                    let bucket = if lease {
                        &mut state.leases
                    } else {
                        &mut state.syncs
                    };
                    let answer = bucket.apply(&op, now, lag);
                    // The way back.
                    let back = me.route(&mut state, STORE, process, &store, true);
                    (answer, back)
                };
                let Fate::Delayed(delay, _) = back else {
                    return;
                };
                tokio::time::sleep(delay).await;
                if me.arrive(process, incarnation, true).await {
                    let _ = tx.send(answer);
                }
            });
        }
        let deadline = tokio::time::Instant::now() + KV_TIMEOUT;
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(answer)) => answer,
            _ => {
                tokio::time::sleep_until(deadline).await;
                Err(KvError("timed out".into()))
            }
        }
    }
}

impl KeyValue for SimulatedBucket {
    async fn entry(&self, key: &str) -> Result<Option<KvEntry>, KvError> {
        match self.request(KvOp::Entry(key.to_string())).await? {
            KvAnswer::Entry(entry) => Ok(entry),
            KvAnswer::Revision(_) => Err(KvError("a revision for a read".into())),
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<u64, KvError> {
        match self.request(KvOp::Create(key.to_string(), value)).await? {
            KvAnswer::Revision(revision) => Ok(revision),
            KvAnswer::Entry(_) => Err(KvError("an entry for a write".into())),
        }
    }

    async fn update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, KvError> {
        match self
            .request(KvOp::Update(key.to_string(), value, revision))
            .await?
        {
            KvAnswer::Revision(revision) => Ok(revision),
            KvAnswer::Entry(_) => Err(KvError("an entry for a write".into())),
        }
    }
}

/// The store's end of its links.
const STORE: usize = usize::MAX;

impl Network for SimulatedLink {
    type Peer<M: Wire> = SimulatedPeer<M>;
    type Export<A: Actor> = SimulatedExport<A>;

    fn recipient<M: Wire>(&self, name: &str) -> Result<SimulatedPeer<M>, RemoteError> {
        Ok(SimulatedPeer {
            link: self.clone(),
            name: Arc::from(name),
            _message: PhantomData,
        })
    }

    fn export<A: Actor>(&self, name: &str, addr: Addr<A>) -> SimulatedExport<A> {
        SimulatedExport {
            link: self.clone(),
            name: name.to_string(),
            addr,
            group: None,
            routes: Vec::new(),
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if !self.alive() {
            return;
        }
        self.world.spawn(Guarded {
            link: self.clone(),
            future: Box::pin(task),
        });
    }

    fn now(&self) -> Instant {
        self.world.system.now()
    }
}

impl Cluster for SimulatedLink {
    type Bucket = SimulatedBucket;

    fn leases(&self) -> &SimulatedBucket {
        &self.buckets[0]
    }

    fn syncs(&self) -> &SimulatedBucket {
        &self.buckets[1]
    }

    fn exit(&self, code: i32, why: &str) {
        self.world.trace(format_args!("exit {code}: {why}"));
        if self.world.end(self.process, Some(self.incarnation)) {
            let mut state = self.world.state();
            state.processes[self.process].exited = true;
            state.counters.exits += 1;
        }
    }

    fn observe(&self, event: NodeEvent<'_>) {
        if self.alive() {
            self.world.trace(format_args!("{event:?}"));
            self.world.observe(self.process, event);
        }
    }
}

/// A typed address of the actors exported under a name, over the simulated network.
pub struct SimulatedPeer<M> {
    link: SimulatedLink,
    name: Arc<str>,
    _message: PhantomData<fn(M)>,
}

impl<M> Clone for SimulatedPeer<M> {
    fn clone(&self) -> Self {
        SimulatedPeer {
            link: self.link.clone(),
            name: self.name.clone(),
            _message: PhantomData,
        }
    }
}

/// Where the first reply to an ask goes (later copies find it taken).
type ReplySlot<R> = Arc<Mutex<Option<oneshot::Sender<Result<R, RemoteError>>>>>;

impl<M: Wire> Peer<M> for SimulatedPeer<M> {
    fn ask(
        &self,
        msg: M,
        timeout: Duration,
    ) -> impl Future<Output = Result<M::Reply, RemoteError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let slot: ReplySlot<M::Reply> = Arc::new(Mutex::new(Some(tx)));
        let world = self.link.world.clone();
        let from = (self.link.process, self.link.incarnation);
        let name = self.name.clone();
        if self.link.alive() {
            // Routed now, as the server routes a message when it arrives: to every export of
            // the name, or one member of a queue group.
            let deliveries: Vec<(usize, u64, Arc<Routes>, Fate)> = {
                let mut state = world.state();
                let targets: Vec<(usize, u64, Option<String>, Arc<Routes>)> = state
                    .exports
                    .get(&*name)
                    .map(|entries| {
                        entries
                            .iter()
                            .map(|e| (e.process, e.incarnation, e.group.clone(), e.routes.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                let grouped: Vec<_> = targets.iter().filter(|t| t.2.is_some()).collect();
                let chosen: Vec<(usize, u64, Arc<Routes>)> = if grouped.is_empty() {
                    targets.iter().map(|t| (t.0, t.1, t.3.clone())).collect()
                } else {
                    let pick = grouped[(state.rng.next() % grouped.len() as u64) as usize];
                    vec![(pick.0, pick.1, pick.3.clone())]
                };
                chosen
                    .into_iter()
                    .map(|(to, incarnation, routes)| {
                        let fate = world.route(&mut state, from.0, to, &name, false);
                        (to, incarnation, routes, fate)
                    })
                    .collect()
            };
            for (to, incarnation, routes, fate) in deliveries {
                let Fate::Delayed(delay, twice) = fate else {
                    continue;
                };
                let copies = if twice { 2 } else { 1 };
                for copy in 0..copies {
                    let world = world.clone();
                    let routes = routes.clone();
                    let slot = slot.clone();
                    let name = name.clone();
                    let msg = msg.clone();
                    let delay = delay + Duration::from_micros(copy);
                    world.clone().spawn(async move {
                        tokio::time::sleep(delay).await;
                        if !world.arrive(to, incarnation, false).await {
                            return;
                        }
                        let Some(recipient) = routes
                            .iter()
                            .find(|(t, _)| *t == TypeId::of::<M>())
                            .and_then(|(_, r)| r.downcast_ref::<Recipient<M>>())
                            .cloned()
                        else {
                            return;
                        };
                        let answer = recipient.ask(msg).await;
                        let answer = match answer {
                            Ok(reply) => Ok(reply),
                            // An actor of an ended process sends nothing.
                            Err(_) if !world.alive(to, incarnation) => return,
                            Err(e) => Err(RemoteError::Actor(e)),
                        };
                        let back = {
                            let mut state = world.state();
                            world.route(&mut state, to, from.0, &name, false)
                        };
                        let Fate::Delayed(delay, _) = back else {
                            return;
                        };
                        tokio::time::sleep(delay).await;
                        if world.arrive(from.0, from.1, false).await {
                            if let Some(tx) = slot.lock().unwrap_or_else(|p| p.into_inner()).take()
                            {
                                let _ = tx.send(answer);
                            }
                        }
                    });
                }
            }
        }
        drop(slot);
        async move {
            let deadline = tokio::time::Instant::now() + timeout;
            match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(answer)) => answer,
                _ => {
                    tokio::time::sleep_until(deadline).await;
                    let exported = world
                        .state()
                        .exports
                        .get(&*name)
                        .is_some_and(|e| !e.is_empty());
                    if exported {
                        Err(RemoteError::TimedOut(timeout))
                    } else {
                        Err(RemoteError::Unreachable(name.to_string()))
                    }
                }
            }
        }
    }
}

/// An export being built on the simulated network.
pub struct SimulatedExport<A: Actor> {
    link: SimulatedLink,
    name: String,
    addr: Addr<A>,
    group: Option<String>,
    routes: Routes,
}

impl<A: Actor> Export<A> for SimulatedExport<A> {
    fn accept<M: Wire, K: Kind>(mut self) -> Self
    where
        A: Accepts<M, K>,
    {
        self.routes
            .push((TypeId::of::<M>(), Box::new(self.addr.recipient::<M, K>())));
        self
    }

    fn in_group(mut self, group: &str) -> Self {
        self.group = Some(group.to_string());
        self
    }

    fn start(self) -> Result<(), RemoteError> {
        if !self.link.alive() {
            return Err(RemoteError::Closed);
        }
        let mut state = self.link.world.state();
        state
            .exports
            .entry(self.name)
            .or_default()
            .push(ExportEntry {
                process: self.link.process,
                incarnation: self.link.incarnation,
                group: self.group,
                routes: Arc::new(self.routes),
            });
        Ok(())
    }
}

/// A node's log in the simulated world: kept by name, so it outlives the node's process;
/// written only while the process that writes it lives.
struct SimulatedLog {
    link: SimulatedLink,
}

impl SimulatedLog {
    /// Runs `f` on the log, while the process that writes it lives.
    fn with<R>(&self, f: impl FnOnce(&mut Vec<Order>) -> R) -> Result<R, String> {
        let mut state = self.link.world.state();
        let p = &state.processes[self.link.process];
        if !p.alive || p.incarnation != self.link.incarnation {
            return Err("the process has ended".into());
        }
        let name = p.name.clone();
        Ok(f(state.logs.entry(name).or_default()))
    }
}

impl OrderLog for SimulatedLog {
    fn append(&mut self, order: &Order) -> Result<(), String> {
        self.with(|log| log.push(*order))
    }

    fn cut_back(&mut self, keep: u64) -> Result<(), String> {
        self.with(|log| {
            if keep as usize > log.len() {
                return Err(format!(
                    "a cut to {keep} orders, past the end ({})",
                    log.len()
                ));
            }
            log.truncate(keep as usize);
            Ok(())
        })?
    }
}
