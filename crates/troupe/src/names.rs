//! The named registry: find an actor by name. A name is released when its actor stops.
//!
//! Entries hold the actor's address type-erased (`Any`), so lookups are typed: asking for the
//! wrong actor type finds nothing. The typed front is in `system.rs` and `context.rs`.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::id::ActorId;

/// Why a name could not be registered.
///
/// ```
/// # use troupe::{Actor, Context, Handler, Message, System};
/// # struct Counter(u64);
/// # impl Actor for Counter {}
/// # #[derive(Message)] struct Add(u64);
/// # impl Handler<Add> for Counter { fn handle(&mut self, m: Add, _: &mut Context<Self>) { self.0 += m.0 } }
/// # #[derive(Message)] #[reply(u64)] struct Get;
/// # impl Handler<Get> for Counter { fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 { self.0 } }
/// use troupe::{RegistryError, SpawnOptions};
/// # struct Other;
/// # impl Actor for Other {}
/// let system = System::new();
/// system.spawn_named("hits", SpawnOptions::new(), || Counter(0)).unwrap();
/// assert_eq!(
///     system.spawn_named("hits", SpawnOptions::new(), || Counter(0)).unwrap_err(),
///     RegistryError::Taken("hits".into())
/// );
/// assert_eq!(system.find::<Counter>("misses").unwrap_err(), RegistryError::NotFound("misses".into()));
/// let wrong = system.find::<Other>("hits").unwrap_err();
/// assert!(matches!(wrong, RegistryError::WrongType { .. }), "{wrong}");
/// system.shutdown();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another live actor holds the name; unregister it first or pick another.
    #[error("the name `{0}` is taken by a live actor")]
    Taken(String),
    /// The actor has stopped (or begun stopping).
    #[error("the actor has stopped; it cannot take the name `{0}`")]
    Stopped(String),
    /// No actor is registered under the name.
    #[error("no actor is registered under the name `{0}`")]
    NotFound(String),
    /// The name belongs to an actor of another type.
    #[error("the name `{name}` belongs to an actor of type `{registered}`, not `{requested}`")]
    WrongType {
        /// The name looked up.
        name: String,
        /// The type of the actor registered under it.
        registered: &'static str,
        /// The type asked for.
        requested: &'static str,
    },
}

struct Entry {
    id: ActorId,
    /// The registered actor's address (an `Addr<A>` for its `A`).
    addr: Arc<dyn Any + Send + Sync>,
    /// The actor's type, to say why a lookup for another type fails.
    type_name: &'static str,
}

/// What a name is registered to: an actor's id, its type-erased address, its type's name.
pub(crate) type Registration = (ActorId, Arc<dyn Any + Send + Sync>, &'static str);

/// Name → actor.
#[derive(Default)]
pub(crate) struct Names {
    map: Mutex<HashMap<String, Entry>>,
}

impl Names {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Every critical section is one map operation: a poisoned lock is still consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims `name` for the actor `build` makes (called under the registry's lock, so no
    /// other claim can come between the check and the insert; it must not call back in).
    pub(crate) fn claim<R>(
        &self,
        name: &str,
        build: impl FnOnce() -> (Registration, R),
    ) -> Result<R, RegistryError> {
        let mut map = self.lock();
        if map.contains_key(name) {
            return Err(RegistryError::Taken(name.to_owned()));
        }
        let ((id, addr, type_name), out) = build();
        map.insert(
            name.to_owned(),
            Entry {
                id,
                addr,
                type_name,
            },
        );
        Ok(out)
    }

    /// The address registered under `name`, and its actor's type name.
    pub(crate) fn get(
        &self,
        name: &str,
    ) -> Result<(Arc<dyn Any + Send + Sync>, &'static str), RegistryError> {
        self.lock()
            .get(name)
            .map(|entry| (entry.addr.clone(), entry.type_name))
            .ok_or_else(|| RegistryError::NotFound(name.to_owned()))
    }

    /// Every registered name, with its actor's id and type, sorted by name.
    pub(crate) fn list(&self) -> Vec<(String, ActorId, &'static str)> {
        let mut names: Vec<_> = self
            .lock()
            .iter()
            .map(|(name, entry)| (name.clone(), entry.id, entry.type_name))
            .collect();
        names.sort();
        names
    }

    /// Removes `name` if it still belongs to `id`.
    pub(crate) fn release(&self, name: &str, id: ActorId) {
        let mut map = self.lock();
        if map.get(name).is_some_and(|e| e.id == id) {
            map.remove(name);
        }
    }

    /// Removes `name` whoever holds it; true if it was registered.
    pub(crate) fn unregister(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }

    /// Drops every entry (shutdown): the addresses they hold must not outlive the system.
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut *self.lock());
        // Dropped outside the lock: dropping an address may end an actor, which releases its
        // names here.
        drop(entries);
    }
}
