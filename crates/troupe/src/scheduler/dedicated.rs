//! Thread-backed actors: the same cell, mailbox and turn, run by an OS thread of its own.
//!
//! Scheduling such an actor means unparking its thread; the thread runs turns until the actor
//! goes idle, then parks. A parker keeps a wake-up token, so an unpark that comes before the
//! park is not lost.

use std::sync::Mutex;
use std::thread::JoinHandle;

use crossbeam_utils::sync::{Parker, Unparker};

use crate::cell::{RawActor, Turn};
use crate::error::BuildError;

/// Messages a thread-backed actor handles per turn; it has the thread to itself, so the bound
/// only sets how often it looks at its signals.
const THREAD_BUDGET: usize = 1024;

/// The wake-up handle stored in a thread-backed actor's header.
pub(crate) struct ThreadWaker {
    unparker: Unparker,
    /// The parking half, taken by the thread when it starts.
    parker: Mutex<Option<Parker>>,
}

impl ThreadWaker {
    pub(crate) fn new() -> Self {
        let parker = Parker::new();
        Self {
            unparker: parker.unparker().clone(),
            parker: Mutex::new(Some(parker)),
        }
    }

    #[inline]
    pub(crate) fn wake(&self) {
        self.unparker.unpark();
    }
}

/// Starts the thread that runs `actor`.
///
/// # Safety
/// `actor` must be a freshly spawned actor whose executor is `waker`, with its alive reference
/// held and its first turn not yet scheduled; the thread takes over the right to run it.
pub(crate) unsafe fn start(
    actor: RawActor,
    waker: &ThreadWaker,
    name: String,
) -> Result<JoinHandle<()>, BuildError> {
    let parker = waker
        .parker
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("a dedicated actor is started once");
    let handle = std::thread::Builder::new().name(name).spawn(move || loop {
        // SAFETY: this thread is the only runner of `actor` (function contract), and runs it
        // only when scheduled: first at start, then after each unpark that follows an Idle.
        match unsafe { actor.run_catching(THREAD_BUDGET) } {
            Turn::Idle => parker.park(),
            Turn::Yield => std::thread::yield_now(),
            Turn::Stopped => return,
        }
    })?;
    Ok(handle)
}
