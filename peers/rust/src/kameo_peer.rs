//! `kameo`: kameo actors, one struct per message with a `Message<M>` impl each, fire-and-forget
//! with `tell(..).await` and request-reply with `ask(..)`. Actors are spawned with
//! `Actor::spawn`, i.e. kameo's default bounded mailbox, on a tokio multi-thread runtime
//! (default worker count), as `#[tokio::main]` would give.

use std::sync::Arc;
use std::time::Instant;

use kameo::error::Infallible;
use kameo::message::{Context, Message};
use kameo::prelude::{ActorRef, Spawn};
use kameo::reply::{DelegatedReply, ReplySender};
use kameo::{Actor, Reply};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

use crate::common::{versions, ChainRun, CounterRun, Latch, Peer, RingRun, Scenario, SpawnRun};

pub struct KameoPeer {
    rt: Runtime,
}

impl KameoPeer {
    pub fn new() -> Self {
        let rt = Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
        KameoPeer { rt }
    }
}

/// Stops every actor and waits until each has shut down.
async fn stop_all<A: Actor>(actors: &[ActorRef<A>]) {
    for actor in actors {
        let _ = actor.stop_gracefully().await;
    }
    for actor in actors {
        actor.wait_for_shutdown().await;
    }
}

// --- ring --------------------------------------------------------------------------------------

#[derive(Actor)]
struct RingNode {
    id: usize,
    rounds: u64,
    next: Option<ActorRef<RingNode>>,
    received: u64,
    /// Held by the origin: the deferred reply to `Start`, sent when the run ends.
    done: Option<ReplySender<u64>>,
}

/// Gives a node its successor.
struct Connect(ActorRef<RingNode>);
/// Asked of node 0: puts the token on the ring; replied to when the origin has seen M rounds.
struct Start;
struct Token {
    origin: usize,
    value: u64,
}
/// How many tokens this node received.
struct Received;

impl RingNode {
    async fn forward(&self, token: Token) {
        if let Some(next) = &self.next {
            // A failed send leaves the count short, which the check then reports.
            let _ = next.tell(token).await;
        }
    }
}

impl Message<Connect> for RingNode {
    type Reply = ();
    async fn handle(&mut self, Connect(next): Connect, _: &mut Context<Self, ()>) {
        self.next = Some(next);
    }
}

impl Message<Start> for RingNode {
    type Reply = DelegatedReply<u64>;
    async fn handle(&mut self, _: Start, ctx: &mut Context<Self, Self::Reply>) -> Self::Reply {
        let (delegated, sender) = ctx.reply_sender();
        self.done = sender;
        self.forward(Token { origin: self.id, value: 0 }).await;
        delegated
    }
}

impl Message<Token> for RingNode {
    type Reply = ();
    async fn handle(&mut self, Token { origin, mut value }: Token, _: &mut Context<Self, ()>) {
        self.received += 1;
        if origin == self.id {
            value += 1;
            if value == self.rounds {
                if let Some(done) = self.done.take() {
                    done.send(value);
                }
                return;
            }
        }
        self.forward(Token { origin, value }).await;
    }
}

impl Message<Received> for RingNode {
    type Reply = u64;
    async fn handle(&mut self, _: Received, _: &mut Context<Self, u64>) -> u64 {
        self.received
    }
}

// --- spawn -------------------------------------------------------------------------------------

/// An idle actor: reports its start-up, then waits for messages that never come.
struct Idle;

impl Actor for Idle {
    type Args = Arc<Latch>;
    type Error = Infallible;

    async fn on_start(started: Arc<Latch>, _: ActorRef<Self>) -> Result<Self, Infallible> {
        started.arrive();
        Ok(Idle)
    }
}

struct Ping;

impl Message<Ping> for Idle {
    type Reply = ();
    async fn handle(&mut self, _: Ping, _: &mut Context<Self, ()>) {}
}

// --- counter -----------------------------------------------------------------------------------

#[derive(Actor, Default)]
struct Counter {
    total: u64,
}

struct Add(u64);
struct GetAndReset;

impl Message<Add> for Counter {
    type Reply = ();
    async fn handle(&mut self, Add(n): Add, _: &mut Context<Self, ()>) {
        self.total += n;
    }
}

impl Message<GetAndReset> for Counter {
    type Reply = u64;
    async fn handle(&mut self, _: GetAndReset, _: &mut Context<Self, u64>) -> u64 {
        std::mem::take(&mut self.total)
    }
}

/// A producer actor: on `Produce(k)` it tells the counter `Add(100)` k times, then replies.
#[derive(Actor)]
struct Producer {
    counter: ActorRef<Counter>,
}

struct Produce(u64);

impl Message<Produce> for Producer {
    type Reply = ();
    async fn handle(&mut self, Produce(k): Produce, _: &mut Context<Self, ()>) {
        for _ in 0..k {
            if self.counter.tell(Add(100)).await.is_err() {
                break;
            }
        }
    }
}

// --- chain -------------------------------------------------------------------------------------

/// A chain stage; the one without `next` is the sink.
#[derive(Actor)]
struct Stage {
    next: Option<ActorRef<Stage>>,
    expected: u64,
    count: u64,
    sum: u64,
    done: Option<oneshot::Sender<()>>,
}

struct Item(u64);
/// Asked of the sink: what it received.
struct GetTally;

#[derive(Reply)]
struct Tally {
    count: u64,
    sum: u64,
}

impl Message<Item> for Stage {
    type Reply = ();
    async fn handle(&mut self, Item(v): Item, _: &mut Context<Self, ()>) {
        match &self.next {
            Some(next) => {
                let _ = next.tell(Item(v)).await;
            }
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

impl Message<GetTally> for Stage {
    type Reply = Tally;
    async fn handle(&mut self, _: GetTally, _: &mut Context<Self, Tally>) -> Tally {
        Tally { count: self.count, sum: self.sum }
    }
}

impl Peer for KameoPeer {
    fn runtime(&self) -> String {
        format!("kameo {} / tokio {} multi-thread, {}", versions::KAMEO, versions::TOKIO, versions::RUSTC)
    }

    fn notes(&self, scenario: Scenario) -> String {
        let extra = match scenario {
            Scenario::Counter => "; producers are kameo actors",
            _ => "",
        };
        format!("kameo actors with the default bounded mailbox (64), tell().await / ask, tokio multi-thread runtime (one worker per core){extra}")
    }

    fn ring(&mut self, actors: u64, rounds: u64) -> RingRun {
        let n = actors as usize;
        self.rt.block_on(async move {
            let t0 = Instant::now();
            let nodes: Vec<ActorRef<RingNode>> = (0..n)
                .map(|id| RingNode::spawn(RingNode { id, rounds, next: None, received: 0, done: None }))
                .collect();
            for (id, node) in nodes.iter().enumerate() {
                node.tell(Connect(nodes[(id + 1) % n].clone())).await.expect("node alive");
            }
            let construct = t0.elapsed();

            let t1 = Instant::now();
            let final_value = nodes[0].ask(Start).await.unwrap_or(0);
            let elapsed = t1.elapsed();

            let mut received = 0;
            for node in &nodes {
                received += node.ask(Received).await.unwrap_or(0);
            }
            stop_all(&nodes).await;
            RingRun { construct, elapsed, received, final_value }
        })
    }

    fn spawn(&mut self, actors: u64) -> SpawnRun {
        self.rt.block_on(async move {
            let started = Latch::new(actors);
            let t0 = Instant::now();
            let refs: Vec<ActorRef<Idle>> = (0..actors).map(|_| Idle::spawn(started.clone())).collect();
            started.wait().await;
            let elapsed = t0.elapsed();
            let rss_after = crate::common::vm_rss_bytes();
            stop_all(&refs).await;
            SpawnRun { elapsed, rss_after, started: started.count() }
        })
    }

    fn counter(&mut self, producers: u64, per_producer: u64) -> CounterRun {
        self.rt.block_on(async move {
            let counter = Counter::spawn_default();
            let producer_refs: Vec<_> =
                (0..producers).map(|_| Producer::spawn(Producer { counter: counter.clone() })).collect();

            let t0 = Instant::now();
            // Enqueue every `Produce` first so that the producers run concurrently.
            let mut pending = Vec::with_capacity(producer_refs.len());
            for producer in &producer_refs {
                pending.push(producer.ask(Produce(per_producer)).enqueue().await.expect("producer alive"));
            }
            for reply in pending {
                reply.await.expect("producer finished");
            }
            let reply = counter.ask(GetAndReset).await.expect("counter replied");
            let elapsed = t0.elapsed();

            stop_all(&producer_refs).await;
            stop_all(&[counter]).await;
            CounterRun { elapsed, reply }
        })
    }

    fn chain(&mut self, length: u64) -> ChainRun {
        self.rt.block_on(async move {
            // Built from the sink backwards, each stage spawned knowing its next (not timed).
            let (done_tx, done_rx) = oneshot::channel();
            let sink = Stage::spawn(Stage { next: None, expected: length, count: 0, sum: 0, done: Some(done_tx) });
            let mut stages = vec![sink.clone()];
            for _ in 1..length {
                let next = stages.last().expect("non-empty").clone();
                stages.push(Stage::spawn(Stage { next: Some(next), expected: 0, count: 0, sum: 0, done: None }));
            }
            let first = stages.last().expect("non-empty").clone();

            let t0 = Instant::now();
            for v in 1..=length {
                first.tell(Item(v)).await.expect("stage 1 alive");
            }
            let _ = done_rx.await;
            let elapsed = t0.elapsed();

            let tally = sink.ask(GetTally).await.unwrap_or(Tally { count: 0, sum: 0 });
            // Stop from the source end so that nothing is still in flight behind a stopped stage.
            stages.reverse();
            stop_all(&stages).await;
            ChainRun { elapsed, received: tally.count, sum: tally.sum }
        })
    }
}
