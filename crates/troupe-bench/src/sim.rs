//! The simulator's own speed (`troupe::sim`): how many steps it takes per second of wall time
//! on one core, so a test author knows how many seeds a time budget buys.
//!
//! - `turns`: a ring of N actors passes a token M times in a simulation (random scheduling, a
//!   new turn per hop, the simulated clock untouched): steps of the simulation per wall
//!   second. Each hop is one step: the turn of the actor holding the token.
//! - `timers`: an actor sets K timers 1 ms apart and handles each as a message: the
//!   simulated clock jumps from one to the next, so a run is steps (turns and timer firings)
//!   and clock jumps; reported as steps per wall second, and simulated seconds per wall second.
//!
//! - `store`: the whole scenario of seed 001 (the store under its load, healthy, with search
//!   hanging 30 s per call, recovered: `troupe_store::simulation`), simulated seconds per
//!   wall second, each run checked against the seed's claims.
//!
//! - `trading`: seeds of the trading model of seed 003 in one process (clients resending until
//!   acknowledged, engines crashed, stalled and stopped, a simulated disk that fails, tears
//!   and loses unflushed writes; `troupe_trading::simulation::run_seed`), each run checked:
//!   seeds per minute on one thread.
//!
//! - `dist`: seeds of the distributed trading model (two pairs of engine nodes over a simulated
//!   cluster: kills, pauses, cuts, a lossy network, lease expiry; then heal, a failover drill;
//!   `troupe_trading::dist_sim::run_seed`), each run checked: seeds per minute on one thread.
//!
//! Every repetition checks its work: the ring's token count, every timer's message, the
//! store's claims, the trading model's checks.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use serde_json::json;
use troupe::sim::{Simulation, Strategy};
use troupe::{Actor, Addr, Context, Handler, Message};

use crate::report::{Record, Runner};

struct Node {
    next: Option<Addr<Node>>,
    received: u64,
}
impl Actor for Node {}

#[derive(Message)]
struct Token(u64);
impl Handler<Token> for Node {
    fn handle(&mut self, token: Token, _: &mut Context<Self>) {
        self.received += 1;
        if token.0 > 0 {
            if let Some(next) = &self.next {
                next.tell(Token(token.0 - 1)).expect("the ring is running");
            }
        }
    }
}

#[derive(Message)]
struct Link(Addr<Node>);
impl Handler<Link> for Node {
    fn handle(&mut self, link: Link, _: &mut Context<Self>) {
        self.next = Some(link.0);
    }
}

#[derive(Message)]
#[reply(u64)]
struct Received;
impl Handler<Received> for Node {
    fn handle(&mut self, _: Received, _: &mut Context<Self>) -> u64 {
        self.received
    }
}

/// Sets timers 1 ms apart and counts their messages.
struct Clock {
    fired: u64,
}
impl Actor for Clock {}

#[derive(Message)]
struct Set(u64);
impl Handler<Set> for Clock {
    fn handle(&mut self, set: Set, ctx: &mut Context<Self>) {
        for i in 1..=set.0 {
            ctx.send_after(Duration::from_millis(i), Tick);
        }
    }
}
#[derive(Message)]
struct Tick;
impl Handler<Tick> for Clock {
    fn handle(&mut self, _: Tick, _: &mut Context<Self>) {
        self.fired += 1;
    }
}
#[derive(Message)]
#[reply(u64)]
struct Fired;
impl Handler<Fired> for Clock {
    fn handle(&mut self, _: Fired, _: &mut Context<Self>) -> u64 {
        self.fired
    }
}

/// One ring run in a simulation: (steps, wall seconds).
fn ring_once(seed: u64, actors: u64, hops: u64) -> Result<(u64, f64)> {
    let sim = Simulation::builder()
        .seed(seed)
        .strategy(Strategy::Random)
        .max_steps(hops.saturating_mul(4).max(1_000_000))
        .build()?;
    let system = sim.system();
    let nodes: Vec<Addr<Node>> = (0..actors)
        .map(|_| {
            system.spawn(Node {
                next: None,
                received: 0,
            })
        })
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        node.tell(Link(nodes[(i + 1) % nodes.len()].clone()))?;
    }
    sim.run_until_idle();
    let before = sim.steps();
    let start = Instant::now();
    nodes[0].tell(Token(hops - 1))?;
    sim.run_until_idle();
    let wall = start.elapsed().as_secs_f64();
    let steps = sim.steps() - before;
    let mut received = 0;
    for node in &nodes {
        received += node.ask(Received).wait().context("asking a node")?;
    }
    ensure!(
        received == hops,
        "ring validation failed: {received} tokens, {hops} expected"
    );
    Ok((steps, wall))
}

/// One timer run: (steps, wall seconds, simulated seconds).
fn timers_once(seed: u64, timers: u64) -> Result<(u64, f64, f64)> {
    let sim = Simulation::builder()
        .seed(seed)
        .strategy(Strategy::Random)
        .build()?;
    let clock = sim.system().spawn(Clock { fired: 0 });
    let start = Instant::now();
    let simulated = sim.now();
    clock.tell(Set(timers))?;
    sim.advance(Duration::from_millis(timers + 1));
    let fired = clock.ask(Fired).wait().context("asking the clock")?;
    let wall = start.elapsed().as_secs_f64();
    ensure!(
        fired == timers,
        "timer validation failed: {fired} fired, {timers} expected"
    );
    let simulated = (sim.now() - simulated).as_secs_f64();
    Ok((sim.steps(), wall, simulated))
}

pub fn run(
    runner: &Runner,
    actors: u64,
    hops: u64,
    timers: u64,
    store: bool,
    trading_seconds: f64,
) -> Result<()> {
    ensure!(actors >= 2, "the ring needs at least 2 actors");
    ensure!(hops >= 1 && timers >= 1, "nothing to measure");
    let mut seed = 0;
    let [rate] = runner.measure("sim turns", || {
        seed += 1;
        let (steps, wall) = ring_once(seed, actors, hops)?;
        Ok([steps as f64 / wall])
    })?;
    let params = json!({ "actors": actors, "hops": hops, "strategy": "random" })
        .as_object()
        .expect("object")
        .clone();
    runner.emit(&Record::new(
        "sim",
        "turns",
        "troupe-sim",
        params,
        "steps/s",
        rate,
        "troupe::sim on one thread: a token passed round a ring of actors, one step (a turn of the actor holding it) per hop, random scheduling",
    ))?;
    let mut seed = 0;
    let [steps, ratio] = runner.measure("sim timers", || {
        seed += 1;
        let (steps, wall, simulated) = timers_once(seed, timers)?;
        Ok([steps as f64 / wall, simulated / wall])
    })?;
    let params = json!({ "timers": timers, "apart_ms": 1 })
        .as_object()
        .expect("object")
        .clone();
    let notes = "troupe::sim on one thread: an actor sets timers 1 ms apart and handles each as a message; the simulated clock jumps from one to the next";
    runner.emit(&Record::new(
        "sim",
        "timer_steps",
        "troupe-sim",
        params.clone(),
        "steps/s",
        steps,
        notes,
    ))?;
    runner.emit(&Record::new(
        "sim",
        "virtual_per_wall",
        "troupe-sim",
        params,
        "x",
        ratio,
        notes,
    ))?;
    if store {
        store_scenario(runner)?;
    }
    trading_seeds(runner, trading_seconds)?;
    dist_seeds(runner, trading_seconds)?;
    Ok(())
}

/// Seeds of the distributed trading model run in `seconds` of wall time, one thread.
fn dist_seeds(runner: &Runner, seconds: f64) -> Result<()> {
    let mut next = 0;
    let [rate, ratio] = runner.measure("sim dist", || {
        let start = Instant::now();
        let (mut seeds, mut simulated) = (0u64, 0.0);
        while start.elapsed().as_secs_f64() < seconds {
            let seed = next;
            next += 1;
            let outcome = troupe_trading::dist_sim::run_seed(seed);
            if let Err(broken) = outcome.check() {
                anyhow::bail!("the distributed model failed its checks at seed {seed}: {broken}");
            }
            ensure!(outcome.acked > 0, "seed {seed} acknowledged nothing");
            seeds += 1;
            simulated += outcome.simulated.as_secs_f64();
        }
        let wall = start.elapsed().as_secs_f64();
        Ok([seeds as f64 * 60.0 / wall, simulated / wall])
    })?;
    let params = json!({ "model": "seed 003 across processes: 2 pairs of engine nodes on a simulated cluster, kills, pauses, cuts, a lossy network, then heal and a failover drill" })
        .as_object()
        .expect("object")
        .clone();
    let notes = "troupe_trading::dist_sim::run_seed, one thread, seeds taken in order for a fixed wall time; every run checked (no acknowledged order lost, one primary per acknowledgement, progress after heal)";
    runner.emit(&Record::new(
        "sim",
        "dist_seeds",
        "troupe-sim",
        params.clone(),
        "seeds/min",
        rate,
        notes,
    ))?;
    runner.emit(&Record::new(
        "sim",
        "dist_virtual_per_wall",
        "troupe-sim",
        params,
        "x",
        ratio,
        notes,
    ))?;
    Ok(())
}

/// Seeds of the trading model run in `seconds` of wall time, one thread: seeds per minute.
fn trading_seeds(runner: &Runner, seconds: f64) -> Result<()> {
    let mut next = 0;
    let [rate, steps] = runner.measure("sim trading", || {
        let start = Instant::now();
        let (mut seeds, mut total_steps) = (0u64, 0u64);
        while start.elapsed().as_secs_f64() < seconds {
            let seed = next;
            next += 1;
            let outcome = std::panic::catch_unwind(|| troupe_trading::simulation::run_seed(seed))
                .map_err(|_| {
                anyhow::anyhow!("the trading model failed its checks at seed {seed}")
            })?;
            ensure!(outcome.orders_acked > 0, "seed {seed} acknowledged nothing");
            seeds += 1;
            total_steps += outcome.steps;
        }
        let wall = start.elapsed().as_secs_f64();
        Ok([seeds as f64 * 60.0 / wall, total_steps as f64 / wall])
    })?;
    let params = json!({ "model": "seed 003 in one process: both ack styles, logs none/buffered/fsync on a simulated disk, crashes, stalls, stops, disk faults" })
        .as_object()
        .expect("object")
        .clone();
    let notes = "troupe_trading::simulation::run_seed, one thread, seeds taken in order for a fixed wall time; every run checked (acked orders durable and recovered, no hang, equal replicas)";
    runner.emit(&Record::new(
        "sim",
        "trading_seeds",
        "troupe-sim",
        params.clone(),
        "seeds/min",
        rate,
        notes,
    ))?;
    runner.emit(&Record::new(
        "sim",
        "trading_steps",
        "troupe-sim",
        params,
        "steps/s",
        steps,
        notes,
    ))?;
    Ok(())
}

/// The store's scenario (seed 001) in simulation: simulated seconds per wall second.
fn store_scenario(runner: &Runner) -> Result<()> {
    let mut seed = 0;
    let [ratio, steps] = runner.measure("sim store", || {
        seed += 1;
        let outcome = troupe_store::simulation::run_scenario(seed);
        if let Err(broken) = outcome.check() {
            anyhow::bail!("the store's claims failed in simulation (seed {seed}): {broken}");
        }
        let wall = outcome.wall.as_secs_f64();
        Ok([
            outcome.simulated.as_secs_f64() / wall,
            outcome.steps as f64 / wall,
        ])
    })?;
    let params = json!({ "scenario": "seed 001: 10 s healthy, 40 s search hanging 30 s per call, 20 s recovered; 300 users per kind" })
        .as_object()
        .expect("object")
        .clone();
    let notes = "troupe_store::simulation::run_scenario: the store's backend actors (bulkhead, call timeout, breaker) and the seed's load in troupe::sim, the backends simulated; every run checked against the seed's claims";
    runner.emit(&Record::new(
        "sim",
        "store_virtual_per_wall",
        "troupe-sim",
        params.clone(),
        "x",
        ratio,
        notes,
    ))?;
    runner.emit(&Record::new(
        "sim",
        "store_steps",
        "troupe-sim",
        params,
        "steps/s",
        steps,
        notes,
    ))?;
    Ok(())
}
