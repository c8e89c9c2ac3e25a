//! The binary's edges: the `--quick` benchmark runs every mode end to end and prints
//! well-formed, validated JSON lines in the project's schema; bad arguments and bad logs give
//! a clear error and a non-zero exit, never a panic; `inspect` never changes a log file, and
//! `run` refuses a log with mid-file damage unless `--salvage`.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use troupe_trading::{ClientId, Journal, LogMode, Market, NewOrder, Role, Side, RECORD_BYTES};

const BIN: &str = env!("CARGO_BIN_EXE_troupe-trading");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("run the binary")
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
    assert!(seen.contains(&(
        "trading-open-loop".into(),
        "troupe".into(),
        "max_rate_p99_under_1ms".into()
    )));
}

#[test]
fn bad_arguments_are_refused_clearly() {
    assert_clean_failure(
        &run(&["bench", "closed", "--logs", "sometimes"]),
        "unknown log mode",
    );
    assert_clean_failure(
        &run(&["bench", "closed", "--styles", "carrier-pigeon"]),
        "unknown style",
    );
    assert_clean_failure(&run(&["bench", "closed", "--clients", "0"]), "at least 1");
    assert_clean_failure(&run(&["bench", "closed", "--workers", "0"]), "at least 1");
    assert_clean_failure(
        &run(&["bench", "open-loop", "--rates", "0"]),
        "must be positive",
    );
    assert_clean_failure(&run(&["run", "--dir", "x", "--clients", "0"]), "clients");
    assert_clean_failure(&run(&["inspect"]), "--dir");
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
