//! A message on its way to an actor of type `A`, with the message's own type erased.
//!
//! An actor can handle many message types, yet its mailbox holds one type: `Envelope<A>`.
//! The envelope stores the message bytes inline (up to [`INLINE_BYTES`], aligned to 8) and one
//! function pointer, monomorphised for the pair (actor, message), that knows how to move the
//! bytes back out as the real type and hand them to `Handler<M>::handle` (or drop them when the
//! actor is gone). Messages that are larger or more aligned than the inline space are boxed,
//! so they cost one allocation; ordinary messages cost none. No `Any`, no downcast: the type is
//! fixed when the envelope is built, where the compiler checks `A: Handler<M>`.
//!
//! This module holds all the `unsafe` of type erasure, so its invariant is in one place: the
//! function pointer in an envelope was made for exactly the type whose bytes it holds.

use std::mem::{self, MaybeUninit};
use std::ptr;

use crate::actor::{Actor, Context};

/// Bytes of message stored inline in an envelope (larger messages are boxed).
pub(crate) const INLINE_BYTES: usize = 24;
const INLINE_WORDS: usize = INLINE_BYTES / mem::size_of::<usize>();

/// Something that can be delivered to an actor of type `A`: a told message, an asked message
/// with its reply slot. Dropping it undelivered means the actor is gone (and fails any asker).
pub(crate) trait Deliver<A: Actor>: Send + 'static {
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>);
}

type Storage = [MaybeUninit<usize>; INLINE_WORDS];

/// Moves the payload out of `storage` and delivers it to `actor`, or, when `actor` is null,
/// drops it.
type Call<A> = unsafe fn(*mut Storage, *mut A, *mut Context<A>);

/// A type-erased message for actor `A`. See the module note.
pub(crate) struct Envelope<A: Actor> {
    call: Call<A>,
    storage: Storage,
}

// SAFETY: an envelope is only ever built from a payload that is `Send` (`Deliver: Send`).
unsafe impl<A: Actor> Send for Envelope<A> {}

impl<A: Actor> Envelope<A> {
    /// Wraps `payload`, inline if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<P: Deliver<A>>(payload: P) -> Self {
        let mut storage: Storage = [MaybeUninit::uninit(); INLINE_WORDS];
        if fits_inline::<P>() {
            // SAFETY: `P` fits in `storage` in size and alignment (checked above); the bytes are
            // read back exactly once, as `P`, by `call_inline::<A, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<P>(), payload) };
            Envelope {
                call: call_inline::<A, P>,
                storage,
            }
        } else {
            let boxed: *mut P = Box::into_raw(Box::new(payload));
            // SAFETY: a pointer fits in the first word; read back once by `call_boxed::<A, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<*mut P>(), boxed) };
            Envelope {
                call: call_boxed::<A, P>,
                storage,
            }
        }
    }

    /// Hands the message to the actor's handler.
    #[inline]
    pub(crate) fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        let mut this = mem::ManuallyDrop::new(self);
        // SAFETY: `call` matches the payload type (module invariant); ManuallyDrop ensures the
        // payload is consumed exactly once, here; the pointers come from live references.
        unsafe { (this.call)(&mut this.storage, actor, ctx) }
    }
}

impl<A: Actor> Envelope<A> {
    /// Takes the payload back out, undelivered (e.g. to return a message the actor refused).
    ///
    /// # Safety
    /// `P` must be the exact type this envelope was built from with [`Envelope::new`].
    pub(crate) unsafe fn into_payload<P: Deliver<A>>(self) -> P {
        let this = mem::ManuallyDrop::new(self);
        let storage = this.storage.as_ptr();
        if fits_inline::<P>() {
            // SAFETY: built inline from a `P` (caller's contract); read once, never dropped again.
            unsafe { ptr::read(storage.cast::<P>()) }
        } else {
            // SAFETY: built boxed from a `P` (caller's contract); the box is reclaimed once.
            unsafe { *Box::from_raw(ptr::read(storage.cast::<*mut P>())) }
        }
    }
}

impl<A: Actor> Drop for Envelope<A> {
    fn drop(&mut self) {
        // SAFETY: `call` matches the payload type, and an envelope that is dropped was never
        // delivered (`deliver` forgets it), so the payload is still there to release; a null
        // actor asks for exactly that.
        unsafe { (self.call)(&mut self.storage, ptr::null_mut(), ptr::null_mut()) }
    }
}

const fn fits_inline<P>() -> bool {
    mem::size_of::<P>() <= INLINE_BYTES && mem::align_of::<P>() <= mem::align_of::<usize>()
}

/// # Safety
/// `storage` holds a valid `P` written by `Envelope::new`, not yet read; `actor` and `ctx` are
/// both null or both valid and exclusive.
unsafe fn call_inline<A: Actor, P: Deliver<A>>(
    storage: *mut Storage,
    actor: *mut A,
    ctx: *mut Context<A>,
) {
    // SAFETY: per the function contract; the payload is moved out once.
    let payload = unsafe { ptr::read(storage.cast::<P>()) };
    if actor.is_null() {
        drop(payload);
    } else {
        // SAFETY: non-null means valid and exclusive (function contract).
        payload.deliver(unsafe { &mut *actor }, unsafe { &mut *ctx });
    }
}

/// # Safety
/// `storage` holds a `*mut P` from `Box::into_raw`, not yet read; pointers as for
/// `call_inline`.
unsafe fn call_boxed<A: Actor, P: Deliver<A>>(
    storage: *mut Storage,
    actor: *mut A,
    ctx: *mut Context<A>,
) {
    // SAFETY: per the function contract; the box is reclaimed once.
    let payload = unsafe { *Box::from_raw(ptr::read(storage.cast::<*mut P>())) };
    if actor.is_null() {
        drop(payload);
    } else {
        // SAFETY: non-null means valid and exclusive (function contract).
        payload.deliver(unsafe { &mut *actor }, unsafe { &mut *ctx });
    }
}
