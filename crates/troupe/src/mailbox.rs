//! The mailbox: a lock-free, block-linked, multi-producer single-consumer queue that also decides
//! who schedules the actor.
//!
//! # Layout
//! Messages live in slots of fixed-size blocks ([`BLOCK_CAP`] slots each) linked into a list, as
//! in crossbeam-channel's `list` flavour. Producers claim a slot by advancing the shared `tail`
//! word with one compare-and-swap, write the message into the slot and then mark it ready.
//! The single consumer (the actor's turn) reads slots in order and never needs an atomic
//! read-modify-write. An actor that never receives a message never allocates a block.
//!
//! # Recycling blocks
//! A block the consumer has finished goes on the *spare chain* (`spare`, linked through the
//! blocks' `next`), which keeps one block, or for an owner with catch-up
//! (`SpawnOptions::catch_up`) enough for twice its catch-up backlog; beyond that it goes on
//! the finishing thread's shelf of blocks (`shelf.rs`), where the next block any mailbox of
//! the same message type needs is taken from, on that thread or, through the process-wide
//! spare shelf, on another.
//! The producer that installs the next block takes the whole chain with one swap, installs its
//! first block and leaves the rest linked behind it, ahead of the tail: the next installers
//! find their block already linked and touch neither the chain nor the allocator. So a steady
//! stream allocates nothing, and neither does a producer that keeps its consumer a catch-up
//! backlog behind (a fresh block costs a page fault for every four kilobytes it spans; over a
//! backlog of millions of messages that was the largest cost of the counting actor).
//! Only the consumer pushes onto the chain and only it frees or shelves blocks; producers only
//! take the whole chain. A block the consumer reads on the chain is therefore live, and the
//! chain's first block cannot leave and come back behind the consumer's back (no ABA).
//!
//! Blocks beyond that are shelved rather than freed: a backlog that swings by a few blocks
//! while the sender is another thread than the consumer (a plain thread feeding actors, a
//! fork-join) freed, on the consumer's thread, blocks that the sender's thread then allocated
//! again, and the two took the lock of the sender's arena in the allocator, where they queued
//! on each other (glibc puts a waiter on that lock to sleep in the kernel: a fork-join's
//! worker and sender slept hundreds to thousands of times in a run of a few milliseconds).
//! Keeping more blocks on each mailbox's own chain ended that too, but a block kept by one
//! actor is no use to the next: a chain of 10,000 actors, each keeping four, took a third
//! longer, since every stage's blocks came fresh instead of from the stage before. A shelf
//! hands the last block finished on a thread to the next one needed there, whichever mailbox
//! needs it. BENCHMARKS.md, "Fork-join's blocks", has the figures.
//!
//! # The tail word and who schedules
//! `tail` holds the index of the next free slot (shifted left by [`SHIFT`]) and five flags:
//!
//! | flag         | set by                                   | cleared by                        |
//! |--------------|------------------------------------------|-----------------------------------|
//! | `IDLE`       | the consumer, when it has nothing to do  | the first producer or signaller   |
//! | `HOLD`       | the consumer, with `IDLE`, when it idles with messages it will not take yet (suspended, awaiting) | whoever clears `IDLE` |
//! | `SIGNALED`   | a signaller (stop, child stopped...)     | the consumer, before it reads them |
//! | `CLOSED`     | the consumer, when the actor stops       | never                             |
//! | `TERMINATED` | the consumer, in the actor's last turn   | never                             |
//!
//! Legal combinations: `HOLD` only with `IDLE` (both are cleared by the same compare-and-swap);
//! `IDLE` and `SIGNALED` are never both set (a signaller clears `IDLE` as it sets `SIGNALED`);
//! once `CLOSED` is set no producer claims a slot (a stopping actor still takes signals, e.g.
//! from children reporting they stopped); `TERMINATED` comes only after `CLOSED`, and then
//! nothing schedules the owner again and `IDLE` is never set.
//!
//! A hand-off (a message given to an idle owner with its turn, bypassing the slots; see
//! `raw/cell.rs`) is allowed only by [`Mailbox::wake_idle`], which succeeds only when `IDLE` is
//! set, `HOLD` is not, and every claimed slot has been read: the owner said, as it went idle,
//! that it would take the next message at once, and nothing queued can be overtaken.
//!
//! The producer whose compare-and-swap cleared `IDLE` is the one and only party that schedules
//! the actor (the same rule as Pony's `messageq.c`, where `push` reports "was empty"). The
//! consumer sets `IDLE` only with a compare-and-swap that expects the tail index to equal its
//! own head index and `SIGNALED` to be clear, so a message or signal that arrives after the
//! consumer last looked makes that compare-and-swap fail and the consumer keeps going: no
//! wake-up is lost, and an actor is never scheduled twice.
//!
//! # Invariants
//! - Only one thread consumes at a time (guaranteed by the scheduling rule above), so the
//!   consumer's head index and head block need no synchronisation of their own.
//! - A block is recycled (kept on the chain, or shelved) only after the consumer has read and
//!   reset every slot in it, so a recycled block holds no message; a producer touches a
//!   block only after its compare-and-swap claimed a slot in it and only until it marks that
//!   slot ready, so no producer can still be inside a recycled block.
//! - A block's `next` is written while the block is in use only by the producer that claimed
//!   its last slot (it installs the next block, before writing that slot); a recycled block's
//!   `next` and layout are written before the block is published again: by the consumer as it
//!   puts it on the chain, by the producer that takes it off a shelf.

use std::mem::MaybeUninit;
use std::ptr;

use crate::loom::{AtomicPtr, AtomicU8, AtomicUsize, Backoff, Ordering, UnsafeCell};

/// The actor is neither scheduled nor running.
const IDLE: usize = 1;
/// Control signals wait for the consumer.
const SIGNALED: usize = 1 << 1;
/// The mailbox accepts no more messages.
const CLOSED: usize = 1 << 2;
/// The owner is gone: no more signals, never scheduled again.
const TERMINATED: usize = 1 << 3;
/// Set with `IDLE`: the owner holds its messages (suspended or awaiting), so no hand-off.
const HOLD: usize = 1 << 4;
/// Cleared together by whoever wakes the owner.
const ASLEEP: usize = IDLE | HOLD;
/// Slot indices are stored above the flags.
const SHIFT: usize = 5;
const FLAGS: usize = (1 << SHIFT) - 1;
const ONE: usize = 1 << SHIFT;

/// Indices per block, one more than the slots: the last index of a lap is a marker meaning
/// "the next block is being installed".
#[cfg(not(troupe_loom))]
const LAP: usize = 32;
#[cfg(troupe_loom)]
const LAP: usize = 3;
/// Message slots per block.
pub(crate) const BLOCK_CAP: usize = LAP - 1;

/// One message and its "written" flag.
struct Slot<T> {
    /// 1 once the producer has written `msg`; reset to 0 by the consumer after reading it.
    ready: AtomicU8,
    msg: UnsafeCell<MaybeUninit<T>>,
}

/// A block of slots. Consecutive indices are spread over the block by a stride chosen when the
/// block is installed (see [`STRIDES`], [`SOLO`] and [`CONTENDED`]).
struct Block<T> {
    /// In use: the block installed after this one (null until then). On the spare chain, or
    /// linked ahead of the tail block: the next free block.
    next: AtomicPtr<Block<T>>,
    /// Row of [`LAYOUTS`]: set by whoever owns the block alone before it is published (the
    /// producer that allocates it, or the consumer that recycles it); read-only after.
    layout: u8,
    /// On the spare chain: how many blocks it holds from this one on. Written by the consumer
    /// as it recycles the block; read by the consumer only.
    free_depth: u16,
    slots: [Slot<T>; BLOCK_CAP],
}

impl<T> Block<T> {
    fn boxed() -> Box<Self> {
        Box::new(Block {
            next: AtomicPtr::new(ptr::null_mut()),
            layout: SOLO,
            free_depth: 0,
            slots: std::array::from_fn(|_| Slot {
                ready: AtomicU8::new(0),
                msg: UnsafeCell::new(MaybeUninit::uninit()),
            }),
        })
    }

    /// The slot for index `offset` within the block.
    ///
    /// # Safety
    /// `offset < BLOCK_CAP`.
    #[inline(always)]
    unsafe fn slot(this: *mut Self, offset: usize) -> *const Slot<T> {
        // SAFETY: each `LAYOUTS` row is a permutation of 0..BLOCK_CAP, `layout` indexes a row,
        // and `offset < BLOCK_CAP` (caller's contract), so the index is in bounds.
        unsafe {
            let position = *LAYOUTS
                .get_unchecked((*this).layout as usize)
                .get_unchecked(offset);
            (*this).slots.as_ptr().add(position as usize)
        }
    }
}

// How consecutive indices are laid out in a block. BLOCK_CAP (31) is prime, so any stride below
// it visits every slot once.
//
// One producer at a time (a pipeline, a chain): consecutive messages 2 slots (80 bytes) apart,
// a regular stride the hardware prefetcher follows. Several producers at once (fan-in, the
// counting actor): 8 slots (320 bytes) apart, so producers claiming neighbouring indices write
// cache lines far enough apart that neither they nor the prefetcher's neighbouring-line fetches
// collide. Measured on the chain and counter benchmarks (see the closing notes): stride 8
// everywhere made the chain 2x slower, stride 2 everywhere made the counter 2.5x slower.
#[cfg(not(troupe_loom))]
const STRIDES: [usize; 2] = [2, 8];
#[cfg(troupe_loom)]
const STRIDES: [usize; 2] = [1, 1];
/// Row of [`LAYOUTS`] for one producer at a time.
const SOLO: u8 = 0;
/// Row of [`LAYOUTS`] after producers raced.
const CONTENDED: u8 = 1;

/// `LAYOUTS[layout][offset]` is the slot of index `offset`: `offset * stride % BLOCK_CAP`,
/// computed once here rather than divided out on every access.
static LAYOUTS: [[u8; BLOCK_CAP]; 2] = {
    let mut table = [[0u8; BLOCK_CAP]; 2];
    let mut row = 0;
    while row < 2 {
        let mut offset = 0;
        while offset < BLOCK_CAP {
            table[row][offset] = (offset * STRIDES[row] % BLOCK_CAP) as u8;
            offset += 1;
        }
        row += 1;
    }
    table
};

/// How often (in slot indices) a push looks whether the owner is behind.
#[cfg(not(troupe_loom))]
const BEHIND_CHECK_EVERY: usize = 64;
#[cfg(troupe_loom)]
const BEHIND_CHECK_EVERY: usize = 1;

/// What a push did, besides queueing its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Queued; the owner was already scheduled or running.
    Queued,
    /// Queued, and this push cleared `IDLE`: the caller must schedule the owner.
    Woke,
    /// Queued, and the owner, though scheduled, has at least the mailbox's `behind_at`
    /// messages waiting (checked on some pushes only; approximate).
    Behind,
}

/// The most blocks a spare chain keeps.
const MAX_SPARES: usize = 1024;

/// A block its consumer has finished: every slot read and reset, so it holds no message; its
/// `next` is stale until it is installed again. Made only by `Release`, as the consumer leaves
/// a block whose last slot it has just read; `recycle` takes nothing else, so neither a spare
/// chain nor a shelf holds anything else, and a block taken off either can be installed as it
/// is (see the module note).
struct Finished<T>(Box<Block<T>>);

impl<T: Send + 'static> crate::shelf::Shelved for Finished<T> {
    /// Blocks a thread keeps per message type (each about 1.3 KB for an inline message): a
    /// worker's share of a fork-join's swings, at most 20 KB.
    const LOCAL: usize = 16;
    /// Blocks kept process-wide per message type, at most about 330 KB.
    const SPARE: usize = 256;
    const LIST: crate::shelf::List = crate::shelf::List::MailboxBlocks;
}

/// Puts a finished block on this thread's shelf (see the module note); under loom, whose
/// models check the mailbox alone, frees it. Never inlined: it stays out of the consumer's
/// loop, as the allocator's `free` it replaces did.
#[inline(never)]
fn shelve<T: Send + 'static>(block: Finished<T>) {
    #[cfg(not(troupe_loom))]
    crate::shelf::give(block);
    #[cfg(troupe_loom)]
    drop(block);
}

/// A finished block from a shelf, if one is there (never under loom).
#[inline(never)]
fn unshelve<T: Send + 'static>() -> Option<Finished<T>> {
    #[cfg(not(troupe_loom))]
    return crate::shelf::take();
    #[cfg(troupe_loom)]
    None
}

/// Frees `block` and every block linked after it.
///
/// # Safety
/// The caller owns the chain: no other thread refers to any of its blocks, and no slot in it
/// holds a message.
unsafe fn free_chain<T>(mut block: *mut Block<T>) {
    while !block.is_null() {
        // SAFETY: per the contract, each block came from `Box::into_raw` and is owned here.
        let owned = unsafe { Box::from_raw(block) };
        block = owned.next.load(Ordering::Relaxed);
    }
}

/// Why a message was not accepted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Closed<T>(pub(crate) T);

/// A lock-free MPSC queue with an embedded "who schedules" rule. See the module note.
#[repr(C)]
pub(crate) struct Mailbox<T: Send + 'static> {
    // Written by producers (read on every push).
    tail: AtomicUsize,
    tail_block: AtomicPtr<Block<T>>,
    /// Set when a producer lost a compare-and-swap race since the last block was installed;
    /// the next block is then laid out for contention.
    contended: AtomicU8,
    /// Queued messages from which `push_reporting` says the owner is behind (0: never); fixed
    /// at creation. Kept in the padding after `contended`, so the mailbox does not grow.
    behind_at: u32,
    // Exchanged by both sides, once per block.
    spare: AtomicPtr<Block<T>>,
    // Written by the consumer once per turn (and once by the producer that installs the first
    // block).
    head_block: AtomicPtr<Block<T>>,
    /// The consumer's head index, published at the end of each turn (read by the next turn,
    /// and by `len` for metrics).
    head: AtomicUsize,
}

// SAFETY: messages are moved between threads, so `T: Send` is required; all shared state is
// atomic or owned by the single consumer as the module invariants describe.
unsafe impl<T: Send + 'static> Send for Mailbox<T> {}
// SAFETY: as above; `&Mailbox` only allows `push` (any thread) and `consumer` (unsafe, one
// thread at a time by contract).
unsafe impl<T: Send + 'static> Sync for Mailbox<T> {}

impl<T: Send + 'static> Mailbox<T> {
    /// A new, empty mailbox. `idle` says whether the owner starts idle (a producer then
    /// schedules it) or already scheduled (its first turn is on its way).
    #[cfg(test)]
    pub(crate) fn new(idle: bool) -> Self {
        Self::with_behind_at(idle, 0)
    }

    /// A new, empty mailbox (`idle` as for the tests' `Mailbox::new`), with [`Pushed::Behind`]
    /// reported by `push_reporting` when at least `behind_at` messages wait (0: never
    /// reported).
    pub(crate) fn with_behind_at(idle: bool, behind_at: u32) -> Self {
        Self {
            behind_at,
            tail: AtomicUsize::new(if idle { IDLE } else { 0 }),
            tail_block: AtomicPtr::new(ptr::null_mut()),
            head_block: AtomicPtr::new(ptr::null_mut()),
            head: AtomicUsize::new(0),
            spare: AtomicPtr::new(ptr::null_mut()),
            contended: AtomicU8::new(0),
        }
    }

    /// Appends `msg`. Returns `Ok(true)` when this push woke the owner from idle, in which case
    /// the caller must schedule it; `Err` gives the message back if the mailbox is closed.
    #[cfg(test)]
    pub(crate) fn push(&self, msg: T) -> Result<bool, Closed<T>> {
        self.push_reporting(msg)
            .map(|pushed| pushed == Pushed::Woke)
    }

    /// Appends `msg`, and says whether this push woke the owner (the caller must schedule it)
    /// or found it far behind (see [`Pushed::Behind`]); `Err` gives the message back if the
    /// mailbox is closed.
    #[inline(always)]
    pub(crate) fn push_reporting(&self, msg: T) -> Result<Pushed, Closed<T>> {
        // Fast path: open, a block in place, and not its last slot (which installs the next
        // block): one compare-and-swap, one write, one flag.
        let tail = self.tail.load(Ordering::Acquire);
        let block = self.tail_block.load(Ordering::Acquire);
        // Read now, while this line is here: after the compare-and-swap another producer may
        // already have taken it away.
        let behind_at = self.behind_at;
        let offset = (tail >> SHIFT) % LAP;
        if tail & CLOSED == 0
            && offset + 1 < BLOCK_CAP
            && !block.is_null()
            // AcqRel: as in `push_slow`.
            && self
                .tail
                .compare_exchange_weak(tail, (tail + ONE) & !ASLEEP, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: as in `push_slow`: the compare-and-swap claimed slot `offset` of the live
            // block `block` for this producer alone.
            unsafe { Self::write(block, offset, msg) };
            return Ok(self.pushed_at(tail, behind_at));
        }
        if self.tail.load(Ordering::Relaxed) & !FLAGS != tail & !FLAGS && tail & CLOSED == 0 {
            // Another producer claimed a slot between our load and our compare-and-swap.
            self.contended.store(1, Ordering::Relaxed);
        }
        self.push_slow(msg)
    }

    /// What a push that claimed its slot from tail word `tail` reports. Whether the owner is
    /// behind is looked at on one index in [`BEHIND_CHECK_EVERY`] only, so most pushes read
    /// nothing more than they wrote.
    #[inline(always)]
    fn pushed_at(&self, tail: usize, behind_at: u32) -> Pushed {
        if tail & IDLE != 0 {
            return Pushed::Woke;
        }
        let index = tail >> SHIFT;
        if behind_at != 0 && index.is_multiple_of(BEHIND_CHECK_EVERY) {
            // Relaxed: a hint. The head is published at the end of each turn, so it may lag by
            // one turn's messages.
            let head = self.head.load(Ordering::Relaxed) >> SHIFT;
            if index.saturating_sub(head) >= behind_at as usize {
                return Pushed::Behind;
            }
        }
        Pushed::Queued
    }

    /// Writes a claimed slot and marks it ready.
    ///
    /// # Safety
    /// Slot `offset` of `block` was claimed by this producer's compare-and-swap and `block` is
    /// live (the consumer cannot pass an unwritten slot).
    #[inline(always)]
    unsafe fn write(block: *mut Block<T>, offset: usize, msg: T) {
        // SAFETY: per the function contract.
        unsafe {
            let slot = Block::slot(block, offset);
            (*slot).msg.with_mut(|p| p.write(MaybeUninit::new(msg)));
            // Release pairs with the consumer's Acquire load of `ready`.
            (*slot).ready.store(1, Ordering::Release);
        }
    }

    /// Every case of `push`: the first block, the last slot of a block, waiting while another
    /// producer installs a block, a closed mailbox, and retries after contention.
    #[cold]
    #[inline(never)]
    fn push_slow(&self, msg: T) -> Result<Pushed, Closed<T>> {
        let mut backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::Acquire);
        let mut block = self.tail_block.load(Ordering::Acquire);

        loop {
            if tail & CLOSED != 0 {
                return Err(Closed(msg));
            }
            let offset = (tail >> SHIFT) % LAP;
            if offset == BLOCK_CAP {
                // Another producer claimed the last slot and is installing the next block.
                backoff.snooze();
                tail = self.tail.load(Ordering::Acquire);
                block = self.tail_block.load(Ordering::Acquire);
                continue;
            }
            if block.is_null() {
                // The very first message: install the first block. A new one: nothing was ever
                // recycled, and a block that loses the race below is freed, never shared.
                let first = Box::into_raw(self.new_block());
                // Release pairs with the Acquire loads of `tail_block` by other producers and
                // of `head_block` by the consumer; Acquire on failure pairs with the winner's
                // Release, so the block it built is visible before we write into it.
                match self.tail_block.compare_exchange(
                    ptr::null_mut(),
                    first,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        self.head_block.store(first, Ordering::Release);
                        block = first;
                    }
                    Err(_) => {
                        // SAFETY: `first` came from `Box::into_raw` above and was not published.
                        drop(unsafe { Box::from_raw(first) });
                        // Another producer installed the first block, and by now others may
                        // have filled it and installed the next: the tail, then the block that
                        // holds it, are read afresh, in that order as everywhere. (Taking the
                        // block this compare-and-swap returned with a tail read after it paired
                        // a later lap's slot with the first block: the message went into that
                        // block, possibly recycled or freed, while its slot stayed unwritten,
                        // and the owner waited for it forever. Model:
                        // `loom_losing_the_first_block_race_takes_the_current_block`.)
                        tail = self.tail.load(Ordering::Acquire);
                        block = self.tail_block.load(Ordering::Acquire);
                        continue;
                    }
                }
            }

            let new_tail = (tail + ONE) & !ASLEEP;
            // AcqRel: Acquire pairs with the consumer's Release when it set IDLE (so this
            // producer, if it schedules, sees the actor's state as the last turn left it);
            // Release publishes the claim to the producer that installs the next block.
            match self.tail.compare_exchange_weak(
                tail,
                new_tail,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: the successful compare-and-swap claimed slot `offset` of `block`
                    // for this producer alone. `block` holds that index: on every path it was
                    // read after the tail word the compare-and-swap expected (never before: a
                    // block read first may be one the tail has left). It is live: the tail
                    // index still pointed into it, so the consumer has not passed this
                    // (unwritten) slot and cannot have recycled the block.
                    unsafe {
                        if offset + 1 == BLOCK_CAP {
                            // This producer installs the next block: the one linked ahead of
                            // this one (recycled), else the spare chain's first (the rest of
                            // the chain stays linked behind it), else a new one. Other
                            // producers wait at the marker meanwhile. Acquire pairs with the
                            // Release that published the link (the consumer's recycling, via
                            // the producer that installed `block`).
                            let mut next = (*block).next.load(Ordering::Acquire);
                            if next.is_null() {
                                next = Box::into_raw(self.take_block());
                                // Release pairs with the consumer's Acquire load of `next`
                                // when it leaves `block`.
                                (*block).next.store(next, Ordering::Release);
                            }
                            // Release pairs with other producers' Acquire loads of the tail
                            // block: the block's reset slots and layout are visible to them.
                            self.tail_block.store(next, Ordering::Release);
                            // Skip the marker index; fetch_add keeps flags others may set.
                            self.tail.fetch_add(ONE, Ordering::Release);
                        }
                        Self::write(block, offset, msg);
                    }
                    return Ok(self.pushed_at(tail, self.behind_at));
                }
                Err(current) => {
                    if current & !FLAGS != tail & !FLAGS {
                        // Another producer claimed a slot first.
                        self.contended.store(1, Ordering::Relaxed);
                    }
                    tail = current;
                    block = self.tail_block.load(Ordering::Acquire);
                    crate::loom::hint::spin_loop();
                }
            }
        }
    }

    /// Wakes the owner if it is idle and open, without adding a message: the caller then holds
    /// the right to run it and hands it a message directly (see `Cell::push` in `raw/cell.rs`).
    /// `Ok(false)` if it was not idle, held its messages, or had some queued (send normally);
    /// `Err` if the mailbox is closed.
    #[inline]
    pub(crate) fn wake_idle(&self) -> Result<bool, Closed<()>> {
        // Acquire pairs with the consumer's Release when it went idle, so its published head
        // (stored before that) is visible below.
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            if tail & CLOSED != 0 {
                return Err(Closed(()));
            }
            if tail & ASLEEP != IDLE {
                // Running, or asleep holding its messages (suspended, awaiting): send through
                // the mailbox.
                return Ok(false);
            }
            if tail & !FLAGS != self.head.load(Ordering::Relaxed) {
                // Messages still queued: a hand-off would overtake them.
                return Ok(false);
            }
            // AcqRel, as in `push`: Acquire pairs with the consumer's Release when it went idle.
            match self.tail.compare_exchange_weak(
                tail,
                tail & !IDLE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(true),
                Err(current) => tail = current,
            }
        }
    }

    /// Asks the core for the tail's cache line in the state a write needs, ahead of a first
    /// read of it by a push or by the consumer going idle. Without it, when another core wrote
    /// the line last (producers on two cores, or an owner that went idle there), the read
    /// fetches the line to share it and the compare-and-swap then fetches it again to own it:
    /// two crossings between cores where one will do. Only a hint (x86-64's `prefetchw`);
    /// nothing elsewhere.
    #[inline(always)]
    pub(crate) fn prefetch_tail_for_write(&self) {
        #[cfg(all(target_arch = "x86_64", not(troupe_loom)))]
        // SAFETY: a prefetch reads and writes nothing and cannot fault; the address is that of
        // a live field.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(
                (&raw const self.tail).cast::<i8>(),
            );
        }
    }

    /// True if the owner looks idle and ready for a hand-off (a hint: it may change at once).
    #[inline]
    pub(crate) fn looks_open_idle(&self) -> bool {
        self.tail.load(Ordering::Relaxed) & ASLEEP == IDLE
    }

    /// Sets `SIGNALED`, waking the owner if idle. Returns `Ok(true)` when the caller must
    /// schedule the owner, and `Err(Closed(()))` if the owner has terminated.
    pub(crate) fn signal(&self) -> Result<bool, Closed<()>> {
        let mut tail = self.tail.load(Ordering::Acquire);
        loop {
            if tail & TERMINATED != 0 {
                return Err(Closed(()));
            }
            let new_tail = (tail | SIGNALED) & !ASLEEP;
            if new_tail == tail {
                return Ok(false);
            }
            // AcqRel: as in `push`; the signal itself was published before this call.
            match self.tail.compare_exchange_weak(
                tail,
                new_tail,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(tail & IDLE != 0),
                Err(current) => tail = current,
            }
        }
    }

    /// True if pushes report the owner behind (`with_behind_at` was given a threshold).
    pub(crate) fn catches_up(&self) -> bool {
        self.behind_at != 0
    }

    /// The backlog at which pushes report the owner behind (0: never).
    pub(crate) fn behind_at(&self) -> usize {
        self.behind_at as usize
    }

    /// Messages waiting: exact between turns (the consumer publishes its head as it goes
    /// idle), and while a turn runs may count what it has read (for metrics).
    pub(crate) fn len(&self) -> usize {
        let tail = self.tail.load(Ordering::Relaxed) >> SHIFT;
        let head = self.head.load(Ordering::Relaxed) >> SHIFT;
        // The indices from the head to the tail, less the markers among them (the last index
        // of every lap holds no message). Counting a marker per full lap of the distance
        // instead counted one too many whenever the two straddled a block's end: for an
        // actor with one message, once in 31 (BENCHMARKS.md, "Asks with a deadline").
        tail.saturating_sub(head) - (tail / LAP).saturating_sub(head / LAP)
    }

    /// True once the mailbox is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.tail.load(Ordering::Acquire) & CLOSED != 0
    }

    /// True once the owner has terminated.
    pub(crate) fn is_terminated(&self) -> bool {
        self.tail.load(Ordering::Acquire) & TERMINATED != 0
    }

    /// Opens the consumer side for one turn.
    ///
    /// # Safety
    /// At most one `Consumer` of a mailbox may exist at any time, and turns must be ordered by
    /// happens-before (the scheduling rule in the module note provides both).
    pub(crate) unsafe fn consumer(&self) -> Consumer<'_, T> {
        Consumer {
            mailbox: self,
            // Relaxed: the previous turn's store happens-before this turn (scheduling rule).
            head: self.head.load(Ordering::Relaxed),
            block: self.head_block.load(Ordering::Acquire),
            released: false,
        }
    }

    /// A block for the producer that installs the next one: the whole spare chain, taken at
    /// once (its first block is installed, the rest stays linked behind it, ahead of the tail),
    /// else a new allocation.
    fn take_block(&self) -> Box<Block<T>> {
        let chain = self.spare.swap(ptr::null_mut(), Ordering::Acquire);
        if chain.is_null() {
            return self.new_block();
        }
        // SAFETY: the chain's blocks came from `Box::into_raw` in `recycle`, and the swap made
        // this thread the chain's only owner. Acquire pairs with the Release compare-and-swap
        // there, so the reset slots, layout and links are visible.
        unsafe { Box::from_raw(chain) }
    }

    /// A new block, laid out for contention if producers raced since the last block was laid
    /// out.
    fn new_block(&self) -> Box<Block<T>> {
        let mut block = unshelve().map_or_else(Block::boxed, |Finished(block)| block);
        // Not yet published: only this producer sees it. A shelved block's slots are reset
        // (it was recycled only once its consumer had read every one) and its depth is
        // written again when it is recycled; its `next` is stale.
        debug_assert!(block
            .slots
            .iter()
            .all(|s| s.ready.load(Ordering::Relaxed) == 0));
        block.next.store(ptr::null_mut(), Ordering::Relaxed);
        block.layout = self.next_layout();
        block
    }

    fn next_layout(&self) -> u8 {
        if self.contended.swap(0, Ordering::Relaxed) != 0 {
            CONTENDED
        } else {
            SOLO
        }
    }

    /// How many blocks the spare chain keeps: one (as many as a steady stream needs), or, for
    /// an owner with catch-up, enough for twice its catch-up backlog, so a producer that
    /// outruns it by that much allocates nothing and touches no new memory.
    fn spares_kept(&self) -> u16 {
        if cfg!(troupe_loom) {
            return 2;
        }
        if self.behind_at == 0 {
            return 1;
        }
        (self.behind_at as usize / BLOCK_CAP * 2 + 2).min(MAX_SPARES) as u16
    }

    /// Keeps a block the consumer has finished (every slot read and reset) on the spare chain,
    /// or frees it if the chain holds as many as `spares_kept` already.
    ///
    /// Only the consumer calls this, so the chain has one pusher: a block it reads here (the
    /// chain's first) is live, since only the consumer frees blocks; producers only take the
    /// whole chain (`take_block`). No ABA: the first block can leave the chain and come back
    /// only through this consumer.
    fn recycle(&self, Finished(block): Finished<T>) {
        let keep = self.spares_kept();
        let block = Box::into_raw(block);
        // SAFETY: `block` is this consumer's alone until the compare-and-swap publishes it.
        unsafe { (*block).layout = self.next_layout() };
        let mut first = self.spare.load(Ordering::Relaxed);
        loop {
            let depth = if first.is_null() {
                0
            } else {
                // SAFETY: `first` is live (see above); its depth was written by this consumer.
                unsafe { (*first).free_depth }
            };
            if depth >= keep {
                // SAFETY: not published.
                shelve(Finished(unsafe { Box::from_raw(block) }));
                return;
            }
            // SAFETY: not yet published.
            unsafe {
                (*block).free_depth = depth + 1;
                (*block).next.store(first, Ordering::Relaxed);
            }
            // Release pairs with the Acquire swap in `take_block`.
            match self.spare.compare_exchange_weak(
                first,
                block,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => first = current,
            }
        }
    }
}

/// The consumer side of a mailbox for the length of one turn. It keeps the head index and head
/// block in locals and publishes them when dropped, so the consumer writes shared memory once
/// per turn rather than once per message.
pub(crate) struct Consumer<'a, T: Send + 'static> {
    mailbox: &'a Mailbox<T>,
    head: usize,
    block: *mut Block<T>,
    /// Set once `try_idle` succeeded: the owner may already be running elsewhere, so this
    /// consumer must not write the shared head again (not even when dropped).
    released: bool,
}

impl<T: Send + 'static> Consumer<'_, T> {
    /// The next message if it is ready. `None` means empty, or that the next producer in line
    /// has claimed its slot but not yet written it.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<T> {
        let mut out = None;
        // SAFETY: `take` moves the message out of the slot exactly once.
        self.take_in_place(|slot| out = Some(unsafe { slot.read() }));
        out
    }

    /// Hands the next ready message to `take` as a pointer into its slot, without moving it
    /// out first (a message copied through the stack costs a store-forwarding stall per hop).
    /// `take` must move or drop the message. Returns false if no message is ready.
    ///
    /// The slot is released after `take` returns, or while unwinding if it panics, so a
    /// message whose handler panicked is never seen twice.
    #[inline(always)]
    pub(crate) fn take_in_place(&mut self, take: impl FnOnce(*mut T)) -> bool {
        if self.block.is_null() {
            self.block = self.mailbox.head_block.load(Ordering::Acquire);
            if self.block.is_null() {
                return false;
            }
        }
        let offset = (self.head >> SHIFT) % LAP;
        debug_assert!(offset < BLOCK_CAP, "the head never rests on a marker");
        // SAFETY: `self.block` is the live block holding index `self.head`: blocks are recycled
        // only by this consumer, after reading all their slots (here, in `Release::drop`, after
        // `take` is done with the slot).
        unsafe {
            let slot = Block::slot(self.block, offset);
            // Acquire pairs with the producer's Release store of `ready`.
            if (*slot).ready.load(Ordering::Acquire) == 0 {
                return false;
            }
            let release = Release {
                consumer: self,
                slot,
                offset,
            };
            take((*slot).msg.with_mut(|p| p.cast::<T>()));
            drop(release);
        }
        true
    }
    /// True if the next message is written and ready to pop.
    pub(crate) fn has_ready(&mut self) -> bool {
        if self.block.is_null() {
            self.block = self.mailbox.head_block.load(Ordering::Acquire);
            if self.block.is_null() {
                return false;
            }
        }
        let offset = (self.head >> SHIFT) % LAP;
        // SAFETY: as in `pop`: the head block is live.
        unsafe {
            (*Block::slot(self.block, offset))
                .ready
                .load(Ordering::Acquire)
                != 0
        }
    }

    /// True if no producer has claimed a slot this consumer has not read yet.
    pub(crate) fn is_drained(&self) -> bool {
        let tail = self.mailbox.tail.load(Ordering::Acquire);
        tail & !FLAGS == self.head
    }

    /// Consumes the `SIGNALED` flag: true if it was set, in which case the caller must now read
    /// its signals (signals sent later set the flag again).
    #[inline]
    pub(crate) fn take_signaled(&mut self) -> bool {
        if self.mailbox.tail.load(Ordering::Relaxed) & SIGNALED == 0 {
            return false;
        }
        // Acquire pairs with the signaller's AcqRel compare-and-swap, so the signal it published
        // before setting the flag is visible.
        self.mailbox.tail.fetch_and(!SIGNALED, Ordering::Acquire) & SIGNALED != 0
    }

    /// Tries to mark the owner idle: succeeds only if every claimed slot has been read and no
    /// signal is pending. After success the owner may already be scheduled elsewhere, so this
    /// must be the turn's last access to the actor.
    #[inline]
    pub(crate) fn try_idle(&mut self) -> bool {
        // The compare-and-swap below writes the tail's line, which producers on another core
        // may hold: fetched once, to write, rather than once for the read and again for it.
        self.mailbox.prefetch_tail_for_write();
        self.publish();
        // Nothing unread and no signal pending: the tail is our head, plus CLOSED if we closed.
        let tail = self.mailbox.tail.load(Ordering::Relaxed);
        if tail & !CLOSED != self.head {
            return false;
        }
        let expected = tail;
        // Release pairs with the Acquire of the producer whose compare-and-swap clears IDLE:
        // everything this turn did (including `publish`) happens-before the next turn.
        self.released = self
            .mailbox
            .tail
            .compare_exchange(
                expected,
                expected | IDLE,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok();
        self.released
    }

    /// Marks the owner idle and holding: messages may be waiting, and it takes none until a
    /// signal changes its state (a suspended actor waiting for its restart, an actor awaiting a
    /// future). Succeeds unless a signal is pending. The next push or signal wakes it; no
    /// hand-off is given to it (`HOLD`).
    pub(crate) fn try_idle_holding(&mut self) -> bool {
        self.publish();
        let tail = self.mailbox.tail.load(Ordering::Relaxed);
        if tail & (SIGNALED | IDLE) != 0 {
            return false;
        }
        // Release pairs with the Acquire of whoever clears IDLE, as in `try_idle`.
        self.released = self
            .mailbox
            .tail
            .compare_exchange(tail, tail | ASLEEP, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        self.released
    }

    /// Closes the mailbox, hands every message still in it to `drain` (in order), and frees its
    /// blocks. Producers that already claimed a slot are waited for; later ones get `Closed`.
    pub(crate) fn close(&mut self, mut drain: impl FnMut(T)) {
        let tail = self.mailbox.tail.fetch_or(CLOSED, Ordering::AcqRel);
        let mut end = tail & !FLAGS;
        if (end >> SHIFT) % LAP == BLOCK_CAP {
            // A producer is installing the next block; the consumer skips that marker index.
            end += ONE;
        }
        let mut backoff = Backoff::new();
        while self.head != end {
            match self.pop() {
                Some(msg) => {
                    drain(msg);
                    backoff = Backoff::new();
                }
                // A producer claimed a slot and is between its claim and its write.
                None => backoff.snooze(),
            }
        }
        if !self.block.is_null() {
            // SAFETY: every claimed slot has been read; with the mailbox closed, no producer can
            // claim another, so no one else refers to this block or to the free blocks linked
            // ahead of it.
            unsafe { free_chain(self.block) };
            self.block = ptr::null_mut();
            self.mailbox
                .tail_block
                .store(ptr::null_mut(), Ordering::Relaxed);
            self.mailbox
                .head_block
                .store(ptr::null_mut(), Ordering::Relaxed);
        }
        let spare = self.mailbox.spare.swap(ptr::null_mut(), Ordering::Acquire);
        // SAFETY: the swap made this thread the chain's only owner.
        unsafe { free_chain(spare) };
    }

    /// Marks the owner gone for good: later signals are refused and nothing schedules it.
    /// Call only after `close`, in the owner's final turn.
    pub(crate) fn terminate(&mut self) {
        debug_assert!(self.mailbox.is_closed(), "terminate follows close");
        self.mailbox.tail.fetch_or(TERMINATED, Ordering::AcqRel);
    }

    fn publish(&self) {
        self.mailbox.head.store(self.head, Ordering::Relaxed);
    }
}

/// Releases the slot a message was just taken from (see `take_in_place`), advancing the head and
/// recycling the block when it was its last slot; runs on unwinding too.
struct Release<'c, 'a, T: Send + 'static> {
    consumer: &'c mut Consumer<'a, T>,
    slot: *const Slot<T>,
    offset: usize,
}

impl<T: Send + 'static> Drop for Release<'_, '_, T> {
    #[inline]
    fn drop(&mut self) {
        let c = &mut *self.consumer;
        // SAFETY: `slot` is in `c.block`, which is live (only this consumer recycles blocks, and
        // it does so just below, after the message is gone).
        unsafe {
            (*self.slot).ready.store(0, Ordering::Relaxed);
            c.head += ONE;
            if self.offset + 1 == BLOCK_CAP {
                // The producer of the last slot installed `next` before writing that slot, and
                // we saw the write with Acquire, so `next` is set.
                let next = (*c.block).next.load(Ordering::Acquire);
                debug_assert!(!next.is_null());
                let done = Box::from_raw(c.block);
                c.block = next;
                // Consumer-owned from the first block on; the next turn reads it.
                c.mailbox.head_block.store(next, Ordering::Relaxed);
                c.head += ONE; // skip the marker index
                c.mailbox.recycle(Finished(done));
            }
        }
    }
}

impl<T: Send + 'static> Drop for Consumer<'_, T> {
    fn drop(&mut self) {
        if !self.released {
            self.publish();
        }
    }
}

impl<T: Send + 'static> Drop for Mailbox<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer or consumer is left. Drop what was never read.
        // SAFETY: exclusive access makes this the only consumer.
        let mut consumer = unsafe { self.consumer() };
        while consumer.pop().is_some() {}
        let block = consumer.block;
        drop(consumer);
        // SAFETY: the head block and the free blocks linked ahead of it are owned by the
        // mailbox; with every ready slot read and no producers left, no slot holds a message.
        unsafe { free_chain(block) };
        let spare = self.spare.swap(ptr::null_mut(), Ordering::Relaxed);
        // SAFETY: the spare chain is owned by the mailbox.
        unsafe { free_chain(spare) };
    }
}

#[cfg(all(test, not(troupe_loom)))]
#[allow(clippy::disallowed_types)] // the tests count with std atomics, outside any model
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;
    use std::sync::Arc;

    #[test]
    fn smoke() {
        let mb = Mailbox::new(true);
        assert_eq!(mb.push(1), Ok(true), "first push wakes the idle owner");
        assert_eq!(mb.push(2), Ok(false));
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        assert_eq!(rx.pop(), Some(1));
        assert_eq!(rx.pop(), Some(2));
        assert_eq!(rx.pop(), None);
        assert!(rx.try_idle());
        drop(rx);
        assert_eq!(mb.push(3), Ok(true), "idle again: the next push schedules");
    }

    /// How many blocks the spare chain holds.
    fn spares<T: Send + 'static>(mb: &Mailbox<T>) -> u16 {
        let first = mb.spare.load(Ordering::Acquire);
        if first.is_null() {
            return 0;
        }
        // SAFETY: the test's consumer is done; the chain's first block is live.
        unsafe { (*first).free_depth }
    }

    /// Pushes `n` messages, then drains them.
    fn swing(mb: &Mailbox<usize>, n: usize) {
        for i in 0..n {
            mb.push(i).unwrap();
        }
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        for i in 0..n {
            assert_eq!(rx.pop(), Some(i));
        }
        assert_eq!(rx.pop(), None);
    }

    /// Blocks finished beyond the one the chain keeps go on this thread's shelf, and the next
    /// block any mailbox of the same message type needs comes from there.
    #[test]
    fn finished_blocks_beyond_the_chain_are_shelved_and_taken_back() {
        let shelved = crate::shelf::local_len::<Finished<usize>>;
        let mb = Mailbox::new(false);
        swing(&mb, BLOCK_CAP * 6 + 5);
        assert_eq!(spares(&mb), 1, "six finished blocks, one kept");
        assert_eq!(shelved(), 5, "the other five shelved");
        let other = Mailbox::new(false);
        swing(&other, BLOCK_CAP * 2);
        // Its first block and the next came off the shelf; the first, finished, is its spare.
        assert_eq!(spares(&other), 1);
        assert_eq!(shelved(), 3);
    }

    #[test]
    fn len_counts_every_message_across_block_ends() {
        let mb = Mailbox::new(false);
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        // One message at a time, through several blocks: each is counted once, wherever the
        // head and tail stand in their blocks.
        for i in 0..BLOCK_CAP * 4 {
            assert_eq!(mb.push(i), Ok(false));
            rx.publish();
            assert_eq!(mb.len(), 1, "after push {i}");
            assert_eq!(rx.pop(), Some(i));
            rx.publish();
            assert_eq!(mb.len(), 0, "after pop {i}");
        }
        // A backlog drained one by one.
        let n = BLOCK_CAP * 3 + 5;
        for i in 0..n {
            assert_eq!(mb.push(i), Ok(false));
        }
        for left in (0..n).rev() {
            rx.pop().unwrap();
            rx.publish();
            assert_eq!(mb.len(), left);
        }
    }

    #[test]
    fn many_blocks_in_order() {
        let mb = Mailbox::new(false);
        let n = BLOCK_CAP * 10 + 7;
        for i in 0..n {
            assert_eq!(mb.push(i), Ok(false));
        }
        assert_eq!(mb.len(), n);
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        for i in 0..n {
            assert_eq!(rx.pop(), Some(i));
        }
        assert_eq!(rx.pop(), None);
        assert!(rx.is_drained());
    }

    #[test]
    fn try_idle_fails_when_a_message_slipped_in() {
        let mb = Mailbox::new(false);
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        assert_eq!(rx.pop(), None);
        assert_eq!(mb.push(7), Ok(false), "not idle yet: no schedule");
        assert!(!rx.try_idle(), "the message must be seen");
        assert_eq!(rx.pop(), Some(7));
        assert!(rx.try_idle());
    }

    #[test]
    fn signal_wakes_and_blocks_idle() {
        let mb: Mailbox<u8> = Mailbox::new(true);
        assert_eq!(mb.signal(), Ok(true));
        assert_eq!(mb.signal(), Ok(false), "already signaled and awake");
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        assert!(!rx.try_idle(), "a pending signal keeps the owner awake");
        assert!(rx.take_signaled());
        assert!(!rx.take_signaled());
        assert!(rx.try_idle());
    }

    struct Counted(Arc<StdAtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn close_drains_and_rejects() {
        let drops = Arc::new(StdAtomicUsize::new(0));
        let mb = Mailbox::new(false);
        for _ in 0..100 {
            mb.push(Counted(drops.clone())).ok().unwrap();
        }
        // SAFETY: this test thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        let mut drained = 0;
        rx.close(|m| {
            drained += 1;
            drop(m)
        });
        assert_eq!(drained, 100);
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 100);
        let rejected = mb.push(Counted(drops.clone()));
        assert!(rejected.is_err(), "closed mailbox gives the message back");
        drop(rejected);
        assert_eq!(drops.load(std::sync::atomic::Ordering::Relaxed), 101);
        assert_eq!(
            mb.signal(),
            Ok(false),
            "a stopping owner still takes signals"
        );
        assert!(rx.take_signaled());
        assert!(
            rx.try_idle(),
            "closed and drained: may idle while waiting for signals"
        );
        assert_eq!(mb.signal(), Ok(true));
        rx.terminate();
        drop(rx);
        assert_eq!(mb.signal(), Err(Closed(())), "terminated: no more signals");
    }

    #[test]
    fn destructors_of_unread_messages_run() {
        let drops = Arc::new(StdAtomicUsize::new(0));
        {
            let mb = Mailbox::new(false);
            for _ in 0..(BLOCK_CAP * 3 + 1) {
                mb.push(Counted(drops.clone())).ok().unwrap();
            }
        }
        assert_eq!(
            drops.load(std::sync::atomic::Ordering::Relaxed),
            BLOCK_CAP * 3 + 1
        );
    }

    /// Many producers, one consumer that goes idle whenever it can; every message arrives once,
    /// in per-producer order, and the owner is never scheduled twice at once.
    #[test]
    fn stampede_with_idle_protocol() {
        const PRODUCERS: usize = 4;
        const PER: usize = 200_000;
        let mb = Arc::new(Mailbox::<(usize, usize)>::new(true));
        let scheduled = Arc::new(StdAtomicUsize::new(0));
        let handles: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let mb = mb.clone();
                let scheduled = scheduled.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        if mb.push((p, i)).unwrap() {
                            scheduled.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        let mut next = [0usize; PRODUCERS];
        let mut received = 0;
        let mut turns = 0;
        while received < PRODUCERS * PER {
            // Wait to be "scheduled".
            while scheduled.load(std::sync::atomic::Ordering::SeqCst) == turns {
                std::hint::spin_loop();
            }
            turns += 1;
            assert_eq!(scheduled.load(std::sync::atomic::Ordering::SeqCst), turns);
            // SAFETY: this test thread is the only consumer.
            let mut rx = unsafe { mb.consumer() };
            loop {
                while let Some((p, i)) = rx.pop() {
                    assert_eq!(next[p], i, "per-producer order");
                    next[p] += 1;
                    received += 1;
                }
                if rx.try_idle() {
                    break;
                }
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(next, [PER; PRODUCERS]);
    }

    /// Not a test: the fan-in cost of `push` (the counting actor's pattern: two producers
    /// fill the mailbox while its owner waits, then it drains), without a scheduler. Run with
    /// `cargo test --release -p troupe --lib measure_fan_in -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_fan_in() {
        const PRODUCERS: usize = 2;
        const PER: usize = 3_000_000;
        // The size of an envelope: 24 payload bytes and a function pointer.
        type Msg = [u64; 4];
        let mut pushes = Vec::new();
        for _ in 0..15 {
            let mb = Arc::new(Mailbox::<Msg>::new(true));
            let start = std::time::Instant::now();
            let handles: Vec<_> = (0..PRODUCERS)
                .map(|_| {
                    let mb = mb.clone();
                    std::thread::spawn(move || {
                        for i in 0..PER {
                            mb.push([i as u64, 0, 0, 0]).unwrap();
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            let produced = start.elapsed();
            // SAFETY: the producers are done; this thread is the only consumer.
            let mut rx = unsafe { mb.consumer() };
            let mut sum = 0u64;
            while let Some(m) = rx.pop() {
                sum += m[0];
            }
            let total = start.elapsed();
            drop(rx);
            let n = (PRODUCERS * PER) as f64;
            assert_eq!(sum, PRODUCERS as u64 * (PER as u64 * (PER as u64 - 1) / 2));
            pushes.push(produced.as_nanos() as f64 / n);
            println!(
                "push {:.1} ns/msg, drain {:.1} ns/msg, overall {:.1} M msgs/s",
                produced.as_nanos() as f64 / n,
                (total - produced).as_nanos() as f64 / n,
                n / total.as_secs_f64() / 1e6
            );
        }
        pushes.sort_by(f64::total_cmp);
        println!("median push {:.1} ns/msg", pushes[pushes.len() / 2]);
    }
}

/// Model checks: every interleaving loom explores, with blocks of two slots so block hand-over,
/// recycling and the marker index are all reached. Run with
/// `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_`. Loom found two real bugs
/// here: a consumer that published its head after going idle, and a producer that wrote into a
/// block another producer installed without acquiring it.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc, AtomicUsize as LoomUsize, Mutex};
    use loom::sync::atomic::AtomicBool;

    /// One actor turn, run by whichever thread scheduled the owner: pop everything, then try to
    /// go idle; if something slipped in, go round again. `running` proves turns never overlap.
    fn turn(mb: &Mailbox<usize>, seen: &Mutex<Vec<usize>>, running: &AtomicBool) {
        assert!(!running.swap(true, Ordering::SeqCst), "two turns at once");
        // SAFETY: only the thread that scheduled the owner runs a turn, and turns never overlap
        // (asserted through `running`).
        let mut rx = unsafe { mb.consumer() };
        loop {
            while let Some(m) = rx.pop() {
                seen.lock().unwrap().push(m);
            }
            running.store(false, Ordering::SeqCst);
            if rx.try_idle() {
                return;
            }
            assert!(!running.swap(true, Ordering::SeqCst), "two turns at once");
            // A producer has claimed a slot and not yet written it.
            thread::yield_now();
        }
    }

    /// The models spin (a consumer waiting for a producer between claim and write), which makes
    /// long paths: allow them, and bound preemptions as loom's own docs recommend.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.max_branches = 100_000;
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(f);
    }

    /// `producers` producers, each pushing `per` messages and running a turn whenever its push
    /// woke the owner.
    fn producers_and_turns(producers: usize, per: usize) {
        model(move || {
            let mb = Arc::new(Mailbox::<usize>::new(true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let running = Arc::new(AtomicBool::new(false));
            let handles: Vec<_> = (0..producers)
                .map(|p| {
                    let (mb, seen, running) = (mb.clone(), seen.clone(), running.clone());
                    thread::spawn(move || {
                        for i in 0..per {
                            if mb.push(p * 10 + i).unwrap() {
                                // This push woke the owner: run its turn here, as a worker would.
                                turn(&mb, &seen, &running);
                            }
                        }
                    })
                })
                .collect();
            for p in handles {
                p.join().unwrap();
            }
            // Every message was consumed by some turn (none stranded), once, in per-producer order.
            let seen = seen.lock().unwrap().clone();
            let from0: Vec<_> = seen.iter().copied().filter(|m| *m < 10).collect();
            let from1: Vec<_> = seen.iter().copied().filter(|m| *m >= 10).collect();
            assert_eq!(from0, (0..per).collect::<Vec<_>>());
            let expected1 = if producers > 1 {
                (10..10 + per).collect()
            } else {
                vec![]
            };
            assert_eq!(from1, expected1);
        });
    }

    /// Two producers race to claim slots and to wake the owner; a turn may wait for the other
    /// producer's write.
    #[test]
    fn loom_two_producers_idle_protocol() {
        producers_and_turns(2, 1);
    }

    /// Five messages cross two block boundaries (two slots per block under loom), with the owner
    /// going idle and being woken between them and blocks recycled through the spare.
    #[test]
    fn loom_idle_protocol_across_blocks() {
        producers_and_turns(1, 5);
    }

    #[test]
    fn loom_block_boundary_single_producer() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(false));
            let producer = {
                let mb = mb.clone();
                thread::spawn(move || {
                    for i in 0..5 {
                        mb.push(i).unwrap();
                    }
                })
            };
            let mut seen = Vec::new();
            while seen.len() < 5 {
                // SAFETY: only this thread consumes.
                // SAFETY: this test thread is the only consumer.
                let mut rx = unsafe { mb.consumer() };
                while let Some(m) = rx.pop() {
                    seen.push(m);
                }
                drop(rx);
                thread::yield_now();
            }
            producer.join().unwrap();
            assert_eq!(seen, vec![0, 1, 2, 3, 4]);
        });
    }

    /// One thread per `(first, count)`, each pushing `first, first + 1, ...` (`count` messages);
    /// returns once all are done.
    fn push_from_threads(mb: &Arc<Mailbox<usize>>, producers: &[(usize, usize)]) {
        let handles: Vec<_> = producers
            .iter()
            .map(|&(first, count)| {
                let mb = mb.clone();
                thread::spawn(move || {
                    for i in 0..count {
                        mb.push(first + i).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Everything ready in `mb`, in order, and whether every claimed slot was read (the
    /// producers are done; the calling thread is the only consumer).
    fn pop_all(mb: &Mailbox<usize>) -> (Vec<usize>, bool) {
        let mut seen = Vec::new();
        // SAFETY: per the contract above, this thread is the only consumer.
        let mut rx = unsafe { mb.consumer() };
        while let Some(m) = rx.pop() {
            seen.push(m);
        }
        (seen, rx.is_drained())
    }

    /// Two producers race to install the very first block; the loser, preempted right after
    /// its compare-and-swap on the tail block failed, must not claim a slot with the block it
    /// saw installed once the other producer has filled that block and installed the next
    /// (the loser's message then went into the first block while its claim pointed past it:
    /// a message overwritten or lost, a slot never written and a consumer that waits for it
    /// forever; found as a livelocked engine in `troupe-trading bench compare`).
    #[test]
    fn loom_losing_the_first_block_race_takes_the_current_block() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(false));
            push_from_threads(&mb, &[(0, 1), (10, 2)]);
            let (mut seen, drained) = pop_all(&mb);
            assert!(drained, "a claimed slot was never written");
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 10, 11]);
        });
    }

    /// A mailbox whose consumer has drained two full blocks (two slots each under loom), so
    /// both are on its spare chain.
    fn two_blocks_on_the_spare_chain() -> Arc<Mailbox<usize>> {
        let mb = Arc::new(Mailbox::<usize>::new(false));
        for i in 0..4 {
            mb.push(100 + i).unwrap();
        }
        // SAFETY: no other consumer exists yet.
        let mut rx = unsafe { mb.consumer() };
        for i in 0..4 {
            assert_eq!(rx.pop(), Some(100 + i));
        }
        drop(rx);
        mb
    }

    /// The spare chain under two producers: two blocks recycled onto the chain (two kept under
    /// loom), then two producers race, one of them taking the whole chain to install its first
    /// block and the next installer finding the second linked ahead; then the consumer drains.
    /// (A consumer recycling while a producer takes the chain is the next model.) Every message
    /// arrives once, in per-producer order, and every block is freed exactly once (loom
    /// reports leaks and double frees).
    #[test]
    fn loom_spare_chain_taken_by_racing_producers() {
        model(|| {
            let mb = two_blocks_on_the_spare_chain();
            push_from_threads(&mb, &[(0, 2), (10, 2)]);
            let (seen, _) = pop_all(&mb);
            let from0: Vec<_> = seen.iter().copied().filter(|m| *m < 10).collect();
            let from1: Vec<_> = seen.iter().copied().filter(|m| *m >= 10).collect();
            assert_eq!(from0, vec![0, 1]);
            assert_eq!(from1, vec![10, 11]);
        });
    }

    /// A single producer after the consumer has drained two full blocks: the chain holds both,
    /// the installer takes them, and the block linked ahead is installed by the next installer
    /// while the consumer keeps draining.
    #[test]
    fn loom_prelinked_block_installed_while_consumer_drains() {
        model(|| {
            let mb = two_blocks_on_the_spare_chain();
            let producer = {
                let mb = mb.clone();
                thread::spawn(move || {
                    for i in 4..9 {
                        mb.push(i).unwrap();
                    }
                })
            };
            let mut seen = Vec::new();
            while seen.len() < 5 {
                // SAFETY: this test thread is the only consumer.
                let mut rx = unsafe { mb.consumer() };
                while let Some(m) = rx.pop() {
                    seen.push(m);
                }
                drop(rx);
                thread::yield_now();
            }
            producer.join().unwrap();
            assert_eq!(seen, vec![4, 5, 6, 7, 8]);
        });
    }

    #[test]
    fn loom_signal_never_lost() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(false));
            let woke = Arc::new(LoomUsize::new(0));
            let signaller = {
                let mb = mb.clone();
                let woke = woke.clone();
                thread::spawn(move || {
                    if mb.signal().unwrap() {
                        woke.fetch_add(1, Ordering::SeqCst);
                    }
                })
            };
            // The consumer's turn: it either sees the signal or goes idle and is woken.
            // SAFETY: only this thread consumes.
            // SAFETY: this test thread is the only consumer.
            let mut rx = unsafe { mb.consumer() };
            let mut got = rx.take_signaled();
            if !got {
                if rx.try_idle() {
                    drop(rx);
                    signaller.join().unwrap();
                    assert_eq!(woke.load(Ordering::SeqCst), 1, "idle owner must be woken");
                    // SAFETY: woken, so this thread consumes again.
                    // SAFETY: this test thread is the only consumer.
                    let mut rx = unsafe { mb.consumer() };
                    assert!(rx.take_signaled());
                    return;
                }
                got = rx.take_signaled();
            }
            assert!(got);
            drop(rx);
            signaller.join().unwrap();
            assert_eq!(
                woke.load(Ordering::SeqCst),
                0,
                "a running owner is not woken"
            );
        });
    }

    #[test]
    fn loom_close_races_push() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(false));
            let producer = {
                let mb = mb.clone();
                thread::spawn(move || {
                    let mut refused = 0;
                    for i in 0..3 {
                        if mb.push(i).is_err() {
                            refused += 1;
                        }
                    }
                    refused
                })
            };
            let mut drained = 0;
            {
                // SAFETY: only this thread consumes.
                // SAFETY: this test thread is the only consumer.
                let mut rx = unsafe { mb.consumer() };
                rx.close(|_| drained += 1);
            }
            let refused = producer.join().unwrap();
            assert_eq!(drained + refused, 3, "every message drained or handed back");
        });
    }

    /// A turn as `raw/cell.rs` runs one: the handed-off message (if any) first, then the
    /// mailbox; the handled count is added to `processed` with a plain load and store *before*
    /// the idle transition (the turn's last access). A count written after it would race the
    /// next turn, and loom would find the lost update.
    fn counted_turn(
        mb: &Mailbox<usize>,
        handed: Option<usize>,
        seen: &Mutex<Vec<usize>>,
        processed: &LoomUsize,
        holding: bool,
    ) {
        // SAFETY: only the thread that woke the owner runs its turn (the model's scheduling
        // rule, as the runtime's).
        let mut rx = unsafe { mb.consumer() };
        let mut handled = 0;
        if let Some(m) = handed {
            seen.lock().unwrap().push(m);
            handled += 1;
        }
        loop {
            if !holding {
                while let Some(m) = rx.pop() {
                    seen.lock().unwrap().push(m);
                    handled += 1;
                }
            }
            let before = processed.load(Ordering::Relaxed);
            processed.store(before + handled, Ordering::Relaxed);
            handled = 0;
            let idle = if holding {
                rx.try_idle_holding()
            } else {
                rx.try_idle()
            };
            if idle {
                return;
            }
            thread::yield_now();
        }
    }

    /// A sender as `Cell::push` is: hand the message off if the owner is idle and open (and then
    /// run its turn, as the worker does next), else push (and run the turn if that woke it).
    fn send(
        mb: &Mailbox<usize>,
        m: usize,
        seen: &Mutex<Vec<usize>>,
        processed: &LoomUsize,
        holding: bool,
    ) {
        if mb.looks_open_idle() {
            match mb.wake_idle() {
                Ok(true) => {
                    assert!(!holding, "a holding owner is never handed a message");
                    counted_turn(mb, Some(m), seen, processed, holding);
                    return;
                }
                Ok(false) => {}
                Err(_) => unreachable!("never closed here"),
            }
        }
        if mb.push(m).unwrap() {
            counted_turn(mb, None, seen, processed, holding);
        }
    }

    /// Two senders race hand-offs and pushes to an idle owner: every message is handled once,
    /// in each sender's order, turns never lose a count, and the hand-off never overtakes a
    /// queued message.
    #[test]
    fn loom_hand_off_and_turn_end() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let processed = Arc::new(LoomUsize::new(0));
            let senders: Vec<_> = (0..2)
                .map(|p| {
                    let (mb, seen, processed) = (mb.clone(), seen.clone(), processed.clone());
                    thread::spawn(move || {
                        for i in 0..2 {
                            send(&mb, p * 10 + i, &seen, &processed, false);
                        }
                    })
                })
                .collect();
            for s in senders {
                s.join().unwrap();
            }
            let seen = seen.lock().unwrap().clone();
            assert_eq!(
                processed.load(Ordering::Relaxed),
                4,
                "every handled message counted"
            );
            for p in 0..2 {
                let mine: Vec<usize> = seen.iter().copied().filter(|m| m / 10 == p).collect();
                assert_eq!(mine, vec![p * 10, p * 10 + 1], "once each, in order");
            }
        });
    }

    /// An owner that idles holding its messages (suspended, awaiting) is never handed one:
    /// senders queue, and each wake runs a turn that keeps holding.
    #[test]
    fn loom_holding_owner_gets_no_hand_off() {
        model(|| {
            let mb = Arc::new(Mailbox::<usize>::new(false));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let processed = Arc::new(LoomUsize::new(0));
            // The owner's turn: it holds.
            counted_turn(&mb, None, &seen, &processed, true);
            let sender = {
                let (mb, seen, processed) = (mb.clone(), seen.clone(), processed.clone());
                thread::spawn(move || {
                    for i in 0..2 {
                        send(&mb, i, &seen, &processed, true);
                    }
                })
            };
            sender.join().unwrap();
            assert!(seen.lock().unwrap().is_empty(), "held, not handled");
            assert_eq!(mb.len(), 2, "both queued");
        });
    }
}
