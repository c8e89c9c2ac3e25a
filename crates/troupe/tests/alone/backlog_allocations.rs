//! A producer on the pool that keeps a catch-up actor (`SpawnOptions::catch_up`) a backlog
//! behind allocates nothing once the mailbox has its blocks: finished blocks go on the
//! mailbox's spare chain and come back linked ahead of the tail. Counted by the global
//! allocator.

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

pub fn a_catch_up_backlog_recycles_its_blocks() {
    const N: u64 = 200_000;
    // One worker: the sink runs only in turns the producer lends it, so its backlog stays
    // near 256 messages (about 9 blocks) for the whole flood.
    let system = System::builder().workers(1).build().unwrap();
    crate::until_other_threads_sleep();
    let total = Arc::new(AtomicU64::new(0));
    let sink = system.spawn_with(Sink(total.clone()), SpawnOptions::new().catch_up(256));
    let producer = system.spawn(Producer(sink));
    let wait = |expected: u64| {
        let start = Instant::now();
        while total.load(Ordering::Relaxed) != expected {
            assert!(start.elapsed() < Duration::from_secs(60), "sink stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
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
