//! The benchmark: both stores under the seed's load, in one run, each on fresh backends.
//!
//! For each repetition and each store: start the backends and the store on loopback, run the
//! closed model through its phases (healthy, search hanging, recovered), stop both. Then, if
//! asked, the open model's capacity search against each store with healthy backends.
//!
//! Everything runs in this process, each part on runtimes and threads of its own: the
//! backends on a 2-thread tokio runtime, the troupe store on a 2-thread tokio runtime plus
//! troupe's workers, the baseline on its own 200 threads, the load on a 2-thread runtime.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde::Serialize;

use crate::actor_store::{ActorStore, ActorStoreConfig};
use crate::backends::{Backends, BackendsConfig, SearchMode};
use crate::listener::{listen, listen_async};
use crate::load::{self, ClosedConfig, ClosedReport, OpenPoint, Phase};
use crate::thread_store::{ThreadStore, ThreadStoreConfig};

/// Which store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// The store on troupe.
    Troupe,
    /// The thread-per-request baseline.
    Threads,
}

impl StoreKind {
    /// Its contender name in results.
    pub fn contender(self) -> &'static str {
        match self {
            StoreKind::Troupe => "troupe-store",
            StoreKind::Threads => "thread-per-request",
        }
    }
}

/// The benchmark's settings.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Repetitions (the figures are medians over them).
    pub runs: usize,
    /// Run the closed model (the seed's users and phases).
    pub closed_model: bool,
    /// The stores, in the order they run.
    pub stores: Vec<StoreKind>,
    /// The closed model (users, think times, phases).
    pub closed: ClosedConfig,
    /// How long a hanging search call waits before its 502.
    pub hang: Duration,
    /// The troupe store's settings (its backend URLs are filled in per run).
    pub troupe: ActorStoreConfig,
    /// The baseline's request threads.
    pub threads: usize,
    /// Run the open model's capacity search too.
    pub open: bool,
    /// Rates tried, rising.
    pub open_rates: Vec<f64>,
    /// Each rate's duration.
    pub open_step: Duration,
    /// Connections the open model uses.
    pub open_connections: usize,
    /// The p99 bound of the capacity search.
    pub open_p99: Duration,
}

impl BenchConfig {
    /// The seed's sizes: 300 users per kind thinking 500-1500 ms; 20 s healthy, 40 s with
    /// search hanging for 30 s per call, 40 s recovered; 3 repetitions, each with the
    /// capacity search.
    pub fn seed() -> Self {
        let mut troupe = ActorStoreConfig::new("http://127.0.0.1:1", "http://127.0.0.1:1");
        troupe.workers = None;
        Self {
            runs: 3,
            closed_model: true,
            stores: vec![StoreKind::Troupe, StoreKind::Threads],
            closed: ClosedConfig {
                users_per_kind: 300,
                think: (Duration::from_millis(500), Duration::from_millis(1500)),
                phases: vec![
                    phase("healthy", 20, SearchMode::Healthy),
                    phase("search_hangs", 40, SearchMode::Hang),
                    // Longer than the hang: the baseline's threads are held by calls made
                    // while search hung for up to 30 s after it recovers.
                    phase("recovered", 40, SearchMode::Healthy),
                ],
                give_up_after: Duration::from_secs(120),
                drain: Duration::from_secs(5),
            },
            hang: Duration::from_secs(30),
            troupe,
            threads: 200,
            open: true,
            open_rates: vec![
                2_000.0, 5_000.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0, 60_000.0,
                80_000.0, 100_000.0,
            ],
            open_step: Duration::from_secs(3),
            open_connections: 64,
            open_p99: Duration::from_millis(10),
        }
    }

    /// Sizes for tests: 5 users per kind thinking 50-150 ms; 2 s healthy, 3 s hanging (2 s per
    /// call), 6 s recovered; the breaker open for 1 s; one repetition; no capacity search.
    pub fn quick() -> Self {
        let mut config = Self::seed();
        config.runs = 1;
        config.closed.users_per_kind = 5;
        config.closed.think = (Duration::from_millis(50), Duration::from_millis(150));
        config.closed.phases = vec![
            phase_ms("healthy", 2_000, SearchMode::Healthy),
            phase_ms("search_hangs", 3_000, SearchMode::Hang),
            phase_ms("recovered", 6_000, SearchMode::Healthy),
        ];
        config.closed.give_up_after = Duration::from_secs(10);
        config.closed.drain = Duration::from_secs(3);
        config.hang = Duration::from_secs(2);
        config.troupe.call_timeout = Duration::from_millis(300);
        config.troupe.request_timeout = Duration::from_secs(1);
        config.troupe.breaker.open_for = Duration::from_secs(1);
        config.open = false;
        config.open_rates = vec![500.0, 1_000.0];
        config.open_step = Duration::from_millis(500);
        config.open_connections = 8;
        config
    }

    /// Checks the settings.
    pub fn check(&self) -> Result<()> {
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        if self.stores.is_empty() {
            bail!("at least one store must run");
        }
        if self.closed.users_per_kind == 0 {
            bail!("--users must be at least 1");
        }
        if self.closed.think.0 > self.closed.think.1 {
            bail!("the shortest think time must not exceed the longest");
        }
        if self.closed.phases.iter().any(|p| p.duration.is_zero()) {
            bail!("every phase must last more than 0 s");
        }
        if self.threads == 0 || self.threads > 10_000 {
            bail!("--threads must be between 1 and 10000");
        }
        if !self.closed_model && !self.open {
            bail!("nothing to run: the closed model and the open model are both off");
        }
        if self.open && (self.open_rates.is_empty() || self.open_connections == 0) {
            bail!("the open model needs rates and at least 1 connection");
        }
        let mut troupe = self.troupe.clone();
        troupe.search_url = "http://127.0.0.1:1".into();
        troupe.payment_url = "http://127.0.0.1:1".into();
        troupe.check().map_err(anyhow::Error::msg)
    }
}

fn phase(name: &str, seconds: u64, search: SearchMode) -> Phase {
    phase_ms(name, seconds * 1000, search)
}

fn phase_ms(name: &str, millis: u64, search: SearchMode) -> Phase {
    Phase {
        name: name.to_owned(),
        duration: Duration::from_millis(millis),
        search,
    }
}

/// One store's closed run.
#[derive(Debug, Clone, Serialize)]
pub struct ClosedRun {
    /// Which store.
    pub store: StoreKind,
    /// Which repetition (0-based).
    pub run: usize,
    /// What it measured.
    pub report: ClosedReport,
    /// The troupe store's counters at the end (the baseline has none).
    pub stats: Option<crate::actor_store::StoreStats>,
}

/// One store's capacity search.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// Which store.
    pub store: StoreKind,
    /// Which repetition (0-based).
    pub run: usize,
    /// Every rate tried, with its result.
    pub points: Vec<OpenPoint>,
    /// The highest rate whose p99 stayed under the bound.
    pub held: Option<f64>,
}

/// Everything the benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Closed runs, in the order they ran.
    pub closed: Vec<ClosedRun>,
    /// Capacity searches.
    pub capacity: Vec<Capacity>,
    /// The phases, for the reports.
    pub phases: Vec<String>,
    /// Users per kind.
    pub users_per_kind: usize,
    /// The p99 bound of the capacity search (ms).
    pub open_p99_ms: f64,
    /// The highest rate the capacity search tries (req/s): a store that holds it may hold
    /// more, so its capacity is at least this.
    pub open_top_rate: f64,
    /// The lowest rate it tries: a store that holds none has a capacity below this.
    pub open_bottom_rate: f64,
}

fn runtime(name: &str, threads: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .enable_all()
        .build()
        .with_context(|| format!("starting the {name} runtime"))
}

/// A store under test, whichever kind.
enum Running {
    Troupe(ActorStore, tokio::runtime::Runtime),
    Threads(ThreadStore),
}

impl Running {
    fn start(kind: StoreKind, config: &BenchConfig, backends: &Backends) -> Result<Running> {
        let search = format!("http://{}", backends.search_addr());
        let payment = format!("http://{}", backends.payment_addr());
        match kind {
            StoreKind::Troupe => {
                let rt = runtime("store-io", 1)?;
                let mut store_config = config.troupe.clone();
                store_config.search_url = search;
                store_config.payment_url = payment;
                let store = rt.block_on(async {
                    let listener = listen_async("127.0.0.1:0")?;
                    ActorStore::start(listener, store_config).await
                })?;
                Ok(Running::Troupe(store, rt))
            }
            StoreKind::Threads => {
                let listener = listen("127.0.0.1:0")?;
                let mut store_config = ThreadStoreConfig::new(search, payment);
                store_config.threads = config.threads;
                Ok(Running::Threads(ThreadStore::start(
                    listener,
                    store_config,
                )?))
            }
        }
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Running::Troupe(store, _) => store.local_addr(),
            Running::Threads(store) => store.local_addr(),
        }
    }

    fn stop(self) {
        match self {
            Running::Troupe(store, rt) => {
                rt.block_on(store.stop());
                rt.shutdown_timeout(Duration::from_secs(5));
            }
            Running::Threads(store) => store.stop(),
        }
    }
}

fn start_backends(rt: &tokio::runtime::Runtime, hang: Duration) -> Result<Backends> {
    rt.block_on(async {
        let search = listen_async("127.0.0.1:0")?;
        let payment = listen_async("127.0.0.1:0")?;
        let config = BackendsConfig {
            hang,
            ..BackendsConfig::default()
        };
        Backends::start(search, payment, config).await
    })
    .context("starting the backends")
}

/// Starts fresh backends and a fresh store of `kind`, runs `load` against them (given the
/// store's address and the search service's), and stops both.
fn against_fresh_store<T>(
    kind: StoreKind,
    config: &BenchConfig,
    load: impl FnOnce(SocketAddr, SocketAddr) -> T,
) -> Result<T> {
    let backend_rt = runtime("backend", 2)?;
    let backends = start_backends(&backend_rt, config.hang)?;
    let store = Running::start(kind, config, &backends)?;
    let result = load(store.addr(), backends.search_addr());
    store.stop();
    backend_rt.block_on(backends.stop());
    backend_rt.shutdown_timeout(Duration::from_secs(5));
    Ok(result)
}

/// How long one closed run takes (its phases, and the drain at most), and one capacity
/// search at most (its warm-up second and every rate).
fn planned(config: &BenchConfig) -> (Duration, Duration) {
    let closed = config
        .closed
        .phases
        .iter()
        .map(|p| p.duration)
        .sum::<Duration>()
        + config.closed.drain;
    let open = Duration::from_secs(1) + config.open_step * config.open_rates.len() as u32;
    (closed, open)
}

/// `what`, and roughly how long is left of everything planned.
fn with_eta(what: &str, left: Duration) -> String {
    let seconds = left.as_secs();
    format!("{what} (at most {}:{:02} left)", seconds / 60, seconds % 60)
}

/// Runs the benchmark; `progress` hears what is starting and how long is left at most.
pub fn run(config: &BenchConfig, progress: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    config.check()?;
    let (closed_each, open_each) = planned(config);
    let units = (config.runs * config.stores.len()) as u32;
    let mut left = if config.closed_model {
        closed_each * units
    } else {
        Duration::ZERO
    } + if config.open {
        open_each * units
    } else {
        Duration::ZERO
    };
    let load_rt = runtime("load", 1)?;
    let mut closed = Vec::new();
    for run in 0..config.runs {
        if !config.closed_model {
            break;
        }
        for &kind in &config.stores {
            progress(&with_eta(
                &format!(
                    "run {}/{}: {} under the closed model ({} users per kind)",
                    run + 1,
                    config.runs,
                    kind.contender(),
                    config.closed.users_per_kind
                ),
                left,
            ));
            left = left.saturating_sub(closed_each);
            let (result, stats) = against_fresh_store(kind, config, |store, search| {
                let result = load_rt.block_on(load::closed(store, search, &config.closed));
                let stats = load_rt.block_on(load::store_stats(store)).ok().flatten();
                (result, stats)
            })?;
            let report = result.map_err(anyhow::Error::msg)?;
            closed.push(ClosedRun {
                store: kind,
                run,
                report,
                stats,
            });
        }
    }
    let mut capacity = Vec::new();
    for run in 0..config.runs {
        if !config.open {
            break;
        }
        for &kind in &config.stores {
            progress(&with_eta(
                &format!(
                    "run {}/{}: {} capacity search (open model)",
                    run + 1,
                    config.runs,
                    kind.contender()
                ),
                left,
            ));
            left = left.saturating_sub(open_each);
            let result = against_fresh_store(kind, config, |store, _| {
                load_rt.block_on(load::capacity(
                    store,
                    &config.open_rates,
                    config.open_step,
                    config.open_connections,
                    config.open_p99,
                ))
            })?;
            let (points, held) = result.map_err(anyhow::Error::msg)?;
            capacity.push(Capacity {
                store: kind,
                run,
                points,
                held,
            });
        }
    }
    load_rt.shutdown_timeout(Duration::from_secs(5));
    Ok(BenchReport {
        closed,
        capacity,
        phases: config
            .closed
            .phases
            .iter()
            .map(|p| p.name.clone())
            .collect(),
        users_per_kind: config.closed.users_per_kind,
        open_p99_ms: config.open_p99.as_secs_f64() * 1000.0,
        open_top_rate: config.open_rates.iter().copied().fold(0.0, f64::max),
        open_bottom_rate: config
            .open_rates
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(config.open_rates.iter().copied().fold(0.0, f64::max)),
    })
}
