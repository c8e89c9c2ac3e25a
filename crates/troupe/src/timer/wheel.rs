//! A hierarchical hashed timing wheel: O(1) insert and cancel, entries fired by deadline.
//!
//! # What
//! Time is an integer tick count (the service uses 1 ms ticks). Each pending entry hangs on one
//! slot list of one level: level `L` has 64 slots, each `64^L` ticks wide, so level 0 resolves
//! single ticks over 64 ticks, level 1 covers 4,096 ticks in 64-tick slots, and so on. This is
//! scheme 7 of Varghese and Lauck, "Hashed and Hierarchical Timing Wheels" (SOSP 1987), the
//! layout tokio's `runtime/time` driver also uses. Tokio stops at six levels (about two years of
//! milliseconds) and caps deadlines; here [`LEVELS`] = 11 levels cover all 64 bits of a tick, so
//! every `u64` deadline has a slot of its own: no overflow list, no clamping, no wrap-around.
//!
//! # Where an entry lives
//! Read ticks as base-64 numbers: digit `L` of a tick is its bits `6L..6L+6`. Let `e` be
//! `elapsed`, the tick the wheel has been advanced to. An entry with deadline `d > e` sits on the
//! level of the highest digit in which `d` and `e` differ (level 0 if only digit 0 differs), in
//! the slot numbered by `d`'s digit on that level. An entry with `d <= e` (inserted late, or
//! re-armed into the past) sits on the `expired` list and fires on the next [`Wheel::advance`].
//!
//! # Invariants
//! 1. An entry on level `L`, slot `s`, agrees with `e` on every digit above `L`, and `s` is
//!    greater than `e`'s digit `L`. So a level never wraps: its occupied slots all lie ahead of
//!    `e` within `e`'s current turn of that level.
//! 2. Hence every slot of level `L` starts after every slot of level `L - 1` ends: the slot with
//!    the earliest work is the lowest occupied slot (one `trailing_zeros` on the level's
//!    occupancy bits) of the lowest non-empty level.
//! 3. A level-0 slot starts exactly at its entries' deadline; a higher slot starts at or before
//!    each of its entries' deadlines. [`Wheel::next_deadline`] is therefore a lower bound on the
//!    earliest deadline (exact when that entry is on level 0): the tick at which the wheel next
//!    has work to do, either firing or moving entries down.
//! 4. `occupied[L]` has bit `s` set exactly when slot list `(L, s)` is non-empty.
//!
//! # Advancing
//! `advance(now)` fires the expired list, then repeatedly takes the earliest occupied slot whose
//! start is `<= now`, moves `e` to that start and empties the slot: entries whose deadline is
//! `e` fire, the rest *cascade* to a lower level (each entry moves down at most ten times in its
//! life, usually once or twice). Finally `e = now`. Moving `e` only to slot starts and then to a
//! `now` before every remaining slot keeps invariant 1. Within one call, entries that were
//! already overdue when inserted fire first, in insertion order (sorting them would cost more
//! than O(1), and they are all late anyway); the others follow in non-decreasing deadline order.
//! An entry re-armed during the call (see [`Wheel::advance_rearm`]) waits for the next call, so
//! a call always terminates.
//!
//! # Cancel, and stale keys
//! Entries live in a [`Slab`]; slot lists are doubly linked through slab indices, and each entry
//! records which list it is on, so `remove` unlinks it in O(1) without searching. A [`Key`] is
//! the slab index plus a *stamp* drawn from a counter that never repeats, so the key of an entry
//! that has fired or been removed never matches a later entry reusing the index.
//!
//! # Memory
//! Once the slab has grown to the peak number of pending entries, insert, remove and advance
//! allocate nothing. The wheel uses no `unsafe`.

use slab::Slab;

/// Bits of a tick per level; a level has `1 << SLOT_BITS` slots.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Enough levels for every bit of a `u64` tick (the top level uses 4 of its 6 bits).
const LEVELS: usize = u64::BITS.div_ceil(SLOT_BITS) as usize;

/// List ids: `level * SLOTS + slot` for the slots, then the expired list.
const EXPIRED: u16 = (LEVELS * SLOTS) as u16;
const LISTS: usize = LEVELS * SLOTS + 1;
/// The list id of an entry on no list: it is being fired (only inside `advance`).
const DETACHED: u16 = u16::MAX;
/// The null link.
const NIL: u32 = u32::MAX;

/// Names one entry of a [`Wheel`] for as long as the entry is pending; afterwards it matches
/// nothing, even if its slab index is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    index: u32,
    stamp: u64,
}

struct Entry<T> {
    value: T,
    deadline: u64,
    /// Unique per insert: a key matches only if its stamp equals this.
    stamp: u64,
    prev: u32,
    next: u32,
    /// The list this entry is on (a slot, `EXPIRED`, or `DETACHED` while being fired).
    list: u16,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };
}

/// A hierarchical timing wheel of values of type `T`. See the module note.
pub(crate) struct Wheel<T> {
    entries: Slab<Entry<T>>,
    /// Every slot list, then the expired list, indexed by list id.
    lists: Box<[List]>,
    /// Bit `s` of `occupied[L]` is set when slot `s` of level `L` is non-empty.
    occupied: [u64; LEVELS],
    /// The tick the wheel has been advanced to.
    elapsed: u64,
    next_stamp: u64,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel at tick 0.
    pub(crate) fn new() -> Self {
        Self {
            entries: Slab::new(),
            lists: vec![List::EMPTY; LISTS].into_boxed_slice(),
            occupied: [0; LEVELS],
            elapsed: 0,
            next_stamp: 0,
        }
    }

    /// The tick the wheel was last advanced to.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Pending entries.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry is pending.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries the wheel can hold without allocating.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Adds `value`, due at tick `deadline`. A deadline at or before [`Wheel::elapsed`] fires on
    /// the next `advance`.
    ///
    /// # Panics
    /// If `u32::MAX - 1` entries are already pending.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Key {
        assert!(
            self.entries.vacant_key() < NIL as usize,
            "timing wheel is full"
        );
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let index = self.entries.insert(Entry {
            value,
            deadline,
            stamp,
            prev: NIL,
            next: NIL,
            list: DETACHED,
        }) as u32;
        self.link(index, self.list_for(deadline));
        Key { index, stamp }
    }

    /// Removes the entry `key` names and returns its value, or `None` if it has already fired
    /// or been removed.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        if self.entries.get(key.index as usize)?.stamp != key.stamp {
            return None;
        }
        self.unlink(key.index);
        Some(self.entries.remove(key.index as usize).value)
    }

    /// The value of the pending entry `key` names.
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        self.entries
            .get_mut(key.index as usize)
            .filter(|entry| entry.stamp == key.stamp)
            .map(|entry| &mut entry.value)
    }

    /// The deadline of the pending entry `key` names.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn deadline(&self, key: Key) -> Option<u64> {
        self.entries
            .get(key.index as usize)
            .filter(|entry| entry.stamp == key.stamp)
            .map(|entry| entry.deadline)
    }

    /// The tick at which `advance` next has work to do (fire or cascade), `None` if the wheel is
    /// empty. Never later than the earliest deadline; equal to it when that entry is on level 0,
    /// [`Wheel::elapsed`] when an entry is already due.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        if self.lists[EXPIRED as usize].head != NIL {
            return Some(self.elapsed);
        }
        self.next_slot().map(|(_, start)| start)
    }

    /// Moves the wheel to tick `now`, removing every entry whose deadline is `<= now` and
    /// passing its value to `fire`, each exactly once: first the entries that were already
    /// overdue when inserted (in insertion order), then the rest in non-decreasing deadline
    /// order. A `now` before [`Wheel::elapsed`] is taken as `elapsed` (time does not run
    /// backwards).
    ///
    /// `fire` must not panic: the entries of the slot being emptied would be lost.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(T)) {
        self.expire(now, |entries, index| {
            fire(entries.remove(index as usize).value);
            None
        });
    }

    /// Like [`Wheel::advance`], but `fire` sees each due entry in place, with its key, and
    /// decides its fate: `Some(deadline)` keeps the entry, under the same key, due again at
    /// `deadline` (it fires at the earliest in the next call); `None` removes and drops it.
    pub(crate) fn advance_rearm(
        &mut self,
        now: u64,
        mut fire: impl FnMut(Key, &mut T) -> Option<u64>,
    ) {
        self.expire(now, |entries, index| {
            let entry = &mut entries[index as usize];
            let key = Key {
                index,
                stamp: entry.stamp,
            };
            let rearm = fire(key, &mut entry.value);
            if rearm.is_none() {
                entries.remove(index as usize);
            }
            rearm
        });
    }

    /// The loop behind both `advance`s. `on_due` gets each due entry, already unlinked; it
    /// returns a new deadline to keep the entry, or `None` after removing it from the slab.
    fn expire(
        &mut self,
        now: u64,
        mut on_due: impl FnMut(&mut Slab<Entry<T>>, u32) -> Option<u64>,
    ) {
        let now = now.max(self.elapsed);
        // Re-armed entries wait on a chain of their own (through `next`) until the end, so no
        // entry fires twice in one call, and the call ends even if `on_due` always re-arms.
        let mut rearmed = NIL;
        let mut fire = |entries: &mut Slab<Entry<T>>, index: u32| {
            entries[index as usize].list = DETACHED;
            if let Some(deadline) = on_due(entries, index) {
                let entry = &mut entries[index as usize];
                entry.deadline = deadline;
                entry.next = rearmed;
                rearmed = index;
            }
        };

        // Entries that were due when they were inserted: earlier than anything on a slot.
        let mut cursor = self.take_list(EXPIRED);
        while cursor != NIL {
            let next = self.entries[cursor as usize].next;
            fire(&mut self.entries, cursor);
            cursor = next;
        }

        while let Some((list, start)) = self.next_slot().filter(|&(_, start)| start <= now) {
            self.elapsed = start;
            // The whole slot is detached first: entries cascading from it land on lower levels,
            // never back on it.
            let mut cursor = self.take_list(list);
            while cursor != NIL {
                let entry = &self.entries[cursor as usize];
                let (next, deadline) = (entry.next, entry.deadline);
                debug_assert!(deadline >= start);
                if deadline == start {
                    fire(&mut self.entries, cursor);
                } else {
                    self.link(cursor, self.list_for(deadline));
                }
                cursor = next;
            }
        }
        self.elapsed = now;

        let mut cursor = rearmed;
        while cursor != NIL {
            let entry = &self.entries[cursor as usize];
            let (next, deadline) = (entry.next, entry.deadline);
            self.link(cursor, self.list_for(deadline));
            cursor = next;
        }
    }

    /// The earliest occupied slot (list id and start tick), by invariant 2.
    fn next_slot(&self) -> Option<(u16, u64)> {
        let (level, &bits) = self
            .occupied
            .iter()
            .enumerate()
            .find(|&(_, &bits)| bits != 0)?;
        let slot = bits.trailing_zeros() as usize;
        debug_assert!(slot > digit(self.elapsed, level), "invariant 1");
        let start = turn_start(self.elapsed, level) + ((slot as u64) << (SLOT_BITS * level as u32));
        Some(((level * SLOTS + slot) as u16, start))
    }

    /// The list an entry due at `deadline` belongs on, given the current `elapsed`.
    fn list_for(&self, deadline: u64) -> u16 {
        if deadline <= self.elapsed {
            return EXPIRED;
        }
        let level = level_for(self.elapsed, deadline);
        (level * SLOTS + digit(deadline, level)) as u16
    }

    /// Appends entry `index` (on no list) to list `list`.
    fn link(&mut self, index: u32, list: u16) {
        let tail = self.lists[list as usize].tail;
        let entry = &mut self.entries[index as usize];
        entry.prev = tail;
        entry.next = NIL;
        entry.list = list;
        if tail == NIL {
            self.lists[list as usize].head = index;
        } else {
            self.entries[tail as usize].next = index;
        }
        self.lists[list as usize].tail = index;
        if list != EXPIRED {
            self.occupied[list as usize / SLOTS] |= 1 << (list as usize % SLOTS);
        }
    }

    /// Takes entry `index` off the list it is on.
    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (prev, next, list) = (entry.prev, entry.next, entry.list);
        debug_assert_ne!(
            list, DETACHED,
            "only `advance` detaches, and it holds `&mut self`"
        );
        if prev == NIL {
            self.lists[list as usize].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list as usize].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        if list != EXPIRED && self.lists[list as usize].head == NIL {
            self.occupied[list as usize / SLOTS] &= !(1 << (list as usize % SLOTS));
        }
    }

    /// Empties list `list` and returns its old head; the entries keep their `next` links.
    fn take_list(&mut self, list: u16) -> u32 {
        let head = self.lists[list as usize].head;
        self.lists[list as usize] = List::EMPTY;
        if list != EXPIRED {
            self.occupied[list as usize / SLOTS] &= !(1 << (list as usize % SLOTS));
        }
        head
    }

    /// Checks every invariant of the module note, and that every entry is on exactly one list.
    #[cfg(all(test, not(troupe_loom)))]
    fn assert_consistent(&self) {
        let mut seen = 0;
        for (id, list) in self.lists.iter().enumerate() {
            let mut prev = NIL;
            let mut cursor = list.head;
            while cursor != NIL {
                let entry = &self.entries[cursor as usize];
                assert_eq!(entry.list as usize, id);
                assert_eq!(entry.prev, prev);
                if id == EXPIRED as usize {
                    assert!(entry.deadline <= self.elapsed);
                } else {
                    let (level, slot) = (id / SLOTS, id % SLOTS);
                    assert!(entry.deadline > self.elapsed);
                    assert_eq!(level_for(self.elapsed, entry.deadline), level);
                    assert_eq!(digit(entry.deadline, level), slot);
                }
                seen += 1;
                prev = cursor;
                cursor = entry.next;
            }
            assert_eq!(list.tail, prev);
            if id != EXPIRED as usize {
                let bit = self.occupied[id / SLOTS] >> (id % SLOTS) & 1;
                assert_eq!(bit == 1, list.head != NIL, "occupancy bit of list {id}");
            }
        }
        assert_eq!(seen, self.entries.len());
    }
}

/// Digit `level` (base 64) of `tick`: its slot on that level.
fn digit(tick: u64, level: usize) -> usize {
    ((tick >> (SLOT_BITS * level as u32)) & SLOT_MASK) as usize
}

/// The level of the highest base-64 digit in which `elapsed` and `deadline` differ (0 if they
/// differ only in digit 0 or not at all).
fn level_for(elapsed: u64, deadline: u64) -> usize {
    let highest_bit = 63 - ((elapsed ^ deadline) | SLOT_MASK).leading_zeros();
    (highest_bit / SLOT_BITS) as usize
}

/// The first tick of `tick`'s current turn of `level`: `tick` with digits `0..=level` cleared.
fn turn_start(tick: u64, level: usize) -> u64 {
    let bits = SLOT_BITS * (level as u32 + 1);
    tick.checked_shr(bits).map_or(0, |high| high << bits)
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use std::collections::{BTreeSet, HashMap};
    use std::time::Instant;

    use super::*;

    /// A small deterministic generator (splitmix64), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    fn drain(wheel: &mut Wheel<u64>, now: u64) -> Vec<u64> {
        let mut fired = Vec::new();
        wheel.advance(now, |value| fired.push(value));
        wheel.assert_consistent();
        fired
    }

    #[test]
    fn level_and_slot_arithmetic() {
        assert_eq!(LEVELS, 11);
        assert_eq!(level_for(0, 1), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(63, 64), 1);
        assert_eq!(level_for(64, 127), 0);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(0, 1 << 59), 9);
        assert_eq!(level_for(0, 1 << 60), 10);
        assert_eq!(level_for(0, u64::MAX), 10);
        assert_eq!(digit(u64::MAX, 10), 15);
        assert_eq!(turn_start(u64::MAX, 10), 0);
        assert_eq!(turn_start(5000, 0), 4992);
        assert_eq!(turn_start(5000, 1), 4096);
    }

    #[test]
    fn fires_in_deadline_order() {
        let mut wheel = Wheel::new();
        let mut rng = Rng(1);
        let mut deadlines: Vec<u64> = (0..2000).map(|_| 1 + rng.below(300_000)).collect();
        for &deadline in &deadlines {
            wheel.insert(deadline, deadline);
        }
        wheel.assert_consistent();
        let fired = drain(&mut wheel, 1_000_000);
        deadlines.sort_unstable();
        assert_eq!(fired, deadlines);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_deadline(), None);
    }

    #[test]
    fn each_entry_fires_exactly_at_its_deadline_tick() {
        let mut wheel = Wheel::new();
        let mut rng = Rng(2);
        for _ in 0..3000 {
            let deadline = 1 + rng.below(20_000);
            wheel.insert(deadline, deadline);
        }
        let mut count = 0;
        for now in 0..=20_000 {
            wheel.advance(now, |deadline| {
                assert_eq!(deadline, now);
                count += 1;
            });
        }
        assert_eq!(count, 3000);
        wheel.assert_consistent();
    }

    #[test]
    fn same_deadline_fires_in_insertion_order() {
        let mut wheel = Wheel::new();
        for value in 0..100 {
            wheel.insert(10, value);
        }
        assert_eq!(drain(&mut wheel, 10), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn cascades_through_every_level() {
        let mut wheel = Wheel::new();
        let mut deadlines = Vec::new();
        for level in 1..LEVELS as u32 {
            let base = 1u64 << (SLOT_BITS * level);
            deadlines.extend([base - 1, base, base + 1, 3 * base + 5]);
        }
        deadlines.push(u64::MAX);
        deadlines.sort_unstable();
        deadlines.dedup();
        for &deadline in &deadlines {
            wheel.insert(deadline, deadline);
        }
        wheel.assert_consistent();
        // Jump to one tick before each deadline (nothing fires), then onto it (exactly it fires).
        for &deadline in &deadlines {
            assert!(
                drain(&mut wheel, deadline - 1).is_empty(),
                "{deadline} early"
            );
            let next = wheel.next_deadline().unwrap();
            assert!(
                next <= deadline,
                "next_deadline {next} after the deadline {deadline}"
            );
            assert_eq!(drain(&mut wheel, deadline), [deadline]);
        }
        assert!(wheel.is_empty());
    }

    #[test]
    fn next_deadline_is_exact_on_level_zero_and_a_lower_bound_above() {
        let mut wheel = Wheel::new();
        assert_eq!(wheel.next_deadline(), None);
        wheel.insert(10_000, 0);
        let bound = wheel.next_deadline().unwrap();
        assert!(bound <= 10_000);
        // Advancing to the bound moves the entry down; eventually the bound is the deadline.
        let mut steps = 0;
        while wheel.next_deadline() != Some(10_000) {
            let next = wheel.next_deadline().unwrap();
            assert!(drain(&mut wheel, next).is_empty());
            steps += 1;
            assert!(steps < LEVELS);
        }
        wheel.insert(9_990, 1);
        assert_eq!(wheel.next_deadline(), Some(9_990));
    }

    #[test]
    fn cancelled_entry_never_fires() {
        let mut wheel = Wheel::new();
        let keep = wheel.insert(100, 1);
        let cancel = wheel.insert(100, 2);
        let far = wheel.insert(1 << 40, 3);
        assert_eq!(wheel.remove(cancel), Some(2));
        assert_eq!(wheel.remove(cancel), None, "a second cancel finds nothing");
        assert_eq!(wheel.remove(far), Some(3));
        assert_eq!(wheel.len(), 1);
        wheel.assert_consistent();
        assert_eq!(drain(&mut wheel, u64::MAX), [1]);
        assert_eq!(
            wheel.remove(keep),
            None,
            "fired entries cannot be cancelled"
        );
    }

    #[test]
    fn stale_key_does_not_touch_a_reused_entry() {
        let mut wheel = Wheel::new();
        let old = wheel.insert(50, 1);
        assert_eq!(wheel.remove(old), Some(1));
        let new = wheel.insert(60, 2);
        assert_eq!(old.index, new.index, "the slab reuses the index");
        assert_eq!(wheel.remove(old), None);
        assert_eq!(wheel.get_mut(old), None);
        assert_eq!(wheel.deadline(old), None);
        assert_eq!(wheel.deadline(new), Some(60));

        // The same after firing instead of removal.
        assert_eq!(drain(&mut wheel, 60), [2]);
        let newer = wheel.insert(70, 3);
        assert_eq!(newer.index, new.index);
        assert_eq!(wheel.remove(new), None);
        assert_eq!(drain(&mut wheel, 70), [3]);
    }

    #[test]
    fn far_future_deadlines() {
        let mut wheel = Wheel::new();
        for deadline in [u64::MAX, u64::MAX - 1, 1 << 63, 1 << 40, 1 << 36] {
            wheel.insert(deadline, deadline);
        }
        wheel.assert_consistent();
        assert!(drain(&mut wheel, (1 << 36) - 1).is_empty());
        assert_eq!(drain(&mut wheel, 1 << 36), [1 << 36]);
        assert_eq!(drain(&mut wheel, u64::MAX - 2), [1 << 40, 1 << 63]);
        assert_eq!(drain(&mut wheel, u64::MAX), [u64::MAX - 1, u64::MAX]);
        // A wheel at the end of time still takes (immediately due) entries.
        wheel.insert(5, 5);
        assert_eq!(drain(&mut wheel, u64::MAX), [5]);
    }

    #[test]
    fn past_deadlines_fire_on_the_next_advance() {
        let mut wheel = Wheel::new();
        wheel.insert(0, 0);
        assert_eq!(wheel.next_deadline(), Some(0));
        assert_eq!(drain(&mut wheel, 0), [0]);

        assert!(drain(&mut wheel, 1000).is_empty());
        let late = wheel.insert(10, 10);
        wheel.insert(1000, 1000);
        wheel.insert(1001, 1001);
        assert_eq!(wheel.next_deadline(), Some(1000), "already due");
        wheel.assert_consistent();
        assert_eq!(
            wheel.remove(late),
            Some(10),
            "a due entry can still be cancelled"
        );
        wheel.insert(20, 20);
        // Time does not run backwards: an earlier `now` still fires what is due.
        assert_eq!(drain(&mut wheel, 500), [1000, 20]);
        assert_eq!(wheel.elapsed(), 1000);
        assert_eq!(drain(&mut wheel, 1001), [1001]);
    }

    #[test]
    fn rearmed_entry_keeps_its_key_and_fires_once_per_call() {
        let mut wheel = Wheel::new();
        let key = wheel.insert(10, 0u32);
        let other = wheel.insert(25, 100u32);
        // Re-arm every 10 ticks; even a new deadline already passed waits for the next call.
        let mut calls = Vec::new();
        for now in [10, 20, 30, 100] {
            wheel.advance_rearm(now, |fired, count| {
                calls.push((now, *count));
                *count += 1;
                if fired == other {
                    None
                } else {
                    Some(now - 5)
                }
            });
            wheel.assert_consistent();
        }
        assert_eq!(calls, [(10, 0), (20, 1), (30, 2), (30, 100), (100, 3)]);
        assert_eq!(wheel.get_mut(other), None);
        assert_eq!(wheel.deadline(key), Some(95));
        assert_eq!(wheel.remove(key), Some(4));
        assert!(wheel.is_empty());
    }

    #[test]
    fn memory_is_reused_once_grown() {
        let mut wheel = Wheel::new();
        let mut rng = Rng(3);
        for round in 0..3 {
            let base = wheel.elapsed();
            let keys: Vec<Key> = (0..10_000)
                .map(|i| wheel.insert(base + 1 + rng.below(100_000), i))
                .collect();
            for key in keys.iter().step_by(2) {
                assert!(wheel.remove(*key).is_some());
            }
            assert_eq!(drain(&mut wheel, base + 100_000).len(), 5000);
            assert!(wheel.is_empty());
            if round == 0 {
                assert!(wheel.capacity() >= 10_000);
            }
            assert!(wheel.capacity() < 20_000, "round {round} grew the slab");
        }
    }

    /// Random inserts (due soon, later, far away, already past), cancels (live and stale) and
    /// advances (small steps, big jumps), checked against a sorted set.
    #[test]
    fn agrees_with_a_sorted_set_under_random_operations() {
        let mut rng = Rng(4);
        let mut wheel = Wheel::new();
        let mut model: BTreeSet<(u64, u64)> = BTreeSet::new();
        let mut keys: HashMap<u64, (Key, u64)> = HashMap::new();
        let mut dead: Vec<Key> = Vec::new();
        let mut now = 0u64;
        let mut next_id = 0u64;
        for op in 0..40_000u32 {
            match rng.below(10) {
                0..=4 => {
                    let offset = match rng.below(8) {
                        0 => rng.below(4),
                        1..=3 => rng.below(300),
                        4 | 5 => rng.below(50_000),
                        6 => rng.below(1 << 40),
                        _ => rng.next(),
                    };
                    let deadline = if rng.below(16) == 0 {
                        now.saturating_sub(offset)
                    } else {
                        now.saturating_add(offset)
                    };
                    let id = next_id;
                    next_id += 1;
                    keys.insert(id, (wheel.insert(deadline, id), deadline));
                    model.insert((deadline, id));
                }
                5 | 6 => {
                    let id = rng.below(next_id.max(1));
                    if let Some((key, deadline)) = keys.remove(&id) {
                        assert_eq!(wheel.remove(key), Some(id));
                        model.remove(&(deadline, id));
                        dead.push(key);
                    } else if !dead.is_empty() {
                        let stale = dead[rng.below(dead.len() as u64) as usize];
                        assert_eq!(wheel.remove(stale), None);
                    }
                }
                _ => {
                    let step = match rng.below(10) {
                        0..=5 => rng.below(8),
                        6..=8 => rng.below(2_000),
                        _ => rng.below(1 << 30),
                    };
                    now = now.saturating_add(step);
                    let mut fired = Vec::new();
                    let was = wheel.elapsed();
                    wheel.advance(now, |id| fired.push((keys[&id].1, id)));
                    // Overdue entries come first, in any order; then deadline order.
                    let on_time = fired.iter().position(|&(d, _)| d > was);
                    let on_time = &fired[on_time.unwrap_or(fired.len())..];
                    assert!(on_time.iter().all(|&(d, _)| d > was), "overdue ones first");
                    assert!(
                        on_time.windows(2).all(|w| w[0].0 <= w[1].0),
                        "deadline order"
                    );
                    let mut expected: Vec<(u64, u64)> =
                        model.range(..=(now, u64::MAX)).copied().collect();
                    fired.sort_unstable();
                    expected.sort_unstable();
                    assert_eq!(fired, expected, "at tick {now}");
                    for &(deadline, id) in &expected {
                        model.remove(&(deadline, id));
                        dead.push(keys.remove(&id).unwrap().0);
                    }
                    if let Some(next) = wheel.next_deadline() {
                        assert!(next > now);
                        assert!(next <= model.first().unwrap().0);
                    }
                }
            }
            assert_eq!(wheel.len(), model.len());
            if op % 64 == 0 {
                wheel.assert_consistent();
            }
        }
        wheel.assert_consistent();
    }

    /// Not a test: a rough cost per operation for a million entries. Run with
    /// `cargo test --release -p troupe measure_wheel -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_wheel_with_a_million_entries() {
        const N: u64 = 1_000_000;
        let mut rng = Rng(5);
        let deadlines: Vec<u64> = (0..N).map(|_| 1 + rng.below(2_000)).collect();
        let mut wheel = Wheel::new();
        for round in 0..2 {
            let base = wheel.elapsed();
            let start = Instant::now();
            let keys: Vec<Key> = deadlines
                .iter()
                .map(|&d| wheel.insert(base + d, d))
                .collect();
            let inserted = start.elapsed();
            let start = Instant::now();
            for key in keys.iter().step_by(2) {
                wheel.remove(*key);
            }
            let cancelled = start.elapsed();
            let start = Instant::now();
            let mut fired = 0u64;
            for now in base..=base + 2_000 {
                wheel.advance(now, |_| fired += 1);
            }
            let advanced = start.elapsed();
            assert_eq!(fired, N / 2);
            println!(
                "round {round}: insert {:.1} ns, cancel {:.1} ns, fire {:.1} ns (2001 advances)",
                inserted.as_nanos() as f64 / N as f64,
                cancelled.as_nanos() as f64 / (N / 2) as f64,
                advanced.as_nanos() as f64 / (N / 2) as f64,
            );
        }
    }
}
