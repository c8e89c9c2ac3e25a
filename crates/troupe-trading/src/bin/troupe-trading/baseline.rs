//! The seed's baselines, on the same scenario, shards and logs as the actor system, so the
//! cost of message passing shows:
//!
//! - `direct`: plain synchronous method calls on one thread, no actors, no locks. For each
//!   order: validate, route, check and apply on the primary's shard, apply on the standby's,
//!   commit both logs, done. The clients' streams are interleaved one order at a time.
//! - `threads`: one OS thread per client; each engine pair is a `Mutex` around its two
//!   shards; a client thread locks the pair, applies the order to both shards and commits
//!   both logs, then unlocks (the seed's synchronized design). Commits are per order: there is
//!   no batching, as in the seed.
//!
//! Both check the seed's invariants at the end, like the actor runs.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{ensure, Context as _, Result};
use hdrhistogram::Histogram;
use serde_json::json;
use troupe_trading::{Journal, LogMode, Market, Role, SeedScenario, Shard};

use crate::bench::{params, Progress};
use crate::report::{Printer, Samples};
use crate::Setup;

/// Which baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Direct,
    Threads,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Direct => "direct",
            Kind::Threads => "threads",
        }
    }
}

type Pair = (Shard, Shard);

fn pairs(market: &Market, log: LogMode, dir: &std::path::Path) -> Result<Vec<Pair>> {
    (0..market.pairs())
        .map(|pair| {
            let mut p = Shard::new(market, pair, Role::Primary);
            let mut s = Shard::new(market, pair, Role::Standby);
            if log != LogMode::None {
                p.attach(Journal::open(dir, pair, Role::Primary, log)?.journal);
                s.attach(Journal::open(dir, pair, Role::Standby, log)?.journal);
            }
            Ok((p, s))
        })
        .collect()
}

/// Places one order synchronously on a pair: the whole path of the actor system, as calls.
fn place(market: &Market, pairs: &mut Pair, order: &troupe_trading::NewOrder) -> Result<()> {
    let valid = market.validate(order)?;
    let (primary, standby) = pairs;
    primary.check(&valid)?;
    primary.apply(&valid)?;
    standby.apply(&valid)?;
    primary.commit()?;
    standby.commit()?;
    Ok(())
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 2).expect("static bounds")
}

fn check(pairs: &[Pair], orders: u64) -> Result<()> {
    let applied: u64 = pairs.iter().map(|(p, _)| p.applied()).sum();
    let trades: u64 = pairs.iter().map(|(p, _)| p.trades()).sum();
    ensure!(applied == orders, "{applied} applied of {orders}");
    ensure!(trades * 2 == orders, "{trades} trades for {orders} orders");
    for (p, s) in pairs {
        ensure!(p.state_hash() == s.state_hash(), "state hashes differ");
        ensure!(p.resting() == 0, "orders left in the books");
    }
    Ok(())
}

/// One run; returns (orders/s, latency histogram).
pub fn once(
    setup: &Setup,
    kind: Kind,
    log: LogMode,
    clients: usize,
    orders: u64,
) -> Result<(f64, Histogram<u64>)> {
    let market = Arc::new(Market::seed());
    let scenario = Arc::new(SeedScenario::new(&market));
    let rounds = scenario.rounds_per_client(orders, clients);
    let per_round = scenario.orders_per_round();
    let total = rounds * clients as u64 * per_round as u64;
    let dir = setup.scratch_dir()?;
    let mut pairs = pairs(&market, log, dir.path())?;
    match kind {
        Kind::Direct => {
            let mut latency = histogram();
            let start = Instant::now();
            for round in 0..rounds {
                for k in 0..per_round {
                    for client in 0..clients {
                        let order =
                            scenario.order(troupe_trading::ClientId(client as u32), round, k);
                        let pair = market.pair_of(order.instrument).context("routing")?;
                        let t0 = Instant::now();
                        place(&market, &mut pairs[pair], &order)?;
                        latency.saturating_record((t0.elapsed().as_nanos() as u64).max(1));
                    }
                }
            }
            let elapsed = start.elapsed();
            check(&pairs, total)?;
            Ok((total as f64 / elapsed.as_secs_f64(), latency))
        }
        Kind::Threads => {
            let locked: Arc<Vec<Mutex<Pair>>> =
                Arc::new(pairs.into_iter().map(Mutex::new).collect());
            let start = Instant::now();
            let threads: Vec<_> = (0..clients)
                .map(|client| {
                    let (market, scenario, locked) =
                        (market.clone(), scenario.clone(), locked.clone());
                    std::thread::spawn(move || -> Result<Histogram<u64>> {
                        let mut latency = histogram();
                        let id = troupe_trading::ClientId(client as u32);
                        for round in 0..rounds {
                            for k in 0..per_round {
                                let order = scenario.order(id, round, k);
                                let pair = market.pair_of(order.instrument).context("routing")?;
                                let t0 = Instant::now();
                                {
                                    let mut guard = locked[pair]
                                        .lock()
                                        .map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
                                    place(&market, &mut guard, &order)?;
                                }
                                latency.saturating_record((t0.elapsed().as_nanos() as u64).max(1));
                            }
                        }
                        Ok(latency)
                    })
                })
                .collect();
            let mut latency = histogram();
            for t in threads {
                let h = t
                    .join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
                latency.add(&h)?;
            }
            let elapsed = start.elapsed();
            let pairs: Vec<Pair> = Arc::try_unwrap(locked)
                .map_err(|_| anyhow::anyhow!("threads still hold the pairs"))?
                .into_iter()
                .map(|m| m.into_inner().map_err(|_| anyhow::anyhow!("poisoned")))
                .collect::<Result<_>>()?;
            check(&pairs, total)?;
            Ok((total as f64 / elapsed.as_secs_f64(), latency))
        }
    }
}

pub struct BaselinePlan {
    pub kinds: Vec<Kind>,
    pub logs: Vec<LogMode>,
    pub clients: Vec<usize>,
    pub orders: u64,
    pub fsync_orders: u64,
}

impl BaselinePlan {
    /// The client counts a baseline runs at: one caller has no concurrency, so client counts
    /// only matter for threads.
    fn levels(&self, kind: Kind) -> Vec<usize> {
        match kind {
            Kind::Direct => vec![1],
            Kind::Threads => self.clients.clone(),
        }
    }

    /// Runs in all.
    pub fn runs(&self, setup: &Setup) -> u64 {
        let levels: usize = self.kinds.iter().map(|&k| self.levels(k).len()).sum();
        (levels * self.logs.len()) as u64 * setup.runs()
    }
}

/// Runs the baselines; returns false if a check failed.
pub fn run(
    setup: &Setup,
    printer: &Printer,
    progress: &Progress,
    plan: &BaselinePlan,
) -> Result<bool> {
    let mut all_valid = true;
    for &kind in &plan.kinds {
        for &log in &plan.logs {
            let orders = if log == LogMode::Fsync {
                plan.fsync_orders
            } else {
                plan.orders
            };
            for clients in plan.levels(kind) {
                let mut samples = Samples::new();
                let what = format!("baseline {} {} {clients} clients", kind.name(), log.name());
                progress.start(&what);
                for rep in 0..setup.warmup + setup.repeat {
                    let outcome = once(setup, kind, log, clients, orders);
                    progress.run_done();
                    match outcome {
                        Ok((tput, h)) if rep >= setup.warmup => samples.push(tput, &h),
                        Ok(_) => {}
                        Err(e) => {
                            progress.suspend(|| {
                                eprintln!(
                                    "baseline {} {} {clients}: {e:#}",
                                    kind.name(),
                                    log.name()
                                )
                            });
                            samples.validated = false;
                            progress.skipped(setup.runs() - (rep as u64 + 1));
                            break;
                        }
                    }
                }
                all_valid &= samples.validated;
                let p = params(&[
                    ("log", json!(log.name())),
                    ("clients", json!(clients)),
                    (
                        "orders",
                        json!(
                            SeedScenario::new(&Market::seed()).rounds_per_client(orders, clients)
                                * clients as u64
                                * 30
                        ),
                    ),
                ]);
                let notes = match kind {
                    Kind::Direct => "synchronous method calls on one thread, no actors; one commit per order",
                    Kind::Threads => "one OS thread per client, a mutex per engine pair held while both shards apply and commit",
                };
                progress.suspend(|| {
                    printer.configuration("trading", kind.name(), &p, &samples, notes)
                })?;
                progress.configuration_done(&what);
            }
        }
    }
    Ok(all_valid)
}
