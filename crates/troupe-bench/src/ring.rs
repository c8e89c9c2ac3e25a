//! Seed 000, "Running rings around Scala": N actors in a ring pass a token M times around.
//!
//! Node 0 sends `Token { origin: 0, value: 0 }` to node 1; every node forwards the token to its
//! next; when the token reaches its origin, the origin counts a round. After M rounds the run
//! ends. N*M messages in all. Every node counts what it received; the sum must be exactly N*M.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::json;
use troupe::{Actor, Addr, Context, Handler, Message, Overflow, Placement, SpawnOptions, System};

use crate::report::{ms, Record, Runner};
use crate::SystemConfig;

struct Node {
    id: u32,
    next: Option<Addr<Node>>,
    received: u64,
    rounds: u64,
    done: Option<mpsc::Sender<Instant>>,
}

impl Actor for Node {}

/// The token going round.
struct Token {
    origin: u32,
    value: u64,
}
impl Message for Token {
    type Reply = ();
}

/// Wires a node to its successor.
struct Connect(Addr<Node>);
impl Message for Connect {
    type Reply = ();
}

/// Tells node 0 to start; it reports the end on `done`.
struct Start {
    rounds: u64,
    done: mpsc::Sender<Instant>,
}
impl Message for Start {
    type Reply = ();
}

/// How many tokens a node received.
struct Received;
impl Message for Received {
    type Reply = u64;
}

impl Handler<Connect> for Node {
    fn handle(&mut self, msg: Connect, _: &mut Context<Self>) {
        self.next = Some(msg.0);
    }
}

impl Handler<Start> for Node {
    fn handle(&mut self, msg: Start, _: &mut Context<Self>) {
        self.rounds = msg.rounds;
        self.done = Some(msg.done);
        self.forward(Token {
            origin: self.id,
            value: 0,
        });
    }
}

impl Handler<Token> for Node {
    #[inline]
    fn handle(&mut self, token: Token, _: &mut Context<Self>) {
        self.received += 1;
        if token.origin == self.id {
            let value = token.value + 1;
            if value == self.rounds {
                if let Some(done) = self.done.take() {
                    let _ = done.send(Instant::now());
                }
                return;
            }
            self.forward(Token {
                origin: token.origin,
                value,
            });
        } else {
            self.forward(token);
        }
    }
}

impl Handler<Received> for Node {
    fn handle(&mut self, _: Received, _: &mut Context<Self>) -> u64 {
        std::mem::take(&mut self.received)
    }
}

impl Node {
    #[inline]
    fn forward(&self, token: Token) {
        let next = self
            .next
            .as_ref()
            .expect("ring is connected before it starts");
        // A stopped successor would be a bug in this benchmark; the count check reports it.
        let _ = next.tell(token);
    }
}

/// Parameters of one ring run.
#[derive(Debug, Clone, Copy)]
pub struct RingParams {
    pub actors: u32,
    pub rounds: u64,
    pub placement: Placement,
    /// Bounded mailboxes of this capacity (overflow `Fail`), if any.
    pub bounded: Option<usize>,
}

/// Runs the ring, printing construction time and throughput.
pub fn run(runner: &Runner, config: &SystemConfig, p: RingParams) -> Result<()> {
    ensure!(p.actors >= 2, "a ring needs at least 2 actors");
    ensure!(p.rounds >= 1, "a ring needs at least 1 round");
    let system = config.build()?;
    let messages = p.actors as f64 * p.rounds as f64;
    let label = format!("ring {}x{}", p.actors, p.rounds);
    crate::estimate::Work {
        units: messages,
        unit: "hops",
        // BENCHMARKS.md: about 50 M hops/s on the pool, 33 M bounded, 70 k on OS threads.
        per_second: match (p.placement, p.bounded) {
            (Placement::Thread, _) => 70e3,
            (_, Some(_)) => 25e6,
            _ => 40e6,
        },
    }
    .announce(runner, &label);
    let ([construct, throughput], counters) = runner.measure_counted(&label, &system, || {
        let (ring, construct) = build_ring(&system, p)?;
        runner.say(format!(
            "Took {:.3} ms to construct {} nodes",
            ms(construct),
            p.actors
        ));
        let elapsed = pass_token(&ring, p)?;
        tear_down(&system, ring)?;
        // Handled: every hop of the token (the ring's construction and teardown are counted
        // in the turns too).
        Ok((
            [ms(construct), messages / elapsed.as_secs_f64()],
            messages as u64,
        ))
    })?;
    system
        .shutdown_timeout(Duration::from_secs(30))
        .context("shutting the ring's system down")?;

    let contender = match p.bounded {
        Some(_) => "troupe-bounded",
        None => config.contender(p.placement),
    };
    let params = match p.bounded {
        Some(capacity) => json!({"actors": p.actors, "rounds": p.rounds, "capacity": capacity}),
        None => json!({"actors": p.actors, "rounds": p.rounds}),
    };
    let params = params.as_object().expect("object").clone();
    let notes = match (p.placement, p.bounded) {
        (_, Some(capacity)) => format!(
            "{}; every node with a bounded mailbox of {capacity} (overflow: fail)",
            config.notes()
        ),
        (Placement::Thread, None) => format!("{}; every node on its own OS thread", config.notes()),
        _ => config.notes(),
    };
    runner.emit(&Record::new(
        "ring",
        "construct",
        contender,
        params.clone(),
        "ms",
        construct,
        &notes,
    ))?;
    runner.emit(
        &Record::new(
            "ring",
            "throughput",
            contender,
            params,
            "msgs/s",
            throughput,
            &notes,
        )
        .with_counters(counters),
    )?;
    Ok(())
}

fn build_ring(system: &System, p: RingParams) -> Result<(Vec<Addr<Node>>, Duration)> {
    let start = Instant::now();
    let mut options = SpawnOptions::new().placement(p.placement);
    if let Some(capacity) = p.bounded {
        options = options.bounded(capacity, Overflow::Fail);
    }
    let nodes: Vec<Addr<Node>> = (0..p.actors)
        .map(|id| {
            system.spawn_with(
                Node {
                    id,
                    next: None,
                    received: 0,
                    rounds: 0,
                    done: None,
                },
                options.clone(),
            )
        })
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let next = nodes[(i + 1) % nodes.len()].clone();
        node.tell(Connect(next))
            .map_err(|_| anyhow::anyhow!("node {i} stopped during construction"))?;
    }
    Ok((nodes, start.elapsed()))
}

fn pass_token(ring: &[Addr<Node>], p: RingParams) -> Result<Duration> {
    let (done_tx, done_rx) = mpsc::channel();
    let start = Instant::now();
    ring[0]
        .tell(Start {
            rounds: p.rounds,
            done: done_tx,
        })
        .map_err(|_| anyhow::anyhow!("node 0 stopped before the start"))?;
    let end = done_rx
        .recv()
        .context("the ring stopped before the token completed its rounds")?;
    let elapsed = end.duration_since(start);

    // Validate: every node received exactly `rounds` tokens.
    let mut total = 0u64;
    for node in ring {
        total += node
            .ask(Received)
            .wait_timeout(Duration::from_secs(30))
            .context("asking a node for its count")?;
    }
    let expected = p.actors as u64 * p.rounds;
    if total != expected {
        bail!("ring validation failed: {total} tokens received, expected {expected}");
    }
    Ok(elapsed)
}

fn tear_down(system: &System, ring: Vec<Addr<Node>>) -> Result<()> {
    let baseline = system.live_actors() - ring.len();
    for node in &ring {
        node.stop();
    }
    drop(ring);
    wait_until(|| system.live_actors() <= baseline, Duration::from_secs(60))
        .context("ring actors did not stop")
}

/// Polls `done` until it holds, or fails after `limit`.
pub fn wait_until(mut done: impl FnMut() -> bool, limit: Duration) -> Result<()> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(10);
    while !done() {
        if start.elapsed() > limit {
            bail!("gave up after {limit:?}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
    Ok(())
}
