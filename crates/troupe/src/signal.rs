//! Control signals: what the runtime and other actors tell an actor outside its mailbox.
//!
//! Signals travel on their own lane, a lock-free stack, and are read at the start of every turn,
//! ahead of messages (stop, a child's failure, a restart order). Setting the mailbox's
//! `SIGNALED` bit after the push wakes an idle actor, exactly as a message would.

use std::ptr;

use crate::loom::{AtomicPtr, Ordering};
use crate::supervisor::{Failure, StopReason};
use crate::system::ActorId;

/// A control signal.
pub(crate) enum Signal {
    /// Stop for good (from `Addr::stop`, a stopping parent, a supervisor, or shutdown).
    Stop,
    /// A child has stopped; `key` is its slot among its parent's children.
    ChildStopped { key: usize, reason: StopReason },
    /// A child failed (or, if `failure` is `None`, a permanent child stopped itself) and is
    /// suspended until its parent decides.
    ChildFailed {
        key: usize,
        failure: Option<Failure>,
    },
    /// Rebuild yourself from your factory (from the supervisor).
    Restart(Option<Failure>),
    /// An actor linked to this one failed.
    LinkFailed(ActorId),
    /// A future this actor awaits (holding its mailbox) has finished.
    Resume,
}

struct Node {
    signal: Signal,
    next: *mut Node,
}

/// A lock-free stack of signals: any thread pushes, the actor's turn takes all at once (so
/// there is no ABA problem) and reverses them into sending order.
pub(crate) struct SignalStack {
    head: AtomicPtr<Node>,
}

impl SignalStack {
    pub(crate) fn new() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
        }
    }

    pub(crate) fn push(&self, signal: Signal) {
        let node = Box::into_raw(Box::new(Node {
            signal,
            next: ptr::null_mut(),
        }));
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `node` is ours until the compare-and-swap publishes it.
            unsafe { (*node).next = head };
            // Release pairs with the Acquire swap in `take_all`.
            match self
                .head
                .compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }

    /// Takes every pushed signal, oldest first.
    pub(crate) fn take_all(&self) -> Vec<Signal> {
        let mut node = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        let mut out = Vec::new();
        while !node.is_null() {
            // SAFETY: the swap made this thread the owner of the whole list.
            let boxed = unsafe { Box::from_raw(node) };
            node = boxed.next;
            out.push(boxed.signal);
        }
        out.reverse();
        out
    }
}

impl Drop for SignalStack {
    fn drop(&mut self) {
        drop(self.take_all());
    }
}

/// Model check: two threads push while the owner takes; every signal is taken exactly once, in
/// each sender's order, and no node is leaked or freed twice (loom checks both). Run with
/// `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_`.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc};

    fn key_of(signal: &Signal) -> usize {
        match signal {
            Signal::ChildStopped { key, .. } => *key,
            _ => unreachable!("only ChildStopped is sent here"),
        }
    }

    #[test]
    fn loom_signal_stack_takes_each_once_in_sender_order() {
        loom::model(|| {
            let stack = Arc::new(SignalStack::new());
            let senders: Vec<_> = (0..2)
                .map(|s| {
                    let stack = stack.clone();
                    thread::spawn(move || {
                        for i in 0..2 {
                            stack.push(Signal::ChildStopped {
                                key: s * 10 + i,
                                reason: StopReason::Normal,
                            });
                        }
                    })
                })
                .collect();
            let mut seen: Vec<usize> = stack.take_all().iter().map(key_of).collect();
            for sender in senders {
                sender.join().unwrap();
            }
            seen.extend(stack.take_all().iter().map(key_of));
            for s in 0..2 {
                let mine: Vec<usize> = seen.iter().copied().filter(|k| k / 10 == s).collect();
                assert_eq!(
                    mine,
                    vec![s * 10, s * 10 + 1],
                    "each sender's order, once each"
                );
            }
        });
    }
}
