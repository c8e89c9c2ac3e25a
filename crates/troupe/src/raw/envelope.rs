//! A message on its way to a target of type `T`, with the message's own type erased.
//!
//! A target handles many message types, yet its mailbox holds one type: `Envelope<T>`. The
//! envelope stores the message bytes inline (up to [`INLINE_BYTES`], aligned to 8) and one
//! function pointer, monomorphised for the pair (target, message), that knows how to move the
//! bytes back out as the real type and hand them to [`Deliver::deliver`], to
//! [`Deliver::undelivered`] when the target stops before handling it, or to
//! [`Deliver::discard`] when the message will not be delivered. Messages that are larger or
//! more aligned than the inline space are boxed, so they cost one allocation; ordinary messages
//! cost none. No `Any`, no downcast: the type is fixed when the envelope is built.
//!
//! [`RawEnvelope`] is the same thing with the target type erased too, so a message can wait in
//! a worker's hand-off slot (`run_next.rs`) beside the actor it was given to. Dropping any
//! envelope discards its payload (`Discard::Stopped`), so nothing leaks.
//!
//! # Invariant
//! The function pointer in an envelope was made for exactly the payload type whose bytes it
//! holds, and for exactly the target type it will be delivered to. `Envelope::<T>::new` is the
//! only constructor, so a typed envelope is always right; the raw form regains its type only
//! in `cell.rs`, which pairs it with the cell it was built for.

use std::marker::PhantomData;
use std::mem::{self, MaybeUninit};
use std::ptr;

use super::Target;

/// Bytes of message stored inline in an envelope (larger messages are boxed).
pub(crate) const INLINE_BYTES: usize = 24;
const INLINE_WORDS: usize = INLINE_BYTES / mem::size_of::<usize>();

/// Why a message is discarded rather than delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discard {
    /// The target stopped (or is stopping) before it took the message.
    Stopped,
    /// A bounded mailbox's overflow policy dropped it; the target runs on.
    Overflow,
    /// The target failed as it took it (a crash a simulation injected).
    Panicked,
}

/// Something that can be delivered to a target of type `T`: a told message, an asked message
/// with its reply slot.
pub(crate) trait Deliver<T: Target>: Send + 'static {
    /// Hands the message to the target.
    fn deliver(self, target: &mut T, ctx: &mut T::Ctx);
    /// The message will not be delivered (an asker is told why).
    fn discard(self, why: Discard);
    /// The target accepted the message but will not handle it (it stops, or a simulated crash
    /// took it), and may take it back: a told message goes to its handler's `undelivered`.
    /// Anything else is discarded for `why`.
    fn undelivered(self, target: &mut T, ctx: &mut T::Ctx, why: Discard)
    where
        Self: Sized,
    {
        let _ = (target, ctx);
        self.discard(why);
    }
    /// The type of the message it carries, for observers.
    fn message_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// What an envelope's `call` does with its payload.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// `Deliver::deliver` to the target.
    Deliver,
    /// `Deliver::undelivered` to the target, which will not handle the message (for this
    /// reason).
    Return(Discard),
    /// `Deliver::discard` for this reason (no target).
    Discard(Discard),
}

type Storage = [MaybeUninit<usize>; INLINE_WORDS];

/// Moves the payload out of `storage` and, as `Fate` says, delivers it or gives it back to the
/// target (`*mut T`) with its context (`*mut T::Ctx`), or discards it (the target pointers are
/// then null). The pointers are erased to `*mut ()` (thin pointers are ABI-compatible) so the
/// envelope can travel without its type.
type Call = unsafe fn(*mut Storage, *mut (), *mut (), Fate);

/// A message for some target, with both types erased. See the module note.
pub(crate) struct RawEnvelope {
    call: Call,
    storage: Storage,
}

// SAFETY: an envelope is only ever built from a payload that is `Send` (`Deliver: Send`).
unsafe impl Send for RawEnvelope {}

impl Drop for RawEnvelope {
    fn drop(&mut self) {
        // SAFETY: `call` matches the payload type; an envelope that is dropped was never
        // delivered (delivery forgets it), so the payload is still there to release, and a null
        // target asks for exactly that (the target type is then never used).
        unsafe {
            (self.call)(
                &mut self.storage,
                ptr::null_mut(),
                ptr::null_mut(),
                Fate::Discard(Discard::Stopped),
            )
        }
    }
}

/// A message for a target of type `T`. Transparent over `RawEnvelope`, so one stored in a
/// mailbox slot or a hand-off slot can be delivered in place.
#[repr(transparent)]
pub(crate) struct Envelope<T: Target> {
    raw: RawEnvelope,
    _target: PhantomData<fn(&mut T)>,
}

impl<T: Target> Envelope<T> {
    /// Wraps `payload`, inline if it fits, boxed otherwise.
    #[inline]
    pub(crate) fn new<P: Deliver<T>>(payload: P) -> Self {
        let mut storage: Storage = [MaybeUninit::uninit(); INLINE_WORDS];
        let call: Call = if fits_inline::<P>() {
            // SAFETY: `P` fits in `storage` in size and alignment (checked above); the bytes are
            // read back exactly once, as `P`, by `call_inline::<T, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<P>(), payload) };
            call_inline::<T, P>
        } else {
            let boxed: *mut P = Box::into_raw(Box::new(payload));
            // SAFETY: a pointer fits in the first word; read back once by `call_boxed::<T, P>`.
            unsafe { ptr::write(storage.as_mut_ptr().cast::<*mut P>(), boxed) };
            call_boxed::<T, P>
        };
        Envelope {
            raw: RawEnvelope { call, storage },
            _target: PhantomData,
        }
    }

    /// Delivers the message to `target`.
    pub(crate) fn deliver(self, target: &mut T, ctx: &mut T::Ctx) {
        self.settle(target, ctx, Fate::Deliver);
    }

    /// Gives the message back to `target`, which will not handle it, for `why` (see
    /// [`Deliver::undelivered`]).
    pub(crate) fn undelivered(self, target: &mut T, ctx: &mut T::Ctx, why: Discard) {
        self.settle(target, ctx, Fate::Return(why));
    }

    /// Delivers or gives back (`fate` is not `Discard`) to `target`.
    #[inline(always)]
    fn settle(self, target: &mut T, ctx: &mut T::Ctx, fate: Fate) {
        let target: *mut T = target;
        let ctx: *mut T::Ctx = ctx;
        let mut this = mem::ManuallyDrop::new(self.raw);
        // SAFETY: `call` matches the payload and, by the type of this envelope, the target,
        // whose pointers are valid and exclusive as `settle` requires; ManuallyDrop makes this
        // its only release.
        unsafe { (this.call)(&mut this.storage, target.cast(), ctx.cast(), fate) }
    }

    /// Discards the message for `why` (an asker learns the reason).
    pub(crate) fn discard(self, why: Discard) {
        let mut this = mem::ManuallyDrop::new(self.raw);
        // SAFETY: `call` matches the payload; ManuallyDrop makes this its only release.
        unsafe {
            (this.call)(
                &mut this.storage,
                ptr::null_mut(),
                ptr::null_mut(),
                Fate::Discard(why),
            )
        }
    }

    /// Erases the target type, to wait in a hand-off slot.
    #[inline]
    pub(super) fn into_raw(self) -> RawEnvelope {
        self.raw
    }

    /// Gives an erased envelope its target type back.
    ///
    /// # Safety
    /// `raw` must have been made by `Envelope::<T>::into_raw` for this same `T`.
    #[inline]
    pub(super) unsafe fn from_raw(raw: RawEnvelope) -> Self {
        Envelope {
            raw,
            _target: PhantomData,
        }
    }

    /// Takes the payload back out, undelivered (to return a message the target refused).
    ///
    /// # Safety
    /// `P` must be the exact type this envelope was built from with [`Envelope::new`].
    pub(super) unsafe fn into_payload<P: Deliver<T>>(self) -> P {
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

    /// Delivers the envelope stored at `at` without moving it first (it sits in a mailbox or
    /// hand-off slot). The payload is moved out before any user code runs, so the slot may be
    /// reused by the handler.
    ///
    /// # Safety
    /// `at` holds a live `Envelope<T>` that the caller owns and treats as moved-out from now on.
    #[inline]
    pub(super) unsafe fn deliver_in_place(at: *mut Self, target: &mut T, ctx: &mut T::Ctx) {
        // SAFETY: per the function contract; `Deliver` comes with the target.
        unsafe { Self::settle_in_place(at, target, ctx, Fate::Deliver) }
    }

    /// Gives the envelope stored at `at` back to `target`, in place, for `why` (see
    /// [`Deliver::undelivered`]).
    ///
    /// # Safety
    /// As for `deliver_in_place`.
    pub(super) unsafe fn undelivered_in_place(
        at: *mut Self,
        target: &mut T,
        ctx: &mut T::Ctx,
        why: Discard,
    ) {
        // SAFETY: per the function contract; `Return` comes with the target.
        unsafe { Self::settle_in_place(at, target, ctx, Fate::Return(why)) }
    }

    /// Discards the envelope stored at `at` in place.
    ///
    /// # Safety
    /// As for `deliver_in_place`.
    #[inline]
    pub(super) unsafe fn discard_in_place(at: *mut Self, why: Discard) {
        // SAFETY: per the function contract; `Discard` uses no target.
        unsafe {
            Self::call_in_place(at, ptr::null_mut(), ptr::null_mut(), Fate::Discard(why));
        }
    }

    /// `call_in_place` with a target.
    ///
    /// # Safety
    /// As for `deliver_in_place`.
    #[inline(always)]
    unsafe fn settle_in_place(at: *mut Self, target: &mut T, ctx: &mut T::Ctx, fate: Fate) {
        let target: *mut T = target;
        let ctx: *mut T::Ctx = ctx;
        // SAFETY: per the function contract; valid, exclusive target pointers.
        unsafe { Self::call_in_place(at, target.cast(), ctx.cast(), fate) }
    }

    /// Runs the envelope stored at `at` through its `call`, in place.
    ///
    /// # Safety
    /// As for `deliver_in_place`, with `target` and `ctx` as `settle` requires for `fate`.
    #[inline(always)]
    unsafe fn call_in_place(at: *mut Self, target: *mut (), ctx: *mut (), fate: Fate) {
        // SAFETY: per the function contract; `call` reads the payload out of `storage` before
        // anything else.
        unsafe {
            let raw = ptr::addr_of_mut!((*at).raw);
            ((*raw).call)(ptr::addr_of_mut!((*raw).storage), target, ctx, fate);
        }
    }
}

const fn fits_inline<P>() -> bool {
    mem::size_of::<P>() <= INLINE_BYTES && mem::align_of::<P>() <= mem::align_of::<usize>()
}

/// # Safety
/// `storage` holds a valid `P` written by `Envelope::new`, not yet read; `target` and `ctx` are
/// as `settle` requires for `fate`.
unsafe fn call_inline<T: Target, P: Deliver<T>>(
    storage: *mut Storage,
    target: *mut (),
    ctx: *mut (),
    fate: Fate,
) {
    // SAFETY: per the function contract; the payload is moved out once.
    let payload = unsafe { ptr::read(storage.cast::<P>()) };
    // SAFETY: per the function contract.
    unsafe { settle::<T, P>(payload, target, ctx, fate) }
}

/// # Safety
/// `storage` holds a `*mut P` from `Box::into_raw`, not yet read; pointers as for
/// `call_inline`.
unsafe fn call_boxed<T: Target, P: Deliver<T>>(
    storage: *mut Storage,
    target: *mut (),
    ctx: *mut (),
    fate: Fate,
) {
    // SAFETY: per the function contract; the box is reclaimed once.
    let payload = unsafe { *Box::from_raw(ptr::read(storage.cast::<*mut P>())) };
    // SAFETY: per the function contract.
    unsafe { settle::<T, P>(payload, target, ctx, fate) }
}

/// Does with `payload` what `fate` says.
///
/// # Safety
/// For `Fate::Deliver` and `Fate::Return`, `target` and `ctx` are valid, exclusive pointers to
/// a `T` and its `T::Ctx`; for `Fate::Discard` they are not used.
#[inline(always)]
unsafe fn settle<T: Target, P: Deliver<T>>(payload: P, target: *mut (), ctx: *mut (), fate: Fate) {
    match fate {
        // SAFETY: valid and exclusive, of these types (function contract).
        Fate::Deliver => payload.deliver(unsafe { &mut *target.cast::<T>() }, unsafe {
            &mut *ctx.cast::<T::Ctx>()
        }),
        // SAFETY: as above.
        Fate::Return(why) => payload.undelivered(
            unsafe { &mut *target.cast::<T>() },
            unsafe { &mut *ctx.cast::<T::Ctx>() },
            why,
        ),
        Fate::Discard(why) => payload.discard(why),
    }
}
