//! Recycling reply slots, so that an ask allocates nothing once the caches are warm.
//!
//! Slots are generic over the reply type, so they are kept per type: each thread has a few
//! shelves, one per reply type it has used (at most [`LOCAL_TYPES`], found by `TypeId`), each
//! holding up to [`LOCAL_SLOTS`] free slots. A slot is freed by whichever of its holders lets
//! go last, often on another thread than the one that took it (the replying actor's worker),
//! so a full shelf moves half of its slots to a process-wide spare shelf of that type, and an
//! empty one takes a batch from there: slots flow back to the threads that ask, one lock per
//! [`BATCH`] slots. Beyond the bounds, slots are freed (and allocated again when needed).
//!
//! Under loom there is no process-wide shelf (a `static` cannot hold the model's state); each
//! model thread has its own shelves, dropped with it.

use std::any::{Any, TypeId};
use std::cell::RefCell;

use super::slot::FreeSlot;
use crate::loom::thread_local;

/// Free slots a thread keeps per reply type.
const LOCAL_SLOTS: usize = 32;
/// Slots moved between a thread's shelf and the spare shelf at a time.
const BATCH: usize = LOCAL_SLOTS / 2;
/// Reply types a thread keeps shelves for.
const LOCAL_TYPES: usize = 8;

type Shelf<R> = Vec<FreeSlot<R>>;

thread_local! {
    static LOCAL: RefCell<Vec<(TypeId, Box<dyn Any>)>> = RefCell::new(Vec::new());
}

/// The shelf of `R` among `shelves`, made if there is room for another type.
fn shelf_of<R: Send + 'static>(shelves: &mut Vec<(TypeId, Box<dyn Any>)>) -> Option<&mut Shelf<R>> {
    let key = TypeId::of::<R>();
    let at = match shelves.iter().position(|(id, _)| *id == key) {
        Some(at) => at,
        None if shelves.len() < LOCAL_TYPES => {
            shelves.push((key, Box::new(Shelf::<R>::with_capacity(LOCAL_SLOTS))));
            shelves.len() - 1
        }
        None => return None,
    };
    shelves[at].1.downcast_mut::<Shelf<R>>()
}

/// A free slot for reply type `R`, if a cache has one.
pub(crate) fn take<R: Send + 'static>() -> Option<FreeSlot<R>> {
    LOCAL
        .try_with(|local| {
            // Busy only if a slot is released while this thread is inside the cache (it is not:
            // nothing here runs user code); then the caller allocates.
            let mut shelves = local.try_borrow_mut().ok()?;
            let shelf = shelf_of::<R>(&mut shelves)?;
            if shelf.is_empty() {
                spare::take_batch(shelf);
            }
            shelf.pop()
        })
        .ok()
        .flatten()
}

/// Keeps a free slot for the next ask of its type (or frees it, if every shelf is full).
pub(crate) fn give<R: Send + 'static>(slot: FreeSlot<R>) {
    // A thread whose locals are gone (exiting) frees the slot.
    let _ = LOCAL.try_with(move |local| {
        let Ok(mut shelves) = local.try_borrow_mut() else {
            return;
        };
        let Some(shelf) = shelf_of::<R>(&mut shelves) else {
            return;
        };
        if shelf.len() == LOCAL_SLOTS {
            spare::give_batch(shelf);
        }
        shelf.push(slot);
    });
}

#[cfg(not(troupe_loom))]
mod spare {
    use std::any::{Any, TypeId};
    use std::sync::{Mutex, MutexGuard};

    use super::{Shelf, BATCH};

    /// Free slots kept process-wide per reply type.
    const SPARE_SLOTS: usize = 1024;
    /// Reply types with a process-wide shelf.
    const SPARE_TYPES: usize = 64;

    static SPARE: Mutex<Vec<(TypeId, Box<dyn Any + Send>)>> = Mutex::new(Vec::new());

    fn lock() -> MutexGuard<'static, Vec<(TypeId, Box<dyn Any + Send>)>> {
        // Every critical section moves slots between vectors with room reserved: a panic cannot
        // leave a shelf half-updated, so a poisoned lock is still consistent.
        SPARE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn shelf_of<R: Send + 'static>(
        shelves: &mut Vec<(TypeId, Box<dyn Any + Send>)>,
        make: bool,
    ) -> Option<&mut Shelf<R>> {
        let key = TypeId::of::<R>();
        let at = match shelves.iter().position(|(id, _)| *id == key) {
            Some(at) => at,
            None if make && shelves.len() < SPARE_TYPES => {
                shelves.push((key, Box::new(Shelf::<R>::with_capacity(SPARE_SLOTS))));
                shelves.len() - 1
            }
            None => return None,
        };
        shelves[at].1.downcast_mut::<Shelf<R>>()
    }

    /// Moves up to a batch of spare slots onto `shelf` (which has room for them).
    pub(super) fn take_batch<R: Send + 'static>(shelf: &mut Shelf<R>) {
        let mut shelves = lock();
        if let Some(spare) = shelf_of::<R>(&mut shelves, false) {
            let from = spare.len().saturating_sub(BATCH);
            shelf.extend(spare.drain(from..));
        }
    }

    /// Moves a batch off `shelf` (full) to the spare shelf; what does not fit is freed.
    pub(super) fn give_batch<R: Send + 'static>(shelf: &mut Shelf<R>) {
        let from = shelf.len() - BATCH;
        let mut shelves = lock();
        match shelf_of::<R>(&mut shelves, true) {
            Some(spare) => {
                let room = (spare.capacity() - spare.len()).min(BATCH);
                spare.extend(shelf.drain(from..from + room));
                drop(shelves);
                shelf.truncate(from);
            }
            None => {
                drop(shelves);
                shelf.truncate(from);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn spare_len<R: Send + 'static>() -> usize {
        shelf_of::<R>(&mut lock(), false).map_or(0, |shelf| shelf.len())
    }
}

#[cfg(troupe_loom)]
mod spare {
    use super::{Shelf, BATCH};

    /// No process-wide shelf under loom.
    pub(super) fn take_batch<R>(_shelf: &mut Shelf<R>) {}

    /// Frees a batch.
    pub(super) fn give_batch<R>(shelf: &mut Shelf<R>) {
        shelf.truncate(shelf.len() - BATCH);
    }
}

#[cfg(all(test, not(troupe_loom)))]
pub(crate) use spare::spare_len;
