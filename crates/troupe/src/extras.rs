//! Per-actor state that most actors never need: watchers, links, registered names, restart and
//! timing counters. Allocated on first use, so an actor that uses none of it pays one pointer.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};

use crate::cell::ErasedCell;
use crate::supervisor::StopReason;
use crate::system::ActorId;

/// Called once with the actor's id and how it ended.
pub(crate) type Watcher = Box<dyn FnOnce(ActorId, &StopReason) + Send>;

#[derive(Default)]
pub(crate) struct Extras {
    inner: Mutex<Inner>,
    /// Restarts by its supervisor.
    pub(crate) restarts: AtomicU64,
    /// Time spent in handlers, in nanoseconds (only for actors spawned with timing on).
    pub(crate) handler_nanos: AtomicU64,
}

#[derive(Default)]
pub(crate) struct Inner {
    next_watch: u64,
    pub(crate) watchers: Vec<(u64, Watcher)>,
    pub(crate) links: Vec<(ActorId, Weak<dyn ErasedCell>)>,
    pub(crate) names: Vec<String>,
    /// Set when the actor has finished: watchers added later are called at once.
    pub(crate) ended: Option<StopReason>,
}

impl Extras {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section is a push, a removal or a take: a poisoned lock is consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    /// Adds a watcher; returns its id, or gives it back if the actor has already ended.
    pub(crate) fn add_watcher(&mut self, watcher: Watcher) -> Result<u64, (Watcher, StopReason)> {
        if let Some(reason) = &self.ended {
            return Err((watcher, reason.clone()));
        }
        self.next_watch += 1;
        self.watchers.push((self.next_watch, watcher));
        Ok(self.next_watch)
    }
}

/// A box allocated on first use by any thread, then shared; freed with its owner.
pub(crate) struct LazyBox<T> {
    ptr: AtomicPtr<T>,
}

impl<T: Default> LazyBox<T> {
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The value, if it has been allocated.
    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire pairs with the Release compare-and-swap in `get_or_init`.
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` and lives as long as `self`.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The value, allocating it if needed.
    pub(crate) fn get_or_init(&self) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let fresh = Box::into_raw(Box::default());
        // AcqRel: Release publishes the new value; Acquire (on failure too) sees a rival's.
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: we just published `fresh`; it lives as long as `self`.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` was never published; `winner` is live as long as `self`.
                unsafe {
                    drop(Box::from_raw(fresh));
                    &*winner
                }
            }
        }
    }
}

impl<T> Drop for LazyBox<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: owned by `self`, from `Box::into_raw`; nobody else can reach it now.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
