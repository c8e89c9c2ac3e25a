//! Crash safety with a real `kill -9`.
//!
//! The system's own binary runs as a child process in fsync mode (and, in one test, buffered
//! mode); its clients print every
//! acknowledgement as it arrives. Mid-run the test kills the child with SIGKILL (no chance to
//! flush anything), then replays the system from its logs (`inspect`, which reads them without
//! changing them), and checks that every
//! order the child acknowledged is in the replayed state of both the primary and the standby
//! of its pair, and that both engines of each pair recovered to equal states. Finally the
//! system is run again on the recovered logs, to show they are fit to continue.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_troupe-trading");

/// Runs the child until it has reported `target` acks (or a few seconds passed), kills it
/// with SIGKILL, and returns every ack it reported.
fn run_and_kill(dir: &Path, style: &str, log: &str, target: usize) -> BTreeSet<(u32, u64)> {
    let mut child = Command::new(BIN)
        .args(["run", "--dir"])
        .arg(dir)
        .args(["--log", log, "--style", style, "--clients", "4"])
        .args(["--rounds", "100000", "--report-acks", "--workers", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the trading binary");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut acks = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while acks.len() < target {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                assert_ne!(line, "done", "the run ended before it was killed");
                acks.insert(parse_ack(&line));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the child exited early"),
        }
    }
    child.kill().expect("kill -9 the child");
    child.wait().expect("reap the child");
    // Lines already in the pipe were acknowledged before the kill: they count too.
    reader.join().expect("reader thread");
    for line in rx.try_iter() {
        if line != "done" {
            acks.insert(parse_ack(&line));
        }
    }
    assert!(
        !acks.is_empty(),
        "no order was acknowledged before the kill"
    );
    acks
}

fn parse_ack(line: &str) -> (u32, u64) {
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("ack"), "unexpected line {line:?}");
    let client = words.next().and_then(|w| w.parse().ok()).expect("client");
    let id = words.next().and_then(|w| w.parse().ok()).expect("id");
    (client, id)
}

/// Restarts the system from its logs and returns the recovered state of each engine.
fn inspect(dir: &Path, log: &str) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(["inspect", "--dir"])
        .arg(dir)
        .args(["--log", log, "--keys", "--json"])
        .output()
        .expect("run inspect");
    assert!(
        out.status.success(),
        "inspect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("inspect prints JSON");
    v["engines"].as_array().expect("engines").clone()
}

fn keys(engine: &Value) -> BTreeSet<(u32, u64)> {
    engine["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| {
            (
                k[0].as_u64().expect("client") as u32,
                k[1].as_u64().expect("id"),
            )
        })
        .collect()
}

fn crash_and_recover(style: &str, log: &str) {
    let dir = tempfile::tempdir().unwrap();
    let acked = run_and_kill(dir.path(), style, log, 400);

    let engines = inspect(dir.path(), log);
    assert_eq!(engines.len(), 6, "3 pairs of 2 engines");
    for pair in 0..3 {
        let of = |role: &str| {
            engines
                .iter()
                .find(|e| e["pair"] == pair && e["role"] == role)
                .unwrap_or_else(|| panic!("pair {pair} {role} missing"))
        };
        let (primary, standby) = (of("primary"), of("standby"));
        assert_eq!(
            primary["state_hash"], standby["state_hash"],
            "pair {pair}: primary and standby recover to the same state"
        );
        assert_eq!(keys(primary), keys(standby));
    }
    let primaries: BTreeSet<(u32, u64)> = engines
        .iter()
        .filter(|e| e["role"] == "primary")
        .flat_map(keys)
        .collect();
    let standbys: BTreeSet<(u32, u64)> = engines
        .iter()
        .filter(|e| e["role"] == "standby")
        .flat_map(keys)
        .collect();
    let lost_p: Vec<_> = acked.difference(&primaries).collect();
    let lost_s: Vec<_> = acked.difference(&standbys).collect();
    assert!(
        lost_p.is_empty(),
        "acknowledged but not in the primaries: {lost_p:?}"
    );
    assert!(
        lost_s.is_empty(),
        "acknowledged but not in the standbys: {lost_s:?}"
    );

    // The recovered logs carry on: a short run on them completes.
    let out = Command::new(BIN)
        .args(["run", "--dir"])
        .arg(dir.path())
        .args(["--log", log, "--style", style])
        .args(["--clients", "2", "--rounds", "1", "--workers", "2"])
        .output()
        .expect("rerun");
    assert!(
        out.status.success(),
        "run after recovery failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
}

#[test]
fn kill_9_request_reply_loses_no_acknowledged_order() {
    crash_and_recover("request-reply", "fsync");
}

#[test]
fn kill_9_one_way_loses_no_acknowledged_order() {
    crash_and_recover("one-way", "fsync");
}

/// A buffered log is in the OS's page cache as soon as an order is appended, so it too must
/// survive the death of the process (not of the machine, which this test cannot stage).
#[test]
fn kill_9_buffered_loses_no_acknowledged_order() {
    crash_and_recover("request-reply", "buffered");
}
