#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Telling and asking: delivery, order, typed errors, and the three ways to wait for a reply.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{wait_for, DropCounter, LONG};
use troupe::{Actor, Addr, AskError, Context, Handler, Message, Placement, System};

struct Recorder {
    seen: Vec<(usize, u64)>,
}
impl Actor for Recorder {}

struct Note {
    from: usize,
    seq: u64,
}
impl Message for Note {
    type Reply = ();
}
impl Handler<Note> for Recorder {
    fn handle(&mut self, msg: Note, _: &mut Context<Self>) {
        self.seen.push((msg.from, msg.seq));
    }
}

struct Take;
impl Message for Take {
    type Reply = Vec<(usize, u64)>;
}
impl Handler<Take> for Recorder {
    fn handle(&mut self, _: Take, _: &mut Context<Self>) -> Vec<(usize, u64)> {
        std::mem::take(&mut self.seen)
    }
}

/// Many threads tell one actor at once: every message arrives exactly once and each sender's
/// messages arrive in the order sent.
#[test]
fn stampede_keeps_per_sender_order() {
    const SENDERS: usize = 4;
    const PER: u64 = 50_000;
    for placement in [Placement::Pool, Placement::Thread] {
        let system = System::builder().workers(2).build().unwrap();
        let recorder = system.spawn_on(Recorder { seen: Vec::new() }, placement);
        let senders: Vec<_> = (0..SENDERS)
            .map(|from| {
                let r = recorder.clone();
                std::thread::spawn(move || {
                    for seq in 0..PER {
                        r.tell(Note { from, seq }).unwrap();
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().unwrap();
        }
        let seen = recorder.ask(Take).wait_timeout(LONG).unwrap();
        assert_eq!(seen.len(), SENDERS * PER as usize);
        let mut next = [0u64; SENDERS];
        for (from, seq) in seen {
            assert_eq!(next[from], seq, "sender {from} out of order");
            next[from] += 1;
        }
        system.shutdown();
    }
}

struct Echo;
impl Actor for Echo {}

struct Ping(u64);
impl Message for Ping {
    type Reply = u64;
}
impl Handler<Ping> for Echo {
    fn handle(&mut self, msg: Ping, _: &mut Context<Self>) -> u64 {
        msg.0 * 2
    }
}

struct Nap(Duration);
impl Message for Nap {
    type Reply = ();
}
impl Handler<Nap> for Echo {
    fn handle(&mut self, msg: Nap, _: &mut Context<Self>) {
        std::thread::sleep(msg.0);
    }
}

#[test]
fn ask_waits_from_thread_and_from_async() {
    let system = System::new();
    let echo = system.spawn(Echo);
    assert_eq!(echo.ask(Ping(21)).wait(), Ok(42));
    assert_eq!(echo.ask(Ping(5)).wait_timeout(LONG), Ok(10));
    // From async code: a minimal executor that polls the future with a thread-parking waker.
    let result = block_on(echo.ask(Ping(50)));
    assert_eq!(result, Ok(100));
    system.shutdown();
}

#[test]
fn ask_stopped_actor_fails_promptly() {
    let system = System::new();
    let echo = system.spawn(Echo);
    echo.stop();
    wait_for("the actor to stop", LONG, || echo.is_stopped());
    let start = Instant::now();
    assert_eq!(echo.ask(Ping(1)).wait(), Err(AskError::Stopped));
    assert_eq!(block_on(echo.ask(Ping(1))), Err(AskError::Stopped));
    assert!(start.elapsed() < Duration::from_secs(5));
    let refused = echo.tell(Ping(7)).unwrap_err();
    assert_eq!(
        refused.into_inner().0,
        7,
        "a refused message is handed back"
    );
    system.shutdown();
}

#[test]
fn ask_timeout_is_typed() {
    let system = System::new();
    let echo = system.spawn(Echo);
    echo.tell(Nap(Duration::from_millis(300))).unwrap();
    let start = Instant::now();
    let result = echo.ask(Ping(1)).wait_timeout(Duration::from_millis(50));
    assert_eq!(result, Err(AskError::Timeout(Duration::from_millis(50))));
    assert!(start.elapsed() < Duration::from_secs(5));
    system.shutdown();
}

/// The asker is an actor: the reply comes back to it as a message.
struct Asker {
    target: Addr<Echo>,
    report: mpsc::Sender<Result<u64, AskError>>,
}
impl Actor for Asker {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.target.ask(Ping(4)).pipe_to(&ctx.myself(), Answer);
    }
}
struct Answer(Result<u64, AskError>);
impl Message for Answer {
    type Reply = ();
}
impl Handler<Answer> for Asker {
    fn handle(&mut self, msg: Answer, _: &mut Context<Self>) {
        self.report.send(msg.0).unwrap();
    }
}

#[test]
fn ask_answered_as_a_message() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let (tx, rx) = mpsc::channel();
    system.spawn(Asker {
        target: echo.clone(),
        report: tx.clone(),
    });
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(8));
    echo.stop();
    wait_for("the echo to stop", LONG, || echo.is_stopped());
    system.spawn(Asker {
        target: echo,
        report: tx,
    });
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Err(AskError::Stopped));
    system.shutdown();
}

/// Messages big enough to be boxed behave like small ones, and nothing leaks either way.
struct Big([u64; 16], #[allow(dead_code)] crate::common::Counted);
impl Message for Big {
    type Reply = u64;
}
struct Small(#[allow(dead_code)] crate::common::Counted);
impl Message for Small {
    type Reply = ();
}
impl Handler<Big> for Echo {
    fn handle(&mut self, msg: Big, _: &mut Context<Self>) -> u64 {
        msg.0.iter().sum()
    }
}
impl Handler<Small> for Echo {
    fn handle(&mut self, _: Small, _: &mut Context<Self>) {}
}

#[test]
fn big_and_small_messages_are_dropped_once() {
    let drops = DropCounter::default();
    let system = System::new();
    let echo = system.spawn(Echo);
    for _ in 0..100 {
        echo.tell(Small(drops.token())).unwrap();
        assert_eq!(echo.ask(Big([1; 16], drops.token())).wait(), Ok(16));
    }
    system.shutdown();
    assert_eq!(drops.get(), 200);
}

/// Drives a future to completion on this thread (enough for tests; no runtime needed).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context as TaskContext, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = TaskContext::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    let start = Instant::now();
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        assert!(start.elapsed() < LONG, "future never completed");
        std::thread::park_timeout(Duration::from_millis(100));
    }
}

/// Another actor type that answers `Ping` (differently from `Echo`), for recipients.
struct Doubler;
impl Actor for Doubler {}
impl Handler<Ping> for Doubler {
    fn handle(&mut self, msg: Ping, _: &mut Context<Self>) -> u64 {
        msg.0 + 1
    }
}

/// Recipients hide the actor's type behind the message's; joining an actor waits for its end,
/// from a thread or async code.
#[test]
fn recipients_and_joining() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let doubler = system.spawn(Doubler);
    let pingable: Vec<troupe::Recipient<Ping>> = vec![echo.recipient(), doubler.clone().into()];
    let answers: Vec<_> = pingable
        .iter()
        .map(|r| r.ask(Ping(10)).wait_timeout(LONG).unwrap())
        .collect();
    assert_eq!(answers, [20, 11]);
    assert_eq!(pingable[1].id(), doubler.id());

    let joined = doubler.stopped();
    assert!(!pingable[1].is_stopped());
    doubler.stop();
    assert_eq!(joined.wait_timeout(LONG), Ok(troupe::StopReason::Normal));
    assert!(pingable[1].is_stopped());
    assert!(pingable[1].tell(Ping(1)).is_err());
    // After the end, at once; and from async code.
    assert_eq!(
        doubler.stopped().wait_timeout(LONG),
        Ok(troupe::StopReason::Normal)
    );
    let echo_end = echo.stopped();
    echo.stop();
    system.block_on(async {
        assert_eq!(echo_end.await, Ok(troupe::StopReason::Normal));
    });
    system.shutdown();
}
