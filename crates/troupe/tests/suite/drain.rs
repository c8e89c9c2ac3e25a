//! Draining: an actor handles what was sent before the drain, waits for its pipes in flight,
//! drains its children, then stops; a stop or a deadline cuts a drain short. On threads and in
//! simulation (where the seed decides when each pipe finishes relative to everything else).
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::LONG;
use troupe::sim::Explore;
use troupe::{
    Actor, Addr, AskError, Context, Deferred, DeferredHandler, Handler, Message, Overflow,
    ShutdownError, SpawnOptions, StopReason, System,
};

/// Sums what it is told, into a counter the test reads after the actor is gone.
struct Summer {
    sum: Arc<AtomicU64>,
}
impl Actor for Summer {}
#[derive(Message)]
struct Add(u64);
impl Handler<Add> for Summer {
    fn handle(&mut self, msg: Add, _: &mut Context<Self>) {
        self.sum.fetch_add(msg.0, Ordering::Relaxed);
    }
}
#[derive(Message)]
#[reply(u64)]
struct Get;
impl Handler<Get> for Summer {
    fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 {
        self.sum.load(Ordering::Relaxed)
    }
}

/// Answers `Job` after an async step of `Job::millis` (a pipe), through its reply handle.
struct Worker;
impl Actor for Worker {}
#[derive(Message)]
#[reply(u64)]
struct Job {
    n: u64,
    millis: u64,
}
#[derive(Message)]
struct Done(u64, Deferred<u64>);
impl DeferredHandler<Job> for Worker {
    fn handle(&mut self, job: Job, reply: Deferred<u64>, ctx: &mut Context<Self>) {
        ctx.pipe(
            async move {
                tokio::time::sleep(Duration::from_millis(job.millis)).await;
                job.n * 2
            },
            move |n| Done(n, reply),
        );
    }
}
impl Handler<Done> for Worker {
    fn handle(&mut self, done: Done, _: &mut Context<Self>) {
        let _ = done.1.send(done.0);
    }
}

/// A parent whose children do the work: told `Job`s go round its children.
struct Foreman {
    workers: Vec<Addr<Worker>>,
    next: usize,
}
impl Actor for Foreman {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.workers = (0..3).map(|_| ctx.spawn(Worker)).collect();
    }
}
impl DeferredHandler<Job> for Foreman {
    fn handle(&mut self, job: Job, reply: Deferred<u64>, ctx: &mut Context<Self>) {
        self.next = (self.next + 1) % self.workers.len();
        let asked = self.workers[self.next].ask(job);
        ctx.pipe(asked, move |answer| Forward(answer, reply));
    }
}
#[derive(Message)]
struct Forward(Result<u64, AskError>, Deferred<u64>);
impl Handler<Forward> for Foreman {
    fn handle(&mut self, msg: Forward, _: &mut Context<Self>) {
        if let Ok(answer) = msg.0 {
            let _ = msg.1.send(answer);
        }
    }
}

#[test]
fn what_was_sent_before_the_drain_is_handled_and_what_after_is_not() {
    let system = System::new();
    let sum = Arc::new(AtomicU64::new(0));
    let summer = system.spawn(Summer { sum: sum.clone() });
    for i in 1..=10_000 {
        summer.tell(Add(i)).unwrap();
    }
    summer.drain();
    // Behind the mark, from the same thread: not handled, its asker told.
    assert_eq!(summer.ask(Get).wait_timeout(LONG), Err(AskError::Stopped));
    assert_eq!(summer.stopped().wait_timeout(LONG), Ok(StopReason::Normal));
    assert_eq!(sum.load(Ordering::Relaxed), 10_000 * 10_001 / 2);
    system.shutdown();
}

#[test]
fn pipes_in_flight_deliver_before_the_actor_stops() {
    let system = System::new();
    let worker = system.spawn(Worker);
    let jobs: Vec<_> = (0..50)
        .map(|n| {
            worker.ask(Job {
                n,
                millis: 1 + n % 20,
            })
        })
        .collect();
    worker.drain();
    for (n, job) in (0..50).zip(jobs) {
        assert_eq!(job.wait_timeout(LONG), Ok(n * 2), "job {n}");
    }
    assert_eq!(worker.stopped().wait_timeout(LONG), Ok(StopReason::Normal));
    system.shutdown();
}

#[test]
fn a_draining_parent_drains_its_children_first() {
    let system = System::new();
    let foreman = system.spawn(Foreman {
        workers: Vec::new(),
        next: 0,
    });
    let jobs: Vec<_> = (0..30).map(|n| foreman.ask(Job { n, millis: 5 })).collect();
    system
        .shutdown_draining(LONG)
        .expect("every job finished within the deadline");
    for (n, job) in (0..30).zip(jobs) {
        assert_eq!(job.wait_timeout(LONG), Ok(n * 2), "job {n}");
    }
    assert_eq!(system.live_actors(), 0);
}

#[test]
fn a_deadline_cuts_a_drain_short_and_the_system_still_shuts_down() {
    let system = System::new();
    let worker = system.spawn(Worker);
    let quick = worker.ask(Job { n: 1, millis: 1 });
    let endless = worker.ask(Job {
        n: 2,
        millis: 3_600_000,
    });
    let result = system.shutdown_draining(Duration::from_millis(200));
    assert!(
        matches!(result, Err(ShutdownError::Timeout { remaining: 1, .. })),
        "{result:?}"
    );
    assert_eq!(quick.wait_timeout(LONG), Ok(2));
    // Its pipe was still on its way when the deadline stopped the actor: the reply handle
    // went with the future, dropped by the shut-down runtime.
    assert!(endless.wait_timeout(LONG).is_err());
    assert_eq!(system.live_actors(), 0);
}

#[test]
fn a_stop_during_a_drain_stops_at_once_children_included() {
    let system = System::new();
    let foreman = system.spawn(Foreman {
        workers: Vec::new(),
        next: 0,
    });
    let slow: Vec<_> = (0..6)
        .map(|n| {
            foreman.ask(Job {
                n,
                millis: 3_600_000,
            })
        })
        .collect();
    foreman.drain();
    assert_eq!(
        foreman.stopped().wait_timeout(Duration::from_millis(100)),
        Err(AskError::Timeout(Duration::from_millis(100))),
        "still draining: it waits for its asks, its children for their pipes"
    );
    foreman.stop();
    assert_eq!(foreman.stopped().wait_timeout(LONG), Ok(StopReason::Normal));
    system.shutdown_timeout(LONG).expect("nothing left behind");
    drop(slow);
}

#[test]
fn a_bounded_mailbox_that_drops_its_oldest_still_drains() {
    let system = System::new();
    let sum = Arc::new(AtomicU64::new(0));
    let summer = system.spawn_with(
        Summer { sum: sum.clone() },
        SpawnOptions::new().bounded(4, Overflow::DropOldest),
    );
    for i in 0..1_000 {
        summer.tell(Add(i)).unwrap();
    }
    summer.drain();
    for i in 0..1_000 {
        let _ = summer.tell(Add(i));
    }
    assert_eq!(
        summer.stopped().wait_timeout(LONG),
        Ok(StopReason::Normal),
        "the mark, dropped or not, is reached"
    );
    system.shutdown();
}

#[test]
fn drains_hold_whatever_the_schedule() {
    Explore::new("drain").seeds(200).run(|sim| {
        let system = sim.system();
        let worker = system.spawn(Worker);
        let sum = Arc::new(AtomicU64::new(0));
        let summer = system.spawn(Summer { sum: sum.clone() });
        let jobs: Vec<_> = (0..8)
            .map(|n| worker.ask(Job { n, millis: n * 3 }))
            .collect();
        for i in 1..=100 {
            summer.tell(Add(i)).unwrap();
        }
        system
            .block_on(system.shutdown_draining_async(Duration::from_secs(10)))
            .expect("drained in time");
        for (n, job) in (0..8).zip(jobs) {
            assert_eq!(job.wait(), Ok(n * 2), "job {n}");
        }
        assert_eq!(sum.load(Ordering::Relaxed), 5050);
    });
}
