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
//! latency is measured first, in the same run, so the two can be compared.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::{json, Map, Value};
use troupe::System;
use troupe_trading::load::{self, LoadReport};
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
) -> Result<(LoadReport, Option<f64>)> {
    let dir = setup.scratch_dir()?;
    let system = system(setup)?;
    let exchange = exchange(&system, style, log, dir.path())?;
    let scenario = Arc::new(SeedScenario::new(exchange.market()));
    let timeout = Duration::from_secs(900);
    let warm_rounds = scenario.rounds_per_client(warmup_orders(setup, orders), clients);
    let warm = load::closed_loop(&system, &exchange, &scenario, clients, warm_rounds, timeout)?;
    let rounds = scenario.rounds_per_client(orders, clients);
    let report = load::closed_loop(&system, &exchange, &scenario, clients, rounds, timeout)?;
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
    Ok((report, per_commit))
}

pub struct ClosedPlan {
    pub styles: Vec<Style>,
    pub logs: Vec<LogMode>,
    pub clients: Vec<usize>,
    pub orders: u64,
    pub fsync_orders: u64,
}

/// The closed-loop matrix. Returns false if any check failed.
pub fn closed(setup: &Setup, printer: &Printer, plan: &ClosedPlan) -> Result<bool> {
    let mut all_valid = true;
    for &log in &plan.logs {
        let disk_p99 = if log == LogMode::Fsync {
            Some(fsync_probe(setup, printer)?)
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
                let label = format!("{} {} {clients} clients", style.name(), log.name());
                for rep in 0..setup.warmup + setup.repeat {
                    match closed_once(setup, style, log, clients, orders) {
                        Ok((report, per_commit)) if rep >= setup.warmup => {
                            samples.push(report.throughput(), &report.latency);
                            batches.extend(per_commit);
                        }
                        Ok(_) => {}
                        Err(e) => {
                            eprintln!("{label}: check failed: {e:#}");
                            samples.validated = false;
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
                ]);
                let mut ratio = None;
                let mut notes = format!(
                    "closed loop, 3 engine pairs, 10 receivers; {}",
                    setup.notes()
                );
                if !batches.is_empty() {
                    notes += &format!(
                        "; group commit: {:.1} orders per fsync",
                        crate::report::summarize(&batches).0
                    );
                }
                if let Some(disk) = disk_p99 {
                    if !samples.latency.is_empty() {
                        let p99 = samples.median(3);
                        notes += &format!(
                            "; p99 is {:.2}x this disk's fsync p99 with one writer ({:.0} us), {:.2}x with six ({:.0} us)",
                            p99 / disk.one, disk.one, p99 / disk.six, disk.six
                        );
                        ratio = Some(format!(
                            "           p99 / disk fsync p99: {:.2}x (1 writer), {:.2}x (6 writers)",
                            p99 / disk.one,
                            p99 / disk.six
                        ));
                    }
                }
                printer.configuration("trading", "troupe", &params, &samples, &notes)?;
                if let Some(line) = ratio {
                    printer.say(line);
                }
            }
        }
    }
    Ok(all_valid)
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
pub fn fsync_probe(setup: &Setup, printer: &Printer) -> Result<DiskFsync> {
    let count = if setup.quick { 50 } else { 1000 };
    let mut p99 = [0.0; 2];
    for (i, writers) in [1usize, 6].into_iter().enumerate() {
        let dir = setup.scratch_dir()?;
        // Start from a quiet disk: earlier runs may have left dirty pages being written back.
        // SAFETY: sync has no preconditions; it only asks the kernel to write dirty data back.
        unsafe { libc::sync() };
        let times = troupe_trading::fsync_probe(dir.path(), count / writers.min(2), writers)?;
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 2)?;
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
