//! Lifecycle edges that hung, and replies that went astray: each found from a seed by the
//! simulator (`troupe::sim`), fixed, and kept here twice, as a simulated scenario explored
//! over seeds (its corpus holds the seed that found it) and as a plain test on threads.
//!
//! - Found by exploring seeds before their fixes (at seed 0: they need no particular
//!   interleaving): a child spawned in `stopped`, actors spawned while or after the system
//!   shuts down, a stream that outlived its actor, an actor on the `blocking` pool waiting for
//!   itself, a deferred reply taken outside its handler (now impossible: see below), one
//!   dropped by a panic.
//! - Fixed before the simulator existed; each scenario failed from a seed when its fix was
//!   undone (the await: at seed 5, the sixth run, whichever the strategy, since what it needs
//!   is a future finished inside the turn that started it, which the seed decides; the join:
//!   at seed 0).
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{wait_for, LONG};
use troupe::sim::{Explore, Simulation};
use troupe::{
    Actor, AskError, Context, Deferred, DeferredHandler, Handler, Message, Placement, SendError,
    SpawnOptions, StreamHandle, System,
};

/// Explores `scenario` over 100 seeds (random, PCT and fair in turn), the seed that found its
/// defect first.
fn holds(name: &str, scenario: impl Fn(&Simulation) + Send + Sync) {
    Explore::new(name)
        .seeds(100)
        .corpus(&["0:random:-"])
        .run(scenario);
}

// ---------------------------------------------------------------------------------------------
// A child spawned in `Actor::stopped` escaped supervision, and shutdown never returned
// ("stuck: ... every actor to stop (1 live)"). Now every child still in the table when its
// parent finishes is stopped.

struct Kid;
impl Actor for Kid {}

/// Spawns a child as it stops.
struct LastWish;
impl Actor for LastWish {
    fn stopped(&mut self, ctx: &mut Context<Self>) {
        ctx.spawn(Kid);
    }
}

#[test]
fn a_child_spawned_in_stopped_is_stopped_with_its_parent() {
    holds("child_spawned_in_stopped", |sim| {
        let parent = sim.system().spawn(LastWish);
        parent.stop();
        parent.stopped().wait().unwrap();
        sim.run_until_idle();
        assert_eq!(
            sim.system().live_actors(),
            0,
            "the child outlived its parent"
        );
        // And the exploration's shutdown, after the scenario, finishes.
    });
}

// ---------------------------------------------------------------------------------------------
// An actor spawned after shutdown had finished never ran: its tell was `Ok`, its asks never
// resolved ("stuck: ... the reply to an ask"). Now an actor spawned into a system that is
// shutting down starts and stops at once, and its address hands messages back.

#[derive(Message)]
#[reply(u32)]
struct Hello;

struct Greeter;
impl Actor for Greeter {}
impl Handler<Hello> for Greeter {
    fn handle(&mut self, _: Hello, _: &mut Context<Self>) -> u32 {
        1
    }
}

#[test]
fn an_actor_spawned_after_shutdown_hands_messages_back() {
    holds("spawned_after_shutdown", |sim| {
        let running = sim.system().spawn(Greeter);
        sim.system().shutdown();
        assert!(running.is_stopped());
        let late = sim.system().spawn(Greeter);
        assert!(late.is_stopped());
        assert_eq!(late.ask(Hello).wait(), Err(AskError::Stopped));
        assert!(matches!(late.tell(Hello), Err(SendError::Stopped(Hello))));
        assert_eq!(sim.system().live_actors(), 0);
    });
}

// ---------------------------------------------------------------------------------------------
// `attach_stream` outlived its actor: a pending stream kept its task and resources after the
// actor had stopped ("a minute after its actor stopped, the stream is still there"). Now the
// actor ends its streams when it begins to stop.

/// A stream that never yields, holding a token whose drop is counted.
struct Silent(#[allow(dead_code)] Token);
impl futures_core::Stream for Silent {
    type Item = ();
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<()>> {
        std::task::Poll::Pending
    }
}

struct Token(Arc<AtomicUsize>);
impl Drop for Token {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Listener {
    dropped: Arc<AtomicUsize>,
    feed: Option<StreamHandle>,
}
impl Actor for Listener {
    fn started(&mut self, ctx: &mut Context<Self>) {
        let stream = Silent(Token(self.dropped.clone()));
        self.feed = Some(ctx.attach_stream(stream, |()| Hello));
    }
}
impl Handler<Hello> for Listener {
    fn handle(&mut self, _: Hello, _: &mut Context<Self>) -> u32 {
        0
    }
}

#[test]
fn a_stream_ends_with_its_actor() {
    holds("stream_outlives_actor", |sim| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let listener = sim.system().spawn(Listener {
            dropped: dropped.clone(),
            feed: None,
        });
        sim.run_until_idle();
        listener.stop();
        listener.stopped().wait().unwrap();
        sim.advance(Duration::from_secs(60));
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "a minute after its actor stopped, the stream is still there"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// An actor on the `blocking` pool that waited for its own ask deadlocked silently ("stuck: ...
// the reply to an ask"), where one on its own thread is refused with a clear panic. Now both
// are refused: the handler panics, its asker is told.

#[derive(Message)]
#[reply(u32)]
struct AskMyself;

struct Narcissus;
impl Actor for Narcissus {}
impl Handler<AskMyself> for Narcissus {
    fn handle(&mut self, _: AskMyself, ctx: &mut Context<Self>) -> u32 {
        ctx.myself().ask(Hello).wait().unwrap_or(0)
    }
}
impl Handler<Hello> for Narcissus {
    fn handle(&mut self, _: Hello, _: &mut Context<Self>) -> u32 {
        1
    }
}

#[test]
fn an_actor_waiting_for_itself_is_refused_on_every_placement() {
    holds("waits_for_itself", |sim| {
        for placement in [Placement::Named("blocking"), Placement::Thread] {
            let me = sim
                .system()
                .spawn_with(Narcissus, SpawnOptions::new().placement(placement));
            assert_eq!(me.ask(AskMyself).wait(), Err(AskError::Panicked));
            assert_eq!(
                me.ask(Hello).wait(),
                Err(AskError::Stopped),
                "a failed top-level actor stops"
            );
        }
    });
}

// ---------------------------------------------------------------------------------------------
// `reply_later` called outside a handler (in an `await_then` continuation) stayed in the
// context and took over the reply of the next ask of that type ("the handler returned 2, and
// was answered by another reply"); `reply_later::<Other>()` compiled and answered the
// handler's placeholder. Both are impossible now: `reply_later` is gone, and a `Deferred`
// exists only as the argument of a `DeferredHandler`, for the request it was given with, typed
// by that message's reply (another type does not compile: see `DeferredHandler`'s docs). What
// is left to check at run time: each deferred answer reaches its own asker, in whatever order
// the seed finishes the continuations.

#[derive(Message)]
#[reply(u32)]
struct Price(u32);

struct Quote;
impl Actor for Quote {}
impl DeferredHandler<Price> for Quote {
    fn handle(&mut self, msg: Price, reply: Deferred<u32>, ctx: &mut Context<Self>) {
        ctx.pipe(async move { msg.0 * 2 }, move |doubled| {
            Priced(doubled, reply)
        });
    }
}
#[derive(Message)]
struct Priced(u32, Deferred<u32>);
impl Handler<Priced> for Quote {
    fn handle(&mut self, msg: Priced, _: &mut Context<Self>) {
        let _ = msg.1.send(msg.0);
    }
}

#[test]
fn each_deferred_reply_answers_its_own_ask() {
    holds("deferred_own_ask", |sim| {
        let quote = sim.system().spawn(Quote);
        let asks: Vec<_> = (1..=20).map(|i| quote.ask(Price(i))).collect();
        for (i, ask) in (1..=20).zip(asks) {
            assert_eq!(ask.wait(), Ok(i * 2), "the ask for {i}");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Fixed before the simulator: an await whose future finished within the turn that began it never resumed
// (the Resume signal was read before the await was recorded, and dropped as stale). The
// simulator finishes a new future inside the turn that started it when the seed says so.

#[derive(Message)]
struct AwaitReady;
#[derive(Message)]
#[reply(bool)]
struct Resumed;

struct Awaiter {
    resumed: bool,
}
impl Actor for Awaiter {}
impl Handler<AwaitReady> for Awaiter {
    fn handle(&mut self, _: AwaitReady, ctx: &mut Context<Self>) {
        ctx.await_then(async {}, |me, _, ()| me.resumed = true);
    }
}
impl Handler<Resumed> for Awaiter {
    fn handle(&mut self, _: Resumed, _: &mut Context<Self>) -> bool {
        self.resumed
    }
}

#[test]
fn an_await_that_finishes_within_its_turn_resumes() {
    Explore::new("await_within_turn").seeds(60).run(|sim| {
        let awaiter = sim.system().spawn(Awaiter { resumed: false });
        awaiter.tell(AwaitReady).unwrap();
        assert_eq!(awaiter.ask(Resumed).wait(), Ok(true));
    });
}

// ---------------------------------------------------------------------------------------------
// Fixed before the simulator: `Addr::stopped()` asked after an idle actor had finished (nothing had watched
// it) never resolved.

#[test]
fn stopped_asked_after_the_end_resolves() {
    Explore::new("stopped_after_end").seeds(60).run(|sim| {
        let greeter = sim.system().spawn(Greeter);
        greeter.stop();
        sim.run_until_idle();
        assert_eq!(greeter.stopped().wait(), Ok(troupe::StopReason::Normal));
    });
}

// ---------------------------------------------------------------------------------------------
// A continuation that panicked while it held a deferred reply answered `NoReply` ("crashed"
// and "forgot to answer" looked the same). Now a `Deferred` dropped while its holder unwinds
// answers `Panicked`.

#[derive(Message)]
#[reply(u32)]
struct Compute(bool);

struct Deferrer;
impl Actor for Deferrer {}
impl DeferredHandler<Compute> for Deferrer {
    fn handle(&mut self, msg: Compute, reply: Deferred<u32>, ctx: &mut Context<Self>) {
        ctx.await_then(async {}, move |_, _, ()| {
            if msg.0 {
                let _held = reply;
                panic!("the continuation crashes (expected)");
            }
            let _ = reply.send(7);
        });
    }
}

#[test]
fn a_deferred_reply_dropped_by_a_panic_answers_panicked() {
    holds("deferred_dropped_by_panic", |sim| {
        let deferrer = sim
            .system()
            .spawn_supervised(|| Deferrer, SpawnOptions::new());
        assert_eq!(deferrer.ask(Compute(false)).wait(), Ok(7));
        assert_eq!(deferrer.ask(Compute(true)).wait(), Err(AskError::Panicked));
    });
}

// ---------------------------------------------------------------------------------------------
// The same edges on threads.

/// Runs `f` on a thread of its own; fails the test if it has not returned within `limit` (a
/// hang is a failure with a name, not a stuck test run).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("it hung")
}

#[test]
fn shutdown_returns_after_a_child_was_spawned_in_stopped() {
    within(LONG, || {
        let system = System::new();
        let parent = system.spawn(LastWish);
        parent.stop();
        parent.stopped().wait().unwrap();
        system
            .shutdown_timeout(Duration::from_secs(10))
            .expect("no actor is left behind");
    });
}

#[test]
fn actors_spawned_while_or_after_shutdown_runs_answer_or_hand_back() {
    for round in 0..20 {
        within(LONG, move || {
            let system = System::new();
            let spawner = system.clone();
            // A thread spawning while another shuts down.
            let spawning = std::thread::spawn(move || {
                let mut spawned = Vec::new();
                for _ in 0..200 {
                    spawned.push(spawner.spawn(Greeter));
                    std::thread::yield_now();
                }
                spawned
            });
            if round % 2 == 0 {
                std::thread::yield_now();
            }
            system.shutdown();
            for greeter in spawning.join().unwrap() {
                match greeter.ask(Hello).wait() {
                    Ok(1) | Err(AskError::Stopped) => {}
                    other => panic!("round {round}: {other:?}"),
                }
            }
            // After shutdown: stopped at once, its messages handed back.
            let late = system.spawn(Greeter);
            assert!(late.is_stopped());
            assert!(matches!(late.tell(Hello), Err(SendError::Stopped(Hello))));
            assert_eq!(system.live_actors(), 0, "round {round}");
        });
    }
}

#[test]
fn a_pending_stream_is_dropped_when_its_actor_stops() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // On the caller's runtime too, where it used to outlive the whole system.
    for system in [
        System::new(),
        System::builder()
            .tokio_handle(runtime.handle().clone())
            .build()
            .unwrap(),
    ] {
        let before = dropped.load(Ordering::SeqCst);
        let listener = system.spawn(Listener {
            dropped: dropped.clone(),
            feed: None,
        });
        assert_eq!(listener.ask(Hello).wait(), Ok(0));
        listener.stop();
        listener.stopped().wait().unwrap();
        wait_for("the stream to be dropped", LONG, || {
            dropped.load(Ordering::SeqCst) == before + 1
        });
        system.shutdown();
    }
}

#[test]
fn waiting_for_ones_own_reply_is_refused_on_the_blocking_pool_as_on_a_thread() {
    within(LONG, || {
        let system = System::new();
        for placement in [Placement::Named("blocking"), Placement::Thread] {
            let me = system.spawn_with(Narcissus, SpawnOptions::new().placement(placement));
            assert_eq!(me.ask(AskMyself).wait(), Err(AskError::Panicked));
        }
        system.shutdown();
    });
}

#[test]
fn deferred_replies_answered_out_of_order_reach_their_own_asks() {
    let system = System::new();
    let quote = system.spawn(Quote);
    let asks: Vec<_> = (1..=1000).map(|i| quote.ask(Price(i))).collect();
    for (i, ask) in (1..=1000).zip(asks) {
        assert_eq!(ask.wait_timeout(LONG), Ok(i * 2));
    }
    system.shutdown();
}

#[test]
fn a_continuation_that_panics_holding_a_deferred_reply_answers_panicked() {
    let system = System::new();
    let deferrer = system.spawn_supervised(|| Deferrer, SpawnOptions::new());
    assert_eq!(deferrer.ask(Compute(false)).wait(), Ok(7));
    assert_eq!(deferrer.ask(Compute(true)).wait(), Err(AskError::Panicked));
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// `spawn_named` and `get_or_spawn_named` ran `make` twice when two threads raced for a free
// name (a factory with side effects ran twice). Now the name is reserved before `make` runs.

/// Counts the actors `make` built.
struct Made;
impl Actor for Made {}

#[test]
fn make_runs_once_however_many_threads_race_for_a_name() {
    for round in 0..20 {
        let system = System::new();
        let made = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(std::sync::Barrier::new(4));
        let racers: Vec<_> = (0..4)
            .map(|i| {
                let (system, made, start) = (system.clone(), made.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    let make = || {
                        made.fetch_add(1, Ordering::SeqCst);
                        // A slow factory: the window another thread used to slip through.
                        std::thread::sleep(Duration::from_millis(2));
                        Made
                    };
                    let name = format!("race-{round}");
                    if i % 2 == 0 {
                        system
                            .get_or_spawn_named(&name, SpawnOptions::new(), make)
                            .map(|a| Some(a.id()))
                    } else {
                        match system.spawn_named(&name, SpawnOptions::new(), make) {
                            Ok(a) => Ok(Some(a.id())),
                            Err(troupe::RegistryError::Taken(_)) => Ok(None),
                            Err(other) => Err(other),
                        }
                    }
                })
            })
            .collect();
        let ids: Vec<_> = racers
            .into_iter()
            .map(|r| r.join().unwrap().unwrap())
            .collect();
        assert_eq!(made.load(Ordering::SeqCst), 1, "round {round}: {ids:?}");
        let got: std::collections::HashSet<_> = ids.into_iter().flatten().collect();
        assert_eq!(got.len(), 1, "round {round}: everyone got the same actor");
        system.shutdown();
    }
}

/// Asks for its own name while it is being made.
#[test]
fn a_make_that_asks_for_its_own_name_is_refused_not_hung() {
    within(LONG, || {
        let system = System::new();
        let inner = system.clone();
        let outer = system.get_or_spawn_named("me", SpawnOptions::new(), move || {
            let again = inner.get_or_spawn_named("me", SpawnOptions::new(), || Made);
            assert_eq!(
                again.unwrap_err(),
                troupe::RegistryError::Taken("me".into())
            );
            Made
        });
        assert!(outer.is_ok());
        system.shutdown();
    });
}
