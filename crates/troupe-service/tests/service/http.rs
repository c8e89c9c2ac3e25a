//! The example service over loopback: a few hundred concurrent requests of every kind, each
//! response's status checked; the rate limiter's 429; bad requests; graceful shutdown.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use troupe::System;
use troupe_service::{serve, AppState, Settings};

/// One HTTP/1.1 request on its own connection: the status and the body.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("receive");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Starts the service on an ephemeral loopback port; returns its address, a trigger for its
/// graceful shutdown, and the task serving it.
async fn start(
    settings: Settings,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
    System,
) {
    let system = System::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .build()
        .unwrap();
    let state = AppState::new(system.clone(), &settings);
    let drain = settings.drain_deadline;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, state, drain, async {
        let _ = stopped.await;
    }));
    (addr, stop, server, system)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_concurrent_requests_get_the_right_statuses() {
    let (addr, stop, server, system) = start(Settings::default()).await;

    let mut tasks = Vec::new();
    for i in 0..300u64 {
        tasks.push(tokio::spawn(async move {
            let user = format!("u{}", i % 20);
            let (status, body) = request(addr, "POST", &format!("/sessions/{user}")).await;
            assert_eq!(status, 200, "session {user}: {body}");
            assert!(body.contains(&format!("\"user\":\"{user}\"")), "{body}");
            let (status, body) = request(addr, "GET", &format!("/jobs/{i}")).await;
            assert_eq!(status, 200, "work {i}: {body}");
            assert_eq!(body, (i * i).to_string());
            let (status, body) = request(addr, "GET", "/flaky").await;
            assert_eq!(status, 200, "flaky: {body}");
        }));
    }
    for task in tasks {
        task.await.expect("a request task");
    }
    // The registry lists the 20 sessions.
    let (status, body) = request(addr, "GET", "/sessions").await;
    assert_eq!(status, 200, "{body}");
    let mut users: Vec<String> = serde_json::from_str(&body).expect("a JSON list");
    users.sort();
    let mut expected: Vec<String> = (0..20).map(|u| format!("u{u}")).collect();
    expected.sort();
    assert_eq!(users, expected);
    // Each of the 20 sessions saw 15 visits; one more now.
    for u in 0..20 {
        let (status, body) = request(addr, "GET", &format!("/sessions/u{u}")).await;
        assert_eq!(status, 200);
        assert!(body.contains("\"visits\":16"), "session u{u}: {body}");
    }

    // The supervised flaky actor: a failure is a 500, and it comes back restarted.
    let (status, body) = request(addr, "GET", "/flaky?fail=true").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("panicked"), "{body}");
    let (status, body) = request(addr, "GET", "/flaky").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("\"calls\":1") && body.contains("\"instance\":2"),
        "{body}"
    );

    // Bad requests: a clear 4xx, nothing panics or hangs.
    assert_eq!(request(addr, "GET", "/sessions/nobody").await.0, 404);
    assert_eq!(request(addr, "GET", "/nope").await.0, 404);
    assert_eq!(request(addr, "GET", "/jobs/abc").await.0, 400);
    assert_eq!(request(addr, "GET", "/jobs/99999999999").await.0, 400);
    assert_eq!(request(addr, "GET", "/flaky?fail=maybe").await.0, 400);
    assert_eq!(request(addr, "DELETE", "/sessions/u1").await.0, 405);

    // Graceful shutdown: the server returns, and every actor has stopped.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    assert_eq!(system.live_actors(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limiter_says_429_when_its_bucket_is_empty() {
    let (addr, stop, server, _system) = start(Settings {
        rate_capacity: 10,
        rate_refill: 10,
        rate_every: Duration::from_secs(3600),
        ..Settings::default()
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(request(addr, "GET", "/jobs/2").await.0);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 10);
    assert_eq!(&statuses[10..], [429, 429]);
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// Background jobs accepted before the server is told to stop, most still waiting or in their
/// async step, are all finished: the server finishes its requests, then the workers drain
/// (a plain stop would drop the jobs in their mailboxes and those in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_jobs_accepted_before_shutdown_are_finished() {
    let settings = Settings {
        work_latency: Duration::from_millis(200),
        workers: std::num::NonZeroUsize::new(2).unwrap(),
        ..Settings::default()
    };
    let system = System::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .build()
        .unwrap();
    let state = AppState::new(system.clone(), &settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        state.clone(),
        settings.drain_deadline,
        async {
            let _ = stopped.await;
        },
    ));
    for i in 0..40u64 {
        let (status, body) = request(addr, "POST", &format!("/jobs/{i}")).await;
        assert_eq!(status, 202, "job {i}: {body}");
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    assert_eq!(state.jobs_done(), 40, "every accepted job was finished");
    assert_eq!(system.live_actors(), 0);
}

/// With its console on (`--console`), the service's actors are listed by the console's
/// `/api/actors`: the rate limiter, the workers behind the router, the flaky actor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_the_services_actors() {
    let system = System::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .observe()
        .build()
        .unwrap();
    let settings = Settings::default();
    let _state = AppState::new(system.clone(), &settings);
    let console = troupe_console::Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap())
        .expect("the console starts");
    let (status, body) = request(console.addr(), "GET", "/api/actors").await;
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("a JSON page");
    let types: Vec<&str> = page["actors"]
        .as_array()
        .expect("actors")
        .iter()
        .map(|a| a["short"].as_str().expect("a type"))
        .collect();
    let count = |name: &str| types.iter().filter(|t| **t == name).count();
    assert_eq!(count("RateLimiter"), 1, "{types:?}");
    assert_eq!(count("Worker"), settings.workers.get(), "{types:?}");
    assert_eq!(count("Flaky"), 1, "{types:?}");
    // Bad input is refused with one line, not a panic.
    let (status, body) = request(console.addr(), "GET", "/api/actors?limit=0").await;
    assert_eq!((status, body.lines().count()), (400, 1), "{body}");
    tokio::task::spawn_blocking(move || console.shutdown())
        .await
        .unwrap()
        .expect("the console stops");
    system.shutdown_async().await;
}

/// `GET /metrics` in the Prometheus text format: the workers' messages counted and timed by
/// actor type, name, pool and message type, the gauges published at the scrape; 404 when the
/// service runs without metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_in_the_prometheus_text_format() {
    let (addr, stop, server, _system) = start(Settings::default()).await;
    let (status, body) = request(addr, "GET", "/metrics").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("--metrics"), "{body}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();

    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let system = System::builder()
        .tokio_handle(tokio::runtime::Handle::current())
        .name("service")
        .observe()
        .build()
        .unwrap();
    let settings = Settings::default();
    let state = AppState::new(system.clone(), &settings).with_prometheus(prometheus);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, state, settings.drain_deadline, async {
        let _ = stopped.await;
    }));
    for n in 1..=5 {
        let (status, body) = request(addr, "GET", &format!("/jobs/{n}")).await;
        assert_eq!(status, 200, "{body}");
    }
    // Counted as each handler returns, which may be just after its reply went out.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let body = loop {
        let (status, body) = request(addr, "GET", "/metrics").await;
        assert_eq!(status, 200, "{body}");
        let handled: f64 = body
            .lines()
            .filter(|l| l.starts_with("troupe_messages_handled_total{") && l.contains("Worker"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if handled >= 5.0 {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "5 jobs never counted:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for expected in [
        "# TYPE troupe_messages_handled_total counter",
        "troupe_handler_seconds",
        "system=\"service\"",
        "pool=\"default\"",
        "troupe_actors{",
        "troupe_mailbox_depth{",
        "troupe_live_actors{system=\"service\"}",
        "troupe_pool_turns_total{",
    ] {
        assert!(body.contains(expected), "no `{expected}` in:\n{body}");
    }
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
