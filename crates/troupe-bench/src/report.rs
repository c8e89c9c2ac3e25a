//! Results: repetitions, their summary (median, min, max), the machine they ran on, and the two
//! ways of printing them (a human line, or one JSON object per line with `--json`).
//!
//! The JSON schema is the one every peer program prints too (see `peers/PROTOCOL.md`).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use troupe::{PoolMetrics, System};
use troupe_results::usage::{ProcessUsage, CPUS};
pub use troupe_results::{human, params_text, summarize, Machine, Record};

/// The runtime's counters over one repetition, as written into a record (`Record::counters`).
pub type Counters = Map<String, Value>;

// The counters holding how far apart two cores were right before the repetition (half a round
// trip of a cache line between them, in nanoseconds) and how fast the host ran plain code then
// (`troupe_results::probe`).
pub use troupe_results::probe::{core_to_core_value, host_speed_value, CORE_TO_CORE, HOST_SPEED};

/// How repetitions are run and results printed.
#[derive(Debug, Clone)]
pub struct Runner {
    pub warmup: usize,
    pub repeat: usize,
    pub json: bool,
    /// Every record emitted, for the report written at the end of the run.
    pub kept: Arc<Mutex<Vec<Record>>>,
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

    /// As `measure`, and the default pool's counters over each measured repetition (see
    /// [`counters_between`]): `once` also returns the messages the system's actors handled in it.
    /// Before the first repetition and after each, it waits (microseconds; at most a second)
    /// until no worker runs a turn, so the counters hold every turn of the repetition. Right
    /// before each repetition it measures how far apart two cores are
    /// and how fast the host runs (`troupe_results::probe`), kept as [`CORE_TO_CORE`] and
    /// [`HOST_SPEED`]; around it, what the process met
    /// that its figure does not show (`troupe_results::usage`).
    pub fn measure_counted<const METRICS: usize>(
        &self,
        label: &str,
        system: &System,
        mut once: impl FnMut() -> Result<([f64; METRICS], u64)>,
    ) -> Result<([Vec<f64>; METRICS], Vec<Counters>)> {
        let mut counts = Vec::with_capacity(self.warmup + self.repeat);
        let mut before = settled_pool(system);
        let samples = self.measure(label, || {
            let apart = troupe_results::probe::core_to_core_ns();
            let host = troupe_results::probe::host_speed();
            let process = ProcessUsage::now();
            let started = Instant::now();
            let (values, messages) = once()?;
            let wall = started.elapsed();
            let process = ProcessUsage::now().since(&process);
            let after = settled_pool(system);
            let mut counters = counters_between(&before, &after, messages);
            counters.insert("page_faults".into(), json!(process.page_faults));
            counters.insert("preemptions".into(), json!(process.preemptions));
            if let Some(cpus) = process.cpus(wall) {
                counters.insert(CPUS.into(), json!(cpus));
            }
            if let Some(ns) = apart {
                counters.insert(CORE_TO_CORE.into(), core_to_core_value(ns));
            }
            if let Some(m) = host {
                counters.insert(HOST_SPEED.into(), host_speed_value(m));
            }
            counts.push(counters);
            before = after;
            Ok(values)
        })?;
        // The warm-up repetitions' counters go, as their samples did.
        Ok((samples, counts.split_off(self.warmup)))
    }

    /// Keeps a record for the report without printing it.
    pub fn keep(&self, record: Record) {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }

    /// Every record kept so far.
    pub fn kept(&self) -> Vec<Record> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Prints a record (one JSON line with `--json`, else a human line) and keeps it.
    pub fn emit(&self, record: &Record) -> Result<()> {
        self.keep(record.clone());
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
        ProgressStyle::with_template(
            "{prefix:>24} [{bar:30}] {pos}/{len} {elapsed}, about {eta} left",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar.set_prefix(label.to_owned());
    // A repetition may take minutes: the elapsed time moves meanwhile (on a terminal only).
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_secs(1));
    }
    bar
}

/// The default pool's counters once no worker runs a turn (seen twice in a row: the count is
/// approximate while workers change state), or after a second if that never happens (a
/// scenario that leaves work running, or a machine too busy to let the workers finish).
/// Workers publish their counters as they run out of work, so this waits microseconds, and
/// the next repetition finds them still looking for work, as it would without the counters.
fn settled_pool(system: &System) -> PoolMetrics {
    let deadline = Instant::now() + Duration::from_secs(1);
    let default_pool = || {
        system
            .pool_metrics()
            .into_iter()
            .find(|p| p.name == "default")
            .unwrap_or_default()
    };
    let idle = |p: &PoolMetrics| p.idle_workers >= p.workers;
    loop {
        let first = default_pool();
        let pool = default_pool();
        if (idle(&first) && idle(&pool)) || Instant::now() >= deadline {
            return pool;
        }
        std::thread::yield_now();
    }
}

/// The JSON object of one repetition: what the pool counted between `before` and `after`, for
/// a repetition whose actors handled `messages` messages.
fn counters_between(before: &PoolMetrics, after: &PoolMetrics, messages: u64) -> Counters {
    let turns = after.turns.saturating_sub(before.turns);
    let lent_turns = after.lent_turns.saturating_sub(before.lent_turns);
    let helped_turns = after.helped_turns.saturating_sub(before.helped_turns);
    let all_turns = turns + lent_turns + helped_turns;
    let per_turn = if all_turns == 0 {
        0.0
    } else {
        messages as f64 / all_turns as f64
    };
    let value = json!({
        "turns": turns,
        "lent_turns": lent_turns,
        "helped_turns": helped_turns,
        "catch_up_waits": after.catch_up_waits.saturating_sub(before.catch_up_waits),
        "aside_waits": after.aside_waits.saturating_sub(before.aside_waits),
        "messages_per_turn": (per_turn * 10.0).round() / 10.0,
        "steals": after.steals.saturating_sub(before.steals),
        "parks": after.parks.saturating_sub(before.parks),
        "width": after.width,
        "width_changes": after.width_changes.saturating_sub(before.width_changes),
    });
    match value {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
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
