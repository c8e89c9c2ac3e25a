//! `troupe-bench compare`: every contender on the same scenario, same parameters, one run.
//!
//! Contenders are troupe itself (run as child processes of this program) and the peer programs
//! under `peers/<runtime>/`, each described by its `peer.json` (see `peers/PROTOCOL.md`).
//! A peer whose toolchain is missing is skipped with one line saying how to install it.
//!
//! Repetitions are interleaved, A B C A B C …, one process per repetition, so drift in the
//! machine's speed hits every contender alike. JVM contenders are the exception the seeds'
//! commenters asked for: each runs all its repetitions in one process after a warm-up round,
//! in its place in the first round, and the table says so.
//!
//! Every result line a contender prints is checked: it must be validated by the contender's
//! own check (token count, sum, delivery), carry the parameters that were asked for, and have
//! one sample per repetition. Anything else is reported as a failure, never as a figure.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use troupe_results::{counts_work, describe_counters};

use crate::report::{
    core_to_core_value, host_speed_value, human, params_text, summarize, Machine, Record, Runner,
    CORE_TO_CORE, HOST_SPEED,
};

/// The scenarios a comparison can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Scenario {
    Ring,
    Spawn,
    Counter,
    Chain,
    // One sender outside the runtime's lightweight units tells M messages to N actors
    // round-robin, then asks each for its sum.
    Fanout,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Ring => "ring",
            Scenario::Spawn => "spawn",
            Scenario::Counter => "counter",
            Scenario::Chain => "chain",
            Scenario::Fanout => "fanout",
        }
    }
}

/// Options of `compare`.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub scenarios: Vec<Scenario>,
    /// Only these contenders (empty: all available).
    pub only: Vec<String>,
    pub peers_dir: PathBuf,
    pub results_dir: PathBuf,
    pub build: bool,
    /// Which sizes run: `compare`'s own, its quick ones, or the seeds' series (`all`).
    pub sizes: Sizes,
    /// Run the peers under `peers_dir` (else troupe's own contenders only).
    pub peers: bool,
    pub ring_rounds: Option<u64>,
    /// Longest wait for one process.
    pub timeout: Duration,
}

/// The sizes a comparison runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// `compare`: one size per scenario (two chains), a few seconds per process.
    Compare,
    /// `compare --quick`: tiny sizes.
    Quick,
    /// `all`: the seeds' own series (rings of 100 and 20,000, the counter's five sizes, chains
    /// of 10 to 10,000); `full` also runs the chain of 10,000 OS threads.
    Seeds { full: bool },
}

/// A `peer.json` manifest.
#[derive(Debug, Clone, Deserialize)]
struct Manifest {
    runtime: String,
    contenders: Vec<ContenderSpec>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    install_hint: String,
    #[serde(default)]
    jvm: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct ContenderSpec {
    name: String,
    scenarios: Vec<String>,
    #[serde(default)]
    describe: String,
    /// `--mode` to pass for the chain (`actors` unless the contender is made of threads).
    #[serde(default)]
    chain_mode: Option<String>,
}

/// One contender ready to run.
#[derive(Debug, Clone)]
struct Contender {
    name: String,
    describe: String,
    program: PathBuf,
    /// Arguments before the scenario's own (e.g. none), and after (e.g. `--contender x`).
    extra: Vec<String>,
    scenarios: Vec<String>,
    jvm: bool,
    /// Made of one OS thread per actor: sizes that would take many minutes are scaled down.
    os_threads: bool,
    chain_mode: String,
    /// Parameters this contender is given on top of a scenario's and that its records must
    /// echo, e.g. troupe's fanout `from: thread` (troupe-bench measures a plain thread and a
    /// tokio task; the peers' sender is the plain one). Not part of the case compared.
    own_params: BTreeMap<Scenario, Map<String, Value>>,
    /// Run only when named in `--contenders` (a variant of troupe measured against itself).
    opt_in: bool,
}

/// One parameter set of one scenario.
#[derive(Debug, Clone)]
struct Case {
    scenario: Scenario,
    params: Map<String, Value>,
    /// The longest chain a contender made of OS threads runs (`all --full`: 10,000).
    thread_chain_limit: u64,
}

impl Case {
    fn new(scenario: Scenario, params: Value) -> Self {
        Case {
            scenario,
            params: params.as_object().expect("object").clone(),
            thread_chain_limit: 1_000,
        }
    }

    /// The case as this contender runs it (threads get smaller rings and chains; None: skip).
    fn for_contender(&self, c: &Contender) -> Option<Case> {
        let mut case = self.clone();
        if c.os_threads {
            match self.scenario {
                // A thread per actor: a ring of 20,000 threads measures the kernel.
                Scenario::Ring if self.params["actors"].as_u64()? > 1_000 => return None,
                // One OS context switch per hop: a hundredth of the rounds, same throughput unit.
                Scenario::Ring => {
                    let rounds = self.params["rounds"].as_u64()?;
                    case.params
                        .insert("rounds".into(), json!((rounds / 100).max(10)));
                }
                Scenario::Spawn => return None,
                // The seed: 10,000 platform threads take many minutes.
                Scenario::Chain if self.params["length"].as_u64()? > self.thread_chain_limit => {
                    return None
                }
                _ => {}
            }
        }
        if self.scenario == Scenario::Chain {
            case.params.insert("mode".into(), json!(c.chain_mode));
        }
        Some(case)
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![self.scenario.name().to_owned()];
        push_params(&mut args, &self.params);
        args
    }

    /// The command line of this case for this contender: the case's parameters, then the
    /// contender's own for the scenario.
    fn args_for(&self, c: &Contender) -> Vec<String> {
        let mut args = self.args();
        if let Some(own) = c.own_params.get(&self.scenario) {
            push_params(&mut args, own);
        }
        args
    }

    /// Every parameter a record of this case must carry for this contender.
    fn expected_params<'a>(
        &'a self,
        c: &'a Contender,
    ) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.params
            .iter()
            .chain(c.own_params.get(&self.scenario).into_iter().flatten())
    }

    fn key(&self) -> String {
        format!("{} {}", self.scenario.name(), params_text(&self.params))
    }
}

/// `--key value` for each parameter (`per_producer` becomes `--per-producer`).
fn push_params(args: &mut Vec<String>, params: &Map<String, Value>) {
    for (key, value) in params {
        args.push(format!("--{}", key.replace('_', "-")));
        args.push(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
}

fn cases(options: &CompareOptions) -> Vec<Case> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Sizes::Seeds { full } = options.sizes {
        return seed_cases(options, cores, full);
    }
    let quick = options.sizes == Sizes::Quick;
    let mut out = Vec::new();
    for &s in &options.scenarios {
        match (s, quick) {
            (Scenario::Ring, true) => out.push(Case::new(s, json!({"actors": 100, "rounds": 100}))),
            (Scenario::Ring, false) => out.push(Case::new(
                s,
                json!({"actors": 100, "rounds": options.ring_rounds.unwrap_or(100_000)}),
            )),
            (Scenario::Spawn, true) => out.push(Case::new(s, json!({"actors": 1_000}))),
            (Scenario::Spawn, false) => out.push(Case::new(s, json!({"actors": 1_000_000}))),
            (Scenario::Counter, quick) => out.push(Case::new(
                s,
                json!({"producers": cores, "per_producer": if quick { 3_000 } else { 3_000_000 }}),
            )),
            (Scenario::Chain, true) => out.push(Case::new(s, json!({"length": 100}))),
            (Scenario::Chain, false) => {
                out.push(Case::new(s, json!({"length": 1_000})));
                out.push(Case::new(s, json!({"length": 10_000})));
            }
            (Scenario::Fanout, true) => {
                out.push(Case::new(s, json!({"actors": 100, "messages": 10_000})));
            }
            (Scenario::Fanout, false) => fanout_cases(&mut out),
        }
    }
    out
}

/// Fan-out at two shapes: 1,000 actors sharing 10 M messages, and a fork-join of 60 actors
/// with 10,000 messages each.
fn fanout_cases(out: &mut Vec<Case>) {
    for (actors, messages) in [(1_000u64, 10_000_000u64), (60, 600_000)] {
        out.push(Case::new(
            Scenario::Fanout,
            json!({"actors": actors, "messages": messages}),
        ));
    }
}

/// The seeds' own series, for `all`.
fn seed_cases(options: &CompareOptions, cores: usize, full: bool) -> Vec<Case> {
    let mut out = Vec::new();
    for &s in &options.scenarios {
        match s {
            Scenario::Ring => {
                // The seed sent 100 M messages; a tenth of them gives the same rate, and keeps
                // the slowest peers' processes under a minute each.
                out.push(Case::new(
                    s,
                    json!({"actors": 100, "rounds": options.ring_rounds.unwrap_or(100_000)}),
                ));
                out.push(Case::new(s, json!({"actors": 20_000, "rounds": 1_000})));
            }
            Scenario::Spawn => out.push(Case::new(s, json!({"actors": 1_000_000}))),
            Scenario::Counter => {
                for k in [300u64, 3_000, 30_000, 300_000, 3_000_000] {
                    out.push(Case::new(s, json!({"producers": cores, "per_producer": k})));
                }
            }
            Scenario::Chain => {
                for n in [10u64, 100, 1_000, 10_000] {
                    let mut case = Case::new(s, json!({"length": n}));
                    if full {
                        case.thread_chain_limit = 10_000;
                    }
                    out.push(case);
                }
            }
            Scenario::Fanout => fanout_cases(&mut out),
        }
    }
    out
}

/// troupe's own contenders: this program, run as a child per repetition.
fn local_contenders() -> Result<Vec<Contender>> {
    let me = std::env::current_exe().context("locating troupe-bench itself")?;
    let all = ["ring", "spawn", "counter", "chain", "fanout"]
        .map(String::from)
        .to_vec();
    // troupe-bench's fanout measures a plain thread and a tokio task; the one compared is the
    // plain thread, the sender every peer uses.
    let troupe_own = BTreeMap::from([(
        Scenario::Fanout,
        json!({"from": "thread"})
            .as_object()
            .expect("object")
            .clone(),
    )]);
    Ok(vec![
        Contender {
            name: "troupe".into(),
            describe: "troupe actors on the work-stealing pool (one worker per core)".into(),
            program: me.clone(),
            extra: vec!["--json".into()],
            scenarios: all,
            jvm: false,
            os_threads: false,
            chain_mode: "actors".into(),
            own_params: troupe_own,
            opt_in: false,
        },
        Contender {
            name: "troupe-thread".into(),
            describe: "troupe actors each on its own OS thread (Placement::Thread)".into(),
            program: me.clone(),
            extra: vec!["--json".into(), "--placement".into(), "thread".into()],
            scenarios: ["ring", "counter", "chain"].map(String::from).to_vec(),
            jvm: false,
            os_threads: true,
            chain_mode: "actors".into(),
            own_params: BTreeMap::new(),
            opt_in: false,
        },
        Contender {
            name: "troupe-observed".into(),
            describe: "troupe on the pool, observed (SystemBuilder::observe): opt-in".into(),
            program: me.clone(),
            extra: vec!["--json".into(), "--observe".into(), "on".into()],
            scenarios: ["ring", "counter", "spawn"].map(String::from).to_vec(),
            jvm: false,
            os_threads: false,
            chain_mode: "actors".into(),
            own_params: BTreeMap::new(),
            opt_in: true,
        },
        Contender {
            name: "troupe-traced".into(),
            describe: "troupe on the pool, a span per message (SystemBuilder::trace_messages, a \
                       tracing registry receiving them): opt-in"
                .into(),
            program: me.clone(),
            extra: vec!["--json".into(), "--observe".into(), "spans".into()],
            scenarios: ["ring", "counter"].map(String::from).to_vec(),
            jvm: false,
            os_threads: false,
            chain_mode: "actors".into(),
            own_params: BTreeMap::new(),
            opt_in: true,
        },
        Contender {
            name: "os-threads".into(),
            describe: "Rust std threads joined by sync_channel(1) buffers".into(),
            program: me,
            extra: vec!["--json".into()],
            scenarios: vec!["chain".into()],
            jvm: false,
            os_threads: true,
            chain_mode: "threads".into(),
            own_params: BTreeMap::new(),
            opt_in: false,
        },
    ])
}

fn on_path(command: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let candidate = dir.join(command);
            candidate.is_file()
                && std::fs::metadata(&candidate)
                    .map(|m| {
                        use std::os::unix::fs::PermissionsExt;
                        m.permissions().mode() & 0o111 != 0
                    })
                    .unwrap_or(false)
        })
    })
}

/// Reads the peers' manifests, skips the unavailable ones (saying how to install them), and
/// builds the rest.
fn peer_contenders(
    options: &CompareOptions,
    say: &dyn Fn(&str),
    skipped: &mut Vec<String>,
) -> Result<Vec<Contender>> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&options.peers_dir)
        .with_context(|| format!("reading the peers folder {}", options.peers_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("peer.json").is_file())
        .collect();
    dirs.sort();
    for dir in dirs {
        let manifest: Manifest = serde_json::from_str(
            &std::fs::read_to_string(dir.join("peer.json"))
                .with_context(|| format!("reading {}", dir.join("peer.json").display()))?,
        )
        .with_context(|| format!("parsing {}", dir.join("peer.json").display()))?;
        let wanted: Vec<&ContenderSpec> = manifest
            .contenders
            .iter()
            .filter(|c| options.only.is_empty() || options.only.contains(&c.name))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        if let Some(missing) = manifest.requires.iter().find(|r| !on_path(r)) {
            let why = format!(
                "{}: `{missing}` is not installed; {}",
                manifest.runtime, manifest.install_hint
            );
            say(&format!("skipped {why}"));
            skipped.push(why);
            continue;
        }
        if options.build {
            let started = Instant::now();
            let build = Command::new("bash")
                .arg(dir.join("build.sh"))
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .with_context(|| format!("running {}", dir.join("build.sh").display()))?;
            if !build.status.success() {
                let stderr = String::from_utf8_lossy(&build.stderr);
                let last = stderr.lines().rev().take(5).collect::<Vec<_>>();
                let why = format!(
                    "{}: build failed ({}): {}",
                    manifest.runtime,
                    build.status,
                    last.into_iter().rev().collect::<Vec<_>>().join(" | ")
                );
                say(&format!("skipped {why}"));
                skipped.push(why);
                continue;
            }
            say(&format!(
                "built {} in {:.1} s",
                manifest.runtime,
                started.elapsed().as_secs_f64()
            ));
        }
        for spec in wanted {
            out.push(Contender {
                name: spec.name.clone(),
                describe: spec.describe.clone(),
                program: dir.join("run"),
                extra: vec!["--contender".into(), spec.name.clone()],
                scenarios: spec.scenarios.clone(),
                jvm: manifest.jvm,
                os_threads: spec.chain_mode.as_deref() == Some("threads"),
                chain_mode: spec.chain_mode.clone().unwrap_or_else(|| "actors".into()),
                own_params: BTreeMap::new(),
                opt_in: false,
            });
        }
    }
    Ok(out)
}

/// What one process run produced.
enum Outcome {
    Records(Vec<Record>),
    Unsupported,
    Failed(String),
}

fn run_process(
    contender: &Contender,
    case: &Case,
    warmup: usize,
    repeat: usize,
    timeout: Duration,
) -> Outcome {
    let mut args = case.args_for(contender);
    args.extend(contender.extra.iter().cloned());
    args.extend([
        "--warmup".into(),
        warmup.to_string(),
        "--repeat".into(),
        repeat.to_string(),
    ]);
    let mut child = match Command::new(&contender.program)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => return Outcome::Failed(format!("could not start: {e}")),
    };
    // Read both pipes on their own threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("timed out after {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("waiting for it failed: {e}")),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let status = match status {
        Ok(status) => status,
        Err(why) => return Outcome::Failed(why),
    };
    if status.code() == Some(3) && stderr.contains("unsupported") {
        return Outcome::Unsupported;
    }
    let mut records = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(e) => return Outcome::Failed(format!("unreadable result line ({e}): {line}")),
        }
    }
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Outcome::Failed(format!(
            "exited with {status}: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ));
    }
    if let Err(why) = check(&records, contender, case, repeat) {
        return Outcome::Failed(why);
    }
    Outcome::Records(records)
}

/// A contender's results must be validated, for the parameters asked, one sample per repetition.
fn check(
    records: &[Record],
    contender: &Contender,
    case: &Case,
    repeat: usize,
) -> Result<(), String> {
    if records.is_empty() {
        return Err("printed no result".into());
    }
    for r in records {
        if r.scenario != case.scenario.name() {
            return Err(format!(
                "reported scenario {} for {}",
                r.scenario,
                case.scenario.name()
            ));
        }
        if r.contender != contender.name {
            return Err(format!(
                "reported contender {} for {}",
                r.contender, contender.name
            ));
        }
        if !r.validated {
            return Err(format!("its own check failed for {}", r.metric));
        }
        for (key, asked) in case.expected_params(contender) {
            if r.params.get(key) != Some(asked) {
                return Err(format!(
                    "ran with {key}={:?}, asked {asked}",
                    r.params.get(key)
                ));
            }
        }
        // Memory is measured once per process by some peers (allocators keep freed memory).
        if r.samples.len() != repeat && r.metric != "memory" {
            return Err(format!(
                "{} samples for {repeat} repetitions",
                r.samples.len()
            ));
        }
        if r.samples.iter().any(|s| !s.is_finite() || *s <= 0.0) && r.metric != "memory" {
            return Err(format!("non-positive sample in {}", r.metric));
        }
    }
    Ok(())
}

/// Samples gathered for one (case, metric, contender).
#[derive(Default, Clone)]
struct Gathered {
    unit: String,
    samples: Vec<f64>,
    /// The runtime's counters of each repetition, for contenders that keep them (troupe).
    counters: Vec<Map<String, Value>>,
    notes: String,
    machine: Option<Machine>,
    failure: Option<String>,
}

/// What a comparison gathered: a record per (case, metric, contender) with every repetition's
/// sample, every line the processes printed, the Markdown table, the contenders that failed
/// (one line each) and the peers that were skipped (with how to install them).
pub struct Comparison {
    pub summary: Vec<Record>,
    pub raw: Vec<Record>,
    pub markdown: String,
    pub failures: Vec<String>,
    pub skipped: Vec<String>,
    /// The peer runtimes that ran.
    pub peers: Vec<String>,
}

impl Comparison {
    /// Writes `raw.jsonl` (every process's lines) and `results.md` into `folder`.
    pub fn write_raw(&self, folder: &Path) -> Result<()> {
        let mut raw_text = Vec::new();
        for r in &self.raw {
            serde_json::to_writer(&mut raw_text, r)?;
            raw_text.push(b'\n');
        }
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create the results folder {}", folder.display()))?;
        troupe_results::write_whole(&folder.join("raw.jsonl"), &raw_text)?;
        troupe_results::write_whole(&folder.join("results.md"), self.markdown.as_bytes())?;
        Ok(())
    }
}

/// `compare`: runs every contender on the cases, interleaved, and writes the results folder.
pub fn run(runner: &Runner, options: &CompareOptions) -> Result<()> {
    let compared = gather(runner, options)?;
    let folder = options
        .results_dir
        .join(format!("compare-{}", troupe_results::utc_stamp()));
    compared.write_raw(&folder)?;
    let report =
        troupe_results::write_results(&folder, &compared.summary).context("writing the results")?;
    if runner.json {
        for record in &compared.summary {
            runner.emit(record)?;
        }
    } else {
        println!("{}", compared.markdown);
    }
    eprintln!(
        "results in {}: results.jsonl, raw.jsonl (every process's lines), results.md; report: {}",
        folder.display(),
        report.display()
    );
    if !compared.failures.is_empty() {
        bail!("some contenders failed: {}", compared.failures.join("; "));
    }
    Ok(())
}

/// Runs every contender on the cases of `options`, repetitions interleaved, and gathers what
/// they printed. A contender that fails is a line in `failures`, not an error: the others'
/// figures stand.
pub fn gather(runner: &Runner, options: &CompareOptions) -> Result<Comparison> {
    let say = |line: &str| eprintln!("{line}");
    let mut contenders: Vec<Contender> = local_contenders()?
        .into_iter()
        .filter(|c| {
            if options.only.is_empty() {
                !c.opt_in
            } else {
                options.only.contains(&c.name)
            }
        })
        .collect();
    let mut skipped = Vec::new();
    let peers = if options.peers {
        peer_contenders(options, &say, &mut skipped)?
    } else {
        Vec::new()
    };
    let mut peer_runtimes: Vec<String> = Vec::new();
    for peer in &peers {
        let runtime = peer
            .program
            .parent()
            .and_then(Path::file_name)
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !peer_runtimes.contains(&runtime) {
            peer_runtimes.push(runtime);
        }
    }
    contenders.extend(peers);
    if contenders.is_empty() {
        bail!("no contender to run (check --contenders and the peers folder)");
    }
    let repeat = runner.repeat;
    let cases = cases(options);
    // (case key, metric) -> contender -> gathered
    let mut table: BTreeMap<(String, String), BTreeMap<String, Gathered>> = BTreeMap::new();
    let mut case_of: BTreeMap<String, Case> = BTreeMap::new();
    let mut raw: Vec<Record> = Vec::new();
    // Every process this run will start, for the progress lines' estimate of the time left.
    let total: usize = cases
        .iter()
        .map(|case| {
            contenders
                .iter()
                .filter(|c| c.scenarios.iter().any(|s| s == case.scenario.name()))
                .filter(|c| case.for_contender(c).is_some())
                .map(|c| if c.jvm { 1 } else { repeat })
                .sum::<usize>()
        })
        .sum();
    let started = std::time::Instant::now();
    let mut done = 0usize;

    for case in &cases {
        case_of.insert(case.key(), case.clone());
        let runnable: Vec<(&Contender, Case)> = contenders
            .iter()
            .filter(|c| c.scenarios.iter().any(|s| s == case.scenario.name()))
            .filter_map(|c| case.for_contender(c).map(|k| (c, k)))
            .collect();
        for round in 0..repeat {
            for (contender, own_case) in &runnable {
                if contender.jvm && round > 0 {
                    continue; // ran all its repetitions in round 0
                }
                let (warmup, reps) = if contender.jvm { (1, repeat) } else { (0, 1) };
                say(&format!(
                    "[{}/{total}{}] round {}/{repeat} {:<18} {}",
                    done + 1,
                    time_left(started.elapsed(), done, total),
                    round + 1,
                    contender.name,
                    own_case.key()
                ));
                let apart = troupe_results::probe::core_to_core_ns();
                let host = troupe_results::probe::host_speed();
                let outcome = run_process(contender, own_case, warmup, reps, options.timeout);
                done += 1;
                let key_case = case.key();
                match outcome {
                    Outcome::Records(records) => {
                        for mut r in records {
                            note_probes(&mut r, apart, host);
                            let slot = table
                                .entry((key_case.clone(), r.metric.clone()))
                                .or_default()
                                .entry(contender.name.clone())
                                .or_default();
                            slot.unit = r.unit.clone();
                            slot.samples.extend(&r.samples);
                            slot.counters.extend(r.counters.iter().cloned());
                            slot.notes = if own_case.params != case.params {
                                format!("{} (ran {})", r.notes, params_text(&own_case.params))
                            } else {
                                r.notes.clone()
                            };
                            slot.machine = Some(r.machine.clone());
                            raw.push(r);
                        }
                    }
                    Outcome::Unsupported => {
                        say(&format!(
                            "  {} does not support {}",
                            contender.name,
                            case.key()
                        ));
                    }
                    Outcome::Failed(why) => {
                        say(&format!(
                            "  FAILED: {} on {}: {why}",
                            contender.name,
                            case.key()
                        ));
                        for &metric in metrics_of(case.scenario) {
                            table
                                .entry((key_case.clone(), metric.to_owned()))
                                .or_default()
                                .entry(contender.name.clone())
                                .or_default()
                                .failure = Some(why.clone());
                        }
                    }
                }
            }
        }
    }

    let markdown = render_markdown(&table, &contenders, repeat);

    // One record per (case, metric, contender) with every repetition's sample.
    let command = troupe_results::command_line();
    let mut summary = Vec::new();
    for ((key, metric), by_contender) in &table {
        let case = &case_of[key];
        for (name, g) in by_contender {
            if g.samples.is_empty() {
                continue;
            }
            let mut record = Record::new(
                case.scenario.name(),
                metric,
                name,
                case.params.clone(),
                &g.unit,
                g.samples.clone(),
                &g.notes,
            );
            if let Some(m) = &g.machine {
                record.machine = m.clone();
            }
            record.validated = g.failure.is_none();
            record.command = Some(command.clone());
            // Kept only if every repetition brought its counters, so they line up with
            // `samples`.
            if g.counters.len() == g.samples.len() {
                record.counters = g.counters.clone();
            }
            summary.push(record);
        }
    }
    let failures: Vec<String> = table
        .iter()
        .flat_map(|((key, metric), m)| {
            m.iter()
                .filter(|(_, g)| g.failure.is_some())
                .filter_map(move |(name, g)| {
                    g.failure
                        .as_ref()
                        .map(|why| format!("{name} on {key} ({metric}): {}", first_line(why)))
                })
        })
        .collect();
    Ok(Comparison {
        summary,
        raw,
        markdown,
        failures,
        skipped,
        peers: peer_runtimes,
    })
}

/// Gives every repetition of `r` the distance between two cores and the host's speed measured
/// right before its process started (see `troupe_results::probe`), unless the process measured
/// its own just before the repetition (troupe does). A JVM process runs all its repetitions
/// after the one figure: each gets it. Without a figure nothing changes.
fn note_probes(r: &mut Record, apart: Option<f64>, host: Option<f64>) {
    if apart.is_none() && host.is_none() {
        return;
    }
    if r.counters.len() != r.samples.len() {
        r.counters = vec![Map::new(); r.samples.len()];
    }
    for counters in &mut r.counters {
        if let Some(ns) = apart {
            counters
                .entry(CORE_TO_CORE)
                .or_insert_with(|| core_to_core_value(ns));
        }
        if let Some(m) = host {
            counters
                .entry(HOST_SPEED)
                .or_insert_with(|| host_speed_value(m));
        }
    }
}

/// Each contender's spread (max / min of its repetitions) beside the spread of the host's speed
/// measured right before the same repetitions, and how closely the two follow each other (the
/// correlation of the samples with the host's figures, over three repetitions or more): a
/// spread the host's own shows is not the runtime's. `None` if no contender has two
/// repetitions with a host figure each.
fn by_host_speed(by_contender: &BTreeMap<String, Gathered>) -> Option<String> {
    let parts: Vec<String> = by_contender
        .iter()
        .filter(|(_, g)| g.failure.is_none() && g.counters.len() == g.samples.len())
        .filter_map(|(name, g)| {
            let pairs: Vec<(f64, f64)> = g
                .samples
                .iter()
                .zip(&g.counters)
                .filter_map(|(&sample, c)| Some((sample, c.get(HOST_SPEED)?.as_f64()?)))
                .filter(|&(sample, host)| sample > 0.0 && host > 0.0)
                .collect();
            if pairs.len() < 2 {
                return None;
            }
            let (samples, hosts): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
            let (_, min, max) = summarize(&samples);
            let own = max / min;
            let (_, lo, hi) = summarize(&hosts);
            let host = hi / lo;
            let correlation = correlation(&pairs)
                .filter(|_| pairs.len() >= 3)
                .map_or(String::new(), |r| format!(", correlation {r:.2}"));
            Some(format!(
                "{name} {own:.2}x against the host's {host:.2}x ({lo:.0}-{hi:.0}{correlation})"
            ))
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "Spread, max / min of the repetitions, beside the host's speed right before each (M \
         steps a second of a chase through 64 KiB): {}.",
        parts.join("; ")
    ))
}

/// Pearson's correlation of the pairs' two members; `None` if either does not vary.
fn correlation(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len() as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &(x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The range of the core-to-core figures of a contender's repetitions (`41-44 ns`), or an
/// empty string if none was measured.
fn cores_apart_range(counters: &[Map<String, Value>]) -> String {
    let figures: Vec<f64> = counters.iter().filter_map(cores_apart).collect();
    if figures.is_empty() {
        return String::new();
    }
    ns_range(&figures)
}

/// A repetition's core-to-core figure, if it has one.
fn cores_apart(counters: &Map<String, Value>) -> Option<f64> {
    counters.get(CORE_TO_CORE).and_then(Value::as_f64)
}

/// `41-44 ns`, or `41 ns` when they round alike; `figures` is not empty.
fn ns_range(figures: &[f64]) -> String {
    let min = figures.iter().copied().fold(f64::INFINITY, f64::min);
    let max = figures.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max - min < 0.5 {
        format!("{min:.0} ns")
    } else {
        format!("{min:.0}-{max:.0} ns")
    }
}

/// How many times better troupe's median `troupe` is than `median` (above 1: troupe ahead);
/// `None` unless both are positive.
fn times_troupe(troupe: f64, median: f64, higher_better: bool) -> Option<f64> {
    if median <= 0.0 || troupe <= 0.0 {
        return None;
    }
    Some(if higher_better {
        troupe / median
    } else {
        median / troupe
    })
}

/// `, about 3 min 20 s left` from the average time of the `done` steps so far; nothing before
/// the first step is done.
fn time_left(elapsed: std::time::Duration, done: usize, total: usize) -> String {
    let Some(left) = troupe_results::time_left(elapsed, done as u64, total as u64) else {
        return String::new();
    };
    let left = left.as_secs_f64().round() as u64;
    if left >= 60 {
        format!(", about {} min {} s left", left / 60, left % 60)
    } else {
        format!(", about {left} s left")
    }
}

/// The first line of a failure, for the one-line summary.
fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

fn metrics_of(scenario: Scenario) -> &'static [&'static str] {
    match scenario {
        Scenario::Ring => &["construct", "throughput"],
        Scenario::Spawn => &["spawn_time", "memory"],
        Scenario::Counter => &["throughput"],
        Scenario::Chain => &["elapsed"],
        Scenario::Fanout => &["throughput"],
    }
}

fn higher_is_better(unit: &str) -> bool {
    unit.ends_with("/s")
}

fn render_markdown(
    table: &BTreeMap<(String, String), BTreeMap<String, Gathered>>,
    contenders: &[Contender],
    repeat: usize,
) -> String {
    let machine = Machine::troupe();
    let mut md = String::new();
    md.push_str("# Side by side\n\n");
    md.push_str(&format!(
        "Machine: {}, {} cores, {}; troupe built with {} at {}.\n\n",
        machine.cpu,
        machine.cores,
        machine.os,
        machine.compiler.as_deref().unwrap_or("?"),
        machine.commit.as_deref().unwrap_or("?")
    ));
    md.push_str(&format!(
        "{repeat} repetitions per contender, interleaved one process each (A B C A B C ...); \
         JVM contenders ran their repetitions in one process after one warm-up repetition. \
         `x troupe` is how many times better troupe's median is (above 1: troupe ahead). \
         `cores apart` is the range, over the contender's repetitions, of the time a cache line \
         took to cross between two cores right before each (half a round trip): a virtual \
         machine's host moves its CPUs between neighbouring and distant cores, and every \
         message between cores pays that crossing.\n\n"
    ));
    for ((key, metric), by_contender) in table {
        let unit = by_contender
            .values()
            .find(|g| !g.unit.is_empty())
            .map(|g| g.unit.clone())
            .unwrap_or_default();
        let better = if higher_is_better(&unit) {
            "higher is better"
        } else {
            "lower is better"
        };
        md.push_str(&format!("## {key}: {metric} ({unit}, {better})\n\n"));
        md.push_str("| contender | median | min | max | n | x troupe | cores apart | notes |\n");
        md.push_str("|---|---:|---:|---:|---:|---:|---:|---|\n");
        let troupe = by_contender
            .get("troupe")
            .filter(|g| !g.samples.is_empty())
            .map(|g| summarize(&g.samples).0);
        let mut rows: Vec<(&String, &Gathered)> = by_contender.iter().collect();
        rows.sort_by(|a, b| {
            let ma = summarize(&a.1.samples).0;
            let mb = summarize(&b.1.samples).0;
            let order = ma.total_cmp(&mb);
            if higher_is_better(&unit) {
                order.reverse()
            } else {
                order
            }
        });
        for (name, g) in rows {
            if let Some(why) = &g.failure {
                md.push_str(&format!("| {name} | failed | | | | | | {why} |\n"));
                continue;
            }
            let (median, min, max) = summarize(&g.samples);
            let ratio = troupe
                .and_then(|t| times_troupe(t, median, higher_is_better(&unit)))
                .map_or(String::new(), |r| format!("{r:.2}"));
            let describe = contenders
                .iter()
                .find(|c| &c.name == name)
                .map(|c| c.describe.as_str())
                .unwrap_or("");
            let notes = if g.notes.is_empty() {
                describe.to_owned()
            } else {
                g.notes.replace('|', "/")
            };
            md.push_str(&format!(
                "| {name} | {} | {} | {} | {} | {ratio} | {} | {notes} |\n",
                human(median),
                human(min),
                human(max),
                g.samples.len(),
                cores_apart_range(&g.counters),
            ));
        }
        md.push('\n');
        for (name, g) in by_contender {
            if let Some(line) = each_repetition(name, g, higher_is_better(&unit)) {
                md.push_str(&line);
                md.push_str("\n\n");
            }
        }
        if let Some(line) = by_distance(by_contender, higher_is_better(&unit)) {
            md.push_str(&line);
            md.push_str("\n\n");
        }
        if let Some(line) = by_host_speed(by_contender) {
            md.push_str(&line);
            md.push_str("\n\n");
        }
    }
    md
}

/// What the pool did in each of troupe's repetitions, worst first, so a slow repetition
/// explains itself in the report: e.g. `16.8M (width 2 after 1 change, 2.9 messages per turn,
/// 13 parks, 185 ns apart)`. `None` for any other contender (`troupe-thread` runs each actor
/// on a thread of its own, which the pool's counters do not describe; peers keep none).
fn each_repetition(name: &str, g: &Gathered, higher_better: bool) -> Option<String> {
    if name != "troupe"
        || g.failure.is_some()
        || g.counters.len() != g.samples.len()
        || !g.counters.iter().any(counts_work)
    {
        return None;
    }
    let mut reps: Vec<(f64, &Map<String, Value>)> =
        g.samples.iter().copied().zip(&g.counters).collect();
    reps.sort_by(|a, b| {
        let order = a.0.total_cmp(&b.0);
        if higher_better {
            order
        } else {
            order.reverse()
        }
    });
    let described: Vec<String> = reps
        .iter()
        .map(|(sample, c)| format!("{} ({})", human(*sample), describe_counters(c)))
        .collect();
    Some(format!(
        "{name}, each repetition, worst first: {}.",
        described.join("; ")
    ))
}

/// A contender's samples on near cores, and on far ones.
type NearFar = (Vec<f64>, Vec<f64>);

/// Where a table's repetitions ran on near cores and on far ones (see `probe`), each
/// contender's median on each, and troupe's ratio to each within the same kind of pair:
/// `None` if every repetition ran on the same kind. A repetition ran on far cores if its
/// figure was more than twice the smallest of the table.
fn by_distance(by_contender: &BTreeMap<String, Gathered>, higher_better: bool) -> Option<String> {
    let apart = |g: &Gathered| -> Vec<Option<f64>> {
        if g.counters.len() != g.samples.len() {
            return vec![None; g.samples.len()];
        }
        g.counters.iter().map(cores_apart).collect()
    };
    let closest = by_contender
        .values()
        .flat_map(&apart)
        .flatten()
        .fold(f64::INFINITY, f64::min);
    if !closest.is_finite() {
        return None;
    }
    let far_from = 2.0 * closest;
    // contender -> its samples on near cores and on far ones; and the figures of each kind.
    let mut split: BTreeMap<&str, NearFar> = BTreeMap::new();
    let (mut near_ns, mut far_ns) = (Vec::new(), Vec::new());
    for (name, g) in by_contender {
        if g.failure.is_some() {
            continue;
        }
        for (sample, ns) in g.samples.iter().zip(apart(g)) {
            let Some(ns) = ns else { continue };
            let entry = split.entry(name.as_str()).or_default();
            if ns > far_from {
                entry.1.push(*sample);
                far_ns.push(ns);
            } else {
                entry.0.push(*sample);
                near_ns.push(ns);
            }
        }
    }
    if near_ns.is_empty() || far_ns.is_empty() {
        return None;
    }
    let kind = |pick: fn(&NearFar) -> &Vec<f64>| -> String {
        let troupe = split
            .get("troupe")
            .map(pick)
            .filter(|v| !v.is_empty())
            .map(|v| summarize(v).0);
        let parts: Vec<String> = split
            .iter()
            .filter(|(_, v)| !pick(v).is_empty())
            .map(|(name, v)| {
                let median = summarize(pick(v)).0;
                let ratio = troupe
                    .filter(|_| *name != "troupe")
                    .and_then(|t| times_troupe(t, median, higher_better))
                    .map_or(String::new(), |r| format!(", x troupe {r:.2}"));
                format!("{name} {} (n={}{ratio})", human(median), pick(v).len())
            })
            .collect();
        parts.join("; ")
    };
    Some(format!(
        "By how far apart the cores were (far: more than twice the closest figure): near \
         ({}): {}. Far ({}): {}.",
        ns_range(&near_ns),
        kind(|v| &v.0),
        ns_range(&far_ns),
        kind(|v| &v.1),
    ))
}

/// The peers folder: `--peers-dir`, else `./peers`, else the one next to this crate's sources.
pub fn default_peers_dir() -> PathBuf {
    let here = Path::new("peers");
    if here.join("PROTOCOL.md").is_file() {
        return here.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../peers")
}

/// Fails with a clear message when an option makes no sense.
/// Checks the options before anything runs: the peers folder, every contender named in
/// `--contenders` (a typo is an error naming the known ones, not a contender silently
/// dropped), and the results folder (created now, so a long run cannot end unable to write).
pub fn validate(options: &CompareOptions) -> Result<()> {
    if !options.peers_dir.is_dir() {
        return Err(anyhow!(
            "peers folder {} not found (give --peers-dir)",
            options.peers_dir.display()
        ));
    }
    if !options.only.is_empty() {
        let mut known: Vec<String> = local_contenders()?.into_iter().map(|c| c.name).collect();
        let entries = std::fs::read_dir(&options.peers_dir)
            .with_context(|| format!("reading the peers folder {}", options.peers_dir.display()))?;
        for entry in entries.flatten() {
            let manifest_path = entry.path().join("peer.json");
            if !manifest_path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&manifest_path)
                .with_context(|| format!("reading {}", manifest_path.display()))?;
            let manifest: Manifest = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", manifest_path.display()))?;
            known.extend(manifest.contenders.into_iter().map(|c| c.name));
        }
        known.sort();
        if let Some(unknown) = options.only.iter().find(|name| !known.contains(name)) {
            bail!(
                "no contender is called `{unknown}`; the contenders are: {}",
                known.join(", ")
            );
        }
    }
    std::fs::create_dir_all(&options.results_dir).with_context(|| {
        format!(
            "creating the results folder {}",
            options.results_dir.display()
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(samples: Vec<f64>) -> Record {
        Record::new(
            "counter",
            "throughput",
            "go",
            Map::new(),
            "msgs/s",
            samples,
            "",
        )
    }

    fn gathered(samples: &[f64], apart: &[f64]) -> Gathered {
        Gathered {
            unit: "msgs/s".into(),
            samples: samples.to_vec(),
            counters: apart
                .iter()
                .map(|ns| {
                    let mut c = Map::new();
                    c.insert(CORE_TO_CORE.into(), json!(ns));
                    c
                })
                .collect(),
            ..Gathered::default()
        }
    }

    #[test]
    fn medians_are_split_by_how_far_apart_the_cores_were() {
        let mut table = BTreeMap::new();
        table.insert(
            "troupe".to_owned(),
            gathered(
                &[50e6, 56e6, 25e6, 27e6, 55e6],
                &[24.0, 30.0, 200.0, 210.0, 26.0],
            ),
        );
        table.insert(
            "go".to_owned(),
            gathered(&[28e6, 22e6, 21e6], &[25.0, 190.0, 205.0]),
        );
        let line = by_distance(&table, true).expect("both kinds of pair");
        let mut one_far = BTreeMap::new();
        one_far.insert("troupe".to_owned(), gathered(&[50e6, 25e6], &[24.0, 200.0]));
        let one = by_distance(&one_far, true).expect("both kinds of pair");
        assert!(one.contains("near (24 ns): troupe 50.0M (n=1)"), "{one}");
        assert!(
            line.contains("near (24-30 ns): go 28.0M (n=1, x troupe 1.96); troupe 55.0M (n=3)"),
            "{line}"
        );
        assert!(
            line.contains("Far (190-210 ns): go 21.5M (n=2, x troupe 1.21); troupe 26.0M (n=2)"),
            "{line}"
        );
        // Every repetition on the same kind of pair: nothing to split.
        let mut near = BTreeMap::new();
        near.insert("troupe".to_owned(), gathered(&[50e6, 56e6], &[24.0, 40.0]));
        assert_eq!(by_distance(&near, true), None);
    }

    #[test]
    fn a_slow_repetition_explains_itself() {
        let counters = |width: u64, changes: u64, per_turn: f64, parks: u64, ns: f64| {
            let mut c = Map::new();
            c.insert("turns".into(), json!(1000));
            c.insert("width".into(), json!(width));
            c.insert("width_changes".into(), json!(changes));
            c.insert("messages_per_turn".into(), json!(per_turn));
            c.insert("parks".into(), json!(parks));
            c.insert("steals".into(), json!(0));
            c.insert(CORE_TO_CORE.into(), json!(ns));
            c
        };
        let troupe = Gathered {
            unit: "msgs/s".into(),
            samples: vec![26.7e6, 16.8e6],
            counters: vec![
                counters(1, 4, 6.0, 6, 179.0),
                counters(2, 1, 2.9, 13, 185.0),
            ],
            ..Gathered::default()
        };
        let line = each_repetition("troupe", &troupe, true).expect("troupe keeps counters");
        assert_eq!(
            line,
            "troupe, each repetition, worst first: 16.8M (width 2 after 1 change, 2.9 messages \
             per turn, 13 parks, 185 ns apart); 26.7M (width 1 after 4 changes, 6.0 messages per \
             turn, 6 parks, 179 ns apart)."
        );
        // Lower is better (a chain's time): the worst is the highest.
        let chain = Gathered {
            unit: "ms".into(),
            samples: vec![580.0, 660.0],
            counters: vec![counters(2, 0, 1.0, 0, 25.0), counters(2, 0, 1.0, 0, 26.0)],
            ..Gathered::default()
        };
        let line = each_repetition("troupe", &chain, false).expect("counters");
        assert!(line.contains("worst first: 660 ("), "{line}");
        // One of each: singular.
        let one = Gathered {
            counters: vec![counters(1, 1, 6.0, 1, 30.0)],
            samples: vec![1e6],
            ..troupe.clone()
        };
        let line = each_repetition("troupe", &one, true).expect("counters");
        assert!(
            line.contains("after 1 change, 6.0 messages per turn, 1 park, 30 ns"),
            "{line}"
        );
        assert_eq!(each_repetition("troupe-thread", &troupe, true), None);
        // A peer's repetitions carry only the probe's figure: no line.
        assert_eq!(
            each_repetition("go", &gathered(&[1.0], &[25.0]), true),
            None
        );
        // Counters that do not match the samples one to one: no line.
        let mut short = troupe.clone();
        short.counters.pop();
        assert_eq!(each_repetition("troupe", &short, true), None);
    }

    #[test]
    fn each_repetition_gets_the_probe_unless_it_measured_its_own() {
        // A peer's process: no counters; every repetition gets the harness's figure.
        let mut peer = record(vec![1.0, 2.0]);
        note_probes(&mut peer, Some(41.26), Some(301.04));
        assert_eq!(peer.counters.len(), 2);
        assert!(peer.counters.iter().all(|c| c[CORE_TO_CORE] == json!(41.3)));
        assert!(peer.counters.iter().all(|c| c[HOST_SPEED] == json!(301.0)));
        // troupe's process measured its own right before its repetition: kept.
        let mut own = record(vec![1.0]);
        let mut counters = Map::new();
        counters.insert(CORE_TO_CORE.into(), json!(190.0));
        counters.insert(HOST_SPEED.into(), json!(150.0));
        counters.insert("turns".into(), json!(7));
        own.counters = vec![counters];
        note_probes(&mut own, Some(40.0), Some(300.0));
        assert_eq!(own.counters[0][CORE_TO_CORE], json!(190.0));
        assert_eq!(own.counters[0][HOST_SPEED], json!(150.0));
        assert_eq!(own.counters[0]["turns"], json!(7));
        // No figure: nothing changes.
        let mut none = record(vec![1.0]);
        note_probes(&mut none, None, None);
        assert!(none.counters.is_empty());
        assert_eq!(cores_apart_range(&none.counters), "");
        assert_eq!(cores_apart_range(&peer.counters), "41 ns");
        let mut both = peer.counters.clone();
        both.extend(own.counters);
        assert_eq!(cores_apart_range(&both), "41-190 ns");
    }

    #[test]
    fn spreads_are_shown_beside_the_hosts() {
        let with_host = |samples: &[f64], hosts: &[f64]| {
            let mut g = Gathered {
                samples: samples.to_vec(),
                ..Default::default()
            };
            g.counters = hosts
                .iter()
                .map(|&m| Map::from_iter([(HOST_SPEED.to_owned(), json!(m))]))
                .collect();
            g
        };
        let mut table = BTreeMap::new();
        // Follows the host exactly: correlation 1.
        table.insert(
            "troupe".to_owned(),
            with_host(&[10.0, 20.0, 15.0], &[100.0, 200.0, 150.0]),
        );
        // Two repetitions: a spread, no correlation.
        table.insert("go".to_owned(), with_host(&[8.0, 10.0], &[200.0, 200.0]));
        let line = by_host_speed(&table).expect("a line");
        assert!(
            line.contains("troupe 2.00x against the host's 2.00x (100-200, correlation 1.00)"),
            "{line}"
        );
        assert!(
            line.contains("go 1.25x against the host's 1.00x (200-200)"),
            "{line}"
        );
        // Moves against the host: negative.
        let against = [(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)];
        assert!((correlation(&against).unwrap() + 1.0).abs() < 1e-9);
        // No host figures: no line; a failed contender is left out.
        let mut bare = BTreeMap::new();
        bare.insert("troupe".to_owned(), gathered(&[1.0, 2.0], &[25.0, 26.0]));
        assert_eq!(by_host_speed(&bare), None);
    }

    #[test]
    fn time_left_is_estimated_from_the_steps_done() {
        use std::time::Duration;
        assert_eq!(time_left(Duration::from_secs(10), 0, 4), "");
        assert_eq!(
            time_left(Duration::from_secs(10), 1, 4),
            ", about 30 s left"
        );
        assert_eq!(
            time_left(Duration::from_secs(100), 1, 3),
            ", about 3 min 20 s left"
        );
        assert_eq!(time_left(Duration::from_secs(10), 4, 4), "");
    }

    #[test]
    fn all_runs_the_seeds_series() {
        let mut options = CompareOptions {
            scenarios: vec![
                Scenario::Ring,
                Scenario::Spawn,
                Scenario::Counter,
                Scenario::Chain,
            ],
            only: vec![],
            peers_dir: PathBuf::new(),
            results_dir: PathBuf::new(),
            build: false,
            sizes: Sizes::Seeds { full: false },
            peers: true,
            ring_rounds: None,
            timeout: Duration::from_secs(1),
        };
        let keys: Vec<String> = cases(&options).iter().map(Case::key).collect();
        let of = |scenario: &str| keys.iter().filter(|k| k.starts_with(scenario)).count();
        assert_eq!(
            (of("ring"), of("spawn"), of("counter"), of("chain")),
            (2, 1, 5, 4)
        );
        let rings: Vec<Case> = cases(&options)
            .into_iter()
            .filter(|c| c.scenario == Scenario::Ring)
            .collect();
        assert_eq!(rings[0].params["actors"], 100);
        assert_eq!(rings[1].params["actors"], 20_000);
        for k in [300, 3_000, 30_000, 300_000, 3_000_000] {
            assert!(
                keys.iter()
                    .any(|key| key.contains(&format!("per_producer={k}"))),
                "{k}"
            );
        }
        // A contender made of OS threads skips the 20,000-thread ring, and the chain of
        // 10,000 threads unless the run is --full.
        let threads = threads_contender("os-threads");
        assert!(rings[1].for_contender(&threads).is_none());
        let longest = |options: &CompareOptions| {
            cases(options)
                .into_iter()
                .rfind(|c| c.scenario == Scenario::Chain)
                .expect("chains")
        };
        assert!(longest(&options).for_contender(&threads).is_none());
        options.sizes = Sizes::Seeds { full: true };
        assert!(longest(&options).for_contender(&threads).is_some());
    }

    /// A contender made of OS threads, as a peer's manifest would describe one.
    fn threads_contender(name: &str) -> Contender {
        Contender {
            name: name.into(),
            describe: String::new(),
            program: PathBuf::new(),
            extra: vec![],
            scenarios: vec![],
            jvm: false,
            os_threads: true,
            chain_mode: "threads".into(),
            own_params: BTreeMap::new(),
            opt_in: false,
        }
    }

    #[test]
    fn thread_contenders_get_smaller_cases() {
        let c = threads_contender("x");
        let ring = Case::new(Scenario::Ring, json!({"actors": 100, "rounds": 100_000}));
        assert_eq!(ring.for_contender(&c).unwrap().params["rounds"], 1_000);
        let chain = Case::new(Scenario::Chain, json!({"length": 10_000}));
        assert!(chain.for_contender(&c).is_none());
        let chain = Case::new(Scenario::Chain, json!({"length": 1_000}));
        assert_eq!(chain.for_contender(&c).unwrap().params["mode"], "threads");
        assert_eq!(
            chain.for_contender(&c).unwrap().args(),
            ["chain", "--length", "1000", "--mode", "threads"]
        );
    }

    #[test]
    fn fanout_cases_pair_troupe_plain_thread_with_the_peers() {
        let mut options = CompareOptions {
            scenarios: vec![Scenario::Fanout],
            only: vec![],
            peers_dir: PathBuf::new(),
            results_dir: PathBuf::new(),
            build: false,
            sizes: Sizes::Compare,
            peers: true,
            ring_rounds: None,
            timeout: Duration::from_secs(1),
        };
        let full = cases(&options);
        assert_eq!(full.len(), 2);
        assert_eq!(
            Value::Object(full[0].params.clone()),
            json!({"actors": 1_000, "messages": 10_000_000})
        );
        // The fork-join shape: 60 actors, 10,000 messages each.
        assert_eq!(
            Value::Object(full[1].params.clone()),
            json!({"actors": 60, "messages": 600_000})
        );
        assert_eq!(full[0].key(), cases(&options)[0].key());
        options.sizes = Sizes::Quick;
        let quick = cases(&options);
        assert_eq!(
            Value::Object(quick[0].params.clone()),
            json!({"actors": 100, "messages": 10_000})
        );
        assert_eq!(metrics_of(Scenario::Fanout), ["throughput"]);

        let locals = local_contenders().unwrap();
        let troupe = locals.iter().find(|c| c.name == "troupe").unwrap();
        assert!(troupe.scenarios.iter().any(|s| s == "fanout"));
        for other in locals.iter().filter(|c| c.name != "troupe") {
            assert!(
                !other.scenarios.iter().any(|s| s == "fanout"),
                "{}",
                other.name
            );
        }
        // troupe-bench measures a plain thread and a tokio task; compare asks for the thread.
        assert_eq!(
            full[0].args_for(troupe),
            [
                "fanout",
                "--actors",
                "1000",
                "--messages",
                "10000000",
                "--from",
                "thread"
            ]
        );
        let peer = Contender {
            name: "go-chan-buffered".into(),
            describe: String::new(),
            program: PathBuf::new(),
            extra: vec![],
            scenarios: vec!["fanout".into()],
            jvm: false,
            os_threads: false,
            chain_mode: "actors".into(),
            own_params: BTreeMap::new(),
            opt_in: false,
        };
        assert_eq!(
            full[0].args_for(&peer),
            ["fanout", "--actors", "1000", "--messages", "10000000"]
        );
        assert_eq!(full[0].for_contender(&peer).unwrap().params, full[0].params);

        let record = |contender: &str, params: Value| {
            Record::new(
                "fanout",
                "throughput",
                contender,
                params.as_object().unwrap().clone(),
                "msgs/s",
                vec![2.0e7],
                "",
            )
        };
        let ok = |contender: &Contender, params: Value| {
            check(&[record(&contender.name, params)], contender, &full[0], 1)
        };
        assert_eq!(
            ok(
                troupe,
                json!({"actors": 1_000, "messages": 10_000_000, "from": "thread"})
            ),
            Ok(())
        );
        // A record of the tokio-task sender, or one that does not say, is not troupe's figure.
        assert!(ok(
            troupe,
            json!({"actors": 1_000, "messages": 10_000_000, "from": "tokio-task"})
        )
        .is_err());
        assert!(ok(troupe, json!({"actors": 1_000, "messages": 10_000_000})).is_err());
        assert_eq!(
            ok(&peer, json!({"actors": 1_000, "messages": 10_000_000})),
            Ok(())
        );
        assert!(ok(&peer, json!({"actors": 1_000, "messages": 1_000_000})).is_err());
    }
}
