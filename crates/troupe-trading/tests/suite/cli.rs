//! The binary's edges: the `--quick` benchmark runs every mode end to end and prints
//! well-formed, validated JSON lines in the project's schema; bad arguments and bad logs give
//! a clear error and a non-zero exit, never a panic; every bad option is refused up front, on
//! one line, in moments, before anything is measured or written; `inspect` never changes a log
//! file, and `run` refuses a log with mid-file damage unless `--salvage`.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use troupe_trading::{ClientId, Journal, LogMode, Market, NewOrder, Role, Side, RECORD_BYTES};

const BIN: &str = env!("CARGO_BIN_EXE_troupe-trading");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run the binary")
}

/// Runs the binary with `args` (`{results}` and `{dir}` replaced by paths in a fresh temporary
/// directory, neither created), and checks that it refuses them at once, as one line on
/// stderr that mentions each of `mentions`, without a panic, having written nothing to either
/// path.
fn assert_refused(args: &[&str], mentions: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let dir = tmp.path().join("logs");
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("{results}", results.to_str().unwrap())
                .replace("{dir}", dir.to_str().unwrap())
        })
        .collect();
    let mut child = Command::new(BIN)
        .args(&args)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the binary");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still runs after 5 s: options must be refused up front");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success(), "{args:?} should fail: {stderr}");
    assert!(
        !stderr.contains("panicked"),
        "{args:?} must not panic: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: the error should be one line: {stderr}"
    );
    for m in mentions {
        assert!(
            stderr.contains(m),
            "{args:?}: error should mention {m:?}: {stderr}"
        );
    }
    for path in [&results, &dir] {
        assert!(
            !path.exists() || std::fs::read_dir(path).unwrap().next().is_none(),
            "{args:?} wrote into {}",
            path.display()
        );
    }
}

/// `assert_refused` for `bench <args> --results-dir {results}`.
fn assert_bench_refused(args: &[&str], mentions: &[&str]) {
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend(["--results-dir", "{results}"]);
    assert_refused(&all, mentions);
}

fn assert_clean_failure(out: &Output, mentions: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {stderr}");
    assert!(!stderr.contains("panicked"), "must not panic: {stderr}");
    assert!(
        stderr.contains(mentions),
        "error should mention {mentions:?}: {stderr}"
    );
}

#[test]
fn quick_benchmark_prints_validated_json_lines() {
    let results = tempfile::tempdir().unwrap();
    let out = run(&[
        "bench",
        "all",
        "--quick",
        "--json",
        "--clients",
        "1,4",
        "--logs",
        "none,buffered,fsync",
        "--workers",
        "2",
        "--results-dir",
        results.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "bench all --quick failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen = BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let r: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        for key in ["scenario", "metric", "contender", "unit", "notes"] {
            assert!(r[key].is_string(), "{key} missing in {r}");
        }
        for key in ["median", "min", "max"] {
            assert!(r[key].is_number(), "{key} missing in {r}");
        }
        assert!(r["params"].is_object() && r["machine"].is_object());
        assert!(!r["samples"].as_array().unwrap().is_empty());
        assert_eq!(r["validated"], Value::Bool(true), "{r}");
        if r["scenario"] == "trading" && r["contender"] == "troupe" {
            // Each repetition of the actor system says what the pool did in it.
            let counters = r["counters"].as_array().expect("troupe's counters");
            assert_eq!(
                counters.len(),
                r["samples"].as_array().unwrap().len(),
                "{r}"
            );
            for c in counters {
                for key in [
                    "turns_per_order",
                    "messages_per_order",
                    "width",
                    "width_changes",
                ] {
                    assert!(c[key].is_number(), "{key} missing in {r}");
                }
            }
        }
        seen.insert((
            r["scenario"].as_str().unwrap().to_owned(),
            r["contender"].as_str().unwrap().to_owned(),
            r["metric"].as_str().unwrap().to_owned(),
        ));
    }
    for metric in [
        "throughput",
        "latency_p5",
        "latency_p50",
        "latency_p95",
        "latency_p99",
        "latency_p99.9",
    ] {
        for contender in ["troupe", "direct", "threads"] {
            assert!(
                seen.contains(&("trading".into(), contender.into(), metric.into())),
                "no {contender} {metric}"
            );
        }
        assert!(seen.contains(&("trading-open-loop".into(), "troupe".into(), metric.into())));
    }
    assert!(seen.contains(&("fsync-probe".into(), "disk".into(), "latency_p99".into())));
    // The disk's fsync latency measured beside each fsync configuration.
    assert!(seen.contains(&("fsync-beside".into(), "disk".into(), "latency_p99".into())));
    assert!(seen.contains(&(
        "trading-open-loop".into(),
        "troupe".into(),
        "max_rate_p99_under_1ms".into()
    )));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    assert_bench_refused(
        &["closed", "--logs", "sometimes"],
        &["--logs", "none, buffered, fsync"],
    );
    assert_bench_refused(
        &["closed", "--styles", "carrier-pigeon"],
        &["--styles", "request-reply, one-way"],
    );
    assert_bench_refused(&["closed", "--clients", "0"], &["--clients", "1..=1000"]);
    assert_bench_refused(&["closed", "--workers", "0"], &["--workers", "1..=1024"]);
    assert_bench_refused(&["open-loop", "--rates", "0"], &["--rates", "from 1 to"]);
    assert_refused(&["run", "--dir", "{dir}", "--clients", "0"], &["--clients"]);
    assert_refused(&["inspect"], &["--dir"]);
    assert_refused(&["dist-bench", "--seconds", "0"], &["--seconds"]);
    assert_refused(&["dist-bench", "--clients", "0"], &["--clients"]);
    assert_refused(&["dist-bench", "--clients", "4,4"], &["--clients"]);
    assert_refused(&["dist-bench", "--lease-ms", "10"], &["--lease-ms"]);
    assert_refused(
        &[
            "node", "--nats", "x", "--pair", "3", "--name", "a", "--dir", "{dir}",
        ],
        &["--pair"],
    );
    assert_refused(
        &[
            "node", "--nats", "x", "--pair", "0", "--name", "a b", "--dir", "{dir}",
        ],
        &["--name"],
    );
    // NATS sign-in files are read and checked before the node starts.
    assert_refused(
        &[
            "node",
            "--nats",
            "x",
            "--pair",
            "0",
            "--name",
            "a",
            "--dir",
            "{dir}",
            "--nats-nkey",
            "{dir}/no-such.nk",
        ],
        &["--nats-nkey", "cannot read"],
    );
    assert_refused(
        &[
            "node",
            "--nats",
            "x",
            "--pair",
            "0",
            "--name",
            "a",
            "--dir",
            "{dir}",
            "--nats-ca",
            "{dir}/no-such-ca.pem",
        ],
        &["--nats-ca", "no such file"],
    );
    assert_refused(
        &[
            "node",
            "--nats",
            "x",
            "--pair",
            "0",
            "--name",
            "a",
            "--dir",
            "{dir}",
            "--nats-nkey",
            "a.nk",
            "--nats-creds",
            "a.creds",
        ],
        &["--nats-nkey", "--nats-creds"],
    );
}

/// A client count is an OS thread or a client actor: 1 to 1000, everywhere, each once.
#[test]
fn client_counts_are_bounded() {
    for which in ["closed", "all", "baseline"] {
        assert_bench_refused(&[which, "--clients", "100000"], &["--clients", "1..=1000"]);
        assert_bench_refused(&[which, "--clients", "1,0"], &["--clients", "1..=1000"]);
        assert_bench_refused(&[which, "--clients", ""], &["--clients"]);
        assert_bench_refused(&[which, "--clients", "4,8,4"], &["--clients lists 4 twice"]);
    }
    assert_refused(
        &["run", "--dir", "{dir}", "--clients", "1001"],
        &["--clients"],
    );
}

/// Orders per load level: at least one round of the scenario (30 orders), at most 100 million
/// (1 million in fsync mode).
#[test]
fn order_counts_are_bounded() {
    for which in ["closed", "all", "baseline"] {
        assert_bench_refused(&[which, "--orders", "0"], &["--orders 0", "30"]);
        assert_bench_refused(
            &[which, "--fsync-orders", "29"],
            &["--fsync-orders 29", "30"],
        );
        assert_bench_refused(
            &[which, "--orders", "100000001"],
            &["--orders", "100,000,000"],
        );
        assert_bench_refused(
            &[which, "--fsync-orders", "1000001"],
            &["--fsync-orders", "1,000,000"],
        );
    }
    assert_refused(&["run", "--dir", "{dir}", "--rounds", "0"], &["--rounds"]);
    assert_refused(
        &[
            "run",
            "--dir",
            "{dir}",
            "--clients",
            "1000",
            "--rounds",
            "1000000",
        ],
        &["--rounds", "100,000,000"],
    );
}

/// Rates and seconds of the open loop: bounded, increasing, and each rate x seconds from 300
/// to 10 million orders; refused before anything is allocated or run.
#[test]
fn open_loop_sizes_are_bounded() {
    let open = |args: &[&str], mentions: &[&str]| {
        let mut all = vec!["open-loop"];
        all.extend_from_slice(args);
        assert_bench_refused(&all, mentions);
    };
    open(&["--seconds", "1e9"], &["--seconds", "600"]);
    open(&["--seconds", "0"], &["--seconds", "0.1"]);
    open(&["--seconds", "NaN"], &["--seconds"]);
    open(&["--rates", "1e12"], &["--rates", "10,000,000"]);
    open(&["--rates", "-1"], &["--rates"]);
    open(&["--rates", "inf"], &["--rates"]);
    open(&["--rates", "0.5", "--seconds", "0.1"], &["--rates 0.5"]);
    open(
        &["--rates", "100", "--seconds", "0.1"],
        &[
            "at least 300 orders",
            "--seconds 3 or more",
            "3000 orders/s",
        ],
    );
    open(
        &["--rates", "10000000", "--seconds", "600"],
        &["10,000,000", "--seconds 1 or less"],
    );
    open(
        &["--rates", "2000,1000"],
        &["--rates", "strictly increasing"],
    );
    open(
        &["--rates", "1000,1000"],
        &["--rates", "strictly increasing"],
    );
    open(&["--rates", ""], &["--rates"]);
    open(&["--styles", ""], &["--styles"]);
    open(&["--logs", "none,none"], &["--logs lists none twice"]);
}

/// Global bounds, shown in `--help` and enforced by the parser.
#[test]
fn global_options_are_bounded() {
    for (option, bad) in [
        ("--workers", "0"),
        ("--workers", "1025"),
        ("--throughput", "0"),
        ("--throughput", "1000001"),
        ("--repeat", "0"),
        ("--repeat", "1001"),
        ("--warmup", "1001"),
        ("--warmup", "-1"),
    ] {
        assert_bench_refused(&["closed", option, bad], &[option]);
    }
}

/// `--quick` sets its own sizes; options that would be ignored are refused.
#[test]
fn contradictions_are_refused() {
    for args in [
        &["closed", "--quick", "--orders", "100"][..],
        &["all", "--quick", "--fsync-orders", "100"],
        &["baseline", "--quick", "--orders", "100"],
        &["open-loop", "--quick", "--rates", "10000"],
        &["open-loop", "--quick", "--seconds", "1"],
    ] {
        assert_bench_refused(args, &[args[2], "--quick", "its own sizes"]);
    }
    assert_bench_refused(&["fsync-probe", "--repeat", "3"], &["--repeat"]);
    assert_bench_refused(&["fsync-probe", "--warmup", "1"], &["--warmup"]);
    assert_bench_refused(&["fsync-probe", "--workers", "2"], &["--workers"]);
    assert_bench_refused(&["baseline", "--throughput", "8"], &["--throughput"]);
    assert_refused(
        &["run", "--dir", "{dir}", "--scratch", "{results}"],
        &["--scratch"],
    );
    assert_refused(
        &["inspect", "--dir", "{dir}", "--scratch", "{results}"],
        &["--scratch"],
    );
}

/// Every option has a description; the log modes and styles list their values.
#[test]
fn help_describes_every_option() {
    for which in ["all", "closed", "open-loop", "baseline", "fsync-probe"] {
        let out = run(&["bench", which, "--help"]);
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        let mut option = None;
        for line in help.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("--") {
                if let Some(o) = option.take() {
                    panic!("bench {which}: {o} has no description:\n{help}");
                }
                let described = trimmed.contains("  ");
                if !described {
                    option = Some(trimmed.to_owned());
                }
            } else if !trimmed.is_empty() {
                option = None;
            }
        }
        assert_eq!(
            option, None,
            "bench {which}: an option has no description:\n{help}"
        );
        if which != "fsync-probe" {
            assert!(help.contains("buffered"), "bench {which}: {help}");
        }
    }
}

/// The cheapest real run: it succeeds, prints pure JSON lines on stdout and its progress on
/// stderr (a line per configuration, stderr not being a terminal), and writes its results.
#[test]
fn quick_open_loop_runs_and_reports_progress() {
    let results = tempfile::tempdir().unwrap();
    let out = run(&[
        "bench",
        "open-loop",
        "--quick",
        "--json",
        "--styles",
        "one-way",
        "--logs",
        "none",
        "--workers",
        "2",
        "--results-dir",
        results.path().to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    // One line per rate tried (the sweep may stop after the first), the last one final.
    assert!(
        stderr.contains("open loop one-way none 10000 orders/s: 1/"),
        "{stderr}"
    );
    let last = stderr.lines().rev().find(|l| l.contains("runs done"));
    assert!(last.is_some_and(|l| l.contains("all done in")), "{stderr}");
    let folders: Vec<_> = std::fs::read_dir(results.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(folders.len(), 1, "{folders:?}");
    assert!(folders[0].join("results.jsonl").is_file(), "{folders:?}");
}

#[test]
fn a_foreign_file_in_the_log_directory_is_reported_not_touched() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("pair-0-primary.log");
    std::fs::write(&log, b"my holiday photos").unwrap();
    let out = run(&[
        "inspect",
        "--dir",
        dir.path().to_str().unwrap(),
        "--log",
        "fsync",
    ]);
    assert_clean_failure(&out, "is not a transaction log");
    assert_eq!(std::fs::read(&log).unwrap(), b"my holiday photos");
}

/// Writes `n` valid orders for pair 0 into both its logs in `dir`.
fn write_pair_logs(dir: &Path, n: u64) {
    let market = Market::seed();
    let a1 = market.lookup("A1").unwrap();
    for role in [Role::Primary, Role::Standby] {
        let mut r = Journal::open(dir, 0, role, LogMode::Fsync).unwrap();
        for i in 0..n {
            let side = if i % 2 == 0 { Side::Sell } else { Side::Buy };
            let order = NewOrder::limit(ClientId(7), i + 1, a1, side, 90 + (i % 7) as i32, 100);
            r.journal.append(&market.validate(&order).unwrap());
        }
        r.journal.commit().unwrap();
    }
}

fn log_path(dir: &Path, role: Role) -> PathBuf {
    dir.join(Journal::file_name(0, role))
}

/// Every file in `dir`, with its bytes and modification time, after setting every
/// modification time to a fixed moment in the past (so that any write would show).
fn aged_snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    let past = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    for e in std::fs::read_dir(dir).unwrap() {
        let f = OpenOptions::new()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(past).unwrap();
    }
    snapshot(dir)
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            (path.clone(), std::fs::read(&path).unwrap(), modified)
        })
        .collect();
    files.sort();
    files
}

fn inspect(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["inspect", "--log", "fsync", "--workers", "2", "--dir"];
    args.push(dir.to_str().unwrap());
    args.extend_from_slice(extra);
    run(&args)
}

/// `inspect` of a folder that is not there says so and fails; it creates nothing.
#[test]
fn inspect_of_a_missing_folder_fails_with_one_line() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nothing-here");
    let out = inspect(&missing, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read the folder"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!missing.exists(), "inspect made the folder");
}

/// `inspect` opens logs read-only: after it, every file in the directory has the same bytes
/// and modification time, and no file was added (only pair 0's logs exist; the other pairs'
/// are reported missing, not created). For a clean log, a torn tail and mid-file damage.
#[test]
fn inspect_never_changes_a_log() {
    let end = |n: u64| 16 + n * RECORD_BYTES as u64;
    for case in ["clean", "torn tail", "mid-file damage"] {
        let dir = tempfile::tempdir().unwrap();
        write_pair_logs(dir.path(), 40);
        let primary = log_path(dir.path(), Role::Primary);
        match case {
            "torn tail" => {
                let f = OpenOptions::new().write(true).open(&primary).unwrap();
                f.set_len(end(40) - 9).unwrap();
            }
            "mid-file damage" => {
                let mut bytes = std::fs::read(&primary).unwrap();
                bytes[end(10) as usize + 20] ^= 0x01;
                std::fs::write(&primary, &bytes).unwrap();
            }
            _ => {}
        }
        let before = aged_snapshot(dir.path());
        assert_eq!(before.len(), 2, "{case}");

        let text = inspect(dir.path(), &[]);
        let stdout = String::from_utf8_lossy(&text.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&text.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{case}: inspect changed a file"
        );
        let json = inspect(dir.path(), &["--json", "--keys"]);
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{case}: inspect --json changed a file"
        );
        let salvage = inspect(dir.path(), &["--salvage"]);
        assert_eq!(
            snapshot(dir.path()),
            before,
            "{case}: inspect --salvage changed a file"
        );
        assert!(salvage.status.success(), "{case}: {stderr}");
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        let log = &v["logs"][0];
        assert_eq!(log["role"], "primary");
        assert!(stdout.contains("pair 1 primary") && stdout.contains("no file"));

        match case {
            "clean" => {
                assert!(text.status.success(), "{stderr}");
                assert!(stdout.contains("40 records, clean"), "{stdout}");
                assert_eq!(log["end"], "clean");
                assert_eq!(v["engines"][0]["applied"], 40);
            }
            "torn tail" => {
                assert!(text.status.success(), "{stderr}");
                assert!(
                    stdout.contains(&format!("39 records, then a torn tail at byte {}", end(39))),
                    "{stdout}"
                );
                assert_eq!(log["end"], "torn-tail");
                assert_eq!(log["torn_tail"]["offset"], end(39));
                // Replayed in memory: the primary's missing record comes from its standby.
                assert_eq!(v["engines"][0]["copied_from_peer"], 1);
                assert_eq!(v["engines"][0]["applied"], 40);
            }
            _ => {
                assert!(
                    !text.status.success(),
                    "mid-file damage must fail: {stdout}"
                );
                assert!(!json.status.success());
                assert!(stdout.contains("MID-FILE DAMAGE"), "{stdout}");
                assert!(stderr.contains("is damaged at byte"), "{stderr}");
                assert!(stderr.contains("inspect changed nothing"), "{stderr}");
                assert_eq!(log["end"], "mid-file-damage");
                assert_eq!(log["damage"]["seq"], 11);
                assert_eq!(log["damage"]["valid_after"], 29);
                assert!(v["error"].is_string());
            }
        }
    }
}

/// `run` refuses a log with mid-file damage, names it and changes nothing; `run --salvage`
/// rebuilds it (here from its peer, with no loss), says so, and keeps the damaged file.
#[test]
fn run_refuses_mid_file_damage_unless_salvaging() {
    let dir = tempfile::tempdir().unwrap();
    write_pair_logs(dir.path(), 40);
    let standby = log_path(dir.path(), Role::Standby);
    let mut bytes = std::fs::read(&standby).unwrap();
    bytes[16 + 5 * RECORD_BYTES + 12] ^= 0x80;
    std::fs::write(&standby, &bytes).unwrap();
    let before = aged_snapshot(dir.path());
    let args = |salvage: bool| {
        let mut a = vec!["run", "--log", "fsync", "--workers", "2", "--clients", "1"];
        a.extend(["--rounds", "1", "--dir", dir.path().to_str().unwrap()]);
        if salvage {
            a.push("--salvage");
        }
        a
    };
    let out = run(&args(false));
    assert_clean_failure(&out, "pair-0-standby.log is damaged at byte 211");
    assert_clean_failure(&out, "34 valid records follow");
    assert_eq!(snapshot(dir.path()), before, "a refused run writes nothing");

    let out = run(&args(true));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("SALVAGED pair 0 standby"), "{stderr}");
    assert!(stderr.contains("34 kept and 0 DROPPED"), "{stderr}");
    let backup = dir.path().join("pair-0-standby.log.damaged");
    assert_eq!(std::fs::read(&backup).unwrap(), bytes);
    // Both logs read clean now, and hold the 40 orders and the run's 30.
    for role in [Role::Primary, Role::Standby] {
        let scan = Journal::scan(dir.path(), 0, role).unwrap();
        assert_eq!(scan.end, troupe_trading::LogEnd::Clean);
        assert!(scan.orders.len() >= 40);
    }
}

#[test]
fn the_binary_says_its_version() {
    let output = run(&["--version"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        concat!("troupe-trading ", env!("CARGO_PKG_VERSION"))
    );
}
