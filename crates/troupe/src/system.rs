//! The [`System`]: owns the worker pool, spawns top-level actors, shuts everything down.
//!
//! Top-level actors are registered in a sharded table so shutdown can find them; children are
//! known to their parents. Shutdown asks every top-level actor to stop (each stops its children
//! first), waits until the count of live actors reaches zero, then stops and joins the worker
//! threads and the threads of thread-backed actors.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::actor::Actor;
use crate::addr::Addr;
use crate::cell::{ActorCell, ChildRef, Executor, ParentLink, Signal};
use crate::error::{BuildError, ShutdownError};
use crate::scheduler::dedicated::{self, ThreadWaker};
use crate::scheduler::{self, Pool, PoolShared};

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
    /// On the system's shared worker pool: lightweight, many per thread (the default).
    #[default]
    Pool,
    /// On an OS thread of its own, which parks when the mailbox is empty. For actors that
    /// block, or to compare with thread-per-actor designs.
    Thread,
}

const REGISTRY_SHARDS: usize = 16;

/// What every actor's context and the system handle share.
pub(crate) struct SystemShared {
    name: String,
    pool: Arc<PoolShared>,
    registry: Box<[CachePadded<Mutex<slab::Slab<ChildRef>>>]>,
    live: CachePadded<AtomicUsize>,
    all_stopped: (Mutex<()>, Condvar),
    next_id: AtomicU64,
    dedicated_threads: Mutex<Vec<JoinHandle<()>>>,
    shutting_down: AtomicBool,
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
}

/// Builds a cell for `actor`, not yet running. The caller registers it, then calls `start`.
pub(crate) fn new_cell<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    placement: Placement,
    parent: ParentLink,
) -> Arc<ActorCell<A>> {
    let executor = match placement {
        Placement::Pool => Executor::Pool(system.pool.clone()),
        Placement::Thread => Executor::Thread(Arc::new(ThreadWaker::new())),
    };
    system.live.fetch_add(1, Ordering::AcqRel);
    Arc::new(ActorCell::new(
        actor,
        executor,
        system.next_id(),
        parent,
        system.clone(),
    ))
}

/// Creates the cell's alive reference and schedules its first turn.
pub(crate) fn start<A: Actor>(system: &SystemShared, cell: &Arc<ActorCell<A>>) {
    // The alive reference: released by the actor's final turn.
    let alive = Arc::into_raw(cell.clone());
    debug_assert_eq!(alive, Arc::as_ptr(cell));
    let raw = cell.raw();
    match &cell.header_executor() {
        Executor::Pool(_) => scheduler::schedule(raw),
        Executor::Thread(waker) => {
            let name = format!("{}-actor-{}", system.name, cell.id());
            // SAFETY: freshly built cell, alive reference held, first turn not yet scheduled.
            match unsafe { dedicated::start(raw, waker, name) } {
                Ok(handle) => {
                    let mut threads = system
                        .dedicated_threads
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    threads.retain(|t| !t.is_finished());
                    threads.push(handle);
                }
                Err(_) => {
                    // No thread to run it: run it on the pool's behalf instead is not possible
                    // (its executor is fixed), so stop it right away on this thread.
                    cell.signal_stop();
                    // SAFETY: nobody else runs this actor (it has no thread); running its turns
                    // here until it stops releases the alive reference.
                    unsafe { while raw.run_catching(usize::MAX) != crate::cell::Turn::Stopped {} }
                }
            }
        }
    }
}

/// Spawns a top-level actor.
fn spawn_root<A: Actor>(system: &Arc<SystemShared>, actor: A, placement: Placement) -> Addr<A> {
    let id_hint = system.next_id.load(Ordering::Relaxed) as usize;
    let shard = id_hint % REGISTRY_SHARDS;
    let cell = {
        let mut table = system.registry[shard]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let entry = table.vacant_entry();
        let key = entry.key();
        let cell = new_cell(system, actor, placement, ParentLink::Root { shard, key });
        entry.insert(cell.clone());
        cell
    };
    start(system, &cell);
    if system.shutting_down.load(Ordering::SeqCst) {
        cell.signal_stop();
    }
    Addr::from_cell(cell)
}

/// Configures and builds a [`System`].
///
/// ```
/// let system = troupe::System::builder().workers(2).throughput(64).build().unwrap();
/// system.shutdown();
/// ```
#[derive(Debug, Clone)]
pub struct SystemBuilder {
    workers: usize,
    throughput: usize,
    name: String,
}

impl Default for SystemBuilder {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            throughput: 64,
            name: "troupe".to_owned(),
        }
    }
}

impl SystemBuilder {
    /// Worker threads in the shared pool (default: one per available core).
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

    /// Prefix of thread names: workers are `<name>-<i>`, thread-backed actors
    /// `<name>-actor-<id>` (default `troupe`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Starts the worker threads.
    pub fn build(self) -> Result<System, BuildError> {
        let pool = Pool::start(&self.name, self.workers, self.throughput)?;
        let shared = Arc::new(SystemShared {
            name: self.name,
            pool: pool.shared.clone(),
            registry: (0..REGISTRY_SHARDS)
                .map(|_| CachePadded::new(Mutex::new(slab::Slab::new())))
                .collect(),
            live: CachePadded::new(AtomicUsize::new(0)),
            all_stopped: (Mutex::new(()), Condvar::new()),
            next_id: AtomicU64::new(1),
            dedicated_threads: Mutex::new(Vec::new()),
            shutting_down: AtomicBool::new(false),
        });
        Ok(System {
            shared,
            pool: Some(pool),
        })
    }
}

/// An actor system: a pool of worker threads and the actors on it.
///
/// Dropping the system shuts it down (waiting up to 10 s for actors to stop); call
/// [`shutdown`](System::shutdown) or [`shutdown_timeout`](System::shutdown_timeout) to choose.
pub struct System {
    shared: Arc<SystemShared>,
    pool: Option<Pool>,
}

impl fmt::Debug for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("System")
            .field("pool", &self.shared.pool.name)
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

    /// Spawns a top-level actor on the shared pool.
    pub fn spawn<A: Actor>(&self, actor: A) -> Addr<A> {
        spawn_root(&self.shared, actor, Placement::Pool)
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
        spawn_root(&self.shared, actor, placement)
    }

    /// Actors spawned and not yet fully stopped.
    pub fn live_actors(&self) -> usize {
        self.shared.live()
    }

    /// Worker threads in the shared pool.
    pub fn workers(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.size())
    }

    /// Stops every actor, waits for all of them, and joins every thread. Waits as long as it
    /// takes; a handler that never returns makes this wait forever (see `shutdown_timeout`).
    pub fn shutdown(mut self) {
        self.shutdown_inner(None)
            .expect("no deadline, so no timeout");
    }

    /// Like [`shutdown`](System::shutdown), but gives up after `timeout`, reporting how many
    /// actors were still running; their threads are then left detached.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Result<(), ShutdownError> {
        self.shutdown_inner(Some(timeout))
    }

    fn shutdown_inner(&mut self, timeout: Option<Duration>) -> Result<(), ShutdownError> {
        let Some(pool) = self.pool.take() else {
            return Ok(());
        };
        let started = Instant::now();
        self.shared.shutting_down.store(true, Ordering::SeqCst);
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
                    // Leave the workers running for the actors that are still busy.
                    std::mem::forget(pool);
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
        pool.stop();
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
        Ok(())
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
