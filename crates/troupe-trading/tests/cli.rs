//! The binary's edges: the `--quick` benchmark runs every mode end to end and prints
//! well-formed, validated JSON lines in the project's schema; bad arguments and bad logs give
//! a clear error and a non-zero exit, never a panic.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use serde_json::Value;

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
