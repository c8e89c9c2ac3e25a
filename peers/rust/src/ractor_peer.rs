//! `ractor`: ractor actors, each with one message enum, `cast` for fire-and-forget and
//! `call` / `RpcReplyPort` for request-reply. Spawned with `Actor::spawn` (which awaits the
//! actor's `pre_start`), ractor's unbounded mailboxes, on a tokio multi-thread runtime
//! (default worker count), as `#[tokio::main]` would give.

use std::sync::Arc;
use std::time::Instant;

use ractor::concurrency::JoinHandle;
use ractor::{call, Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::oneshot;

use crate::common::{versions, ChainRun, CounterRun, Latch, Peer, RingRun, Scenario, SpawnRun};

pub struct RactorPeer {
    rt: Runtime,
}

impl RactorPeer {
    pub fn new() -> Self {
        let rt = Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
        RactorPeer { rt }
    }
}

/// Stops every actor and waits for each to finish.
async fn stop_all<M: ractor::Message>(actors: Vec<(ActorRef<M>, JoinHandle<()>)>) {
    for (actor, _) in &actors {
        actor.stop(None);
    }
    for (_, handle) in actors {
        let _ = handle.await;
    }
}

// --- ring --------------------------------------------------------------------------------------

struct RingNode;

enum RingMsg {
    /// Gives a node its successor.
    Connect(ActorRef<RingMsg>),
    /// Called on node 0: puts the token on the ring; replied to when the origin has seen M rounds.
    Start(RpcReplyPort<u64>),
    Token { origin: usize, value: u64 },
    /// How many tokens this node received.
    Received(RpcReplyPort<u64>),
}

struct RingState {
    id: usize,
    rounds: u64,
    next: Option<ActorRef<RingMsg>>,
    received: u64,
    done: Option<RpcReplyPort<u64>>,
}

impl RingState {
    fn forward(&self, origin: usize, value: u64) {
        if let Some(next) = &self.next {
            // A failed send leaves the count short, which the check then reports.
            let _ = next.cast(RingMsg::Token { origin, value });
        }
    }
}

impl Actor for RingNode {
    type Msg = RingMsg;
    type State = RingState;
    type Arguments = (usize, u64);

    async fn pre_start(&self, _: ActorRef<RingMsg>, (id, rounds): (usize, u64)) -> Result<RingState, ActorProcessingErr> {
        Ok(RingState { id, rounds, next: None, received: 0, done: None })
    }

    async fn handle(&self, _: ActorRef<RingMsg>, msg: RingMsg, state: &mut RingState) -> Result<(), ActorProcessingErr> {
        match msg {
            RingMsg::Connect(next) => state.next = Some(next),
            RingMsg::Start(done) => {
                state.done = Some(done);
                state.forward(state.id, 0);
            }
            RingMsg::Token { origin, mut value } => {
                state.received += 1;
                if origin == state.id {
                    value += 1;
                    if value == state.rounds {
                        if let Some(done) = state.done.take() {
                            let _ = done.send(value);
                        }
                        return Ok(());
                    }
                }
                state.forward(origin, value);
            }
            RingMsg::Received(reply) => {
                let _ = reply.send(state.received);
            }
        }
        Ok(())
    }
}

// --- spawn -------------------------------------------------------------------------------------

/// An idle actor: reports its start-up, then waits for messages that never come.
struct Idle;

/// The only message an idle actor understands (none is sent).
struct Ping;

impl Actor for Idle {
    type Msg = Ping;
    type State = ();
    type Arguments = Arc<Latch>;

    async fn pre_start(&self, _: ActorRef<Ping>, started: Arc<Latch>) -> Result<(), ActorProcessingErr> {
        started.arrive();
        Ok(())
    }
}

// --- counter -----------------------------------------------------------------------------------

struct Counter;

enum CounterMsg {
    Add(u64),
    GetAndReset(RpcReplyPort<u64>),
}

impl Actor for Counter {
    type Msg = CounterMsg;
    type State = u64;
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<CounterMsg>, _: ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(&self, _: ActorRef<CounterMsg>, msg: CounterMsg, total: &mut u64) -> Result<(), ActorProcessingErr> {
        match msg {
            CounterMsg::Add(n) => *total += n,
            CounterMsg::GetAndReset(reply) => {
                let _ = reply.send(std::mem::take(total));
            }
        }
        Ok(())
    }
}

/// A producer actor: on `Produce(k)` it casts `Add(100)` to the counter k times, then replies.
struct Producer;

enum ProducerMsg {
    Produce(u64, RpcReplyPort<()>),
}

impl Actor for Producer {
    type Msg = ProducerMsg;
    type State = ActorRef<CounterMsg>;
    type Arguments = ActorRef<CounterMsg>;

    async fn pre_start(&self, _: ActorRef<ProducerMsg>, counter: ActorRef<CounterMsg>) -> Result<Self::State, ActorProcessingErr> {
        Ok(counter)
    }

    async fn handle(&self, _: ActorRef<ProducerMsg>, msg: ProducerMsg, counter: &mut Self::State) -> Result<(), ActorProcessingErr> {
        let ProducerMsg::Produce(k, reply) = msg;
        for _ in 0..k {
            if counter.cast(CounterMsg::Add(100)).is_err() {
                break;
            }
        }
        let _ = reply.send(());
        Ok(())
    }
}

// --- chain -------------------------------------------------------------------------------------

/// A chain stage; the one without `next` is the sink.
struct Stage;

enum StageMsg {
    Item(u64),
    /// Asked of the sink: (count, sum) of what it received.
    Tally(RpcReplyPort<(u64, u64)>),
}

struct StageState {
    next: Option<ActorRef<StageMsg>>,
    expected: u64,
    count: u64,
    sum: u64,
    done: Option<oneshot::Sender<()>>,
}

impl Actor for Stage {
    type Msg = StageMsg;
    type State = StageState;
    /// (next stage or none for the sink, messages expected by the sink, the sink's done signal)
    type Arguments = (Option<ActorRef<StageMsg>>, u64, Option<oneshot::Sender<()>>);

    async fn pre_start(&self, _: ActorRef<StageMsg>, (next, expected, done): Self::Arguments) -> Result<StageState, ActorProcessingErr> {
        Ok(StageState { next, expected, count: 0, sum: 0, done })
    }

    async fn handle(&self, _: ActorRef<StageMsg>, msg: StageMsg, state: &mut StageState) -> Result<(), ActorProcessingErr> {
        match msg {
            StageMsg::Item(v) => match &state.next {
                Some(next) => {
                    let _ = next.cast(StageMsg::Item(v));
                }
                None => {
                    state.count += 1;
                    state.sum += v;
                    if state.count == state.expected {
                        if let Some(done) = state.done.take() {
                            let _ = done.send(());
                        }
                    }
                }
            },
            StageMsg::Tally(reply) => {
                let _ = reply.send((state.count, state.sum));
            }
        }
        Ok(())
    }
}

impl Peer for RactorPeer {
    fn runtime(&self) -> String {
        format!("ractor {} / tokio {} multi-thread, {}", versions::RACTOR, versions::TOKIO, versions::RUSTC)
    }

    fn notes(&self, scenario: Scenario) -> String {
        let extra = match scenario {
            Scenario::Counter => "; producers are ractor actors",
            _ => "",
        };
        format!("ractor actors (unbounded mailboxes), cast / call, default features, tokio multi-thread runtime (one worker per core){extra}")
    }

    fn ring(&mut self, actors: u64, rounds: u64) -> RingRun {
        let n = actors as usize;
        self.rt.block_on(async move {
            let t0 = Instant::now();
            let mut nodes = Vec::with_capacity(n);
            for id in 0..n {
                nodes.push(Actor::spawn(None, RingNode, (id, rounds)).await.expect("spawn ring node"));
            }
            for (id, (node, _)) in nodes.iter().enumerate() {
                node.cast(RingMsg::Connect(nodes[(id + 1) % n].0.clone())).expect("node alive");
            }
            let construct = t0.elapsed();

            let t1 = Instant::now();
            let final_value = call!(nodes[0].0, RingMsg::Start).unwrap_or(0);
            let elapsed = t1.elapsed();

            let mut received = 0;
            for (node, _) in &nodes {
                received += call!(node, RingMsg::Received).unwrap_or(0);
            }
            stop_all(nodes).await;
            RingRun { construct, elapsed, received, final_value }
        })
    }

    fn spawn(&mut self, actors: u64) -> SpawnRun {
        self.rt.block_on(async move {
            let started = Latch::new(actors);
            let t0 = Instant::now();
            let mut refs = Vec::with_capacity(actors as usize);
            for _ in 0..actors {
                refs.push(Actor::spawn(None, Idle, started.clone()).await.expect("spawn idle actor"));
            }
            started.wait().await;
            let elapsed = t0.elapsed();
            let rss_after = crate::common::vm_rss_bytes();
            stop_all(refs).await;
            SpawnRun { elapsed, rss_after, started: started.count() }
        })
    }

    fn counter(&mut self, producers: u64, per_producer: u64) -> CounterRun {
        self.rt.block_on(async move {
            let counter = Actor::spawn(None, Counter, ()).await.expect("spawn counter");
            let mut producer_refs = Vec::new();
            for _ in 0..producers {
                producer_refs.push(Actor::spawn(None, Producer, counter.0.clone()).await.expect("spawn producer"));
            }

            let t0 = Instant::now();
            // Send every `Produce` first (a `call` would wait for each in turn), then await the
            // replies, so that the producers run concurrently.
            let replies: Vec<_> = producer_refs
                .iter()
                .map(|(producer, _)| {
                    let (tx, rx) = ractor::concurrency::oneshot();
                    producer.cast(ProducerMsg::Produce(per_producer, tx.into())).expect("producer alive");
                    rx
                })
                .collect();
            for rx in replies {
                rx.await.expect("producer finished");
            }
            let reply = call!(counter.0, CounterMsg::GetAndReset).expect("counter replied");
            let elapsed = t0.elapsed();

            stop_all(producer_refs).await;
            stop_all(vec![counter]).await;
            CounterRun { elapsed, reply }
        })
    }

    fn chain(&mut self, length: u64) -> ChainRun {
        self.rt.block_on(async move {
            // Built from the sink backwards, each stage spawned knowing its next (not timed).
            let (done_tx, done_rx) = oneshot::channel();
            let mut stages = Vec::with_capacity(length as usize);
            stages.push(Actor::spawn(None, Stage, (None, length, Some(done_tx))).await.expect("spawn sink"));
            for _ in 1..length {
                let next = stages.last().expect("non-empty").0.clone();
                stages.push(Actor::spawn(None, Stage, (Some(next), 0, None)).await.expect("spawn stage"));
            }
            let first = stages.last().expect("non-empty").0.clone();

            let t0 = Instant::now();
            for v in 1..=length {
                first.cast(StageMsg::Item(v)).expect("stage 1 alive");
            }
            let _ = done_rx.await;
            let elapsed = t0.elapsed();

            let (received, sum) = call!(stages[0].0, StageMsg::Tally).unwrap_or((0, 0));
            drop(first);
            stop_all(stages).await;
            ChainRun { elapsed, received, sum }
        })
    }
}
