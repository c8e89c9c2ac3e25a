//! The seed's closed model in simulated time: `users_per_kind` users for each kind of request
//! (the seed's 300), each an actor that requests, waits for the answer, thinks 500-1500 ms
//! (a timer), and requests again, until the load's end.
//!
//! The users call the store's [`App`] directly (its `search`, `pay` and `index`, as the HTTP
//! handlers do), without HTTP: axum, hyper and the edge's load shedding need real sockets,
//! whose timing a simulation cannot control. A request's latency is simulated time from its
//! start to its answer: the store's own logic (asks, bulkhead, timeouts, breaker) and the
//! simulated backends' latencies, and nothing of the machine it runs on.
//!
//! Each user draws its think times from a generator seeded once, at spawn, from the load's
//! seed: the same seed makes the same users, whatever the schedule does.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use troupe::{Actor, Context, Handler, Message, System};

use crate::actor_store::{App, StoreError};
use crate::load::{Ending, Kind};
use crate::Payment;

/// The load's settings.
#[derive(Debug, Clone)]
pub struct SimLoadConfig {
    /// Users per kind of request (the seed's 300).
    pub users_per_kind: usize,
    /// Think time between an answer and the next request: uniform in this range (the seed's
    /// 500-1500 ms). A user's first request comes after a uniform wait in `0..think.1`, as
    /// users arriving.
    pub think: (Duration, Duration),
    /// No request begins at or after this instant (simulated clock).
    pub end: Instant,
}

/// One request, as its user saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Its kind.
    pub kind: Kind,
    /// When it began, since the load began.
    pub began: Duration,
    /// From its start to its answer.
    pub latency: Duration,
    /// How it ended (`Ok`, `Rejected` for 503, `Error` for any other error status).
    pub ending: Ending,
}

#[derive(Default)]
struct Recorder {
    samples: Vec<Sample>,
    in_flight: usize,
}

/// The users, spawned on a system: see the module note.
pub struct SimulatedLoad {
    recorder: Arc<Mutex<Recorder>>,
    start: Instant,
}

impl SimulatedLoad {
    /// Spawns the users on `system`, calling `app`; `seed` seeds their think times.
    pub fn start(system: &System, app: &App, config: &SimLoadConfig, seed: u64) -> Self {
        let recorder = Arc::new(Mutex::new(Recorder::default()));
        let start = system.now();
        let mut number = 0u64;
        for kind in Kind::ALL {
            for _ in 0..config.users_per_kind {
                number += 1;
                system.spawn(User {
                    kind,
                    app: app.clone(),
                    rng: StdRng::seed_from_u64(seed ^ number.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    think: config.think,
                    end: config.end,
                    start,
                    n: number << 32,
                    began: None,
                    recorder: recorder.clone(),
                });
            }
        }
        Self { recorder, start }
    }

    /// When the load began (simulated clock).
    pub fn started_at(&self) -> Instant {
        self.start
    }

    /// Requests begun and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Requests answered so far.
    pub fn answered(&self) -> usize {
        self.lock().samples.len()
    }

    /// Every request answered so far, in the order of their answers.
    pub fn samples(&self) -> Vec<Sample> {
        self.lock().samples.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorder> {
        // Every critical section is a push or a count: a poisoned lock is consistent.
        self.recorder.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One user of the seed's closed model.
struct User {
    kind: Kind,
    app: App,
    rng: StdRng,
    think: (Duration, Duration),
    end: Instant,
    start: Instant,
    /// Numbers its requests (the query and the item follow from it).
    n: u64,
    /// When the request in progress began.
    began: Option<Instant>,
    recorder: Arc<Mutex<Recorder>>,
}

impl Actor for User {
    fn started(&mut self, ctx: &mut Context<Self>) {
        let first = self.rng.random_range(Duration::ZERO..self.think.1);
        ctx.send_after(first, Go);
    }
}

/// Time for the user's next request.
#[derive(Message)]
struct Go;

/// The answer to the user's request.
#[derive(Message)]
struct Answered(Ending);

fn ending_of<T>(answer: Result<T, StoreError>) -> Ending {
    match answer {
        Ok(_) => Ending::Ok,
        Err(error) if error.status().as_u16() == 503 => Ending::Rejected,
        Err(_) => Ending::Error,
    }
}

impl Handler<Go> for User {
    fn handle(&mut self, _: Go, ctx: &mut Context<Self>) {
        let now = ctx.now();
        if now >= self.end {
            return;
        }
        self.n += 1;
        self.began = Some(now);
        self.recorder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .in_flight += 1;
        let (app, n) = (self.app.clone(), self.n);
        match self.kind {
            Kind::Index => {
                // Served by the store alone: answered at once.
                let _page = app.index();
                self.answered(Ending::Ok, ctx);
            }
            Kind::Search => ctx.pipe(
                async move { ending_of(app.search(&format!("item{}", n % 1000)).await) },
                Answered,
            ),
            Kind::Payment => ctx.pipe(
                async move {
                    let payment = Payment {
                        item: n % 1000,
                        amount_cents: 100 + n % 900,
                    };
                    ending_of(app.pay(payment).await)
                },
                Answered,
            ),
        }
    }
}

impl Handler<Answered> for User {
    fn handle(&mut self, answer: Answered, ctx: &mut Context<Self>) {
        self.answered(answer.0, ctx);
    }
}

impl User {
    /// Records the answer to the request in progress, then thinks.
    fn answered(&mut self, ending: Ending, ctx: &mut Context<Self>) {
        let now = ctx.now();
        if let Some(began) = self.began.take() {
            let mut recorder = self.recorder.lock().unwrap_or_else(|p| p.into_inner());
            recorder.in_flight -= 1;
            recorder.samples.push(Sample {
                kind: self.kind,
                began: began - self.start,
                latency: now - began,
                ending,
            });
        }
        let think = self.rng.random_range(self.think.0..=self.think.1);
        ctx.send_after(think, Go);
    }
}
