//! The distributed mode in deterministic simulation: every node of every pair, the clients,
//! the network and the key-value store in one `troupe::sim` simulation, faults drawn from the
//! seed, and the mode's promises checked in every run.
//!
//! # A run ([`run`])
//! 1. **Start**: two nodes per pair (`p0a`, `p0b`, ...) on a [`SimulatedCluster`]; each pair
//!    elects a primary and its standby joins.
//! 2. **Fault phase** ([`Scenario::fault_phase`], 20 s simulated by default): 1 to 12 clients
//!    place orders on every pair, each resending an order until it is acknowledged
//!    ([`DistClient`], the production client). Meanwhile, at random moments, the seed's kinds
//!    of fault (each run turns on a random subset: swarm testing): a node killed (any node, or
//!    the primary) and started again from its log after a while (sometimes at once, racing
//!    its standby for the lease); a node paused for up to three leases; a node cut off from
//!    the other nodes, from the store, or both; a network that loses, doubles and delays
//!    messages. A node that ends itself (exit code 3) is started again, as a supervisor would.
//! 3. **Heal** (`sim.heal()`, the network calm, pauses and cuts ended, every node started).
//! 4. **Liveness**: every client gets a new order acknowledged within
//!    [`Scenario::progress_bound`] of simulated time.
//! 5. **Drill** (if [`Scenario::drill`]): with orders still flowing, the operator's failover:
//!    wait until each pair's standby is in step ([`in_step`], asked over the network as the
//!    real harness asks), kill the primary, start it again, and every client must again get an
//!    order acknowledged within the bound.
//! 6. **Quiet**: the clients stop; each pair's non-primary node gets the time to catch up.
//!
//! # What is checked ([`Outcome::check`]: the core promises)
//! - **No acknowledged order lost**: when a node becomes primary, its log holds every order
//!   acknowledged so far for its pair, each at the sequence number its acknowledgement gave;
//!   at the end, every order a client counts as acknowledged is in the log of every node the
//!   pair's sync record names (at its sequence number, when the acknowledgement gave one).
//! - **Never two primaries**: each acknowledgement is made by the node that holds the pair's
//!   lease in the store at that instant; no sequence number of a pair is acknowledged for two
//!   orders; one epoch belongs to one node; along a pair's sequence numbers, the epochs of the
//!   acknowledgements never go down.
//! - **No order applied twice**: no node's log holds a key twice.
//! - **Answers**: no order is rejected (every order the clients make is valid), and each
//!   acknowledgement a client receives is the one a primary made (same sequence number,
//!   order and epoch). One exception, counted in [`Outcome::doubled_rejections`]: when the
//!   network delivers a first send twice (NATS core never does; the simulation may), the
//!   second copy may answer `Duplicate` first, and the client, which cannot tell its own copy
//!   from another order with its key, reports the order rejected. Such an order was applied:
//!   it is checked as acknowledged without a sequence number.
//! - **Progress after heal**: the liveness steps above, within their bounds.
//! - **One history**: after the quiet phase, the two nodes of each pair hold equal logs
//!   (listed apart, in [`Outcome::diverged`]); and a node that cuts its history back to rejoin
//!   never cuts an order acknowledged at its place.
//!
//! # A pause's cost to the clients ([`paused_primary`])
//! One pair, a calm network, clients placing orders back to back; the primary is paused past
//! two leases, and what each client gets acknowledged from the standby that took over is
//! counted: the paused node's receiver, still in the queue group, must cost little.
//!
//! ```no_run
//! let outcome = troupe_trading::dist_sim::run_seed(7);
//! println!("{outcome}");
//! outcome.check().unwrap();
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use troupe::sim::{Simulation, Strategy};

use crate::cluster::Network;
use crate::dist::{node_state, DistClient, DistError, Placed, WireOrder};
use crate::dist_harness::in_step;
use crate::sim_cluster::{Counters, NetFaults, SimulatedCluster, SimulatedLink};

/// What a run does. See the module note.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Engine pairs with nodes (at most the market's 3).
    pub pairs: usize,
    /// The lease.
    pub lease: Duration,
    /// How long faults are injected.
    pub fault_phase: Duration,
    /// Faults on (kills, pauses, cuts, a lossy network); off: only the schedule is the seed's.
    pub faults: bool,
    /// The operator's failover drill after heal.
    pub drill: bool,
    /// How long the pair may take to acknowledge new orders after heal (and after the drill's
    /// kill), and a standby to come in step.
    pub progress_bound: Duration,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            pairs: 2,
            lease: Duration::from_secs(1),
            fault_phase: Duration::from_secs(20),
            faults: true,
            drill: true,
            progress_bound: Duration::from_secs(30),
        }
    }
}

/// One order a client placed, and how it ended.
#[derive(Clone, Debug)]
struct Record {
    key: (u32, u64),
    pair: usize,
    answer: Option<(Instant, Result<Placed, DistError>)>,
    sent: Instant,
}

/// A run's results: what happened, and what the checks found. See the module note.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The simulation's seed.
    pub seed: u64,
    /// Steps the simulation took.
    pub steps: u64,
    /// Simulated time of the run.
    pub simulated: Duration,
    /// Orders the clients placed.
    pub placed: u64,
    /// Orders acknowledged to the clients (`Duplicate` on a resend included).
    pub acked: u64,
    /// Resends the clients made.
    pub resends: u64,
    /// Faults injected: node kills, pauses, cuts (and exits of nodes by themselves).
    pub kills: u64,
    /// Pauses.
    pub pauses: u64,
    /// Cuts (partitions).
    pub cuts: u64,
    /// What the network and the nodes did.
    pub counters: Counters,
    /// The network of the fault phase.
    pub network: Option<NetFaults>,
    /// Clients.
    pub clients: usize,
    /// Orders the client was told were rejected as duplicates at their first send, because
    /// the network delivered that send twice and the copy answered first (the checks count
    /// them as acknowledged: see the module note).
    pub doubled_rejections: u64,
    /// Core promises broken (empty: none).
    pub violations: Vec<String>,
    /// Pairs whose two nodes did not end with one history.
    pub diverged: Vec<String>,
}

impl Outcome {
    /// Every promise of the module note: `Err` lists what broke.
    pub fn check(&self) -> Result<(), String> {
        if self.violations.is_empty() && self.diverged.is_empty() {
            Ok(())
        } else {
            let broken: Vec<&str> = self
                .violations
                .iter()
                .chain(&self.diverged)
                .map(String::as_str)
                .collect();
            Err(format!("seed {}: {}", self.seed, broken.join("; ")))
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} steps, {:.1} s simulated, {} clients, {} orders placed, {} acked, {} \
             resends; {} kills/exits, {} pauses, {} cuts; {} messages ({} lost, {} doubled), {} \
             primaries, {} cut-backs ({} orders); {} violations, {} diverged",
            self.seed,
            self.steps,
            self.simulated.as_secs_f64(),
            self.clients,
            self.placed,
            self.acked,
            self.resends,
            self.kills + self.counters.exits,
            self.pauses,
            self.cuts,
            self.counters.messages,
            self.counters.lost,
            self.counters.duplicated,
            self.counters.primaries,
            self.counters.cut_backs,
            self.counters.orders_cut,
            self.violations.len(),
            self.diverged.len()
        )
    }
}

/// One run of the default scenario on its own simulation (random scheduling): for the
/// benchmark program (`troupe-bench sim`) and quick looks.
pub fn run_seed(seed: u64) -> Outcome {
    let sim = Simulation::builder()
        .seed(seed)
        .strategy(Strategy::Random)
        .build()
        .expect("a simulation");
    let outcome = run(&sim, &Scenario::default());
    drop(sim);
    outcome
}

fn node_name(pair: usize, which: usize) -> String {
    format!("p{pair}{}", ["a", "b"][which])
}

/// What the clients share with the driver.
#[derive(Default)]
struct Clients {
    records: Vec<Record>,
    resends: u64,
    /// Clients whose loop has ended.
    done: usize,
}

/// Runs the scenario in `sim` (its seed decides everything) and checks it. See the module
/// note.
pub fn run(sim: &Simulation, scenario: &Scenario) -> Outcome {
    let start = sim.now();
    let world = SimulatedCluster::new(sim.system(), scenario.lease, NetFaults::calm());
    let pairs = scenario.pairs.min(world.market().pairs());
    let mut outcome = Outcome {
        seed: sim.seed(),
        ..Outcome::default()
    };
    let names: Vec<[String; 2]> = (0..pairs)
        .map(|p| [node_name(p, 0), node_name(p, 1)])
        .collect();
    for (pair, nodes) in names.iter().enumerate() {
        for name in nodes {
            if let Err(e) = world.start_node(name, pair) {
                outcome
                    .violations
                    .push(format!("{name} did not start: {e}"));
                return outcome;
            }
        }
    }
    let elected = sim.run_until(
        || (0..pairs).all(|p| world.lease_holder(p).is_some()),
        scenario.progress_bound,
    );
    if !elected {
        outcome
            .violations
            .push("no primary elected at start".to_string());
    }

    // The clients.
    let clients = 1 + (world.random() % 12) as usize;
    let think = match world.random() % 3 {
        0 => Duration::ZERO,
        _ => Duration::from_micros(world.random() % 20_000),
    };
    outcome.clients = clients;
    let (shared, stop) = spawn_clients(&world, clients, pairs, think);

    // A supervisor starts nodes that ended by themselves (exit code 3) again, after a moment.
    let supervisor = world.client("supervisor");
    let supervising = Arc::new(AtomicBool::new(false));
    supervisor.spawn(supervise(world.clone(), names.clone(), supervising.clone()));

    // The fault phase.
    let kinds = world.random();
    let on = |bit: u32| scenario.faults && kinds & (1 << bit) != 0;
    if on(0) {
        let faults = NetFaults::draw(&mut || world.random());
        world.set_faults(faults.clone());
        outcome.network = Some(faults);
    }
    let lease = scenario.lease;
    let all: Vec<(usize, String)> = names
        .iter()
        .enumerate()
        .flat_map(|(p, n)| n.iter().map(move |name| (p, name.clone())))
        .collect();
    let mut restarts: Vec<(Instant, usize, String)> = Vec::new();
    let end = start + scenario.fault_phase;
    while sim.now() < end {
        let gap = Duration::from_millis(50 + world.random() % 1_500);
        sim.advance(gap);
        let now = sim.now();
        let (due, later): (Vec<_>, Vec<_>) = restarts.into_iter().partition(|r| r.0 <= now);
        restarts = later;
        for (_, pair, name) in due {
            let _ = world.start_node(&name, pair);
        }
        if !scenario.faults || sim.now() >= end {
            continue;
        }
        let (pair, name) = all[(world.random() % all.len() as u64) as usize].clone();
        let primary = world.lease_holder(pair);
        match world.random() % 6 {
            // Any node, or the primary, killed; started again at once or later.
            k @ (0 | 1) if on(1 + k as u32) => {
                let victim = if k == 1 {
                    primary.unwrap_or(name)
                } else {
                    name
                };
                if world.kill(&victim) {
                    outcome.kills += 1;
                    let delay = if world.random().is_multiple_of(3) {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(world.random() % 3_000)
                    };
                    restarts.retain(|r| r.2 != victim);
                    restarts.push((now + delay, pair, victim));
                }
            }
            2 if on(3) => {
                let d = lease.mul_f64((world.random() % 3_000) as f64 / 1_000.0);
                world.pause(&name, d);
                outcome.pauses += 1;
            }
            k @ (3..=5) if on(1 + k as u32) => {
                let d = lease.mul_f64((world.random() % 3_000) as f64 / 1_000.0);
                world.cut(&name, d, k != 4, k != 3);
                outcome.cuts += 1;
            }
            _ => {}
        }
    }

    // Heal: no fault from now on; every node runs.
    sim.heal();
    world.set_faults(NetFaults::calm());
    world.mend();
    for (pair, name) in &all {
        let _ = world.start_node(name, *pair);
    }
    let progress = |what: &str, outcome: &mut Outcome| {
        let since = sim.now();
        let fresh = || {
            let shared = shared.lock().unwrap_or_else(|p| p.into_inner());
            (0..clients as u32).all(|c| {
                shared.records.iter().any(|r| {
                    r.key.0 == c
                        && r.sent >= since
                        && matches!(r.answer, Some((_, Ok(Placed::Acked(_)))))
                })
            })
        };
        if !sim.run_until(fresh, scenario.progress_bound) {
            outcome.violations.push(format!(
                "no progress {what}: not every client had a new order acknowledged within {:?}",
                scenario.progress_bound
            ));
        }
    };
    progress("after heal", &mut outcome);

    // The operator's drill: in step under flow, then the primary killed.
    if scenario.drill && outcome.violations.is_empty() {
        let asker = world.client("operator");
        for (pair, nodes) in names.iter().enumerate() {
            let found =
                sim.system()
                    .block_on(wait_in_step(&asker, pair, nodes, scenario.progress_bound));
            match found {
                None => outcome.violations.push(format!(
                    "pair {pair}: the standby was not in step within {:?} with orders flowing",
                    scenario.progress_bound
                )),
                Some(primary) => {
                    world.kill(&primary);
                    outcome.kills += 1;
                    sim.advance(Duration::from_millis(500));
                    let _ = world.start_node(&primary, pair);
                }
            }
        }
        if outcome.violations.is_empty() {
            progress("after the drill's kills", &mut outcome);
        }
    }

    // Quiet: the clients stop; the standbys catch up.
    stop.store(true, Ordering::SeqCst);
    let finished = sim.run_until(
        || shared.lock().unwrap_or_else(|p| p.into_inner()).done == clients,
        scenario.progress_bound,
    );
    if !finished {
        outcome.violations.push(format!(
            "the clients' last orders were not acknowledged within {:?} of the end",
            scenario.progress_bound
        ));
    }
    let converged = |world: &SimulatedCluster| {
        names
            .iter()
            .all(|n| world.history(&n[0]) == world.history(&n[1]))
    };
    sim.run_until(|| converged(&world), scenario.progress_bound);
    supervising.store(true, Ordering::SeqCst);

    // The checks.
    let shared = shared.lock().unwrap_or_else(|p| p.into_inner());
    outcome.placed = shared.records.len() as u64;
    outcome.resends = shared.resends;
    outcome.counters = world.counters();
    outcome.violations.extend(world.violations());
    let acks = world.acks();
    let mut acked = Vec::new();
    for r in &shared.records {
        match &r.answer {
            Some((_, Ok(Placed::Acked(ack)))) => {
                acked.push((r.pair, r.key, ack.map(|a| a.seq)));
                if let Some(ack) = ack {
                    match acks.get(&(r.pair, ack.seq)) {
                        Some(a) if a.key == r.key && a.epoch == ack.epoch => {}
                        other => outcome.violations.push(format!(
                            "{:?} acknowledged to its client at seq {} epoch {}, but the \
                             primaries acknowledged {other:?} there",
                            r.key, ack.seq, ack.epoch
                        )),
                    }
                }
            }
            // Its own copy, doubled by the network, applied first: the client cannot tell it
            // from another order's key (NATS core never doubles a message). Applied, so
            // checked as acknowledged without a sequence number.
            Some((_, Ok(Placed::Rejected(why))))
                if why == "duplicate key" && outcome.counters.duplicated > 0 =>
            {
                outcome.doubled_rejections += 1;
                acked.push((r.pair, r.key, None));
            }
            Some((_, Ok(Placed::Rejected(why)))) => outcome
                .violations
                .push(format!("{:?} rejected: {why}", r.key)),
            _ => {}
        }
    }
    outcome.acked = acked.len() as u64;
    for (pair, nodes) in names.iter().enumerate() {
        let mut named = Vec::new();
        match world.sync_record(pair) {
            Some((primary, standby, _)) => {
                named.push(primary);
                named.extend(standby);
            }
            None => outcome
                .violations
                .push(format!("pair {pair}: no sync record at the end")),
        }
        for node in &named {
            let log = world.history(node);
            let keys: Vec<(u32, u64)> = log
                .iter()
                .map(|o| (o.client().0, o.client_order_id()))
                .collect();
            let index: BTreeMap<(u32, u64), usize> =
                keys.iter().enumerate().map(|(i, k)| (*k, i + 1)).collect();
            for (p, key, seq) in acked.iter().filter(|a| a.0 == pair) {
                let _ = p;
                match (index.get(key), seq) {
                    (None, _) => outcome.violations.push(format!(
                        "lost: {key:?}, acknowledged, is not in the log of {node}, which the \
                         sync record of pair {pair} names"
                    )),
                    (Some(at), Some(seq)) if *at as u64 != *seq => outcome.violations.push(
                        format!("{key:?} acknowledged at seq {seq} is at {at} in {node}'s log"),
                    ),
                    _ => {}
                }
            }
        }
        for node in nodes {
            let log = world.history(node);
            let unique: HashSet<(u32, u64)> = log
                .iter()
                .map(|o| (o.client().0, o.client_order_id()))
                .collect();
            if unique.len() != log.len() {
                outcome.violations.push(format!(
                    "{node}'s log holds {} orders, {} of them distinct: an order applied twice",
                    log.len(),
                    unique.len()
                ));
            }
        }
        let (a, b) = (world.history(&nodes[0]), world.history(&nodes[1]));
        if a != b {
            let same = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            outcome.diverged.push(format!(
                "pair {pair}: {} holds {} orders, {} holds {}, equal for the first {same}",
                nodes[0],
                a.len(),
                nodes[1],
                b.len()
            ));
        }
    }
    // Epochs: one node each, never down along the sequence numbers.
    let mut owners: BTreeMap<u64, &str> = BTreeMap::new();
    let mut last: BTreeMap<usize, u64> = BTreeMap::new();
    for ((pair, seq), a) in &acks {
        if let Some(owner) = owners.insert(a.epoch, &a.node) {
            if owner != a.node {
                outcome.violations.push(format!(
                    "two primaries: epoch {} acknowledged by {owner} and {}",
                    a.epoch, a.node
                ));
            }
        }
        let before = last.insert(*pair, a.epoch).unwrap_or(0);
        if a.epoch < before {
            outcome.violations.push(format!(
                "two primaries: pair {pair} seq {seq} acknowledged at epoch {} after epoch {before}",
                a.epoch
            ));
        }
    }
    drop(shared);
    outcome.steps = sim.steps();
    outcome.simulated = sim.now() - start;
    outcome
}

/// Starts every node that ended by itself again, 100 ms to 1 s after it ended, until told to
/// stop.
async fn supervise(world: SimulatedCluster, names: Vec<[String; 2]>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(100 + world.random() % 900)).await;
        for (pair, nodes) in names.iter().enumerate() {
            for name in nodes {
                if world.has_exited(name) {
                    let _ = world.start_node(name, pair);
                }
            }
        }
    }
}

/// Waits (over the simulated network, as the real harness asks) until the pair's standby is
/// in step; returns the primary's name.
async fn wait_in_step(
    link: &SimulatedLink,
    pair: usize,
    names: &[String; 2],
    limit: Duration,
) -> Option<String> {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        let a = node_state(link, pair, &names[0]).await;
        let b = node_state(link, pair, &names[1]).await;
        if let (Ok(a), Ok(b)) = (a, b) {
            if a.primary != b.primary {
                let (primary, standby) = if a.primary { (a, b) } else { (b, a) };
                if let Ok(later) = node_state(link, pair, &standby.node).await {
                    if in_step(&primary, &standby, &later) {
                        return Some(primary.node);
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// What clients got while their pair's primary was paused past its lease
/// ([`paused_primary`]).
#[derive(Clone, Debug)]
pub struct PausedPrimary {
    /// Orders acknowledged to each client in [`PausedPrimary::window`].
    pub acked: Vec<u64>,
    /// From two leases after the pause began (the standby has taken over) to its end.
    pub window: Duration,
    /// Resends the clients made in the whole run.
    pub resends: u64,
}

impl PausedPrimary {
    /// The fewest orders a client had acknowledged per second of the window.
    pub fn slowest_rate(&self) -> f64 {
        let fewest = self.acked.iter().copied().min().unwrap_or(0);
        fewest as f64 / self.window.as_secs_f64()
    }
}

/// One pair (lease 1 s) on a calm network; `clients` clients place orders back to back; once
/// each has had one acknowledged, the primary is paused for `pause` (more than two leases).
/// Its receiver stays in the receivers' queue group meanwhile, as NATS keeps a stopped
/// subscriber's, and takes its share of the tries; what the clients get acknowledged from the
/// standby, which takes over, is counted.
pub fn paused_primary(
    sim: &Simulation,
    clients: usize,
    pause: Duration,
) -> Result<PausedPrimary, String> {
    let lease = Duration::from_secs(1);
    let bound = Duration::from_secs(30);
    if pause <= 2 * lease {
        return Err(format!("a pause of {pause:?} does not outlast two leases"));
    }
    let world = SimulatedCluster::new(sim.system(), lease, NetFaults::calm());
    for which in 0..2 {
        let name = node_name(0, which);
        world
            .start_node(&name, 0)
            .map_err(|e| format!("{name} did not start: {e}"))?;
    }
    if !sim.run_until(|| world.lease_holder(0).is_some(), bound) {
        return Err("no primary elected".into());
    }
    let (shared, stop) = spawn_clients(&world, clients, 1, Duration::ZERO);
    let acked_each = |since: Instant| {
        let shared = shared.lock().unwrap_or_else(|p| p.into_inner());
        (0..clients as u32).all(|c| {
            shared.records.iter().any(|r| {
                r.key.0 == c && matches!(r.answer, Some((at, Ok(Placed::Acked(_)))) if at >= since)
            })
        })
    };
    let begun = sim.now();
    if !sim.run_until(|| acked_each(begun), bound) {
        return Err("not every client had an order acknowledged before the pause".into());
    }
    let primary = world.lease_holder(0).ok_or("no primary before the pause")?;
    let paused = sim.now();
    world.pause(&primary, pause);
    sim.advance(pause);
    let from = paused + 2 * lease;
    let to = paused + pause;
    stop.store(true, Ordering::SeqCst);
    let finished = sim.run_until(
        || shared.lock().unwrap_or_else(|p| p.into_inner()).done == clients,
        bound,
    );
    if !finished {
        return Err("the clients' last orders were not acknowledged after the pause".into());
    }
    let shared = shared.lock().unwrap_or_else(|p| p.into_inner());
    let acked = (0..clients as u32)
        .map(|c| {
            shared
                .records
                .iter()
                .filter(|r| {
                    r.key.0 == c
                        && matches!(r.answer, Some((at, Ok(Placed::Acked(_)))) if at >= from && at < to)
                })
                .count() as u64
        })
        .collect();
    Ok(PausedPrimary {
        acked,
        window: to - from,
        resends: shared.resends,
    })
}

/// Starts `clients` clients on one link of `world`, each with a seed drawn from it: what they
/// record, and the flag that tells them to stop.
fn spawn_clients(
    world: &SimulatedCluster,
    clients: usize,
    pairs: usize,
    think: Duration,
) -> (Arc<Mutex<Clients>>, Arc<AtomicBool>) {
    let shared = Arc::new(Mutex::new(Clients::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let link = world.client("clients");
    for c in 0..clients {
        let seed = world.random();
        link.spawn(client(
            link.clone(),
            c as u32,
            pairs,
            think,
            seed,
            shared.clone(),
            stop.clone(),
        ));
    }
    (shared, stop)
}

/// A client: places orders on the pairs one at a time, each resent until acknowledged, until
/// told to stop.
async fn client(
    link: SimulatedLink,
    id: u32,
    pairs: usize,
    think: Duration,
    seed: u64,
    shared: Arc<Mutex<Clients>>,
    stop: Arc<AtomicBool>,
) {
    let market = crate::market::Market::seed();
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let Ok(mut client) = DistClient::over(link.clone()) else {
        return;
    };
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let pair = (next() % pairs as u64) as usize;
        let instruments: Vec<_> = market.instruments_of(pair).collect();
        let instrument = instruments[(next() % instruments.len() as u64) as usize];
        let order = WireOrder {
            client: id,
            client_order_id: n,
            instrument: instrument.0,
            buy: next().is_multiple_of(2),
            price: 95 + (next() % 11) as i32,
            volume: 1 + (next() % 10) as i32,
        };
        let index = {
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.records.push(Record {
                key: (id, n),
                pair,
                answer: None,
                sent: link.now(),
            });
            s.records.len() - 1
        };
        let before = client.resends;
        let answer = client.place(order, Duration::from_secs(3_600)).await;
        {
            let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
            s.resends += client.resends - before;
            s.records[index].answer = Some((link.now(), answer));
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    shared.lock().unwrap_or_else(|p| p.into_inner()).done += 1;
}
