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
//! [`RawEnvelope`] is the same thing with the actor type erased too, so a message can travel
//! with its actor through the scheduler (the hand-off of a message to an idle actor, see
//! `cell.rs`). It can still be dropped safely: dropping calls the function pointer with no
//! actor, which only releases the payload.
//!
//! This module holds all the `unsafe` of type erasure, so its invariant is in one place: the
//! function pointer in an envelope was made for exactly the payload type whose bytes it holds,
//! and for exactly the actor type it will be delivered to.

use std::marker::PhantomData;
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

/// Moves the payload out of `storage` and delivers it to the actor (`*mut A`) with its context
/// (`*mut Context<A>`), or, when the actor pointer is null, drops it. The pointers are erased to
/// `*mut ()` (thin pointers are ABI-compatible) so the envelope can travel without its type.
type Call = unsafe fn(*mut Storage, *mut (), *mut ());

/// A message for some actor, with both types erased. See the module note.
pub(crate) struct RawEnvelope {
    call: Call,
    storage: Storage,
}

// SAFETY: an envelope is only ever built from a payload that is `Send` (`Deliver: Send`).
unsafe impl Send for RawEnvelope {}

impl RawEnvelope {
    /// Hands the message to `actor`'s handler.
    ///
    /// # Safety
    /// This envelope must have been built by `Envelope::<A>::new` for this same `A`.
    #[inline]
    pub(crate) unsafe fn deliver<A: Actor>(self, actor: &mut A, ctx: &mut Context<A>) {
        let mut this = mem::ManuallyDrop::new(self);
        let actor: *mut A = actor;
        let ctx: *mut Context<A> = ctx;
        // SAFETY: `call` matches the payload type and, by the caller's contract, the actor type;
        // ManuallyDrop ensures the payload is consumed exactly once, here.
        unsafe { (this.call)(&mut this.storage, actor.cast(), ctx.cast()) }
    }
}

impl RawEnvelope {
    /// Delivers the message stored at `at` without moving the envelope first (it may sit in a
    /// worker's hand-off slot); the slot is empty afterwards (its payload is moved out before
    /// the handler runs, so the handler may refill the slot).
    ///
    /// # Safety
    /// `at` holds a live envelope built by `Envelope::<A>::new`, which the caller owns and will
    /// treat as moved-out from now on.
    #[inline]
    pub(crate) unsafe fn deliver_in_place<A: Actor>(
        at: *mut RawEnvelope,
        actor: &mut A,
        ctx: &mut Context<A>,
    ) {
        let actor: *mut A = actor;
        let ctx: *mut Context<A> = ctx;
        // SAFETY: per the function contract; `call` reads the payload out of `storage` before
        // anything else.
        unsafe {
            let call = (*at).call;
            call(&mut (*at).storage, actor.cast(), ctx.cast());
        }
    }
}

impl Drop for RawEnvelope {
    fn drop(&mut self) {
        // SAFETY: `call` matches the payload type; an envelope that is dropped was never
        // delivered (`deliver` forgets it), so the payload is still there to release, and a
        // null actor asks for exactly that (the actor type is then never used).
        unsafe { (self.call)(&mut self.storage, ptr::null_mut(), ptr::null_mut()) }
    }
}

/// A message for an actor of type `A`. Transparent over `RawEnvelope`, so one stored in a
/// mailbox slot can be delivered in place with `RawEnvelope::deliver_in_place`.
#[repr(transparent)]
pub(crate) struct Envelope<A: Actor> {
    raw: RawEnvelope,
    _actor: PhantomData<fn(&mut A)>,
}

impl<A: Actor> Envelope<A> {
    /// Wraps `payload`, inline if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<P: Deliver<A>>(payload: P) -> Self {
        let mut storage: Storage = [MaybeUninit::uninit(); INLINE_WORDS];
        let call: Call = if fits_inline::<P>() {
            // SAFETY: `P` fits in `storage` in size and alignment (checked above); the bytes are
            // read back exactly once, as `P`, by `call_inline::<A, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<P>(), payload) };
            call_inline::<A, P>
        } else {
            let boxed: *mut P = Box::into_raw(Box::new(payload));
            // SAFETY: a pointer fits in the first word; read back once by `call_boxed::<A, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<*mut P>(), boxed) };
            call_boxed::<A, P>
        };
        Envelope {
            raw: RawEnvelope { call, storage },
            _actor: PhantomData,
        }
    }

    /// Erases the actor type (to travel through the scheduler with its actor).
    #[inline]
    pub(crate) fn into_raw(self) -> RawEnvelope {
        self.raw
    }

    /// Takes the payload back out, undelivered (e.g. to return a message the actor refused).
    ///
    /// # Safety
    /// `P` must be the exact type this envelope was built from with [`Envelope::new`].
    pub(crate) unsafe fn into_payload<P: Deliver<A>>(self) -> P {
        let this = mem::ManuallyDrop::new(self.raw);
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

const fn fits_inline<P>() -> bool {
    mem::size_of::<P>() <= INLINE_BYTES && mem::align_of::<P>() <= mem::align_of::<usize>()
}

/// # Safety
/// `storage` holds a valid `P` written by `Envelope::new`, not yet read; `actor` and `ctx` are
/// both null, or both valid, exclusive pointers to an `A` and its `Context<A>`.
unsafe fn call_inline<A: Actor, P: Deliver<A>>(
    storage: *mut Storage,
    actor: *mut (),
    ctx: *mut (),
) {
    // SAFETY: per the function contract; the payload is moved out once.
    let payload = unsafe { ptr::read(storage.cast::<P>()) };
    if actor.is_null() {
        drop(payload);
    } else {
        // SAFETY: non-null means valid and exclusive, of these types (function contract).
        payload.deliver(unsafe { &mut *actor.cast::<A>() }, unsafe {
            &mut *ctx.cast::<Context<A>>()
        });
    }
}

/// # Safety
/// `storage` holds a `*mut P` from `Box::into_raw`, not yet read; pointers as for
/// `call_inline`.
unsafe fn call_boxed<A: Actor, P: Deliver<A>>(storage: *mut Storage, actor: *mut (), ctx: *mut ()) {
    // SAFETY: per the function contract; the box is reclaimed once.
    let payload = unsafe { *Box::from_raw(ptr::read(storage.cast::<*mut P>())) };
    if actor.is_null() {
        drop(payload);
    } else {
        // SAFETY: non-null means valid and exclusive, of these types (function contract).
        payload.deliver(unsafe { &mut *actor.cast::<A>() }, unsafe {
            &mut *ctx.cast::<Context<A>>()
        });
    }
}
