//! What every actor of a system shares with the system itself ([`SystemShared`]): the pools,
//! the registry of top-level actors, the count of live actors, the named registry, the timer
//! wheel and the async runtime.
//!
//! Top-level actors are registered in a sharded table so that shutdown can find them; children
//! are known to their parents. Every actor counts itself live from its spawn until its final
//! turn; shutdown waits for the count to reach zero.
//!
//! Pools other than `default` start when the first actor is placed on them, so a system whose
//! actors never block pays no thread for the `blocking` pool. The started pools' threads are
//! kept here until shutdown joins them.
//!
//! A simulated system (`sim/`) has a [`Host`] instead of threads: the host gives the executors
//! of its pools and of thread-placed actors, runs its futures, and hears of every spawn; the
//! timers are on the host's clock and the thread that drives the simulation runs it wherever
//! it would otherwise wait (`role::Drive`). This file and `system.rs` are where the two kinds of
//! system differ.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::erased::{ErasedCell, ErasedRef};
use crate::error::BuildError;
use crate::id::ActorId;
use crate::loom::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::names::Names;
use crate::raw::Executor;
use crate::role;
use crate::scheduler::{Pool, PoolConfig, PoolShared};
use crate::signal::Signal;
use crate::timer::TimerHandle;
use crate::watch::Observer;

const REGISTRY_SHARDS: usize = 16;

/// Where a top-level actor sits in the system's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RootKey {
    shard: usize,
    key: usize,
}

/// A future the system runs for an actor (`pipe`, `await_then`, `attach_stream`).
pub(crate) type IoFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What runs a simulated system in place of threads (implemented by `sim/`). See the module
/// note.
pub(crate) trait Host: Send + Sync {
    /// The executor of the pool `config` describes.
    fn pool(&self, config: &PoolConfig) -> Arc<Executor>;
    /// The executor of the actor `id`, placed on a thread of its own.
    fn thread(&self, id: ActorId) -> Arc<Executor>;
    /// The actor `id`, of type `type_name`, was spawned.
    fn spawned(&self, actor: Weak<dyn ErasedCell>, type_id: TypeId, type_name: &'static str);
    /// Runs `future` among the simulation's tasks.
    fn spawn(&self, future: IoFuture) -> IoTask;
    /// The system has released its threads (shutdown is over): what is scheduled from now on
    /// never runs, as on pools whose workers have been joined, and new futures are dropped,
    /// as by a runtime that has shut down.
    fn shut_down(&self);
}

/// A task a simulation runs ([`Host::spawn`]), as its handle sees it.
pub(crate) trait HostedTask: Send + Sync {
    /// Drops the future at the simulation's next step (a poll under way finishes).
    fn abort(&self);
    /// True once the future has finished or been dropped.
    fn is_finished(&self) -> bool;
}

/// The handle of a future the system runs.
#[derive(Clone)]
pub(crate) enum IoTask {
    Tokio(tokio::task::AbortHandle),
    Hosted(Arc<dyn HostedTask>),
}

impl IoTask {
    pub(crate) fn abort(&self) {
        match self {
            IoTask::Tokio(task) => task.abort(),
            IoTask::Hosted(task) => task.abort(),
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        match self {
            IoTask::Tokio(task) => task.is_finished(),
            IoTask::Hosted(task) => task.is_finished(),
        }
    }
}

impl std::fmt::Debug for IoTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoTask::Tokio(task) => task.fmt(f),
            IoTask::Hosted(_) => f.write_str("IoTask::Hosted"),
        }
    }
}

/// A pool as the system knows it: its name, how to start it, and, once started, its state (a
/// simulated system's pools have none) and the handle its actors hold.
pub(crate) struct PoolEntry {
    pub(crate) name: String,
    config: PoolConfig,
    started: OnceLock<(Option<Arc<PoolShared>>, Arc<Executor>)>,
}

impl PoolEntry {
    pub(crate) fn new(name: String, config: PoolConfig) -> Self {
        Self {
            name,
            config,
            started: OnceLock::new(),
        }
    }

    /// How the pool is set up.
    pub(crate) fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// The pool's state, if it has started on threads.
    pub(crate) fn pool(&self) -> Option<&Arc<PoolShared>> {
        self.started.get().and_then(|(pool, _)| pool.as_ref())
    }

    /// The handle the pool's actors hold, once it has started.
    pub(crate) fn executor(&self) -> Option<&Arc<Executor>> {
        self.started.get().map(|(_, executor)| executor)
    }

    /// True once the pool has started (its threads, or its simulated executor).
    pub(crate) fn is_started(&self) -> bool {
        self.started.get().is_some()
    }
}

/// What every actor's cell and the system handle share.
pub(crate) struct SystemShared {
    pub(crate) name: String,
    /// `default` first (started with the system), then `blocking`, then the builder's named
    /// pools (started on first use).
    pools: Vec<PoolEntry>,
    /// The threads of every started pool; `None` once shutdown has taken them (no pool starts
    /// after that).
    running: Mutex<Option<Vec<Pool>>>,
    registry: Box<[CachePadded<Mutex<slab::Slab<ErasedRef>>>]>,
    live: CachePadded<AtomicUsize>,
    /// Top-level supervised actors stopped for good by failing past their restart intensity.
    escalations: AtomicU64,
    /// Notified when the live count reaches zero; the mutex holds the tasks waiting for that
    /// (`until_all_stopped`).
    all_stopped: (Mutex<Vec<Waker>>, Condvar),
    dedicated_threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
    names: Names,
    timers: TimerHandle,
    /// The async runtime: the caller's (`SystemBuilder::tokio_handle`) or the system's own
    /// (a simulation's, for a simulated system).
    io: tokio::runtime::Handle,
    /// What runs a simulated system; `None` for one on threads.
    host: Option<Arc<dyn Host>>,
    /// What an observed system keeps of its actors (`SystemBuilder::observe`).
    observer: Option<Arc<Observer>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section in this file is a single insert, removal or take: a poisoned lock
    // is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl SystemShared {
    /// The shared state of a system whose `default` pool (the first entry) is `default`, or,
    /// for a simulated system, whose pools are all `host`'s.
    pub(crate) fn new(
        name: String,
        pools: Vec<PoolEntry>,
        default: Result<Pool, Arc<dyn Host>>,
        timers: TimerHandle,
        io: tokio::runtime::Handle,
        observer: Option<Arc<Observer>>,
    ) -> Self {
        let (running, host) = match default {
            Ok(default) => {
                let started = (Some(default.shared.clone()), default.executor.clone());
                assert!(
                    pools[0].started.set(started).is_ok(),
                    "the default pool starts once"
                );
                (vec![default], None)
            }
            Err(host) => {
                let started = (None, host.pool(&pools[0].config));
                assert!(
                    pools[0].started.set(started).is_ok(),
                    "the default pool starts once"
                );
                (Vec::new(), Some(host))
            }
        };
        Self {
            name,
            pools,
            running: Mutex::new(Some(running)),
            registry: (0..REGISTRY_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(slab::Slab::new())))
                .collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            escalations: AtomicU64::new(0),
            all_stopped: (Mutex::new(Vec::new()), Condvar::new()),
            dedicated_threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            names: Names::default(),
            timers,
            io,
            host,
            observer,
        }
    }

    /// The observer, if the system is observed.
    pub(crate) fn observer(&self) -> Option<&Arc<Observer>> {
        self.observer.as_ref()
    }

    /// What runs this system, if it is simulated.
    pub(crate) fn host(&self) -> Option<&Arc<dyn Host>> {
        self.host.as_ref()
    }

    /// The time of the system's clock (the simulated one, for a simulated system).
    pub(crate) fn now(&self) -> Instant {
        self.timers.now()
    }

    /// Registers a top-level actor built by `build` (given its registry key); returns what
    /// `build` returns besides the erased reference.
    pub(crate) fn register_root<R>(&self, build: impl FnOnce(RootKey) -> (ErasedRef, R)) -> R {
        let shard = registry_shard();
        let mut table = lock(&self.registry[shard]);
        let entry = table.vacant_entry();
        let key = RootKey {
            shard,
            key: entry.key(),
        };
        let (erased, out) = build(key);
        entry.insert(erased);
        out
    }

    /// Removes a top-level actor that has finished.
    pub(crate) fn unregister(&self, root: RootKey) {
        let removed = lock(&self.registry[root.shard]).try_remove(root.key);
        // Dropped outside the lock.
        drop(removed);
    }

    /// Asks every top-level actor to stop (each stops its children first).
    pub(crate) fn stop_top_level(&self) {
        self.signal_top_level(|| Signal::Stop);
    }

    /// Sends `signal()` to every top-level actor.
    pub(crate) fn signal_top_level(&self, signal: fn() -> Signal) {
        for shard in self.registry.iter() {
            let targets: Vec<ErasedRef> = lock(shard).iter().map(|(_, c)| c.clone()).collect();
            for cell in targets {
                cell.signal(signal());
            }
        }
    }

    /// An actor was spawned.
    pub(crate) fn actor_spawned(&self) {
        // SeqCst, with `begin_shutdown`'s store and `live`'s load: a spawn that raises the
        // count before a shutdown reads it is waited for; one that raises it after reads the
        // shutdown's flag (`spawn::start`) and stops itself. Never both missed.
        self.live.fetch_add(1, Ordering::SeqCst);
    }

    /// An actor finished (its final turn).
    pub(crate) fn actor_finished(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Notify under the lock so a waiter between its check and its wait cannot miss it.
            let waiting = std::mem::take(&mut *lock(&self.all_stopped.0));
            self.all_stopped.1.notify_all();
            waiting.into_iter().for_each(Waker::wake);
        }
    }

    /// Completes once no actor is live (the live count can rise again afterwards).
    pub(crate) async fn until_all_stopped(&self) {
        std::future::poll_fn(|cx| {
            let mut waiting = lock(&self.all_stopped.0);
            if self.live() == 0 {
                return Poll::Ready(());
            }
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// A top-level supervised actor failed past its restart intensity.
    pub(crate) fn escalated(&self) {
        self.escalations.fetch_add(1, Ordering::Relaxed);
    }

    /// How many top-level actors failed past their restart intensity so far.
    pub(crate) fn escalations(&self) -> u64 {
        self.escalations.load(Ordering::Relaxed)
    }

    /// Actors spawned and not yet finished.
    pub(crate) fn live(&self) -> usize {
        // SeqCst: pairs with `actor_spawned` (see there).
        self.live.load(Ordering::SeqCst)
    }

    /// Waits until no actor is live, re-sending stops every 100 ms (actors spawned while others
    /// stop are caught too), or until `deadline`. True if every actor stopped.
    ///
    /// On the thread that drives a simulation, the simulation runs meanwhile, on its own clock.
    pub(crate) fn stop_all_and_wait(&self, deadline: Option<Instant>) -> bool {
        self.signal_all_and_wait(|| Signal::Stop, deadline)
    }

    /// [`stop_all_and_wait`](SystemShared::stop_all_and_wait), sending `signal()` (a stop, or a
    /// drain) to the top-level actors.
    pub(crate) fn signal_all_and_wait(
        &self,
        signal: fn() -> Signal,
        deadline: Option<Instant>,
    ) -> bool {
        if let Some(driver) = role::driver() {
            let what = || format!("every actor to stop ({} live)", self.live());
            let mut idle_rounds = 0;
            loop {
                self.signal_top_level(signal);
                let steps = driver.steps();
                let next = driver.now() + Duration::from_millis(100);
                let until = deadline.map_or(next, |deadline| deadline.min(next));
                if driver.run_until(&mut || self.live() == 0, Some(until), &what) {
                    return true;
                }
                if deadline.is_some_and(|deadline| driver.now() >= deadline) {
                    return false;
                }
                // Nothing ran for two rounds, the stops re-sent included: nothing ever will.
                idle_rounds = if driver.steps() == steps {
                    idle_rounds + 1
                } else {
                    0
                };
                if idle_rounds == 2 && deadline.is_none() {
                    driver.stuck(&what());
                }
            }
        }
        let mut guard = lock(&self.all_stopped.0);
        loop {
            if self.live() == 0 {
                return true;
            }
            drop(guard);
            self.signal_top_level(signal);
            guard = lock(&self.all_stopped.0);
            if self.live() == 0 {
                return true;
            }
            let mut wait = Duration::from_millis(100);
            if let Some(deadline) = deadline {
                let now = Instant::now();
                if now >= deadline {
                    return false;
                }
                wait = wait.min(deadline - now);
            }
            guard = self
                .all_stopped
                .1
                .wait_timeout(guard, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Shutdown has begun: new top-level actors are stopped as they start.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn timers(&self) -> &TimerHandle {
        &self.timers
    }

    /// Keeps a thread-backed actor's thread, to join it at shutdown.
    pub(crate) fn keep_thread(&self, thread: JoinHandle<()>) {
        let mut threads = lock(&self.dedicated_threads);
        threads.retain(|t| !t.is_finished());
        threads.push(thread);
    }

    /// The thread-backed actors' threads, to join.
    pub(crate) fn take_threads(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *lock(&self.dedicated_threads))
    }

    /// The async runtime for I/O (`Context::pipe`, `await_then`).
    pub(crate) fn io(&self) -> &tokio::runtime::Handle {
        &self.io
    }

    /// Runs `future` for an actor: on the async runtime, or among a simulation's tasks.
    pub(crate) fn spawn_io(&self, future: impl Future<Output = ()> + Send + 'static) -> IoTask {
        match &self.host {
            None => IoTask::Tokio(self.io.spawn(future).abort_handle()),
            Some(host) => host.spawn(Box::pin(future)),
        }
    }

    /// Runs `future` on the async runtime, blocking the calling thread; on the thread that
    /// drives a simulation, the simulation runs until the future is done.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        let Some(driver) = role::driver() else {
            let _blocking = role::enter_blocking_on();
            return self.io.block_on(future);
        };
        let _runtime = self.io.enter();
        let mut future = std::pin::pin!(future);
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(woken.clone());
        loop {
            let mut cx = std::task::Context::from_waker(&waker);
            if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
                return output;
            }
            driver.run_until(&mut || woken.take(), None, &|| {
                "a future given to `System::block_on`".to_owned()
            });
        }
    }

    /// The default pool's executor.
    pub(crate) fn default_pool(&self) -> &Arc<Executor> {
        let (_, executor) = self.pools[0]
            .started
            .get()
            .expect("started with the system");
        executor
    }

    /// The executor of the pool called `name`, started now if this is its first actor.
    /// `Ok(None)` if there is no such pool.
    pub(crate) fn pool_named(&self, name: &str) -> Result<Option<&Arc<Executor>>, BuildError> {
        let Some(entry) = self.pools.iter().find(|p| p.name == name) else {
            return Ok(None);
        };
        if let Some((_, executor)) = entry.started.get() {
            return Ok(Some(executor));
        }
        if let Some(host) = &self.host {
            let (_, executor) = entry
                .started
                .get_or_init(|| (None, host.pool(&entry.config)));
            return Ok(Some(executor));
        }
        // Started under the lock that shutdown takes the threads with: a pool either starts
        // before shutdown (and is joined) or not at all.
        let mut running = lock(&self.running);
        let Some(running) = running.as_mut() else {
            return Err(BuildError::Config(format!(
                "pool `{name}` cannot start: the system is shutting down"
            )));
        };
        if entry.started.get().is_none() {
            let pool = Pool::start(&entry.config)?;
            let _ = entry
                .started
                .set((Some(pool.shared.clone()), pool.executor.clone()));
            running.push(pool);
        }
        Ok(entry.started.get().map(|(_, executor)| executor))
    }

    /// Every pool.
    pub(crate) fn pools(&self) -> &[PoolEntry] {
        &self.pools
    }

    /// The threads of every started pool, to stop and join (once).
    pub(crate) fn take_pools(&self) -> Vec<Pool> {
        lock(&self.running).take().unwrap_or_default()
    }

    /// Worker threads in the default pool.
    pub(crate) fn default_workers(&self) -> usize {
        self.pools[0].config.workers
    }
}

/// A waker that only records that it was woken (`block_on` on a simulation's thread).
#[derive(Default)]
struct Woken(Mutex<bool>);

impl Woken {
    /// True if woken since the last call.
    fn take(&self) -> bool {
        std::mem::take(&mut *lock(&self.0))
    }
}

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        *lock(&self.0) = true;
    }
}

/// The registry shard the calling thread spawns into. Each thread keeps one (handed out round
/// robin), so threads spawning at the same time rarely share a lock, and one thread spawning
/// many actors fills one shard's table in order: a spawn then finds its slot, and the lock,
/// still in cache (rotating over the shards per spawn made the slot a cache miss each time).
fn registry_shard() -> usize {
    // A counter only handed out: nothing for the model checker (and a `static` cannot hold
    // loom's atomic, see `loom.rs`).
    #[allow(clippy::disallowed_types)]
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize =
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % REGISTRY_SHARDS;
    }
    SHARD.with(|s| *s)
}
