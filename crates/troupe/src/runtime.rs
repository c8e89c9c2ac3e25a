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

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::erased::ErasedRef;
use crate::error::BuildError;
use crate::loom::{AtomicBool, AtomicUsize, Ordering};
use crate::names::Names;
use crate::raw::Executor;
use crate::scheduler::{Pool, PoolConfig, PoolShared};
use crate::signal::Signal;
use crate::timer::TimerHandle;

const REGISTRY_SHARDS: usize = 16;

/// Where a top-level actor sits in the system's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RootKey {
    shard: usize,
    key: usize,
}

/// A pool as the system knows it: its name, how to start it, and, once started, its state and
/// the handle its actors hold.
pub(crate) struct PoolEntry {
    pub(crate) name: String,
    config: PoolConfig,
    started: OnceLock<(Arc<PoolShared>, Arc<Executor>)>,
}

impl PoolEntry {
    pub(crate) fn new(name: String, config: PoolConfig) -> Self {
        Self {
            name,
            config,
            started: OnceLock::new(),
        }
    }

    /// The pool's state, if it has started.
    pub(crate) fn pool(&self) -> Option<&Arc<PoolShared>> {
        self.started.get().map(|(pool, _)| pool)
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
    all_stopped: (Mutex<()>, Condvar),
    dedicated_threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
    names: Names,
    timers: TimerHandle,
    /// The async runtime: the caller's (`SystemBuilder::tokio_handle`) or the system's own.
    io: tokio::runtime::Handle,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section in this file is a single insert, removal or take: a poisoned lock
    // is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl SystemShared {
    /// The shared state of a system whose `default` pool (the first entry) is `default`.
    pub(crate) fn new(
        name: String,
        pools: Vec<PoolEntry>,
        default: Pool,
        timers: TimerHandle,
        io: tokio::runtime::Handle,
    ) -> Self {
        let started = (default.shared.clone(), default.executor.clone());
        assert!(
            pools[0].started.set(started).is_ok(),
            "the default pool starts once"
        );
        Self {
            name,
            pools,
            running: Mutex::new(Some(vec![default])),
            registry: (0..REGISTRY_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(slab::Slab::new())))
                .collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            all_stopped: (Mutex::new(()), Condvar::new()),
            dedicated_threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            names: Names::default(),
            timers,
            io,
        }
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
        for shard in self.registry.iter() {
            let targets: Vec<ErasedRef> = lock(shard).iter().map(|(_, c)| c.clone()).collect();
            for cell in targets {
                cell.signal(Signal::Stop);
            }
        }
    }

    /// An actor was spawned.
    pub(crate) fn actor_spawned(&self) {
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// An actor finished (its final turn).
    pub(crate) fn actor_finished(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Notify under the lock so a waiter between its check and its wait cannot miss it.
            let _guard = lock(&self.all_stopped.0);
            self.all_stopped.1.notify_all();
        }
    }

    /// Actors spawned and not yet finished.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Waits until no actor is live, re-sending stops every 100 ms (actors spawned while others
    /// stop are caught too), or until `deadline`. True if every actor stopped.
    pub(crate) fn stop_all_and_wait(&self, deadline: Option<Instant>) -> bool {
        let mut guard = lock(&self.all_stopped.0);
        loop {
            if self.live() == 0 {
                return true;
            }
            drop(guard);
            self.stop_top_level();
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

    /// Runs `future` on the async runtime, blocking the calling thread.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.io.block_on(future)
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
                .set((pool.shared.clone(), pool.executor.clone()));
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
