//! The one door to atomics, cells and threads for the lock-free parts.
//!
//! Under `cfg(troupe_loom)` everything here comes from the `loom` model checker, so the mailbox and the
//! reply slot can be run through every interleaving loom explores; otherwise it is `std`.
//! Code that must be model-checked imports from here, never from `std::sync::atomic` directly.

#[cfg(troupe_loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint,
    sync::{
        atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering},
        Arc, Mutex, MutexGuard,
    },
    thread,
};

#[cfg(not(troupe_loom))]
pub(crate) use std::{
    hint,
    sync::{
        atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering},
        Mutex, MutexGuard,
    },
    thread,
};

/// `std`'s `UnsafeCell` with loom's access API (`with` / `with_mut`), so the same code compiles
/// against both. Loom's own cell tracks every access and reports unsynchronised ones.
#[cfg(not(troupe_loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(troupe_loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Spins a little, then yields the thread: used where a producer is known to be between two
/// steps that take nanoseconds (claimed a slot, not yet written it). Under loom every spin is a
/// yield so the model checker lets the other thread finish.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    step: u32,
}

impl Backoff {
    const SPIN_LIMIT: u32 = 6;

    pub(crate) fn new() -> Self {
        Self { step: 0 }
    }

    #[inline]
    pub(crate) fn snooze(&mut self) {
        #[cfg(troupe_loom)]
        {
            thread::yield_now();
        }
        #[cfg(not(troupe_loom))]
        {
            if self.step <= Self::SPIN_LIMIT {
                for _ in 0..1u32 << self.step {
                    hint::spin_loop();
                }
            } else {
                thread::yield_now();
            }
        }
        self.step = self.step.saturating_add(1);
    }

    /// True once spinning has stopped paying off and the caller should give up the CPU.
    pub(crate) fn is_completed(&self) -> bool {
        self.step > Self::SPIN_LIMIT
    }
}
