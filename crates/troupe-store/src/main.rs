//! `troupe-store`: the backends, either store, and the benchmark of seed 001.
//!
//! ```text
//! troupe-store backends --search-port 4001 --payment-port 4002 [--search hang]
//! troupe-store serve --store troupe --port 8080 --search-url http://127.0.0.1:4001 --payment-url http://127.0.0.1:4002
//! troupe-store serve --store threads --port 8081 --search-url ... --payment-url ...
//! troupe-store bench [--quick] [--runs 3] [--json] [--out results/store]
//! troupe-store simulate [--seeds 10] [--first-seed 0] [--verbose]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Parser, Subcommand};
use troupe_store::actor_store::{ActorStore, ActorStoreConfig};
use troupe_store::backends::{Backends, BackendsConfig, SearchMode};
use troupe_store::bench::{self, BenchConfig, StoreKind};
use troupe_store::breaker::BreakerConfig;
use troupe_store::bulkhead::BulkheadConfig;
use troupe_store::listener::{listen, listen_async};
use troupe_store::report;
use troupe_store::thread_store::{ThreadStore, ThreadStoreConfig};

#[derive(Parser)]
#[command(
    name = "troupe-store",
    version,
    about = "The online store of seed 001 on troupe, beside a thread-per-request baseline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the search and payment services (20 ms each) until interrupted.
    Backends {
        /// The search service's port.
        #[arg(long, default_value_t = 4001)]
        search_port: u16,
        /// The payment service's port.
        #[arg(long, default_value_t = 4002)]
        payment_port: u16,
        /// The search service's mode at start (switch later with POST /admin/search/<mode>).
        #[arg(long, value_enum, default_value_t = SearchMode::Healthy)]
        search: SearchMode,
        /// How long a healthy call takes (ms).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=60_000))]
        latency_ms: u64,
        /// How long a hanging search call waits before its 502 (s).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3_600))]
        hang_secs: u64,
    },
    /// Runs one store until interrupted.
    Serve(ServeArgs),
    /// Both stores under the seed's load, in one run; prints the table, writes JSON lines,
    /// the Markdown table and the charts into --out.
    Bench(BenchArgs),
    /// The seed's scenario in deterministic simulation, one run per seed: checks its claims
    /// and prints simulated time per second of wall time.
    Simulate {
        /// How many seeds.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        first_seed: u64,
        /// Prints every run's latency table, not only its first line.
        #[arg(long)]
        verbose: bool,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Which store.
    #[arg(long, value_enum)]
    store: StoreKind,
    /// The port to serve on (127.0.0.1).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// The search service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:4001")]
    search_url: String,
    /// The payment service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:4002")]
    payment_url: String,
    #[command(flatten)]
    tuning: Tuning,
}

/// The stores' settings; the defaults are justified in the crate's README.
#[derive(Args, Clone)]
struct Tuning {
    /// troupe store: the longest one backend call may take (ms).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    call_timeout_ms: u64,
    /// troupe store: the longest a request waits for a backend actor, queueing included (ms).
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    request_timeout_ms: u64,
    /// troupe store: calls in flight per backend.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_in_flight: u64,
    /// troupe store: calls waiting per backend beyond those in flight.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    max_queued: u64,
    /// troupe store: the breaker's window (calls).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    breaker_window: u64,
    /// troupe store: calls in the window before the breaker may open.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    breaker_minimum_calls: u64,
    /// troupe store: failure rate (0-1] that opens the breaker.
    #[arg(long, default_value_t = 0.5)]
    breaker_threshold: f64,
    /// troupe store: how long the breaker stays open (ms).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    breaker_open_ms: u64,
    /// troupe store: probes let through while half-open.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    breaker_probes: u64,
    /// troupe store: requests in progress before the edge answers 503.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_concurrent: u64,
    /// troupe store: restarts of a failed backend actor allowed within a second.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    max_restarts: u32,
    /// troupe store: a request's head must arrive within this, and a kept-alive connection
    /// may stay idle this long (ms).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    header_timeout_ms: u64,
    /// troupe store: a request's whole body must arrive within this of its head (ms).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    body_timeout_ms: u64,
    /// troupe store: connections served at once; the next wait in the listen backlog.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// troupe store: troupe's worker threads (default: TROUPE_WORKERS, else one per core).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    workers: Option<u64>,
    /// thread-per-request store: request threads (Tomcat's maxThreads default).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    threads: u64,
    /// Both stores: the largest request body (bytes).
    #[arg(long, default_value_t = troupe_store::MAX_BODY as u64, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    max_body: u64,
}

impl Tuning {
    fn troupe(&self, search_url: String, payment_url: String) -> Result<ActorStoreConfig> {
        let mut config = ActorStoreConfig::new(search_url, payment_url);
        config.call_timeout = Duration::from_millis(self.call_timeout_ms);
        config.request_timeout = Duration::from_millis(self.request_timeout_ms);
        config.bulkhead = BulkheadConfig {
            max_in_flight: self.max_in_flight as usize,
            max_queued: self.max_queued as usize,
        };
        config.breaker = BreakerConfig {
            window: self.breaker_window as usize,
            minimum_calls: self.breaker_minimum_calls as usize,
            failure_threshold: self.breaker_threshold,
            open_for: Duration::from_millis(self.breaker_open_ms),
            half_open_calls: self.breaker_probes as usize,
        };
        config.max_concurrent_requests = self.max_concurrent as usize;
        config.max_body = self.max_body as usize;
        config.header_timeout = Duration::from_millis(self.header_timeout_ms);
        config.body_timeout = Duration::from_millis(self.body_timeout_ms);
        config.max_connections = self.max_connections as usize;
        config.workers = self.workers.map(|w| w as usize);
        config.max_restarts = self.max_restarts;
        config.check().map_err(anyhow::Error::msg)?;
        Ok(config)
    }
}

#[derive(Args)]
struct BenchArgs {
    /// Test sizes: 5 users per kind, a 2 s hang, about 12 s per store, no capacity search.
    #[arg(long)]
    quick: bool,
    /// Repetitions (figures are medians over them).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    runs: Option<u64>,
    /// Users per kind of request (the seed's 300).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    users: Option<u64>,
    /// Seconds of each phase: healthy, search hanging, recovered.
    #[arg(long, num_args = 3, value_names = ["HEALTHY", "HANGING", "RECOVERED"], value_parser = clap::value_parser!(u64).range(1..=3_600))]
    phases: Option<Vec<u64>>,
    /// How long a hanging search call waits before its 502 (s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    hang_secs: Option<u64>,
    /// Which stores (default both).
    #[arg(long, value_enum, value_delimiter = ',')]
    stores: Option<Vec<StoreKind>>,
    /// Skip the open model's capacity search.
    #[arg(long)]
    no_open: bool,
    /// Skip the closed model (run only the capacity search).
    #[arg(long)]
    no_closed: bool,
    /// Connections the open model uses.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    connections: Option<u64>,
    /// Seconds per rate in the capacity search.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=600))]
    step_secs: Option<u64>,
    /// Print JSON lines (the schema of peers/PROTOCOL.md) instead of the table.
    #[arg(long)]
    json: bool,
    /// Where to write results.jsonl, results.md, report.json, the charts and the HTML report
    /// index.html.
    #[arg(long, default_value = "results/store")]
    out: PathBuf,
}

impl BenchArgs {
    fn config(&self) -> Result<BenchConfig> {
        let mut config = if self.quick {
            BenchConfig::quick()
        } else {
            BenchConfig::seed()
        };
        if let Some(runs) = self.runs {
            config.runs = runs as usize;
        }
        if let Some(users) = self.users {
            config.closed.users_per_kind = users as usize;
        }
        if let Some(phases) = &self.phases {
            for (phase, seconds) in config.closed.phases.iter_mut().zip(phases) {
                phase.duration = Duration::from_secs(*seconds);
            }
        }
        if let Some(hang) = self.hang_secs {
            config.hang = Duration::from_secs(hang);
        }
        if let Some(stores) = &self.stores {
            let mut stores = stores.clone();
            stores.dedup();
            config.stores = stores;
        }
        if self.no_open {
            config.open = false;
        }
        if self.no_closed {
            config.closed_model = false;
        }
        if let Some(connections) = self.connections {
            config.open_connections = connections as usize;
        }
        if let Some(step) = self.step_secs {
            config.open_step = Duration::from_secs(step);
        }
        config.check()?;
        Ok(config)
    }
}

/// Errors end the program with one line (the error and its causes), never a backtrace.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("troupe-store: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Backends {
            search_port,
            payment_port,
            search,
            latency_ms,
            hang_secs,
        } => {
            if search_port == payment_port && search_port != 0 {
                bail!("--search-port and --payment-port must differ");
            }
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(async {
                let s = listen_async(("127.0.0.1", search_port))
                    .with_context(|| format!("binding 127.0.0.1:{search_port}"))?;
                let p = listen_async(("127.0.0.1", payment_port))
                    .with_context(|| format!("binding 127.0.0.1:{payment_port}"))?;
                let config = BackendsConfig {
                    latency: Duration::from_millis(latency_ms),
                    hang: Duration::from_secs(hang_secs),
                    search_mode: search,
                };
                let backends = Backends::start(s, p, config).await?;
                println!(
                    "search on http://{}, payment on http://{} (search {:?}); Ctrl-C stops",
                    backends.search_addr(),
                    backends.payment_addr(),
                    search
                );
                tokio::signal::ctrl_c().await?;
                backends.stop().await;
                Ok(())
            })
        }
        Command::Serve(args) => serve(args),
        Command::Bench(args) => bench_command(args),
        Command::Simulate {
            seeds,
            first_seed,
            verbose,
        } => simulate(first_seed, seeds, verbose),
    }
}

fn simulate(first_seed: u64, seeds: u64, verbose: bool) -> Result<()> {
    let (mut simulated, mut wall, mut broken) = (Duration::ZERO, Duration::ZERO, 0);
    let mut ratios = Vec::new();
    for seed in first_seed..first_seed.saturating_add(seeds) {
        let outcome = troupe_store::simulation::run_scenario(seed);
        if verbose {
            println!("{outcome}");
        } else {
            print!("{}", outcome.to_string().lines().next().unwrap_or_default());
            println!();
        }
        if let Err(claims) = outcome.check() {
            broken += 1;
            println!("  {claims}");
        }
        simulated += outcome.simulated;
        wall += outcome.wall;
        ratios.push(outcome.ratio());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{seeds} runs: {:.0} s simulated in {:.2} s of wall time: {:.0} simulated seconds per \
         wall second (per run: {:.0} to {:.0}, median {:.0}); {} with a broken claim",
        simulated.as_secs_f64(),
        wall.as_secs_f64(),
        simulated.as_secs_f64() / wall.as_secs_f64().max(1e-9),
        ratios.first().copied().unwrap_or_default(),
        ratios.last().copied().unwrap_or_default(),
        ratios[ratios.len() / 2],
        broken
    );
    if broken > 0 {
        bail!("{broken} run(s) broke a claim of the seed");
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Result<()> {
    match args.store {
        StoreKind::Troupe => {
            let config = args.tuning.troupe(args.search_url, args.payment_url)?;
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(async {
                let listener = listen_async(("127.0.0.1", args.port))
                    .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
                let store = ActorStore::start(listener, config).await?;
                println!(
                    "troupe store on http://{}; Ctrl-C stops",
                    store.local_addr()
                );
                tokio::signal::ctrl_c().await?;
                store.stop().await;
                Ok(())
            })
        }
        StoreKind::Threads => {
            let mut config = ThreadStoreConfig::new(args.search_url, args.payment_url);
            config.threads = args.tuning.threads as usize;
            config.max_body = args.tuning.max_body as usize;
            let listener = listen(("127.0.0.1", args.port))
                .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
            let store = ThreadStore::start(listener, config)?;
            println!(
                "thread-per-request store on http://{}; Ctrl-C stops",
                store.local_addr()
            );
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(tokio::signal::ctrl_c())?;
            store.stop();
            Ok(())
        }
    }
}

/// The store's charts, drawn by the suite's report (the store section of its page), one SVG
/// file each, named after its title (`store-seed-001-answers-per-second-by-phase.svg`).
fn write_charts(
    records: &[troupe_results::Record],
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>> {
    let series = troupe_results::report::Series {
        label: "troupe-store bench".to_owned(),
        records: records.to_vec(),
    };
    let mut written = Vec::new();
    for figure in troupe_results::report::figures(&[series])
        .into_iter()
        .filter(|f| f.section == "store")
    {
        let path = dir.join(figure.file_name());
        troupe_results::write_whole(&path, figure.svg.as_bytes())
            .with_context(|| format!("writing the chart {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn bench_command(args: BenchArgs) -> Result<()> {
    let config = args.config()?;
    // The folder is made before the run, so a long run is never lost to it.
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create the results folder {}", args.out.display()))?;
    let mut progress = |line: &str| eprintln!("{line}");
    let result = bench::run(&config, &mut progress)?;
    let records = report::records(&result);
    let page = troupe_results::write_results(&args.out, &records).context("writing the results")?;
    let lines: Vec<String> = records
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<_, _>>()?;
    let table = report::table(&result);
    troupe_results::write_whole(&args.out.join("results.md"), table.as_bytes())?;
    troupe_results::write_whole(
        &args.out.join("report.json"),
        serde_json::to_string_pretty(&result)?.as_bytes(),
    )?;
    let charts = write_charts(&records, &args.out)?;
    if args.json {
        for line in &lines {
            println!("{line}");
        }
    } else {
        println!("{table}");
        print!("{}", report::counters(&result));
    }
    eprintln!(
        "wrote {} results, the table, report.json and {} charts into {}; the HTML report: {}",
        lines.len(),
        charts.len(),
        args.out.display(),
        page.display()
    );
    Ok(())
}
