//! Control signals: what the runtime and other actors tell an actor outside its mailbox.
//!
//! Signals travel on their own lane, a lock-free stack ([`SignalStack`]), and are read ahead of
//! messages (stop, a child's failure, a restart order). Setting the mailbox's `SIGNALED` bit
//! after the push wakes an idle actor, exactly as a message would.
//!
//! The actor's turn takes the whole stack at once (so there is no ABA problem) as a
//! [`SignalBatch`] in sending order, and keeps the batch in its own state while it handles the
//! signals one at a time: if handling one panics (a supervisor strategy, a continuation), the
//! rest are still there for the next turn. A lost `ChildStopped` would leave a parent waiting
//! for ever for a child that is gone.

use std::any::Any;
use std::ptr;

use crate::failure::{Failure, StopReason};
use crate::id::ActorId;
use crate::loom::{AtomicPtr, Ordering};

/// A control signal.
pub(crate) enum Signal {
    /// Stop for good (from `Addr::stop`, a stopping parent, a supervisor, or shutdown).
    Stop,
    /// Stop in order: after what was sent before, and the pipes in flight (`drain.rs`).
    Drain,
    /// A pipe's result (or the notice that its future was dropped) was dropped by a full
    /// mailbox's overflow policy: the pipe is counted out all the same.
    PipeEnded,
    /// A drain's mark was dropped as the oldest message of a full mailbox (overflow policy):
    /// everything ahead of it is gone, so the drain has reached it all the same.
    DrainReached,
    /// A child has stopped; `key` is its slot among its parent's children.
    ChildStopped { key: usize, reason: StopReason },
    /// A child failed (`Failure::Exited` if a permanent child stopped itself) and is suspended
    /// until its parent decides.
    ChildFailed { key: usize, failure: Failure },
    /// Rebuild yourself from your factory (from the supervisor); the failure that caused it,
    /// if it was yours.
    Restart(Option<Failure>),
    /// An actor linked to this one failed.
    LinkFailed(ActorId),
    /// The future of `await_then` number `id` finished with `output`.
    Resume {
        id: u32,
        output: Box<dyn Any + Send>,
    },
    /// A fault a simulation injects (`sim/`): a running actor fails as if the handler of its
    /// next message had panicked (that message is lost, its asker gets `Panicked`).
    Crash,
}

struct Node {
    signal: Signal,
    next: *mut Node,
}

/// A lock-free stack of signals: any thread pushes, the actor's turn takes all at once.
pub(crate) struct SignalStack {
    head: AtomicPtr<Node>,
}

// SAFETY: the nodes are owned by the stack until `take_all` hands them over whole; signals are
// `Send` (every variant's data is).
unsafe impl Send for SignalStack {}
// SAFETY: as above; `push` and `take_all` are the only operations and both are atomic.
unsafe impl Sync for SignalStack {}

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
    pub(crate) fn take_all(&self) -> SignalBatch {
        let mut node = self.head.swap(ptr::null_mut(), Ordering::Acquire);
        // The stack is newest first: reverse the links in place, so the batch is in sending
        // order and needs no allocation.
        let mut reversed: *mut Node = ptr::null_mut();
        while !node.is_null() {
            // SAFETY: the swap made this thread the owner of the whole list.
            let next = unsafe { (*node).next };
            // SAFETY: as above.
            unsafe { (*node).next = reversed };
            reversed = node;
            node = next;
        }
        SignalBatch { head: reversed }
    }
}

impl Drop for SignalStack {
    fn drop(&mut self) {
        drop(self.take_all());
    }
}

/// Signals taken from a [`SignalStack`], oldest first, owned by the actor's turn. One pointer
/// (it sits in every actor's state); appending walks to the end, as batches are short.
pub(crate) struct SignalBatch {
    head: *mut Node,
}

// SAFETY: the batch owns its nodes, whose signals are `Send`.
unsafe impl Send for SignalBatch {}

impl SignalBatch {
    pub(crate) const fn new() -> Self {
        Self {
            head: ptr::null_mut(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// The oldest signal, removed.
    pub(crate) fn pop(&mut self) -> Option<Signal> {
        if self.head.is_null() {
            return None;
        }
        // SAFETY: the batch owns every node of its list; each is freed once, here.
        let node = unsafe { Box::from_raw(self.head) };
        self.head = node.next;
        Some(node.signal)
    }

    /// Appends `later` (signals sent after these).
    pub(crate) fn append(&mut self, later: SignalBatch) {
        let later = std::mem::ManuallyDrop::new(later);
        if later.head.is_null() {
            return;
        }
        if self.head.is_null() {
            self.head = later.head;
            return;
        }
        let mut last = self.head;
        // SAFETY: the batch owns every node of its list, and its last node's `next` is null.
        unsafe {
            while !(*last).next.is_null() {
                last = (*last).next;
            }
            (*last).next = later.head;
        }
    }
}

impl Drop for SignalBatch {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    fn stopped(key: usize) -> Signal {
        Signal::ChildStopped {
            key,
            reason: StopReason::Normal,
        }
    }

    fn key_of(signal: &Signal) -> usize {
        match signal {
            Signal::ChildStopped { key, .. } => *key,
            _ => unreachable!("only ChildStopped is sent here"),
        }
    }

    #[test]
    fn batches_keep_sending_order_and_append() {
        let stack = SignalStack::new();
        for k in 0..3 {
            stack.push(stopped(k));
        }
        let mut batch = stack.take_all();
        assert!(stack.take_all().is_empty());
        assert_eq!(batch.pop().as_ref().map(key_of), Some(0));
        for k in 3..5 {
            stack.push(stopped(k));
        }
        batch.append(stack.take_all());
        batch.append(SignalBatch::new());
        let keys: Vec<usize> = std::iter::from_fn(|| batch.pop())
            .map(|s| key_of(&s))
            .collect();
        assert_eq!(keys, [1, 2, 3, 4]);
        let mut empty = SignalBatch::new();
        empty.append(stack.take_all());
        assert!(empty.is_empty());
        stack.push(stopped(9));
        empty.append(stack.take_all());
        assert_eq!(empty.pop().as_ref().map(key_of), Some(9));
        assert!(empty.pop().is_none());
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

    fn drain(batch: &mut SignalBatch, into: &mut Vec<usize>) {
        while let Some(signal) = batch.pop() {
            into.push(key_of(&signal));
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
            let mut seen = Vec::new();
            // The owner takes a batch, handles one, and keeps the rest across a later take
            // (as a turn does after a panic).
            let mut pending = stack.take_all();
            if let Some(first) = pending.pop() {
                seen.push(key_of(&first));
            }
            for sender in senders {
                sender.join().unwrap();
            }
            pending.append(stack.take_all());
            drain(&mut pending, &mut seen);
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
