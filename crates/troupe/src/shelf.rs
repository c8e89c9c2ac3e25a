//! Shelves of free values, so that what is freed on one thread is reused, by type, without
//! the allocator: reply slots (an ask allocates nothing once the shelves are warm) and mailbox
//! blocks (a thread that feeds actors takes back the blocks their workers finished).
//!
//! Values are kept per type: each thread has a few shelves, one per type it has used (at most
//! [`LOCAL_TYPES`] in each [`List`], found by `TypeId`, so that one use's types do
//! not crowd out another's), each holding up to [`Shelved::LOCAL`] free values. A
//! value is often freed on another thread than the one that takes the next (a reply slot by
//! the replying actor's worker, a block by the worker that ran its actor), so a full shelf
//! moves half of its values to a process-wide spare shelf of that type, and an empty one takes
//! a batch from there: values flow back to the threads that take them, one lock per half a
//! shelf. Beyond the bounds, values are dropped (and allocated again when needed).
//!
//! Under loom there is no process-wide shelf (a `static` cannot hold the model's state); each
//! model thread has its own shelves, dropped with it.

use std::any::{Any, TypeId};
use std::cell::RefCell;

use crate::loom::thread_local;

/// A type kept on shelves, and how many of it.
pub(crate) trait Shelved: Send + Sized + 'static {
    /// Free values a thread keeps.
    const LOCAL: usize;
    /// Free values kept process-wide (none under loom).
    #[cfg_attr(troupe_loom, allow(dead_code))]
    const SPARE: usize;
    /// The list of shelves this type's is in.
    const LIST: List;
}

/// A list of shelves, one per use. A list holds [`LOCAL_TYPES`] types per thread, so a worker
/// that runs many types of actor still has shelves for the reply types it asks with.
#[derive(Clone, Copy)]
pub(crate) enum List {
    /// Reply slots, by reply type.
    ReplySlots = 0,
    /// Mailbox blocks, by message type.
    MailboxBlocks = 1,
}
const LISTS: usize = 2;

/// Types a thread keeps shelves for, in each list.
const LOCAL_TYPES: usize = 8;

type Shelf<V> = Vec<V>;
type Shelves = RefCell<Vec<(TypeId, Box<dyn Any>)>>;

thread_local! {
    static LOCAL: [Shelves; LISTS] = [RefCell::new(Vec::new()), RefCell::new(Vec::new())];
}

/// The shelf of `V` among `shelves`, made if there is room for another type.
fn shelf_of<V: Shelved>(shelves: &mut Vec<(TypeId, Box<dyn Any>)>) -> Option<&mut Shelf<V>> {
    let key = TypeId::of::<V>();
    let at = match shelves.iter().position(|(id, _)| *id == key) {
        Some(at) => at,
        None if shelves.len() < LOCAL_TYPES => {
            shelves.push((key, Box::new(Shelf::<V>::with_capacity(V::LOCAL))));
            shelves.len() - 1
        }
        None => return None,
    };
    shelves[at].1.downcast_mut::<Shelf<V>>()
}

/// A free value of type `V`, if a shelf has one.
pub(crate) fn take<V: Shelved>() -> Option<V> {
    LOCAL
        .try_with(|local| {
            // Busy only if a value is given back while this thread is inside the shelves (it
            // is not: nothing here runs user code); then the caller allocates.
            let mut shelves = local[V::LIST as usize].try_borrow_mut().ok()?;
            let shelf = shelf_of::<V>(&mut shelves)?;
            if shelf.is_empty() {
                spare::take_batch(shelf);
            }
            shelf.pop()
        })
        .ok()
        .flatten()
}

/// Free values of type `V` on this thread's shelf.
#[cfg(all(test, not(troupe_loom)))]
pub(crate) fn local_len<V: Shelved>() -> usize {
    LOCAL.with(|local| {
        shelf_of::<V>(&mut local[V::LIST as usize].borrow_mut()).map_or(0, |shelf| shelf.len())
    })
}

/// Keeps a free value for the next taker of its type (or drops it, if every shelf is full).
pub(crate) fn give<V: Shelved>(value: V) {
    // A thread whose locals are gone (exiting) drops the value.
    let _ = LOCAL.try_with(move |local| {
        let Ok(mut shelves) = local[V::LIST as usize].try_borrow_mut() else {
            return;
        };
        let Some(shelf) = shelf_of::<V>(&mut shelves) else {
            return;
        };
        if shelf.len() == V::LOCAL {
            spare::give_batch(shelf);
        }
        shelf.push(value);
    });
}

#[cfg(not(troupe_loom))]
mod spare {
    use std::any::{Any, TypeId};
    use std::sync::{Mutex, MutexGuard};

    use super::{Shelf, Shelved, LISTS};

    /// Types with a process-wide shelf, in each list.
    const SPARE_TYPES: usize = 64;

    type Spares = Mutex<Vec<(TypeId, Box<dyn Any + Send>)>>;

    static SPARE: [Spares; LISTS] = [Mutex::new(Vec::new()), Mutex::new(Vec::new())];

    /// The process-wide shelves of `V`'s list.
    fn lock<V: Shelved>() -> MutexGuard<'static, Vec<(TypeId, Box<dyn Any + Send>)>> {
        // Every critical section moves values between vectors with room reserved: a panic cannot
        // leave a shelf half-updated, so a poisoned lock is still consistent.
        SPARE[V::LIST as usize]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn shelf_of<V: Shelved>(
        shelves: &mut Vec<(TypeId, Box<dyn Any + Send>)>,
        make: bool,
    ) -> Option<&mut Shelf<V>> {
        let key = TypeId::of::<V>();
        let at = match shelves.iter().position(|(id, _)| *id == key) {
            Some(at) => at,
            None if make && shelves.len() < SPARE_TYPES => {
                shelves.push((key, Box::new(Shelf::<V>::with_capacity(V::SPARE))));
                shelves.len() - 1
            }
            None => return None,
        };
        shelves[at].1.downcast_mut::<Shelf<V>>()
    }

    /// Moves up to half a shelf of spare values onto `shelf` (which has room for them).
    pub(super) fn take_batch<V: Shelved>(shelf: &mut Shelf<V>) {
        let mut shelves = lock::<V>();
        if let Some(spare) = shelf_of::<V>(&mut shelves, false) {
            let from = spare.len().saturating_sub(V::LOCAL / 2);
            shelf.extend(spare.drain(from..));
        }
    }

    /// Moves half of `shelf` (full) to the spare shelf; what does not fit is dropped.
    pub(super) fn give_batch<V: Shelved>(shelf: &mut Shelf<V>) {
        let batch = V::LOCAL / 2;
        let from = shelf.len() - batch;
        let mut shelves = lock::<V>();
        match shelf_of::<V>(&mut shelves, true) {
            Some(spare) => {
                let room = (spare.capacity() - spare.len()).min(batch);
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
    pub(crate) fn spare_len<V: Shelved>() -> usize {
        shelf_of::<V>(&mut lock::<V>(), false).map_or(0, |shelf| shelf.len())
    }
}

#[cfg(troupe_loom)]
mod spare {
    use super::{Shelf, Shelved};

    /// No process-wide shelf under loom.
    pub(super) fn take_batch<V: Shelved>(_shelf: &mut Shelf<V>) {}

    /// Drops half the shelf.
    pub(super) fn give_batch<V: Shelved>(shelf: &mut Shelf<V>) {
        shelf.truncate(shelf.len() - V::LOCAL / 2);
    }
}

#[cfg(all(test, not(troupe_loom)))]
pub(crate) use spare::spare_len;

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    /// `IN_LIST` of a test value: the list of reply slots or of mailbox blocks.
    const REPLY: usize = 0;
    const BLOCKS: usize = 1;

    struct Value<const TYPE: usize, const IN_LIST: usize>;
    impl<const TYPE: usize, const IN_LIST: usize> Shelved for Value<TYPE, IN_LIST> {
        const LOCAL: usize = 4;
        const SPARE: usize = 8;
        const LIST: List = if IN_LIST == REPLY {
            List::ReplySlots
        } else {
            List::MailboxBlocks
        };
    }

    /// A thread that shelved as many types of one list as it keeps still shelves the other
    /// list's; a type beyond the bound is dropped, not shelved.
    #[test]
    fn each_list_has_room_of_its_own() {
        fn fill<const T: usize>() {
            give(Value::<T, BLOCKS>);
            assert_eq!(local_len::<Value<T, BLOCKS>>(), 1);
        }
        fill::<0>();
        fill::<1>();
        fill::<2>();
        fill::<3>();
        fill::<4>();
        fill::<5>();
        fill::<6>();
        fill::<7>();
        give(Value::<8, BLOCKS>);
        assert_eq!(
            local_len::<Value<8, BLOCKS>>(),
            0,
            "a ninth type has no shelf"
        );
        give(Value::<0, REPLY>);
        assert_eq!(local_len::<Value<0, REPLY>>(), 1);
        assert!(take::<Value<0, REPLY>>().is_some());
        assert!(take::<Value<0, REPLY>>().is_none());
    }

    /// A full shelf moves half of itself to the spare shelf, where another thread takes it.
    #[test]
    fn a_full_shelf_overflows_to_another_thread() {
        type Mine = Value<100, BLOCKS>;
        for _ in 0..5 {
            give(Mine {});
        }
        assert_eq!(
            local_len::<Mine>(),
            3,
            "four kept, two moved, then the fifth"
        );
        let taken = std::thread::spawn(|| (0..3).filter(|_| take::<Mine>().is_some()).count())
            .join()
            .unwrap();
        assert_eq!(taken, 2, "the two spares");
    }
}
