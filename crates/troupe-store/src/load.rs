//! The load: the seed's closed model (users who request, then think), and an open model (a
//! fixed arrival rate, latency measured from each request's planned start).
//!
//! Why not goose: goose models users and think times well, but one `GooseAttack` owns the
//! process's command line and runs one target per attack, its phases are ramps of users
//! rather than a backend switched mid-run, and it has no open model with planned start times.
//! The seed's scenario needs both stores under identical load in one run, phases that flip a
//! backend, per-second series aligned with the store's breaker, and coordinated-omission-free
//! open-model latencies; a few hundred lines on hyper's client connections and HdrHistogram do
//! exactly that.
//!
//! Every user holds one keep-alive connection (reopened after an error), as a browser would.
//! Latencies are recorded in HdrHistogram (microseconds, 3 significant digits).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::backends::SearchMode;

/// The seed's three kinds of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `GET /`: served by the store alone.
    Index,
    /// `GET /search?q=...`: calls the search service.
    Search,
    /// `POST /pay`: calls the payment service.
    Payment,
}

impl Kind {
    /// All three.
    pub const ALL: [Kind; 3] = [Kind::Index, Kind::Search, Kind::Payment];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Index => "index",
            Kind::Search => "search",
            Kind::Payment => "payment",
        }
    }

    fn request(self, host: &str, n: u64) -> hyper::Request<Full<Bytes>> {
        let builder = hyper::Request::builder().header("host", host);
        let built = match self {
            Kind::Index => builder.uri("/").body(Full::new(Bytes::new())),
            Kind::Search => builder
                .uri(format!("/search?q=item{}", n % 1000))
                .body(Full::new(Bytes::new())),
            Kind::Payment => builder
                .method("POST")
                .uri("/pay")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(format!(
                    r#"{{"item":{},"amount_cents":{}}}"#,
                    n % 1000,
                    100 + n % 900
                )))),
        };
        built.expect("a request built from constants is valid")
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// 2xx.
    Ok,
    /// 503: refused by the store (shed, bulkhead full, breaker open).
    Rejected,
    /// Any other status.
    Error,
    /// No answer: the connection failed or the client gave up.
    Failed,
    /// Still waiting when the run ended (its latency is a lower bound).
    Unfinished,
}

/// One phase of a closed run: how long, and the search service's mode during it.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Its name in reports (`healthy`, `search_hangs`, `recovered`).
    pub name: String,
    /// How long it lasts.
    pub duration: Duration,
    /// The search service's mode.
    pub search: SearchMode,
}

/// A closed run's settings.
#[derive(Debug, Clone)]
pub struct ClosedConfig {
    /// Users per kind of request (the seed's 300).
    pub users_per_kind: usize,
    /// Think time between a user's answer and its next request: uniform in this range (the
    /// seed's 500-1500 ms).
    pub think: (Duration, Duration),
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// How long a user waits for an answer before giving up (longer than any hang, so the
    /// baseline's waits are seen whole).
    pub give_up_after: Duration,
    /// After the last phase, how long to wait for requests still in progress before counting
    /// them as unfinished.
    pub drain: Duration,
}

/// One kind's requests in one phase.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The phase.
    pub phase: String,
    /// The kind of request.
    pub kind: Kind,
    /// Requests begun in the phase.
    pub requests: u64,
    /// Answered 2xx.
    pub ok: u64,
    /// Answered 503 (refused).
    pub rejected: u64,
    /// Answered another error status.
    pub errors: u64,
    /// No answer (connection failed, or the user gave up).
    pub failed: u64,
    /// Still waiting at the end.
    pub unfinished: u64,
    /// Answers (of any status) per second of the phase.
    pub throughput: f64,
    /// Latency percentiles over every request begun in the phase (ms): p50, p90 (the seed's
    /// "90% line"), p99, p99.9, max. Unfinished requests count with the time they had waited.
    pub p50_ms: f64,
    /// 90th percentile (ms).
    pub p90_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// 99.9th percentile (ms).
    pub p999_ms: f64,
    /// Slowest (ms).
    pub max_ms: f64,
}

/// One second of a closed run, for one kind.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Seconds since the run began.
    pub second: u64,
    /// The kind of request.
    pub kind: Kind,
    /// Answers (any status) in this second.
    pub answers: u64,
    /// Of those, 2xx.
    pub ok: u64,
    /// Median latency of the answers in this second (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
}

/// What a closed run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ClosedReport {
    /// Per phase and kind.
    pub summaries: Vec<Summary>,
    /// Per second and kind (by when the answer came).
    pub seconds: Vec<Second>,
    /// Per second: the store's search breaker (`closed`, `open`, `half_open`), if the store
    /// reports one.
    pub breaker: Vec<(u64, String)>,
    /// When each phase began (seconds since the run began).
    pub phase_starts: Vec<(String, f64)>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 10 min, 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 600_000_000)
}

fn ms(h: &Histogram<u64>, quantile: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(quantile) as f64 / 1000.0
    }
}

#[derive(Default)]
struct Counts {
    requests: u64,
    ok: u64,
    rejected: u64,
    errors: u64,
    failed: u64,
    unfinished: u64,
}

struct Recorder {
    start: Instant,
    phase_ends: Vec<Instant>,
    by_phase: BTreeMap<(usize, Kind), (Counts, Histogram<u64>)>,
    by_second: BTreeMap<(u64, Kind), (u64, u64, Histogram<u64>)>,
}

impl Recorder {
    fn phase_of(&self, at: Instant) -> usize {
        self.phase_ends
            .iter()
            .position(|end| at < *end)
            .unwrap_or(self.phase_ends.len().saturating_sub(1))
    }

    fn record(&mut self, kind: Kind, began: Instant, latency: Duration, ending: Ending) {
        let phase = self.phase_of(began);
        let (counts, h) = self
            .by_phase
            .entry((phase, kind))
            .or_insert_with(|| (Counts::default(), histogram()));
        counts.requests += 1;
        match ending {
            Ending::Ok => counts.ok += 1,
            Ending::Rejected => counts.rejected += 1,
            Ending::Error => counts.errors += 1,
            Ending::Failed => counts.failed += 1,
            Ending::Unfinished => counts.unfinished += 1,
        }
        let _ = h.record(micros(latency));
        if matches!(ending, Ending::Ok | Ending::Rejected | Ending::Error) {
            let second = (began + latency).duration_since(self.start).as_secs();
            let (answers, ok, h) = self
                .by_second
                .entry((second, kind))
                .or_insert_with(|| (0, 0, histogram()));
            *answers += 1;
            if ending == Ending::Ok {
                *ok += 1;
            }
            let _ = h.record(micros(latency));
        }
    }
}

/// An HTTP/1.1 connection to the store, opened on first use and after a failure.
struct Connection {
    addr: std::net::SocketAddr,
    host: String,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Connection {
    fn new(addr: std::net::SocketAddr) -> Self {
        Self {
            addr,
            host: addr.to_string(),
            sender: None,
        }
    }

    async fn sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, String> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            let stream = tokio::net::TcpStream::connect(self.addr)
                .await
                .map_err(|e| e.to_string())?;
            let _ = stream.set_nodelay(true);
            let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.sender = Some(sender);
        }
        Ok(self.sender.as_mut().expect("just opened"))
    }

    /// Sends one request and reads the whole answer; its status, or why there is none.
    async fn exchange(&mut self, request: hyper::Request<Full<Bytes>>) -> Result<u16, String> {
        let sender = self.sender().await?;
        if sender.ready().await.is_err() {
            self.sender = None;
            return Err("connection closed".into());
        }
        let result = async {
            let response = sender
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<u16, String>(status)
        }
        .await;
        if result.is_err() {
            self.sender = None;
        }
        result
    }
}

fn ending_of(status: u16) -> Ending {
    match status {
        200..=299 => Ending::Ok,
        503 => Ending::Rejected,
        _ => Ending::Error,
    }
}

/// Switches the search service's mode through its admin endpoint.
pub async fn switch_search(search: std::net::SocketAddr, mode: SearchMode) -> Result<(), String> {
    let mode = match mode {
        SearchMode::Healthy => "healthy",
        SearchMode::Hang => "hang",
        SearchMode::Garbage => "garbage",
    };
    let mut connection = Connection::new(search);
    let request = hyper::Request::builder()
        .method("POST")
        .uri(format!("/admin/search/{mode}"))
        .header("host", search.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    match connection.exchange(request).await? {
        200 => Ok(()),
        status => Err(format!(
            "the search service's admin endpoint answered {status}"
        )),
    }
}

/// Reads the store's `/admin/stats`: `Ok(None)` if the store has none (the baseline answers
/// 404), `Err` if it did not answer.
pub async fn store_stats(
    store: std::net::SocketAddr,
) -> Result<Option<crate::actor_store::StoreStats>, String> {
    let mut connection = Connection::new(store);
    let sender = connection.sender().await?;
    let request = hyper::Request::builder()
        .uri("/admin/stats")
        .header("host", store.to_string())
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if response.status() == hyper::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Samples the store's search breaker once a second until `end` (each look bounded by half a
/// second, so a store that does not answer cannot hold the sampler), stopping at once if the
/// store has no counters.
async fn sample_breaker(
    store: std::net::SocketAddr,
    start: Instant,
    end: Instant,
) -> Vec<(u64, String)> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while Instant::now() < end {
        tick.tick().await;
        match tokio::time::timeout(Duration::from_millis(500), store_stats(store)).await {
            Ok(Ok(Some(stats))) => samples.push((start.elapsed().as_secs(), stats.search.breaker)),
            Ok(Ok(None)) => break,
            Ok(Err(_)) | Err(_) => {}
        }
    }
    samples
}

/// Runs the seed's closed model against the store at `store`, switching the search service
/// at `search` between phases. Call it on a multi-threaded tokio runtime.
pub async fn closed(
    store: std::net::SocketAddr,
    search: std::net::SocketAddr,
    config: &ClosedConfig,
) -> Result<ClosedReport, String> {
    if config.phases.is_empty() {
        return Err("a closed run needs at least one phase".into());
    }
    switch_search(search, config.phases[0].search).await?;
    let start = Instant::now();
    let mut phase_ends = Vec::new();
    let mut at = start;
    for phase in &config.phases {
        at += phase.duration;
        phase_ends.push(at);
    }
    let end = at;
    // A phase begins when the search service has switched, not at its planned time: a
    // request that began while the switch was on its way may still meet the old mode. Until
    // a switch is confirmed, its boundary is the run's end (everything counts in the phase
    // before it); the phase loop below moves it to the moment of the confirmation.
    let recorder = Arc::new(Mutex::new(Recorder {
        start,
        phase_ends: vec![end; phase_ends.len()],
        by_phase: BTreeMap::new(),
        by_second: BTreeMap::new(),
    }));
    // What each user is waiting for, to count the unfinished at the end.
    let in_flight: Arc<Mutex<BTreeMap<usize, (Kind, Instant)>>> = Arc::default();
    let mut users = Vec::new();
    let mut user_id = 0;
    for kind in Kind::ALL {
        for i in 0..config.users_per_kind {
            user_id += 1;
            let (recorder, in_flight, config) =
                (recorder.clone(), in_flight.clone(), config.clone());
            let id = user_id;
            users.push(tokio::spawn(async move {
                let mut connection = Connection::new(store);
                let mut rng = rand::rngs::StdRng::from_rng(&mut rand::rng());
                // Spread the first requests over one think time, as users arriving.
                let first = rng.random_range(Duration::ZERO..config.think.1);
                tokio::time::sleep(first).await;
                let mut n = (i as u64) << 32;
                while Instant::now() < end {
                    n += 1;
                    let began = Instant::now();
                    in_flight.lock().unwrap().insert(id, (kind, began));
                    let request = kind.request(&connection.host, n);
                    let answer =
                        tokio::time::timeout(config.give_up_after, connection.exchange(request))
                            .await;
                    let latency = began.elapsed();
                    in_flight.lock().unwrap().remove(&id);
                    let ending = match answer {
                        Ok(Ok(status)) => ending_of(status),
                        Ok(Err(_)) => Ending::Failed,
                        Err(_) => {
                            connection.sender = None;
                            Ending::Failed
                        }
                    };
                    recorder
                        .lock()
                        .unwrap()
                        .record(kind, began, latency, ending);
                    if ending == Ending::Failed {
                        // Do not spin on a refused connection.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let think = rng.random_range(config.think.0..=config.think.1);
                    tokio::time::sleep(think).await;
                }
            }));
        }
    }
    // The store's breaker, once a second, on a task of its own.
    let sampler = tokio::spawn(sample_breaker(store, start, end));
    // The phases: nothing else happens on this task, so each switch is on time.
    let mut phase_starts = vec![(config.phases[0].name.clone(), 0.0)];
    for (index, phase) in config.phases.iter().enumerate().skip(1) {
        tokio::time::sleep_until(phase_ends[index - 1].into()).await;
        switch_search(search, phase.search).await?;
        let switched = Instant::now();
        recorder.lock().unwrap().phase_ends[index - 1] = switched;
        phase_starts.push((
            phase.name.clone(),
            switched.duration_since(start).as_secs_f64(),
        ));
    }
    tokio::time::sleep_until(end.into()).await;
    let breaker = sampler.await.unwrap_or_default();
    // Let requests in progress finish, up to the drain time; the rest are unfinished.
    let drain_end = Instant::now() + config.drain;
    while Instant::now() < drain_end && !in_flight.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for user in &users {
        user.abort();
    }
    for user in users {
        let _ = user.await;
    }
    let now = Instant::now();
    {
        let mut recorder = recorder.lock().unwrap();
        for (_, (kind, began)) in std::mem::take(&mut *in_flight.lock().unwrap()) {
            recorder.record(kind, began, now - began, Ending::Unfinished);
        }
    }
    // Put the search service back as it was found.
    let _ = switch_search(search, SearchMode::Healthy).await;
    let recorder = recorder.lock().unwrap();
    let mut summaries = Vec::new();
    for (index, phase) in config.phases.iter().enumerate() {
        let began = if index == 0 {
            start
        } else {
            recorder.phase_ends[index - 1]
        };
        let lasted = recorder.phase_ends[index].saturating_duration_since(began);
        for kind in Kind::ALL {
            let empty = (Counts::default(), histogram());
            let (counts, h) = recorder.by_phase.get(&(index, kind)).unwrap_or(&empty);
            let answered = counts.ok + counts.rejected + counts.errors;
            summaries.push(Summary {
                phase: phase.name.clone(),
                kind,
                requests: counts.requests,
                ok: counts.ok,
                rejected: counts.rejected,
                errors: counts.errors,
                failed: counts.failed,
                unfinished: counts.unfinished,
                throughput: answered as f64 / lasted.as_secs_f64().max(1e-9),
                p50_ms: ms(h, 0.5),
                p90_ms: ms(h, 0.9),
                p99_ms: ms(h, 0.99),
                p999_ms: ms(h, 0.999),
                max_ms: if h.is_empty() {
                    0.0
                } else {
                    h.max() as f64 / 1000.0
                },
            });
        }
    }
    let seconds = recorder
        .by_second
        .iter()
        .map(|((second, kind), (answers, ok, h))| Second {
            second: *second,
            kind: *kind,
            answers: *answers,
            ok: *ok,
            p50_ms: ms(h, 0.5),
            p99_ms: ms(h, 0.99),
        })
        .collect();
    Ok(ClosedReport {
        summaries,
        seconds,
        breaker,
        phase_starts,
    })
}

/// The async runtime's timer resolution.
const TIMER_GRAIN: Duration = Duration::from_millis(1);

/// An open run's result at one arrival rate.
#[derive(Debug, Clone, Serialize)]
pub struct OpenPoint {
    /// Requests per second asked for.
    pub rate: f64,
    /// Answers per second achieved.
    pub achieved: f64,
    /// Answers that were not 2xx, or no answer.
    pub errors: u64,
    /// Latency from each request's planned start (ms).
    pub p50_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// 99.9th percentile (ms).
    pub p999_ms: f64,
}

/// Sends `kind` requests to `store` at `rate` per second for `duration`, over `connections`
/// keep-alive connections, each request planned at its own start time; latency counts from
/// that plan, so a store that falls behind is charged for the wait (no coordinated omission).
pub async fn open(
    store: std::net::SocketAddr,
    kind: Kind,
    rate: f64,
    duration: Duration,
    connections: usize,
) -> Result<OpenPoint, String> {
    if !(rate.is_finite() && rate > 0.0) || connections == 0 || duration.is_zero() {
        return Err("an open run needs a positive rate, duration and connection count".into());
    }
    let start = Instant::now() + Duration::from_millis(50);
    let total = (rate * duration.as_secs_f64()).round() as u64;
    let interval = 1.0 / rate;
    let mut tasks = Vec::new();
    for c in 0..connections as u64 {
        tasks.push(tokio::spawn(async move {
            let mut connection = Connection::new(store);
            let mut h = histogram();
            let (mut ok, mut errors) = (0u64, 0u64);
            let mut k = c;
            while k < total {
                let planned = start + Duration::from_secs_f64(k as f64 * interval);
                // The runtime's timer has a 1 ms grain and wakes late by up to that much: wake
                // up to 1 ms early instead. A request sent early is timed from when it was
                // sent; one sent late (the store or the connection behind) from when it was
                // planned, so the wait is charged to the store.
                tokio::time::sleep_until((planned - TIMER_GRAIN).into()).await;
                let sent = Instant::now();
                let request = kind.request(&connection.host, k);
                match connection.exchange(request).await {
                    Ok(status) if (200..300).contains(&status) => ok += 1,
                    _ => errors += 1,
                }
                let _ = h.record(micros(sent.min(planned).elapsed()));
                k += connections as u64;
            }
            (h, ok, errors)
        }));
    }
    let mut h = histogram();
    let (mut ok, mut errors) = (0, 0);
    for task in tasks {
        let (part, o, e) = task.await.map_err(|e| e.to_string())?;
        h.add(&part).map_err(|e| e.to_string())?;
        ok += o;
        errors += e;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok(OpenPoint {
        rate,
        achieved: (ok + errors) as f64 / elapsed,
        errors,
        p50_ms: ms(&h, 0.5),
        p99_ms: ms(&h, 0.99),
        p999_ms: ms(&h, 0.999),
    })
}

/// The capacity search: one unmeasured second at the first rate, then rising rates until p99
/// reaches `p99_bound` (or errors appear, or the achieved rate falls 5% short); returns every
/// point measured and the highest rate that held.
pub async fn capacity(
    store: std::net::SocketAddr,
    rates: &[f64],
    step: Duration,
    connections: usize,
    p99_bound: Duration,
) -> Result<(Vec<OpenPoint>, Option<f64>), String> {
    // Unmeasured first: connections opened, threads started, caches warm.
    if let Some(&first) = rates.first() {
        open(
            store,
            Kind::Index,
            first,
            Duration::from_secs(1),
            connections,
        )
        .await?;
    }
    let mut points = Vec::new();
    let mut held = None;
    for &rate in rates {
        let point = open(store, Kind::Index, rate, step, connections).await?;
        let good = point.p99_ms < p99_bound.as_secs_f64() * 1000.0
            && point.errors == 0
            && point.achieved >= 0.95 * rate;
        points.push(point);
        if !good {
            break;
        }
        held = Some(rate);
    }
    Ok((points, held))
}
