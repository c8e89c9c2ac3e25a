//! An example web service with troupe as its actor layer, on axum and the service's own tokio
//! runtime: what embedding troupe in a real service looks like.
//!
//! - **Sessions by name**: `POST /sessions/{user}` gets or spawns the actor `session-{user}`
//!   (`System::get_or_spawn_named`); `GET /sessions/{user}` finds it (404 if none), and each
//!   visit is counted by the session itself; `GET /sessions` lists them (the registry,
//!   `System::registered`).
//! - **A rate limiter on timers**: one actor holds a token bucket refilled by `send_interval`;
//!   every request asks it first, and gets 429 when the bucket is empty.
//! - **A router of workers with deferred replies**: `GET /jobs/{n}` asks the next of a
//!   `Router` of workers (supervised, restarted without limit after a back-off), each a
//!   `DeferredHandler` that keeps the request's reply handle while an async step runs
//!   (`ctx.pipe`), then answers; the request waits at most `ask_timeout`, mapped to 504.
//! - **A supervised flaky actor**: `GET /flaky?fail=true` panics it (500); the system restarts
//!   it (`System::spawn_supervised`) and the next request succeeds.
//! - **Background jobs**: `POST /jobs/{n}` tells the next worker and answers 202 at once.
//! - **Graceful shutdown**: the server stops taking requests and finishes those in flight,
//!   then the actors drain (`system.shutdown_draining_async`): accepted background jobs, and
//!   those whose async step is still running, are finished, not dropped.
//!
//! - **A live console** (optional): `--console 127.0.0.1:0` builds the system observed and
//!   serves `troupe-console` on that loopback address: the actors above as a supervision
//!   tree, their pools, the slowest handlers, the asks waited on.
//!
//! - **Metrics** (optional): `--metrics` builds the system observed, records its named metrics
//!   (`troupe`'s feature `metrics`) in a Prometheus recorder, and serves them at
//!   `GET /metrics` (each scrape first publishes the gauges read at scrape time,
//!   `System::publish_metrics`).
//! - **A span per request and per message** (optional): every request runs in a `request`
//!   span; with `--trace-stdout` the system traces its messages (`trace_messages`) and an
//!   OpenTelemetry pipeline prints each finished span, so one request is one trace through
//!   the limiter, the router's worker and the worker's piped step.
//!
//! Every ask has a timeout, and every way it can fail has an HTTP status ([`status_of`]).

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde::{Deserialize, Serialize};
use troupe::{
    Actor, Addr, AskError, Context, Deferred, DeferredHandler, Handler, Message, SpawnOptions,
    SupervisorStrategy, System,
};

/// How long a request waits for an actor's answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------------------------
// Sessions

/// One user's session: counts their visits.
pub struct Session {
    user: String,
    visits: u64,
}
impl Actor for Session {}

/// Counts a visit; answers the session's state.
#[derive(Message)]
#[reply(SessionInfo)]
pub struct Visit;

/// A session as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The user.
    pub user: String,
    /// Visits so far, this one included.
    pub visits: u64,
}

impl Handler<Visit> for Session {
    fn handle(&mut self, _: Visit, _: &mut Context<Self>) -> SessionInfo {
        self.visits += 1;
        SessionInfo {
            user: self.user.clone(),
            visits: self.visits,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rate limiter

/// A token bucket: `capacity` tokens, refilled by `refill` every `every`.
pub struct RateLimiter {
    tokens: u32,
    capacity: u32,
    refill: u32,
    every: Duration,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(capacity: u32, refill: u32, every: Duration) -> Self {
        Self {
            tokens: capacity,
            capacity,
            refill,
            every,
        }
    }
}

impl Actor for RateLimiter {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.send_interval(self.every, || Refill);
    }
}

#[derive(Message)]
struct Refill;
impl Handler<Refill> for RateLimiter {
    fn handle(&mut self, _: Refill, _: &mut Context<Self>) {
        self.tokens = (self.tokens + self.refill).min(self.capacity);
    }
}

/// Takes a token; false when the bucket is empty.
#[derive(Message)]
#[reply(bool)]
pub struct Acquire;
impl Handler<Acquire> for RateLimiter {
    fn handle(&mut self, _: Acquire, _: &mut Context<Self>) -> bool {
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

// ---------------------------------------------------------------------------------------------
// Workers with deferred replies

/// Computes after an async step, answering asks later; counts every computation finished
/// (asked, or told as a background job).
pub struct Worker {
    /// How long the async step takes.
    pub latency: Duration,
    /// Computations finished, by every worker.
    pub done: Arc<AtomicU64>,
}
impl Actor for Worker {}

/// Asks for the square of a number, computed after the async step.
#[derive(Message)]
#[reply(u64)]
pub struct Square(pub u64);

#[derive(Message)]
struct Computed(u64, Deferred<u64>);

impl DeferredHandler<Square> for Worker {
    fn handle(&mut self, msg: Square, reply: Deferred<u64>, ctx: &mut Context<Self>) {
        let latency = self.latency;
        // The worker goes on with other requests while this one's async step runs.
        ctx.pipe(
            async move {
                tokio::time::sleep(latency).await;
                msg.0 * msg.0
            },
            move |square| Computed(square, reply),
        );
    }
}

impl Handler<Computed> for Worker {
    fn handle(&mut self, msg: Computed, _: &mut Context<Self>) {
        self.done.fetch_add(1, Ordering::Relaxed);
        // The asker may have given up (timed out), or the job was told (a background job):
        // then the answer has nowhere to go.
        let _ = msg.1.send(msg.0);
    }
}

// ---------------------------------------------------------------------------------------------
// A supervised flaky actor

/// Panics when asked to; counts the calls of its current instance.
pub struct Flaky {
    calls: u64,
    instances: Arc<AtomicU64>,
}
impl Actor for Flaky {}

/// A call that fails (panics) if `fail`.
#[derive(Message)]
#[reply(FlakyInfo)]
pub struct Call {
    fail: bool,
}

/// What the flaky actor answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlakyInfo {
    /// Calls answered by this instance.
    pub calls: u64,
    /// Instances built so far (one more after each failure).
    pub instance: u64,
}

impl Handler<Call> for Flaky {
    fn handle(&mut self, call: Call, _: &mut Context<Self>) -> FlakyInfo {
        if call.fail {
            panic!("the flaky actor fails, as asked");
        }
        self.calls += 1;
        FlakyInfo {
            calls: self.calls,
            instance: self.instances.load(Ordering::Relaxed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The service

/// The actors the routes talk to.
#[derive(Clone)]
pub struct AppState {
    /// The actor system (a cheap handle).
    pub system: System,
    limiter: Addr<RateLimiter>,
    workers: troupe::Router<Worker>,
    jobs_done: Arc<AtomicU64>,
    flaky: Addr<Flaky>,
    /// Renders the Prometheus recorder's metrics, if the service serves them.
    prometheus: Option<PrometheusHandle>,
}

/// Settings of the service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Requests allowed at once before the limiter says 429, and refilled per interval.
    pub rate_capacity: u32,
    /// Tokens added every `rate_every`.
    pub rate_refill: u32,
    /// How often the bucket is refilled.
    pub rate_every: Duration,
    /// The workers' async step.
    pub work_latency: Duration,
    /// Workers behind the router.
    pub workers: NonZeroUsize,
    /// How long the actors may drain at shutdown before the rest is stopped.
    pub drain_deadline: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rate_capacity: 1_000,
            rate_refill: 1_000,
            rate_every: Duration::from_millis(100),
            work_latency: Duration::from_millis(5),
            workers: NonZeroUsize::new(4).expect("not zero"),
            drain_deadline: Duration::from_secs(10),
        }
    }
}

impl AppState {
    /// Spawns the service's actors on `system`.
    pub fn new(system: System, settings: &Settings) -> Self {
        let limiter = system.spawn(RateLimiter::new(
            settings.rate_capacity,
            settings.rate_refill,
            settings.rate_every,
        ));
        let latency = settings.work_latency;
        let jobs_done = Arc::new(AtomicU64::new(0));
        let done = jobs_done.clone();
        let workers = troupe::Router::spawn(
            &system,
            settings.workers,
            move || Worker {
                latency,
                done: done.clone(),
            },
            SpawnOptions::new().supervision(
                SupervisorStrategy::one_for_one()
                    .without_limit()
                    .backoff(Duration::from_millis(1), Duration::from_secs(1)),
            ),
        );
        let instances = Arc::new(AtomicU64::new(0));
        let flaky = system.spawn_supervised(
            move || {
                instances.fetch_add(1, Ordering::Relaxed);
                Flaky {
                    calls: 0,
                    instances: instances.clone(),
                }
            },
            SpawnOptions::new().supervision(
                SupervisorStrategy::one_for_one().intensity(100, Duration::from_secs(1)),
            ),
        );
        Self {
            system,
            limiter,
            workers,
            jobs_done,
            flaky,
            prometheus: None,
        }
    }

    /// Serves `GET /metrics` from `prometheus` (the handle of the installed recorder). The
    /// system must be observed for its actors' metrics to be recorded.
    pub fn with_prometheus(mut self, prometheus: PrometheusHandle) -> Self {
        self.prometheus = Some(prometheus);
        self
    }
}

impl AppState {
    /// Computations the workers have finished, asked and background ones.
    pub fn jobs_done(&self) -> u64 {
        self.jobs_done.load(Ordering::Relaxed)
    }
}

/// The routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/sessions", get(list_sessions))
        .route("/sessions/{user}", get(get_session).post(open_session))
        .route("/jobs/{n}", get(work).post(enqueue))
        .route("/flaky", get(flaky))
        .route("/metrics", get(prometheus))
        .layer(axum::middleware::from_fn(request_span))
        .with_state(state)
}

/// Runs each request in a `request` span, the parent of every message it sends.
async fn request_span(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        otel.name = format!("{} {}", request.method(), request.uri().path()),
    );
    next.run(request).instrument(span).await
}

/// `GET /metrics`: the Prometheus text format, with the gauges read at scrape time published
/// first. 404 unless the service was started with metrics.
async fn prometheus(State(state): State<AppState>) -> Result<String, ApiError> {
    let Some(handle) = &state.prometheus else {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "metrics are off: start the service with --metrics".into(),
        ));
    };
    state
        .system
        .publish_metrics()
        .map_err(|error| ApiError(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))?;
    Ok(handle.render())
}

/// An error as the API reports it: a status and a JSON message.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        #[derive(Serialize)]
        struct Body {
            error: String,
        }
        (self.0, Json(Body { error: self.1 })).into_response()
    }
}

/// The HTTP status for an ask that failed: the actor timed out (504), stopped or refused for
/// lack of room (503), or failed while handling it (500).
pub fn status_of(error: &AskError) -> StatusCode {
    match error {
        AskError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        AskError::Stopped | AskError::MailboxFull | AskError::Dropped => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<AskError> for ApiError {
    fn from(error: AskError) -> Self {
        ApiError(status_of(&error), error.to_string())
    }
}

/// Every request takes a token first.
async fn admit(state: &AppState) -> Result<(), ApiError> {
    if state.limiter.ask_timeout(Acquire, ASK_TIMEOUT).await? {
        Ok(())
    } else {
        Err(ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            "rate limit: try again shortly".into(),
        ))
    }
}

fn session_name(user: &str) -> String {
    format!("session-{user}")
}

async fn open_session(
    State(state): State<AppState>,
    Path(user): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    admit(&state).await?;
    let session = state
        .system
        .get_or_spawn_named(&session_name(&user), SpawnOptions::new(), || Session {
            user: user.clone(),
            visits: 0,
        })
        .map_err(|e| ApiError(StatusCode::CONFLICT, e.to_string()))?;
    Ok(Json(session.ask_timeout(Visit, ASK_TIMEOUT).await?))
}

/// The users with a session, from the registry.
async fn list_sessions(State(state): State<AppState>) -> Result<Json<Vec<String>>, ApiError> {
    admit(&state).await?;
    Ok(Json(
        state
            .system
            .registered()
            .into_iter()
            .filter_map(|(name, ..)| name.strip_prefix("session-").map(str::to_owned))
            .collect(),
    ))
}

async fn get_session(
    State(state): State<AppState>,
    Path(user): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    admit(&state).await?;
    let session = state
        .system
        .find::<Session>(&session_name(&user))
        .map_err(|e| ApiError(StatusCode::NOT_FOUND, e.to_string()))?;
    Ok(Json(session.ask_timeout(Visit, ASK_TIMEOUT).await?))
}

async fn work(State(state): State<AppState>, Path(n): Path<u64>) -> Result<Json<u64>, ApiError> {
    admit(&state).await?;
    if n > u64::from(u32::MAX) {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            format!("{n} is too large: at most {}", u32::MAX),
        ));
    }
    Ok(Json(
        state
            .workers
            .next()
            .ask_timeout(Square(n), ASK_TIMEOUT)
            .await?,
    ))
}

/// A background job: accepted at once (202), computed by the next worker; a shutdown drains
/// the workers, so an accepted job is finished.
async fn enqueue(
    State(state): State<AppState>,
    Path(n): Path<u64>,
) -> Result<StatusCode, ApiError> {
    admit(&state).await?;
    if n > u64::from(u32::MAX) {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            format!("{n} is too large: at most {}", u32::MAX),
        ));
    }
    state
        .workers
        .tell(Square(n))
        .map_err(|_| ApiError(StatusCode::SERVICE_UNAVAILABLE, "shutting down".into()))?;
    Ok(StatusCode::ACCEPTED)
}

/// `?fail=true` to make the call fail.
#[derive(Debug, Deserialize)]
struct FlakyQuery {
    #[serde(default)]
    fail: bool,
}

async fn flaky(
    State(state): State<AppState>,
    Query(query): Query<FlakyQuery>,
) -> Result<Json<FlakyInfo>, ApiError> {
    admit(&state).await?;
    Ok(Json(
        state
            .flaky
            .ask_timeout(Call { fail: query.fail }, ASK_TIMEOUT)
            .await?,
    ))
}

/// Serves on `listener` until `shutdown` resolves, then stops taking requests, lets those in
/// flight finish, and drains the actor system for up to `drain_deadline` (what is left then is
/// stopped, and said on stderr).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    drain_deadline: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let system = state.system.clone();
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    if let Err(error) = system.shutdown_draining_async(drain_deadline).await {
        eprintln!("shutdown: {error}");
    }
    Ok(())
}
