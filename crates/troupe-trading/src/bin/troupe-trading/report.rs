//! Results: the JSON Lines schema every benchmark program of the project prints (scenario,
//! metric, contender, params, unit, median, min, max, samples, validated, notes, machine), and
//! a human table.
//!
//! A measured configuration yields one record per metric: throughput in orders/s, and the
//! latency percentiles p5, p50, p95, p99 and p99.9 in microseconds, each with one sample per
//! repetition.

use std::io::Write;

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Map, Value};

/// Where a result was measured.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub os: String,
    pub runtime: String,
    pub compiler: String,
    pub commit: String,
}

impl Machine {
    pub fn current() -> Self {
        Machine {
            cpu: first_line_value("/proc/cpuinfo", "model name")
                .unwrap_or_else(|| std::env::consts::ARCH.to_owned()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: os_name(),
            runtime: format!("troupe {}", env!("CARGO_PKG_VERSION")),
            compiler: env!("TROUPE_TRADING_RUSTC").to_owned(),
            commit: commit_label(env!("TROUPE_TRADING_COMMIT")),
        }
    }
}

/// The commit the figures come from, read when the program runs: `git describe --dirty` of the
/// source tree the binary was built from. The build script records the same at build time
/// (rerun whenever a source file changes); if the two differ, the binary does not match the
/// tree, and the label says both, so a figure is never credited to a clean commit it did not
/// come from. Where git or the tree is missing, the build-time value is given as such.
fn commit_label(built: &str) -> String {
    let now = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned());
    match now {
        Some(now) if now == built => now,
        Some(now) => format!("{now} (binary built at {built})"),
        None => format!("{built} (at build time)"),
    }
}

fn first_line_value(file: &str, key: &str) -> Option<String> {
    std::fs::read_to_string(file).ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    })
}

fn os_name() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_owned());
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(k) if !k.trim().is_empty() => format!("{pretty}, Linux {}", k.trim()),
        _ => pretty,
    }
}

/// One (scenario, metric, contender, params) result with all its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub scenario: String,
    pub metric: String,
    pub contender: String,
    pub params: Map<String, Value>,
    pub unit: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: Vec<f64>,
    pub validated: bool,
    pub notes: String,
    pub machine: Machine,
}

/// Median (mean of the middle two for an even count), min and max. NaN for no samples.
pub fn summarize(samples: &[f64]) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    (median, sorted[0], sorted[n - 1])
}

/// The latency percentiles reported for every configuration.
pub const PERCENTILES: [(&str, f64); 5] = [
    ("latency_p5", 5.0),
    ("latency_p50", 50.0),
    ("latency_p95", 95.0),
    ("latency_p99", 99.0),
    ("latency_p99.9", 99.9),
];

/// The percentiles of a nanosecond histogram, in microseconds.
pub fn percentiles_us(h: &Histogram<u64>) -> [f64; 5] {
    PERCENTILES.map(|(_, q)| h.value_at_quantile(q / 100.0) as f64 / 1e3)
}

/// Samples of one configuration across repetitions.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub throughput: Vec<f64>,
    pub latency: Vec<[f64; 5]>,
    pub validated: bool,
}

impl Samples {
    pub fn new() -> Self {
        Samples {
            validated: true,
            ..Default::default()
        }
    }

    pub fn push(&mut self, throughput: f64, latency: &Histogram<u64>) {
        self.throughput.push(throughput);
        self.latency.push(percentiles_us(latency));
    }

    pub fn median(&self, metric: usize) -> f64 {
        summarize(&self.latency.iter().map(|l| l[metric]).collect::<Vec<_>>()).0
    }
}

/// Prints records as JSON lines (`--json`) or as text.
#[derive(Debug, Clone)]
pub struct Printer {
    pub json: bool,
    pub machine: Machine,
}

impl Printer {
    pub fn new(json: bool) -> Self {
        Printer {
            json,
            machine: Machine::current(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        scenario: &str,
        metric: &str,
        contender: &str,
        params: &Map<String, Value>,
        unit: &str,
        samples: Vec<f64>,
        validated: bool,
        notes: &str,
    ) -> Result<()> {
        let (median, min, max) = summarize(&samples);
        let record = Record {
            scenario: scenario.to_owned(),
            metric: metric.to_owned(),
            contender: contender.to_owned(),
            params: params.clone(),
            unit: unit.to_owned(),
            median,
            min,
            max,
            samples,
            validated,
            notes: notes.to_owned(),
            machine: self.machine.clone(),
        };
        if self.json {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            serde_json::to_writer(&mut out, &record)?;
            writeln!(out)?;
        }
        Ok(())
    }

    /// Emits throughput and every percentile of one configuration, plus one text line.
    pub fn configuration(
        &self,
        scenario: &str,
        contender: &str,
        params: &Map<String, Value>,
        samples: &Samples,
        notes: &str,
    ) -> Result<()> {
        self.record(
            scenario,
            "throughput",
            contender,
            params,
            "orders/s",
            samples.throughput.clone(),
            samples.validated,
            notes,
        )?;
        for (i, (metric, _)) in PERCENTILES.iter().enumerate() {
            self.record(
                scenario,
                metric,
                contender,
                params,
                "us",
                samples.latency.iter().map(|l| l[i]).collect(),
                samples.validated,
                notes,
            )?;
        }
        let (tput, _, _) = summarize(&samples.throughput);
        self.say(format!(
            "{:<10} {:<9} {:<44} {:>12} orders/s  p5 {:>8}  p50 {:>8}  p95 {:>8}  p99 {:>8}  p99.9 {:>8} us{}",
            scenario,
            contender,
            params_text(params),
            format!("{tput:.0}"),
            us(samples.median(0)),
            us(samples.median(1)),
            us(samples.median(2)),
            us(samples.median(3)),
            us(samples.median(4)),
            if samples.validated { "" } else { "  NOT VALIDATED" },
        ));
        Ok(())
    }

    /// A line for humans; nothing with `--json`.
    pub fn say(&self, line: impl AsRef<str>) {
        if !self.json {
            println!("{}", line.as_ref());
        }
    }
}

fn us(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

pub fn params_text(params: &Map<String, Value>) -> String {
    params
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert!(summarize(&[]).0.is_nan());
    }
}
