//! Remote actors over a real `nats-server` started on a free loopback port (installed by
//! `scripts/install-nats-server.sh` when missing): tell and ask across nodes and processes,
//! ordering, batching, watch, typed errors, hostile frames, bounded work per frame and per
//! sender, and the server's users, permissions and TLS. Every server here lets in only the
//! users of the test (nkeys made at run time). The trace contexts that travel with messages
//! have a module of their own (`trace`).

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use troupe::{Actor, AskError, Context, Handler, Message, System};
use troupe_remote::server::{Access, NatsServer, Role};
use troupe_remote::wire::WIRE_VERSION;
use troupe_remote::{
    Credentials, Down, Node, NodeOptions, RefusalKind, RemoteError, RemoteMessage,
};

mod trace;

#[derive(Message, Serialize, Deserialize, Debug)]
struct Add(u64);
impl RemoteMessage for Add {
    const NAME: &'static str = "test.add";
}

#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct Sum;
impl RemoteMessage for Sum {
    const NAME: &'static str = "test.sum";
}

/// The order check: each tell carries its sequence number from one sender.
#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(Result<u64, String>)]
struct Seq(u64);
impl RemoteMessage for Seq {
    const NAME: &'static str = "test.seq";
}

#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct Boom;
impl RemoteMessage for Boom {
    const NAME: &'static str = "test.boom";
}

/// Accepted by nobody: a type the exported actor does not know.
#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct Stranger;
impl RemoteMessage for Stranger {
    const NAME: &'static str = "test.stranger";
}

/// `Sum` at a version the exporter does not speak.
#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct SumV2;
impl RemoteMessage for SumV2 {
    const NAME: &'static str = "test.sum";
    const VERSION: u16 = 2;
}

/// Sleeps this many milliseconds in the handler, then answers: an ask that stays in flight.
#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct Nap(u64);
impl RemoteMessage for Nap {
    const NAME: &'static str = "test.nap";
}

struct Counter {
    sum: u64,
    next_seq: u64,
    handled: Arc<AtomicU64>,
}

impl Counter {
    fn new(handled: Arc<AtomicU64>) -> Self {
        Self {
            sum: 0,
            next_seq: 0,
            handled,
        }
    }
}

impl Actor for Counter {}
impl Handler<Add> for Counter {
    fn handle(&mut self, m: Add, _: &mut Context<Self>) {
        self.sum += m.0;
        self.handled.fetch_add(1, Ordering::Relaxed);
    }
}
impl Handler<Sum> for Counter {
    fn handle(&mut self, _: Sum, _: &mut Context<Self>) -> u64 {
        self.sum
    }
}
impl Handler<Seq> for Counter {
    fn handle(&mut self, m: Seq, _: &mut Context<Self>) -> Result<u64, String> {
        if m.0 != self.next_seq {
            return Err(format!("expected {}, got {}", self.next_seq, m.0));
        }
        self.next_seq += 1;
        Ok(m.0)
    }
}
impl Handler<Nap> for Counter {
    fn handle(&mut self, m: Nap, _: &mut Context<Self>) -> u64 {
        std::thread::sleep(Duration::from_millis(m.0));
        m.0
    }
}
impl Handler<Boom> for Counter {
    fn handle(&mut self, _: Boom, _: &mut Context<Self>) -> u64 {
        panic!("boom (a test panic)")
    }
}

/// The users of most tests: whole troupe nodes, each under its own name.
fn peers() -> Access {
    Access::new(["a", "b", "c", "raw"].map(Role::peer), false).expect("nkeys")
}

/// A server that lets in only `access`'s users.
fn server(access: &Access) -> NatsServer {
    NatsServer::secured(access, false).expect("nats-server")
}

/// The options of a node signed in as `role`.
fn opts(access: &Access, role: &str) -> NodeOptions {
    NodeOptions {
        ask_timeout: Duration::from_secs(10),
        ..access.options(role)
    }
}

/// A plain NATS client signed in as `role`, on `node`'s runtime.
fn raw_client(node: &Node, access: &Access, role: &str, url: &str) -> async_nats::Client {
    let options = access.options(role).nats_options().unwrap();
    node.block_on(options.connect(url)).unwrap()
}

fn export_counter(
    node: &Node,
    system: &System,
    name: &str,
) -> (troupe::Addr<Counter>, Arc<AtomicU64>) {
    let handled = Arc::new(AtomicU64::new(0));
    let addr = system.spawn(Counter::new(handled.clone()));
    node.export(name, addr.clone())
        .accept::<Add, _>()
        .accept::<Sum, _>()
        .accept::<Seq, _>()
        .accept::<Boom, _>()
        .accept::<Nap, _>()
        .start_blocking()
        .expect("export");
    (addr, handled)
}

#[test]
fn tell_and_ask_across_nodes_keep_order_and_batch() {
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let b = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let (_addr, handled) = export_counter(&a, &system, "counter");

    let add = b.recipient::<Add>("counter").unwrap();
    let sum = b.recipient::<Sum>("counter").unwrap();
    // Light traffic: one tell then an ask, answered at once (no waiting for a batch to fill).
    add.tell(Add(5)).unwrap();
    let start = Instant::now();
    let first = sum.ask(Sum).wait();
    assert_eq!(first, Ok(5), "a: {:?}, b: {:?}", a.stats(), b.stats());
    assert!(start.elapsed() < Duration::from_secs(2));

    // Heavy traffic: many small tells leave in few NATS messages, all arrive, the ask after
    // them sees all of them (one sender's tells and asks keep their order).
    let n = 50_000u64;
    let frames_before = b.stats().frames_out;
    for i in 0..n {
        add.tell(Add(i)).unwrap();
    }
    assert_eq!(sum.ask(Sum).wait(), Ok(5 + n * (n - 1) / 2));
    let frames = b.stats().frames_out - frames_before;
    assert!(
        frames < n / 10,
        "{n} tells and an ask went out in {frames} frames: not batched"
    );
    assert_eq!(
        handled.load(Ordering::Relaxed),
        n + 1,
        "every tell handled once"
    );
    assert_eq!(a.stats().refused_total(), 0);

    // Order of tells and asks interleaved.
    let seq = b.recipient::<Seq>("counter").unwrap();
    let asks: Vec<_> = (0..2_000).map(|i| seq.ask(Seq(i))).collect();
    for (i, ask) in asks.into_iter().enumerate() {
        assert_eq!(ask.wait(), Ok(Ok(i as u64)));
    }
    a.close_blocking();
    b.close_blocking();
    system.shutdown();
}

#[test]
fn typed_errors_from_the_far_side() {
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let b = Node::connect_blocking(
        &server.url(),
        NodeOptions {
            ask_timeout: Duration::from_millis(500),
            ..access.options("b")
        },
    )
    .unwrap();
    let (addr, _) = export_counter(&a, &system, "errors");
    let (fragile, _) = export_counter(&a, &system, "fragile");

    // A panicking handler: the asker gets the in-process error (and the actor, unsupervised,
    // stops: its export goes with it).
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let boom = b.recipient::<Boom>("fragile").unwrap().ask(Boom).wait();
    std::panic::set_hook(previous);
    assert_eq!(boom, Err(RemoteError::Actor(AskError::Panicked)));
    fragile
        .stopped()
        .wait_timeout(Duration::from_secs(10))
        .unwrap();

    // A type the actor does not accept, and a type at another version.
    match b
        .recipient::<Stranger>("errors")
        .unwrap()
        .ask(Stranger)
        .wait()
    {
        Err(RemoteError::Refused(r)) => assert_eq!(r.kind, RefusalKind::UnknownType),
        other => panic!("unknown type: {other:?}"),
    }
    match b.recipient::<SumV2>("errors").unwrap().ask(SumV2).wait() {
        Err(RemoteError::Refused(r)) => assert_eq!(r.kind, RefusalKind::TypeVersion),
        other => panic!("type version: {other:?}"),
    }
    assert_eq!(a.stats().refused(RefusalKind::UnknownType), 1);
    assert_eq!(a.stats().refused(RefusalKind::TypeVersion), 1);

    // A name nobody exports: unreachable, within the ask timeout.
    let start = Instant::now();
    assert_eq!(
        b.recipient::<Sum>("nobody").unwrap().ask(Sum).wait(),
        Err(RemoteError::Unreachable("nobody".into()))
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    assert!(matches!(
        b.recipient::<Sum>("bad name!"),
        Err(RemoteError::InvalidName(_))
    ));

    // A peer speaking another wire version gets a clear refusal, not garbage.
    let old = Node::connect_blocking(
        &server.url(),
        NodeOptions {
            wire_version: WIRE_VERSION + 1,
            ..opts(&access, "c")
        },
    )
    .unwrap();
    match old.recipient::<Sum>("errors").unwrap().ask(Sum).wait() {
        Err(RemoteError::Refused(r)) => assert_eq!(r.kind, RefusalKind::WireVersion, "{r}"),
        other => panic!("wire version: {other:?}"),
    }
    assert_eq!(a.stats().refused(RefusalKind::WireVersion), 1);

    // The (now) stopped actor: asks fail as in-process asks do, or find nobody once the
    // export is gone.
    addr.stop();
    addr.stopped()
        .wait_timeout(Duration::from_secs(10))
        .unwrap();
    let after = b.recipient::<Sum>("errors").unwrap().ask(Sum).wait();
    assert!(
        matches!(
            after,
            Err(RemoteError::Actor(AskError::Stopped)) | Err(RemoteError::Unreachable(_))
        ),
        "{after:?}"
    );
    a.close_blocking();
    b.close_blocking();
    old.close_blocking();
    system.shutdown();
}

#[test]
fn hostile_frames_are_refused_counted_and_harmless() {
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let (_addr, handled) = export_counter(&a, &system, "target");
    let b = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();

    let tag = |name: &str, version: u16| {
        let mut t = vec![name.len() as u8];
        t.extend_from_slice(name.as_bytes());
        t.extend_from_slice(&version.to_le_bytes());
        t
    };
    let batch = |entries: &[Vec<u8>]| {
        let mut f = b"TR".to_vec();
        f.push(WIRE_VERSION);
        f.push(1);
        f.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for e in entries {
            f.extend_from_slice(e);
        }
        f
    };
    let tell = |name: &str, version: u16, payload: &[u8]| {
        let mut e = vec![1u8];
        e.extend_from_slice(&tag(name, version));
        e.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        e.extend_from_slice(payload);
        e
    };
    let mut good = Vec::new();
    good.extend(postcard::to_stdvec(&Add(7)).unwrap());
    let mut oversized = vec![1u8];
    oversized.extend_from_slice(&tag("test.add", 1));
    oversized.extend_from_slice(&u32::MAX.to_le_bytes());
    let cases: Vec<(Vec<u8>, RefusalKind)> = vec![
        (b"".to_vec(), RefusalKind::Truncated),
        (b"TR".to_vec(), RefusalKind::Truncated),
        (b"XXXXXXXX".to_vec(), RefusalKind::Malformed),
        (b"TR\x01\x63".to_vec(), RefusalKind::Malformed),
        (
            b"TR\x09\x01\x01\x00\x00\x00".to_vec(),
            RefusalKind::WireVersion,
        ),
        (batch(&[vec![1u8, 200]]), RefusalKind::Truncated),
        (
            batch(&[tell("test.nope", 1, &good)]),
            RefusalKind::UnknownType,
        ),
        (
            batch(&[tell("test.add", 9, &good)]),
            RefusalKind::TypeVersion,
        ),
        (
            batch(&[tell("test.add", 1, &[0xff; 12])]),
            RefusalKind::Decode,
        ),
        (batch(&[oversized]), RefusalKind::Oversized),
        (batch(&[vec![7u8]]), RefusalKind::Malformed),
    ];
    let raw = raw_client(&a, &access, "raw", &server.url());
    for (frame, _) in &cases {
        a.block_on(raw.publish("troupe.x.target", Bytes::from(frame.clone())))
            .unwrap();
    }
    // A refused frame with a reply subject is answered with a Refused frame.
    let answer = a.block_on(async {
        let reply = raw
            .request(
                "troupe.x.target",
                Bytes::from_static(b"TR\x09\x01\x01\x00\x00\x00"),
            )
            .await
            .unwrap();
        reply.payload
    });
    assert_eq!(&answer[..4], b"TR\x01\x05", "a Refused frame");
    // A good frame after all that is still served.
    a.block_on(raw.publish(
        "troupe.x.target",
        Bytes::from(batch(&[tell("test.add", 1, &good)])),
    ))
    .unwrap();
    // Two connections are not ordered with each other, and `flush` only empties the socket:
    // the server has handled the raw frames once a probe sent after them on the same
    // connection comes back.
    a.block_on(async {
        let inbox = raw.new_inbox();
        let mut probe = raw.subscribe(inbox.clone()).await.unwrap();
        raw.publish(inbox, Bytes::new()).await.unwrap();
        futures_util::StreamExt::next(&mut probe).await.unwrap();
    });
    assert_eq!(b.recipient::<Sum>("target").unwrap().ask(Sum).wait(), Ok(7));
    assert_eq!(
        handled.load(Ordering::Relaxed),
        1,
        "only the good tell was handled"
    );
    let stats = a.stats();
    for kind in [
        RefusalKind::Truncated,
        RefusalKind::Malformed,
        RefusalKind::WireVersion,
        RefusalKind::UnknownType,
        RefusalKind::TypeVersion,
        RefusalKind::Decode,
        RefusalKind::Oversized,
    ] {
        let expected = cases.iter().filter(|(_, k)| *k == kind).count() as u64
            + u64::from(kind == RefusalKind::WireVersion);
        assert_eq!(stats.refused(kind), expected, "{kind:?}: {stats:?}");
    }
    // Garbage on the asker's reply subject is refused too.
    let subscribers_reply = format!("{}.{}", b.options().inbox_prefix, b.id());
    a.block_on(raw.publish(
        subscribers_reply,
        Bytes::from_static(b"TR\x01\x01\x05\x00\x00\x00"),
    ))
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.stats().refused(RefusalKind::Truncated) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(b.stats().refused(RefusalKind::Truncated), 1);
    drop(raw);
    a.close_blocking();
    b.close_blocking();
    system.shutdown();
}

#[test]
fn watch_sees_stop_unexport_and_absence() {
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let b = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let (addr, _) = export_counter(&a, &system, "watched");
    let _ = export_counter(&a, &system, "unexported");

    assert_eq!(b.block_on(b.locate("watched")), Ok(a.id().to_string()));
    let watch = b.block_on(b.watch("watched")).unwrap();
    addr.stop();
    assert_eq!(
        watch.wait_timeout(Duration::from_secs(10)),
        Some(Down::Stopped)
    );

    let watch = b.block_on(b.watch("unexported")).unwrap();
    assert!(a.unexport("unexported"));
    assert_eq!(
        watch.wait_timeout(Duration::from_secs(10)),
        Some(Down::Unexported)
    );

    assert!(matches!(
        b.block_on(b.watch("never-exported")),
        Err(RemoteError::Unreachable(_))
    ));
    a.close_blocking();
    b.close_blocking();
    system.shutdown();
}

/// The exporting side of the cross-process tests, run in a child process (this test binary,
/// started again with `TROUPE_REMOTE_CHILD` set): exports a counter, prints READY, and serves
/// until killed.
#[test]
#[ignore = "run as a child process by the cross-process tests"]
fn child_exporter() {
    let Ok(url) = std::env::var("TROUPE_REMOTE_CHILD") else {
        return;
    };
    let seed = std::env::var("TROUPE_REMOTE_CHILD_SEED").expect("the child's nkey file");
    let system = System::new();
    let options = NodeOptions {
        credentials: Credentials::NkeyFile(seed.into()),
        inbox_prefix: "_INBOX.c".into(),
        ..NodeOptions::default()
    };
    let node = Node::connect_blocking(&url, options).unwrap();
    let _ = export_counter(&node, &system, "child.counter");
    println!("READY");
    std::thread::sleep(Duration::from_secs(600));
}

/// Starts the child exporter, signed in as role `c`.
fn start_child(url: &str, access: &Access) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_exporter", "--ignored", "--nocapture"])
        .env("TROUPE_REMOTE_CHILD", url)
        .env("TROUPE_REMOTE_CHILD_SEED", access.seed_file("c"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child process");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("READY") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the child process exported its counter");
    child
}

/// Kills the child when the test ends, passed or failed.
struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn another_process_serves_and_its_death_is_seen_within_the_bound() {
    let access = peers();
    let server = server(&access);
    let mut child = KillOnDrop(start_child(&server.url(), &access));
    let node = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let add = node.recipient::<Add>("child.counter").unwrap();
    let sum = node.recipient::<Sum>("child.counter").unwrap();
    for i in 1..=1000 {
        add.tell(Add(i)).unwrap();
    }
    assert_eq!(sum.ask(Sum).wait(), Ok(500_500));

    let watch = node.block_on(node.watch("child.counter")).unwrap();
    let killed = Instant::now();
    child.0.kill().unwrap(); // SIGKILL: no goodbye
    let down = watch.wait_timeout(Duration::from_secs(10));
    let noticed = killed.elapsed();
    assert!(matches!(down, Some(Down::Unreachable { .. })), "{down:?}");
    // The documented bound: the silence limit plus one heartbeat (and scheduling slack).
    let bound =
        node.options().silence_limit() + node.options().heartbeat + Duration::from_millis(500);
    assert!(
        noticed <= bound,
        "noticed after {noticed:?}, bound {bound:?}"
    );
    eprintln!("a killed process was noticed after {noticed:?}");
    // Asks now find nobody.
    assert!(matches!(
        sum.ask(Sum).timeout(Duration::from_millis(300)).wait(),
        Err(RemoteError::Unreachable(_))
    ));
    node.close_blocking();
}

#[test]
fn a_killed_nats_node_of_a_cluster_does_not_stop_the_traffic() {
    let access = peers();
    let mut servers =
        NatsServer::secured_cluster(3, &access, false).expect("a 3-node nats cluster");
    let urls = |order: &[usize]| {
        order
            .iter()
            .map(|i| servers[*i].url())
            .collect::<Vec<_>>()
            .join(",")
    };
    let system = System::new();
    // Each node knows every server, and starts on a different one.
    let a = Node::connect_blocking(&urls(&[0, 1, 2]), opts(&access, "a")).unwrap();
    let b = Node::connect_blocking(&urls(&[1, 2, 0]), opts(&access, "b")).unwrap();
    let (_addr, handled) = export_counter(&a, &system, "clustered");
    let add = b.recipient::<Add>("clustered").unwrap();
    let sum = b.recipient::<Sum>("clustered").unwrap();
    // The route between servers forms shortly after they start: wait until an ask gets through.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sum
        .ask(Sum)
        .timeout(Duration::from_millis(500))
        .wait()
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the cluster never carried an ask"
        );
    }
    let mut expected = 0;
    for round in 0..40u64 {
        if round == 10 {
            servers[0].kill(); // the exporter's server
        }
        add.tell(Add(1)).unwrap();
        expected += 1;
        std::thread::sleep(Duration::from_millis(25));
    }
    // Tells published while a client reconnects may be lost (NATS is at-most-once); asks
    // succeed again once both have reconnected.
    let deadline = Instant::now() + Duration::from_secs(30);
    let total = loop {
        match sum.ask(Sum).timeout(Duration::from_secs(1)).wait() {
            Ok(total) => break total,
            Err(e) => assert!(Instant::now() < deadline, "no answer after the kill: {e}"),
        }
    };
    assert!(total <= expected && total >= 1, "{total} of {expected}");
    let handled_before = handled.load(Ordering::Relaxed);
    for _ in 0..100 {
        add.tell(Add(1)).unwrap();
    }
    assert_eq!(
        sum.ask(Sum).wait(),
        Ok(total + 100),
        "after reconnecting, nothing is lost"
    );
    assert_eq!(handled.load(Ordering::Relaxed), handled_before + 100);
    eprintln!("{total} of {expected} tells sent around the kill arrived");
    a.close_blocking();
    b.close_blocking();
    system.shutdown();
}

#[test]
fn work_per_frame_and_per_sender_is_bounded() {
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(
        &server.url(),
        NodeOptions {
            max_frame_entries: 100,
            max_asks_per_sender: 10,
            max_asks_in_flight: 20,
            ..opts(&access, "a")
        },
    )
    .unwrap();
    let (_addr, handled) = export_counter(&a, &system, "bounded");
    let b = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let c = Node::connect_blocking(&server.url(), opts(&access, "c")).unwrap();

    // Thirty asks that each hold the actor 100 ms, in one frame from one sender: ten are
    // handled, the other twenty are refused at once, unhandled.
    let nap = b.recipient::<Nap>("bounded").unwrap();
    let asks: Vec<_> = (0..30).map(|_| nap.ask(Nap(100))).collect();
    // Another sender still gets its share while those ten are in flight.
    let other = c.recipient::<Nap>("bounded").unwrap().ask(Nap(0));
    let started = Instant::now();
    let mut answered = 0;
    let mut overloaded = 0;
    for ask in asks {
        match ask.wait() {
            Ok(100) => answered += 1,
            Err(RemoteError::Refused(r)) if r.kind == RefusalKind::Overloaded => overloaded += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((answered, overloaded), (10, 20));
    assert_eq!(other.wait(), Ok(0), "the other sender is served");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the refusals and the ten answers came within the asks' time-out"
    );
    assert_eq!(a.stats().refused(RefusalKind::Overloaded), 20);

    // A frame announcing more entries than the exporter takes is refused whole, before any
    // entry is read, and its sender told so.
    let raw = raw_client(&a, &access, "raw", &server.url());
    let mut frame = b"TR".to_vec();
    frame.push(WIRE_VERSION);
    frame.push(1);
    frame.extend_from_slice(&101u32.to_le_bytes());
    let answer = a.block_on(async {
        raw.request("troupe.x.bounded", Bytes::from(frame))
            .await
            .unwrap()
            .payload
    });
    assert_eq!(
        &answer[..5],
        b"TR\x01\x05\x07",
        "a Refused frame, oversized"
    );
    assert!(String::from_utf8_lossy(&answer).contains("101 entries"));

    // A sender seals its frames at its own limit, so a sender with the exporter's limit is
    // never refused: a thousand tells leave in at least ten frames, and all arrive.
    let d = Node::connect_blocking(
        &server.url(),
        NodeOptions {
            max_frame_entries: 100,
            ..opts(&access, "c")
        },
    )
    .unwrap();
    let before = handled.load(Ordering::Relaxed);
    let frames_before = d.stats().frames_out;
    let add = d.recipient::<Add>("bounded").unwrap();
    for i in 0..1000 {
        add.tell(Add(i)).unwrap();
    }
    assert!(d
        .recipient::<Sum>("bounded")
        .unwrap()
        .ask(Sum)
        .wait()
        .is_ok());
    assert!(d.stats().frames_out - frames_before >= 10);
    assert_eq!(handled.load(Ordering::Relaxed) - before, 1000);
    assert_eq!(a.stats().refused(RefusalKind::Oversized), 1);
    for node in [a, b, c, d] {
        node.close_blocking();
    }
    system.shutdown();
}

#[test]
fn the_server_lets_in_only_its_users_and_each_only_where_its_role_allows() {
    let access = Access::new(
        [
            Role::peer("server"),
            // May ask one name only, and read its own answers.
            Role::new("client").publish(["troupe.x.open"]),
        ],
        false,
    )
    .unwrap();
    let server = server(&access);
    let system = System::new();
    let exporter = Node::connect_blocking(&server.url(), opts(&access, "server")).unwrap();
    export_counter(&exporter, &system, "open");
    export_counter(&exporter, &system, "closed");

    // No credentials, or a key the server does not know: not let in.
    match Node::connect_blocking(&server.url(), NodeOptions::default()) {
        Err(RemoteError::Connect { detail, .. }) => {
            assert!(detail.to_lowercase().contains("authori"), "{detail}")
        }
        other => panic!(
            "a connection without credentials: {:?}",
            other.map(|n| n.id().to_string())
        ),
    }
    let stranger = Access::new([Role::peer("server")], false).unwrap();
    assert!(matches!(
        Node::connect_blocking(&server.url(), stranger.options("server")),
        Err(RemoteError::Connect { .. })
    ));

    // The client asks what it may ask, and gets its answer on its own inbox.
    let client = Node::connect_blocking(&server.url(), opts(&access, "client")).unwrap();
    let open = client.recipient::<Sum>("open").unwrap();
    assert_eq!(open.ask(Sum).wait(), Ok(0));
    assert_eq!(
        client.stats().denied,
        0,
        "a client that exports nothing sends no heartbeat"
    );

    // A tell to a name it may not publish to is refused by the server, and said so.
    client
        .recipient::<Add>("closed")
        .unwrap()
        .tell(Add(1))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while client.stats().denied == 0 {
        assert!(Instant::now() < deadline, "no permissions error");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        exporter.recipient::<Sum>("closed").unwrap().ask(Sum).wait(),
        Ok(0),
        "nothing reached the actor"
    );

    // Nor may it read others' answers: a subscription to the server's inbox is refused.
    let (tx, rx) = std::sync::mpsc::channel();
    let options = access
        .options("client")
        .nats_options()
        .unwrap()
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(event.to_string());
            }
        });
    let snoop = client.block_on(options.connect(server.url())).unwrap();
    let sub = client.block_on(snoop.subscribe("_INBOX.server.>")).unwrap();
    let said = loop {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(e) if e.to_lowercase().contains("permissions violation") => break e,
            Ok(_) => {}
            Err(_) => panic!("no permissions error"),
        }
    };
    assert!(said.contains("_INBOX.server.>"), "{said}");
    // A subscription tells the connection it goes when dropped, on the connection's runtime.
    client.block_on(async move { drop(sub) });
    exporter.close_blocking();
    client.close_blocking();
    system.shutdown();
}

#[test]
fn over_tls_asks_work_and_a_node_that_does_not_trust_the_server_is_refused() {
    let access = Access::new([Role::peer("a"), Role::peer("b")], true).unwrap();
    let server = server(&access);
    let system = System::new();
    let a = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    export_counter(&a, &system, "secret");
    let b = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let add = b.recipient::<Add>("secret").unwrap();
    add.tell(Add(41)).unwrap();
    add.tell(Add(1)).unwrap();
    assert_eq!(
        b.recipient::<Sum>("secret").unwrap().ask(Sum).wait(),
        Ok(42)
    );

    // The right key but not the authority: the server's certificate is not trusted.
    let untrusting = NodeOptions {
        tls_ca: None,
        ..access.options("b")
    };
    assert!(matches!(
        Node::connect_blocking(&server.url(), untrusting),
        Err(RemoteError::Connect { .. })
    ));
    // A node that demands TLS of a server without it is refused too.
    let plain_access = peers();
    let plain = NatsServer::secured(&plain_access, false).unwrap();
    let demanding = NodeOptions {
        tls_ca: access.ca().map(Into::into),
        ..plain_access.options("a")
    };
    assert!(matches!(
        Node::connect_blocking(&plain.url(), demanding),
        Err(RemoteError::Connect { .. })
    ));
    a.close_blocking();
    b.close_blocking();
    system.shutdown();
}
