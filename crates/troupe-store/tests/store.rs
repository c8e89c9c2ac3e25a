//! The stores end to end on loopback: the seed's failure scenario at test sizes, and every
//! kind of bad input on the troupe store.

use std::time::Duration;

use troupe_store::actor_store::{ActorStore, ActorStoreConfig};
use troupe_store::backends::{Backends, BackendsConfig, SearchMode};
use troupe_store::bench::{self, BenchConfig, StoreKind};
use troupe_store::load::{Kind, Summary};
use troupe_store::ErrorBody;

fn summary<'a>(summaries: &'a [Summary], phase: &str, kind: Kind) -> &'a Summary {
    summaries
        .iter()
        .find(|s| s.phase == phase && s.kind == kind)
        .unwrap_or_else(|| panic!("no summary for {phase}/{kind:?}"))
}

#[test]
fn the_troupe_store_stays_fast_while_search_hangs_and_the_baseline_waits() {
    let config = BenchConfig::quick();
    let call_timeout = config.troupe.call_timeout;
    let request_timeout = config.troupe.request_timeout;
    let hang = config.hang;
    let report = bench::run(&config, &mut |line| eprintln!("{line}")).expect("the run");

    let troupe = report
        .closed
        .iter()
        .find(|run| run.store == StoreKind::Troupe)
        .expect("a troupe run");
    let s = &troupe.report.summaries;
    let stats = troupe.stats.as_ref().expect("the troupe store's counters");
    eprintln!("{}", troupe_store::report::table(&report));
    eprintln!("{}", troupe_store::report::counters(&report));

    // The breaker opened while search hung, failed calls fast, and closed once it recovered.
    assert!(
        stats.search.opened >= 1,
        "the breaker never opened: {stats:?}"
    );
    assert!(
        stats.search.closed >= 1,
        "the breaker never closed again: {stats:?}"
    );
    assert!(
        stats.search.failed_fast > 0,
        "nothing failed fast: {stats:?}"
    );
    assert_eq!(stats.search.breaker, "closed", "closed at the end");
    assert!(
        troupe
            .report
            .breaker
            .iter()
            .any(|(_, state)| state == "open"),
        "the per-second samples saw it open: {:?}",
        troupe.report.breaker
    );

    // Index and payments kept succeeding, within a bound far below the hang, in every phase.
    for phase in ["healthy", "search_hangs", "recovered"] {
        for kind in [Kind::Index, Kind::Payment] {
            let k = summary(s, phase, kind);
            assert!(k.requests > 0, "{phase}/{kind:?}: no requests");
            assert_eq!(
                k.ok, k.requests,
                "{phase}/{kind:?}: every request succeeds: {k:?}"
            );
            assert!(
                k.max_ms < 500.0,
                "{phase}/{kind:?}: slowest {} ms, while the hang is {hang:?}",
                k.max_ms
            );
        }
    }
    // Search: no request waited past its timeout; most failed fast once the breaker opened.
    let search = summary(s, "search_hangs", Kind::Search);
    assert_eq!(search.ok, 0, "search cannot succeed while it hangs");
    assert_eq!(search.failed + search.unfinished, 0, "{search:?}");
    assert!(
        search.max_ms < (call_timeout.as_secs_f64() * 1000.0) + 250.0,
        "a search waited {} ms, past the {call_timeout:?} call timeout (request timeout {request_timeout:?})",
        search.max_ms
    );
    assert!(
        search.p50_ms < 50.0,
        "most searches fail fast while the breaker is open: p50 {} ms",
        search.p50_ms
    );
    let recovered = summary(s, "recovered", Kind::Search);
    assert!(recovered.ok > 0, "search works again: {recovered:?}");

    // The baseline waits the whole hang on every search (it has no timeout).
    let threads = report
        .closed
        .iter()
        .find(|run| run.store == StoreKind::Threads)
        .expect("a baseline run");
    let baseline = summary(&threads.report.summaries, "search_hangs", Kind::Search);
    assert!(
        baseline.p50_ms >= hang.as_secs_f64() * 1000.0 * 0.9,
        "the baseline's searches wait for the hang: {baseline:?}"
    );
    // The results render as protocol records.
    let records = troupe_store::report::records(&report);
    let closed = records.iter().filter(|r| r.scenario == "store").count();
    assert!(closed >= 2 * 3 * 3 * 6, "{closed} closed-model records");
    let timeline: Vec<_> = records
        .iter()
        .filter(|r| r.scenario == "store-timeline")
        .collect();
    assert!(
        timeline.iter().any(|r| r.params["phase"] == "search_hangs"),
        "the timeline labels the seconds of the hang"
    );
    assert!(records
        .iter()
        .all(|r| r.median.is_finite() && !r.samples.is_empty()));
}

/// A response: status and body.
fn request(method: &str, url: &str, body: Option<&str>) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let response = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        ("POST", Some(body)) => agent
            .post(url)
            .header("content-type", "application/json")
            .send(body),
        ("POST", None) => agent.post(url).send_empty(),
        ("PUT", _) => agent.put(url).send_empty(),
        _ => unreachable!(),
    };
    let mut response = response.expect("an answer");
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_string()
        .expect("a body");
    (status, text)
}

fn error_of(body: &str) -> String {
    serde_json::from_str::<ErrorBody>(body)
        .unwrap_or_else(|e| panic!("not an error body ({e}): {body}"))
        .error
}

#[test]
fn bad_requests_get_a_clear_json_error_and_nothing_hangs() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (backends, store) = rt.block_on(async {
        let search = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let payment = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backends = Backends::start(search, payment, BackendsConfig::default())
            .await
            .unwrap();
        let mut config = ActorStoreConfig::new(
            format!("http://{}", backends.search_addr()),
            format!("http://{}", backends.payment_addr()),
        );
        config.max_body = 1024;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let store = ActorStore::start(listener, config).await.unwrap();
        (backends, store)
    });
    let base = format!("http://{}", store.local_addr());
    let at = |path: &str| format!("{base}{path}");

    // The good paths.
    let (status, body) = request("GET", &at("/"), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = request("GET", &at("/search?q=red%20shoes"), None);
    assert_eq!(status, 200, "{body}");
    let found: troupe_store::SearchResults = serde_json::from_str(&body).unwrap();
    assert_eq!(found, troupe_store::backends::results_for("red shoes"));
    let (status, body) = request(
        "POST",
        &at("/pay"),
        Some(r#"{"item":7,"amount_cents":1999}"#),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(
        "POST",
        &at("/checkout"),
        Some(r#"{"query":"boots","amount_cents":500}"#),
    );
    assert_eq!(status, 200, "{body}");
    let receipt: troupe_store::CheckoutReceipt = serde_json::from_str(&body).unwrap();
    assert_eq!(receipt.payment.item, receipt.product.id);

    // Bad input, each with its status and a message that says what is wrong.
    let cases: Vec<(&str, String, Option<String>, u16, &str)> = vec![
        ("GET", at("/search?q="), None, 400, "must not be empty"),
        ("GET", at("/search"), None, 400, "missing"),
        (
            "GET",
            at(&format!("/search?q={}", "x".repeat(201))),
            None,
            400,
            "at most 200",
        ),
        (
            "POST",
            at("/pay"),
            Some("{not json".into()),
            400,
            "not a valid payment",
        ),
        (
            "POST",
            at("/pay"),
            Some(r#"{"item":7}"#.into()),
            400,
            "amount_cents",
        ),
        (
            "POST",
            at("/pay"),
            Some(r#"{"item":"seven","amount_cents":1}"#.into()),
            400,
            "invalid type",
        ),
        (
            "POST",
            at("/pay"),
            Some(r#"{"item":7,"amount_cents":0}"#.into()),
            400,
            "amount_cents",
        ),
        (
            "POST",
            at("/pay"),
            Some(format!(
                r#"{{"item":7,"amount_cents":1,"pad":"{}"}}"#,
                "x".repeat(2000)
            )),
            413,
            "larger than 1024 bytes",
        ),
        (
            "POST",
            at("/checkout"),
            Some(r#"{"query":"","amount_cents":5}"#.into()),
            400,
            "must not be empty",
        ),
        (
            "POST",
            at("/checkout"),
            Some("[]".into()),
            400,
            "not a valid checkout",
        ),
        ("GET", at("/nowhere"), None, 404, "no such endpoint"),
        ("PUT", at("/pay"), None, 405, "method"),
        ("GET", at("/pay"), None, 405, "method"),
    ];
    for (method, url, body, want, says) in cases {
        let (status, text) = request(method, &url, body.as_deref());
        assert_eq!(status, want, "{method} {url}: {text}");
        let message = error_of(&text);
        assert!(
            message.contains(says),
            "{method} {url}: `{message}` should say `{says}`"
        );
    }

    // A backend answering garbage: 502, saying so.
    backends.set_search_mode(SearchMode::Garbage);
    let (status, text) = request("GET", &at("/search?q=shoes"), None);
    assert_eq!(status, 502, "{text}");
    assert!(error_of(&text).contains("not JSON"), "{text}");
    backends.set_search_mode(SearchMode::Healthy);

    // Nothing broke: the store still answers.
    let (status, _) = request("GET", &at("/search?q=shoes"), None);
    assert_eq!(status, 200);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(15), async {
            store.stop().await;
            backends.stop().await;
        })
        .await
        .expect("the store and the backends stop");
    });
}

#[test]
fn the_binary_says_its_version() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_troupe-store"))
        .arg("--version")
        .output()
        .expect("run troupe-store");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        concat!("troupe-store ", env!("CARGO_PKG_VERSION"))
    );
}
