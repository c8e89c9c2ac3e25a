//! The methods of [`Context`] that reach beyond the actor itself: its address, children,
//! supervision, watches and links, the registry, timers, and async work. (The struct and the
//! methods that touch only the actor's own state are in `actor.rs`.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::actor::{Actor, Awaiting, Context, Factory, Handler, Message, Terminated, WatchId};
use crate::addr::Addr;
use crate::erased::{ErasedCell, ErasedRef};
use crate::failure::StopReason;
use crate::id::ActorId;
use crate::life::ParentLink;
use crate::reply::Deferred;
use crate::signal::Signal;
use crate::spawn::{self, SpawnOptions};
use crate::timer::TimerId;

/// A stream attached to an actor with [`Context::attach_stream`]; dropping it leaves the
/// stream running.
#[derive(Debug)]
pub struct StreamHandle {
    task: tokio::task::AbortHandle,
}

impl StreamHandle {
    /// Stops pulling the stream (an item being handled is still handled).
    pub fn cancel(&self) {
        self.task.abort();
    }

    /// True once the stream has ended, been cancelled, or its actor stopped.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<A: Actor> Context<A> {
    /// This actor's own address, to give to others or keep.
    pub fn myself(&self) -> Addr<A> {
        Addr::from_cell(self.cell().clone())
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

    /// Defers the reply to the message being handled: the handler's return value is then
    /// ignored, and the asker gets what is sent through the returned [`Deferred`] (from a
    /// `pipe` or `await_then` continuation, another actor, a task), or
    /// [`AskError::NoReply`](crate::AskError::NoReply) if it is dropped unsent. `M` is the
    /// message being handled. If it was told rather than asked, the reply goes nowhere
    /// ([`Deferred::is_closed`] says so). See [`Deferred`] for an example.
    pub fn reply_later<M: Message>(&mut self) -> Deferred<M::Reply> {
        let (deferred, link) = Deferred::new();
        self.rare_mut().deferral = Some(Box::new(link));
        deferred
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
        spawn::register(&self.cell().shared.system, name, &self.myself())
    }

    /// Looks up an actor of type `B` registered under `name`.
    pub fn lookup<B: Actor>(&self, name: &str) -> Option<Addr<B>> {
        spawn::find(&self.cell().shared.system, name).ok()
    }

    /// The actor of type `B` registered under `name`, or why there is none.
    pub fn find<B: Actor>(&self, name: &str) -> Result<Addr<B>, crate::RegistryError> {
        spawn::find(&self.cell().shared.system, name)
    }

    /// Sends `msg` to this actor after `delay` (unless cancelled with
    /// [`cancel_timer`](Context::cancel_timer)).
    pub fn send_after<M>(&mut self, delay: Duration, msg: M) -> TimerId
    where
        A: Handler<M>,
        M: Message,
    {
        let me = self.myself();
        self.cell().shared.system.timers().schedule(
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
        self.cell().shared.system.timers().schedule_repeating(
            period,
            period,
            Box::new(move || me.tell(make()).is_ok()),
        )
    }

    /// Cancels a timer; true if it had not fired (or, for an interval, had not been
    /// cancelled yet).
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.cell().shared.system.timers().cancel(timer)
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
        self.cell().shared.system.io().spawn(async move {
            let output = future.await;
            let _ = me.tell(map(output));
        });
    }

    /// Delivers the items of `stream` to this actor as messages built by `map`, one at a time:
    /// the next item is pulled only once the actor has handled the previous one
    /// (backpressure, as actix's `StreamHandler` and kameo's `attach_stream`). The stream runs
    /// on the system's async runtime; it ends when the stream does, when this actor stops, or
    /// when the returned handle is cancelled. To hear of the stream's end, chain an item that
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
    pub fn attach_stream<S, M>(
        &mut self,
        stream: S,
        mut map: impl FnMut(S::Item) -> M + Send + 'static,
    ) -> StreamHandle
    where
        S: futures_core::Stream + Send + 'static,
        S::Item: Send,
        A: Handler<M>,
        M: Message,
    {
        let me = self.myself();
        let task = self.cell().shared.system.io().spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
                // Handled (or the actor gone) before the next item is pulled.
                if me.ask(map(item)).await.is_err() && me.is_stopped() {
                    break;
                }
            }
        });
        StreamHandle {
            task: task.abort_handle(),
        }
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
        let rare = self.rare_mut();
        rare.awaits = rare.awaits.wrapping_add(1);
        let id = rare.awaits;
        rare.awaiting = Some(Box::new(Awaiting {
            id,
            resume: Box::new(move |actor: &mut A, ctx: &mut Context<A>, output| {
                let output = output
                    .downcast::<F::Output>()
                    .expect("a Resume carries the output of its own await");
                then(actor, ctx, *output);
            }),
        }));
        self.attention = true;
        let me = self.cell().clone();
        self.cell().shared.system.io().spawn(async move {
            let output = future.await;
            me.signal(Signal::Resume {
                id,
                output: Box::new(output),
            });
        });
    }
}
