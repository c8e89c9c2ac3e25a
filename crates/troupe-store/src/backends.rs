//! The search and payment services the stores call: two HTTP services on loopback (axum),
//! each answering JSON after [`BACKEND_LATENCY`](crate::BACKEND_LATENCY) (20 ms).
//!
//! The search service has a mode, switched by its admin endpoint or at start:
//! - `healthy`: answers after 20 ms;
//! - `hang`: each call that arrives waits `hang` (30 s, the seed's), then answers 502;
//! - `garbage`: answers 200 with a body that is not JSON (to test the stores' handling).
//!
//! ```text
//! GET  /search?q=shoes          (search)   → {"query":"shoes","results":[...]}
//! POST /pay {"item":7,"amount_cents":1999} (payment) → {"payment_id":1,...,"status":"approved"}
//! POST /admin/search/hang | /admin/search/healthy | /admin/search/garbage   (search)
//! GET  /admin/search                       (search)   → {"mode":"hang","calls":123}
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::{ErrorBody, Payment, PaymentReceipt, Product, SearchResults};

/// What the search service does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Answers after the usual latency.
    Healthy,
    /// Waits the hang time, then answers 502.
    Hang,
    /// Answers 200 with a body that is not JSON.
    Garbage,
}

impl SearchMode {
    pub(crate) fn from_u8(value: u8) -> Self {
        match value {
            1 => SearchMode::Hang,
            2 => SearchMode::Garbage,
            _ => SearchMode::Healthy,
        }
    }

    pub(crate) fn as_u8(self) -> u8 {
        match self {
            SearchMode::Healthy => 0,
            SearchMode::Hang => 1,
            SearchMode::Garbage => 2,
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "healthy" => Some(SearchMode::Healthy),
            "hang" => Some(SearchMode::Hang),
            "garbage" => Some(SearchMode::Garbage),
            _ => None,
        }
    }
}

/// The backends' settings.
#[derive(Debug, Clone, Copy)]
pub struct BackendsConfig {
    /// How long a healthy call takes (default 20 ms, the seed's).
    pub latency: Duration,
    /// How long a call waits while search hangs, before its 502 (default 30 s, the seed's).
    pub hang: Duration,
    /// The search service's mode at start.
    pub search_mode: SearchMode,
}

impl Default for BackendsConfig {
    fn default() -> Self {
        Self {
            latency: crate::BACKEND_LATENCY,
            hang: Duration::from_secs(30),
            search_mode: SearchMode::Healthy,
        }
    }
}

struct Shared {
    config: BackendsConfig,
    mode: AtomicU8,
    search_calls: AtomicU64,
    payments: AtomicU64,
}

/// The running backends.
pub struct Backends {
    search: SocketAddr,
    payment: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    servers: Vec<tokio::task::JoinHandle<()>>,
}

impl Backends {
    /// Serves search on `search` and payments on `payment` (listeners already bound), on the
    /// current tokio runtime.
    pub async fn start(
        search: tokio::net::TcpListener,
        payment: tokio::net::TcpListener,
        config: BackendsConfig,
    ) -> std::io::Result<Backends> {
        let shared = Arc::new(Shared {
            config,
            mode: AtomicU8::new(config.search_mode.as_u8()),
            search_calls: AtomicU64::new(0),
            payments: AtomicU64::new(0),
        });
        let search_addr = search.local_addr()?;
        let payment_addr = payment.local_addr()?;
        let search_app = Router::new()
            .route("/search", get(search_handler))
            .route("/admin/search", get(admin_state))
            .route("/admin/search/{mode}", post(admin_switch))
            .fallback(not_found)
            .with_state(shared.clone());
        let payment_app = Router::new()
            .route("/pay", post(pay_handler))
            .fallback(not_found)
            .layer(axum::extract::DefaultBodyLimit::max(crate::MAX_BODY))
            .with_state(shared.clone());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut servers = Vec::new();
        for (listener, app) in [(search, search_app), (payment, payment_app)] {
            let mut stopped = stopped.clone();
            servers.push(tokio::spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                if let Err(error) = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
                {
                    eprintln!("a backend stopped serving: {error}");
                }
            }));
        }
        Ok(Backends {
            search: search_addr,
            payment: payment_addr,
            shared,
            stop: Some(stop),
            servers,
        })
    }

    /// The search service's address.
    pub fn search_addr(&self) -> SocketAddr {
        self.search
    }

    /// The payment service's address.
    pub fn payment_addr(&self) -> SocketAddr {
        self.payment
    }

    /// Switches the search service's mode (as its admin endpoint does).
    pub fn set_search_mode(&self, mode: SearchMode) {
        self.shared.mode.store(mode.as_u8(), Ordering::SeqCst);
    }

    /// Search calls received so far.
    pub fn search_calls(&self) -> u64 {
        self.shared.search_calls.load(Ordering::Relaxed)
    }

    /// Stops serving: new connections are refused, calls in progress (hanging ones too) are
    /// abandoned.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        for server in self.servers.drain(..) {
            server.abort();
            let _ = server.await;
        }
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such endpoint")
}

#[derive(Deserialize)]
struct SearchQuery {
    q: Option<String>,
}

async fn search_handler(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<SearchQuery>,
) -> Response {
    shared.search_calls.fetch_add(1, Ordering::Relaxed);
    // The mode when the call arrives decides its fate.
    let mode = SearchMode::from_u8(shared.mode.load(Ordering::SeqCst));
    let Some(q) = query.q.filter(|q| crate::check_query(q).is_ok()) else {
        return error(StatusCode::BAD_REQUEST, "`q` must be 1 to 200 characters");
    };
    match mode {
        SearchMode::Healthy => {
            tokio::time::sleep(shared.config.latency).await;
            Json(results_for(&q)).into_response()
        }
        SearchMode::Hang => {
            tokio::time::sleep(shared.config.hang).await;
            error(StatusCode::BAD_GATEWAY, "search is down")
        }
        SearchMode::Garbage => {
            tokio::time::sleep(shared.config.latency).await;
            (StatusCode::OK, "<html>definitely not json").into_response()
        }
    }
}

/// Three products whose ids follow from the query, so that answers can be checked.
pub fn results_for(query: &str) -> SearchResults {
    let seed = query
        .bytes()
        .fold(17u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    SearchResults {
        query: query.to_owned(),
        results: (0..3)
            .map(|i| {
                let id = seed % 10_000 + i;
                Product {
                    id,
                    name: format!("{query} #{i}"),
                    price_cents: 100 + id % 5_000,
                }
            })
            .collect(),
    }
}

async fn pay_handler(
    State(shared): State<Arc<Shared>>,
    body: Result<Json<Payment>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(payment) = match body {
        Ok(payment) => payment,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    if let Err(why) = crate::check_amount(payment.amount_cents) {
        return error(StatusCode::BAD_REQUEST, why);
    }
    tokio::time::sleep(shared.config.latency).await;
    let payment_id = shared.payments.fetch_add(1, Ordering::Relaxed) + 1;
    Json(PaymentReceipt {
        payment_id,
        item: payment.item,
        amount_cents: payment.amount_cents,
        status: "approved".to_owned(),
    })
    .into_response()
}

async fn admin_state(State(shared): State<Arc<Shared>>) -> Response {
    Json(serde_json::json!({
        "mode": SearchMode::from_u8(shared.mode.load(Ordering::SeqCst)),
        "calls": shared.search_calls.load(Ordering::Relaxed),
    }))
    .into_response()
}

async fn admin_switch(State(shared): State<Arc<Shared>>, Path(mode): Path<String>) -> Response {
    match SearchMode::parse(&mode) {
        Some(mode) => {
            shared.mode.store(mode.as_u8(), Ordering::SeqCst);
            Json(serde_json::json!({ "mode": mode })).into_response()
        }
        None => error(
            StatusCode::BAD_REQUEST,
            format!("unknown mode `{mode}`: use healthy, hang or garbage"),
        ),
    }
}
