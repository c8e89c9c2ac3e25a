//! The benchmark's results as JSON lines in the schema of `peers/PROTOCOL.md` (so the suite's
//! tables include them) and as Markdown tables.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use troupe_results::{Machine, Record};

use crate::bench::{BenchReport, StoreKind};
use crate::load::{Kind, Summary};

/// The median of `values` (the mean of the middle two for an even count); 0 if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// Every run's summary for one store, phase and kind, in run order.
fn summaries<'a>(
    report: &'a BenchReport,
    store: StoreKind,
    phase: &str,
    kind: Kind,
) -> Vec<&'a Summary> {
    report
        .closed
        .iter()
        .filter(|run| run.store == store)
        .flat_map(|run| run.report.summaries.iter())
        .filter(|s| s.phase == phase && s.kind == kind)
        .collect()
}

/// Every (store, phase, kind) that has runs, with its runs' summaries, in report order.
fn groups(report: &BenchReport) -> Vec<(StoreKind, &str, Kind, Vec<&Summary>)> {
    let mut out = Vec::new();
    for store in stores(report) {
        for phase in &report.phases {
            for kind in Kind::ALL {
                let runs = summaries(report, store, phase, kind);
                if !runs.is_empty() {
                    out.push((store, phase.as_str(), kind, runs));
                }
            }
        }
    }
    out
}

fn stores(report: &BenchReport) -> Vec<StoreKind> {
    let mut stores: Vec<StoreKind> = report.closed.iter().map(|run| run.store).collect();
    stores.extend(report.capacity.iter().map(|c| c.store));
    stores.sort();
    stores.dedup();
    stores
}

/// Where a store's figures come from: this machine, and what runs the store.
fn machine(store: StoreKind) -> Machine {
    Machine::current(match store {
        StoreKind::Troupe => concat!("troupe ", env!("CARGO_PKG_VERSION"), " on tokio (axum)"),
        StoreKind::Threads => "OS threads (tiny_http, ureq)",
    })
}

fn record(
    metric: &str,
    store: StoreKind,
    params: Value,
    unit: &str,
    samples: Vec<f64>,
    validated: bool,
    notes: &str,
) -> Record {
    let Value::Object(params) = params else {
        unreachable!("params are built as objects")
    };
    // A figure that could not be computed (no answer at all) counts as 0, never NaN.
    let samples: Vec<f64> = samples
        .into_iter()
        .map(|v| if v.is_finite() { v } else { 0.0 })
        .collect();
    let mut record = Record::new(
        "store",
        metric,
        store.contender(),
        params,
        unit,
        samples,
        notes,
    )
    .with_machine(machine(store));
    record.validated = validated;
    record
}

/// Each store's first closed run, second by second: answers per second and p50/p99 latency per
/// request type, each second labelled with the phase it fell in.
fn timeline(report: &BenchReport) -> Vec<Record> {
    let mut out = Vec::new();
    for run in report.closed.iter().filter(|run| run.run == 0) {
        let starts = &run.report.phase_starts;
        let phase_at = |second: u64| {
            starts
                .iter()
                .rev()
                .find(|(_, start)| *start <= second as f64)
                .or(starts.first())
                .map_or("", |(name, _)| name.as_str())
        };
        // Every second of the run, for every kind: a second in which no answer came is a
        // count of zero (and has no latency), not a second left out.
        let last = run.report.seconds.iter().map(|s| s.second).max();
        let seconds = last.into_iter().flat_map(|last| 0..=last);
        for (second, kind) in seconds.flat_map(|second| Kind::ALL.map(|kind| (second, kind))) {
            let found = run
                .report
                .seconds
                .iter()
                .find(|s| s.second == second && s.kind == kind);
            let params = json!({
                "request": kind.name(),
                "second": second,
                "phase": phase_at(second),
                "run": run.run,
            });
            let figures = match found {
                Some(s) => vec![
                    ("throughput", "req/s", s.answers as f64),
                    ("p50", "ms", s.p50_ms),
                    ("p99", "ms", s.p99_ms),
                ],
                None => vec![("throughput", "req/s", 0.0)],
            };
            for (metric, unit, value) in figures {
                let mut r = record(
                    metric,
                    run.store,
                    params.clone(),
                    unit,
                    vec![value],
                    true,
                    "the first run, second by second (by when each answer came)",
                );
                r.scenario = "store-timeline".to_owned();
                out.push(r);
            }
        }
    }
    out
}

/// Answers with a 2xx status per second of the phase: what a user got, where `throughput`
/// also counts refusals and errors (a store that refuses everything quickly answers a lot).
fn ok_rate(s: &Summary) -> f64 {
    let answered = s.ok + s.rejected + s.errors;
    if answered == 0 {
        0.0
    } else {
        s.throughput * s.ok as f64 / answered as f64
    }
}

fn notes(store: StoreKind) -> &'static str {
    match store {
        StoreKind::Troupe => {
            "axum on tokio; one troupe actor per backend (bulkhead 64+100, 1 s call timeout, circuit breaker 50% of 20 calls, open 5 s); edge sheds past 1024 requests"
        }
        StoreKind::Threads => {
            "tiny_http with 200 request threads (Tomcat's maxThreads); blocking ureq client, no timeouts"
        }
    }
}

/// The report as records of the suite's schema, one per line of output: the figures per
/// (store, phase, request type) over all runs, the capacity, and (scenario `store-timeline`)
/// each store's first run second by second, one sample per record.
pub fn records(report: &BenchReport) -> Vec<Record> {
    let mut out = Vec::new();
    for (store, phase, kind, runs) in groups(report) {
        let params = json!({
            "phase": phase,
            "request": kind.name(),
            "users": report.users_per_kind,
        });
        // A run that got no answer at all for a kind did not measure it.
        let validated = runs.iter().all(|s| s.requests > 0);
        let pick = |f: fn(&Summary) -> f64| runs.iter().map(|s| f(s)).collect::<Vec<_>>();
        for (metric, unit, samples) in [
            ("throughput", "req/s", pick(|s| s.throughput)),
            ("p50", "ms", pick(|s| s.p50_ms)),
            ("p90", "ms", pick(|s| s.p90_ms)),
            ("p99", "ms", pick(|s| s.p99_ms)),
            ("p999", "ms", pick(|s| s.p999_ms)),
            ("ok_rate", "req/s", pick(ok_rate)),
            (
                "not_ok",
                "requests",
                pick(|s| (s.rejected + s.errors + s.failed + s.unfinished) as f64),
            ),
        ] {
            out.push(record(
                metric,
                store,
                params.clone(),
                unit,
                samples,
                validated,
                notes(store),
            ));
        }
    }
    for store in stores(report) {
        let runs: Vec<f64> = report
            .capacity
            .iter()
            .filter(|c| c.store == store)
            .map(|c| c.held.unwrap_or(0.0))
            .collect();
        if runs.is_empty() {
            continue;
        }
        out.push(record(
            "capacity",
            store,
            json!({
                "request": "index",
                "p99_under_ms": report.open_p99_ms,
                "highest_rate_tried": report.open_top_rate,
                "lowest_rate_tried": report.open_bottom_rate,
            }),
            "req/s",
            runs,
            true,
            "open model: the highest fixed arrival rate whose p99 (from each request's planned start) stayed under the bound, with no errors",
        ));
    }
    out.extend(open_points(report));
    out.extend(timeline(report));
    out
}

/// The capacity search point by point (scenario `store-open`): each store's p99 at each
/// offered rate it was tried at, per run, one sample per record.
fn open_points(report: &BenchReport) -> Vec<Record> {
    let mut out = Vec::new();
    for capacity in &report.capacity {
        for point in &capacity.points {
            let mut r = record(
                "p99",
                capacity.store,
                json!({ "request": "index", "rate": point.rate, "run": capacity.run }),
                "ms",
                vec![point.p99_ms],
                point.errors == 0,
                "open model: latency from each request's planned start, at a fixed arrival rate",
            );
            r.scenario = "store-open".to_owned();
            out.push(r);
        }
    }
    out
}

/// The closed runs as a Markdown table: medians over runs.
pub fn table(report: &BenchReport) -> String {
    let mut out = String::from(
        "| store | phase | request | answers/s | p50 ms | p90 ms | p99 ms | p99.9 ms | ok | 503 | other errors | no answer |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (store, phase, kind, runs) in groups(report) {
        let m = |f: fn(&Summary) -> f64| median(&runs.iter().map(|s| f(s)).collect::<Vec<_>>());
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |\n",
            store.contender(),
            phase,
            kind.name(),
            m(|s| s.throughput),
            fmt_ms(m(|s| s.p50_ms)),
            fmt_ms(m(|s| s.p90_ms)),
            fmt_ms(m(|s| s.p99_ms)),
            fmt_ms(m(|s| s.p999_ms)),
            m(|s| s.ok as f64),
            m(|s| s.rejected as f64),
            m(|s| s.errors as f64),
            m(|s| (s.failed + s.unfinished) as f64),
        ));
    }
    if !report.capacity.is_empty() {
        out.push_str(&format!(
            "\n| store | highest index rate with p99 < {} ms | points (rate: p99 ms) |\n|---|---:|---|\n",
            report.open_p99_ms
        ));
        for capacity in &report.capacity {
            let points: Vec<String> = capacity
                .points
                .iter()
                .map(|p| format!("{:.0}: {}", p.rate, fmt_ms(p.p99_ms)))
                .collect();
            out.push_str(&format!(
                "| {} (run {}) | {} | {} |\n",
                capacity.store.contender(),
                capacity.run + 1,
                capacity
                    .held
                    .map_or("none".to_owned(), |rate| format!("{rate:.0}")),
                points.join(", ")
            ));
        }
    }
    out
}

/// Milliseconds, with the precision that matters at their size.
pub fn fmt_ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// The troupe store's counters at the end of each run, a line each.
pub fn counters(report: &BenchReport) -> String {
    let mut out = String::new();
    let mut by_run: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for run in &report.closed {
        if let Some(stats) = &run.stats {
            let s = &stats.search;
            by_run.entry(run.run).or_default().push(format!(
                "search actor: {} calls ({} ok, {} failed of which {} timed out), {} failed fast by the open breaker, {} refused by the bulkhead; breaker opened {} and closed {} times; edge shed {}",
                s.calls, s.succeeded, s.failed, s.timed_out, s.failed_fast, s.refused, s.opened, s.closed, stats.shed
            ));
        }
    }
    for (run, lines) in by_run {
        for line in lines {
            out.push_str(&format!("run {}: {line}\n", run + 1));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 1.0]), 1.0);
    }

    #[test]
    fn milliseconds_are_printed_by_size() {
        assert_eq!(fmt_ms(1234.5), "1234");
        assert_eq!(fmt_ms(21.04), "21.0");
        assert_eq!(fmt_ms(0.456), "0.46");
    }
}
