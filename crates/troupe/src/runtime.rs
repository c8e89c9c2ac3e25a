//! What every actor of a system shares with the system itself ([`SystemShared`]): the pools,
//! the registry of top-level actors, the count of live actors, the named registry, the timer
//! wheel and the async runtime.
//!
//! Top-level actors are registered in a sharded table so that shutdown can find them; children
//! are known to their parents. Every actor counts itself live from its spawn until its final
//! turn; shutdown waits for the count to reach zero.

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::erased::ErasedRef;
use crate::loom::{AtomicBool, AtomicUsize, Ordering};
use crate::names::Names;
use crate::raw::Executor;
use crate::scheduler::PoolShared;
use crate::signal::Signal;
use crate::timer::TimerHandle;

const REGISTRY_SHARDS: usize = 16;

/// Where a top-level actor sits in the system's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RootKey {
    shard: usize,
    key: usize,
}

/// A pool as the system knows it: its name, its state, and the handle its actors hold.
pub(crate) struct PoolEntry {
    pub(crate) name: String,
    pub(crate) pool: Arc<PoolShared>,
    pub(crate) executor: Arc<Executor>,
}

/// What every actor's cell and the system handle share.
pub(crate) struct SystemShared {
    pub(crate) name: String,
    /// `default` first, then `blocking`, then the builder's named pools.
    pools: Vec<PoolEntry>,
    registry: Box<[CachePadded<Mutex<slab::Slab<ErasedRef>>>]>,
    live: CachePadded<AtomicUsize>,
    all_stopped: (Mutex<()>, Condvar),
    dedicated_threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
    names: Names,
    timers: TimerHandle,
    /// The async runtime, started on first use; the system takes it out at shutdown.
    io_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    io: OnceLock<tokio::runtime::Handle>,
    io_threads: usize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section in this file is a single insert, removal or take: a poisoned lock
    // is still consistent.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl SystemShared {
    pub(crate) fn new(
        name: String,
        pools: Vec<PoolEntry>,
        timers: TimerHandle,
        io_threads: usize,
    ) -> Self {
        Self {
            name,
            pools,
            registry: (0..REGISTRY_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(slab::Slab::new())))
                .collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            all_stopped: (Mutex::new(()), Condvar::new()),
            dedicated_threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
            names: Names::default(),
            timers,
            io_runtime: Mutex::new(None),
            io: OnceLock::new(),
            io_threads,
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
            *lock(&self.io_runtime) = Some(runtime);
            handle
        })
    }

    /// Runs `future` on the async runtime, blocking the calling thread.
    pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.io().block_on(future)
    }

    /// The async runtime, taken out to be shut down.
    pub(crate) fn take_io_runtime(&self) -> Option<tokio::runtime::Runtime> {
        lock(&self.io_runtime).take()
    }

    /// The default pool's executor.
    pub(crate) fn default_pool(&self) -> &Arc<Executor> {
        &self.pools[0].executor
    }

    /// The executor of the pool called `name`, if any.
    pub(crate) fn pool_named(&self, name: &str) -> Option<&Arc<Executor>> {
        self.pools
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.executor)
    }

    /// Every pool.
    pub(crate) fn pools(&self) -> &[PoolEntry] {
        &self.pools
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
