//! The open-loop benchmark: the seed scenario sent at fixed rates, latency measured from each
//! order's planned send time (see `troupe_trading::load`), to find the highest rate at which
//! p99 stays under 1 ms.
//!
//! Rates are tried in increasing order; once a rate misses the bound twice in a row (or the
//! system falls far behind), higher rates are skipped: they can only be worse.
//!
//! Every rate sends at least [`MIN_ORDERS`] and at most [`MAX_ORDERS`] orders; the command
//! line checks `rate x seconds` against both before anything runs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use troupe_trading::{load, LogMode, SeedScenario, Style};

use crate::bench::{exchange, params, system, validate, Progress};
use crate::report::{Printer, Samples};
use crate::Setup;

/// The latency bound the sweep looks for.
const P99_BOUND_US: f64 = 1000.0;

/// The fewest orders a rate is measured with (and warmed up with), whatever `rate x seconds`
/// comes to: fewer would make a p99 of a handful of orders. The command line refuses a rate
/// and seconds that come to fewer, rather than silently running longer than asked.
pub const MIN_ORDERS: u64 = 300;

/// The most orders one rate may send (`rate x seconds`): the run keeps a byte per order, and
/// when the system falls behind the orders not yet handled wait in its mailboxes.
pub const MAX_ORDERS: u64 = 10_000_000;

pub struct OpenPlan {
    pub styles: Vec<Style>,
    pub logs: Vec<LogMode>,
    pub rates: Vec<f64>,
    pub seconds: f64,
}

impl OpenPlan {
    /// Runs in all if no sweep stops early.
    pub fn runs(&self, setup: &Setup) -> u64 {
        (self.logs.len() * self.styles.len() * self.rates.len()) as u64 * setup.runs()
    }
}

/// Runs the sweep; returns false if a check failed.
pub fn run(setup: &Setup, printer: &Printer, progress: &Progress, plan: &OpenPlan) -> Result<bool> {
    let mut all_valid = true;
    for &log in &plan.logs {
        for &style in &plan.styles {
            let mut best: Option<f64> = None;
            let mut misses = 0;
            for (r, &rate) in plan.rates.iter().enumerate() {
                let orders = ((rate * plan.seconds) as u64).max(MIN_ORDERS);
                let mut samples = Samples::new();
                let what = format!("open loop {} {} {rate} orders/s", style.name(), log.name());
                progress.start(&what);
                for rep in 0..setup.warmup + setup.repeat {
                    let outcome = once(setup, style, log, rate, orders);
                    progress.run_done();
                    match outcome {
                        Ok(report) if rep >= setup.warmup => {
                            samples.push(report.throughput(), &report.latency)
                        }
                        Ok(_) => {}
                        Err(e) => {
                            progress.suspend(|| {
                                eprintln!(
                                    "open loop {} {} at {rate}/s: check failed: {e:#}",
                                    style.name(),
                                    log.name()
                                )
                            });
                            samples.validated = false;
                            progress.skipped(setup.runs() - (rep as u64 + 1));
                            break;
                        }
                    }
                }
                all_valid &= samples.validated;
                let p = params(&[
                    ("style", json!(style.name())),
                    ("log", json!(log.name())),
                    ("rate", json!(rate)),
                    ("orders", json!(orders.div_ceil(30) * 30)),
                ]);
                let notes = format!(
                    "open loop, latency from planned send time; {}",
                    setup.notes()
                );
                progress.suspend(|| {
                    printer.configuration("trading-open-loop", "troupe", &p, &samples, &notes)
                })?;
                progress.configuration_done(&what);
                let p99 = samples.median(3);
                if samples.validated && p99 < P99_BOUND_US {
                    best = Some(rate);
                    misses = 0;
                } else {
                    misses += 1;
                    // Far behind (or failed): higher rates cannot do better.
                    if misses >= 2 || !samples.validated || p99 > 100.0 * P99_BOUND_US {
                        progress.skipped((plan.rates.len() - r - 1) as u64 * setup.runs());
                        break;
                    }
                }
            }
            let p = params(&[("style", json!(style.name())), ("log", json!(log.name()))]);
            let value = best.unwrap_or(0.0);
            progress.suspend(|| -> Result<()> {
                printer.record(
                    "trading-open-loop",
                    "max_rate_p99_under_1ms",
                    "troupe",
                    &p,
                    "orders/s",
                    vec![value],
                    true,
                    "highest rate tried whose median p99 stayed under 1 ms",
                )?;
                printer.say(format!(
                    "open loop {} {}: highest rate with p99 < 1 ms: {value:.0} orders/s",
                    style.name(),
                    log.name()
                ));
                Ok(())
            })?;
        }
    }
    Ok(all_valid)
}

fn once(
    setup: &Setup,
    style: Style,
    log: LogMode,
    rate: f64,
    orders: u64,
) -> Result<load::LoadReport> {
    let dir = setup.scratch_dir()?;
    let system = system(setup)?;
    let exchange = exchange(&system, style, log, dir.path())?;
    let scenario = Arc::new(SeedScenario::new(exchange.market()));
    // Each run's own length plus two minutes: `--seconds` may be up to 10 minutes.
    let timeout = |orders: u64| Duration::from_secs_f64(orders as f64 / rate + 120.0);
    // Warm up at the same rate for a tenth of the run.
    let warm_orders = (orders / 10).max(MIN_ORDERS);
    let warm = load::open_loop(
        &system,
        &exchange,
        &scenario,
        rate,
        warm_orders,
        timeout(warm_orders),
    )?;
    let report = load::open_loop(&system, &exchange, &scenario, rate, orders, timeout(orders))?;
    validate(&exchange, warm.orders + report.orders)?;
    exchange.shutdown();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(report)
}
