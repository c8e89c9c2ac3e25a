//! `troupe-bench`: the seed scenarios on troupe, measured honestly.
//!
//! Every scenario warms up, repeats, reports median/min/max with every sample, validates its
//! own work (a run that did less fails), and can print JSON lines (`--json`) in the schema
//! every peer program shares (`peers/PROTOCOL.md`).

mod chain;
mod compare;
mod counter;
mod features;
mod report;
mod ring;
mod spawn;
mod store;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use troupe::{Placement, System};

use report::Runner;

#[derive(Parser, Debug)]
#[command(
    name = "troupe-bench",
    version,
    about = "Benchmarks for the troupe actor runtime"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Measured repetitions of each scenario.
    #[arg(long, global = true, default_value_t = 5)]
    repeat: usize,
    /// Unmeasured warm-up repetitions before the measured ones.
    #[arg(long, global = true, default_value_t = 1)]
    warmup: usize,
    /// Print one JSON object per result (JSON Lines) instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Tiny sizes and 2 repetitions: proves every scenario works end to end in seconds.
    #[arg(long, global = true)]
    quick: bool,
    /// Worker threads in troupe's pool (default: one per core).
    #[arg(long, global = true)]
    workers: Option<usize>,
    /// Messages an actor handles per turn before yielding its worker.
    #[arg(long, global = true, default_value_t = 64)]
    throughput: usize,
    /// Where the scenario's actors run: `pool` (lightweight) or `thread` (one OS thread each;
    /// ring, counter and chain).
    #[arg(long, global = true, value_enum, default_value_t = PlacementArg::Pool)]
    placement: PlacementArg,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Seed 000: N actors in a ring pass a token M times around.
    Ring {
        #[arg(long, default_value_t = 100)]
        actors: u32,
        #[arg(long, default_value_t = 1_000_000)]
        rounds: u64,
        /// Give every node a bounded mailbox of this capacity (to see what bounding costs).
        #[arg(long)]
        bounded: Option<usize>,
    },
    /// The cost of a supervised restart: N messages that each panic a supervised child.
    Restart {
        #[arg(long, default_value_t = 100_000)]
        failures: u64,
    },
    /// Ask round trips between two actors: a plain reply, and one deferred (ctx.reply_later)
    /// and sent from a pipe continuation.
    Ask {
        #[arg(long, default_value_t = 100_000)]
        asks: u64,
    },
    /// Timer throughput: N timers scheduled by an actor (then again, cancelling every other).
    Timers {
        #[arg(long, default_value_t = 1_000_000)]
        timers: u64,
    },
    /// Seed 000 at scale: spawn N idle actors; time per spawn, memory per actor.
    Spawn {
        #[arg(long, default_value_t = 1_000_000)]
        actors: usize,
    },
    /// Seed 002: P producers tell K messages each to one counting actor, then ask for the sum.
    Counter {
        /// Producers (default: one per worker).
        #[arg(long)]
        producers: Option<usize>,
        /// Messages per producer; repeat the flag or give a list (default: the seed's series).
        #[arg(long, value_delimiter = ',')]
        per_producer: Vec<u64>,
    },
    /// Seed 004: a chain of N stages carries N messages (N² hops).
    Chain {
        #[arg(long, default_value_t = 1_000)]
        length: usize,
        #[arg(long, value_enum, default_value_t = chain::Mode::Actors)]
        mode: chain::Mode,
    },
    /// Seed 001: the online store on troupe beside a thread-per-request store, under the
    /// seed's load (300 users per kind), healthy and with search hanging 30 s per call; then
    /// the highest index rate with p99 under 10 ms (more options: `troupe-store bench`).
    Store {
        /// Repetitions.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
        runs: u64,
        /// Skip the capacity search.
        #[arg(long)]
        no_open: bool,
    },
    /// Every scenario with the seeds' sizes (about four minutes on 2 cores).
    All {
        /// Also run the chain of 10,000 OS threads (takes many minutes).
        #[arg(long)]
        full: bool,
    },
    /// Every contender (troupe and the peers under `peers/`) on the same scenarios, interleaved;
    /// prints a table with ratios and writes raw JSON and Markdown into the results folder.
    Compare {
        /// Scenarios to compare (default: all).
        #[arg(value_enum)]
        scenarios: Vec<compare::Scenario>,
        /// Only these contenders (comma-separated names, e.g. troupe,erlang,go-chan).
        #[arg(long, value_delimiter = ',')]
        contenders: Vec<String>,
        /// Folder holding the peer programs (default: ./peers, else the repository's).
        #[arg(long)]
        peers_dir: Option<std::path::PathBuf>,
        /// Folder to write the results into.
        #[arg(long, default_value = "results")]
        results_dir: std::path::PathBuf,
        /// Do not run the peers' build scripts (use what is built).
        #[arg(long)]
        no_build: bool,
        /// Rounds of the ring (default 100,000: 10 M messages for 100 actors).
        #[arg(long)]
        ring_rounds: Option<u64>,
        /// Longest wait for one contender process, in seconds.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PlacementArg {
    Pool,
    Thread,
}

impl From<PlacementArg> for Placement {
    fn from(p: PlacementArg) -> Self {
        match p {
            PlacementArg::Pool => Placement::Pool,
            PlacementArg::Thread => Placement::Thread,
        }
    }
}

/// How the troupe system under test is configured.
#[derive(Debug, Clone)]
pub struct SystemConfig {
    workers: usize,
    throughput: usize,
}

impl SystemConfig {
    pub fn build(&self) -> Result<System> {
        Ok(System::builder()
            .workers(self.workers)
            .throughput(self.throughput)
            .build()?)
    }

    pub fn notes(&self) -> String {
        format!(
            "troupe pool of {} workers, throughput {}",
            self.workers, self.throughput
        )
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let g = &cli.global;
    let runner = Runner {
        warmup: if g.quick { g.warmup.min(1) } else { g.warmup },
        repeat: if g.quick { g.repeat.min(2) } else { g.repeat },
        json: g.json,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = SystemConfig {
        workers: g.workers.unwrap_or(cores),
        throughput: g.throughput,
    };
    let quick = g.quick;

    match cli.command {
        Command::Restart { failures } => features::restarts(
            &runner,
            &config,
            if quick { failures.min(100) } else { failures },
        ),
        Command::Ask { asks } => {
            features::asks(&runner, &config, if quick { asks.min(1_000) } else { asks })
        }
        Command::Timers { timers } => features::timers(
            &runner,
            &config,
            if quick { timers.min(1_000) } else { timers },
        ),
        Command::Ring {
            actors,
            rounds,
            bounded,
        } => {
            let (actors, rounds) = if quick {
                (actors.min(100), rounds.min(100))
            } else {
                (actors, rounds)
            };
            ring::run(
                &runner,
                &config,
                ring::RingParams {
                    actors,
                    rounds,
                    placement: g.placement.into(),
                    bounded,
                },
            )
        }
        Command::Spawn { actors } => spawn::run(
            &runner,
            &config,
            if quick { actors.min(1000) } else { actors },
        ),
        Command::Counter {
            producers,
            per_producer,
        } => {
            let producers = producers.unwrap_or(config.workers);
            let per = counter_series(per_producer, quick);
            counter::run(&runner, &config, producers, &per, g.placement.into())
        }
        Command::Chain { length, mode } => chain::run(
            &runner,
            &config,
            if quick { length.min(100) } else { length },
            mode,
            g.placement.into(),
        ),
        Command::Store { runs, no_open } => {
            store::run(&runner, &store::config(quick, runs as usize, !no_open))
        }
        Command::All { full } => all(&runner, &config, quick, full),
        Command::Compare {
            scenarios,
            contenders,
            peers_dir,
            results_dir,
            no_build,
            ring_rounds,
            timeout,
        } => {
            let options = compare::CompareOptions {
                scenarios: if scenarios.is_empty() {
                    vec![
                        compare::Scenario::Ring,
                        compare::Scenario::Spawn,
                        compare::Scenario::Counter,
                        compare::Scenario::Chain,
                    ]
                } else {
                    scenarios
                },
                only: contenders,
                // Absolute, because each peer's build script runs in its own folder.
                peers_dir: std::path::absolute(
                    peers_dir.unwrap_or_else(compare::default_peers_dir),
                )?,
                results_dir,
                build: !no_build,
                quick,
                ring_rounds,
                timeout: std::time::Duration::from_secs(timeout),
            };
            compare::validate(&options)?;
            let runner = Runner {
                warmup: 0,
                repeat: if quick {
                    1
                } else {
                    g.repeat.min(runner.repeat)
                },
                json: g.json,
            };
            compare::run(&runner, &options)
        }
    }
}

fn counter_series(given: Vec<u64>, quick: bool) -> Vec<u64> {
    let series = if given.is_empty() {
        vec![300, 3_000, 30_000, 300_000, 3_000_000]
    } else {
        given
    };
    if quick {
        series.into_iter().filter(|&k| k <= 3_000).collect()
    } else {
        series
    }
}

/// The whole suite. Long scenarios run at most 3 measured repetitions.
fn all(runner: &Runner, config: &SystemConfig, quick: bool, full: bool) -> Result<()> {
    let long = Runner {
        repeat: runner.repeat.min(3),
        ..runner.clone()
    };
    let rings: &[(u32, u64, Placement)] = if quick {
        &[
            (100, 100, Placement::Pool),
            (1_000, 10, Placement::Pool),
            (10, 10, Placement::Thread),
        ]
    } else {
        &[
            (100, 1_000_000, Placement::Pool),
            (20_000, 1_000, Placement::Pool),
            (100, 1_000, Placement::Thread),
        ]
    };
    for &(actors, rounds, placement) in rings {
        ring::run(
            &long,
            config,
            ring::RingParams {
                actors,
                rounds,
                placement,
                bounded: None,
            },
        )?;
    }
    // The price of a bounded mailbox, beside the first ring above.
    let (actors, rounds, _) = rings[0];
    ring::run(
        &long,
        config,
        ring::RingParams {
            actors,
            rounds: rounds / 10,
            placement: Placement::Pool,
            bounded: Some(1_000),
        },
    )?;
    features::restarts(runner, config, if quick { 100 } else { 100_000 })?;
    features::timers(runner, config, if quick { 1_000 } else { 1_000_000 })?;
    features::asks(runner, config, if quick { 1_000 } else { 100_000 })?;
    spawn::run(runner, config, if quick { 1_000 } else { 1_000_000 })?;
    counter::run(
        runner,
        config,
        config.workers,
        &counter_series(Vec::new(), quick),
        Placement::Pool,
    )?;
    let actor_chains: &[usize] = if quick {
        &[10, 100]
    } else {
        &[10, 100, 1_000, 10_000]
    };
    for &n in actor_chains {
        chain::run(&long, config, n, chain::Mode::Actors, Placement::Pool)?;
    }
    let thread_chains: &[usize] = match (quick, full) {
        (true, _) => &[10, 100],
        (false, false) => &[10, 100, 1_000],
        (false, true) => &[10, 100, 1_000, 10_000],
    };
    for &n in thread_chains {
        chain::run(&long, config, n, chain::Mode::Threads, Placement::Pool)?;
    }
    store::run(runner, &store::config(quick, 1, true))?;
    Ok(())
}
