//! Clients that do not play fair, against the troupe store on loopback: slow heads, slow
//! bodies, lying lengths, idle connections by the dozen, a flood while search hangs. Each test
//! starts its own backends and store on 127.0.0.1, bounds every wait, and stops them.
//!
//! The bounds asserted are upper bounds on when an answer (or a close) arrives, generous
//! enough for a loaded 2-core machine; they say "this is answered", not "this is fast".

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use troupe_store::actor_store::{ActorStore, ActorStoreConfig};
use troupe_store::backends::{Backends, BackendsConfig, SearchMode};
use troupe_store::listener::{listen, listen_async};
use troupe_store::thread_store::{ThreadStore, ThreadStoreConfig};
use troupe_store::ErrorBody;

/// Slack for a loaded machine on top of any configured time.
const SLACK: Duration = Duration::from_secs(2);

const PAYMENT: &str = r#"{"item":7,"amount_cents":1999}"#;

/// Fresh backends and a troupe store with `configure` applied, on a runtime of their own.
struct Running {
    rt: tokio::runtime::Runtime,
    backends: Backends,
    store: ActorStore,
}

impl Running {
    fn start(backends: BackendsConfig, configure: impl FnOnce(&mut ActorStoreConfig)) -> Running {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let (backends, store) = rt.block_on(async {
            let search = listen_async("127.0.0.1:0").expect("bind search");
            let payment = listen_async("127.0.0.1:0").expect("bind payment");
            let backends = Backends::start(search, payment, backends)
                .await
                .expect("the backends");
            let mut config = ActorStoreConfig::new(
                format!("http://{}", backends.search_addr()),
                format!("http://{}", backends.payment_addr()),
            );
            configure(&mut config);
            let listener = listen_async("127.0.0.1:0").expect("bind the store");
            let store = ActorStore::start(listener, config)
                .await
                .expect("the store");
            (backends, store)
        });
        Running {
            rt,
            backends,
            store,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.store.local_addr()
    }

    fn stop(self) {
        let Running {
            rt,
            backends,
            store,
        } = self;
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(15), async {
                store.stop().await;
                backends.stop().await;
            })
            .await
            .expect("the store and the backends stop");
        });
        rt.shutdown_timeout(Duration::from_secs(5));
    }
}

/// An answer read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn error(&self) -> String {
        serde_json::from_str::<ErrorBody>(&self.body)
            .unwrap_or_else(|e| panic!("not an error body ({e}): {self:?}"))
            .error
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a read timeout");
    stream.set_nodelay(true).expect("nodelay");
    stream
}

/// Reads one answer (head, then a body of its `Content-Length`).
fn read_answer(stream: &mut TcpStream) -> std::io::Result<Answer> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: Option<usize> = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    });
    let body = match length {
        Some(length) => {
            let mut body = vec![0u8; length];
            stream.read_exact(&mut body)?;
            body
        }
        // No length (tiny_http's answer to a body it will not drain): the body runs to the
        // close, or to the end of what was sent.
        None => {
            let mut body = Vec::new();
            stream.set_read_timeout(Some(Duration::from_millis(500)))?;
            let mut chunk = [0u8; 4096];
            while let Ok(read @ 1..) = stream.read(&mut chunk) {
                body.extend_from_slice(&chunk[..read]);
            }
            body
        }
    };
    Ok(Answer {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Sends `request` on a new connection and reads the answer.
fn exchange(addr: SocketAddr, request: &str) -> Answer {
    let mut stream = connect(addr);
    stream.write_all(request.as_bytes()).expect("send");
    read_answer(&mut stream).expect("an answer")
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: store\r\n\r\n")
}

fn post(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: store\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Waits until the peer closes `stream` (or resets it); how long that took, or `None` if it
/// was still open after `limit`.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .expect("a read timeout");
    let mut buffer = [0u8; 4096];
    while start.elapsed() < limit {
        match stream.read(&mut buffer) {
            Ok(0) => return Some(start.elapsed()),
            // An answer before the close (a 408, say): keep reading.
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(start.elapsed()),
        }
    }
    None
}

#[test]
fn a_declared_length_over_the_limit_is_refused_at_once_by_both_stores() {
    let running = Running::start(BackendsConfig::default(), |_| {});
    let baseline = ThreadStore::start(
        listen("127.0.0.1:0").expect("bind the baseline"),
        ThreadStoreConfig::new("http://127.0.0.1:9", "http://127.0.0.1:9"),
    )
    .expect("the baseline");
    // What the operator sent: a huge declared length, then 30 bytes.
    let lying = format!(
        "POST /pay HTTP/1.1\r\nHost: store\r\nContent-Type: application/json\r\n\
         Content-Length: 99999999999\r\n\r\n{PAYMENT}"
    );
    for (store, addr) in [
        ("troupe", running.addr()),
        ("thread-per-request", baseline.local_addr()),
    ] {
        let start = Instant::now();
        let answer = exchange(addr, &lying);
        assert!(
            start.elapsed() < SLACK,
            "{store}: the 413 took {:?}",
            start.elapsed()
        );
        assert_eq!(answer.status, 413, "{store}: {answer:?}");
        assert!(answer.error().contains("larger"), "{store}: {answer:?}");
    }
    let answer = exchange(running.addr(), &lying);
    assert!(answer.error().contains("declared"), "{answer:?}");
    assert!(
        answer
            .head
            .to_ascii_lowercase()
            .contains("connection: close"),
        "{answer:?}"
    );

    // A body over the limit that does not say so (chunked) is refused once the limit is
    // reached.
    let mut stream = connect(running.addr());
    let start = Instant::now();
    stream
        .write_all(
            b"POST /pay HTTP/1.1\r\nHost: store\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        )
        .expect("send the head");
    let chunk = "x".repeat(20 * 1024);
    let _ = stream.write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
    let answer = read_answer(&mut stream).expect("an answer");
    assert_eq!(answer.status, 413, "{answer:?}");
    assert!(answer.error().contains("larger than"), "{answer:?}");
    assert!(start.elapsed() < SLACK, "took {:?}", start.elapsed());

    // Nothing broke.
    assert_eq!(exchange(running.addr(), &post("/pay", PAYMENT)).status, 200);
    baseline.stop();
    running.stop();
}

#[test]
fn slow_bodies_hold_no_place_and_are_cut_at_the_body_deadline() {
    let body_timeout = Duration::from_secs(1);
    let running = Running::start(BackendsConfig::default(), |config| {
        config.max_concurrent_requests = 4;
        config.body_timeout = body_timeout;
    });
    let addr = running.addr();
    // Four times as many slow bodies as the store has places, each stuck after 5 bytes.
    let mut slow: Vec<(TcpStream, Instant)> = (0..16)
        .map(|_| {
            let mut stream = connect(addr);
            stream
                .write_all(
                    format!(
                        "POST /pay HTTP/1.1\r\nHost: store\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\n\r\n{}",
                        PAYMENT.len(),
                        &PAYMENT[..5]
                    )
                    .as_bytes(),
                )
                .expect("send a head and a little");
            (stream, Instant::now())
        })
        .collect();
    // Payments and the index still answer, at once, while the slow bodies are pending.
    for request in [post("/pay", PAYMENT), get("/")] {
        let start = Instant::now();
        let answer = exchange(addr, &request);
        assert_eq!(answer.status, 200, "{request}: {answer:?}");
        assert!(
            start.elapsed() < SLACK,
            "{request}: answered after {:?}",
            start.elapsed()
        );
    }
    // Each slow body is answered 408, then its connection closed, within the deadline.
    for (stream, began) in &mut slow {
        let answer = read_answer(stream).expect("a 408");
        assert_eq!(answer.status, 408, "{answer:?}");
        assert!(answer.error().contains("did not arrive"), "{answer:?}");
        let waited = began.elapsed();
        assert!(
            waited < body_timeout + SLACK,
            "the 408 came after {waited:?}"
        );
        assert!(closed_within(stream, SLACK).is_some(), "left open");
    }
    running.stop();
}

#[test]
fn the_concurrency_limit_is_store_wide() {
    let backends = BackendsConfig {
        hang: Duration::from_secs(3),
        search_mode: SearchMode::Hang,
        ..BackendsConfig::default()
    };
    let running = Running::start(backends, |config| {
        config.max_concurrent_requests = 2;
        config.call_timeout = Duration::from_secs(2);
        config.request_timeout = Duration::from_secs(3);
    });
    let addr = running.addr();
    // Two searches take both places, waiting for a search service that hangs.
    let searches: Vec<_> = (0..2)
        .map(|_| thread::spawn(move || exchange(addr, &get("/search?q=shoes"))))
        .collect();
    let start = Instant::now();
    while running.backends.search_calls() < 2 {
        assert!(start.elapsed() < SLACK, "the searches never reached search");
        thread::sleep(Duration::from_millis(10));
    }
    // Every other route is refused at once: the places are the store's, not each route's.
    for request in [get("/"), post("/pay", PAYMENT), get("/admin/stats")] {
        let start = Instant::now();
        let answer = exchange(addr, &request);
        assert_eq!(answer.status, 503, "{request}: {answer:?}");
        assert!(answer.error().contains("capacity"), "{answer:?}");
        assert!(start.elapsed() < SLACK, "{request}: {:?}", start.elapsed());
    }
    for search in searches {
        assert_eq!(search.join().expect("a search").status, 504);
    }
    // The places came back.
    assert_eq!(exchange(addr, &get("/")).status, 200);
    assert_eq!(exchange(addr, &post("/pay", PAYMENT)).status, 200);
    running.stop();
}

#[test]
fn slow_heads_are_closed_at_the_header_timeout() {
    let header_timeout = Duration::from_secs(1);
    let running = Running::start(BackendsConfig::default(), |config| {
        config.header_timeout = header_timeout;
    });
    let addr = running.addr();
    // Slowloris: a request line, then a header line every 200 ms, never the blank line.
    let mut heads: Vec<(TcpStream, Instant, Option<Duration>)> = (0..50)
        .map(|_| {
            let mut stream = connect(addr);
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: store\r\n")
                .expect("send a request line");
            stream
                .set_read_timeout(Some(Duration::from_millis(1)))
                .expect("a read timeout");
            (stream, Instant::now(), None)
        })
        .collect();
    let give_up = Instant::now() + header_timeout + SLACK;
    let mut buffer = [0u8; 1024];
    while Instant::now() < give_up && heads.iter().any(|(_, _, closed)| closed.is_none()) {
        for (stream, began, closed) in heads.iter_mut().filter(|(_, _, c)| c.is_none()) {
            let ended = match stream.read(&mut buffer) {
                Ok(0) => true,
                Ok(_) => panic!("an answer to a request whose head never ended"),
                Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            } || stream.write_all(b"X-Drip: 1\r\n").is_err();
            if ended {
                *closed = Some(began.elapsed());
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
    for (_, _, closed) in &heads {
        let closed = closed.expect("a slow head was still open past its timeout");
        assert!(closed < header_timeout + SLACK, "closed after {closed:?}");
    }
    // The store went on answering.
    assert_eq!(exchange(addr, &get("/")).status, 200);
    running.stop();
}

#[test]
fn idle_connections_are_closed_and_capped() {
    let header_timeout = Duration::from_secs(1);
    let running = Running::start(BackendsConfig::default(), |config| {
        config.header_timeout = header_timeout;
        config.max_connections = 8;
    });
    let addr = running.addr();
    // Eight keep-alive connections, one request each, then idle: the cap is reached. None can
    // be closed for idling before the header timeout has passed since its request was sent.
    let first_sent = Instant::now();
    let mut idle: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut stream = connect(addr);
            stream.write_all(get("/").as_bytes()).expect("send");
            let answer = read_answer(&mut stream).expect("an answer");
            assert_eq!(answer.status, 200);
            stream
        })
        .collect();
    let idle_since = Instant::now();
    // A ninth waits in the backlog, unserved, until an idle one is closed for being idle.
    let waiting = thread::spawn(move || {
        let mut stream = connect(addr);
        stream.write_all(get("/").as_bytes()).expect("send");
        read_answer(&mut stream).map(|answer| (answer.status, Instant::now()))
    });
    for stream in &mut idle {
        let limit = (header_timeout + SLACK).saturating_sub(idle_since.elapsed());
        assert!(
            closed_within(stream, limit).is_some(),
            "an idle connection outlived the idle timeout by {SLACK:?}"
        );
    }
    let (status, answered) = waiting
        .join()
        .expect("the ninth")
        .expect("the ninth connection's answer");
    assert_eq!(status, 200);
    // Timers never fire early; the margin is the clock's grain.
    let earliest = header_timeout - Duration::from_millis(20);
    assert!(
        answered.duration_since(first_sent) >= earliest,
        "the ninth connection was served {:?} after the first was opened, though the cap of 8 \
         was reached and no connection had idled out",
        answered.duration_since(first_sent)
    );
    let after = answered.duration_since(idle_since);
    assert!(after < header_timeout + SLACK, "served after {after:?}");
    running.stop();
}

#[test]
fn searches_answer_within_the_call_timeout_while_search_hangs_under_many_clients() {
    let backends = BackendsConfig {
        hang: Duration::from_secs(5),
        search_mode: SearchMode::Hang,
        ..BackendsConfig::default()
    };
    let call_timeout = Duration::from_secs(1);
    let running = Running::start(backends, |config| config.call_timeout = call_timeout);
    let addr = running.addr();
    // 200 keep-alive clients asking again as soon as answered, for 3 s: the bulkhead fills,
    // the breaker opens, probes wait their timeout.
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..200)
        .map(|_| {
            let stop = stop.clone();
            thread::spawn(move || {
                let mut stream = connect(addr);
                let mut slowest = Duration::ZERO;
                let mut answers = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    stream
                        .write_all(get("/search?q=shoes").as_bytes())
                        .expect("send");
                    let answer = read_answer(&mut stream).expect("an answer");
                    assert!(
                        matches!(answer.status, 503 | 504),
                        "search hangs: {answer:?}"
                    );
                    slowest = slowest.max(start.elapsed());
                    answers += 1;
                }
                (slowest, answers)
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut slowest = Duration::ZERO;
    for client in clients {
        let (client_slowest, answers) = client.join().expect("a client");
        assert!(answers > 0);
        slowest = slowest.max(client_slowest);
    }
    assert!(
        slowest < call_timeout + SLACK,
        "the slowest search answer took {slowest:?}"
    );
    running.stop();
}

#[test]
fn a_head_over_the_limit_is_refused_at_once() {
    let running = Running::start(BackendsConfig::default(), |_| {});
    let mut stream = connect(running.addr());
    let start = Instant::now();
    let head = format!(
        "GET / HTTP/1.1\r\nHost: store\r\nX-Padding: {}\r\n\r\n",
        "a".repeat(troupe_store::edge::MAX_HEAD + 1024)
    );
    // The store may close the connection before it has read all of this.
    let _ = stream.write_all(head.as_bytes());
    let answer = read_answer(&mut stream).expect("an answer");
    assert_eq!(answer.status, 431, "{answer:?}");
    assert!(start.elapsed() < SLACK, "took {:?}", start.elapsed());
    assert_eq!(exchange(running.addr(), &get("/")).status, 200);
    running.stop();
}
