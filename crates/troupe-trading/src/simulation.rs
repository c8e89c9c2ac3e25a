//! The exchange verified in deterministic simulation (`troupe::sim`): the whole system in one
//! process, on one thread, every choice of the runtime and every fault drawn from a seed, time
//! simulated, and the run replayed exactly from its seed.
//!
//! # The world
//! - **The exchange**, as in production (receivers, engine pairs, recovery from the logs),
//!   with its logs on a [`SimDisk`] (for the `buffered` and `fsync` modes).
//! - **Clients** (actors of their own, outside the exchange), each placing its orders one at a
//!   time, as the seed's clients do, and resending an order until it is acknowledged: after
//!   `EngineUnavailable`, after a send that failed, and when the exchange it sent to died.
//!   A resend keeps the client order id, so the books recognise it; a resend of an order the
//!   exchange already holds is answered `DuplicateClientOrderId`, which tells the client its
//!   order is in (as in the distributed mode).
//! - **A supervisor**: this module's harness plays the process supervisor a real deployment
//!   has. In one process, an engine that ends (a crash, a stop, a failed log) leaves its books
//!   without an engine: the harness waits [`GRACE`] (so that every order the failed exchange
//!   holds gets its answer, or is seen unanswered), then ends the process and starts it again
//!   from its logs. It also kills the process now and then on its own: `kill -9`
//!   ([`Crash::Process`]: what was written survives) or, in `fsync` mode, a power cut
//!   ([`Crash::Machine`]: only what was flushed surely survives; the rest may be torn). A
//!   start that fails on an injected disk fault is retried as a new process.
//! - **Faults** ([`faults`]): engines crash (as if a handler panicked), stop, and stall; the
//!   disk's fault points fire (failed and torn writes, failed and slow flushes; see
//!   `sim_disk.rs`). After the fault phase the harness heals the system (`Simulation::heal`).
//!
//! # What every run checks
//! 1. **Durable when acknowledged**: at each acknowledgement (`Accepted`, and a
//!    `DuplicateClientOrderId` that answers a resend), the order's record is in the logs the
//!    style promises (request-reply: both engines' logs; one-way: the log of the engine that
//!    acknowledges; a duplicate answer: the primary's, and in request-reply the standby's
//!    too), flushed in `fsync` mode, written in `buffered` mode. Checked on the disk, as the
//!    acknowledgement is sent.
//! 2. **No hang**: every attempt is answered while the exchange it went to lives: a client
//!    that waits [`HANG`] of simulated time for an answer from a living exchange fails the run.
//!    Within one exchange, each attempt is answered exactly once for the pair (request-reply:
//!    by the primary with fsync, by the standby without, or by the primary if it refused the
//!    order; one-way: once by the primary and, for an order the primary accepted, once by the
//!    standby), never twice.
//! 3. **Only expected answers**: a valid order is only ever accepted, refused with
//!    `EngineUnavailable`, or (on a resend) reported a duplicate; all acceptances of one order
//!    report the same fill.
//! 4. **Liveness**: after the heal, every client finishes within [`Scenario::converge_within`]
//!    of simulated time.
//! 5. **Equal replicas**: primary and standby of every pair end with equal applied counts,
//!    state hashes and sets of accepted keys.
//! 6. **Every acknowledged order survives recovery** (log modes): the process is killed one
//!    last time (a power cut in `fsync` mode, `kill -9` in `buffered` mode) and started again
//!    from its logs: each pair recovers the state it had, every acknowledged order is in the
//!    recovered history, no order is in it twice, and each acceptance's fill is the fill the
//!    history gives that order.
//!
//! Acks carry no sequence number in this mode, so "at the sequence number its ack gave" is not
//! checkable here (the distributed mode's test checks it).
//!
//! [`run`] runs one seed of a [`Scenario`] inside a simulation (the tests hand it to
//! `troupe::sim::Explore`); [`run_seed`] builds the simulation itself, for the benchmark
//! program.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use troupe::sim::{Faults, Simulation, Strategy};
use troupe::{Actor, Addr, Context, Handler, Message, TimerId};

use crate::engine::{Engine, Style};
use crate::exchange::{Exchange, ExchangeConfig, PairState, StartError};
use crate::log::{Journal, LogError, LogMode, Place};
use crate::market::Market;
use crate::order::{
    Ack, ClientId, InstrumentId, NewOrder, OrderKey, Outcome, RejectReason, Role, Side,
};
use crate::receiver::{Receiver, Submit};
use crate::session::AckSink;
use crate::shard::Shard;
use crate::sim_disk::{Crash, DiskCounters, Held, SimDisk};

/// How long a client waits for an answer from a living exchange before the run fails (a hang).
pub const HANG: Duration = Duration::from_secs(10);

/// How long an exchange with an engine that ended lives on before the supervisor restarts it:
/// longer than [`HANG`], so that an order it never answers is seen.
pub const GRACE: Duration = Duration::from_secs(11);

/// The faults the simulation tests inject: engines crash, stop and stall (at most half a
/// second at a time), and the fault points of the simulated disk fire.
pub fn faults() -> Faults {
    Faults::all()
        .target::<Engine>()
        .max_stall(Duration::from_millis(500))
}

/// What one simulated run does.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Request-reply or one-way.
    pub style: Style,
    /// The log mode (`buffered` and `fsync` logs live on a [`SimDisk`]).
    pub log: LogMode,
    /// Clients placing orders.
    pub clients: usize,
    /// Orders each client places, one at a time.
    pub orders_per_client: usize,
    /// At most this many process kills the supervisor makes on its own in the fault phase.
    pub max_kills: u32,
    /// Simulated time during which faults are injected (it ends sooner if every client is
    /// done).
    pub fault_phase: Duration,
    /// Simulated time after the heal within which every client must be done.
    pub converge_within: Duration,
}

impl Scenario {
    /// Three clients of twelve orders each, up to two kills in a two-second fault phase, a
    /// minute to converge.
    pub fn new(style: Style, log: LogMode) -> Scenario {
        Scenario {
            style,
            log,
            clients: 3,
            orders_per_client: 12,
            max_kills: 2,
            fault_phase: Duration::from_secs(2),
            converge_within: Duration::from_secs(60),
        }
    }

    /// The scenario of a seed in [`run_seed`]: style and log mode taken from the seed.
    pub fn of_seed(seed: u64) -> Scenario {
        let style = if seed.is_multiple_of(2) {
            Style::RequestReply
        } else {
            Style::OneWay
        };
        let log = [LogMode::Fsync, LogMode::Buffered, LogMode::None][(seed / 2 % 3) as usize];
        Scenario::new(style, log)
    }
}

/// What one simulated run did (it passed every check: a failed check panics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Steps the simulation took (turns, polls, timers).
    pub steps: u64,
    /// Orders the clients placed (each acknowledged in the end).
    pub orders_acked: u64,
    /// Sends, resends included.
    pub attempts: u64,
    /// `EngineUnavailable` answers the clients received.
    pub refusals: u64,
    /// Starts of the exchange: the first, every restart and the final recovery, and the
    /// starts that met an injected disk fault and were tried again.
    pub starts: u32,
    /// Faults the simulation injected into actors and fault points.
    pub faults_injected: u32,
    /// Simulated time the run lasted.
    pub simulated_time: Duration,
    /// What the simulated disk did (zero without logs).
    pub disk: DiskCounters,
}

/// Runs one seed of the trading model: the [`Scenario::of_seed`] of `seed`, all [`faults`],
/// random scheduling for seeds 0-5, 12-17, 24-29... and PCT (depth 3) for 6-11, 18-23...
/// (so each configuration meets both). Panics, naming the seed, if a check fails. For the
/// benchmark program (`troupe-bench sim`), which counts seeds per minute.
///
/// ```
/// let outcome = troupe_trading::simulation::run_seed(3);
/// assert_eq!(outcome.orders_acked, 36);
/// assert!(outcome.simulated_time > std::time::Duration::ZERO);
/// ```
pub fn run_seed(seed: u64) -> SeedOutcome {
    let strategy = if (seed / 6).is_multiple_of(2) {
        Strategy::Random
    } else {
        Strategy::Pct { depth: 3 }
    };
    let mut sim = Simulation::builder()
        .seed(seed)
        .strategy(strategy)
        .faults(faults())
        .max_steps(2_000_000)
        .build()
        .expect("a simulation builds");
    let outcome = run(&sim, &Scenario::of_seed(seed));
    sim.shutdown();
    outcome
}

/// Runs `scenario` in `sim` and checks everything the module note lists; panics with what
/// failed. Returns what the run did.
pub fn run(sim: &Simulation, scenario: &Scenario) -> SeedOutcome {
    let mut world = World::new(sim, scenario.clone());
    world.start();
    world.fault_phase();
    sim.heal();
    world.converge();
    world.verify();
    let ledger = world.ledger();
    SeedOutcome {
        seed: sim.seed(),
        steps: sim.steps(),
        orders_acked: ledger.acked.len() as u64,
        attempts: ledger.attempts,
        refusals: ledger.refusals,
        starts: world.starts,
        faults_injected: sim.faults_injected(),
        simulated_time: sim.elapsed(),
        disk: world
            .disk
            .as_ref()
            .map(SimDisk::counters)
            .unwrap_or_default(),
    }
}

/// How an order was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Acked {
    Accepted { filled: u32 },
    Duplicate,
}

/// An acknowledgement, and the process that gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AckedBy {
    how: Acked,
    process: u64,
}

/// What the clients and the harness share: the orders, the acknowledgements, the failures.
#[derive(Debug)]
struct Ledger {
    style: Style,
    /// No log: each start of the exchange begins empty.
    forgets: bool,
    market: Arc<Market>,
    plans: Vec<Vec<NewOrder>>,
    acked: BTreeMap<OrderKey, AckedBy>,
    done: Vec<bool>,
    violations: Vec<String>,
    attempts: u64,
    refusals: u64,
}

type Shared = Arc<Mutex<Ledger>>;

fn lock(ledger: &Shared) -> MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ledger {
    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }

    fn order(&self, client: ClientId, client_order_id: u64) -> Option<&NewOrder> {
        let plan = self.plans.get(client.0 as usize)?;
        plan.get((client_order_id as usize).checked_sub(1)?)
    }
}

/// One start of the exchange: a process.
struct Process {
    exchange: Exchange,
    incarnation: u64,
    alive: Arc<AtomicBool>,
}

/// The harness: the exchange's process, its disk, the clients. See the module note.
struct World<'a> {
    sim: &'a Simulation,
    scenario: Scenario,
    config: ExchangeConfig,
    disk: Option<SimDisk>,
    ledger: Shared,
    clients: Vec<Addr<SimClient>>,
    process: Option<Process>,
    starts: u32,
}

impl<'a> World<'a> {
    fn new(sim: &'a Simulation, scenario: Scenario) -> Self {
        let system = sim.system();
        let market = Arc::new(Market::seed());
        let disk = (scenario.log != LogMode::None).then(|| SimDisk::new(system));
        let config = ExchangeConfig {
            market: (*market).clone(),
            receivers: 2,
            style: scenario.style,
            log: scenario.log,
            disk: disk.clone(),
            max_sessions: scenario.clients,
            ..ExchangeConfig::seed()
        };
        let plans: Vec<Vec<NewOrder>> = (0..scenario.clients)
            .map(|c| plan(sim, ClientId(c as u32), scenario.orders_per_client))
            .collect();
        let ledger = Arc::new(Mutex::new(Ledger {
            style: scenario.style,
            forgets: scenario.log == LogMode::None,
            market,
            plans: plans.clone(),
            acked: BTreeMap::new(),
            done: vec![scenario.orders_per_client == 0; scenario.clients],
            violations: Vec::new(),
            attempts: 0,
            refusals: 0,
        }));
        let clients = plans
            .into_iter()
            .enumerate()
            .map(|(index, plan)| {
                system.spawn(SimClient {
                    index,
                    style: scenario.style,
                    plan,
                    next: 0,
                    tries: 0,
                    answers: Vec::new(),
                    conn: None,
                    attempt: None,
                    attempts: 0,
                    retry_pending: false,
                    ledger: ledger.clone(),
                })
            })
            .collect();
        World {
            sim,
            scenario,
            config,
            disk,
            ledger,
            clients,
            process: None,
            starts: 0,
        }
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    /// Fails the run if a client or a sink saw a broken rule.
    fn check(&self) {
        let ledger = self.ledger();
        if let Some(first) = ledger.violations.first() {
            panic!(
                "{first}\n  ({} violations; {})",
                ledger.violations.len(),
                self.describe()
            );
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} {} log, {} starts, at {:?} of simulated time",
            self.scenario.style.name(),
            self.scenario.log.name(),
            self.starts,
            self.sim.elapsed()
        )
    }

    fn all_done(&self) -> bool {
        self.ledger().done.iter().all(|&d| d)
    }

    fn running(&self) -> bool {
        self.process
            .as_ref()
            .is_some_and(|p| p.exchange.is_running())
    }

    /// Starts the exchange from its logs, as a new process; a start that fails on an injected
    /// disk fault ends that process, and the next one tries again.
    fn start(&mut self) {
        assert!(self.process.is_none(), "one process at a time");
        let mut failures = 0;
        let exchange = loop {
            self.starts += 1;
            match Exchange::start(self.sim.system(), self.config.clone()) {
                Ok(exchange) => break exchange,
                Err(StartError::Log(LogError::Io { source, .. }))
                    if source.to_string().contains("injected fault") && failures < 100 =>
                {
                    failures += 1;
                    if let Some(disk) = &self.disk {
                        disk.crash(Crash::Process);
                    }
                    self.sim.advance(Duration::from_millis(100));
                }
                Err(error) => panic!(
                    "the exchange cannot start from its logs: {error}\n  ({})",
                    self.describe()
                ),
            }
        };
        let incarnation = u64::from(self.starts);
        let alive = Arc::new(AtomicBool::new(true));
        let check = self.disk.clone().map(|disk| Durability {
            disk,
            level: if self.scenario.log == LogMode::Fsync {
                Held::Flushed
            } else {
                Held::Written
            },
        });
        for (index, client) in self.clients.iter().enumerate() {
            let id = exchange
                .connect(Route {
                    incarnation,
                    alive: alive.clone(),
                    client: client.clone(),
                    index,
                    check: check.clone(),
                    ledger: self.ledger.clone(),
                })
                .expect("a session per client");
            assert_eq!(id, ClientId(index as u32), "clients keep their ids");
            let _ = client.tell(Connect(Conn {
                incarnation,
                receiver: exchange.receiver_for(id).clone(),
                alive: alive.clone(),
            }));
        }
        self.process = Some(Process {
            exchange,
            incarnation,
            alive,
        });
    }

    /// Ends the process: nothing it sends reaches anyone from now, its files are closed by
    /// the crash (and with a power cut lose what was not flushed), its actors stop.
    fn kill(&mut self, crash: Crash) {
        let Some(process) = self.process.take() else {
            return;
        };
        process.alive.store(false, Ordering::SeqCst);
        if let Some(disk) = &self.disk {
            disk.crash(crash);
        }
        process.exchange.shutdown();
    }

    /// The crash the supervisor's own kills make: a power cut now and then in `fsync` mode
    /// (the only mode that promises to survive one), `kill -9` otherwise.
    fn some_crash(&self) -> Crash {
        if self.scenario.log == LogMode::Fsync && self.sim.random().is_multiple_of(2) {
            Crash::Machine
        } else {
            Crash::Process
        }
    }

    /// Runs until `until`, or until something the harness acts on happens.
    fn run_until(&self, until: Instant) {
        let now = self.sim.now();
        if until <= now {
            return;
        }
        let ledger = self.ledger.clone();
        let process = self.process.as_ref();
        self.sim.run_until(
            || {
                let l = lock(&ledger);
                !l.violations.is_empty()
                    || l.done.iter().all(|&d| d)
                    || process.is_some_and(|p| !p.exchange.is_running())
            },
            until - now,
        );
    }

    /// An engine ended: the exchange lives on for [`GRACE`] (every order it holds must be
    /// answered), then the supervisor restarts it.
    fn restart_after_failure(&mut self) {
        let grace_end = self.sim.now() + GRACE;
        let ledger = self.ledger.clone();
        self.sim.run_until(
            || !lock(&ledger).violations.is_empty(),
            grace_end - self.sim.now(),
        );
        self.check();
        let crash = self.some_crash();
        self.kill(crash);
        self.start();
    }

    fn fault_phase(&mut self) {
        let end = self.sim.now() + self.scenario.fault_phase;
        let kills = self.sim.random() % (u64::from(self.scenario.max_kills) + 1);
        let mut kill_times: Vec<Instant> = (0..kills)
            .map(|_| {
                let nanos = self.scenario.fault_phase.as_nanos() as u64;
                self.sim.now() + Duration::from_nanos(self.sim.random() % nanos.max(1))
            })
            .collect();
        kill_times.sort();
        kill_times.reverse();
        loop {
            let until = kill_times.last().copied().unwrap_or(end).min(end);
            self.run_until(until);
            self.check();
            if self.all_done() {
                return;
            }
            if !self.running() {
                self.restart_after_failure();
                continue;
            }
            let now = self.sim.now();
            if kill_times.last().is_some_and(|&t| t <= now) {
                kill_times.pop();
                let crash = self.some_crash();
                self.kill(crash);
                self.sim
                    .advance(Duration::from_millis(1 + self.sim.random() % 200));
                self.start();
                continue;
            }
            if now >= end {
                return;
            }
        }
    }

    fn converge(&mut self) {
        let deadline = self.sim.now() + self.scenario.converge_within;
        loop {
            self.run_until(deadline);
            self.check();
            if self.all_done() {
                return;
            }
            if !self.running() {
                self.restart_after_failure();
                continue;
            }
            if self.sim.now() >= deadline {
                let ledger = self.ledger();
                let waiting: Vec<String> = ledger
                    .done
                    .iter()
                    .enumerate()
                    .filter(|(_, &d)| !d)
                    .map(|(c, _)| {
                        let acked = ledger
                            .acked
                            .keys()
                            .filter(|k| k.client == ClientId(c as u32))
                            .count();
                        format!("client {c} at order {}", acked + 1)
                    })
                    .collect();
                panic!(
                    "no convergence: {} of simulated time after the heal, {} still wait\n  ({})",
                    self.scenario.converge_within.as_secs(),
                    waiting.join(", "),
                    self.describe()
                );
            }
        }
    }

    fn exchange(&self) -> &Exchange {
        &self.process.as_ref().expect("the exchange runs").exchange
    }

    /// Pair states and every pair's accepted keys, checking that primary and standby agree.
    fn replicas(&self) -> (Vec<PairState>, Vec<Vec<OrderKey>>) {
        let exchange = self.exchange();
        let states = exchange.pair_states().expect("the engines answer");
        let mut keys = Vec::new();
        for (pair, state) in states.iter().enumerate() {
            let (p, s) = (state.primary, state.standby);
            assert!(
                p.applied == s.applied && p.state_hash == s.state_hash,
                "pair {pair}: primary and standby differ: {p:?} / {s:?}\n  ({})",
                self.describe()
            );
            let primary = exchange.accepted_keys(pair, Role::Primary).unwrap();
            let standby = exchange.accepted_keys(pair, Role::Standby).unwrap();
            assert_eq!(
                primary,
                standby,
                "pair {pair}: the engines hold different orders\n  ({})",
                self.describe()
            );
            keys.push(primary);
        }
        (states, keys)
    }

    /// The final checks (module note, 5 and 6).
    fn verify(&mut self) {
        // Every flush in flight completes (the device's latency), then the replicas agree. An
        // engine that ended in the fault phase without holding anyone up is restarted first, as
        // the supervisor would.
        self.sim.advance(Duration::from_secs(5));
        if !self.running() {
            self.kill(Crash::Process);
            self.start();
        }
        let (before, keys) = self.replicas();
        let held: BTreeSet<OrderKey> = keys.iter().flatten().copied().collect();
        let acked: Vec<(OrderKey, AckedBy)> =
            self.ledger().acked.iter().map(|(k, a)| (*k, *a)).collect();
        let process = self.process.as_ref().map_or(0, |p| p.incarnation);
        // Without a log, a restart forgets everything: only this process's acks are held.
        let held_now = acked
            .iter()
            .filter(|(_, a)| self.scenario.log != LogMode::None || a.process == process);
        for (key, _) in held_now {
            assert!(
                held.contains(key),
                "acknowledged order {key:?} is not in the books\n  ({})",
                self.describe()
            );
        }
        let Some(disk) = self.disk.clone() else {
            return;
        };
        // The last crash, the hardest this mode promises to survive, and a start from the logs.
        let crash = if self.scenario.log == LogMode::Fsync {
            Crash::Machine
        } else {
            Crash::Process
        };
        self.kill(crash);
        self.start();
        let (after, recovered) = self.replicas();
        for (pair, (b, a)) in before.iter().zip(&after).enumerate() {
            assert!(
                b.primary.state_hash == a.primary.state_hash
                    && b.primary.applied == a.primary.applied,
                "pair {pair}: recovered {:?}, had {:?}\n  ({})",
                a.primary,
                b.primary,
                self.describe()
            );
        }
        let recovered: BTreeSet<OrderKey> = recovered.iter().flatten().copied().collect();
        let market = Market::seed();
        let mut fills = BTreeMap::new();
        for pair in 0..market.pairs() {
            for role in [Role::Primary, Role::Standby] {
                let scan = Journal::scan_in(Place::Sim(&disk), pair, role).expect("readable");
                let mut seen = BTreeSet::new();
                for order in &scan.orders {
                    assert!(
                        seen.insert(order.key()),
                        "pair {pair} {role} log holds {:?} twice\n  ({})",
                        order.key(),
                        self.describe()
                    );
                }
                if role == Role::Primary {
                    let mut shard = Shard::new(&market, pair, Role::Primary);
                    for order in &scan.orders {
                        let fill = shard.replay(order).expect("the history replays");
                        fills.insert(order.key(), fill.filled);
                    }
                }
            }
        }
        for (key, AckedBy { how, .. }) in acked {
            assert!(
                recovered.contains(&key),
                "acknowledged order {key:?} ({how:?}) was lost in recovery\n  ({})",
                self.describe()
            );
            if let Acked::Accepted { filled } = how {
                assert_eq!(
                    fills.get(&key),
                    Some(&filled),
                    "order {key:?} was acknowledged with a fill its history does not give\n  ({})",
                    self.describe()
                );
            }
        }
    }
}

impl Drop for World<'_> {
    fn drop(&mut self) {
        if let Some(process) = self.process.take() {
            process.exchange.shutdown();
        }
    }
}

/// A client's orders: ids 1, 2, 3..., random books, sides, prices around each book's
/// reference (sells at or below it, buys at or above it, so they cross often) and volumes
/// (so that fills are partial too).
fn plan(sim: &Simulation, client: ClientId, orders: usize) -> Vec<NewOrder> {
    (1..=orders as u64)
        .map(|id| {
            let book = (sim.random() % 15) as u16;
            let reference = 100 - (i32::from(book) % 5 + 1);
            let level = (sim.random() % 5) as i32;
            let (side, price) = if sim.random().is_multiple_of(2) {
                (Side::Sell, reference - level)
            } else {
                (Side::Buy, reference + level)
            };
            let volume = 100 * (1 + (sim.random() % 3) as i32);
            NewOrder::limit(client, id, InstrumentId(book), side, price, volume)
        })
        .collect()
}

/// Where a process's acknowledgements go: the client, unless the process is dead (a dead
/// process sends nothing). Checks the durability rule on the disk as each ack is sent.
struct Route {
    incarnation: u64,
    alive: Arc<AtomicBool>,
    client: Addr<SimClient>,
    index: usize,
    check: Option<Durability>,
    ledger: Shared,
}

#[derive(Clone)]
struct Durability {
    disk: SimDisk,
    level: Held,
}

impl Durability {
    /// True if the log of (`pair`, `role`) holds `key` at this check's level.
    fn holds(&self, pair: usize, role: Role, key: OrderKey) -> bool {
        let name = Journal::file_name(pair, role);
        let Some(bytes) = self.disk.bytes_at(&name, self.level) else {
            return false;
        };
        crate::log::examine(name.into(), &bytes, pair as u16, role)
            .is_ok_and(|scan| scan.orders.iter().any(|o| o.key() == key))
    }
}

impl AckSink for Route {
    fn deliver(&self, ack: Ack) -> bool {
        if !self.alive.load(Ordering::SeqCst) {
            return true;
        }
        if let Some(check) = &self.check {
            let style = lock(&self.ledger).style;
            let must_hold = match (ack.outcome, style) {
                (Outcome::Accepted { .. }, Style::OneWay) => vec![ack.from],
                (Outcome::Accepted { .. }, Style::RequestReply) => {
                    vec![Role::Primary, Role::Standby]
                }
                (Outcome::Rejected(RejectReason::DuplicateClientOrderId), Style::OneWay) => {
                    vec![Role::Primary]
                }
                (Outcome::Rejected(RejectReason::DuplicateClientOrderId), Style::RequestReply) => {
                    vec![Role::Primary, Role::Standby]
                }
                _ => Vec::new(),
            };
            if !must_hold.is_empty() {
                let mut ledger = lock(&self.ledger);
                let client = ClientId(self.index as u32);
                let key = OrderKey {
                    client,
                    client_order_id: ack.client_order_id,
                };
                if let Some(order) = ledger.order(client, ack.client_order_id).copied() {
                    let pair = ledger
                        .market
                        .pair_of(order.instrument)
                        .expect("a known book");
                    for role in must_hold {
                        if !check.holds(pair, role, key) {
                            ledger.violation(format!(
                                "order {key:?} acknowledged ({:?} from the {}) before pair {pair}'s \
                                 {role} log held it ({:?})",
                                ack.outcome, ack.from, check.level
                            ));
                        }
                    }
                }
            }
        }
        let _ = self.client.tell(Answer {
            incarnation: self.incarnation,
            ack,
        });
        true
    }
}

/// The exchange a client talks to now.
#[derive(Clone)]
struct Conn {
    incarnation: u64,
    receiver: Addr<Receiver>,
    alive: Arc<AtomicBool>,
}

/// One send of an order, and the answers it got.
struct Attempt {
    number: u64,
    incarnation: u64,
    alive: Arc<AtomicBool>,
    sent_at: Instant,
    primary: Option<Outcome>,
    standby: Option<Outcome>,
    hang: TimerId,
}

impl Attempt {
    /// True once it has every answer it will get (see the module note).
    fn complete(&self, style: Style) -> bool {
        match style {
            // The pair answers once, from the engine that answers in its log mode (the primary
            // with fsync, the standby without) or from the primary if it refused the order.
            Style::RequestReply => self.primary.is_some() || self.standby.is_some(),
            Style::OneWay => match self.primary {
                None => false,
                Some(Outcome::Rejected(_)) => true,
                Some(Outcome::Accepted { .. }) => self.standby.is_some(),
            },
        }
    }
}

/// A client: places its orders one at a time, resending each until it is acknowledged.
struct SimClient {
    index: usize,
    style: Style,
    plan: Vec<NewOrder>,
    /// The order being placed (index into `plan`).
    next: usize,
    /// Sends of the current order so far.
    tries: u64,
    /// Every answer to the current order: (process, engine, outcome).
    answers: Vec<(u64, Role, Outcome)>,
    conn: Option<Conn>,
    attempt: Option<Attempt>,
    attempts: u64,
    retry_pending: bool,
    ledger: Shared,
}

impl Actor for SimClient {}

struct Connect(Conn);
impl Message for Connect {
    type Reply = ();
}

/// An acknowledgement, from the process `incarnation`.
struct Answer {
    incarnation: u64,
    ack: Ack,
}
impl Message for Answer {
    type Reply = ();
}

struct Retry;
impl Message for Retry {
    type Reply = ();
}

/// The hang check of attempt number `.0`.
struct HangCheck(u64);
impl Message for HangCheck {
    type Reply = ();
}

impl SimClient {
    fn violation(&self, what: String) {
        lock(&self.ledger).violation(format!("client {}: {what}", self.index));
    }

    fn send(&mut self, ctx: &mut Context<Self>) {
        if self.next >= self.plan.len() || self.attempt.is_some() || self.retry_pending {
            return;
        }
        let Some(conn) = self.conn.clone() else {
            return;
        };
        let order = self.plan[self.next];
        lock(&self.ledger).attempts += 1;
        self.tries += 1;
        if conn.receiver.tell(Submit(order)).is_err() {
            // The process is going away: try again shortly (or on the next connect).
            self.retry_later(ctx);
            return;
        }
        self.attempts += 1;
        let number = self.attempts;
        self.attempt = Some(Attempt {
            number,
            incarnation: conn.incarnation,
            alive: conn.alive,
            sent_at: ctx.now(),
            primary: None,
            standby: None,
            hang: ctx.send_after(HANG, HangCheck(number)),
        });
    }

    fn retry_later(&mut self, ctx: &mut Context<Self>) {
        self.retry_pending = true;
        let base = 10u64 << self.tries.min(7);
        let jitter = troupe::sim::random().unwrap_or(0) % (base + 1);
        ctx.send_after(Duration::from_millis((base + jitter).min(1_000)), Retry);
    }

    fn drop_attempt(&mut self, ctx: &mut Context<Self>) {
        if let Some(attempt) = self.attempt.take() {
            ctx.cancel_timer(attempt.hang);
        }
    }

    /// True if the answers so far acknowledge the current order.
    fn acknowledged(&self) -> Option<AckedBy> {
        let mut accepted = None;
        // In request-reply style the pair's one answer may come from either engine.
        let for_the_pair = |role| role == Role::Primary || self.style == Style::RequestReply;
        for &(incarnation, role, outcome) in &self.answers {
            match (for_the_pair(role), outcome) {
                (true, Outcome::Rejected(RejectReason::DuplicateClientOrderId)) => {
                    return Some(AckedBy {
                        how: Acked::Duplicate,
                        process: incarnation,
                    });
                }
                (true, Outcome::Accepted { filled }) => {
                    let by_standby = self.answers.iter().any(|&(i, r, o)| {
                        i == incarnation
                            && r == Role::Standby
                            && matches!(o, Outcome::Accepted { .. })
                    });
                    if self.style == Style::RequestReply || by_standby {
                        accepted = Some(AckedBy {
                            how: Acked::Accepted { filled },
                            process: incarnation,
                        });
                    }
                }
                _ => {}
            }
        }
        accepted
    }
}

impl Handler<Connect> for SimClient {
    fn handle(&mut self, Connect(conn): Connect, ctx: &mut Context<Self>) {
        if self
            .attempt
            .as_ref()
            .is_some_and(|a| a.incarnation != conn.incarnation)
        {
            // Sent to a process that died: it will never answer. Send again, now.
            self.drop_attempt(ctx);
        }
        self.conn = Some(conn);
        self.send(ctx);
    }
}

impl Handler<Retry> for SimClient {
    fn handle(&mut self, _: Retry, ctx: &mut Context<Self>) {
        self.retry_pending = false;
        self.send(ctx);
    }
}

impl Handler<HangCheck> for SimClient {
    fn handle(&mut self, HangCheck(number): HangCheck, _ctx: &mut Context<Self>) {
        let Some(attempt) = &self.attempt else {
            return;
        };
        if attempt.number != number || !attempt.alive.load(Ordering::SeqCst) {
            return;
        }
        let order = self.plan[self.next];
        self.violation(format!(
            "order {} (book {}, {:?}) sent at {:?} to process {} has no complete answer after \
             {HANG:?}, the process living (primary: {:?}, standby: {:?})",
            order.client_order_id,
            order.instrument.0,
            order.side,
            attempt.sent_at,
            attempt.incarnation,
            attempt.primary,
            attempt.standby,
        ));
    }
}

impl Handler<Answer> for SimClient {
    fn handle(&mut self, Answer { incarnation, ack }: Answer, ctx: &mut Context<Self>) {
        let Some(order) = self.plan.get(self.next).copied() else {
            return;
        };
        if ack.client_order_id != order.client_order_id {
            return; // a late answer about an order already acknowledged
        }
        match ack.outcome {
            Outcome::Accepted { .. } => {}
            Outcome::Rejected(RejectReason::EngineUnavailable) => lock(&self.ledger).refusals += 1,
            Outcome::Rejected(RejectReason::DuplicateClientOrderId) if self.tries > 1 => {}
            Outcome::Rejected(reason) => {
                self.violation(format!(
                    "order {} answered {reason:?} on try {}",
                    order.client_order_id, self.tries
                ));
            }
        }
        if let Outcome::Accepted { filled } = ack.outcome {
            // Without a log, a restarted exchange has forgotten the order and applies it anew.
            let forgets = lock(&self.ledger).forgets;
            let other = self.answers.iter().find_map(|&(i, _, o)| match o {
                Outcome::Accepted { filled } if !forgets || i == incarnation => Some(filled),
                _ => None,
            });
            if other.is_some_and(|f| f != filled) {
                self.violation(format!(
                    "order {} accepted with fills {other:?} and {filled}",
                    order.client_order_id
                ));
            }
        }
        self.answers.push((incarnation, ack.from, ack.outcome));
        if let Some(attempt) = self
            .attempt
            .as_mut()
            .filter(|a| a.incarnation == incarnation)
        {
            let slot = match ack.from {
                Role::Primary => &mut attempt.primary,
                Role::Standby => &mut attempt.standby,
            };
            if let Some(earlier) = slot.replace(ack.outcome) {
                let what = format!(
                    "order {} answered twice by the {} for one send: {earlier:?}, then {:?}",
                    order.client_order_id, ack.from, ack.outcome
                );
                self.violation(what);
            }
        }
        if let Some(acked) = self.acknowledged() {
            let key = OrderKey {
                client: order.client,
                client_order_id: order.client_order_id,
            };
            self.drop_attempt(ctx);
            self.next += 1;
            self.tries = 0;
            self.answers.clear();
            {
                let mut ledger = lock(&self.ledger);
                ledger.acked.insert(key, acked);
                if self.next >= self.plan.len() {
                    ledger.done[self.index] = true;
                }
            }
            self.send(ctx);
            return;
        }
        if self
            .attempt
            .as_ref()
            .is_some_and(|a| a.complete(self.style))
        {
            self.drop_attempt(ctx);
            self.retry_later(ctx);
        }
    }
}
