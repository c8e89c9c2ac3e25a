//! The exchange in deterministic simulation (the module note of `troupe_trading::simulation`
//! gives the whole model and every check): in each style and log mode, many seeds of one
//! process under engine crashes, stops and stalls, disk faults (failed and torn writes, failed
//! and slow flushes) and process kills (`kill -9`, and power cuts in fsync mode), clients
//! resending until acknowledged. Every run checks that acknowledged orders are durable when
//! acknowledged and survive recovery, that no order is answered twice or never, that the
//! system converges after the heal, and that primary and standby end equal.
//!
//! A failure prints its replay line; `TROUPE_SIM_SEED=<line> cargo test -p troupe-trading
//! --test suite simulation::<test>` runs that seed alone. More seeds, for a long run:
//! `TROUPE_SIM_SEEDS=100000 cargo test --release -p troupe-trading --test suite simulation::` (the
//! crate's README has the wall time). Each corpus holds the replay lines of the defects the
//! simulation found in the exchange (listed in the README), and in the tests without a log
//! two seeds that found mistakes of the harness's own checks; they run first.

use std::sync::{Arc, Mutex};

use troupe::sim::{Explore, Strategy};
use troupe_trading::simulation::{self, Scenario, SeedOutcome};
use troupe_trading::{LogMode, Style};

/// Seeds per configuration: 1,000 in a release build (the six configurations take a few
/// seconds on two cores), 100 in a debug build (about sixteen times slower).
/// `TROUPE_SIM_SEEDS` overrides.
const SEEDS: u64 = if cfg!(debug_assertions) { 100 } else { 1_000 };

/// Totals over the runs of one exploration.
#[derive(Debug, Default)]
struct Totals {
    runs: u64,
    orders: u64,
    refusals: u64,
    restarts: u64,
    faults: u64,
    disk_faults: u64,
}

fn explore(name: &str, style: Style, log: LogMode, corpus: &[&str]) -> Totals {
    let scenario = Scenario::new(style, log);
    let totals = Arc::new(Mutex::new(Totals::default()));
    let sum = totals.clone();
    let summary = Explore::new(name)
        .seeds(SEEDS)
        .strategies(&[Strategy::Random, Strategy::Pct { depth: 3 }])
        .faults(simulation::faults())
        .max_steps(2_000_000)
        .corpus(corpus)
        .run(move |sim| {
            let o: SeedOutcome = simulation::run(sim, &scenario);
            let mut t = sum.lock().unwrap();
            t.runs += 1;
            t.orders += o.orders_acked;
            t.refusals += o.refusals;
            t.restarts += u64::from(o.starts.saturating_sub(1));
            t.faults += u64::from(o.faults_injected);
            t.disk_faults += o.disk.failed_writes + o.disk.torn_writes + o.disk.failed_flushes;
        });
    let totals = std::mem::take(&mut *totals.lock().unwrap());
    eprintln!("{name}: {summary:?}, {totals:?}");
    totals
}

/// The runs really were under fire: faults, refusals and restarts happened (a simulation
/// that injected nothing would pass every check).
fn assert_exercised(t: &Totals, log: LogMode) {
    if t.runs < 20 {
        return; // a replay of one seed
    }
    assert!(t.faults > 0 && t.refusals > 0 && t.restarts > 0, "{t:?}");
    if log != LogMode::None {
        assert!(t.disk_faults > 0, "{t:?}");
    }
}

#[test]
fn request_reply_fsync() {
    let t = explore(
        "request_reply_fsync",
        Style::RequestReply,
        LogMode::Fsync,
        &[
            "14:random:csxb",
            "10:random:csxb",
            "7:pct3:csxb",
            "118:random:csxb",
        ],
    );
    assert_exercised(&t, LogMode::Fsync);
}

#[test]
fn one_way_fsync() {
    let t = explore(
        "one_way_fsync",
        Style::OneWay,
        LogMode::Fsync,
        &["7:pct3:csxb", "176:random:csxb", "9:pct3:csxb"],
    );
    assert_exercised(&t, LogMode::Fsync);
}

#[test]
fn request_reply_buffered() {
    let t = explore(
        "request_reply_buffered",
        Style::RequestReply,
        LogMode::Buffered,
        &["3:pct3:csxb", "8:random:csxb", "10:random:csxb"],
    );
    assert_exercised(&t, LogMode::Buffered);
}

#[test]
fn one_way_buffered() {
    let t = explore(
        "one_way_buffered",
        Style::OneWay,
        LogMode::Buffered,
        &["134:random:csxb", "3:pct3:csxb"],
    );
    assert_exercised(&t, LogMode::Buffered);
}

#[test]
fn request_reply_without_a_log() {
    let t = explore(
        "request_reply_without_a_log",
        Style::RequestReply,
        LogMode::None,
        &["14:random:csxb", "490:random:csxb"],
    );
    assert_exercised(&t, LogMode::None);
}

#[test]
fn one_way_without_a_log() {
    let t = explore(
        "one_way_without_a_log",
        Style::OneWay,
        LogMode::None,
        &["14:random:csxb", "586:random:csxb"],
    );
    assert_exercised(&t, LogMode::None);
}

/// One seed of the benchmark's model runs the same way twice.
#[test]
fn a_seed_runs_the_same_way_twice() {
    for seed in [0, 7, 11] {
        assert_eq!(simulation::run_seed(seed), simulation::run_seed(seed));
    }
}
