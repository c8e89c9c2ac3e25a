//! The actor system beside the threads-and-mutex baseline, repetition by repetition.
//!
//! On a shared machine the throughput of one run differs from the next by more than the
//! difference being measured, so a ratio of two medians taken minutes apart says little. Here
//! each repetition runs the `threads` baseline and then troupe's closed loop in every style
//! asked for, one right after the other, at the same client count and log mode, and the ratio
//! troupe / threads is taken within the repetition. The records: each contender's throughput
//! and latency (as `bench closed` and `bench baseline` print them) and, per style, a
//! `throughput_ratio` record whose samples are the repetitions' ratios, and a `cpu_ratio`
//! record: the threads' CPU time per order / troupe's, within each repetition (CPU time per
//! order does not depend on how much of the machine other work leaves each contender: 40
//! client threads get a larger share of a busy machine than troupe's 2 workers). Each
//! repetition's line also says how far apart two cores were right before it, and how fast the
//! host ran plain code (`troupe_results::probe`): on a virtual machine the host moves the CPUs
//! between neighbouring and distant cores, and shares their caches with what else it runs, and
//! both contenders slow down with either.

use anyhow::Result;
use serde_json::json;
use troupe_trading::{LogMode, Market, SeedScenario, Style};

use crate::baseline::{self, Kind};
use crate::bench::{self, params, Costs, Progress};
use crate::report::{Printer, Samples};
use crate::Setup;

pub struct ComparePlan {
    pub styles: Vec<Style>,
    pub logs: Vec<LogMode>,
    pub clients: Vec<usize>,
    pub orders: u64,
    pub fsync_orders: u64,
}

impl ComparePlan {
    /// Runs in all: per configuration and repetition, the baseline and each style.
    pub fn runs(&self, setup: &Setup) -> u64 {
        let configurations = (self.logs.len() * self.clients.len()) as u64;
        configurations * setup.runs() * (1 + self.styles.len() as u64)
    }
}

/// Runs the comparison; returns false if a check failed.
pub fn run(
    setup: &Setup,
    printer: &Printer,
    progress: &Progress,
    plan: &ComparePlan,
) -> Result<bool> {
    let mut all_valid = true;
    for &log in &plan.logs {
        let orders = if log == LogMode::Fsync {
            plan.fsync_orders
        } else {
            plan.orders
        };
        for &clients in &plan.clients {
            let what = format!("compare {} {clients} clients", log.name());
            progress.start(&what);
            let mut threads = Samples::new();
            let measured = SeedScenario::new(&Market::seed()).rounds_per_client(orders, clients)
                * clients as u64
                * 30;
            let mut threads_cpu = Vec::new();
            let mut cpu_ratios: Vec<Vec<f64>> = plan.styles.iter().map(|_| Vec::new()).collect();
            let mut troupe: Vec<(Samples, Vec<f64>, Vec<Costs>)> = plan
                .styles
                .iter()
                .map(|_| (Samples::new(), Vec::new(), Vec::new()))
                .collect();
            for rep in 0..setup.warmup + setup.repeat {
                let is_measured = rep >= setup.warmup;
                let probed = bench::Probed::now();
                let cpu_before = bench::cpu_us();
                let base = baseline::once(setup, Kind::Threads, log, clients, orders);
                let base_cpu = (bench::cpu_us() - cpu_before) / measured as f64;
                progress.run_done();
                let base = match base {
                    Ok((tput, h)) => {
                        if is_measured {
                            threads.push_counted(tput, &h, probed.counters());
                            threads_cpu.push(base_cpu);
                        }
                        tput
                    }
                    Err(e) => {
                        progress.suspend(|| eprintln!("{what}: threads: {e:#}"));
                        threads.validated = false;
                        f64::NAN
                    }
                };
                let mut line = format!(
                    "{what}, repetition {}{}{}: threads {:.2} M ({:.2} us CPU per order)",
                    rep + 1,
                    if is_measured { "" } else { " (warm-up)" },
                    match (probed.apart, probed.host) {
                        (Some(ns), Some(m)) => {
                            format!(" (cores {ns:.0} ns apart, host at {m:.0} M steps/s)")
                        }
                        (Some(ns), None) => format!(" (cores {ns:.0} ns apart)"),
                        (None, Some(m)) => format!(" (host at {m:.0} M steps/s)"),
                        (None, None) => String::new(),
                    },
                    base / 1e6,
                    base_cpu,
                );
                for (i, &style) in plan.styles.iter().enumerate() {
                    let outcome = bench::closed_once(setup, style, log, clients, orders);
                    progress.run_done();
                    let (samples, ratios, costs) = &mut troupe[i];
                    match outcome {
                        Ok((report, _, cost)) => {
                            let tput = report.throughput();
                            line += &format!(
                                ", {} {:.2} M ({:.2}x; p50 {:.1} p99 {:.1} us; {:.2} us CPU ({:.2}x), {:.2} msgs, {:.2} turns per order; width {} after {} changes)",
                                style.name(),
                                tput / 1e6,
                                tput / base,
                                report.latency.value_at_quantile(0.5) as f64 / 1e3,
                                report.latency.value_at_quantile(0.99) as f64 / 1e3,
                                cost.cpu_us,
                                base_cpu / cost.cpu_us,
                                cost.messages,
                                cost.turns,
                                cost.width,
                                cost.width_changes,
                            );
                            if is_measured {
                                cpu_ratios[i].push(base_cpu / cost.cpu_us);
                                samples.push_counted(tput, &report.latency, cost.counters(&probed));
                                ratios.push(tput / base);
                                costs.push(cost);
                            }
                        }
                        Err(e) => {
                            progress.suspend(|| eprintln!("{what}: {}: {e:#}", style.name()));
                            samples.validated = false;
                        }
                    }
                }
                progress.suspend(|| printer.say(&line));
            }
            let base_params = params(&[
                ("log", json!(log.name())),
                ("clients", json!(clients)),
                ("orders", json!(measured)),
            ]);
            all_valid &= threads.validated;
            progress.suspend(|| -> Result<()> {
                printer.configuration(
                    "trading",
                    "threads",
                    &base_params,
                    &threads,
                    "one OS thread per client, a mutex per engine pair; run alternately with troupe",
                )?;
                for ((&style, (samples, ratios, costs)), cpu) in
                    plan.styles.iter().zip(&troupe).zip(&cpu_ratios)
                {
                    all_valid &= samples.validated;
                    let mut p = base_params.clone();
                    p.insert("style".into(), json!(style.name()));
                    p.insert("entry".into(), json!(setup.entry.name()));
                    let mut notes = format!(
                        "closed loop, {}, run alternately with the threads baseline; {}",
                        bench::entry_notes(setup.entry),
                        setup.notes()
                    );
                    if !costs.is_empty() {
                        notes += &format!("; {}", Costs::median(costs).describe());
                    }
                    printer.configuration("trading", "troupe", &p, samples, &notes)?;
                    printer.record(
                        "trading",
                        "throughput_ratio",
                        "troupe",
                        &p,
                        "x",
                        ratios.clone(),
                        samples.validated && threads.validated,
                        "troupe's throughput / the threads baseline's, within each repetition",
                    )?;
                    printer.record(
                        "trading",
                        "cpu_ratio",
                        "troupe",
                        &p,
                        "x",
                        cpu.clone(),
                        samples.validated && threads.validated,
                        "the threads baseline's CPU time per order / troupe's, within each repetition",
                    )?;
                    let (median, min, max) = crate::report::summarize(ratios);
                    let (cpu_median, cpu_min, cpu_max) = crate::report::summarize(cpu);
                    printer.say(format!(
                        "           troupe / threads, {}: throughput median {median:.2}x (min {min:.2}x, \
                         max {max:.2}x); CPU per order, threads / troupe: median {cpu_median:.2}x \
                         (min {cpu_min:.2}x, max {cpu_max:.2}x); threads {:.2} us, troupe {:.2} us",
                        style.name(),
                        crate::report::summarize(&threads_cpu).0,
                        Costs::median(costs).cpu_us,
                    ));
                }
                Ok(())
            })?;
            progress.configuration_done(&what);
        }
    }
    Ok(all_valid)
}
