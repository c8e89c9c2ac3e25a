//! Spawning: where an actor runs ([`Placement`], [`SpawnOptions`]), building its cell, starting
//! it on its executor, and the typed front of the named registry.

use std::sync::Arc;

use crate::actor::{Actor, Context, Factory};
use crate::addr::Addr;
use crate::bounded::{Bound, Overflow};
use crate::erased::{ErasedCell, ErasedRef, Extras};
use crate::id::ActorId;
use crate::lazy::LazyBox;
use crate::life::{ActorCell, ActorShared, ActorState, ParentLink};
use crate::names::RegistryError;
use crate::raw::{self, Cell, Executor, Runnable};
use crate::runtime::SystemShared;
use crate::scheduler::dedicated::{self, ThreadExecutor};
use crate::scheduler::PoolShared;
use crate::signal::{Signal, SignalStack};
use crate::supervision::Restart;

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
            Ok(Some(pool)) => pool.clone(),
            Ok(None) => {
                tracing::warn!(
                    pool = name,
                    "no pool of that name: the actor goes on `default`"
                );
                system.default_pool().clone()
            }
            Err(error) => {
                tracing::error!(pool = name, %error, "the pool could not start: the actor goes on `default`");
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
    match dedicated::start_thread(executor.clone(), cell.id(), name, system.io().clone()) {
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
pub(crate) fn spawn_root<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    options: SpawnOptions,
) -> Addr<A> {
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
