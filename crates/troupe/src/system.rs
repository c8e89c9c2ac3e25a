//! The [`System`]: owns the worker pools, the timer wheel and the async runtime; spawns
//! top-level actors; shuts everything down.
//!
//! Shutdown asks every top-level actor to stop (each stops its children first), waits until
//! the count of live actors reaches zero, then stops and joins the worker threads, the timer
//! thread, the async runtime and the threads of thread-backed actors. Called from inside an
//! actor (which cannot stop while its handler waits), it begins the same way and leaves the
//! waiting and joining to a background thread.
//!
//! # Pools
//! A system has a `default` pool (one worker per core), a `blocking` pool for actors that must
//! call blocking code, and any named pools the builder adds. Each pool has its own threads and
//! queues, so a pool busy with slow or blocking work cannot delay actors on the others.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actor::{Actor, Context, Factory};
use crate::addr::Addr;
use crate::bounded::{Bound, Overflow};
use crate::erased::{ErasedCell, ErasedRef, Extras};
use crate::error::{BuildError, ShutdownError};
use crate::id::ActorId;
use crate::lazy::LazyBox;
use crate::life::{ActorCell, ActorShared, ActorState, ParentLink};
use crate::metrics::PoolMetrics;
use crate::names::RegistryError;
use crate::raw::{self, Cell, Executor, Runnable};
use crate::role;
use crate::runtime::{PoolEntry, SystemShared};
use crate::scheduler::dedicated::{self, ThreadExecutor};
use crate::scheduler::{Pool, PoolConfig, PoolShared};
use crate::signal::{Signal, SignalStack};
use crate::supervision::Restart;
use crate::timer::TimerService;

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

/// The executor a child of an actor running on `parent` inherits: the parent's pool, if it
/// runs on one.
pub(crate) fn inherited_pool(parent: &Arc<Executor>) -> Option<Arc<Executor>> {
    parent.as_any().is::<PoolShared>().then(|| parent.clone())
}

/// Builds a cell for `actor`, not yet running, and the right to run its first turn. The
/// caller records the cell (registry or parent), then calls `start`.
pub(crate) fn new_cell<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    factory: Option<Factory<A>>,
    options: &SpawnOptions,
    inherited: Option<Arc<Executor>>,
    parent: ParentLink,
) -> (Arc<ActorCell<A>>, Runnable) {
    let executor: Arc<Executor> = match options.placement {
        Placement::Pool => inherited.unwrap_or_else(|| system.default_pool().clone()),
        Placement::Named(name) => match system.pool_named(name) {
            Some(pool) => pool.clone(),
            None => {
                tracing::warn!(
                    pool = name,
                    "no pool of that name: the actor goes on `default`"
                );
                system.default_pool().clone()
            }
        },
        Placement::Thread => Executor::new(Arc::new(ThreadExecutor::new())),
    };
    system.actor_spawned();
    let id = ActorId::next();
    tracing::trace!(actor = %id, "spawning");
    let shared = ActorShared {
        signals: SignalStack::new(),
        parent,
        system: system.clone(),
        extras: match options.bounded {
            Some((capacity, overflow)) => {
                LazyBox::with(Extras::bounded(Bound::new(capacity, overflow)))
            }
            None => LazyBox::new(),
        },
    };
    let ctx = Context::new(options.measure_time, factory);
    Cell::new(executor, id, shared, ActorState::new(actor, ctx))
}

/// Registers the actor's name, if it has one, and runs its first turn on its executor.
pub(crate) fn start<A: Actor>(
    system: &SystemShared,
    cell: &Arc<ActorCell<A>>,
    first: Runnable,
    options: &SpawnOptions,
) {
    if let Some(name) = &options.name {
        let addr = Addr::from_cell(cell.clone());
        if let Err(e) = register(system, name, &addr) {
            tracing::warn!(actor = %cell.id(), error = %e, "spawned without its name");
        }
    }
    let executor = cell.executor();
    if !executor.as_any().is::<ThreadExecutor>() {
        first.schedule();
        return;
    }
    let name = format!("{}-actor-{}", system.name, cell.id());
    match dedicated::start_thread(executor.clone(), cell.id(), name) {
        Ok(handle) => {
            system.keep_thread(handle);
            first.schedule();
        }
        Err(e) => {
            tracing::error!(actor = %cell.id(), error = %e, "no thread for a thread-backed actor: stopping it");
            cell.signal(Signal::Stop);
            // Nobody else can run this actor (it has no thread): its turns run here until it
            // has stopped.
            raw::run_here(first, usize::MAX);
        }
    }
}

/// Registers `addr` under `name`; the name is released when the actor stops.
pub(crate) fn register<A: Actor>(
    system: &SystemShared,
    name: &str,
    addr: &Addr<A>,
) -> Result<(), RegistryError> {
    system
        .names()
        .claim(name, addr.id(), Arc::new(addr.clone()))?;
    // Remember the name on the actor, so its end releases it; if it already ended, undo.
    if !addr.remember_name(name) {
        system.names().release(name, addr.id());
        return Err(RegistryError::Stopped(name.to_owned()));
    }
    Ok(())
}

/// The actor of type `A` registered under `name`, if any.
pub(crate) fn lookup<A: Actor>(system: &SystemShared, name: &str) -> Option<Addr<A>> {
    system
        .names()
        .get(name)
        .and_then(|addr| addr.downcast_ref::<Addr<A>>().cloned())
}

/// Spawns a top-level actor.
fn spawn_root<A: Actor>(system: &Arc<SystemShared>, actor: A, options: SpawnOptions) -> Addr<A> {
    let (cell, first) = system.register_root(|root| {
        let (cell, first) = new_cell(system, actor, None, &options, None, ParentLink::Root(root));
        let erased: ErasedRef = cell.clone();
        (erased, (cell, first))
    });
    start(system, &cell, first, &options);
    if system.is_shutting_down() {
        cell.signal(Signal::Stop);
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
        let mut configs = vec![
            PoolConfig {
                name: self.name.clone(),
                workers: self.workers,
                throughput: self.throughput,
                may_block: false,
            },
            PoolConfig {
                name: format!("{}-blocking", self.name),
                workers: self.blocking_workers,
                throughput: self.throughput,
                may_block: true,
            },
        ];
        let mut names = vec!["default".to_owned(), "blocking".to_owned()];
        for (name, workers, throughput) in &self.pools {
            if names.contains(name) {
                return Err(BuildError::Config(format!("two pools named `{name}`")));
            }
            configs.push(PoolConfig {
                name: format!("{}-{name}", self.name),
                workers: *workers,
                throughput: *throughput,
                may_block: false,
            });
            names.push(name.clone());
        }
        let mut pools = Vec::with_capacity(configs.len());
        for config in &configs {
            pools.push(Pool::start(config)?);
        }
        let timer_service = TimerService::start(&self.name)?;
        let shared = Arc::new(SystemShared::new(
            self.name,
            names
                .into_iter()
                .zip(&pools)
                .map(|(name, pool)| PoolEntry {
                    name,
                    pool: pool.shared.clone(),
                    executor: pool.executor.clone(),
                })
                .collect(),
            timer_service.handle(),
            self.io_threads,
        ));
        Ok(System {
            shared,
            pools,
            timer_service: Some(timer_service),
        })
    }
}

/// An actor system: worker pools, a timer wheel, an async runtime, and the actors on them.
///
/// Dropping the system shuts it down (waiting up to 10 s for actors to stop; from inside an
/// actor, in the background); call [`shutdown`](System::shutdown) or
/// [`shutdown_timeout`](System::shutdown_timeout) to choose.
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
        register(&self.shared, name, addr)
    }

    /// The actor of type `A` registered under `name`, if any (a name registered for another
    /// actor type is not found).
    pub fn lookup<A: Actor>(&self, name: &str) -> Option<Addr<A>> {
        lookup(&self.shared, name)
    }

    /// Releases `name`; true if it was registered.
    pub fn unregister(&self, name: &str) -> bool {
        self.shared.names().unregister(name)
    }

    /// Runs a future to completion on the system's async runtime, blocking the calling thread
    /// (not a worker): for tests, `main`, and bridging plain threads to async sends.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.shared.block_on(future)
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
            .pools()
            .iter()
            .map(|entry| {
                let c = entry.pool.counters();
                PoolMetrics {
                    name: entry.name.clone(),
                    workers: c.workers,
                    turns: c.turns,
                    steals: c.steals,
                    parks: c.parks,
                    injected_waiting: c.injected_waiting,
                }
            })
            .collect()
    }

    /// Stops every actor, waits for all of them, and joins every thread. Waits as long as it
    /// takes; a handler that never returns makes this wait forever (see `shutdown_timeout`).
    ///
    /// Called from inside an actor (a handler, or an actor on its own thread), it cannot wait
    /// (the caller is one of the actors it would wait for): it asks every actor to stop and
    /// returns at once; a background thread joins the system's threads once every actor,
    /// the caller included, has stopped.
    pub fn shutdown(mut self) {
        if role::runs_actors() {
            self.shutdown_in_background();
            return;
        }
        // Without a deadline, the only outcome is success.
        let _ = self.shutdown_inner(None);
    }

    /// Like [`shutdown`](System::shutdown), but gives up waiting after `timeout`, reporting how
    /// many actors were still running. They are left to finish (they have been asked to stop);
    /// a background thread then releases the system's threads. Called from inside an actor, it
    /// begins shutdown as `shutdown` does and returns [`ShutdownError::InsideActor`].
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Result<(), ShutdownError> {
        if role::runs_actors() {
            self.shutdown_in_background();
            return Err(ShutdownError::InsideActor);
        }
        self.shutdown_inner(Some(timeout))
    }

    fn shutdown_inner(&mut self, timeout: Option<Duration>) -> Result<(), ShutdownError> {
        if self.pools.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        self.shared.begin_shutdown();
        tracing::debug!(system = %self.shared.name, "shutting down");
        if !self.shared.stop_all_and_wait(timeout.map(|t| started + t)) {
            let remaining = self.shared.live();
            self.shutdown_in_background();
            return Err(ShutdownError::Timeout {
                remaining,
                waited: started.elapsed(),
            });
        }
        self.release_threads();
        Ok(())
    }

    /// Asks every actor to stop and leaves the rest to a detached thread: it waits for them
    /// (re-sending stops to actors spawned meanwhile) and then releases the system's threads,
    /// so the caller need not wait and nothing leaks.
    fn shutdown_in_background(&mut self) {
        if self.pools.is_empty() {
            return;
        }
        self.shared.begin_shutdown();
        self.shared.stop_top_level();
        let mut rest = System {
            shared: self.shared.clone(),
            pools: std::mem::take(&mut self.pools),
            timer_service: self.timer_service.take(),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("{}-reaper", self.shared.name))
            .spawn(move || {
                rest.shared.stop_all_and_wait(None);
                rest.release_threads();
            });
        if spawned.is_err() {
            tracing::error!("could not start the thread that finishes a shutdown");
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
        self.shared.names().clear();
        for thread in self.shared.take_threads() {
            let _ = thread.join();
        }
        // The async runtime: its remaining tasks hold addresses of stopped actors at most.
        if let Some(runtime) = self.shared.take_io_runtime() {
            runtime.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

impl Drop for System {
    /// Shuts the system down as `shutdown_timeout(10 s)` does; from inside an actor, in the
    /// background (it never blocks an actor's thread).
    fn drop(&mut self) {
        if role::runs_actors() {
            self.shutdown_in_background();
        } else {
            let _ = self.shutdown_inner(Some(Duration::from_secs(10)));
        }
    }
}
