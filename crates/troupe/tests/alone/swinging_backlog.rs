//! A backlog that swings allocates nothing once the blocks are in circulation: a plain thread
//! queues a burst of about three blocks while the actor is held back, then lets it drain, over
//! and over. The blocks the actor's worker finishes go on its shelf of blocks, overflow to the
//! process-wide spare shelf, and come back to the sending thread for the next burst; when they
//! were freed instead, each burst allocated about two again, on the sender's thread, that the
//! worker had just freed. Counted by the global allocator.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::{Context, Handler, Message, System};

use crate::counting_alloc::allocations;
use crate::sink::{Add, Sink};

/// Messages per burst: three blocks of 31 slots, less a few.
const BURST: u64 = 90;

/// Opened by the sending thread once a burst is queued.
static GATE: AtomicBool = AtomicBool::new(false);

/// Holds the actor's turn until the gate opens (and closes it again), so the burst sent
/// meanwhile waits in the mailbox.
struct Hold;
impl Message for Hold {
    type Reply = ();
}
impl Handler<Hold> for Sink {
    fn handle(&mut self, _: Hold, _: &mut Context<Self>) {
        let start = Instant::now();
        while !GATE.swap(false, Ordering::Acquire) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "gate never opened"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

pub fn a_swinging_backlog_recycles_its_blocks() {
    const BURSTS: u64 = 50;
    // One worker, so every finished block lands on one shelf. With two, a machine busy enough
    // to move the actor between them (seen under AddressSanitizer beside other test runs:
    // 15 allocations in the 50 bursts) leaves blocks on the shelf of the worker that stopped
    // running it, up to its 16, and the sender allocates those again until that shelf too is
    // full and overflows: bounded, but not the circulation this test measures.
    let system = System::builder().workers(1).build().unwrap();
    crate::until_other_threads_sleep();
    let total = Arc::new(AtomicU64::new(0));
    let sink = system.spawn(Sink(total.clone()));
    let mut sent = 0;
    let mut burst = || {
        sink.tell(Hold).unwrap();
        for _ in 0..BURST {
            sink.tell(Add(1)).unwrap();
        }
        sent += BURST;
        GATE.store(true, Ordering::Release);
        let start = Instant::now();
        while total.load(Ordering::Relaxed) != sent {
            assert!(start.elapsed() < Duration::from_secs(60), "sink stalled");
            std::thread::sleep(Duration::from_micros(50));
        }
    };
    // Warm-up: the blocks one burst needs, and those the worker's shelf holds before it
    // overflows to the spare shelf (16), are allocated once.
    for _ in 0..20 {
        burst();
    }
    let before = allocations();
    for _ in 0..BURSTS {
        burst();
    }
    let measured = allocations() - before;
    eprintln!("{measured} allocations in {BURSTS} bursts of {BURST} messages");
    // With finished blocks freed: about two allocations per burst (97 in 50 bursts).
    assert!(
        measured <= 4,
        "{measured} allocations in {BURSTS} bursts of {BURST} messages a few blocks deep"
    );
    system.shutdown();
}
