//! `troupe-trading`: the trading system of seed 003 as a program: benchmark it, run it on
//! logs, inspect its logs.
//!
//! ```text
//! troupe-trading bench all [--quick] [--json]     every benchmark below
//! troupe-trading bench closed ...                 the seed's closed loop (styles x logs x clients)
//! troupe-trading bench open-loop ...              fixed-rate sweep, latency from planned send times
//! troupe-trading bench baseline ...               synchronous calls, and OS threads with locks
//! troupe-trading bench fsync-probe                this disk's own fdatasync latency
//! troupe-trading run --dir D --log fsync ...      the system on logs in D, reporting each ack
//! troupe-trading inspect --dir D --log fsync      read D's logs (changing nothing), print them
//! ```

mod baseline;
mod bench;
mod open_loop;
mod report;
mod run;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, Parser, Subcommand};
use troupe_trading::{LogMode, Style};

use report::Printer;

#[derive(Parser, Debug)]
#[command(
    name = "troupe-trading",
    version,
    about = "The limit-order trading system of seed 003 on troupe: benchmark, run, inspect"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Global {
    /// Worker threads in troupe's pool (default: one per core).
    #[arg(long, global = true)]
    workers: Option<usize>,
    /// Messages an actor handles per turn before yielding its worker.
    #[arg(long, global = true, default_value_t = 64)]
    throughput: usize,
    /// Directory for the benchmark's scratch logs (default: the system's temporary directory).
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
        #[arg(long, default_value = "fsync", value_parser = parse_log)]
        log: LogMode,
        #[arg(long, default_value = "request-reply", value_parser = parse_style)]
        style: Style,
        /// Client threads.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
        clients: u64,
        /// Rounds of the scenario per client (30 orders each).
        #[arg(long, default_value_t = 100)]
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
    /// Reads the logs in a directory (read-only: changes nothing) and prints what they hold.
    Inspect {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value = "fsync", value_parser = parse_log)]
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
    /// Tiny sizes, one repetition: proves everything works end to end in seconds.
    #[arg(long, global = true)]
    quick: bool,
    /// Print one JSON object per result (JSON Lines) instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Measured repetitions of each configuration (default 3; 1 with --quick).
    #[arg(long, global = true)]
    repeat: Option<usize>,
    /// Unmeasured repetitions before the measured ones (each measured run also warms up).
    #[arg(long, global = true, default_value_t = 0)]
    warmup: usize,
}

#[derive(Args, Debug, Clone)]
struct MatrixOpts {
    /// Messaging styles.
    #[arg(long, value_delimiter = ',', value_parser = parse_style, default_value = "request-reply,one-way")]
    styles: Vec<Style>,
    /// Client counts (the seed's load levels).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,10,20,40")]
    clients: Vec<usize>,
    /// Orders per load level (the seed: 750,000).
    #[arg(long, default_value_t = 750_000)]
    orders: u64,
    /// Orders per load level in fsync mode, where every order waits for the disk.
    #[arg(long, default_value_t = 30_000)]
    fsync_orders: u64,
}

#[derive(Subcommand, Debug)]
enum Which {
    /// Every benchmark: fsync probe, closed loop, open loop, baselines.
    All {
        #[command(flatten)]
        matrix: MatrixOpts,
        #[arg(long, value_delimiter = ',', value_parser = parse_log, default_value = "none,buffered,fsync")]
        logs: Vec<LogMode>,
    },
    /// The seed's closed loop for each style, log mode and client count.
    Closed {
        #[command(flatten)]
        matrix: MatrixOpts,
        #[arg(long, value_delimiter = ',', value_parser = parse_log, default_value = "none,buffered,fsync")]
        logs: Vec<LogMode>,
    },
    /// Fixed-rate sweep: the highest rate whose p99 stays under 1 ms.
    OpenLoop {
        #[arg(long, value_delimiter = ',', value_parser = parse_style, default_value = "request-reply,one-way")]
        styles: Vec<Style>,
        #[arg(long, value_delimiter = ',', value_parser = parse_log, default_value = "none,buffered")]
        logs: Vec<LogMode>,
        /// Rates to try, in orders per second, increasing.
        #[arg(long, value_delimiter = ',')]
        rates: Vec<f64>,
        /// Seconds of orders per rate.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
    },
    /// Synchronous method calls, and OS threads with locks, on the same scenario.
    Baseline {
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,10,20,40")]
        clients: Vec<usize>,
        #[arg(long, value_delimiter = ',', value_parser = parse_log, default_value = "none,buffered,fsync")]
        logs: Vec<LogMode>,
        #[arg(long, default_value_t = 750_000)]
        orders: u64,
        #[arg(long, default_value_t = 30_000)]
        fsync_orders: u64,
    },
    /// This disk's own fdatasync latency.
    FsyncProbe,
}

fn parse_log(s: &str) -> Result<LogMode, String> {
    s.parse()
}

fn parse_style(s: &str) -> Result<Style, String> {
    s.parse()
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
}

const DEFAULT_RATES: [f64; 12] = [
    50e3, 100e3, 200e3, 300e3, 400e3, 500e3, 600e3, 700e3, 800e3, 1e6, 1.2e6, 1.5e6,
];

fn main() -> Result<()> {
    let cli = Cli::parse();
    let g = cli.global;
    if g.workers == Some(0) {
        bail!("--workers must be at least 1");
    }
    if g.throughput == 0 {
        bail!("--throughput must be at least 1");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut setup = Setup {
        workers: g.workers.unwrap_or(cores),
        throughput: g.throughput,
        quick: false,
        repeat: 1,
        warmup: 0,
        scratch: g.scratch,
    };
    match cli.command {
        Command::Run {
            dir,
            log,
            style,
            clients,
            rounds,
            report_acks,
            salvage,
        } => run::run(
            &setup,
            &dir,
            &run::RunPlan {
                style,
                log,
                clients: clients as usize,
                rounds,
                report_acks,
                salvage,
            },
        ),
        Command::Inspect {
            dir,
            log,
            keys,
            json,
            salvage,
        } => run::inspect(
            &setup,
            &dir,
            &run::InspectPlan {
                log,
                keys,
                json,
                salvage,
            },
        ),
        Command::Bench { opts, which } => {
            setup.quick = opts.quick;
            setup.repeat = opts.repeat.unwrap_or(if opts.quick { 1 } else { 3 });
            setup.warmup = opts.warmup;
            if setup.repeat == 0 {
                bail!("--repeat must be at least 1");
            }
            let printer = Printer::new(opts.json);
            let valid = bench(&setup, &printer, which)?;
            if !valid {
                bail!("some runs failed their checks (see the lines above)");
            }
            Ok(())
        }
    }
}

fn check_matrix(m: &MatrixOpts) -> Result<()> {
    if m.clients.contains(&0) {
        bail!("--clients must all be at least 1");
    }
    if m.styles.is_empty() || m.clients.is_empty() {
        bail!("give at least one style and one client count");
    }
    Ok(())
}

fn closed_plan(setup: &Setup, m: MatrixOpts, logs: Vec<LogMode>) -> bench::ClosedPlan {
    let (orders, fsync_orders) = if setup.quick {
        (m.orders.min(3_000), m.fsync_orders.min(120))
    } else {
        (m.orders, m.fsync_orders)
    };
    bench::ClosedPlan {
        styles: m.styles,
        logs,
        clients: m.clients,
        orders,
        fsync_orders,
    }
}

fn bench(setup: &Setup, printer: &Printer, which: Which) -> Result<bool> {
    let quick_rates = vec![10e3, 50e3];
    match which {
        Which::FsyncProbe => {
            bench::fsync_probe(setup, printer)?;
            Ok(true)
        }
        Which::Closed { matrix, logs } => {
            check_matrix(&matrix)?;
            bench::closed(setup, printer, &closed_plan(setup, matrix, logs))
        }
        Which::OpenLoop {
            styles,
            logs,
            rates,
            seconds,
        } => {
            let positive = |x: f64| x.is_finite() && x > 0.0;
            if !positive(seconds) || !rates.iter().all(|&r| positive(r)) {
                bail!("--seconds and every --rates value must be positive");
            }
            let rates = match (rates.is_empty(), setup.quick) {
                (false, _) => rates,
                (true, true) => quick_rates,
                (true, false) => DEFAULT_RATES.to_vec(),
            };
            let seconds = if setup.quick {
                seconds.min(0.1)
            } else {
                seconds
            };
            open_loop::run(
                setup,
                printer,
                &open_loop::OpenPlan {
                    styles,
                    logs,
                    rates,
                    seconds,
                },
            )
        }
        Which::Baseline {
            clients,
            logs,
            orders,
            fsync_orders,
        } => {
            if clients.contains(&0) {
                bail!("--clients must all be at least 1");
            }
            let (orders, fsync_orders) = if setup.quick {
                (orders.min(3_000), fsync_orders.min(120))
            } else {
                (orders, fsync_orders)
            };
            baseline::run(
                setup,
                printer,
                &baseline::BaselinePlan {
                    kinds: vec![baseline::Kind::Direct, baseline::Kind::Threads],
                    logs,
                    clients,
                    orders,
                    fsync_orders,
                },
            )
        }
        Which::All { matrix, logs } => {
            check_matrix(&matrix)?;
            let styles = matrix.styles.clone();
            let clients = matrix.clients.clone();
            let plan = closed_plan(setup, matrix, logs.clone());
            let mut valid = bench::closed(setup, printer, &plan)?;
            let open_logs: Vec<LogMode> = logs
                .iter()
                .copied()
                .filter(|l| *l != LogMode::Fsync)
                .collect();
            valid &= open_loop::run(
                setup,
                printer,
                &open_loop::OpenPlan {
                    styles,
                    logs: open_logs,
                    rates: if setup.quick {
                        quick_rates
                    } else {
                        DEFAULT_RATES.to_vec()
                    },
                    seconds: if setup.quick { 0.1 } else { 1.0 },
                },
            )?;
            valid &= baseline::run(
                setup,
                printer,
                &baseline::BaselinePlan {
                    kinds: vec![baseline::Kind::Direct, baseline::Kind::Threads],
                    logs,
                    clients,
                    orders: plan.orders,
                    fsync_orders: plan.fsync_orders,
                },
            )?;
            Ok(valid)
        }
    }
}
