//! Seed 002, the counting actor: P producers each tell K `Add(100)` to one actor, then one
//! request-reply `GetAndReset` returns the sum. Throughput = P*K / time until the reply.
//!
//! Producers are actors on the same pool (one per worker by default), as the seed's producers
//! are jobs on the same thread pool. `GetAndReset` is asked after every producer has reported
//! that its K sends are done; the reply must be exactly P*K*100.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message, Placement, SpawnOptions};

use crate::report::{Record, Runner};
use crate::SystemConfig;

/// Messages queued for the counting actor at which a producer on its worker lends it a turn
/// (`SpawnOptions::catch_up`); the capacity of Go's buffered channel in the peer.
const CATCH_UP: usize = 1024;

struct Counter {
    total: u64,
}
impl Actor for Counter {}

struct Add(u64);
impl Message for Add {
    type Reply = ();
}

struct GetAndReset;
impl Message for GetAndReset {
    type Reply = u64;
}

impl Handler<Add> for Counter {
    #[inline]
    fn handle(&mut self, msg: Add, _: &mut Context<Self>) {
        self.total += msg.0;
    }
}

impl Handler<GetAndReset> for Counter {
    fn handle(&mut self, _: GetAndReset, _: &mut Context<Self>) -> u64 {
        std::mem::take(&mut self.total)
    }
}

struct Producer {
    counter: Addr<Counter>,
}
impl Actor for Producer {}

/// Send `Add(100)` this many times; the reply says it is done.
struct Produce(u64);
impl Message for Produce {
    type Reply = u64;
}

impl Handler<Produce> for Producer {
    fn handle(&mut self, msg: Produce, _: &mut Context<Self>) -> u64 {
        let mut sent = 0;
        for _ in 0..msg.0 {
            if self.counter.tell(Add(100)).is_ok() {
                sent += 1;
            }
        }
        sent
    }
}

pub fn run(
    runner: &Runner,
    config: &SystemConfig,
    producers: usize,
    per: &[u64],
    placement: Placement,
) -> Result<()> {
    ensure!(producers >= 1, "counter needs at least 1 producer");
    ensure!(
        per.iter().all(|&k| k >= 1),
        "counter needs at least 1 message per producer"
    );
    crate::estimate::Work {
        units: producers as f64 * per.iter().map(|&k| k as f64).sum::<f64>(),
        unit: "messages",
        // BENCHMARKS.md: 15-22 M msgs/s with two producers.
        per_second: 10e6,
    }
    .announce(runner, &format!("counter {producers} producers"));
    let system = config.build()?;
    // With `thread` placement the counting actor has an OS thread of its own.
    let counter = system.spawn_with(
        Counter { total: 0 },
        SpawnOptions::new().placement(placement).catch_up(CATCH_UP),
    );
    let workers: Vec<Addr<Producer>> = (0..producers)
        .map(|_| {
            system.spawn(Producer {
                counter: counter.clone(),
            })
        })
        .collect();
    for &k in per {
        let label = format!("counter {producers}x{k}");
        let ([throughput], counters) = runner.measure_counted(&label, &system, || {
            let start = Instant::now();
            let asks: Vec<_> = workers.iter().map(|p| p.ask(Produce(k))).collect();
            let mut sent = 0;
            for ask in asks {
                sent += ask
                    .wait_timeout(Duration::from_secs(600))
                    .context("waiting for a producer")?;
            }
            let sum = counter
                .ask(GetAndReset)
                .wait_timeout(Duration::from_secs(600))
                .context("asking the counter")?;
            let elapsed = start.elapsed();
            let expected = producers as u64 * k * 100;
            if sent != producers as u64 * k || sum != expected {
                bail!("counter validation failed: sum {sum}, expected {expected} ({sent} sent)");
            }
            // Handled: every Add, each producer's Produce, and the GetAndReset.
            let handled = producers as u64 * (k + 1) + 1;
            Ok((
                [(producers as u64 * k) as f64 / elapsed.as_secs_f64()],
                handled,
            ))
        })?;
        let (median, _, _) = crate::report::summarize(&throughput);
        runner.say(format!(
            "{producers} * {k:>8} msgs => {median:>12.0} msgs/s"
        ));
        let params = json!({"producers": producers, "per_producer": k})
            .as_object()
            .expect("object")
            .clone();
        let notes = match placement {
            Placement::Thread => format!(
                "{}; producers are actors on the pool, the counting actor has its own thread",
                config.notes()
            ),
            _ => format!("{}; producers are actors on the same pool", config.notes()),
        };
        runner.emit(
            &Record::new(
                "counter",
                "throughput",
                config.contender(placement),
                params,
                "msgs/s",
                throughput,
                &notes,
            )
            .with_counters(counters),
        )?;
    }
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}
