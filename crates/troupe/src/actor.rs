//! What a user writes: the [`Actor`], [`Message`] and [`Handler`] traits, and the [`Context`]
//! a handler gets (its fields here; its methods, which reach the system, in `context.rs`).
//!
//! An actor owns its state and handles one message at a time (`&mut self`), so it needs no
//! locks. It accepts every message type `M` for which it implements `Handler<M>`; sending it
//! anything else does not compile.

use std::any::Any;
use std::sync::Arc;

use crate::failure::{Failure, StopReason};
use crate::id::ActorId;
use crate::raw::{Cell, Envelope};
use crate::reply::Deferred;
use crate::runtime::IoTask;
use crate::supervision::children::Children;
use crate::supervision::{Intensity, Restart, SupervisorStrategy};

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
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Poller;
    /// impl Actor for Poller {
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         ctx.send_interval(Duration::from_secs(1), || Poll); // set up before the first message
    ///     }
    /// }
    /// #[derive(Message)]
    /// struct Poll;
    /// impl Handler<Poll> for Poller {
    ///     fn handle(&mut self, _: Poll, _: &mut Context<Self>) {}
    /// }
    /// let system = System::new();
    /// system.spawn(Poller);
    /// system.shutdown();
    /// ```
    fn started(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once when the actor begins to stop (by [`Context::stop`], [`Addr::stop`](crate::Addr::stop), its
    /// parent stopping, its supervisor, or system shutdown).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use troupe::{Actor, Context, System};
    /// struct Connection { log: Arc<Mutex<Vec<&'static str>>> }
    /// impl Actor for Connection {
    ///     fn stopping(&mut self, _: &mut Context<Self>) {
    ///         self.log.lock().unwrap().push("saying goodbye"); // children still running here
    ///     }
    ///     fn stopped(&mut self, _: &mut Context<Self>) {
    ///         self.log.lock().unwrap().push("closed"); // every child has stopped
    ///     }
    /// }
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let system = System::new();
    /// let connection = system.spawn(Connection { log: log.clone() });
    /// connection.stop();
    /// connection.stopped().wait().unwrap();
    /// assert_eq!(*log.lock().unwrap(), ["saying goodbye", "closed"]);
    /// system.shutdown();
    /// ```
    fn stopping(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs once after all children have stopped; the actor is dropped right after.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use troupe::{Actor, Context, System};
    /// struct TempFile { removed: Arc<AtomicBool> }
    /// impl Actor for TempFile {
    ///     fn stopped(&mut self, _: &mut Context<Self>) {
    ///         self.removed.store(true, Ordering::SeqCst); // release what it held
    ///     }
    /// }
    /// let removed = Arc::new(AtomicBool::new(false));
    /// let system = System::new();
    /// system.spawn(TempFile { removed: removed.clone() });
    /// system.shutdown();
    /// assert!(removed.load(Ordering::SeqCst));
    /// ```
    fn stopped(&mut self, ctx: &mut Context<Self>) {
        let _ = ctx;
    }

    /// Runs on a new instance built by the supervisor, in place of `started`; `reason` is the
    /// failure that caused the restart (`None` when a sibling's failure or a permanent child's
    /// own stop caused it). By default it calls `started`.
    ///
    /// ```
    /// use troupe::{Actor, Context, Failure, Handler, Message, SpawnOptions, System};
    /// struct Flaky { restarted_after: Option<String> }
    /// impl Actor for Flaky {
    ///     fn restarted(&mut self, _: &mut Context<Self>, reason: Option<&Failure>) {
    ///         self.restarted_after = reason.map(|failure| failure.to_string());
    ///     }
    /// }
    /// #[derive(Message)]
    /// struct Crash;
    /// impl Handler<Crash> for Flaky {
    ///     fn handle(&mut self, _: Crash, _: &mut Context<Self>) { panic!("boom") }
    /// }
    /// #[derive(Message)]
    /// #[reply(Option<String>)]
    /// struct Why;
    /// impl Handler<Why> for Flaky {
    ///     fn handle(&mut self, _: Why, _: &mut Context<Self>) -> Option<String> {
    ///         self.restarted_after.clone()
    ///     }
    /// }
    /// let system = System::new();
    /// let flaky = system.spawn_supervised(|| Flaky { restarted_after: None }, SpawnOptions::new());
    /// flaky.tell(Crash).unwrap();
    /// assert_eq!(flaky.ask(Why).wait(), Ok(Some("handler panicked: boom".to_string())));
    /// system.shutdown();
    /// ```
    fn restarted(&mut self, ctx: &mut Context<Self>, reason: Option<&Failure>) {
        let _ = reason;
        self.started(ctx);
    }

    /// How this actor supervises the children it spawns (default: one-for-one, at most 3
    /// restarts in 5 seconds). Consulted each time a child fails.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, SupervisorStrategy};
    /// /// Restarts all its children together, at most 10 times a minute, waiting a little more
    /// /// before each restart.
    /// struct Pipeline;
    /// impl Actor for Pipeline {
    ///     fn supervisor_strategy(&self) -> SupervisorStrategy {
    ///         SupervisorStrategy::one_for_all()
    ///             .intensity(10, Duration::from_secs(60))
    ///             .backoff(Duration::from_millis(10), Duration::from_secs(1))
    ///     }
    /// }
    /// # let _ = Pipeline.supervisor_strategy();
    /// ```
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
///
/// Or derived, with `#[reply(T)]` naming the reply type (`()` without it):
///
/// ```
/// #[derive(troupe::Message)]
/// #[reply(Option<String>)]
/// struct Lookup { user: u32 }
/// ```
///
/// ```compile_fail
/// #[derive(troupe::Message)]
/// #[reply(u8)]
/// #[reply(u16)] // one reply type per message
/// struct Twice;
/// ```
pub trait Message: Send + 'static {
    /// What a handler returns for this message; delivered to the asker by `ask`.
    ///
    /// ```
    /// use troupe::Message;
    /// struct Balance { account: u32 }
    /// impl Message for Balance {
    ///     type Reply = Result<i64, String>; // what `ask(Balance { .. })` resolves to
    /// }
    /// ```
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not handle messages of type `{M}`",
    label = "no `impl Handler<{M}> for {Self}`",
    note = "an actor takes exactly the message types it has a `Handler` for: add `impl Handler<{M}> for {Self}`, or send it a type it handles"
)]
pub trait Handler<M: Message>: Actor {
    /// Handles one message. The return value is the reply to an `ask` (ignored for `tell`).
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Stack(Vec<i32>);
    /// impl Actor for Stack {}
    /// #[derive(Message)]
    /// struct Push(i32);
    /// #[derive(Message)]
    /// #[reply(Option<i32>)]
    /// struct Pop;
    /// impl Handler<Push> for Stack {
    ///     fn handle(&mut self, msg: Push, _: &mut Context<Self>) { self.0.push(msg.0) }
    /// }
    /// impl Handler<Pop> for Stack {
    ///     fn handle(&mut self, _: Pop, _: &mut Context<Self>) -> Option<i32> { self.0.pop() }
    /// }
    /// let system = System::new();
    /// let stack = system.spawn(Stack(Vec::new()));
    /// stack.tell(Push(1)).unwrap();
    /// stack.tell(Push(2)).unwrap();
    /// assert_eq!(stack.ask(Pop).wait(), Ok(Some(2)));
    /// system.shutdown();
    /// ```
    fn handle(&mut self, msg: M, ctx: &mut Context<Self>) -> M::Reply;

    /// A told `msg` this actor accepted but will never handle: it was still in the mailbox
    /// when the actor began to stop. Called once for each such message, in mailbox order,
    /// after [`Actor::stopping`] and before [`Actor::stopped`], on the stopping instance
    /// (also one that failed; if no instance is left, because building a restarted one
    /// failed, they are dropped); a panic here is contained and the next message is given back
    /// all the same. The default drops it. A supervised actor that restarts keeps its queued
    /// messages for the new instance: nothing comes back then. Asked messages never come here: their askers get
    /// [`AskError::Stopped`](crate::AskError::Stopped). In a simulation
    /// ([`sim`](crate::sim)), a crash injected as the actor takes a message gives that
    /// message back here too, before the instance fails.
    ///
    /// What it is for: a message whose sender waits for an answer that only this actor gives
    /// (a client's order, a job's result) can be answered "not done" here, with the actor's
    /// own state, instead of carrying its own guard to do so from its destructor.
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Jobs { gate: mpsc::Receiver<()>, not_done: mpsc::Sender<u32> }
    /// impl Actor for Jobs {}
    /// #[derive(Message)]
    /// struct Job(u32);
    /// impl Handler<Job> for Jobs {
    ///     fn handle(&mut self, Job(n): Job, ctx: &mut Context<Self>) {
    ///         if n == 0 {
    ///             self.gate.recv().unwrap(); // until jobs 1 and 2 are queued
    ///             ctx.stop();
    ///         }
    ///     }
    ///     fn undelivered(&mut self, Job(n): Job, _: &mut Context<Self>) {
    ///         self.not_done.send(n).unwrap();
    ///     }
    /// }
    /// let (open, gate) = mpsc::channel();
    /// let (not_done, told) = mpsc::channel();
    /// let system = System::new();
    /// let jobs = system.spawn(Jobs { gate, not_done });
    /// for n in 0..3 {
    ///     jobs.tell(Job(n)).unwrap();
    /// }
    /// open.send(()).unwrap();
    /// assert_eq!(told.iter().collect::<Vec<_>>(), [1, 2]);
    /// system.shutdown();
    /// ```
    fn undelivered(&mut self, msg: M, ctx: &mut Context<Self>) {
        let _ = (msg, ctx);
    }
}

/// Handles messages of type `M` and answers later, through the [`Deferred`] it is given: from a
/// `pipe` or `await_then` continuation, another actor, a task. The signature says so: there is
/// no return value to fill with a placeholder, and the handle answers this request and no
/// other (its type is `M`'s reply). The asker gets what is sent ([`AskError::NoReply`] if the
/// handle is dropped unsent, [`AskError::Panicked`] if it is dropped while the code holding it
/// panics); for a told message the handle goes nowhere. An actor implements `Handler<M>` or
/// `DeferredHandler<M>` for a message type, not both.
///
/// [`AskError::NoReply`]: crate::AskError::NoReply
/// [`AskError::Panicked`]: crate::AskError::Panicked
///
/// ```
/// use troupe::{Actor, Context, Deferred, DeferredHandler, Handler, Message, System};
/// struct Prices;
/// impl Actor for Prices {}
/// #[derive(Message)]
/// #[reply(u64)]
/// struct Price(&'static str);
/// impl DeferredHandler<Price> for Prices {
///     fn handle(&mut self, msg: Price, reply: Deferred<u64>, ctx: &mut Context<Self>) {
///         // An async lookup; its answer goes to the asker when it comes.
///         ctx.pipe(async move { msg.0.len() as u64 * 100 }, |cents| Priced(cents, reply));
///     }
/// }
/// #[derive(Message)]
/// struct Priced(u64, Deferred<u64>);
/// impl Handler<Priced> for Prices {
///     fn handle(&mut self, msg: Priced, _: &mut Context<Self>) {
///         let _ = msg.1.send(msg.0); // gives the value back if the asker has gone
///     }
/// }
/// let system = System::new();
/// let prices = system.spawn(Prices);
/// assert_eq!(prices.ask(Price("tea")).wait(), Ok(300));
/// system.shutdown();
/// ```
///
/// A handle of another reply type does not fit:
///
/// ```compile_fail,E0053
/// use troupe::{Actor, Context, Deferred, DeferredHandler, Message};
/// struct Prices;
/// impl Actor for Prices {}
/// #[derive(Message)]
/// #[reply(u64)]
/// struct Price(&'static str);
/// impl DeferredHandler<Price> for Prices {
///     fn handle(&mut self, _: Price, reply: Deferred<String>, _: &mut Context<Self>) {
///         let _ = reply.send("a name".into());
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not handle messages of type `{M}`",
    label = "no `impl DeferredHandler<{M}> for {Self}`",
    note = "an actor takes exactly the message types it has a `Handler` or a `DeferredHandler` for"
)]
pub trait DeferredHandler<M: Message>: Actor {
    /// Handles one message; the reply, if any, is sent through `reply`.
    fn handle(&mut self, msg: M, reply: Deferred<M::Reply>, ctx: &mut Context<Self>);

    /// A told `msg` this actor will never handle (it stops first): as
    /// [`Handler::undelivered`]. The default drops it.
    fn undelivered(&mut self, msg: M, ctx: &mut Context<Self>) {
        let _ = (msg, ctx);
    }
}

/// The two ways an actor handles a message type, as type-level markers: [`Returns`](kind::Returns)
/// (a [`Handler`]) and [`Defers`](kind::Defers) (a [`DeferredHandler`]).
pub mod kind {
    /// The reply is the handler's return value ([`Handler`](crate::Handler)).
    pub enum Returns {}
    /// The reply goes through a [`Deferred`](crate::Deferred) ([`DeferredHandler`](crate::DeferredHandler)).
    pub enum Defers {}
    /// Used only to keep a send's message type open until its argument fixes it (see
    /// [`Accepts`](crate::Accepts)); no message has it.
    #[doc(hidden)]
    pub enum Unhandled {}

    /// A way of handling: [`Returns`] or [`Defers`]. Generic code that sends to an actor of
    /// either kind names it as `K: Kind`; only troupe implements it.
    pub trait Kind: sealed::Sealed + 'static {}
    impl Kind for Returns {}
    impl Kind for Defers {}
    impl Kind for Unhandled {}

    pub(crate) mod sealed {
        pub trait Sealed {}
        impl Sealed for super::Returns {}
        impl Sealed for super::Defers {}
        impl Sealed for super::Unhandled {}

        /// Message types that cannot exist (see `Accepts`): no value of one is ever made, so
        /// `unreachable` never runs.
        pub trait Placeholder {
            fn unreachable(&self);
        }
    }

    /// Two uninhabited message types: with two, the compiler cannot pick one by elimination
    /// either (see [`Accepts`](crate::Accepts)).
    macro_rules! placeholder {
        ($($name:ident),*) => {$(
            #[doc(hidden)]
            pub enum $name {}
            impl crate::Message for $name {
                type Reply = ();
            }
            impl sealed::Placeholder for $name {
                fn unreachable(&self) {
                    match *self {}
                }
            }
        )*};
    }
    placeholder!(NoMessageA, NoMessageB);
}

/// An actor that handles messages of type `M`, one way or the other (`K`: [`kind::Returns`]
/// for a [`Handler<M>`], [`kind::Defers`] for a [`DeferredHandler<M>`]). troupe implements it
/// for both; every way to send `M` to an actor (`tell`, `ask`, `pipe`, timers, a
/// [`Recipient`](crate::Recipient)) asks for it, with `K` inferred. Generic code that sends to
/// an actor of either kind takes a free `K: Kind`:
///
/// ```
/// use troupe::kind::Kind;
/// use troupe::{Accepts, Actor, Addr, Context, Handler, Message, SendError, System};
/// #[derive(Message)]
/// struct Ping;
/// fn ping<A: Accepts<Ping, K>, K: Kind>(to: &Addr<A>) -> Result<(), SendError<Ping>> {
///     to.tell(Ping)
/// }
/// struct Pong;
/// impl Actor for Pong {}
/// impl Handler<Ping> for Pong {
///     fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
/// }
/// let system = System::new();
/// ping(&system.spawn(Pong)).unwrap();
/// system.shutdown();
/// ```
///
/// A message the actor has no handler for does not compile, whether it has one handler or
/// many: "`Pong` does not handle messages of type `Done`" (E0277, an unmet trait bound; with
/// one handler it used to be a type mismatch, "expected `Ping`, found `Done`"):
///
/// ```compile_fail,E0277
/// use troupe::{Actor, Context, Handler, Message, System};
/// #[derive(Message)]
/// struct Ping;
/// #[derive(Message)]
/// struct Done;
/// struct Pong;
/// impl Actor for Pong {}
/// impl Handler<Ping> for Pong {
///     fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
/// }
/// let system = System::new();
/// system.spawn(Pong).tell(Done).unwrap();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not handle messages of type `{M}`",
    label = "no `impl Handler<{M}> for {Self}` (or `DeferredHandler<{M}>`)",
    note = "an actor takes exactly the message types it has a `Handler` or a `DeferredHandler` for: add one for `{M}`, or send it a type it handles"
)]
pub trait Accepts<M: Message, K: kind::Kind>: Actor {
    /// Handles `msg`; its reply goes to `reply`. Called by the runtime on the actor's turn.
    #[doc(hidden)]
    fn accept(&mut self, msg: M, reply: Deferred<M::Reply>, ctx: &mut Context<Self>);
    /// Gives back a told `msg` the actor will never handle (see [`Handler::undelivered`]).
    #[doc(hidden)]
    fn give_back(&mut self, msg: M, ctx: &mut Context<Self>);
}

impl<A: Handler<M>, M: Message> Accepts<M, kind::Returns> for A {
    #[inline]
    fn accept(&mut self, msg: M, reply: Deferred<M::Reply>, ctx: &mut Context<Self>) {
        let answer = self.handle(msg, ctx);
        reply.answer(answer);
    }

    fn give_back(&mut self, msg: M, ctx: &mut Context<Self>) {
        Handler::undelivered(self, msg, ctx);
    }
}

impl<A: DeferredHandler<M>, M: Message> Accepts<M, kind::Defers> for A {
    #[inline]
    fn accept(&mut self, msg: M, reply: Deferred<M::Reply>, ctx: &mut Context<Self>) {
        DeferredHandler::handle(self, msg, reply, ctx);
    }

    fn give_back(&mut self, msg: M, ctx: &mut Context<Self>) {
        DeferredHandler::undelivered(self, msg, ctx);
    }
}

/// Why this impl: with it, `Accepts<M, _>` has a second way to hold while `M` is still unknown,
/// so the compiler takes `M` from the argument of a send. Without it, an actor with one handler
/// made the compiler infer that handler's message type and report "expected `Submit`, found
/// `Done`" for a `Done` sent by mistake, instead of "`Tenant` does not handle messages of type
/// `Done`". No value of a placeholder type exists, so `accept` is never called.
impl<A: Actor, M: Message + kind::sealed::Placeholder> Accepts<M, kind::Unhandled> for A {
    fn accept(&mut self, msg: M, _: Deferred<M::Reply>, _: &mut Context<Self>) {
        msg.unreachable();
    }

    fn give_back(&mut self, msg: M, _: &mut Context<Self>) {
        msg.unreachable();
    }
}

/// Sent to a watcher when an actor it watches ([`Context::watch`]) stops.
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, StopReason, System, Terminated};
/// struct Watcher { ended: Vec<StopReason> }
/// impl Actor for Watcher {}
/// impl Handler<Terminated> for Watcher {
///     fn handle(&mut self, msg: Terminated, _: &mut Context<Self>) { self.ended.push(msg.reason) }
/// }
/// # struct Worker;
/// # impl Actor for Worker {}
/// #[derive(Message)]
/// struct Watch(troupe::Addr<Worker>);
/// impl Handler<Watch> for Watcher {
///     fn handle(&mut self, msg: Watch, ctx: &mut Context<Self>) { ctx.watch(&msg.0); }
/// }
/// #[derive(Message)]
/// #[reply(Vec<StopReason>)]
/// struct Ended;
/// impl Handler<Ended> for Watcher {
///     fn handle(&mut self, _: Ended, _: &mut Context<Self>) -> Vec<StopReason> { self.ended.clone() }
/// }
/// let system = System::new();
/// let watcher = system.spawn(Watcher { ended: Vec::new() });
/// let worker = system.spawn(Worker);
/// watcher.ask(Watch(worker.clone())).wait().unwrap();
/// worker.stop();
/// while watcher.ask(Ended).wait().unwrap().is_empty() { std::thread::yield_now() }
/// assert_eq!(watcher.ask(Ended).wait().unwrap(), [StopReason::Normal]);
/// system.shutdown();
/// ```
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
///
/// ```
/// use troupe::{Actor, Addr, Context, Handler, Message, System, Terminated, WatchId};
/// # struct Worker;
/// # impl Actor for Worker {}
/// struct Watcher { watch: Option<(Addr<Worker>, WatchId)> }
/// impl Actor for Watcher {}
/// impl Handler<Terminated> for Watcher {
///     fn handle(&mut self, _: Terminated, _: &mut Context<Self>) {}
/// }
/// #[derive(Message)]
/// struct Follow(Addr<Worker>);
/// impl Handler<Follow> for Watcher {
///     fn handle(&mut self, msg: Follow, ctx: &mut Context<Self>) {
///         if let Some((old, id)) = self.watch.take() {
///             ctx.unwatch(&old, id); // no longer interested in the previous one
///         }
///         let id = ctx.watch(&msg.0);
///         self.watch = Some((msg.0, id));
///     }
/// }
/// let system = System::new();
/// let watcher = system.spawn(Watcher { watch: None });
/// watcher.ask(Follow(system.spawn(Worker))).wait().unwrap();
/// watcher.ask(Follow(system.spawn(Worker))).wait().unwrap();
/// system.shutdown();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchId(pub(crate) u64);

/// The actor's view of itself and the runtime during a turn: its own address, stopping,
/// spawning and supervising children, watching and linking, timers, and async work. Its
/// methods are documented with the rest of the API (`context.rs`).
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, System};
/// struct Echo;
/// impl Actor for Echo {}
/// #[derive(Message)]
/// #[reply(String)]
/// struct Who;
/// impl Handler<Who> for Echo {
///     fn handle(&mut self, _: Who, ctx: &mut Context<Self>) -> String {
///         format!("actor {}", ctx.id()) // the context: this actor's side of the runtime
///     }
/// }
/// let system = System::new();
/// let echo = system.spawn(Echo);
/// assert_eq!(echo.ask(Who).wait().unwrap(), format!("actor {}", echo.id()));
/// system.shutdown();
/// ```
pub struct Context<A: Actor> {
    /// The actor's own cell: set by its first turn, cleared by its last.
    pub(crate) me: Option<Arc<Cell<A>>>,
    /// Rarely needed state (children, factory, awaits, a parked message), allocated on first
    /// use: most actors never need it, and every actor carries this pointer.
    pub(crate) rare: Option<Box<Rare<A>>>,
    /// `ctx.stop()` was called.
    pub(crate) stop_requested: bool,
    /// Something needs the lifecycle's attention before the next message (a request above, a
    /// life other than running, signals left to handle, a parked message): one flag keeps the
    /// hot loop's check cheap.
    pub(crate) attention: bool,
    /// Measure time spent in handlers.
    pub(crate) timed: bool,
}

/// The part of a context most actors never use.
pub(crate) struct Rare<A: Actor> {
    pub(crate) children: Children,
    /// Rebuilds the actor (supervised children only).
    pub(crate) factory: Option<Factory<A>>,
    /// `await_then` asked to hold the mailbox; the turn takes it (see `life.rs`).
    pub(crate) awaiting: Option<Box<Awaiting<A>>>,
    /// Numbers each `await_then`, so a late result of a cancelled await is recognised.
    pub(crate) awaits: u32,
    /// A handed-off message the actor could not take at once, delivered ahead of the mailbox.
    pub(crate) parked: Option<Envelope<A>>,
    /// The streams attached to the actor (`Context::attach_stream`), ended when it stops.
    pub(crate) streams: Vec<IoTask>,
    /// Where a drain is (`drain.rs`).
    pub(crate) drain: Drain,
    /// Pipes started and not yet delivered (or dropped): a drain waits for them.
    pub(crate) pipes: u32,
    /// True while the instance that set this actor's timers lives: a restart clears it, so
    /// the old instance's timers send nothing more (made with the first timer).
    pub(crate) timers_alive: Option<std::sync::Arc<crate::loom::AtomicBool>>,
}

/// Where an actor is in a drain (`drain.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Drain {
    /// Not draining.
    #[default]
    No,
    /// Its mark is in the mailbox, behind what was sent before.
    Marked,
    /// The mark was reached: it stops once no pipe is in flight.
    Reached,
}

/// How a supervised actor is rebuilt, and when.
pub(crate) struct Factory<A> {
    pub(crate) make: Box<dyn FnMut() -> A + Send>,
    pub(crate) restart: Restart,
    /// For a top-level supervised actor, which the system supervises: the strategy's
    /// intensity and back-off, and its recent restarts. `None` for children (their parent
    /// supervises them).
    pub(crate) own: Option<(SupervisorStrategy, Intensity)>,
}

/// An await in progress: its number, and what runs with the future's output.
pub(crate) struct Awaiting<A: Actor> {
    pub(crate) id: u32,
    pub(crate) resume: Resume<A>,
}

/// The continuation of `await_then`, with the future's output type erased.
pub(crate) type Resume<A> = Box<dyn FnOnce(&mut A, &mut Context<A>, Box<dyn Any + Send>) + Send>;

impl<A: Actor> Default for Rare<A> {
    fn default() -> Self {
        Self {
            children: Children::default(),
            factory: None,
            awaiting: None,
            awaits: 0,
            parked: None,
            streams: Vec::new(),
            drain: Drain::No,
            pipes: 0,
            timers_alive: None,
        }
    }
}

impl<A: Actor> Context<A> {
    pub(crate) fn new(timed: bool, factory: Option<Factory<A>>) -> Self {
        Self {
            me: None,
            rare: factory.map(|factory| {
                Box::new(Rare {
                    factory: Some(factory),
                    ..Rare::default()
                })
            }),
            stop_requested: false,
            attention: true, // `started` has yet to run
            timed,
        }
    }

    /// The actor's own cell; present during every turn but the ones after its end.
    pub(crate) fn cell(&self) -> &Arc<Cell<A>> {
        self.me
            .as_ref()
            .expect("a context is used only inside its actor's turns")
    }

    /// This actor's id.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// # #[derive(Message)] #[reply(troupe::ActorId)] struct WhoAmI;
    /// impl Handler<WhoAmI> for Counter {
    ///     fn handle(&mut self, _: WhoAmI, ctx: &mut Context<Self>) -> troupe::ActorId {
    ///         ctx.id()
    ///     }
    /// }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// assert_eq!(counter.ask(WhoAmI).wait(), Ok(counter.id()));
    /// system.shutdown();
    /// ```
    pub fn id(&self) -> ActorId {
        self.cell().id()
    }

    /// Stops this actor after the current message: no further messages are handled. (A
    /// supervised child spawned with `Restart::Permanent` is restarted by its supervisor
    /// instead.)
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, StopReason, System};
    /// struct OneShot;
    /// impl Actor for OneShot {}
    /// #[derive(Message)]
    /// struct Fire;
    /// impl Handler<Fire> for OneShot {
    ///     fn handle(&mut self, _: Fire, ctx: &mut Context<Self>) {
    ///         ctx.stop(); // done after this message
    ///     }
    /// }
    /// let system = System::new();
    /// let once = system.spawn(OneShot);
    /// once.tell(Fire).unwrap();
    /// assert_eq!(once.stopped().wait(), Ok(StopReason::Normal));
    /// assert!(once.tell(Fire).is_err());
    /// system.shutdown();
    /// ```
    pub fn stop(&mut self) {
        self.stop_requested = true;
        self.attention = true;
    }

    /// Number of children currently alive (not yet reported stopped).
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Parent;
    /// impl Actor for Parent {}
    /// struct Child;
    /// impl Actor for Child {}
    /// #[derive(Message)]
    /// #[reply(usize)]
    /// struct Grow;
    /// impl Handler<Grow> for Parent {
    ///     fn handle(&mut self, _: Grow, ctx: &mut Context<Self>) -> usize {
    ///         ctx.spawn(Child);
    ///         ctx.children_count()
    ///     }
    /// }
    /// let system = System::new();
    /// let parent = system.spawn(Parent);
    /// assert_eq!(parent.ask(Grow).wait(), Ok(1));
    /// assert_eq!(parent.ask(Grow).wait(), Ok(2));
    /// system.shutdown();
    /// ```
    pub fn children_count(&self) -> usize {
        self.children().map_or(0, |c| c.len())
    }

    /// The rarely needed state, allocated if needed.
    pub(crate) fn rare_mut(&mut self) -> &mut Rare<A> {
        self.rare.get_or_insert_with(Box::default)
    }

    pub(crate) fn children(&self) -> Option<&Children> {
        self.rare.as_ref().map(|r| &r.children)
    }

    pub(crate) fn children_mut(&mut self) -> &mut Children {
        &mut self.rare_mut().children
    }

    /// The await a handler asked for, if any.
    pub(crate) fn take_awaiting(&mut self) -> Option<Box<Awaiting<A>>> {
        self.rare.as_mut().and_then(|r| r.awaiting.take())
    }

    /// Keeps the handle of a stream attached to the actor, forgetting those that have ended.
    pub(crate) fn keep_stream(&mut self, stream: IoTask) {
        let streams = &mut self.rare_mut().streams;
        streams.retain(|s| !s.is_finished());
        streams.push(stream);
    }

    /// The attached streams' handles, to end them.
    pub(crate) fn take_streams(&mut self) -> Vec<IoTask> {
        self.rare
            .as_mut()
            .map(|r| std::mem::take(&mut r.streams))
            .unwrap_or_default()
    }
}
