//! The seed scenario end to end on the actor system, in every messaging style and log mode:
//! every order trades (trades = orders / 2, the seed's check), the books end empty, primary
//! and standby end with equal state hashes, and an exchange restarted from its logs comes back
//! with the same state. Each both with orders routed in the clients' turns and through the
//! receiver actors.

use std::sync::Arc;
use std::time::Duration;

use troupe::System;
use troupe_trading::load::{self, Entry};
use troupe_trading::{Exchange, ExchangeConfig, LogMode, PairState, SeedScenario, Style};

fn system() -> System {
    System::builder().workers(2).build().unwrap()
}

fn config(style: Style, log: LogMode, dir: &std::path::Path) -> ExchangeConfig {
    ExchangeConfig {
        style,
        log,
        log_dir: Some(dir.to_path_buf()),
        ..ExchangeConfig::seed()
    }
}

fn check_seed_invariants(states: &[PairState], orders: u64) {
    let applied: u64 = states.iter().map(|p| p.primary.applied).sum();
    let trades: u64 = states.iter().map(|p| p.primary.trades).sum();
    assert_eq!(applied, orders, "every acknowledged order was applied");
    assert_eq!(trades, orders / 2, "trades = orders / 2");
    for p in states {
        assert_eq!(p.primary.applied, p.standby.applied);
        assert_eq!(p.primary.trades, p.standby.trades);
        assert_eq!(p.primary.state_hash, p.standby.state_hash);
        assert_eq!(p.primary.resting, 0, "every order traded");
        assert_eq!(p.primary.committed, p.primary.applied);
    }
}

/// The scenario with the clients' orders entering both ways (`Entry`).
fn scenario(style: Style, log: LogMode, clients: usize, rounds: u64) {
    for entry in [Entry::Router, Entry::Receivers] {
        scenario_entering(style, log, clients, rounds, entry);
    }
}

fn scenario_entering(style: Style, log: LogMode, clients: usize, rounds: u64, entry: Entry) {
    let dir = tempfile::tempdir().unwrap();
    let system = system();
    let exchange = Exchange::start(&system, config(style, log, dir.path())).unwrap();
    let seed = Arc::new(SeedScenario::new(exchange.market()));
    let report = load::closed_loop(
        &system,
        &exchange,
        &seed,
        clients,
        rounds,
        Duration::from_secs(30),
        entry,
    )
    .unwrap();
    let orders = clients as u64 * rounds * 30;
    let submitted: u64 = exchange
        .receivers()
        .iter()
        .map(|r| r.metrics().processed)
        .sum();
    let through_receivers = match entry {
        Entry::Router => 0,
        Entry::Receivers => orders,
    };
    assert_eq!(
        submitted, through_receivers,
        "{entry:?}: orders the receivers handled"
    );
    assert_eq!(report.orders, orders);
    assert_eq!(report.latency.len(), orders);
    let before = exchange.pair_states().unwrap();
    check_seed_invariants(&before, orders);
    exchange.shutdown();
    system.shutdown();

    if log != LogMode::None {
        // Restart from the logs: the same state comes back, in both engines.
        let system = self::system();
        let exchange = Exchange::start(&system, config(style, log, dir.path())).unwrap();
        for r in exchange.recovery() {
            assert!(r.cut.is_none(), "a clean stop leaves clean logs: {r:?}");
            assert_eq!(r.copied_from_peer, 0);
        }
        let after = exchange.pair_states().unwrap();
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(a.primary.state_hash, b.primary.state_hash);
            assert_eq!(a.standby.state_hash, b.standby.state_hash);
        }
        exchange.shutdown();
        system.shutdown();
    }
}

#[test]
fn request_reply_without_log() {
    scenario(Style::RequestReply, LogMode::None, 10, 20);
}

#[test]
fn one_way_without_log() {
    scenario(Style::OneWay, LogMode::None, 10, 20);
}

#[test]
fn request_reply_buffered() {
    scenario(Style::RequestReply, LogMode::Buffered, 4, 20);
}

#[test]
fn one_way_buffered() {
    scenario(Style::OneWay, LogMode::Buffered, 4, 20);
}

#[test]
fn request_reply_fsync() {
    scenario(Style::RequestReply, LogMode::Fsync, 4, 2);
}

#[test]
fn one_way_fsync() {
    scenario(Style::OneWay, LogMode::Fsync, 4, 2);
}

#[test]
fn open_loop_keeps_the_invariants() {
    let system = system();
    let exchange = Exchange::start(&system, ExchangeConfig::seed()).unwrap();
    let seed = Arc::new(SeedScenario::new(exchange.market()));
    let report = load::open_loop(
        &system,
        &exchange,
        &seed,
        50_000.0,
        1_500,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(report.orders, 1_500);
    check_seed_invariants(&exchange.pair_states().unwrap(), 1_500);
    exchange.shutdown();
    system.shutdown();
}
