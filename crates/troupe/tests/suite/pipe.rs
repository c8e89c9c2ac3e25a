#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! `ctx.pipe`: the future is polled once in the handler's turn. Every path out of that first
//! poll: ready (the message is sent at once, from the worker), pending on a tokio resource
//! made by the first poll, pending on a waker that only a later poll's waker can wake, a panic
//! in the first poll and a panic in a later one; on the pool and on a dedicated thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::common::{wait_for, Counted, DropCounter, LONG};
use troupe::{Actor, Context, Handler, Message, Placement, SpawnOptions, System};

/// What the future does.
#[derive(Clone)]
enum Plan {
    /// Nothing to wait for.
    Ready,
    /// A tokio sleep made by the first poll.
    Sleep,
    /// Pending until woken from another thread through the waker of its latest poll.
    External(Arc<Gate>),
    /// Panics in its first poll.
    PanicAtOnce,
    /// Panics after a sleep, on tokio.
    PanicLater,
}

/// A hand-made wake-up: stores the waker of the latest poll, as the contract asks.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Gate {
    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

struct WaitGate(Arc<Gate>);
impl Future for WaitGate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        *self.0.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.0.open.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

struct Piper {
    /// (value, name of the thread that ran the future's first step)
    got: Arc<Mutex<Vec<(u32, String)>>>,
    /// The thread the last `Start` was handled on.
    handler_thread: Arc<Mutex<String>>,
}
impl Actor for Piper {}

struct Start(u32, Plan, Counted);
impl Message for Start {
    type Reply = ();
}
struct Got(u32, String);
impl Message for Got {
    type Reply = ();
}
struct Ping;
impl Message for Ping {
    type Reply = u32;
}

impl Handler<Start> for Piper {
    fn handle(&mut self, Start(n, plan, token): Start, ctx: &mut Context<Self>) {
        *self.handler_thread.lock().unwrap() =
            std::thread::current().name().unwrap_or("").to_owned();
        ctx.pipe(
            async move {
                let _token = token; // dropped with the future, whatever becomes of it
                let thread = std::thread::current().name().unwrap_or("").to_owned();
                match plan {
                    Plan::Ready => {}
                    Plan::Sleep => tokio::time::sleep(Duration::from_millis(20)).await,
                    Plan::External(gate) => WaitGate(gate).await,
                    Plan::PanicAtOnce => panic!("the first poll panics (on purpose)"),
                    Plan::PanicLater => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        panic!("a later poll panics (on purpose)")
                    }
                }
                (n, thread)
            },
            |(n, thread)| Got(n, thread),
        );
    }
}
impl Handler<Got> for Piper {
    fn handle(&mut self, Got(n, thread): Got, _: &mut Context<Self>) {
        self.got.lock().unwrap().push((n, thread));
    }
}
impl Handler<Ping> for Piper {
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) -> u32 {
        7
    }
}

fn every_path(placement: Placement, prefix: &str) {
    let system = System::builder().name(prefix).build().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let handler_thread = Arc::new(Mutex::new(String::new()));
    let piper = system.spawn_with(
        Piper {
            got: got.clone(),
            handler_thread: handler_thread.clone(),
        },
        SpawnOptions::default().placement(placement),
    );
    let drops = DropCounter::default();
    let gate = Arc::new(Gate::default());

    piper.tell(Start(1, Plan::Ready, drops.token())).unwrap();
    assert_eq!(piper.ask(Ping).wait(), Ok(7));
    let first_handler = handler_thread.lock().unwrap().clone();
    piper.tell(Start(2, Plan::Sleep, drops.token())).unwrap();
    piper
        .tell(Start(3, Plan::External(gate.clone()), drops.token()))
        .unwrap();
    piper
        .tell(Start(4, Plan::PanicAtOnce, drops.token()))
        .unwrap();
    piper
        .tell(Start(5, Plan::PanicLater, drops.token()))
        .unwrap();
    // The actor goes on after both panics.
    assert_eq!(piper.ask(Ping).wait(), Ok(7));
    wait_for("the ready and the sleeping future", LONG, || {
        got.lock().unwrap().len() >= 2
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        got.lock().unwrap().len(),
        2,
        "the gated future has not run on"
    );
    gate.open();
    wait_for("the gated future", LONG, || got.lock().unwrap().len() >= 3);
    wait_for("every future dropped", LONG, || drops.get() == 5);
    assert_eq!(piper.ask(Ping).wait(), Ok(7));

    let got = got.lock().unwrap().clone();
    let mut values: Vec<u32> = got.iter().map(|(n, _)| *n).collect();
    values.sort();
    assert_eq!(values, [1, 2, 3], "no message from the panicking futures");
    // The ready future ran in the handler's turn, on the thread of that turn: no trip
    // through tokio. That thread is one of the actor's (a worker of its pool, or its own), or
    // on the pool this thread, which ran the turn itself while it waited for the `Ping`
    // behind it (`SystemBuilder::waiters_help`).
    let ready_thread = &got.iter().find(|(n, _)| *n == 1).unwrap().1;
    let this_thread = std::thread::current().name().unwrap_or("").to_owned();
    assert!(
        first_handler.starts_with(prefix)
            || (placement == Placement::Pool && first_handler == this_thread),
        "{first_handler:?}"
    );
    assert_eq!(
        ready_thread, &first_handler,
        "the ready future ran on another thread than its handler"
    );
    system.shutdown();
    assert_eq!(drops.get(), 5, "created == dropped");
}

#[test]
fn every_path_out_of_the_first_poll_on_the_pool() {
    every_path(Placement::Pool, "pipepool");
}

#[test]
fn every_path_out_of_the_first_poll_on_a_dedicated_thread() {
    every_path(Placement::Thread, "pipethread");
}

/// Many pipes of finished futures in a row arrive in order, each once.
#[test]
fn finished_futures_arrive_in_order() {
    let system = System::new();
    let got = Arc::new(Mutex::new(Vec::new()));
    let piper = system.spawn(Piper {
        got: got.clone(),
        handler_thread: Arc::default(),
    });
    let drops = DropCounter::default();
    for n in 0..1000 {
        piper.tell(Start(n, Plan::Ready, drops.token())).unwrap();
    }
    wait_for("1000 pipes", LONG, || got.lock().unwrap().len() == 1000);
    let values: Vec<u32> = got.lock().unwrap().iter().map(|(n, _)| *n).collect();
    assert_eq!(values, (0..1000).collect::<Vec<_>>());
    system.shutdown();
    assert_eq!(drops.get(), 1000);
}
