//! Trace contexts across nodes (feature `otel`): one request makes one trace through actors of
//! two systems joined by two nodes, recorded by `tracing-opentelemetry` into the SDK's
//! in-memory exporter; a message sent from no span is the untraced version 1 entry it always
//! was; a node of version 1 and a node of this version talk while nothing is traced; a trace
//! context that does not read never stops its message.

use std::collections::HashMap;
use std::future::IntoFuture;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use opentelemetry::trace::{SpanId, SpanKind, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use troupe::{Actor, Addr, Context, Deferred, DeferredHandler, Handler, Message, System};
use troupe_remote::wire::{put_trace_field, MIN_WIRE_VERSION};
use troupe_remote::{Node, NodeOptions, RefusalKind, RemoteError, RemoteMessage, RemoteRecipient};

use super::{export_counter, opts, peers, raw_client, server, Add, Sum};

/// The tracer provider and the exporter it writes to, installed once as the process's
/// subscriber (a registry with a `tracing-opentelemetry` layer): actors make their spans on
/// their systems' threads, which a subscriber set for one thread would not see. Other tests of
/// this binary make spans into it too; each test here looks only at its own trace.
fn tracing_to_memory() -> &'static (SdkTracerProvider, InMemorySpanExporter) {
    static INSTALLED: OnceLock<(SdkTracerProvider, InMemorySpanExporter)> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("troupe-remote"));
        // Spans only: the events of every test here (NATS's debug events among them) need not
        // go through the layer.
        let spans_only = tracing_subscriber::filter::filter_fn(|m| m.is_span());
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(spans_only).with(layer),
        )
        .expect("no other subscriber in this test binary");
        (provider, exporter)
    })
}

/// The spans of `trace` exported so far.
fn spans_of(trace: TraceId) -> Vec<SpanData> {
    let (provider, exporter) = tracing_to_memory();
    let _ = provider.force_flush();
    exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.span_context.trace_id() == trace)
        .collect()
}

/// The request, asked of `A` (here): answered once the chain has come back.
#[derive(Message)]
#[reply(u64)]
struct Job;

/// `A` to `B` (here), told, with where to answer.
#[derive(Message)]
struct Step(Addr<A>);

/// `B` (here) to `C` (there), told across the nodes.
#[derive(Message, Serialize, Deserialize, Debug)]
struct Note(u64);
impl RemoteMessage for Note {
    const NAME: &'static str = "trace.note";
}

/// `B` (here) to `C` (there), asked across the nodes from an await.
#[derive(Message, Serialize, Deserialize, Debug)]
#[reply(u64)]
struct Check(u64);
impl RemoteMessage for Check {
    const NAME: &'static str = "trace.check";
}

/// `C` to `D` (both there), told.
#[derive(Message)]
struct Audit;

/// `B` to `A`, from the await's continuation.
#[derive(Message)]
struct Done(u64);

struct A {
    b: Addr<B>,
    waiting: Option<Deferred<u64>>,
}
impl Actor for A {}
impl DeferredHandler<Job> for A {
    fn handle(&mut self, _: Job, reply: Deferred<u64>, ctx: &mut Context<Self>) {
        self.waiting = Some(reply);
        self.b.tell(Step(ctx.myself())).unwrap();
    }
}
impl Handler<Done> for A {
    fn handle(&mut self, done: Done, _: &mut Context<Self>) {
        if let Some(reply) = self.waiting.take() {
            let _ = reply.send(done.0);
        }
    }
}

struct B {
    note: RemoteRecipient<Note>,
    check: RemoteRecipient<Check>,
}
impl Actor for B {}
impl Handler<Step> for B {
    fn handle(&mut self, step: Step, ctx: &mut Context<Self>) {
        self.note.tell(Note(40)).unwrap();
        let asked = self.check.ask(Check(1)).into_future();
        let a = step.0;
        ctx.await_then(asked, move |_, _, checked| {
            a.tell(Done(checked.unwrap())).unwrap();
        });
    }
}

struct C {
    noted: u64,
    d: Addr<D>,
}
impl Actor for C {}
impl Handler<Note> for C {
    fn handle(&mut self, note: Note, _: &mut Context<Self>) {
        self.noted += note.0;
    }
}
impl Handler<Check> for C {
    fn handle(&mut self, check: Check, _: &mut Context<Self>) -> u64 {
        self.d.tell(Audit).unwrap();
        self.noted + check.0
    }
}

struct D;
impl Actor for D {}
impl Handler<Audit> for D {
    fn handle(&mut self, _: Audit, _: &mut Context<Self>) {}
}

#[test]
fn one_request_is_one_trace_through_actors_of_two_nodes() {
    tracing_to_memory();
    let access = peers();
    let server = server(&access);

    // There: C, exported, and D, local to it.
    let there = System::builder().trace_messages().build().unwrap();
    let node_there = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let d = there.spawn(D);
    let c = there.spawn(C { noted: 0, d });
    node_there
        .export("trace-c", c)
        .accept::<Note, _>()
        .accept::<Check, _>()
        .start_blocking()
        .unwrap();

    // Here: A and B, and the node B reaches C through.
    let here = System::builder().trace_messages().build().unwrap();
    let node_here = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let b = here.spawn(B {
        note: node_here.recipient("trace-c").unwrap(),
        check: node_here.recipient("trace-c").unwrap(),
    });
    let a = here.spawn(A { b, waiting: None });

    let request = tracing::info_span!("request");
    let trace = request.context().span().span_context().trace_id();
    let request_id = request.context().span().span_context().span_id();
    assert_ne!(trace, TraceId::INVALID, "the request span is recorded");
    let answer = request.in_scope(|| a.ask(Job).wait_timeout(Duration::from_secs(10)));
    assert_eq!(answer, Ok(41));
    drop(request);

    // Every span ends (D's may end after the answer): wait for all nine.
    let want = [
        "request",
        "A Job",
        "B Step",
        "receive trace-c",
        "receive trace-c",
        "C Note",
        "C Check",
        "D Audit",
        "A Done",
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    let spans = loop {
        let spans = spans_of(trace);
        if spans.len() >= want.len() || Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    names.sort_unstable();
    let mut sorted_want = want.to_vec();
    sorted_want.sort_unstable();
    assert_eq!(names, sorted_want, "the spans of the request's trace");

    // Each span's chain of parents, by name, up to the request.
    let by_id: HashMap<SpanId, &SpanData> = spans
        .iter()
        .map(|s| (s.span_context.span_id(), s))
        .collect();
    let chain = |span: &SpanData| -> Vec<String> {
        let mut names = Vec::new();
        let mut at = span.parent_span_id;
        while at != SpanId::INVALID {
            let parent = by_id
                .get(&at)
                .unwrap_or_else(|| panic!("{}: a parent outside the trace", span.name));
            names.push(parent.name.to_string());
            at = parent.parent_span_id;
        }
        names
    };
    let mut chains: Vec<(String, Vec<String>)> = spans
        .iter()
        .filter(|s| s.name != "request")
        .map(|s| (s.name.to_string(), chain(s)))
        .collect();
    chains.sort();
    let path = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let mut expected = vec![
        ("A Job".to_string(), path(&["request"])),
        ("B Step".to_string(), path(&["A Job", "request"])),
        // The far node's span for each message that came, parented to the sending handler's.
        (
            "receive trace-c".to_string(),
            path(&["B Step", "A Job", "request"]),
        ),
        (
            "receive trace-c".to_string(),
            path(&["B Step", "A Job", "request"]),
        ),
        (
            "C Note".to_string(),
            path(&["receive trace-c", "B Step", "A Job", "request"]),
        ),
        (
            "C Check".to_string(),
            path(&["receive trace-c", "B Step", "A Job", "request"]),
        ),
        (
            "D Audit".to_string(),
            path(&["C Check", "receive trace-c", "B Step", "A Job", "request"]),
        ),
        // Told from the await's continuation, in the span of the handler that began it.
        ("A Done".to_string(), path(&["B Step", "A Job", "request"])),
    ];
    expected.sort();
    assert_eq!(chains, expected);
    assert_eq!(chain(by_id[&request_id]), Vec::<String>::new());

    // The receiving spans are the far node's children of a remote parent, and say what came.
    for span in spans.iter().filter(|s| s.name == "receive trace-c") {
        assert!(span.parent_span_is_remote, "{span:?}");
        let attribute = |key: &str| {
            span.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attribute("export").as_deref(), Some("trace-c"));
        // A tell is consumed; an ask is served.
        let kind = match attribute("message").unwrap().as_str() {
            "trace.note" => SpanKind::Consumer,
            "trace.check" => SpanKind::Server,
            other => panic!("{other}"),
        };
        assert_eq!(span.span_kind, kind);
    }
    for name in ["C Note", "C Check", "D Audit"] {
        let span = spans.iter().find(|s| s.name == name).unwrap();
        assert!(!span.parent_span_is_remote, "{name} is a local child");
    }
    assert_eq!(node_there.stats().traces_ignored, 0);
    node_here.close_blocking();
    node_there.close_blocking();
    here.shutdown();
    there.shutdown();
}

/// Receives the frames published to `subject` on a plain client of `node`'s runtime.
fn frames_of(node: &Node, raw: &async_nats::Client, subject: &str) -> async_nats::Subscriber {
    let sub = node.block_on(raw.subscribe(subject.to_string())).unwrap();
    node.block_on(async {
        // The server has the subscription once a probe after it comes back.
        let inbox = raw.new_inbox();
        let mut probe = raw.subscribe(inbox.clone()).await.unwrap();
        raw.publish(inbox, Bytes::new()).await.unwrap();
        probe.next().await.unwrap();
    });
    sub
}

fn next_frame(node: &Node, sub: &mut async_nats::Subscriber) -> Bytes {
    node.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("a frame within 10 s")
            .unwrap()
            .payload
    })
}

#[test]
fn a_message_sent_from_no_span_is_the_untraced_version_1_entry() {
    tracing_to_memory();
    let access = peers();
    let server = server(&access);
    let node = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let raw = raw_client(&node, &access, "raw", &server.url());
    let mut frames = frames_of(&node, &raw, "troupe.x.listener");
    let to = node.recipient::<Add>("listener").unwrap();

    // No span: the frame is version 1, its entry a plain tell, as before traces.
    to.tell(Add(1)).unwrap();
    let plain = next_frame(&node, &mut frames);
    assert_eq!(&plain[..4], b"TR\x01\x01");
    assert_eq!(plain[8], 1, "a Tell entry");
    let mut untraced = b"TR\x01\x01\x01\x00\x00\x00\x01\x08test.add\x01\x00".to_vec();
    untraced.extend_from_slice(&1u32.to_le_bytes());
    untraced.extend(postcard::to_stdvec(&Add(1)).unwrap());
    assert_eq!(&plain[..], &untraced[..], "byte for byte a version 1 frame");

    // A span whose context is recorded: version 2, a traced tell with the span's traceparent.
    let span = tracing::info_span!("sender");
    let context = span.context().span().span_context().clone();
    span.in_scope(|| to.tell(Add(2)).unwrap());
    let traced = next_frame(&node, &mut frames);
    assert_eq!(&traced[..4], b"TR\x02\x01");
    assert_eq!(traced[8], 5, "a TracedTell entry");
    let parent = format!("00-{}-{}-01", context.trace_id(), context.span_id());
    let mut fields = Vec::new();
    assert!(put_trace_field(&mut fields, "traceparent", &parent));
    assert_eq!(
        &traced[9..11],
        &(fields.len() as u16).to_le_bytes(),
        "the trace field's length"
    );
    assert_eq!(&traced[11..11 + fields.len()], &fields[..]);

    // Inside a span that is off: nothing to send.
    let off = tracing::Span::none();
    off.in_scope(|| to.tell(Add(3)).unwrap());
    assert_eq!(&next_frame(&node, &mut frames)[..4], b"TR\x01\x01");
    // A subscription unsubscribes as it drops, on its runtime.
    node.block_on(async move { drop((frames, raw)) });
    node.close_blocking();
}

#[test]
fn nodes_of_version_1_and_2_talk_until_a_message_is_traced() {
    tracing_to_memory();
    let access = peers();
    let server = server(&access);
    let system = System::new();
    let old_options = NodeOptions {
        wire_version: MIN_WIRE_VERSION,
        ..opts(&access, "a")
    };
    let old = Node::connect_blocking(&server.url(), old_options).unwrap();
    let new = Node::connect_blocking(&server.url(), opts(&access, "b")).unwrap();
    let (_, old_handled) = export_counter(&old, &system, "old");
    let (_, new_handled) = export_counter(&new, &system, "new");

    // Untraced, both ways.
    new.recipient::<Add>("old").unwrap().tell(Add(2)).unwrap();
    assert_eq!(new.recipient::<Sum>("old").unwrap().ask(Sum).wait(), Ok(2));
    old.recipient::<Add>("new").unwrap().tell(Add(3)).unwrap();
    assert_eq!(old.recipient::<Sum>("new").unwrap().ask(Sum).wait(), Ok(3));
    // The old node's messages stay untraced even from a span: it speaks version 1 only.
    let span = tracing::info_span!("old sender");
    assert_eq!(
        span.in_scope(|| old.recipient::<Sum>("new").unwrap().ask(Sum).wait()),
        Ok(3)
    );
    // Traced, to the old node: refused there, as a frame of a version it does not read.
    match span.in_scope(|| new.recipient::<Sum>("old").unwrap().ask(Sum).wait()) {
        Err(RemoteError::Refused(r)) => assert_eq!(r.kind, RefusalKind::WireVersion, "{r}"),
        other => panic!("a traced ask to a version 1 node: {other:?}"),
    }
    assert_eq!(old.stats().refused(RefusalKind::WireVersion), 1);
    assert_eq!(old_handled.load(Ordering::Relaxed), 1);
    assert_eq!(new_handled.load(Ordering::Relaxed), 1);
    old.close_blocking();
    new.close_blocking();
    system.shutdown();
}

#[test]
fn a_trace_context_that_does_not_read_is_ignored_and_counted_never_refused() {
    tracing_to_memory();
    let access = peers();
    let server = server(&access);
    let system = System::builder().trace_messages().build().unwrap();
    let node = Node::connect_blocking(&server.url(), opts(&access, "a")).unwrap();
    let (_, handled) = export_counter(&node, &system, "target");
    let raw = raw_client(&node, &access, "raw", &server.url());

    let add = postcard::to_stdvec(&Add(5)).unwrap();
    let tag = |name: &str| {
        let mut t = vec![name.len() as u8];
        t.extend_from_slice(name.as_bytes());
        t.extend_from_slice(&1u16.to_le_bytes());
        t
    };
    let frame = |version: u8, entries: &[Vec<u8>]| {
        let mut f = b"TR".to_vec();
        f.extend_from_slice(&[version, 1]);
        f.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for e in entries {
            f.extend_from_slice(e);
        }
        f
    };
    let traced_tell = |trace: &[u8]| {
        let mut e = vec![5u8];
        e.extend_from_slice(&(trace.len() as u16).to_le_bytes());
        e.extend_from_slice(trace);
        e.extend_from_slice(&tag("test.add"));
        e.extend_from_slice(&(add.len() as u32).to_le_bytes());
        e.extend_from_slice(&add);
        e
    };
    let field = |key: &str, value: &str| {
        let mut f = Vec::new();
        assert!(put_trace_field(&mut f, key, value));
        f
    };
    let unreadable: Vec<Vec<u8>> = vec![
        vec![9, b'x'],                               // a key past the field's end
        vec![1, 0xff, 1, 0, b'v'],                   // not UTF-8
        field("traceparent", "00-not-a-context-01"), // no valid context
        field("tracestate", "k=v"),                  // no traceparent
        field(
            "traceparent",
            "00-00000000000000000000000000000000-0000000000000000-01",
        ), // all-zero ids are invalid
    ];
    let mut entries: Vec<Vec<u8>> = unreadable.iter().map(|t| traced_tell(t)).collect();
    // An empty trace field is no context at all: not counted.
    entries.push(traced_tell(&[]));
    // And a frame of version 1, as a node of that version sends it: read as it always was.
    let mut plain = vec![1u8];
    plain.extend_from_slice(&tag("test.add"));
    plain.extend_from_slice(&(add.len() as u32).to_le_bytes());
    plain.extend_from_slice(&add);
    for f in [frame(2, &entries), frame(1, std::slice::from_ref(&plain))] {
        node.block_on(raw.publish("troupe.x.target", Bytes::from(f)))
            .unwrap();
    }
    // A traced entry in a frame of version 1 is not of that layout: the frame is refused.
    node.block_on(raw.publish(
        "troupe.x.target",
        Bytes::from(frame(1, &[traced_tell(&field("tracestate", "k=v"))])),
    ))
    .unwrap();
    // An ask of version 1 is answered at version 1.
    let mut ask = vec![2u8];
    ask.extend_from_slice(&7u64.to_le_bytes());
    ask.extend_from_slice(&tag("test.sum"));
    ask.extend_from_slice(&0u32.to_le_bytes());
    let answer = node.block_on(async {
        raw.request("troupe.x.target", Bytes::from(frame(1, &[ask])))
            .await
            .unwrap()
            .payload
    });
    assert_eq!(&answer[..4], b"TR\x01\x01", "a version 1 batch");
    assert_eq!(answer[8], 3, "an Ok entry");
    assert_eq!(&answer[9..17], &7u64.to_le_bytes());
    let sum: u64 = postcard::from_bytes(&answer[21..]).unwrap();
    assert_eq!(sum, 5 * 7, "all seven tells were handled before the ask");
    assert_eq!(handled.load(Ordering::Relaxed), 7);
    let stats = node.stats();
    assert_eq!(stats.traces_ignored, unreadable.len() as u64, "{stats:?}");
    assert_eq!(stats.refused(RefusalKind::Malformed), 1, "{stats:?}");
    assert_eq!(stats.refused_total(), 1, "{stats:?}");
    node.close_blocking();
    system.shutdown();
}
