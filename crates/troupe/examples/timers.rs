//! Delayed and periodic messages, cancelling, and asks with a timeout.
//! Run: `cargo run -p troupe --example timers`
use std::time::Duration;

use troupe::{Actor, AskError, Context, Handler, Message, System, TimerId};

struct Heartbeat {
    beats: u32,
    timer: Option<TimerId>,
}

impl Actor for Heartbeat {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.timer = Some(ctx.send_interval(Duration::from_millis(20), || Beat));
        ctx.send_after(Duration::from_millis(110), Enough);
    }
}

struct Beat;
impl Message for Beat {
    type Reply = ();
}
impl Handler<Beat> for Heartbeat {
    fn handle(&mut self, _: Beat, _: &mut Context<Self>) {
        self.beats += 1;
        println!("beat {}", self.beats);
    }
}

struct Enough;
impl Message for Enough {
    type Reply = ();
}
impl Handler<Enough> for Heartbeat {
    fn handle(&mut self, _: Enough, ctx: &mut Context<Self>) {
        if let Some(timer) = self.timer.take() {
            println!("cancelled: {}", ctx.cancel_timer(timer));
        }
    }
}

struct Slow;
impl Message for Slow {
    type Reply = ();
}
impl Handler<Slow> for Heartbeat {
    fn handle(&mut self, _: Slow, _: &mut Context<Self>) {
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let system = System::new();
    let heart = system.spawn(Heartbeat {
        beats: 0,
        timer: None,
    });
    std::thread::sleep(Duration::from_millis(200));
    let reply = heart.ask_timeout(Slow, Duration::from_millis(10)).wait();
    assert_eq!(reply, Err(AskError::Timeout(Duration::from_millis(10))));
    println!("slow ask: {reply:?}");
    system.shutdown();
}
