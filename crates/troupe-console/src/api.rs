//! The console's routes: the page and the JSON endpoints it polls, each reading the system's
//! observation API once and bounded in what it lists.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use axum::extract::{RawQuery, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use troupe::{ActorId, ActorInfo, HandlerStats, ObserveError, PoolMetrics, System, Wait};

/// The page: HTML, CSS and script in one file, nothing fetched from elsewhere.
const PAGE: &str = include_str!("page.html");

/// The most actors one `/api/actors` page holds (the runtime's own bound on a page).
pub const MAX_PAGE: usize = 10_000;
/// Actors in a page when `limit` is not given.
pub const DEFAULT_PAGE: usize = 1_000;
/// The most handler rows `/api/handlers` lists.
pub const MAX_TOP: usize = 1_000;
/// Handler rows listed when `top` is not given.
pub const DEFAULT_TOP: usize = 20;
/// The most waits `/api/waits` lists (the longest first); it counts them all.
pub const MAX_WAITS: usize = 1_000;
/// The most cycles of waits now that `/api/waits` lists.
const MAX_CYCLES: usize = 100;

pub(crate) fn router(system: System) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/api/overview", get(overview))
        .route("/api/actors", get(actors))
        .route("/api/handlers", get(handlers))
        .route("/api/waits", get(waits))
        .fallback(not_found)
        .layer(middleware::from_fn(loopback_hosts_only))
        .with_state(system)
}

// ---------------------------------------------------------------------------------------------
// Responses

/// A plain-text answer of one line.
fn line(status: StatusCode, message: &str) -> Response {
    let mut text = message.replace(['\r', '\n'], " ");
    text.push('\n');
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

fn bad_request(message: String) -> Response {
    line(StatusCode::BAD_REQUEST, &message)
}

fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        Err(error) => line(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot write the answer: {error}"),
        ),
    }
}

fn observe_failed(error: ObserveError) -> Response {
    match error {
        ObserveError::PageSize { .. } => bad_request(error.to_string()),
        _ => line(StatusCode::SERVICE_UNAVAILABLE, &error.to_string()),
    }
}

/// Refuses a request whose `Host` is not a loopback name: a page of another site, reaching
/// this port through a name of its own that resolves to this machine, gets nothing.
async fn loopback_hosts_only(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().host());
    if host.is_some_and(is_loopback_host) {
        next.run(request).await
    } else {
        line(
            StatusCode::FORBIDDEN,
            "the console answers requests to localhost, 127.0.0.1 or [::1] only",
        )
    }
}

/// `localhost`, a loopback IP, either with a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, _)) => name,
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

async fn not_found() -> Response {
    line(
        StatusCode::NOT_FOUND,
        "no such page: the console serves /, /api/overview, /api/actors, /api/handlers and /api/waits",
    )
}

// ---------------------------------------------------------------------------------------------
// Query strings

/// The parameters of a query string, each at most once and each one of `allowed`. Values are
/// taken as written (ids and numbers need no decoding; anything encoded is refused by the
/// parameter's own check).
fn params<'q>(
    query: Option<&'q str>,
    allowed: &[&'static str],
) -> Result<BTreeMap<&'static str, &'q str>, String> {
    let mut found = BTreeMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let Some(&known) = allowed.iter().find(|a| **a == key) else {
            return Err(if allowed.is_empty() {
                format!(
                    "unknown parameter `{}`: this endpoint takes none",
                    quoted(key)
                )
            } else {
                format!(
                    "unknown parameter `{}`: this endpoint takes {}",
                    quoted(key),
                    allowed.join(", ")
                )
            });
        };
        if found.insert(known, value).is_some() {
            return Err(format!("`{known}` is given twice"));
        }
    }
    Ok(found)
}

/// User input as an error message quotes it: at most 40 characters.
fn quoted(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(40).collect();
    if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    }
}

/// A whole number from `min` to `max`, `default` if absent.
fn bounded(name: &str, value: Option<&str>, default: usize, max: usize) -> Result<usize, String> {
    let Some(value) = value else {
        return Ok(default);
    };
    match value.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{name}` must be a whole number from 1 to {max}, not `{}`",
            quoted(value)
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Names

/// A type's name with every path shortened to its last segment
/// (`my_app::Cache<alloc::string::String>` -> `Cache<String>`).
pub(crate) fn short_type(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let last = token.rsplit("::").next().unwrap_or("");
        out.push_str(last);
        token.clear();
    };
    for c in name.chars() {
        if c.is_alphanumeric() || matches!(c, '_' | ':' | '{' | '}') {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------
// The page

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing but the page itself and its own endpoints.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src data:",
            ),
        ],
        PAGE,
    )
        .into_response()
}

// ---------------------------------------------------------------------------------------------
// /api/overview

#[derive(Serialize)]
struct Overview {
    live_actors: usize,
    observed_actors: usize,
    dead_letters: u64,
    asks_timed_out: u64,
    escalations: u64,
    max_page: usize,
    pools: Vec<Pool>,
}

#[derive(Serialize)]
struct Pool {
    name: String,
    started: bool,
    workers: usize,
    turns: u64,
    steals: u64,
    parks: u64,
    injected_waiting: usize,
    width: usize,
}

impl From<PoolMetrics> for Pool {
    fn from(p: PoolMetrics) -> Self {
        Pool {
            name: p.name,
            started: p.started,
            workers: p.workers,
            turns: p.turns,
            steals: p.steals,
            parks: p.parks,
            injected_waiting: p.injected_waiting,
            width: p.width,
        }
    }
}

async fn overview(State(system): State<System>, RawQuery(query): RawQuery) -> Response {
    if let Err(message) = params(query.as_deref(), &[]) {
        return bad_request(message);
    }
    let read = || -> Result<Overview, ObserveError> {
        Ok(Overview {
            live_actors: system.live_actors(),
            observed_actors: system.observed_actors()?,
            dead_letters: system.dead_letters()?,
            asks_timed_out: system.asks_timed_out()?,
            escalations: system.escalations(),
            max_page: MAX_PAGE,
            pools: system.pool_metrics().into_iter().map(Pool::from).collect(),
        })
    };
    match read() {
        Ok(overview) => json(&overview),
        Err(error) => observe_failed(error),
    }
}

// ---------------------------------------------------------------------------------------------
// /api/actors

#[derive(Serialize)]
struct Actor {
    id: u64,
    parent: Option<u64>,
    type_name: &'static str,
    short: String,
    names: Vec<String>,
    pool: String,
    state: &'static str,
    mailbox: usize,
    processed: u64,
    restarts: u64,
    failures: u64,
    asks_timed_out: u64,
    handler_ns: u64,
}

impl From<ActorInfo> for Actor {
    fn from(a: ActorInfo) -> Self {
        Actor {
            id: a.id.as_u64(),
            parent: a.parent.map(ActorId::as_u64),
            type_name: a.type_name,
            short: short_type(a.type_name),
            names: a.names,
            pool: a.pool,
            state: a.state.as_str(),
            mailbox: a.mailbox_len,
            processed: a.processed,
            restarts: a.restarts,
            failures: a.failures,
            asks_timed_out: a.asks_timed_out,
            handler_ns: nanos(a.handler_time),
        }
    }
}

#[derive(Serialize)]
struct Page {
    actors: Vec<Actor>,
    next: Option<u64>,
}

async fn actors(State(system): State<System>, RawQuery(query): RawQuery) -> Response {
    let parsed = params(query.as_deref(), &["after", "limit"]).and_then(|p| {
        let limit = bounded("limit", p.get("limit").copied(), DEFAULT_PAGE, MAX_PAGE)?;
        let after = match p.get("after") {
            None => None,
            Some(text) => Some(text.parse::<ActorId>().map_err(|_| {
                format!(
                    "`after` must be an actor id (a whole number, as `next` gives it), not `{}`",
                    quoted(text)
                )
            })?),
        };
        Ok((after, limit))
    });
    let (after, limit) = match parsed {
        Ok(parsed) => parsed,
        Err(message) => return bad_request(message),
    };
    match system.actors(after, limit) {
        Ok(page) => json(&Page {
            actors: page.actors.into_iter().map(Actor::from).collect(),
            next: page.next.map(ActorId::as_u64),
        }),
        Err(error) => observe_failed(error),
    }
}

// ---------------------------------------------------------------------------------------------
// /api/handlers

#[derive(Serialize)]
struct Handlers {
    /// Rows in all (the listing holds the first `top`).
    rows: usize,
    /// Messages handled, over all rows.
    count: u64,
    /// Time in handlers, over all rows.
    total_ns: u64,
    handlers: Vec<HandlerRow>,
}

#[derive(Serialize)]
struct HandlerRow {
    actor_type: &'static str,
    actor_short: String,
    message: &'static str,
    message_short: String,
    count: u64,
    total_ns: u64,
    max_ns: u64,
    p50_ns: u64,
    p99_ns: u64,
}

impl From<HandlerStats> for HandlerRow {
    fn from(h: HandlerStats) -> Self {
        HandlerRow {
            actor_type: h.actor_type,
            actor_short: short_type(h.actor_type),
            message: h.message,
            message_short: short_type(h.message),
            count: h.count,
            total_ns: nanos(h.total),
            max_ns: nanos(h.max),
            p50_ns: nanos(h.p50),
            p99_ns: nanos(h.p99),
        }
    }
}

async fn handlers(State(system): State<System>, RawQuery(query): RawQuery) -> Response {
    let top = match params(query.as_deref(), &["top"])
        .and_then(|p| bounded("top", p.get("top").copied(), DEFAULT_TOP, MAX_TOP))
    {
        Ok(top) => top,
        Err(message) => return bad_request(message),
    };
    match system.handler_stats() {
        Ok(stats) => json(&Handlers {
            rows: stats.len(),
            count: stats.iter().map(|h| h.count).sum(),
            total_ns: stats
                .iter()
                .fold(0u64, |sum, h| sum.saturating_add(nanos(h.total))),
            handlers: stats.into_iter().take(top).map(HandlerRow::from).collect(),
        }),
        Err(error) => observe_failed(error),
    }
}

// ---------------------------------------------------------------------------------------------
// /api/waits

#[derive(Serialize)]
struct Waits {
    /// Waits now, in all (the listing holds the longest [`MAX_WAITS`]).
    total: usize,
    waits: Vec<WaitRow>,
    /// Cycles of waits now, each from its lowest id (at most [`MAX_CYCLES`]).
    cycles: Vec<Vec<u64>>,
    /// Cycles seen as they formed, oldest first (the runtime keeps the latest 64).
    cycles_seen: Vec<Vec<u64>>,
    /// Every actor the waits and cycles name, if still live.
    actors: BTreeMap<u64, Who>,
}

#[derive(Serialize)]
struct WaitRow {
    asker: u64,
    target: u64,
    message: &'static str,
    message_short: String,
    waited_ms: f64,
}

#[derive(Serialize)]
struct Who {
    short: String,
    names: Vec<String>,
    state: &'static str,
}

async fn waits(State(system): State<System>, RawQuery(query): RawQuery) -> Response {
    if let Err(message) = params(query.as_deref(), &[]) {
        return bad_request(message);
    }
    let read = || -> Result<Waits, ObserveError> {
        let mut waits: Vec<Wait> = system.waits()?;
        let total = waits.len();
        waits.sort_by_key(|w| std::cmp::Reverse(w.waited));
        waits.truncate(MAX_WAITS);
        let mut cycles = system.wait_cycles()?;
        cycles.truncate(MAX_CYCLES);
        let seen = system.wait_cycles_seen()?;
        let mut actors = BTreeMap::new();
        let named = waits
            .iter()
            .flat_map(|w| [w.asker, w.target])
            .chain(cycles.iter().chain(seen.iter()).flatten().copied());
        for id in named {
            if actors.contains_key(&id.as_u64()) {
                continue;
            }
            if let Some(info) = system.actor(id)? {
                actors.insert(
                    id.as_u64(),
                    Who {
                        short: short_type(info.type_name),
                        names: info.names,
                        state: info.state.as_str(),
                    },
                );
            }
        }
        let ids = |cycle: Vec<ActorId>| cycle.into_iter().map(ActorId::as_u64).collect();
        Ok(Waits {
            total,
            waits: waits
                .into_iter()
                .map(|w| WaitRow {
                    asker: w.asker.as_u64(),
                    target: w.target.as_u64(),
                    message: w.message,
                    message_short: short_type(w.message),
                    waited_ms: w.waited.as_secs_f64() * 1e3,
                })
                .collect(),
            cycles: cycles.into_iter().map(ids).collect(),
            cycles_seen: seen.into_iter().map(ids).collect(),
            actors,
        })
    };
    match read() {
        Ok(waits) => json(&waits),
        Err(error) => observe_failed(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type("my_app::Worker"), "Worker");
        assert_eq!(
            short_type("my_app::Cache<alloc::string::String, u32>"),
            "Cache<String, u32>"
        );
        assert_eq!(short_type("Plain"), "Plain");
        assert_eq!(short_type("&dyn core::any::Any"), "&dyn Any");
        assert_eq!(short_type("a::f::{{closure}}"), "{{closure}}");
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST:80",
            "127.0.0.1",
            "127.0.0.1:3000",
            "[::1]:9",
            "[::1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "example.com",
            "evil.localhost.example:80",
            "10.0.0.1:80",
            "[::2]:1",
            "[::1",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn query_parameters() {
        let p = params(Some("after=5&limit=10"), &["after", "limit"]).unwrap();
        assert_eq!(p.get("after"), Some(&"5"));
        assert_eq!(p.get("limit"), Some(&"10"));
        assert!(params(None, &["after"]).unwrap().is_empty());
        assert!(params(Some("&&"), &[]).unwrap().is_empty());
        let twice = params(Some("limit=1&limit=2"), &["limit"]).unwrap_err();
        assert_eq!(twice, "`limit` is given twice");
        let unknown = params(Some("x=1"), &["after", "limit"]).unwrap_err();
        assert_eq!(
            unknown,
            "unknown parameter `x`: this endpoint takes after, limit"
        );
        assert_eq!(bounded("limit", None, 7, 10), Ok(7));
        assert_eq!(bounded("limit", Some("10"), 7, 10), Ok(10));
        for bad in ["0", "11", "abc", "", "-1", "1.5"] {
            let message = bounded("limit", Some(bad), 7, 10).unwrap_err();
            assert!(
                message.starts_with("`limit` must be a whole number from 1 to 10"),
                "{message}"
            );
        }
        let long = "x".repeat(100);
        let message = bounded("top", Some(&long), 1, 2).unwrap_err();
        assert!(message.len() < 120, "{message}");
    }
}
