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
use crate::names::{RegistryError, Reservation};
use crate::raw::{self, Cell, Executor, Runnable};
use crate::runtime::SystemShared;
use crate::scheduler::dedicated::{self, ThreadExecutor};
use crate::signal::{Signal, SignalStack};
use crate::supervision::{Intensity, Restart, SupervisorStrategy};
use crate::watch::{ActorWatch, Listed};

/// Where a spawned actor runs.
///
/// ```
/// use troupe::{Actor, Placement, SpawnOptions, System};
/// struct Database;
/// impl Actor for Database {}
/// let system = System::builder().pool("db", 1, 16).build().unwrap();
/// let on_pool = system.spawn(Database); // the default pool
/// let on_thread = system.spawn_on(Database, Placement::Thread);
/// let isolated = system.spawn_with(Database, SpawnOptions::new().placement(Placement::Named("db")));
/// system.shutdown();
/// assert!(on_pool.is_stopped() && on_thread.is_stopped() && isolated.is_stopped());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Placement {
    /// On a shared worker pool: lightweight, many per thread (the default). A top-level actor
    /// goes to the `default` pool; a child goes to its parent's pool.
    #[default]
    Pool,
    /// On the named pool (`"default"`, `"blocking"`, or one added with
    /// [`SystemBuilder::pool`](crate::SystemBuilder::pool)). An unknown name falls back to the default pool.
    Named(&'static str),
    /// On an OS thread of its own, which parks when the mailbox is empty. For actors that
    /// block, or to compare with thread-per-actor designs.
    Thread,
}

/// How to spawn an actor: where it runs, its mailbox, its restart policy and supervision.
///
/// ```
/// use troupe::{Overflow, Placement, Restart, SpawnOptions};
/// let options = SpawnOptions::new()
///     .placement(Placement::Named("blocking"))
///     .bounded(1_000, Overflow::DropOldest)
///     .restart(Restart::Transient)
///     .measure_time();
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    placement: Placement,
    bounded: Option<(usize, Overflow)>,
    restart: Restart,
    supervision: SupervisorStrategy,
    measure_time: bool,
    catch_up: u32,
}

impl SpawnOptions {
    /// Defaults: pool placement, unbounded mailbox, permanent restart policy.
    ///
    /// ```
    /// let options = troupe::SpawnOptions::new(); // the same as SpawnOptions::default()
    /// let system = troupe::System::new();
    /// # struct Idle;
    /// # impl troupe::Actor for Idle {}
    /// system.spawn_with(Idle, options);
    /// system.shutdown();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Where it runs.
    ///
    /// ```
    /// use troupe::{Actor, Placement, SpawnOptions, System};
    /// struct Blocking;
    /// impl Actor for Blocking {}
    /// let system = System::new();
    /// system.spawn_with(Blocking, SpawnOptions::new().placement(Placement::Named("blocking")));
    /// system.shutdown();
    /// ```
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// A mailbox of at most `capacity` messages, with `overflow` deciding what a full mailbox
    /// does with one more.
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
    /// let counter = system.spawn_with(Counter(0), SpawnOptions::new().bounded(1_000, Overflow::Fail));
    /// counter.tell(Add(1)).unwrap();
    /// system.shutdown();
    /// ```
    pub fn bounded(mut self, capacity: usize, overflow: Overflow) -> Self {
        self.bounded = Some((capacity, overflow));
        self
    }

    /// Its restart policy under a supervisor (for actors spawned with
    /// [`Context::spawn_supervised`](crate::Context::spawn_supervised) or
    /// [`System::spawn_supervised`](crate::System::spawn_supervised)).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::{Restart, SpawnOptions, StopReason};
    /// #[derive(Message)]
    /// struct Done;
    /// impl Handler<Done> for Counter {
    ///     fn handle(&mut self, _: Done, ctx: &mut Context<Self>) { ctx.stop() }
    /// }
    /// let system = System::new();
    /// // Transient: restarted if it fails, but its own stop is final.
    /// let job = system.spawn_supervised(|| Counter(0), SpawnOptions::new().restart(Restart::Transient));
    /// job.tell(Done).unwrap();
    /// assert_eq!(job.stopped().wait(), Ok(StopReason::Normal));
    /// system.shutdown();
    /// ```
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// How the system supervises a top-level actor spawned with
    /// [`System::spawn_supervised`](crate::System::spawn_supervised): its intensity limit
    /// (past it, the actor stops, failed) and back-off (default: at most 3 restarts in 5 s, no
    /// back-off). A child's supervisor is its parent's `supervisor_strategy` instead.
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
    /// use troupe::{SpawnOptions, SupervisorStrategy};
    /// let system = System::new();
    /// let strategy = SupervisorStrategy::one_for_one()
    ///     .intensity(5, Duration::from_secs(60))
    ///     .backoff(Duration::from_millis(10), Duration::from_secs(1));
    /// let counter = system.spawn_supervised(|| Counter(0), SpawnOptions::new().supervision(strategy));
    /// counter.tell(Add(1)).unwrap();
    /// system.shutdown();
    /// ```
    pub fn supervision(mut self, strategy: SupervisorStrategy) -> Self {
        self.supervision = strategy;
        self
    }

    /// Measures the time its handlers take (see [`Addr::metrics`]); costs two clock reads per
    /// turn.
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
    /// let timed = system.spawn_with(Counter(0), SpawnOptions::new().measure_time());
    /// timed.ask(Get).wait().unwrap();
    /// // Added up when the turn ends, which may be just after the reply.
    /// while timed.metrics().handler_time.is_none() { std::thread::yield_now() }
    /// let untimed = system.spawn(Counter(0));
    /// untimed.ask(Get).wait().unwrap();
    /// assert!(untimed.metrics().handler_time.is_none());
    /// system.shutdown();
    /// ```
    pub fn measure_time(mut self) -> Self {
        self.measure_time = true;
        self
    }

    /// Catch-up for a fan-in actor: once `waiting` messages are queued for it, a sender that
    /// runs on a worker of its pool, and holds it as the next actor to run, runs a turn of it
    /// before that send returns. A handler that sends millions of messages in one turn then
    /// feeds this actor as it goes, instead of leaving a backlog that is read back cold after
    /// the handler ends (the counting actor of seed 002 is the case).
    ///
    /// A send from a thread outside every pool (a plain thread, or a task's thread) that finds
    /// the actor behind cannot run its turn; it waits instead, for half the backlog to be read
    /// or for at most a millisecond, whichever comes first, as a full bounded channel holds its
    /// sender (but never refuses the message, and never for long: the actor may be waiting for
    /// that very thread). A thread that feeds actors faster than their worker reads, or that
    /// the kernel runs on the worker's own CPU, would otherwise build a backlog of fresh memory
    /// that the worker reads back cold, at half its rate (`troupe-bench fanout --actors 60`).
    /// `PoolMetrics::catch_up_waits` counts these waits. A sender on a worker of the actor's
    /// pool that the pool narrowed past during the sending turn (`SystemBuilder::narrowing`)
    /// waits too, at most a millisecond, while the workers taking work handle messages
    /// (`PoolMetrics::aside_waits`). Sends from other pools, from workers taking work and
    /// from actors' own threads are unaffected.
    /// Off by default; `waiting` is clamped to 1..=2^31.
    ///
    /// The lent turn runs on the sender's thread while the sender's handler is suspended in
    /// its send, so a sender that holds a lock across `tell` must not send to an actor whose
    /// handlers take the same lock: with catch-up on, that deadlocks.
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
    /// let counter = system.spawn_with(Counter(0), SpawnOptions::new().catch_up(1_024));
    /// counter.tell(Add(1)).unwrap();
    /// assert_eq!(counter.ask(Get).wait(), Ok(1));
    /// system.shutdown();
    /// ```
    pub fn catch_up(mut self, waiting: usize) -> Self {
        self.catch_up = waiting.clamp(1, 1 << 31) as u32;
        self
    }

    pub(crate) fn restart_policy(&self) -> Restart {
        self.restart
    }
}

/// The executor a child of an actor running on `parent` inherits: the parent's pool, if it
/// runs on one.
pub(crate) fn inherited_pool(parent: &Arc<Executor>) -> Option<Arc<Executor>> {
    parent.is_pool().then(|| parent.clone())
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
    let id = ActorId::next();
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
        Placement::Thread => match system.host() {
            None => Executor::new(Arc::new(ThreadExecutor::new())),
            Some(host) => host.thread(id),
        },
    };
    system.actor_spawned();
    tracing::trace!(actor = %id, "spawning");
    let bound = options
        .bounded
        .map(|(capacity, overflow)| Bound::new(capacity, overflow));
    let watch = system.observer().map(|observer| {
        Arc::new(ActorWatch::new(
            observer.clone(),
            std::any::type_name::<A>(),
            parent.actor_id(),
            pool_name(options.placement, &parent),
        ))
    });
    let shared = ActorShared {
        signals: SignalStack::new(),
        parent,
        system: system.clone(),
        extras: match (bound, watch) {
            (bound, Some(watch)) => LazyBox::with(Extras::watched(bound, watch)),
            (Some(bound), None) => LazyBox::with(Extras::bounded(bound)),
            (None, None) => LazyBox::new(),
        },
    };
    let ctx = Context::new(options.measure_time, factory);
    let (cell, first) = Cell::new(
        executor,
        id,
        shared,
        ActorState::new(actor, ctx),
        options.catch_up,
    );
    if let Some(observer) = system.observer() {
        let listed: Arc<dyn Listed> = cell.clone();
        observer.spawned(id, Arc::downgrade(&listed));
    }
    if let Some(host) = system.host() {
        let erased: Arc<dyn ErasedCell> = cell.clone();
        host.spawned(
            Arc::downgrade(&erased),
            std::any::TypeId::of::<A>(),
            std::any::type_name::<A>(),
        );
    }
    (cell, first)
}

/// The name of the pool an actor placed by `placement` runs on, for observers: a child on
/// `Placement::Pool` runs on its parent's.
fn pool_name(placement: Placement, parent: &ParentLink) -> Arc<str> {
    match placement {
        Placement::Named(name) => Arc::from(name),
        Placement::Thread => Arc::from("thread"),
        Placement::Pool => match parent {
            ParentLink::Actor { parent, .. } => parent
                .extras()
                .watch
                .as_ref()
                .map_or_else(|| Arc::from("default"), |watch| watch.pool.clone()),
            ParentLink::Root(_) => Arc::from("default"),
        },
    }
}

/// Runs the actor's first turn on its executor (starting its thread, for a thread-backed actor).
///
/// Into a system that is shutting down, the actor is stopped instead, at once and on this
/// thread: its pools may already be stopped (a turn scheduled there would never run, and its
/// messages would be neither delivered nor handed back), so it runs `started`, then stops; its
/// address refuses messages from then on, handing them back. The live count was raised
/// (`new_cell`) before shutdown's flag is read here, so a shutdown either sees this actor live
/// and waits for it, or set the flag first and this actor stops itself.
pub(crate) fn start<A: Actor>(system: &SystemShared, cell: &Arc<ActorCell<A>>, first: Runnable) {
    if system.is_shutting_down() {
        cell.signal(Signal::Stop);
        raw::run_here(first, usize::MAX);
        return;
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

/// Registers `addr` under `name`; the name is released when the actor begins to stop.
pub(crate) fn register<A: Actor>(
    system: &SystemShared,
    name: &str,
    addr: &Addr<A>,
) -> Result<(), RegistryError> {
    system.names().register(
        name,
        (
            addr.id(),
            Arc::new(addr.clone()) as Arc<dyn std::any::Any + Send + Sync>,
            std::any::type_name::<A>(),
        ),
    )?;
    // Remember the name on the actor, so its stop releases it; if it is stopping already,
    // undo.
    if !addr.remember_name(name) {
        system.names().release(name, addr.id());
        return Err(RegistryError::Stopped(name.to_owned()));
    }
    Ok(())
}

/// The actor of type `A` registered under `name`, or why there is none.
pub(crate) fn find<A: Actor>(system: &SystemShared, name: &str) -> Result<Addr<A>, RegistryError> {
    let (addr, registered) = system.names().get(name)?;
    addr.downcast_ref::<Addr<A>>()
        .cloned()
        .ok_or_else(|| RegistryError::WrongType {
            name: name.to_owned(),
            registered,
            requested: std::any::type_name::<A>(),
        })
}

/// Spawns a top-level actor under `name`, or says why not (the name is taken): the name is
/// reserved first, so `make` is called only with the name held, at most once for it however
/// many threads spawn it at once; and it is filled before the actor starts, so nobody can take
/// it in between. A `make` that panics gives the name back.
pub(crate) fn spawn_root_named<A: Actor>(
    system: &Arc<SystemShared>,
    name: &str,
    options: SpawnOptions,
    make: impl FnOnce() -> A,
) -> Result<Addr<A>, RegistryError> {
    let reservation = system.names().reserve(name)?;
    spawn_reserved(system, reservation, options, make)
}

/// Spawns a top-level actor under a name reserved for it.
fn spawn_reserved<A: Actor>(
    system: &Arc<SystemShared>,
    reservation: Reservation<'_>,
    options: SpawnOptions,
    make: impl FnOnce() -> A,
) -> Result<Addr<A>, RegistryError> {
    let name = reservation.name().to_owned();
    let name = name.as_str();
    let actor = make();
    let (cell, first) = system.names().claim(reservation, || {
        let (cell, first) = system.register_root(|root| {
            let (cell, first) =
                new_cell(system, actor, None, &options, None, ParentLink::Root(root));
            let erased: ErasedRef = cell.clone();
            (erased, (cell, first))
        });
        let addr = Addr::from_cell(cell.clone());
        let registration = (
            addr.id(),
            Arc::new(addr) as Arc<dyn std::any::Any + Send + Sync>,
            std::any::type_name::<A>(),
        );
        (registration, (cell, first))
    })?;
    let addr = Addr::from_cell(cell.clone());
    // A fresh actor has not stopped: the name is remembered, and released when it stops.
    let remembered = addr.remember_name(name);
    debug_assert!(remembered);
    start(system, &cell, first);
    if system.is_shutting_down() {
        cell.signal(Signal::Stop);
    }
    Ok(addr)
}

/// The actor of type `A` under `name`, spawning one with `make` if there is none.
pub(crate) fn get_or_spawn_root_named<A: Actor>(
    system: &Arc<SystemShared>,
    name: &str,
    options: SpawnOptions,
    make: impl FnOnce() -> A,
) -> Result<Addr<A>, RegistryError> {
    let mut make = Some(make);
    loop {
        match find::<A>(system, name) {
            Ok(addr) => return Ok(addr),
            Err(RegistryError::NotFound(_)) => {}
            Err(other) => return Err(other),
        }
        match system.names().reserve(name) {
            Ok(reservation) => {
                let make = make.take().expect("make is called once");
                return match spawn_reserved(system, reservation, options, make) {
                    // Registered meanwhile by `register`, which does not wait: theirs.
                    Err(RegistryError::Taken(_)) => find::<A>(system, name),
                    other => other,
                };
            }
            // Another spawn holds the name: wait until its actor is there (or it gave up).
            Err(RegistryError::Taken(_)) => {
                if !system.names().wait_unreserved(name) {
                    // This thread's own `make` asks for the name it is making.
                    return Err(RegistryError::Taken(name.to_owned()));
                }
            }
            Err(other) => return Err(other),
        }
    }
}

/// Spawns a top-level actor.
pub(crate) fn spawn_root<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    options: SpawnOptions,
) -> Addr<A> {
    spawn_root_with(system, actor, None, options)
}

fn spawn_root_with<A: Actor>(
    system: &Arc<SystemShared>,
    actor: A,
    factory: Option<Factory<A>>,
    options: SpawnOptions,
) -> Addr<A> {
    let (cell, first) = system.register_root(|root| {
        let (cell, first) = new_cell(
            system,
            actor,
            factory,
            &options,
            None,
            ParentLink::Root(root),
        );
        let erased: ErasedRef = cell.clone();
        (erased, (cell, first))
    });
    start(system, &cell, first);
    if system.is_shutting_down() {
        cell.signal(Signal::Stop);
    }
    Addr::from_cell(cell)
}

/// Spawns a top-level actor built by `factory`, which the system restarts when it fails (or,
/// `Restart::Permanent`, stops itself), within `options.supervision`'s limits.
pub(crate) fn spawn_root_supervised<A: Actor>(
    system: &Arc<SystemShared>,
    mut factory: impl FnMut() -> A + Send + 'static,
    options: SpawnOptions,
) -> Addr<A> {
    let first = factory();
    let factory = Factory {
        make: Box::new(factory),
        restart: options.restart,
        own: Some((options.supervision, Intensity::default())),
    };
    spawn_root_with(system, first, Some(factory), options)
}
