//! Seed 000 at scale: spawn N idle actors; time per spawn and resident memory per idle actor.
//!
//! The clock runs from before the first spawn until every actor has run its `started` hook
//! (so each has really been scheduled once, not merely allocated). Memory is the growth of the
//! process's resident set over the spawn, divided by N; the heap is trimmed between
//! repetitions so every repetition measures fresh growth.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message};

use crate::report::{rss_bytes, trim_heap, Record, Runner};
use crate::ring::wait_until;
use crate::SystemConfig;

/// An actor that does nothing but count its start (also the population of `observe.rs`).
pub(crate) struct Idle {
    pub(crate) started: Arc<AtomicUsize>,
}

impl Actor for Idle {
    fn started(&mut self, _: &mut Context<Self>) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }
}

/// A message an idle actor could receive (none is sent in this scenario).
struct Poke;
impl Message for Poke {
    type Reply = ();
}
impl Handler<Poke> for Idle {
    fn handle(&mut self, _: Poke, _: &mut Context<Self>) {}
}

pub fn run(runner: &Runner, config: &SystemConfig, actors: usize) -> Result<()> {
    ensure!(actors >= 1, "spawn needs at least 1 actor");
    let system = config.build()?;
    let label = format!("spawn {actors}");
    let [per_actor, memory] = runner.measure(&label, || {
        trim_heap();
        let started = Arc::new(AtomicUsize::new(0));
        let rss_before = rss_bytes()?;
        let begin = Instant::now();
        let addrs: Vec<Addr<Idle>> = (0..actors)
            .map(|_| {
                system.spawn(Idle {
                    started: started.clone(),
                })
            })
            .collect();
        wait_until(
            || started.load(Ordering::Acquire) == actors,
            Duration::from_secs(120),
        )
        .context("not every spawned actor started")?;
        let elapsed = begin.elapsed();
        let rss_after = rss_bytes()?;
        ensure!(
            started.load(Ordering::Acquire) == actors,
            "spawn validation failed: {} of {actors} started",
            started.load(Ordering::Acquire)
        );
        // The addresses vector is part of what a user holds; it is counted in the growth.
        let us_per_actor = elapsed.as_secs_f64() * 1e6 / actors as f64;
        let bytes_per_actor = rss_after.saturating_sub(rss_before) as f64 / actors as f64;
        let baseline = system.live_actors() - actors;
        for addr in &addrs {
            addr.stop();
        }
        drop(addrs);
        wait_until(
            || system.live_actors() <= baseline,
            Duration::from_secs(120),
        )
        .context("spawned actors did not stop")?;
        Ok([us_per_actor, bytes_per_actor])
    })?;
    runner.say(format!(
        "spawned {actors} actors: {:.3} us/actor, {:.0} bytes/actor (medians)",
        crate::report::summarize(&per_actor).0,
        crate::report::summarize(&memory).0
    ));
    system.shutdown_timeout(Duration::from_secs(60))?;

    let params = json!({ "actors": actors })
        .as_object()
        .expect("object")
        .clone();
    let notes = format!(
        "{}; memory = RSS growth over the spawn / N (heap trimmed first; includes the Vec of addresses, 8 B/actor)",
        config.notes()
    );
    runner.emit(&Record::new(
        "spawn",
        "spawn_time",
        config.contender(troupe::Placement::Pool),
        params.clone(),
        "us/actor",
        per_actor,
        &notes,
    ))?;
    runner.emit(&Record::new(
        "spawn",
        "memory",
        config.contender(troupe::Placement::Pool),
        params,
        "bytes/actor",
        memory,
        &notes,
    ))?;
    Ok(())
}
