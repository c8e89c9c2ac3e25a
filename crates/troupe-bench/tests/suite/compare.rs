//! `compare --quick` end to end: troupe's own contenders always; with `TROUPE_TEST_PEERS=1`,
//! every peer whose toolchain is installed here too: each builds, runs every scenario its
//! manifest declares, and returns validated results in the shared schema, and contenders
//! whose toolchain is missing are skipped with a line saying how to install them. Building the
//! peers takes minutes (the Rust peers compile four actor crates), so the default test run
//! leaves them out and says so. (Checks results, never timings.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_path(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(command).is_file()))
}

/// contender -> scenarios it declares, for peers whose toolchain is present; and the runtimes
/// that should be skipped.
fn expectations() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let mut expected = BTreeMap::new();
    let mut skipped = Vec::new();
    for entry in std::fs::read_dir(repo().join("peers")).unwrap().flatten() {
        let manifest = entry.path().join("peer.json");
        if !manifest.is_file() {
            continue;
        }
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
        let requires: Vec<&str> = m["requires"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        if !requires.iter().all(|r| on_path(r)) {
            skipped.push(m["runtime"].as_str().unwrap().to_owned());
            continue;
        }
        for c in m["contenders"].as_array().unwrap() {
            let scenarios = c["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect();
            expected.insert(c["name"].as_str().unwrap().to_owned(), scenarios);
        }
    }
    (expected, skipped)
}

/// Set to 1 to build and check the peers in the test run.
const PEERS_ENV: &str = "TROUPE_TEST_PEERS";

#[test]
fn quick_compare_every_available_contender_validates() {
    let with_peers = std::env::var(PEERS_ENV).is_ok_and(|v| v == "1");
    let results = std::env::temp_dir().join(format!("troupe-compare-test-{}", std::process::id()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe-bench"));
    command.current_dir(repo()).args([
        "compare",
        "--quick",
        "--json",
        "--timeout",
        "600",
        "--results-dir",
    ]);
    command.arg(&results);
    if !with_peers {
        eprintln!(
            "NOTE: the peers (Erlang, Go, JVM, Rust crates) are not built or checked in this run; \
             set {PEERS_ENV}=1 to include them (it takes minutes)"
        );
        command.args(["--contenders", "troupe,troupe-thread,os-threads"]);
    }
    let output = command.output().expect("run troupe-bench compare");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let (expected, skipped) = if with_peers {
        expectations()
    } else {
        (BTreeMap::new(), Vec::new())
    };
    for runtime in &skipped {
        assert!(
            stderr.contains(&format!("skipped {runtime}")),
            "no skip line for {runtime}:\n{stderr}"
        );
    }
    // A contender a JDK too old for (virtual threads) may report `unsupported`; anything else
    // that failed makes the command fail.
    assert!(output.status.success(), "compare failed:\n{stderr}");

    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut explained = 0;
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let r: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON {line}: {e}"));
        assert_eq!(r["validated"], Value::Bool(true), "{r}");
        assert!(!r["samples"].as_array().unwrap().is_empty(), "{r}");
        assert!(r["median"].as_f64().unwrap() >= 0.0, "{r}");
        // Every repetition of every contender says how far apart two cores were right
        // before it (the test machines have two CPUs or more).
        let samples = r["samples"].as_array().unwrap().len();
        let counters = r["counters"].as_array().map_or(&[][..], Vec::as_slice);
        assert_eq!(counters.len(), samples, "a figure per repetition: {r}");
        for c in counters {
            assert!(
                c["core_to_core_ns"].as_f64().is_some_and(|ns| ns > 0.0),
                "{r}"
            );
            // Where troupe's repetitions say what its pool did, they also say what the kernel
            // did to the process in them.
            if r["contender"] == "troupe" && c.get("turns").is_some() {
                for key in ["page_faults", "preemptions"] {
                    assert!(c[key].as_u64().is_some(), "no {key}: {r}");
                }
                // And how many CPUs the process kept busy: CPU time over wall time.
                assert!(
                    c["cpus"]
                        .as_f64()
                        .is_some_and(|x| x >= 0.0 && x.is_finite()),
                    "no cpus: {r}"
                );
                explained += 1;
            }
        }
        seen.entry(r["contender"].as_str().unwrap().to_owned())
            .or_default()
            .insert(r["scenario"].as_str().unwrap().to_owned());
    }
    for local in ["troupe", "troupe-thread", "os-threads"] {
        assert!(seen.contains_key(local), "no results from {local}");
    }
    assert!(
        explained > 0,
        "no troupe repetition carried its pool's counters"
    );
    // Sends from outside the pool: troupe always, and every peer that declares it.
    assert!(seen["troupe"].contains("fanout"), "no fanout from troupe");
    for (contender, scenarios) in &expected {
        let unsupported = stderr.contains(&format!("{contender} does not support"));
        let got = seen.get(contender).cloned().unwrap_or_default();
        for scenario in scenarios {
            assert!(
                got.contains(scenario) || unsupported,
                "{contender} gave no {scenario} result:\n{stderr}"
            );
        }
    }
    // One folder for the run: the results, every process's raw lines, the Markdown table and
    // the HTML report.
    let folders: Vec<_> = std::fs::read_dir(&results).unwrap().flatten().collect();
    assert_eq!(folders.len(), 1, "one folder per run");
    let folder = folders[0].path();
    assert!(folder
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("compare-"));
    for name in ["results.jsonl", "raw.jsonl", "results.md", "index.html"] {
        let file = folder.join(name);
        assert!(
            std::fs::metadata(&file).is_ok_and(|m| m.len() > 0),
            "{} missing or empty",
            file.display()
        );
    }
    // troupe-bench measures fanout from a plain thread and from a tokio task; compare runs the
    // plain thread only, the sender the peers use.
    let raw = std::fs::read_to_string(folder.join("raw.jsonl")).unwrap();
    let troupe_fanout: Vec<Value> = raw
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["scenario"] == "fanout" && r["contender"] == "troupe")
        .collect();
    assert!(
        !troupe_fanout.is_empty(),
        "no fanout line from troupe in raw.jsonl"
    );
    for r in &troupe_fanout {
        assert_eq!(r["params"]["from"], "thread", "{r}");
    }
    let table = std::fs::read_to_string(folder.join("results.md")).unwrap();
    assert!(table.contains("| cores apart |"), "{table}");
    // troupe's repetitions say what the pool did in each.
    assert!(
        table.contains("troupe, each repetition, worst first: ")
            && table.contains(" messages per turn"),
        "{table}"
    );
    let page = std::fs::read_to_string(folder.join("index.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<svg"));
    assert!(
        stderr.contains("report:"),
        "compare says where the report is:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&results);
}
