//! `tokio` and `tokio-current`: plain tokio tasks that own the receiving end of a bounded
//! `tokio::sync::mpsc` channel (the "actor" pattern of the tokio tutorial), replies over
//! `tokio::sync::oneshot`. The same code runs on a multi-thread runtime (default worker count,
//! one per core) or on a current-thread runtime, where every task shares one thread.

use std::time::Instant;

use tokio::runtime::{Builder, Runtime};
use tokio::sync::{mpsc, oneshot};

use crate::common::{versions, ChainRun, CounterRun, Latch, Peer, RingRun, Scenario, SpawnRun};

/// Capacity of every mailbox: bounded, as the tokio tutorial's channel examples are (32).
const CAPACITY: usize = 32;

pub struct TokioPeer {
    rt: Runtime,
    multi_thread: bool,
}

impl TokioPeer {
    pub fn new(multi_thread: bool) -> Self {
        let mut builder = if multi_thread {
            Builder::new_multi_thread()
        } else {
            Builder::new_current_thread()
        };
        let rt = builder.enable_all().build().expect("tokio runtime");
        TokioPeer { rt, multi_thread }
    }
}

// --- ring --------------------------------------------------------------------------------------

enum RingMsg {
    /// Tells actor 0 to put the token on the ring.
    Start,
    Token { origin: usize, value: u64 },
}

/// One ring node: forwards tokens to `next`; the origin counts rounds and ends the run.
/// Returns how many tokens it received.
async fn ring_node(
    id: usize,
    rounds: u64,
    mut inbox: mpsc::Receiver<RingMsg>,
    next: mpsc::Sender<RingMsg>,
    mut done: Option<oneshot::Sender<u64>>,
) -> u64 {
    let mut received = 0;
    while let Some(msg) = inbox.recv().await {
        let forward = match msg {
            RingMsg::Start => RingMsg::Token { origin: id, value: 0 },
            RingMsg::Token { origin, mut value } => {
                received += 1;
                if origin == id {
                    value += 1;
                    if value == rounds {
                        if let Some(done) = done.take() {
                            let _ = done.send(value);
                        }
                        // Returning drops `next`: the next node's inbox closes, it returns too,
                        // and so on around the ring.
                        break;
                    }
                }
                RingMsg::Token { origin, value }
            }
        };
        if next.send(forward).await.is_err() {
            break;
        }
    }
    received
}

// --- counter -----------------------------------------------------------------------------------

enum CounterMsg {
    Add(u64),
    GetAndReset(oneshot::Sender<u64>),
}

async fn counter_actor(mut inbox: mpsc::Receiver<CounterMsg>) {
    let mut total = 0u64;
    while let Some(msg) = inbox.recv().await {
        match msg {
            CounterMsg::Add(n) => total += n,
            CounterMsg::GetAndReset(reply) => {
                let _ = reply.send(std::mem::take(&mut total));
            }
        }
    }
}

// --- chain -------------------------------------------------------------------------------------

/// A middle stage: forwards every message to the next stage.
async fn chain_stage(mut inbox: mpsc::Receiver<u64>, next: mpsc::Sender<u64>) {
    while let Some(v) = inbox.recv().await {
        if next.send(v).await.is_err() {
            break;
        }
    }
}

/// The last stage: signals `done` at the `expected`-th message, keeps counting until its inbox
/// closes, and returns (count, sum) so that "exactly N" can be checked.
async fn chain_sink(mut inbox: mpsc::Receiver<u64>, expected: u64, done: oneshot::Sender<()>) -> (u64, u64) {
    let (mut count, mut sum) = (0u64, 0u64);
    let mut done = Some(done);
    while let Some(v) = inbox.recv().await {
        count += 1;
        sum += v;
        if count == expected {
            if let Some(done) = done.take() {
                let _ = done.send(());
            }
        }
    }
    (count, sum)
}

impl Peer for TokioPeer {
    fn runtime(&self) -> String {
        let flavor = if self.multi_thread { "multi-thread" } else { "current-thread" };
        format!("tokio {} {flavor}, {}", versions::TOKIO, versions::RUSTC)
    }

    fn notes(&self, scenario: Scenario) -> String {
        let rt = if self.multi_thread {
            "multi-thread runtime (one worker per core)"
        } else {
            "current-thread runtime (all tasks on one thread)"
        };
        let what = match scenario {
            Scenario::Counter if self.multi_thread => "; producers are tasks",
            Scenario::Counter => "; producers are tasks sharing the one thread",
            _ => "",
        };
        format!("one task per actor, bounded mpsc channels (capacity {CAPACITY}), oneshot replies, {rt}{what}")
    }

    fn ring(&mut self, actors: u64, rounds: u64) -> RingRun {
        let n = actors as usize;
        self.rt.block_on(async move {
            let t0 = Instant::now();
            // Channels first: a node is known by its sender, so each task gets its next at spawn.
            let (senders, inboxes): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel(CAPACITY)).unzip();
            let (done_tx, done_rx) = oneshot::channel();
            let mut done_tx = Some(done_tx);
            let nodes: Vec<_> = inboxes
                .into_iter()
                .enumerate()
                .map(|(id, inbox)| {
                    let next = senders[(id + 1) % n].clone();
                    let done = if id == 0 { done_tx.take() } else { None };
                    tokio::spawn(ring_node(id, rounds, inbox, next, done))
                })
                .collect();
            let construct = t0.elapsed();

            let first = senders.into_iter().next().expect("at least one node");
            let t1 = Instant::now();
            first.send(RingMsg::Start).await.expect("node 0 alive");
            drop(first);
            let final_value = done_rx.await.unwrap_or(0);
            let elapsed = t1.elapsed();

            let mut received = 0;
            for node in nodes {
                received += node.await.unwrap_or(0);
            }
            RingRun { construct, elapsed, received, final_value }
        })
    }

    fn spawn(&mut self, actors: u64) -> SpawnRun {
        self.rt.block_on(async move {
            let started = Latch::new(actors);
            let t0 = Instant::now();
            let mut mailboxes = Vec::with_capacity(actors as usize);
            let mut tasks = Vec::with_capacity(actors as usize);
            for _ in 0..actors {
                let (tx, mut inbox) = mpsc::channel::<u64>(CAPACITY);
                let started = started.clone();
                tasks.push(tokio::spawn(async move {
                    started.arrive();
                    while inbox.recv().await.is_some() {}
                }));
                mailboxes.push(tx);
            }
            started.wait().await;
            let elapsed = t0.elapsed();
            let rss_after = crate::common::vm_rss_bytes();

            // Stop them all: closing a mailbox ends its task.
            drop(mailboxes);
            for task in tasks {
                let _ = task.await;
            }
            SpawnRun { elapsed, rss_after, started: started.count() }
        })
    }

    fn counter(&mut self, producers: u64, per_producer: u64) -> CounterRun {
        self.rt.block_on(async move {
            let (counter, inbox) = mpsc::channel(CAPACITY);
            let counter_task = tokio::spawn(counter_actor(inbox));

            let t0 = Instant::now();
            let producer_tasks: Vec<_> = (0..producers)
                .map(|_| {
                    let counter = counter.clone();
                    tokio::spawn(async move {
                        for _ in 0..per_producer {
                            counter.send(CounterMsg::Add(100)).await.expect("counter alive");
                        }
                    })
                })
                .collect();
            for task in producer_tasks {
                task.await.expect("producer finished");
            }
            let (reply_tx, reply_rx) = oneshot::channel();
            counter.send(CounterMsg::GetAndReset(reply_tx)).await.expect("counter alive");
            let reply = reply_rx.await.expect("counter replied");
            let elapsed = t0.elapsed();

            drop(counter);
            let _ = counter_task.await;
            CounterRun { elapsed, reply }
        })
    }

    fn chain(&mut self, length: u64) -> ChainRun {
        self.rt.block_on(async move {
            // Built from the sink backwards, so each stage gets its next at spawn (not timed).
            let (sink_tx, sink_inbox) = mpsc::channel(CAPACITY);
            let (done_tx, done_rx) = oneshot::channel();
            let sink = tokio::spawn(chain_sink(sink_inbox, length, done_tx));
            let mut next = sink_tx;
            let mut stages = Vec::with_capacity(length as usize);
            for _ in 1..length {
                let (tx, inbox) = mpsc::channel(CAPACITY);
                stages.push(tokio::spawn(chain_stage(inbox, next)));
                next = tx;
            }
            let first = next;

            let t0 = Instant::now();
            for v in 1..=length {
                first.send(v).await.expect("stage 1 alive");
            }
            let _ = done_rx.await;
            let elapsed = t0.elapsed();

            // Closing the source's sender shuts the chain down stage by stage.
            drop(first);
            let (received, sum) = sink.await.unwrap_or((0, 0));
            for stage in stages {
                let _ = stage.await;
            }
            ChainRun { elapsed, received, sum }
        })
    }
}
