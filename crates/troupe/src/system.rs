//! The [`System`]: a cheap, cloneable handle to the worker pools, the timer wheel, the async
//! runtime and the actors on them; spawning top-level actors; shutting everything down.
//!
//! Shutdown asks every top-level actor to stop (each stops its children first), waits until
//! the count of live actors reaches zero, then stops and joins the worker threads, the timer
//! thread, the system's own async runtime (if it has one) and the threads of thread-backed
//! actors. It can be waited for from a thread ([`System::shutdown`]) or from async code
//! ([`System::shutdown_async`]). Where waiting would block something that must keep running
//! (inside an actor, which cannot stop while its handler waits; inside an async runtime), it
//! begins the same way and leaves the waiting and joining to a background thread.
//!
//! # Pools
//! A system has a `default` pool (one worker per core, or `TROUPE_WORKERS`), a `blocking` pool
//! for actors that must call blocking code, and any named pools the builder adds. Each pool has
//! its own threads and queues, so a pool busy with slow or blocking work cannot delay actors on
//! the others. Pools other than `default` start their threads when their first actor is spawned.
//!
//! # Async runtime
//! `ctx.pipe` and `ctx.await_then` run futures on a tokio runtime, and handlers run inside its
//! context (so `tokio::time::timeout(..)` or a `TcpStream::connect(..)` can be made in a
//! handler). Give the service's own runtime with [`SystemBuilder::tokio_handle`]; otherwise the
//! system starts a small one of its own (`io_threads`, default 1).

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::actor::Actor;
use crate::addr::Addr;
use crate::error::{BuildError, ShutdownError};
use crate::metrics::PoolMetrics;
use crate::names::RegistryError;
use crate::role;
use crate::runtime::{Host, PoolEntry, SystemShared};
use crate::scheduler::{Pool, PoolConfig, TasksHelp};
use crate::signal::Signal;
use crate::spawn::{self, Placement, SpawnOptions};
use crate::timer::{SimulatedClock, TimerService};
use crate::watch::Observer;

/// The environment variable that sets the default pool's worker count (like Go's
/// `GOMAXPROCS`), unless the builder sets it.
///
/// ```
/// // In a deployment: TROUPE_WORKERS=4 ./service
/// assert_eq!(troupe::WORKERS_ENV, "TROUPE_WORKERS");
/// let system = troupe::System::builder().workers(2).build().unwrap(); // the builder wins
/// assert_eq!(system.workers(), 2);
/// system.shutdown();
/// ```
pub const WORKERS_ENV: &str = "TROUPE_WORKERS";

/// Configures and builds a [`System`].
///
/// ```
/// let system = troupe::System::builder()
///     .workers(2)
///     .throughput(64)
///     .pool("io", 4, 16)
///     .build()
///     .unwrap();
/// system.shutdown();
/// ```
#[derive(Debug, Clone)]
pub struct SystemBuilder {
    workers: Option<usize>,
    throughput: usize,
    name: String,
    blocking_workers: usize,
    io_threads: usize,
    tokio: Option<tokio::runtime::Handle>,
    pools: Vec<(String, usize, usize)>,
    /// Observed (`Some`), and with a span per message (`Some(true)`).
    observe: Option<bool>,
    /// See [`SystemBuilder::waiters_help`].
    waiters_help: bool,
    /// See [`SystemBuilder::tasks_help`].
    tasks_help: TasksHelp,
    /// See [`SystemBuilder::narrowing`].
    narrowing: bool,
}

impl Default for SystemBuilder {
    fn default() -> Self {
        Self {
            workers: None,
            throughput: 64,
            name: "troupe".to_owned(),
            blocking_workers: 8,
            io_threads: 1,
            tokio: None,
            pools: Vec::new(),
            observe: None,
            waiters_help: true,
            tasks_help: TasksHelp::WhileShort,
            narrowing: std::env::var_os("TROUPE_NARROWING").is_none_or(|v| v != "0"),
        }
    }
}

impl SystemBuilder {
    /// Worker threads in the default pool (default: the `TROUPE_WORKERS` environment
    /// variable if set, else one per available core).
    ///
    /// ```
    /// let system = troupe::System::builder().workers(3).build().unwrap();
    /// assert_eq!(system.workers(), 3);
    /// system.shutdown();
    /// ```
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Messages an actor may handle in one turn before yielding its worker to others
    /// (default 64; Akka calls this the dispatcher's `throughput`).
    ///
    /// ```
    /// // Lower latency for many small actors; higher for throughput-bound ones.
    /// let system = troupe::System::builder().throughput(16).build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn throughput(mut self, messages: usize) -> Self {
        self.throughput = messages;
        self
    }

    /// Prefix of thread names: workers are `<name>-<i>` (and `<name>-<pool>-<i>`), thread-backed
    /// actors `<name>-actor-<id>` (default `troupe`).
    ///
    /// ```
    /// let system = troupe::System::builder().name("orders").build().unwrap();
    /// println!("{system:?}"); // System { name: "orders", .. }; threads orders-0, orders-1, ...
    /// system.shutdown();
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Threads of the `blocking` pool, for actors that call blocking code (default 8, started
    /// when the first actor is placed there).
    ///
    /// ```
    /// use troupe::{Actor, Placement, SpawnOptions, System};
    /// struct FileWriter;
    /// impl Actor for FileWriter {}
    /// let system = System::builder().blocking_workers(2).build().unwrap();
    /// system.spawn_with(FileWriter, SpawnOptions::new().placement(Placement::Named("blocking")));
    /// let blocking = system.pool_metrics().into_iter().find(|p| p.name == "blocking").unwrap();
    /// assert_eq!((blocking.started, blocking.workers), (true, 2));
    /// system.shutdown();
    /// ```
    pub fn blocking_workers(mut self, workers: usize) -> Self {
        self.blocking_workers = workers;
        self
    }

    /// Threads of the system's own async runtime, behind `Context::pipe` and `await_then`
    /// (default 1). Not used with [`tokio_handle`](SystemBuilder::tokio_handle).
    ///
    /// ```
    /// let system = troupe::System::builder().io_threads(2).build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn io_threads(mut self, threads: usize) -> Self {
        self.io_threads = threads;
        self
    }

    /// Runs `pipe` and `await_then` futures on this tokio runtime (typically the service's own,
    /// `tokio::runtime::Handle::current()`), and handlers in its context, instead of starting a
    /// runtime of the system's own.
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new().unwrap();
    /// let system = troupe::System::builder()
    ///     .tokio_handle(runtime.handle().clone())
    ///     .build()
    ///     .unwrap();
    /// system.shutdown();
    /// ```
    pub fn tokio_handle(mut self, handle: tokio::runtime::Handle) -> Self {
        self.tokio = Some(handle);
        self
    }

    /// Adds a named pool with its own `workers` threads and `throughput`, for
    /// `Placement::Named(name)`; its threads start when its first actor is spawned.
    ///
    /// ```
    /// use troupe::{Actor, Placement, SpawnOptions, System};
    /// struct Query;
    /// impl Actor for Query {}
    /// let system = System::builder().pool("db", 2, 8).build().unwrap();
    /// // Actors waiting on the database cannot stall those on the default pool.
    /// system.spawn_with(Query, SpawnOptions::new().placement(Placement::Named("db")));
    /// system.shutdown();
    /// ```
    pub fn pool(mut self, name: impl Into<String>, workers: usize, throughput: usize) -> Self {
        self.pools.push((name.into(), workers, throughput));
        self
    }

    /// The default pool's worker count: the builder's, else `TROUPE_WORKERS`, else one per
    /// core.
    fn default_workers(&self) -> Result<usize, BuildError> {
        if let Some(workers) = self.workers {
            return Ok(workers);
        }
        match std::env::var(WORKERS_ENV) {
            Ok(value) => value.trim().parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                BuildError::Config(format!(
                    "{WORKERS_ENV} must be a whole number of worker threads, at least 1 (it is `{value}`)"
                ))
            }),
            Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        }
    }

    /// Observes the system: it keeps a directory of its live actors and what each is doing
    /// ([`System::actors`]), times every handler by message type ([`System::handler_stats`]),
    /// and follows the asks actors wait on, naming a cycle of them as it forms
    /// ([`System::waits`], [`System::wait_cycles`]). Off by default: an unobserved system's
    /// actors carry none of it and its sends take their usual path. On, a message costs a box
    /// and two clock reads, and a spawn an insert into one ordered map (BENCHMARKS.md has the
    /// figures).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::builder().observe().build().unwrap();
    /// let counter = system.spawn(Counter(0));
    /// counter.tell(Add(1)).unwrap();
    /// assert_eq!(counter.ask(Get).wait(), Ok(1));
    /// let page = system.actors(None, 100).unwrap();
    /// let me = page.actors.iter().find(|a| a.id == counter.id()).unwrap();
    /// assert!(me.type_name.ends_with("Counter"));
    /// system.shutdown();
    /// ```
    pub fn observe(mut self) -> Self {
        self.observe.get_or_insert(false);
        self
    }

    /// Observes the system ([`observe`](SystemBuilder::observe)) and runs every handler in a
    /// `tracing` span (`troupe.handle`, with the actor's type, id and the message's type)
    /// whose parent is the span the message was sent from: the handler that told or asked it,
    /// the task that asked from outside, the handler that set the timer, piped the future or
    /// attached the stream that delivers it. With `tracing-opentelemetry`, one request becomes
    /// one trace through every actor it touches (and across processes with `troupe-remote`).
    ///
    /// ```
    /// let system = troupe::System::builder().trace_messages().build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn trace_messages(mut self) -> Self {
        self.observe = Some(true);
        self
    }

    /// Whether a plain thread that waits for a reply (`Ask::wait`, or an ask awaited in
    /// [`System::block_on`]) may run, itself, the turn of the actor it asked, when it scheduled
    /// that turn and no worker has taken it yet: most often the very turn that computes its
    /// reply (default: yes). A task of another executor (a tokio task awaiting an ask) does
    /// as [`tasks_help`](Self::tasks_help) says (by default while turns are short): its
    /// thread has other tasks, which a handler that sleeps or hangs would hold up.
    ///
    /// A waiting thread that helps needs no worker to be woken and is not woken itself, so an
    /// ask from outside costs no hand-over between threads: on a machine whose cores are all
    /// busy, where each hand-over waits for the OS to give the woken thread a core, that is the
    /// difference between millions of asks a second and tens of thousands. Such a turn runs as
    /// on a worker (in the system's async runtime, a blocking wait inside it refused, a panic
    /// caught at its end), but on the waiting thread. Say no if handlers depend on running on
    /// the pool's own threads (their names, thread-locals, CPU affinity). Waits with a deadline
    /// (`wait_timeout`, an awaited `ask_timeout`) never help (a turn could outlast the
    /// deadline), nor do actor threads, workers, or anything on the `blocking` pool.
    ///
    /// ```
    /// let system = troupe::System::builder().waiters_help(false).build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn waiters_help(mut self, help: bool) -> Self {
        self.waiters_help = help;
        self
    }

    /// Whether an async task awaiting an ask (a tokio task, or one of any executor) may run,
    /// on its own thread, the turn of the actor it asked, as a waiting thread does
    /// ([`waiters_help`](Self::waiters_help)): when the task scheduled that turn itself and no
    /// worker has taken it yet (it does so before it looks for the reply).
    ///
    /// By default (neither yes nor no said) tasks do **while turns are short**: each run of
    /// turns a task makes is timed, and once two in a row on one thread held it for a
    /// millisecond or more, tasks stop running that pool's actors for good
    /// ([`PoolMetrics::tasks_help`](crate::PoolMetrics::tasks_help) turns false, and a warning
    /// is logged). A turn run by a task holds up every other task of its thread while it runs,
    /// so a handler that sleeps, blocks or computes for long holds them twice, then never
    /// again (twice, because the OS taking the core from the thread in the middle of one short
    /// turn makes that one look long). In exchange an ask from a task costs no hand-over
    /// between threads, which on a machine whose cores are all busy is what an ask costs: each
    /// hand-over waits for the OS to give the woken thread a core (`troupe-bench --contention
    /// 2 ask`: 3.8-4.1 M asks a second from a task that helps, 0.2-0.95 M from one that may
    /// not).
    ///
    /// Say `false` if a handler of the system's pools may sleep or block even once where a
    /// task's thread must never wait (one thread reading a network connection), or if
    /// handlers depend on running on the pool's own threads (their names, thread-locals);
    /// [`Ask::without_help`](crate::Ask::without_help) says it for one ask. Say `true` to let
    /// tasks help whatever their turns take. Waits with a deadline (an awaited
    /// `ask_timeout`) never help, nor does anything on the `blocking` pool, nor a task polling
    /// for an actor's end ([`Addr::stopped`](crate::Addr::stopped)); a task polled in
    /// [`System::block_on`] helps as a waiting thread, whatever this says.
    ///
    /// ```
    /// let system = troupe::System::builder().tasks_help(false).build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn tasks_help(mut self, help: bool) -> Self {
        self.tasks_help = if help {
            TasksHelp::Always
        } else {
            TasksHelp::Never
        };
        self
    }

    /// Whether a pool of two workers or more runs on only as many of them as handle the most
    /// messages (default: yes). Such a pool starts on one worker; a monitor thread per pool
    /// measures the messages handled every few milliseconds, now and then (first after ~40 ms
    /// of work) tries one worker fewer or more, and keeps what handles clearly more; the workers it sets aside hand back what they hold and park. Where actors
    /// mostly pass messages (and every message that crosses between cores moves cache lines)
    /// fewer workers often handle more; where handlers do real work, more do. A turn that
    /// holds its worker for long while work waits widens the pool at once. The blocking pool
    /// never narrows. The default can be turned off without a rebuild by setting the
    /// `TROUPE_NARROWING` environment variable to `0` (this method wins over it).
    ///
    /// ```
    /// let system = troupe::System::builder().workers(2).narrowing(false).build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn narrowing(mut self, narrowing: bool) -> Self {
        self.narrowing = narrowing;
        self
    }

    /// Starts the threads (the default pool's, the timer's, and the async runtime's unless one
    /// was given). Every setting is checked first.
    ///
    /// ```
    /// let system = troupe::System::builder().workers(2).build()?;
    /// system.shutdown();
    /// assert!(troupe::System::builder().throughput(0).build().is_err()); // checked before any thread starts
    /// # Ok::<(), troupe::BuildError>(())
    /// ```
    pub fn build(self) -> Result<System, BuildError> {
        let pools = self.pool_plan()?;
        if self.tokio.is_none() && (self.io_threads == 0 || self.io_threads > MAX_THREADS) {
            return Err(BuildError::Config(format!(
                "the async runtime needs 1 to {MAX_THREADS} threads (asked for {})",
                self.io_threads
            )));
        }

        let (io, own_runtime) = match &self.tokio {
            Some(handle) => (handle.clone(), None),
            None => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(self.io_threads)
                    .thread_name(format!("{}-io", self.name))
                    .enable_all()
                    .build()
                    .map_err(BuildError::Thread)?;
                (runtime.handle().clone(), Some(runtime))
            }
        };
        let entries = self.pool_entries(pools, &io);
        let default = Pool::start(&entries[0].config().clone())?;
        let timer_service = TimerService::start(&self.name)?;
        let observer = self
            .observe
            .map(|spans| Arc::new(Observer::new(&self.name, spans)));
        let shared = Arc::new(SystemShared::new(
            self.name,
            entries,
            Ok(default),
            timer_service.handle(),
            io,
            observer,
        ));
        Ok(System::from_parts(shared, timer_service, own_runtime))
    }

    /// A system run by `host` (a simulation) instead of threads: its pools are the host's, its
    /// timers on `clock`, its futures on the host's tasks in the context of `io`. Every setting
    /// is checked as `build` checks it.
    pub(crate) fn build_hosted(
        self,
        host: Arc<dyn Host>,
        io: tokio::runtime::Handle,
        clock: Arc<SimulatedClock>,
    ) -> Result<System, BuildError> {
        if self.tokio.is_some() {
            return Err(BuildError::Config(
                "a simulated system runs its futures on the simulation's own runtime: \
                 remove `tokio_handle`"
                    .to_owned(),
            ));
        }
        let pools = self.pool_plan()?;
        let entries = self.pool_entries(pools, &io);
        let timer_service = TimerService::simulated(clock);
        let observer = self
            .observe
            .map(|spans| Arc::new(Observer::new(&self.name, spans)));
        let shared = Arc::new(SystemShared::new(
            self.name,
            entries,
            Err(host),
            timer_service.handle(),
            io,
            observer,
        ));
        Ok(System::from_parts(shared, timer_service, None))
    }

    /// Every pool (`default`, `blocking`, then the named ones): name, workers, throughput, and
    /// whether its handlers may block; each checked.
    fn pool_plan(&self) -> Result<Vec<(String, usize, usize, bool)>, BuildError> {
        let workers = self.default_workers()?;
        let mut pools = vec![
            ("default".to_owned(), workers, self.throughput, false),
            (
                "blocking".to_owned(),
                self.blocking_workers,
                self.throughput,
                true,
            ),
        ];
        for (name, workers, throughput) in &self.pools {
            if pools.iter().any(|(n, ..)| n == name) {
                return Err(BuildError::Config(format!("two pools named `{name}`")));
            }
            pools.push((name.clone(), *workers, *throughput, false));
        }
        for (name, workers, throughput, _) in &pools {
            if *workers == 0 || *workers > MAX_THREADS {
                return Err(BuildError::Config(format!(
                    "pool `{name}` needs 1 to {MAX_THREADS} workers (asked for {workers})"
                )));
            }
            if *throughput == 0 {
                return Err(BuildError::Config(format!(
                    "pool `{name}` needs a throughput of at least one message per turn"
                )));
            }
        }
        Ok(pools)
    }

    /// The system's view of each planned pool.
    fn pool_entries(
        &self,
        pools: Vec<(String, usize, usize, bool)>,
        io: &tokio::runtime::Handle,
    ) -> Vec<PoolEntry> {
        pools
            .into_iter()
            .map(|(name, workers, throughput, may_block)| {
                let thread_name = if name == "default" {
                    self.name.clone()
                } else {
                    format!("{}-{name}", self.name)
                };
                let config = PoolConfig {
                    name: thread_name,
                    workers,
                    throughput,
                    may_block,
                    io: Some(io.clone()),
                    waiters_help: self.waiters_help,
                    tasks_help: self.tasks_help,
                    narrowing: self.narrowing,
                };
                PoolEntry::new(name, config)
            })
            .collect()
    }
}

/// Threads a system may start: a bound that catches a mistyped size before the machine does.
const MAX_THREADS: usize = 4096;

impl System {
    fn from_parts(
        shared: Arc<SystemShared>,
        timer_service: TimerService,
        own_runtime: Option<tokio::runtime::Runtime>,
    ) -> System {
        System {
            inner: Arc::new(Inner {
                shared,
                threads: Mutex::new(Some(Threads {
                    timer_service,
                    own_runtime,
                })),
                released: (Mutex::new(false), Condvar::new()),
            }),
        }
    }
}

/// An actor system: worker pools, a timer wheel, an async runtime, and the actors on them.
///
/// A `System` is a handle: cloning it is cheap, and every clone spawns onto, looks up in and
/// shuts down the same system. The system shuts down when any clone's
/// [`shutdown`](System::shutdown) (or `shutdown_async`, `shutdown_timeout`) is called, or when
/// the last clone is dropped (waiting up to 10 s for actors to stop; in the background where
/// the dropping thread must not block: inside an actor, or inside an async runtime). Dropping it
/// never panics.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// let handle = system.clone(); // cheap: the same system
/// std::thread::spawn(move || {
///     let other = handle.spawn(Counter(1));
///     other.ask(Get).wait().unwrap()
/// })
/// .join()
/// .unwrap();
/// counter.tell(Add(1)).unwrap();
/// system.shutdown(); // shuts down every clone's system
/// ```
#[derive(Clone)]
pub struct System {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<SystemShared>,
    /// The timer thread and the system's own runtime; taken by the shutdown that joins them.
    threads: Mutex<Option<Threads>>,
    /// Set (and notified) once every thread has been joined.
    released: (Mutex<bool>, Condvar),
}

struct Threads {
    timer_service: TimerService,
    own_runtime: Option<tokio::runtime::Runtime>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a take or a flag: a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl fmt::Debug for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("System")
            .field("name", &self.inner.shared.name)
            .field("live_actors", &self.inner.shared.live())
            .finish()
    }
}

impl Default for System {
    fn default() -> Self {
        Self::new()
    }
}

impl System {
    /// A system with one worker per core (or `TROUPE_WORKERS`) and default settings.
    ///
    /// # Panics
    /// If the operating system refuses to start threads, or `TROUPE_WORKERS` is not a whole
    /// number; use [`System::builder`] to handle that.
    ///
    /// ```
    /// let system = troupe::System::new();
    /// assert!(system.workers() >= 1);
    /// system.shutdown();
    /// ```
    pub fn new() -> Self {
        match Self::builder().build() {
            Ok(system) => system,
            Err(error) => panic!("could not start the actor system: {error}"),
        }
    }

    /// A builder to configure the system.
    ///
    /// ```
    /// let system = troupe::System::builder().workers(1).name("tests").build().unwrap();
    /// system.shutdown();
    /// ```
    pub fn builder() -> SystemBuilder {
        SystemBuilder::default()
    }

    pub(crate) fn shared(&self) -> &Arc<SystemShared> {
        &self.inner.shared
    }

    /// Spawns a top-level actor on the default pool.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// counter.tell(Add(1)).unwrap();
    /// assert_eq!(counter.ask(Get).wait(), Ok(1));
    /// system.shutdown();
    /// ```
    pub fn spawn<A: Actor>(&self, actor: A) -> Addr<A> {
        spawn::spawn_root(self.shared(), actor, SpawnOptions::new())
    }

    /// Spawns a top-level actor with an explicit placement.
    ///
    /// ```
    /// use troupe::{Actor, Placement, System};
    /// struct Blocking;
    /// impl Actor for Blocking {}
    /// let system = System::new();
    /// let on_own_thread = system.spawn_on(Blocking, Placement::Thread);
    /// system.shutdown();
    /// assert!(on_own_thread.is_stopped());
    /// ```
    pub fn spawn_on<A: Actor>(&self, actor: A, placement: Placement) -> Addr<A> {
        spawn::spawn_root(
            self.shared(),
            actor,
            SpawnOptions::new().placement(placement),
        )
    }

    /// Spawns a top-level actor with options. If it fails, it stops (there is no factory to
    /// rebuild it): use [`spawn_supervised`](System::spawn_supervised) for one that restarts.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::{Overflow, SpawnOptions};
    /// let system = System::new();
    /// let options = SpawnOptions::new().bounded(10, Overflow::Fail).measure_time();
    /// let counter = system.spawn_with(Counter(0), options);
    /// counter.tell(Add(1)).unwrap();
    /// system.shutdown();
    /// ```
    pub fn spawn_with<A: Actor>(&self, actor: A, options: SpawnOptions) -> Addr<A> {
        spawn::spawn_root(self.shared(), actor, options)
    }

    /// Spawns a top-level actor built by `factory`, supervised by the system: when it fails
    /// (or, with the default `Restart::Permanent`, stops itself), the system rebuilds it in
    /// place from `factory` (same address, same mailbox: messages sent meanwhile reach the new
    /// instance), within `options.supervision(..)`'s intensity limit and back-off; past the
    /// limit, it stops, failed. Only the message whose handler panicked is lost.
    ///
    /// ```
    /// use troupe::{Actor, AskError, Context, Handler, Message, SpawnOptions, System};
    /// struct Flaky { calls: u32 }
    /// impl Actor for Flaky {}
    /// struct Call(bool);
    /// impl Message for Call { type Reply = u32; }
    /// impl Handler<Call> for Flaky {
    ///     fn handle(&mut self, call: Call, _: &mut Context<Self>) -> u32 {
    ///         if call.0 { panic!("flaky") }
    ///         self.calls += 1;
    ///         self.calls
    ///     }
    /// }
    /// let system = System::new();
    /// let flaky = system.spawn_supervised(|| Flaky { calls: 0 }, SpawnOptions::new());
    /// assert_eq!(flaky.ask(Call(false)).wait(), Ok(1));
    /// assert_eq!(flaky.ask(Call(true)).wait(), Err(AskError::Panicked));
    /// assert_eq!(flaky.ask(Call(false)).wait(), Ok(1)); // a fresh instance, same address
    /// system.shutdown();
    /// ```
    pub fn spawn_supervised<A: Actor>(
        &self,
        factory: impl FnMut() -> A + Send + 'static,
        options: SpawnOptions,
    ) -> Addr<A> {
        spawn::spawn_root_supervised(self.shared(), factory, options)
    }

    /// Registers `addr` under `name`; the name is released when the actor begins to stop.
    /// Fails if the name is taken, or the actor is stopping.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// system.register("visits", &counter).unwrap();
    /// assert!(system.register("visits", &counter).is_err()); // taken
    /// assert_eq!(system.find::<Counter>("visits"), Ok(counter));
    /// system.shutdown();
    /// ```
    pub fn register<A: Actor>(&self, name: &str, addr: &Addr<A>) -> Result<(), RegistryError> {
        spawn::register(self.shared(), name, addr)
    }

    /// Spawns a top-level actor registered under `name`, or fails with
    /// [`RegistryError::Taken`] (then `make` is not called and nothing is spawned). The name is
    /// claimed before the actor starts and released when it begins to stop.
    ///
    /// ```
    /// use troupe::{Actor, RegistryError, SpawnOptions, System};
    /// struct Session;
    /// impl Actor for Session {}
    /// let system = System::new();
    /// let first = system.spawn_named("session-42", SpawnOptions::new(), || Session).unwrap();
    /// let again = system.spawn_named("session-42", SpawnOptions::new(), || Session);
    /// assert_eq!(again.unwrap_err(), RegistryError::Taken("session-42".into()));
    /// let same = system.get_or_spawn_named("session-42", SpawnOptions::new(), || Session);
    /// assert_eq!(same.unwrap(), first);
    /// system.shutdown();
    /// ```
    pub fn spawn_named<A: Actor>(
        &self,
        name: &str,
        options: SpawnOptions,
        make: impl FnOnce() -> A,
    ) -> Result<Addr<A>, RegistryError> {
        spawn::spawn_root_named(self.shared(), name, options, make)
    }

    /// The actor of type `A` registered under `name`, spawned with `make` if there is none.
    /// Fails with [`RegistryError::WrongType`] if the name belongs to an actor of another type.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::SpawnOptions;
    /// let system = System::new();
    /// for _ in 0..3 {
    ///     let session = system.get_or_spawn_named("session-7", SpawnOptions::new(), || Counter(0)).unwrap();
    ///     session.tell(Add(1)).unwrap(); // the same actor each time
    /// }
    /// let session = system.find::<Counter>("session-7").unwrap();
    /// assert_eq!(session.ask(Get).wait(), Ok(3));
    /// system.shutdown();
    /// ```
    pub fn get_or_spawn_named<A: Actor>(
        &self,
        name: &str,
        options: SpawnOptions,
        make: impl FnOnce() -> A,
    ) -> Result<Addr<A>, RegistryError> {
        spawn::get_or_spawn_root_named(self.shared(), name, options, make)
    }

    /// The actor of type `A` registered under `name`, or why there is none
    /// ([`RegistryError::NotFound`], [`RegistryError::WrongType`]).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::{RegistryError, SpawnOptions};
    /// let system = System::new();
    /// let counter = system.spawn_named("visits", SpawnOptions::new(), || Counter(0)).unwrap();
    /// assert_eq!(system.find::<Counter>("visits"), Ok(counter.clone()));
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// // Released when it stopped.
    /// assert_eq!(system.find::<Counter>("visits"), Err(RegistryError::NotFound("visits".into())));
    /// system.shutdown();
    /// ```
    pub fn find<A: Actor>(&self, name: &str) -> Result<Addr<A>, RegistryError> {
        spawn::find(self.shared(), name)
    }

    /// The actor of type `A` registered under `name`, if any (see [`find`](System::find) for
    /// why not).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// assert!(system.lookup::<Counter>("visits").is_none());
    /// let counter = system.spawn(Counter(0));
    /// system.register("visits", &counter).unwrap();
    /// assert_eq!(system.lookup::<Counter>("visits"), Some(counter));
    /// system.shutdown();
    /// ```
    pub fn lookup<A: Actor>(&self, name: &str) -> Option<Addr<A>> {
        self.find(name).ok()
    }

    /// Every registered name, with its actor's id and type, sorted by name: for a drain, a
    /// health page, a console.
    ///
    /// ```
    /// use troupe::{Actor, SpawnOptions, System};
    /// struct Session;
    /// impl Actor for Session {}
    /// let system = System::new();
    /// for user in ["bo", "ada"] {
    ///     system.spawn_named(&format!("session-{user}"), SpawnOptions::new(), || Session).unwrap();
    /// }
    /// let names: Vec<String> = system.registered().into_iter().map(|(name, ..)| name).collect();
    /// assert_eq!(names, ["session-ada", "session-bo"]);
    /// system.shutdown();
    /// ```
    pub fn registered(&self) -> Vec<(String, crate::ActorId, &'static str)> {
        self.shared().names().list()
    }

    /// Releases `name`; true if it was registered.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// system.register("visits", &counter).unwrap();
    /// assert!(system.unregister("visits"));
    /// assert!(!system.unregister("visits"));
    /// assert!(!counter.is_stopped()); // only the name goes
    /// system.shutdown();
    /// ```
    pub fn unregister(&self, name: &str) -> bool {
        self.shared().names().unregister(name)
    }

    /// Runs a future to completion on the system's async runtime, blocking the calling thread
    /// (not a worker, and not a thread of that runtime): for tests, `main`, and bridging plain
    /// threads to async sends.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// let total = system.block_on(async {
    ///     counter.send(Add(2)).await.unwrap();
    ///     counter.ask(Get).await
    /// });
    /// assert_eq!(total, Ok(2));
    /// system.shutdown();
    /// ```
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.shared().block_on(future)
    }

    /// The time of the system's clock: the monotonic clock, or a simulation's clock (see
    /// `troupe::sim`). Code that reads the time through it (or `Context::now`) runs unchanged
    /// in a simulation.
    ///
    /// ```
    /// let system = troupe::System::new();
    /// let before = system.now();
    /// assert!(system.now() >= before);
    /// system.shutdown();
    /// ```
    pub fn now(&self) -> Instant {
        self.shared().now()
    }

    /// The system's timer service.
    pub(crate) fn timers(&self) -> crate::timer::TimerHandle {
        self.shared().timers().clone()
    }

    /// Actors spawned and not yet fully stopped.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// assert_eq!(system.live_actors(), 1);
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// while system.live_actors() > 0 { std::thread::yield_now() }
    /// system.shutdown();
    /// ```
    pub fn live_actors(&self) -> usize {
        self.shared().live()
    }

    /// How many top-level supervised actors failed more often than their restart intensity
    /// allows, and stopped for good (each also logged at error level with its type and
    /// name). A service's health check can watch it: such an actor's callers only see
    /// `Stopped`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, SpawnOptions, StopReason, SupervisorStrategy, System};
    /// struct Poisoned;
    /// impl Actor for Poisoned {}
    /// #[derive(Message)]
    /// struct Job;
    /// impl Handler<Job> for Poisoned {
    ///     fn handle(&mut self, _: Job, _: &mut Context<Self>) { panic!("poison") }
    /// }
    /// let system = System::new();
    /// let strategy = SupervisorStrategy::one_for_one().intensity(2, Duration::from_secs(60));
    /// let worker = system.spawn_supervised(|| Poisoned, SpawnOptions::new().supervision(strategy));
    /// for _ in 0..3 {
    ///     let _ = worker.tell(Job);
    /// }
    /// // Failed, past 2 restarts.
    /// assert!(matches!(worker.stopped().wait(), Ok(StopReason::Failed(_))));
    /// assert_eq!(system.escalations(), 1);
    /// system.shutdown();
    /// ```
    pub fn escalations(&self) -> u64 {
        self.shared().escalations()
    }

    /// Worker threads in the default pool.
    ///
    /// ```
    /// let system = troupe::System::builder().workers(2).build().unwrap();
    /// assert_eq!(system.workers(), 2);
    /// system.shutdown();
    /// ```
    pub fn workers(&self) -> usize {
        self.shared().default_workers()
    }

    /// Counters of every pool (a pool whose threads have not started yet, because no actor was
    /// placed on it, shows `started: false` and zero workers).
    ///
    /// ```
    /// let system = troupe::System::builder().pool("db", 1, 8).build().unwrap();
    /// let names: Vec<String> = system.pool_metrics().into_iter().map(|p| p.name).collect();
    /// assert_eq!(names, ["default", "blocking", "db"]);
    /// system.shutdown();
    /// ```
    pub fn pool_metrics(&self) -> Vec<PoolMetrics> {
        self.shared()
            .pools()
            .iter()
            .map(|entry| match entry.pool() {
                Some(pool) => {
                    let c = pool.counters();
                    PoolMetrics {
                        name: entry.name.clone(),
                        started: true,
                        workers: c.workers,
                        turns: c.turns,
                        steals: c.steals,
                        parks: c.parks,
                        lent_turns: c.lent,
                        catch_up_waits: entry.executor().map_or(0, |e| e.catch_up_waits()),
                        aside_waits: c.aside_waits,
                        helped_turns: c.helped,
                        tasks_help: c.tasks_help,
                        idle_workers: c.idle_workers,
                        injected_waiting: c.injected_waiting,
                        width: c.width,
                        width_changes: c.width_changes,
                    }
                }
                // Not started, or simulated (no threads, no counters).
                None => PoolMetrics {
                    name: entry.name.clone(),
                    started: entry.is_started(),
                    ..PoolMetrics::default()
                },
            })
            .collect()
    }

    /// Stops every actor, waits for all of them, and joins every thread. Waits as long as it
    /// takes; a handler that never returns makes this wait forever (see `shutdown_timeout`).
    /// Every clone of the system is shut down; calling it again (from any clone) waits for the
    /// same shutdown.
    ///
    /// Called from inside an actor (a handler, or an actor on its own thread), it cannot wait
    /// (the caller is one of the actors it would wait for): it asks every actor to stop and
    /// returns at once; a background thread joins the system's threads once every actor, the
    /// caller included, has stopped. From async code, use
    /// [`shutdown_async`](System::shutdown_async).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// system.shutdown();
    /// assert!(counter.is_stopped());
    /// assert_eq!(system.live_actors(), 0);
    /// ```
    pub fn shutdown(&self) {
        if role::runs_actors() {
            self.shutdown_in_background();
            return;
        }
        // Without a deadline, the only outcome is success.
        let _ = self.shutdown_until(None);
    }

    /// Like [`shutdown`](System::shutdown), but gives up waiting after `timeout`, reporting how
    /// many actors were still running. They are left to finish (they have been asked to stop);
    /// a background thread then releases the system's threads. Called from inside an actor, it
    /// begins shutdown as `shutdown` does and returns [`ShutdownError::InsideActor`].
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use std::time::Duration;
    /// let system = System::new();
    /// system.spawn(Counter(0));
    /// system.shutdown_timeout(Duration::from_secs(10)).expect("every actor stopped in time");
    /// ```
    pub fn shutdown_timeout(&self, timeout: Duration) -> Result<(), ShutdownError> {
        if role::runs_actors() {
            self.shutdown_in_background();
            return Err(ShutdownError::InsideActor);
        }
        self.shutdown_until(Some(self.inner.shared.now() + timeout))
    }

    /// Shuts the system down from async code: asks every actor to stop, and completes when all
    /// have stopped and every thread is joined, without blocking the task's thread (the waiting
    /// is done on a thread of its own). Composes with a server's graceful shutdown: stop taking
    /// requests, then `system.shutdown_async().await`.
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new().unwrap();
    /// # runtime.block_on(async {
    /// let system = troupe::System::builder()
    ///     .tokio_handle(tokio::runtime::Handle::current())
    ///     .build()
    ///     .unwrap();
    /// system.shutdown_async().await;
    /// assert_eq!(system.live_actors(), 0);
    /// # });
    /// ```
    pub async fn shutdown_async(&self) {
        self.inner.shared.begin_shutdown();
        self.inner.shared.stop_top_level();
        if self.inner.shared.host().is_some() {
            // Simulated: no thread to join, so nothing blocks; the simulation runs meanwhile.
            self.inner.shared.until_all_stopped().await;
            self.inner.release_threads();
            return;
        }
        let (done, finished) = tokio::sync::oneshot::channel();
        let system = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{}-shutdown", self.inner.shared.name))
            .spawn(move || {
                let _ = system.shutdown_until(None);
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => {
                let _ = finished.await;
            }
            Err(error) => {
                tracing::error!(%error, "no thread to wait for the shutdown on: it goes on in the background");
            }
        }
    }

    /// Shuts the system down in order: every actor drains ([`Addr::drain`](crate::Addr::drain):
    /// it handles what was sent to it before this call and the results of its pipes in flight,
    /// its children first), for up to `deadline`; whatever is still draining then is stopped,
    /// and the system shuts down as [`shutdown`](System::shutdown) does. The service's way to
    /// finish in-flight jobs: stop taking requests, then drain. `Err(Timeout)` counts the
    /// actors the deadline cut short (stopped all the same; `waited` is the drain's time).
    /// Called from inside an actor, it does the same in the background and returns
    /// [`ShutdownError::InsideActor`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Deferred, DeferredHandler, Handler, Message, System};
    /// struct Worker;
    /// impl Actor for Worker {}
    /// #[derive(Message)]
    /// #[reply(u64)]
    /// struct Job(u64);
    /// #[derive(Message)]
    /// struct Done(u64, Deferred<u64>);
    /// impl DeferredHandler<Job> for Worker {
    ///     fn handle(&mut self, job: Job, reply: Deferred<u64>, ctx: &mut Context<Self>) {
    ///         ctx.pipe(
    ///             async move {
    ///                 tokio::time::sleep(Duration::from_millis(20)).await;
    ///                 job.0 * 2
    ///             },
    ///             move |n| Done(n, reply),
    ///         );
    ///     }
    /// }
    /// impl Handler<Done> for Worker {
    ///     fn handle(&mut self, done: Done, _: &mut Context<Self>) {
    ///         let _ = done.1.send(done.0);
    ///     }
    /// }
    /// let system = System::new();
    /// let worker = system.spawn(Worker);
    /// let jobs: Vec<_> = (0..10).map(|i| worker.ask(Job(i))).collect();
    /// system.shutdown_draining(Duration::from_secs(5)).expect("drained in time");
    /// // Every job in flight was finished, not dropped.
    /// for (i, job) in jobs.into_iter().enumerate() {
    ///     assert_eq!(job.wait(), Ok(i as u64 * 2));
    /// }
    /// ```
    pub fn shutdown_draining(&self, deadline: Duration) -> Result<(), ShutdownError> {
        if role::runs_actors() {
            let system = self.clone();
            self.inner.shared.signal_top_level(|| Signal::Drain);
            let spawned = std::thread::Builder::new()
                .name(format!("{}-drain", self.inner.shared.name))
                .spawn(move || {
                    let _ = system.drain_then_shut_down(deadline);
                });
            if spawned.is_err() {
                self.shutdown_in_background();
            }
            return Err(ShutdownError::InsideActor);
        }
        self.drain_then_shut_down(deadline)
    }

    /// [`shutdown_draining`](System::shutdown_draining) from async code, without blocking the
    /// task's thread.
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new().unwrap();
    /// # runtime.block_on(async {
    /// use std::time::Duration;
    /// let system = troupe::System::builder()
    ///     .tokio_handle(tokio::runtime::Handle::current())
    ///     .build()
    ///     .unwrap();
    /// system.shutdown_draining_async(Duration::from_secs(5)).await.unwrap();
    /// assert_eq!(system.live_actors(), 0);
    /// # });
    /// ```
    pub async fn shutdown_draining_async(&self, deadline: Duration) -> Result<(), ShutdownError> {
        let shared = &self.inner.shared;
        if shared.host().is_some() {
            // Simulated: the simulation runs meanwhile, on its clock.
            let started = shared.now();
            shared.signal_top_level(|| Signal::Drain);
            let drained = tokio::time::timeout(deadline, shared.until_all_stopped()).await;
            let remaining = shared.live();
            self.shutdown_async().await;
            return match drained {
                Ok(()) => Ok(()),
                Err(_) => Err(ShutdownError::Timeout {
                    remaining,
                    waited: shared.now().saturating_duration_since(started),
                }),
            };
        }
        let (done, finished) = tokio::sync::oneshot::channel();
        let system = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{}-drain", shared.name))
            .spawn(move || {
                let _ = done.send(system.drain_then_shut_down(deadline));
            });
        match spawned {
            Ok(_) => finished.await.unwrap_or(Err(ShutdownError::InsideActor)),
            Err(error) => {
                tracing::error!(%error, "no thread to wait for the drain on: shutting down now");
                self.shutdown_async().await;
                Ok(())
            }
        }
    }

    /// Drains every actor for up to `deadline`, then shuts down (stopping what is left).
    fn drain_then_shut_down(&self, deadline: Duration) -> Result<(), ShutdownError> {
        let shared = &self.inner.shared;
        let started = shared.now();
        tracing::debug!(system = %shared.name, ?deadline, "draining");
        let drained = shared.signal_all_and_wait(|| Signal::Drain, Some(started + deadline));
        let remaining = shared.live();
        let waited = shared.now().saturating_duration_since(started);
        let _ = self.shutdown_until(None);
        if drained {
            Ok(())
        } else {
            Err(ShutdownError::Timeout { remaining, waited })
        }
    }

    fn shutdown_until(&self, deadline: Option<Instant>) -> Result<(), ShutdownError> {
        let shared = &self.inner.shared;
        let started = shared.now();
        shared.begin_shutdown();
        tracing::debug!(system = %shared.name, "shutting down");
        if !shared.stop_all_and_wait(deadline) {
            let remaining = shared.live();
            self.shutdown_in_background();
            return Err(ShutdownError::Timeout {
                remaining,
                waited: shared.now().saturating_duration_since(started),
            });
        }
        self.inner.release_threads();
        Ok(())
    }

    /// Asks every actor to stop and leaves the rest to a detached thread: it waits for them
    /// (re-sending stops to actors spawned meanwhile) and then releases the system's threads,
    /// so the caller need not wait and nothing leaks.
    fn shutdown_in_background(&self) {
        self.inner.begin_in_background();
    }
}

impl Inner {
    fn begin_in_background(self: &Arc<Self>) {
        self.shared.begin_shutdown();
        self.shared.stop_top_level();
        let inner = self.clone();
        if self.shared.host().is_some() {
            // Simulated: the simulation finishes it, as one of its tasks.
            self.shared.spawn_io(async move {
                inner.shared.until_all_stopped().await;
                inner.release_threads();
            });
            return;
        }
        let spawned = std::thread::Builder::new()
            .name(format!("{}-reaper", self.shared.name))
            .spawn(move || {
                inner.shared.stop_all_and_wait(None);
                inner.release_threads();
            });
        if spawned.is_err() {
            tracing::error!("could not start the thread that finishes a shutdown");
        }
    }

    /// Stops and joins the pools, the timer, the system's own runtime and the thread-backed
    /// actors' threads (every actor has stopped). The first caller does it; others wait for it.
    fn release_threads(&self) {
        let taken = lock(&self.threads).take();
        let Some(threads) = taken else {
            let mut released = lock(&self.released.0);
            while !*released {
                released = self
                    .released
                    .1
                    .wait(released)
                    .unwrap_or_else(|p| p.into_inner());
            }
            return;
        };
        for pool in self.shared.take_pools() {
            pool.stop();
        }
        if let Some(host) = self.shared.host() {
            host.shut_down();
        }
        threads.timer_service.shutdown();
        self.shared.names().clear();
        for thread in self.shared.take_threads() {
            let _ = thread.join();
        }
        // The system's own runtime: its remaining tasks hold addresses of stopped actors at
        // most. Dropping a runtime blocks, which tokio forbids inside a runtime: there, it is
        // shut down in the background.
        if let Some(runtime) = threads.own_runtime {
            if tokio::runtime::Handle::try_current().is_ok() {
                runtime.shutdown_background();
            } else {
                runtime.shutdown_timeout(Duration::from_secs(1));
            }
        }
        *lock(&self.released.0) = true;
        self.released.1.notify_all();
    }
}

impl Drop for Inner {
    /// The last handle is gone: shut the system down, as `shutdown_timeout(10 s)` does, or in
    /// the background where this thread must not block (an actor's thread, an async runtime's)
    /// or when actors are still running after 10 s. Never panics.
    fn drop(&mut self) {
        let Some(threads) = lock(&self.threads).take() else {
            return;
        };
        let rest = Inner {
            shared: self.shared.clone(),
            threads: Mutex::new(Some(threads)),
            released: (Mutex::new(false), Condvar::new()),
        };
        rest.shared.begin_shutdown();
        if rest.shared.host().is_some() {
            // Simulated: the thread that drives the simulation waits (in simulated time) unless
            // it is unwinding; elsewhere the simulation finishes it.
            let drives = role::drives_simulation() && !role::runs_actors();
            if drives
                && !std::thread::panicking()
                && rest
                    .shared
                    .stop_all_and_wait(Some(rest.shared.now() + Duration::from_secs(10)))
            {
                rest.release_threads();
            } else {
                Arc::new(rest).begin_in_background();
            }
            return;
        }
        let must_not_block = role::runs_actors() || tokio::runtime::Handle::try_current().is_ok();
        if !must_not_block
            && rest
                .shared
                .stop_all_and_wait(Some(Instant::now() + Duration::from_secs(10)))
        {
            rest.release_threads();
        } else {
            Arc::new(rest).begin_in_background();
        }
    }
}
