//! [`Forward`]: the callback `pipe_to` leaves in a reply slot, stored inline.
//!
//! `pipe_to`'s callback holds an address and a map function, usually 8 to 16 bytes. It is kept
//! in [`INLINE_BYTES`] of the slot (aligned to 8) with one function pointer, monomorphised for
//! the callback's type, that either runs it or drops it; a callback that is larger or more
//! aligned is boxed. So piping a reply allocates nothing in the common case. This is the
//! envelope's trick (`raw/envelope.rs`) for a `FnOnce` instead of a message.
//!
//! # Invariant
//! `call` was made for exactly the callback type whose bytes (or box) `storage` holds, and it is
//! called once: by [`Forward::run`] (which forgets the forward first) or by `drop`.

use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop, MaybeUninit};
use std::ptr;

use crate::error::AskError;

/// Bytes of callback stored inline (larger callbacks are boxed).
const INLINE_BYTES: usize = 24;
const INLINE_WORDS: usize = INLINE_BYTES / mem::size_of::<usize>();

type Storage = [MaybeUninit<usize>; INLINE_WORDS];

/// Runs the callback in `storage` with the result (`Some`), or drops it (`None`).
type Call<R> = unsafe fn(*mut Storage, Option<Result<R, AskError>>);

/// A `FnOnce(Result<R, AskError>) + Send` with its type erased, stored inline when it fits.
pub(crate) struct Forward<R> {
    call: Call<R>,
    storage: Storage,
    /// Not `Send` or `Sync` by itself (the fields would make it both, whatever the callback):
    /// `Send` is granted below, for callbacks that are.
    _not_auto: PhantomData<*mut ()>,
}

// SAFETY: a `Forward` is only built from a callback that is `Send` (`Forward::new`'s bound), and
// it gives no shared access to it (no `&self` method touches the callback), so it need not be
// `Sync`.
unsafe impl<R> Send for Forward<R> {}

const fn fits_inline<F>() -> bool {
    mem::size_of::<F>() <= INLINE_BYTES && mem::align_of::<F>() <= mem::align_of::<Storage>()
}

impl<R> Forward<R> {
    /// Wraps `callback`, inline if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<F>(callback: F) -> Self
    where
        F: FnOnce(Result<R, AskError>) + Send + 'static,
    {
        let mut storage: Storage = [MaybeUninit::uninit(); INLINE_WORDS];
        let call: Call<R> = if fits_inline::<F>() {
            // SAFETY: `F` fits in `storage` in size and alignment (checked above); the bytes are
            // read back once, as `F`, by `call_inline::<R, F>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<F>(), callback) };
            call_inline::<R, F>
        } else {
            let boxed: *mut F = Box::into_raw(Box::new(callback));
            // SAFETY: a pointer fits in the first word; read back once by `call_boxed::<R, F>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<*mut F>(), boxed) };
            call_boxed::<R, F>
        };
        Forward {
            call,
            storage,
            _not_auto: PhantomData,
        }
    }

    /// Runs the callback with `result`.
    pub(crate) fn run(self, result: Result<R, AskError>) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `call` matches the callback (the only constructor is `new`); ManuallyDrop
        // makes this its one call.
        unsafe { (this.call)(&mut this.storage, Some(result)) }
    }
}

impl<R> Drop for Forward<R> {
    fn drop(&mut self) {
        // SAFETY: `call` matches the callback; a forward that is dropped was never run (`run`
        // forgets it), so the callback is still there to drop.
        unsafe { (self.call)(&mut self.storage, None) }
    }
}

/// # Safety
/// `storage` holds an `F` written by `Forward::new`, not yet read.
unsafe fn call_inline<R, F: FnOnce(Result<R, AskError>)>(
    storage: *mut Storage,
    result: Option<Result<R, AskError>>,
) {
    // SAFETY: per the function contract; the bytes are read once and not used again.
    let callback = unsafe { ptr::read(storage.cast::<F>()) };
    match result {
        Some(result) => callback(result),
        None => drop(callback),
    }
}

/// # Safety
/// `storage` holds a `*mut F` from `Box::into_raw`, written by `Forward::new`, not yet read.
unsafe fn call_boxed<R, F: FnOnce(Result<R, AskError>)>(
    storage: *mut Storage,
    result: Option<Result<R, AskError>>,
) {
    // SAFETY: per the function contract; the box is reclaimed once.
    let callback = unsafe { Box::from_raw(ptr::read(storage.cast::<*mut F>())) };
    match result {
        Some(result) => callback(result),
        None => drop(callback),
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Counts its drops.
    struct Counted(Arc<Mutex<u32>>);
    impl Drop for Counted {
        fn drop(&mut self) {
            *self.0.lock().unwrap() += 1;
        }
    }

    #[test]
    fn small_and_large_callbacks_run_or_drop_once() {
        let drops = Arc::new(Mutex::new(0));
        let ran = Arc::new(Mutex::new(Vec::new()));
        // Inline: an Arc and a Counted (16 bytes).
        let (seen, counted) = (ran.clone(), Counted(drops.clone()));
        assert!(fits_inline::<(Arc<Mutex<Vec<u32>>>, Counted)>());
        Forward::new(move |r: Result<u32, AskError>| {
            let _keep = &counted;
            seen.lock().unwrap().push(r.unwrap());
        })
        .run(Ok(1));
        // Boxed: 64 bytes more.
        let (seen, counted, big) = (ran.clone(), Counted(drops.clone()), [7u64; 8]);
        Forward::new(move |r: Result<u32, AskError>| {
            let _keep = &counted;
            seen.lock().unwrap().push(r.unwrap() + big[0] as u32);
        })
        .run(Ok(1));
        // Dropped unrun, inline and boxed.
        let counted = Counted(drops.clone());
        drop(Forward::new(move |_: Result<u32, AskError>| {
            let _keep = &counted;
        }));
        let (counted, big) = (Counted(drops.clone()), [0u64; 8]);
        drop(Forward::new(move |_: Result<u32, AskError>| {
            let _keep = (&counted, big);
        }));
        assert_eq!(*ran.lock().unwrap(), [1, 8]);
        assert_eq!(*drops.lock().unwrap(), 4);
    }
}
