//! Sends from outside the pool: one plain thread (or one tokio task) hands M messages to N
//! actors round-robin, each message a little arithmetic for its actor; then every actor is
//! asked for its sum. Throughput = M / time until the last sum is in. Validates every sum.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message, SpawnOptions};

use crate::report::{Record, Runner};
use crate::SystemConfig;

/// Each actor's catch-up by default (`SpawnOptions::catch_up`): the capacity of the Go peer's
/// buffered channels, as for the counting actor. A thread that outruns the actors' worker
/// waits once that many messages wait for one actor, as a sender on a full Go channel does,
/// instead of building a backlog of fresh memory that the worker reads back cold.
pub const CATCH_UP: usize = 1024;

/// Where the sends come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum From {
    /// A plain OS thread (the program's main thread).
    Thread,
    /// A tokio task on a runtime of one thread.
    TokioTask,
}

impl From {
    fn name(self) -> &'static str {
        match self {
            From::Thread => "thread",
            From::TokioTask => "tokio-task",
        }
    }
}

/// Sums the squares (modulo a prime) of the numbers it is sent (also the router's routee).
pub(crate) struct Worker {
    pub(crate) sum: u64,
}
impl Actor for Worker {}

pub(crate) struct Work(pub(crate) u64);
impl Message for Work {
    type Reply = ();
}
impl Handler<Work> for Worker {
    #[inline]
    fn handle(&mut self, msg: Work, _: &mut Context<Self>) {
        self.sum = self.sum.wrapping_add(square_mod(msg.0));
    }
}

pub(crate) struct Sum;
impl Message for Sum {
    type Reply = u64;
}
impl Handler<Sum> for Worker {
    fn handle(&mut self, _: Sum, _: &mut Context<Self>) -> u64 {
        std::mem::take(&mut self.sum)
    }
}

/// The arithmetic of one message.
#[inline]
pub(crate) fn square_mod(x: u64) -> u64 {
    x.wrapping_mul(x) % 1_000_003
}

/// What actor `a` of `n` must hold after messages `0..m` went round-robin.
fn expected(a: usize, n: usize, m: u64) -> u64 {
    (a as u64..m)
        .step_by(n)
        .fold(0u64, |s, i| s.wrapping_add(square_mod(i)))
}

fn send_all(actors: &[Addr<Worker>], m: u64) -> Result<()> {
    for i in 0..m {
        actors[(i % actors.len() as u64) as usize]
            .tell(Work(i))
            .map_err(|_| anyhow::anyhow!("an actor stopped"))?;
    }
    Ok(())
}

/// Runs the scenario for each source in `from`.
pub fn run(
    runner: &Runner,
    config: &SystemConfig,
    actors: usize,
    messages: u64,
    from: &[From],
    catch_up: usize,
) -> Result<()> {
    ensure!(
        actors >= 1 && messages >= 1,
        "fanout needs actors and messages"
    );
    let system = config.build()?;
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("fanout-tokio")
        .build()
        .context("starting the tokio runtime of the sending task")?;
    let addrs: Vec<Addr<Worker>> = (0..actors)
        .map(|_| match catch_up {
            0 => system.spawn(Worker { sum: 0 }),
            waiting => system.spawn_with(Worker { sum: 0 }, SpawnOptions::new().catch_up(waiting)),
        })
        .collect();
    let expect: Vec<u64> = (0..actors).map(|a| expected(a, actors, messages)).collect();
    for &source in from {
        let label = format!("fanout {} {actors}x{messages}", source.name());
        let ([rate], counters) = runner.measure_counted(&label, &system, || {
            let start = Instant::now();
            match source {
                From::Thread => send_all(&addrs, messages)?,
                From::TokioTask => {
                    let addrs = addrs.clone();
                    io.block_on(io.spawn(async move { send_all(&addrs, messages) }))
                        .context("the sending task")??;
                }
            }
            for (a, addr) in addrs.iter().enumerate() {
                let sum = addr
                    .ask(Sum)
                    .wait_timeout(Duration::from_secs(600))
                    .map_err(|e| anyhow::anyhow!("asking actor {a} for its sum: {e}"))?;
                if sum != expect[a] {
                    bail!(
                        "fanout validation failed: actor {a} holds {sum}, not {}",
                        expect[a]
                    );
                }
            }
            Ok((
                [messages as f64 / start.elapsed().as_secs_f64()],
                messages + actors as u64,
            ))
        })?;
        let params = json!({ "actors": actors, "messages": messages, "from": source.name() })
            .as_object()
            .expect("object")
            .clone();
        runner.emit(&Record::new(
            "fanout",
            "throughput",
            "troupe",
            params,
            "msgs/s",
            rate,
            &format!(
                "{}; one {} tells the actors round-robin, each message a square modulo a prime; {}; time until every actor's sum is in",
                config.notes(),
                match source {
                    From::Thread => "plain thread",
                    From::TokioTask => "tokio task (runtime of one thread)",
                },
                match catch_up {
                    0 => "no catch-up".to_string(),
                    waiting => format!("catch-up {waiting} (a sender that finds an actor that far behind waits for half to be read)"),
                }
            ),
        )
        .with_counters(counters))?;
    }
    io.shutdown_background();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_sums_cover_every_message_once() {
        let total: u64 = (0..3).fold(0, |s, a| s.wrapping_add(expected(a, 3, 10)));
        let direct = (0..10).fold(0u64, |s, i| s.wrapping_add(square_mod(i)));
        assert_eq!(total, direct);
    }
}
