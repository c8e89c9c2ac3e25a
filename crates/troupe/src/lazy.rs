//! [`LazyBox`]: a value allocated on first use by any thread, then shared, freed with its owner.
//! An actor that never needs its rarely used state (watchers, links, names, counters) pays one
//! pointer for it.
//!
//! Two threads may race to allocate: each builds a value, one compare-and-swap publishes the
//! winner's, and the loser frees its own and uses the winner's. Readers see either null or a
//! fully built value (Release on publish, Acquire on read).

use std::ptr;

use crate::loom::{AtomicPtr, Ordering};

/// A box allocated on first use by any thread, then shared; freed with its owner.
pub(crate) struct LazyBox<T> {
    ptr: AtomicPtr<T>,
}

// SAFETY: the box is shared by reference between threads once published, like an `Arc<T>`.
unsafe impl<T: Send + Sync> Send for LazyBox<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for LazyBox<T> {}

impl<T: Default> LazyBox<T> {
    pub(crate) fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// A box allocated now, holding `value`.
    pub(crate) fn with(value: T) -> Self {
        Self {
            ptr: AtomicPtr::new(Box::into_raw(Box::new(value))),
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
                // SAFETY: `fresh` was never published, so it is ours to free; `winner` was
                // published by a rival and lives as long as `self`.
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
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: owned by `self`, from `Box::into_raw`; `&mut self` means nobody else can
            // reach it now.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// Model check: two threads race to initialise and both use the value; every value built is
/// freed once (loom reports leaks and double frees), and both see the same one.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc, AtomicUsize};

    #[derive(Default)]
    struct Value(AtomicUsize);

    #[test]
    fn loom_lazy_box_publishes_one_value() {
        loom::model(|| {
            let lazy = Arc::new(LazyBox::<Value>::new());
            let other = {
                let lazy = lazy.clone();
                thread::spawn(move || {
                    lazy.get_or_init().0.fetch_add(1, Ordering::Relaxed);
                })
            };
            lazy.get_or_init().0.fetch_add(1, Ordering::Relaxed);
            other.join().unwrap();
            assert_eq!(
                lazy.get().unwrap().0.load(Ordering::Relaxed),
                2,
                "one shared value"
            );
        });
    }
}
