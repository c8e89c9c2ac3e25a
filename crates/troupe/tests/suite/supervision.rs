#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Supervision under failure: restarts, policies, strategies, intensity and escalation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{wait_for, LONG};
use troupe::{
    Actor, Addr, AskError, Context, Failure, Handler, Message, Restart, SpawnOptions, StopReason,
    SupervisorStrategy, System, Terminated,
};

/// Silences the default panic message for panics the tests cause on purpose.
fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if !msg.contains("on purpose") {
            eprintln!("{msg}");
        }
    }));
}

/// Handles numbered jobs; panics on every multiple of `fail_every`.
struct Worker {
    fail_every: u64,
    seen: Arc<Mutex<Vec<u64>>>,
    instances: Arc<AtomicUsize>,
}

impl Actor for Worker {
    fn started(&mut self, _: &mut Context<Self>) {
        self.instances.fetch_add(1, Ordering::SeqCst);
    }
}

struct Job(u64);
impl Message for Job {
    type Reply = ();
}
impl Handler<Job> for Worker {
    fn handle(&mut self, job: Job, ctx: &mut Context<Self>) {
        if job.0 == 0 {
            ctx.stop();
            return;
        }
        if self.fail_every > 0 && job.0.is_multiple_of(self.fail_every) {
            panic!("job {} fails on purpose", job.0);
        }
        self.seen.lock().unwrap().push(job.0);
    }
}

struct Ping;
impl Message for Ping {
    type Reply = usize;
}
impl Handler<Ping> for Worker {
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) -> usize {
        self.instances.load(Ordering::SeqCst)
    }
}

/// Spawns supervised workers with a given strategy, and reports on its own stop.
struct Supervisor {
    strategy: SupervisorStrategy,
    instances: Arc<AtomicUsize>,
}

impl Actor for Supervisor {
    fn started(&mut self, _: &mut Context<Self>) {
        self.instances.fetch_add(1, Ordering::SeqCst);
    }
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        self.strategy
    }
}

struct Hire {
    fail_every: u64,
    seen: Arc<Mutex<Vec<u64>>>,
    instances: Arc<AtomicUsize>,
    restart: Restart,
}
impl Message for Hire {
    type Reply = Addr<Worker>;
}
impl Handler<Hire> for Supervisor {
    fn handle(&mut self, hire: Hire, ctx: &mut Context<Self>) -> Addr<Worker> {
        let Hire {
            fail_every,
            seen,
            instances,
            restart,
        } = hire;
        ctx.spawn_supervised(
            move || Worker {
                fail_every,
                seen: seen.clone(),
                instances: instances.clone(),
            },
            SpawnOptions::new().restart(restart),
        )
    }
}

fn hire(
    boss: &Addr<Supervisor>,
    fail_every: u64,
    restart: Restart,
) -> (Addr<Worker>, Arc<Mutex<Vec<u64>>>, Arc<AtomicUsize>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let instances = Arc::new(AtomicUsize::new(0));
    let worker = boss
        .ask(Hire {
            fail_every,
            seen: seen.clone(),
            instances: instances.clone(),
            restart,
        })
        .wait_timeout(LONG)
        .unwrap();
    (worker, seen, instances)
}

/// A child that panics on every tenth message, under one-for-one: it is restarted each time,
/// no other message is lost, and exactly the right messages are processed, in order.
#[test]
fn one_for_one_restarts_and_loses_nothing_else() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_one().intensity(1_000, Duration::from_secs(60)),
        instances: Arc::default(),
    });
    let (worker, seen, _) = hire(&boss, 10, Restart::Permanent);
    for i in 1..=1_000 {
        worker.tell(Job(i)).unwrap();
    }
    let expected: Vec<u64> = (1..=1_000).filter(|i| i % 10 != 0).collect();
    wait_for("every job", LONG, || {
        seen.lock().unwrap().len() == expected.len()
    });
    assert_eq!(
        *seen.lock().unwrap(),
        expected,
        "each good job once, in order"
    );
    // The first instance plus one per failure; the address never changed.
    assert_eq!(worker.ask(Ping).wait_timeout(LONG), Ok(101));
    assert_eq!(worker.metrics().restarts, 100);
    // Counted when the turn ends, just after the ping's reply left.
    wait_for("900 jobs and the ping counted", LONG, || {
        worker.metrics().processed == 900 + 1
    });
    system.shutdown();
}

/// When the intensity limit is hit, the failure escalates: the supervisor itself fails and its
/// own supervisor's strategy applies (here: a top-level supervisor, which the system stops).
#[test]
fn intensity_limit_escalates() {
    quiet_panics();
    let system = System::new();
    let boss_instances = Arc::new(AtomicUsize::new(0));
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_one().intensity(3, Duration::from_secs(60)),
        instances: boss_instances.clone(),
    });
    let (worker, _, instances) = hire(&boss, 1, Restart::Permanent);
    struct Watcher(Arc<Mutex<Option<StopReason>>>);
    impl Actor for Watcher {}
    impl Handler<Terminated> for Watcher {
        fn handle(&mut self, t: Terminated, _: &mut Context<Self>) {
            *self.0.lock().unwrap() = Some(t.reason);
        }
    }
    struct WatchIt(Addr<Supervisor>);
    impl Message for WatchIt {
        type Reply = ();
    }
    impl Handler<WatchIt> for Watcher {
        fn handle(&mut self, w: WatchIt, ctx: &mut Context<Self>) {
            ctx.watch(&w.0);
        }
    }
    let ended = Arc::new(Mutex::new(None));
    let watcher = system.spawn(Watcher(ended.clone()));
    watcher
        .ask(WatchIt(boss.clone()))
        .wait_timeout(LONG)
        .unwrap();

    // Every job fails: 3 restarts are allowed, the 4th failure escalates.
    for i in 1..=10 {
        let _ = worker.tell(Job(i));
    }
    wait_for("the supervisor to stop", LONG, || {
        ended.lock().unwrap().is_some()
    });
    match ended.lock().unwrap().clone().unwrap() {
        StopReason::Failed(Failure::Escalated { child }) => {
            assert!(matches!(*child, Failure::Panicked(ref m) if m.contains("on purpose")));
        }
        other => panic!("expected an escalation, got {other:?}"),
    }
    assert_eq!(instances.load(Ordering::SeqCst), 4, "first + 3 restarts");
    wait_for("the worker to stop with its supervisor", LONG, || {
        worker.is_stopped()
    });
    system.shutdown();
}

/// Escalation to a supervising grandparent, which restarts the failed supervisor (one-for-one)
/// and, with it, builds fresh children.
#[test]
fn escalation_restarts_the_middle_supervisor() {
    quiet_panics();
    struct Grand {
        middle_instances: Arc<AtomicUsize>,
    }
    impl Actor for Grand {
        fn supervisor_strategy(&self) -> SupervisorStrategy {
            SupervisorStrategy::one_for_one().intensity(10, Duration::from_secs(60))
        }
    }
    struct MakeMiddle;
    impl Message for MakeMiddle {
        type Reply = Addr<Supervisor>;
    }
    impl Handler<MakeMiddle> for Grand {
        fn handle(&mut self, _: MakeMiddle, ctx: &mut Context<Self>) -> Addr<Supervisor> {
            let instances = self.middle_instances.clone();
            ctx.spawn_supervised(
                move || Supervisor {
                    strategy: SupervisorStrategy::one_for_one()
                        .intensity(2, Duration::from_secs(60)),
                    instances: instances.clone(),
                },
                SpawnOptions::new(),
            )
        }
    }
    let system = System::new();
    let middle_instances = Arc::new(AtomicUsize::new(0));
    let grand = system.spawn(Grand {
        middle_instances: middle_instances.clone(),
    });
    let middle = grand.ask(MakeMiddle).wait_timeout(LONG).unwrap();
    let (worker, _, _) = hire(&middle, 1, Restart::Permanent);
    for i in 1..=3 {
        let _ = worker.tell(Job(i));
    }
    wait_for("the middle supervisor to be restarted", LONG, || {
        middle_instances.load(Ordering::SeqCst) == 2
    });
    // Its old child was stopped with it; the restarted supervisor works.
    wait_for("the old worker to stop", LONG, || worker.is_stopped());
    let (fresh, seen, _) = hire(&middle, 0, Restart::Permanent);
    fresh.tell(Job(7)).unwrap();
    wait_for("the fresh worker", LONG, || {
        *seen.lock().unwrap() == vec![7]
    });
    assert!(!middle.is_stopped());
    system.shutdown();
}

fn instances_of(worker: &Addr<Worker>) -> usize {
    worker.ask(Ping).wait_timeout(LONG).unwrap()
}

#[test]
fn one_for_all_restarts_every_child() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_all(),
        instances: Arc::default(),
    });
    let (a, _, _) = hire(&boss, 0, Restart::Permanent);
    let (b, _, _) = hire(&boss, 5, Restart::Permanent);
    let (c, _, _) = hire(&boss, 0, Restart::Permanent);
    for w in [&a, &b, &c] {
        assert_eq!(instances_of(w), 1, "started");
    }
    b.tell(Job(5)).unwrap();
    wait_for("every child restarted", LONG, || {
        [&a, &b, &c].iter().all(|w| instances_of(w) == 2)
    });
    system.shutdown();
}

#[test]
fn rest_for_one_restarts_the_younger_siblings() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::rest_for_one(),
        instances: Arc::default(),
    });
    let (a, _, _) = hire(&boss, 0, Restart::Permanent);
    let (b, _, _) = hire(&boss, 5, Restart::Permanent);
    let (c, _, _) = hire(&boss, 0, Restart::Permanent);
    for w in [&a, &b, &c] {
        assert_eq!(instances_of(w), 1, "started");
    }
    b.tell(Job(5)).unwrap();
    wait_for("b and c restarted", LONG, || {
        instances_of(&b) == 2 && instances_of(&c) == 2
    });
    assert_eq!(instances_of(&a), 1, "the older sibling is left alone");
    system.shutdown();
}

/// Temporary children are never restarted; transient ones only after a failure; permanent ones
/// even after stopping themselves.
#[test]
fn restart_policies() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_one(),
        instances: Arc::default(),
    });
    let (temporary, _, _) = hire(&boss, 3, Restart::Temporary);
    temporary.tell(Job(3)).unwrap();
    wait_for("the temporary child to stop", LONG, || {
        temporary.is_stopped()
    });

    let (transient, seen, _) = hire(&boss, 3, Restart::Transient);
    transient.tell(Job(3)).unwrap();
    transient.tell(Job(4)).unwrap();
    wait_for("the transient child to be restarted", LONG, || {
        *seen.lock().unwrap() == vec![4]
    });
    transient.tell(Job(0)).unwrap(); // stops itself normally: stays stopped
    wait_for("the transient child to stop", LONG, || {
        transient.is_stopped()
    });

    let (permanent, seen, _) = hire(&boss, 0, Restart::Permanent);
    permanent.tell(Job(0)).unwrap(); // stops itself: restarted anyway
    permanent.tell(Job(9)).unwrap();
    wait_for("the permanent child to come back", LONG, || {
        *seen.lock().unwrap() == vec![9]
    });
    assert_eq!(instances_of(&permanent), 2);
    assert!(!permanent.is_stopped());
    system.shutdown();
}

/// The message whose handler panicked fails its asker; messages sent during the restart reach
/// the new instance.
#[test]
fn asker_of_the_failing_message_is_told() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_one(),
        instances: Arc::default(),
    });
    let (worker, seen, _) = hire(&boss, 2, Restart::Permanent);
    assert_eq!(
        worker.ask(Job(2)).wait_timeout(LONG),
        Err(AskError::Panicked)
    );
    for i in [3, 5, 7] {
        worker.tell(Job(i)).unwrap();
    }
    wait_for("the later jobs", LONG, || {
        *seen.lock().unwrap() == vec![3, 5, 7]
    });
    system.shutdown();
}

/// Back-off delays each restart; the child still comes back.
#[test]
fn backoff_delays_restarts() {
    quiet_panics();
    let system = System::new();
    let boss = system.spawn(Supervisor {
        strategy: SupervisorStrategy::one_for_one()
            .backoff(Duration::from_millis(50), Duration::from_millis(200)),
        instances: Arc::default(),
    });
    let (worker, seen, _) = hire(&boss, 2, Restart::Permanent);
    let start = std::time::Instant::now();
    worker.tell(Job(2)).unwrap();
    worker.tell(Job(3)).unwrap();
    wait_for("the restarted worker", LONG, || {
        *seen.lock().unwrap() == vec![3]
    });
    assert!(
        start.elapsed() >= Duration::from_millis(50),
        "restarted before its back-off"
    );
    system.shutdown();
}

/// A top-level actor supervised by the system: restarted in place, messages sent during its
/// back-off reach the new instance; past the intensity limit it stops, failed.
#[test]
fn the_system_supervises_top_level_actors() {
    quiet_panics();
    let system = System::new();
    let instances = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let worker = {
        let (instances, seen) = (instances.clone(), seen.clone());
        system.spawn_supervised(
            move || Worker {
                fail_every: 3,
                seen: seen.clone(),
                instances: instances.clone(),
            },
            SpawnOptions::new().supervision(
                SupervisorStrategy::one_for_one()
                    .intensity(2, Duration::from_secs(60))
                    .backoff(Duration::from_millis(30), Duration::from_millis(30)),
            ),
        )
    };
    for i in 1..=5 {
        worker.tell(Job(i)).unwrap();
    }
    wait_for("jobs 1, 2, 4, 5", LONG, || seen.lock().unwrap().len() == 4);
    assert_eq!(
        *seen.lock().unwrap(),
        [1, 2, 4, 5],
        "only the failing job is lost"
    );
    assert_eq!(worker.ask(Ping).wait_timeout(LONG), Ok(2), "restarted once");
    // Two more failures: the second goes past the limit of 2 restarts.
    worker.tell(Job(6)).unwrap();
    worker.tell(Job(9)).unwrap();
    wait_for("the worker to stop", LONG, || worker.is_stopped());
    assert_eq!(instances.load(Ordering::SeqCst), 3);
    system.shutdown();
}

/// A name is released when its actor begins to stop, not when it finishes (which waits for
/// its children).
#[test]
fn a_stopping_actors_name_is_free_at_once() {
    struct Slow;
    impl Actor for Slow {}
    struct Nap(Duration);
    impl Message for Nap {
        type Reply = ();
    }
    impl Handler<Nap> for Slow {
        fn handle(&mut self, msg: Nap, _: &mut Context<Self>) {
            std::thread::sleep(msg.0);
        }
    }
    struct Parent;
    impl Actor for Parent {}
    struct Child;
    impl Message for Child {
        type Reply = Addr<Slow>;
    }
    impl Handler<Child> for Parent {
        fn handle(&mut self, _: Child, ctx: &mut Context<Self>) -> Addr<Slow> {
            ctx.spawn(Slow)
        }
    }
    let system = System::new();
    let parent = system
        .spawn_named("parent", SpawnOptions::new(), || Parent)
        .unwrap();
    let child = parent.ask(Child).wait_timeout(LONG).unwrap();
    child.tell(Nap(Duration::from_millis(500))).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    parent.stop();
    wait_for("the name to be free", Duration::from_millis(300), || {
        system.lookup::<Parent>("parent").is_none()
    });
    assert_eq!(
        system.live_actors(),
        2,
        "the parent still waits for its busy child"
    );
    system.shutdown();
}
