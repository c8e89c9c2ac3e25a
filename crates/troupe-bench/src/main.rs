//! `troupe-bench`: the seed scenarios on troupe, measured honestly.
//!
//! Every scenario warms up, repeats, reports median/min/max with every sample, validates its
//! own work (a run that did less fails), and can print JSON lines (`--json`) in the schema
//! every peer program shares (`peers/PROTOCOL.md`).

mod chain;
mod compare;
mod counter;
mod estimate;
mod fanout;
mod router;
mod features;
mod remote;
mod report;
mod observe;
mod ring;
mod sim;
mod spawn;
mod store;

use anyhow::{bail, Context, Result};
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
    /// Measured repetitions of each scenario (1-1000).
    #[arg(long, global = true, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    repeat: u64,
    /// Unmeasured warm-up repetitions before the measured ones (0-1000).
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u64).range(0..=1000))]
    warmup: u64,
    /// Print one JSON object per result (JSON Lines) instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Tiny sizes and 2 repetitions: proves every scenario works end to end in seconds.
    #[arg(long, global = true)]
    quick: bool,
    /// Worker threads in troupe's pool (1-1024; default: one per core).
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..=1024))]
    workers: Option<u64>,
    /// Messages an actor handles per turn before yielding its worker (1-1000000).
    #[arg(long, global = true, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    throughput: u64,
    /// Where the scenario's actors run: `pool` (lightweight) or `thread` (one OS thread each;
    /// ring, counter and chain).
    #[arg(long, global = true, value_enum, default_value_t = PlacementArg::Pool)]
    placement: PlacementArg,
    /// Observe troupe's system: `off`; `on` (`SystemBuilder::observe`: the directory of actors,
    /// handler times, waits); `spans` (`trace_messages`: also a span per handled message, with
    /// a tracing registry installed to receive them, as an exporter would).
    #[arg(long, global = true, value_enum, default_value_t = ObserveArg::Off)]
    observe: ObserveArg,
    /// Busy threads (0-64) that spin beside the measurement for the whole run, as other
    /// programs on a shared machine would: how a scenario (or, with `compare`, every
    /// contender alike) holds up when the cores are oversubscribed.
    #[arg(long, global = true, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=64))]
    contention: u64,
}

/// `--contention N`: N threads spinning from the start of the run to its end.
struct Contention {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Contention {
    fn start(threads: usize) -> Result<Self> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..threads)
            .map(|i| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(format!("contention-{i}"))
                    .spawn(move || {
                        let mut x = 0u64;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            for _ in 0..1_000 {
                                x = std::hint::black_box(
                                    x.wrapping_mul(6364136223846793005).wrapping_add(1),
                                );
                            }
                        }
                    })
                    .context("starting a contention thread")
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { stop, threads })
    }
}

impl Drop for Contention {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `--observe`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserveArg {
    Off,
    On,
    Spans,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Seed 000: N actors in a ring pass a token M times around.
    Ring {
        /// Actors in the ring (2-10000000; 216-232 bytes each).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(2..=10_000_000))]
        actors: u32,
        /// Times the token goes round (1-10000000000).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000_000))]
        rounds: u64,
        /// Give every node a bounded mailbox of this capacity (2-1000000), to see what bounding
        /// costs (a node may hold its setup message and the token at once).
        #[arg(long, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
        bounded: Option<u64>,
    },
    /// The cost of a supervised restart: N messages that each panic a supervised child.
    Restart {
        /// Panicking messages (1-100000000).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        failures: u64,
    },
    /// Ask round trips between two actors: a plain reply, and one deferred (a DeferredHandler)
    /// and sent from a pipe continuation.
    Ask {
        /// Asks per measurement (1-1000000000).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        asks: u64,
    },
    /// Sends from outside the pool: one plain thread, or one tokio task, tells M messages to N
    /// actors round-robin (a little arithmetic each), then asks every actor for its sum.
    Fanout {
        /// Actors (1-1000000).
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        actors: u64,
        /// Messages in all (1-1000000000).
        #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        messages: u64,
        /// Where the sends come from (default: both, one after the other).
        #[arg(long, value_enum, value_delimiter = ',')]
        from: Vec<fanout::From>,
        /// Each actor's catch-up (`SpawnOptions::catch_up`, 0-2147483648; 0: off): once this
        /// many messages wait for an actor, the sending thread waits for half of them to be
        /// read. The default is the capacity of the Go peer's buffered channels.
        #[arg(long, default_value_t = fanout::CATCH_UP as u64, value_parser = clap::value_parser!(u64).range(0..=1 << 31))]
        catch_up: u64,
    },
    /// A router beside a hand-written `Vec<Addr>` round robin: one plain thread tells M
    /// messages to N actors through each way of picking, then asks every actor for its sum.
    Router {
        /// Actors (1-1000000).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        actors: u64,
        /// Messages in all (1-1000000000).
        #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        messages: u64,
        /// The ways to pick (default: all, the Vec<Addr> baseline first).
        #[arg(long, value_enum, value_delimiter = ',')]
        pick: Vec<router::Pick>,
    },
    /// Timer throughput: N timers scheduled by an actor (then again, cancelling every other).
    Timers {
        /// Timers scheduled (1-100000000).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        timers: u64,
    },
    /// Seed 000 at scale: spawn N idle actors; time per spawn, memory per actor.
    Spawn {
        /// Actors spawned (1-20000000; 216-232 bytes each).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=20_000_000))]
        actors: u64,
    },
    /// An observed system of N idle actors: the time to read a page of them, a page from the
    /// middle, one by id, all of them page by page, and the handler times over all.
    Observe {
        /// Idle actors (2-20000000).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(2..=20_000_000))]
        actors: u64,
        /// Actors per page (1-10000).
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        page: u64,
    },
    /// Seed 002: P producers tell K messages each to one counting actor, then ask for the sum.
    Counter {
        /// Producers (1-1024; default: one per worker).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
        producers: Option<u64>,
        /// Messages per producer (1-1000000000 each); repeat the flag or give a list (default:
        /// the seed's series).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        per_producer: Vec<u64>,
    },
    /// Seed 004: a chain of N stages carries N messages (N² hops).
    Chain {
        /// Stages, and messages (2-100000 for actors, 2-20000 for threads: N² hops).
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(2..=100_000))]
        length: u64,
        /// What the stages are: troupe actors, or OS threads joined by blocking channels.
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
    /// Actors across processes over NATS: ask round trips (rate, p50, p99) and one-way tells
    /// to an actor in a second process, beside the same in one process and beside NATS
    /// request-reply by itself, each with and without TLS; and the wire's two candidate
    /// encodings. Starts its own nats-servers on free loopback ports (installed by
    /// scripts/install-nats-server.sh when missing), which let in only its own users (nkeys
    /// made at run time).
    Remote {
        /// Sequential asks per measurement (1-10000000).
        #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        asks: u64,
        /// One-way tells per measurement (1-1000000000).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        messages: u64,
    },
    /// The simulator (troupe::sim) itself: steps per wall second on one core (a token round a
    /// ring of actors; timers that make the simulated clock jump), and simulated seconds per
    /// wall second.
    Sim {
        /// Actors in the ring (2-1000000).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
        actors: u64,
        /// Hops of the token (1-1000000000).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
        hops: u64,
        /// Timers set 1 ms apart (1-100000000).
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        timers: u64,
        /// Skip the store's scenario (seed 001 in simulation, about half a second a run).
        #[arg(long)]
        no_store: bool,
    },
    /// The serving side of `remote`, started by it as a second process.
    #[command(hide = true)]
    RemoteServe {
        /// The NATS server to connect to.
        #[arg(long)]
        url: String,
        /// The file holding the process's nkey seed.
        #[arg(long)]
        nkey: Option<std::path::PathBuf>,
        /// The authority of the server's TLS certificate (TLS if given).
        #[arg(long)]
        ca: Option<std::path::PathBuf>,
    },
    /// Every scenario with the seeds' sizes; the seeds' scenarios (ring, spawn, counter, chain)
    /// run troupe beside every peer installed under `peers/`, interleaved as `compare` runs
    /// them, so the report is the side-by-side page. Writes the results, the comparison's
    /// tables and the HTML report into `<results-dir>/all-<UTC time>/`. `--quick` runs troupe
    /// alone at tiny sizes.
    All {
        /// Also run the chain of 10,000 OS threads (takes many minutes).
        #[arg(long)]
        full: bool,
        /// Folder for the run's results (created before anything runs).
        #[arg(long, default_value = "results")]
        results_dir: std::path::PathBuf,
        /// Folder holding the peer programs (default: ./peers, else the repository's).
        #[arg(long)]
        peers_dir: Option<std::path::PathBuf>,
        /// Run troupe alone: no peer (the seeds' scenarios still run as compare runs them).
        #[arg(long)]
        no_peers: bool,
        /// Do not run the peers' build scripts (use what is built).
        #[arg(long)]
        no_build: bool,
    },
    /// Reads result files (JSON Lines, the schema of `peers/PROTOCOL.md`) and writes one
    /// self-contained HTML page with a chart and a table per scenario into `--out`; several
    /// files (other commits, other machines) are drawn side by side as series.
    Report {
        /// Result files: `results.jsonl` of `all`, `compare`, `troupe-trading bench` or
        /// `troupe-store bench`, or any `--json` output.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Folder to write `index.html` into (created if missing).
        #[arg(long)]
        out: std::path::PathBuf,
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
        /// Rounds of the ring (1-100000000; default 100,000: 10 M messages for 100 actors).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        ring_rounds: Option<u64>,
        /// Longest wait for one contender process, in seconds (1-86400).
        #[arg(long, default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..=86_400))]
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
    observe: ObserveArg,
    /// Busy threads running beside the measurement (`--contention`).
    contention: usize,
}

impl SystemConfig {
    pub fn build(&self) -> Result<System> {
        Ok(self.builder().build()?)
    }

    /// The builder `build` uses, for a scenario that changes one more setting.
    pub fn builder(&self) -> troupe::SystemBuilder {
        let builder = System::builder()
            .workers(self.workers)
            .throughput(self.throughput);
        match self.observe {
            ObserveArg::Off => builder,
            ObserveArg::On => builder.observe(),
            ObserveArg::Spans => builder.trace_messages(),
        }
    }

    /// The contender a record of this configuration is of: `troupe`, `troupe-thread`, or, when
    /// observed, `troupe-observed` or `troupe-traced` (the names `compare` runs them under).
    pub fn contender(&self, placement: Placement) -> &'static str {
        match (placement, self.observe) {
            (Placement::Thread, _) => "troupe-thread",
            (_, ObserveArg::On) => "troupe-observed",
            (_, ObserveArg::Spans) => "troupe-traced",
            (_, ObserveArg::Off) => "troupe",
        }
    }

    /// What a reference measured in the same run ran beside: busy threads, or nothing.
    pub fn contention_note(&self) -> String {
        match self.contention {
            0 => "no busy threads beside it".to_owned(),
            n => format!("{n} busy threads beside it"),
        }
    }

    pub fn notes(&self) -> String {
        let observed = match self.observe {
            ObserveArg::Off => "",
            ObserveArg::On => ", observed",
            ObserveArg::Spans => ", observed with a span per message",
        };
        let contention = match self.contention {
            0 => String::new(),
            n => format!(", {n} busy threads beside it"),
        };
        format!(
            "troupe pool of {} workers, throughput {}{observed}{contention}",
            self.workers, self.throughput
        )
    }
}

/// Options that set a scenario's size, which `--quick` would override.
const SIZES: &[&str] = &[
    "actors",
    "hops",
    "rounds",
    "bounded",
    "failures",
    "asks",
    "messages",
    "timers",
    "producers",
    "per_producer",
    "length",
    "runs",
];

/// Contradictions the parser cannot see, each a one-line error before anything runs.
fn check_combinations(matches: &clap::ArgMatches, cli: &Cli) -> Result<()> {
    use clap::parser::ValueSource;
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(());
    };
    let given = |id: &str| {
        sub.ids().any(|known| known.as_str() == id)
            && sub.value_source(id) == Some(ValueSource::CommandLine)
    };
    if let Command::Report { .. } = &cli.command {
        let run_options = [
            "repeat",
            "warmup",
            "json",
            "quick",
            "workers",
            "throughput",
            "placement",
            "observe",
            "contention",
        ];
        if let Some(option) = run_options.iter().find(|id| given(id)) {
            bail!("report reads results and runs nothing: --{option} does not apply");
        }
    }
    if let Command::All {
        peers_dir,
        no_peers,
        no_build,
        ..
    } = &cli.command
    {
        if cli.global.quick {
            for (id, set) in [
                ("peers-dir", peers_dir.is_some()),
                ("no-peers", *no_peers),
                ("no-build", *no_build),
            ] {
                if set {
                    bail!("all --quick runs troupe alone: --{id} does not apply");
                }
            }
        } else if *no_peers && (peers_dir.is_some() || *no_build) {
            bail!("--no-peers runs no peer: drop --peers-dir and --no-build");
        }
    }
    if cli.global.quick && name != "compare" {
        if let Some(size) = SIZES.iter().find(|id| given(id)) {
            bail!(
                "--quick sets the sizes itself: drop --{} or --quick",
                size.replace('_', "-")
            );
        }
    }
    if given("placement") {
        let takes_placement = match &cli.command {
            Command::Ring { .. } | Command::Counter { .. } => true,
            Command::Chain { mode, .. } => *mode == chain::Mode::Actors,
            _ => false,
        };
        if !takes_placement {
            bail!("--placement applies to ring, counter and chain with --mode actors only (not {name})");
        }
    }
    if given("observe") {
        let takes_observe = matches!(
            &cli.command,
            Command::Ring { .. }
                | Command::Counter { .. }
                | Command::Spawn { .. }
                | Command::Fanout { .. }
        ) || matches!(&cli.command, Command::Chain { mode, .. } if *mode == chain::Mode::Actors);
        if !takes_observe {
            bail!("--observe applies to ring, counter, spawn, fanout and chain with --mode actors only (not {name}); compare runs it as the contenders troupe-observed and troupe-traced");
        }
    }
    if let Command::Chain {
        length,
        mode: chain::Mode::Threads,
    } = &cli.command
    {
        if *length > 20_000 {
            bail!("a chain of OS threads is at most 20000 long (each stage is a thread); {length} asked");
        }
    }
    Ok(())
}

/// Errors end the program with one line (the error and its causes), never a backtrace.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("troupe-bench: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    check_combinations(&matches, &cli)?;
    let g = &cli.global;
    let runner = Runner {
        warmup: if g.quick { g.warmup.min(1) } else { g.warmup } as usize,
        repeat: if g.quick { g.repeat.min(2) } else { g.repeat } as usize,
        json: g.json,
        kept: Default::default(),
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let config = SystemConfig {
        workers: g.workers.map_or(cores, |w| w as usize),
        throughput: g.throughput as usize,
        observe: g.observe,
        contention: g.contention as usize,
    };
    let _contention = Contention::start(g.contention as usize)?;
    if g.contention > 0 {
        eprintln!(
            "{} busy threads spin beside the measurement until the run ends",
            g.contention
        );
    }
    if g.observe == ObserveArg::Spans {
        // Spans are made only when a subscriber wants them: a registry keeps each span's data
        // from its start to its close, as an exporter's layer sits on.
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber =
            tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::INFO);
        tracing::subscriber::set_global_default(subscriber).map_err(|e| {
            anyhow::anyhow!("--observe spans: a tracing subscriber is already set: {e}")
        })?;
    }
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
        Command::Fanout {
            actors,
            messages,
            from,
            catch_up,
        } => fanout::run(
            &runner,
            &config,
            if quick { actors.min(100) } else { actors } as usize,
            if quick {
                messages.min(10_000)
            } else {
                messages
            },
            &fanout_sources(from),
            catch_up as usize,
        ),
        Command::Sim {
            actors,
            hops,
            timers,
            no_store,
        } => sim::run(
            &runner,
            if quick { actors.min(10) } else { actors },
            if quick { hops.min(1_000) } else { hops },
            if quick { timers.min(100) } else { timers },
            !no_store && !quick,
            if quick { 0.5 } else { 5.0 },
        ),
        Command::Router {
            actors,
            messages,
            pick,
        } => router::run(
            &runner,
            &config,
            if quick { actors.min(10) } else { actors } as usize,
            if quick {
                messages.min(10_000)
            } else {
                messages
            },
            if pick.is_empty() {
                &router::Pick::ALL
            } else {
                &pick
            },
        ),
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
                    bounded: bounded.map(|b| b as usize),
                },
            )
        }
        Command::Observe { actors, page } => observe::run(
            &runner,
            config.workers,
            if quick { actors.min(10_000) } else { actors } as usize,
            page as usize,
        ),
        Command::Spawn { actors } => spawn::run(
            &runner,
            &config,
            if quick { actors.min(1000) } else { actors } as usize,
        ),
        Command::Counter {
            producers,
            per_producer,
        } => {
            let producers = producers.map_or(config.workers, |p| p as usize);
            let per = counter_series(per_producer, quick);
            counter::run(&runner, &config, producers, &per, g.placement.into())
        }
        Command::Chain { length, mode } => chain::run(
            &runner,
            &config,
            if quick { length.min(100) } else { length } as usize,
            mode,
            g.placement.into(),
        ),
        Command::Remote { asks, messages } => remote::run(
            &runner,
            &config,
            if quick { asks.min(200) } else { asks },
            if quick {
                messages.min(10_000)
            } else {
                messages
            },
        ),
        Command::RemoteServe { url, nkey, ca } => {
            remote::serve(&url, &remote::ServeAccess { nkey, ca }, &config)
        }
        Command::Store { runs, no_open } => {
            store::run(&runner, &store::config(quick, runs as usize, !no_open))
        }
        Command::All {
            full,
            results_dir,
            peers_dir,
            no_peers,
            no_build,
        } => {
            // The folder is made before anything runs, so a long run is never lost to it.
            let folder = results_dir.join(format!("all-{}", troupe_results::utc_stamp()));
            let seeds = (!quick)
                .then(|| -> Result<compare::CompareOptions> {
                    let options = compare::CompareOptions {
                        scenarios: vec![
                            compare::Scenario::Ring,
                            compare::Scenario::Spawn,
                            compare::Scenario::Counter,
                            compare::Scenario::Chain,
                        ],
                        only: Vec::new(),
                        peers_dir: std::path::absolute(
                            peers_dir.unwrap_or_else(compare::default_peers_dir),
                        )?,
                        results_dir: folder.clone(),
                        build: !no_build,
                        sizes: compare::Sizes::Seeds { full },
                        peers: !no_peers,
                        ring_rounds: None,
                        timeout: std::time::Duration::from_secs(1800),
                    };
                    compare::validate(&options)?;
                    Ok(options)
                })
                .transpose()?;
            std::fs::create_dir_all(&folder).with_context(|| {
                format!("cannot create the results folder {}", folder.display())
            })?;
            let outcome = all(&runner, &config, quick, seeds.as_ref(), &folder);
            // What was measured is kept even when a later scenario failed.
            let kept = runner.kept();
            if kept.is_empty() {
                let _ = std::fs::remove_dir(&folder);
            } else {
                let page =
                    troupe_results::write_results(&folder, &kept).context("writing the results")?;
                eprintln!("results and report: {}", page.display());
            }
            outcome
        }
        Command::Report { files, out } => report_command(&files, &out),
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
                        compare::Scenario::Fanout,
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
                sizes: if quick {
                    compare::Sizes::Quick
                } else {
                    compare::Sizes::Compare
                },
                peers: true,
                ring_rounds,
                timeout: std::time::Duration::from_secs(timeout),
            };
            compare::validate(&options)?;
            let runner = Runner {
                warmup: 0,
                repeat: if quick {
                    1
                } else {
                    (g.repeat as usize).min(runner.repeat)
                },
                json: g.json,
                kept: Default::default(),
            };
            compare::run(&runner, &options)
        }
    }
}

/// `report`: every file read (and checked) before anything is written.
fn report_command(files: &[std::path::PathBuf], out: &std::path::Path) -> Result<()> {
    let series = files
        .iter()
        .map(|path| troupe_results::report::Series::from_file(path))
        .collect::<Result<Vec<_>, _>>()?;
    let page = troupe_results::report::write(&series, out).context("writing the report")?;
    let records: usize = series.iter().map(|s| s.records.len()).sum();
    eprintln!(
        "{records} records from {} file(s); report: {}",
        series.len(),
        page.display()
    );
    Ok(())
}

fn fanout_sources(given: Vec<fanout::From>) -> Vec<fanout::From> {
    if given.is_empty() {
        vec![fanout::From::Thread, fanout::From::TokioTask]
    } else {
        given
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
///
/// With `seeds` (every run but `--quick`), the seeds' scenarios run as `compare` runs them:
/// troupe and every installed peer, one process per repetition, interleaved; the rest are
/// troupe's own and run in this process. `--quick` runs everything here, troupe alone.
fn all(
    runner: &Runner,
    config: &SystemConfig,
    quick: bool,
    seeds: Option<&compare::CompareOptions>,
    folder: &std::path::Path,
) -> Result<()> {
    let long = Runner {
        repeat: runner.repeat.min(3),
        ..runner.clone()
    };
    let mut failures = Vec::new();
    if let Some(options) = seeds {
        let compared = compare::gather(
            &Runner {
                warmup: 0,
                kept: Default::default(),
                ..long.clone()
            },
            options,
        )?;
        compared.write_raw(folder)?;
        for record in &compared.summary {
            runner.emit(record)?;
        }
        if !options.peers {
            eprintln!("troupe alone (--no-peers): no peer was run");
        } else if compared.skipped.is_empty() {
            eprintln!(
                "peers run beside troupe: {}",
                if compared.peers.is_empty() {
                    "none".to_owned()
                } else {
                    compared.peers.join(", ")
                }
            );
        } else {
            eprintln!(
                "peers skipped (the report shows troupe without them): {}",
                compared.skipped.join("; ")
            );
        }
        failures = compared.failures;
    } else {
        quick_seed_scenarios(&long, runner, config)?;
    }
    // The price of a bounded mailbox, beside the 100-actor ring.
    ring::run(
        &long,
        config,
        ring::RingParams {
            actors: 100,
            rounds: if quick { 10 } else { 100_000 },
            placement: Placement::Pool,
            bounded: Some(1_000),
        },
    )?;
    features::restarts(runner, config, if quick { 100 } else { 100_000 })?;
    features::timers(runner, config, if quick { 1_000 } else { 1_000_000 })?;
    features::asks(runner, config, if quick { 1_000 } else { 100_000 })?;
    fanout::run(
        runner,
        config,
        if quick { 100 } else { 1_000 },
        if quick { 10_000 } else { 10_000_000 },
        &fanout_sources(Vec::new()),
        fanout::CATCH_UP,
    )?;
    router::run(
        runner,
        config,
        if quick { 10 } else { 100 },
        if quick { 10_000 } else { 2_000_000 },
        &router::Pick::ALL,
    )?;
    store::run(runner, &store::config(quick, 1, true))?;
    if !failures.is_empty() {
        bail!("some contenders failed: {}", failures.join("; "));
    }
    Ok(())
}

/// The seeds' scenarios on troupe alone, in this process, at `--quick`'s sizes.
fn quick_seed_scenarios(long: &Runner, runner: &Runner, config: &SystemConfig) -> Result<()> {
    let rings = [
        (100, 100, Placement::Pool),
        (1_000, 10, Placement::Pool),
        (10, 10, Placement::Thread),
    ];
    for (actors, rounds, placement) in rings {
        ring::run(
            long,
            config,
            ring::RingParams {
                actors,
                rounds,
                placement,
                bounded: None,
            },
        )?;
    }
    spawn::run(runner, config, 1_000)?;
    counter::run(
        runner,
        config,
        config.workers,
        &counter_series(Vec::new(), true),
        Placement::Pool,
    )?;
    for n in [10, 100] {
        chain::run(long, config, n, chain::Mode::Actors, Placement::Pool)?;
        chain::run(long, config, n, chain::Mode::Threads, Placement::Pool)?;
    }
    Ok(())
}
