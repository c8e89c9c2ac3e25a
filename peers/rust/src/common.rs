//! What every contender shares: the command line, the repetition loop, the checks of
//! PROTOCOL.md, the JSON Lines output, the statistics and the machine description.
//!
//! A contender only implements [`Peer`]: one repetition of each scenario, returning what it
//! measured and what its own check needs. Everything else happens here, identically for all.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use tokio::sync::Notify;
use troupe_results::{Machine, Record};

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

/// Rust peers for `troupe-bench compare`: tokio, actix, ractor and kameo running the same
/// scenarios, printing one JSON object per (scenario, metric) on stdout.
#[derive(Parser, Debug)]
#[command(name = "rust-peers", version)]
pub struct Cli {
    #[command(subcommand)]
    pub scenario: ScenarioArgs,

    /// Measured repetitions.
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub repeat: u64,

    /// Unmeasured repetitions run first, in the same process.
    #[arg(long, global = true, default_value_t = 0)]
    pub warmup: u64,

    /// Which runtime runs the scenario.
    #[arg(long, global = true, value_enum, default_value_t = Contender::Tokio)]
    pub contender: Contender,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ScenarioArgs {
    /// N actors in a ring pass one token around M times.
    Ring {
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        actors: u64,
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        rounds: u64,
    },
    /// Spawn N idle actors, measure time and memory, stop them.
    Spawn {
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        actors: u64,
    },
    /// P producers send K `Add(100)` each to one counting actor, then one `GetAndReset`.
    Counter {
        /// Defaults to one producer per core.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        producers: Option<u64>,
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        per_producer: u64,
    },
    /// N stages in a line forward N messages from a source to the sink.
    Chain {
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        length: u64,
        /// Accepted for compatibility; the stages are always the contender's actors/tasks.
        #[arg(long, value_enum, default_value_t = ChainMode::Actors)]
        mode: ChainMode,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMode {
    Actors,
    Threads,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// tokio tasks + bounded mpsc channels, multi-thread runtime
    Tokio,
    /// the same code on a current-thread runtime
    TokioCurrent,
    /// actix actors on the actix System
    Actix,
    /// ractor actors
    Ractor,
    /// kameo actors
    Kameo,
}

impl Contender {
    pub fn name(self) -> &'static str {
        match self {
            Contender::Tokio => "tokio",
            Contender::TokioCurrent => "tokio-current",
            Contender::Actix => "actix",
            Contender::Ractor => "ractor",
            Contender::Kameo => "kameo",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Ring,
    Spawn,
    Counter,
    Chain,
}

// ---------------------------------------------------------------------------------------------
// What a contender implements
// ---------------------------------------------------------------------------------------------

/// One repetition of `ring`.
pub struct RingRun {
    /// Spawning and connecting the N actors.
    pub construct: Duration,
    /// From sending the first token until the origin has seen M rounds.
    pub elapsed: Duration,
    /// Sum over all actors of the tokens each one received.
    pub received: u64,
    /// The token's value when the run ended.
    pub final_value: u64,
}

/// One repetition of `spawn`.
pub struct SpawnRun {
    /// From before the first spawn until all N actors have run their start-up.
    pub elapsed: Duration,
    /// VmRSS right after all N were spawned and started (before stopping them).
    pub rss_after: Option<u64>,
    /// How many actors ran their start-up.
    pub started: u64,
}

/// One repetition of `counter`.
pub struct CounterRun {
    /// From starting the producers until the `GetAndReset` reply arrived.
    pub elapsed: Duration,
    /// The `GetAndReset` reply.
    pub reply: u64,
}

/// One repetition of `chain`.
pub struct ChainRun {
    /// From starting to send until the sink has received all N messages.
    pub elapsed: Duration,
    /// Messages the sink received (counted after the chain was shut down).
    pub received: u64,
    /// Their sum.
    pub sum: u64,
}

/// A contender: runs one repetition of a scenario at a time, inside its own runtime.
pub trait Peer {
    /// Crate names and versions for `machine.runtime`.
    fn runtime(&self) -> String;
    /// One short sentence on how the contender is configured for this scenario.
    fn notes(&self, scenario: Scenario) -> String;
    fn ring(&mut self, actors: u64, rounds: u64) -> RingRun;
    fn spawn(&mut self, actors: u64) -> SpawnRun;
    fn counter(&mut self, producers: u64, per_producer: u64) -> CounterRun;
    fn chain(&mut self, length: u64) -> ChainRun;
}

/// Counts actors that have run their start-up (or shut down) and wakes one waiter when the
/// expected number is reached. Works on every runtime here, since all of them sit on tokio.
pub struct Latch {
    count: AtomicU64,
    target: u64,
    notify: Notify,
}

impl Latch {
    pub fn new(target: u64) -> Arc<Self> {
        Arc::new(Latch { count: AtomicU64::new(0), target, notify: Notify::new() })
    }

    /// Called once by each actor.
    pub fn arrive(&self) {
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            // `notify_one` stores a permit when nobody waits yet, so the wake-up is not lost.
            self.notify.notify_one();
        }
    }

    /// Resolves once `target` actors have arrived.
    pub async fn wait(&self) {
        while self.count.load(Ordering::Acquire) < self.target {
            self.notify.notified().await;
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

// ---------------------------------------------------------------------------------------------
// Repetitions, checks and output
// ---------------------------------------------------------------------------------------------

/// One result line's worth of measurements.
struct Metric {
    name: &'static str,
    unit: &'static str,
    samples: Vec<f64>,
}

impl Metric {
    fn new(name: &'static str, unit: &'static str) -> Self {
        Metric { name, unit, samples: Vec::new() }
    }
}

/// Runs the scenario `warmup + repeat` times, checks every repetition, prints one JSON line
/// per metric and returns the exit status (non-zero when any check failed).
pub fn drive(cli: &Cli, peer: &mut dyn Peer) -> ExitCode {
    let contender = cli.contender.name();
    let total = cli.warmup + cli.repeat;
    let mut validated = true;
    // Progress goes to stderr; `what` names the repetition.
    let label = |i: u64| {
        if i < cli.warmup {
            format!("warm-up {}/{}", i + 1, cli.warmup)
        } else {
            format!("rep {}/{}", i - cli.warmup + 1, cli.repeat)
        }
    };

    let (scenario, params, metrics) = match cli.scenario {
        ScenarioArgs::Ring { actors, rounds } => {
            let mut construct = Metric::new("construct", "ms");
            let mut throughput = Metric::new("throughput", "msgs/s");
            let total_msgs = actors * rounds;
            for i in 0..total {
                let run = peer.ring(actors, rounds);
                let ok = run.received == total_msgs && run.final_value == rounds;
                let rate = total_msgs as f64 / run.elapsed.as_secs_f64();
                eprintln!(
                    "[{contender}] ring {}: construct {:.3} ms, {:.0} msgs/s, received {} of {}, final value {}{}",
                    label(i), ms(run.construct), rate, run.received, total_msgs, run.final_value,
                    if ok { "" } else { "  CHECK FAILED" }
                );
                validated &= ok;
                if i >= cli.warmup {
                    construct.samples.push(ms(run.construct));
                    throughput.samples.push(rate);
                }
            }
            (Scenario::Ring, json!({"actors": actors, "rounds": rounds}), vec![construct, throughput])
        }
        ScenarioArgs::Spawn { actors } => {
            let mut spawn_time = Metric::new("spawn_time", "us/actor");
            let mut memory = Metric::new("memory", "bytes/actor");
            // Baseline taken once, before the first repetition's spawn (warm-up included).
            let baseline = vm_rss_bytes();
            for i in 0..total {
                let run = peer.spawn(actors);
                let ok = run.started == actors;
                let per_actor_us = run.elapsed.as_secs_f64() * 1e6 / actors as f64;
                let bytes = match (baseline, run.rss_after) {
                    (Some(before), Some(after)) => (after as f64 - before as f64) / actors as f64,
                    _ => f64::NAN,
                };
                eprintln!(
                    "[{contender}] spawn {}: {:.3} us/actor, {:.0} bytes/actor, started {} of {}{}",
                    label(i), per_actor_us, bytes, run.started, actors,
                    if ok { "" } else { "  CHECK FAILED" }
                );
                validated &= ok && bytes.is_finite();
                if i >= cli.warmup {
                    spawn_time.samples.push(per_actor_us);
                    memory.samples.push(bytes);
                }
            }
            (Scenario::Spawn, json!({"actors": actors}), vec![spawn_time, memory])
        }
        ScenarioArgs::Counter { producers, per_producer } => {
            let producers = producers.unwrap_or_else(|| cores() as u64);
            let mut throughput = Metric::new("throughput", "msgs/s");
            let expected = producers * per_producer * 100;
            for i in 0..total {
                let run = peer.counter(producers, per_producer);
                let ok = run.reply == expected;
                let rate = (producers * per_producer) as f64 / run.elapsed.as_secs_f64();
                eprintln!(
                    "[{contender}] counter {}: {:.0} msgs/s, reply {} (expected {}){}",
                    label(i), rate, run.reply, expected,
                    if ok { "" } else { "  CHECK FAILED" }
                );
                validated &= ok;
                if i >= cli.warmup {
                    throughput.samples.push(rate);
                }
            }
            let params = json!({"producers": producers, "per_producer": per_producer});
            (Scenario::Counter, params, vec![throughput])
        }
        ScenarioArgs::Chain { length, mode } => {
            if mode == ChainMode::Threads {
                eprintln!("[{contender}] note: --mode threads is ignored; the stages are {contender} actors/tasks");
            }
            let mut elapsed = Metric::new("elapsed", "ms");
            let expected_sum = length * (length + 1) / 2;
            for i in 0..total {
                let run = peer.chain(length);
                let ok = run.received == length && run.sum == expected_sum;
                eprintln!(
                    "[{contender}] chain {}: {:.3} ms, sink received {} (sum {}, expected {}){}",
                    label(i), ms(run.elapsed), run.received, run.sum, expected_sum,
                    if ok { "" } else { "  CHECK FAILED" }
                );
                validated &= ok;
                if i >= cli.warmup {
                    elapsed.samples.push(ms(run.elapsed));
                }
            }
            (Scenario::Chain, json!({"length": length, "mode": "actors"}), vec![elapsed])
        }
    };

    // The suite's schema, machine description and statistics (crate troupe-results).
    let machine = Machine::current(peer.runtime());
    let notes = peer.notes(scenario);
    let Value::Object(params) = params else {
        unreachable!("params are built as objects")
    };
    for metric in metrics {
        let mut record = Record::new(
            scenario_name(scenario),
            metric.name,
            contender,
            params.clone(),
            metric.unit,
            metric.samples,
            &notes,
        )
        .with_machine(machine.clone());
        record.validated = validated;
        match serde_json::to_string(&record) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("cannot print a record: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if validated {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn scenario_name(s: Scenario) -> &'static str {
    match s {
        Scenario::Ring => "ring",
        Scenario::Spawn => "spawn",
        Scenario::Counter => "counter",
        Scenario::Chain => "chain",
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ---------------------------------------------------------------------------------------------
// Machine description
// ---------------------------------------------------------------------------------------------

/// Resident set size of this process in bytes, from `/proc/self/status` (`VmRSS: … kB`).
pub fn vm_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Versions recorded by build.rs from Cargo.lock.
pub mod versions {
    pub const TOKIO: &str = env!("PEER_VERSION_TOKIO");
    pub const ACTIX: &str = env!("PEER_VERSION_ACTIX");
    pub const ACTIX_RT: &str = env!("PEER_VERSION_ACTIX_RT");
    pub const RACTOR: &str = env!("PEER_VERSION_RACTOR");
    pub const KAMEO: &str = env!("PEER_VERSION_KAMEO");
    pub const RUSTC: &str = env!("PEER_RUSTC_VERSION");
}
