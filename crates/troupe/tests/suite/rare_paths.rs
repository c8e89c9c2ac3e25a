#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! The rare paths of the core, each a scenario that once lost a message, hung, or touched freed
//! memory: sends from actors on the pool to actors that are awaiting, suspended or restarting;
//! continuations that send; panics while signals are read and while a stop drains; shutdown
//! and blocking waits from inside handlers; timers of asks that were answered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{wait_for, DropCounter, LONG};
use troupe::{
    Actor, Addr, AskError, Context, Handler, Message, Overflow, SpawnOptions, SupervisorStrategy,
    System,
};

/// Silences the default panic message for panics the tests cause on purpose.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if !msg.contains("on purpose") {
            eprintln!("{msg}");
        }
    }));
}

/// Runs `f` on a thread of its own and fails the test if it has not returned within `limit`
/// (so a hang is a failure with a name, not a stuck test run).
fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(_) => panic!("{what}: still running after {limit:?} (hung)"),
    }
}

// ---------------------------------------------------------------------------------------------
// A turn's end: the counter of handled messages is written before the actor goes idle.

struct Sink;
impl Actor for Sink {}
struct Drip;
impl Message for Drip {
    type Reply = ();
}
impl Handler<Drip> for Sink {
    fn handle(&mut self, _: Drip, _: &mut Context<Self>) {}
}

/// Two threads feed an actor that goes idle after almost every message, so its turns start on
/// both workers one after another. Every handled message is counted exactly: a count written
/// after the actor went idle would race the next turn (and, after a final turn, freed memory).
#[test]
fn processed_count_is_exact_when_turns_move_between_workers() {
    let system = System::builder().workers(2).build().unwrap();
    for _ in 0..4 {
        let sink = system.spawn(Sink);
        let per_thread = 50_000u64;
        let feeders: Vec<_> = (0..2)
            .map(|_| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        sink.tell(Drip).unwrap();
                        if i % 2 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for f in feeders {
            f.join().unwrap();
        }
        wait_for("every drip handled", LONG, || sink.mailbox_len() == 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        while sink.metrics().processed != 2 * per_thread && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sink.metrics().processed, 2 * per_thread, "lost counts");
    }
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// A hand-off must not be overwritten by user code that runs before the turn takes it.

/// Holds its mailbox on a future the test completes; its continuation tells `Other`.
struct Holder {
    other: Option<Addr<Other>>,
    got: Arc<Mutex<Vec<u64>>>,
}
impl Actor for Holder {}
struct Small(u64);
impl Message for Small {
    type Reply = ();
}
impl Handler<Small> for Holder {
    fn handle(&mut self, msg: Small, _: &mut Context<Self>) {
        self.got.lock().unwrap().push(msg.0);
    }
}
struct HoldOn(tokio::sync::oneshot::Receiver<()>, Addr<Other>);
impl Message for HoldOn {
    type Reply = ();
}
impl Handler<HoldOn> for Holder {
    fn handle(&mut self, msg: HoldOn, ctx: &mut Context<Self>) {
        self.other = Some(msg.1);
        let rx = msg.0;
        ctx.await_then(rx, |me: &mut Holder, _, _| {
            // Runs as the actor reads its signals: a tell to an idle actor on this pool.
            let big = Big([7; 8], String::from("for other"));
            me.other.as_ref().unwrap().tell(big).unwrap();
        });
    }
}

/// A different actor type with a larger, boxed message.
struct Other {
    got: Arc<Mutex<Vec<String>>>,
}
impl Actor for Other {}
struct Big([u64; 8], String);
impl Message for Big {
    type Reply = ();
}
impl Handler<Big> for Other {
    fn handle(&mut self, msg: Big, _: &mut Context<Self>) {
        assert_eq!(msg.0, [7; 8]);
        self.got.lock().unwrap().push(msg.1);
    }
}

/// Sends `Small(42)` to the holder from the pool (a hand-off, the holder being idle), then
/// completes the holder's future and waits until its `Resume` is pending, so the holder's next
/// turn reads the signal (and runs the continuation, which sends) with the hand-off in hand.
struct Trigger;
impl Actor for Trigger {}
struct Fire {
    holder: Addr<Holder>,
    release: tokio::sync::oneshot::Sender<()>,
}
impl Message for Fire {
    type Reply = ();
}
impl Handler<Fire> for Trigger {
    fn handle(&mut self, msg: Fire, _: &mut Context<Self>) {
        msg.holder.tell(Small(42)).unwrap();
        let _ = msg.release.send(());
        // Let the I/O thread finish the future and signal the holder.
        std::thread::sleep(Duration::from_millis(30));
    }
}

#[test]
fn hand_off_survives_a_continuation_that_sends() {
    for _ in 0..20 {
        let system = System::builder().workers(1).build().unwrap();
        let holder_got = Arc::new(Mutex::new(Vec::new()));
        let other_got = Arc::new(Mutex::new(Vec::new()));
        let other = system.spawn(Other {
            got: other_got.clone(),
        });
        let holder = system.spawn(Holder {
            other: None,
            got: holder_got.clone(),
        });
        let trigger = system.spawn(Trigger);
        let (release, rx) = tokio::sync::oneshot::channel();
        holder.tell(HoldOn(rx, other.clone())).unwrap();
        // Let the holder go idle, awaiting.
        std::thread::sleep(Duration::from_millis(20));
        trigger
            .tell(Fire {
                holder: holder.clone(),
                release,
            })
            .unwrap();
        wait_for("both messages", LONG, || {
            holder_got.lock().unwrap().len() == 1 && other_got.lock().unwrap().len() == 1
        });
        assert_eq!(*holder_got.lock().unwrap(), [42]);
        assert_eq!(*other_got.lock().unwrap(), ["for other"]);
        system.shutdown();
    }
}

// ---------------------------------------------------------------------------------------------
// Messages sent to an actor that waits for its restart all reach the new instance.

struct Flaky {
    instance: usize,
}
impl Actor for Flaky {}
struct Crash;
impl Message for Crash {
    type Reply = ();
}
impl Handler<Crash> for Flaky {
    fn handle(&mut self, _: Crash, _: &mut Context<Self>) {
        panic!("crash on purpose");
    }
}
struct Which(u64);
impl Message for Which {
    type Reply = (usize, u64);
}
impl Handler<Which> for Flaky {
    fn handle(&mut self, msg: Which, _: &mut Context<Self>) -> (usize, u64) {
        (self.instance, msg.0)
    }
}

struct Parent {
    made: Arc<AtomicUsize>,
}
impl Actor for Parent {
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one()
            .backoff(Duration::from_millis(300), Duration::from_millis(300))
    }
}
struct MakeFlaky;
impl Message for MakeFlaky {
    type Reply = Addr<Flaky>;
}
impl Handler<MakeFlaky> for Parent {
    fn handle(&mut self, _: MakeFlaky, ctx: &mut Context<Self>) -> Addr<Flaky> {
        let made = self.made.clone();
        ctx.spawn_supervised(
            move || Flaky {
                instance: made.fetch_add(1, Ordering::SeqCst),
            },
            SpawnOptions::new(),
        )
    }
}

/// Asks the child once per turn, 30 ms apart, from the pool, and collects the replies.
type Replies = Arc<Mutex<Vec<Result<(usize, u64), AskError>>>>;

struct Feeder {
    child: Addr<Flaky>,
    left: u64,
    replies: Replies,
}
impl Actor for Feeder {}
struct FeedNext;
impl Message for FeedNext {
    type Reply = ();
}
struct Reply(Result<(usize, u64), AskError>);
impl Message for Reply {
    type Reply = ();
}
impl Handler<FeedNext> for Feeder {
    fn handle(&mut self, _: FeedNext, ctx: &mut Context<Self>) {
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        self.child
            .ask(Which(self.left))
            .pipe_to(&ctx.myself(), Reply);
        ctx.send_after(Duration::from_millis(30), FeedNext);
    }
}
impl Handler<Reply> for Feeder {
    fn handle(&mut self, msg: Reply, _: &mut Context<Self>) {
        self.replies.lock().unwrap().push(msg.0);
    }
}

#[test]
fn messages_to_a_child_waiting_for_its_restart_all_arrive() {
    quiet_panics();
    let system = System::new();
    let made = Arc::new(AtomicUsize::new(0));
    let parent = system.spawn(Parent { made: made.clone() });
    let child = parent.ask(MakeFlaky).wait_timeout(LONG).unwrap();
    child.tell(Crash).unwrap();
    // The child fails and waits, with an empty mailbox, for its restart 300 ms later.
    std::thread::sleep(Duration::from_millis(50));
    let replies = Arc::new(Mutex::new(Vec::new()));
    let feeder = system.spawn(Feeder {
        child: child.clone(),
        left: 8,
        replies: replies.clone(),
    });
    feeder.tell(FeedNext).unwrap();
    wait_for("eight replies", LONG, || replies.lock().unwrap().len() == 8);
    let replies = replies.lock().unwrap().clone();
    for reply in &replies {
        assert!(
            matches!(reply, Ok((1, _))),
            "every ask reaches the restarted instance: {replies:?}"
        );
    }
    let mut order: Vec<u64> = replies.iter().map(|r| r.unwrap().1).collect();
    order.reverse();
    assert_eq!(order, (0..8).collect::<Vec<_>>(), "in the order sent");
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// A panic while signals are read does not lose the signals after it.

struct Fussy;
impl Actor for Fussy {
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        panic!("strategy fails on purpose");
    }
}
struct Kid;
impl Actor for Kid {}
struct Die;
impl Message for Die {
    type Reply = ();
}
impl Handler<Die> for Kid {
    fn handle(&mut self, _: Die, _: &mut Context<Self>) {
        panic!("kid dies on purpose");
    }
}
struct Leave;
impl Message for Leave {
    type Reply = ();
}
impl Handler<Leave> for Kid {
    fn handle(&mut self, _: Leave, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
struct MakeKids;
impl Message for MakeKids {
    type Reply = (Addr<Kid>, Addr<Kid>);
}
impl Handler<MakeKids> for Fussy {
    fn handle(&mut self, _: MakeKids, ctx: &mut Context<Self>) -> (Addr<Kid>, Addr<Kid>) {
        let a = ctx.spawn_supervised(|| Kid, SpawnOptions::new());
        let b = ctx.spawn_supervised(
            || Kid,
            SpawnOptions::new().restart(troupe::Restart::Temporary),
        );
        (a, b)
    }
}
struct Busy(Duration);
impl Message for Busy {
    type Reply = ();
}
impl Handler<Busy> for Fussy {
    fn handle(&mut self, msg: Busy, _: &mut Context<Self>) {
        std::thread::sleep(msg.0);
    }
}

#[test]
fn panic_while_reading_signals_keeps_the_rest() {
    quiet_panics();
    let system = System::new();
    let parent = system.spawn(Fussy);
    let (a, b) = parent.ask(MakeKids).wait_timeout(LONG).unwrap();
    // While the parent is busy, one child fails and the other stops: both signals wait in one
    // batch, the failure first (its supervision panics), the stop second.
    parent.tell(Busy(Duration::from_millis(200))).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    a.tell(Die).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    b.tell(Leave).unwrap();
    wait_for("both children down", LONG, || {
        a.is_stopped() || b.is_stopped()
    });
    let result = within("shutdown", Duration::from_secs(20), move || {
        system.shutdown_timeout(Duration::from_secs(10))
    });
    assert_eq!(result, Ok(()), "every child's end reached its parent");
}

// ---------------------------------------------------------------------------------------------
// A message whose destructor panics does not stop the drain of a stopping actor.

struct Loud;
impl Drop for Loud {
    fn drop(&mut self) {
        panic!("drop fails on purpose");
    }
}
struct LoudMsg(#[allow(dead_code)] Loud);
impl Message for LoudMsg {
    type Reply = ();
}
struct Gate;
impl Actor for Gate {}
struct Wait(Arc<std::sync::Barrier>);
impl Message for Wait {
    type Reply = ();
}
impl Handler<Wait> for Gate {
    fn handle(&mut self, msg: Wait, _: &mut Context<Self>) {
        msg.0.wait();
        std::thread::sleep(Duration::from_millis(50));
    }
}
/// Waits like `Wait`, then stops the actor: what was queued meanwhile is drained, not handled.
struct WaitThenStop(Arc<std::sync::Barrier>);
impl Message for WaitThenStop {
    type Reply = ();
}
impl Handler<WaitThenStop> for Gate {
    fn handle(&mut self, msg: WaitThenStop, ctx: &mut Context<Self>) {
        msg.0.wait();
        std::thread::sleep(Duration::from_millis(50));
        ctx.stop();
    }
}
impl Handler<LoudMsg> for Gate {
    fn handle(&mut self, _: LoudMsg, _: &mut Context<Self>) {}
}
struct Echo(u32);
impl Message for Echo {
    type Reply = u32;
}
impl Handler<Echo> for Gate {
    fn handle(&mut self, msg: Echo, _: &mut Context<Self>) -> u32 {
        msg.0
    }
}

#[test]
fn a_panicking_drop_does_not_stop_the_drain() {
    quiet_panics();
    let system = System::new();
    let gate = system.spawn(Gate);
    let barrier = Arc::new(std::sync::Barrier::new(2));
    gate.tell(WaitThenStop(barrier.clone())).unwrap();
    barrier.wait();
    gate.tell(LoudMsg(Loud)).unwrap();
    let asks: Vec<_> = (0..3).map(|i| gate.ask(Echo(i))).collect();
    for ask in asks {
        assert_eq!(
            ask.wait_timeout(Duration::from_secs(5)),
            Err(AskError::Stopped)
        );
    }
    drop(gate);
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Blocking on an ask from a worker fails loudly instead of deadlocking.

struct Selfish;
impl Actor for Selfish {}
struct AskMyself;
impl Message for AskMyself {
    type Reply = u32;
}
impl Handler<AskMyself> for Selfish {
    fn handle(&mut self, _: AskMyself, ctx: &mut Context<Self>) -> u32 {
        ctx.myself().ask(Plain).wait().unwrap_or(0)
    }
}
struct Plain;
impl Message for Plain {
    type Reply = u32;
}
impl Handler<Plain> for Selfish {
    fn handle(&mut self, _: Plain, _: &mut Context<Self>) -> u32 {
        1
    }
}

#[test]
fn waiting_for_an_ask_on_a_worker_fails_loudly() {
    quiet_panics();
    let system = System::builder().workers(2).build().unwrap();
    let selfish = system.spawn(Selfish);
    let reply = selfish.ask(AskMyself).wait_timeout(Duration::from_secs(5));
    assert_eq!(reply, Err(AskError::Panicked), "the handler failed at once");
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Shutdown from inside a handler.

struct Stopper {
    system: Arc<Mutex<Option<System>>>,
}
impl Actor for Stopper {}
struct ShutItDown;
impl Message for ShutItDown {
    type Reply = ();
}
impl Handler<ShutItDown> for Stopper {
    fn handle(&mut self, _: ShutItDown, _: &mut Context<Self>) {
        if let Some(system) = self.system.lock().unwrap().take() {
            system.shutdown();
        }
    }
}

#[test]
fn shutdown_from_a_handler_returns_and_stops_everything() {
    let cell = Arc::new(Mutex::new(None));
    let system = System::builder().name("tshin").build().unwrap();
    let stopper = system.spawn(Stopper {
        system: cell.clone(),
    });
    let bystander = system.spawn(Sink);
    *cell.lock().unwrap() = Some(system);
    let started = Instant::now();
    stopper.tell(ShutItDown).unwrap();
    wait_for("every actor stopped", Duration::from_secs(5), || {
        stopper.is_stopped() && bystander.is_stopped()
    });
    wait_for("the system's threads gone", Duration::from_secs(5), || {
        crate::common::threads_named("tshin") == 0
    });
    assert!(started.elapsed() < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------------
// The timer of an `ask_timeout` goes with its answer; dropped asks say why.

struct Replier;
impl Actor for Replier {}
struct Give(crate::common::Counted);
impl Message for Give {
    type Reply = crate::common::Counted;
}
impl Handler<Give> for Replier {
    fn handle(&mut self, msg: Give, _: &mut Context<Self>) -> crate::common::Counted {
        msg.0
    }
}

#[test]
fn answered_asks_do_not_keep_their_replies_until_the_deadline() {
    let system = System::new();
    let replier = system.spawn(Replier);
    let drops = DropCounter::default();
    for _ in 0..1_000 {
        // Abandoned at once: the reply arrives later and nobody takes it.
        drop(replier.ask_timeout(Give(drops.token()), Duration::from_secs(3600)));
    }
    wait_for("every reply dropped", Duration::from_secs(10), || {
        drops.get() == 1_000
    });
    system.shutdown();
}

#[test]
fn asks_dropped_by_overflow_say_so() {
    let system = System::new();
    for overflow in [Overflow::DropNewest, Overflow::DropOldest] {
        let gate = system.spawn_with(Gate, SpawnOptions::new().bounded(1, overflow));
        let barrier = Arc::new(std::sync::Barrier::new(2));
        gate.tell(Wait(barrier.clone())).unwrap();
        barrier.wait();
        let asks: Vec<_> = (0..4).map(|i| gate.ask(Echo(i))).collect();
        let results: Vec<_> = asks
            .into_iter()
            .map(|a| a.wait_timeout(Duration::from_secs(5)))
            .collect();
        let dropped = results
            .iter()
            .filter(|r| **r == Err(AskError::Dropped))
            .count();
        let answered = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(dropped + answered, 4, "{overflow:?}: {results:?}");
        assert!(dropped >= 2, "{overflow:?}: {results:?}");
        assert!(!gate.is_stopped());
    }
    system.shutdown();
}

// ---------------------------------------------------------------------------------------------
// An await whose future finishes before the turn that began it has ended.

struct Quick {
    log: Arc<Mutex<Vec<&'static str>>>,
}
impl Actor for Quick {}
struct AwaitReady;
impl Message for AwaitReady {
    type Reply = ();
}
impl Handler<AwaitReady> for Quick {
    fn handle(&mut self, _: AwaitReady, ctx: &mut Context<Self>) {
        ctx.await_then(async {}, |me: &mut Quick, _, ()| {
            me.log.lock().unwrap().push("resumed")
        });
        // The future is done, and its result signalled, before this turn ends.
        std::thread::sleep(Duration::from_millis(20));
    }
}
struct After;
impl Message for After {
    type Reply = ();
}
impl Handler<After> for Quick {
    fn handle(&mut self, _: After, _: &mut Context<Self>) {
        self.log.lock().unwrap().push("after");
    }
}

#[test]
fn an_await_that_finishes_within_its_turn_resumes() {
    let system = System::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let quick = system.spawn(Quick { log: log.clone() });
    for _ in 0..5 {
        quick.tell(AwaitReady).unwrap();
        quick.tell(After).unwrap();
    }
    wait_for("every await resumed", Duration::from_secs(10), || {
        log.lock().unwrap().len() == 10
    });
    assert_eq!(
        *log.lock().unwrap(),
        ["resumed", "after"].repeat(5),
        "each continuation ran before the next message"
    );
    system.shutdown();
}
