//! The one door to atomics, cells and threads.
//!
//! Under `cfg(troupe_loom)` everything here comes from the `loom` model checker, so the lock-free
//! parts (mailbox, signal stack, hand-off slot, turn end, bounded admission, reply slot, lazy
//! boxes, parking) run through every interleaving loom explores; otherwise it is `std`.
//! Every atomic in the crate is imported from here: `clippy.toml` forbids the `std` atomic
//! types elsewhere, so no atomic can escape the model by accident. (A `static` cannot hold a
//! loom atomic, whose constructor is not `const`; the two statics that count ids use `std`'s,
//! with an `allow` and a note saying why they need no model.)

#![allow(clippy::disallowed_types)]

#[cfg(troupe_loom)]
pub(crate) use loom::thread_local;
#[cfg(troupe_loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint,
    sync::{
        atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering},
        Arc, Mutex, MutexGuard,
    },
    thread,
};

#[cfg(not(troupe_loom))]
pub(crate) use std::{
    hint,
    sync::{atomic::Ordering, Mutex, MutexGuard},
    thread, thread_local,
};

/// Parks the calling thread for at most `timeout` (it may return early, as `std`'s may). Loom
/// has no clock: there it yields, which is a legal early return, so a model never sleeps.
pub(crate) fn park_timeout(timeout: std::time::Duration) {
    #[cfg(troupe_loom)]
    {
        let _ = timeout;
        thread::yield_now();
    }
    #[cfg(not(troupe_loom))]
    thread::park_timeout(timeout);
}

/// Keeps the compiler from moving memory accesses across this point; the processor may still
/// (the fast side of the lopsided wake-up handshake, `scheduler/idle.rs`, whose other side
/// orders the processors). `std`'s under loom too: loom runs the symmetric handshake only.
#[inline(always)]
pub(crate) fn compiler_fence() {
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(not(troupe_loom))]
pub(crate) use self::std_atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize};

/// `std`'s atomics under the names the crate uses. They are thin wrappers (all `#[inline]`,
/// `repr(transparent)`) rather than re-exports so that the type seen outside this file is
/// `crate::loom::Atomic*`, which is what lets `clippy.toml` forbid `std::sync::atomic::*`
/// everywhere else; only the operations the crate uses are forwarded.
#[cfg(not(troupe_loom))]
mod std_atomic {
    use std::sync::atomic::{self, Ordering};

    macro_rules! atomic_int {
        ($name:ident, $int:ty) => {
            #[repr(transparent)]
            #[derive(Debug, Default)]
            pub(crate) struct $name(atomic::$name);

            #[allow(dead_code)] // not every width uses every operation
            impl $name {
                pub(crate) const fn new(value: $int) -> Self {
                    Self(atomic::$name::new(value))
                }
                #[inline(always)]
                pub(crate) fn load(&self, order: Ordering) -> $int {
                    self.0.load(order)
                }
                #[inline(always)]
                pub(crate) fn store(&self, value: $int, order: Ordering) {
                    self.0.store(value, order)
                }
                #[inline(always)]
                pub(crate) fn swap(&self, value: $int, order: Ordering) -> $int {
                    self.0.swap(value, order)
                }
                #[inline(always)]
                pub(crate) fn compare_exchange(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.0.compare_exchange(current, new, success, failure)
                }
                #[inline(always)]
                pub(crate) fn compare_exchange_weak(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.0.compare_exchange_weak(current, new, success, failure)
                }
                #[inline(always)]
                pub(crate) fn fetch_add(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_add(value, order)
                }
                #[inline(always)]
                pub(crate) fn fetch_sub(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_sub(value, order)
                }
                #[inline(always)]
                pub(crate) fn fetch_or(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_or(value, order)
                }
                #[inline(always)]
                pub(crate) fn fetch_and(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_and(value, order)
                }
                #[inline(always)]
                pub(crate) fn fetch_max(&self, value: $int, order: Ordering) -> $int {
                    self.0.fetch_max(value, order)
                }
                #[inline(always)]
                pub(crate) fn fetch_update(
                    &self,
                    set: Ordering,
                    fetch: Ordering,
                    f: impl FnMut($int) -> Option<$int>,
                ) -> Result<$int, $int> {
                    self.0.fetch_update(set, fetch, f)
                }
            }
        };
    }

    atomic_int!(AtomicU8, u8);
    atomic_int!(AtomicU64, u64);
    atomic_int!(AtomicUsize, usize);

    #[repr(transparent)]
    #[derive(Debug, Default)]
    pub(crate) struct AtomicBool(atomic::AtomicBool);

    impl AtomicBool {
        pub(crate) const fn new(value: bool) -> Self {
            Self(atomic::AtomicBool::new(value))
        }
        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> bool {
            self.0.load(order)
        }
        #[inline(always)]
        pub(crate) fn store(&self, value: bool, order: Ordering) {
            self.0.store(value, order)
        }
    }

    #[repr(transparent)]
    #[derive(Debug)]
    pub(crate) struct AtomicPtr<T>(atomic::AtomicPtr<T>);

    impl<T> AtomicPtr<T> {
        pub(crate) const fn new(value: *mut T) -> Self {
            Self(atomic::AtomicPtr::new(value))
        }
        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> *mut T {
            self.0.load(order)
        }
        #[inline(always)]
        pub(crate) fn store(&self, value: *mut T, order: Ordering) {
            self.0.store(value, order)
        }
        #[inline(always)]
        pub(crate) fn swap(&self, value: *mut T, order: Ordering) -> *mut T {
            self.0.swap(value, order)
        }
        #[inline(always)]
        pub(crate) fn compare_exchange(
            &self,
            current: *mut T,
            new: *mut T,
            success: Ordering,
            failure: Ordering,
        ) -> Result<*mut T, *mut T> {
            self.0.compare_exchange(current, new, success, failure)
        }
        #[inline(always)]
        pub(crate) fn compare_exchange_weak(
            &self,
            current: *mut T,
            new: *mut T,
            success: Ordering,
            failure: Ordering,
        ) -> Result<*mut T, *mut T> {
            self.0.compare_exchange_weak(current, new, success, failure)
        }
    }
}

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
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
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
