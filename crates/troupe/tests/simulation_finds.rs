//! What the simulator finds from a seed.
//!
//! - **Open defects**: lifecycle hangs and a misdirected reply that trying troupe adversarially
//!   found, and that are not fixed yet. Each test states the right behaviour as a scenario and
//!   asserts that exploring seeds finds the violation (the first failing seed, with its replay
//!   line). When a defect is fixed, its test turns into a regression test: `run` instead of
//!   `find`, the seed that found it in the corpus.
//! - **Past defects**: scenarios of defects fixed before the simulator existed. They pass; each
//!   failed from a seed when its fix was undone (how many seeds it took is in the CHANGELOG).
//!
//! Runs stop at the first failure, so a deterministic defect is found by seed 0; the ones
//! that need a particular interleaving print how many seeds random and PCT scheduling needed.
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use troupe::sim::{Explore, Found, Simulation, Strategy};
use troupe::{Actor, Context, Handler, Message, Placement, SpawnOptions, StreamHandle};

/// Explores `seeds` seeds of `scenario` with one strategy, expecting a failure whose message
/// contains `symptom`; prints how many runs it took.
fn finds(
    name: &str,
    strategy: Strategy,
    seeds: u64,
    symptom: &str,
    scenario: impl Fn(&Simulation) + Send + Sync,
) -> Box<Found> {
    let found = Explore::new(name)
        .strategy(strategy)
        .seeds(seeds)
        .threads(1)
        .find(scenario)
        .expect_err("the simulator finds the defect");
    assert!(found.message.contains(symptom), "{found}");
    assert_eq!(found.nondeterministic_at, None, "{found}");
    eprintln!(
        "{name}: found by {strategy} at seed {} after {} runs ({} steps): {}",
        found.seed,
        found.runs,
        found.steps,
        found.message.lines().next().unwrap_or("")
    );
    found
}

// ---------------------------------------------------------------------------------------------
// Open defect 1: a child spawned in `Actor::stopped` escapes supervision, and shutdown never
// returns.

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
fn finds_the_shutdown_hang_of_a_child_spawned_in_stopped() {
    for strategy in [Strategy::Random, Strategy::Pct { depth: 3 }] {
        finds(
            "child_spawned_in_stopped",
            strategy,
            100,
            "every actor to stop (1 live)",
            |sim| {
                let parent = sim.system().spawn(LastWish);
                parent.stop();
                parent.stopped().wait().unwrap();
                // The simulation's shutdown (after the scenario) is what hangs.
            },
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Open defect 2: an actor spawned after shutdown has finished never runs: its tell is `Ok`,
// its asks never resolve.

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
fn finds_an_actor_spawned_after_shutdown_that_never_runs() {
    finds(
        "spawned_after_shutdown",
        Strategy::Random,
        100,
        "stuck",
        |sim| {
            sim.system().shutdown();
            let late = sim.system().spawn(Greeter);
            // Either a typed refusal or an answer would do; a wait for ever is the defect.
            let _ = late.ask(Hello).wait();
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Open defect 3: `attach_stream` outlives its actor: a pending stream keeps its task and
// resources after the actor has stopped.

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
fn finds_a_stream_that_outlives_its_actor() {
    finds(
        "stream_outlives_actor",
        Strategy::Random,
        100,
        "the stream is still there",
        |sim| {
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
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Open defect 4: an actor on the `blocking` pool that waits for its own ask deadlocks
// silently (an actor on its own thread is refused with a clear panic).

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
fn finds_a_blocking_pool_actor_waiting_for_itself() {
    finds("waits_for_itself", Strategy::Random, 100, "stuck", |sim| {
        let me = sim.system().spawn_with(
            Narcissus,
            SpawnOptions::new().placement(Placement::Named("blocking")),
        );
        let _ = me.ask(AskMyself).wait();
    });
}

// ---------------------------------------------------------------------------------------------
// Open defect 5: `reply_later` called outside a handler (in an `await_then` continuation)
// stays in the context and takes over the reply of the next ask of that type.

#[derive(Message)]
#[reply(u32)]
struct Price;
#[derive(Message)]
struct Refresh;

struct Quote {
    stale: Option<troupe::Deferred<u32>>,
}
impl Actor for Quote {}
impl Handler<Refresh> for Quote {
    fn handle(&mut self, _: Refresh, ctx: &mut Context<Self>) {
        ctx.await_then(async {}, |quote, ctx, ()| {
            // Not inside the handler of a `Price` ask: there is no ask to defer.
            quote.stale = Some(ctx.reply_later::<Price>());
        });
    }
}
impl Handler<Price> for Quote {
    fn handle(&mut self, _: Price, _: &mut Context<Self>) -> u32 {
        if let Some(stale) = self.stale.take() {
            let _ = stale.send(999);
        }
        2
    }
}

#[test]
fn finds_a_deferred_reply_that_takes_over_a_later_ask() {
    finds(
        "reply_later_hijack",
        Strategy::Random,
        100,
        "answered by another reply",
        |sim| {
            let quote = sim.system().spawn(Quote { stale: None });
            quote.tell(Refresh).unwrap();
            sim.run_until_idle();
            assert_eq!(
                quote.ask(Price).wait(),
                Ok(2),
                "the handler returned 2, and was answered by another reply"
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Past defect: an await whose future finished within the turn that began it never resumed
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
// Past defect: `Addr::stopped()` asked after an idle actor had finished (nothing had watched
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
