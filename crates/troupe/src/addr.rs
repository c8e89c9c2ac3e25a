//! [`Addr`]: the typed address of an actor, and the two ways to send: `tell` and `ask`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::actor::kind::Kind;
use crate::actor::kind::Returns;
use crate::actor::{Accepts, Actor, Context, Handler, Message};
use crate::bounded::{Admit, Bound};
use crate::erased::{ErasedCell, ErasedRef, Extras};
use crate::error::{AskError, SendError};
use crate::failure::StopReason;
use crate::id::ActorId;
use crate::life::ActorCell;
use crate::observe::Observed;
use crate::raw::{Deliver, Discard};
use crate::reply::{self, Ask, Deferred, ReplySender};

/// The address of an actor of type `A`. Cheap to clone (one reference count), `Send + Sync`.
///
/// Messages from one sender to one actor arrive in the order they were sent. An address stays
/// valid after the actor stops: sends then fail with a typed error that returns the message.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// let system = System::new();
/// let counter = system.spawn(Counter(0));
/// let copy = counter.clone(); // the same actor
/// std::thread::spawn(move || copy.tell(Add(2)).unwrap()).join().unwrap();
/// counter.tell(Add(3)).unwrap();
/// assert_eq!(counter.ask(Get).wait(), Ok(5));
/// system.shutdown();
/// ```
pub struct Addr<A: Actor> {
    cell: Arc<ActorCell<A>>,
}

impl<A: Actor> Clone for Addr<A> {
    fn clone(&self) -> Self {
        Self {
            cell: self.cell.clone(),
        }
    }
}

impl<A: Actor> fmt::Debug for Addr<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Addr({}#{})", std::any::type_name::<A>(), self.cell.id())
    }
}

impl<A: Actor> PartialEq for Addr<A> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.cell, &other.cell)
    }
}

impl<A: Actor> Eq for Addr<A> {}

/// A told message on its way, and how its actor handles it (`K`).
struct Tell<M, K>(M, PhantomData<fn() -> K>);

impl<M, K> Tell<M, K> {
    #[inline]
    fn new(msg: M) -> Self {
        Tell(msg, PhantomData)
    }
}

impl<A: Accepts<M, K>, M: Message, K: Kind> Deliver<A> for Tell<M, K> {
    #[inline]
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        actor.accept(self.0, Deferred::nowhere(), ctx);
    }

    fn discard(self, _why: Discard) {}

    fn undelivered(self, actor: &mut A, ctx: &mut Context<A>, _why: Discard) {
        actor.give_back(self.0, ctx);
    }

    fn message_name(&self) -> &'static str {
        std::any::type_name::<M>()
    }
}

/// An asked message with its reply slot.
struct Request<M: Message, K> {
    msg: M,
    reply: ReplySender<M::Reply>,
    kind: PhantomData<fn() -> K>,
}

impl<A: Accepts<M, K>, M: Message, K: Kind> Deliver<A> for Request<M, K> {
    #[inline]
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        actor.accept(self.msg, Deferred::to(self.reply), ctx);
    }

    /// Dropped undelivered: the asker learns why.
    fn discard(self, why: Discard) {
        self.reply.fail(match why {
            Discard::Stopped => AskError::Stopped,
            Discard::Overflow => AskError::Dropped,
            Discard::Panicked => AskError::Panicked,
        });
    }

    fn message_name(&self) -> &'static str {
        std::any::type_name::<M>()
    }
}

/// Why a send was refused.
enum Refused<P> {
    Stopped(P),
    Full(P),
}

/// Sends `payload` to `cell`: through the hand-off or the mailbox, or, for a bounded mailbox,
/// past its admission counter (`count_refusal`: false when the sender will wait and retry).
#[inline]
fn send_payload<A: Actor, P: Deliver<A>>(
    cell: &ActorCell<A>,
    payload: P,
    count_refusal: bool,
) -> Result<(), Refused<P>> {
    // One pointer read decides: an actor with no extras (unbounded, not observed, nothing
    // watching it), or with extras but neither bound nor watch, takes the plain path. One call
    // site of `push` for `P`, so it stays inlined here.
    if let Some(extras) = cell.shared.extras.get() {
        if extras.bound.is_some() || extras.watch.is_some() {
            return send_with_extras(cell, extras, payload, count_refusal);
        }
    }
    cell.push(payload).map_err(Refused::Stopped)
}

/// `send_payload` to a bounded or an observed actor: the admission of its bounded mailbox,
/// the wrapping of an observed system (`observe.rs`). Kept out of line: the plain path stays
/// as small as it was.
#[cold]
#[inline(never)]
fn send_with_extras<A: Actor, P: Deliver<A>>(
    cell: &ActorCell<A>,
    extras: &Extras,
    payload: P,
    count_refusal: bool,
) -> Result<(), Refused<P>> {
    if let Some(watch) = extras.watch.as_deref() {
        let observed = Observed::new(payload, watch);
        let sent = match &extras.bound {
            None => cell.push(observed).map_err(Refused::Stopped),
            Some(bound) => send_bounded(cell, bound, observed, count_refusal),
        };
        return sent.map_err(|refused| match refused {
            Refused::Stopped(observed) => Refused::Stopped(observed.into_inner()),
            Refused::Full(observed) => Refused::Full(observed.into_inner()),
        });
    }
    let bound = extras
        .bound
        .as_ref()
        .expect("a bounded or an observed actor");
    send_bounded(cell, bound, payload, count_refusal)
}

/// Sends to a bounded mailbox: past its admission counter.
#[cold]
fn send_bounded<A: Actor, P: Deliver<A>>(
    cell: &ActorCell<A>,
    bound: &Bound,
    payload: P,
    count_refusal: bool,
) -> Result<(), Refused<P>> {
    match bound.admit(count_refusal) {
        Admit::Yes => cell.push_queued(payload).map_err(|payload| {
            bound.release(1);
            Refused::Stopped(payload)
        }),
        Admit::Full => Err(Refused::Full(payload)),
        Admit::DropIt => {
            // Dropped on purpose (overflow policy), counted by `admit`.
            payload.discard(Discard::Overflow);
            Ok(())
        }
    }
}

/// `tell`, for any holder of the cell (an `Addr`, a `Recipient`).
#[inline]
fn tell_cell<A: Accepts<M, K>, M: Message, K: Kind>(
    cell: &ActorCell<A>,
    msg: M,
) -> Result<(), SendError<M>> {
    send_payload(cell, Tell::<M, K>::new(msg), true).map_err(|refused| match refused {
        Refused::Stopped(Tell(msg, _)) => SendError::Stopped(msg),
        Refused::Full(Tell(msg, _)) => SendError::Full(msg),
    })
}

/// `ask`, for any holder of the cell.
fn ask_cell<A: Accepts<M, K>, M: Message, K: Kind>(cell: &ActorCell<A>, msg: M) -> Ask<M::Reply> {
    let (reply, ask) = reply::channel(cell.id());
    let request = Request::<M, K> {
        msg,
        reply,
        kind: PhantomData,
    };
    match send_payload(cell, request, true) {
        Ok(()) => {
            if let Some(watch) = cell.shared.watch() {
                crate::observe::asked::<M>(watch, cell.id(), &ask);
            }
        }
        Err(Refused::Stopped(request)) => request.reply.fail(AskError::Stopped),
        Err(Refused::Full(request)) => request.reply.fail(AskError::MailboxFull),
    }
    ask
}

impl<A: Actor> Addr<A> {
    pub(crate) fn from_cell(cell: Arc<ActorCell<A>>) -> Self {
        Self { cell }
    }

    /// This actor as a type-erased cell (for parents, links, watchers).
    pub(crate) fn into_erased(self) -> ErasedRef {
        self.cell
    }

    /// A type-erased handle to this actor's cell.
    pub(crate) fn erased(&self) -> ErasedRef {
        self.cell.clone()
    }

    /// Remembers a registered name on the actor, so its stop releases it. False if the actor
    /// is stopping or has ended.
    pub(crate) fn remember_name(&self, name: &str) -> bool {
        let mut inner = self.cell.extras().lock();
        if inner.stopping || inner.ended.is_some() {
            return false;
        }
        inner.names.push(name.to_owned());
        if let Some(watch) = self.cell.shared.watch() {
            watch.named(name);
        }
        true
    }

    /// Sends a message without waiting (fire and forget).
    ///
    /// Never blocks. If the actor has stopped, or its bounded mailbox is full (overflow policy
    /// `Fail`), the message comes back in the error.
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Sum(u64);
    /// impl Actor for Sum {}
    /// struct Add(u64);
    /// impl Message for Add { type Reply = (); }
    /// impl Handler<Add> for Sum {
    ///     fn handle(&mut self, msg: Add, _: &mut Context<Self>) { self.0 += msg.0 }
    /// }
    /// let system = System::new();
    /// let sum = system.spawn(Sum(0));
    /// sum.tell(Add(2)).unwrap();
    /// system.shutdown();
    /// ```
    #[inline]
    pub fn tell<M, K>(&self, msg: M) -> Result<(), SendError<M>>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        tell_cell(&self.cell, msg)
    }

    /// Sends a message, waiting (asynchronously) while the actor's bounded mailbox is full.
    /// For an unbounded mailbox, or a full one whose overflow policy drops messages, it
    /// completes at once, like [`tell`](Addr::tell). Fails only if the actor has stopped.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System, SpawnOptions, Overflow};
    /// # struct Sink;
    /// # impl Actor for Sink {}
    /// # struct Item;
    /// # impl Message for Item { type Reply = (); }
    /// # impl Handler<Item> for Sink { fn handle(&mut self, _: Item, _: &mut Context<Self>) {} }
    /// let system = System::new();
    /// let sink = system.spawn_with(Sink, SpawnOptions::new().bounded(16, Overflow::Fail));
    /// let sent = system.block_on(async {
    ///     for _ in 0..1000 {
    ///         sink.send(Item).await?;
    ///     }
    ///     Ok::<_, troupe::SendError<Item>>(())
    /// });
    /// assert!(sent.is_ok());
    /// system.shutdown();
    /// ```
    pub async fn send<M, K>(&self, msg: M) -> Result<(), SendError<M>>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        let mut msg = msg;
        loop {
            let attempt =
                send_payload(&self.cell, Tell::<M, K>::new(msg), false).map_err(|refused| {
                    match refused {
                        Refused::Stopped(Tell(msg, _)) => SendError::Stopped(msg),
                        Refused::Full(Tell(msg, _)) => SendError::Full(msg),
                    }
                });
            match attempt {
                Err(SendError::Full(back)) => {
                    msg = back;
                    let bound = self
                        .cell
                        .shared
                        .bound()
                        .expect("only bounded mailboxes fill");
                    // Wait until room is made (or the actor stops), then try again; if another
                    // sender took the room first, this waits again.
                    std::future::poll_fn(|cx| {
                        if bound.wait_for_room(cx.waker()) || self.cell.is_closed() {
                            std::task::Poll::Ready(())
                        } else {
                            std::task::Poll::Pending
                        }
                    })
                    .await;
                }
                other => return other,
            }
        }
    }

    /// Sends a request and returns its pending reply: `.await` it, [`Ask::wait`] for it,
    /// [`Ask::wait_timeout`], or [`Ask::pipe_to`] an actor. Asking a stopped actor yields
    /// [`AskError::Stopped`] at once.
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    /// struct Echo;
    /// impl Actor for Echo {}
    /// struct Ping(u32);
    /// impl Message for Ping { type Reply = u32; }
    /// impl Handler<Ping> for Echo {
    ///     fn handle(&mut self, msg: Ping, _: &mut Context<Self>) -> u32 { msg.0 + 1 }
    /// }
    /// let system = System::new();
    /// let echo = system.spawn(Echo);
    /// assert_eq!(echo.ask(Ping(41)).wait(), Ok(42));
    /// system.shutdown();
    /// ```
    pub fn ask<M, K>(&self, msg: M) -> Ask<M::Reply>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        ask_cell(&self.cell, msg)
    }

    /// Like [`ask`](Addr::ask), but the reply fails with [`AskError::Timeout`] if it has not
    /// come within `timeout`, however it is awaited (`.await`, `wait`, `pipe_to`). The timeout
    /// runs on the system's timer wheel, and is cancelled as soon as the reply comes (or the
    /// `Ask` is dropped), so an answered ask holds nothing until its deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, AskError, Context, Handler, Message, System};
    /// struct Sleepy;
    /// impl Actor for Sleepy {}
    /// #[derive(Message)]
    /// #[reply(&'static str)]
    /// struct Nap(Duration);
    /// impl Handler<Nap> for Sleepy {
    ///     fn handle(&mut self, msg: Nap, _: &mut Context<Self>) -> &'static str {
    ///         std::thread::sleep(msg.0);
    ///         "awake"
    ///     }
    /// }
    /// let system = System::new();
    /// let sleepy = system.spawn(Sleepy);
    /// let quick = sleepy.ask_timeout(Nap(Duration::ZERO), Duration::from_secs(5));
    /// assert_eq!(quick.wait(), Ok("awake"));
    /// let slow = sleepy.ask_timeout(Nap(Duration::from_millis(200)), Duration::from_millis(10));
    /// assert_eq!(slow.wait(), Err(AskError::Timeout(Duration::from_millis(10))));
    /// system.shutdown();
    /// ```
    pub fn ask_timeout<M, K>(&self, msg: M, timeout: std::time::Duration) -> Ask<M::Reply>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        let noted = self
            .cell
            .shared
            .extras
            .get()
            .and_then(|e| e.watch.clone())
            .map(|watch| Box::new(move || watch.ask_timed_out()) as Box<dyn FnOnce() + Send>);
        self.ask(msg)
            .with_timeout_noting(self.cell.shared.system.timers(), timeout, noted)
    }

    /// Asks this actor to stop: it finishes the message in hand, runs `stopping`, stops its
    /// children, runs `stopped`. Messages still in its mailbox are dropped. Idempotent.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::{AskError, StopReason};
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// counter.stop();
    /// assert_eq!(counter.stopped().wait(), Ok(StopReason::Normal));
    /// assert_eq!(counter.ask(Get).wait(), Err(AskError::Stopped));
    /// system.shutdown();
    /// ```
    pub fn stop(&self) {
        self.cell.signal(crate::signal::Signal::Stop);
    }

    /// Stops the actor in order: it handles every message sent to it before this call, waits
    /// for the futures it started with [`Context::pipe`] to deliver (work it holds its mailbox
    /// for, [`Context::await_then`], is waited for anyway), drains its children the same way,
    /// and then stops normally. Messages sent after this call are handled only while a pipe is
    /// still on its way; the rest are dropped as by [`stop`](Addr::stop) (askers get
    /// `Stopped`). Wait with [`stopped`](Addr::stopped); a deadline is the caller's: `stop`
    /// turns a drain into a plain stop, children included. Akka's `PoisonPill`, kameo's
    /// `stop_gracefully`.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// use std::time::Duration;
    /// use troupe::StopReason;
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// for _ in 0..1000 {
    ///     counter.tell(Add(1)).unwrap();
    /// }
    /// counter.drain(); // the 1000 adds are handled first
    /// assert_eq!(counter.stopped().wait_timeout(Duration::from_secs(5)), Ok(StopReason::Normal));
    /// assert!(counter.metrics().processed >= 1000); // the adds, and the drain's own mark
    /// system.shutdown();
    /// ```
    pub fn drain(&self) {
        // The mark goes in from here, behind what this thread sent before (per-sender order).
        let _ = self.push_payload(crate::drain::DrainMark(self.erased()));
    }

    /// Puts one of the runtime's own payloads (a drain's mark, a pipe's result) in the mailbox,
    /// counted in by a bounded mailbox whatever the room. Gives it back if the actor stopped.
    pub(crate) fn push_payload<P: Deliver<A>>(&self, payload: P) -> Result<(), P> {
        match self.cell.shared.watch() {
            None => crate::drain::push_own(&self.cell, payload),
            Some(watch) => crate::drain::push_own(&self.cell, Observed::new(payload, watch))
                .map_err(Observed::into_inner),
        }
    }

    /// True once the actor has begun stopping and accepts no more messages.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// assert!(!counter.is_stopped());
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// assert!(counter.is_stopped());
    /// system.shutdown();
    /// ```
    pub fn is_stopped(&self) -> bool {
        self.cell.is_closed()
    }

    /// Messages waiting in the actor's mailbox (approximate; for monitoring).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// counter.tell(Add(1)).unwrap();
    /// let waiting = counter.mailbox_len(); // 0 or 1: the actor may already have taken it
    /// assert!(waiting <= 1);
    /// counter.ask(Get).wait().unwrap();
    /// // Counted out when the turn ends, which may be just after the reply went out.
    /// while counter.mailbox_len() > 0 {
    ///     std::thread::yield_now();
    /// }
    /// system.shutdown();
    /// ```
    pub fn mailbox_len(&self) -> usize {
        match self.cell.shared.bound() {
            Some(bound) => bound.len(),
            None => self.cell.mailbox_len(),
        }
    }

    /// The actor's counters: messages processed, mailbox depth, restarts, refused and dropped
    /// messages, time in handlers (if spawned with `SpawnOptions::measure_time`).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// for _ in 0..10 {
    ///     counter.tell(Add(1)).unwrap();
    /// }
    /// counter.ask(Get).wait().unwrap();
    /// // Counted at the end of each turn, which may be just after the reply went out.
    /// while counter.metrics().processed < 11 {
    ///     std::thread::yield_now();
    /// }
    /// let metrics = counter.metrics();
    /// assert_eq!((metrics.restarts, metrics.dropped, metrics.stopped), (0, 0, false));
    /// system.shutdown();
    /// ```
    pub fn metrics(&self) -> crate::ActorMetrics {
        crate::metrics::actor_metrics(&self.cell)
    }

    /// The actor's unique id within its process.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// println!("counter is actor {}", counter.id()); // for logs
    /// assert_eq!(counter.clone().id(), counter.id());
    /// system.shutdown();
    /// ```
    pub fn id(&self) -> ActorId {
        self.cell.id()
    }

    /// Resolves when the actor has stopped, with how it ended: `.await` it, or
    /// [`wait`](Ask::wait) for it from a thread (joining an actor, as a thread is joined). At
    /// once if it has stopped already. It is no request, so its waiter never runs the actor's
    /// turns itself ([`Ask::without_help`]): a task that polls it beside other work (in a
    /// `select!` loop) is not held by the actor's handlers.
    ///
    /// ```
    /// use troupe::{Actor, StopReason, System};
    /// struct Job;
    /// impl Actor for Job {}
    /// let system = System::new();
    /// let job = system.spawn(Job);
    /// job.stop();
    /// assert_eq!(job.stopped().wait(), Ok(StopReason::Normal));
    /// system.shutdown();
    /// ```
    pub fn stopped(&self) -> Ask<StopReason> {
        let (reply, stopped) = reply::channel(self.cell.id());
        let watcher: crate::erased::Watcher = Box::new(move |_, reason: &StopReason| {
            reply.send(reason.clone());
        });
        let added = self.cell.extras().lock().add_watcher(watcher);
        if let Err((watcher, reason)) = added {
            watcher(self.cell.id(), &reason);
        }
        stopped.without_help()
    }

    /// A handle to this actor typed by the message it takes, not by the actor: to give a
    /// reply-to address, or keep actors of different types that handle `M` together.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// use troupe::Recipient;
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// let adder: Recipient<Add> = counter.recipient(); // knows only that it takes `Add`
    /// adder.tell(Add(7)).unwrap();
    /// assert_eq!(counter.ask(Get).wait(), Ok(7));
    /// system.shutdown();
    /// ```
    pub fn recipient<M, K>(&self) -> Recipient<M>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        Recipient {
            target: Arc::new(Via::<A, K> {
                cell: self.cell.clone(),
                kind: PhantomData,
            }),
        }
    }
}

/// For an actor with a [`Handler<M>`](crate::Handler); one with a
/// [`DeferredHandler<M>`](crate::DeferredHandler) gives its recipient by
/// [`Addr::recipient`].
impl<A: Handler<M>, M: Message> From<Addr<A>> for Recipient<M> {
    fn from(addr: Addr<A>) -> Self {
        addr.recipient::<M, Returns>()
    }
}

/// What a [`Recipient`] can do with an actor it does not know the type of.
trait Target<M: Message>: Send + Sync {
    fn tell(&self, msg: M) -> Result<(), SendError<M>>;
    fn ask(&self, msg: M) -> Ask<M::Reply>;
    fn id(&self) -> ActorId;
    fn is_stopped(&self) -> bool;
}

/// An actor's cell, and how the actor handles `M` (the `K` a `Target` impl needs to name).
struct Via<A: Actor, K> {
    cell: Arc<ActorCell<A>>,
    kind: PhantomData<fn() -> K>,
}

impl<A: Accepts<M, K>, M: Message, K: Kind> Target<M> for Via<A, K> {
    fn tell(&self, msg: M) -> Result<(), SendError<M>> {
        tell_cell::<A, M, K>(&self.cell, msg)
    }
    fn ask(&self, msg: M) -> Ask<M::Reply> {
        ask_cell::<A, M, K>(&self.cell, msg)
    }
    fn id(&self) -> ActorId {
        self.cell.id()
    }
    fn is_stopped(&self) -> bool {
        self.cell.is_closed()
    }
}

/// An address typed by the message it accepts rather than by the actor behind it: any actor
/// that handles `M`. Cheap to clone; `tell` and `ask` as on an [`Addr`].
///
/// ```
/// use troupe::{Actor, Context, Handler, Message, Recipient, System};
/// struct Done(u32);
/// impl Message for Done { type Reply = (); }
/// struct Logger;
/// impl Actor for Logger {}
/// impl Handler<Done> for Logger { fn handle(&mut self, _: Done, _: &mut Context<Self>) {} }
/// struct Auditor;
/// impl Actor for Auditor {}
/// impl Handler<Done> for Auditor { fn handle(&mut self, _: Done, _: &mut Context<Self>) {} }
///
/// let system = System::new();
/// let listeners: Vec<Recipient<Done>> = vec![
///     system.spawn(Logger).recipient(),
///     system.spawn(Auditor).into(),
/// ];
/// for listener in &listeners {
///     listener.tell(Done(1)).unwrap();
/// }
/// system.shutdown();
/// ```
pub struct Recipient<M: Message> {
    target: Arc<dyn Target<M>>,
}

impl<M: Message> Clone for Recipient<M> {
    fn clone(&self) -> Self {
        Self {
            target: self.target.clone(),
        }
    }
}

impl<M: Message> fmt::Debug for Recipient<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Recipient<{}>(#{})",
            std::any::type_name::<M>(),
            self.target.id()
        )
    }
}

impl<M: Message> Recipient<M> {
    /// Sends a message without waiting (see [`Addr::tell`]).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// let adder: troupe::Recipient<Add> = counter.recipient();
    /// adder.tell(Add(1)).unwrap();
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// assert_eq!(adder.tell(Add(2)).unwrap_err().into_inner().0, 2); // handed back
    /// system.shutdown();
    /// ```
    pub fn tell(&self, msg: M) -> Result<(), SendError<M>> {
        self.target.tell(msg)
    }

    /// Sends a request (see [`Addr::ask`]).
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let getter: troupe::Recipient<Get> = system.spawn(Counter(41)).recipient();
    /// assert_eq!(getter.ask(Get).wait(), Ok(41));
    /// system.shutdown();
    /// ```
    pub fn ask(&self, msg: M) -> Ask<M::Reply> {
        self.target.ask(msg)
    }

    /// The actor's id.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// let adder: troupe::Recipient<Add> = counter.recipient();
    /// assert_eq!(adder.id(), counter.id());
    /// system.shutdown();
    /// ```
    pub fn id(&self) -> ActorId {
        self.target.id()
    }

    /// True once the actor has begun stopping.
    ///
    /// ```
    /// # use troupe::{Actor, Context, Handler, Message, System};
    /// # struct Counter(u64);
    /// # impl Actor for Counter {}
    /// # #[derive(Message)] struct Add(u64);
    /// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
    /// # #[derive(Message)] #[reply(u64)] struct Get;
    /// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
    /// let system = System::new();
    /// let counter = system.spawn(Counter(0));
    /// let adder: troupe::Recipient<Add> = counter.recipient();
    /// counter.stop();
    /// counter.stopped().wait().unwrap();
    /// assert!(adder.is_stopped());
    /// system.shutdown();
    /// ```
    pub fn is_stopped(&self) -> bool {
        self.target.is_stopped()
    }
}

impl<R: Send + 'static> Ask<R> {
    /// Delivers the reply to the actor at `to` as a message built by `map`, instead of waiting
    /// for it. The asking actor keeps handling other messages meanwhile.
    ///
    /// ```
    /// use troupe::{Actor, AskError, Context, Handler, Message, System};
    /// struct Oracle;
    /// impl Actor for Oracle {}
    /// struct Question;
    /// impl Message for Question { type Reply = u32; }
    /// impl Handler<Question> for Oracle {
    ///     fn handle(&mut self, _: Question, _: &mut Context<Self>) -> u32 { 42 }
    /// }
    ///
    /// struct Seeker { answer: Option<u32> }
    /// impl Actor for Seeker {}
    /// struct Answer(Result<u32, AskError>);
    /// impl Message for Answer { type Reply = (); }
    /// impl Handler<Answer> for Seeker {
    ///     fn handle(&mut self, msg: Answer, _: &mut Context<Self>) { self.answer = msg.0.ok() }
    /// }
    /// struct Seek(troupe::Addr<Oracle>);
    /// impl Message for Seek { type Reply = (); }
    /// impl Handler<Seek> for Seeker {
    ///     fn handle(&mut self, msg: Seek, ctx: &mut Context<Self>) {
    ///         msg.0.ask(Question).pipe_to(&ctx.myself(), Answer);
    ///     }
    /// }
    /// struct Get;
    /// impl Message for Get { type Reply = Option<u32>; }
    /// impl Handler<Get> for Seeker {
    ///     fn handle(&mut self, _: Get, _: &mut Context<Self>) -> Option<u32> { self.answer }
    /// }
    ///
    /// let system = System::new();
    /// let oracle = system.spawn(Oracle);
    /// let seeker = system.spawn(Seeker { answer: None });
    /// seeker.tell(Seek(oracle)).unwrap();
    /// while seeker.ask(Get).wait().unwrap().is_none() { std::thread::yield_now() }
    /// system.shutdown();
    /// ```
    pub fn pipe_to<B, N, K>(
        self,
        to: &Addr<B>,
        map: impl FnOnce(Result<R, AskError>) -> N + Send + 'static,
    ) where
        B: Accepts<N, K>,
        N: Message,
        K: Kind,
    {
        let to = to.clone();
        self.on_reply(move |result| {
            // If the receiver has stopped too, there is no one left to tell.
            let _ = to.tell(map(result));
        });
    }
}
