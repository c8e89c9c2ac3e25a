//! The named registry: find an actor by name. A name is released when its actor stops.
//!
//! Entries hold the actor's address type-erased (`Any`), so lookups are typed: asking for the
//! wrong actor type finds nothing. The typed front is in `system.rs` and `context.rs`.
//!
//! A name spawned under (`spawn_named`, `get_or_spawn_named`) is *reserved* before the actor
//! is made, and filled once it exists: `make` is user code, run without the registry's lock,
//! and the reservation is what keeps a second spawner from making a second actor meanwhile
//! (it is refused, or, asking to get or spawn, waits for the first to be filled). A reserved
//! name is not found by lookups until it is filled.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

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

/// What a name stands for.
enum Slot {
    /// An actor is being made for it (`make` runs on thread `by`); `token` names that spawn.
    Reserved { by: ThreadId, token: u64 },
    /// A registered actor.
    Taken(Entry),
}

/// A reservation of a name, filled by [`Names::claim`] or given back when dropped (a `make`
/// that panicked, a spawn that gave up).
pub(crate) struct Reservation<'a> {
    names: &'a Names,
    name: String,
    token: u64,
}

impl Reservation<'_> {
    /// The name reserved.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut map = self.names.lock();
        if matches!(map.get(&self.name), Some(Slot::Reserved { token, .. }) if *token == self.token)
        {
            map.remove(&self.name);
            drop(map);
            self.names.changed.notify_all();
        }
    }
}

/// Name → actor.
#[derive(Default)]
pub(crate) struct Names {
    map: Mutex<HashMap<String, Slot>>,
    /// Notified when a reservation is filled or given back.
    changed: Condvar,
    next_token: Mutex<u64>,
}

impl Names {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // Every critical section is one map operation: a poisoned lock is still consistent.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `name` for an actor about to be made, or says it is taken (registered, or
    /// reserved by another spawn).
    pub(crate) fn reserve(&self, name: &str) -> Result<Reservation<'_>, RegistryError> {
        let token = {
            let mut next = self.next_token.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        let mut map = self.lock();
        if map.contains_key(name) {
            return Err(RegistryError::Taken(name.to_owned()));
        }
        map.insert(
            name.to_owned(),
            Slot::Reserved {
                by: std::thread::current().id(),
                token,
            },
        );
        Ok(Reservation {
            names: self,
            name: name.to_owned(),
            token,
        })
    }

    /// Waits while `name` is reserved by a spawn on another thread (its `make` is running):
    /// true once it is filled or given back, false if this thread reserved it itself (a
    /// `make` that asks for its own name would wait for itself).
    pub(crate) fn wait_unreserved(&self, name: &str) -> bool {
        let me = std::thread::current().id();
        let mut map = self.lock();
        loop {
            match map.get(name) {
                Some(Slot::Reserved { by, .. }) if *by == me => return false,
                Some(Slot::Reserved { .. }) => {
                    map = self.changed.wait(map).unwrap_or_else(|p| p.into_inner());
                }
                _ => return true,
            }
        }
    }

    /// Registers the actor `build` makes under a reserved name (called under the registry's
    /// lock, so the check and the insert are one step; it must not call back in). Fails if the
    /// name was taken meanwhile by someone who did not wait for the reservation (`register`
    /// after an `unregister`).
    pub(crate) fn claim<R>(
        &self,
        mut reservation: Reservation<'_>,
        build: impl FnOnce() -> (Registration, R),
    ) -> Result<R, RegistryError> {
        let mut map = self.lock();
        if let Some(Slot::Taken(_)) = map.get(reservation.name.as_str()) {
            return Err(RegistryError::Taken(reservation.name.clone()));
        }
        let ((id, addr, type_name), out) = build();
        // Filled: the name moves into the registry, and the reservation, left holding an
        // empty string (no allocation), has nothing to give back.
        let name = std::mem::take(&mut reservation.name);
        std::mem::forget(reservation);
        map.insert(
            name,
            Slot::Taken(Entry {
                id,
                addr,
                type_name,
            }),
        );
        drop(map);
        self.changed.notify_all();
        Ok(out)
    }

    /// Registers an existing actor under `name` if it is free.
    pub(crate) fn register(
        &self,
        name: &str,
        (id, addr, type_name): Registration,
    ) -> Result<(), RegistryError> {
        let mut map = self.lock();
        if map.contains_key(name) {
            return Err(RegistryError::Taken(name.to_owned()));
        }
        map.insert(
            name.to_owned(),
            Slot::Taken(Entry {
                id,
                addr,
                type_name,
            }),
        );
        Ok(())
    }

    /// The address registered under `name`, and its actor's type name.
    pub(crate) fn get(
        &self,
        name: &str,
    ) -> Result<(Arc<dyn Any + Send + Sync>, &'static str), RegistryError> {
        match self.lock().get(name) {
            Some(Slot::Taken(entry)) => Ok((entry.addr.clone(), entry.type_name)),
            _ => Err(RegistryError::NotFound(name.to_owned())),
        }
    }

    /// Every registered name, with its actor's id and type, sorted by name.
    pub(crate) fn list(&self) -> Vec<(String, ActorId, &'static str)> {
        let mut names: Vec<_> = self
            .lock()
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Taken(entry) => Some((name.clone(), entry.id, entry.type_name)),
                Slot::Reserved { .. } => None,
            })
            .collect();
        names.sort();
        names
    }

    /// Removes `name` if it still belongs to `id`.
    pub(crate) fn release(&self, name: &str, id: ActorId) {
        let mut map = self.lock();
        if matches!(map.get(name), Some(Slot::Taken(e)) if e.id == id) {
            map.remove(name);
        }
    }

    /// Removes `name` whoever holds it; true if it was registered (a reservation is left to
    /// its spawn).
    pub(crate) fn unregister(&self, name: &str) -> bool {
        let mut map = self.lock();
        if matches!(map.get(name), Some(Slot::Taken(_))) {
            map.remove(name);
            return true;
        }
        false
    }

    /// Drops every entry (shutdown): the addresses they hold must not outlive the system.
    pub(crate) fn clear(&self) {
        let entries = std::mem::take(&mut *self.lock());
        // Dropped outside the lock: dropping an address may end an actor, which releases its
        // names here.
        drop(entries);
    }
}
