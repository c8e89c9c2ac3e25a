//! The price of fault tolerance and time: supervised restarts per second, and timers per
//! second (scheduled, fired, and cancelled). Each run validates its count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message, SpawnOptions, SupervisorStrategy};

use crate::report::{Record, Runner};
use crate::ring::wait_until;
use crate::SystemConfig;

/// Panics on every message: each one costs a failure report, a supervisor decision and a
/// rebuild from the factory.
struct Crasher;
impl Actor for Crasher {}

struct Crash;
impl Message for Crash {
    type Reply = ();
}
impl Handler<Crash> for Crasher {
    fn handle(&mut self, _: Crash, _: &mut Context<Self>) {
        std::panic::panic_any(BenchPanic);
    }
}

/// The payload of the benchmark's own panics, recognised by the quiet panic hook.
struct BenchPanic;

struct Supervisor;
impl Actor for Supervisor {
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().intensity(u32::MAX, Duration::from_secs(3600))
    }
}

struct SpawnCrasher;
impl Message for SpawnCrasher {
    type Reply = Addr<Crasher>;
}
impl Handler<SpawnCrasher> for Supervisor {
    fn handle(&mut self, _: SpawnCrasher, ctx: &mut Context<Self>) -> Addr<Crasher> {
        ctx.spawn_supervised(|| Crasher, SpawnOptions::new())
    }
}

/// Runs `f` with panics of the benchmark's own payload kept off stderr.
fn quietly<T>(f: impl FnOnce() -> T) -> T {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<BenchPanic>().is_none() {
            eprintln!("{info}");
        }
    }));
    let out = f();
    drop(std::panic::take_hook());
    std::panic::set_hook(previous);
    out
}

/// Restarts per second: N messages that each make a supervised child panic.
pub fn restarts(runner: &Runner, config: &SystemConfig, n: u64) -> Result<()> {
    ensure!(n >= 1, "restart needs at least 1 failure");
    let system = config.build()?;
    let supervisor = system.spawn(Supervisor);
    let label = format!("restart {n}");
    crate::estimate::Work {
        units: n as f64,
        unit: "restarts",
        per_second: 150e3,
    }
    .announce(runner, &label);
    let [rate] = quietly(|| {
        runner.measure(&label, || {
            let crasher = supervisor
                .ask(SpawnCrasher)
                .wait_timeout(Duration::from_secs(30))
                .context("spawning the crashing child")?;
            let start = Instant::now();
            for _ in 0..n {
                crasher
                    .tell(Crash)
                    .map_err(|_| anyhow::anyhow!("the crashing child stopped"))?;
            }
            wait_until(|| crasher.metrics().restarts == n, Duration::from_secs(600))
                .context("not every failure was restarted")?;
            let elapsed = start.elapsed();
            let restarts = crasher.metrics().restarts;
            if restarts != n {
                bail!("restart validation failed: {restarts} restarts for {n} failures");
            }
            crasher.stop();
            Ok([n as f64 / elapsed.as_secs_f64()])
        })
    })?;
    system.shutdown_timeout(Duration::from_secs(60))?;
    let params = json!({ "failures": n })
        .as_object()
        .expect("object")
        .clone();
    runner.emit(&Record::new(
        "restart",
        "throughput",
        "troupe",
        params,
        "restarts/s",
        rate,
        &format!(
            "{}; one-for-one, each message panics its handler, rebuilt from its factory",
            config.notes()
        ),
    ))
}

/// Schedules `n` timers from an actor and counts them as they fire.
struct TimerUser {
    fired: Arc<AtomicU64>,
}
impl Actor for TimerUser {}

struct Fired;
impl Message for Fired {
    type Reply = ();
}
impl Handler<Fired> for TimerUser {
    fn handle(&mut self, _: Fired, _: &mut Context<Self>) {
        self.fired.fetch_add(1, Ordering::Relaxed);
    }
}

/// Schedule `count` timers over `spread`, cancelling every other one if `cancel`.
struct Schedule {
    count: u64,
    spread: Duration,
    cancel: bool,
}
impl Message for Schedule {
    type Reply = u64;
}
impl Handler<Schedule> for TimerUser {
    fn handle(&mut self, s: Schedule, ctx: &mut Context<Self>) -> u64 {
        let mut kept = 0;
        for i in 0..s.count {
            let delay = s.spread.mul_f64((i % 1000) as f64 / 1000.0);
            let id = ctx.send_after(delay, Fired);
            if s.cancel && i % 2 == 1 {
                if !ctx.cancel_timer(id) {
                    kept += 1; // already fired: it counts
                }
            } else {
                kept += 1;
            }
        }
        kept
    }
}

/// Timers per second: `n` timers scheduled from an actor over 100 ms and fired as messages;
/// then the same with every other one cancelled.
pub fn timers(runner: &Runner, config: &SystemConfig, n: u64) -> Result<()> {
    ensure!(n >= 1, "timers needs at least 1 timer");
    let system = config.build()?;
    for cancel in [false, true] {
        let fired = Arc::new(AtomicU64::new(0));
        let user = system.spawn(TimerUser {
            fired: fired.clone(),
        });
        let label = format!("timers {n}{}", if cancel { " cancel" } else { "" });
        let [rate] = runner.measure(&label, || {
            fired.store(0, Ordering::Relaxed);
            let start = Instant::now();
            let kept = user
                .ask(Schedule {
                    count: n,
                    spread: Duration::from_millis(100),
                    cancel,
                })
                .wait_timeout(Duration::from_secs(600))
                .context("scheduling timers")?;
            wait_until(
                || fired.load(Ordering::Relaxed) >= kept,
                Duration::from_secs(600),
            )
            .context("not every timer fired")?;
            let elapsed = start.elapsed();
            // No cancelled timer may fire late.
            std::thread::sleep(Duration::from_millis(120));
            let total = fired.load(Ordering::Relaxed);
            if total != kept {
                bail!("timer validation failed: {total} fired, {kept} expected");
            }
            Ok([n as f64 / elapsed.as_secs_f64()])
        })?;
        let params = json!({ "timers": n, "spread_ms": 100, "cancel_every_other": cancel })
            .as_object()
            .expect("object")
            .clone();
        runner.emit(&Record::new(
            "timers",
            "throughput",
            "troupe",
            params,
            "timers/s",
            rate,
            &format!(
                "{}; scheduled by an actor with send_after, delivered as messages; time from the first schedule to the last delivery (includes the 100 ms spread)",
                config.notes()
            ),
        ))?;
        user.stop();
    }
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}

/// Answers `Plain` at once, `Later` through a deferred reply that it fills when a message it
/// sent itself arrives (the cost of deferring alone), and `Piped` through a deferred reply
/// filled by a `pipe` continuation (the async step is an already-finished future, so what is
/// measured is the deferral plus the trip through the async runtime: a task spawned there, the
/// runtime's thread woken, the message back).
struct Responder;
impl Actor for Responder {}

struct Plain(u64);
impl Message for Plain {
    type Reply = u64;
}
impl Handler<Plain> for Responder {
    fn handle(&mut self, msg: Plain, _: &mut Context<Self>) -> u64 {
        msg.0 + 1
    }
}

struct Later(u64);
impl Message for Later {
    type Reply = u64;
}
impl troupe::DeferredHandler<Later> for Responder {
    fn handle(&mut self, msg: Later, reply: troupe::Deferred<u64>, ctx: &mut Context<Self>) {
        // Cannot fail: an actor's own mailbox is open while it handles a message.
        let _ = ctx.myself().tell(Answer(msg.0 + 1, reply));
    }
}

struct Piped(u64);
impl Message for Piped {
    type Reply = u64;
}
impl troupe::DeferredHandler<Piped> for Responder {
    fn handle(&mut self, msg: Piped, reply: troupe::Deferred<u64>, ctx: &mut Context<Self>) {
        ctx.pipe(async move { msg.0 + 1 }, move |value| Answer(value, reply));
    }
}

struct Answer(u64, troupe::Deferred<u64>);
impl Message for Answer {
    type Reply = ();
}
impl Handler<Answer> for Responder {
    fn handle(&mut self, msg: Answer, _: &mut Context<Self>) {
        let _ = msg.1.send(msg.0);
    }
}

#[derive(Clone, Copy)]
enum ReplyKind {
    Plain,
    Deferred,
    DeferredPipe,
}

impl ReplyKind {
    fn name(self) -> &'static str {
        match self {
            ReplyKind::Plain => "plain",
            ReplyKind::Deferred => "deferred",
            ReplyKind::DeferredPipe => "deferred-pipe",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ReplyKind::Plain => "the handler returns the reply",
            ReplyKind::Deferred => {
                "a DeferredHandler whose reply is sent when a message the responder sent itself arrives"
            }
            ReplyKind::DeferredPipe => {
                "a DeferredHandler whose reply is sent from a pipe continuation of a finished future"
            }
        }
    }
}

/// Asks the responder `left` times in a row (each ask after the previous reply, delivered to
/// it as a message), then reports on `done`.
struct Asker {
    responder: Addr<Responder>,
    reply: ReplyKind,
    left: u64,
    last: u64,
    done: Option<std::sync::mpsc::Sender<u64>>,
}
impl Actor for Asker {}

impl Asker {
    fn ask_next(&mut self, ctx: &mut Context<Self>) {
        let me = ctx.myself();
        match self.reply {
            ReplyKind::Plain => self.responder.ask(Plain(self.last)).pipe_to(&me, Replied),
            ReplyKind::Deferred => self.responder.ask(Later(self.last)).pipe_to(&me, Replied),
            ReplyKind::DeferredPipe => self.responder.ask(Piped(self.last)).pipe_to(&me, Replied),
        }
    }
}

struct Go;
impl Message for Go {
    type Reply = ();
}
impl Handler<Go> for Asker {
    fn handle(&mut self, _: Go, ctx: &mut Context<Self>) {
        self.ask_next(ctx);
    }
}

struct Replied(Result<u64, troupe::AskError>);
impl Message for Replied {
    type Reply = ();
}
impl Handler<Replied> for Asker {
    fn handle(&mut self, msg: Replied, ctx: &mut Context<Self>) {
        match msg.0 {
            Ok(value) => {
                self.last = value;
                self.left -= 1;
                if self.left == 0 {
                    if let Some(done) = self.done.take() {
                        let _ = done.send(self.last);
                    }
                } else {
                    self.ask_next(ctx);
                }
            }
            Err(_) => {
                // Reported as a validation failure: the count will not match.
                if let Some(done) = self.done.take() {
                    let _ = done.send(0);
                }
            }
        }
    }
}

/// Ask round trips per second between two actors on the pool, each ask after the previous
/// reply: answered at once, answered later through a deferred reply, and answered through a
/// deferred reply filled by a `pipe` continuation. Validates that every reply came back (the chain counts up by one per ask).
pub fn asks(runner: &Runner, config: &SystemConfig, n: u64) -> Result<()> {
    ensure!(n >= 1, "ask needs at least 1 round trip");
    crate::estimate::Work {
        // Three kinds of reply, each at about 5 M asks/s or more.
        units: 3.0 * n as f64,
        unit: "asks",
        per_second: 5e6,
    }
    .announce(runner, &format!("ask {n}"));
    let system = config.build()?;
    let responder = system.spawn(Responder);
    for reply in [
        ReplyKind::Plain,
        ReplyKind::Deferred,
        ReplyKind::DeferredPipe,
    ] {
        let mode = reply.name();
        let label = format!("ask {mode} {n}");
        let ([rate], counters) = runner.measure_counted(&label, &system, || {
            let (done, finished) = std::sync::mpsc::channel();
            let asker = system.spawn(Asker {
                responder: responder.clone(),
                reply,
                left: n,
                last: 0,
                done: Some(done),
            });
            let start = Instant::now();
            asker
                .tell(Go)
                .map_err(|_| anyhow::anyhow!("the asker stopped"))?;
            let last = finished
                .recv_timeout(Duration::from_secs(600))
                .context("the asks did not finish")?;
            let elapsed = start.elapsed();
            asker.stop();
            if last != n {
                bail!("ask validation failed: the chain reached {last}, not {n}");
            }
            // Handled: each ask by the responder, each reply by the asker, and the start.
            Ok(([n as f64 / elapsed.as_secs_f64()], 2 * n + 1))
        })?;
        let notes = format!(
            "{}; actor to actor, each ask after the previous reply (pipe_to); {}",
            config.notes(),
            reply.describe()
        );
        runner
            .emit(&round_trips("troupe", n, mode, "actor", rate, &notes).with_counters(counters))?;
    }
    // Asks from outside the pool: a plain thread blocking on each reply, and a tokio task
    // awaiting it (a runtime of one worker thread), each ask after the previous reply; the
    // task once more in a system whose tasks may not run the turn of their request
    // (`SystemBuilder::tasks_help(false)`; by default they do while turns are short).
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("ask-tokio")
        .build()
        .context("starting the tokio runtime of the asking task")?;
    let not_helping = config.builder().tasks_help(false).build()?;
    let unhelped_responder = not_helping.spawn(Responder);
    for from in [
        "thread",
        "thread-timeout",
        "tokio-task",
        "tokio-task-not-helping",
    ] {
        let label = format!("ask plain from {from} {n}");
        let (responder, asked) = if from == "tokio-task-not-helping" {
            (&unhelped_responder, &not_helping)
        } else {
            (&responder, &system)
        };
        // With the asked system's counters per repetition: turns run by the waiting thread or
        // task (`helped_turns`), parks, the cores' distance, so each mode explains itself.
        let ([rate], counters) = runner.measure_counted(&label, asked, || {
            let start = Instant::now();
            let last = match from {
                "thread" | "thread-timeout" => {
                    let mut last = 0;
                    for _ in 0..n {
                        let ask = responder.ask(Plain(last));
                        let reply = if from == "thread" {
                            ask.wait()
                        } else {
                            ask.wait_timeout(Duration::from_secs(60))
                        };
                        last = reply.map_err(|e| anyhow::anyhow!("an ask failed: {e}"))?;
                    }
                    last
                }
                _ => {
                    let responder = responder.clone();
                    io.block_on(io.spawn(async move {
                        let mut last = 0;
                        for _ in 0..n {
                            match responder.ask(Plain(last)).await {
                                Ok(v) => last = v,
                                Err(_) => return 0,
                            }
                        }
                        last
                    }))
                    .context("the asking task")?
                }
            };
            let elapsed = start.elapsed();
            if last != n {
                bail!("ask validation failed: the chain reached {last}, not {n}");
            }
            // Handled: each ask, by the responder.
            Ok(([n as f64 / elapsed.as_secs_f64()], n))
        })?;
        let notes = format!(
            "{}; from {}, each ask after the previous reply ({}); the handler returns the \
             reply",
            config.notes(),
            match from {
                "tokio-task" => {
                    "a tokio task on a runtime of one thread (it may run the turn of its \
                     request while turns are short, the default)"
                }
                "tokio-task-not-helping" => {
                    "a tokio task on a runtime of one thread, in a system built with \
                     tasks_help(false) (a worker runs every request)"
                }
                _ => "a plain thread",
            },
            match from {
                "thread" => "ask(..).wait()",
                "thread-timeout" => "ask(..).wait_timeout(60 s)",
                _ => "ask(..).await",
            },
        );
        runner
            .emit(&round_trips("troupe", n, "plain", from, rate, &notes).with_counters(counters))?;
    }
    tokio_reference(runner, config, &io, system.workers(), n)?;
    io.shutdown_background();
    not_helping.shutdown_timeout(Duration::from_secs(60))?;
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}

/// The same round trips in tokio alone, for reference beside `from=tokio-task`: the task on
/// the same one-thread runtime sends each request over a bounded `mpsc` channel to a task on
/// a runtime of as many threads as troupe's pool has workers, which answers on a `oneshot`.
/// What a tokio service pays for a request-reply hop between its own tasks, quiet and (with
/// `--contention`) beside busy threads.
fn tokio_reference(
    runner: &Runner,
    config: &SystemConfig,
    io: &tokio::runtime::Runtime,
    workers: usize,
    n: u64,
) -> Result<()> {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("ask-tokio-server")
        .build()
        .context("starting the tokio runtime of the answering task")?;
    let (requests, mut incoming) =
        tokio::sync::mpsc::channel::<(u64, tokio::sync::oneshot::Sender<u64>)>(1024);
    server.spawn(async move {
        while let Some((value, reply)) = incoming.recv().await {
            let _ = reply.send(value + 1);
        }
    });
    let [rate] = runner.measure(&format!("ask tokio reference {n}"), || {
        let requests = requests.clone();
        let start = Instant::now();
        let last = io
            .block_on(io.spawn(async move {
                let mut last = 0;
                for _ in 0..n {
                    let (reply, replied) = tokio::sync::oneshot::channel();
                    if requests.send((last, reply)).await.is_err() {
                        return 0;
                    }
                    match replied.await {
                        Ok(v) => last = v,
                        Err(_) => return 0,
                    }
                }
                last
            }))
            .context("the asking task")?;
        let elapsed = start.elapsed();
        if last != n {
            bail!("tokio reference validation failed: the chain reached {last}, not {n}");
        }
        Ok([n as f64 / elapsed.as_secs_f64()])
    })?;
    let notes = format!(
        "{}; the reference for troupe's from=tokio-task: a tokio task on a runtime of one \
         thread sends each request (after the previous reply) over a bounded mpsc channel to a \
         task on a runtime of {workers} threads, which answers on a oneshot channel",
        config.contention_note()
    );
    runner.emit(&round_trips(
        "tokio",
        n,
        "plain",
        "tokio-task",
        rate,
        &notes,
    ))?;
    server.shutdown_background();
    Ok(())
}

/// A record of `n` ask round trips a second (`ask`, `round_trips`) by `contender`, with how the
/// reply was given and where the asks came from.
fn round_trips(
    contender: &str,
    n: u64,
    reply: &str,
    from: &str,
    rate: Vec<f64>,
    notes: &str,
) -> Record {
    let params = json!({ "asks": n, "reply": reply, "from": from })
        .as_object()
        .expect("object")
        .clone();
    Record::new(
        "ask",
        "round_trips",
        contender,
        params,
        "asks/s",
        rate,
        notes,
    )
}
