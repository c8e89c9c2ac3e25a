//! Request-reply: the one-shot slot behind `ask`.
//!
//! `Addr::ask` sends the request together with a [`ReplySender`] and returns an [`Ask`]. The
//! sender fills the shared slot exactly once: with the handler's reply, or, if it is dropped
//! unused (the actor stopped, or the handler panicked), with the matching [`AskError`]. So an
//! asker always gets an answer and never hangs on a dead actor.
//!
//! The same slot serves three ways of waiting:
//! - `.await` (it is a `Future`): the slot keeps the task's `Waker`;
//! - [`Ask::wait`] / [`Ask::wait_timeout`] from a plain thread: a condition variable;
//! - [`Ask::pipe_to`]: the reply is delivered to another actor as a message, through a callback
//!   stored in the slot (run by whichever side comes second).
//!
//! The slot is a mutex around a small state machine. Asks are far rarer than tells in every
//! workload we measure; the mutex is uncontended (one filler, one waiter) and keeps the
//! three waiting styles easy to prove correct.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use crate::error::AskError;
// A mutex is not a lock-free part, so it is not model-checked; `std` is used directly.
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

type Forward<R> = Box<dyn FnOnce(Result<R, AskError>) + Send>;

enum State<R> {
    /// No reply yet; who to tell when it comes.
    Waiting {
        waker: Option<Waker>,
        forward: Option<Forward<R>>,
    },
    /// The reply (or the reason there is none), not yet taken.
    Done(Result<R, AskError>),
    /// The result was taken (or forwarded).
    Taken,
}

struct Slot<R> {
    state: Mutex<State<R>>,
    filled: Condvar,
}

impl<R> Slot<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // A panic while holding this lock cannot leave the state half-written (every update is
        // a single assignment), so a poisoned lock is still consistent.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Creates a connected sender and asker.
pub(crate) fn channel<R>() -> (ReplySender<R>, Ask<R>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting {
            waker: None,
            forward: None,
        }),
        filled: Condvar::new(),
    });
    (
        ReplySender {
            slot: Some(slot.clone()),
        },
        Ask { slot },
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
}

impl<R> ReplySender<R> {
    /// Fails the ask with `reason` (the request was not sent).
    pub(crate) fn fail(mut self, reason: AskError) {
        if let Some(slot) = self.slot.take() {
            fill(&slot, Err(reason));
        }
    }
}

impl<R> Drop for ReplySender<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let reason = if std::thread::panicking() {
                AskError::Panicked
            } else {
                AskError::Stopped
            };
            fill(&slot, Err(reason));
        }
    }
}

fn fill<R>(slot: &Slot<R>, result: Result<R, AskError>) {
    let mut state = slot.lock();
    match std::mem::replace(&mut *state, State::Taken) {
        State::Waiting { waker, forward } => {
            if let Some(forward) = forward {
                drop(state);
                forward(result);
                return;
            }
            *state = State::Done(result);
            drop(state);
            slot.filled.notify_all();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
        // The first fill wins (the reply, a timeout, or the sender dropped unused); later
        // ones are ignored.
        done @ (State::Done(_) | State::Taken) => *state = done,
    }
}

/// A pending reply to an `ask`.
///
/// Await it, block on it from a thread ([`wait`](Ask::wait), [`wait_timeout`](Ask::wait_timeout)),
/// or have it delivered to an actor as a message ([`pipe_to`](Ask::pipe_to)). Dropping it
/// abandons the reply (the request is still handled).
#[must_use = "an ask does nothing useful unless its reply is awaited, waited for or piped"]
pub struct Ask<R> {
    slot: Arc<Slot<R>>,
}

impl<R> fmt::Debug for Ask<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ask(..)")
    }
}

/// Fails a pending ask from elsewhere (a timer) unless it was answered first.
pub(crate) struct Expirer<R> {
    slot: Arc<Slot<R>>,
}

impl<R> Expirer<R> {
    pub(crate) fn expire(self, reason: AskError) {
        fill(&self.slot, Err(reason));
    }
}

impl<R> Ask<R> {
    pub(crate) fn expirer(&self) -> Expirer<R> {
        Expirer {
            slot: self.slot.clone(),
        }
    }

    /// Blocks the calling thread until the reply arrives or the actor stops.
    ///
    /// Do not call this from inside a handler on a shared pool: it would hold a worker thread
    /// (use `pipe_to`, or a dedicated thread, instead).
    pub fn wait(self) -> Result<R, AskError> {
        let mut state = self.slot.lock();
        loop {
            match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => return result,
                waiting @ State::Waiting { .. } => {
                    *state = waiting;
                    state = self
                        .slot
                        .filled
                        .wait(state)
                        .unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                State::Taken => unreachable!("an Ask is the only taker of its slot"),
            }
        }
    }

    /// Blocks the calling thread for at most `timeout`; [`AskError::Timeout`] if no reply came.
    pub fn wait_timeout(self, timeout: Duration) -> Result<R, AskError> {
        let deadline = Instant::now() + timeout;
        let mut state = self.slot.lock();
        loop {
            match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => return result,
                waiting @ State::Waiting { .. } => {
                    *state = waiting;
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(AskError::Timeout(timeout));
                    }
                    state = self
                        .slot
                        .filled
                        .wait_timeout(state, deadline - now)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0;
                }
                State::Taken => unreachable!("an Ask is the only taker of its slot"),
            }
        }
    }

    /// Delivers the result to `forward` when it arrives (immediately if it already has), on the
    /// thread that fills the slot. Used to answer to an actor as a message.
    pub(crate) fn on_reply(self, forward: impl FnOnce(Result<R, AskError>) + Send + 'static) {
        let mut state = self.slot.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(result) => {
                drop(state);
                forward(result);
            }
            State::Waiting { .. } => {
                *state = State::Waiting {
                    waker: None,
                    forward: Some(Box::new(forward)),
                };
            }
            State::Taken => unreachable!("an Ask is the only taker of its slot"),
        }
    }
}

impl<R> Future for Ask<R> {
    type Output = Result<R, AskError>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(result) => Poll::Ready(result),
            State::Waiting { waker, forward } => {
                let waker = match waker {
                    Some(w) if w.will_wake(cx.waker()) => w,
                    _ => cx.waker().clone(),
                };
                *state = State::Waiting {
                    waker: Some(waker),
                    forward,
                };
                Poll::Pending
            }
            State::Taken => panic!("`Ask` polled after it completed"),
        }
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    #[test]
    fn reply_then_wait() {
        let (tx, ask) = channel();
        tx.send(5);
        assert_eq!(ask.wait(), Ok(5));
    }

    #[test]
    fn dropped_sender_is_stopped() {
        let (tx, ask) = channel::<u8>();
        drop(tx);
        assert_eq!(ask.wait(), Err(AskError::Stopped));
    }

    #[test]
    fn timeout_is_typed_and_prompt() {
        let (_tx, ask) = channel::<u8>();
        let start = Instant::now();
        assert_eq!(
            ask.wait_timeout(Duration::from_millis(20)),
            Err(AskError::Timeout(Duration::from_millis(20)))
        );
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn reply_from_another_thread() {
        let (tx, ask) = channel();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            tx.send("hi");
        });
        assert_eq!(ask.wait_timeout(Duration::from_secs(10)), Ok("hi"));
        t.join().unwrap();
    }

    #[test]
    fn forward_before_and_after_fill() {
        let (tx, ask) = channel();
        let (out_tx, out_rx) = std::sync::mpsc::channel();
        let out = out_tx.clone();
        ask.on_reply(move |r| out.send(r).unwrap());
        tx.send(1);
        let (tx, ask) = channel();
        tx.send(2);
        ask.on_reply(move |r| out_tx.send(r).unwrap());
        assert_eq!(out_rx.recv().unwrap(), Ok(1));
        assert_eq!(out_rx.recv().unwrap(), Ok(2));
    }
}
