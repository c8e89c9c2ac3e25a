#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Isolation and backpressure: pools that cannot starve each other, bounded mailboxes, timers,
//! the async bridge, watches, links and the registry.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{wait_for, DropCounter, LONG};
use troupe::{
    Actor, Addr, AskError, Context, Failure, Handler, Message, Overflow, Placement, SendError,
    SpawnOptions, StopReason, System, Terminated,
};

struct Sleeper;
impl Actor for Sleeper {}
struct Sleep(Duration);
impl Message for Sleep {
    type Reply = ();
}
impl Handler<Sleep> for Sleeper {
    fn handle(&mut self, msg: Sleep, _: &mut Context<Self>) {
        std::thread::sleep(msg.0);
    }
}

struct Pong;
impl Actor for Pong {}
struct Ball(u64);
impl Message for Ball {
    type Reply = u64;
}
impl Handler<Ball> for Pong {
    fn handle(&mut self, ball: Ball, _: &mut Context<Self>) -> u64 {
        ball.0 + 1
    }
}

/// 100 actors sleeping inside their handlers on one pool do not delay a ping-pong on another:
/// every round trip completes while the blocked pool is still blocked.
#[test]
fn a_blocked_pool_does_not_delay_another() {
    let system = System::builder()
        .workers(2)
        .pool("slow", 2, 64)
        .build()
        .unwrap();
    let blocked_until = Instant::now() + Duration::from_millis(1_500);
    let sleepers: Vec<_> = (0..100)
        .map(|_| {
            system.spawn_with(
                Sleeper,
                SpawnOptions::new().placement(Placement::Named("slow")),
            )
        })
        .collect();
    for s in &sleepers {
        s.tell(Sleep(Duration::from_millis(30))).unwrap();
    }
    // 100 sleeps of 30 ms on 2 threads: the slow pool is busy for about 1.5 s.
    let pong = system.spawn(Pong);
    let mut ball = 0;
    for _ in 0..1_000 {
        ball = pong.ask(Ball(ball)).wait_timeout(LONG).unwrap();
    }
    assert_eq!(ball, 1_000);
    assert!(
        Instant::now() < blocked_until,
        "the ping-pong finished only after the slow pool was free"
    );
    assert!(
        sleepers.iter().any(|s| s.mailbox_len() > 0),
        "the slow pool is still busy"
    );
    let slow = system
        .pool_metrics()
        .into_iter()
        .find(|p| p.name == "slow")
        .unwrap();
    assert_eq!(slow.workers, 2);
    system.shutdown();
}

/// The blocking pool takes actors that must block, away from the default pool.
#[test]
fn blocking_pool_exists_and_runs_actors() {
    let system = System::builder().workers(1).build().unwrap();
    let blocker = system.spawn_with(
        Sleeper,
        SpawnOptions::new().placement(Placement::Named("blocking")),
    );
    blocker.tell(Sleep(Duration::from_millis(300))).unwrap();
    let pong = system.spawn(Pong);
    assert_eq!(
        pong.ask(Ball(1)).wait_timeout(Duration::from_millis(250)),
        Ok(2)
    );
    system.shutdown();
}

struct Slow {
    handled: Arc<AtomicU64>,
}
impl Actor for Slow {}
struct Item(#[allow(dead_code)] crate::common::Counted);
impl Message for Item {
    type Reply = ();
}
impl Handler<Item> for Slow {
    fn handle(&mut self, _: Item, _: &mut Context<Self>) {
        std::thread::sleep(Duration::from_micros(20));
        self.handled.fetch_add(1, Ordering::Relaxed);
    }
}

/// A flood into a bounded mailbox keeps it within its capacity and reports exactly how many
/// messages were refused; every refused message comes back to the sender.
#[test]
fn bounded_mailbox_refuses_exactly() {
    let system = System::new();
    let handled = Arc::new(AtomicU64::new(0));
    let drops = DropCounter::default();
    let slow = system.spawn_with(
        Slow {
            handled: handled.clone(),
        },
        SpawnOptions::new().bounded(100, Overflow::Fail),
    );
    let (mut accepted, mut refused, mut peak) = (0u64, 0u64, 0usize);
    for _ in 0..20_000 {
        match slow.tell(Item(drops.token())) {
            Ok(()) => accepted += 1,
            Err(SendError::Full(item)) => {
                refused += 1;
                drop(item);
            }
            Err(other) => panic!("only Full expected: {other}"),
        }
        peak = peak.max(slow.mailbox_len());
    }
    assert!(refused > 0, "the flood must overflow");
    assert!(peak <= 100, "mailbox held {peak} > capacity");
    wait_for("the accepted messages", LONG, || {
        handled.load(Ordering::Relaxed) == accepted
    });
    // `processed` is counted when a turn ends, just after its last handler returned.
    wait_for("the turn's count", LONG, || {
        slow.metrics().processed == accepted
    });
    let m = slow.metrics();
    assert_eq!(m.rejected, refused);
    assert_eq!(m.processed, accepted);
    assert_eq!(m.dropped, 0);
    system.shutdown();
    assert_eq!(drops.get() as u64, accepted + refused, "nothing leaked");
}

#[test]
fn bounded_mailbox_drop_policies_count() {
    let system = System::builder().workers(1).build().unwrap();
    for overflow in [Overflow::DropNewest, Overflow::DropOldest] {
        let handled = Arc::new(AtomicU64::new(0));
        let drops = DropCounter::default();
        let gate = system.spawn(Sleeper);
        let slow = system.spawn_with(
            Slow {
                handled: handled.clone(),
            },
            SpawnOptions::new().bounded(10, overflow),
        );
        // Hold the only worker so the flood arrives while the actor cannot run.
        gate.tell(Sleep(Duration::from_millis(100))).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..1_000 {
            slow.tell(Item(drops.token())).unwrap();
        }
        wait_for("the flood to be handled", LONG, || {
            let m = slow.metrics();
            m.processed + m.dropped == 1_000
        });
        let m = slow.metrics();
        assert!(m.dropped >= 980, "{overflow:?}: dropped {}", m.dropped);
        assert_eq!(m.processed, handled.load(Ordering::Relaxed));
        assert_eq!(m.rejected, 0);
        slow.stop();
        gate.stop();
        wait_for("drops", LONG, || drops.get() == 1_000);
    }
    system.shutdown();
}

/// `send(..).await` waits for room instead of failing.
#[test]
fn async_send_waits_for_room() {
    let system = System::new();
    let handled = Arc::new(AtomicU64::new(0));
    let drops = DropCounter::default();
    let slow = system.spawn_with(
        Slow {
            handled: handled.clone(),
        },
        SpawnOptions::new().bounded(8, Overflow::Fail),
    );
    let sent = system.block_on(async {
        for _ in 0..2_000 {
            slow.send(Item(drops.token())).await?;
        }
        Ok::<_, SendError<Item>>(())
    });
    assert!(sent.is_ok());
    wait_for("all handled", LONG, || {
        handled.load(Ordering::Relaxed) == 2_000
    });
    // `processed` is counted when a turn ends, just after its last handler returned.
    wait_for("the turn's count", LONG, || {
        slow.metrics().processed == 2_000
    });
    system.shutdown();
}

struct Ticker {
    ticks: Arc<AtomicUsize>,
    period: Duration,
    stop_after: usize,
    timer: Option<troupe::TimerId>,
}
impl Actor for Ticker {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.timer = Some(ctx.send_interval(self.period, || Tick));
        ctx.send_after(Duration::from_millis(5), Tick);
    }
}
struct Tick;
impl Message for Tick {
    type Reply = ();
}
impl Handler<Tick> for Ticker {
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        let n = self.ticks.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.stop_after {
            let timer = self.timer.take().unwrap();
            assert!(ctx.cancel_timer(timer), "the interval was still running");
        }
    }
}

#[test]
fn timers_send_after_and_interval_until_cancelled() {
    let system = System::new();
    let ticks = Arc::new(AtomicUsize::new(0));
    system.spawn(Ticker {
        ticks: ticks.clone(),
        period: Duration::from_millis(2),
        stop_after: 6,
        timer: None,
    });
    wait_for("six ticks", LONG, || ticks.load(Ordering::SeqCst) >= 6);
    std::thread::sleep(Duration::from_millis(50));
    // Cancelled at the 6th tick; at most one more could have been in flight.
    assert!(ticks.load(Ordering::SeqCst) <= 7);
    system.shutdown();
}

#[test]
fn ask_timeout_and_ask_to_a_dead_actor_are_prompt_and_typed() {
    let system = System::new();
    let sleeper = system.spawn(Sleeper);
    sleeper.tell(Sleep(Duration::from_millis(500))).unwrap();
    let start = Instant::now();
    let late =
        system.block_on(sleeper.ask_timeout(Sleep(Duration::ZERO), Duration::from_millis(30)));
    assert_eq!(late, Err(AskError::Timeout(Duration::from_millis(30))));
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "the timeout was not prompt"
    );

    let pong = system.spawn(Pong);
    pong.stop();
    wait_for("pong to stop", LONG, || pong.is_stopped());
    let start = Instant::now();
    assert_eq!(system.block_on(pong.ask(Ball(1))), Err(AskError::Stopped));
    assert_eq!(
        pong.ask_timeout(Ball(1), Duration::from_secs(5)).wait(),
        Err(AskError::Stopped)
    );
    assert!(start.elapsed() < Duration::from_millis(400));
    system.shutdown();
}

/// `pipe` delivers a future's output as a message while the actor keeps working; `await_then`
/// holds the mailbox until the future is done.
#[test]
fn async_bridge_pipe_and_await_then() {
    struct Io {
        log: Arc<Mutex<Vec<String>>>,
    }
    impl Actor for Io {}
    struct Fetch(&'static str, Duration);
    impl Message for Fetch {
        type Reply = ();
    }
    struct Fetched(String);
    impl Message for Fetched {
        type Reply = ();
    }
    struct Hold(Duration);
    impl Message for Hold {
        type Reply = ();
    }
    struct Note(&'static str);
    impl Message for Note {
        type Reply = ();
    }
    impl Handler<Fetch> for Io {
        fn handle(&mut self, f: Fetch, ctx: &mut Context<Self>) {
            let (name, delay) = (f.0, f.1);
            ctx.pipe(
                async move {
                    tokio::time::sleep(delay).await;
                    name.to_uppercase()
                },
                Fetched,
            );
        }
    }
    impl Handler<Fetched> for Io {
        fn handle(&mut self, f: Fetched, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(f.0);
        }
    }
    impl Handler<Hold> for Io {
        fn handle(&mut self, h: Hold, ctx: &mut Context<Self>) {
            let delay = h.0;
            ctx.await_then(
                async move { tokio::time::sleep(delay).await },
                |me: &mut Io, _, ()| {
                    me.log.lock().unwrap().push("held".into());
                },
            );
        }
    }
    impl Handler<Note> for Io {
        fn handle(&mut self, n: Note, _: &mut Context<Self>) {
            self.log.lock().unwrap().push(n.0.into());
        }
    }

    let system = System::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let io = system.spawn(Io { log: log.clone() });
    io.tell(Fetch("slow", Duration::from_millis(80))).unwrap();
    io.tell(Note("meanwhile")).unwrap();
    wait_for("the piped result", LONG, || log.lock().unwrap().len() == 2);
    assert_eq!(*log.lock().unwrap(), ["meanwhile", "SLOW"]);

    io.tell(Hold(Duration::from_millis(50))).unwrap();
    io.tell(Note("after")).unwrap();
    wait_for("the held message", LONG, || log.lock().unwrap().len() == 4);
    assert_eq!(&log.lock().unwrap()[2..], ["held", "after"]);
    system.shutdown();
}

struct Fragile;
impl Actor for Fragile {}
struct Break;
impl Message for Break {
    type Reply = ();
}
impl Handler<Break> for Fragile {
    fn handle(&mut self, _: Break, _: &mut Context<Self>) {
        panic!("breaks on purpose");
    }
}

struct Watcher {
    seen: Arc<Mutex<Vec<Terminated>>>,
}
impl Actor for Watcher {}
impl Handler<Terminated> for Watcher {
    fn handle(&mut self, t: Terminated, _: &mut Context<Self>) {
        self.seen.lock().unwrap().push(t);
    }
}
struct Watch<B: Actor>(Addr<B>);
impl<B: Actor> Message for Watch<B> {
    type Reply = ();
}
impl<B: Actor> Handler<Watch<B>> for Watcher {
    fn handle(&mut self, w: Watch<B>, ctx: &mut Context<Self>) {
        ctx.watch(&w.0);
    }
}
struct Link(Addr<Fragile>);
impl Message for Link {
    type Reply = ();
}
impl Handler<Link> for Watcher {
    fn handle(&mut self, l: Link, ctx: &mut Context<Self>) {
        ctx.link(&l.0);
    }
}

#[test]
fn watch_reports_how_an_actor_ended() {
    crate::common::quiet_panics_on_purpose();
    let system = System::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let watcher = system.spawn(Watcher { seen: seen.clone() });
    let calm = system.spawn(Pong);
    let fragile = system.spawn(Fragile);
    watcher.ask(Watch(calm.clone())).wait().unwrap();
    watcher.ask(Watch(fragile.clone())).wait().unwrap();
    calm.stop();
    fragile.tell(Break).unwrap();
    wait_for("both ends", LONG, || seen.lock().unwrap().len() == 2);
    let seen = seen.lock().unwrap().clone();
    let calm_end = seen.iter().find(|t| t.id == calm.id()).unwrap();
    assert_eq!(calm_end.reason, StopReason::Normal);
    let fragile_end = seen.iter().find(|t| t.id == fragile.id()).unwrap();
    assert!(
        matches!(&fragile_end.reason, StopReason::Failed(Failure::Panicked(m)) if m.contains("on purpose"))
    );
    // Watching an actor that has already stopped reports at once.
    let late = Arc::new(Mutex::new(Vec::new()));
    let late_watcher = system.spawn(Watcher { seen: late.clone() });
    late_watcher.ask(Watch(calm.clone())).wait().unwrap();
    wait_for("the late report", LONG, || late.lock().unwrap().len() == 1);
    system.shutdown();
}

#[test]
fn links_propagate_failure_not_normal_stops() {
    crate::common::quiet_panics_on_purpose();
    let system = System::new();
    let a = system.spawn(Watcher {
        seen: Arc::default(),
    });
    let fragile = system.spawn(Fragile);
    a.ask(Link(fragile.clone())).wait().unwrap();
    fragile.tell(Break).unwrap();
    wait_for("the linked actor to fail too", LONG, || a.is_stopped());

    let b = system.spawn(Watcher {
        seen: Arc::default(),
    });
    let calm = system.spawn(Fragile);
    b.ask(Link(calm.clone())).wait().unwrap();
    calm.stop();
    wait_for("the normal stop", LONG, || calm.is_stopped());
    std::thread::sleep(Duration::from_millis(50));
    assert!(!b.is_stopped(), "a normal stop does not propagate");
    system.shutdown();
}

#[test]
fn registry_finds_by_name_and_releases_on_stop() {
    use troupe::RegistryError;
    let system = System::new();
    let pong = system
        .spawn_named("pong", SpawnOptions::new(), || Pong)
        .unwrap();
    let found: Addr<Pong> = system.lookup("pong").expect("registered");
    assert_eq!(found.ask(Ball(1)).wait(), Ok(2));
    assert!(system.lookup::<Sleeper>("pong").is_none(), "typed lookup");
    assert!(matches!(
        system.find::<Sleeper>("pong"),
        Err(RegistryError::WrongType { registered, .. }) if registered.ends_with("Pong")
    ));
    assert_eq!(
        system.find::<Pong>("nobody").unwrap_err(),
        RegistryError::NotFound("nobody".into())
    );
    // A taken name is an error, and the actor is not even made.
    let made = std::cell::Cell::new(false);
    assert_eq!(
        system
            .spawn_named("pong", SpawnOptions::new(), || {
                made.set(true);
                Pong
            })
            .unwrap_err(),
        RegistryError::Taken("pong".into())
    );
    assert!(!made.get());
    assert_eq!(
        system
            .get_or_spawn_named("pong", SpawnOptions::new(), || Pong)
            .unwrap(),
        pong
    );
    assert!(matches!(
        system.get_or_spawn_named("pong", SpawnOptions::new(), || Sleeper),
        Err(RegistryError::WrongType { .. })
    ));
    let other = system.spawn(Pong);
    assert!(matches!(
        system.register("pong", &other),
        Err(RegistryError::Taken(_))
    ));
    pong.stop();
    wait_for("the name to be released", LONG, || {
        system.lookup::<Pong>("pong").is_none()
    });
    system.register("pong", &other).unwrap();
    assert_eq!(system.lookup::<Pong>("pong").unwrap(), other);
    // A stopping actor cannot take a name.
    other.stop();
    wait_for("the other to stop", LONG, || other.is_stopped());
    assert!(system.register("again", &other).is_err());
    system.shutdown();
}

#[test]
fn metrics_count_and_time_handlers() {
    let system = System::new();
    let stop = Arc::new(AtomicBool::new(false));
    let timed = system.spawn_with(Sleeper, SpawnOptions::new().measure_time());
    for _ in 0..5 {
        timed.tell(Sleep(Duration::from_millis(2))).unwrap();
    }
    wait_for("five", LONG, || timed.metrics().processed == 5);
    let m = timed.metrics();
    assert!(m.handler_time.unwrap() >= Duration::from_millis(10));
    assert_eq!(m.restarts, 0);
    assert!(!m.stopped);
    let pools = system.pool_metrics();
    assert_eq!(pools[0].name, "default");
    assert_eq!(pools[1].name, "blocking");
    stop.store(true, Ordering::Relaxed);
    system.shutdown();
}
