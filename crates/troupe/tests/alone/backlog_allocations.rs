//! A producer on the pool that keeps a catch-up actor (`SpawnOptions::catch_up`) a backlog
//! behind allocates nothing once the mailbox has its blocks: finished blocks go on the
//! mailbox's spare chain and come back linked ahead of the tail. Nor does a plain thread that
//! outruns the actor's worker: it waits for the backlog to halve, so the backlog never
//! needs more blocks than the chain keeps. Counted by the global allocator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use troupe::{Actor, Addr, Context, Handler, Message, SpawnOptions, System};

use crate::counting_alloc::allocations;
use crate::sink::{Add, Sink};

struct Producer(Addr<Sink>);
impl Actor for Producer {}
/// Told, not asked: a plain thread waiting for a reply would run the producer's turn itself
/// (helping, see `Ask::wait`), off the pool, where no turn of the sink can be lent.
struct Flood(u64, mpsc::Sender<usize>);
impl Message for Flood {
    type Reply = ();
}
impl Handler<Flood> for Producer {
    /// Sends `n` messages; reports the allocations counted while sending them.
    fn handle(&mut self, msg: Flood, _: &mut Context<Self>) {
        let before = allocations();
        for _ in 0..msg.0 {
            self.0.tell(Add(1)).unwrap();
        }
        msg.1.send(allocations() - before).unwrap();
    }
}

/// Waits (at most a minute) until the sink's total is `expected`.
fn until_total(total: &AtomicU64, expected: u64) {
    let start = Instant::now();
    while total.load(Ordering::Relaxed) != expected {
        assert!(start.elapsed() < Duration::from_secs(60), "sink stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn a_catch_up_backlog_recycles_its_blocks() {
    const N: u64 = 200_000;
    // One worker: the sink runs only in turns the producer lends it, so its backlog stays
    // near 256 messages (about 9 blocks) for the whole flood.
    let system = System::builder().workers(1).build().unwrap();
    crate::until_other_threads_sleep();
    let total = Arc::new(AtomicU64::new(0));
    let sink = system.spawn_with(Sink(total.clone()), SpawnOptions::new().catch_up(256));
    let producer = system.spawn(Producer(sink));
    let wait = |expected: u64| until_total(&total, expected);
    // Warm-up: the mailbox allocates the blocks its backlog needs once.
    let (counted, count) = mpsc::channel();
    producer.tell(Flood(N, counted.clone())).unwrap();
    let warm_up = count.recv().unwrap();
    wait(N);
    producer.tell(Flood(N, counted)).unwrap();
    let measured = count.recv().unwrap();
    wait(2 * N);
    eprintln!("{warm_up} allocations in the warm-up flood, {measured} in the measured one");
    // Without the chain, every block after the first spare is a new allocation: about
    // N / 31 = 6,450 of them.
    assert!(
        measured <= 8,
        "{measured} allocations while sending {N} messages a backlog behind"
    );
    system.shutdown();
}

/// Adds what it is told after some arithmetic: a few hundred nanoseconds a message, so that a
/// plain thread's sends (tens of nanoseconds each) outrun it.
struct SlowSink(Arc<AtomicU64>);
impl Actor for SlowSink {}
impl Handler<Add> for SlowSink {
    fn handle(&mut self, msg: Add, _: &mut Context<Self>) {
        let mut x = msg.0;
        for _ in 0..200 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        std::hint::black_box(x);
        self.0.fetch_add(msg.0, Ordering::Relaxed);
    }
}

pub fn a_plain_thread_keeps_a_catch_up_backlog_in_recycled_blocks() {
    const N: u64 = 20_000;
    let system = System::builder().workers(1).build().unwrap();
    crate::until_other_threads_sleep();
    let total = Arc::new(AtomicU64::new(0));
    let sink = system.spawn_with(SlowSink(total.clone()), SpawnOptions::new().catch_up(256));
    let flood = || {
        let before = allocations();
        for _ in 0..N {
            sink.tell(Add(1)).unwrap();
        }
        allocations() - before
    };
    let wait = |expected: u64| until_total(&total, expected);
    let warm_up = flood();
    wait(N);
    let measured = flood();
    wait(2 * N);
    let waits = system
        .pool_metrics()
        .into_iter()
        .find(|p| p.name == "default")
        .unwrap()
        .catch_up_waits;
    eprintln!(
        "{warm_up} allocations in the warm-up flood, {measured} in the measured one; {waits} waits"
    );
    assert!(waits >= 1, "the sending thread outran the sink and waited");
    // Without catch-up the same floods took 649 and 388 allocations: the thread runs
    // thousands of messages ahead, and the blocks beyond the chain's and the shelves' come
    // fresh. A worker that the host holds off for over a millisecond lets the thread go on
    // (the wait's bound), so the bound leaves room for a short stall.
    assert!(
        measured <= 64,
        "{measured} allocations while a plain thread sent {N} messages to a catch-up actor"
    );
    system.shutdown();
}
