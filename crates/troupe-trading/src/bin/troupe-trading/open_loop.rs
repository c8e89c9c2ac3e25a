//! The open-loop benchmark: the seed scenario sent at fixed rates, latency measured from each
//! order's planned send time (see `troupe_trading::load`), to find the highest rate at which
//! p99 stays under 1 ms.
//!
//! Rates are tried in increasing order; once a rate misses the bound twice in a row (or the
//! system falls far behind), higher rates are skipped: they can only be worse.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde_json::json;
use troupe_trading::{load, LogMode, SeedScenario, Style};

use crate::bench::{exchange, params, system, validate};
use crate::report::{Printer, Samples};
use crate::Setup;

/// The latency bound the sweep looks for.
const P99_BOUND_US: f64 = 1000.0;

pub struct OpenPlan {
    pub styles: Vec<Style>,
    pub logs: Vec<LogMode>,
    pub rates: Vec<f64>,
    pub seconds: f64,
}

/// Runs the sweep; returns false if a check failed.
pub fn run(setup: &Setup, printer: &Printer, plan: &OpenPlan) -> Result<bool> {
    let mut all_valid = true;
    for &log in &plan.logs {
        for &style in &plan.styles {
            let mut best: Option<f64> = None;
            let mut misses = 0;
            for &rate in &plan.rates {
                let orders = ((rate * plan.seconds) as u64).max(300);
                let mut samples = Samples::new();
                for rep in 0..setup.warmup + setup.repeat {
                    match once(setup, style, log, rate, orders) {
                        Ok(report) if rep >= setup.warmup => {
                            samples.push(report.throughput(), &report.latency)
                        }
                        Ok(_) => {}
                        Err(e) => {
                            eprintln!(
                                "open loop {} {} at {rate}/s: check failed: {e:#}",
                                style.name(),
                                log.name()
                            );
                            samples.validated = false;
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
                printer.configuration("trading-open-loop", "troupe", &p, &samples, &notes)?;
                let p99 = samples.median(3);
                if samples.validated && p99 < P99_BOUND_US {
                    best = Some(rate);
                    misses = 0;
                } else {
                    misses += 1;
                    // Far behind (or failed): higher rates cannot do better.
                    if misses >= 2 || !samples.validated || p99 > 100.0 * P99_BOUND_US {
                        break;
                    }
                }
            }
            let p = params(&[("style", json!(style.name())), ("log", json!(log.name()))]);
            let value = best.unwrap_or(0.0);
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
    let timeout = Duration::from_secs(120);
    // Warm up at the same rate for a tenth of the run.
    let warm = load::open_loop(
        &system,
        &exchange,
        &scenario,
        rate,
        (orders / 10).max(300),
        timeout,
    )?;
    let report = load::open_loop(&system, &exchange, &scenario, rate, orders, timeout)?;
    validate(&exchange, warm.orders + report.orders)?;
    exchange.shutdown();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(report)
}
