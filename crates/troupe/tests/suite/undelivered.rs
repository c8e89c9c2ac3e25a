#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Told messages an actor accepted but stops before handling come back to it
//! (`Handler::undelivered`), in order, on every way an actor stops: its own stop, a failure, a
//! stop from outside, on the pool and on a thread of its own, observed or not. Asks never come
//! back (their askers are told `Stopped`), a panicking hook does not stop the rest, and every
//! message is dropped exactly once.

use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use crate::common::{quiet_panics_on_purpose, Counted, DropCounter, LONG};
use troupe::{
    Actor, AskError, Context, Deferred, DeferredHandler, Handler, Message, Placement, System,
};

/// Holds its first message until the test has queued the rest, then ends as told.
struct Held {
    gate: Arc<Barrier>,
    back: Arc<Mutex<Vec<u32>>>,
}
impl Actor for Held {}

/// What the first message does once the gate opens.
#[derive(Clone, Copy)]
enum Then {
    Stop,
    Panic,
    Sleep,
}
struct Hold(Then);
impl Message for Hold {
    type Reply = ();
}
impl Handler<Hold> for Held {
    fn handle(&mut self, Hold(then): Hold, ctx: &mut Context<Self>) {
        self.gate.wait();
        // The test queues the rest behind this message meanwhile.
        std::thread::sleep(Duration::from_millis(50));
        match then {
            Then::Stop => ctx.stop(),
            Then::Panic => panic!("fails on purpose"),
            Then::Sleep => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// A told job; `panic_back` makes its hook panic.
struct Job {
    n: u32,
    panic_back: bool,
    _token: Counted,
}
impl Message for Job {
    type Reply = ();
}
impl Handler<Job> for Held {
    fn handle(&mut self, job: Job, _: &mut Context<Self>) {
        panic!("job {} was handled, not given back", job.n);
    }
    fn undelivered(&mut self, job: Job, _: &mut Context<Self>) {
        if job.panic_back {
            panic!("the hook fails on purpose");
        }
        self.back.lock().unwrap().push(job.n);
    }
}

/// Asked: never given back.
struct Echo(u32);
impl Message for Echo {
    type Reply = u32;
}
impl Handler<Echo> for Held {
    fn handle(&mut self, msg: Echo, _: &mut Context<Self>) -> u32 {
        msg.0
    }
    fn undelivered(&mut self, msg: Echo, _: &mut Context<Self>) {
        panic!("the ask {} came back to the hook", msg.0);
    }
}

/// Told to a deferring handler.
struct Later(u32);
impl Message for Later {
    type Reply = u32;
}
impl DeferredHandler<Later> for Held {
    fn handle(&mut self, msg: Later, reply: Deferred<u32>, _: &mut Context<Self>) {
        let _ = reply.send(msg.0);
    }
    fn undelivered(&mut self, msg: Later, _: &mut Context<Self>) {
        self.back.lock().unwrap().push(1000 + msg.0);
    }
}

/// Spawns a `Held` (on `placement`) in `system`, tells it `Hold(then)`, and, while it holds,
/// queues jobs 1 to 3 (the second's hook panics if `panic_second`), an ask, and a `Later(4)`.
/// Returns what came back, once the actor has stopped, and the ask's answer.
fn run(
    system: &System,
    placement: Placement,
    then: Then,
    stop_from_outside: bool,
    panic_second: bool,
    drops: &DropCounter,
) -> (Vec<u32>, Result<u32, AskError>) {
    let gate = Arc::new(Barrier::new(2));
    let back = Arc::new(Mutex::new(Vec::new()));
    let held = system.spawn_on(
        Held {
            gate: gate.clone(),
            back: back.clone(),
        },
        placement,
    );
    held.tell(Hold(then)).unwrap();
    gate.wait();
    for n in 1..=3 {
        held.tell(Job {
            n,
            panic_back: panic_second && n == 2,
            _token: drops.token(),
        })
        .unwrap();
    }
    let ask = held.ask(Echo(7));
    held.tell(Later(4)).unwrap();
    if stop_from_outside {
        // Read at the start of the next turn (the system runs one message per turn), before
        // the queued messages: they come back instead of being handled.
        held.stop();
    }
    let answer = ask.wait_timeout(LONG);
    held.stopped().wait_timeout(LONG).expect("the actor ends");
    let back = back.lock().unwrap().clone();
    (back, answer)
}

/// `run` in `system`, then checks that the jobs and the `Later` came back (`back`), the ask
/// was told `Stopped`, and every job was dropped once; shuts the system down.
fn expect_back(
    system: System,
    placement: Placement,
    then: Then,
    stop_from_outside: bool,
    panic_second: bool,
    back: &[u32],
) {
    let drops = DropCounter::default();
    let (given, answer) = run(
        &system,
        placement,
        then,
        stop_from_outside,
        panic_second,
        &drops,
    );
    assert_eq!(given, back);
    assert_eq!(answer, Err(AskError::Stopped));
    assert_eq!(drops.get(), 3, "every job dropped once");
    system.shutdown();
}

#[test]
fn tells_left_at_a_stop_come_back_in_order_and_asks_are_told_stopped() {
    let all = [1, 2, 3, 1004];
    expect_back(
        System::new(),
        Placement::Pool,
        Then::Stop,
        false,
        false,
        &all,
    );
}

#[test]
fn a_failed_actor_gets_its_tells_back() {
    quiet_panics_on_purpose();
    let all = [1, 2, 3, 1004];
    expect_back(
        System::new(),
        Placement::Pool,
        Then::Panic,
        false,
        false,
        &all,
    );
}

#[test]
fn a_stop_from_outside_gives_the_queued_tells_back() {
    let system = System::builder().throughput(1).build().unwrap();
    expect_back(
        system,
        Placement::Pool,
        Then::Sleep,
        true,
        false,
        &[1, 2, 3, 1004],
    );
}

/// Job 2's hook panics; the others still come back, and job 2 is dropped all the same.
#[test]
fn a_panicking_hook_does_not_stop_the_rest() {
    quiet_panics_on_purpose();
    expect_back(
        System::new(),
        Placement::Pool,
        Then::Stop,
        false,
        true,
        &[1, 3, 1004],
    );
}

#[test]
fn an_actor_on_its_own_thread_gets_its_tells_back() {
    let all = [1, 2, 3, 1004];
    expect_back(
        System::new(),
        Placement::Thread,
        Then::Stop,
        false,
        false,
        &all,
    );
}

#[test]
fn an_observed_actor_gets_its_tells_back() {
    let system = System::builder().workers(2).observe().build().unwrap();
    expect_back(
        system,
        Placement::Pool,
        Then::Stop,
        false,
        false,
        &[1, 2, 3, 1004],
    );
}

/// Shutdown stops every actor: what a top-level actor still had queued comes back to it too
/// (read at the start of its next turn: the system runs one message per turn).
#[test]
fn shutdown_gives_queued_tells_back() {
    let system = System::builder().throughput(1).build().unwrap();
    let drops = DropCounter::default();
    let gate = Arc::new(Barrier::new(2));
    let back = Arc::new(Mutex::new(Vec::new()));
    let held = system.spawn(Held {
        gate: gate.clone(),
        back: back.clone(),
    });
    held.tell(Hold(Then::Sleep)).unwrap();
    gate.wait();
    for n in 1..=2 {
        held.tell(Job {
            n,
            panic_back: false,
            _token: drops.token(),
        })
        .unwrap();
    }
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        system.shutdown();
        let _ = done.send(());
    });
    finished.recv_timeout(LONG).expect("shutdown finished");
    assert_eq!(*back.lock().unwrap(), [1, 2]);
    assert_eq!(drops.get(), 2);
}
