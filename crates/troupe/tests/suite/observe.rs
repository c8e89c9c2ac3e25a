//! An observed system (`SystemBuilder::observe`): the directory of live actors and its pages,
//! life states, handler times, dead letters, asks timed out, the wait-for graph and its cycles,
//! and that every observed message is still dropped exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use troupe::{
    Actor, ActorId, Addr, AskError, Context, Deferred, DeferredHandler, Handler, LifeState,
    Message, ObserveError, SpawnOptions, System,
};

fn observed() -> System {
    System::builder().workers(2).observe().build().unwrap()
}

/// Polls `check` until it holds or 5 s pass.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

struct Leaf;
impl Actor for Leaf {}

#[derive(Message)]
#[reply(())]
struct Ping;
impl Handler<Ping> for Leaf {
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
}

/// Spawns two named children, the first with a child of its own.
struct Boss {
    kids: Arc<Mutex<Vec<ActorId>>>,
}
impl Actor for Boss {
    fn started(&mut self, ctx: &mut Context<Self>) {
        let a = ctx.spawn(Middle {
            kids: self.kids.clone(),
        });
        let b = ctx.spawn(Leaf);
        self.kids.lock().unwrap().extend([a.id(), b.id()]);
    }
}

struct Middle {
    kids: Arc<Mutex<Vec<ActorId>>>,
}
impl Actor for Middle {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("middle").unwrap();
        let c = ctx.spawn(Leaf);
        self.kids.lock().unwrap().push(c.id());
    }
}

#[test]
fn the_directory_lists_the_tree_with_parents_types_names_and_pools() {
    let system = observed();
    let kids = Arc::new(Mutex::new(Vec::new()));
    let boss = system.spawn(Boss { kids: kids.clone() });
    eventually("three children", || kids.lock().unwrap().len() == 3);
    eventually("a registered name", || {
        system.lookup::<Middle>("middle").is_some()
    });
    let kids = kids.lock().unwrap().clone();
    let page = system.actors(None, 100).unwrap();
    assert_eq!(page.next, None);
    let find = |id: ActorId| page.actors.iter().find(|a| a.id == id).unwrap().clone();
    let root = find(boss.id());
    assert_eq!(root.parent, None);
    assert!(root.type_name.ends_with("Boss"), "{}", root.type_name);
    assert_eq!(root.pool, "default");
    let (middle, leaf, grandchild) = (find(kids[0]), find(kids[1]), find(kids[2]));
    assert_eq!(middle.parent, Some(boss.id()));
    assert_eq!(middle.names, vec!["middle".to_owned()]);
    assert_eq!(leaf.parent, Some(boss.id()));
    assert_eq!(grandchild.parent, Some(middle.id));
    assert!(grandchild.type_name.ends_with("Leaf"));
    assert_eq!(grandchild.pool, "default");
    eventually("all running", || {
        system
            .actors(None, 100)
            .unwrap()
            .actors
            .iter()
            .all(|a| a.state == LifeState::Running)
    });
    assert_eq!(system.observed_actors().unwrap(), 4);

    // A thread-placed and a named-pool actor say where they run.
    let threaded = system.spawn_on(Leaf, troupe::Placement::Thread);
    let blocking = system.spawn_on(Leaf, troupe::Placement::Named("blocking"));
    assert_eq!(system.actor(threaded.id()).unwrap().unwrap().pool, "thread");
    assert_eq!(
        system.actor(blocking.id()).unwrap().unwrap().pool,
        "blocking"
    );

    // A stopped actor leaves the directory.
    threaded.stop();
    threaded.stopped().wait().unwrap();
    eventually("gone from the directory", || {
        system.actor(threaded.id()).unwrap().is_none()
    });
    system.shutdown();
    assert_eq!(system.observed_actors().unwrap(), 0);
}

#[test]
fn pages_walk_every_actor_once_in_id_order_and_bad_sizes_are_refused() {
    let system = observed();
    let ids: Vec<ActorId> = (0..25).map(|_| system.spawn(Leaf).id()).collect();
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = system.actors(after, 7).unwrap();
        assert!(page.actors.len() <= 7);
        pages += 1;
        seen.extend(page.actors.iter().map(|a| a.id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    assert_eq!(pages, 4);
    assert_eq!(
        system.actors(None, 0),
        Err(ObserveError::PageSize {
            asked: 0,
            max: troupe::MAX_PAGE
        })
    );
    assert!(system.actors(None, troupe::MAX_PAGE + 1).is_err());
    system.shutdown();

    let plain = System::builder().workers(1).build().unwrap();
    assert!(!plain.is_observed());
    assert_eq!(plain.actors(None, 10), Err(ObserveError::NotObserved));
    assert_eq!(plain.waits(), Err(ObserveError::NotObserved));
    assert_eq!(plain.handler_stats(), Err(ObserveError::NotObserved));
    plain.shutdown();
}

struct Summer(u64);
impl Actor for Summer {}

#[derive(Message)]
struct Add(u64);
impl Handler<Add> for Summer {
    fn handle(&mut self, m: Add, _: &mut Context<Self>) {
        self.0 += m.0;
    }
}

#[derive(Message)]
#[reply(u64)]
struct Total;
impl Handler<Total> for Summer {
    fn handle(&mut self, _: Total, _: &mut Context<Self>) -> u64 {
        std::thread::sleep(Duration::from_millis(2));
        self.0
    }
}

#[test]
fn handler_times_are_counted_by_actor_type_and_message_type() {
    let system = observed();
    let summers: Vec<Addr<Summer>> = (0..3).map(|_| system.spawn(Summer(0))).collect();
    for summer in &summers {
        for i in 0..100 {
            summer.tell(Add(i)).unwrap();
        }
        assert_eq!(summer.ask(Total).wait(), Ok(4950));
    }
    // Timed as the handler returns, which may be just after its reply went out.
    eventually("300 adds and 3 totals counted", || {
        let stats = system.handler_stats().unwrap();
        stats
            .iter()
            .any(|s| s.message.ends_with("Add") && s.count == 300)
            && stats
                .iter()
                .any(|s| s.message.ends_with("Total") && s.count == 3)
    });
    let stats = system.handler_stats().unwrap();
    let total = stats.iter().find(|s| s.message.ends_with("Total")).unwrap();
    assert!(total.actor_type.ends_with("Summer"));
    assert_eq!(total.count, 3);
    assert!(total.max >= Duration::from_millis(2));
    assert!(total.total >= Duration::from_millis(6));
    assert!(total.p99 >= total.p50 && total.p50 >= Duration::from_millis(1));
    // The longest total comes first: three 2 ms handlers outweigh 300 additions.
    assert!(stats[0].message.ends_with("Total"), "{stats:?}");
    eventually("101 processed", || {
        system.actor(summers[0].id()).unwrap().unwrap().processed == 101
    });
    let info = system.actor(summers[0].id()).unwrap().unwrap();
    assert!(info.handler_time >= Duration::from_millis(2));
    system.shutdown();
}

/// Holds its first message until told, then stops.
struct Gate;
impl Actor for Gate {}

#[derive(Message)]
struct Hold(mpsc::Sender<()>, Mutex<mpsc::Receiver<()>>);
impl Handler<Hold> for Gate {
    fn handle(&mut self, m: Hold, ctx: &mut Context<Self>) {
        m.0.send(()).unwrap();
        m.1.lock().unwrap().recv().unwrap();
        ctx.stop();
    }
}

static DROPPED: AtomicUsize = AtomicUsize::new(0);

#[derive(Message)]
struct Letter;
impl Drop for Letter {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}
impl Handler<Letter> for Gate {
    fn handle(&mut self, _: Letter, _: &mut Context<Self>) {}
}

#[test]
fn messages_left_to_a_stopped_actor_are_dead_letters_and_each_is_dropped_once() {
    let system = observed();
    let gate = system.spawn(Gate);
    let (open, held) = mpsc::channel();
    let (holding, is_holding) = mpsc::channel();
    gate.tell(Hold(holding, Mutex::new(held))).unwrap();
    is_holding.recv_timeout(Duration::from_secs(5)).unwrap();
    let before = DROPPED.load(Ordering::SeqCst);
    for _ in 0..9 {
        gate.tell(Letter).unwrap();
    }
    open.send(()).unwrap();
    gate.stopped().wait().unwrap();
    assert_eq!(system.dead_letters(), Ok(9));
    assert_eq!(DROPPED.load(Ordering::SeqCst) - before, 9);
    // Refused at the door: handed back, not a dead letter.
    let back = gate.tell(Letter).unwrap_err();
    drop(back);
    assert_eq!(system.dead_letters(), Ok(9));
    system.shutdown();
}

#[test]
fn an_ask_that_times_out_is_counted_at_its_actor() {
    let system = observed();
    let summer = system.spawn(Summer(7));
    // Held until the test lets it go, so the timeout comes first however late the timer runs.
    let gate = system.spawn(Gate);
    let (open, held) = mpsc::channel();
    let (holding, _is_holding) = mpsc::channel();
    let slow = gate.ask_timeout(Hold(holding, Mutex::new(held)), Duration::from_micros(1));
    assert_eq!(
        slow.wait(),
        Err(AskError::Timeout(Duration::from_micros(1)))
    );
    // Read while it still holds (it stops once let go).
    assert_eq!(
        system.actor(gate.id()).unwrap().map(|a| a.asks_timed_out),
        Some(1)
    );
    open.send(()).unwrap();
    assert_eq!(
        summer.ask_timeout(Total, Duration::from_secs(5)).wait(),
        Ok(7)
    );
    assert_eq!(system.asks_timed_out(), Ok(1));
    assert_eq!(
        system.actor(summer.id()).unwrap().unwrap().asks_timed_out,
        0
    );
    system.shutdown();
}

/// Two actors that ask each other and hold their mailboxes while they wait: a cycle.
struct Alpha {
    beta: Option<Addr<Beta>>,
}
impl Actor for Alpha {}

struct Beta {
    alpha: Option<Addr<Alpha>>,
}
impl Actor for Beta {}

#[derive(Message)]
struct Meet(Addr<Beta>);
impl Handler<Meet> for Alpha {
    fn handle(&mut self, m: Meet, _: &mut Context<Self>) {
        self.beta = Some(m.0);
    }
}

#[derive(Message)]
struct Greet(Addr<Alpha>);
impl Handler<Greet> for Beta {
    fn handle(&mut self, m: Greet, _: &mut Context<Self>) {
        self.alpha = Some(m.0);
    }
}

#[derive(Message)]
struct Start;
impl Handler<Start> for Alpha {
    fn handle(&mut self, _: Start, ctx: &mut Context<Self>) {
        let beta = self.beta.clone().unwrap();
        ctx.await_then(beta.ask(Question), |_, _, _| {});
    }
}

#[derive(Message)]
#[reply(u32)]
struct Question;
impl DeferredHandler<Question> for Beta {
    fn handle(&mut self, _: Question, reply: Deferred<u32>, ctx: &mut Context<Self>) {
        let alpha = self.alpha.clone().unwrap();
        ctx.await_then(alpha.ask(Echo), move |_, _, answer| {
            let _ = reply.send(answer.unwrap_or(0));
        });
    }
}

#[derive(Message)]
#[reply(u32)]
struct Echo;
impl Handler<Echo> for Alpha {
    fn handle(&mut self, _: Echo, _: &mut Context<Self>) -> u32 {
        1
    }
}

#[test]
fn a_cycle_of_asks_is_named_as_it_forms_and_listed_while_it_lasts() {
    let system = observed();
    let alpha = system.spawn(Alpha { beta: None });
    let beta = system.spawn(Beta { alpha: None });
    alpha.tell(Meet(beta.clone())).unwrap();
    beta.tell(Greet(alpha.clone())).unwrap();
    assert!(system.wait_cycles().unwrap().is_empty());
    alpha.tell(Start).unwrap();
    let expected = {
        let mut ids = vec![alpha.id(), beta.id()];
        ids.sort();
        ids
    };
    eventually("the cycle is listed", || {
        system.wait_cycles().unwrap() == vec![expected.clone()]
    });
    let seen = system.wait_cycles_seen().unwrap();
    assert_eq!(seen.len(), 1);
    let mut seen_sorted = seen[0].clone();
    seen_sorted.sort();
    assert_eq!(seen_sorted, expected);
    let waits = system.waits().unwrap();
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(waits.iter().any(|w| w.asker == alpha.id()
        && w.target == beta.id()
        && w.message.ends_with("Question")));
    assert!(waits
        .iter()
        .any(|w| w.asker == beta.id() && w.target == alpha.id() && w.message.ends_with("Echo")));
    // Each actor's state is published as its turn ends, which may come just after its ask
    // was registered (what the cycle listing reads).
    eventually("both actors are listed as awaiting", || {
        [alpha.id(), beta.id()]
            .iter()
            .all(|&id| system.actor(id).unwrap().unwrap().state == LifeState::Awaiting)
    });
    // Stopping one ends the wait of the other (its ask is answered `Stopped`).
    alpha.stop();
    alpha.stopped().wait().unwrap();
    eventually("no cycle left", || system.wait_cycles().unwrap().is_empty());
    system.shutdown();
}

/// Fails on `Boom`; restarted by its parent.
struct Fragile;
impl Actor for Fragile {}

#[derive(Message)]
struct Boom;
impl Handler<Boom> for Fragile {
    fn handle(&mut self, _: Boom, _: &mut Context<Self>) {
        panic!("boom (on purpose)");
    }
}

struct Keeper {
    child: Arc<Mutex<Option<Addr<Fragile>>>>,
}
impl Actor for Keeper {
    fn started(&mut self, ctx: &mut Context<Self>) {
        let child = ctx.spawn_supervised(|| Fragile, SpawnOptions::new());
        *self.child.lock().unwrap() = Some(child);
    }
}

#[test]
fn failures_and_restarts_are_counted() {
    let system = observed();
    let slot = Arc::new(Mutex::new(None));
    let _keeper = system.spawn(Keeper {
        child: slot.clone(),
    });
    eventually("the child", || slot.lock().unwrap().is_some());
    let child = slot.lock().unwrap().clone().unwrap();
    child.tell(Boom).unwrap();
    eventually("restarted once", || {
        system
            .actor(child.id())
            .unwrap()
            .is_some_and(|a| a.restarts == 1 && a.failures == 1 && a.state == LifeState::Running)
    });
    system.shutdown();
}
