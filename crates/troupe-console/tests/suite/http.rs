//! The JSON endpoints over loopback, the bad input they refuse, and how the console starts
//! and stops.

use std::collections::HashSet;
use std::net::TcpStream;

use serde_json::Value;
use troupe::System;
use troupe_console::{Console, ConsoleError, MAX_PAGE};

use crate::common::{get, get_as, get_json, Fixture};

fn id(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("an id: {v}"))
}

#[test]
fn the_endpoints_describe_the_known_system() {
    let fixture = Fixture::start();
    let addr = fixture.addr();
    let ids = fixture.ids;

    // A pool's turns are added to its counters in batches by its workers: wait for the first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let overview = loop {
        let overview = get_json(addr, "/api/overview");
        let turns = overview["pools"]
            .as_array()
            .and_then(|pools| pools.iter().find(|p| p["name"] == "default"))
            .and_then(|p| p["turns"].as_u64());
        if turns.is_some_and(|t| t > 0) {
            break overview;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no turn counted: {overview}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(overview["observed_actors"], 6, "{overview}");
    assert_eq!(overview["live_actors"], 6, "{overview}");
    assert_eq!(overview["max_page"], MAX_PAGE);
    let pools = overview["pools"].as_array().expect("pools");
    let default = pools
        .iter()
        .find(|p| p["name"] == "default")
        .expect("the default pool");
    assert_eq!(default["workers"], 2);
    assert_eq!(default["started"], true);
    assert!(default["turns"].as_u64().unwrap() > 0, "{default}");
    for field in ["steals", "parks", "injected_waiting"] {
        assert!(default[field].is_u64(), "{field} in {default}");
    }

    // The whole listing in one page, then page by page: the same actors.
    let page = get_json(addr, "/api/actors");
    assert_eq!(page["next"], Value::Null);
    let actors = page["actors"].as_array().expect("actors");
    let all: Vec<u64> = actors.iter().map(|a| id(&a["id"])).collect();
    assert_eq!(all.len(), 6);
    let by_id = |wanted: troupe::ActorId| {
        actors
            .iter()
            .find(|a| id(&a["id"]) == wanted.as_u64())
            .unwrap_or_else(|| panic!("actor {wanted} listed"))
    };
    let indexer = by_id(ids.indexer);
    assert_eq!(indexer["short"], "Indexer<String>");
    assert!(indexer["type_name"]
        .as_str()
        .unwrap()
        .ends_with("Indexer<alloc::string::String>"));
    assert_eq!(indexer["names"], serde_json::json!(["indexer-deep"]));
    assert_eq!(id(&indexer["parent"]), ids.archivist.as_u64());
    assert_eq!(id(&by_id(ids.archivist)["parent"]), ids.supervisor.as_u64());
    assert_eq!(id(&by_id(ids.clerk)["parent"]), ids.supervisor.as_u64());
    assert_eq!(by_id(ids.supervisor)["parent"], Value::Null);
    assert_eq!(by_id(ids.clerk)["processed"], 200);
    assert_eq!(by_id(ids.clerk)["pool"], "default");
    assert_eq!(by_id(ids.alpha)["state"], "awaiting");
    assert_eq!(by_id(ids.beta)["state"], "awaiting");

    let mut paged = Vec::new();
    let mut path = "/api/actors?limit=4".to_owned();
    loop {
        let page = get_json(addr, &path);
        let got = page["actors"].as_array().unwrap();
        assert!(got.len() <= 4);
        paged.extend(got.iter().map(|a| id(&a["id"])));
        match page["next"].as_u64() {
            Some(next) => path = format!("/api/actors?after={next}&limit=4"),
            None => break,
        }
    }
    assert_eq!(paged, all);
    // After the last id, nothing; after any number, the ids above it.
    let last = *all.last().unwrap();
    assert_eq!(
        get_json(addr, &format!("/api/actors?after={last}"))["actors"],
        serde_json::json!([])
    );
    let tail = get_json(addr, &format!("/api/actors?after={}&limit=10000", all[2]));
    let tail: Vec<u64> = tail["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| id(&a["id"]))
        .collect();
    assert_eq!(tail, all[3..]);

    // The slowest handlers: the clerk's 200 notes among them; top=1 lists one row of all.
    let handlers = get_json(addr, "/api/handlers");
    let rows = handlers["handlers"].as_array().unwrap();
    let notes = rows
        .iter()
        .find(|h| h["actor_short"] == "Clerk" && h["message_short"] == "Note")
        .unwrap_or_else(|| panic!("the clerk's notes in {handlers}"));
    assert_eq!(notes["count"], 200);
    assert!(notes["total_ns"].as_u64().unwrap() >= notes["max_ns"].as_u64().unwrap());
    let one = get_json(addr, "/api/handlers?top=1");
    assert_eq!(one["handlers"].as_array().unwrap().len(), 1);
    assert_eq!(one["rows"], handlers["rows"]);
    assert!(one["rows"].as_u64().unwrap() >= 3, "{one}");

    // The waits: alpha on beta, beta on alpha, and the cycle, now and as seen.
    let waits = get_json(addr, "/api/waits");
    let (a, b) = (ids.alpha.as_u64(), ids.beta.as_u64());
    let edges: HashSet<(u64, u64)> = waits["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (id(&w["asker"]), id(&w["target"])))
        .collect();
    assert!(
        edges.contains(&(a, b)) && edges.contains(&(b, a)),
        "{waits}"
    );
    assert_eq!(waits["cycles"], serde_json::json!([[a.min(b), a.max(b)]]));
    assert!(
        waits["cycles_seen"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_array().unwrap().len() == 2),
        "{waits}"
    );
    assert_eq!(waits["actors"][a.to_string()]["short"], "Alpha");
    assert_eq!(waits["actors"][b.to_string()]["short"], "Beta");
    let ping = waits["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| id(&w["asker"]) == a)
        .unwrap();
    assert_eq!(ping["message_short"], "Ping");
}

#[test]
fn bad_input_gets_a_400_of_one_line() {
    let fixture = Fixture::start();
    let addr = fixture.addr();
    let cases = [
        (
            "/api/actors?limit=0",
            "`limit` must be a whole number from 1 to 10000",
        ),
        (
            "/api/actors?limit=abc",
            "`limit` must be a whole number from 1 to 10000",
        ),
        (
            "/api/actors?limit=10001",
            "`limit` must be a whole number from 1 to 10000",
        ),
        ("/api/actors?limit=-3", "`limit` must be a whole number"),
        ("/api/actors?limit=", "`limit` must be a whole number"),
        ("/api/actors?after=garbage", "`after` must be an actor id"),
        ("/api/actors?after=-1", "`after` must be an actor id"),
        (
            "/api/actors?after=99999999999999999999999",
            "`after` must be an actor id",
        ),
        ("/api/actors?after=%31", "`after` must be an actor id"),
        ("/api/actors?limit=1&limit=2", "`limit` is given twice"),
        ("/api/actors?offset=3", "unknown parameter `offset`"),
        (
            "/api/handlers?top=0",
            "`top` must be a whole number from 1 to 1000",
        ),
        ("/api/handlers?top=many", "`top` must be a whole number"),
        (
            "/api/waits?all=1",
            "unknown parameter `all`: this endpoint takes none",
        ),
        ("/api/overview?x", "unknown parameter `x`"),
    ];
    for (path, starts) in cases {
        let reply = get(addr, path);
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
        assert_eq!(reply.content_type, "text/plain; charset=utf-8", "{path}");
        assert!(reply.body.starts_with(starts), "{path}: {}", reply.body);
        assert!(
            reply.body.ends_with('\n') && reply.body.matches('\n').count() == 1,
            "{path}: one line, not {:?}",
            reply.body
        );
    }
    // A long value is quoted in part.
    let long = format!("/api/actors?limit={}", "9".repeat(500));
    let reply = get(addr, &long);
    assert_eq!(reply.status, 400);
    assert!(reply.body.len() < 150, "{}", reply.body);

    let unknown = get(addr, "/api/nothing");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body.matches('\n').count(), 1, "{}", unknown.body);
    // A request addressed to another host name is refused, with one line.
    let foreign = get_as(addr, "/api/overview", "console.example.com");
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert_eq!(foreign.body.matches('\n').count(), 1);
    assert_eq!(get_as(addr, "/api/overview", "localhost").status, 200);
    // The console still answers after all that.
    assert_eq!(get_json(addr, "/api/overview")["observed_actors"], 6);
}

#[test]
fn the_page_is_self_contained() {
    let fixture = Fixture::start();
    let reply = get(fixture.addr(), "/");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "text/html; charset=utf-8");
    let page = reply.body;
    assert!(page.starts_with("<!doctype html>"));
    for attribute in ["src=", "href="] {
        for (at, _) in page.match_indices(attribute) {
            let value = &page[at + attribute.len()..];
            assert!(
                value.starts_with("\"data:"),
                "the page refers to something outside itself: {}",
                &page[at..(at + 60).min(page.len())]
            );
        }
    }
    assert!(!page.contains("innerHTML"), "text goes in as text");
    assert!(
        !page.contains("@import") && !page.contains("url("),
        "no external style"
    );
}

#[test]
fn the_console_refuses_what_it_cannot_serve_and_stops() {
    let plain = System::new();
    let refused = Console::serve(plain.clone(), "127.0.0.1:0".parse().unwrap());
    assert!(
        matches!(refused, Err(ConsoleError::NotObserved)),
        "{refused:?}"
    );
    assert!(matches!(
        Console::router(plain.clone()),
        Err(ConsoleError::NotObserved)
    ));
    plain.shutdown();

    let system = System::builder().workers(1).observe().build().unwrap();
    for public in ["0.0.0.0:0", "192.0.2.1:80", "[::]:0"] {
        let refused = Console::serve(system.clone(), public.parse().unwrap());
        assert!(
            matches!(refused, Err(ConsoleError::NotLoopback(_))),
            "{public}: {refused:?}"
        );
    }
    let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = console.addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert_eq!(console.url(), format!("http://{addr}/"));
    // The port is taken: a second console on it is refused, and says where.
    let taken = Console::serve(system.clone(), addr);
    match taken {
        Err(error @ ConsoleError::Bind { .. }) => {
            assert!(error.to_string().contains(&addr.to_string()), "{error}")
        }
        other => panic!("expected a bind error, not {other:?}"),
    }
    assert_eq!(get_json(addr, "/api/overview")["observed_actors"], 0);
    console.shutdown().unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "the console stopped listening"
    );

    // Dropping the handle stops it too.
    let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = console.addr();
    drop(console);
    assert!(
        TcpStream::connect(addr).is_err(),
        "the dropped console stopped listening"
    );

    // A client that never finishes its request does not hold the console's stop for long.
    let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
    let mut slow = TcpStream::connect(console.addr()).unwrap();
    std::io::Write::write_all(&mut slow, b"GET /api/overview HTTP/1.1\r\nHost: loc").unwrap();
    let idle = TcpStream::connect(console.addr()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50)); // both accepted
    let stopping = std::time::Instant::now();
    console.shutdown().unwrap();
    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(5),
        "stopped in {:?}",
        stopping.elapsed()
    );
    drop((slow, idle));

    // A console outliving its system still answers every endpoint.
    let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
    system.shutdown();
    for path in [
        "/",
        "/api/overview",
        "/api/actors",
        "/api/handlers",
        "/api/waits",
    ] {
        assert_eq!(get(console.addr(), path).status, 200, "{path}");
    }
    assert_eq!(get_json(console.addr(), "/api/overview")["live_actors"], 0);
    console.shutdown().unwrap();
}
