//! `Ask::wait` from a plain thread: a reply that comes while the asker is still looking for it
//! (the short spin), one that comes after it went to sleep (parked), and failures on both
//! paths. And every reply is dropped exactly once, whichever way it is taken or given up.

use std::time::Duration;

use crate::common::{wait_for, Counted, DropCounter};
use troupe::{Actor, Addr, AskError, Context, Handler, Message, System};

struct Echo;
impl Actor for Echo {}

struct Now(u64);
impl Message for Now {
    type Reply = u64;
}
impl Handler<Now> for Echo {
    fn handle(&mut self, msg: Now, _: &mut Context<Self>) -> u64 {
        msg.0 + 1
    }
}

/// Replies after a pause far longer than the asker's spin.
struct Slow(u64, Duration);
impl Message for Slow {
    type Reply = u64;
}
impl Handler<Slow> for Echo {
    fn handle(&mut self, msg: Slow, _: &mut Context<Self>) -> u64 {
        std::thread::sleep(msg.1);
        msg.0 + 1
    }
}

/// Never replies: the deferred reply is dropped unsent, at once or after a pause.
struct Forget(Duration);
impl Message for Forget {
    type Reply = u64;
}
impl troupe::DeferredHandler<Forget> for Echo {
    fn handle(&mut self, msg: Forget, reply: troupe::Deferred<u64>, _: &mut Context<Self>) {
        std::thread::sleep(msg.0);
        drop(reply);
    }
}

#[test]
fn fast_and_slow_replies_and_failures_all_arrive() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let mut last = 0;
    for _ in 0..10_000 {
        last = echo.ask(Now(last)).wait().unwrap();
    }
    assert_eq!(last, 10_000);
    for pause in [Duration::from_millis(1), Duration::from_millis(30)] {
        assert_eq!(echo.ask(Slow(1, pause)).wait(), Ok(2));
        assert_eq!(echo.ask(Forget(pause)).wait(), Err(AskError::NoReply));
    }
    assert_eq!(
        echo.ask(Forget(Duration::ZERO)).wait(),
        Err(AskError::NoReply)
    );
    echo.stop();
    // Stopping: the ask fails, on whichever path it is waiting. The actor may still be in the
    // turn that ran `Forget` (it looks at signals between batches of messages), so the first
    // asks may still be answered; once one fails, every later one does.
    let failed: Vec<bool> = (0..100).map(|_| echo.ask(Now(0)).wait().is_err()).collect();
    let first = failed
        .iter()
        .position(|f| *f)
        .expect("a stopping actor fails asks");
    assert!(failed[first..].iter().all(|f| *f), "{failed:?}");
    // Stopped: every ask fails.
    wait_for("the actor stopped", Duration::from_secs(10), || {
        echo.is_stopped()
    });
    for _ in 0..100 {
        assert_eq!(echo.ask(Now(0)).wait(), Err(AskError::Stopped));
    }
    system.shutdown();
}

/// `wait_timeout` spins as `wait` does before it parks, and keeps its deadline either way:
/// quick replies (taken while spinning), slow ones within the deadline (parked), deadlines
/// shorter than the spin and longer, and zero.
#[test]
fn wait_timeout_takes_quick_and_slow_replies_and_keeps_its_deadline() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let mut last = 0;
    for _ in 0..10_000 {
        last = echo
            .ask(Now(last))
            .wait_timeout(Duration::from_secs(30))
            .unwrap();
    }
    assert_eq!(last, 10_000);
    assert_eq!(
        echo.ask(Slow(1, Duration::from_millis(30)))
            .wait_timeout(Duration::from_secs(30)),
        Ok(2)
    );
    assert_eq!(
        echo.ask(Forget(Duration::from_millis(5)))
            .wait_timeout(Duration::from_secs(30)),
        Err(AskError::NoReply)
    );
    // Deadlines before the reply: shorter than the spin (a few microseconds), and longer.
    for limit in [
        Duration::ZERO,
        Duration::from_micros(5),
        Duration::from_millis(5),
    ] {
        let started = std::time::Instant::now();
        let got = echo
            .ask(Slow(1, Duration::from_secs(1)))
            .wait_timeout(limit);
        let took = started.elapsed();
        assert_eq!(got, Err(AskError::Timeout(limit)));
        assert!(took >= limit, "gave up after {took:?}, before {limit:?}");
        // Not held to the end of the reply: gave up well before it.
        assert!(
            took < Duration::from_millis(500),
            "gave up only after {took:?}"
        );
        // The slow reply still comes (and is dropped); the next ask is answered.
        assert_eq!(
            echo.ask(Now(7)).wait_timeout(Duration::from_secs(30)),
            Ok(8)
        );
    }
    system.shutdown();
}

/// Hands the token it is given back as the reply, after `pause`.
struct Give(Counted, Duration);
impl Message for Give {
    type Reply = Counted;
}
impl Handler<Give> for Echo {
    fn handle(&mut self, msg: Give, _: &mut Context<Self>) -> Counted {
        if !msg.1.is_zero() {
            std::thread::sleep(msg.1);
        }
        msg.0
    }
}

/// Receives piped replies and drops them.
struct Sink;
impl Actor for Sink {}
struct Got(#[allow(dead_code)] Result<Counted, AskError>);
impl Message for Got {
    type Reply = ();
}
impl Handler<Got> for Sink {
    fn handle(&mut self, _: Got, _: &mut Context<Self>) {}
}

/// Replies taken by `wait` and `.await`, abandoned before and after they come, piped before
/// and after they come, raced by an `ask_timeout`, given up by `wait_timeout`, and slots
/// reused thousands of times: every reply created is dropped exactly once.
#[test]
fn every_reply_is_dropped_once_whichever_way_it_goes() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let sink: Addr<Sink> = system.spawn(Sink);
    let drops = DropCounter::default();
    let created = 6 * 1_000 + 2 * 200;
    let give = || Give(drops.token(), Duration::ZERO);
    for _ in 0..1_000 {
        drop(echo.ask(give()).wait());
    }
    system.block_on(async {
        for _ in 0..1_000 {
            drop(echo.ask(give()).await);
        }
    });
    for _ in 0..1_000 {
        drop(echo.ask(give())); // abandoned, most often before the reply
    }
    for _ in 0..1_000 {
        let ask = echo.ask(give());
        echo.ask(Now(0)).wait().unwrap(); // the first reply has been sent by now
        drop(ask);
    }
    for i in 0..1_000 {
        let ask = echo.ask(give());
        if i % 2 == 1 {
            echo.ask(Now(0)).wait().unwrap();
        }
        ask.pipe_to(&sink, Got);
    }
    for _ in 0..1_000 {
        let _ = echo.ask_timeout(give(), Duration::from_micros(1)).wait();
    }
    for pause in [Duration::ZERO, Duration::from_millis(1)] {
        for _ in 0..200 {
            let _ = echo
                .ask(Give(drops.token(), pause))
                .wait_timeout(Duration::from_micros(500));
        }
    }
    wait_for("every reply dropped", Duration::from_secs(30), || {
        drops.get() == created
    });
    system.shutdown();
    assert_eq!(drops.get(), created);
}
