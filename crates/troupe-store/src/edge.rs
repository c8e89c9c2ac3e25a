//! Where the troupe store meets its clients: connections, and the bound on each thing a client
//! can make the store wait for.
//!
//! A client that sends slowly, or never, must not hold what other clients need. Each wait has
//! its own bound, enforced by hyper or tokio rather than hoped for:
//!
//! | a client that... | holds | bound |
//! |---|---|---|
//! | connects and sends nothing, or a head byte by byte (slowloris) | a connection | the head must arrive within `header_timeout` (hyper's header-read timer), else the connection is closed |
//! | keeps a connection idle between requests | a connection | the same timer: hyper starts it when the connection waits for its next head |
//! | sends a body slowly | a connection | the whole body must arrive within `body_timeout` of its head, else 408 and the connection is closed |
//! | declares a body over `max_body` | nothing | 413 at once, from `Content-Length`, before a byte of the body is read |
//! | sends a body over `max_body` without declaring it (chunked) | a connection | 413 once `max_body` bytes have come |
//! | sends a head over [`MAX_HEAD`] | nothing | 431 and the connection closed (hyper) |
//! | opens connections by the thousand | memory, descriptors | at most `max_connections` served at once; the next wait in the listen backlog until one closes |
//!
//! The body is read here, under its deadline, before the request takes a place in the store's
//! concurrency limit: places are for requests the store is working on, and a slow client never
//! holds one. (nginx buffers request bodies before passing them upstream for the same reason.)
//! Bodies are at most `max_body` (16 KiB; the store's are under 100 bytes), which the handlers
//! read whole anyway.
//!
//! The store speaks HTTP/1.1, which its clients and the seed's load speak. (`axum::serve`
//! cannot be given hyper's header timeout, so the accept loop is here: a tokio listener,
//! hyper's HTTP/1 connection, hyper-util's graceful shutdown.)

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::Semaphore;
use tower::{Service, ServiceExt};

use crate::ErrorBody;

/// The largest request head (request line and headers), in bytes; beyond, hyper answers 431
/// and closes the connection. The store's heads are a few hundred bytes; 32 KiB is what nginx
/// allows at most (four 8 KiB buffers).
pub const MAX_HEAD: usize = 32 * 1024;

/// The most a connection's read buffer may grow to, in bytes. hyper's default, about 400 KiB,
/// would let each of thousands of connections hold that much; twice the largest head leaves
/// room for a head and the start of its body.
const MAX_READ_BUFFER: usize = 2 * MAX_HEAD;

/// How long [`serve`] lets requests in progress finish once asked to stop.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How the edge bounds each client.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A request's head must arrive within this, counted from when the connection begins to
    /// wait for it: for a new connection, from its accept; for a kept-alive one, from its
    /// previous answer (so it is also the idle keep-alive timeout).
    pub header_timeout: Duration,
    /// A request's whole body must arrive within this, counted from its head.
    pub body_timeout: Duration,
    /// The largest body, in bytes.
    pub max_body: usize,
    /// Connections served at once.
    pub max_connections: usize,
}

/// What [`read_body`] needs.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// See [`ConnectionLimits::body_timeout`].
    pub timeout: Duration,
    /// See [`ConnectionLimits::max_body`].
    pub max: usize,
}

/// An answer that ends the connection: sent when the body was not read to its end, so the
/// connection cannot carry another request (hyper closes it in any case; the header says so).
fn refuse(status: StatusCode, message: String) -> Response {
    let mut response = (status, Json(ErrorBody { error: message })).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Middleware: reads the request's body whole, within the body deadline and the size limit,
/// before the rest of the store sees the request; refuses a declared length over the limit
/// before reading anything.
///
/// Written here rather than taken from tower-http (`RequestBodyLimitLayer`,
/// `RequestBodyTimeoutLayer`): those answer in plain text, not the store's JSON errors, and
/// tower-http's body timeout restarts with every chunk, so a client sending a byte every few
/// seconds never meets it; one deadline for the whole body does.
pub async fn read_body(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    // hyper's body reports `Content-Length` as its exact size.
    let declared = body.size_hint().exact();
    if let Some(declared) = declared.filter(|&length| length > limits.max as u64) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the body is larger than {} bytes (declared as {declared})",
                limits.max
            ),
        );
    }
    let bytes = if declared == Some(0) {
        bytes::Bytes::new()
    } else {
        let reading = Limited::new(body, limits.max).collect();
        match tokio::time::timeout(limits.timeout, reading).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(error)) if error.is::<LengthLimitError>() => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {} bytes", limits.max),
                )
            }
            Ok(Err(error)) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the body could not be read: {error}"),
                )
            }
            Err(_) => {
                return refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the body did not arrive within {} ms of the request's head",
                        limits.timeout.as_millis()
                    ),
                )
            }
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Serves `service` on `listener` within `limits` until `stop` resolves, then stops accepting,
/// closes idle connections and lets requests in progress finish (up to 10 s).
pub async fn serve<S>(
    listener: tokio::net::TcpListener,
    service: S,
    limits: ConnectionLimits,
    stop: impl std::future::Future<Output = ()> + Send,
) -> std::io::Result<()>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_READ_BUFFER);
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        // The place is taken before accepting: past the cap, connections wait in the kernel's
        // backlog, costing the store nothing.
        let place = tokio::select! {
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                // Only a closed semaphore refuses, and nothing closes this one.
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    if !is_connection_error(&error) {
                        // Out of descriptors, most likely: wait for some to close rather than
                        // spin.
                        eprintln!("the store cannot accept a connection: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let service = service.clone();
        let per_request = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            service.clone().oneshot(request.map(Body::new))
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), per_request));
        tokio::spawn(async move {
            // A client that goes away or times out ends its connection; nothing to report.
            let _ = connection.await;
            drop(place);
        });
    }
    drop(listener);
    if tokio::time::timeout(STOP_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!("requests still in progress after {STOP_GRACE:?}; stopping anyway");
    }
    Ok(())
}

/// Errors of one connection, not of the listener: the next accept may well succeed.
fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
