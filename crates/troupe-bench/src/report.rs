//! Results: repetitions, their summary (median, min, max), the machine they ran on, and the two
//! ways of printing them (a human line, or one JSON object per line with `--json`).
//!
//! The JSON schema is the one every peer program prints too (see `peers/PROTOCOL.md`).

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a result was measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub os: String,
    pub runtime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Machine {
    /// The machine this process runs on, the compiler, and the commit (see `commit_label`).
    pub fn current() -> Self {
        Machine {
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: os_name(),
            runtime: format!("troupe {}", env!("CARGO_PKG_VERSION")),
            compiler: Some(env!("TROUPE_BENCH_RUSTC").to_owned()),
            commit: Some(commit_label(env!("TROUPE_BENCH_COMMIT"))),
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

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
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
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    if kernel.is_empty() {
        pretty
    } else {
        format!("{pretty}, Linux {kernel}")
    }
}

/// One (scenario, metric, contender, parameters) result with all its repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
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
    #[serde(default)]
    pub notes: String,
    pub machine: Machine,
}

impl Record {
    /// Summarises `samples` into a record.
    pub fn new(
        scenario: &str,
        metric: &str,
        contender: &str,
        params: Map<String, Value>,
        unit: &str,
        samples: Vec<f64>,
        notes: &str,
    ) -> Self {
        let (median, min, max) = summarize(&samples);
        Record {
            scenario: scenario.to_owned(),
            metric: metric.to_owned(),
            contender: contender.to_owned(),
            params,
            unit: unit.to_owned(),
            median,
            min,
            max,
            samples,
            validated: true,
            notes: notes.to_owned(),
            machine: Machine::current(),
        }
    }
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

/// How repetitions are run and results printed.
#[derive(Debug, Clone)]
pub struct Runner {
    pub warmup: usize,
    pub repeat: usize,
    pub json: bool,
}

impl Runner {
    /// Runs `once` `warmup` times unmeasured, then `repeat` times, collecting the samples each
    /// run returns (one value per metric). Every run validates its own work and fails if the
    /// work was not all done.
    pub fn measure<const METRICS: usize>(
        &self,
        label: &str,
        mut once: impl FnMut() -> Result<[f64; METRICS]>,
    ) -> Result<[Vec<f64>; METRICS]> {
        if self.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let total = (self.warmup + self.repeat) as u64;
        let bar = progress(label, total);
        let mut samples: [Vec<f64>; METRICS] = std::array::from_fn(|_| Vec::new());
        for i in 0..self.warmup + self.repeat {
            let values = once()?;
            if i >= self.warmup {
                for (metric, value) in samples.iter_mut().zip(values) {
                    metric.push(value);
                }
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        Ok(samples)
    }

    /// Prints a record: one JSON line with `--json`, else a human line.
    pub fn emit(&self, record: &Record) -> Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if self.json {
            serde_json::to_writer(&mut out, record)?;
            writeln!(out)?;
        } else {
            writeln!(
                out,
                "{:<8} {:<11} {:<14} {:<40} median {} {} (min {}, max {}, n={})",
                record.scenario,
                record.metric,
                record.contender,
                params_text(&record.params),
                human(record.median),
                record.unit,
                human(record.min),
                human(record.max),
                record.samples.len()
            )?;
        }
        Ok(())
    }

    /// A free-form line for humans (the seeds' own output formats); nothing with `--json`.
    pub fn say(&self, line: impl AsRef<str>) {
        if !self.json {
            println!("{}", line.as_ref());
        }
    }
}

fn progress(label: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {elapsed}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_owned());
    bar
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

/// A number with three significant digits and an SI suffix (1.23M, 45.6k, 0.123).
pub fn human(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let (scaled, suffix) = if x.abs() >= 1e9 {
        (x / 1e9, "G")
    } else if x.abs() >= 1e6 {
        (x / 1e6, "M")
    } else if x.abs() >= 1e4 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if scaled.abs() >= 100.0 {
        0
    } else if scaled.abs() >= 10.0 {
        1
    } else if scaled.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{scaled:.digits$}{suffix}")
}

/// Milliseconds in a duration, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Resident set size of this process in bytes (from `/proc/self/statm`).
pub fn rss_bytes() -> Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let resident: u64 = statm
        .split_whitespace()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/self/statm format"))?
        .parse()?;
    Ok(resident * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// Gives freed heap memory back to the operating system, so the next RSS reading is not
/// flattered by memory the allocator kept from an earlier repetition.
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory held by the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
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

    #[test]
    fn human_numbers() {
        assert_eq!(human(31_234_567.0), "31.2M");
        assert_eq!(human(0.1234), "0.123");
        assert_eq!(human(45_600.0), "45.6k");
        assert_eq!(human(123.4), "123");
    }
}
