//! Thread-backed actors: the same cell, mailbox and turn, run by an OS thread of its own.
//!
//! Scheduling such an actor puts its `Runnable` in the executor's one-entry slot and unparks
//! the thread; the thread takes it and runs turns until the actor goes idle, then parks. The
//! slot holds at most one runnable (an actor has at most one), and a parker keeps a wake-up
//! token, so a wake that comes before the park is not lost.

use std::any::Any;
use std::ptr;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_utils::sync::{Parker, Unparker};

use crate::error::BuildError;
use crate::id::ActorId;
use crate::loom::{AtomicPtr, Ordering};
use crate::raw::{Executor, Ran, Runnable, Schedule};
use crate::role::{self, Role};

/// Messages a thread-backed actor handles per turn; it has the thread to itself, so the bound
/// only sets how often it looks at its signals.
const THREAD_BUDGET: usize = 1024;

/// The executor of one thread-backed actor.
pub(crate) struct ThreadExecutor {
    /// The actor's runnable, boxed, while it waits for the thread to take it.
    waiting: AtomicPtr<Runnable>,
    unparker: Unparker,
    /// The parking half, taken by the thread when it starts.
    parker: std::sync::Mutex<Option<Parker>>,
}

impl ThreadExecutor {
    pub(crate) fn new() -> Self {
        let parker = Parker::new();
        Self {
            waiting: AtomicPtr::new(ptr::null_mut()),
            unparker: parker.unparker().clone(),
            parker: std::sync::Mutex::new(Some(parker)),
        }
    }

    /// The runnable waiting for the thread, if any.
    fn take(&self) -> Option<Runnable> {
        // Acquire pairs with the Release swap in `schedule`.
        let boxed = self.waiting.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` in `schedule`, and the swap made
        // this thread its only owner.
        (!boxed.is_null()).then(|| *unsafe { Box::from_raw(boxed) })
    }
}

impl Drop for ThreadExecutor {
    fn drop(&mut self) {
        // Only an actor that never ran can leave its runnable here (its thread failed to
        // start and it ran elsewhere); the box is freed either way.
        let _ = self.take();
    }
}

/// Starts the thread of the actor `id`, whose executor (a [`ThreadExecutor`]) is `executor`;
/// it waits for the actor's first runnable (`schedule` it next).
pub(crate) fn start_thread(
    executor: Arc<Executor>,
    id: ActorId,
    name: String,
    io: tokio::runtime::Handle,
) -> Result<JoinHandle<()>, BuildError> {
    let parker = thread_executor(&executor)
        .parker
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("a thread-backed actor's thread is started once");
    let thread = std::thread::Builder::new().name(name).spawn(move || {
        let _role = role::enter(Role::Actor(id));
        let _io = io.enter();
        let waiting = thread_executor(&executor);
        loop {
            let Some(mut runnable) = waiting.take() else {
                parker.park();
                continue;
            };
            loop {
                match runnable.run(THREAD_BUDGET, None) {
                    Ran::Idle => break,
                    Ran::Yield(again) => runnable = again,
                    Ran::Stopped => return,
                }
            }
        }
    })?;
    Ok(thread)
}

fn thread_executor(executor: &Executor) -> &ThreadExecutor {
    executor
        .as_any()
        .downcast_ref::<ThreadExecutor>()
        .expect("a thread-backed actor's executor")
}

impl Schedule for ThreadExecutor {
    fn schedule(&self, runnable: Runnable) {
        let boxed = Box::into_raw(Box::new(runnable));
        // Release pairs with the Acquire swap in `take`. An actor has at most one runnable, so
        // the slot was empty.
        let before = self.waiting.swap(boxed, Ordering::Release);
        debug_assert!(before.is_null(), "an actor has one right to run at a time");
        self.unparker.unpark();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn is_pool(&self) -> bool {
        false
    }
}
