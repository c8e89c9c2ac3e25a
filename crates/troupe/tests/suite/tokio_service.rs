#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! troupe inside a tokio service: the service's runtime, handlers in its context, shutdown from
//! async code, a cloneable handle, and no thread more than it needs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{threads_named, wait_for, LONG};
use troupe::{Actor, Context, Handler, Message, Placement, SpawnOptions, System};

/// Fetches with a timeout made in the handler itself (a tokio timer needs a runtime context).
struct Fetcher {
    results: Arc<Mutex<Vec<Result<u32, ()>>>>,
}
impl Actor for Fetcher {}

struct Fetch {
    delay: Duration,
    limit: Duration,
}
impl Message for Fetch {
    type Reply = ();
}
impl Handler<Fetch> for Fetcher {
    fn handle(&mut self, msg: Fetch, ctx: &mut Context<Self>) {
        let slow = async move {
            tokio::time::sleep(msg.delay).await;
            7
        };
        // Written as a user would: the timeout is created here, on the worker.
        ctx.pipe(tokio::time::timeout(msg.limit, slow), |r| {
            Fetched(r.map_err(|_| ()))
        });
    }
}
struct Fetched(Result<u32, ()>);
impl Message for Fetched {
    type Reply = ();
}
impl Handler<Fetched> for Fetcher {
    fn handle(&mut self, msg: Fetched, _: &mut Context<Self>) {
        self.results.lock().unwrap().push(msg.0);
    }
}

#[test]
fn handlers_run_in_the_runtime_context() {
    let system = System::new();
    let results = Arc::new(Mutex::new(Vec::new()));
    let fetcher = system.spawn(Fetcher {
        results: results.clone(),
    });
    fetcher
        .tell(Fetch {
            delay: Duration::from_millis(1),
            limit: Duration::from_secs(5),
        })
        .unwrap();
    fetcher
        .tell(Fetch {
            delay: Duration::from_secs(5),
            limit: Duration::from_millis(10),
        })
        .unwrap();
    wait_for("both fetches", LONG, || results.lock().unwrap().len() == 2);
    let mut got = results.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [Ok(7), Err(())]);
    system.shutdown();
}

#[test]
fn a_system_on_the_callers_runtime_adds_only_its_workers_and_timer() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let system = System::builder()
        .name("tkrt")
        .workers(2)
        .tokio_handle(runtime.handle().clone())
        .build()
        .unwrap();
    // Two workers, their pool's monitor (narrowing) and the timer: no runtime of its own, no
    // blocking pool yet. (A thread takes its name once it runs.)
    wait_for("the threads to start", LONG, || threads_named("tkrt") == 4);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        threads_named("tkrt"),
        4,
        "workers, their monitor and the timer only"
    );
    let results = Arc::new(Mutex::new(Vec::new()));
    let fetcher = system.spawn(Fetcher {
        results: results.clone(),
    });
    fetcher
        .tell(Fetch {
            delay: Duration::from_millis(1),
            limit: Duration::from_secs(5),
        })
        .unwrap();
    wait_for("the fetch, on the caller's runtime", LONG, || {
        results.lock().unwrap().len() == 1
    });
    assert_eq!(threads_named("tkrt"), 4);
    // The blocking pool starts with its first actor.
    let _blocking = system.spawn_with(
        Fetcher {
            results: Arc::default(),
        },
        SpawnOptions::new().placement(Placement::Named("blocking")),
    );
    wait_for("the blocking pool", LONG, || {
        threads_named("tkrt-blocking") == 8
    });
    system.shutdown();
    wait_for("every thread joined", LONG, || threads_named("tkrt") == 0);
}

#[test]
fn shutdown_from_async_code_completes_without_panicking() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // A system with a runtime of its own, shut down and dropped inside async code (dropping
        // a runtime there is what tokio forbids).
        let own = System::builder().name("tkown").build().unwrap();
        let results = Arc::new(Mutex::new(Vec::new()));
        let fetcher = own.spawn(Fetcher {
            results: results.clone(),
        });
        fetcher
            .tell(Fetch {
                delay: Duration::from_millis(1),
                limit: Duration::from_secs(5),
            })
            .unwrap();
        while results.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        own.shutdown_async().await;
        assert_eq!(own.live_actors(), 0);
        assert!(fetcher.is_stopped());
        drop(own);

        // On the caller's runtime, from a clone; the other clone sees it.
        let system = System::builder()
            .name("tkclone")
            .tokio_handle(tokio::runtime::Handle::current())
            .build()
            .unwrap();
        let clone = system.clone();
        let idle = system.spawn(Fetcher {
            results: Arc::default(),
        });
        clone.shutdown_async().await;
        assert!(idle.is_stopped());
        assert_eq!(system.live_actors(), 0);
        // Shutting down again is harmless.
        system.shutdown_async().await;

        // The last handle dropped inside async code: shut down in the background.
        let dropped = System::builder().name("tkdrop").build().unwrap();
        let orphan = dropped.spawn(Fetcher {
            results: Arc::default(),
        });
        drop(dropped);
        while !orphan.is_stopped() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    wait_for("every thread joined", LONG, || {
        threads_named("tkown") + threads_named("tkclone") + threads_named("tkdrop") == 0
    });
}

/// Answers at once, or after `delay` (the reply deferred to a timer: no worker is held).
struct Echo;
impl Actor for Echo {}

struct Answer {
    n: u64,
    delay: Option<Duration>,
}
impl Message for Answer {
    type Reply = u64;
}
struct Late(u64, troupe::Deferred<u64>);
impl Message for Late {
    type Reply = ();
}
impl troupe::DeferredHandler<Answer> for Echo {
    fn handle(&mut self, msg: Answer, reply: troupe::Deferred<u64>, ctx: &mut Context<Self>) {
        match msg.delay {
            Some(delay) => {
                ctx.send_after(delay, Late(msg.n, reply));
            }
            None => {
                let _ = reply.send(msg.n);
            }
        }
    }
}
impl Handler<Late> for Echo {
    fn handle(&mut self, msg: Late, _: &mut Context<Self>) {
        let _ = msg.1.send(msg.0);
    }
}

/// A polled ask looks for its reply for a few microseconds before it registers the task's
/// waker (`reply/spin.rs`), with a budget that shrinks when replies come late. Quick replies,
/// then replies later than any spin (the budget runs down to nothing), then quick ones again
/// (a probe restores it): every ask is answered with its own reply, on a runtime of one thread
/// and on the current-thread runtime, and several tasks asking at once each get theirs.
#[test]
fn awaited_asks_are_answered_whether_the_reply_is_quick_or_late() {
    let system = System::new();
    let echo = system.spawn(Echo);
    let phases = [
        (0..200, None),
        (200..230, Some(Duration::from_millis(2))),
        (230..1_000, None),
    ];
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for runtime in [&multi, &current] {
        let echo = echo.clone();
        let phases = phases.clone();
        runtime.block_on(async move {
            for (range, delay) in phases {
                for n in range {
                    let got = tokio::time::timeout(LONG, echo.ask(Answer { n, delay }))
                        .await
                        .expect("answered in time");
                    assert_eq!(got, Ok(n));
                }
            }
        });
    }
    // Several tasks at once, some replies late: each gets its own.
    multi.block_on(async {
        let tasks: Vec<_> = (0..8u64)
            .map(|t| {
                let echo = echo.clone();
                tokio::spawn(async move {
                    for i in 0..100u64 {
                        let n = t * 1_000 + i;
                        let delay = (i % 10 == 0).then_some(Duration::from_millis(1));
                        assert_eq!(echo.ask(Answer { n, delay }).await, Ok(n));
                    }
                })
            })
            .collect();
        for task in tasks {
            tokio::time::timeout(LONG, task)
                .await
                .expect("in time")
                .expect("the task did not panic");
        }
    });
    system.shutdown();
}
