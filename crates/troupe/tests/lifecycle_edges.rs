//! Lifecycle edges that hung, on real threads (their simulated scenarios, and the seeds that
//! found them, are in `simulation_finds.rs`): a child spawned in `stopped`, actors spawned
//! while or after the system shuts down, a stream that outlived its actor, an actor on the
//! `blocking` pool waiting for itself, a deferred reply taken outside its handler.
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{wait_for, LONG};
use troupe::{
    Actor, AskError, Context, Handler, Message, Placement, SendError, SpawnOptions, StreamHandle,
    System,
};

/// Runs `f` on a thread of its own; fails the test if it has not returned within `limit` (a
/// hang is a failure with a name, not a stuck test run).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).expect("it hung")
}

struct Kid;
impl Actor for Kid {}

struct LastWish;
impl Actor for LastWish {
    fn stopped(&mut self, ctx: &mut Context<Self>) {
        ctx.spawn(Kid);
    }
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

#[derive(Message)]
#[reply(u32)]
struct Price;
#[derive(Message)]
struct Refresh;
#[derive(Message)]
#[reply(bool)]
struct Refreshed;

struct Quote {
    stale: Option<troupe::Deferred<u32>>,
}
impl Actor for Quote {}
impl Handler<Refresh> for Quote {
    fn handle(&mut self, _: Refresh, ctx: &mut Context<Self>) {
        ctx.await_then(async {}, |quote, ctx, ()| {
            quote.stale = Some(ctx.reply_later::<Price>());
        });
    }
}
impl Handler<Refreshed> for Quote {
    fn handle(&mut self, _: Refreshed, _: &mut Context<Self>) -> bool {
        self.stale.is_some()
    }
}
impl Handler<Price> for Quote {
    fn handle(&mut self, _: Price, _: &mut Context<Self>) -> u32 {
        if let Some(stale) = self.stale.take() {
            assert!(stale.send(999).is_err(), "nobody waits for that reply");
        }
        2
    }
}

#[test]
fn a_deferral_made_in_a_continuation_does_not_answer_a_later_ask() {
    let system = System::new();
    let quote = system.spawn(Quote { stale: None });
    quote.tell(Refresh).unwrap();
    // `Refreshed` waits behind the await (the mailbox is held until it has resumed).
    assert_eq!(quote.ask(Refreshed).wait(), Ok(true));
    assert_eq!(quote.ask(Price).wait(), Ok(2));
    system.shutdown();
}

#[derive(Message)]
#[reply(u32)]
struct Compute(bool);

/// Answers `Compute` later, from a continuation that panics when asked to.
struct Deferrer;
impl Actor for Deferrer {}
impl Handler<Compute> for Deferrer {
    fn handle(&mut self, msg: Compute, ctx: &mut Context<Self>) -> u32 {
        let reply = ctx.reply_later::<Compute>();
        ctx.await_then(async {}, move |_, _, ()| {
            if msg.0 {
                let _held = reply;
                panic!("the continuation crashes (expected)");
            }
            let _ = reply.send(7);
        });
        0
    }
}

#[test]
fn a_continuation_that_panics_holding_a_deferred_reply_answers_panicked() {
    let system = System::new();
    let deferrer = system.spawn_supervised(|| Deferrer, SpawnOptions::new());
    assert_eq!(deferrer.ask(Compute(false)).wait(), Ok(7));
    assert_eq!(deferrer.ask(Compute(true)).wait(), Err(AskError::Panicked));
    system.shutdown();
}
