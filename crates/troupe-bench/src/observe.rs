//! What it costs to look into a big observed system: N idle actors spawned in a system built
//! with `observe`, then, per repetition, the time to read the first page of actors, a page from
//! the middle, one actor by id, and every actor page by page (N / page reads), and the handler
//! times summed over every actor (which visits them all).
//!
//! The claim it checks: a page costs what the page holds, not what the system holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _, Result};
use serde_json::json;
use troupe::{ActorId, Addr, System};

use crate::report::{Record, Runner};
use crate::ring::wait_until;
use crate::spawn::Idle;

/// Microseconds `read` takes.
fn timed<T>(read: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let begin = Instant::now();
    let out = read()?;
    Ok((begin.elapsed().as_secs_f64() * 1e6, out))
}

pub fn run(runner: &Runner, workers: usize, actors: usize, page: usize) -> Result<()> {
    ensure!(actors >= 2, "observe needs at least 2 actors");
    ensure!(
        (1..=troupe::MAX_PAGE).contains(&page),
        "--page must be 1 to {}",
        troupe::MAX_PAGE
    );
    let system = System::builder().workers(workers).observe().build()?;
    let started = Arc::new(AtomicUsize::new(0));
    let addrs: Vec<Addr<Idle>> = (0..actors)
        .map(|_| {
            system.spawn(Idle {
                started: started.clone(),
            })
        })
        .collect();
    wait_until(
        || started.load(Ordering::Acquire) == actors,
        Duration::from_secs(300),
    )
    .context("not every spawned actor started")?;
    let middle: ActorId = addrs[actors / 2].id();
    let label = format!("observe {actors}");
    let [first, mid, one, all, sums] = runner.measure(&label, || {
        let (first, listed) = timed(|| Ok(system.actors(None, page)?))?;
        ensure!(
            listed.actors.len() == page.min(actors),
            "a short first page"
        );
        let (mid, listed) = timed(|| Ok(system.actors(Some(middle), page)?))?;
        ensure!(
            listed.actors.first().map(|a| a.id) == addrs.get(actors / 2 + 1).map(Addr::id),
            "the middle page starts after its cursor"
        );
        let (one, found) = timed(|| Ok(system.actor(middle)?))?;
        ensure!(found.is_some_and(|a| a.id == middle), "one actor by id");
        let (all, seen) = timed(|| {
            let mut seen = 0;
            let mut after = None;
            loop {
                let listed = system.actors(after, page)?;
                seen += listed.actors.len();
                match listed.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            Ok(seen)
        })?;
        ensure!(seen == actors, "walked {seen} of {actors}");
        let (sums, _) = timed(|| Ok(system.handler_stats()?))?;
        Ok([first, mid, one, all / 1e3, sums / 1e3])
    })?;
    for addr in &addrs {
        addr.stop();
    }
    drop(addrs);
    system.shutdown_timeout(Duration::from_secs(120))?;
    let params = json!({ "actors": actors, "page": page })
        .as_object()
        .expect("object")
        .clone();
    let notes = format!(
        "troupe pool of {workers} workers, observed; {actors} idle actors; a page of {page}"
    );
    for (metric, unit, samples) in [
        ("first_page", "us", first),
        ("middle_page", "us", mid),
        ("one_actor", "us", one),
        ("every_page", "ms", all),
        ("handler_stats", "ms", sums),
    ] {
        runner.emit(&Record::new(
            "observe",
            metric,
            "troupe",
            params.clone(),
            unit,
            samples,
            &notes,
        ))?;
    }
    Ok(())
}
