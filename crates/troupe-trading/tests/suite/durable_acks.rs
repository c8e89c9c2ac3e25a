//! The durability rule of fsync mode, checked on a running exchange: an order is acknowledged
//! only after an `fdatasync` that began after its record was written, on both engines of its
//! pair.
//!
//! A [`LogObserver`] records every write and flush of the six logs, and the clients' ack sinks
//! record every acknowledgement, into one list under one lock, in the order they happen (each
//! step is recorded on the thread that takes it: a write after its `write` returned, a flush
//! before its `fdatasync` begins and after it returns, an ack when the client receives it).
//! After the run the logs are read back to learn each order's sequence number, and the list
//! is replayed: at each ack, the engines that must hold the order (request-reply: primary and
//! standby; one-way: the engine that sent the ack, and the client waits for both) must have
//! finished a flush that covers the order's sequence number and that began after a write
//! covering it. Nothing here measures time.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use troupe_trading::{
    Ack, AckSink, ClientId, Exchange, ExchangeConfig, Journal, LogEvent, LogMode, LogObserver,
    Outcome, Role, SeedScenario, Style,
};

#[derive(Debug, Clone, Copy)]
enum Step {
    Log {
        pair: usize,
        role: Role,
        event: LogEvent,
    },
    Ack {
        client: ClientId,
        ack: Ack,
    },
}

#[derive(Debug, Default)]
struct Steps(Mutex<Vec<Step>>);

impl Steps {
    fn push(&self, step: Step) {
        self.0.lock().unwrap().push(step);
    }
}

#[derive(Debug)]
struct Recorder(Arc<Steps>);

impl LogObserver for Recorder {
    fn event(&self, pair: usize, role: Role, event: LogEvent) {
        self.0.push(Step::Log { pair, role, event });
    }
}

/// A client's ack sink: records the ack, then hands it to the client's thread.
struct Sink {
    steps: Arc<Steps>,
    client: Arc<Mutex<Option<ClientId>>>,
    tx: Mutex<mpsc::Sender<Ack>>,
}

impl AckSink for Sink {
    fn deliver(&self, ack: Ack) -> bool {
        let client = self
            .client
            .lock()
            .unwrap()
            .expect("connected before any order");
        self.steps.push(Step::Ack { client, ack });
        self.tx.lock().unwrap().send(ack).is_ok()
    }
}

/// Runs `clients` closed-loop clients for `rounds` rounds of the seed scenario on an fsync
/// exchange in `dir`, recording every step. Returns the steps.
fn run(dir: &Path, style: Style, clients: usize, rounds: u64) -> Vec<Step> {
    let steps = Arc::new(Steps::default());
    let system = troupe::System::builder().workers(2).build().unwrap();
    let config = ExchangeConfig {
        style,
        log: LogMode::Fsync,
        log_dir: Some(dir.to_path_buf()),
        log_observer: Some(Arc::new(Recorder(steps.clone()))),
        ..ExchangeConfig::seed()
    };
    let exchange = Arc::new(Exchange::start(&system, config).unwrap());
    let scenario = Arc::new(SeedScenario::new(exchange.market()));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (tx, rx) = mpsc::channel();
            let slot = Arc::new(Mutex::new(None));
            let sink = Sink {
                steps: steps.clone(),
                client: slot.clone(),
                tx: Mutex::new(tx),
            };
            let me = exchange.connect(sink).unwrap();
            *slot.lock().unwrap() = Some(me);
            let exchange = exchange.clone();
            let scenario = scenario.clone();
            std::thread::spawn(move || {
                for round in 0..rounds {
                    for k in 0..scenario.orders_per_round() {
                        let order = scenario.order(me, round, k);
                        exchange.submit(order).unwrap();
                        for _ in 0..style.acks_per_order() {
                            let ack = rx.recv_timeout(Duration::from_secs(60)).unwrap();
                            assert_eq!(ack.client_order_id, order.client_order_id);
                            assert!(matches!(ack.outcome, Outcome::Accepted { .. }), "{ack:?}");
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let exchange = Arc::into_inner(exchange).expect("the clients are done");
    exchange.shutdown();
    system.shutdown();
    let steps = steps.0.lock().unwrap().clone();
    steps
}

/// Every order's (pair, sequence number), by (client, client order id), from the logs.
fn sequence_numbers(dir: &Path) -> HashMap<(ClientId, u64), (usize, u64)> {
    let mut seqs = HashMap::new();
    for pair in 0..3 {
        let primary = Journal::scan(dir, pair, Role::Primary).unwrap();
        let standby = Journal::scan(dir, pair, Role::Standby).unwrap();
        assert_eq!(primary.orders, standby.orders, "pair {pair}: equal logs");
        for (i, order) in primary.orders.iter().enumerate() {
            seqs.insert(
                (order.client(), order.client_order_id()),
                (pair, i as u64 + 1),
            );
        }
    }
    seqs
}

/// Replays the steps; panics at the first ack the flushes before it do not justify. Returns
/// the acks checked and how many batches were written while a flush was running.
fn check(
    steps: &[Step],
    seqs: &HashMap<(ClientId, u64), (usize, u64)>,
    style: Style,
) -> (usize, usize) {
    #[derive(Default, Clone, Copy)]
    struct Engine {
        written: u64,
        /// The flush running: its target, and whether every record up to it was written
        /// before it began.
        flushing: Option<(u64, bool)>,
        /// Every record up to here is covered by a finished flush that began after it was
        /// written.
        durable: u64,
    }
    let mut engines = [[Engine::default(); 2]; 3];
    let role_index = |role: Role| usize::from(role == Role::Standby);
    let (mut acks, mut overlapped) = (0, 0);
    for step in steps {
        match *step {
            Step::Log { pair, role, event } => {
                let e = &mut engines[pair][role_index(role)];
                match event {
                    LogEvent::Written { upto } => {
                        assert!(upto > e.written, "pair {pair} {role}: writes rise");
                        e.written = upto;
                        overlapped += usize::from(e.flushing.is_some());
                    }
                    LogEvent::FlushBegan { upto } => {
                        assert!(
                            e.flushing.is_none(),
                            "pair {pair} {role}: one flush at a time"
                        );
                        e.flushing = Some((upto, upto <= e.written));
                    }
                    LogEvent::FlushDone { upto } => {
                        let (target, after_write) = e.flushing.take().expect("a flush began");
                        assert_eq!(upto, target);
                        assert!(after_write, "pair {pair} {role}: flush of {upto} began before its records were written");
                        e.durable = e.durable.max(upto);
                    }
                    LogEvent::FlushFailed => panic!("pair {pair} {role}: a flush failed"),
                }
            }
            Step::Ack { client, ack } => {
                let key = (client, ack.client_order_id);
                let &(pair, seq) = seqs
                    .get(&key)
                    .unwrap_or_else(|| panic!("acknowledged order {key:?} is in no log"));
                let must_hold: &[Role] = match style {
                    Style::RequestReply => &[Role::Primary, Role::Standby],
                    Style::OneWay => std::slice::from_ref(&ack.from),
                };
                for &role in must_hold {
                    let e = engines[pair][role_index(role)];
                    assert!(
                        e.durable >= seq,
                        "order {key:?} (pair {pair}, sequence {seq}) was acknowledged by the \
                         {} before a flush covering it finished on the {role} (durable up to {})",
                        ack.from,
                        e.durable
                    );
                }
                acks += 1;
            }
        }
    }
    (acks, overlapped)
}

fn acks_follow_the_flushes_that_cover_them(style: Style) {
    let dir = tempfile::tempdir().unwrap();
    let (clients, rounds) = (8, 4);
    let steps = run(dir.path(), style, clients, rounds);
    let seqs = sequence_numbers(dir.path());
    let orders = clients * rounds as usize * 30;
    assert_eq!(seqs.len(), orders, "every order is in the logs");
    let (acks, _overlapped) = check(&steps, &seqs, style);
    assert_eq!(acks, orders * style.acks_per_order());
}

#[test]
fn request_reply_acks_follow_both_engines_flushes() {
    acks_follow_the_flushes_that_cover_them(Style::RequestReply);
}

#[test]
fn one_way_acks_follow_their_engines_flush() {
    acks_follow_the_flushes_that_cover_them(Style::OneWay);
}

/// The checker itself: an ack before the flush that covers it, or a flush that began before
/// the write it claims, is caught.
#[test]
fn the_checker_catches_an_early_ack() {
    let client = ClientId(0);
    let ack = |from| Step::Ack {
        client,
        ack: Ack {
            client_order_id: 1,
            outcome: Outcome::Accepted { filled: 0 },
            from,
        },
    };
    let log = |role, event| Step::Log {
        pair: 0,
        role,
        event,
    };
    let seqs = HashMap::from([((client, 1), (0, 1))]);
    let written = |role| log(role, LogEvent::Written { upto: 1 });
    let began = |role| log(role, LogEvent::FlushBegan { upto: 1 });
    let done = |role| log(role, LogEvent::FlushDone { upto: 1 });
    let (p, s) = (Role::Primary, Role::Standby);

    let good = [
        written(p),
        written(s),
        began(p),
        began(s),
        done(s),
        done(p),
        ack(p),
    ];
    assert_eq!(check(&good, &seqs, Style::RequestReply).0, 1);
    let cases: [(&str, Vec<Step>); 3] = [
        (
            "ack before the primary's flush ended",
            vec![
                written(p),
                written(s),
                began(p),
                began(s),
                done(s),
                ack(p),
                done(p),
            ],
        ),
        (
            "ack without the standby's flush",
            vec![written(p), written(s), began(p), done(p), ack(p)],
        ),
        (
            "flush began before the write",
            vec![
                began(p),
                written(p),
                done(p),
                written(s),
                began(s),
                done(s),
                ack(p),
            ],
        ),
    ];
    for (what, steps) in cases {
        let caught = std::panic::catch_unwind(|| check(&steps, &seqs, Style::RequestReply));
        assert!(caught.is_err(), "not caught: {what}");
    }
}
