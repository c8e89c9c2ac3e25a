//! The store on troupe: an axum server on the process's tokio runtime, whose requests to the
//! backends go through one actor per backend, as the seed's closing points describe Akka
//! being used.
//!
//! A [`BackendActor`] owns everything about calling its backend: its [`Transport`] (hyper's
//! pooled HTTP client here; simulated services in a simulation), the [`Bulkhead`] (calls in
//! flight and waiting, refusing beyond), the per-call timeout and the [`Breaker`]. Its handler
//! never waits: it takes the request's reply handle (a `DeferredHandler`), starts the call
//! with `ctx.pipe`, and answers when the call's result comes back as a message. Being the only owner of that state,
//! it needs no lock. It reads the time from its context (`ctx.now()`), so that it runs
//! unchanged in simulated time. The edge sheds load: past `max_concurrent_requests` requests
//! in progress in the whole store, it answers 503 at once; what a client can make it wait for
//! (a head, a body, a connection) is bounded in [`edge`](crate::edge).
//!
//! A call's timeout runs from its admission: a call that waits in the bulkhead starts with
//! what is left of it, and one whose time runs out while it waits is answered 504 by a timer
//! (without it, a call queued behind calls to a hanging backend waited for a place and then
//! its whole timeout: 1.8 s in simulation, for a 1 s timeout). The actors are supervised: a
//! failed one is rebuilt in place from its settings, and the calls its old instance left in
//! flight keep their places in the bulkhead (see [`bulkhead`](crate::bulkhead)) and answer
//! their callers, but not the new instance's breaker.
//!
//! A request that needs several calls in sequence reads as the seed's for-comprehension:
//!
//! ```ignore
//! let found = app.search(&order.query).await?;
//! let product = found.results.into_iter().next().ok_or_else(|| nothing_matches(&order.query))?;
//! let payment = app.pay(Payment { item: product.id, amount_cents: order.amount_cents }).await?;
//! Ok(Json(CheckoutReceipt { product, payment }))
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tower::ServiceBuilder;
use troupe::{
    Actor, Addr, AskError, Context, Deferred, DeferredHandler, Handler, Message, SpawnOptions,
    SupervisorStrategy, System,
};

use crate::breaker::{Breaker, BreakerConfig, Outcome, Permit, Phase};
use crate::bulkhead::{Admission, Bulkhead, BulkheadConfig, Place, Places};
use crate::edge::{self, BodyLimits, ConnectionLimits};
use crate::transport::{HttpClient, HttpTransport, Transport};
use crate::{
    Checkout, CheckoutReceipt, ErrorBody, IndexPage, Payment, PaymentReceipt, SearchResults,
};

/// The store's settings; each has a command-line flag (`troupe-store serve --help`).
#[derive(Debug, Clone)]
pub struct ActorStoreConfig {
    /// Base URL of the search service.
    pub search_url: String,
    /// Base URL of the payment service.
    pub payment_url: String,
    /// How long one backend call may take (default 1 s: Hystrix's execution timeout, and
    /// fifty times the backends' 20 ms; resilience4j's TimeLimiter default is also 1 s).
    pub call_timeout: Duration,
    /// Each backend's bulkhead.
    pub bulkhead: BulkheadConfig,
    /// Each backend's circuit breaker.
    pub breaker: BreakerConfig,
    /// Requests in progress in the whole store, every route together, before it answers 503
    /// (default 1,024: the seed's 900 users, plus room). A request counts from when its body
    /// is in to its answer.
    pub max_concurrent_requests: usize,
    /// The longest a request may wait for a backend actor's answer, queueing in its bulkhead
    /// included (default 3 s: a full queue's wait behind calls that time out).
    pub request_timeout: Duration,
    /// The largest request body (default 16 KiB); a declared length over it is refused before
    /// the body is read.
    pub max_body: usize,
    /// A request's head must arrive within this; it is also how long a kept-alive connection
    /// may stay idle (default 10 s; see [`edge`](crate::edge)).
    pub header_timeout: Duration,
    /// A request's whole body must arrive within this of its head (default 10 s).
    pub body_timeout: Duration,
    /// Connections served at once; the next wait in the listen backlog (default 4,096).
    pub max_connections: usize,
    /// troupe's worker threads (default: `TROUPE_WORKERS`, else one per core).
    pub workers: Option<usize>,
    /// Restarts of a failed backend actor allowed within one second before it stays stopped
    /// (and its backend answers 503); default 10. A restart loses the actor's bulkhead queue
    /// and breaker state, not its address.
    pub max_restarts: u32,
}

impl ActorStoreConfig {
    /// Defaults, calling the backends at these base URLs.
    pub fn new(search_url: impl Into<String>, payment_url: impl Into<String>) -> Self {
        Self {
            search_url: search_url.into(),
            payment_url: payment_url.into(),
            call_timeout: Duration::from_secs(1),
            bulkhead: BulkheadConfig::default(),
            breaker: BreakerConfig::default(),
            max_concurrent_requests: 1024,
            request_timeout: Duration::from_secs(3),
            max_body: crate::MAX_BODY,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            max_connections: 4096,
            workers: None,
            max_restarts: 10,
        }
    }

    /// Checks every setting; the first problem in one line.
    pub fn check(&self) -> Result<(), String> {
        for (name, url) in [("search", &self.search_url), ("payment", &self.payment_url)] {
            if !url.starts_with("http://") || url.parse::<hyper::Uri>().is_err() {
                return Err(format!("the {name} URL `{url}` is not an http:// URL"));
            }
        }
        self.check_limits()
    }

    /// Checks every setting but the URLs (which only the HTTP transport reads).
    pub fn check_limits(&self) -> Result<(), String> {
        if self.call_timeout.is_zero() {
            return Err("the call timeout must be more than 0".into());
        }
        if self.request_timeout < self.call_timeout {
            return Err("the request timeout must be at least the call timeout".into());
        }
        if self.max_concurrent_requests == 0 {
            return Err("the edge must allow at least 1 request in progress".into());
        }
        if self.max_body == 0 {
            return Err("the largest body must be at least 1 byte".into());
        }
        if self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            return Err("the header and body timeouts must be more than 0".into());
        }
        if self.max_connections == 0 {
            return Err("the edge must allow at least 1 connection".into());
        }
        if self.workers == Some(0) {
            return Err("troupe needs at least 1 worker".into());
        }
        self.bulkhead.check()?;
        self.breaker.check()
    }
}

// ---------------------------------------------------------------------------------------------
// The backend actor

/// Why a backend call gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The breaker is open: failed fast, no call made.
    #[error("the {0} service is unavailable (circuit open); retry later")]
    CircuitOpen(&'static str),
    /// The bulkhead is full: refused, no call made.
    #[error("the {0} service is busy (too many calls in flight); retry later")]
    BulkheadFull(&'static str),
    /// No answer within the call timeout.
    #[error("the {0} service did not answer within {1:?}")]
    Timeout(&'static str, Duration),
    /// An answer with an error status.
    #[error("the {0} service answered {1}")]
    Status(&'static str, u16),
    /// An answer that is not JSON (or too large).
    #[error("the {0} service answered something that is not JSON")]
    Garbage(&'static str),
    /// No connection, or the connection failed.
    #[error("the {0} service is unreachable: {1}")]
    Unreachable(&'static str, String),
}

impl CallError {
    /// The status the store answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            CallError::CircuitOpen(_) | CallError::BulkheadFull(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            CallError::Timeout(..) => StatusCode::GATEWAY_TIMEOUT,
            CallError::Status(..) | CallError::Garbage(_) | CallError::Unreachable(..) => {
                StatusCode::BAD_GATEWAY
            }
        }
    }
}

/// One call to a backend: a method, a path (with its query), a JSON body.
#[derive(Debug, Message)]
#[reply(Result<serde_json::Value, CallError>)]
pub struct Call {
    /// GET or POST.
    pub method: Method,
    /// Path and query, e.g. `/search?q=shoes`.
    pub path: String,
    /// The JSON body, for POST.
    pub body: Option<Bytes>,
}

/// A call waiting in the bulkhead, or starting.
struct Pending {
    call: Call,
    reply: Deferred<Result<serde_json::Value, CallError>>,
    /// When its call timeout ends: admission plus the timeout, so that the wait in the
    /// bulkhead counts against it.
    deadline: Instant,
}

/// Time to answer the waiting calls whose deadline has passed.
#[derive(Message)]
struct Expire;

/// A call's result, back from the async runtime.
#[derive(Message)]
struct Finished {
    result: Result<serde_json::Value, CallError>,
    reply: Deferred<Result<serde_json::Value, CallError>>,
    permit: Permit,
    /// The actor instance that made the call: after a restart, a newer one receives it.
    instance: u64,
}

/// A backend's counters, shared with the edge's `/admin/stats`; and what every instance of its
/// actor shares (a supervisor rebuilds a failed one in place): the places of its bulkhead,
/// which calls left in flight by a failed instance still hold.
#[derive(Debug, Default)]
pub struct BackendStats {
    places: Places,
    instances: AtomicU64,
    calls: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    failed_fast: AtomicU64,
    refused: AtomicU64,
    in_flight: AtomicU64,
    queued: AtomicU64,
    expired: AtomicU64,
    /// 0 closed, 1 open, 2 half-open.
    phase: AtomicU8,
    opened: AtomicU64,
    closed: AtomicU64,
}

/// A snapshot of [`BackendStats`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendSnapshot {
    /// Calls made to the backend.
    pub calls: u64,
    /// Calls answered.
    pub succeeded: u64,
    /// Calls that failed (error status, garbage, unreachable, timeout).
    pub failed: u64,
    /// Of those, timeouts.
    pub timed_out: u64,
    /// Requests failed fast by the open breaker.
    pub failed_fast: u64,
    /// Requests refused by the full bulkhead.
    pub refused: u64,
    /// Calls in flight now.
    pub in_flight: u64,
    /// Calls waiting in the bulkhead now.
    pub queued: u64,
    /// Requests that waited their whole call timeout in the bulkhead: answered 504, no call
    /// made.
    pub expired: u64,
    /// The breaker now: `closed`, `open` or `half_open`.
    pub breaker: String,
    /// Times the breaker opened.
    pub opened: u64,
    /// Times it closed again.
    pub closed: u64,
    /// Times the backend's actor was rebuilt after failing.
    pub restarts: u64,
}

impl BackendStats {
    /// Times the breaker opened so far (one load, for a test that watches it step by step).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Times the breaker closed again so far.
    pub fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    /// A snapshot.
    pub fn snapshot(&self) -> BackendSnapshot {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        BackendSnapshot {
            calls: load(&self.calls),
            succeeded: load(&self.succeeded),
            failed: load(&self.failed),
            timed_out: load(&self.timed_out),
            failed_fast: load(&self.failed_fast),
            refused: load(&self.refused),
            in_flight: load(&self.in_flight),
            queued: load(&self.queued),
            expired: load(&self.expired),
            breaker: match self.phase.load(Ordering::Relaxed) {
                1 => "open",
                2 => "half_open",
                _ => "closed",
            }
            .to_owned(),
            opened: load(&self.opened),
            closed: load(&self.closed),
            restarts: load(&self.instances).saturating_sub(1),
        }
    }
}

/// The actor that owns one backend: its transport, bulkhead, timeout and breaker.
pub struct BackendActor {
    name: &'static str,
    /// Which instance this is (the backend's first is 1).
    instance: u64,
    /// The breaker's transitions already added to the shared counters (this instance's).
    published: (u64, u64),
    transport: Arc<dyn Transport>,
    timeout: Duration,
    bulkhead: Bulkhead<Pending>,
    breaker: Breaker,
    stats: Arc<BackendStats>,
    /// The deadline the [`Expire`] timer is set for, if one is.
    expiry: Option<Instant>,
}

impl Actor for BackendActor {}

impl BackendActor {
    /// An actor calling the backend named `name` through `transport`, with the call timeout,
    /// bulkhead and breaker of `config`.
    pub fn new(
        name: &'static str,
        transport: Arc<dyn Transport>,
        config: &ActorStoreConfig,
        stats: Arc<BackendStats>,
    ) -> Self {
        Self {
            name,
            instance: stats.instances.fetch_add(1, Ordering::Relaxed) + 1,
            published: (0, 0),
            transport,
            timeout: config.call_timeout,
            bulkhead: Bulkhead::sharing(config.bulkhead, stats.places.clone()),
            breaker: Breaker::new(config.breaker),
            stats,
            expiry: None,
        }
    }

    /// Starts the waiting calls there are places for.
    fn launch(&mut self, ctx: &mut Context<Self>) {
        let now = ctx.now();
        while let Some((pending, place)) = self.bulkhead.next_to_start() {
            self.try_start(pending, place, now, ctx);
        }
        self.publish(now);
    }

    /// Makes the call holding `place`, unless its asker gave up, its time ran out waiting, or
    /// the breaker refuses it (the place is then freed at once).
    fn try_start(&mut self, pending: Pending, place: Place, now: Instant, ctx: &mut Context<Self>) {
        if pending.reply.is_closed() {
            // Its asker gave up while it waited: do not call for nobody.
            return;
        }
        if pending.deadline <= now {
            // Its whole call timeout went waiting for a place.
            self.expire(pending);
            return;
        }
        match self.breaker.permit(now) {
            Err(_) => {
                self.stats.failed_fast.fetch_add(1, Ordering::Relaxed);
                let _ = pending.reply.send(Err(CallError::CircuitOpen(self.name)));
            }
            Ok(permit) => self.start(pending, place, permit, now, ctx),
        }
    }

    /// Makes the call, with what is left of its timeout (all of it, unless it waited). The
    /// call's future holds its place: dropped with the future, when the call ends or is
    /// abandoned.
    fn start(
        &mut self,
        pending: Pending,
        place: Place,
        permit: Permit,
        now: Instant,
        ctx: &mut Context<Self>,
    ) {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let Pending {
            call,
            reply,
            deadline,
        } = pending;
        let (name, timeout, instance) = (self.name, self.timeout, self.instance);
        let left = deadline.saturating_duration_since(now);
        let exchange = self.transport.call(call);
        ctx.pipe(
            async move {
                let _place = place;
                tokio::time::timeout(left, exchange)
                    .await
                    .map_err(|_| CallError::Timeout(name, timeout))?
            },
            move |result| Finished {
                result,
                reply,
                permit,
                instance,
            },
        );
    }

    /// Answers a call whose timeout ran out while it waited in the bulkhead (no call made, so
    /// nothing for the breaker).
    fn expire(&self, pending: Pending) {
        self.stats.expired.fetch_add(1, Ordering::Relaxed);
        let _ = pending
            .reply
            .send(Err(CallError::Timeout(self.name, self.timeout)));
    }

    /// Sets the [`Expire`] timer for the oldest waiting call's deadline, unless one is set.
    /// (Every call has the same timeout, so the oldest waiting call's deadline is the first.)
    fn watch_waiting(&mut self, now: Instant, ctx: &mut Context<Self>) {
        if self.expiry.is_some() {
            return;
        }
        if let Some(oldest) = self.bulkhead.oldest_waiting() {
            self.expiry = Some(oldest.deadline);
            // At least a millisecond: a timer never fires before its time, so this one cannot
            // fire again and again without the clock moving.
            let delay = oldest
                .deadline
                .saturating_duration_since(now)
                .max(Duration::from_millis(1));
            ctx.send_after(delay, Expire);
        }
    }

    /// Copies the bulkhead's and the breaker's state into the shared counters.
    fn publish(&mut self, now: Instant) {
        let stats = &self.stats;
        stats
            .in_flight
            .store(self.bulkhead.in_flight() as u64, Ordering::Relaxed);
        stats
            .queued
            .store(self.bulkhead.queued() as u64, Ordering::Relaxed);
        let phase = match self.breaker.phase(now) {
            Phase::Closed => 0,
            Phase::Open => 1,
            Phase::HalfOpen => 2,
        };
        stats.phase.store(phase, Ordering::Relaxed);
        // Added, not stored: the counters span every instance.
        let (opened, closed) = self.breaker.transitions();
        stats
            .opened
            .fetch_add(opened - self.published.0, Ordering::Relaxed);
        stats
            .closed
            .fetch_add(closed - self.published.1, Ordering::Relaxed);
        self.published = (opened, closed);
    }
}

impl DeferredHandler<Call> for BackendActor {
    fn handle(
        &mut self,
        call: Call,
        reply: Deferred<Result<serde_json::Value, CallError>>,
        ctx: &mut Context<Self>,
    ) {
        // An open breaker fails fast, before the bulkhead.
        let now = ctx.now();
        if self.breaker.phase(now) == Phase::Open {
            self.stats.failed_fast.fetch_add(1, Ordering::Relaxed);
            self.publish(now);
            let _ = reply.send(Err(CallError::CircuitOpen(self.name)));
            return;
        }
        let deadline = now + self.timeout;
        match self.bulkhead.admit(Pending {
            call,
            reply,
            deadline,
        }) {
            Admission::Start(pending, place) => {
                self.try_start(pending, place, now, ctx);
                self.publish(now);
            }
            Admission::Queued => {
                // Places may have been freed without a message (calls of a failed instance).
                self.launch(ctx);
                self.watch_waiting(now, ctx);
            }
            Admission::Refused(pending) => {
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                let _ = pending.reply.send(Err(CallError::BulkheadFull(self.name)));
                self.publish(now);
            }
        }
    }
}

impl Handler<Expire> for BackendActor {
    fn handle(&mut self, _: Expire, ctx: &mut Context<Self>) {
        let now = ctx.now();
        self.expiry = None;
        for pending in self
            .bulkhead
            .remove_waiting(|pending| pending.deadline <= now || pending.reply.is_closed())
        {
            if !pending.reply.is_closed() {
                self.expire(pending);
            }
        }
        self.watch_waiting(now, ctx);
        self.publish(now);
    }
}

impl Handler<Finished> for BackendActor {
    fn handle(&mut self, done: Finished, ctx: &mut Context<Self>) {
        let outcome = match &done.result {
            Ok(_) => {
                self.stats.succeeded.fetch_add(1, Ordering::Relaxed);
                Outcome::Success
            }
            Err(error) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                if matches!(error, CallError::Timeout(..)) {
                    self.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Failure
            }
        };
        if done.instance == self.instance {
            self.breaker.record(done.permit, outcome, ctx.now());
        }
        // Else made by a failed instance: its permit means nothing to this breaker.
        let _ = done.reply.send(done.result);
        // Its place was freed with its future.
        self.launch(ctx);
    }
}

// ---------------------------------------------------------------------------------------------
// The edge

/// What the store's handlers share: the two backend actors and the settings they need.
#[derive(Clone)]
pub struct App {
    search: Addr<BackendActor>,
    payment: Addr<BackendActor>,
    request_timeout: Duration,
    stats: Arc<[Arc<BackendStats>; 2]>,
    shed: Arc<AtomicU64>,
}

/// Why a request failed, as the client sees it.
#[derive(Debug)]
pub struct StoreError {
    status: StatusCode,
    message: String,
}

impl StoreError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// The status the client gets.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What went wrong, for a person to read (the answer's `error`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl IntoResponse for StoreError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

impl From<CallError> for StoreError {
    fn from(error: CallError) -> Self {
        StoreError::new(error.status(), error.to_string())
    }
}

impl App {
    /// Spawns the two backend actors on `system`, each supervised (a failed one is rebuilt in
    /// place, within `config.max_restarts` a second), calling their services through
    /// `search` and `payment`: what the store's handlers share, without the HTTP edge.
    pub fn new(
        system: &System,
        search: Arc<dyn Transport>,
        payment: Arc<dyn Transport>,
        config: &ActorStoreConfig,
    ) -> Result<App, String> {
        config.check_limits()?;
        let stats: Arc<[Arc<BackendStats>; 2]> = Arc::new(Default::default());
        let options = SpawnOptions::new().supervision(
            SupervisorStrategy::one_for_one()
                .intensity(config.max_restarts, Duration::from_secs(1)),
        );
        let spawn =
            |name: &'static str, transport: Arc<dyn Transport>, stats: &Arc<BackendStats>| {
                let (config, stats) = (config.clone(), stats.clone());
                system.spawn_supervised(
                    move || BackendActor::new(name, transport.clone(), &config, stats.clone()),
                    options.clone(),
                )
            };
        Ok(App {
            search: spawn("search", search, &stats[0]),
            payment: spawn("payment", payment, &stats[1]),
            request_timeout: config.request_timeout,
            stats,
            shed: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The search backend's counters (live: read them as often as needed).
    pub fn search_stats(&self) -> &Arc<BackendStats> {
        &self.stats[0]
    }

    /// The payment backend's counters.
    pub fn payment_stats(&self) -> &Arc<BackendStats> {
        &self.stats[1]
    }

    /// The store's counters, as `GET /admin/stats` answers them.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            search: self.stats[0].snapshot(),
            payment: self.stats[1].snapshot(),
            shed: self.shed.load(Ordering::Relaxed),
        }
    }

    /// The index page (served by the store alone).
    pub fn index(&self) -> IndexPage {
        crate::index_page("troupe")
    }

    /// Asks a backend actor, and reads its answer as a `T`.
    async fn call<T: DeserializeOwned>(
        &self,
        backend: &Addr<BackendActor>,
        name: &str,
        what: &str,
        call: Call,
    ) -> Result<T, StoreError> {
        let answer = match backend.ask_timeout(call, self.request_timeout).await {
            Ok(answer) => answer?,
            Err(AskError::Timeout(waited)) => {
                return Err(StoreError::new(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("no answer from the {name} service within {waited:?}"),
                ))
            }
            Err(other) => {
                return Err(StoreError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the {name} service's caller is unavailable: {other}"),
                ))
            }
        };
        serde_json::from_value(answer).map_err(|e| {
            StoreError::new(
                StatusCode::BAD_GATEWAY,
                format!("the {name} service answered something that is not {what}: {e}"),
            )
        })
    }

    /// Searches.
    pub async fn search(&self, query: &str) -> Result<SearchResults, StoreError> {
        crate::check_query(query).map_err(|why| StoreError::new(StatusCode::BAD_REQUEST, why))?;
        let path = format!("/search?q={}", percent_encode(query));
        let call = Call {
            method: Method::GET,
            path,
            body: None,
        };
        self.call(&self.search, "search", "search results", call)
            .await
    }

    /// Pays.
    pub async fn pay(&self, payment: Payment) -> Result<PaymentReceipt, StoreError> {
        crate::check_amount(payment.amount_cents)
            .map_err(|why| StoreError::new(StatusCode::BAD_REQUEST, why))?;
        let body = serde_json::to_vec(&payment).map_err(|e| {
            StoreError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding: {e}"))
        })?;
        let call = Call {
            method: Method::POST,
            path: "/pay".to_owned(),
            body: Some(Bytes::from(body)),
        };
        self.call(&self.payment, "payment", "a payment receipt", call)
            .await
    }
}

/// Percent-encodes a query value (everything but unreserved characters).
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Reads a JSON body, saying what is wrong with it.
fn parse<T: DeserializeOwned>(
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
    what: &str,
) -> Result<T, StoreError> {
    let body =
        body.map_err(|rejection| StoreError::new(rejection.status(), rejection.body_text()))?;
    serde_json::from_slice(&body).map_err(|e| {
        StoreError::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not a valid {what}: {e}"),
        )
    })
}

async fn index(State(app): State<App>) -> Json<IndexPage> {
    Json(app.index())
}

#[derive(Deserialize)]
struct SearchParams {
    q: Option<String>,
}

async fn search_handler(
    State(app): State<App>,
    params: Result<Query<SearchParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<SearchResults>, StoreError> {
    let Query(params) =
        params.map_err(|r| StoreError::new(StatusCode::BAD_REQUEST, r.body_text()))?;
    let query = params
        .q
        .ok_or_else(|| StoreError::new(StatusCode::BAD_REQUEST, "the query `q` is missing"))?;
    Ok(Json(app.search(&query).await?))
}

async fn pay(
    State(app): State<App>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<PaymentReceipt>, StoreError> {
    let payment: Payment = parse(body, "payment")?;
    Ok(Json(app.pay(payment).await?))
}

/// Search, then pay for the first hit: the seed's for-comprehension.
async fn checkout(
    State(app): State<App>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<CheckoutReceipt>, StoreError> {
    let order: Checkout = parse(body, "checkout")?;
    crate::check_amount(order.amount_cents)
        .map_err(|why| StoreError::new(StatusCode::BAD_REQUEST, why))?;
    let found = app.search(&order.query).await?;
    let product = found.results.into_iter().next().ok_or_else(|| {
        StoreError::new(
            StatusCode::NOT_FOUND,
            format!("nothing matches `{}`", order.query),
        )
    })?;
    let payment = app
        .pay(Payment {
            item: product.id,
            amount_cents: order.amount_cents,
        })
        .await?;
    Ok(Json(CheckoutReceipt { product, payment }))
}

/// The store's counters, at `GET /admin/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreStats {
    /// The search backend's actor.
    pub search: BackendSnapshot,
    /// The payment backend's actor.
    pub payment: BackendSnapshot,
    /// Requests the edge shed (503) for being over its limit.
    pub shed: u64,
}

async fn stats_handler(State(app): State<App>) -> Json<StoreStats> {
    Json(app.stats())
}

async fn not_found() -> StoreError {
    StoreError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

async fn method_not_allowed() -> StoreError {
    StoreError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "this endpoint does not take that method",
    )
}

/// The running store.
pub struct ActorStore {
    addr: SocketAddr,
    system: System,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl ActorStore {
    /// Starts the store on `listener`, on the current tokio runtime (troupe runs on it too:
    /// one runtime, troupe adding only its workers and timer thread).
    pub async fn start(
        listener: tokio::net::TcpListener,
        config: ActorStoreConfig,
    ) -> anyhow::Result<ActorStore> {
        config.check().map_err(anyhow::Error::msg)?;
        let mut builder = System::builder()
            .name("store")
            .tokio_handle(tokio::runtime::Handle::current());
        if let Some(workers) = config.workers {
            builder = builder.workers(workers);
        }
        let system = builder.build()?;
        let client: HttpClient = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http();
        let search = HttpTransport::new("search", &config.search_url, client.clone());
        let payment = HttpTransport::new("payment", &config.payment_url, client);
        let app = App::new(&system, Arc::new(search), Arc::new(payment), &config)
            .map_err(anyhow::Error::msg)?;
        let shed = app.shed.clone();
        let shedding = ServiceBuilder::new()
            .layer(HandleErrorLayer::new(move |_: tower::BoxError| {
                let shed = shed.clone();
                async move {
                    shed.fetch_add(1, Ordering::Relaxed);
                    StoreError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the store is at capacity; retry shortly",
                    )
                }
            }))
            .load_shed()
            .concurrency_limit(config.max_concurrent_requests);
        let router = Router::new()
            .route("/", get(index))
            .route("/search", get(search_handler))
            .route("/pay", post(pay))
            .route("/checkout", post(checkout))
            .route("/admin/stats", get(stats_handler))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(axum::extract::DefaultBodyLimit::max(config.max_body))
            .with_state(app);
        let limits = ConnectionLimits {
            header_timeout: config.header_timeout,
            body_timeout: config.body_timeout,
            max_body: config.max_body,
            max_connections: config.max_connections,
        };
        let body_limits = BodyLimits {
            timeout: config.body_timeout,
            max: config.max_body,
        };
        // The limit wraps the whole router, once: `Router::layer` would give each route (and
        // the fallback) a limit of its own, 1,024 each. The body is read before it, so a
        // request takes a place only once the store can work on it.
        let service = ServiceBuilder::new()
            .layer(axum::middleware::from_fn_with_state(
                body_limits,
                edge::read_body,
            ))
            .layer(shedding)
            .service(router);
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(edge::serve(listener, service, limits, async move {
            let _ = stopped.await;
        }));
        Ok(ActorStore {
            addr,
            system,
            stop: Some(stop),
            server: Some(server),
        })
    }

    /// The address it serves on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Graceful shutdown: stop taking requests, close idle connections, let requests in
    /// progress finish (each bounded by the request timeout; all of them by 10 s), then stop
    /// the actors.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => eprintln!("the store's server failed: {error}"),
                Err(error) => eprintln!("the store's server task failed: {error}"),
            }
        }
        self.system.shutdown_async().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(percent_encode("red shoes&x=1"), "red%20shoes%26x%3D1");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(percent_encode("a-b_c.d~"), "a-b_c.d~");
    }

    #[test]
    fn settings_are_checked() {
        let good = ActorStoreConfig::new("http://127.0.0.1:1", "http://127.0.0.1:2");
        assert!(good.check().is_ok());
        let mut bad = good.clone();
        bad.search_url = "ftp://x".into();
        assert!(bad.check().unwrap_err().contains("search URL"));
        let mut bad = good.clone();
        bad.request_timeout = Duration::from_millis(10);
        assert!(bad.check().is_err());
        let mut bad = good.clone();
        bad.max_concurrent_requests = 0;
        assert!(bad.check().is_err());
        let mut bad = good;
        bad.workers = Some(0);
        assert!(bad.check().is_err());
    }

    #[test]
    fn call_errors_map_to_statuses() {
        assert_eq!(
            CallError::CircuitOpen("s").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            CallError::BulkheadFull("s").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            CallError::Timeout("s", Duration::from_secs(1)).status(),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            CallError::Status("s", 502).status(),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(CallError::Garbage("s").status(), StatusCode::BAD_GATEWAY);
    }
}
