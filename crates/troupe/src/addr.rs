//! [`Addr`]: the typed address of an actor, and the two ways to send: `tell` and `ask`.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::actor::{Actor, Context, Handler, Message};
use crate::cell::{ActorCell, ChildRef, Refusal};
use crate::envelope::{Deliver, Envelope};
use crate::error::{AskError, SendError};
use crate::reply::{self, Ask, ReplySender};
use crate::system::ActorId;

/// The address of an actor of type `A`. Cheap to clone (one reference count), `Send + Sync`.
///
/// Messages from one sender to one actor arrive in the order they were sent. An address stays
/// valid after the actor stops: sends then fail with a typed error that returns the message.
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

/// A told message on its way.
struct Tell<M>(M);

impl<A: Handler<M>, M: Message> Deliver<A> for Tell<M> {
    #[inline]
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        let _reply = actor.handle(self.0, ctx);
    }
}

/// An asked message with its reply slot.
struct Request<M: Message> {
    msg: M,
    reply: ReplySender<M::Reply>,
}

/// Dropped undelivered, a request drops its `ReplySender` unused, which fails the ask.
impl<A: Handler<M>, M: Message> Deliver<A> for Request<M> {
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        let reply = actor.handle(self.msg, ctx);
        self.reply.send(reply);
    }
}

impl<A: Actor> Addr<A> {
    pub(crate) fn from_cell(cell: Arc<ActorCell<A>>) -> Self {
        Self { cell }
    }

    /// Builds an address from the cell pointer a context holds.
    ///
    /// # Safety
    /// `cell` must come from `Arc::into_raw` of a live `Arc<ActorCell<A>>`.
    pub(crate) unsafe fn from_cell_ptr(cell: NonNull<ActorCell<A>>) -> Self {
        // SAFETY: per the contract the pointer is from `Arc::into_raw` and the allocation is
        // live; incrementing first makes the new `Arc` an extra owner.
        unsafe {
            Arc::increment_strong_count(cell.as_ptr());
            Self {
                cell: Arc::from_raw(cell.as_ptr()),
            }
        }
    }

    /// This actor as a type-erased cell (for parents, links, watchers).
    pub(crate) fn into_erased(self) -> ChildRef {
        self.cell
    }

    /// A type-erased handle to this actor's cell.
    pub(crate) fn erased(&self) -> ChildRef {
        self.cell.clone()
    }

    /// Remembers a registered name on the actor, so its end releases it. False if the actor has
    /// already ended.
    pub(crate) fn remember_name(&self, name: &str) -> bool {
        let mut inner = self.cell.extras.get_or_init().lock();
        if inner.ended.is_some() {
            return false;
        }
        inner.names.push(name.to_owned());
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
    pub fn tell<M>(&self, msg: M) -> Result<(), SendError<M>>
    where
        A: Handler<M>,
        M: Message,
    {
        self.cell
            .push(Envelope::new(Tell(msg)))
            .map_err(|(envelope, refusal)| {
                // SAFETY: the envelope was built just above from a `Tell<M>`.
                let Tell(msg) = unsafe { envelope.into_payload::<Tell<M>>() };
                match refusal {
                    Refusal::Stopped => SendError::Stopped(msg),
                    Refusal::Full => SendError::Full(msg),
                }
            })
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
    pub async fn send<M>(&self, msg: M) -> Result<(), SendError<M>>
    where
        A: Handler<M>,
        M: Message,
    {
        let mut msg = msg;
        loop {
            let attempt =
                self.cell
                    .push_waiting(Envelope::new(Tell(msg)))
                    .map_err(|(envelope, refusal)| {
                        // SAFETY: the envelope was built just above from a `Tell<M>`.
                        let Tell(msg) = unsafe { envelope.into_payload::<Tell<M>>() };
                        match refusal {
                            Refusal::Stopped => SendError::Stopped(msg),
                            Refusal::Full => SendError::Full(msg),
                        }
                    });
            match attempt {
                Err(SendError::Full(back)) => {
                    msg = back;
                    let bound = self
                        .cell
                        .bound
                        .as_deref()
                        .expect("only bounded mailboxes fill");
                    // Wait until room is made (or the actor stops), then try again; if another
                    // sender took the room first, this waits again.
                    std::future::poll_fn(|cx| {
                        if bound.wait_for_room(cx.waker()) || self.cell.is_stopped() {
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
    pub fn ask<M>(&self, msg: M) -> Ask<M::Reply>
    where
        A: Handler<M>,
        M: Message,
    {
        let (reply, ask) = reply::channel();
        if let Err((envelope, refusal)) = self.cell.push(Envelope::new(Request { msg, reply })) {
            // SAFETY: the envelope was built just above from a `Request<M>`.
            let request = unsafe { envelope.into_payload::<Request<M>>() };
            let reason = match refusal {
                Refusal::Stopped => AskError::Stopped,
                Refusal::Full => AskError::MailboxFull,
            };
            request.reply.fail(reason);
        }
        ask
    }

    /// Like [`ask`](Addr::ask), but the reply fails with [`AskError::Timeout`] if it has not
    /// come within `timeout`, however it is awaited (`.await`, `wait`, `pipe_to`). The timeout
    /// runs on the system's timer wheel.
    pub fn ask_timeout<M>(&self, msg: M, timeout: std::time::Duration) -> Ask<M::Reply>
    where
        A: Handler<M>,
        M: Message,
    {
        let ask = self.ask(msg);
        let expire = ask.expirer();
        self.cell.system().timers().schedule(
            timeout,
            Box::new(move || expire.expire(AskError::Timeout(timeout))),
        );
        ask
    }

    /// Asks this actor to stop: it finishes the message in hand, runs `stopping`, stops its
    /// children, runs `stopped`. Messages still in its mailbox are dropped. Idempotent.
    pub fn stop(&self) {
        self.cell.signal_stop();
    }

    /// True once the actor has begun stopping and accepts no more messages.
    pub fn is_stopped(&self) -> bool {
        self.cell.is_stopped()
    }

    /// Messages waiting in the actor's mailbox (approximate; for monitoring).
    pub fn mailbox_len(&self) -> usize {
        match &self.cell.bound {
            Some(bound) => bound.len(),
            None => self.cell.mailbox.len(),
        }
    }

    /// The actor's counters: messages processed, mailbox depth, restarts, refused and dropped
    /// messages, time in handlers (if spawned with `SpawnOptions::measure_time`).
    pub fn metrics(&self) -> crate::ActorMetrics {
        crate::metrics::actor_metrics(&self.cell)
    }

    /// The actor's unique id within its process.
    pub fn id(&self) -> ActorId {
        self.cell.id()
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
    pub fn pipe_to<B, N>(
        self,
        to: &Addr<B>,
        map: impl FnOnce(Result<R, AskError>) -> N + Send + 'static,
    ) where
        B: Handler<N>,
        N: Message,
    {
        let to = to.clone();
        self.on_reply(move |result| {
            // If the receiver has stopped too, there is no one left to tell.
            let _ = to.tell(map(result));
        });
    }
}
