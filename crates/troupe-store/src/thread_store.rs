//! The thread-per-request baseline: the store as the seed's Tomcat ran it.
//!
//! A synchronous HTTP server ([`tiny_http`]) hands each request to one of a fixed pool of
//! worker threads, 200 by default (Tomcat's `maxThreads`). The worker handles that request
//! from start to finish, one at a time: it reads the body, calls the backends with a blocking
//! HTTP client ([`ureq`]) and writes the answer, then takes the next request.
//!
//! - **The workers are the limit.** tiny_http reads connections on its own internal threads
//!   and queues the parsed requests; the `threads` workers take them off that queue, as
//!   Tomcat's executor threads take them from its acceptor. When every worker is blocked,
//!   requests wait in the queue, without bound and without timeout.
//! - **No timeouts**, as the seed's store had none: the client waits for a backend as long as
//!   the backend takes. When search hangs, every worker that calls it hangs with it, and once
//!   all of them do, the store stops answering everything, the index page included.
//! - **Keep-alive** both ways: tiny_http keeps client connections open, and one
//!   [`ureq::Agent`] shared by all workers pools backend connections, with room for an idle
//!   connection per worker to each backend so that a loaded store does not reconnect on every
//!   call.
//!
//! The routes and answers are those of the crate's other store (see the [crate] docs); every
//! error is an [`ErrorBody`] with a 4xx or 5xx status, and backend failures are 502.
//!
//! [`ThreadStore::stop`] stops taking requests, joins the idle workers and leaves the workers
//! blocked in a backend call to finish on their own. Connections that clients keep open to a
//! stopped store are not closed (tiny_http 0.12 has no way to do so); their next requests are
//! never answered.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

use crate::{
    check_amount, check_query, index_page, Checkout, CheckoutReceipt, ErrorBody, Payment,
    PaymentReceipt, SearchResults,
};

/// The store's name on its index page.
const STORE_NAME: &str = "thread-per-request";

/// How long an idle worker waits for a request before it looks at the stop flag again.
const RECV_POLL: Duration = Duration::from_millis(100);

/// How long [`ThreadStore::stop`] waits for a worker that is neither finished nor busy.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The largest backend answer read (bytes); the real ones are a few hundred.
const MAX_BACKEND_ANSWER: u64 = 1024 * 1024;

/// The largest unread request body left for tiny_http to discard (bytes).
///
/// When a request is dropped with its body unread, tiny_http 0.12 discards the rest of the
/// body, but first allocates a buffer of the size the `Content-Length` header declares: a
/// request declaring a body of 100 TB would abort the whole process (tiny-http issue #252).
/// Requests that declare more than this and whose body was not read (those answered 413, or
/// a GET with a body) are answered, and their connection is then abandoned rather than
/// drained.
const MAX_DRAIN: usize = 64 * 1024 * 1024;

/// Settings of the thread-per-request store.
#[derive(Debug, Clone)]
pub struct ThreadStoreConfig {
    /// Request-handling threads (Tomcat's maxThreads default: 200).
    pub threads: usize,
    /// Base URL of the search service, e.g. "http://127.0.0.1:4001".
    pub search_url: String,
    /// Base URL of the payment service.
    pub payment_url: String,
    /// Largest request body accepted (bytes).
    pub max_body: usize,
}

impl ThreadStoreConfig {
    /// The seed's settings: 200 threads, bodies up to [`MAX_BODY`](crate::MAX_BODY).
    pub fn new(search_url: impl Into<String>, payment_url: impl Into<String>) -> Self {
        ThreadStoreConfig {
            threads: 200,
            search_url: search_url.into(),
            payment_url: payment_url.into(),
            max_body: crate::MAX_BODY,
        }
    }

    /// Checks the settings; the error says what is wrong, in one line.
    fn validate(&self) -> Result<(), String> {
        if !(1..=10_000).contains(&self.threads) {
            return Err(format!(
                "threads must be between 1 and 10000, not {}",
                self.threads
            ));
        }
        if self.max_body == 0 {
            return Err("max_body must be at least 1 byte".to_owned());
        }
        for (which, url) in [("search", &self.search_url), ("payment", &self.payment_url)] {
            if !url.starts_with("http://") {
                return Err(format!(
                    "the {which} URL must start with http://, not {url:?}"
                ));
            }
        }
        Ok(())
    }
}

/// A running thread-per-request store.
pub struct ThreadStore {
    addr: SocketAddr,
    /// The only lasting strong reference: workers hold weak ones and upgrade them only while
    /// they wait for a request, so that dropping this closes the listener even when workers
    /// are still blocked in backend calls.
    server: Option<Arc<Server>>,
    stopping: Arc<AtomicBool>,
    workers: Vec<Worker>,
}

/// One request-handling thread.
struct Worker {
    handle: JoinHandle<()>,
    /// Set while it handles a request (and so may be blocked in a backend call).
    busy: Arc<AtomicBool>,
}

/// What every worker shares.
struct Shared {
    agent: ureq::Agent,
    search_url: String,
    payment_url: String,
    max_body: usize,
}

impl ThreadStore {
    /// Starts serving on `listener` (already bound, e.g. to 127.0.0.1:0).
    pub fn start(listener: TcpListener, config: ThreadStoreConfig) -> io::Result<ThreadStore> {
        config
            .validate()
            .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        let addr = listener.local_addr()?;
        // tiny_http's accept thread blocks in accept(); a non-blocking listener would make its
        // first accept fail and end it.
        listener.set_nonblocking(false)?;
        let server = Server::from_listener(listener, None)
            .map(Arc::new)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let shared = Arc::new(Shared {
            agent: backend_agent(config.threads),
            search_url: config.search_url.trim_end_matches('/').to_owned(),
            payment_url: config.payment_url.trim_end_matches('/').to_owned(),
            max_body: config.max_body,
        });
        let stopping = Arc::new(AtomicBool::new(false));
        let mut store = ThreadStore {
            addr,
            server: Some(Arc::clone(&server)),
            stopping: Arc::clone(&stopping),
            workers: Vec::with_capacity(config.threads),
        };
        for i in 0..config.threads {
            let busy = Arc::new(AtomicBool::new(false));
            let worker = {
                let server = Arc::downgrade(&server);
                let shared = Arc::clone(&shared);
                let stopping = Arc::clone(&stopping);
                let busy = Arc::clone(&busy);
                move || work(&server, &shared, &stopping, &busy)
            };
            // On failure, dropping `store` stops the workers already started.
            let handle = thread::Builder::new()
                .name(format!("store-worker-{i}"))
                .spawn(worker)?;
            store.workers.push(Worker { handle, busy });
        }
        Ok(store)
    }

    /// The address it serves on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops taking requests and joins the threads that are idle; threads blocked in a backend
    /// call are left to finish on their own (detached), so this never hangs.
    ///
    /// Requests already queued but not yet taken by a worker are answered 503. The listener is
    /// closed when this returns (tiny_http's accept thread ends a moment later).
    pub fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + STOP_GRACE;
        let mut waiting = std::mem::take(&mut self.workers);
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for worker in waiting {
                if worker.handle.is_finished() {
                    // A worker that panicked outside a request has nothing left to report.
                    let _ = worker.handle.join();
                } else if worker.busy.load(Ordering::SeqCst) || Instant::now() >= deadline {
                    // Busy with a request, perhaps blocked in a backend call that never ends:
                    // dropping the handle detaches it; it exits after this request.
                } else {
                    // Idle: it sees the flag within one poll.
                    still.push(worker);
                }
            }
            waiting = still;
            if !waiting.is_empty() {
                thread::sleep(Duration::from_millis(5));
            }
        }
        let Some(server) = self.server.take() else {
            return;
        };
        let mut queued = Vec::new();
        while let Ok(Some(request)) = server.try_recv() {
            queued.push(request);
        }
        // Dropping the last strong reference closes the listener.
        drop(server);
        if !queued.is_empty() {
            // Answered on a thread of their own: a client may be slow to take its answer.
            let _ = thread::Builder::new()
                .name("store-stop-drain".to_owned())
                .spawn(move || {
                    for request in queued {
                        let unread = request.body_length().unwrap_or(0);
                        send(request, fail(503, "the store is stopping"), unread);
                    }
                });
        }
    }
}

impl Drop for ThreadStore {
    /// Dropped without [`ThreadStore::stop`]: the workers stop after their current request,
    /// without being joined.
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
    }
}

impl fmt::Debug for ThreadStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadStore")
            .field("addr", &self.addr)
            .field("workers", &self.workers.len())
            .field("stopping", &self.stopping.load(Ordering::Relaxed))
            .finish()
    }
}

/// The blocking client all workers share.
fn backend_agent(threads: usize) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Statuses are answers: 5xx bodies and statuses are read and judged here.
        .http_status_as_error(false)
        // No timeouts at all, as the seed's store had none. These are ureq 3's defaults
        // already; they are spelled out so that nobody has to wonder.
        .timeout_global(None)
        .timeout_per_call(None)
        .timeout_resolve(None)
        .timeout_connect(None)
        .timeout_send_request(None)
        .timeout_send_body(None)
        .timeout_recv_response(None)
        .timeout_recv_body(None)
        .timeout_per_read(None)
        .timeout_per_write(None)
        // Loopback backends: never through a proxy picked up from the environment.
        .proxy(None)
        // Keep-alive: an idle connection per worker to each of the two backends (ureq's
        // default, 3 per host, would make a busy store reconnect on most calls).
        .max_idle_connections_per_host(threads)
        .max_idle_connections(threads.saturating_mul(2))
        .build()
        .into()
}

/// A worker's life: take a request, handle it, repeat, until the store stops.
fn work(server: &Weak<Server>, shared: &Shared, stopping: &AtomicBool, busy: &AtomicBool) {
    while !stopping.load(Ordering::SeqCst) {
        // The strong reference lives only while waiting, never while handling.
        let received = match server.upgrade() {
            Some(server) => server.recv_timeout(RECV_POLL),
            None => break,
        };
        // Nothing came (`Ok(None)`), or tiny_http's accept thread failed (`Err`; it then
        // accepts no more): either way, look at the stop flag and wait again.
        if let Ok(Some(request)) = received {
            busy.store(true, Ordering::SeqCst);
            // Nothing in `serve` should panic; if it did, the thread carries on, as a servlet
            // container's does (the request, dropped while unwinding, is answered 500 by
            // tiny_http).
            let _ = panic::catch_unwind(AssertUnwindSafe(|| serve(request, shared)));
            busy.store(false, Ordering::SeqCst);
        }
    }
}

/// An answer: a status and a JSON body.
#[derive(Debug)]
struct Reply {
    status: u16,
    body: String,
    /// The `Allow` header of a 405.
    allow: Option<&'static str>,
}

/// How much of a request's body was read.
#[derive(Debug, Default)]
struct BodyRead {
    bytes: usize,
    /// Read to its end.
    whole: bool,
}

/// Handles one request, from reading it to answering it.
fn serve(mut request: Request, shared: &Shared) {
    let mut read = BodyRead::default();
    let reply = route(&mut request, shared, &mut read).unwrap_or_else(|failure| failure);
    let unread = if read.whole {
        0
    } else {
        request
            .body_length()
            .map_or(0, |declared| declared.saturating_sub(read.bytes))
    };
    send(request, reply, unread);
}

fn route(request: &mut Request, shared: &Shared, read: &mut BodyRead) -> Result<Reply, Reply> {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let method = request.method().clone();
    // HEAD is GET without the body, as servlets and axum have it.
    let get = matches!(method, Method::Get | Method::Head);
    let post = method == Method::Post;
    match path {
        "/" if get => Ok(json_reply(200, &index_page(STORE_NAME))),
        "/search" if get => {
            let q = query_param(query, "q").ok_or_else(|| fail(400, "the query `q` is missing"))?;
            check_query(&q).map_err(|why| fail(400, why))?;
            Ok(json_reply(200, &search(shared, &q)?))
        }
        "/pay" if post => {
            let payment: Payment = read_json(request, shared.max_body, read, "payment")?;
            check_amount(payment.amount_cents).map_err(|why| fail(400, why))?;
            Ok(json_reply(200, &pay(shared, &payment)?))
        }
        "/checkout" if post => {
            let order: Checkout = read_json(request, shared.max_body, read, "checkout")?;
            check_query(&order.query).map_err(|why| fail(400, why))?;
            check_amount(order.amount_cents).map_err(|why| fail(400, why))?;
            let found = search(shared, &order.query)?;
            let Some(product) = found.results.into_iter().next() else {
                return Err(fail(404, format!("nothing matches {:?}", order.query)));
            };
            let payment = pay(
                shared,
                &Payment {
                    item: product.id,
                    amount_cents: order.amount_cents,
                },
            )?;
            Ok(json_reply(200, &CheckoutReceipt { product, payment }))
        }
        "/" | "/search" => Err(not_allowed(path, &method, "GET, HEAD")),
        "/pay" | "/checkout" => Err(not_allowed(path, &method, "POST")),
        _ => Err(fail(404, format!("no such endpoint: {path}"))),
    }
}

/// Calls the search service.
fn search(shared: &Shared, query: &str) -> Result<SearchResults, Reply> {
    let url = format!("{}/search?q={}", shared.search_url, percent_encode(query));
    let answer = shared.agent.get(&url).call();
    backend_answer(answer, "search", "search results")
}

/// Calls the payment service.
fn pay(shared: &Shared, payment: &Payment) -> Result<PaymentReceipt, Reply> {
    let url = format!("{}/pay", shared.payment_url);
    let answer = shared.agent.post(&url).send_json(payment);
    backend_answer(answer, "payment", "a payment receipt")
}

/// Judges a backend's answer: a 2xx with a body that parses as `T`, or a 502 saying why not.
fn backend_answer<T: DeserializeOwned>(
    answer: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    service: &str,
    what: &str,
) -> Result<T, Reply> {
    let mut response = answer.map_err(|e| {
        fail(
            502,
            format!("the {service} service could not be called: {e}"),
        )
    })?;
    let status = response.status();
    // Read whatever the status, so that the connection goes back to the pool.
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_BACKEND_ANSWER)
        .read_to_vec();
    if !status.is_success() {
        return Err(fail(
            502,
            format!("the {service} service answered {}", status.as_u16()),
        ));
    }
    let body = body.map_err(|e| {
        fail(
            502,
            format!("the {service} service's answer could not be read: {e}"),
        )
    })?;
    serde_json::from_slice(&body).map_err(|e| {
        fail(
            502,
            format!("the {service} service answered something that is not {what}: {e}"),
        )
    })
}

/// Reads the request's body as JSON of type `T` (`what` names it in the error).
fn read_json<T: DeserializeOwned>(
    request: &mut Request,
    max_body: usize,
    read: &mut BodyRead,
    what: &str,
) -> Result<T, Reply> {
    let body = read_body(request, max_body, read)?;
    serde_json::from_slice(&body)
        .map_err(|e| fail(400, format!("the body is not a valid {what}: {e}")))
}

/// Reads the request's body, at most `max_body` bytes (413 beyond).
fn read_body(
    request: &mut Request,
    max_body: usize,
    read: &mut BodyRead,
) -> Result<Vec<u8>, Reply> {
    if request
        .body_length()
        .is_some_and(|declared| declared > max_body)
    {
        return Err(too_large(max_body));
    }
    let limit = u64::try_from(max_body)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut body = Vec::new();
    let result = request.as_reader().take(limit).read_to_end(&mut body);
    read.bytes = body.len();
    result.map_err(|e| fail(400, format!("the body could not be read: {e}")))?;
    if body.len() > max_body {
        return Err(too_large(max_body));
    }
    read.whole = true;
    Ok(body)
}

fn too_large(max_body: usize) -> Reply {
    fail(413, format!("the body is larger than {max_body} bytes"))
}

fn not_allowed(path: &str, method: &Method, allow: &'static str) -> Reply {
    Reply {
        allow: Some(allow),
        ..fail(405, format!("{path} takes {allow}, not {method}"))
    }
}

/// A JSON answer.
fn json_reply<T: Serialize>(status: u16, value: &T) -> Reply {
    match serde_json::to_string(value) {
        Ok(body) => Reply {
            status,
            body,
            allow: None,
        },
        Err(e) => fail(500, format!("the answer could not be written: {e}")),
    }
}

/// An error answer: an [`ErrorBody`].
fn fail(status: u16, message: impl Into<String>) -> Reply {
    let error = ErrorBody {
        error: message.into(),
    };
    Reply {
        status,
        body: serde_json::to_string(&error)
            .unwrap_or_else(|_| r#"{"error":"internal error"}"#.to_owned()),
        allow: None,
    }
}

/// Writes the answer; a client that went away is no concern of ours.
fn send(request: Request, reply: Reply, unread: usize) {
    let Reply {
        status,
        body,
        allow,
    } = reply;
    let mut headers = Vec::with_capacity(2);
    headers.extend(Header::from_bytes("Content-Type", "application/json").ok());
    if let Some(allow) = allow {
        headers.extend(Header::from_bytes("Allow", allow).ok());
    }
    if unread <= MAX_DRAIN {
        let mut response = Response::from_string(body).with_status_code(StatusCode(status));
        for header in headers {
            response.add_header(header);
        }
        let _ = request.respond(response);
        return;
    }
    // See `MAX_DRAIN`: answer, then abandon the connection so that tiny_http never drops the
    // unread body. `upgrade` is the only way tiny_http 0.12 offers to take the body reader
    // out of the request; it writes the status line and headers (with `Connection: upgrade`
    // and no length, so the body is the rest of the stream), and the body is written here.
    // The stream is then leaked: one idle socket and one parked tiny_http thread per such
    // request, instead of an abort.
    let mut response = Response::empty(StatusCode(status));
    for header in headers {
        response.add_header(header);
    }
    let mut stream = request.upgrade("none", response);
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    std::mem::forget(stream);
}

/// The first value of `name` in a query string, percent-decoded (`+` is a space).
fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(key, _)| percent_decode(key) == name)
        .map(|(_, value)| percent_decode(value))
}

/// Decodes `%XX` escapes and `+`, as HTML forms encode; a `%` not followed by two hex digits
/// stands for itself, and bytes that are not UTF-8 become U+FFFD.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        let escaped = match (byte, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&high), Some(&low)) => hex_value(high).zip(hex_value(low)),
            _ => None,
        };
        match (byte, escaped) {
            (_, Some((high, low))) => {
                out.push(high << 4 | low);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (other, None) => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|value| u8::try_from(value).ok())
}

/// Encodes everything but RFC 3986's unreserved characters.
fn percent_encode(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Product;
    use std::io::{BufRead, BufReader};
    use std::net::TcpStream;
    use std::sync::mpsc;

    /// A fake backend on loopback serving both services. Paths under a prefix change what
    /// `/search` does: `/garbage` answers 200 `not json`, `/broken` answers 500, `/hang`
    /// reports the call on the channel and answers 502 after 10 s.
    fn fake_backend() -> (String, mpsc::Receiver<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake backend");
        let addr = listener.local_addr().expect("its address");
        let server = Server::from_listener(listener, None).expect("start the fake backend");
        let (hung, hung_rx) = mpsc::channel();
        thread::spawn(move || {
            for request in server.incoming_requests() {
                let hung = hung.clone();
                thread::spawn(move || fake_answer(request, &hung));
            }
        });
        (format!("http://{addr}"), hung_rx)
    }

    fn fake_answer(mut request: Request, hung: &mpsc::Sender<()>) {
        let url = request.url().to_owned();
        let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
        let (status, body) = match path {
            "/search" => {
                let q = query_param(query, "q").unwrap_or_default();
                let results = if q == "nothing" {
                    Vec::new()
                } else {
                    (41..=42)
                        .map(|id| Product {
                            id,
                            name: format!("{q} #{id}"),
                            price_cents: 1000 + id,
                        })
                        .collect()
                };
                let answer = SearchResults { query: q, results };
                (200, serde_json::to_string(&answer).expect("serialize"))
            }
            "/garbage/search" => (200, "not json".to_owned()),
            "/broken/search" => (500, r#"{"error":"boom"}"#.to_owned()),
            "/hang/search" => {
                let _ = hung.send(());
                thread::sleep(Duration::from_secs(10));
                (502, r#"{"error":"search is down"}"#.to_owned())
            }
            "/pay" => {
                let mut body = String::new();
                let _ = request.as_reader().read_to_string(&mut body);
                match serde_json::from_str::<Payment>(&body) {
                    Ok(payment) => {
                        let receipt = PaymentReceipt {
                            payment_id: 1,
                            item: payment.item,
                            amount_cents: payment.amount_cents,
                            status: "approved".to_owned(),
                        };
                        (200, serde_json::to_string(&receipt).expect("serialize"))
                    }
                    Err(e) => (400, format!(r#"{{"error":"{e}"}}"#)),
                }
            }
            _ => (404, r#"{"error":"no such endpoint"}"#.to_owned()),
        };
        let _ = request.respond(Response::from_string(body).with_status_code(status));
    }

    /// A store with 4 workers in front of `search_url` and `payment_url`.
    fn store(search_url: &str, payment_url: &str) -> (ThreadStore, String) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the store");
        let config = ThreadStoreConfig {
            threads: 4,
            ..ThreadStoreConfig::new(search_url, payment_url)
        };
        let store = ThreadStore::start(listener, config).expect("start the store");
        let base = format!("http://{}", store.local_addr());
        (store, base)
    }

    /// A store in front of a healthy fake backend.
    fn healthy() -> (ThreadStore, String) {
        let (backend, _) = fake_backend();
        store(&backend, &backend)
    }

    fn client() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(5)))
            .proxy(None)
            .build()
            .into()
    }

    fn answer(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, String) {
        let mut response = result.expect("the store answers");
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        assert_eq!(content_type.as_deref(), Some("application/json"));
        let body = response.body_mut().read_to_string().expect("a body");
        (response.status().as_u16(), body)
    }

    fn get(url: &str) -> (u16, String) {
        answer(client().get(url).call())
    }

    fn post(url: &str, body: &str) -> (u16, String) {
        answer(
            client()
                .post(url)
                .content_type("application/json")
                .send(body),
        )
    }

    /// Checks an error answer's status and that its body is an [`ErrorBody`].
    fn error((status, body): (u16, String), expected: u16) -> String {
        assert_eq!(status, expected, "body: {body}");
        serde_json::from_str::<ErrorBody>(&body)
            .unwrap_or_else(|e| panic!("{body:?} is not an error body: {e}"))
            .error
    }

    fn parse<T: DeserializeOwned>((status, body): (u16, String)) -> T {
        assert_eq!(status, 200, "body: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body:?}: {e}"))
    }

    /// A port nobody listens on.
    fn dead_url() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        drop(listener);
        format!("http://{addr}")
    }

    #[test]
    fn index_page_is_served_locally() {
        let (store, base) = store(&dead_url(), &dead_url());
        let page: crate::IndexPage = parse(get(&format!("{base}/")));
        assert_eq!(page, index_page("thread-per-request"));
        store.stop();
    }

    #[test]
    fn search_passes_on_the_results() {
        let (store, base) = healthy();
        let found: SearchResults = parse(get(&format!("{base}/search?q=red+shoes%20%26%20socks")));
        assert_eq!(found.query, "red shoes & socks");
        assert_eq!(found.results.len(), 2);
        assert_eq!(found.results[0].id, 41);
        store.stop();
    }

    #[test]
    fn pay_passes_on_the_receipt() {
        let (store, base) = healthy();
        let receipt: PaymentReceipt = parse(post(
            &format!("{base}/pay"),
            r#"{"item":7,"amount_cents":1999}"#,
        ));
        assert_eq!((receipt.item, receipt.amount_cents), (7, 1999));
        assert_eq!(receipt.status, "approved");
        store.stop();
    }

    #[test]
    fn checkout_searches_then_pays_for_the_first_hit() {
        let (store, base) = healthy();
        let receipt: CheckoutReceipt = parse(post(
            &format!("{base}/checkout"),
            r#"{"query":"shoes","amount_cents":2500}"#,
        ));
        assert_eq!(receipt.product.id, 41);
        assert_eq!(receipt.payment.item, 41);
        assert_eq!(receipt.payment.amount_cents, 2500);
        let why = error(
            post(
                &format!("{base}/checkout"),
                r#"{"query":"nothing","amount_cents":2500}"#,
            ),
            404,
        );
        assert!(why.contains("nothing matches"), "{why}");
        store.stop();
    }

    #[test]
    fn bad_requests_are_400() {
        let (store, base) = healthy();
        let why = error(get(&format!("{base}/search?q=")), 400);
        assert!(why.contains("must not be empty"), "{why}");
        let why = error(get(&format!("{base}/search")), 400);
        assert!(why.contains("missing"), "{why}");
        let why = error(get(&format!("{base}/search?x=1")), 400);
        assert!(why.contains("missing"), "{why}");
        let long = "a".repeat(201);
        error(get(&format!("{base}/search?q={long}")), 400);
        let why = error(post(&format!("{base}/pay"), "{not json"), 400);
        assert!(why.starts_with("the body is not a valid payment"), "{why}");
        let why = error(post(&format!("{base}/pay"), r#"{"item":7}"#), 400);
        assert!(why.contains("missing field `amount_cents`"), "{why}");
        let why = error(
            post(&format!("{base}/pay"), r#"{"item":"7","amount_cents":1}"#),
            400,
        );
        assert!(why.contains("invalid type"), "{why}");
        let why = error(
            post(&format!("{base}/pay"), r#"{"item":7,"amount_cents":0}"#),
            400,
        );
        assert!(why.contains("amount_cents"), "{why}");
        let why = error(
            post(&format!("{base}/checkout"), r#"{"query":"shoes"}"#),
            400,
        );
        assert!(why.contains("missing field `amount_cents`"), "{why}");
        error(
            post(
                &format!("{base}/checkout"),
                r#"{"query":"","amount_cents":5}"#,
            ),
            400,
        );
        error(post(&format!("{base}/pay"), ""), 400);
        store.stop();
    }

    #[test]
    fn oversized_bodies_are_413() {
        let (store, base) = healthy();
        let padding = " ".repeat(crate::MAX_BODY);
        let body = format!(r#"{{"item":7,"amount_cents":1999}}{padding}"#);
        let why = error(post(&format!("{base}/pay"), &body), 413);
        assert!(why.contains("larger than"), "{why}");
        // Exactly the limit is fine.
        let fits = format!(
            r#"{{"item":7,"amount_cents":1999}}{}"#,
            " ".repeat(crate::MAX_BODY - 30)
        );
        assert_eq!(fits.len(), crate::MAX_BODY);
        let _: PaymentReceipt = parse(post(&format!("{base}/pay"), &fits));
        store.stop();
    }

    #[test]
    fn unknown_paths_are_404_and_wrong_methods_405() {
        let (store, base) = healthy();
        error(get(&format!("{base}/nope")), 404);
        error(get(&format!("{base}/search/")), 404);
        let why = error(get(&format!("{base}/pay")), 405);
        assert!(why.contains("POST"), "{why}");
        error(post(&format!("{base}/"), "{}"), 405);
        error(post(&format!("{base}/search?q=x"), "{}"), 405);
        let response = client()
            .get(&format!("{base}/checkout"))
            .call()
            .expect("answer");
        assert_eq!(response.status().as_u16(), 405);
        assert_eq!(
            response
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok()),
            Some("POST")
        );
        store.stop();
    }

    #[test]
    fn backend_failures_are_502() {
        let (backend, _) = fake_backend();
        let (garbage, base) = store(&format!("{backend}/garbage"), &backend);
        let why = error(get(&format!("{base}/search?q=shoes")), 502);
        assert!(
            why.starts_with("the search service answered something that is not search results"),
            "{why}"
        );
        garbage.stop();

        let (broken, base) = store(&format!("{backend}/broken"), &backend);
        let why = error(get(&format!("{base}/search?q=shoes")), 502);
        assert_eq!(why, "the search service answered 500");
        let why = error(
            post(
                &format!("{base}/checkout"),
                r#"{"query":"shoes","amount_cents":5}"#,
            ),
            502,
        );
        assert_eq!(why, "the search service answered 500");
        broken.stop();

        let (unreachable, base) = store(&dead_url(), &dead_url());
        let why = error(get(&format!("{base}/search?q=shoes")), 502);
        assert!(
            why.starts_with("the search service could not be called"),
            "{why}"
        );
        let why = error(
            post(&format!("{base}/pay"), r#"{"item":7,"amount_cents":1}"#),
            502,
        );
        assert!(
            why.starts_with("the payment service could not be called"),
            "{why}"
        );
        unreachable.stop();
    }

    #[test]
    fn invalid_configs_are_refused() {
        let listener = || TcpListener::bind("127.0.0.1:0").expect("bind");
        let good = ThreadStoreConfig::new("http://127.0.0.1:1", "http://127.0.0.1:2");
        assert_eq!(good.threads, 200);
        assert_eq!(good.max_body, crate::MAX_BODY);
        let bad = [
            ThreadStoreConfig {
                threads: 0,
                ..good.clone()
            },
            ThreadStoreConfig {
                threads: 10_001,
                ..good.clone()
            },
            ThreadStoreConfig {
                max_body: 0,
                ..good.clone()
            },
            ThreadStoreConfig {
                search_url: "https://x".to_owned(),
                ..good.clone()
            },
            ThreadStoreConfig {
                payment_url: "127.0.0.1:2".to_owned(),
                ..good.clone()
            },
        ];
        for config in bad {
            let err = ThreadStore::start(listener(), config).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(!err.to_string().contains('\n'));
        }
    }

    /// Sends raw bytes and returns the answer's status line and body (read until `}`).
    fn raw(base: &str, request: &str) -> (String, String) {
        let addr = base.trim_start_matches("http://");
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        stream.write_all(request.as_bytes()).expect("send");
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).expect("status line");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            if line.trim().is_empty() {
                break;
            }
        }
        let mut body = Vec::new();
        reader.read_until(b'}', &mut body).expect("body");
        (
            status.trim().to_owned(),
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[test]
    fn absurd_content_lengths_do_not_bring_the_store_down() {
        let (store, base) = healthy();
        let huge = "Content-Length: 100000000000000\r\n";
        let (status, body) = raw(
            &base,
            &format!("POST /pay HTTP/1.1\r\nHost: x\r\n{huge}\r\n{{"),
        );
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");
        assert!(serde_json::from_str::<ErrorBody>(&body).is_ok(), "{body}");
        let (status, _) = raw(&base, &format!("GET / HTTP/1.1\r\nHost: x\r\n{huge}\r\n"));
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let max = format!("Content-Length: {}\r\n", usize::MAX);
        let (status, _) = raw(
            &base,
            &format!("POST /pay HTTP/1.1\r\nHost: x\r\n{max}\r\n"),
        );
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");
        // Still serving, on all its workers.
        for _ in 0..8 {
            let _: crate::IndexPage = parse(get(&format!("{base}/")));
        }
        store.stop();
    }

    #[test]
    fn stop_returns_while_a_worker_hangs_in_a_backend_call() {
        let (backend, hung) = fake_backend();
        let (store, base) = store(&format!("{backend}/hang"), &backend);
        let _: crate::IndexPage = parse(get(&format!("{base}/")));
        let url = format!("{base}/search?q=shoes");
        thread::spawn(move || {
            let _ = client().get(&url).call();
        });
        hung.recv_timeout(Duration::from_secs(2))
            .expect("the search call reaches the backend");
        let started = Instant::now();
        store.stop();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "stop took {:?}",
            started.elapsed()
        );
        // It no longer takes connections.
        let addr = base.trim_start_matches("http://").to_owned();
        let deadline = Instant::now() + Duration::from_secs(1);
        while TcpStream::connect(&addr).is_ok() {
            assert!(Instant::now() < deadline, "still accepting after stop");
            thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn query_strings_are_decoded_and_encoded() {
        assert_eq!(query_param("q=a+b%20c&q=2", "q").as_deref(), Some("a b c"));
        assert_eq!(query_param("x=1&q", "q").as_deref(), Some(""));
        assert_eq!(query_param("x=1", "q"), None);
        assert_eq!(query_param("%71=v", "q").as_deref(), Some("v"));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%C3%A9%FF"), "é\u{fffd}");
        assert_eq!(percent_encode("a b&é~"), "a%20b%26%C3%A9~");
        let text = "shoes & socks / 100% é";
        assert_eq!(percent_decode(&percent_encode(text)), text);
    }
}
