#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Threads outside a pool schedule its actors through queues of their own (one of a few per
//! pool, leased by the thread; the injector when all are leased). Every path: more sending
//! threads than queues at once, threads that end with their actors still queued (the lease goes
//! back with its queue full) and new threads that lease those queues again, one thread on
//! several pools with one of them stopped, sends from a thread-local destructor while the
//! thread ends, and sends from actors of another pool. Every message is handled once, in its
//! sender's order, and every message created is dropped exactly once.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use crate::common::{wait_for, DropCounter, Item, LONG};
use troupe::{Actor, Addr, Context, Handler, Message, System};

/// Counts what it handled and checks each sender's order.
#[derive(Default)]
struct Sink {
    next: HashMap<u32, u64>,
    handled: u64,
    out_of_order: u64,
}
impl Actor for Sink {}

impl Handler<Item> for Sink {
    fn handle(&mut self, item: Item, _: &mut Context<Self>) {
        let next = self.next.entry(item.from).or_insert(0);
        if item.seq != *next {
            self.out_of_order += 1;
        }
        *next = item.seq + 1;
        self.handled += 1;
    }
}

/// (handled, out of order).
struct Tally;
impl Message for Tally {
    type Reply = (u64, u64);
}
impl Handler<Tally> for Sink {
    fn handle(&mut self, _: Tally, _: &mut Context<Self>) -> (u64, u64) {
        (self.handled, self.out_of_order)
    }
}

/// Holds the pool's only worker until the test lets go, so what outside threads schedule
/// stays queued.
struct Gate;
impl Actor for Gate {}
/// Entered (said on the first channel), held until the second one speaks.
struct Hold(mpsc::Sender<()>, mpsc::Receiver<()>);
impl Message for Hold {
    type Reply = ();
}
impl Handler<Hold> for Gate {
    fn handle(&mut self, Hold(entered, release): Hold, _: &mut Context<Self>) {
        let _ = entered.send(());
        let _ = release.recv_timeout(LONG);
    }
}

/// Sends `per_sink` items from sender `from` to every sink, round-robin.
fn send_round_robin(sinks: &[Addr<Sink>], from: u32, per_sink: u64, drops: &DropCounter) {
    send_numbered(sinks, from, 0..per_sink, drops)
}

/// Sends items numbered `seqs` from sender `from` to every sink, round-robin.
fn send_numbered(sinks: &[Addr<Sink>], from: u32, seqs: std::ops::Range<u64>, drops: &DropCounter) {
    for seq in seqs {
        for sink in sinks {
            sink.tell(Item {
                from,
                seq,
                _token: drops.token(),
            })
            .expect("the sink is running");
        }
    }
}

/// Asks every sink for its tally and checks the total and the order.
fn check_sinks(sinks: &[Addr<Sink>], per_sink: u64) {
    for (i, sink) in sinks.iter().enumerate() {
        let (handled, out_of_order) = sink
            .ask(Tally)
            .wait_timeout(LONG)
            .expect("the sink answers");
        assert_eq!(handled, per_sink, "sink {i} handled {handled} items");
        assert_eq!(out_of_order, 0, "sink {i} saw items out of order");
    }
}

#[test]
fn threads_that_end_with_their_actors_queued_lose_nothing() {
    // 20 threads at once, more than a pool has queues for them: some use the injector. They
    // all end while the only worker is held, so every lease goes back with its queue full;
    // then a second wave leases the same queues again before anything has run.
    const WAVE: u32 = 20;
    const PER: u64 = 500;
    let drops = DropCounter::default();
    let system = System::builder().workers(1).build().unwrap();
    let sinks: Vec<Addr<Sink>> = (0..8).map(|_| system.spawn(Sink::default())).collect();
    let gate = system.spawn(Gate);
    let (release, held) = mpsc::channel();
    let (entered_tx, entered) = mpsc::channel();
    gate.tell(Hold(entered_tx, held)).unwrap();
    entered
        .recv_timeout(LONG)
        .expect("the worker enters the gate");

    for wave in 0..2 {
        let together = Arc::new(Barrier::new(WAVE as usize));
        let threads: Vec<_> = (0..WAVE)
            .map(|t| {
                let (sinks, drops, together) = (sinks.clone(), drops.clone(), together.clone());
                thread::spawn(move || {
                    // All hold their leases at the same moment.
                    together.wait();
                    send_round_robin(&sinks, wave * WAVE + t, PER, &drops);
                    together.wait();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
    assert_eq!(drops.get(), 0, "nothing ran while the worker was held");
    release.send(()).unwrap();
    check_sinks(&sinks, 2 * u64::from(WAVE) * PER);
    system.shutdown();
    assert_eq!(drops.get() as u64, 2 * u64::from(WAVE) * PER * 8);
}

#[test]
fn one_thread_on_several_pools_one_of_them_stopped() {
    const PER: u64 = 2_000;
    let drops = DropCounter::default();
    let first = System::builder().workers(1).build().unwrap();
    let second = System::builder().workers(2).build().unwrap();
    let a = vec![first.spawn(Sink::default())];
    let b = vec![second.spawn(Sink::default())];
    let sender = {
        let (a2, b2, drops2) = (a.clone(), b.clone(), drops.clone());
        let (stopped_tx, stopped_rx) = mpsc::channel::<()>();
        let (sent_tx, sent_rx) = mpsc::channel::<()>();
        let handle = thread::spawn(move || {
            let (a, b, drops) = (a2, b2, drops2);
            send_round_robin(&a, 0, PER, &drops);
            send_round_robin(&b, 0, PER, &drops);
            sent_tx.send(()).unwrap();
            // The first system stops; this thread's lease of it is dropped on its next new
            // pool, and sends to the second keep their queue.
            stopped_rx.recv().unwrap();
            let third = System::builder().workers(1).build().unwrap();
            let c = vec![third.spawn(Sink::default())];
            send_round_robin(&c, 0, PER, &drops);
            send_round_robin(&b, 1, PER, &drops);
            check_sinks(&c, PER);
            third.shutdown();
        });
        sent_rx.recv().unwrap();
        check_sinks(&a, PER);
        first.shutdown();
        stopped_tx.send(()).unwrap();
        handle
    };
    sender.join().unwrap();
    check_sinks(&b, 2 * PER);
    second.shutdown();
    assert_eq!(drops.get() as u64, 4 * PER);
}

thread_local! {
    /// Sends its items while the thread's thread-locals are being destroyed.
    static SENDS_ON_EXIT: std::cell::RefCell<Option<ExitSender>> = const { std::cell::RefCell::new(None) };
}

struct ExitSender {
    sinks: Vec<Addr<Sink>>,
    drops: DropCounter,
}

impl Drop for ExitSender {
    fn drop(&mut self) {
        // Whether the thread's leases are still there or already gone, nothing is lost.
        send_round_robin(&self.sinks, 0, 1_000, &self.drops);
    }
}

#[test]
fn sends_from_a_thread_local_destructor_arrive() {
    let drops = DropCounter::default();
    let system = System::builder().workers(2).build().unwrap();
    let sinks: Vec<Addr<Sink>> = (0..4).map(|_| system.spawn(Sink::default())).collect();
    let (sinks2, drops2) = (sinks.clone(), drops.clone());
    thread::spawn(move || {
        // A send first, so the thread holds a lease when its destructors run.
        sinks2[0]
            .tell(Item {
                from: 1,
                seq: 0,
                _token: drops2.token(),
            })
            .unwrap();
        SENDS_ON_EXIT.with(|s| {
            *s.borrow_mut() = Some(ExitSender {
                sinks: sinks2,
                drops: drops2,
            })
        });
    })
    .join()
    .unwrap();
    wait_for("the items sent on exit", LONG, || drops.get() == 4_001);
    let total: u64 = sinks
        .iter()
        .map(|s| s.ask(Tally).wait_timeout(LONG).unwrap().0)
        .sum();
    assert_eq!(total, 4_001);
    system.shutdown();
}

/// Forwards what it is told to a sink on another system's pool.
struct Relay {
    to: Vec<Addr<Sink>>,
    drops: DropCounter,
    /// Items sent to each sink so far.
    sent: u64,
}
impl Actor for Relay {}
struct Burst(u64);
impl Message for Burst {
    type Reply = ();
}
impl Handler<Burst> for Relay {
    fn handle(&mut self, Burst(n): Burst, _: &mut Context<Self>) {
        send_numbered(&self.to, 7, self.sent..self.sent + n, &self.drops);
        self.sent += n;
    }
}

#[test]
fn actors_of_another_pool_send_through_their_workers_queues() {
    let drops = DropCounter::default();
    let target = System::builder().workers(2).build().unwrap();
    let source = System::builder().workers(2).build().unwrap();
    let sinks: Vec<Addr<Sink>> = (0..16).map(|_| target.spawn(Sink::default())).collect();
    let relay = source.spawn(Relay {
        to: sinks.clone(),
        drops: drops.clone(),
        sent: 0,
    });
    for _ in 0..10 {
        relay.tell(Burst(300)).unwrap();
    }
    relay
        .ask_timeout(Tick, Duration::from_secs(30))
        .wait()
        .unwrap();
    check_sinks(&sinks, 3_000);
    source.shutdown();
    target.shutdown();
    assert_eq!(drops.get(), 16 * 3_000);
}

/// Answers once everything told before it is handled.
struct Tick;
impl Message for Tick {
    type Reply = ();
}
impl Handler<Tick> for Relay {
    fn handle(&mut self, _: Tick, _: &mut Context<Self>) {}
}
