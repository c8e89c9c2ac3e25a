//! The record every benchmark prints, and the machine it ran on.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::stats::{summarize, utc_now};

/// Where a result was measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// CPU model (from `/proc/cpuinfo`), or the architecture.
    pub cpu: String,
    /// Cores available to the process.
    pub cores: usize,
    /// Operating system and kernel.
    pub os: String,
    /// The runtime that ran the contender, with its version.
    pub runtime: String,
    /// The compiler the program was built with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiler: Option<String>,
    /// The commit the figures come from (see [`commit_label`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Machine {
    /// The machine this process runs on, the compiler this crate was built with, and the
    /// commit, for a contender running on `runtime` (e.g. `"troupe 0.1.0"`).
    /// The description is read once per process (`/proc`, `/etc/os-release`, `git describe`)
    /// and cloned for every record after that.
    pub fn current(runtime: impl Into<String>) -> Self {
        static THIS: std::sync::OnceLock<Machine> = std::sync::OnceLock::new();
        let this = THIS.get_or_init(|| Machine {
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: os_name(),
            runtime: String::new(),
            compiler: Some(env!("TROUPE_RESULTS_RUSTC").to_owned()),
            commit: Some(commit_label(env!("TROUPE_RESULTS_COMMIT"))),
        });
        Machine {
            runtime: runtime.into(),
            ..this.clone()
        }
    }

    /// The machine for a troupe program: runtime `troupe <version>`.
    pub fn troupe() -> Self {
        Self::current(concat!("troupe ", env!("CARGO_PKG_VERSION")))
    }
}

/// The commit the figures come from, read when the program runs: `git describe --dirty` of the
/// source tree the binary was built from. The build script records the same at build time
/// (rerun whenever a source file changes); if the two differ, the binary does not match the
/// tree, and the label says both, so a figure is never credited to a clean commit it did not
/// come from. Where git or the tree is missing, the build-time value is given as such.
pub fn commit_label(built: &str) -> String {
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
    match std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        Ok(k) if !k.trim().is_empty() => format!("{pretty}, Linux {}", k.trim()),
        _ => pretty,
    }
}

/// One (scenario, metric, contender, parameters) result with all its repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// The scenario (`ring`, `counter`, `chain`, `trading`, `store`, ...).
    pub scenario: String,
    /// What was measured (`throughput`, `elapsed`, `latency_p99`, ...).
    pub metric: String,
    /// Who ran it (`troupe`, `erlang`, `go-chan`, `troupe-store`, ...).
    pub contender: String,
    /// The scenario's parameters (sizes, modes).
    pub params: Map<String, Value>,
    /// The unit of every sample (`msgs/s`, `ms`, `us`, ...).
    pub unit: String,
    /// Median of the samples.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// One value per measured repetition.
    pub samples: Vec<f64>,
    /// Whether every repetition passed the scenario's own check.
    pub validated: bool,
    /// Free text: the configuration of the contender.
    #[serde(default)]
    pub notes: String,
    /// Where it ran.
    pub machine: Machine,
    /// When the record was written (UTC, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The command that produced the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The runtime's own counters over each measured repetition, in the order of `samples`
    /// (troupe's: turns, lent and helped turns, messages per turn, steals, parks), so a slow
    /// repetition can be told apart by what the scheduler did in it. Empty when not kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<Map<String, Value>>,
}

impl Record {
    /// Summarises `samples` into a validated record measured by troupe on this machine, now,
    /// by this process's command line.
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
            machine: Machine::troupe(),
            time: Some(utc_now()),
            command: Some(command_line()),
            counters: Vec::new(),
        }
    }

    /// The same record, with the runtime's counters of each measured repetition.
    pub fn with_counters(mut self, counters: Vec<Map<String, Value>>) -> Self {
        self.counters = counters;
        self
    }

    /// The same record, measured on `machine`.
    pub fn with_machine(mut self, machine: Machine) -> Self {
        self.machine = machine;
        self
    }

    /// The same record, its check failed (`validated: false`).
    pub fn failed(mut self) -> Self {
        self.validated = false;
        self
    }
}

/// This process's command line, each argument quoted for a POSIX shell where it needs it, the
/// program named by its file name (how a user runs it from `cargo run --release -p` or PATH).
pub fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            std::path::Path::new(&p)
                .file_name()
                .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    std::iter::once(program)
        .chain(args.map(|a| shell_quote(&a)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,/=:+@%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_json() {
        let mut params = Map::new();
        params.insert("actors".into(), 100.into());
        let r = Record::new(
            "ring",
            "throughput",
            "troupe",
            params,
            "msgs/s",
            vec![3.0, 1.0, 2.0],
            "",
        );
        assert_eq!((r.median, r.min, r.max), (2.0, 1.0, 3.0));
        let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(r.time.as_deref().unwrap().ends_with('Z'));
        // Counters appear only when kept, one object per repetition.
        assert!(!serde_json::to_string(&r).unwrap().contains("counters"));
        let mut turns = Map::new();
        turns.insert("turns".into(), 7.into());
        let counted = r.with_counters(vec![turns.clone(); 3]);
        let line = serde_json::to_string(&counted).unwrap();
        assert!(line.contains(r#""counters":[{"turns":7},"#), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back.counters, vec![turns; 3]);
    }

    #[test]
    fn peer_records_without_the_optional_fields_parse() {
        let line = r#"{"scenario":"ring","metric":"throughput","contender":"go-chan","params":{"actors":100},"unit":"msgs/s","median":1,"min":1,"max":1,"samples":[1],"validated":true,"machine":{"cpu":"x","cores":2,"os":"linux","runtime":"go1.22"}}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.machine.commit, None);
        assert_eq!(r.notes, "");
        assert!(r.counters.is_empty());
    }

    #[test]
    fn arguments_are_quoted_only_where_needed() {
        assert_eq!(shell_quote("--actors=100"), "--actors=100");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
