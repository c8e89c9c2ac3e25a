//! The seed's benchmark on the actor system: closed-loop clients, for each messaging style,
//! log mode and client count, each repetition on a fresh exchange with fresh logs.
//!
//! A repetition warms the exchange up with a short run of the same scenario, then measures
//! one full run, then checks it: every order was acknowledged; primary and standby applied
//! the same number of orders and have equal state hashes; trades = orders / 2 and every book
//! is empty (the seed's check). A failed check marks the result `validated: false` and makes
//! the program exit non-zero.
//!
//! Fsync runs use fewer orders (each order waits for a disk flush), and this disk's own fsync
//! latency is measured in the same run, so the two can be compared: first with one writer and
//! with six, before the fsync configurations; then with six writers (the exchange's six
//! engines flush at once) just before each measured repetition, since the disk of a shared
//! machine changes from minute to minute. Each fsync configuration is printed with the
//! latter's p50 and p99 beside it (`fsync-beside` records) and its p99 as a multiple of them.
//!
//! [`Progress`] shows how far a benchmark is, on stderr, for every benchmark of the program.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use indicatif::{HumanDuration, ProgressBar, ProgressState, ProgressStyle};
use serde_json::{json, Map, Value};
use troupe::System;
use troupe_results::probe;
use troupe_results::usage::ProcessUsage;
use troupe_trading::load::{self, Entry, LoadReport};
use troupe_trading::{Exchange, ExchangeConfig, LogMode, Market, SeedScenario, Style};

use crate::report::{percentiles_us, Printer, Samples};
use crate::Setup;

/// Orders in the warm-up run before each measurement.
fn warmup_orders(setup: &Setup, measured: u64) -> u64 {
    if setup.quick {
        (measured / 4).max(30)
    } else {
        (measured / 10).min(30_000)
    }
}

/// How the orders entered, for a record's notes.
pub fn entry_notes(entry: Entry) -> &'static str {
    match entry {
        Entry::Router => "orders routed in the clients' turns",
        Entry::Receivers => "orders through 10 receivers",
    }
}

/// A fresh actor system as configured.
pub fn system(setup: &Setup) -> Result<System> {
    Ok(System::builder()
        .workers(setup.workers)
        .throughput(setup.throughput)
        .name("trading")
        .build()?)
}

/// A fresh exchange on `system` with its logs in `dir`.
pub fn exchange(system: &System, style: Style, log: LogMode, dir: &Path) -> Result<Exchange> {
    let config = ExchangeConfig {
        style,
        log,
        log_dir: Some(dir.to_path_buf()),
        max_sessions: 4096,
        ..ExchangeConfig::seed()
    };
    Exchange::start(system, config).context("starting the exchange")
}

/// Checks the seed's invariants after `orders` orders: all applied on both engines, equal
/// hashes, trades = orders / 2, empty books.
pub fn validate(exchange: &Exchange, orders: u64) -> Result<()> {
    let states = exchange.pair_states()?;
    let applied: u64 = states.iter().map(|p| p.primary.applied).sum();
    let trades: u64 = states.iter().map(|p| p.primary.trades).sum();
    ensure!(
        applied == orders,
        "{applied} orders applied, {orders} acknowledged"
    );
    ensure!(
        trades * 2 == orders,
        "{trades} trades for {orders} orders (expected orders / 2)"
    );
    for (pair, p) in states.iter().enumerate() {
        ensure!(
            p.primary.applied == p.standby.applied,
            "pair {pair}: primary applied {}, standby {}",
            p.primary.applied,
            p.standby.applied
        );
        ensure!(
            p.primary.state_hash == p.standby.state_hash,
            "pair {pair}: primary and standby state hashes differ"
        );
        ensure!(
            p.primary.resting == 0 && p.standby.resting == 0,
            "pair {pair}: orders left in the books"
        );
    }
    Ok(())
}

/// One measured repetition of the closed loop; also returns how many orders one log commit
/// covered on average (fsync mode's group commit).
pub fn closed_once(
    setup: &Setup,
    style: Style,
    log: LogMode,
    clients: usize,
    orders: u64,
) -> Result<(LoadReport, Option<f64>, Costs)> {
    let dir = setup.scratch_dir()?;
    let system = system(setup)?;
    let exchange = exchange(&system, style, log, dir.path())?;
    let scenario = Arc::new(SeedScenario::new(exchange.market()));
    // A safety net against a stuck run, growing with the run: 15 minutes, plus a millisecond
    // per order in fsync mode (each waits for the disk) or 10 us per order otherwise.
    let per_order = if log == LogMode::Fsync {
        Duration::from_millis(1)
    } else {
        Duration::from_micros(10)
    };
    let timeout = Duration::from_secs(900) + per_order * u32::try_from(orders).unwrap_or(u32::MAX);
    let warm_rounds = scenario.rounds_per_client(warmup_orders(setup, orders), clients);
    let entry = setup.entry;
    let warm = load::closed_loop(
        &system,
        &exchange,
        &scenario,
        clients,
        warm_rounds,
        timeout,
        entry,
    )?;
    let rounds = scenario.rounds_per_client(orders, clients);
    let before = Costs::now(&system, &exchange);
    let report = load::closed_loop(
        &system, &exchange, &scenario, clients, rounds, timeout, entry,
    )?;
    let costs = Costs::now(&system, &exchange).since(&before, report.orders);
    validate(&exchange, warm.orders + report.orders)?;
    let states = exchange.pair_states()?;
    let commits: u64 = states
        .iter()
        .map(|p| p.primary.commits + p.standby.commits)
        .sum();
    let applied: u64 = states
        .iter()
        .map(|p| p.primary.applied + p.standby.applied)
        .sum();
    exchange.shutdown();
    system
        .shutdown_timeout(Duration::from_secs(60))
        .context("stopping the actor system")?;
    let per_commit = (commits > 0).then(|| applied as f64 / commits as f64);
    Ok((report, per_commit, costs))
}

/// The CPU time this process has used so far (user and system, every thread), in
/// microseconds: unlike throughput, it does not depend on how much of the machine the other
/// work on it leaves.
pub fn cpu_us() -> f64 {
    ProcessUsage::now().cpu_us
}

/// What the probes said of the host right before a repetition (`troupe_results::probe`): how
/// far apart two cores were, and how fast it ran plain code; `None` where not measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Probed {
    pub apart: Option<f64>,
    pub host: Option<f64>,
}

impl Probed {
    /// Both probes, now.
    pub fn now() -> Self {
        Probed {
            apart: probe::core_to_core_ns(),
            host: probe::host_speed(),
        }
    }

    /// The counters of a repetition that ran no actors (a baseline's): the probes' figures.
    pub fn counters(&self) -> Map<String, Value> {
        let apart = self.apart.map(|ns| {
            (
                probe::CORE_TO_CORE.to_owned(),
                probe::core_to_core_value(ns),
            )
        });
        let host = self
            .host
            .map(|m| (probe::HOST_SPEED.to_owned(), probe::host_speed_value(m)));
        Map::from_iter(apart.into_iter().chain(host))
    }
}

/// What the runtime did for the orders of a measured run: the pool's counters and the
/// messages the exchange's actors handled (receivers and engines; a client's acks are not
/// counted), summed, or once divided by the orders, per order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Costs {
    /// The process's CPU time (user and system, every thread), in microseconds.
    pub cpu_us: f64,
    pub messages: f64,
    pub turns: f64,
    pub steals: f64,
    pub parks: f64,
    /// Workers taking work at the end of the run (the pool's width: it starts on one and
    /// tries more as it measures them, `SystemBuilder::narrowing`); not per order.
    pub width: f64,
    /// Times the width changed during the run; not per order.
    pub width_changes: f64,
}

impl Costs {
    fn now(system: &System, exchange: &Exchange) -> Self {
        let pools = system.pool_metrics();
        let sum = |f: fn(&troupe::PoolMetrics) -> u64| pools.iter().map(f).sum::<u64>() as f64;
        Costs {
            cpu_us: cpu_us(),
            messages: exchange.messages_handled() as f64,
            turns: sum(|p| p.turns),
            steals: sum(|p| p.steals),
            parks: sum(|p| p.parks),
            width: pools.iter().map(|p| p.width).sum::<usize>() as f64,
            width_changes: sum(|p| p.width_changes),
        }
    }

    /// The counts from `before` to this, per order.
    fn since(&self, before: &Costs, orders: u64) -> Costs {
        let per = |now: f64, then: f64| (now - then) / orders.max(1) as f64;
        Costs {
            cpu_us: per(self.cpu_us, before.cpu_us),
            messages: per(self.messages, before.messages),
            turns: per(self.turns, before.turns),
            steals: per(self.steals, before.steals),
            parks: per(self.parks, before.parks),
            width: self.width,
            width_changes: self.width_changes - before.width_changes,
        }
    }

    /// The medians of several runs' costs.
    pub fn median(all: &[Costs]) -> Costs {
        let m = |f: fn(&Costs) -> f64| {
            crate::report::summarize(&all.iter().map(f).collect::<Vec<_>>()).0
        };
        Costs {
            cpu_us: m(|c| c.cpu_us),
            messages: m(|c| c.messages),
            turns: m(|c| c.turns),
            steals: m(|c| c.steals),
            parks: m(|c| c.parks),
            width: m(|c| c.width),
            width_changes: m(|c| c.width_changes),
        }
    }

    /// One repetition's counters for its records (`Record::counters`), with what the probes said
    /// of the host right before it when measured: so a slow repetition explains itself in the
    /// JSON (`troupe-bench` records the same for its scenarios).
    pub fn counters(&self, probed: &Probed) -> Map<String, Value> {
        let rounded = |x: f64, places: i32| {
            let scale = 10f64.powi(places);
            json!((x * scale).round() / scale)
        };
        let mut counters = Map::new();
        counters.insert("cpu_us_per_order".into(), rounded(self.cpu_us, 3));
        counters.insert("messages_per_order".into(), rounded(self.messages, 2));
        counters.insert("turns_per_order".into(), rounded(self.turns, 2));
        counters.insert("steals_per_order".into(), rounded(self.steals, 4));
        counters.insert("parks_per_order".into(), rounded(self.parks, 4));
        counters.insert("width".into(), json!(self.width));
        counters.insert("width_changes".into(), json!(self.width_changes));
        counters.extend(probed.counters());
        counters
    }

    /// For a record's notes and the console.
    pub fn describe(&self) -> String {
        format!(
            "per order: {:.2} us of CPU, {:.2} messages handled by receivers and engines, {:.2} \
             actor turns, {:.3} steals, {:.3} parks; the pool's width {} at the end, changed {} \
             times during the run",
            self.cpu_us,
            self.messages,
            self.turns,
            self.steals,
            self.parks,
            self.width,
            self.width_changes
        )
    }
}

pub struct ClosedPlan {
    pub styles: Vec<Style>,
    pub logs: Vec<LogMode>,
    pub clients: Vec<usize>,
    pub orders: u64,
    pub fsync_orders: u64,
}

impl ClosedPlan {
    /// Runs in all: every repetition of every configuration, and one fsync probe per fsync
    /// log mode.
    pub fn runs(&self, setup: &Setup) -> u64 {
        let configurations = (self.logs.len() * self.styles.len() * self.clients.len()) as u64;
        let probes = self.logs.iter().filter(|&&l| l == LogMode::Fsync).count() as u64;
        configurations * setup.runs() + probes
    }
}

/// The closed-loop matrix. Returns false if any check failed.
pub fn closed(
    setup: &Setup,
    printer: &Printer,
    progress: &Progress,
    plan: &ClosedPlan,
) -> Result<bool> {
    let mut all_valid = true;
    for &log in &plan.logs {
        let disk_p99 = if log == LogMode::Fsync {
            progress.start("fsync probe");
            let disk = fsync_probe(setup, printer, progress)?;
            progress.run_done();
            progress.configuration_done("fsync probe");
            Some(disk)
        } else {
            None
        };
        let orders = if log == LogMode::Fsync {
            plan.fsync_orders
        } else {
            plan.orders
        };
        for &style in &plan.styles {
            for &clients in &plan.clients {
                let mut samples = Samples::new();
                let mut batches = Vec::new();
                let mut costs = Vec::new();
                let label = format!("{} {} {clients} clients", style.name(), log.name());
                let what = format!("closed {label}");
                progress.start(&what);
                // The disk's own fsync latency just before each measured repetition: the
                // disk a shared machine gives changes from minute to minute.
                let mut beside = (log == LogMode::Fsync).then(probe_histogram).transpose()?;
                let per_writer = if setup.quick { 10 } else { BESIDE_FLUSHES };
                for rep in 0..setup.warmup + setup.repeat {
                    if let Some(h) = beside.as_mut().filter(|_| rep >= setup.warmup) {
                        let dir = setup.scratch_dir()?;
                        for t in troupe_trading::fsync_probe(dir.path(), per_writer, 6)? {
                            h.saturating_record((t.as_nanos() as u64).max(1));
                        }
                    }
                    let probed = if rep >= setup.warmup {
                        Probed::now()
                    } else {
                        Probed::default()
                    };
                    let outcome = closed_once(setup, style, log, clients, orders);
                    progress.run_done();
                    match outcome {
                        Ok((report, per_commit, cost)) if rep >= setup.warmup => {
                            samples.push_counted(
                                report.throughput(),
                                &report.latency,
                                cost.counters(&probed),
                            );
                            batches.extend(per_commit);
                            costs.push(cost);
                        }
                        Ok(_) => {}
                        Err(e) => {
                            progress.suspend(|| eprintln!("{label}: check failed: {e:#}"));
                            samples.validated = false;
                            // The remaining repetitions are not run.
                            progress.skipped(setup.runs() - (rep as u64 + 1));
                            break;
                        }
                    }
                }
                all_valid &= samples.validated;
                let measured = SeedScenario::new(&Market::seed())
                    .rounds_per_client(orders, clients)
                    * clients as u64
                    * 30;
                let params = params(&[
                    ("style", json!(style.name())),
                    ("log", json!(log.name())),
                    ("clients", json!(clients)),
                    ("orders", json!(measured)),
                    ("entry", json!(setup.entry.name())),
                ]);
                let mut ratio = None;
                let mut notes = format!(
                    "closed loop, 3 engine pairs, {}; {}",
                    entry_notes(setup.entry),
                    setup.notes()
                );
                if !costs.is_empty() {
                    notes += &format!("; {}", Costs::median(&costs).describe());
                }
                if !batches.is_empty() {
                    notes += &format!(
                        "; group commit: {:.1} orders per fsync",
                        crate::report::summarize(&batches).0
                    );
                }
                let beside = beside
                    .filter(|h| !h.is_empty())
                    .map(|h| (percentiles_us(&h), h.len()));
                if let (Some(disk), Some((near, _))) = (disk_p99, &beside) {
                    if !samples.latency.is_empty() {
                        let p99 = samples.median(3);
                        notes +=
                            &format!(
                            "; p99 is {:.2}x this disk's fsync p99 with six writers measured just \
                             before each repetition ({:.0} us, p50 {:.0} us); {:.2}x the probe's \
                             before the fsync configurations with one writer ({:.0} us), {:.2}x \
                             with six ({:.0} us)",
                            p99 / near[3], near[3], near[1], p99 / disk.one, disk.one,
                            p99 / disk.six, disk.six
                        );
                        ratio = Some(format!(
                            "           disk fsync beside it (6 writers): p50 {:.0}  p99 {:.0} us; \
                             p99 / disk p99: {:.2}x (probe before all: {:.2}x with 1 writer, \
                             {:.2}x with 6)",
                            near[1],
                            near[3],
                            p99 / near[3],
                            p99 / disk.one,
                            p99 / disk.six
                        ));
                    }
                }
                progress.suspend(|| -> Result<()> {
                    printer.configuration("trading", "troupe", &params, &samples, &notes)?;
                    if let Some((near, flushes)) = beside {
                        let mut params = params.clone();
                        params.insert("writers".into(), json!(6));
                        params.insert("samples".into(), json!(flushes));
                        let notes = format!(
                            "fdatasync after appending one log record, 6 writers (a file each, \
                             same file system as the logs), {per_writer} flushes each just \
                             before each measured repetition of this configuration"
                        );
                        for (m, (metric, _)) in crate::report::PERCENTILES.iter().enumerate() {
                            printer.record(
                                "fsync-beside",
                                metric,
                                "disk",
                                &params,
                                "us",
                                vec![near[m]],
                                true,
                                &notes,
                            )?;
                        }
                    }
                    if !costs.is_empty() {
                        printer.say(format!("           {}", Costs::median(&costs).describe()));
                    }
                    if let Some(line) = ratio {
                        printer.say(line);
                    }
                    Ok(())
                })?;
                progress.configuration_done(&what);
            }
        }
    }
    Ok(all_valid)
}

/// Flushes per writer of the six-writer probe run just before each measured repetition of an
/// fsync configuration (1,200 in all, a few tenths of a second; 10 per writer with --quick).
const BESIDE_FLUSHES: usize = 200;

fn probe_histogram() -> Result<hdrhistogram::Histogram<u64>> {
    Ok(hdrhistogram::Histogram::<u64>::new_with_bounds(
        1,
        600_000_000_000,
        2,
    )?)
}

/// This disk's fsync latency (p99, microseconds) with one writer, and with as many writers
/// as the exchange has engines.
#[derive(Debug, Clone, Copy)]
pub struct DiskFsync {
    pub one: f64,
    pub six: f64,
}

/// Measures this disk's fsync latency in the logs' file system, with one writer and with six
/// (the exchange's engines all flush at once).
pub fn fsync_probe(setup: &Setup, printer: &Printer, progress: &Progress) -> Result<DiskFsync> {
    let count = if setup.quick { 50 } else { 1000 };
    let mut p99 = [0.0; 2];
    for (i, writers) in [1usize, 6].into_iter().enumerate() {
        let dir = setup.scratch_dir()?;
        // Start from a quiet disk: earlier runs may have left dirty pages being written back.
        // SAFETY: sync has no preconditions; it only asks the kernel to write dirty data back.
        unsafe { libc::sync() };
        let times = troupe_trading::fsync_probe(dir.path(), count / writers.min(2), writers)?;
        let mut h = probe_histogram()?;
        for t in &times {
            h.saturating_record((t.as_nanos() as u64).max(1));
        }
        let p = percentiles_us(&h);
        let params = params(&[
            ("writers", json!(writers)),
            ("samples", json!(times.len())),
            ("bytes", json!(troupe_trading::RECORD_BYTES)),
        ]);
        let notes = format!(
            "fdatasync after appending one log record; {writers} writer(s), a file each, same file system as the logs"
        );
        progress.suspend(|| -> Result<()> {
            for (m, (metric, _)) in crate::report::PERCENTILES.iter().enumerate() {
                printer.record(
                    "fsync-probe",
                    metric,
                    "disk",
                    &params,
                    "us",
                    vec![p[m]],
                    true,
                    &notes,
                )?;
            }
            printer.say(format!(
                "fsync-probe disk      {writers} writer(s), {} x fdatasync of a {}-byte append: p5 {:.0}  p50 {:.0}  p95 {:.0}  p99 {:.0}  p99.9 {:.0} us",
                times.len(), troupe_trading::RECORD_BYTES, p[0], p[1], p[2], p[3], p[4]
            ));
            Ok(())
        })?;
        if p[3].is_nan() || p[3] <= 0.0 {
            bail!("the fsync probe measured nothing");
        }
        p99[i] = p[3];
    }
    Ok(DiskFsync {
        one: p99[0],
        six: p99[1],
    })
}

pub fn params(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// How far a benchmark is, on stderr. On a terminal: a bar with the runs done, the time
/// elapsed, the time left and the current configuration (results printed while it shows go
/// through [`Progress::suspend`], so they never mix with it). Elsewhere (a log file, a pipe):
/// one line per finished configuration with the time left, estimated from the average run so
/// far. Never on stdout, so `--json` output stays pure JSON lines.
pub struct Progress {
    bar: ProgressBar,
    /// Print lines instead of the bar (stderr is not a terminal).
    lines: bool,
}

impl Progress {
    /// Progress over `runs` runs.
    pub fn new(runs: u64) -> Self {
        let bar = ProgressBar::new(runs);
        // indicatif draws nothing when stderr is not a terminal.
        let lines = bar.is_hidden();
        if !lines {
            // The current configuration, then the bar with indicatif's estimate of the time
            // left ({eta}), which it cannot make before the first run is done.
            if let Ok(style) = ProgressStyle::with_template(
                "{msg}\n[{elapsed_precise}] {wide_bar} {pos}/{len} runs, {left}",
            ) {
                bar.set_style(style.progress_chars("=> ").with_key(
                    "left",
                    |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = if state.pos() == 0 {
                            write!(w, "time left not known yet")
                        } else {
                            write!(w, "about {} left", HumanDuration(state.eta()))
                        };
                    },
                ));
            }
            // Keeps elapsed time and ETA moving during a long run.
            bar.enable_steady_tick(Duration::from_secs(1));
        }
        Progress { bar, lines }
    }

    /// No progress at all.
    pub fn hidden() -> Self {
        Progress {
            bar: ProgressBar::hidden(),
            lines: false,
        }
    }

    /// A configuration starts.
    pub fn start(&self, what: &str) {
        self.bar.set_message(what.to_owned());
    }

    /// One run is done.
    pub fn run_done(&self) {
        self.bar.inc(1);
    }

    /// Runs counted up front that will not run (after a failure, or an open-loop sweep that
    /// stopped early).
    pub fn skipped(&self, runs: u64) {
        self.bar.dec_length(runs);
    }

    /// A configuration is done: without a terminal, one line on stderr.
    pub fn configuration_done(&self, what: &str) {
        if !self.lines {
            return;
        }
        let (done, total) = (self.bar.position(), self.bar.length().unwrap_or(0));
        let elapsed = self.bar.elapsed();
        let left = match troupe_results::time_left(elapsed, done, total) {
            _ if done >= total => format!("all done in {}", human(elapsed)),
            Some(left) => format!("about {} left", human(left)),
            None => "time left not known yet".to_owned(),
        };
        eprintln!("{what}: {done}/{total} runs done, {left}");
    }

    /// Runs `f` (which prints) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Also on an error, so the error is not printed after a stale bar.
        self.bar.finish_and_clear();
    }
}

/// A duration for people: `45 s`, `3 min 10 s`, `2 h 5 min`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}
