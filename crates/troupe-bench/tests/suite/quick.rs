//! The whole suite at `--quick` sizes, end to end: every scenario runs, validates its own work,
//! and prints well-formed JSON lines. Checks results and schema, never timings.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
        .args(args)
        .output()
        .expect("run troupe-bench");
    assert!(
        output.status.success(),
        "troupe-bench {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON {line}: {e}")))
        .collect()
}

#[test]
fn quick_suite_produces_valid_validated_results() {
    let results = std::env::temp_dir().join(format!("troupe-quick-test-{}", std::process::id()));
    let records = bench(&[
        "all",
        "--quick",
        "--json",
        "--results-dir",
        results.to_str().expect("a UTF-8 temporary path"),
    ]);
    // The run's folder holds the same records and the report.
    let folders: Vec<_> = std::fs::read_dir(&results).unwrap().flatten().collect();
    assert_eq!(folders.len(), 1, "one folder per run");
    let folder = folders[0].path();
    let kept = std::fs::read_to_string(folder.join("results.jsonl")).unwrap();
    assert_eq!(kept.lines().count(), records.len());
    let page = std::fs::read_to_string(folder.join("index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<svg"));
    let _ = std::fs::remove_dir_all(&results);
    let mut seen = BTreeSet::new();
    let mut ask_froms = BTreeSet::new();
    for r in &records {
        for key in ["scenario", "metric", "contender", "unit"] {
            assert!(r[key].is_string(), "{key} missing in {r}");
        }
        assert!(r["params"].is_object());
        assert_eq!(r["validated"], Value::Bool(true), "{r}");
        let samples = r["samples"].as_array().expect("samples");
        let (min, max, median) = (
            r["min"].as_f64().unwrap(),
            r["max"].as_f64().unwrap(),
            r["median"].as_f64().unwrap(),
        );
        assert!(min <= median && median <= max, "{r}");
        if r["scenario"].as_str().unwrap().starts_with("store") {
            // One run of the store's quick scenario (its timeline: one sample per second);
            // counts of failed requests, or answers in a second of the hang, may be 0.
            assert_eq!(samples.len(), 1, "{r}");
            assert!(min >= 0.0, "{r}");
        } else {
            assert_eq!(samples.len(), 2, "--quick measures two repetitions");
            assert!(min > 0.0, "a positive figure: {r}");
        }
        let machine = &r["machine"];
        for key in ["cpu", "os", "runtime", "compiler", "commit"] {
            assert!(machine[key].is_string(), "machine.{key} missing in {r}");
        }
        assert!(machine["cores"].as_u64().unwrap() >= 1);
        if r["scenario"] == "ask" && r["contender"] == "troupe" {
            if let Some(from) = r["params"]["from"].as_str() {
                ask_froms.insert(from.to_owned());
            }
        }
        seen.insert(format!(
            "{}/{}/{}",
            r["scenario"].as_str().unwrap(),
            r["metric"].as_str().unwrap(),
            r["contender"].as_str().unwrap()
        ));
    }
    for expected in [
        "ring/construct/troupe",
        "ring/throughput/troupe",
        "ring/throughput/troupe-thread",
        "spawn/spawn_time/troupe",
        "spawn/memory/troupe",
        "counter/throughput/troupe",
        "chain/elapsed/troupe",
        "chain/elapsed/os-threads",
        "ring/throughput/troupe-bounded",
        "restart/throughput/troupe",
        "timers/throughput/troupe",
        "ask/round_trips/troupe",
        "ask/round_trips/tokio",
        "fanout/throughput/troupe",
        "store/p99/troupe-store",
        "store/p99/thread-per-request",
        "store/throughput/troupe-store",
    ] {
        assert!(seen.contains(expected), "no {expected} result in {seen:?}");
    }
    for from in [
        "actor",
        "thread",
        "thread-timeout",
        "tokio-task",
        "tokio-task-not-helping",
    ] {
        assert!(
            ask_froms.contains(from),
            "no ask from {from} in {ask_froms:?}"
        );
    }
}

#[test]
fn each_scenario_takes_its_documented_flags() {
    let ring = bench(&[
        "ring", "--actors", "10", "--rounds", "5", "--repeat", "1", "--warmup", "0", "--json",
    ]);
    assert_eq!(ring.len(), 2);
    assert_eq!(ring[1]["params"]["actors"], 10);
    assert_eq!(ring[1]["params"]["rounds"], 5);
    assert_eq!(ring[1]["samples"].as_array().unwrap().len(), 1);

    let counter = bench(&[
        "counter",
        "--producers",
        "3",
        "--per-producer",
        "100,200",
        "--repeat",
        "1",
        "--json",
    ]);
    assert_eq!(counter.len(), 2);
    assert_eq!(counter[0]["params"]["producers"], 3);
    assert_eq!(counter[1]["params"]["per_producer"], 200);

    let chain = bench(&[
        "chain", "--length", "20", "--mode", "threads", "--repeat", "1", "--json",
    ]);
    assert_eq!(chain[0]["contender"], "os-threads");
    assert_eq!(chain[0]["params"]["length"], 20);

    let fanout = bench(&[
        "fanout",
        "--actors",
        "7",
        "--messages",
        "1000",
        "--from",
        "tokio-task",
        "--repeat",
        "1",
        "--json",
    ]);
    assert_eq!(fanout.len(), 1);
    assert_eq!(fanout[0]["params"]["from"], "tokio-task");
    assert_eq!(fanout[0]["params"]["actors"], 7);

    let spawn = bench(&["spawn", "--actors", "500", "--repeat", "1", "--json"]);
    assert_eq!(spawn.len(), 2);
    assert_eq!(spawn[1]["unit"], "bytes/actor");
}

#[test]
fn bad_input_is_a_clear_error_not_a_panic() {
    let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
        .args(["ring", "--actors", "1", "--rounds", "5"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is not in 2..=10000000"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Sizes that cannot fit, and contradictions: one line each, before anything runs.
    for (args, says) in [
        (
            &["spawn", "--actors", "18446744073709551615"][..],
            "not in 1..=20000000",
        ),
        (
            &["ring", "--actors", "4294967295"][..],
            "not in 2..=10000000",
        ),
        (&["--workers", "100000", "ring"][..], "not in 1..=1024"),
        (&["ring", "--bounded", "1"][..], "not in 2..=1000000"),
        (
            &["ring", "--quick", "--actors", "20000"][..],
            "--quick sets the sizes itself",
        ),
        (
            &["spawn", "--placement", "thread"][..],
            "--placement applies to",
        ),
        (
            &["chain", "--mode", "threads", "--length", "50000"][..],
            "at most 20000",
        ),
        (
            &["compare", "--contenders", "troupe,nosuch", "--no-build"][..],
            "no contender is called `nosuch`",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            stderr.trim().lines().count() <= 3,
            "{args:?}: more than an error line: {stderr}"
        );
    }

    let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
        .args(["counter", "--repeat", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--repeat"));

    let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
        .args(["counter", "--per-producer", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("0 is not in 1..=1000000000"), "{stderr}");
}

/// The remote scenario end to end: its own nats-servers (users signed in with nkeys; one over
/// TLS), a second process for each, every transport validated (each ask's answer and each
/// tell counted) with and without TLS, and both encodings.
#[test]
fn quick_remote_runs_across_two_processes() {
    let records = bench(&["--quick", "--json", "remote"]);
    let seen: Vec<String> = records
        .iter()
        .map(|r| {
            assert_eq!(r["validated"], true, "{r}");
            format!(
                "{}/{}/{}/{}",
                r["metric"].as_str().unwrap(),
                r["params"]["transport"].as_str().unwrap_or(""),
                r["params"]["security"].as_str().unwrap_or(""),
                r["params"]["codec"].as_str().unwrap_or("")
            )
        })
        .collect();
    let mut runs = vec![("in-process", "none")];
    for transport in ["nats-request", "troupe-remote", "troupe-remote-thread"] {
        runs.extend([(transport, "nkey"), (transport, "nkey+tls")]);
    }
    for (transport, security) in runs {
        for metric in ["round_trips", "p50_latency", "p99_latency"] {
            let key = format!("{metric}/{transport}/{security}/");
            assert!(seen.contains(&key), "no {key} in {seen:?}");
        }
    }
    for key in [
        "one_way/troupe-remote/nkey/",
        "one_way/troupe-remote/nkey+tls/",
        "one_way/in-process/none/",
        "encode_ns///postcard",
        "decode_ns///msgpack",
    ] {
        assert!(seen.iter().any(|s| s == key), "no {key} in {seen:?}");
    }
}

#[test]
fn the_binary_says_its_version() {
    let output = Command::new(env!("CARGO_BIN_EXE_troupe-bench"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        concat!("troupe-bench ", env!("CARGO_PKG_VERSION"))
    );
}
