#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! A plain thread that waits for a reply runs, itself, the turn of the actor it asked when it
//! scheduled it and no worker has taken it (`SystemBuilder::waiters_help`). Every path of a
//! turn run that way, with the pool's one worker held by a blocking handler so that nothing but
//! the waiting thread can run them: the request itself, a flood that wakes an idle actor into
//! the thread's own run-next position and lends it turns there (catch-up), a panic, a refused
//! blocking wait inside, a turn that yields, an actor that stops, the async runtime's context,
//! an ask awaited in `System::block_on`; other actors the thread scheduled are left to the
//! pool; a task of another runtime helps by default until turns it ran held its thread for
//! long twice in a row, always where the system says so, never where it says no
//! (`SystemBuilder::tasks_help`), panics included; waits with a deadline do not help, nor an
//! ask `without_help`, nor a task polling for an actor's end (`Addr::stopped`); and a system that said no. Every message created is dropped exactly
//! once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use crate::common::{quiet_panics_on_purpose, wait_for, DropCounter, Item, LONG};
use troupe::{
    Actor, Addr, AskError, Context, Handler, Message, SpawnOptions, SupervisorStrategy, System,
};

/// Blocks the worker that handles it until released (or a minute passes, failing the test
/// rather than hanging it).
struct Holder;
impl Actor for Holder {}
struct Hold {
    entered: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}
impl Message for Hold {
    type Reply = ();
}
impl Handler<Hold> for Holder {
    fn handle(&mut self, msg: Hold, _: &mut Context<Self>) {
        msg.entered.send(()).unwrap();
        // Released when the test drops the sender.
        if let Err(mpsc::RecvTimeoutError::Timeout) =
            msg.release.recv_timeout(Duration::from_secs(60))
        {
            panic!("the test never released the worker");
        }
    }
}

/// A system of one worker, held by a blocking handler until the guard goes.
struct Held {
    system: System,
    release: Option<mpsc::Sender<()>>,
}

impl Held {
    fn new(builder: troupe::SystemBuilder) -> Self {
        let system = builder.workers(1).build().unwrap();
        let holder = system.spawn(Holder);
        let (entered, on_entered) = mpsc::channel();
        let (release, on_release) = mpsc::channel();
        holder
            .tell(Hold {
                entered,
                release: on_release,
            })
            .unwrap();
        on_entered
            .recv_timeout(LONG)
            .expect("the worker took the holder");
        Held {
            system,
            release: Some(release),
        }
    }

    fn helped_turns(&self) -> u64 {
        self.system
            .pool_metrics()
            .into_iter()
            .find(|p| p.name == "default")
            .unwrap()
            .helped_turns
    }

    /// Releases the worker.
    fn release(&mut self) {
        drop(self.release.take());
    }

    fn finish(self) {
        self.finish_with(|| {});
    }

    /// Releases the worker, runs `then`, and shuts down.
    fn finish_with(mut self, then: impl FnOnce()) {
        self.release();
        then();
        self.system.shutdown();
    }
}

/// Answers with the thread that handled the message, and whether it ran in the async
/// runtime's context.
struct Echo {
    handled: u64,
}
impl Actor for Echo {}
struct Where;
impl Message for Where {
    type Reply = (ThreadId, bool, u64);
}
impl Handler<Where> for Echo {
    fn handle(&mut self, _: Where, _: &mut Context<Self>) -> (ThreadId, bool, u64) {
        self.handled += 1;
        (
            std::thread::current().id(),
            tokio::runtime::Handle::try_current().is_ok(),
            self.handled,
        )
    }
}
struct Bump;
impl Message for Bump {
    type Reply = ();
}
impl Handler<Bump> for Echo {
    fn handle(&mut self, _: Bump, _: &mut Context<Self>) {
        self.handled += 1;
    }
}
struct Boom;
impl Message for Boom {
    type Reply = u32;
}
impl Handler<Boom> for Echo {
    fn handle(&mut self, _: Boom, _: &mut Context<Self>) -> u32 {
        panic!("a handler run by a waiting thread panics (on purpose)")
    }
}
/// Blocks on an ask inside the handler: refused on a thread that runs a turn.
struct AskInside(Addr<Echo>);
impl Message for AskInside {
    type Reply = ();
}
impl Handler<AskInside> for Echo {
    fn handle(&mut self, AskInside(other): AskInside, _: &mut Context<Self>) {
        let _ = other.ask(Where).wait();
    }
}
struct StopNow;
impl Message for StopNow {
    type Reply = u64;
}
impl Handler<StopNow> for Echo {
    fn handle(&mut self, _: StopNow, ctx: &mut Context<Self>) -> u64 {
        ctx.stop();
        self.handled
    }
}

/// A tokio runtime of one worker thread, for the asking tasks.
fn task_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap()
}

/// An `Echo` restarted after each panic (a fresh instance), up to ten times a minute.
fn restarting_echo(system: &System) -> Addr<Echo> {
    system.spawn_supervised(
        || Echo { handled: 0 },
        SpawnOptions::new()
            .supervision(SupervisorStrategy::one_for_one().intensity(10, Duration::from_secs(60))),
    )
}

#[test]
fn the_waiting_thread_runs_its_own_request_in_the_async_runtime() {
    let held = Held::new(System::builder());
    let echo = held.system.spawn(Echo { handled: 0 });
    let (thread, in_runtime, _) = echo.ask(Where).wait().unwrap();
    assert_eq!(thread, std::thread::current().id());
    assert!(in_runtime, "the turn ran in the system's async runtime");
    // Awaited (the first poll helps too).
    let (thread, _, handled) = held.system.block_on(echo.ask(Where)).unwrap();
    assert_eq!(thread, std::thread::current().id());
    assert_eq!(handled, 2);
    assert!(held.helped_turns() >= 2, "{} turns", held.helped_turns());
    held.finish();
}

#[test]
fn a_turn_that_yields_goes_on_until_the_reply_and_keeps_the_order() {
    // A budget of 8 messages a turn: 500 told first make the turn yield many times.
    let held = Held::new(System::builder().throughput(8));
    let echo = held.system.spawn(Echo { handled: 0 });
    for _ in 0..500 {
        echo.tell(Bump).unwrap();
    }
    let (_, _, handled) = echo.ask(Where).wait().unwrap();
    assert_eq!(handled, 501, "every message before the request, in order");
    assert!(held.helped_turns() >= 500 / 8);
    held.finish();
}

#[test]
fn a_panic_in_a_helped_turn_fails_the_ask_and_the_actor_restarts() {
    quiet_panics_on_purpose();
    let held = Held::new(System::builder());
    let echo = restarting_echo(&held.system);
    assert_eq!(echo.ask(Boom).wait(), Err(AskError::Panicked));
    // Restarted (a fresh instance), and this thread goes on asking.
    let (thread, _, handled) = echo.ask(Where).wait().unwrap();
    assert_eq!((thread, handled), (std::thread::current().id(), 1));
    held.finish();
}

#[test]
fn a_blocking_wait_inside_a_helped_turn_is_refused() {
    quiet_panics_on_purpose();
    let held = Held::new(System::builder());
    let echo = held.system.spawn(Echo { handled: 0 });
    let other = held.system.spawn(Echo { handled: 0 });
    // Refused as on a worker: the handler panics, so the ask fails (not a deadlock).
    assert_eq!(echo.ask(AskInside(other)).wait(), Err(AskError::Panicked));
    held.finish();
}

#[test]
fn an_actor_that_stops_in_a_helped_turn_ends_there() {
    let held = Held::new(System::builder());
    let echo = held.system.spawn(Echo { handled: 0 });
    echo.tell(Bump).unwrap();
    assert_eq!(echo.ask(StopNow).wait(), Ok(1));
    wait_for("the actor to stop", LONG, || echo.is_stopped());
    assert_eq!(echo.ask(Where).wait(), Err(AskError::Stopped));
    held.finish();
}

#[test]
fn a_task_never_runs_the_turn_itself_where_the_system_says_no() {
    let mut held = Held::new(System::builder().tasks_help(false));
    let echo = held.system.spawn(Echo { handled: 0 });
    // Started, and idle again, by this thread's own wait (which helps): the task's ask below
    // is the one that wakes it, into the queue of the task's thread.
    echo.ask(Where).wait().unwrap();
    let helped = held.helped_turns();
    let runtime = task_runtime();
    // The ask is made and awaited on the runtime's worker, a thread with other tasks to run.
    held.task_s_ask_waits_for_the_worker(&runtime, &echo);
    assert_eq!(held.helped_turns(), helped);
    assert!(!held.tasks_help());
    held.finish();
}

/// Sleeps for as long as it is told, then answers with its thread.
struct Nap(Duration);
impl Message for Nap {
    type Reply = ThreadId;
}
impl Handler<Nap> for Echo {
    fn handle(&mut self, Nap(time): Nap, _: &mut Context<Self>) -> ThreadId {
        std::thread::sleep(time);
        self.handled += 1;
        std::thread::current().id()
    }
}

impl Held {
    /// A task's ask of `echo` is still waiting 50 ms later (only the held worker may run it),
    /// and once the worker is released, a worker answers it; what `echo` had handled then.
    fn task_s_ask_waits_for_the_worker(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        echo: &Addr<Echo>,
    ) -> u64 {
        let asked = echo.clone();
        let task = runtime.spawn(async move {
            let me = std::thread::current().id();
            (me, asked.ask(Where).await)
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !task.is_finished(),
            "only the held worker may run the request: the task's thread did not"
        );
        self.release();
        let (task_thread, reply) = runtime.block_on(task).unwrap();
        let (thread, _, handled) = reply.unwrap();
        assert_ne!(thread, task_thread);
        handled
    }

    fn tasks_help(&self) -> bool {
        self.system
            .pool_metrics()
            .into_iter()
            .find(|p| p.name == "default")
            .unwrap()
            .tasks_help
    }
}

/// What a task made of `asks` ran on: `true` for each ask whose turn ran on the task's own
/// thread (with the pool's one worker held, nothing else can run them).
fn asks_from_a_task(
    runtime: &tokio::runtime::Runtime,
    echo: &Addr<Echo>,
    asks: Vec<Option<Duration>>,
) -> Vec<bool> {
    let echo = echo.clone();
    runtime
        .block_on(runtime.spawn(async move {
            let me = std::thread::current().id();
            let mut on_task_thread = Vec::new();
            for ask in asks {
                let thread = match ask {
                    Some(time) => echo.ask(Nap(time)).await.unwrap(),
                    None => echo.ask(Where).await.unwrap().0,
                };
                on_task_thread.push(thread == me);
            }
            on_task_thread
        }))
        .unwrap()
}

#[test]
fn by_default_a_task_runs_its_own_request_until_turns_hold_its_thread_twice_in_a_row() {
    let mut held = Held::new(System::builder());
    let echo = held.system.spawn(Echo { handled: 0 });
    echo.ask(Where).wait().unwrap();
    let runtime = task_runtime();
    let long = Some(Duration::from_millis(5));
    // Short turns, and long ones never twice in a row: the task runs every one.
    let ran_here = asks_from_a_task(&runtime, &echo, vec![None, None, long, None, long, None]);
    assert_eq!(ran_here, vec![true; 6]);
    assert!(held.tasks_help());
    // Two long ones in a row: both ran on the task's thread, and tasks stop helping the pool.
    let ran_here = asks_from_a_task(&runtime, &echo, vec![long, long]);
    assert_eq!(ran_here, vec![true, true]);
    assert!(
        !held.tasks_help(),
        "two long runs in a row stop tasks from helping"
    );
    // The next request waits for the pool's worker, held until the task has asked.
    let handled = held.task_s_ask_waits_for_the_worker(&runtime, &echo);
    assert_eq!(handled, 10, "every request handled once, in order");
    held.finish();
}

#[test]
fn an_ask_without_help_is_left_to_the_workers() {
    let mut held = Held::new(System::builder().tasks_help(true));
    let echo = held.system.spawn(Echo { handled: 0 });
    echo.ask(Where).wait().unwrap();
    let helped = held.helped_turns();
    let runtime = task_runtime();
    let asked = echo.clone();
    let task = runtime.spawn(async move {
        let me = std::thread::current().id();
        (me, asked.ask(Where).without_help().await)
    });
    // A plain thread's wait too.
    let asked = echo.clone();
    let waiter = std::thread::spawn(move || {
        let me = std::thread::current().id();
        (me, asked.ask(Where).without_help().wait())
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !task.is_finished() && !waiter.is_finished(),
        "only the held worker may run them"
    );
    held.release();
    let (task_thread, reply) = runtime.block_on(task).unwrap();
    assert_ne!(reply.unwrap().0, task_thread);
    let (waiter_thread, reply) = waiter.join().unwrap();
    assert_ne!(reply.unwrap().0, waiter_thread);
    assert_eq!(held.helped_turns(), helped);
    held.finish();
}

#[test]
fn a_task_polling_for_an_actor_s_end_never_runs_its_turns() {
    let held = Held::new(System::builder().tasks_help(true));
    let echo = held.system.spawn(Echo { handled: 0 });
    echo.ask(Where).wait().unwrap();
    let helped = held.helped_turns();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let asked = echo.clone();
    let waited = runtime.block_on(runtime.spawn(async move {
        // Scheduled by this task's thread, as a request would be: polling for the actor's
        // end (as a `select!` loop does beside its other work) leaves the turn to the pool.
        asked.tell(Bump).unwrap();
        tokio::time::timeout(Duration::from_millis(30), asked.stopped())
            .await
            .is_err()
    }));
    assert!(waited.unwrap(), "the actor runs on: its end never came");
    assert_eq!(held.helped_turns(), helped);
    held.finish_with(|| {
        let (_, _, handled) = echo.ask(Where).wait().unwrap();
        assert_eq!(handled, 3, "the told message waited for the worker");
    });
}

#[test]
fn a_system_that_lets_tasks_help_keeps_them_helping_through_long_turns() {
    let held = Held::new(System::builder().tasks_help(true));
    let echo = held.system.spawn(Echo { handled: 0 });
    echo.ask(Where).wait().unwrap();
    let runtime = task_runtime();
    let long = Some(Duration::from_millis(5));
    let ran_here = asks_from_a_task(&runtime, &echo, vec![long, long, long, None]);
    assert_eq!(ran_here, vec![true; 4]);
    assert!(held.tasks_help());
    held.finish();
}

#[test]
fn a_task_runs_its_own_request_where_the_system_lets_tasks_help() {
    let held = Held::new(System::builder().tasks_help(true));
    let echo = held.system.spawn(Echo { handled: 0 });
    // Started, and idle again, by this thread's own wait.
    echo.ask(Where).wait().unwrap();
    let helped = held.helped_turns();
    let runtime = task_runtime();
    // The pool's one worker is held: only the task's own thread can run these requests.
    let task = runtime.spawn(async move {
        let me = std::thread::current().id();
        let mut replies = Vec::new();
        for _ in 0..3 {
            replies.push(echo.ask(Where).await);
        }
        (me, replies)
    });
    let (task_thread, replies) = runtime.block_on(task).unwrap();
    for (i, reply) in replies.into_iter().enumerate() {
        let (thread, _, handled) = reply.unwrap();
        assert_eq!(thread, task_thread, "the task's thread ran its request");
        assert_eq!(handled, i as u64 + 2, "in order, after the first ask");
    }
    assert_eq!(held.helped_turns(), helped + 3, "one turn per ask");
    held.finish();
}

#[test]
fn a_panic_in_a_turn_a_task_runs_fails_that_ask_and_the_task_goes_on() {
    // Where tasks always help, and by default (each run timed: the panic ends its run early).
    a_panic_in_a_task_s_turn(System::builder().tasks_help(true));
    a_panic_in_a_task_s_turn(System::builder());
}

fn a_panic_in_a_task_s_turn(builder: troupe::SystemBuilder) {
    quiet_panics_on_purpose();
    let held = Held::new(builder);
    let echo = restarting_echo(&held.system);
    echo.ask(Where).wait().unwrap();
    let runtime = task_runtime();
    let task = runtime.spawn(async move {
        let me = std::thread::current().id();
        let boom = echo.ask(Boom).await;
        let after = echo.ask(Where).await;
        (me, boom, after)
    });
    let (task_thread, boom, after) = runtime.block_on(task).unwrap();
    assert_eq!(boom, Err(AskError::Panicked));
    // Restarted (a fresh instance) on the task's thread, which goes on asking.
    let (thread, _, handled) = after.unwrap();
    assert_eq!((thread, handled), (task_thread, 1));
    held.finish();
}

#[test]
fn a_task_s_wait_with_a_deadline_does_not_help() {
    let mut held = Held::new(System::builder().tasks_help(true));
    let echo = held.system.spawn(Echo { handled: 0 });
    let limit = Duration::from_millis(30);
    let runtime = task_runtime();
    let asked = echo.clone();
    let reply = runtime
        .block_on(runtime.spawn(async move { asked.ask_timeout(Where, limit).await }))
        .unwrap();
    // Only the held worker could run it, and it is held.
    assert_eq!(reply, Err(AskError::Timeout(limit)));
    assert_eq!(held.helped_turns(), 0);
    held.release();
    let (_, _, handled) = echo.ask(Where).wait().unwrap();
    assert_eq!(handled, 2, "the timed-out request was handled too");
    held.finish();
}

#[test]
fn waits_with_a_deadline_do_not_help() {
    let held = Held::new(System::builder());
    let echo = held.system.spawn(Echo { handled: 0 });
    let limit = Duration::from_millis(30);
    // Only the held worker could run it, and it is held: both time out.
    assert_eq!(
        echo.ask(Where).wait_timeout(limit),
        Err(AskError::Timeout(limit))
    );
    assert_eq!(
        held.system.block_on(echo.ask_timeout(Where, limit)),
        Err(AskError::Timeout(limit))
    );
    assert_eq!(held.helped_turns(), 0);
    // Once the worker is free, both requests are handled (their replies dropped).
    let system = held.system.clone();
    held.finish_keeping(&echo);
    drop(system);
}

impl Held {
    /// Releases the worker and checks that `echo` then handles what waited for it.
    fn finish_keeping(mut self, echo: &Addr<Echo>) {
        drop(self.release.take());
        let (_, _, handled) = echo.ask(Where).wait().unwrap();
        assert_eq!(handled, 3);
        self.system.shutdown();
    }
}

#[test]
fn other_actors_the_thread_scheduled_are_left_to_the_pool() {
    let held = Held::new(System::builder());
    // Scheduled by this thread ahead of the request, and blocking until this thread lets it
    // go after its reply: run here, it would never return.
    let other = held.system.spawn(Holder);
    let (entered, on_entered) = mpsc::channel();
    let (release, on_release) = mpsc::channel();
    other
        .tell(Hold {
            entered,
            release: on_release,
        })
        .unwrap();
    let echo = held.system.spawn(Echo { handled: 0 });
    let (thread, _, _) = echo.ask(Where).wait().unwrap();
    assert_eq!(thread, std::thread::current().id());
    assert!(
        on_entered.try_recv().is_err(),
        "the other actor has not run"
    );
    drop(release);
    held.finish_with(|| {
        on_entered
            .recv_timeout(LONG)
            .expect("the pool ran the other actor");
    });
}

#[test]
fn a_system_that_says_no_keeps_every_turn_on_its_workers() {
    let system = System::builder()
        .workers(1)
        .waiters_help(false)
        .build()
        .unwrap();
    let echo = system.spawn(Echo { handled: 0 });
    for _ in 0..100 {
        let (thread, _, _) = echo.ask(Where).wait().unwrap();
        assert_ne!(thread, std::thread::current().id());
    }
    let helped: u64 = system.pool_metrics().iter().map(|p| p.helped_turns).sum();
    assert_eq!(helped, 0);
    system.shutdown();
}

/// Floods a consumer from inside its handler.
struct Producer {
    consumer: Addr<Consumer>,
    inside: Arc<AtomicBool>,
    drops: DropCounter,
}
impl Actor for Producer {}
struct Flood(u64);
impl Message for Flood {
    type Reply = u64;
}
impl Handler<Flood> for Producer {
    fn handle(&mut self, Flood(n): Flood, _: &mut Context<Self>) -> u64 {
        self.inside.store(true, Ordering::SeqCst);
        for seq in 0..n {
            self.consumer
                .tell(Item {
                    from: 0,
                    seq,
                    _token: self.drops.token(),
                })
                .unwrap();
        }
        self.inside.store(false, Ordering::SeqCst);
        n
    }
}

struct Consumer {
    next: u64,
    handled: Arc<AtomicU64>,
    /// Handled on the waiting thread while the producer was inside its handler there.
    lent: Arc<AtomicU64>,
    inside: Arc<AtomicBool>,
    waiter: ThreadId,
    out_of_order: Arc<Mutex<bool>>,
}
impl Actor for Consumer {}
struct Ready;
impl Message for Ready {
    type Reply = ();
}
impl Handler<Ready> for Consumer {
    fn handle(&mut self, _: Ready, _: &mut Context<Self>) {}
}
impl Handler<Item> for Consumer {
    fn handle(&mut self, item: Item, _: &mut Context<Self>) {
        if item.seq != self.next {
            *self.out_of_order.lock().unwrap() = true;
        }
        self.next = item.seq + 1;
        if std::thread::current().id() == self.waiter && self.inside.load(Ordering::SeqCst) {
            self.lent.fetch_add(1, Ordering::Relaxed);
        }
        self.handled.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_helped_flood_wakes_its_consumer_here_and_lends_it_turns() {
    const N: u64 = 50_000;
    const CATCH_UP: usize = 256;
    let held = Held::new(System::builder());
    let (handled, lent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let inside = Arc::new(AtomicBool::new(false));
    let out_of_order = Arc::new(Mutex::new(false));
    let consumer = held.system.spawn_with(
        Consumer {
            next: 0,
            handled: handled.clone(),
            lent: lent.clone(),
            inside: inside.clone(),
            waiter: std::thread::current().id(),
            out_of_order: out_of_order.clone(),
        },
        SpawnOptions::new().catch_up(CATCH_UP),
    );
    let drops = DropCounter::default();
    let producer = held.system.spawn(Producer {
        consumer: consumer.clone(),
        inside,
        drops: drops.clone(),
    });
    // Asked first, the consumer runs here and goes idle: the flood's first message wakes it
    // into this thread's run-next position, and the rest find it behind there and lend it
    // turns.
    consumer.ask(Ready).wait().unwrap();
    assert_eq!(producer.ask(Flood(N)).wait(), Ok(N));
    // What the flood left in the position went back to the pool.
    let lent = lent.load(Ordering::Relaxed);
    assert!(
        lent >= N - 4 * CATCH_UP as u64,
        "{lent} of {N} handled in lent turns"
    );
    // The rest is the pool's once its worker is free.
    let mut held = held;
    held.release();
    wait_for("every item", LONG, || handled.load(Ordering::SeqCst) == N);
    drop(producer);
    held.finish();
    assert!(!*out_of_order.lock().unwrap(), "the producer's order");
    assert_eq!(drops.get(), N as usize, "every item dropped exactly once");
}
