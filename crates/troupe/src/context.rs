//! The methods of [`Context`] that reach beyond the actor itself: its address, children,
//! supervision, watches and links, the registry, timers, and async work. (The struct and the
//! methods that touch only the actor's own state are in `actor.rs`.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::actor::kind::Kind;
use crate::actor::{
    Accepts, Actor, Awaiting, Context, Factory, Handler, Message, Terminated, WatchId,
};
use crate::addr::Addr;
use crate::drain::{PipeGone, Piped};
use crate::erased::{ErasedCell, ErasedRef};
use crate::failure::StopReason;
use crate::id::ActorId;
use crate::life::ParentLink;
use crate::loom::{AtomicBool, Ordering};
use crate::observe::{Cause, InCause};
use crate::runtime::IoTask;
use crate::signal::Signal;
use crate::spawn::{self, SpawnOptions};
use crate::timer::TimerId;

/// A stream attached to an actor with [`Context::attach_stream`]; dropping it leaves the
/// stream running.
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, StreamHandle, System};
/// # struct Forever;
/// # impl futures_core::Stream for Forever {
/// #     type Item = u64;
/// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
/// #         -> std::task::Poll<Option<u64>> { std::task::Poll::Ready(Some(1)) }
/// # }
/// struct Sink { total: u64, feed: Option<StreamHandle> }
/// impl Actor for Sink {}
/// #[derive(Message)]
/// struct Tick(u64);
/// impl Handler<Tick> for Sink {
///     fn handle(&mut self, msg: Tick, _: &mut Context<Self>) { self.total += msg.0 }
/// }
/// #[derive(Message)]
/// struct Subscribe;
/// impl Handler<Subscribe> for Sink {
///     fn handle(&mut self, _: Subscribe, ctx: &mut Context<Self>) {
///         self.feed = Some(ctx.attach_stream(Forever, Tick)); // an endless stream
///     }
/// }
/// #[derive(Message)]
/// #[reply(bool)]
/// struct Unsubscribe;
/// impl Handler<Unsubscribe> for Sink {
///     fn handle(&mut self, _: Unsubscribe, _: &mut Context<Self>) -> bool {
///         let feed = self.feed.take().expect("subscribed");
///         feed.cancel();
///         true
///     }
/// }
/// let system = System::new();
/// let sink = system.spawn(Sink { total: 0, feed: None });
/// sink.tell(Subscribe).unwrap();
/// assert_eq!(sink.ask(Unsubscribe).wait(), Ok(true));
/// system.shutdown();
/// ```
#[derive(Debug)]
pub struct StreamHandle {
    task: IoTask,
}

impl StreamHandle {
    /// Stops pulling the stream (an item being handled is still handled).
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Forever;
    /// # impl futures_core::Stream for Forever {
    /// #     type Item = ();
    /// #     fn poll_next(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<()>> { std::task::Poll::Ready(Some(())) }
    /// # }
    /// struct Sink { feed: Option<troupe::StreamHandle> }
    /// impl Actor for Sink {}
    /// #[derive(Message)]
    /// struct Item;
    /// impl Handler<Item> for Sink {
    ///     fn handle(&mut self, _: Item, _: &mut Context<Self>) {}
    /// }
    /// #[derive(Message)]
    /// struct Start;
    /// impl Handler<Start> for Sink {
    ///     fn handle(&mut self, _: Start, ctx: &mut Context<Self>) {
    ///         self.feed = Some(ctx.attach_stream(Forever, |()| Item)); // an endless stream
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(bool)]
    /// struct Cancel;
    /// impl Handler<Cancel> for Sink {
    ///     fn handle(&mut self, _: Cancel, _: &mut Context<Self>) -> bool {
    ///         let feed = self.feed.as_ref().expect("started");
    ///         feed.cancel();
    ///         feed.is_finished() // soon true: the stream stops at its next item
    ///     }
    /// }
    /// let system = System::new();
    /// let sink = system.spawn(Sink { feed: None });
    /// sink.tell(Start).unwrap();
    /// while !sink.ask(Cancel).wait().unwrap() { std::thread::yield_now() }
    /// system.shutdown();
    /// ```
    pub fn cancel(&self) {
        self.task.abort();
    }

    /// True once the stream has ended, been cancelled, or its actor stopped.
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, StreamHandle, System};
    /// # struct Three(u32);
    /// # impl futures_core::Stream for Three {
    /// #     type Item = u32;
    /// #     fn poll_next(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<u32>> {
    /// #         self.0 += 1;
    /// #         std::task::Poll::Ready((self.0 <= 3).then_some(self.0))
    /// #     }
    /// # }
    /// struct Sink { feed: Option<StreamHandle> }
    /// impl Actor for Sink {}
    /// #[derive(Message)]
    /// struct Item(u32);
    /// impl Handler<Item> for Sink {
    ///     fn handle(&mut self, _: Item, _: &mut Context<Self>) {}
    /// }
    /// #[derive(Message)]
    /// struct Start;
    /// impl Handler<Start> for Sink {
    ///     fn handle(&mut self, _: Start, ctx: &mut Context<Self>) {
    ///         self.feed = Some(ctx.attach_stream(Three(0), Item));
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(bool)]
    /// struct Finished;
    /// impl Handler<Finished> for Sink {
    ///     fn handle(&mut self, _: Finished, _: &mut Context<Self>) -> bool {
    ///         self.feed.as_ref().is_some_and(|feed| feed.is_finished())
    ///     }
    /// }
    /// let system = System::new();
    /// let sink = system.spawn(Sink { feed: None });
    /// sink.tell(Start).unwrap();
    /// while !sink.ask(Finished).wait().unwrap() { std::thread::yield_now() } // three items, then done
    /// system.shutdown();
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<A: Actor> Context<A> {
    /// This actor's own address, to give to others or keep.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// #[derive(Message)]
    /// struct AddTwiceLater(u64);
    /// impl Handler<AddTwiceLater> for Counter {
    ///     fn handle(&mut self, msg: AddTwiceLater, ctx: &mut Context<Self>) {
    ///         let me = ctx.myself(); // an address to this very actor
    ///         me.tell(Add(msg.0)).unwrap();
    ///         me.tell(Add(msg.0)).unwrap();
    ///     }
    /// }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// counter.tell(AddTwiceLater(5)).unwrap();
    /// while counter.ask(Get).wait().unwrap() < 10 { std::thread::yield_now() }
    /// system.shutdown();
    /// ```
    pub fn myself(&self) -> Addr<A> {
        Addr::from_cell(self.cell().clone())
    }

    /// Stops this actor in order, as [`Addr::drain`]: after the messages already sent to it
    /// and the pipes it has in flight, its children drained first.
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, StopReason, System};
    /// struct Batch { left: u32 }
    /// impl Actor for Batch {}
    /// #[derive(Message)]
    /// struct Item;
    /// impl Handler<Item> for Batch {
    ///     fn handle(&mut self, _: Item, ctx: &mut Context<Self>) {
    ///         self.left -= 1;
    ///         if self.left == 5 {
    ///             ctx.drain(); // the items already sent are still handled
    ///         }
    ///     }
    /// }
    /// let system = System::new();
    /// let batch = system.spawn(Batch { left: 10 });
    /// for _ in 0..10 {
    ///     batch.tell(Item).unwrap();
    /// }
    /// assert_eq!(batch.stopped().wait(), Ok(StopReason::Normal));
    /// system.shutdown();
    /// ```
    pub fn drain(&mut self) {
        self.cell().signal(Signal::Drain);
    }

    /// Spawns a child on this actor's pool (or the system's default pool, for an actor on a
    /// thread of its own). It cannot be restarted (there is no factory to rebuild it): if it
    /// fails, it stops. Children are stopped before their parent finishes stopping.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// struct Team { members: Vec<troupe::Addr<Counter>> }
    /// impl Actor for Team {}
    /// #[derive(Message)]
    /// #[reply(troupe::Addr<Counter>)]
    /// struct Recruit;
    /// impl Handler<Recruit> for Team {
    ///     fn handle(&mut self, _: Recruit, ctx: &mut Context<Self>) -> troupe::Addr<Counter> {
    ///         let member = ctx.spawn(Counter(0)); // stopped when the team stops
    ///         self.members.push(member.clone());
    ///         member
    ///     }
    /// }
    /// let system = System::new();
    /// let team = system.spawn(Team { members: Vec::new() });
    /// let member = team.ask(Recruit).wait().unwrap();
    /// team.stop();
    /// member.stopped().wait().unwrap();
    /// system.shutdown();
    /// ```
    pub fn spawn<B: Actor>(&mut self, actor: B) -> Addr<B> {
        self.spawn_with(actor, SpawnOptions::new())
    }

    /// Spawns a child with options (placement, bounded mailbox, name...).
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
    /// struct Team;
    /// impl Actor for Team {}
    /// #[derive(Message)]
    /// #[reply(troupe::Addr<Counter>)]
    /// struct Recruit;
    /// impl Handler<Recruit> for Team {
    ///     fn handle(&mut self, _: Recruit, ctx: &mut Context<Self>) -> troupe::Addr<Counter> {
    ///         ctx.spawn_with(Counter(0), SpawnOptions::new().bounded(100, Overflow::DropOldest))
    ///     }
    /// }
    /// let system = System::new();
    /// let member = system.spawn(Team).ask(Recruit).wait().unwrap();
    /// member.tell(Add(1)).unwrap();
    /// system.shutdown();
    /// ```
    pub fn spawn_with<B: Actor>(&mut self, actor: B, options: SpawnOptions) -> Addr<B> {
        self.spawn_child_inner(actor, None, options)
    }

    /// Spawns a supervised child built by `factory`, which is called again to rebuild it when
    /// it fails and this actor's [`SupervisorStrategy`](crate::SupervisorStrategy) restarts it. Its address stays valid
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
        let factory = Factory {
            make: Box::new(factory),
            restart: options.restart_policy(),
            own: None,
        };
        self.spawn_child_inner(first, Some(factory), options)
    }

    fn spawn_child_inner<B: Actor>(
        &mut self,
        actor: B,
        factory: Option<Factory<B>>,
        options: SpawnOptions,
    ) -> Addr<B> {
        let parent = self.myself().into_erased();
        let inherit = spawn::inherited_pool(self.cell().executor());
        let shared = self.cell().shared.system.clone();
        let restart = options.restart_policy();
        let restartable = factory.is_some();
        let (cell, first) = self.children_mut().add(restart, restartable, |key| {
            let (cell, first) = spawn::new_cell(
                &shared,
                actor,
                factory,
                &options,
                inherit,
                ParentLink::Actor { parent, key },
            );
            let erased: ErasedRef = cell.clone();
            (erased, (cell, first))
        });
        spawn::start(&shared, &cell, first);
        Addr::from_cell(cell)
    }

    /// Watches `other`: when it stops, this actor receives [`Terminated`] (at once if it has
    /// already stopped). Erlang's monitors, Akka's death watch.
    ///
    /// ```
    /// use troupe::{Actor, Addr, Context, Handler, Message, StopReason, System, Terminated};
    /// # struct Worker;
    /// # impl Actor for Worker {}
    /// /// Stops itself when the worker it watches stops.
    /// struct Guard;
    /// impl Actor for Guard {}
    /// #[derive(Message)]
    /// struct Watch(Addr<Worker>);
    /// impl Handler<Watch> for Guard {
    ///     fn handle(&mut self, msg: Watch, ctx: &mut Context<Self>) { ctx.watch(&msg.0); }
    /// }
    /// impl Handler<Terminated> for Guard {
    ///     fn handle(&mut self, msg: Terminated, ctx: &mut Context<Self>) {
    ///         assert_eq!(msg.reason, StopReason::Normal);
    ///         ctx.stop();
    ///     }
    /// }
    /// let system = System::new();
    /// let worker = system.spawn(Worker);
    /// let guard = system.spawn(Guard);
    /// guard.ask(Watch(worker.clone())).wait().unwrap();
    /// worker.stop();
    /// assert_eq!(guard.stopped().wait(), Ok(StopReason::Normal));
    /// system.shutdown();
    /// ```
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
    ///
    /// ```
    /// use troupe::{Actor, Addr, Context, Handler, Message, System, Terminated};
    /// # struct Worker;
    /// # impl Actor for Worker {}
    /// struct Guard { told: u32 }
    /// impl Actor for Guard {}
    /// impl Handler<Terminated> for Guard {
    ///     fn handle(&mut self, _: Terminated, _: &mut Context<Self>) { self.told += 1 }
    /// }
    /// #[derive(Message)]
    /// struct WatchBriefly(Addr<Worker>);
    /// impl Handler<WatchBriefly> for Guard {
    ///     fn handle(&mut self, msg: WatchBriefly, ctx: &mut Context<Self>) {
    ///         let watch = ctx.watch(&msg.0);
    ///         ctx.unwatch(&msg.0, watch);
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(u32)]
    /// struct Told;
    /// impl Handler<Told> for Guard {
    ///     fn handle(&mut self, _: Told, _: &mut Context<Self>) -> u32 { self.told }
    /// }
    /// let system = System::new();
    /// let worker = system.spawn(Worker);
    /// let guard = system.spawn(Guard { told: 0 });
    /// guard.ask(WatchBriefly(worker.clone())).wait().unwrap();
    /// worker.stop();
    /// worker.stopped().wait().unwrap();
    /// assert_eq!(guard.ask(Told).wait(), Ok(0)); // unwatched: no Terminated
    /// system.shutdown();
    /// ```
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
    ///
    /// ```
    /// use troupe::{Actor, Addr, Context, Failure, Handler, Message, StopReason, System};
    /// struct Partner;
    /// impl Actor for Partner {}
    /// #[derive(Message)]
    /// struct LinkTo(Addr<Partner>);
    /// impl Handler<LinkTo> for Partner {
    ///     fn handle(&mut self, msg: LinkTo, ctx: &mut Context<Self>) { ctx.link(&msg.0) }
    /// }
    /// #[derive(Message)]
    /// struct Crash;
    /// impl Handler<Crash> for Partner {
    ///     fn handle(&mut self, _: Crash, _: &mut Context<Self>) { panic!("crash") }
    /// }
    /// let system = System::new();
    /// let a = system.spawn(Partner);
    /// let b = system.spawn(Partner);
    /// a.ask(LinkTo(b.clone())).wait().unwrap();
    /// b.tell(Crash).unwrap();
    /// // `a` fails with `b`.
    /// assert_eq!(a.stopped().wait(), Ok(StopReason::Failed(Failure::LinkFailed(b.id()))));
    /// system.shutdown();
    /// ```
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
    ///
    /// ```
    /// use troupe::{Actor, Addr, Context, Handler, Message, System};
    /// struct Partner;
    /// impl Actor for Partner {}
    /// #[derive(Message)]
    /// struct LinkBriefly(Addr<Partner>);
    /// impl Handler<LinkBriefly> for Partner {
    ///     fn handle(&mut self, msg: LinkBriefly, ctx: &mut Context<Self>) {
    ///         ctx.link(&msg.0);
    ///         ctx.unlink(&msg.0);
    ///     }
    /// }
    /// #[derive(Message)]
    /// struct Crash;
    /// impl Handler<Crash> for Partner {
    ///     fn handle(&mut self, _: Crash, _: &mut Context<Self>) { panic!("crash") }
    /// }
    /// let system = System::new();
    /// let a = system.spawn(Partner);
    /// let b = system.spawn(Partner);
    /// a.ask(LinkBriefly(b.clone())).wait().unwrap();
    /// b.tell(Crash).unwrap();
    /// b.stopped().wait().unwrap();
    /// assert!(!a.is_stopped()); // unlinked: `a` lives on
    /// system.shutdown();
    /// ```
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
    ///
    /// ```
    /// use troupe::{Actor, Context, System};
    /// struct Clock;
    /// impl Actor for Clock {
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.register("clock").expect("the name is free");
    ///     }
    /// }
    /// let system = System::new();
    /// let clock = system.spawn(Clock);
    /// while system.lookup::<Clock>("clock").is_none() { std::thread::yield_now() }
    /// assert_eq!(system.find::<Clock>("clock"), Ok(clock));
    /// system.shutdown();
    /// ```
    pub fn register(&mut self, name: &str) -> Result<(), crate::RegistryError> {
        spawn::register(&self.cell().shared.system, name, &self.myself())
    }

    /// Looks up an actor of type `B` registered under `name`.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// struct Client;
    /// impl Actor for Client {}
    /// #[derive(Message)]
    /// #[reply(bool)]
    /// struct Report(u64);
    /// impl Handler<Report> for Client {
    ///     fn handle(&mut self, msg: Report, ctx: &mut Context<Self>) -> bool {
    ///         match ctx.lookup::<Counter>("stats") {
    ///             Some(stats) => stats.tell(Add(msg.0)).is_ok(),
    ///             None => false,
    ///         }
    ///     }
    /// }
    /// let system = System::new();
    /// let client = system.spawn(Client);
    /// assert_eq!(client.ask(Report(1)).wait(), Ok(false));
    /// system.spawn_named("stats", troupe::SpawnOptions::new(), || Counter(0)).unwrap();
    /// assert_eq!(client.ask(Report(1)).wait(), Ok(true));
    /// system.shutdown();
    /// ```
    pub fn lookup<B: Actor>(&self, name: &str) -> Option<Addr<B>> {
        spawn::find(&self.cell().shared.system, name).ok()
    }

    /// The actor of type `B` registered under `name`, or why there is none.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::RegistryError;
    /// struct Client;
    /// impl Actor for Client {}
    /// #[derive(Message)]
    /// #[reply(Result<(), RegistryError>)]
    /// struct Report(u64);
    /// impl Handler<Report> for Client {
    ///     fn handle(&mut self, msg: Report, ctx: &mut Context<Self>) -> Result<(), RegistryError> {
    ///         let stats = ctx.find::<Counter>("stats")?;
    ///         let _ = stats.tell(Add(msg.0));
    ///         Ok(())
    ///     }
    /// }
    /// let system = System::new();
    /// let client = system.spawn(Client);
    /// assert_eq!(client.ask(Report(1)).wait(), Ok(Err(RegistryError::NotFound("stats".into()))));
    /// system.shutdown();
    /// ```
    pub fn find<B: Actor>(&self, name: &str) -> Result<Addr<B>, crate::RegistryError> {
        spawn::find(&self.cell().shared.system, name)
    }

    /// Sends `msg` to this actor after `delay` (unless cancelled with
    /// [`cancel_timer`](Context::cancel_timer), and unless this actor is restarted meanwhile:
    /// a failed instance's timers end with it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, StopReason, System};
    /// /// Stops itself 20 ms after it starts.
    /// struct Lease;
    /// impl Actor for Lease {
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.send_after(Duration::from_millis(20), Expire);
    ///     }
    /// }
    /// #[derive(Message)]
    /// struct Expire;
    /// impl Handler<Expire> for Lease {
    ///     fn handle(&mut self, _: Expire, ctx: &mut Context<Self>) { ctx.stop() }
    /// }
    /// let system = System::new();
    /// let lease = system.spawn(Lease);
    /// assert_eq!(lease.stopped().wait(), Ok(StopReason::Normal));
    /// system.shutdown();
    /// ```
    pub fn send_after<M, K>(&mut self, delay: Duration, msg: M) -> TimerId
    where
        A: Accepts<M, K>,
        K: Kind,
        M: Message,
    {
        let me = self.myself();
        let span = self.sending_cause();
        let alive = self.timers_alive();
        self.cell().shared.system.timers().schedule(
            delay,
            Box::new(move || {
                if !alive.load(Ordering::Relaxed) {
                    return;
                }
                let _entered = span.as_ref().map(Cause::enter);
                let _ = me.tell(msg);
            }),
        )
    }

    /// Sends a message built by `make` to this actor every `period`, the first after one
    /// period, until cancelled, until this actor stops, or until it is restarted (the failed
    /// instance's timers end with it; the default `restarted` runs `started`, which sets them
    /// anew).
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// /// Counts ticks every 5 ms, and stops after 3.
    /// struct Metronome { ticks: u32 }
    /// impl Actor for Metronome {
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.send_interval(Duration::from_millis(5), || Tick);
    ///     }
    /// }
    /// #[derive(Message)]
    /// struct Tick;
    /// impl Handler<Tick> for Metronome {
    ///     fn handle(&mut self, _: Tick, ctx: &mut Context<Self>) {
    ///         self.ticks += 1;
    ///         if self.ticks == 3 {
    ///             ctx.stop(); // its interval ends with it
    ///         }
    ///     }
    /// }
    /// let system = System::new();
    /// let metronome = system.spawn(Metronome { ticks: 0 });
    /// metronome.stopped().wait().unwrap();
    /// system.shutdown();
    /// ```
    pub fn send_interval<M, K>(
        &mut self,
        period: Duration,
        mut make: impl FnMut() -> M + Send + 'static,
    ) -> TimerId
    where
        A: Accepts<M, K>,
        K: Kind,
        M: Message,
    {
        let me = self.myself();
        let span = self.sending_cause();
        let alive = self.timers_alive();
        self.cell().shared.system.timers().schedule_repeating(
            period,
            period,
            Box::new(move || {
                if !alive.load(Ordering::Relaxed) {
                    return false;
                }
                let _entered = span.as_ref().map(Cause::enter);
                me.tell(make()).is_ok()
            }),
        )
    }

    /// The time of the system's clock: the monotonic clock in production, the simulated
    /// clock in a simulation (`troupe::sim`). Read the time through it, not
    /// `std::time::Instant::now()`, and a rate limiter or a lease runs unchanged in both.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// /// Lets a call through at most once a second.
    /// struct Throttle { last: Option<Instant> }
    /// impl Actor for Throttle {}
    /// #[derive(Message)]
    /// #[reply(bool)]
    /// struct Call;
    /// impl Handler<Call> for Throttle {
    ///     fn handle(&mut self, _: Call, ctx: &mut Context<Self>) -> bool {
    ///         let now = ctx.now();
    ///         if self.last.is_some_and(|last| now - last < Duration::from_secs(1)) {
    ///             return false;
    ///         }
    ///         self.last = Some(now);
    ///         true
    ///     }
    /// }
    /// let system = System::new();
    /// let throttle = system.spawn(Throttle { last: None });
    /// assert_eq!(throttle.ask(Call).wait(), Ok(true));
    /// assert_eq!(throttle.ask(Call).wait(), Ok(false));
    /// system.shutdown();
    /// ```
    pub fn now(&self) -> std::time::Instant {
        self.cell().shared.system.now()
    }

    /// Cancels a timer; true if it had not fired (or, for an interval, had not been
    /// cancelled yet).
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Alarm;
    /// impl Actor for Alarm {}
    /// #[derive(Message)]
    /// struct Ring;
    /// impl Handler<Ring> for Alarm {
    ///     fn handle(&mut self, _: Ring, _: &mut Context<Self>) { unreachable!("cancelled") }
    /// }
    /// #[derive(Message)]
    /// #[reply((bool, bool))]
    /// struct SetAndCancel;
    /// impl Handler<SetAndCancel> for Alarm {
    ///     fn handle(&mut self, _: SetAndCancel, ctx: &mut Context<Self>) -> (bool, bool) {
    ///         let timer = ctx.send_after(Duration::from_secs(60), Ring);
    ///         (ctx.cancel_timer(timer), ctx.cancel_timer(timer)) // the second finds nothing
    ///     }
    /// }
    /// let system = System::new();
    /// assert_eq!(system.spawn(Alarm).ask(SetAndCancel).wait(), Ok((true, false)));
    /// system.shutdown();
    /// ```
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.cell().shared.system.timers().cancel(timer)
    }

    /// Runs `future` on the system's async runtime (tokio) and delivers its output to this
    /// actor as the message `map(output)`. The actor keeps handling other messages meanwhile
    /// (Akka's `pipeTo`). Use it for I/O and anything that waits. The future is polled once
    /// in this handler's turn, inside the runtime's context: if it is already finished (a
    /// cached value, an `async` block with nothing to wait for) its message is sent at once;
    /// otherwise it runs on tokio. So the part of an `async` block before its first `.await`
    /// runs on the worker: keep blocking work out of it (`tokio::task::spawn_blocking`). A
    /// panic inside the future drops it and sends nothing; the actor goes on.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Fetcher { pages: Vec<String> }
    /// impl Actor for Fetcher {}
    /// #[derive(Message)]
    /// struct Fetch(&'static str);
    /// #[derive(Message)]
    /// struct Fetched(String);
    /// impl Handler<Fetch> for Fetcher {
    ///     fn handle(&mut self, msg: Fetch, ctx: &mut Context<Self>) {
    ///         ctx.pipe(
    ///             async move {
    ///                 tokio::time::sleep(Duration::from_millis(5)).await; // an HTTP call, say
    ///                 format!("<html>{}</html>", msg.0)
    ///             },
    ///             Fetched,
    ///         );
    ///     }
    /// }
    /// impl Handler<Fetched> for Fetcher {
    ///     fn handle(&mut self, msg: Fetched, _: &mut Context<Self>) { self.pages.push(msg.0) }
    /// }
    /// #[derive(Message)]
    /// #[reply(usize)]
    /// struct Count;
    /// impl Handler<Count> for Fetcher {
    ///     fn handle(&mut self, _: Count, _: &mut Context<Self>) -> usize { self.pages.len() }
    /// }
    /// let system = System::new();
    /// let fetcher = system.spawn(Fetcher { pages: Vec::new() });
    /// fetcher.tell(Fetch("a")).unwrap();
    /// fetcher.tell(Fetch("b")).unwrap();
    /// while fetcher.ask(Count).wait().unwrap() < 2 { std::thread::sleep(Duration::from_millis(1)) }
    /// system.shutdown();
    /// ```
    pub fn pipe<F, M, K>(&mut self, future: F, map: impl FnOnce(F::Output) -> M + Send + 'static)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        A: Accepts<M, K>,
        K: Kind,
        M: Message,
    {
        let me = self.myself();
        let io = self.cell().shared.system.io();
        // Polled once here first: a future with nothing to wait for (a cached value, a
        // reply already in) delivers its message at once, without waking a tokio thread
        // and waiting for it (about one context switch per pipe otherwise). The poll runs
        // inside the runtime's context, so tokio resources made by it register there; a
        // future left pending goes to tokio, whose first poll gives it the real waker (every
        // future must honour the waker of its latest poll).
        let mut future = Box::pin(future);
        let first = {
            let _runtime = io.enter();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            // A panic in the first poll is contained as tokio contains one in a task: the
            // future is dropped, no message comes, the actor goes on.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                future.as_mut().poll(&mut cx)
            }))
        };
        // Counted until its result (or the notice that its future was dropped) is delivered:
        // a drain waits for it (`drain.rs`).
        match first {
            Ok(std::task::Poll::Ready(output)) => {
                self.rare_mut().pipes += 1;
                let _ = me.push_payload(Piped::<M, K>::new(map(output), me.erased()));
            }
            Ok(std::task::Poll::Pending) => {
                self.rare_mut().pipes += 1;
                let guard = PipeGuard::new(me);
                let span = self.sending_cause();
                let piped = async move {
                    let output = future.await;
                    let me = guard.disarm();
                    let _ = me.push_payload(Piped::<M, K>::new(map(output), me.erased()));
                };
                let system = &self.cell().shared.system;
                match span {
                    None => drop(system.spawn_io(piped)),
                    Some(cause) => drop(system.spawn_io(InCause {
                        cause,
                        future: Box::pin(piped),
                    })),
                }
            }
            Err(_) => {}
        }
    }

    /// Delivers the items of `stream` to this actor as messages built by `map`, one at a time:
    /// the next item is pulled only once the actor has handled the previous one
    /// (backpressure, as actix's `StreamHandler` and kameo's `attach_stream`). The stream runs
    /// on the system's async runtime; it ends when the stream does, when this actor begins to
    /// stop (the stream is dropped then, even one waiting for its next item), or when the
    /// returned handle is cancelled. To hear of the stream's end, chain an item that
    /// says so (`stream.map(Some).chain(once(None))`).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Tally { seen: Arc<Mutex<Vec<u32>>> }
    /// impl Actor for Tally {}
    /// struct Item(u32);
    /// impl Message for Item { type Reply = (); }
    /// impl Handler<Item> for Tally {
    ///     fn handle(&mut self, item: Item, _: &mut Context<Self>) {
    ///         self.seen.lock().unwrap().push(item.0);
    ///     }
    /// }
    /// struct Follow(Vec<u32>);
    /// impl Message for Follow { type Reply = (); }
    /// impl Handler<Follow> for Tally {
    ///     fn handle(&mut self, msg: Follow, ctx: &mut Context<Self>) {
    ///         ctx.attach_stream(Numbers(msg.0.into_iter()), Item);
    ///     }
    /// }
    /// /// A stream of numbers (any `futures_core::Stream` will do).
    /// struct Numbers(std::vec::IntoIter<u32>);
    /// impl futures_core::Stream for Numbers {
    ///     type Item = u32;
    ///     fn poll_next(
    ///         mut self: std::pin::Pin<&mut Self>,
    ///         _: &mut std::task::Context<'_>,
    ///     ) -> std::task::Poll<Option<u32>> {
    ///         std::task::Poll::Ready(self.0.next())
    ///     }
    /// }
    /// let system = System::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let tally = system.spawn(Tally { seen: seen.clone() });
    /// tally.tell(Follow(vec![1, 2, 3])).unwrap();
    /// while seen.lock().unwrap().len() < 3 { std::thread::yield_now() }
    /// assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
    /// system.shutdown();
    /// ```
    pub fn attach_stream<S, M, K>(
        &mut self,
        stream: S,
        mut map: impl FnMut(S::Item) -> M + Send + 'static,
    ) -> StreamHandle
    where
        S: futures_core::Stream + Send + 'static,
        S::Item: Send,
        A: Accepts<M, K>,
        K: Kind,
        M: Message,
    {
        let me = self.myself();
        let span = self.sending_cause();
        let pulled = async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                // Handled (or the actor gone) before the next item is pulled.
                if me.ask(map(item)).await.is_err() && me.is_stopped() {
                    break;
                }
            }
        };
        let system = &self.cell().shared.system;
        let task = match span {
            None => system.spawn_io(pulled),
            Some(cause) => system.spawn_io(InCause {
                cause,
                future: Box::pin(pulled),
            }),
        };
        // Kept by the actor too: the stream ends when the actor stops, not at its next item.
        self.keep_stream(task.clone());
        StreamHandle { task }
    }

    /// Runs `future` on the system's async runtime while this actor holds its mailbox: no
    /// other message is handled until the future is done and `then` has run with its output.
    /// The worker thread is not blocked meanwhile. Use it when the next message must see the
    /// result (a read-modify-write against a store, say); otherwise prefer
    /// [`pipe`](Context::pipe). Stopping the actor meanwhile drops `then`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// /// Reads a balance from a slow store, then writes it back, one request at a time.
    /// struct Account { balance: i64 }
    /// impl Actor for Account {}
    /// #[derive(Message)]
    /// struct Deposit(i64);
    /// impl Handler<Deposit> for Account {
    ///     fn handle(&mut self, msg: Deposit, ctx: &mut Context<Self>) {
    ///         let read = self.balance;
    ///         let write = async move {
    ///             tokio::time::sleep(Duration::from_millis(2)).await; // the store's round trip
    ///             read + msg.0
    ///         };
    ///         // No other Deposit runs until this one has written: no lost update.
    ///         ctx.await_then(write, |account, _ctx, written| account.balance = written);
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(i64)]
    /// struct Balance;
    /// impl Handler<Balance> for Account {
    ///     fn handle(&mut self, _: Balance, _: &mut Context<Self>) -> i64 { self.balance }
    /// }
    /// let system = System::new();
    /// let account = system.spawn(Account { balance: 0 });
    /// for _ in 0..10 {
    ///     account.tell(Deposit(5)).unwrap();
    /// }
    /// assert_eq!(account.ask(Balance).wait(), Ok(50));
    /// system.shutdown();
    /// ```
    pub fn await_then<F>(
        &mut self,
        future: F,
        then: impl FnOnce(&mut A, &mut Context<A>, F::Output) + Send + 'static,
    ) where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let rare = self.rare_mut();
        rare.awaits = rare.awaits.wrapping_add(1);
        let id = rare.awaits;
        let span = self.sending_cause();
        let observed = self.cell().shared.watch().is_some();
        let rare = self.rare_mut();
        rare.awaiting = Some(Box::new(Awaiting {
            id,
            resume: Box::new(move |actor: &mut A, ctx: &mut Context<A>, output| {
                let output = output
                    .downcast::<F::Output>()
                    .expect("a Resume carries the output of its own await");
                // The continuation runs in the span of the handler that began the await, and
                // its asks count as this actor's waits.
                let _entered = span.as_ref().map(Cause::enter);
                let _handling = observed.then(|| crate::watch::handle_as(ctx.id()));
                then(actor, ctx, *output);
            }),
        }));
        self.attention = true;
        let me = self.cell().clone();
        self.cell().shared.system.spawn_io(async move {
            let output = future.await;
            me.signal(Signal::Resume {
                id,
                output: Box::new(output),
            });
        });
    }
}

impl<A: Actor> Context<A> {
    /// The flag that this instance's timers check before they send: cleared when the actor is
    /// restarted, so a timer set by a failed instance does not reach its successor (which sets
    /// its own in `restarted`, as `started` set them). Relaxed: a restart and a timer racing
    /// may let one last message through, as if it had fired just before.
    fn timers_alive(&mut self) -> Arc<AtomicBool> {
        self.rare_mut()
            .timers_alive
            .get_or_insert_with(|| Arc::new(AtomicBool::new(true)))
            .clone()
    }

    /// With `trace_messages`, what this actor sends later (a timer's message, a piped result,
    /// a stream's items, an await's continuation) is caused by: the handler running now.
    fn sending_cause(&self) -> Option<Cause> {
        let observer = self.cell().shared.system.observer()?;
        observer.spans.then(Cause::current)
    }
}

/// Held by a piped future: tells its actor [`PipeGone`] if dropped before [`disarm`]ed.
///
/// [`disarm`]: PipeGuard::disarm
pub(crate) struct PipeGuard<A: Actor> {
    me: Option<Addr<A>>,
}

impl<A: Actor> PipeGuard<A> {
    pub(crate) fn new(me: Addr<A>) -> Self {
        PipeGuard { me: Some(me) }
    }

    /// The future finished: its result is delivered instead.
    pub(crate) fn disarm(mut self) -> Addr<A> {
        self.me.take().expect("armed until disarmed")
    }
}

impl<A: Actor> Drop for PipeGuard<A> {
    fn drop(&mut self) {
        if let Some(me) = self.me.take() {
            // A stopped actor counts nothing any more.
            let _ = me.push_payload(PipeGone(me.erased()));
        }
    }
}
