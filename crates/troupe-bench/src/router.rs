//! A router beside a hand-written one: one plain thread tells M messages to N actors (a little
//! arithmetic each), picking the actor each way in turn: a `Vec<Addr>` indexed round robin by
//! hand (the baseline), `Router::tell` (round robin), `Router::least_busy`, and
//! `Router::by_key` (a consistent hash of the message's number); then every actor is asked
//! for its sum. Throughput = M / time until every sum is in. Every run is validated: the sums
//! add up to what the messages carried.

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use serde_json::json;
use troupe::{Addr, Router, SpawnOptions};

use crate::fanout::{square_mod, Sum, Work, Worker};

use crate::report::{Record, Runner};
use crate::SystemConfig;

/// How each message's actor is picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pick {
    /// A `Vec<Addr>` indexed round robin by hand: the baseline.
    Vec,
    /// `Router::tell`: round robin.
    RoundRobin,
    /// `Router::least_busy`: the smallest mailbox.
    LeastBusy,
    /// `Router::by_key`: a consistent hash of the message's number.
    ByKey,
}

impl Pick {
    /// Every way, the baseline first.
    pub const ALL: [Pick; 4] = [Pick::Vec, Pick::RoundRobin, Pick::LeastBusy, Pick::ByKey];

    fn name(self) -> &'static str {
        match self {
            Pick::Vec => "vec",
            Pick::RoundRobin => "round-robin",
            Pick::LeastBusy => "least-busy",
            Pick::ByKey => "by-key",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Pick::Vec => "a Vec<Addr> indexed round robin by hand (the baseline)",
            Pick::RoundRobin => "Router::tell (round robin)",
            Pick::LeastBusy => "Router::least_busy (the smallest mailbox)",
            Pick::ByKey => "Router::by_key (a consistent hash of the message's number)",
        }
    }
}

fn send(pick: Pick, router: &Router<Worker>, actors: &[Addr<Worker>], m: u64) -> Result<()> {
    let stopped = |_| anyhow::anyhow!("an actor stopped");
    match pick {
        Pick::Vec => {
            for i in 0..m {
                actors[(i % actors.len() as u64) as usize]
                    .tell(Work(i))
                    .map_err(stopped)?;
            }
        }
        Pick::RoundRobin => {
            for i in 0..m {
                router.tell(Work(i)).map_err(stopped)?;
            }
        }
        Pick::LeastBusy => {
            for i in 0..m {
                router.least_busy().tell(Work(i)).map_err(stopped)?;
            }
        }
        Pick::ByKey => {
            for i in 0..m {
                router.by_key(&i).tell(Work(i)).map_err(stopped)?;
            }
        }
    }
    Ok(())
}

/// Runs the scenario for each way in `picks`.
pub fn run(
    runner: &Runner,
    config: &SystemConfig,
    actors: usize,
    messages: u64,
    picks: &[Pick],
) -> Result<()> {
    ensure!(
        actors >= 1 && messages >= 1,
        "router needs actors and messages"
    );
    let system = config.build()?;
    let size = NonZeroUsize::new(actors).expect("checked above");
    let router = Router::spawn(&system, size, || Worker { sum: 0 }, SpawnOptions::new());
    let addrs = router.routees().to_vec();
    let expected = (0..messages).fold(0u64, |s, i| s.wrapping_add(square_mod(i)));
    for &pick in picks {
        let label = format!("router {} {actors}x{messages}", pick.name());
        let [rate] = runner.measure(&label, || {
            let start = Instant::now();
            send(pick, &router, &addrs, messages)?;
            let mut total = 0u64;
            for (a, addr) in addrs.iter().enumerate() {
                let sum = addr
                    .ask(Sum)
                    .wait_timeout(Duration::from_secs(600))
                    .map_err(|e| anyhow::anyhow!("asking actor {a} for its sum: {e}"))?;
                total = total.wrapping_add(sum);
            }
            if total != expected {
                bail!("router validation failed: the sums add up to {total}, not {expected}");
            }
            Ok([messages as f64 / start.elapsed().as_secs_f64()])
        })?;
        let params = json!({ "actors": actors, "messages": messages, "pick": pick.name() })
            .as_object()
            .expect("object")
            .clone();
        runner.emit(&Record::new(
            "router",
            "throughput",
            "troupe",
            params,
            "msgs/s",
            rate,
            &format!(
                "{}; one plain thread tells the actors through {}, each message a square modulo a prime; time until every actor's sum is in",
                config.notes(),
                pick.describe()
            ),
        ))?;
    }
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}
