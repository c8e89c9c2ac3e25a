//! Seed 004, threads against actors: a chain of N stages carries N messages (N² hops).
//!
//! `actors`: N troupe actors, each forwarding to the next; the last is the sink.
//! `threads`: N OS threads joined by blocking bounded buffers of capacity 1 (the seed's
//! synchronized buffers), here `std::sync::mpsc::sync_channel(1)`.
//! The source (the benchmark's main thread) sends the integers 1..=N into the first stage; the
//! clock stops when the sink has all N. The sink checks the count and the sum N(N+1)/2.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message, Placement};

use crate::report::{ms, Record, Runner};
use crate::SystemConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Actors,
    Threads,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Actors => "actors",
            Mode::Threads => "threads",
        }
    }

    fn contender(self, config: &SystemConfig, placement: Placement) -> &'static str {
        match self {
            Mode::Actors => config.contender(placement),
            Mode::Threads => "os-threads",
        }
    }
}

/// What the sink saw.
struct Tally {
    count: u64,
    sum: u64,
    end: Instant,
}

enum Next {
    Stage(Addr<Stage>),
    Sink {
        expected: u64,
        count: u64,
        sum: u64,
        done: Option<mpsc::Sender<Tally>>,
    },
}

struct Stage {
    next: Next,
}
impl Actor for Stage {}

struct Item(u64);
impl Message for Item {
    type Reply = ();
}

impl Handler<Item> for Stage {
    #[inline]
    fn handle(&mut self, item: Item, _: &mut Context<Self>) {
        match &mut self.next {
            Next::Stage(next) => {
                let _ = next.tell(item);
            }
            Next::Sink {
                expected,
                count,
                sum,
                done,
            } => {
                *count += 1;
                *sum += item.0;
                if *count == *expected {
                    if let Some(done) = done.take() {
                        let _ = done.send(Tally {
                            count: *count,
                            sum: *sum,
                            end: Instant::now(),
                        });
                    }
                }
            }
        }
    }
}

pub fn run(
    runner: &Runner,
    config: &SystemConfig,
    length: usize,
    mode: Mode,
    placement: Placement,
) -> Result<()> {
    ensure!(length >= 1, "a chain needs at least 1 stage");
    let label = format!("chain {} {}", length, mode.name());
    crate::estimate::Work {
        units: length as f64 * length as f64,
        unit: "hops",
        // BENCHMARKS.md: 10^8 hops in 1.3 s on the pool; OS threads about 250 k hops/s.
        per_second: match (mode, placement) {
            (Mode::Actors, Placement::Thread) => 70e3,
            (Mode::Actors, _) => 60e6,
            (Mode::Threads, _) => 200e3,
        },
    }
    .announce(runner, &label);
    let ([elapsed], counters) = match mode {
        Mode::Actors => {
            let system = config.build()?;
            // Handled: N messages through N stages.
            let hops = length as u64 * length as u64;
            let measured = runner.measure_counted(&label, &system, || {
                Ok((once_actors(&system, length, placement)?, hops))
            })?;
            system.shutdown_timeout(Duration::from_secs(60))?;
            measured
        }
        Mode::Threads => (runner.measure(&label, || once_threads(length))?, Vec::new()),
    };
    let (median, _, _) = crate::report::summarize(&elapsed);
    runner.say(format!(
        "chain of {length:>6} {:<7}: {median:>10.1} ms",
        mode.name()
    ));
    let params = json!({"length": length, "mode": mode.name()})
        .as_object()
        .expect("object")
        .clone();
    let notes = match mode {
        Mode::Actors if placement == Placement::Thread => {
            format!("{}; every stage on its own OS thread", config.notes())
        }
        Mode::Actors => config.notes(),
        Mode::Threads => "one OS thread per stage, std sync_channel(1) between stages".to_owned(),
    };
    runner.emit(
        &Record::new(
            "chain",
            "elapsed",
            mode.contender(config, placement),
            params,
            "ms",
            elapsed,
            &notes,
        )
        .with_counters(counters),
    )
}

fn validate(tally: &Tally, n: u64) -> Result<()> {
    let expected_sum = n * (n + 1) / 2;
    if tally.count != n || tally.sum != expected_sum {
        bail!(
            "chain validation failed: {} messages summing to {}, expected {n} summing to {expected_sum}",
            tally.count,
            tally.sum
        );
    }
    Ok(())
}

fn once_actors(system: &troupe::System, length: usize, placement: Placement) -> Result<[f64; 1]> {
    let n = length as u64;
    let (done_tx, done_rx) = mpsc::channel();
    // Build from the sink backwards so each stage knows its successor at birth.
    let mut stages = Vec::with_capacity(length);
    let mut next = system.spawn_on(
        Stage {
            next: Next::Sink {
                expected: n,
                count: 0,
                sum: 0,
                done: Some(done_tx),
            },
        },
        placement,
    );
    stages.push(next.clone());
    for _ in 1..length {
        next = system.spawn_on(
            Stage {
                next: Next::Stage(next),
            },
            placement,
        );
        stages.push(next.clone());
    }
    let first = next;

    let start = Instant::now();
    for i in 1..=n {
        first
            .tell(Item(i))
            .map_err(|_| anyhow::anyhow!("the first stage stopped"))?;
    }
    let tally = done_rx
        .recv_timeout(Duration::from_secs(3600))
        .context("the sink never received every message")?;
    let elapsed = tally.end.duration_since(start);
    validate(&tally, n)?;

    let baseline = system.live_actors() - stages.len();
    for stage in &stages {
        stage.stop();
    }
    drop((stages, first));
    crate::ring::wait_until(|| system.live_actors() <= baseline, Duration::from_secs(60))?;
    Ok([ms(elapsed)])
}

fn once_threads(length: usize) -> Result<[f64; 1]> {
    let n = length as u64;
    let (first_tx, mut rx) = mpsc::sync_channel::<u64>(1);
    let mut threads = Vec::with_capacity(length);
    for i in 1..length {
        let (tx, next_rx) = mpsc::sync_channel::<u64>(1);
        let input = std::mem::replace(&mut rx, next_rx);
        let handle = std::thread::Builder::new()
            .name(format!("stage-{i}"))
            .stack_size(64 * 1024)
            .spawn(move || {
                for item in input {
                    if tx.send(item).is_err() {
                        break;
                    }
                }
            })
            .context("starting a stage thread (raise the thread limit?)")?;
        threads.push(handle);
    }
    let sink = std::thread::Builder::new()
        .name("sink".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut tally = Tally {
                count: 0,
                sum: 0,
                end: Instant::now(),
            };
            for item in rx {
                tally.count += 1;
                tally.sum += item;
                if tally.count == n {
                    tally.end = Instant::now();
                }
            }
            tally
        })
        .context("starting the sink thread")?;

    let start = Instant::now();
    for i in 1..=n {
        first_tx
            .send(i)
            .map_err(|_| anyhow::anyhow!("the first stage stopped"))?;
    }
    drop(first_tx); // closing the chain lets every stage, then the sink, finish
    let tally = sink
        .join()
        .map_err(|_| anyhow::anyhow!("sink thread panicked"))?;
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("stage thread panicked"))?;
    }
    validate(&tally, n)?;
    Ok([ms(tally.end.duration_since(start))])
}
