//! Named metrics through the `metrics` facade (feature `metrics`): what an observed system
//! records as it runs, and what `System::publish_metrics` sets, read back from a recorder.
#![cfg(feature = "metrics")]

use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use troupe::{Actor, Context, Handler, Message, SpawnOptions, System};

/// The process-wide recorder (installed once for the whole test binary).
fn snapshotter() -> &'static Snapshotter {
    static SNAPSHOTTER: std::sync::OnceLock<Snapshotter> = std::sync::OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::set_global_recorder(recorder).expect("no other recorder in this binary");
        snapshotter
    })
}

type Labels = Vec<(String, String)>;

/// What the recorder has seen. Its snapshots hand each value out once (counters and gauges
/// are swapped to zero, histograms drained), so every snapshot is folded in here: counters
/// add up, gauges and histograms keep what the latest snapshot that had them said.
#[derive(Default)]
struct Seen {
    counters: std::collections::HashMap<(String, Labels), u64>,
    gauges: std::collections::HashMap<(String, Labels), f64>,
    histograms: std::collections::HashMap<(String, Labels), Vec<f64>>,
}

fn seen() -> std::sync::MutexGuard<'static, Seen> {
    static SEEN: std::sync::OnceLock<std::sync::Mutex<Seen>> = std::sync::OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    for (key, _, _, value) in snapshotter().snapshot().into_vec() {
        let labels: Labels = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let id = (key.key().name().to_owned(), labels);
        match (key.kind(), value) {
            (MetricKind::Counter, DebugValue::Counter(n)) => {
                *seen.counters.entry(id).or_default() += n
            }
            (MetricKind::Gauge, DebugValue::Gauge(g)) => {
                seen.gauges.insert(id, g.into_inner());
            }
            (MetricKind::Histogram, DebugValue::Histogram(samples)) => seen
                .histograms
                .entry(id)
                .or_default()
                .extend(samples.into_iter().map(|s| s.into_inner())),
            (kind, value) => panic!("{kind:?} with {value:?}"),
        }
    }
    seen
}

fn matches(have: &Labels, want: &[(&str, &str)]) -> bool {
    want.iter()
        .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
}

fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    seen()
        .counters
        .iter()
        .filter(|((n, have), _)| n == name && matches(have, labels))
        .map(|(_, v)| v)
        .sum()
}

/// A gauge as the latest snapshot says (read every gauge of interest from one `seen()`: a
/// snapshot after it reads the gauges drained to zero).
fn gauge(seen: &Seen, name: &str, labels: &[(&str, &str)]) -> f64 {
    seen.gauges
        .iter()
        .filter(|((n, have), _)| n == name && matches(have, labels))
        .map(|(_, v)| v)
        .sum()
}

fn samples(name: &str, labels: &[(&str, &str)]) -> usize {
    seen()
        .histograms
        .iter()
        .filter(|((n, have), _)| n == name && matches(have, labels))
        .map(|(_, v)| v.len())
        .sum()
}

struct Worker;
impl Actor for Worker {}

#[derive(Message)]
struct Job;
impl Handler<Job> for Worker {
    fn handle(&mut self, _: Job, _: &mut Context<Self>) {}
}

#[derive(Message)]
struct Crash;
impl Handler<Crash> for Worker {
    fn handle(&mut self, _: Crash, _: &mut Context<Self>) {
        panic!("crash (on purpose)");
    }
}

/// Answers only once the test lets it (so a timeout always comes first, however late the
/// timer thread runs on a busy machine).
#[derive(Message)]
#[reply(())]
struct Slow(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);
impl Handler<Slow> for Worker {
    fn handle(&mut self, slow: Slow, _: &mut Context<Self>) {
        let _ = slow.0.lock().unwrap().recv();
    }
}

struct Parent;
impl Actor for Parent {
    fn started(&mut self, ctx: &mut Context<Self>) {
        let worker = ctx.spawn_supervised(|| Worker, SpawnOptions::new());
        ctx.register("parent").unwrap();
        let _ = worker;
    }
}

fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_observed_system_records_named_metrics_and_publishes_its_gauges() {
    snapshotter();
    let system = System::builder()
        .name("metrics-test")
        .workers(2)
        .observe()
        .build()
        .unwrap();
    let sys = ("system", "metrics-test");
    let worker = system
        .spawn_named("worker-1", SpawnOptions::new(), || Worker)
        .unwrap();
    let _parent = system.spawn(Parent);
    for _ in 0..50 {
        worker.tell(Job).unwrap();
    }
    let worker_type = std::any::type_name::<Worker>();
    let job = std::any::type_name::<Job>();
    let labels = [
        sys,
        ("actor_type", worker_type),
        ("name", "worker-1"),
        ("pool", "default"),
    ];
    eventually("50 jobs counted", || {
        counter(
            "troupe_messages_handled_total",
            &[labels[0], labels[1], labels[2], labels[3], ("message", job)],
        ) == 50
    });
    assert_eq!(
        samples(
            "troupe_handler_seconds",
            &[labels[1], labels[2], ("message", job)]
        ),
        50
    );
    // A failure and the restart that follows it, at the child's labels (no name).
    let child = system
        .actors(None, 100)
        .unwrap()
        .actors
        .into_iter()
        .find(|a| a.parent.is_some())
        .unwrap();
    assert!(child.names.is_empty());
    let _ = child;
    worker.tell(Crash).unwrap();
    eventually("a failure counted", || {
        counter("troupe_actor_failures_total", &labels) == 1
    });
    // A top-level actor stops on failure: ask a fresh one for a timeout.
    let slow = system
        .spawn_named("slow", SpawnOptions::new(), || Worker)
        .unwrap();
    let (release, held) = std::sync::mpsc::channel();
    let timed_out = slow
        .ask_timeout(Slow(std::sync::Mutex::new(held)), Duration::from_millis(1))
        .wait();
    assert_eq!(
        timed_out,
        Err(troupe::AskError::Timeout(Duration::from_millis(1)))
    );
    release.send(()).unwrap();
    let slow_labels = [sys, ("name", "slow")];
    eventually("a timeout counted", || {
        counter("troupe_asks_timed_out_total", &slow_labels) == 1
    });

    system.publish_metrics().unwrap();
    {
        let seen = seen();
        assert_eq!(gauge(&seen, "troupe_actors", &[sys, ("name", "slow")]), 1.0);
        assert_eq!(
            gauge(&seen, "troupe_actors", &[sys, ("name", "parent")]),
            1.0
        );
        assert!(gauge(&seen, "troupe_live_actors", &[sys]) >= 3.0);
        assert_eq!(
            gauge(&seen, "troupe_pool_workers", &[sys, ("pool", "default")]),
            2.0
        );
    }
    // A worker publishes its turns every 1024 turns and before it parks: on a busy machine it
    // may still be searching for work, its few turns unpublished, when the first call reads.
    eventually("the pool's turns published", || {
        system.publish_metrics().unwrap();
        counter("troupe_pool_turns_total", &[sys, ("pool", "default")]) > 0
    });
    slow.stop();
    slow.stopped().wait().unwrap();
    eventually("the slow one gone", || {
        system.actor(slow.id()).unwrap().is_none()
    });
    system.publish_metrics().unwrap();
    let seen = seen();
    assert_eq!(gauge(&seen, "troupe_actors", &[sys, ("name", "slow")]), 0.0);
    assert_eq!(
        gauge(&seen, "troupe_actors", &[sys, ("name", "parent")]),
        1.0
    );
    drop(seen);
    system.shutdown();
}

#[test]
fn publishing_an_unobserved_system_is_refused() {
    let system = System::builder().workers(1).build().unwrap();
    assert_eq!(
        system.publish_metrics(),
        Err(troupe::ObserveError::NotObserved)
    );
    system.shutdown();
}
