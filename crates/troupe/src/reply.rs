//! Request-reply: the one-shot slot behind `ask`.
//!
//! `Addr::ask` sends the request together with a [`ReplySender`] and returns an [`Ask`]. The
//! sender fills the shared slot exactly once: with the handler's reply, or, if it is dropped
//! unused, with the matching [`AskError`] (the actor stopped, the handler panicked, a bounded
//! mailbox dropped the request). So an asker always gets an answer and never hangs on a dead
//! actor.
//!
//! The same slot serves three ways of waiting:
//! - `.await` (it is a `Future`): the slot keeps the task's `Waker`;
//! - [`Ask::wait`] / [`Ask::wait_timeout`] from a plain thread: a condition variable;
//! - [`Ask::pipe_to`](crate::Ask::pipe_to): the reply is delivered to another actor as a
//!   message, through a callback stored in the slot (run by whichever side comes second).
//!
//! # States
//! `Waiting` → `Done` (filled, not yet taken) → `Taken`; or `Waiting` → `Abandoned` when the
//! `Ask` is dropped first, after which a fill drops its result at once (nobody will take it).
//! The first fill wins: a reply, a timeout, or the sender dropped unused; later ones are
//! dropped.
//!
//! # Timeouts
//! `ask_timeout` arms a timer that fills the slot with [`AskError::Timeout`]. The slot keeps
//! the timer's id while it waits, and whatever ends the wait (a fill, or the `Ask` dropped)
//! cancels it, so an answered ask does not keep its timer (nor, through it, its slot) until
//! the deadline. The timer holds the slot weakly.
//!
//! The slot is a mutex around that state machine (one filler, one waiter: uncontended), and
//! a condition variable for blocking waits; both come from `crate::loom`, and a loom model
//! checks a fill racing each way of waiting.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::AskError;
use crate::id::ActorId;
use crate::loom::{Condvar, Mutex, MutexGuard};
use crate::role;
use crate::timer::{TimerHandle, TimerId};

type Forward<R> = Box<dyn FnOnce(Result<R, AskError>) + Send>;

enum State<R> {
    /// No reply yet; who to tell when it comes, and the timer to cancel then.
    Waiting {
        waker: Option<Waker>,
        forward: Option<Forward<R>>,
        timer: Option<(TimerHandle, TimerId)>,
    },
    /// The reply (or the reason there is none), not yet taken.
    Done(Result<R, AskError>),
    /// The result was taken (or forwarded).
    Taken,
    /// The `Ask` was dropped before a reply came: a fill drops its result.
    Abandoned,
}

struct Slot<R> {
    state: Mutex<State<R>>,
    filled: Condvar,
}

/// How long [`Ask::wait`] looks for a reply before sleeping: rounds of 32 spin hints with a
/// look at the slot after each (about 20 µs in all). A reply from an actor on the pool often
/// comes within that, and sleeping on the condition variable costs the asking thread a context
/// switch each way.
#[cfg(not(troupe_loom))]
const SPIN_ROUNDS: u32 = 40;

impl<R> Slot<R> {
    /// The reply, if it comes while the caller spins briefly (never under loom, whose models
    /// cover the sleeping path).
    #[cfg(not(troupe_loom))]
    fn spin_for_reply(&self) -> Option<Result<R, AskError>> {
        for _ in 0..SPIN_ROUNDS {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            // try_lock: never contend with the filler; a poisoned lock is left to the slow path.
            if let Ok(mut state) = self.state.try_lock() {
                if matches!(*state, State::Done(_)) {
                    let State::Done(result) = std::mem::replace(&mut *state, State::Taken) else {
                        unreachable!("matched just above")
                    };
                    return Some(result);
                }
            }
        }
        None
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // A panic while holding this lock cannot leave the state half-written (every update is
        // a single assignment, and no user code runs under it), so a poisoned lock is still
        // consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Creates a connected sender and asker for a request to actor `target`.
pub(crate) fn channel<R>(target: ActorId) -> (ReplySender<R>, Ask<R>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting {
            waker: None,
            forward: None,
            timer: None,
        }),
        filled: Condvar::new(),
    });
    (
        ReplySender {
            slot: Some(slot.clone()),
        },
        Ask {
            slot: Some(slot),
            target,
        },
    )
}

/// The replying half, carried with the request. Filling it is the handler's reply; dropping it
/// unused fails the ask.
pub(crate) struct ReplySender<R> {
    slot: Option<Arc<Slot<R>>>,
}

impl<R> ReplySender<R> {
    /// Delivers the reply.
    pub(crate) fn send(mut self, reply: R) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, Ok(reply));
        }
    }

    /// Fails the ask with `reason` (the request was refused or dropped).
    pub(crate) fn fail(mut self, reason: AskError) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, Err(reason));
        }
    }

    /// True once nobody waits for the reply (the `Ask` was dropped, or it timed out).
    pub(crate) fn is_closed(&self) -> bool {
        match &self.slot {
            None => true,
            Some(slot) => !matches!(*slot.lock(), State::Waiting { .. }),
        }
    }
}

impl<R> Drop for ReplySender<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            // Dropped while its handler unwinds: the handler panicked. Otherwise the request
            // was dropped unhandled by a stopping actor (other reasons use `fail`).
            let reason = if std::thread::panicking() {
                AskError::Panicked
            } else {
                AskError::Stopped
            };
            fill(&slot, Err(reason));
        }
    }
}

/// Fills the slot unless it was filled already; wakes or forwards to whoever waits, and
/// cancels the timeout's timer. User code (the forward, the result's destructor) runs after
/// the lock is released.
fn fill<R>(slot: &Slot<R>, result: Result<R, AskError>) {
    let mut state = slot.lock();
    match std::mem::replace(&mut *state, State::Taken) {
        State::Waiting {
            waker,
            forward,
            timer,
        } => {
            if let Some(forward) = forward {
                drop(state);
                cancel(timer);
                forward(result);
                return;
            }
            *state = State::Done(result);
            drop(state);
            slot.filled.notify_all();
            cancel(timer);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        other => {
            // Filled already (the first fill wins), or abandoned: this result is dropped.
            *state = other;
            drop(state);
            drop(result);
        }
    }
}

fn cancel(timer: Option<(TimerHandle, TimerId)>) {
    if let Some((timers, id)) = timer {
        timers.cancel(id);
    }
}

/// A reply a handler gives later: from a `pipe` or `await_then` continuation, another actor, a
/// task. Made by `Context::reply_later` inside the handler of an asked message; the value the
/// handler returns is then ignored, and the asker gets what is sent here (or
/// [`AskError::NoReply`] if this is dropped unsent). `ask_timeout` covers the whole wait.
///
/// ```
/// use std::time::Duration;
/// use troupe::{Actor, Context, Deferred, Handler, Message, System};
/// struct Service;
/// impl Actor for Service {}
/// struct Lookup(u32);
/// impl Message for Lookup { type Reply = String; }
/// impl Handler<Lookup> for Service {
///     fn handle(&mut self, msg: Lookup, ctx: &mut Context<Self>) -> String {
///         let reply: Deferred<String> = ctx.reply_later::<Lookup>();
///         // An async call; its answer goes to the asker when it comes.
///         ctx.pipe(async move { format!("user {}", msg.0) }, |name| Answered(name, reply));
///         String::new() // ignored: the reply was deferred
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
    link: Arc<Mutex<Link<R>>>,
    sent: bool,
}

/// Where a deferred reply goes.
pub(crate) enum Link<R> {
    /// The handler is still running: not yet joined to the ask.
    Pending {
        /// Sent before the join.
        early: Option<R>,
        /// The `Deferred` was dropped unsent.
        abandoned: bool,
    },
    /// Joined to the asker's reply slot.
    Linked(ReplySender<R>),
    /// Nobody will take it (the message was told, not asked), or it was delivered.
    Closed,
}

/// The runtime's half of a deferred reply: joined to the request's reply slot when the
/// handler returns.
pub(crate) struct DeferredLink<R> {
    /// `None` once joined.
    link: Option<Arc<Mutex<Link<R>>>>,
}

impl<R> Drop for DeferredLink<R> {
    /// Never joined (the handler panicked, or deferred twice): nobody will take the reply.
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            let mut link = lock_link(&link);
            if let Link::Pending { .. } = *link {
                *link = Link::Closed;
            }
        }
    }
}

impl<R: Send + 'static> Deferred<R> {
    /// A deferred reply and the runtime's half of it.
    pub(crate) fn new() -> (Self, DeferredLink<R>) {
        let link = Arc::new(Mutex::new(Link::Pending {
            early: None,
            abandoned: false,
        }));
        (
            Deferred {
                link: link.clone(),
                sent: false,
            },
            DeferredLink { link: Some(link) },
        )
    }

    /// Sends the reply to the asker. Gives the value back if nobody will take it (the asker
    /// gave up or timed out, or the message was told rather than asked).
    ///
    /// ```
    /// use troupe::{Actor, Context, Deferred, Handler, Message, System};
    /// struct Later { pending: Vec<Deferred<u32>> }
    /// impl Actor for Later {}
    /// #[derive(Message)]
    /// #[reply(u32)]
    /// struct Question;
    /// impl Handler<Question> for Later {
    ///     fn handle(&mut self, _: Question, ctx: &mut Context<Self>) -> u32 {
    ///         self.pending.push(ctx.reply_later::<Question>());
    ///         0
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
        self.sent = true;
        let mut link = lock_link(&self.link);
        match std::mem::replace(&mut *link, Link::Closed) {
            Link::Pending { .. } => {
                *link = Link::Pending {
                    early: Some(reply),
                    abandoned: false,
                };
                Ok(())
            }
            Link::Linked(sender) => {
                drop(link);
                if sender.is_closed() {
                    return Err(reply);
                }
                sender.send(reply);
                Ok(())
            }
            Link::Closed => Err(reply),
        }
    }

    /// True if nobody will take the reply: the asker dropped its `Ask` or timed out, or the
    /// message was told. A long operation can check it and give up early.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::{Actor, AskError, Context, Deferred, Handler, Message, System};
    /// struct Slow { pending: Option<Deferred<()>> }
    /// impl Actor for Slow {}
    /// #[derive(Message)]
    /// struct Job;
    /// impl Handler<Job> for Slow {
    ///     fn handle(&mut self, _: Job, ctx: &mut Context<Self>) {
    ///         self.pending = Some(ctx.reply_later::<Job>());
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
        match &*lock_link(&self.link) {
            Link::Pending { .. } => false,
            Link::Linked(sender) => sender.is_closed(),
            Link::Closed => true,
        }
    }
}

impl<R> Drop for Deferred<R> {
    fn drop(&mut self) {
        if self.sent {
            return;
        }
        let mut link = lock_link(&self.link);
        match std::mem::replace(&mut *link, Link::Closed) {
            Link::Pending { early, .. } => {
                *link = Link::Pending {
                    early,
                    abandoned: true,
                };
            }
            Link::Linked(sender) => {
                drop(link);
                sender.fail(AskError::NoReply);
            }
            Link::Closed => {}
        }
    }
}

impl<R> fmt::Debug for Deferred<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Deferred(..)")
    }
}

impl<R> DeferredLink<R> {
    /// Joins the deferred reply to the request's reply slot (or, `None`, to nobody: the message
    /// was told).
    pub(crate) fn join(mut self, sender: Option<ReplySender<R>>) {
        let Some(link) = self.link.take() else {
            return;
        };
        let mut link = lock_link(&link);
        let Link::Pending { early, abandoned } = std::mem::replace(&mut *link, Link::Closed) else {
            return;
        };
        // Decided under the lock; the reply (which may run a forward) goes out after it.
        let Some(sender) = sender else {
            return;
        };
        match early {
            Some(reply) => {
                drop(link);
                sender.send(reply);
            }
            None if abandoned => {
                drop(link);
                sender.fail(AskError::NoReply);
            }
            None => *link = Link::Linked(sender),
        }
    }
}

fn lock_link<R>(link: &Mutex<Link<R>>) -> MutexGuard<'_, Link<R>> {
    // Every critical section is one replace: a poisoned lock is still consistent.
    link.lock().unwrap_or_else(|p| p.into_inner())
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
    /// `None` once the result has been taken or handed to a forward.
    slot: Option<Arc<Slot<R>>>,
    /// The actor asked (a thread-backed actor waiting on itself would never wake).
    target: ActorId,
}

impl<R> fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ask(to actor {})", self.target)
    }
}

impl<R: Send + 'static> Ask<R> {
    /// Arms a timer that fails this ask with `AskError::Timeout(timeout)` unless it is
    /// answered first; whatever ends the wait cancels the timer.
    pub(crate) fn with_timeout(self, timers: &TimerHandle, timeout: Duration) -> Self {
        let Some(slot) = &self.slot else {
            return self;
        };
        let weak: Weak<Slot<R>> = Arc::downgrade(slot);
        let id = timers.schedule(
            timeout,
            Box::new(move || {
                if let Some(slot) = weak.upgrade() {
                    fill(&slot, Err(AskError::Timeout(timeout)));
                }
            }),
        );
        let armed = {
            let mut state = slot.lock();
            if let State::Waiting { timer, .. } = &mut *state {
                *timer = Some((timers.clone(), id));
                true
            } else {
                false
            }
        };
        if !armed {
            // Answered (or timed out) already: the timer has nothing left to do.
            timers.cancel(id);
        }
        self
    }
}

impl<R> Ask<R> {
    fn take_slot(&mut self) -> Arc<Slot<R>> {
        self.slot.take().expect(
            "an Ask's result is taken once (it is consumed by wait, or polled to completion)",
        )
    }

    /// Refuses to block a thread that the system needs to make progress: a worker of a pool
    /// (the reply may have to be computed on this very thread, or by an actor queued behind
    /// it), or the thread of the actor being asked.
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
            _ => {}
        }
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
        let slot = self.take_slot();
        #[cfg(not(troupe_loom))]
        if let Some(result) = slot.spin_for_reply() {
            return result;
        }
        let mut state = slot.lock();
        loop {
            match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => return result,
                waiting @ State::Waiting { .. } => {
                    *state = waiting;
                    state = slot
                        .filled
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                State::Taken | State::Abandoned => {
                    unreachable!("an Ask is the only taker of its slot")
                }
            }
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
        let deadline = Instant::now() + timeout;
        let slot = self.take_slot();
        let mut state = slot.lock();
        loop {
            match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => return result,
                waiting @ State::Waiting { .. } => {
                    let now = Instant::now();
                    if now >= deadline {
                        // Given up: a later reply is dropped, and the timer (if any) goes.
                        let State::Waiting { timer, .. } = waiting else {
                            unreachable!()
                        };
                        *state = State::Abandoned;
                        drop(state);
                        cancel(timer);
                        return Err(AskError::Timeout(timeout));
                    }
                    *state = waiting;
                    state = slot
                        .filled
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0;
                }
                State::Taken | State::Abandoned => {
                    unreachable!("an Ask is the only taker of its slot")
                }
            }
        }
    }

    /// Delivers the result to `forward` when it arrives (immediately if it already has), on the
    /// thread that fills the slot. Used to answer to an actor as a message.
    pub(crate) fn on_reply(mut self, forward: impl FnOnce(Result<R, AskError>) + Send + 'static) {
        let slot = self.take_slot();
        let mut state = slot.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(result) => {
                drop(state);
                forward(result);
            }
            State::Waiting { timer, .. } => {
                *state = State::Waiting {
                    waker: None,
                    forward: Some(Box::new(forward)),
                    timer,
                };
            }
            State::Taken | State::Abandoned => unreachable!("an Ask is the only taker of its slot"),
        }
    }
}

impl<R> Drop for Ask<R> {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let mut state = slot.lock();
        match std::mem::replace(&mut *state, State::Abandoned) {
            State::Waiting { timer, .. } => {
                drop(state);
                cancel(timer);
            }
            // The reply came and was never taken: dropped now, outside the lock.
            State::Done(result) => {
                drop(state);
                drop(result);
            }
            State::Taken | State::Abandoned => {}
        }
    }
}

impl<R> Unpin for Ask<R> {}

impl<R> Future for Ask<R> {
    type Output = Result<R, AskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let slot = self
            .slot
            .as_ref()
            .expect("`Ask` polled after it completed")
            .clone();
        let mut state = slot.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(result) => {
                drop(state);
                self.slot = None;
                Poll::Ready(result)
            }
            State::Waiting {
                waker,
                forward,
                timer,
            } => {
                let waker = match waker {
                    Some(w) if w.will_wake(cx.waker()) => w,
                    _ => cx.waker().clone(),
                };
                *state = State::Waiting {
                    waker: Some(waker),
                    forward,
                    timer,
                };
                Poll::Pending
            }
            State::Taken | State::Abandoned => unreachable!("an Ask is the only taker of its slot"),
        }
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    fn pair<R>() -> (ReplySender<R>, Ask<R>) {
        channel(ActorId::next())
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
        let (out_tx, out_rx) = std::sync::mpsc::channel();
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
        let dropped = Arc::new(std::sync::Mutex::new(0));
        struct Counted(Arc<std::sync::Mutex<u32>>);
        impl Drop for Counted {
            fn drop(&mut self) {
                *self.0.lock().unwrap() += 1;
            }
        }
        let (tx, ask) = pair();
        drop(ask);
        tx.send(Counted(dropped.clone()));
        assert_eq!(*dropped.lock().unwrap(), 1);
        // And a reply that came before the ask was dropped goes with the ask.
        let (tx, ask) = pair();
        tx.send(Counted(dropped.clone()));
        assert_eq!(*dropped.lock().unwrap(), 1);
        drop(ask);
        assert_eq!(*dropped.lock().unwrap(), 2);
    }
}

/// Model checks: a reply (or the sender dropped) races each way of waiting, and the `Ask`
/// being dropped; every result is delivered or dropped exactly once, and a blocked waiter is
/// always woken (loom reports a deadlock otherwise). Run with
/// `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_`.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc as LoomArc, AtomicUsize, Ordering};

    /// Counts its drops.
    struct Counted(LoomArc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn loom_reply_slot_wait_sees_the_reply() {
        loom::model(|| {
            let (tx, ask) = channel::<u32>(ActorId::next());
            let replier = thread::spawn(move || tx.send(7));
            assert_eq!(ask.wait(), Ok(7));
            replier.join().unwrap();
        });
    }

    #[test]
    fn loom_reply_slot_dropped_sender_wakes_waiter() {
        loom::model(|| {
            let (tx, ask) = channel::<u32>(ActorId::next());
            let replier = thread::spawn(move || drop(tx));
            assert_eq!(ask.wait(), Err(AskError::Stopped));
            replier.join().unwrap();
        });
    }

    #[test]
    fn loom_reply_slot_forward_runs_once() {
        loom::model(|| {
            let (tx, ask) = channel::<u32>(ActorId::next());
            let got = LoomArc::new(AtomicUsize::new(0));
            let replier = thread::spawn(move || tx.send(3));
            let seen = got.clone();
            ask.on_reply(move |r| {
                assert_eq!(r, Ok(3));
                seen.fetch_add(1, Ordering::SeqCst);
            });
            replier.join().unwrap();
            assert_eq!(got.load(Ordering::SeqCst), 1);
        });
    }

    #[test]
    fn loom_reply_slot_abandoned_reply_dropped_once() {
        loom::model(|| {
            let drops = LoomArc::new(AtomicUsize::new(0));
            let (tx, ask) = channel::<Counted>(ActorId::next());
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
}
