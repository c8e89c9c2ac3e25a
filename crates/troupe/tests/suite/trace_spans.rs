//! `trace_messages`: every handled message runs in a `troupe.handle` span whose parent is the
//! span it was sent from. One request from a span of the test's own goes through three actors
//! by ask, tell, a timer, a piped future and an await's continuation; a layer of the test's
//! records each span with its parent, and every handler's span must lead back to the request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use troupe::{Actor, Addr, Context, Deferred, DeferredHandler, Handler, Message, System};

use crate::common::LONG;

/// A span as the layer saw it made: its own serial number (the registry's ids are reused once a
/// span closes; these are not), its parent's, its name and its fields.
#[derive(Clone, Debug)]
struct Seen {
    serial: u64,
    parent: Option<u64>,
    name: &'static str,
    fields: HashMap<String, String>,
}

/// A span's serial number, kept in its extensions.
struct Serial(u64);

#[derive(Default)]
struct Recorded {
    next: u64,
    spans: Vec<Seen>,
    /// Serial numbers of the spans closed.
    closed: std::collections::HashSet<u64>,
}

/// Records every span made (events are off: the layer wants none of them).
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Recorded>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_span() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, _: LayerContext<'_, S>) -> bool {
        metadata.is_span()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Serial>().map(|s| s.0));
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut recorded = self.0.lock().unwrap();
        recorded.next += 1;
        let serial = recorded.next;
        recorded.spans.push(Seen {
            serial,
            parent,
            name: attrs.metadata().name(),
            fields,
        });
        drop(recorded);
        span.extensions_mut().insert(Serial(serial));
    }

    fn on_close(&self, id: Id, ctx: LayerContext<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let serial = span.extensions().get::<Serial>().map(|s| s.0);
        if let Some(serial) = serial {
            self.0.lock().unwrap().closed.insert(serial);
        }
    }
}

/// The recorder, installed once as the process's subscriber: the actors' spans are made on the
/// system's threads, which a subscriber set for this thread only would not see.
fn recorder() -> &'static Recorder {
    static RECORDER: OnceLock<Recorder> = OnceLock::new();
    RECORDER.get_or_init(|| {
        let recorder = Recorder::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(recorder.clone()),
        )
        .expect("no other subscriber in this test binary");
        recorder
    })
}

/// The request, asked of `A`: answered once the whole chain has run.
#[derive(Message)]
#[reply(u32)]
struct Job;

/// `A` to `B`, told, with where to answer.
#[derive(Message)]
struct Step(Addr<A>);

/// `B` to itself, by a timer.
#[derive(Message)]
struct Tick;

/// `B` to itself, by a piped future.
#[derive(Message)]
struct Fetched(u32);

/// `B` to `C`, asked from an await.
#[derive(Message)]
#[reply(u32)]
struct Check(u32);

/// `B` to `A`, from the await's continuation: the chain is done.
#[derive(Message)]
struct Done(u32);

struct A {
    b: Addr<B>,
    waiting: Option<Deferred<u32>>,
}
impl Actor for A {}
impl DeferredHandler<Job> for A {
    fn handle(&mut self, _: Job, reply: Deferred<u32>, ctx: &mut Context<Self>) {
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
    a: Option<Addr<A>>,
    c: Addr<C>,
}
impl Actor for B {}
impl Handler<Step> for B {
    fn handle(&mut self, step: Step, ctx: &mut Context<Self>) {
        self.a = Some(step.0);
        ctx.send_after(Duration::from_millis(2), Tick);
    }
}
impl Handler<Tick> for B {
    fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
        ctx.pipe(
            async {
                tokio::time::sleep(Duration::from_millis(2)).await;
                20
            },
            Fetched,
        );
    }
}
impl Handler<Fetched> for B {
    fn handle(&mut self, fetched: Fetched, ctx: &mut Context<Self>) {
        let asked = self.c.ask(Check(fetched.0));
        ctx.await_then(asked, |b, _, checked| {
            let a = b.a.as_ref().expect("set by the step");
            a.tell(Done(checked.unwrap())).unwrap();
        });
    }
}

struct C;
impl Actor for C {}
impl Handler<Check> for C {
    fn handle(&mut self, check: Check, _: &mut Context<Self>) -> u32 {
        check.0 + 1
    }
}

#[test]
fn every_handler_span_leads_back_to_the_request_through_ask_tell_timer_pipe_and_await() {
    let recorder = recorder();
    let system = System::builder().trace_messages().build().unwrap();
    let c = system.spawn(C);
    let b = system.spawn(B { a: None, c });
    let a = system.spawn(A { b, waiting: None });

    let request = tracing::info_span!("request");
    let answer = request.in_scope(|| a.ask(Job).wait_timeout(LONG));
    assert_eq!(answer, Ok(21));
    drop(request);

    let spans = recorder.0.lock().unwrap().spans.clone();
    let by_serial: HashMap<u64, &Seen> = spans.iter().map(|s| (s.serial, s)).collect();
    // The request: the latest root span of that name (another test's would be older).
    let request = spans
        .iter()
        .rev()
        .find(|s| s.name == "request" && s.parent.is_none())
        .expect("the request span");
    let chain_of = |span: &Seen| -> Vec<String> {
        let mut names = Vec::new();
        let mut at = span.parent;
        while let Some(serial) = at {
            let parent = by_serial[&serial];
            names.push(
                parent
                    .fields
                    .get("otel.name")
                    .cloned()
                    .unwrap_or_else(|| parent.name.to_string()),
            );
            at = parent.parent;
        }
        names
    };
    let leads_to_request = |span: &Seen| {
        let mut at = span.parent;
        while let Some(serial) = at {
            if serial == request.serial {
                return true;
            }
            at = by_serial[&serial].parent;
        }
        false
    };
    let handled: Vec<&Seen> = spans
        .iter()
        .filter(|s| s.name == "troupe.handle" && leads_to_request(s))
        .collect();
    let mut got: Vec<(String, Vec<String>)> = handled
        .iter()
        .map(|s| (s.fields["otel.name"].clone(), chain_of(s)))
        .collect();
    got.sort();
    let chain = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let mut want = vec![
        ("A Job".to_string(), chain(&["request"])),
        ("B Step".to_string(), chain(&["A Job", "request"])),
        // The timer's message, sent from the handler that set it.
        ("B Tick".to_string(), chain(&["B Step", "A Job", "request"])),
        // The piped future's result, from the handler that piped it.
        (
            "B Fetched".to_string(),
            chain(&["B Tick", "B Step", "A Job", "request"]),
        ),
        // Asked by the handler that began the await.
        (
            "C Check".to_string(),
            chain(&["B Fetched", "B Tick", "B Step", "A Job", "request"]),
        ),
        // Told by the await's continuation, which runs in the span of the handler that began it.
        (
            "A Done".to_string(),
            chain(&["B Fetched", "B Tick", "B Step", "A Job", "request"]),
        ),
    ];
    want.sort();
    assert_eq!(got, want);
    // Each span says which actor and which message.
    for span in &handled {
        let short = |field: &str| {
            let full = &span.fields[field];
            full.rsplit("::").next().unwrap().to_string()
        };
        assert_eq!(
            format!("{} {}", short("actor_type"), short("message")),
            span.fields["otel.name"]
        );
        assert!(span.fields.contains_key("actor"), "{span:?}");
    }
    // A piped result's time is its message type's too, not that of the runtime's wrapper.
    let stats = system.handler_stats().unwrap();
    let fetched = stats.iter().find(|s| s.message.ends_with("::Fetched"));
    assert_eq!(fetched.map(|s| s.count), Some(1), "{stats:?}");
    system.shutdown();
}

#[test]
fn without_trace_messages_handlers_make_no_spans() {
    let recorder = recorder();
    let system = System::new();
    let c = system.spawn(C);
    let request = tracing::info_span!("untraced request");
    assert_eq!(
        request.in_scope(|| c.ask(Check(1)).wait_timeout(LONG)),
        Ok(2)
    );
    let spans = recorder.0.lock().unwrap().spans.clone();
    let request = spans
        .iter()
        .rev()
        .find(|s| s.name == "untraced request")
        .expect("the request span");
    assert!(
        spans.iter().all(|s| s.parent != Some(request.serial)),
        "a span under an untraced system's request"
    );
    system.shutdown();
}

/// Tells itself the next bounce until the count runs out, then tells the test.
struct Bouncer {
    done: std::sync::mpsc::Sender<()>,
}
impl Actor for Bouncer {}

#[derive(Message)]
struct Bounce(u32);
impl Handler<Bounce> for Bouncer {
    fn handle(&mut self, m: Bounce, ctx: &mut Context<Self>) {
        if m.0 == 0 {
            let _ = self.done.send(());
        } else {
            ctx.myself().tell(Bounce(m.0 - 1)).unwrap();
        }
    }
}

/// A message loop (an actor telling itself 1,000 times) is cut into traces of at most
/// `TRACE_DEPTH` messages, each later one following from the one before: no endless trace whose
/// spans could never close (a ring of 100,000 hops overflowed the stack closing one).
#[test]
fn a_message_loop_is_cut_into_traces_that_close() {
    let recorder = recorder();
    let system = System::builder()
        .workers(2)
        .trace_messages()
        .build()
        .unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let bouncer = system.spawn(Bouncer { done });
    let start = tracing::info_span!("loop");
    start.in_scope(|| bouncer.tell(Bounce(1_000)).unwrap());
    finished.recv_timeout(LONG).expect("the loop ends");
    drop(start);
    bouncer.stop();
    bouncer.stopped().wait().unwrap();
    system.shutdown();
    let recorded = recorder.0.lock().unwrap();
    let bounces: Vec<&Seen> = recorded
        .spans
        .iter()
        .filter(|s| {
            s.fields
                .get("message")
                .is_some_and(|m| m.ends_with("Bounce"))
        })
        .collect();
    assert_eq!(bounces.len(), 1_001);
    let by_serial: HashMap<u64, &Seen> = recorded.spans.iter().map(|s| (s.serial, s)).collect();
    let depth = |seen: &Seen| {
        let mut depth = 0;
        let mut at = seen.parent;
        while let Some(parent) = at {
            depth += 1;
            at = by_serial.get(&parent).and_then(|p| p.parent);
        }
        depth
    };
    let deepest = bounces.iter().map(|s| depth(s)).max().unwrap();
    // The first trace hangs under the test's span; the later ones start at their root.
    assert_eq!(deepest, troupe::TRACE_DEPTH as usize);
    let roots = bounces.iter().filter(|s| s.parent.is_none()).count();
    assert_eq!(roots, 1_001 / (troupe::TRACE_DEPTH as usize + 1));
    let open: Vec<u64> = bounces
        .iter()
        .map(|s| s.serial)
        .filter(|serial| !recorded.closed.contains(serial))
        .collect();
    assert!(open.is_empty(), "{} bounce spans never closed", open.len());
}
