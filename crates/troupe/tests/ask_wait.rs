//! `Ask::wait` from a plain thread: a reply that comes while the asker is still looking for it
//! (the short spin), one that comes after it went to sleep on the condition variable, and
//! failures on both paths.

use std::time::Duration;

use troupe::{Actor, AskError, Context, Handler, Message, System};

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
impl Handler<Forget> for Echo {
    fn handle(&mut self, msg: Forget, ctx: &mut Context<Self>) -> u64 {
        let reply = ctx.reply_later::<Forget>();
        std::thread::sleep(msg.0);
        drop(reply);
        0
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
    // Stopped: the ask fails, on whichever path it is waiting.
    let mut failed = 0;
    for _ in 0..100 {
        if echo.ask(Now(0)).wait().is_err() {
            failed += 1;
        }
    }
    assert_eq!(failed, 100);
    system.shutdown();
}
