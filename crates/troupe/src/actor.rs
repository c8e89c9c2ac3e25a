//! What a user writes: the [`Actor`], [`Message`] and [`Handler`] traits, and the [`Context`]
//! a handler gets.
//!
//! An actor owns its state and handles one message at a time (`&mut self`), so it needs no
//! locks. It accepts every message type `M` for which it implements `Handler<M>`; sending it
//! anything else does not compile.

use std::future::Future;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::addr::Addr;
use crate::cell::{ActorCell, ParentLink};
use crate::lifecycle::{ChildEntry, Children, Cold, Phase};
use crate::signal::Signal;
use crate::supervisor::{Failure, StopReason, SupervisorStrategy};
use crate::system::{ActorId, SpawnOptions, SystemShared};
use crate::timer::TimerId;

/// An actor: state plus behaviour, driven by messages.
///
/// The lifecycle hooks run on the actor's own turn, like handlers:
/// `started` before the first message; `stopping` when a stop begins (children are still
/// running; messages still in the mailbox are dropped and their askers get
/// [`AskError::Stopped`](crate::AskError::Stopped)); `stopped` after every child has stopped,
/// just before the actor's state is dropped; `restarted` on a new instance built by the
/// supervisor after a failure.
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, System};
///
/// struct Greeter { greeted: u32 }
/// impl Actor for Greeter {}
///
/// struct Greet(&'static str);
/// impl Message for Greet { type Reply = String; }
///
/// impl Handler<Greet> for Greeter {
///     fn handle(&mut self, msg: Greet, _ctx: &mut Context<Self>) -> String {
///         self.greeted += 1;
///         format!("hello {} (#{})", msg.0, self.greeted)
///     }
/// }
///
/// let system = System::new();
/// let greeter = system.spawn(Greeter { greeted: 0 });
/// assert_eq!(greeter.ask(Greet("ada")).wait().unwrap(), "hello ada (#1)");
/// system.shutdown();
/// ```
pub trait Actor: Sized + Send + 'static {
    /// Runs once, before the first message is handled.
    fn started(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once when the actor begins to stop (by [`Context::stop`], [`Addr::stop`], its
    /// parent stopping, its supervisor, or system shutdown).
    fn stopping(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once after all children have stopped; the actor is dropped right after.
    fn stopped(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs on a new instance built by the supervisor, in place of `started`; `reason` is the
    /// failure that caused the restart (`None` when a sibling's failure or a permanent child's
    /// own stop caused it). By default it calls `started`.
    fn restarted(&mut self, ctx: &mut Context<Self>, reason: Option<&Failure>) {
        let _ = reason;
        self.started(ctx);
    }

    /// How this actor supervises the children it spawns (default: one-for-one, at most 3
    /// restarts in 5 seconds). Consulted each time a child fails.
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::default()
    }
}

/// A message type, and the type of its reply (`()` for messages that are only told).
///
/// ```
/// struct Add(u64);
/// impl troupe::Message for Add { type Reply = (); }
/// ```
pub trait Message: Send + 'static {
    /// What a handler returns for this message; delivered to the asker by `ask`.
    type Reply: Send + 'static;
}

/// An actor's behaviour for message type `M`.
///
/// ```compile_fail
/// use troupe::{Actor, Context, Handler, Message, System};
/// struct Counter(u64);
/// impl Actor for Counter {}
/// struct Add(u64);
/// impl Message for Add { type Reply = (); }
/// struct Unrelated;
/// impl Message for Unrelated { type Reply = (); }
/// impl Handler<Add> for Counter {
///     fn handle(&mut self, msg: Add, _: &mut Context<Self>) { self.0 += msg.0 }
/// }
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// counter.tell(Unrelated); // Counter does not handle `Unrelated`: does not compile
/// ```
pub trait Handler<M: Message>: Actor {
    /// Handles one message. The return value is the reply to an `ask` (ignored for `tell`).
    fn handle(&mut self, msg: M, ctx: &mut Context<Self>) -> M::Reply;
}

/// Sent to a watcher when an actor it watches ([`Context::watch`]) stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    /// The actor that stopped.
    pub id: ActorId,
    /// How it ended.
    pub reason: StopReason,
}

impl Message for Terminated {
    type Reply = ();
}

/// Identifies a watch, to cancel it with [`Context::unwatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchId(u64);

/// The actor's view of itself and the runtime during a turn: its own address, stopping,
/// spawning and supervising children, watching and linking, timers, and async work.
pub struct Context<A: Actor> {
    /// The cell this context belongs to; set when each turn begins.
    pub(crate) cell: Option<NonNull<ActorCell<A>>>,
    pub(crate) children: Option<Box<Children>>,
    pub(crate) stop_requested: bool,
    /// The stop came from outside (`Addr::stop`, a parent, shutdown), not `ctx.stop()`.
    pub(crate) stop_external: bool,
    /// Holding the mailbox while a future runs (`await_then`).
    pub(crate) suspended: bool,
    /// Something needs the lifecycle's attention before the next message: not yet started, a
    /// stop, a failure, an await, a parked message. One flag keeps the hot loop's check cheap.
    pub(crate) attention: bool,
    /// Measure time spent in handlers.
    pub(crate) timed: bool,
    /// Where the actor is in its life (kept here, beside the flags, where it costs no padding).
    pub(crate) phase: Phase,
    /// Rarely needed state (see `lifecycle::Cold`).
    pub(crate) cold: Option<Box<Cold<A>>>,
}

// SAFETY: the context lives inside its actor's cell and is touched only by the actor's current
// turn; the raw cell pointer is to that same (Sync) cell.
unsafe impl<A: Actor> Send for Context<A> {}

impl<A: Actor> Context<A> {
    pub(crate) fn new() -> Self {
        Self {
            cell: None,
            children: None,
            stop_requested: false,
            stop_external: false,
            suspended: false,
            attention: true, // `started` has yet to run
            timed: false,
            phase: Phase::Starting,
            cold: None,
        }
    }

    fn cell(&self) -> &ActorCell<A> {
        let cell = self
            .cell
            .expect("a context is used only inside its actor's turns");
        // SAFETY: set by the running turn to its own live cell.
        unsafe { cell.as_ref() }
    }

    fn system(&self) -> Arc<SystemShared> {
        self.cell().system().clone()
    }

    /// This actor's own address, to give to others or keep.
    pub fn myself(&self) -> Addr<A> {
        let cell = self
            .cell
            .expect("a context is used only inside its actor's turns");
        // SAFETY: `cell` came from `Arc::into_raw` (the cell's "alive" reference, held until the
        // actor's last turn ends) and this runs inside a turn, so the allocation is live.
        unsafe { Addr::from_cell_ptr(cell) }
    }

    /// This actor's id.
    pub fn id(&self) -> ActorId {
        self.cell().id()
    }

    /// Stops this actor after the current message: no further messages are handled. (A
    /// supervised child spawned with `Restart::Permanent` is restarted by its supervisor
    /// instead.)
    pub fn stop(&mut self) {
        self.stop_requested = true;
        self.attention = true;
    }

    /// Spawns a child on this actor's pool (or the system's default pool, for an actor on a
    /// thread of its own). It cannot be restarted (there is no factory to rebuild it): if it
    /// fails, it stops. Children are stopped before their parent finishes stopping.
    pub fn spawn<B: Actor>(&mut self, actor: B) -> Addr<B> {
        self.spawn_with(actor, SpawnOptions::new())
    }

    /// Spawns a child with options (placement, bounded mailbox, name...).
    pub fn spawn_with<B: Actor>(&mut self, actor: B, options: SpawnOptions) -> Addr<B> {
        self.spawn_child_inner(actor, None, options)
    }

    /// Spawns a supervised child built by `factory`, which is called again to rebuild it when
    /// it fails and this actor's [`SupervisorStrategy`] restarts it. Its address stays valid
    /// across restarts. `options.restart(..)` sets its restart policy (default permanent).
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, SpawnOptions, System};
    /// struct Worker { handled: u32 }
    /// impl Actor for Worker {}
    /// struct Job(u32);
    /// impl Message for Job { type Reply = u32; }
    /// impl Handler<Job> for Worker {
    ///     fn handle(&mut self, job: Job, _: &mut Context<Self>) -> u32 {
    ///         if job.0 == 0 { panic!("bad job") }
    ///         self.handled += 1;
    ///         self.handled
    ///     }
    /// }
    /// struct Boss;
    /// impl Actor for Boss {}
    /// struct Hire;
    /// impl Message for Hire { type Reply = troupe::Addr<Worker>; }
    /// impl Handler<Hire> for Boss {
    ///     fn handle(&mut self, _: Hire, ctx: &mut Context<Self>) -> troupe::Addr<Worker> {
    ///         ctx.spawn_supervised(|| Worker { handled: 0 }, SpawnOptions::new())
    ///     }
    /// }
    /// let system = System::new();
    /// let boss = system.spawn(Boss);
    /// let worker = boss.ask(Hire).wait().unwrap();
    /// assert_eq!(worker.ask(Job(1)).wait(), Ok(1));
    /// assert!(worker.ask(Job(0)).wait().is_err()); // panics: restarted by Boss
    /// assert_eq!(worker.ask(Job(1)).wait(), Ok(1)); // a fresh instance, same address
    /// system.shutdown();
    /// ```
    pub fn spawn_supervised<B: Actor>(
        &mut self,
        mut factory: impl FnMut() -> B + Send + 'static,
        options: SpawnOptions,
    ) -> Addr<B> {
        let first = factory();
        self.spawn_child_inner(first, Some(Box::new(factory)), options)
    }

    fn spawn_child_inner<B: Actor>(
        &mut self,
        actor: B,
        factory: Option<Box<dyn FnMut() -> B + Send>>,
        options: SpawnOptions,
    ) -> Addr<B> {
        let parent = self.myself().into_erased();
        let inherit = crate::system::inherited_pool(self.cell().header_executor());
        let system = self.system();
        let restart = options.restart_policy();
        let restartable = factory.is_some();
        let children = self.children_mut();
        let seq = children.next_seq;
        children.next_seq += 1;
        let entry = children.slab.vacant_entry();
        let key = entry.key();
        let cell = crate::system::new_cell(
            &system,
            actor,
            factory,
            &options,
            inherit,
            ParentLink::Actor { parent, key },
        );
        entry.insert(ChildEntry {
            cell: cell.clone(),
            restart,
            restartable,
            seq,
        });
        crate::system::start(&system, &cell, &options);
        Addr::from_cell(cell)
    }

    /// Number of children currently alive (not yet reported stopped).
    pub fn children_count(&self) -> usize {
        self.children.as_ref().map_or(0, |c| c.slab.len())
    }

    /// Watches `other`: when it stops, this actor receives [`Terminated`] (at once if it has
    /// already stopped). Erlang's monitors, Akka's death watch.
    pub fn watch<B: Actor>(&mut self, other: &Addr<B>) -> WatchId
    where
        A: Handler<Terminated>,
    {
        let me = self.myself();
        let watcher = Box::new(move |id: ActorId, reason: &StopReason| {
            let _ = me.tell(Terminated {
                id,
                reason: reason.clone(),
            });
        });
        let outcome = other.erased().extras().lock().add_watcher(watcher);
        match outcome {
            Ok(id) => WatchId(id),
            Err((watcher, reason)) => {
                watcher(other.id(), &reason);
                WatchId(0)
            }
        }
    }

    /// Stops watching (no `Terminated` will come from this watch).
    pub fn unwatch<B: Actor>(&mut self, other: &Addr<B>, watch: WatchId) {
        other
            .erased()
            .extras()
            .lock()
            .watchers
            .retain(|(id, _)| *id != watch.0);
    }

    /// Links this actor with `other`, both ways: when either fails (stops with
    /// [`StopReason::Failed`]), the other fails too, with `Failure::LinkFailed`, and its own
    /// supervisor decides. A normal stop does not propagate. (To be told instead of failing,
    /// use [`watch`](Context::watch).)
    pub fn link<B: Actor>(&mut self, other: &Addr<B>) {
        let me = self.myself().into_erased();
        let them = other.erased();
        let my_id = self.id();
        them.extras()
            .lock()
            .links
            .push((my_id, Arc::downgrade(&me)));
        let ended = {
            let mut mine = me.extras().lock();
            mine.links.push((them.actor_id(), Arc::downgrade(&them)));
            drop(mine);
            them.extras().lock().ended.clone()
        };
        if let Some(StopReason::Failed(_)) = ended {
            me.signal(Signal::LinkFailed(them.actor_id()));
        }
    }

    /// Removes a link made with [`link`](Context::link).
    pub fn unlink<B: Actor>(&mut self, other: &Addr<B>) {
        let my_id = self.id();
        let them = other.erased();
        them.extras().lock().links.retain(|(id, _)| *id != my_id);
        self.myself()
            .into_erased()
            .extras()
            .lock()
            .links
            .retain(|(id, _)| *id != them.actor_id());
    }

    /// Registers this actor under `name` in the system's registry (released when it stops).
    pub fn register(&mut self, name: &str) -> Result<(), crate::RegistryError> {
        self.cell().system().names().register(name, &self.myself())
    }

    /// Looks up an actor of type `B` registered under `name`.
    pub fn lookup<B: Actor>(&self, name: &str) -> Option<Addr<B>> {
        self.cell().system().names().lookup(name)
    }

    /// Sends `msg` to this actor after `delay` (unless cancelled with
    /// [`cancel_timer`](Context::cancel_timer)).
    pub fn send_after<M>(&mut self, delay: Duration, msg: M) -> TimerId
    where
        A: Handler<M>,
        M: Message,
    {
        let me = self.myself();
        self.cell().system().timers().schedule(
            delay,
            Box::new(move || {
                let _ = me.tell(msg);
            }),
        )
    }

    /// Sends a message built by `make` to this actor every `period`, the first after one
    /// period, until cancelled or until this actor stops.
    pub fn send_interval<M>(
        &mut self,
        period: Duration,
        mut make: impl FnMut() -> M + Send + 'static,
    ) -> TimerId
    where
        A: Handler<M>,
        M: Message,
    {
        let me = self.myself();
        self.cell().system().timers().schedule_repeating(
            period,
            period,
            Box::new(move || me.tell(make()).is_ok()),
        )
    }

    /// Cancels a timer; true if it had not fired (or, for an interval, had not been
    /// cancelled yet).
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.cell().system().timers().cancel(timer)
    }

    /// Runs `future` on the system's async runtime (tokio) and delivers its output to this
    /// actor as the message `map(output)`. The actor keeps handling other messages meanwhile
    /// (Akka's `pipeTo`). Use it for I/O and anything that waits. The future runs on tokio:
    /// create tokio resources (sleeps, sockets) inside an `async` block, so that they are made
    /// on the runtime rather than on the worker thread running this handler.
    pub fn pipe<F, M>(&mut self, future: F, map: impl FnOnce(F::Output) -> M + Send + 'static)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        A: Handler<M>,
        M: Message,
    {
        let me = self.myself();
        self.cell().system().io().spawn(async move {
            let output = future.await;
            let _ = me.tell(map(output));
        });
    }

    /// Runs `future` on the system's async runtime while this actor holds its mailbox: no
    /// other message is handled until the future is done and `then` has run with its output.
    /// The worker thread is not blocked meanwhile. Use it when the next message must see the
    /// result (a read-modify-write against a store, say); otherwise prefer
    /// [`pipe`](Context::pipe). Stopping the actor meanwhile drops `then`.
    pub fn await_then<F>(
        &mut self,
        future: F,
        then: impl FnOnce(&mut A, &mut Context<A>, F::Output) + Send + 'static,
    ) where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let cell = self.myself();
        let slot: Arc<std::sync::Mutex<Option<F::Output>>> = Arc::default();
        let result = slot.clone();
        self.suspended = true;
        self.attention = true;
        self.cold_mut().resume = Some(Box::new(move |actor: &mut A, ctx: &mut Context<A>| {
            let output = result
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .expect("resumed after the future finished");
            then(actor, ctx, output);
        }));
        self.cell().system().io().spawn(async move {
            let output = future.await;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(output);
            cell.erased().signal(Signal::Resume);
        });
    }
}
