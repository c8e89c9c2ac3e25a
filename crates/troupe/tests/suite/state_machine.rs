#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! A randomized state-machine test of the core: random sequences of tells, asks, panics,
//! restarts, awaits (whose continuations send), self-stops, external stops and messages whose
//! destructor panics, sent to
//! supervised actors from a plain thread and from an actor on the pool (so hand-offs,
//! suspended and awaiting receivers, restarts under back-off and stops all meet), checked
//! against a model of what must be handled, dropped or refused:
//!
//! - every message created is dropped exactly once (created == dropped), and handled at most
//!   once;
//! - messages from one sender to one actor are handled in the order sent, across restarts;
//! - an actor the model says stays alive (permanent, never stopped from outside) handles every
//!   message sent to it, none lost;
//! - every ask resolves, and its answer agrees with its message's fate;
//! - shutdown completes, and no actor is left.
//!
//! The default run is short (the test suite's budget). A long run, for instance ten minutes:
//! `TROUPE_STATE_MACHINE_SECONDS=600 cargo test --release -p troupe --test suite state_machine -- --nocapture`
//! (it prints how many cases ran).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use troupe::{
    Actor, Addr, AskError, Context, Handler, Message, Restart, SendError, SpawnOptions,
    SupervisorStrategy, System,
};

/// What happened to every message.
#[derive(Default)]
struct World {
    created: AtomicU64,
    /// Id → times dropped.
    dropped: Mutex<HashMap<u64, u32>>,
    /// (id, sender, seq, target) of every message handled, in handling order per target.
    handled: Mutex<Vec<(u64, u32, u64, usize)>>,
    /// Asks sent by the relay: id → result.
    relay_answers: Mutex<HashMap<u64, Result<u64, AskError>>>,
}

/// A message's identity; its drop is counted.
struct Token {
    id: u64,
    sender: u32,
    seq: u64,
    target: usize,
    /// Panic when dropped (after counting the drop).
    loud: bool,
    world: Arc<World>,
}

impl Drop for Token {
    fn drop(&mut self) {
        *self
            .world
            .dropped
            .lock()
            .unwrap()
            .entry(self.id)
            .or_default() += 1;
        if self.loud && !std::thread::panicking() {
            panic!("a loud message's destructor panics on purpose");
        }
    }
}

struct Probe {
    index: usize,
    world: Arc<World>,
}
impl Actor for Probe {}

impl Probe {
    fn record(&self, token: &Token) {
        assert_eq!(
            token.target, self.index,
            "delivered to the actor it was sent to"
        );
        self.world
            .handled
            .lock()
            .unwrap()
            .push((token.id, token.sender, token.seq, self.index));
    }
}

struct Note(Token);
impl Message for Note {
    type Reply = ();
}
impl Handler<Note> for Probe {
    fn handle(&mut self, msg: Note, _: &mut Context<Self>) {
        self.record(&msg.0);
    }
}

struct Query(Token);
impl Message for Query {
    type Reply = u64;
}
impl Handler<Query> for Probe {
    fn handle(&mut self, msg: Query, _: &mut Context<Self>) -> u64 {
        self.record(&msg.0);
        msg.0.id
    }
}

struct Crash;
impl Message for Crash {
    type Reply = ();
}
impl Handler<Crash> for Probe {
    fn handle(&mut self, _: Crash, _: &mut Context<Self>) {
        panic!("crash on purpose");
    }
}

struct Quit;
impl Message for Quit {
    type Reply = ();
}
impl Handler<Quit> for Probe {
    fn handle(&mut self, _: Quit, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// Holds the mailbox for a while; the continuation may tell another probe (a send made while
/// the holder reads its signals).
struct Hold(u64, Option<(Addr<Probe>, Token)>);
impl Message for Hold {
    type Reply = ();
}
impl Handler<Hold> for Probe {
    fn handle(&mut self, msg: Hold, ctx: &mut Context<Self>) {
        let Hold(micros, then) = msg;
        ctx.await_then(
            async move { tokio::time::sleep(Duration::from_micros(micros)).await },
            move |_: &mut Probe, _, ()| {
                if let Some((to, token)) = then {
                    let _ = to.tell(Note(token));
                }
            },
        );
    }
}

/// Supervises the probes.
struct Boss {
    backoff: Option<Duration>,
}
impl Actor for Boss {
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        let strategy = SupervisorStrategy::one_for_one().intensity(100_000, Duration::from_secs(1));
        match self.backoff {
            Some(d) => strategy.backoff(d, d),
            None => strategy,
        }
    }
}
struct Hire {
    index: usize,
    restart: Restart,
    world: Arc<World>,
}
impl Message for Hire {
    type Reply = Addr<Probe>;
}
impl Handler<Hire> for Boss {
    fn handle(&mut self, hire: Hire, ctx: &mut Context<Self>) -> Addr<Probe> {
        let (index, world) = (hire.index, hire.world);
        ctx.spawn_supervised(
            move || Probe {
                index,
                world: world.clone(),
            },
            SpawnOptions::new().restart(hire.restart),
        )
    }
}

/// Forwards messages from the pool (sender 1), so sends come from an actor on a worker.
struct Relay {
    probes: Vec<Addr<Probe>>,
    world: Arc<World>,
}
impl Actor for Relay {}
enum Forward {
    Tell(Token),
    Ask(Token),
}
impl Message for Forward {
    type Reply = ();
}
struct Answer(u64, Result<u64, AskError>);
impl Message for Answer {
    type Reply = ();
}
impl Handler<Forward> for Relay {
    fn handle(&mut self, msg: Forward, ctx: &mut Context<Self>) {
        match msg {
            Forward::Tell(token) => {
                let to = self.probes[token.target].clone();
                // A stopped probe hands the message back; it is dropped here.
                let _ = to.tell(Note(token));
            }
            Forward::Ask(token) => {
                let (id, to) = (token.id, self.probes[token.target].clone());
                to.ask(Query(token))
                    .pipe_to(&ctx.myself(), move |result| Answer(id, result));
            }
        }
    }
}
impl Handler<Answer> for Relay {
    fn handle(&mut self, msg: Answer, _: &mut Context<Self>) {
        self.world
            .relay_answers
            .lock()
            .unwrap()
            .insert(msg.0, msg.1);
    }
}
struct Flush;
impl Message for Flush {
    type Reply = ();
}
impl Handler<Flush> for Relay {
    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {}
}

const PROBES: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    Tell {
        to: usize,
        via_relay: bool,
    },
    Ask {
        to: usize,
        via_relay: bool,
    },
    TellLoud {
        to: usize,
    },
    Crash {
        to: usize,
    },
    Quit {
        to: usize,
    },
    Hold {
        to: usize,
        micros: u64,
    },
    HoldThenTell {
        to: usize,
        then_to: usize,
        micros: u64,
    },
    Stop {
        to: usize,
    },
    Pause {
        micros: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let to = 0..PROBES;
    prop_oneof![
        6 => (to.clone(), any::<bool>()).prop_map(|(to, via_relay)| Op::Tell { to, via_relay }),
        3 => (to.clone(), any::<bool>()).prop_map(|(to, via_relay)| Op::Ask { to, via_relay }),
        1 => to.clone().prop_map(|to| Op::TellLoud { to }),
        1 => to.clone().prop_map(|to| Op::Crash { to }),
        1 => to.clone().prop_map(|to| Op::Quit { to }),
        1 => (to.clone(), 0..2_000u64).prop_map(|(to, micros)| Op::Hold { to, micros }),
        1 => (to.clone(), to.clone(), 0..500u64)
            .prop_map(|(to, then_to, micros)| Op::HoldThenTell { to, then_to, micros }),
        1 => to.clone().prop_map(|to| Op::Stop { to }),
        1 => (0..500u64).prop_map(|micros| Op::Pause { micros }),
    ]
}

fn restart_policy() -> impl Strategy<Value = Restart> {
    prop_oneof![
        Just(Restart::Permanent),
        Just(Restart::Transient),
        Just(Restart::Temporary)
    ]
}

#[derive(Debug, Clone)]
struct Case {
    policies: Vec<Restart>,
    backoff_micros: Option<u64>,
    ops: Vec<Op>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(restart_policy(), PROBES),
        proptest::option::of(0..3_000u64),
        proptest::collection::vec(op(), 1..60),
    )
        .prop_map(|(policies, backoff_micros, ops)| Case {
            policies,
            backoff_micros,
            ops,
        })
}

/// Whether the model says probe `i` survives `ops` under `policy` (it may still stop when the
/// system shuts down): only these are checked to have handled everything.
fn stays_alive(i: usize, policy: Restart, ops: &[Op]) -> bool {
    ops.iter().all(|op| match *op {
        Op::Stop { to } => to != i,
        Op::Crash { to } | Op::TellLoud { to } => to != i || policy != Restart::Temporary,
        Op::Quit { to } => to != i || policy == Restart::Permanent,
        _ => true,
    })
}

fn check(case: &Case) -> Result<(), TestCaseError> {
    let world = Arc::new(World::default());
    let system = System::builder()
        .workers(2)
        .blocking_workers(1)
        .io_threads(1)
        .build()
        .unwrap();
    let boss = system.spawn(Boss {
        backoff: case.backoff_micros.map(Duration::from_micros),
    });
    let probes: Vec<Addr<Probe>> = (0..PROBES)
        .map(|index| {
            boss.ask(Hire {
                index,
                restart: case.policies[index],
                world: world.clone(),
            })
            .wait_timeout(Duration::from_secs(10))
            .expect("hired")
        })
        .collect();
    let relay = system.spawn(Relay {
        probes: probes.clone(),
        world: world.clone(),
    });

    let mut next_id = 0u64;
    let mut seqs: HashMap<(u32, usize), u64> = HashMap::new();
    let mut token = |sender: u32, target: usize, loud: bool| {
        next_id += 1;
        world.created.fetch_add(1, Ordering::SeqCst);
        let seq = seqs.entry((sender, target)).or_default();
        *seq += 1;
        Token {
            id: next_id,
            sender,
            seq: *seq,
            target,
            loud,
            world: world.clone(),
        }
    };
    // Asks from this thread: id → pending reply.
    let mut asks = Vec::new();
    let mut relay_asks = Vec::new();
    for op in &case.ops {
        match *op {
            Op::Tell {
                to,
                via_relay: false,
            } => match probes[to].tell(Note(token(0, to, false))) {
                Ok(()) | Err(SendError::Stopped(_)) => {}
                Err(e) => return Err(TestCaseError::fail(format!("unexpected {e:?}"))),
            },
            Op::Tell {
                to,
                via_relay: true,
            } => relay.tell(Forward::Tell(token(1, to, false))).unwrap(),
            Op::Ask {
                to,
                via_relay: false,
            } => {
                let t = token(0, to, false);
                asks.push((t.id, probes[to].ask(Query(t))));
            }
            Op::Ask {
                to,
                via_relay: true,
            } => {
                let t = token(1, to, false);
                relay_asks.push(t.id);
                relay.tell(Forward::Ask(t)).unwrap();
            }
            Op::TellLoud { to } => {
                if let Err(back) = probes[to].tell(Note(token(0, to, true))) {
                    // Handed back: its destructor panics, as it should.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(back)));
                }
            }
            Op::Crash { to } => drop(probes[to].tell(Crash)),
            Op::Quit { to } => drop(probes[to].tell(Quit)),
            Op::Hold { to, micros } => drop(probes[to].tell(Hold(micros, None))),
            Op::HoldThenTell {
                to,
                then_to,
                micros,
            } => {
                // Sent by probe `to`'s continuation: sender 10 + to, in its holds' order.
                let then = (
                    probes[then_to].clone(),
                    token(10 + to as u32, then_to, false),
                );
                drop(probes[to].tell(Hold(micros, Some(then))));
            }
            Op::Stop { to } => probes[to].stop(),
            Op::Pause { micros } => std::thread::sleep(Duration::from_micros(micros)),
        }
    }

    // Quiesce: the relay has forwarded everything; then each surviving probe answers a last
    // query, after everything sent to it before.
    relay
        .ask(Flush)
        .wait_timeout(Duration::from_secs(10))
        .map_err(|e| TestCaseError::fail(format!("relay flush: {e}")))?;
    for (i, probe) in probes.iter().enumerate() {
        if stays_alive(i, case.policies[i], &case.ops) {
            let t = token(0, i, false);
            let id = t.id;
            let answer = probe.ask(Query(t)).wait_timeout(Duration::from_secs(10));
            prop_assert_eq!(answer, Ok(id), "probe {} stays alive and answers", i);
        }
    }
    let mut answers = HashMap::new();
    for (id, ask) in asks {
        let answer = ask.wait_timeout(Duration::from_secs(10));
        prop_assert!(
            !matches!(answer, Err(AskError::Timeout(_))),
            "ask {} never resolved",
            id
        );
        answers.insert(id, answer);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while world.relay_answers.lock().unwrap().len() < relay_asks.len() {
        prop_assert!(Instant::now() < deadline, "a relayed ask never resolved");
        std::thread::sleep(Duration::from_millis(1));
    }
    answers.extend(world.relay_answers.lock().unwrap().drain());

    let shutdown = system.shutdown_timeout(Duration::from_secs(10));
    prop_assert_eq!(shutdown, Ok(()), "shutdown completes");
    drop((probes, relay, boss));

    // Every message's fate.
    let created = world.created.load(Ordering::SeqCst);
    let dropped = world.dropped.lock().unwrap().clone();
    prop_assert_eq!(dropped.len() as u64, created, "every message dropped");
    for (id, times) in &dropped {
        prop_assert_eq!(*times, 1, "message {} dropped once", id);
    }
    let handled = world.handled.lock().unwrap().clone();
    let mut seen = HashMap::new();
    let mut last: HashMap<(u32, usize), u64> = HashMap::new();
    for &(id, sender, seq, target) in &handled {
        prop_assert!(
            seen.insert(id, ()).is_none(),
            "message {} handled twice",
            id
        );
        let previous = last.insert((sender, target), seq).unwrap_or(0);
        prop_assert!(
            seq > previous,
            "sender {} to probe {}: seq {} after {}",
            sender,
            target,
            seq,
            previous
        );
    }
    for (id, answer) in &answers {
        match answer {
            Ok(got) => {
                prop_assert_eq!(got, id);
                prop_assert!(seen.contains_key(id), "ask {} answered but not handled", id);
            }
            Err(AskError::Stopped) => {
                prop_assert!(!seen.contains_key(id), "ask {} handled yet Stopped", id)
            }
            Err(other) => prop_assert!(false, "ask {} failed with {:?}", id, other),
        }
    }
    // Survivors handled everything sent to them.
    for (i, policy) in case.policies.iter().enumerate() {
        if stays_alive(i, *policy, &case.ops) {
            let sent: u64 = (0..2)
                .map(|s| last.get(&(s, i)).copied().unwrap_or(0))
                .sum();
            // From this thread and the relay (continuations' sends may not have run).
            let got = handled.iter().filter(|h| h.3 == i && h.1 < 2).count() as u64;
            // Loud messages panic after being handled; they count too.
            prop_assert_eq!(got, sent, "probe {} lost messages", i);
        }
    }
    Ok(())
}

/// Silences the panics the cases cause on purpose.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if !msg.contains("on purpose") {
            eprintln!("{msg}");
        }
    }));
}

#[test]
fn random_sequences_lose_nothing() {
    quiet_panics();
    let seconds: u64 = std::env::var("TROUPE_STATE_MACHINE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let ran = AtomicU64::new(0);
    let batch = 48;
    let result = loop {
        let mut runner = TestRunner::new(Config {
            cases: batch,
            failure_persistence: None,
            ..Config::default()
        });
        let outcome = runner.run(&case(), |case| {
            ran.fetch_add(1, Ordering::Relaxed);
            check(&case)
        });
        if outcome.is_err() || started.elapsed() >= Duration::from_secs(seconds) {
            break outcome;
        }
    };
    eprintln!(
        "state machine: {} cases in {:.0} s",
        ran.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
