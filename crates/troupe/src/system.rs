//! The [`System`]: owns the worker pools, the timer wheel and the async runtime; spawns
//! top-level actors; shuts everything down.
//!
//! Top-level actors are registered in a sharded table so shutdown can find them; children are
//! known to their parents. Shutdown asks every top-level actor to stop (each stops its children
//! first), waits until the count of live actors reaches zero, then stops and joins the worker
//! threads, the timer thread, the async runtime and the threads of thread-backed actors.
//!
//! # Pools
//! A system has a `default` pool (one worker per core), a `blocking` pool for actors that must
//! call blocking code, and any named pools the builder adds. Each pool has its own threads and
//! queues, so a pool busy with slow or blocking work cannot delay actors on the others.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::actor::Actor;
use crate::addr::Addr;
use crate::bounded::{Bound, Overflow};
use crate::cell::{ActorCell, CellParts, ChildRef, Executor, ParentLink};
use crate::error::{BuildError, ShutdownError};
use crate::metrics::PoolMetrics;
use crate::names::{Names, RegistryError};
use crate::scheduler::dedicated::{self, ThreadWaker};
use crate::scheduler::{self, Pool, PoolShared};
use crate::signal::Signal;
use crate::supervisor::Restart;
use crate::timer::{TimerHandle, TimerService};

/// A process-unique actor id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorId(u64);

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where a spawned actor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Placement {
    /// On a shared worker pool: lightweight, many per thread (the default). A top-level actor
    /// goes to the `default` pool; a child goes to its parent's pool.
    #[default]
    Pool,
    /// On the named pool (`"default"`, `"blocking"`, or one added with
    /// [`SystemBuilder::pool`]). An unknown name falls back to the default pool.
    Named(&'static str),
    /// On an OS thread of its own, which parks when the mailbox is empty. For actors that
    /// block, or to compare with thread-per-actor designs.
    Thread,
}

/// How to spawn an actor: where it runs, its mailbox, its restart policy, a name.
///
/// ```
/// use troupe::{Overflow, Placement, Restart, SpawnOptions};
/// let options = SpawnOptions::new()
///     .placement(Placement::Named("blocking"))
///     .bounded(1_000, Overflow::DropOldest)
///     .restart(Restart::Transient)
///     .name("indexer")
///     .measure_time();
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    placement: Placement,
    bounded: Option<(usize, Overflow)>,
    restart: Restart,
    name: Option<String>,
    measure_time: bool,
}

impl SpawnOptions {
    /// Defaults: pool placement, unbounded mailbox, permanent restart policy, no name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where it runs.
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// A mailbox of at most `capacity` messages, with `overflow` deciding what a full mailbox
    /// does with one more.
    pub fn bounded(mut self, capacity: usize, overflow: Overflow) -> Self {
        self.bounded = Some((capacity, overflow));
        self
    }

    /// Its restart policy under a supervisor (for children spawned with
    /// [`Context::spawn_supervised`](crate::Context::spawn_supervised)).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Registers it under `name` (see [`System::lookup`]); the name is released when it stops.
    /// If the name is taken, the actor is spawned without it.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Measures the time its handlers take (see [`Addr::metrics`]); costs two clock reads per
    /// turn.
    pub fn measure_time(mut self) -> Self {
        self.measure_time = true;
        self
    }

    pub(crate) fn restart_policy(&self) -> Restart {
        self.restart
    }
}

const REGISTRY_SHARDS: usize = 16;

/// What every actor's context and the system handle share.
pub(crate) struct SystemShared {
    name: String,
    /// `default` first, then `blocking`, then the builder's named pools.
    pools: Vec<(String, Arc<PoolShared>)>,
    registry: Box<[CachePadded<Mutex<slab::Slab<ChildRef>>>]>,
    live: CachePadded<AtomicUsize>,
    all_stopped: (Mutex<()>, Condvar),
    next_id: AtomicU64,
    dedicated_threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
    names: Names,
    timers: TimerHandle,
    /// The async runtime, started on first use; the system takes it out at shutdown.
    io_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    io: OnceLock<tokio::runtime::Handle>,
    io_threads: usize,
}

impl SystemShared {
    fn next_id(&self) -> ActorId {
        ActorId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn unregister(&self, shard: usize, key: usize) {
        let mut table = self.registry[shard]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        table.try_remove(key);
    }

    pub(crate) fn actor_finished(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Notify under the lock so a waiter between its check and its wait cannot miss it.
            let _guard = self.all_stopped.0.lock().unwrap_or_else(|p| p.into_inner());
            self.all_stopped.1.notify_all();
        }
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn timers(&self) -> &TimerHandle {
        &self.timers
    }

    /// The async runtime for I/O (`Context::pipe`, `await_then`), started on first use.
    pub(crate) fn io(&self) -> &tokio::runtime::Handle {
        self.io.get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(self.io_threads)
                .thread_name(format!("{}-io", self.name))
                .enable_all()
                .build()
                .expect("could not start the async I/O runtime");
            let handle = runtime.handle().clone();
            *self.io_runtime.lock().unwrap_or_else(|p| p.into_inner()) = Some(runtime);
            handle
        })
    }

    fn pool_named(&self, name: &str) -> &Arc<PoolShared> {
        self.pools
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&self.pools[0].1, |(_, p)| p)
    }
}

/// The pool a child of an actor running on `executor` inherits.
pub(crate) fn inherited_pool(executor: &Executor) -> Option<Arc<PoolShared>> {
    match executor {
        Executor::Pool(pool) => Some(pool.clone()),
        Executor::Thread(_) => None,
    }
}

/// Builds a cell for `actor`, not yet running. The caller registers it, then calls `start`.
pub(crate) fn new_cell<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    factory: Option<Box<dyn FnMut() -> A + Send>>,
    options: &SpawnOptions,
    inherited: Option<Arc<PoolShared>>,
    parent: ParentLink,
) -> Arc<ActorCell<A>> {
    let executor = match options.placement {
        Placement::Pool => Executor::Pool(inherited.unwrap_or_else(|| system.pools[0].1.clone())),
        Placement::Named(name) => Executor::Pool(system.pool_named(name).clone()),
        Placement::Thread => Executor::Thread(Arc::new(ThreadWaker::new())),
    };
    system.live.fetch_add(1, Ordering::AcqRel);
    let id = system.next_id();
    tracing::trace!(actor = %id, "spawning");
    Arc::new(ActorCell::new(CellParts {
        actor,
        executor,
        id,
        parent,
        system: system.clone(),
        factory,
        restart: options.restart,
        bound: options
            .bounded
            .map(|(capacity, overflow)| Box::new(Bound::new(capacity, overflow))),
        timed: options.measure_time,
    }))
}

/// Creates the cell's alive reference, registers its name, and schedules its first turn.
pub(crate) fn start<A: Actor>(
    system: &SystemShared,
    cell: &Arc<ActorCell<A>>,
    options: &SpawnOptions,
) {
    if let Some(name) = &options.name {
        let addr = Addr::from_cell(cell.clone());
        if let Err(e) = system.names.register(name, &addr) {
            tracing::warn!(actor = %cell.id(), error = %e, "spawned without its name");
        }
    }
    // The alive reference: released by the actor's final turn.
    let alive = Arc::into_raw(cell.clone());
    debug_assert_eq!(alive, Arc::as_ptr(cell));
    let raw = cell.raw();
    match &cell.header_executor() {
        Executor::Pool(_) => scheduler::schedule(raw),
        Executor::Thread(waker) => {
            let name = format!("{}-actor-{}", system.name, cell.id());
            // SAFETY: freshly built cell, alive reference held, first turn not yet scheduled.
            match unsafe { dedicated::start(raw, waker.as_ref(), name) } {
                Ok(handle) => {
                    let mut threads = system
                        .dedicated_threads
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    threads.retain(|t| !t.is_finished());
                    threads.push(handle);
                }
                Err(e) => {
                    tracing::error!(actor = %cell.id(), error = %e, "no thread for a thread-backed actor: stopping it");
                    cell.signal_stop();
                    // SAFETY: nobody else runs this actor (it has no thread); running its turns
                    // here until it stops releases the alive reference.
                    unsafe { while raw.run_catching(usize::MAX) != crate::cell::Turn::Stopped {} }
                }
            }
        }
    }
}

/// The registry shard the calling thread spawns into. Each thread keeps one (handed out round
/// robin), so threads spawning at the same time rarely share a lock, and one thread spawning
/// many actors fills one shard's table in order: a spawn then finds its slot, and the lock,
/// still in cache (rotating over the shards per spawn made the slot a cache miss each time).
fn registry_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % REGISTRY_SHARDS;
    }
    SHARD.with(|s| *s)
}

/// Spawns a top-level actor.
fn spawn_root<A: Actor>(system: &Arc<SystemShared>, actor: A, options: SpawnOptions) -> Addr<A> {
    let shard = registry_shard();
    let cell = {
        let mut table = system.registry[shard]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let entry = table.vacant_entry();
        let key = entry.key();
        let cell = new_cell(
            system,
            actor,
            None,
            &options,
            None,
            ParentLink::Root { shard, key },
        );
        entry.insert(cell.clone());
        cell
    };
    start(system, &cell, &options);
    if system.shutting_down.load(Ordering::SeqCst) {
        cell.signal_stop();
    }
    Addr::from_cell(cell)
}

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
    workers: usize,
    throughput: usize,
    name: String,
    blocking_workers: usize,
    io_threads: usize,
    pools: Vec<(String, usize, usize)>,
}

impl Default for SystemBuilder {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            throughput: 64,
            name: "troupe".to_owned(),
            blocking_workers: 8,
            io_threads: 2,
            pools: Vec::new(),
        }
    }
}

impl SystemBuilder {
    /// Worker threads in the default pool (default: one per available core).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Messages an actor may handle in one turn before yielding its worker to others
    /// (default 64; Akka calls this the dispatcher's `throughput`).
    pub fn throughput(mut self, messages: usize) -> Self {
        self.throughput = messages;
        self
    }

    /// Prefix of thread names: workers are `<name>-<i>` (and `<name>-<pool>-<i>`), thread-backed
    /// actors `<name>-actor-<id>` (default `troupe`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Threads of the `blocking` pool, for actors that call blocking code (default 8).
    pub fn blocking_workers(mut self, workers: usize) -> Self {
        self.blocking_workers = workers;
        self
    }

    /// Threads of the async runtime behind `Context::pipe` and `await_then` (default 2;
    /// started on first use).
    pub fn io_threads(mut self, threads: usize) -> Self {
        self.io_threads = threads.max(1);
        self
    }

    /// Adds a named pool with its own `workers` threads and `throughput`, for
    /// `Placement::Named(name)`.
    pub fn pool(mut self, name: impl Into<String>, workers: usize, throughput: usize) -> Self {
        self.pools.push((name.into(), workers, throughput));
        self
    }

    /// Starts the threads.
    pub fn build(self) -> Result<System, BuildError> {
        let mut pools = vec![Pool::start(&self.name, self.workers, self.throughput)?];
        pools.push(Pool::start(
            &format!("{}-blocking", self.name),
            self.blocking_workers,
            self.throughput,
        )?);
        let mut names = vec!["default".to_owned(), "blocking".to_owned()];
        for (name, workers, throughput) in &self.pools {
            if names.contains(name) {
                return Err(BuildError::Config(format!("two pools named `{name}`")));
            }
            pools.push(Pool::start(
                &format!("{}-{name}", self.name),
                *workers,
                *throughput,
            )?);
            names.push(name.clone());
        }
        let timer_service = TimerService::start(&self.name)?;
        let shared = Arc::new(SystemShared {
            pools: names
                .into_iter()
                .zip(pools.iter().map(|p| p.shared.clone()))
                .collect(),
            name: self.name,
            registry: (0..REGISTRY_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(slab::Slab::new())))
                .collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            all_stopped: (Mutex::new(()), Condvar::new()),
            next_id: AtomicU64::new(1),
            dedicated_threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            names: Names::default(),
            timers: timer_service.handle(),
            io_runtime: Mutex::new(None),
            io: OnceLock::new(),
            io_threads: self.io_threads,
        });
        Ok(System {
            shared,
            pools,
            timer_service: Some(timer_service),
        })
    }
}

/// An actor system: worker pools, a timer wheel, an async runtime, and the actors on them.
///
/// Dropping the system shuts it down (waiting up to 10 s for actors to stop); call
/// [`shutdown`](System::shutdown) or [`shutdown_timeout`](System::shutdown_timeout) to choose.
pub struct System {
    shared: Arc<SystemShared>,
    pools: Vec<Pool>,
    timer_service: Option<TimerService>,
}

impl fmt::Debug for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("System")
            .field("name", &self.shared.name)
            .field("live_actors", &self.shared.live())
            .finish()
    }
}

impl Default for System {
    fn default() -> Self {
        Self::new()
    }
}

impl System {
    /// A system with one worker per core and default settings.
    ///
    /// # Panics
    /// If the operating system refuses to start threads; use [`System::builder`] to handle that.
    pub fn new() -> Self {
        Self::builder()
            .build()
            .expect("could not start the worker threads")
    }

    /// A builder to configure the system.
    pub fn builder() -> SystemBuilder {
        SystemBuilder::default()
    }

    /// Spawns a top-level actor on the default pool.
    pub fn spawn<A: Actor>(&self, actor: A) -> Addr<A> {
        spawn_root(&self.shared, actor, SpawnOptions::new())
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
        spawn_root(
            &self.shared,
            actor,
            SpawnOptions::new().placement(placement),
        )
    }

    /// Spawns a top-level actor with options. Top-level actors are supervised by the system,
    /// which stops them if they fail; build a tree under a supervising actor to restart.
    pub fn spawn_with<A: Actor>(&self, actor: A, options: SpawnOptions) -> Addr<A> {
        spawn_root(&self.shared, actor, options)
    }

    /// Registers `addr` under `name`; the name is released when the actor stops.
    pub fn register<A: Actor>(&self, name: &str, addr: &Addr<A>) -> Result<(), RegistryError> {
        self.shared.names.register(name, addr)
    }

    /// The actor of type `A` registered under `name`, if any (a name registered for another
    /// actor type is not found).
    pub fn lookup<A: Actor>(&self, name: &str) -> Option<Addr<A>> {
        self.shared.names.lookup(name)
    }

    /// Releases `name`; true if it was registered.
    pub fn unregister(&self, name: &str) -> bool {
        self.shared.names.unregister(name)
    }

    /// Runs a future to completion on the system's async runtime, blocking the calling thread
    /// (not a worker): for tests, `main`, and bridging plain threads to async sends.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.shared.io().block_on(future)
    }

    /// Actors spawned and not yet fully stopped.
    pub fn live_actors(&self) -> usize {
        self.shared.live()
    }

    /// Worker threads in the default pool.
    pub fn workers(&self) -> usize {
        self.pools.first().map_or(0, |p| p.size())
    }

    /// Counters of every pool.
    pub fn pool_metrics(&self) -> Vec<PoolMetrics> {
        self.shared
            .pools
            .iter()
            .map(|(name, pool)| pool.metrics(name))
            .collect()
    }

    /// Stops every actor, waits for all of them, and joins every thread. Waits as long as it
    /// takes; a handler that never returns makes this wait forever (see `shutdown_timeout`).
    pub fn shutdown(mut self) {
        self.shutdown_inner(None)
            .expect("no deadline, so no timeout");
    }

    /// Like [`shutdown`](System::shutdown), but gives up waiting after `timeout`, reporting how
    /// many actors were still running. They are left to finish (they have been asked to stop);
    /// a background thread then releases the system's threads.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Result<(), ShutdownError> {
        self.shutdown_inner(Some(timeout))
    }

    fn shutdown_inner(&mut self, timeout: Option<Duration>) -> Result<(), ShutdownError> {
        if self.pools.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        tracing::debug!(system = %self.shared.name, "shutting down");
        let mut guard = self
            .shared
            .all_stopped
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        loop {
            if self.shared.live() == 0 {
                break;
            }
            drop(guard);
            // Re-sent each round: actors spawned while stopping others are caught too.
            self.stop_top_level();
            guard = self
                .shared
                .all_stopped
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if self.shared.live() == 0 {
                break;
            }
            let mut wait = Duration::from_millis(100);
            if let Some(limit) = timeout {
                let waited = started.elapsed();
                if waited >= limit {
                    let remaining = self.shared.live();
                    drop(guard);
                    self.finish_in_background();
                    return Err(ShutdownError::Timeout { remaining, waited });
                }
                wait = wait.min(limit - waited);
            }
            guard = self
                .shared
                .all_stopped
                .1
                .wait_timeout(guard, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(guard);
        self.release_threads();
        Ok(())
    }

    /// The actors still running are left to finish; a detached thread waits for them and then
    /// releases the system's threads, so the caller need not wait and nothing leaks.
    fn finish_in_background(&mut self) {
        let mut rest = System {
            shared: self.shared.clone(),
            pools: std::mem::take(&mut self.pools),
            timer_service: self.timer_service.take(),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("{}-reaper", self.shared.name))
            .spawn(move || {
                let mut guard = rest
                    .shared
                    .all_stopped
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                while rest.shared.live() > 0 {
                    guard = rest
                        .shared
                        .all_stopped
                        .1
                        .wait_timeout(guard, Duration::from_millis(100))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                drop(guard);
                rest.release_threads();
            });
        if spawned.is_err() {
            tracing::error!("could not start the thread that finishes a timed-out shutdown");
        }
    }

    /// Stops and joins the pools, the timer, the async runtime and the thread-backed actors'
    /// threads (every actor has stopped).
    fn release_threads(&mut self) {
        for pool in self.pools.drain(..) {
            pool.stop();
        }
        if let Some(timers) = self.timer_service.take() {
            timers.shutdown();
        }
        self.shared.names.clear();
        let threads = std::mem::take(
            &mut *self
                .shared
                .dedicated_threads
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        for thread in threads {
            let _ = thread.join();
        }
        // The async runtime: its remaining tasks hold addresses of stopped actors at most.
        let runtime = self
            .shared
            .io_runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(runtime) = runtime {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }

    fn stop_top_level(&self) {
        for shard in self.shared.registry.iter() {
            let targets: Vec<ChildRef> = shard
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(_, cell)| cell.clone())
                .collect();
            for cell in targets {
                cell.signal(Signal::Stop);
            }
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        let _ = self.shutdown_inner(Some(Duration::from_secs(10)));
    }
}
