#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Catch-up (`SpawnOptions::catch_up`): a sender on the pool that outruns a fan-in actor lends
//! it its worker. Every path of a lent turn: the flood fed as it goes, a consumer that panics
//! and is restarted inside lent turns, one that stops inside one, one that sends (back to its
//! producer, and as a hand-off to an idle actor), a lent turn that meets a second actor behind
//! (it does not lend again), sends from a plain thread (no lending: the thread waits for the
//! actor to read half its backlog, and for a moment only when the actor is stuck or stops),
//! and two producers on two workers. Every message created is dropped exactly once.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::common::{wait_for, DropCounter, Item, LONG};
use troupe::{Actor, Addr, Context, Handler, Message, SpawnOptions, SupervisorStrategy, System};

const CATCH_UP: usize = 256;

/// What the consumer saw, shared with the test.
#[derive(Default)]
struct Seen {
    handled: AtomicU64,
    /// Handled while a producer was inside its handler on the same thread (a lent turn).
    lent: AtomicU64,
    /// Per producer: the next sequence number expected.
    next: [AtomicU64; 2],
    out_of_order: AtomicBool,
    off_main_thread: AtomicBool,
}

/// Which producer is inside its flooding handler, by thread.
#[derive(Default)]
struct Inside {
    threads: std::sync::Mutex<Vec<ThreadId>>,
}

impl Inside {
    fn enter(&self) {
        self.threads
            .lock()
            .unwrap()
            .push(std::thread::current().id());
    }
    fn leave(&self) {
        let me = std::thread::current().id();
        self.threads.lock().unwrap().retain(|t| *t != me);
    }
    fn here(&self) -> bool {
        let me = std::thread::current().id();
        self.threads.lock().unwrap().contains(&me)
    }
}

/// What the consumer does on message number `n` (counted from 1, over its whole life).
#[derive(Clone, Copy)]
enum Behaviour {
    Plain,
    /// Panics on every message whose number is a multiple of this.
    PanicEvery(u64),
    /// Stops itself on this message.
    StopAt(u64),
    /// Tells the producer back, and an idle actor (a hand-off), on every message.
    Echo,
}

struct Consumer {
    seen: Arc<Seen>,
    inside: Arc<Inside>,
    behaviour: Behaviour,
    producer: Option<Addr<Producer>>,
    listener: Option<Addr<Listener>>,
    main: ThreadId,
}
impl Actor for Consumer {}

impl Handler<Item> for Consumer {
    fn handle(&mut self, item: Item, ctx: &mut Context<Self>) {
        let n = self.seen.handled.fetch_add(1, Ordering::SeqCst) + 1;
        if self.inside.here() {
            self.seen.lent.fetch_add(1, Ordering::SeqCst);
        }
        if std::thread::current().id() == self.main {
            self.seen.off_main_thread.store(true, Ordering::SeqCst);
        }
        let expected = self.seen.next[item.from as usize].load(Ordering::SeqCst);
        if item.seq < expected {
            self.seen.out_of_order.store(true, Ordering::SeqCst);
        }
        self.seen.next[item.from as usize].store(item.seq + 1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Plain => {}
            Behaviour::PanicEvery(k) => {
                if n.is_multiple_of(k) {
                    panic!("consumer panics on message {n} (expected by the test)");
                }
            }
            Behaviour::StopAt(k) => {
                if n == k {
                    ctx.stop();
                }
            }
            Behaviour::Echo => {
                if let Some(p) = &self.producer {
                    let _ = p.tell(Echoed);
                }
                if let Some(l) = &self.listener {
                    let _ = l.tell(Echoed);
                }
            }
        }
    }
}

struct Wire(Option<Addr<Producer>>, Option<Addr<Listener>>);
impl Message for Wire {
    type Reply = ();
}
impl Handler<Wire> for Consumer {
    fn handle(&mut self, msg: Wire, _: &mut Context<Self>) {
        self.producer = msg.0;
        self.listener = msg.1;
    }
}

struct Echoed;
impl Message for Echoed {
    type Reply = ();
}

struct Producer {
    id: u32,
    target: Addr<Consumer>,
    inside: Arc<Inside>,
    drops: DropCounter,
    echoes: Arc<AtomicU64>,
}
impl Actor for Producer {}

/// Sends this many items; the reply is how many the consumer refused (it had stopped).
struct Flood(u64);
impl Message for Flood {
    type Reply = u64;
}
impl Handler<Flood> for Producer {
    fn handle(&mut self, msg: Flood, _: &mut Context<Self>) -> u64 {
        self.inside.enter();
        let mut refused = 0;
        for seq in 0..msg.0 {
            let item = Item {
                from: self.id,
                seq,
                _token: self.drops.token(),
            };
            if self.target.tell(item).is_err() {
                refused += 1;
            }
        }
        self.inside.leave();
        refused
    }
}
impl Handler<Echoed> for Producer {
    fn handle(&mut self, _: Echoed, _: &mut Context<Self>) {
        self.echoes.fetch_add(1, Ordering::SeqCst);
    }
}

struct Listener(Arc<AtomicU64>);
impl Actor for Listener {}
impl Handler<Echoed> for Listener {
    fn handle(&mut self, _: Echoed, _: &mut Context<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fixture {
    system: System,
    seen: Arc<Seen>,
    inside: Arc<Inside>,
    drops: DropCounter,
    consumer: Addr<Consumer>,
}

fn fixture(workers: usize, behaviour: Behaviour, options: SpawnOptions) -> Fixture {
    // Producers flood from the pool's workers: a test thread waiting for a flood's reply
    // would otherwise run the producer's turn itself (`waiters_help`; its lending there is
    // tested in `helping.rs`).
    let system = System::builder()
        .workers(workers)
        .waiters_help(false)
        .build()
        .unwrap();
    let seen = Arc::new(Seen::default());
    let inside = Arc::new(Inside::default());
    let main = std::thread::current().id();
    let make = {
        let (seen, inside) = (seen.clone(), inside.clone());
        move || Consumer {
            seen: seen.clone(),
            inside: inside.clone(),
            behaviour,
            producer: None,
            listener: None,
            main,
        }
    };
    let consumer = match behaviour {
        Behaviour::PanicEvery(_) => system.spawn_supervised(make, options),
        _ => system.spawn_with(make(), options),
    };
    Fixture {
        system,
        seen,
        inside,
        drops: DropCounter::default(),
        consumer,
    }
}

impl Fixture {
    fn producer(&self, id: u32) -> (Addr<Producer>, Arc<AtomicU64>) {
        let echoes = Arc::new(AtomicU64::new(0));
        let producer = self.system.spawn(Producer {
            id,
            target: self.consumer.clone(),
            inside: self.inside.clone(),
            drops: self.drops.clone(),
            echoes: echoes.clone(),
        });
        (producer, echoes)
    }

    fn handled(&self) -> u64 {
        self.seen.handled.load(Ordering::SeqCst)
    }

    /// Shuts down and checks that every item created was dropped exactly once.
    fn finish(self, created: usize) {
        self.system.shutdown();
        assert_eq!(self.drops.get(), created, "every item dropped exactly once");
        assert!(
            !self.seen.out_of_order.load(Ordering::SeqCst),
            "per-producer order"
        );
    }
}

const N: u64 = 50_000;

#[test]
fn a_flood_from_the_pool_is_fed_as_it_goes() {
    let f = fixture(1, Behaviour::Plain, SpawnOptions::new().catch_up(CATCH_UP));
    let (producer, _) = f.producer(0);
    assert_eq!(producer.ask(Flood(N)).wait(), Ok(0));
    wait_for("every item", LONG, || f.handled() == N);
    // One worker: without lending, nothing could run while the producer is inside its
    // handler. With it, all but the last few hundred are taken inside.
    let lent = f.seen.lent.load(Ordering::SeqCst);
    assert!(
        lent >= N - 4 * CATCH_UP as u64,
        "{lent} of {N} handled in lent turns"
    );
    // The pool counts those turns apart, and once its worker is idle every count is in.
    let pool = settled_pool(&f.system);
    assert!(
        pool.lent_turns >= 1 && pool.lent_turns <= N / 64,
        "lent turns counted: {}",
        pool.lent_turns
    );
    assert!(
        pool.turns >= 2,
        "the producer's and the consumer's own turns"
    );
    f.finish(N as usize);
}

/// The default pool's counters once none of its workers runs a turn.
fn settled_pool(system: &System) -> troupe::PoolMetrics {
    let mut pool = None;
    wait_for("the pool's workers to run out of work", LONG, || {
        let p = system
            .pool_metrics()
            .into_iter()
            .find(|p| p.name == "default")
            .unwrap();
        let idle = p.idle_workers >= p.workers;
        pool = Some(p);
        idle
    });
    pool.unwrap()
}

#[test]
fn without_catch_up_nothing_is_lent() {
    let f = fixture(1, Behaviour::Plain, SpawnOptions::new());
    let (producer, _) = f.producer(0);
    assert_eq!(producer.ask(Flood(N)).wait(), Ok(0));
    wait_for("every item", LONG, || f.handled() == N);
    assert_eq!(f.seen.lent.load(Ordering::SeqCst), 0);
    assert_eq!(settled_pool(&f.system).lent_turns, 0);
    f.finish(N as usize);
}

#[test]
fn a_consumer_that_panics_in_lent_turns_is_restarted_and_loses_only_those_messages() {
    let f = fixture(
        1,
        Behaviour::PanicEvery(1_000),
        SpawnOptions::new().catch_up(CATCH_UP).supervision(
            SupervisorStrategy::one_for_one().intensity(1_000, Duration::from_secs(60)),
        ),
    );
    let (producer, _) = f.producer(0);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if !info.to_string().contains("expected by the test") {
            eprintln!("{info}");
        }
    }));
    assert_eq!(producer.ask(Flood(N)).wait(), Ok(0));
    // Every item reaches a handler (the panicking ones too, counted before they panic).
    wait_for("every item", LONG, || f.handled() == N);
    std::panic::set_hook(quiet);
    assert!(f.seen.lent.load(Ordering::SeqCst) > 0, "lent turns ran");
    // Still alive and answering after 50 restarts.
    let restarted = f.consumer.metrics();
    assert!(restarted.restarts >= (N / 1_000) - 1, "{restarted:?}");
    f.finish(N as usize);
}

#[test]
fn a_consumer_that_stops_in_a_lent_turn_refuses_the_rest_and_drops_each_once() {
    let stop_at = 10_000;
    let f = fixture(
        1,
        Behaviour::StopAt(stop_at),
        SpawnOptions::new().catch_up(CATCH_UP),
    );
    let (producer, _) = f.producer(0);
    let refused = producer.ask(Flood(N)).wait().unwrap();
    wait_for("the consumer to stop", LONG, || f.consumer.is_stopped());
    // The stop came inside a lent turn, well before the flood ended: what was queued then was
    // dropped by the stopping actor, and the rest refused at the send.
    assert!(refused > 0, "sends after the stop were refused");
    assert!(f.handled() >= stop_at && f.handled() + refused <= N);
    f.finish(N as usize);
}

#[test]
fn lent_turns_send_back_to_their_producer_and_hand_off_to_idle_actors() {
    let f = fixture(1, Behaviour::Echo, SpawnOptions::new().catch_up(CATCH_UP));
    let (producer, echoes) = f.producer(0);
    let heard = Arc::new(AtomicU64::new(0));
    let listener = f.system.spawn(Listener(heard.clone()));
    f.consumer
        .ask(Wire(Some(producer.clone()), Some(listener)))
        .wait()
        .unwrap();
    assert_eq!(producer.ask(Flood(N)).wait(), Ok(0));
    wait_for("every echo", LONG, || {
        echoes.load(Ordering::SeqCst) == N && heard.load(Ordering::SeqCst) == N
    });
    assert!(f.seen.lent.load(Ordering::SeqCst) > 0, "lent turns ran");
    f.finish(N as usize);
}

/// A relay with catch-up whose every message makes it flood a second actor with catch-up:
/// the relay's lent turns find the second one behind and must not lend again (no nesting).
struct Relay {
    next: Addr<Consumer>,
    drops: DropCounter,
    relayed: Arc<AtomicUsize>,
}
impl Actor for Relay {}
impl Handler<Item> for Relay {
    fn handle(&mut self, item: Item, _: &mut Context<Self>) {
        for seq in 0..8 {
            let _ = self.next.tell(Item {
                from: 0,
                seq: item.seq * 8 + seq,
                _token: self.drops.token(),
            });
        }
        self.relayed.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_lent_turn_does_not_lend_again() {
    let f = fixture(1, Behaviour::Plain, SpawnOptions::new().catch_up(64));
    let relayed = Arc::new(AtomicUsize::new(0));
    let relay = f.system.spawn_with(
        Relay {
            next: f.consumer.clone(),
            drops: f.drops.clone(),
            relayed: relayed.clone(),
        },
        SpawnOptions::new().catch_up(64),
    );
    // The producer floods the relay (its items go to the relay, not the consumer).
    let echoes = Arc::new(AtomicU64::new(0));
    let producer = f.system.spawn(RelayFeeder {
        relay,
        inside: f.inside.clone(),
        drops: f.drops.clone(),
        _echoes: echoes,
    });
    let m = 5_000u64;
    producer.ask(FeedRelay(m)).wait().unwrap();
    wait_for("every relayed item", LONG, || {
        relayed.load(Ordering::SeqCst) == m as usize && f.handled() == 8 * m
    });
    // One worker: while the feeder floods the relay, the relay runs only in turns lent to it
    // there, and the consumer could run only in a turn lent by one of those. The consumer
    // counts the messages it handled while the feeder was inside its handler on the same
    // thread: there must be none.
    assert_eq!(
        f.seen.lent.load(Ordering::SeqCst),
        0,
        "the consumer never ran inside the producer's flood (no lent turn in a lent turn)"
    );
    f.finish(9 * m as usize);
}

struct RelayFeeder {
    relay: Addr<Relay>,
    inside: Arc<Inside>,
    drops: DropCounter,
    _echoes: Arc<AtomicU64>,
}
impl Actor for RelayFeeder {}
struct FeedRelay(u64);
impl Message for FeedRelay {
    type Reply = ();
}
impl Handler<FeedRelay> for RelayFeeder {
    fn handle(&mut self, msg: FeedRelay, _: &mut Context<Self>) {
        self.inside.enter();
        for seq in 0..msg.0 {
            let _ = self.relay.tell(Item {
                from: 0,
                seq,
                _token: self.drops.token(),
            });
        }
        self.inside.leave();
    }
}

#[test]
fn sends_from_a_plain_thread_lend_nothing() {
    let f = fixture(1, Behaviour::Plain, SpawnOptions::new().catch_up(CATCH_UP));
    for seq in 0..N {
        f.consumer
            .tell(Item {
                from: 0,
                seq,
                _token: f.drops.token(),
            })
            .ok()
            .unwrap();
    }
    wait_for("every item", LONG, || f.handled() == N);
    assert!(
        !f.seen.off_main_thread.load(Ordering::SeqCst),
        "no turn ran on the sending (main) thread"
    );
    f.finish(N as usize);
}

#[test]
fn two_producers_on_two_workers() {
    let f = fixture(2, Behaviour::Plain, SpawnOptions::new().catch_up(CATCH_UP));
    let (p0, _) = f.producer(0);
    let (p1, _) = f.producer(1);
    for _ in 0..3 {
        let before = f.handled();
        let asks = [p0.ask(Flood(N)), p1.ask(Flood(N))];
        for ask in asks {
            assert_eq!(ask.wait_timeout(Duration::from_secs(60)), Ok(0));
        }
        wait_for("both floods", LONG, || f.handled() == before + 2 * N);
        for next in &f.seen.next {
            next.store(0, Ordering::SeqCst);
        }
    }
    f.finish(6 * N as usize);
}

/// A gate an actor waits at until the test opens it.
type Gate = Arc<(Mutex<bool>, Condvar)>;

/// Handles an item in about a microsecond (far slower than a send), after its gate opens; stops
/// itself on item `stop_at`, if given.
struct Slow {
    gate: Gate,
    handled: Arc<AtomicU64>,
    stop_at: Option<u64>,
}
impl Actor for Slow {}
impl Handler<Item> for Slow {
    fn handle(&mut self, item: Item, ctx: &mut Context<Self>) {
        let (open, opened) = &*self.gate;
        let mut guard = open.lock().unwrap();
        while !*guard {
            guard = opened.wait(guard).unwrap();
        }
        drop(guard);
        let until = Instant::now() + Duration::from_micros(1);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let n = self.handled.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(item.seq + 1, n, "in the order sent");
        if self.stop_at == Some(n) {
            ctx.stop();
        }
    }
}

fn open(gate: &(Mutex<bool>, Condvar)) {
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
}

fn slow_actor(
    open_at_start: bool,
    stop_at: Option<u64>,
) -> (System, Addr<Slow>, Gate, Arc<AtomicU64>) {
    let system = System::builder().workers(1).build().unwrap();
    let gate = Arc::new((Mutex::new(open_at_start), Condvar::new()));
    let handled = Arc::new(AtomicU64::new(0));
    let slow = system.spawn_with(
        Slow {
            gate: gate.clone(),
            handled: handled.clone(),
            stop_at,
        },
        SpawnOptions::new().catch_up(CATCH_UP),
    );
    (system, slow, gate, handled)
}

/// Tells `n` items in order from the calling thread; each must be taken.
fn tell_all(slow: &Addr<Slow>, drops: &DropCounter, n: u64) {
    for seq in 0..n {
        slow.tell(Item {
            from: 0,
            seq,
            _token: drops.token(),
        })
        .ok()
        .unwrap();
    }
}

fn catch_up_waits(system: &System) -> u64 {
    system
        .pool_metrics()
        .into_iter()
        .find(|p| p.name == "default")
        .unwrap()
        .catch_up_waits
}

#[test]
fn a_plain_thread_that_outruns_its_actor_waits_for_it() {
    let (system, slow, _gate, handled) = slow_actor(true, None);
    let drops = DropCounter::default();
    let n = 20_000u64;
    tell_all(&slow, &drops, n);
    // A send takes well under the microsecond an item takes: the thread got `CATCH_UP` ahead
    // and waited, every such time, for the actor to read half of it.
    assert!(catch_up_waits(&system) >= 1, "the sending thread waited");
    wait_for("every item", LONG, || handled.load(Ordering::SeqCst) == n);
    system.shutdown();
    assert_eq!(drops.get(), n as usize, "every item dropped exactly once");
}

#[test]
fn a_plain_thread_waits_only_a_moment_for_a_stuck_actor() {
    // The actor is stuck on its first item until the gate opens (as it would be, waiting for
    // a lock the sending thread holds): each wait ends after its millisecond, every send is
    // taken, and nothing is lost once the actor goes on.
    let (system, slow, gate, handled) = slow_actor(false, None);
    let drops = DropCounter::default();
    let n = 20 * CATCH_UP as u64;
    let start = Instant::now();
    tell_all(&slow, &drops, n);
    let waited = catch_up_waits(&system);
    assert!(
        waited >= 1 && waited <= n / 64,
        "one wait per check of a stuck backlog at most: {waited}"
    );
    assert!(
        start.elapsed() < LONG,
        "the sends returned while the actor was stuck"
    );
    assert_eq!(
        handled.load(Ordering::SeqCst),
        0,
        "the actor was stuck throughout"
    );
    open(&gate);
    wait_for("every item", LONG, || handled.load(Ordering::SeqCst) == n);
    system.shutdown();
    assert_eq!(drops.get(), n as usize, "every item dropped exactly once");
}

#[test]
fn a_plain_thread_waiting_on_an_actor_that_stops_goes_on() {
    // The actor stops partway through its backlog while the thread may be waiting on it: the
    // wait ends, later sends are refused and give their item back, and every item is dropped
    // exactly once, handled or not.
    let stop_at = 3 * CATCH_UP as u64;
    let (system, slow, gate, handled) = slow_actor(false, Some(stop_at));
    let drops = DropCounter::default();
    let sender = {
        let (slow, drops) = (slow.clone(), drops.clone());
        std::thread::spawn(move || {
            let mut refused = 0u64;
            for seq in 0..50 * CATCH_UP as u64 {
                if slow
                    .tell(Item {
                        from: 0,
                        seq,
                        _token: drops.token(),
                    })
                    .is_err()
                {
                    refused += 1;
                }
            }
            refused
        })
    };
    std::thread::sleep(Duration::from_millis(5));
    open(&gate);
    let refused = sender.join().unwrap();
    wait_for("the actor to stop", LONG, || slow.is_stopped());
    assert_eq!(
        handled.load(Ordering::SeqCst),
        stop_at,
        "handled up to its stop"
    );
    system.shutdown();
    assert_eq!(
        drops.get(),
        50 * CATCH_UP,
        "every item dropped exactly once ({refused} refused)"
    );
}
