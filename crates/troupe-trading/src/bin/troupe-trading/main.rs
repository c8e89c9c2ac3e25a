//! `troupe-trading`: the trading system of seed 003 as a program: benchmark it, run it on
//! logs, inspect its logs.
//!
//! ```text
//! troupe-trading bench all [--quick] [--json]     every benchmark below
//! troupe-trading bench closed ...                 the seed's closed loop (styles x logs x clients)
//! troupe-trading bench open-loop ...              fixed-rate sweep, latency from planned send times
//! troupe-trading bench baseline ...               synchronous calls, and OS threads with locks
//! troupe-trading bench compare ...                troupe beside the threads baseline, run by run
//! troupe-trading bench fsync-probe                this disk's own fdatasync latency
//! troupe-trading run --dir D --log fsync ...      the system on logs in D, reporting each ack
//! troupe-trading inspect --dir D --log fsync      read D's logs (changing nothing), print them
//! ```
//!
//! Every option is checked before anything runs ([`prepare`]): a bad one gives a one-line
//! error and a non-zero exit, with nothing measured and nothing written.

mod baseline;
mod bench;
mod compare;
mod dist_bench;
mod open_loop;
mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, RangedU64ValueParser, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand};
use troupe_trading::load::Entry;
use troupe_trading::{LogMode, Market, SeedScenario, Style};

use bench::Progress;
use report::Printer;

// The bounds of the command line. The help texts below spell them out: keep them in step.

/// Client counts (`--clients`): each is an OS thread or a client actor.
const MAX_CLIENTS: u64 = 1000;
/// `--workers`.
const MAX_WORKERS: u64 = 1024;
/// `--throughput`.
const MAX_THROUGHPUT: u64 = 1_000_000;
/// `--throughput` when not given.
const DEFAULT_THROUGHPUT: usize = 64;
/// `--repeat`.
const MAX_REPEAT: u64 = 1000;
/// `--warmup`.
const MAX_WARMUP: u64 = 1000;
/// Orders per load level (`--orders`) and per `run`. The engines keep the key of every order
/// they accepted (8 bytes in the primary and 8 in the standby) and the logs take 2 x 39 bytes
/// of disk per order, so 100 million orders are 1.6 GB of memory and 7.8 GB of logs.
const MAX_ORDERS: u64 = 100_000_000;
/// Orders per load level in fsync mode (`--fsync-orders`): each waits for a disk flush, about
/// a millisecond, so a million orders already take minutes per repetition.
const MAX_FSYNC_ORDERS: u64 = 1_000_000;
/// `run --rounds`.
const MAX_ROUNDS: u64 = 1_000_000;
/// `--seconds` of the open loop.
const MIN_SECONDS: f64 = 0.1;
const MAX_SECONDS: f64 = 600.0;
/// Each `--rates` value, in orders per second. The load generator paces at 1 order/s at the
/// slowest (`troupe_trading::load::open_loop`).
const MIN_RATE: f64 = 1.0;
const MAX_RATE: f64 = 10_000_000.0;

/// Sizes when not given.
const DEFAULT_ORDERS: u64 = 750_000;
const DEFAULT_FSYNC_ORDERS: u64 = 30_000;
const DEFAULT_SECONDS: f64 = 1.0;
const DEFAULT_RATES: [f64; 12] = [
    50e3, 100e3, 200e3, 300e3, 400e3, 500e3, 600e3, 700e3, 800e3, 1e6, 1.2e6, 1.5e6,
];

/// The sizes `--quick` sets.
const QUICK_ORDERS: u64 = 3_000;
const QUICK_FSYNC_ORDERS: u64 = 120;
const QUICK_RATES: [f64; 2] = [10e3, 50e3];
const QUICK_SECONDS: f64 = 0.1;

#[derive(Parser, Debug)]
#[command(
    name = "troupe-trading",
    version,
    about = "The limit-order trading system of seed 003 on troupe: benchmark, run, inspect",
    after_help = "Every option is checked before anything runs; bounds are given with each option."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Worker threads in troupe's pool, 1 to 1024 (default: one per core). Not for `bench
    /// baseline` or `bench fsync-probe`, which run no actors.
    #[arg(
        long,
        global = true,
        allow_negative_numbers = true,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_WORKERS)
    )]
    workers: Option<usize>,
    /// Messages an actor handles per turn before yielding its worker, 1 to 1,000,000
    /// (default 64). Not for `bench baseline` or `bench fsync-probe`.
    #[arg(
        long,
        global = true,
        allow_negative_numbers = true,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_THROUGHPUT)
    )]
    throughput: Option<usize>,
    /// Directory for the benchmark's scratch logs (default: the system's temporary
    /// directory). `bench` only: `run` and `inspect` use `--dir`.
    #[arg(long, global = true)]
    scratch: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks (see `bench --help`).
    Bench {
        #[command(flatten)]
        opts: BenchOpts,
        #[command(subcommand)]
        which: Which,
    },
    /// Runs the system on the logs in a directory with blocking clients placing the seed
    /// scenario's orders.
    Run {
        /// Log directory (created if missing; existing logs are recovered first).
        #[arg(long)]
        dir: PathBuf,
        /// Log mode.
        #[arg(long, default_value = "fsync", value_parser = log_parser())]
        log: LogMode,
        /// Messaging style.
        #[arg(long, default_value = "request-reply", value_parser = style_parser())]
        style: Style,
        /// Client threads, 1 to 1000.
        #[arg(
            long,
            default_value_t = 4,
            allow_negative_numbers = true,
            value_parser = clap::value_parser!(u64).range(1..=MAX_CLIENTS)
        )]
        clients: u64,
        /// Rounds of the scenario per client (30 orders each), 1 to 1,000,000; clients x
        /// rounds x 30 may be at most 100,000,000 orders.
        #[arg(
            long,
            default_value_t = 100,
            allow_negative_numbers = true,
            value_parser = clap::value_parser!(u64).range(1..=MAX_ROUNDS)
        )]
        rounds: u64,
        /// Print `ack <client> <client order id>` for every acknowledged order.
        #[arg(long)]
        report_acks: bool,
        /// Salvage logs with mid-file damage instead of refusing to start: each pair's logs
        /// are rebuilt from the valid records of both; records after a sequence number
        /// neither log holds are dropped. Damaged files are kept as `<log>.damaged`.
        #[arg(long)]
        salvage: bool,
    },
    /// One engine of a pair in its own process, over NATS (the distributed mode): replays its
    /// log, serves as a receiver too, and becomes primary or standby by a lease on NATS
    /// key-value (JetStream must be on). Runs until killed; exits with code 3 when it loses
    /// the lease as primary.
    Node {
        /// NATS server URL(s), comma-separated.
        #[arg(long)]
        nats: String,
        /// A file holding the node's NATS nkey seed (a line starting with SU): the server's
        /// configuration names the engine user by its public key.
        #[arg(long, conflicts_with = "nats_creds")]
        nats_nkey: Option<PathBuf>,
        /// A NATS credentials file (user JWT and seed), for servers in operator mode.
        #[arg(long)]
        nats_creds: Option<PathBuf>,
        /// The PEM file of the authority that signed the NATS server's TLS certificate: the
        /// connection is then TLS, and refused if the server does not speak it.
        #[arg(long)]
        nats_ca: Option<PathBuf>,
        /// The engine pair it serves (0-2 in the seed market).
        #[arg(long, value_parser = clap::value_parser!(u64).range(0..=2))]
        pair: u64,
        /// Its name: letters, digits, '-' and '_' (1-64); the same after a restart.
        #[arg(long)]
        name: String,
        /// Its log directory (its own; created if missing, recovered first).
        #[arg(long)]
        dir: PathBuf,
        /// Log mode.
        #[arg(long, default_value = "buffered", value_parser = log_parser())]
        log: LogMode,
        /// The lease in milliseconds (200-60000): how long a silent primary keeps its pair.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(200..=60_000))]
        lease_ms: u64,
    },
    /// The distributed mode measured: orders/s, p50 and p99 across processes over NATS beside
    /// the same in one process, then the failover time over repeated kill -9 of a primary.
    /// Starts its own nats-server with JetStream (built by scripts/install-nats-server.sh when
    /// missing) and six node processes.
    DistBench {
        /// Client counts, comma-separated (each 1-1000).
        #[arg(long, value_delimiter = ',', default_value = "1,10,40", value_parser = clap::value_parser!(u64).range(1..=MAX_CLIENTS))]
        clients: Vec<u64>,
        /// Seconds per client count and mode (0.1-600).
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Kills of pair 0's primary (0-1000; 0 skips the failover part).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=1000))]
        kills: u64,
        /// The lease in milliseconds (200-60000).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(200..=60_000))]
        lease_ms: u64,
        /// Print one JSON object per result (JSON Lines) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Reads the logs in a directory (read-only: changes nothing) and prints what they hold.
    Inspect {
        /// Log directory to read (nothing in it is changed or created).
        #[arg(long)]
        dir: PathBuf,
        /// Log mode the logs were written in.
        #[arg(long, default_value = "fsync", value_parser = log_parser())]
        log: LogMode,
        /// Also list the key of every accepted order.
        #[arg(long)]
        keys: bool,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// With mid-file damage, show what `run --salvage` would recover (still writing
        /// nothing) instead of failing.
        #[arg(long)]
        salvage: bool,
    },
}

#[derive(Args, Debug, Clone)]
struct BenchOpts {
    /// Tiny sizes, one repetition: proves everything works end to end in seconds. It sets its
    /// own sizes (3,000 orders per load level, 120 in fsync mode; open loop: 10,000 and 50,000
    /// orders/s for 0.1 s), so it cannot be combined with --orders, --fsync-orders, --rates or
    /// --seconds. Client counts (--clients) are kept as given.
    #[arg(long, global = true)]
    quick: bool,
    /// Print one JSON object per result (JSON Lines) instead of text; progress stays on stderr.
    #[arg(long, global = true)]
    json: bool,
    /// Measured repetitions of each configuration, 1 to 1000 (default 3; 1 with --quick). Not
    /// for `fsync-probe`.
    #[arg(
        long,
        global = true,
        allow_negative_numbers = true,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_REPEAT)
    )]
    repeat: Option<usize>,
    /// Unmeasured repetitions before the measured ones, 0 to 1000 (default 0; each measured
    /// run also warms up on its own). Not for `fsync-probe`.
    #[arg(
        long,
        global = true,
        allow_negative_numbers = true,
        value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_WARMUP)
    )]
    warmup: Option<usize>,
    /// Folder for the run's results: `trading-<UTC time>/` in it gets `results.jsonl` and the
    /// HTML report `index.html`.
    #[arg(long, global = true, default_value = "results")]
    results_dir: PathBuf,
    /// How the closed loop's client actors put their orders in (default router). Only for
    /// `bench closed`, `compare` and `all`.
    #[arg(long, global = true, value_parser = entry_parser())]
    entry: Option<Entry>,
}

/// Orders per load level, for the closed loop and the baselines.
#[derive(Args, Debug, Clone)]
struct Sizes {
    /// Orders per load level, 30 (one round of the scenario: a sell and a buy for each of its
    /// 15 books) to 100,000,000 (default 750,000, the seed's). Rounded up to whole rounds of
    /// every client: a multiple of 30 x clients.
    #[arg(long, allow_negative_numbers = true)]
    orders: Option<u64>,
    /// Orders per load level in fsync mode, where every order waits for the disk: 30 to
    /// 1,000,000 (default 30,000). Rounded up like --orders.
    #[arg(long, allow_negative_numbers = true)]
    fsync_orders: Option<u64>,
}

#[derive(Args, Debug, Clone)]
struct MatrixOpts {
    /// Messaging styles, comma-separated, each at most once.
    #[arg(long, value_delimiter = ',', value_parser = style_parser(), default_value = "request-reply,one-way")]
    styles: Vec<Style>,
    /// Log modes, comma-separated, each at most once.
    #[arg(long, value_delimiter = ',', value_parser = log_parser(), default_value = "none,buffered,fsync")]
    logs: Vec<LogMode>,
    /// Client counts (the seed's load levels), comma-separated, each 1 to 1000 and at most
    /// once.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,8,10,20,40",
        allow_negative_numbers = true,
        value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_CLIENTS)
    )]
    clients: Vec<usize>,
    #[command(flatten)]
    sizes: Sizes,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// Every benchmark: the closed loop (with the fsync probe), the open loop (its default
    /// rates and seconds, on the given log modes but fsync), the baselines (on the given log
    /// modes and client counts).
    All {
        #[command(flatten)]
        matrix: MatrixOpts,
    },
    /// The seed's closed loop for each style, log mode and client count.
    Closed {
        #[command(flatten)]
        matrix: MatrixOpts,
    },
    /// Fixed-rate sweep: the highest rate whose p99 stays under 1 ms.
    OpenLoop {
        /// Messaging styles, comma-separated, each at most once.
        #[arg(long, value_delimiter = ',', value_parser = style_parser(), default_value = "request-reply,one-way")]
        styles: Vec<Style>,
        /// Log modes, comma-separated, each at most once.
        #[arg(long, value_delimiter = ',', value_parser = log_parser(), default_value = "none,buffered")]
        logs: Vec<LogMode>,
        /// Rates to try, in orders per second, comma-separated and strictly increasing, each
        /// 1 to 10,000,000 (default: 50,000 to 1,500,000 in 12 steps). Each rate x --seconds
        /// must come to 300 to 10,000,000 orders.
        #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
        rates: Option<Vec<f64>>,
        /// Seconds of orders per rate, 0.1 to 600 (default 1). Each rate needs at least 300
        /// orders in that time.
        #[arg(long, allow_negative_numbers = true)]
        seconds: Option<f64>,
    },
    /// Synchronous method calls, and OS threads with locks, on the same scenario.
    Baseline {
        /// Client counts of the `threads` baseline (`direct` always has one caller),
        /// comma-separated, each 1 to 1000 and at most once.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1,2,4,8,10,20,40",
            allow_negative_numbers = true,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_CLIENTS)
        )]
        clients: Vec<usize>,
        /// Log modes, comma-separated, each at most once.
        #[arg(long, value_delimiter = ',', value_parser = log_parser(), default_value = "none,buffered,fsync")]
        logs: Vec<LogMode>,
        #[command(flatten)]
        sizes: Sizes,
    },
    /// The closed loop beside the threads baseline: in each repetition the baseline, then
    /// troupe in each style, and the ratio troupe / threads within the repetition.
    Compare {
        /// Messaging styles, comma-separated, each at most once.
        #[arg(long, value_delimiter = ',', value_parser = style_parser(), default_value = "request-reply,one-way")]
        styles: Vec<Style>,
        /// Log modes, comma-separated, each at most once.
        #[arg(long, value_delimiter = ',', value_parser = log_parser(), default_value = "none,buffered")]
        logs: Vec<LogMode>,
        /// Client counts, comma-separated, each 1 to 1000 and at most once.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "40",
            allow_negative_numbers = true,
            value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_CLIENTS)
        )]
        clients: Vec<usize>,
        #[command(flatten)]
        sizes: Sizes,
    },
    /// This disk's own fdatasync latency (1,000 flushes; 50 with --quick).
    FsyncProbe,
}

/// The messaging styles, with their possible values shown in `--help`.
fn style_parser() -> impl TypedValueParser<Value = Style> {
    PossibleValuesParser::new([
        PossibleValue::new("request-reply")
            .help("the primary acks the client once its standby has the order too: one ack"),
        PossibleValue::new("one-way")
            .help("each engine acks the client itself; the client waits for both acks"),
    ])
    .try_map(|s| s.parse::<Style>())
}

/// The ways into the exchange, with their possible values shown in `--help`.
fn entry_parser() -> impl TypedValueParser<Value = Entry> {
    PossibleValuesParser::new([
        PossibleValue::new("router").help(
            "the receivers' stateless work (validate, route) runs in the client actor's turn: \
             one message per order to its primary",
        ),
        PossibleValue::new("receivers").help(
            "each client tells its receiver actor, which routes the order: the seed's \
             topology, one message more per order",
        ),
    ])
    .try_map(|s| s.parse::<Entry>())
}

/// The log modes, with their possible values shown in `--help`.
fn log_parser() -> impl TypedValueParser<Value = LogMode> {
    PossibleValuesParser::new([
        PossibleValue::new("none").help("no log: state lives in memory only"),
        PossibleValue::new("buffered").help(
            "written to the OS, not flushed (survives a crash of the process, not of the machine)",
        ),
        PossibleValue::new("fsync")
            .help("flushed to the disk with fdatasync before the ack (group commit)"),
    ])
    .try_map(|s| s.parse::<LogMode>())
}

/// How the benchmark and the system under test are configured.
#[derive(Debug, Clone)]
pub struct Setup {
    pub workers: usize,
    pub throughput: usize,
    pub quick: bool,
    pub repeat: usize,
    pub warmup: usize,
    pub scratch: Option<PathBuf>,
    /// How the closed loop's clients put their orders in.
    pub entry: Entry,
}

impl Setup {
    /// A fresh, empty directory for one run's logs, removed when dropped.
    pub fn scratch_dir(&self) -> Result<tempfile::TempDir> {
        let builder = tempfile::Builder::new()
            .prefix("troupe-trading-")
            .to_owned();
        Ok(match &self.scratch {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                builder.tempdir_in(dir)?
            }
            None => builder.tempdir()?,
        })
    }

    pub fn notes(&self) -> String {
        format!(
            "troupe pool of {} workers, throughput {}",
            self.workers, self.throughput
        )
    }

    /// Runs per configuration: the unmeasured ones, then the measured ones.
    pub fn runs(&self) -> u64 {
        (self.warmup + self.repeat) as u64
    }
}

/// What the command line asks for, checked.
enum Job {
    Run {
        dir: PathBuf,
        plan: run::RunPlan,
    },
    Inspect {
        dir: PathBuf,
        plan: run::InspectPlan,
    },
    Node(troupe_trading::dist::NodeConfig),
    DistBench(dist_bench::DistPlan),
    Bench {
        json: bool,
        results_dir: PathBuf,
        plan: Box<BenchPlan>,
    },
}

/// A benchmark, checked and sized.
enum BenchPlan {
    FsyncProbe,
    Closed(bench::ClosedPlan),
    OpenLoop(open_loop::OpenPlan),
    Baseline(baseline::BaselinePlan),
    Compare(compare::ComparePlan),
    All(
        bench::ClosedPlan,
        open_loop::OpenPlan,
        baseline::BaselinePlan,
    ),
}

impl BenchPlan {
    /// Runs in all, for the progress display.
    fn runs(&self, setup: &Setup) -> u64 {
        match self {
            BenchPlan::FsyncProbe => 1,
            BenchPlan::Closed(c) => c.runs(setup),
            BenchPlan::OpenLoop(o) => o.runs(setup),
            BenchPlan::Baseline(b) => b.runs(setup),
            BenchPlan::Compare(c) => c.runs(setup),
            BenchPlan::All(c, o, b) => c.runs(setup) + o.runs(setup) + b.runs(setup),
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                eprintln!("{}", one_line(&e.render().to_string()));
                return ExitCode::from(2);
            }
        },
    };
    match prepare(cli).and_then(|(setup, job)| execute(&setup, job)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Clap's error message on one line: its usage lines and pointer to `--help` dropped (the
/// line ends with its own), its tips kept.
fn one_line(rendered: &str) -> String {
    let mut out = String::new();
    let mut in_usage = false;
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() {
            in_usage = false;
            continue;
        }
        if line.starts_with("Usage:") {
            in_usage = true;
        }
        if in_usage || line.starts_with("For more information") {
            continue;
        }
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out + " (see --help)"
}

/// Checks the whole command line and turns it into a job; runs nothing, writes nothing.
fn prepare(cli: Cli) -> Result<(Setup, Job)> {
    let g = cli.global;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut setup = Setup {
        workers: g.workers.unwrap_or(cores),
        throughput: g.throughput.unwrap_or(DEFAULT_THROUGHPUT),
        quick: false,
        repeat: 1,
        warmup: 0,
        scratch: g.scratch.clone(),
        entry: Entry::default(),
    };
    let job = match cli.command {
        Command::Run {
            dir,
            log,
            style,
            clients,
            rounds,
            report_acks,
            salvage,
        } => {
            refuse_scratch(&g, "run")?;
            let orders = clients * rounds * orders_per_round();
            if orders > MAX_ORDERS {
                bail!(
                    "--clients {clients} x --rounds {rounds} x {} orders a round is {} orders, \
                     more than the {} a run may place (the engines keep every order's key)",
                    orders_per_round(),
                    thousands(orders),
                    thousands(MAX_ORDERS)
                );
            }
            Job::Run {
                dir,
                plan: run::RunPlan {
                    style,
                    log,
                    clients: clients as usize,
                    rounds,
                    report_acks,
                    salvage,
                },
            }
        }
        Command::Node {
            nats,
            nats_nkey,
            nats_creds,
            nats_ca,
            pair,
            name,
            dir,
            log,
            lease_ms,
        } => {
            refuse_scratch(&g, "node")?;
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                bail!("--name {name:?}: use 1-64 letters, digits, '-' or '_'");
            }
            let (credentials, option) = match (nats_nkey, nats_creds) {
                (Some(file), _) => (troupe_remote::Credentials::NkeyFile(file), "--nats-nkey"),
                (None, Some(file)) => (troupe_remote::Credentials::CredsFile(file), "--nats-creds"),
                (None, None) => (troupe_remote::Credentials::None, ""),
            };
            // The files are read and checked now: a bad one is a one-line error naming its
            // option, before anything starts.
            let check = |options: troupe_remote::NodeOptions, option: &str| {
                options
                    .nats_options()
                    .map(drop)
                    .map_err(|e| anyhow::anyhow!("{option}: {e}"))
            };
            check(
                troupe_remote::NodeOptions {
                    credentials: credentials.clone(),
                    ..troupe_remote::NodeOptions::default()
                },
                option,
            )?;
            check(
                troupe_remote::NodeOptions {
                    tls_ca: nats_ca.clone(),
                    ..troupe_remote::NodeOptions::default()
                },
                "--nats-ca",
            )?;
            Job::Node(troupe_trading::dist::NodeConfig {
                nats,
                credentials,
                tls_ca: nats_ca,
                pair: pair as usize,
                name,
                log_dir: dir,
                log,
                lease: std::time::Duration::from_millis(lease_ms),
            })
        }
        Command::DistBench {
            clients,
            seconds,
            kills,
            lease_ms,
            json,
        } => {
            refuse_scratch(&g, "dist-bench")?;
            if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) || seconds.is_nan() {
                bail!("--seconds {seconds}: give {MIN_SECONDS} to {MAX_SECONDS}");
            }
            check_list("--clients", &clients, |c| c.to_string())?;
            Job::DistBench(dist_bench::DistPlan {
                clients: clients.into_iter().map(|c| c as usize).collect(),
                seconds,
                kills: kills as usize,
                lease: std::time::Duration::from_millis(lease_ms),
                json,
            })
        }
        Command::Inspect {
            dir,
            log,
            keys,
            json,
            salvage,
        } => {
            refuse_scratch(&g, "inspect")?;
            Job::Inspect {
                dir,
                plan: run::InspectPlan {
                    log,
                    keys,
                    json,
                    salvage,
                },
            }
        }
        Command::Bench { opts, which } => {
            setup.quick = opts.quick;
            setup.repeat = opts.repeat.unwrap_or(if opts.quick { 1 } else { 3 });
            setup.warmup = opts.warmup.unwrap_or(0);
            setup.entry = opts.entry.unwrap_or_default();
            let refuse_entry = |which: &str, why: &str| -> Result<()> {
                if opts.entry.is_some() {
                    bail!("--entry has no effect on `bench {which}`: {why}");
                }
                Ok(())
            };
            let plan = match which {
                Which::FsyncProbe => {
                    refuse_entry("fsync-probe", "it measures the disk alone")?;
                    refuse_actor_options(&g, "fsync-probe", "it measures the disk alone")?;
                    for (option, given) in [
                        ("--repeat", opts.repeat.is_some()),
                        ("--warmup", opts.warmup.is_some()),
                    ] {
                        if given {
                            bail!(
                                "`bench fsync-probe` takes no {option}: it measures 1,000 \
                                 flushes (50 with --quick) once"
                            );
                        }
                    }
                    BenchPlan::FsyncProbe
                }
                Which::Closed { matrix } => BenchPlan::Closed(plan_closed(&setup, matrix)?),
                Which::OpenLoop {
                    styles,
                    logs,
                    rates,
                    seconds,
                } => {
                    refuse_entry("open-loop", "its pacing actor sends to the receivers")?;
                    BenchPlan::OpenLoop(plan_open_loop(&setup, styles, logs, rates, seconds)?)
                }
                Which::Baseline {
                    clients,
                    logs,
                    sizes,
                } => {
                    refuse_actor_options(&g, "baseline", "it runs no actors")?;
                    refuse_entry("baseline", "it runs no actors")?;
                    BenchPlan::Baseline(plan_baseline(&setup, clients, logs, sizes)?)
                }
                Which::Compare {
                    styles,
                    logs,
                    clients,
                    sizes: s,
                } => {
                    check_styles(&styles)?;
                    check_logs(&logs)?;
                    check_clients(&clients)?;
                    let (orders, fsync_orders) = sizes(&setup, s)?;
                    BenchPlan::Compare(compare::ComparePlan {
                        styles,
                        logs,
                        clients,
                        orders,
                        fsync_orders,
                    })
                }
                Which::All { matrix } => plan_all(&setup, matrix)?,
            };
            Job::Bench {
                json: opts.json,
                results_dir: opts.results_dir,
                plan: Box::new(plan),
            }
        }
    };
    Ok((setup, job))
}

fn refuse_scratch(g: &Global, command: &str) -> Result<()> {
    if g.scratch.is_some() {
        bail!("--scratch is for `bench` only: `{command}` keeps its logs in --dir");
    }
    Ok(())
}

fn refuse_actor_options(g: &Global, which: &str, why: &str) -> Result<()> {
    for (option, given) in [
        ("--workers", g.workers.is_some()),
        ("--throughput", g.throughput.is_some()),
    ] {
        if given {
            bail!("{option} has no effect on `bench {which}`: {why}");
        }
    }
    Ok(())
}

/// Refuses sizes given together with `--quick`, which sets its own.
fn refuse_with_quick(setup: &Setup, given: &[(&str, bool)]) -> Result<()> {
    if !setup.quick {
        return Ok(());
    }
    if let Some((option, _)) = given.iter().find(|(_, given)| *given) {
        bail!(
            "{option} cannot be combined with --quick, which sets its own sizes ({} orders per \
             load level, {} in fsync mode; open loop: {} orders/s for {} s); drop one of them",
            thousands(QUICK_ORDERS),
            thousands(QUICK_FSYNC_ORDERS),
            QUICK_RATES.map(|r| thousands(r as u64)).join(" and "),
            QUICK_SECONDS
        );
    }
    Ok(())
}

/// Orders in one round of the seed scenario (a sell and a buy for each book): the least a
/// load level can place.
fn orders_per_round() -> u64 {
    SeedScenario::new(&Market::seed()).orders_per_round() as u64
}

/// `n` with thousands separators.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A list option must not be empty nor name a value twice.
fn check_list<T: Copy + PartialEq>(
    option: &str,
    values: &[T],
    show: impl Fn(T) -> String,
) -> Result<()> {
    if values.is_empty() {
        bail!("{option}: give at least one value");
    }
    for (i, &v) in values.iter().enumerate() {
        if values[..i].contains(&v) {
            bail!("{option} lists {} twice: give each value once", show(v));
        }
    }
    Ok(())
}

fn check_styles(styles: &[Style]) -> Result<()> {
    check_list("--styles", styles, |s| s.name().to_owned())
}

fn check_logs(logs: &[LogMode]) -> Result<()> {
    check_list("--logs", logs, |l| l.name().to_owned())
}

fn check_clients(clients: &[usize]) -> Result<()> {
    // Each value's range is clap's (1 to MAX_CLIENTS).
    check_list("--clients", clients, |c| c.to_string())
}

/// Orders per load level: (orders, fsync orders), checked, or those of `--quick`.
fn sizes(setup: &Setup, sizes: Sizes) -> Result<(u64, u64)> {
    refuse_with_quick(
        setup,
        &[
            ("--orders", sizes.orders.is_some()),
            ("--fsync-orders", sizes.fsync_orders.is_some()),
        ],
    )?;
    if setup.quick {
        return Ok((QUICK_ORDERS, QUICK_FSYNC_ORDERS));
    }
    let orders = sizes.orders.unwrap_or(DEFAULT_ORDERS);
    let fsync_orders = sizes.fsync_orders.unwrap_or(DEFAULT_FSYNC_ORDERS);
    for (option, n, max) in [
        ("--orders", orders, MAX_ORDERS),
        ("--fsync-orders", fsync_orders, MAX_FSYNC_ORDERS),
    ] {
        let min = orders_per_round();
        if n < min {
            bail!(
                "{option} {n}: the least is {min} orders, one round of the seed scenario (a \
                 sell and a buy for each of its {} books)",
                min / 2
            );
        }
        if n > max {
            bail!(
                "{option} {}: the most is {} orders{}",
                thousands(n),
                thousands(max),
                if option == "--orders" {
                    " (the engines keep 16 bytes per order, the logs 78 bytes of disk)"
                } else {
                    " (each waits for a disk flush)"
                }
            );
        }
    }
    Ok((orders, fsync_orders))
}

/// Checks `bench closed`.
fn plan_closed(setup: &Setup, m: MatrixOpts) -> Result<bench::ClosedPlan> {
    check_styles(&m.styles)?;
    check_logs(&m.logs)?;
    check_clients(&m.clients)?;
    let (orders, fsync_orders) = sizes(setup, m.sizes)?;
    Ok(bench::ClosedPlan {
        styles: m.styles,
        logs: m.logs,
        clients: m.clients,
        orders,
        fsync_orders,
    })
}

/// Checks one open-loop sweep: every rate in bounds and strictly increasing, and each rate x
/// seconds from the least number of orders a rate needs to the most it may send.
fn check_rates(rates: &[f64], seconds: f64) -> Result<()> {
    if !(seconds.is_finite() && (MIN_SECONDS..=MAX_SECONDS).contains(&seconds)) {
        bail!("--seconds {seconds}: must be from {MIN_SECONDS} to {MAX_SECONDS}");
    }
    if rates.is_empty() {
        bail!("--rates: give at least one rate");
    }
    for (i, &rate) in rates.iter().enumerate() {
        if !(rate.is_finite() && (MIN_RATE..=MAX_RATE).contains(&rate)) {
            bail!(
                "--rates {rate}: each rate must be from {MIN_RATE} to {} orders/s",
                thousands(MAX_RATE as u64)
            );
        }
        if i > 0 && rate <= rates[i - 1] {
            bail!(
                "--rates must be strictly increasing (the sweep stops once rates miss): {} \
                 comes after {}",
                rate,
                rates[i - 1]
            );
        }
    }
    for &rate in rates {
        let orders = rate * seconds;
        let min = open_loop::MIN_ORDERS as f64;
        // (A hair of slack for rates x seconds that are whole only on paper, as 0.3 x 1000.)
        if orders < min - 1e-6 {
            // Rounded up to a tenth of a second, and to a whole rate.
            let need_seconds = (min / rate * 10.0).ceil() / 10.0;
            let need_rate = (min / seconds).ceil();
            bail!(
                "--rates {rate} with --seconds {seconds} is {} orders, but each rate needs at \
                 least {min} orders: {rate} orders/s needs --seconds {need_seconds} or more (or \
                 with --seconds {seconds}, rates of at least {need_rate} orders/s)",
                orders.floor()
            );
        }
        let max = open_loop::MAX_ORDERS as f64;
        if orders > max {
            let max_seconds = (max / rate * 10.0).floor() / 10.0;
            bail!(
                "--rates {rate} with --seconds {seconds} is {} orders, more than the {} one \
                 rate may send (the run keeps state for every order); at {rate} orders/s use \
                 --seconds {max_seconds} or less",
                thousands(orders as u64),
                thousands(open_loop::MAX_ORDERS)
            );
        }
    }
    Ok(())
}

/// Checks `bench open-loop`.
fn plan_open_loop(
    setup: &Setup,
    styles: Vec<Style>,
    logs: Vec<LogMode>,
    rates: Option<Vec<f64>>,
    seconds: Option<f64>,
) -> Result<open_loop::OpenPlan> {
    check_styles(&styles)?;
    check_logs(&logs)?;
    refuse_with_quick(
        setup,
        &[
            ("--rates", rates.is_some()),
            ("--seconds", seconds.is_some()),
        ],
    )?;
    let (rates, seconds) = if setup.quick {
        (QUICK_RATES.to_vec(), QUICK_SECONDS)
    } else {
        (
            rates.unwrap_or_else(|| DEFAULT_RATES.to_vec()),
            seconds.unwrap_or(DEFAULT_SECONDS),
        )
    };
    check_rates(&rates, seconds)?;
    Ok(open_loop::OpenPlan {
        styles,
        logs,
        rates,
        seconds,
    })
}

/// Checks `bench baseline`.
fn plan_baseline(
    setup: &Setup,
    clients: Vec<usize>,
    logs: Vec<LogMode>,
    s: Sizes,
) -> Result<baseline::BaselinePlan> {
    check_clients(&clients)?;
    check_logs(&logs)?;
    let (orders, fsync_orders) = sizes(setup, s)?;
    Ok(baseline::BaselinePlan {
        kinds: vec![baseline::Kind::Direct, baseline::Kind::Threads],
        logs,
        clients,
        orders,
        fsync_orders,
    })
}

/// Checks `bench all`: the closed loop as given, the open loop at its default sizes on the
/// log modes but fsync, the baselines on the closed loop's clients, logs and sizes.
fn plan_all(setup: &Setup, m: MatrixOpts) -> Result<BenchPlan> {
    let closed = plan_closed(setup, m)?;
    let (rates, seconds) = if setup.quick {
        (QUICK_RATES.to_vec(), QUICK_SECONDS)
    } else {
        (DEFAULT_RATES.to_vec(), DEFAULT_SECONDS)
    };
    check_rates(&rates, seconds)?;
    let open = open_loop::OpenPlan {
        styles: closed.styles.clone(),
        // None left (`--logs fsync`) is fine: the open loop is skipped.
        logs: closed
            .logs
            .iter()
            .copied()
            .filter(|l| *l != LogMode::Fsync)
            .collect(),
        rates,
        seconds,
    };
    let baseline = baseline::BaselinePlan {
        kinds: vec![baseline::Kind::Direct, baseline::Kind::Threads],
        logs: closed.logs.clone(),
        clients: closed.clients.clone(),
        orders: closed.orders,
        fsync_orders: closed.fsync_orders,
    };
    Ok(BenchPlan::All(closed, open, baseline))
}

fn execute(setup: &Setup, job: Job) -> Result<()> {
    match job {
        Job::Run { dir, plan } => run::run(setup, &dir, &plan),
        Job::Inspect { dir, plan } => run::inspect(setup, &dir, &plan),
        Job::DistBench(plan) => dist_bench::run(&plan),
        Job::Node(config) => {
            let name = config.name.clone();
            let _node = troupe_trading::dist::start_node(config)?;
            eprintln!("node {name}: ready");
            println!("READY");
            loop {
                std::thread::park();
            }
        }
        Job::Bench {
            json,
            results_dir,
            plan,
        } => {
            // The folder is made before anything runs, so a long run is never lost to it.
            let results = results_dir.join(format!("trading-{}", troupe_results::utc_stamp()));
            std::fs::create_dir_all(&results).with_context(|| {
                format!("cannot create the results folder {}", results.display())
            })?;
            let printer = Printer::new(json);
            let outcome = bench(setup, &printer, &plan);
            // Whatever was measured is kept, even when a later configuration failed.
            match printer.write_results(&results)? {
                Some(report) => eprintln!("results and report: {}", report.display()),
                None => {
                    let _ = std::fs::remove_dir(&results);
                }
            }
            if !outcome? {
                bail!("some runs failed their checks (see the lines above)");
            }
            Ok(())
        }
    }
}

/// Runs a checked benchmark, with its progress on stderr; returns false if a check failed.
fn bench(setup: &Setup, printer: &Printer, plan: &BenchPlan) -> Result<bool> {
    let progress = match plan {
        // A few seconds: no progress needed.
        BenchPlan::FsyncProbe => Progress::hidden(),
        _ => Progress::new(plan.runs(setup)),
    };
    let valid = match plan {
        BenchPlan::FsyncProbe => {
            bench::fsync_probe(setup, printer, &progress)?;
            true
        }
        BenchPlan::Closed(c) => bench::closed(setup, printer, &progress, c)?,
        BenchPlan::OpenLoop(o) => open_loop::run(setup, printer, &progress, o)?,
        BenchPlan::Baseline(b) => baseline::run(setup, printer, &progress, b)?,
        BenchPlan::Compare(c) => compare::run(setup, printer, &progress, c)?,
        BenchPlan::All(c, o, b) => {
            let mut valid = bench::closed(setup, printer, &progress, c)?;
            valid &= open_loop::run(setup, printer, &progress, o)?;
            valid &= baseline::run(setup, printer, &progress, b)?;
            valid
        }
    };
    progress.finish();
    Ok(valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `prepare` gives for a command line, or "" if it accepts it.
    fn refusal(args: &str) -> String {
        let cli = Cli::try_parse_from(std::iter::once("troupe-trading").chain(args.split(' ')))
            .unwrap_or_else(|e| panic!("clap refused {args}: {e}"));
        match prepare(cli) {
            Ok(_) => String::new(),
            Err(e) => format!("{e:#}"),
        }
    }

    fn clap_refusal(args: &str) -> String {
        match Cli::try_parse_from(std::iter::once("troupe-trading").chain(args.split(' '))) {
            Ok(_) => String::new(),
            Err(e) => one_line(&e.render().to_string()),
        }
    }

    #[test]
    fn defaults_and_quick_pass() {
        for args in [
            "bench all",
            "bench all --quick",
            "bench all --quick --clients 1,4",
            "bench all --quick --logs fsync",
            "bench closed",
            "bench closed --quick",
            "bench open-loop",
            "bench open-loop --quick",
            "bench baseline",
            "bench baseline --quick",
            "bench fsync-probe --quick",
            "run --dir x",
            "inspect --dir x",
            "bench open-loop --rates 3000 --seconds 0.1",
            "bench open-loop --rates 1 --seconds 300",
            "bench closed --orders 30 --fsync-orders 1000000",
            "bench closed --orders 100000000 --workers 1024 --throughput 1000000",
        ] {
            assert_eq!(refusal(args), "", "{args}");
        }
    }

    #[test]
    fn sizes_are_bounded() {
        let e = refusal("bench closed --orders 0");
        assert!(e.contains("--orders 0") && e.contains("least is 30"), "{e}");
        let e = refusal("bench baseline --fsync-orders 29");
        assert!(e.contains("--fsync-orders 29") && e.contains("30"), "{e}");
        let e = refusal("bench closed --orders 100000001");
        assert!(e.contains("--orders") && e.contains("100,000,000"), "{e}");
        let e = refusal("bench all --fsync-orders 1000001");
        assert!(
            e.contains("--fsync-orders") && e.contains("1,000,000"),
            "{e}"
        );
        let e = refusal("run --dir x --clients 1000 --rounds 1000000");
        assert!(e.contains("--rounds") && e.contains("100,000,000"), "{e}");
    }

    #[test]
    fn open_loop_rates_and_seconds_are_bounded() {
        let e = refusal("bench open-loop --rates 100 --seconds 0.1");
        assert!(e.contains("at least 300 orders"), "{e}");
        assert!(e.contains("--seconds 3 or more"), "{e}");
        assert!(e.contains("at least 3000 orders/s"), "{e}");
        let e = refusal("bench open-loop --rates 0.5 --seconds 0.1");
        assert!(e.contains("--rates 0.5"), "{e}");
        for bad in ["1e12", "0", "-5", "NaN", "inf"] {
            let e = refusal(&format!("bench open-loop --rates {bad}"));
            assert!(
                e.contains("--rates") && e.contains("10,000,000"),
                "{bad}: {e}"
            );
        }
        for bad in ["1e9", "0", "0.05", "NaN", "-1", "601"] {
            let e = refusal(&format!("bench open-loop --seconds {bad}"));
            assert!(e.contains("--seconds") && e.contains("600"), "{bad}: {e}");
        }
        let e = refusal("bench open-loop --rates 10000000 --seconds 600");
        assert!(
            e.contains("10,000,000") && e.contains("--seconds 1 or less"),
            "{e}"
        );
        let e = refusal("bench open-loop --rates 2000,1000");
        assert!(e.contains("strictly increasing"), "{e}");
        let e = refusal("bench open-loop --rates 2000,2000");
        assert!(e.contains("strictly increasing"), "{e}");
        let e = refusal("bench open-loop --rates 3,2");
        assert!(e.contains("strictly increasing"), "{e}");
    }

    #[test]
    fn quick_refuses_sizes_of_its_own() {
        for args in [
            "bench closed --quick --orders 100",
            "bench all --quick --fsync-orders 100",
            "bench baseline --quick --orders 100",
            "bench open-loop --quick --rates 1000",
            "bench open-loop --quick --seconds 1",
        ] {
            let e = refusal(args);
            let option = args.split(' ').nth(3).unwrap();
            assert!(
                e.contains(option) && e.contains("--quick") && e.contains("its own sizes"),
                "{args}: {e}"
            );
        }
    }

    #[test]
    fn lists_are_checked() {
        let e = refusal("bench closed --clients 4,4");
        assert!(e.contains("--clients lists 4 twice"), "{e}");
        let e = refusal("bench open-loop --styles one-way,one-way");
        assert!(e.contains("--styles lists one-way twice"), "{e}");
        let e = refusal("bench baseline --logs none,none");
        assert!(e.contains("--logs lists none twice"), "{e}");
        for args in [
            "bench closed --clients 0",
            "bench all --clients 1001",
            "bench baseline --clients 100000",
        ] {
            let e = clap_refusal(args);
            assert!(
                e.contains("--clients") && e.contains("1..=1000"),
                "{args}: {e}"
            );
        }
        for args in ["bench closed --clients ", "bench closed --styles "] {
            assert!(!clap_refusal(args).is_empty(), "{args}");
        }
    }

    #[test]
    fn ignored_options_are_refused() {
        for (args, option) in [
            ("bench fsync-probe --repeat 2", "--repeat"),
            ("bench fsync-probe --warmup 1", "--warmup"),
            ("bench fsync-probe --workers 2", "--workers"),
            ("bench baseline --throughput 8", "--throughput"),
            ("bench baseline --entry router", "--entry"),
            ("bench open-loop --entry receivers", "--entry"),
            ("bench fsync-probe --entry router", "--entry"),
            ("run --dir x --scratch y", "--scratch"),
            ("inspect --dir x --scratch y", "--scratch"),
        ] {
            let e = refusal(args);
            assert!(e.contains(option), "{args}: {e}");
        }
    }

    #[test]
    fn entry_is_router_unless_asked() {
        for (args, entry) in [
            ("bench compare --quick", Entry::Router),
            ("bench compare --quick --entry receivers", Entry::Receivers),
            ("bench closed --quick --entry router", Entry::Router),
            ("bench --entry receivers all --quick", Entry::Receivers),
        ] {
            let cli = Cli::try_parse_from(std::iter::once("troupe-trading").chain(args.split(' ')))
                .unwrap();
            let (setup, _) = prepare(cli).unwrap_or_else(|e| panic!("{args}: {e:#}"));
            assert_eq!(setup.entry, entry, "{args}");
        }
        let e = clap_refusal("bench compare --entry door");
        assert!(e.contains("router") && e.contains("receivers"), "{e}");
    }

    #[test]
    fn global_bounds_come_from_clap() {
        for (args, bound) in [
            ("bench closed --workers 0", "1..=1024"),
            ("bench closed --workers 1025", "1..=1024"),
            ("bench closed --throughput 0", "1..=1000000"),
            ("bench closed --repeat 0", "1..=1000"),
            ("bench closed --warmup 1001", "0..=1000"),
            ("run --dir x --rounds 0", "1..=1000000"),
            ("run --dir x --clients -1", "--clients"),
            ("bench closed --warmup -1", "--warmup"),
            ("bench closed --clients 4,-1", "--clients"),
        ] {
            let e = clap_refusal(args);
            assert!(e.contains(bound) && !e.contains('\n'), "{args}: {e}");
        }
    }

    #[test]
    fn help_shows_the_possible_values() {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        let closed = cmd
            .find_subcommand_mut("bench")
            .unwrap()
            .find_subcommand_mut("closed")
            .unwrap();
        let help = closed.render_help().to_string();
        for word in [
            "request-reply",
            "one-way",
            "none",
            "buffered",
            "fsync",
            "1 to 1000",
        ] {
            assert!(help.contains(word), "{word} not in {help}");
        }
    }

    #[test]
    fn progress_counts_every_run() {
        let (setup, job) = prepare(
            Cli::try_parse_from(
                "troupe-trading bench all --quick --repeat 2 --warmup 1 --clients 1,4".split(' '),
            )
            .unwrap(),
        )
        .unwrap();
        let Job::Bench { plan, .. } = job else {
            panic!("not a benchmark")
        };
        // Closed: 3 logs x 2 styles x 2 client counts x 3 runs, plus one fsync probe. Open
        // loop: 2 logs x 2 styles x 2 rates x 3 runs. Baselines: 3 logs x (1 + 2) x 3 runs.
        assert_eq!(plan.runs(&setup), 36 + 1 + 24 + 27);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(100_000_000), "100,000,000");
    }
}
