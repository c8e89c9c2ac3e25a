//! Request-reply: the one-shot slot behind `ask`.
//!
//! `Addr::ask` sends the request together with a [`ReplySender`] and returns an [`Ask`]. The
//! sender fills the shared slot exactly once: with the handler's reply, or, if it is dropped
//! unused, with the matching [`AskError`] (the actor stopped, the handler panicked, a bounded
//! mailbox dropped the request). So an asker always gets an answer and never hangs on a dead
//! actor.
//!
//! The same slot serves three ways of waiting:
//! - `.await` (it is a `Future`): a poll that may help runs its request's turn itself (a
//!   `block_on` thread, or a task while `tasks_help` allows it: by default while turns are
//!   short), then it looks for the reply for up to
//!   50 µs (`spin.rs`), then the slot keeps the task's `Waker` (polling again with a waker
//!   that wakes the same task keeps it; another one replaces it);
//! - [`Ask::wait`] / [`Ask::wait_timeout`] from a plain thread: `wait` runs its request's
//!   turn itself if no worker has taken it, then the thread spins briefly, then parks, with
//!   its handle in the slot for the replier to unpark;
//! - [`Ask::pipe_to`](crate::Ask::pipe_to): the reply is delivered to another actor as a
//!   message, through a callback stored inline in the slot (run by whichever side comes
//!   second).
//!
//! The first fill wins: a reply, a timeout, or the sender dropped unused; later ones are
//! dropped. An `Ask` dropped before its reply closes the slot, and the reply is dropped when it
//! is sent, on the replying thread; a reply already there goes with the `Ask`.
//!
//! # The slot (`reply/`)
//! - `slot.rs`: one atomic state word (claimed, value set, waiter set, closed, and a reference
//!   count), the value, the waiter and the timeout's timer; no lock. The sender and the `Ask`
//!   hold move-only rights to it (`Filler`, `Taker`); its note has the state table and who
//!   may touch which cell when. A loom model checks each race below.
//! - a slot is recycled when its last reference goes, onto a per-thread shelf for its reply
//!   type, with a process-wide spare shelf so that slots freed on the replier's thread flow
//!   back to the asker's (`shelf.rs`). An ask allocates nothing once the shelves are warm
//!   (`tests/alone/ask_allocations.rs`).
//! - `forward.rs`: `pipe_to`'s callback, stored inline (boxed only if it is large).
//! - `spin.rs`: how long a polled `Ask` looks for its reply before it returns `Pending` (up
//!   to 50 µs, over a parked worker's wake-up, adapted per thread; never on a thread that
//!   runs actors).
//!
//! # Timeouts
//! `ask_timeout` arms a timer that fills the slot with [`AskError::Timeout`]. The timer holds a
//! counted reference, so the slot is not recycled while the timer can fire: a late timer finds
//! its own (answered) ask and its fill is dropped; it never reaches a later ask. Whatever
//! consumes the answer, or the `Ask` dropped, cancels the timer, which releases that reference,
//! so an answered ask does not keep its timer until the deadline.
//!
//! [`Deferred`] (a reply given later, by a `DeferredHandler`) holds the sender itself.

use std::fmt;
use std::future::Future;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use crate::error::AskError;
use crate::id::ActorId;
use crate::role;
use crate::timer::TimerHandle;

mod forward;
mod slot;
mod spin;

use forward::Forward;
use slot::{Filler, Taker};

/// Creates a connected sender and asker for a request to actor `target`, on a recycled slot
/// when one is free.
pub(crate) fn channel<R: Send + 'static>(target: ActorId) -> (ReplySender<R>, Ask<R>) {
    let (filler, taker) = slot::pair(
        crate::shelf::take::<slot::FreeSlot<R>>(),
        crate::shelf::give::<slot::FreeSlot<R>>,
    );
    (
        ReplySender {
            filler: Some(filler),
        },
        Ask {
            taker: Some(taker),
            target,
            pending_since: None,
            helps: true,
        },
    )
}

/// The replying half, carried with the request. Filling it is the handler's reply; dropping it
/// unused fails the ask.
pub(crate) struct ReplySender<R> {
    filler: Option<Filler<R>>,
}

impl<R> ReplySender<R> {
    /// Delivers the reply.
    pub(crate) fn send(mut self, reply: R) {
        if let Some(filler) = self.filler.take() {
            filler.fill(Ok(reply));
        }
    }

    /// Fails the ask with `reason` (the request was refused or dropped).
    pub(crate) fn fail(mut self, reason: AskError) {
        if let Some(filler) = self.filler.take() {
            filler.fill(Err(reason));
        }
    }

    /// True once nobody waits for the reply (the `Ask` was dropped, or it timed out).
    pub(crate) fn is_closed(&self) -> bool {
        self.filler.as_ref().is_none_or(Filler::is_closed)
    }
}

impl<R> Drop for ReplySender<R> {
    fn drop(&mut self) {
        if let Some(filler) = self.filler.take() {
            // Dropped while its handler unwinds: the handler panicked. Otherwise the request
            // was dropped unhandled by a stopping actor (other reasons use `fail`).
            let reason = if std::thread::panicking() {
                AskError::Panicked
            } else {
                AskError::Stopped
            };
            filler.fill(Err(reason));
        }
    }
}

/// The reply handle of a [`DeferredHandler`](crate::DeferredHandler): it answers the request
/// its handler was given, once, from wherever the answer comes (a `pipe` or `await_then`
/// continuation, another actor, a task). The asker gets what is [`send`](Deferred::send)s,
/// [`AskError::NoReply`] if it is dropped unsent, [`AskError::Panicked`] if it is dropped while
/// the code holding it panics; `ask_timeout` covers the whole wait. For a told message it goes
/// nowhere. It holds the asker's reply slot itself: no allocation, no lock.
///
/// ```
/// use std::time::Duration;
/// use troupe::{Actor, Context, Deferred, DeferredHandler, Handler, Message, System};
/// struct Service;
/// impl Actor for Service {}
/// struct Lookup(u32);
/// impl Message for Lookup { type Reply = String; }
/// impl DeferredHandler<Lookup> for Service {
///     fn handle(&mut self, msg: Lookup, reply: Deferred<String>, ctx: &mut Context<Self>) {
///         // An async call; its answer goes to the asker when it comes.
///         ctx.pipe(async move { format!("user {}", msg.0) }, |name| Answered(name, reply));
///     }
/// }
/// struct Answered(String, Deferred<String>);
/// impl Message for Answered { type Reply = (); }
/// impl Handler<Answered> for Service {
///     fn handle(&mut self, msg: Answered, _: &mut Context<Self>) {
///         let _ = msg.1.send(msg.0);
///     }
/// }
/// let system = System::new();
/// let service = system.spawn(Service);
/// let name = service.ask_timeout(Lookup(7), Duration::from_secs(5)).wait();
/// assert_eq!(name.as_deref(), Ok("user 7"));
/// system.shutdown();
/// ```
#[must_use = "a deferred reply must be sent (dropping it fails the ask with AskError::NoReply)"]
pub struct Deferred<R> {
    /// The asker's reply slot; `None` for a told message, and once sent.
    sender: Option<ReplySender<R>>,
}

impl<R> Deferred<R> {
    /// The handle of an asked message.
    #[inline]
    pub(crate) fn to(sender: ReplySender<R>) -> Self {
        Deferred {
            sender: Some(sender),
        }
    }

    /// The handle of a told message: nobody waits.
    #[inline]
    pub(crate) fn nowhere() -> Self {
        Deferred { sender: None }
    }

    /// Answers with a handler's return value (the runtime, for a `Handler`).
    #[inline]
    pub(crate) fn answer(mut self, reply: R) {
        if let Some(sender) = self.sender.take() {
            sender.send(reply);
        }
    }

    /// Sends the reply to the asker. Gives the value back if nobody will take it (the asker
    /// gave up or timed out, or the message was told rather than asked).
    ///
    /// ```
    /// use troupe::{Actor, Context, Deferred, DeferredHandler, Handler, Message, System};
    /// struct Later { pending: Vec<Deferred<u32>> }
    /// impl Actor for Later {}
    /// #[derive(Message)]
    /// #[reply(u32)]
    /// struct Question;
    /// impl DeferredHandler<Question> for Later {
    ///     fn handle(&mut self, _: Question, reply: Deferred<u32>, _: &mut Context<Self>) {
    ///         self.pending.push(reply);
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(usize)]
    /// struct AnswerAll(u32);
    /// impl Handler<AnswerAll> for Later {
    ///     fn handle(&mut self, msg: AnswerAll, _: &mut Context<Self>) -> usize {
    ///         // Each send hands the value back if its asker has gone.
    ///         self.pending.drain(..).map(|reply| reply.send(msg.0)).filter(Result::is_ok).count()
    ///     }
    /// }
    /// let system = System::new();
    /// let later = system.spawn(Later { pending: Vec::new() });
    /// let first = later.ask(Question);
    /// let second = later.ask(Question);
    /// drop(second); // this asker gives up
    /// while later.metrics().processed < 2 { std::thread::yield_now() }
    /// assert_eq!(later.ask(AnswerAll(42)).wait(), Ok(1));
    /// assert_eq!(first.wait(), Ok(42));
    /// system.shutdown();
    /// ```
    pub fn send(mut self, reply: R) -> Result<(), R> {
        match self.sender.take() {
            Some(sender) if !sender.is_closed() => {
                sender.send(reply);
                Ok(())
            }
            // Nobody waits: the slot takes no answer, and the value goes back.
            Some(sender) => {
                sender.fail(AskError::NoReply);
                Err(reply)
            }
            None => Err(reply),
        }
    }

    /// True if nobody will take the reply: the asker dropped its `Ask` or timed out, or the
    /// message was told. A long operation can check it and give up early.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, AskError, Context, Deferred, DeferredHandler, Handler, Message, System};
    /// struct Slow { pending: Option<Deferred<()>> }
    /// impl Actor for Slow {}
    /// #[derive(Message)]
    /// struct Job;
    /// impl DeferredHandler<Job> for Slow {
    ///     fn handle(&mut self, _: Job, reply: Deferred<()>, _: &mut Context<Self>) {
    ///         self.pending = Some(reply);
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(bool)]
    /// struct StillWanted;
    /// impl Handler<StillWanted> for Slow {
    ///     fn handle(&mut self, _: StillWanted, _: &mut Context<Self>) -> bool {
    ///         self.pending.as_ref().is_some_and(|reply| !reply.is_closed())
    ///     }
    /// }
    /// let system = System::new();
    /// let slow = system.spawn(Slow { pending: None });
    /// let job = slow.ask_timeout(Job, Duration::from_millis(10));
    /// assert_eq!(job.wait(), Err(AskError::Timeout(Duration::from_millis(10))));
    /// assert_eq!(slow.ask(StillWanted).wait(), Ok(false)); // the asker gave up: stop working
    /// system.shutdown();
    /// ```
    pub fn is_closed(&self) -> bool {
        self.sender.as_ref().is_none_or(ReplySender::is_closed)
    }
}

impl<R> Drop for Deferred<R> {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            // Dropped while the code holding it unwinds (a continuation, a handler, a task that
            // panicked), or with the instance of an actor that failed: the asker learns it
            // crashed, not that it forgot to answer.
            sender.fail(if std::thread::panicking() || DROPPING_FAILED.get() {
                AskError::Panicked
            } else {
                AskError::NoReply
            });
        }
    }
}

thread_local! {
    /// Set while the runtime drops the instance of an actor that failed.
    static DROPPING_FAILED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Drops `instance`, the state of an actor that failed: the deferred replies it held answer
/// [`AskError::Panicked`], as they would have had the failing handler held them.
pub(crate) fn drop_failed<T>(instance: T) {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DROPPING_FAILED.set(false);
        }
    }
    DROPPING_FAILED.set(true);
    let _reset = Reset;
    drop(instance);
}

impl<R> fmt::Debug for Deferred<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Deferred(..)")
    }
}

/// A pending reply to an `ask`.
///
/// Await it, block on it from a thread ([`wait`](Ask::wait), [`wait_timeout`](Ask::wait_timeout)),
/// or have it delivered to an actor as a message ([`pipe_to`](Ask::pipe_to)). Dropping it
/// abandons the reply (the request is still handled; its reply is dropped).
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
/// let counter = system.spawn(Counter(3));
/// // From a plain thread:
/// assert_eq!(counter.ask(Get).wait(), Ok(3));
/// // From async code:
/// let reply = system.block_on(async { counter.ask(Get).await });
/// assert_eq!(reply, Ok(3));
/// system.shutdown();
/// ```
#[must_use = "an ask does nothing useful unless its reply is awaited, waited for or piped"]
pub struct Ask<R> {
    /// `None` once the result has been taken or handed to a forward. Dropping it closes the
    /// slot (a reply already there is dropped with it, a later one by its sender).
    taker: Option<Taker<R>>,
    /// The actor asked (a thread-backed actor waiting on itself would never wake).
    target: ActorId,
    /// When a poll first returned `Pending`: how soon the reply came after it tunes how long
    /// the thread's polls look for replies (`reply/spin.rs`).
    pending_since: Option<Instant>,
    /// Whether the waiter may run the request's turn itself where the system allows it
    /// (false after [`Ask::without_help`]).
    helps: bool,
}

impl<R> fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ask(to actor {})", self.target)
    }
}

impl<R: Send + 'static> Ask<R> {
    /// Arms a timer that fails this ask with `AskError::Timeout(timeout)` unless it is
    /// answered first; whatever ends the wait cancels the timer.
    /// `noted`, if any, is called if the timer fires before the answer came (an observer
    /// counts it).
    pub(crate) fn with_timeout_noting(
        mut self,
        timers: &TimerHandle,
        timeout: Duration,
        noted: Option<Box<dyn FnOnce() + Send>>,
    ) -> Self {
        let Some(taker) = &mut self.taker else {
            return self;
        };
        let filler = taker.timer_filler();
        let id = timers.schedule(
            timeout,
            Box::new(move || {
                if let Some(noted) = noted {
                    if !filler.is_closed() {
                        noted();
                    }
                }
                filler.fill(Err(AskError::Timeout(timeout)))
            }),
        );
        taker.set_timer(timers.clone(), id);
        if taker.is_filled() {
            // Answered already: the timer has nothing left to do.
            taker.cancel_timer();
        }
        self
    }
}

impl<R> Ask<R> {
    /// A probe that stays true while this ask's answer has not come and its asker has not
    /// given up: it holds a counted reference to the reply slot (as a timer does), so the slot
    /// is not reused while the probe lives. `None` once the answer was taken.
    pub(crate) fn probe(&self) -> Option<Box<dyn Fn() -> bool + Send>>
    where
        R: Send + 'static,
    {
        let filler = self.taker.as_ref()?.timer_filler();
        Some(Box::new(move || !filler.is_closed()))
    }

    fn take_taker(&mut self) -> Taker<R> {
        self.taker.take().expect(
            "an Ask's result is taken once (it is consumed by wait, or polled to completion)",
        )
    }

    /// Refuses to block a thread that the system needs to make progress: a worker of a pool
    /// (the reply may have to be computed on this very thread, or by an actor queued behind
    /// it), or the actor being asked itself (on its own thread, or on a pool for blocking code).
    fn check_may_block(&self) {
        match role::current() {
            role::Role::Worker { may_block: false } => panic!(
                "Ask::wait called inside a handler on a troupe worker: blocking the worker could \
                 deadlock the pool (the reply may need this very thread). Use `.pipe_to(..)`, \
                 `ctx.await_then(..)`, or run this actor on `Placement::Thread` or the \
                 `blocking` pool"
            ),
            role::Role::Actor(me) if me == self.target => panic!(
                "Ask::wait: actor {me} waits for its own reply, which it can never handle while \
                 it waits"
            ),
            role::Role::Worker { may_block: true } if role::running() == Some(self.target) => {
                panic!(
                    "Ask::wait: actor {} waits for its own reply, which it can never handle \
                     while it waits",
                    self.target
                )
            }
            _ => {}
        }
    }

    /// This ask's waiter never runs the asked actor's turn itself: a worker runs it, and the
    /// reply wakes the waiter. For a task whose thread must stay free whatever the handler
    /// does, such as the one reading a connection's frames: by default a task awaiting an ask
    /// may run its request's turn on its own thread while turns are short
    /// ([`SystemBuilder::tasks_help`](crate::SystemBuilder::tasks_help)), and the first
    /// handlers that sleep would hold that thread before the rule stops it.
    ///
    /// ```
    /// use troupe::{Actor, Context, Handler, Message, System};
    ///
    /// struct Echo;
    /// impl Actor for Echo {}
    /// struct Ping(u32);
    /// impl Message for Ping {
    ///     type Reply = u32;
    /// }
    /// impl Handler<Ping> for Echo {
    ///     fn handle(&mut self, Ping(n): Ping, _: &mut Context<Self>) -> u32 {
    ///         n
    ///     }
    /// }
    ///
    /// let system = System::new();
    /// let echo = system.spawn(Echo);
    /// assert_eq!(system.block_on(echo.ask(Ping(7)).without_help()), Ok(7));
    /// system.shutdown();
    /// ```
    #[must_use = "an ask does nothing unless it is awaited or waited for"]
    pub fn without_help(mut self) -> Self {
        self.helps = false;
        self
    }

    /// Blocks the calling thread until the reply arrives or the actor stops.
    ///
    /// # Panics
    /// If called inside a handler running on a worker of a troupe pool (other than the
    /// `blocking` pool): blocking a worker can deadlock it, since the reply may have to be
    /// computed by an actor waiting behind this one on the same thread. Use
    /// [`pipe_to`](Ask::pipe_to), `Context::await_then`, or place the actor on its own thread
    /// (`Placement::Thread`) or on the `blocking` pool. Also if an actor on its own thread
    /// waits for a reply from itself.
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
    /// counter.tell(Add(2)).unwrap();
    /// let total = counter.ask(Get).wait().expect("the counter is running");
    /// assert_eq!(total, 2);
    /// system.shutdown();
    /// ```
    pub fn wait(mut self) -> Result<R, AskError> {
        self.check_may_block();
        match role::driver() {
            // With a deadline (`ask_timeout`) the thread does not help: a turn run here could
            // outlast it.
            None => {
                let helps = self.helps;
                let taker = self.take_taker();
                let help_with = (helps && !taker.has_timer()).then_some(self.target);
                taker.wait(help_with)
            }
            // Without a deadline the simulation runs until the reply is in, or reports that it
            // never can be.
            Some(driver) => self
                .wait_simulated(&*driver, None)
                .expect("a wait without a deadline ends with the reply"),
        }
    }

    /// `wait` on the thread that drives a simulation: the simulation runs until the reply is
    /// in, or its clock reaches `deadline` (`None` then; the slot is closed).
    fn wait_simulated(
        &mut self,
        driver: &dyn role::Drive,
        deadline: Option<Instant>,
    ) -> Option<Result<R, AskError>> {
        let taker = self.take_taker();
        let target = self.target;
        let what = || format!("the reply to an ask of actor {target}");
        driver.run_until(&mut || taker.is_filled(), deadline, &what);
        match taker.try_take() {
            Ok(result) => Some(result),
            Err(taker) => taker.close(),
        }
    }

    /// Blocks the calling thread for at most `timeout`; [`AskError::Timeout`] if no reply came.
    ///
    /// # Panics
    /// As [`wait`](Ask::wait).
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
    /// let system = System::new();
    /// let counter = system.spawn(Counter(9));
    /// assert_eq!(counter.ask(Get).wait_timeout(Duration::from_secs(5)), Ok(9));
    /// system.shutdown();
    /// ```
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<R, AskError> {
        self.check_may_block();
        // Given up at the deadline: a later reply is dropped, and the timer (if any) goes.
        let reply = match role::driver() {
            None => self.take_taker().wait_until(Instant::now() + timeout),
            Some(driver) => self.wait_simulated(&*driver, Some(driver.now() + timeout)),
        };
        reply.unwrap_or(Err(AskError::Timeout(timeout)))
    }

    /// Delivers the result to `forward` when it arrives (immediately if it already has), on the
    /// thread that fills the slot. Used to answer to an actor as a message.
    pub(crate) fn on_reply(mut self, forward: impl FnOnce(Result<R, AskError>) + Send + 'static) {
        self.take_taker().on_reply(Forward::new(forward));
    }
}

// The slot's state stays consistent across a panic (every change is one atomic operation, and
// no user code runs between the two steps of a fill), as the mutex it replaced was.
impl<R> UnwindSafe for Ask<R> {}
impl<R> RefUnwindSafe for Ask<R> {}

impl<R> Unpin for Ask<R> {}

impl<R> Future for Ask<R> {
    type Output = Result<R, AskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let (target, helps) = (self.target, self.helps);
        let taker = self
            .taker
            .as_mut()
            .expect("`Ask` polled after it completed");
        // Polled by a thread blocked in `System::block_on` (which waits for nothing else), the
        // turns it scheduled itself and no worker has taken yet (the request's own, most
        // often) are run here rather than waited for (`role::help_until`); not with a
        // deadline, which a turn run here could outlast, nor after `without_help`. A task of
        // any other executor runs a turn only where the system says it may
        // (`SystemBuilder::tasks_help`; by default until turns it ran held its thread for
        // long twice in a row): its thread has other tasks, which a handler that sleeps or
        // hangs would hold up.
        // Without that help, a reply that comes while the poll looks for it (up to 50 µs,
        // adaptive: `reply/spin.rs`) saves the task's runtime a park and a wake-up.
        let filled = || taker.is_filled();
        if !filled() {
            let by = if role::blocks_on() {
                role::Waiter::Thread
            } else {
                role::Waiter::Task
            };
            if taker.has_timer() || !helps || !role::help_until(target, &filled, by) {
                spin::until(&filled);
            }
        }
        if !taker.poll_filled(cx.waker()) {
            if self.pending_since.is_none() {
                self.pending_since = Some(Instant::now());
            }
            return Poll::Pending;
        }
        if let Some(since) = self.pending_since {
            spin::answered_after(since.elapsed());
        }
        match self.take_taker().try_take() {
            Ok(result) => Poll::Ready(result),
            Err(_) => unreachable!("`poll_filled` saw the value"),
        }
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;
    use std::task::Waker;

    fn pair<R: Send + 'static>() -> (ReplySender<R>, Ask<R>) {
        channel(ActorId::next())
    }

    /// Counts its drops.
    struct Counted(Arc<std::sync::Mutex<u32>>);
    impl Drop for Counted {
        fn drop(&mut self) {
            *self.0.lock().unwrap() += 1;
        }
    }

    fn counter() -> Arc<std::sync::Mutex<u32>> {
        Arc::new(std::sync::Mutex::new(0))
    }

    fn count(drops: &Arc<std::sync::Mutex<u32>>) -> u32 {
        *drops.lock().unwrap()
    }

    fn address<R>(ask: &Ask<R>) -> usize {
        ask.taker.as_ref().unwrap().address()
    }

    #[test]
    fn reply_then_wait() {
        let (tx, ask) = pair();
        tx.send(5);
        assert_eq!(ask.wait(), Ok(5));
    }

    #[test]
    fn dropped_sender_is_stopped() {
        let (tx, ask) = pair::<u8>();
        drop(tx);
        assert_eq!(ask.wait(), Err(AskError::Stopped));
    }

    #[test]
    fn timeout_is_typed_and_prompt() {
        let (_tx, ask) = pair::<u8>();
        let start = Instant::now();
        assert_eq!(
            ask.wait_timeout(Duration::from_millis(20)),
            Err(AskError::Timeout(Duration::from_millis(20)))
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn reply_from_another_thread() {
        let (tx, ask) = pair();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            tx.send("hi");
        });
        assert_eq!(ask.wait_timeout(Duration::from_secs(10)), Ok("hi"));
        t.join().unwrap();
    }

    #[test]
    fn forward_before_and_after_fill() {
        let (tx, ask) = pair();
        let (out_tx, out_rx) = mpsc::channel();
        let out = out_tx.clone();
        ask.on_reply(move |r| out.send(r).unwrap());
        tx.send(1);
        let (tx, ask) = pair();
        tx.send(2);
        ask.on_reply(move |r| out_tx.send(r).unwrap());
        assert_eq!(out_rx.recv().unwrap(), Ok(1));
        assert_eq!(out_rx.recv().unwrap(), Ok(2));
    }

    /// A reply to an abandoned ask is dropped when it is sent, not kept.
    #[test]
    fn abandoned_reply_is_dropped_at_once() {
        let dropped = counter();
        let (tx, ask) = pair();
        drop(ask);
        tx.send(Counted(dropped.clone()));
        assert_eq!(count(&dropped), 1);
        // And a reply that came before the ask was dropped goes with the ask.
        let (tx, ask) = pair();
        tx.send(Counted(dropped.clone()));
        assert_eq!(count(&dropped), 1);
        drop(ask);
        assert_eq!(count(&dropped), 2);
    }

    /// Every reply is dropped exactly once, whichever way it goes: taken by `wait`, by `.await`,
    /// abandoned before or after it came, forwarded before or after it came, given up by
    /// `wait_timeout`, raced by a timeout.
    #[test]
    fn replies_are_dropped_once_on_every_path() {
        let drops = counter();
        let mut created = 0;
        let mut reply = || {
            created += 1;
            Counted(drops.clone())
        };
        let (tx, ask) = pair();
        tx.send(reply());
        drop(ask.wait());
        let (tx, mut ask) = pair();
        let waker = Waker::noop();
        assert!(Pin::new(&mut ask)
            .poll(&mut TaskContext::from_waker(waker))
            .is_pending());
        tx.send(reply());
        match Pin::new(&mut ask).poll(&mut TaskContext::from_waker(waker)) {
            Poll::Ready(result) => drop(result),
            Poll::Pending => panic!("filled"),
        }
        drop(ask);
        let (tx, ask) = pair();
        drop(ask);
        tx.send(reply());
        let (tx, ask) = pair();
        tx.send(reply());
        drop(ask);
        for forward_first in [true, false] {
            let (tx, ask) = pair::<Counted>();
            let drops_seen = drops.clone();
            let forward = move |r: Result<Counted, AskError>| {
                assert!(r.is_ok());
                drop(r);
                assert!(*drops_seen.lock().unwrap() > 0);
            };
            if forward_first {
                ask.on_reply(forward);
                tx.send(reply());
            } else {
                tx.send(reply());
                ask.on_reply(forward);
            }
        }
        let (tx, ask) = pair();
        assert!(ask.wait_timeout(Duration::from_millis(1)).is_err());
        tx.send(reply());
        let timers = crate::timer::TimerService::start("reply-test").unwrap();
        for i in 0..200 {
            let (tx, ask) = pair();
            let ask = ask.with_timeout_noting(&timers.handle(), Duration::from_millis(1), None);
            if i % 2 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            tx.send(reply());
            drop(ask.wait());
        }
        timers.shutdown();
        assert_eq!(count(&drops), created);
    }

    /// A task that polls again with another waker is woken through the new one.
    #[test]
    fn re_poll_with_a_changed_waker_wakes_the_new_one() {
        struct Flag(std::sync::Mutex<u32>);
        impl std::task::Wake for Flag {
            fn wake(self: Arc<Self>) {
                *self.0.lock().unwrap() += 1;
            }
        }
        let (first, second) = (
            Arc::new(Flag(std::sync::Mutex::new(0))),
            Arc::new(Flag(std::sync::Mutex::new(0))),
        );
        let (tx, mut ask) = pair();
        for flag in [&first, &first, &second] {
            let waker = Waker::from(flag.clone());
            assert!(Pin::new(&mut ask)
                .poll(&mut TaskContext::from_waker(&waker))
                .is_pending());
        }
        tx.send(3);
        assert_eq!(*first.0.lock().unwrap(), 0);
        assert_eq!(*second.0.lock().unwrap(), 1);
        let waker = Waker::noop();
        assert_eq!(
            Pin::new(&mut ask).poll(&mut TaskContext::from_waker(waker)),
            Poll::Ready(Ok(3))
        );
    }

    /// A slot freed on this thread is the next one this thread asks with, many times over; one
    /// freed on another thread comes back through the spare shelf.
    #[test]
    fn slots_are_recycled() {
        struct Mine(#[allow(dead_code)] u64);
        let (tx, ask) = pair::<Mine>();
        let first = address(&ask);
        tx.send(Mine(0));
        assert!(ask.wait().is_ok());
        for i in 0..1_000 {
            let (tx, ask) = pair::<Mine>();
            assert_eq!(address(&ask), first, "reused");
            tx.send(Mine(i));
            assert!(ask.wait().is_ok());
        }
        // Filled on another thread, which holds the last reference: its shelf fills and
        // overflows to the spare shelf.
        struct Theirs;
        let (senders, asks): (Vec<_>, Vec<_>) = (0..200).map(|_| pair::<Theirs>()).unzip();
        drop(asks);
        std::thread::spawn(move || drop(senders)).join().unwrap();
        assert!(crate::shelf::spare_len::<slot::FreeSlot<Theirs>>() > 0);
    }

    /// A timer of an answered ask that fires late never fills a later ask.
    #[test]
    fn a_late_timer_never_fills_another_ask() {
        let timers = crate::timer::TimerService::start("reply-late").unwrap();
        for round in 0..20u32 {
            let (tx, ask) = pair::<u32>();
            let limit = Duration::from_millis(2);
            let ask = ask.with_timeout_noting(&timers.handle(), limit, None);
            tx.send(round);
            // Answered in time, unless this thread was kept off its core for the 2 ms between
            // arming the timer and sending (a loaded machine): then the timer won. Either way
            // it must never reach the asks below.
            let first = ask.wait();
            assert!(
                first == Ok(round) || first == Err(AskError::Timeout(limit)),
                "{first:?}"
            );
            // Asks that wait past the first one's deadline.
            for i in 0..5 {
                let (tx, ask) = pair::<u32>();
                std::thread::sleep(Duration::from_micros(500));
                tx.send(i);
                assert_eq!(ask.wait(), Ok(i));
            }
        }
        timers.shutdown();
    }
}

/// Model checks of the lock-free slot: a fill (or the sender dropped) races each way of
/// waiting, the `Ask` being dropped, and a timeout; every result is delivered or dropped
/// exactly once, a blocked waiter is always woken (loom reports a deadlock otherwise), and the
/// cells are never accessed by two sides at once (loom's cells check it). Run with
/// `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_reply`.
#[cfg(all(test, troupe_loom))]
mod loom_reply {
    use super::*;
    use crate::loom::{thread, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts its wakes.
    struct Wakes(AtomicUsize);
    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn pair<R: Send + 'static>() -> (ReplySender<R>, Ask<R>) {
        channel(ActorId::next())
    }

    #[test]
    fn loom_reply_wait_parks_until_filled() {
        loom::model(|| {
            let (tx, ask) = pair::<u32>();
            let replier = thread::spawn(move || tx.send(7));
            assert_eq!(ask.wait(), Ok(7));
            replier.join().unwrap();
        });
    }

    #[test]
    fn loom_reply_dropped_sender_wakes_waiter() {
        loom::model(|| {
            let (tx, ask) = pair::<u32>();
            let replier = thread::spawn(move || drop(tx));
            assert_eq!(ask.wait(), Err(AskError::Stopped));
            replier.join().unwrap();
        });
    }

    /// Polled with one waker, then with another: the reply wakes the one registered last (or
    /// came before it was), and is read once.
    #[test]
    fn loom_reply_repoll_with_changed_waker() {
        loom::model(|| {
            let (tx, mut ask) = pair::<u32>();
            let replier = thread::spawn(move || tx.send(5));
            let (first, second) = (
                Arc::new(Wakes(AtomicUsize::new(0))),
                Arc::new(Wakes(AtomicUsize::new(0))),
            );
            let mut result = None;
            let mut second_pending = false;
            for (wakes, is_second) in [(&first, false), (&second, true)] {
                let waker = Waker::from(wakes.clone());
                match Pin::new(&mut ask).poll(&mut TaskContext::from_waker(&waker)) {
                    Poll::Ready(r) => {
                        result = Some(r);
                        break;
                    }
                    Poll::Pending => second_pending = is_second,
                }
            }
            replier.join().unwrap();
            if second_pending {
                assert_eq!(second.0.load(Ordering::SeqCst), 1, "the new waker is woken");
                let waker = Waker::noop();
                match Pin::new(&mut ask).poll(&mut TaskContext::from_waker(waker)) {
                    Poll::Ready(r) => result = Some(r),
                    Poll::Pending => panic!("woken, so ready"),
                }
            }
            assert_eq!(result, Some(Ok(5)));
            assert!(first.0.load(Ordering::SeqCst) <= 1);
        });
    }

    #[test]
    fn loom_reply_forward_runs_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, ask) = pair::<Counted>();
            let reply = Counted(drops.clone());
            let replier = thread::spawn(move || tx.send(reply));
            let ran = Arc::new(AtomicUsize::new(0));
            let seen = ran.clone();
            ask.on_reply(move |r| {
                assert!(r.is_ok());
                seen.fetch_add(1, Ordering::SeqCst);
            });
            replier.join().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 1);
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn loom_reply_abandoned_reply_dropped_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, ask) = pair::<Counted>();
            let reply = Counted(drops.clone());
            let replier = thread::spawn(move || tx.send(reply));
            drop(ask);
            replier.join().unwrap();
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "dropped once, whoever came last"
            );
        });
    }

    /// A timer's fill races the reply while the asker waits: the first wins, the loser's value
    /// is dropped, and the waiter gets one of them.
    #[test]
    fn loom_reply_timeout_races_reply() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (tx, ask) = pair::<Counted>();
            let timer = ask.taker.as_ref().unwrap().timer_filler();
            let timeout = AskError::Timeout(Duration::from_millis(1));
            let fired = thread::spawn(move || timer.fill(Err(timeout)));
            let reply = Counted(drops.clone());
            let replier = thread::spawn(move || tx.send(reply));
            match ask.wait() {
                Ok(reply) => drop(reply),
                Err(e) => assert_eq!(e, timeout),
            }
            fired.join().unwrap();
            replier.join().unwrap();
            assert_eq!(drops.load(Ordering::SeqCst), 1);
        });
    }

    /// An answered ask's timer fires late, while the asker has moved on to the next ask (maybe
    /// on a recycled slot): the next ask gets its own reply, never the stale timeout.
    #[test]
    fn loom_reply_recycled_slot_with_stale_timer() {
        loom::model(|| {
            let (tx, ask) = pair::<u32>();
            let timer = ask.taker.as_ref().unwrap().timer_filler();
            let stale =
                thread::spawn(move || timer.fill(Err(AskError::Timeout(Duration::from_millis(1)))));
            tx.send(1);
            let first = ask.wait();
            assert!(first == Ok(1) || matches!(first, Err(AskError::Timeout(_))));
            for next in 2..4 {
                let (tx, ask) = pair::<u32>();
                tx.send(next);
                assert_eq!(ask.wait(), Ok(next));
            }
            stale.join().unwrap();
            // Everything released: this thread's next ask may reuse a slot, and starts clean.
            let (tx, ask) = pair::<u32>();
            drop(tx);
            assert_eq!(ask.wait(), Err(AskError::Stopped));
        });
    }

    /// A slot freed on this thread is the next one used there, and starts clean.
    #[test]
    fn loom_reply_slot_is_reused() {
        loom::model(|| {
            let (tx, ask) = pair::<u32>();
            let first = ask.taker.as_ref().unwrap().address();
            tx.send(1);
            assert_eq!(ask.wait(), Ok(1));
            let (tx, ask) = pair::<u32>();
            assert_eq!(ask.taker.as_ref().unwrap().address(), first);
            let replier = thread::spawn(move || tx.send(2));
            assert_eq!(ask.wait(), Ok(2));
            replier.join().unwrap();
        });
    }
}
