//! An actor whose type is not known: what parents, links, watchers and the system do to it
//! ([`ErasedCell`]), and the per-actor state they reach through it ([`Extras`]: watchers,
//! links, registered names, restart and timing counters), allocated on first use so an actor
//! that uses none of it pays one pointer.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::bounded::Bound;
use crate::failure::StopReason;
use crate::id::ActorId;
use crate::loom::AtomicU64;
use crate::signal::Signal;
use crate::watch::ActorWatch;

/// Operations on an actor whose type is not known.
pub(crate) trait ErasedCell: Send + Sync {
    /// Sends a control signal (dropped if the actor has finished).
    fn signal(&self, signal: Signal);
    fn actor_id(&self) -> ActorId;
    /// Its extras, allocated if needed.
    fn extras(&self) -> &Extras;
}

/// A type-erased reference to an actor, used by parents, links and the registry.
pub(crate) type ErasedRef = Arc<dyn ErasedCell>;

/// Called once with the actor's id and how it ended.
pub(crate) type Watcher = Box<dyn FnOnce(ActorId, &StopReason) + Send>;

#[derive(Default)]
pub(crate) struct Extras {
    /// Admission to a bounded mailbox: set when the actor is spawned bounded (the box is then
    /// allocated at once), never changed. Kept here rather than in the cell, which every actor
    /// pays for: an unbounded actor's sends read one null pointer either way.
    pub(crate) bound: Option<Bound>,
    inner: Mutex<Inner>,
    /// Restarts by its supervisor.
    pub(crate) restarts: AtomicU64,
    /// Time spent in handlers, in nanoseconds (only for actors spawned with timing on).
    pub(crate) handler_nanos: AtomicU64,
    /// What an observed system keeps of the actor (set at its spawn, never changed).
    pub(crate) watch: Option<Arc<ActorWatch>>,
}

#[derive(Default)]
pub(crate) struct Inner {
    next_watch: u64,
    pub(crate) watchers: Vec<(u64, Watcher)>,
    pub(crate) links: Vec<(ActorId, Weak<dyn ErasedCell>)>,
    pub(crate) names: Vec<String>,
    /// Set when the actor begins to stop: its names are released then, and no new one taken.
    pub(crate) stopping: bool,
    /// Set when the actor has finished: watchers added later are called at once.
    pub(crate) ended: Option<StopReason>,
}

impl Extras {
    /// Extras for an actor spawned with a bounded mailbox.
    pub(crate) fn bounded(bound: Bound) -> Self {
        Self {
            bound: Some(bound),
            ..Self::default()
        }
    }

    /// Extras for an actor of an observed system (bounded or not).
    pub(crate) fn watched(bound: Option<Bound>, watch: Arc<ActorWatch>) -> Self {
        Self {
            bound,
            watch: Some(watch),
            ..Self::default()
        }
    }

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
