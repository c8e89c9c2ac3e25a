//! The named registry: find an actor by name. A name is released when its actor stops.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::actor::Actor;
use crate::addr::Addr;
use crate::system::ActorId;

/// Why a name could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// Another live actor holds the name; unregister it first or pick another.
    #[error("the name `{0}` is taken by a live actor")]
    Taken(String),
    /// The actor has already stopped.
    #[error("the actor has stopped; it cannot take the name `{0}`")]
    Stopped(String),
}

struct Entry {
    id: ActorId,
    /// An `Addr<A>` for the registered actor's `A`.
    addr: Arc<dyn Any + Send + Sync>,
}

/// Name → actor. Lookups are typed: asking for the wrong actor type finds nothing.
#[derive(Default)]
pub(crate) struct Names {
    map: Mutex<HashMap<String, Entry>>,
}

impl Names {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn register<A: Actor>(
        &self,
        name: &str,
        addr: &Addr<A>,
    ) -> Result<(), RegistryError> {
        {
            let mut map = self.lock();
            if map.contains_key(name) {
                return Err(RegistryError::Taken(name.to_owned()));
            }
            map.insert(
                name.to_owned(),
                Entry {
                    id: addr.id(),
                    addr: Arc::new(addr.clone()),
                },
            );
        }
        // Remember the name on the actor, so its end releases it; if it already ended, undo.
        if !addr.remember_name(name) {
            self.release(name, addr.id());
            return Err(RegistryError::Stopped(name.to_owned()));
        }
        Ok(())
    }

    pub(crate) fn lookup<A: Actor>(&self, name: &str) -> Option<Addr<A>> {
        self.lock()
            .get(name)
            .and_then(|entry| entry.addr.downcast_ref::<Addr<A>>().cloned())
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
        self.lock().clear();
    }
}
