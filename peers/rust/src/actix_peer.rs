//! `actix`: actix actors (`Actor` + one `Handler` per message), `do_send` for fire-and-forget
//! and `send(..).await` for request-reply. Everything runs inside one actix `System`, whose
//! arbiter is a single thread; the counter's producers are each started on an `Arbiter` of
//! their own (one thread each), actix's way of putting actors on several cores.

use std::time::Instant;

use actix::prelude::*;
use tokio::sync::oneshot;

use crate::common::{versions, ChainRun, CounterRun, Latch, Peer, RingRun, Scenario, SpawnRun};

pub struct ActixPeer {
    system: SystemRunner,
}

impl ActixPeer {
    pub fn new() -> Self {
        ActixPeer { system: System::new() }
    }
}

// --- ring --------------------------------------------------------------------------------------

struct RingNode {
    id: usize,
    rounds: u64,
    next: Option<Addr<RingNode>>,
    received: u64,
    done: Option<oneshot::Sender<u64>>,
}

impl Actor for RingNode {
    type Context = Context<Self>;
}

/// Gives a node its successor.
#[derive(Message)]
#[rtype(result = "()")]
struct Connect(Addr<RingNode>);

/// Sent to node 0: puts the token on the ring; `done` fires when the origin has seen M rounds.
#[derive(Message)]
#[rtype(result = "()")]
struct Start(oneshot::Sender<u64>);

#[derive(Message)]
#[rtype(result = "()")]
struct Token {
    origin: usize,
    value: u64,
}

/// Replies with the node's token count and stops the node (the ring's addresses form a cycle,
/// so the nodes would not stop by themselves).
#[derive(Message)]
#[rtype(result = "u64")]
struct Finish;

impl RingNode {
    fn forward(&self, token: Token) {
        if let Some(next) = &self.next {
            next.do_send(token);
        }
    }
}

impl Handler<Connect> for RingNode {
    type Result = ();
    fn handle(&mut self, Connect(next): Connect, _: &mut Context<Self>) {
        self.next = Some(next);
    }
}

impl Handler<Start> for RingNode {
    type Result = ();
    fn handle(&mut self, Start(done): Start, _: &mut Context<Self>) {
        self.done = Some(done);
        self.forward(Token { origin: self.id, value: 0 });
    }
}

impl Handler<Token> for RingNode {
    type Result = ();
    fn handle(&mut self, Token { origin, mut value }: Token, _: &mut Context<Self>) {
        self.received += 1;
        if origin == self.id {
            value += 1;
            if value == self.rounds {
                if let Some(done) = self.done.take() {
                    let _ = done.send(value);
                }
                return;
            }
        }
        self.forward(Token { origin, value });
    }
}

impl Handler<Finish> for RingNode {
    type Result = u64;
    fn handle(&mut self, _: Finish, ctx: &mut Context<Self>) -> u64 {
        ctx.stop();
        self.received
    }
}

// --- spawn -------------------------------------------------------------------------------------

/// An idle actor: reports its start-up and its stop; waits for messages that never come.
struct Idle {
    started: std::sync::Arc<Latch>,
    stopped: std::sync::Arc<Latch>,
}

impl Actor for Idle {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.started.arrive();
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.stopped.arrive();
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct Ping;

impl Handler<Ping> for Idle {
    type Result = ();
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
}

// --- counter -----------------------------------------------------------------------------------

#[derive(Default)]
struct Counter {
    total: u64,
}

impl Actor for Counter {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
struct Add(u64);

#[derive(Message)]
#[rtype(result = "u64")]
struct GetAndReset;

impl Handler<Add> for Counter {
    type Result = ();
    fn handle(&mut self, Add(n): Add, _: &mut Context<Self>) {
        self.total += n;
    }
}

impl Handler<GetAndReset> for Counter {
    type Result = u64;
    fn handle(&mut self, _: GetAndReset, _: &mut Context<Self>) -> u64 {
        std::mem::take(&mut self.total)
    }
}

/// A producer actor: on `Produce(k)` it sends `Add(100)` to the counter k times, then replies.
struct Producer {
    counter: Addr<Counter>,
}

impl Actor for Producer {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
struct Produce(u64);

impl Handler<Produce> for Producer {
    type Result = ();
    fn handle(&mut self, Produce(k): Produce, _: &mut Context<Self>) {
        for _ in 0..k {
            self.counter.do_send(Add(100));
        }
    }
}

// --- chain -------------------------------------------------------------------------------------

/// A chain stage; the one without `next` is the sink.
struct Stage {
    next: Option<Addr<Stage>>,
    expected: u64,
    count: u64,
    sum: u64,
    done: Option<oneshot::Sender<()>>,
}

impl Actor for Stage {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
struct Item(u64);

/// Asked of the sink: (count, sum) of what it received.
#[derive(Message)]
#[rtype(result = "(u64, u64)")]
struct Tally;

impl Handler<Item> for Stage {
    type Result = ();
    fn handle(&mut self, Item(v): Item, _: &mut Context<Self>) {
        match &self.next {
            Some(next) => next.do_send(Item(v)),
            None => {
                self.count += 1;
                self.sum += v;
                if self.count == self.expected {
                    if let Some(done) = self.done.take() {
                        let _ = done.send(());
                    }
                }
            }
        }
    }
}

impl Handler<Tally> for Stage {
    type Result = MessageResult<Tally>;
    fn handle(&mut self, _: Tally, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.count, self.sum))
    }
}

impl Peer for ActixPeer {
    fn runtime(&self) -> String {
        format!(
            "actix {} / actix-rt {} / tokio {}, {}",
            versions::ACTIX, versions::ACTIX_RT, versions::TOKIO, versions::RUSTC
        )
    }

    fn notes(&self, scenario: Scenario) -> String {
        match scenario {
            Scenario::Counter => "actix actors, do_send / send().await; counter on the System arbiter, each producer an actor on its own Arbiter (thread)".into(),
            _ => "actix actors on the single-threaded System arbiter, do_send for one-way messages, send().await for replies".into(),
        }
    }

    fn ring(&mut self, actors: u64, rounds: u64) -> RingRun {
        let n = actors as usize;
        self.system.block_on(async move {
            let t0 = Instant::now();
            let nodes: Vec<Addr<RingNode>> = (0..n)
                .map(|id| RingNode { id, rounds, next: None, received: 0, done: None }.start())
                .collect();
            for (id, node) in nodes.iter().enumerate() {
                node.do_send(Connect(nodes[(id + 1) % n].clone()));
            }
            let construct = t0.elapsed();

            let (done_tx, done_rx) = oneshot::channel();
            let t1 = Instant::now();
            nodes[0].do_send(Start(done_tx));
            let final_value = done_rx.await.unwrap_or(0);
            let elapsed = t1.elapsed();

            let mut received = 0;
            for node in &nodes {
                received += node.send(Finish).await.unwrap_or(0);
            }
            RingRun { construct, elapsed, received, final_value }
        })
    }

    fn spawn(&mut self, actors: u64) -> SpawnRun {
        self.system.block_on(async move {
            let started = Latch::new(actors);
            let stopped = Latch::new(actors);
            let t0 = Instant::now();
            let addrs: Vec<Addr<Idle>> = (0..actors)
                .map(|_| Idle { started: started.clone(), stopped: stopped.clone() }.start())
                .collect();
            started.wait().await;
            let elapsed = t0.elapsed();
            let rss_after = crate::common::vm_rss_bytes();

            // An actix actor stops once no address to it is left and its mailbox is empty.
            drop(addrs);
            stopped.wait().await;
            SpawnRun { elapsed, rss_after, started: started.count() }
        })
    }

    fn counter(&mut self, producers: u64, per_producer: u64) -> CounterRun {
        let arbiters: Vec<Arbiter> = (0..producers).map(|_| Arbiter::new()).collect();
        let run = self.system.block_on(async {
            let counter = Counter::default().start();
            let producer_addrs: Vec<Addr<Producer>> = arbiters
                .iter()
                .map(|arbiter| {
                    let counter = counter.clone();
                    Producer::start_in_arbiter(&arbiter.handle(), move |_| Producer { counter })
                })
                .collect();

            let t0 = Instant::now();
            // `send` enqueues at once; the requests are awaited after all are sent.
            let requests: Vec<_> = producer_addrs.iter().map(|p| p.send(Produce(per_producer))).collect();
            for request in requests {
                request.await.expect("producer finished");
            }
            let reply = counter.send(GetAndReset).await.expect("counter replied");
            CounterRun { elapsed: t0.elapsed(), reply }
        });
        for arbiter in arbiters {
            arbiter.stop();
            let _ = arbiter.join();
        }
        run
    }

    fn chain(&mut self, length: u64) -> ChainRun {
        self.system.block_on(async move {
            // Built from the sink backwards, each stage started knowing its next (not timed).
            let (done_tx, done_rx) = oneshot::channel();
            let sink = Stage { next: None, expected: length, count: 0, sum: 0, done: Some(done_tx) }.start();
            let mut first = sink.clone();
            for _ in 1..length {
                first = Stage { next: Some(first), expected: 0, count: 0, sum: 0, done: None }.start();
            }

            let t0 = Instant::now();
            for v in 1..=length {
                first.do_send(Item(v));
            }
            let _ = done_rx.await;
            let elapsed = t0.elapsed();

            let (received, sum) = sink.send(Tally).await.unwrap_or((0, 0));
            // Dropping the last addresses stops the stages one after another.
            ChainRun { elapsed, received, sum }
        })
    }
}
