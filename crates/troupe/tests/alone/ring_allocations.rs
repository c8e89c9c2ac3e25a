//! Steady-state messaging allocates nothing: a ring of actors passes a token a million times
//! while a counting global allocator watches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use troupe::{Actor, Addr, Context, Handler, Message, System};

use crate::counting_alloc::allocations;

static DONE: AtomicBool = AtomicBool::new(false);

struct Node {
    id: u32,
    next: Option<Addr<Node>>,
    rounds: u64,
}
impl Actor for Node {}

struct Token {
    origin: u32,
    value: u64,
}
impl Message for Token {
    type Reply = ();
}
impl Handler<Token> for Node {
    fn handle(&mut self, t: Token, _: &mut Context<Self>) {
        let next = self.next.as_ref().unwrap();
        if t.origin != self.id {
            let _ = next.tell(t);
        } else if t.value + 1 == self.rounds {
            DONE.store(true, Ordering::Release);
        } else {
            let _ = next.tell(Token {
                origin: t.origin,
                value: t.value + 1,
            });
        }
    }
}

struct Setup {
    next: Addr<Node>,
    rounds: u64,
}
impl Message for Setup {
    type Reply = ();
}
impl Handler<Setup> for Node {
    fn handle(&mut self, s: Setup, _: &mut Context<Self>) {
        self.next = Some(s.next);
        self.rounds = s.rounds;
    }
}

/// Runs the ring and returns how many allocations happened while the token went round.
fn run_ring(ring: &[Addr<Node>], rounds: u64) -> usize {
    for (i, node) in ring.iter().enumerate() {
        node.ask(Setup {
            next: ring[(i + 1) % ring.len()].clone(),
            rounds,
        })
        .wait()
        .unwrap();
    }
    DONE.store(false, Ordering::Release);
    let before = allocations();
    ring[0]
        .tell(Token {
            origin: 0,
            value: 0,
        })
        .unwrap();
    let start = Instant::now();
    while !DONE.load(Ordering::Acquire) {
        assert!(start.elapsed() < Duration::from_secs(120), "ring stalled");
        std::thread::sleep(Duration::from_millis(1));
    }
    let allocations = allocations() - before;
    let messages = ring.len() as u64 * rounds;
    eprintln!("{allocations} allocations for {messages} messages");
    allocations
}

pub fn ring_messages_do_not_allocate() {
    let system = System::builder().workers(2).build().unwrap();
    crate::until_other_threads_sleep();
    let ring: Vec<Addr<Node>> = (0..100)
        .map(|id| {
            system.spawn(Node {
                id,
                next: None,
                rounds: 0,
            })
        })
        .collect();
    // Warm-up: every mailbox gets its block and its spare (two allocations per actor).
    let warm_up = run_ring(&ring, 1_000);
    assert!(
        warm_up <= 2 * ring.len() + 4,
        "{warm_up} allocations in warm-up"
    );
    // Measured: a million messages. A handful of allocations may come from the one message
    // injected from outside the pool (the injector allocates a block per 63 entries); none may
    // come per message.
    let measured = run_ring(&ring, 10_000);
    assert!(
        measured <= 4,
        "{measured} allocations while passing 1,000,000 messages"
    );
    system.shutdown();
}
