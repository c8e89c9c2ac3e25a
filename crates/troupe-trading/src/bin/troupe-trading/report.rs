//! Results: the JSON Lines schema every benchmark program of the project prints (scenario,
//! metric, contender, params, unit, median, min, max, samples, validated, notes, machine), and
//! a human table.
//!
//! A measured configuration yields one record per metric: throughput in orders/s, and the
//! latency percentiles p5, p50, p95, p99 and p99.9 in microseconds, each with one sample per
//! repetition.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde_json::{Map, Value};
pub use troupe_results::{params_text, summarize, Record};

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
    /// What was counted in each repetition (`Record::counters`): one per sample, or none.
    pub counters: Vec<Map<String, Value>>,
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

    /// A repetition with what was counted in it. Counters are kept only if every repetition
    /// has some (a record's counters go one per sample).
    pub fn push_counted(
        &mut self,
        throughput: f64,
        latency: &Histogram<u64>,
        counters: Map<String, Value>,
    ) {
        if !counters.is_empty() && self.counters.len() == self.throughput.len() {
            self.counters.push(counters);
        }
        self.push(throughput, latency);
    }

    /// The counters of each repetition, if every one has them.
    fn counters(&self) -> Vec<Map<String, Value>> {
        if self.counters.len() == self.throughput.len() {
            self.counters.clone()
        } else {
            Vec::new()
        }
    }

    pub fn median(&self, metric: usize) -> f64 {
        summarize(&self.latency.iter().map(|l| l[metric]).collect::<Vec<_>>()).0
    }
}

/// Prints records as JSON lines (`--json`) or as text, and keeps them for the report written
/// at the end of the run.
#[derive(Debug)]
pub struct Printer {
    pub json: bool,
    records: Mutex<Vec<Record>>,
}

impl Printer {
    pub fn new(json: bool) -> Self {
        Printer {
            json,
            records: Mutex::new(Vec::new()),
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
        let record = Record::new(
            scenario,
            metric,
            contender,
            params.clone(),
            unit,
            samples,
            notes,
        );
        self.emit(record, validated)
    }

    fn emit(&self, mut record: Record, validated: bool) -> Result<()> {
        record.validated = validated;
        if self.json {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            serde_json::to_writer(&mut out, &record)?;
            writeln!(out)?;
        }
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
        Ok(())
    }

    /// Writes every record so far as `results.jsonl` and the HTML report as `index.html` into
    /// `dir` (created if missing); returns the report's path, or None when nothing was measured.
    pub fn write_results(&self, dir: &Path) -> Result<Option<PathBuf>> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if records.is_empty() {
            return Ok(None);
        }
        troupe_results::write_results(dir, &records)
            .context("writing the results")
            .map(Some)
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
        let counters = samples.counters();
        let metrics = std::iter::once(("throughput", "orders/s", samples.throughput.clone()))
            .chain(PERCENTILES.iter().enumerate().map(|(i, (metric, _))| {
                (
                    *metric,
                    "us",
                    samples.latency.iter().map(|l| l[i]).collect(),
                )
            }));
        for (metric, unit, figures) in metrics {
            let record = Record::new(
                scenario,
                metric,
                contender,
                params.clone(),
                unit,
                figures,
                notes,
            )
            .with_counters(counters.clone());
            self.emit(record, samples.validated)?;
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
