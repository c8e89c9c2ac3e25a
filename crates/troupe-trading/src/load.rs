//! Load drivers for the seed scenario: the seed's closed loop, and an open loop.
//!
//! # Closed loop
//! `clients` client actors on the system's pool. Each places one order, waits for its
//! acknowledgement (one in request-reply style, one per engine in one-way style), records the
//! latency from send to acknowledgement, and sends the next, for its share of the scenario's
//! rounds. This is the seed's measurement; its throughput is bounded by clients / latency.
//! An order enters the exchange as [`Entry`] says: routed in the client's own turn (the
//! default), or through a receiver actor.
//!
//! # Open loop
//! Orders are sent at a fixed rate by a pacing actor, whatever the system's state, and
//! each order's latency is measured from the moment it was *planned* to be sent, so a stall
//! counts against every order it delays (no coordinated omission). Order `k` is planned at
//! `start + k / rate`; its client order id is `k + 1`, so the collector actor that receives the
//! acks can compute the planned time from the id alone. Orders go round-robin to all receivers.
//!
//! Latencies are in nanoseconds, in an HdrHistogram with 2 significant digits (every value
//! within 1%): 3 digits made each client's histogram too big for the cache, and recording
//! cost the load generator a tenth of the CPU it shares with the system under test.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use troupe::{Actor, Addr, Context, Handler, Message, System};

use crate::exchange::Exchange;
use crate::order::{Ack, ClientId, Outcome, RejectReason};
use crate::receiver::{Receiver, Router, Submit};
use crate::scenario::SeedScenario;
use crate::session::ConnectError;

/// Why a load run failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A client could not connect.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Not every order was acknowledged in time.
    #[error("only {done} of {expected} orders were acknowledged within {waited:?}")]
    Timeout {
        /// Orders acknowledged.
        done: u64,
        /// Orders sent or planned.
        expected: u64,
        /// How long the run waited.
        waited: Duration,
    },
    /// The scenario's orders are all valid, so a rejection means something is wrong.
    #[error("{count} order(s) were rejected, the first because: {first}")]
    Rejected {
        /// How many.
        count: u64,
        /// The first reason.
        first: RejectReason,
    },
    /// The exchange stopped during the run.
    #[error("the exchange stopped during the run")]
    Stopped,
}

/// What a load run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Orders acknowledged.
    pub orders: u64,
    /// From the first send to the last acknowledgement.
    pub elapsed: Duration,
    /// Latency of each order, in nanoseconds.
    pub latency: Histogram<u64>,
}

impl LoadReport {
    /// Orders per second.
    pub fn throughput(&self) -> f64 {
        self.orders as f64 / self.elapsed.as_secs_f64()
    }
}

/// How often a waiting driver checks that the exchange still runs.
const STOP_CHECK: Duration = Duration::from_millis(200);

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 2).expect("static bounds are valid")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    // Saturates at the upper bound instead of failing on an absurd value.
    h.saturating_record((d.as_nanos() as u64).max(1));
}

/// What a client actor reports when its rounds are done.
struct ClientDone {
    orders: u64,
    rejected: u64,
    first_reject: Option<RejectReason>,
    latency: Histogram<u64>,
}

/// How a closed-loop client's orders enter the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Entry {
    /// The receivers' work (validate, route) runs in the client actor's own turn
    /// ([`Exchange::router`]): each order is one message to its primary. The receivers are
    /// stateless, so nothing is lost by running their code where the order is; the threads
    /// baseline's clients route their orders themselves in the same way.
    #[default]
    Router,
    /// Each client tells its receiver actor `Submit` (clients spread round-robin over the
    /// receivers), as the seed's clients send to its receiver processes: one message more per
    /// order.
    Receivers,
}

impl Entry {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Entry::Router => "router",
            Entry::Receivers => "receivers",
        }
    }
}

impl std::str::FromStr for Entry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "router" => Ok(Entry::Router),
            "receivers" => Ok(Entry::Receivers),
            other => Err(format!("unknown entry `{other}`; use router or receivers")),
        }
    }
}

/// Tells a client actor its session and way in, and starts it.
struct Go {
    id: ClientId,
    door: Door,
}

/// Where a client actor's orders go in (see [`Entry`]).
enum Door {
    /// A receiver actor (`Submit`).
    Receiver(Addr<Receiver>),
    /// The receivers' work in the client's own turn.
    Router(Router),
}
impl Message for Go {
    type Reply = ();
}

/// A closed-loop client actor.
struct LoadClient {
    id: ClientId,
    door: Option<Door>,
    scenario: Arc<SeedScenario>,
    rounds: u64,
    round: u64,
    k: usize,
    acks_per_order: usize,
    acks_seen: usize,
    current: u64,
    sent_at: Instant,
    orders: u64,
    rejected: u64,
    first_reject: Option<RejectReason>,
    latency: Histogram<u64>,
    done: mpsc::Sender<ClientDone>,
}

impl Actor for LoadClient {}

impl LoadClient {
    fn send(&mut self, now: Instant) {
        if self.round == self.rounds {
            let _ = self.done.send(ClientDone {
                orders: self.orders,
                rejected: self.rejected,
                first_reject: self.first_reject,
                latency: std::mem::replace(&mut self.latency, histogram()),
            });
            return;
        }
        let order = self.scenario.order(self.id, self.round, self.k);
        self.k += 1;
        if self.k == self.scenario.orders_per_round() {
            self.k = 0;
            self.round += 1;
        }
        self.current = order.client_order_id;
        self.acks_seen = 0;
        self.sent_at = now;
        let sent = match &self.door {
            Some(Door::Receiver(r)) => r.tell(Submit(order)).is_ok(),
            Some(Door::Router(r)) => {
                r.submit(order);
                true
            }
            None => false,
        };
        if !sent {
            // Report what was done; the coordinator sees the shortfall.
            self.round = self.rounds;
            self.send(now);
        }
    }
}

impl Handler<Go> for LoadClient {
    fn handle(&mut self, go: Go, _ctx: &mut Context<Self>) {
        self.id = go.id;
        self.door = Some(go.door);
        self.send(Instant::now());
    }
}

impl Handler<Ack> for LoadClient {
    #[inline]
    fn handle(&mut self, ack: Ack, _ctx: &mut Context<Self>) {
        if ack.client_order_id != self.current {
            return;
        }
        match ack.outcome {
            Outcome::Accepted { .. } => {
                self.acks_seen += 1;
                if self.acks_seen < self.acks_per_order {
                    return;
                }
            }
            Outcome::Rejected(reason) => {
                self.rejected += 1;
                self.first_reject.get_or_insert(reason);
            }
        }
        let now = Instant::now();
        record(&mut self.latency, now - self.sent_at);
        self.orders += 1;
        self.send(now);
    }
}

/// Runs the seed scenario with `clients` closed-loop client actors, each running `rounds`
/// rounds (so `clients * rounds * orders_per_round` orders in all), their orders entering
/// as `entry` says.
pub fn closed_loop(
    system: &System,
    exchange: &Exchange,
    scenario: &Arc<SeedScenario>,
    clients: usize,
    rounds: u64,
    timeout: Duration,
    entry: Entry,
) -> Result<LoadReport, LoadError> {
    let (done_tx, done_rx) = mpsc::channel();
    let mut started = Vec::with_capacity(clients);
    for _ in 0..clients {
        let actor = system.spawn(LoadClient {
            id: ClientId(u32::MAX),
            door: None,
            scenario: scenario.clone(),
            rounds,
            round: 0,
            k: 0,
            acks_per_order: exchange.style().acks_per_order(),
            acks_seen: 0,
            current: 0,
            sent_at: Instant::now(),
            orders: 0,
            rejected: 0,
            first_reject: None,
            latency: histogram(),
            done: done_tx.clone(),
        });
        let id = exchange.connect(actor.clone())?;
        started.push((actor, id));
    }
    drop(done_tx);
    let expected = clients as u64 * rounds * scenario.orders_per_round() as u64;
    let start = Instant::now();
    for (actor, id) in &started {
        let go = Go {
            id: *id,
            door: match entry {
                Entry::Router => Door::Router(exchange.router().clone()),
                Entry::Receivers => Door::Receiver(exchange.receiver_for(*id).clone()),
            },
        };
        actor.tell(go).map_err(|_| LoadError::Stopped)?;
    }
    let deadline = start + timeout;
    let mut latency = histogram();
    let (mut orders, mut rejected, mut first_reject) = (0, 0, None);
    let mut reported = 0;
    while reported < clients {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let done = match done_rx.recv_timeout(left.min(STOP_CHECK)) {
            Ok(done) => done,
            Err(mpsc::RecvTimeoutError::Timeout) if exchange.is_running() => continue,
            Err(_) => break,
        };
        reported += 1;
        orders += done.orders;
        rejected += done.rejected;
        first_reject = first_reject.or(done.first_reject);
        latency
            .add(&done.latency)
            .expect("histograms with equal bounds add");
    }
    let elapsed = start.elapsed();
    for (actor, _) in started {
        actor.stop();
    }
    if reported < clients && !exchange.is_running() {
        return Err(LoadError::Stopped);
    }
    finish(orders, expected, rejected, first_reject, elapsed, latency)
}

fn finish(
    orders: u64,
    expected: u64,
    rejected: u64,
    first_reject: Option<RejectReason>,
    elapsed: Duration,
    latency: Histogram<u64>,
) -> Result<LoadReport, LoadError> {
    if let Some(first) = first_reject {
        return Err(LoadError::Rejected {
            count: rejected,
            first,
        });
    }
    if orders < expected {
        return Err(LoadError::Timeout {
            done: orders,
            expected,
            waited: elapsed,
        });
    }
    Ok(LoadReport {
        orders,
        elapsed,
        latency,
    })
}

/// Receives the open loop's acks and measures from each order's planned send time.
struct Collector {
    start: Instant,
    interval_ns: f64,
    acks_per_order: u8,
    /// Acks seen per order, indexed by client order id - 1.
    seen: Vec<u8>,
    completed: u64,
    rejected: u64,
    first_reject: Option<RejectReason>,
    latency: Histogram<u64>,
    done: Option<mpsc::Sender<ClientDone>>,
}

impl Actor for Collector {}

impl Handler<Ack> for Collector {
    fn handle(&mut self, ack: Ack, _ctx: &mut Context<Self>) {
        let Some(slot) = self
            .seen
            .get_mut((ack.client_order_id as usize).wrapping_sub(1))
        else {
            return;
        };
        match ack.outcome {
            Outcome::Accepted { .. } => {
                *slot += 1;
                if *slot != self.acks_per_order {
                    return;
                }
            }
            Outcome::Rejected(reason) => {
                if *slot == u8::MAX {
                    return;
                }
                *slot = u8::MAX;
                self.rejected += 1;
                self.first_reject.get_or_insert(reason);
            }
        }
        let now = Instant::now();
        let planned = self.start
            + Duration::from_nanos(((ack.client_order_id - 1) as f64 * self.interval_ns) as u64);
        record(&mut self.latency, now.saturating_duration_since(planned));
        self.completed += 1;
        if self.completed == self.seen.len() as u64 {
            if let Some(done) = self.done.take() {
                let _ = done.send(ClientDone {
                    orders: self.completed,
                    rejected: self.rejected,
                    first_reject: self.first_reject,
                    latency: std::mem::replace(&mut self.latency, histogram()),
                });
            }
        }
    }
}

/// Sends the open loop's orders when they are due. It runs on the pool like every other actor:
/// each `Tick` sends every order whose planned time has come, then tells itself the next
/// `Tick`, which queues behind the work it just created. So the pacer is never late by more
/// than one round of the run queue, and an OS thread of its own cannot be starved by the
/// workers (on a small machine a thread that sleeps between orders wakes up late by
/// milliseconds when the workers are busy). The cost: one worker keeps polling the clock.
struct Pacer {
    id: ClientId,
    start: Instant,
    interval_ns: f64,
    next: u64,
    orders: u64,
    scenario: Arc<SeedScenario>,
    receivers: Vec<Addr<Receiver>>,
    failed: Option<mpsc::Sender<LoadError>>,
}

impl Actor for Pacer {}

struct Tick;
impl Message for Tick {
    type Reply = ();
}

impl Handler<Tick> for Pacer {
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        let now = Instant::now();
        if now >= self.start {
            let due = (((now - self.start).as_nanos() as f64 / self.interval_ns) as u64 + 1)
                .min(self.orders);
            let per_round = self.scenario.orders_per_round() as u64;
            while self.next < due {
                let k = self.next;
                let order = self
                    .scenario
                    .order(self.id, k / per_round, (k % per_round) as usize);
                let receiver = &self.receivers[k as usize % self.receivers.len()];
                if receiver.tell(Submit(order)).is_err() {
                    if let Some(failed) = self.failed.take() {
                        let _ = failed.send(LoadError::Stopped);
                    }
                    return;
                }
                self.next += 1;
            }
        }
        if self.next < self.orders {
            let _ = ctx.myself().tell(Tick);
        }
    }
}

/// Sends `orders` orders of the seed scenario at `rate` orders per second (from a pacing
/// actor) and measures each one's latency from its planned send time.
///
/// `orders` is rounded up to whole rounds, so the run keeps the trades = orders / 2 property.
pub fn open_loop(
    system: &System,
    exchange: &Exchange,
    scenario: &Arc<SeedScenario>,
    rate: f64,
    orders: u64,
    timeout: Duration,
) -> Result<LoadReport, LoadError> {
    let per_round = scenario.orders_per_round() as u64;
    let orders = orders.div_ceil(per_round).max(1) * per_round;
    let interval_ns = 1e9 / rate.max(1.0);
    let (done_tx, done_rx) = mpsc::channel();
    let (failed_tx, failed_rx) = mpsc::channel();
    // Planned times start a little ahead, so the first orders are not born late.
    let start = Instant::now() + Duration::from_millis(2);
    let collector = system.spawn(Collector {
        start,
        interval_ns,
        acks_per_order: exchange.style().acks_per_order() as u8,
        seen: vec![0; orders as usize],
        completed: 0,
        rejected: 0,
        first_reject: None,
        latency: histogram(),
        done: Some(done_tx),
    });
    let id = exchange.connect(collector.clone())?;
    let pacer = system.spawn(Pacer {
        id,
        start,
        interval_ns,
        next: 0,
        orders,
        scenario: scenario.clone(),
        receivers: exchange.receivers().to_vec(),
        failed: Some(failed_tx),
    });
    pacer.tell(Tick).map_err(|_| LoadError::Stopped)?;
    let deadline = Instant::now() + timeout;
    let done = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left.min(STOP_CHECK)) {
            Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() && exchange.is_running() => {}
            other => break other,
        }
    };
    let elapsed = start.elapsed();
    pacer.stop();
    collector.stop();
    if let Ok(error) = failed_rx.try_recv() {
        return Err(error);
    }
    if done.is_err() && !exchange.is_running() {
        return Err(LoadError::Stopped);
    }
    match done {
        Ok(done) => finish(
            done.orders,
            orders,
            done.rejected,
            done.first_reject,
            elapsed,
            done.latency,
        ),
        Err(_) => Err(LoadError::Timeout {
            done: 0,
            expected: orders,
            waited: elapsed,
        }),
    }
}
