//! The reply slot: one atomic state word, the value, and who waits for it. No lock.
//!
//! A slot is shared by counted references, each a move-only right:
//! - a [`Filler`] may fill it once (the `ReplySender` holds one; an `ask_timeout` timer holds
//!   a second, so the first fill wins);
//! - the [`Taker`] (inside the `Ask`) may take the value once, register one waiter (a `Waker`
//!   for `.await`, its thread for `wait`, a [`Forward`] for `pipe_to`), or close the slot (the
//!   `Ask` dropped, or `wait_timeout` gave up).
//!
//! The last reference to go resets the slot and hands it to the recycler it was made with
//! (`shelf.rs`), so an ask allocates nothing once the shelves are warm. A timer's reference is
//! counted like the others: a slot is recycled only after its timer fired or was cancelled,
//! so a late timer can never fill a later ask (see [`Taker::timer_filler`]).
//!
//! # State word
//! ```text
//! bit 0  CLAIMED    a filler owns the value cell (set once, by the first fill)
//! bit 1  VALUE_SET  the value is written (set once, only after CLAIMED, by the claimer)
//! bit 2  WAITER_SET the taker's waiter is in the waiter cell
//! bit 3  CLOSED     the taker has gone without the value (set once)
//! 4..    references (fillers + taker), 0 only while the slot is free
//! ```
//! Legal combinations: VALUE_SET implies CLAIMED. WAITER_SET changes only while neither
//! VALUE_SET nor CLOSED is set (the taker sets and clears it); after either, it is frozen.
//!
//! # Who may touch which cell
//! - *value*: written by the claiming filler before it sets VALUE_SET (Release); read (moved out)
//!   exactly once afterwards: by the taker after seeing VALUE_SET (Acquire); or, if the taker
//!   closed first (CLOSED seen by the filler's VALUE_SET swap), by the filler; or, if the taker
//!   closed after (VALUE_SET seen by the close swap), by the closing taker; or, for a forward,
//!   by the filler that runs it. A filler that finds CLAIMED or CLOSED set drops its value at
//!   once, on its own thread, without writing.
//! - *waiter*: owned by the taker while WAITER_SET is clear. The taker writes it, then sets
//!   WAITER_SET (Release); to replace it, it clears WAITER_SET with a compare-and-swap that
//!   fails once VALUE_SET is set. The filler reads it only if its VALUE_SET swap saw WAITER_SET
//!   set and CLOSED clear: it wakes the waker or unparks the thread by reference (the taker may
//!   read the same waker to compare it, never write it), or moves a forward out (the taker is
//!   gone then). What a filler left in the cell is dropped by the reset.
//! - *timer*: the taker's (`ask_timeout` writes it before any waiter is registered); handed to
//!   the filler with a forward. Whoever consumes the value cancels the timer.
//! - The reset runs on the last reference's release (AcqRel), after every other access.

use std::mem::{self, MaybeUninit};
use std::ptr::NonNull;
use std::task::Waker;
use std::time::Instant;

use super::forward::Forward;
use crate::error::AskError;
use crate::id::ActorId;
use crate::loom::{self, thread, AtomicUsize, Ordering, UnsafeCell};
#[cfg(not(troupe_loom))]
use crate::role;
use crate::timer::{TimerHandle, TimerId};

const CLAIMED: usize = 1 << 0;
const VALUE_SET: usize = 1 << 1;
const WAITER_SET: usize = 1 << 2;
const CLOSED: usize = 1 << 3;
/// One reference, in the count above the flags.
const REF_ONE: usize = 1 << 4;
const FLAGS: usize = REF_ONE - 1;

/// How long [`Taker::wait`] and [`Taker::wait_until`] look for a reply before parking: spin
/// hints with a look at the state after each (20-40 µs in all, as a hint takes 15-30 ns on
/// current x86 cores, plus the yields of [`SPINS_BEFORE_YIELD`]). A reply from an actor on the
/// pool often comes within that, and parking costs the asking thread a context switch each
/// way. The look is a load of a line that stays in this core's cache until the filler writes
/// it, so looking after every hint costs nothing, and the reply is seen within one hint
/// (looking after every 32 added 0.4 µs to each round trip on average).
#[cfg(not(troupe_loom))]
const SPINS: u32 = 1280;

/// Looks of pure spinning before the spin gives its core away now and then (a `yield_now`
/// every [`YIELD_EVERY`] looks): about 2 µs, where a reply from a running pool comes.
///
/// Why: with more runnable threads than cores (two workers and the asking thread on two
/// cores), the worker that must run the request can be the one sharing this thread's core,
/// runnable but not running. A spin that never yields then holds it off for the whole spin
/// (30-40 µs), every round trip. Measured with `troupe-bench --repeat 10 counter
/// --per-producer 300` (three asks a repetition): processes that settled so ran at 5-6 M
/// messages/s, 22-25 M with the yields; processes where the worker had a core of its own
/// ran at about 100 M either way.
#[cfg(not(troupe_loom))]
const SPINS_BEFORE_YIELD: u32 = 64;

/// Looks between two yields once [`SPINS_BEFORE_YIELD`] have passed.
#[cfg(not(troupe_loom))]
const YIELD_EVERY: u32 = 16;

/// The longest a spin goes on yielding before the thread parks. A thread that yields stays
/// runnable: beside busy threads each yield can last a time slice, and a waiter that kept
/// yielding for its 1,280 looks took the cores' time from the workers it waited for (fork-join
/// beside two busy threads, `--contention 2 fanout --actors 60`: a median of 21.4 M against
/// 27.0 M without yields, alternated eight times). Parked, it takes none.
#[cfg(not(troupe_loom))]
const YIELDING_FOR: std::time::Duration = std::time::Duration::from_micros(30);

/// Who to tell when the value comes.
enum Waiter<R> {
    Empty,
    /// A task awaiting the `Ask`.
    Waker(Waker),
    /// A thread in `wait` / `wait_timeout`.
    Thread(thread::Thread),
    /// `pipe_to`: run by the filler, with the value.
    Forward(Forward<R>),
}

/// The timer an `ask_timeout` armed, to cancel when the wait ends.
type Timer = Option<(TimerHandle, TimerId)>;

pub(crate) struct Slot<R> {
    state: AtomicUsize,
    value: UnsafeCell<MaybeUninit<Result<R, AskError>>>,
    waiter: UnsafeCell<Waiter<R>>,
    timer: UnsafeCell<Timer>,
    /// Where the slot goes when its last reference is released (the cache of its reply type).
    recycle: fn(FreeSlot<R>),
}

/// A slot nobody references, reset: what the cache keeps.
pub(crate) struct FreeSlot<R>(Box<Slot<R>>);

// SAFETY: a free slot has no other reference, an empty value and waiter cell and no timer: moving
// it to another thread moves nothing shared.
unsafe impl<R: Send> Send for FreeSlot<R> {}

impl<R: Send + 'static> crate::shelf::Shelved for FreeSlot<R> {
    const LOCAL: usize = 32;
    const SPARE: usize = 1024;
    const LIST: crate::shelf::List = crate::shelf::List::ReplySlots;
}

/// A filler and the taker of a fresh slot, taken from `cache` or allocated with `recycle` as
/// its way back.
pub(crate) fn pair<R>(
    cached: Option<FreeSlot<R>>,
    recycle: fn(FreeSlot<R>),
) -> (Filler<R>, Taker<R>) {
    let slot = match cached {
        Some(FreeSlot(slot)) => slot,
        None => Box::new(Slot {
            state: AtomicUsize::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            waiter: UnsafeCell::new(Waiter::Empty),
            timer: UnsafeCell::new(None),
            recycle,
        }),
    };
    // Relaxed: nobody else has the slot yet; it reaches the filler inside the request, whose
    // send publishes it.
    slot.state.store(2 * REF_ONE, Ordering::Relaxed);
    let slot = NonNull::from(Box::leak(slot));
    (Filler { slot }, Taker { slot })
}

/// Gives up `count` references to `slot`; the last one resets the slot and recycles it.
///
/// # Safety
/// The caller holds `count` counted references to `slot` and never uses them again.
unsafe fn release<R>(slot: NonNull<Slot<R>>, count: usize) {
    // SAFETY: the caller's references keep the slot alive until this swap.
    let state = unsafe { &slot.as_ref().state };
    // Release: this holder's accesses to the cells happen before the reset. Acquire (for the
    // last holder): pairs with every other holder's Release here, so the reset comes after them.
    let prev = state.fetch_sub(count * REF_ONE, Ordering::AcqRel);
    debug_assert!(prev / REF_ONE >= count, "a reply slot released too often");
    if prev & !FLAGS != count * REF_ONE {
        return;
    }
    // SAFETY: that was the last reference; the slot came from `Box::leak` in `pair`.
    let slot = unsafe { Box::from_raw(slot.as_ptr()) };
    // What a filler left to wake (a waker, a thread) goes now; the value was moved out by
    // whoever consumed it (module note), and the timer was taken by whoever ended the wait.
    slot.waiter.with_mut(|waiter| {
        // SAFETY: no reference is left, so nothing else accesses the cell.
        unsafe { *waiter = Waiter::Empty }
    });
    let recycle = slot.recycle;
    recycle(FreeSlot(slot));
}

fn cancel(timer: Timer) {
    if let Some((timers, id)) = timer {
        timers.cancel(id);
    }
}

/// The right to fill a slot once. Dropping it unused only releases it (the `ReplySender`
/// fills with an error before it drops).
pub(crate) struct Filler<R> {
    slot: NonNull<Slot<R>>,
}

// SAFETY: a filler moves the value in from whatever thread fills (`R: Send`); its cells are
// reached only through the protocol in the module note.
unsafe impl<R: Send> Send for Filler<R> {}
// SAFETY: `&Filler` only reads the state word (`is_closed`).
unsafe impl<R: Send> Sync for Filler<R> {}

impl<R> Drop for Filler<R> {
    fn drop(&mut self) {
        // SAFETY: this filler's reference, given up as it goes.
        unsafe { release(self.slot, 1) }
    }
}

impl<R> Filler<R> {
    fn slot(&self) -> &Slot<R> {
        // SAFETY: this counted reference keeps the slot allocated and not recycled.
        unsafe { self.slot.as_ref() }
    }

    /// Gives up the filler without releasing its reference (the caller releases it).
    fn into_raw(self) -> NonNull<Slot<R>> {
        let slot = self.slot;
        mem::forget(self);
        slot
    }

    /// True once the result can no longer reach anyone: filled already (a timeout), or the
    /// taker has gone.
    pub(crate) fn is_closed(&self) -> bool {
        // Relaxed: a hint for the replier; nothing is read on its strength.
        self.slot().state.load(Ordering::Relaxed) & (CLAIMED | CLOSED) != 0
    }

    /// Fills the slot unless it was filled already (the first fill wins) or the taker has gone
    /// (then `result` is dropped here, at once); wakes or forwards to whoever waits.
    pub(crate) fn fill(self, result: Result<R, AskError>) {
        let ptr = self.into_raw();
        // SAFETY: our reference, released below.
        let slot = unsafe { ptr.as_ref() };
        // Relaxed: the claim only decides which filler writes. The value cell is free for it:
        // nothing reads it before VALUE_SET.
        let prev = slot.state.fetch_or(CLAIMED, Ordering::Relaxed);
        if prev & (CLAIMED | CLOSED) != 0 {
            // SAFETY: our reference, not used again.
            unsafe { release(ptr, 1) };
            drop(result);
            return;
        }
        slot.value.with_mut(|value| {
            // SAFETY: CLAIMED is ours: no one else writes the cell, and no one reads it before
            // the VALUE_SET below.
            unsafe { (*value).write(result) };
        });
        // Release: publishes the value to the taker's Acquire of VALUE_SET. Acquire: pairs with
        // the taker's Release of WAITER_SET, so its waiter (and timer) are visible here.
        let prev = slot.state.fetch_or(VALUE_SET, Ordering::AcqRel);
        if prev & CLOSED != 0 {
            // The taker left between the claim and now: it will never read the value.
            let result = slot.value.with_mut(|value| {
                // SAFETY: written just above; the taker closed without it (module note).
                unsafe { (*value).assume_init_read() }
            });
            // SAFETY: our reference, not used again.
            unsafe { release(ptr, 1) };
            drop(result);
            return;
        }
        if prev & WAITER_SET == 0 {
            // SAFETY: our reference, not used again.
            unsafe { release(ptr, 1) };
            return;
        }
        let is_forward = slot.waiter.with(|waiter| {
            // SAFETY: WAITER_SET was set when VALUE_SET went in, so the taker has published its
            // waiter and will not write the cell again; reading it (and waking by reference,
            // while the taker may compare the same waker) is shared access.
            match unsafe { &*waiter } {
                Waiter::Waker(waker) => {
                    waker.wake_by_ref();
                    false
                }
                Waiter::Thread(thread) => {
                    thread.unpark();
                    false
                }
                Waiter::Forward(_) => true,
                Waiter::Empty => unreachable!("WAITER_SET with no waiter"),
            }
        });
        if !is_forward {
            // SAFETY: our reference, not used again.
            unsafe { release(ptr, 1) };
            return;
        }
        // `pipe_to`: the taker handed us its reference with the forward, and is gone.
        let (forward, timer, result) = slot.waiter.with_mut(|waiter| {
            // SAFETY: the taker registered a forward and gave up the slot, so the cells are
            // ours alone; the value was written above.
            unsafe {
                let Waiter::Forward(forward) = mem::replace(&mut *waiter, Waiter::Empty) else {
                    unreachable!("checked just above")
                };
                let timer = slot.timer.with_mut(|timer| (*timer).take());
                let result = slot.value.with_mut(|value| (*value).assume_init_read());
                (forward, timer, result)
            }
        });
        // SAFETY: our reference and the taker's, not used again.
        unsafe { release(ptr, 2) };
        cancel(timer);
        forward.run(result);
    }
}

/// The right to take a slot's value once, to wait for it, or to give it up (dropping the taker
/// closes the slot: a value already there is dropped now, a later one by its filler).
pub(crate) struct Taker<R> {
    slot: NonNull<Slot<R>>,
}

// SAFETY: the taker moves the value out on whatever thread takes it (`R: Send`); the waiters it
// stores (wakers, threads, forwards) are `Send`.
unsafe impl<R: Send> Send for Taker<R> {}
// SAFETY: `&Taker` only reads the state word and adds a reference (`is_filled`,
// `timer_filler`); every access to a cell needs `&mut` or the taker by value.
unsafe impl<R: Send> Sync for Taker<R> {}

impl<R> Drop for Taker<R> {
    fn drop(&mut self) {
        // SAFETY: this taker's reference, given up as it goes.
        drop(unsafe { close(self.slot) });
    }
}

/// Closes the slot for its taker: returns the value if it came already (else its filler will
/// drop it), cancels the timer, releases the taker's reference.
///
/// # Safety
/// `ptr` is the taker's reference, not used again.
unsafe fn close<R>(ptr: NonNull<Slot<R>>) -> Option<Result<R, AskError>> {
    // SAFETY: the taker's reference, released below.
    let slot = unsafe { ptr.as_ref() };
    // Acquire: pairs with the filler's Release of VALUE_SET, so a value set before the close is
    // read here. (Nothing of ours needs publishing: after CLOSED the filler reads no cell.)
    let prev = slot.state.fetch_or(CLOSED, Ordering::Acquire);
    let (result, waiter) = if prev & VALUE_SET != 0 {
        let result = slot.value.with_mut(|value| {
            // SAFETY: VALUE_SET seen with Acquire: the value is written, and the taker is its
            // only reader now.
            unsafe { (*value).assume_init_read() }
        });
        (Some(result), Waiter::Empty)
    } else {
        // The filler will see CLOSED when it sets VALUE_SET and then never reads the waiter:
        // the cell is ours, and a waker goes now rather than with the slot.
        let waiter = slot.waiter.with_mut(|waiter| {
            // SAFETY: as just said.
            unsafe { mem::replace(&mut *waiter, Waiter::Empty) }
        });
        (None, waiter)
    };
    let timer = slot.timer.with_mut(|timer| {
        // SAFETY: the timer cell is the taker's (module note).
        unsafe { (*timer).take() }
    });
    // SAFETY: per the function contract.
    unsafe { release(ptr, 1) };
    cancel(timer);
    drop(waiter);
    result
}

impl<R> Taker<R> {
    fn slot(&self) -> &Slot<R> {
        // SAFETY: this counted reference keeps the slot allocated and not recycled.
        unsafe { self.slot.as_ref() }
    }

    fn into_raw(self) -> NonNull<Slot<R>> {
        let slot = self.slot;
        mem::forget(self);
        slot
    }

    /// True once the value is there.
    pub(crate) fn is_filled(&self) -> bool {
        // Acquire: pairs with the filler's Release of VALUE_SET (a take follows).
        self.slot().state.load(Ordering::Acquire) & VALUE_SET != 0
    }

    /// The value, if it is there; the taker back otherwise.
    pub(crate) fn try_take(self) -> Result<Result<R, AskError>, Self> {
        if !self.is_filled() {
            return Err(self);
        }
        let ptr = self.into_raw();
        // SAFETY: the taker's reference, released below.
        let slot = unsafe { ptr.as_ref() };
        let (result, timer) = slot.value.with_mut(|value| {
            // SAFETY: VALUE_SET seen with Acquire (`is_filled`): the value is written and the
            // taker is its only reader; the timer cell is the taker's.
            unsafe {
                let timer = slot.timer.with_mut(|timer| (*timer).take());
                ((*value).assume_init_read(), timer)
            }
        });
        // SAFETY: the taker's reference, not used again.
        unsafe { release(ptr, 1) };
        cancel(timer);
        Ok(result)
    }

    /// Gives up: the value if it came already, `None` otherwise (a later one is dropped by its
    /// filler).
    pub(crate) fn close(self) -> Option<Result<R, AskError>> {
        // SAFETY: the taker's reference, not used again.
        unsafe { close(self.into_raw()) }
    }

    /// Another reference that may fill the slot, for an `ask_timeout` timer. Counted: the slot
    /// is not recycled while the timer can still fire, so a late timer finds this ask's slot
    /// (filled, so its fill is dropped), never a later ask's. Whoever consumes the value
    /// cancels the timer, which drops the reference.
    pub(crate) fn timer_filler(&self) -> Filler<R> {
        // Relaxed: we hold a reference, so the count cannot reach zero meanwhile (as Arc::clone).
        self.slot().state.fetch_add(REF_ONE, Ordering::Relaxed);
        Filler { slot: self.slot }
    }

    /// Keeps the timer to cancel when the wait ends.
    pub(crate) fn set_timer(&mut self, timers: TimerHandle, id: TimerId) {
        self.slot().timer.with_mut(|timer| {
            // SAFETY: the timer cell is the taker's until it registers a forward, which it has
            // not (it would have been consumed).
            unsafe { *timer = Some((timers, id)) };
        });
    }

    /// True if an `ask_timeout` armed a timer for this slot (a wait with a deadline).
    pub(crate) fn has_timer(&self) -> bool {
        self.slot().timer.with(|timer| {
            // SAFETY: as in `set_timer`: the cell is the taker's, and this is the taker.
            unsafe { (*timer).is_some() }
        })
    }

    /// Cancels the timer now (the value came before it was armed).
    pub(crate) fn cancel_timer(&mut self) {
        let timer = self.slot().timer.with_mut(|timer| {
            // SAFETY: as in `set_timer`.
            unsafe { (*timer).take() }
        });
        cancel(timer);
    }

    /// Puts `waiter` in the cell for the filler. `Err(waiter)` if the value is there already
    /// (seen with Acquire): the filler will not look at the cell.
    fn register(&mut self, waiter: Waiter<R>) -> Result<(), Waiter<R>> {
        let slot = self.slot();
        // Acquire (here and on a failed exchange): pairs with the filler's Release of VALUE_SET,
        // so the caller may take the value when this returns `Err`.
        let mut state = slot.state.load(Ordering::Acquire);
        loop {
            if state & VALUE_SET != 0 {
                return Err(waiter);
            }
            if state & WAITER_SET == 0 {
                break;
            }
            // Take the cell back to replace the waiter, unless the value has come (then the
            // filler may be reading it). Relaxed on success: the filler has not read the cell
            // and will not until WAITER_SET is set again below.
            match slot.state.compare_exchange_weak(
                state,
                state & !WAITER_SET,
                Ordering::Relaxed,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        let old = slot.waiter.with_mut(|cell| {
            // SAFETY: WAITER_SET is clear, so the cell is the taker's.
            unsafe { mem::replace(&mut *cell, waiter) }
        });
        drop(old);
        // Release: publishes the waiter (and the timer) to the filler's VALUE_SET swap, which
        // reads the cell only if it sees WAITER_SET. Acquire: pairs with that swap's Release when
        // the value came first.
        let prev = slot.state.fetch_or(WAITER_SET, Ordering::AcqRel);
        if prev & VALUE_SET != 0 {
            // Filled before the waiter went in: the filler saw no waiter and never will.
            return Err(slot.waiter.with_mut(|cell| {
                // SAFETY: as just said, the cell is still the taker's.
                unsafe { mem::replace(&mut *cell, Waiter::Empty) }
            }));
        }
        Ok(())
    }

    /// `Future::poll`: true once the value is there; otherwise `waker` will be woken when it
    /// comes (a waker that would wake the same task is kept, not replaced).
    pub(crate) fn poll_filled(&mut self, waker: &Waker) -> bool {
        let slot = self.slot();
        // Acquire: pairs with the filler's Release of VALUE_SET (a take follows).
        let state = slot.state.load(Ordering::Acquire);
        if state & VALUE_SET != 0 {
            return true;
        }
        if state & WAITER_SET != 0 {
            let same = slot.waiter.with(|cell| {
                // SAFETY: only the taker writes the cell, and not while WAITER_SET is set; the
                // filler at most reads it (to wake the waker by reference).
                matches!(unsafe { &*cell }, Waiter::Waker(old) if old.will_wake(waker))
            });
            if same {
                return false;
            }
        }
        self.register(Waiter::Waker(waker.clone())).is_err()
    }

    /// Looks for the value after each of [`SPINS`] spin hints, yielding the core now and then
    /// after the first [`SPINS_BEFORE_YIELD`] and for [`YIELDING_FOR`] at most (and not at all
    /// once a yield lost the core to a busy thread: `give_way`), and with a
    /// `deadline` stops once it has passed (the clock is read where the spin yields, and once
    /// before: the look at the slot is a load that hits in this core's cache, the clock is a
    /// call). The value, or the taker back.
    #[cfg(not(troupe_loom))]
    fn spin(self, deadline: Option<Instant>) -> Result<Result<R, AskError>, Self> {
        let mut taker = self;
        let mut yielding_since = None;
        for spin in 0..SPINS {
            if spin >= SPINS_BEFORE_YIELD && spin % YIELD_EVERY == 0 {
                let now = Instant::now();
                let since = *yielding_since.get_or_insert(now);
                if now - since >= YIELDING_FOR || deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if !crate::give_way::yield_now() {
                    // The core went to another runnable thread for long, or lately did:
                    // parked, this thread is woken by the reply at once (see `give_way`).
                    break;
                }
            } else {
                std::hint::spin_loop();
            }
            match taker.try_take() {
                Ok(result) => return Ok(result),
                Err(back) => taker = back,
            }
            if spin + 1 == SPINS_BEFORE_YIELD && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
        }
        Err(taker)
    }

    /// Under loom there is no spin: its models cover the parking path.
    #[cfg(troupe_loom)]
    fn spin(self, _deadline: Option<Instant>) -> Result<Result<R, AskError>, Self> {
        Err(self)
    }

    /// Before a blocking wait, on a plain thread: the turns it scheduled itself and no worker
    /// has taken (the request's own, most often), run here (`role::help_until`). A reply
    /// computed on this thread needs no worker to be woken for it and no wake-up of this
    /// thread, and it comes sooner than from a worker that would have to take the turn first
    /// (`spin.rs`: help first). Not for a wait with a deadline: a turn run here could outlast
    /// it.
    #[cfg(not(troupe_loom))]
    fn help(&self, target: ActorId) {
        role::help_until(target, &|| self.is_filled(), role::Waiter::Thread);
    }

    /// Under loom there is no spin, and no pool to help.
    #[cfg(troupe_loom)]
    fn help(&self, _target: ActorId) {}

    /// Blocks until the value is there: spins briefly (not under loom, whose models cover the
    /// parking path), then parks with the thread registered for the filler to unpark.
    pub(crate) fn wait(self, help_with: Option<ActorId>) -> Result<R, AskError> {
        if let Some(target) = help_with {
            self.help(target);
        }
        let mut taker = match self.spin(None) {
            Ok(result) => return result,
            Err(taker) => taker,
        };
        let _ = taker.register(Waiter::Thread(thread::current()));
        loop {
            match taker.try_take() {
                Ok(result) => return result,
                Err(back) => taker = back,
            }
            thread::park();
        }
    }

    /// Blocks until the value is there or `deadline` passes: the value, or `None` (the slot
    /// is closed then: a later value is dropped by its filler). Spins first, as `wait`, within
    /// the deadline.
    pub(crate) fn wait_until(self, deadline: Instant) -> Option<Result<R, AskError>> {
        let mut taker = match self.spin(Some(deadline)) {
            Ok(result) => return Some(result),
            Err(taker) => taker,
        };
        let _ = taker.register(Waiter::Thread(thread::current()));
        loop {
            match taker.try_take() {
                Ok(result) => return Some(result),
                Err(back) => taker = back,
            }
            let now = Instant::now();
            if now >= deadline {
                // A value that came just now is still returned.
                return taker.close();
            }
            loom::park_timeout(deadline - now);
        }
    }

    /// `pipe_to`: runs `forward` with the value when it comes, on the filling thread, or now if
    /// it is there already.
    pub(crate) fn on_reply(mut self, forward: Forward<R>) {
        match self.register(Waiter::Forward(forward)) {
            // The filler runs it, and releases this taker's reference with its own.
            Ok(()) => {
                let _ = self.into_raw();
            }
            Err(Waiter::Forward(forward)) => match self.try_take() {
                Ok(result) => forward.run(result),
                Err(_) => unreachable!("`register` saw the value"),
            },
            Err(_) => unreachable!("`register` gives back the waiter it was given"),
        }
    }

    /// Where the slot lives (the tests check recycling).
    #[cfg(test)]
    pub(crate) fn address(&self) -> usize {
        self.slot.as_ptr() as usize
    }
}
