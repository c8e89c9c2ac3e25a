//! The set of order keys a book has accepted: every order's (client, client order id), kept
//! forever so a reused id is refused.
//!
//! Two costs of a plain hash set showed in the benchmarks. Its table doubles when full and
//! moves every key at once: with hundreds of thousands of keys, a pause of a millisecond or
//! more, during which the engine's mailbox fills (the open loop saw it as a p99 of
//! milliseconds). And its keys land at random places in a table far larger than the cache, so
//! every check and every insert is a cache miss (a third of the engines' time in `perf`).
//!
//! Clients number their orders upwards, so per client the ids are kept in two parts: the
//! *rising* ids, each larger than every id before it, in order (a new id is checked against
//! the last one and appended: O(1), in cache), and `others`, a B-tree for the ids that came
//! out of order (O(log n)). An id is in the set if it is in either part. The newest 28 rising
//! ids sit in the client's entry itself, in its first cache line (`Recent`); the older ones
//! in *segments*, which the entry's recent ids join 28 at a time.
//!
//! A segment holds up to [`SEGMENT`] ids as 16-bit distances from its first one; an id too far
//! from it starts a new segment. Stored whole (8 bytes an id), the appends were the exchange's
//! largest cost: each book sees every fifteenth id of a client, so each of the engines'
//! 1,200 (client, book) entries wrote a fresh cache line every eight orders, and the store
//! into that line held 40 % of `Shard::replay`'s samples. A build that skipped the store (for
//! measuring only) cut the one worker's CPU per order from 0.64 to 0.47-0.53 µs.
//! At 2 bytes an id the line lasts 32 ids and the set is a quarter of the size (3 MB rather
//! than 12 for the seed's 750,000 orders). A client whose ids jump by more than 65,535 each
//! time gets a segment per id (32 bytes, and nothing allocated for it). Appended to the
//! entry's own line rather than to a segment's end, a new id costs one cache miss, not two
//! (see `ClientIds`).
//!
//! A segment's offsets grow by doubling, so the largest copy is 8 KiB: the earlier design,
//! growing one vector of every id, copied megabytes and faulted in fresh pages, and with
//! every book growing at about the same moment that showed as a pause in the open loop.
//! The B-tree grows a node at a time.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};

use crate::hash::BuildKeyHasher;
use crate::order::{ClientId, OrderKey};

/// A set of order keys. See the module note.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeySet {
    /// The entries of clients numbered below [`NEAR`], by number. An exchange numbers its
    /// clients from 0, so this holds them all: an order finds its entry by an index, where a
    /// hash table took a probe of its control bytes and then the bucket (the probe was a fifth
    /// of `Shard::replay`'s samples).
    near: Vec<Option<ClientIds>>,
    /// Every other client's entry.
    far: HashMap<ClientId, ClientIds, BuildKeyHasher>,
    len: usize,
}

/// Clients numbered below this are indexed directly ([`KeySet::near`]): at most 128 KiB per
/// book, reached only by a client with that number.
const NEAR: u32 = 1024;

/// Ids per segment, at most (8 KiB of offsets).
const SEGMENT: usize = 4096;

/// An id's distance from its segment's first id.
type Offset = u16;

/// Rising ids, stored as distances from the first: `base`, then `base + o` for each `o` of
/// `offsets`. Invariant: the offsets are strictly increasing and above 0, and there are fewer
/// than [`SEGMENT`] of them.
#[derive(Debug, Clone)]
struct Segment {
    base: u64,
    offsets: Vec<Offset>,
}

impl Segment {
    /// A segment of one id (nothing allocated until a second one comes).
    fn new(id: u64) -> Self {
        Segment {
            base: id,
            offsets: Vec::new(),
        }
    }

    fn contains(&self, id: u64) -> bool {
        run_contains(self.base, &self.offsets, id)
    }

    /// Appends `id`, larger than every id here, if the segment has room and `id` is near
    /// enough to its first one; false otherwise (nothing changed).
    #[inline]
    fn try_push(&mut self, id: u64) -> bool {
        if self.offsets.len() + 1 >= SEGMENT {
            return false;
        }
        match Offset::try_from(id - self.base) {
            Ok(offset) => {
                self.offsets.push(offset);
                true
            }
            Err(_) => false,
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        run_iter(self.base, &self.offsets)
    }
}

/// Whether the run `base`, then `base + o` for each of `offsets` (strictly increasing, above
/// 0), holds `id`.
fn run_contains(base: u64, offsets: &[Offset], id: u64) -> bool {
    match id.checked_sub(base) {
        Some(0) => true,
        Some(distance) => {
            Offset::try_from(distance).is_ok_and(|offset| offsets.binary_search(&offset).is_ok())
        }
        None => false,
    }
}

/// The ids of the run `base`, then `base + o` for each of `offsets`, in order.
fn run_iter(base: u64, offsets: &[Offset]) -> impl Iterator<Item = u64> + '_ {
    std::iter::once(base).chain(offsets.iter().map(move |&o| base + u64::from(o)))
}

/// Ids that fit in one cache line beside their first one.
const RECENT: usize = 27;

/// A client's newest rising ids, in its entry: `base`, then `base + o` for each `o` of
/// `offsets[..len]`. Invariant: those offsets are strictly increasing and above 0.
#[derive(Debug, Clone)]
#[repr(C)]
struct Recent {
    base: u64,
    len: u16,
    offsets: [Offset; RECENT],
}

impl Recent {
    fn new(id: u64) -> Self {
        Recent {
            base: id,
            len: 0,
            offsets: [0; RECENT],
        }
    }

    fn offsets(&self) -> &[Offset] {
        &self.offsets[..usize::from(self.len)]
    }

    #[inline]
    fn last(&self) -> u64 {
        self.base + self.offsets().last().map_or(0, |&o| u64::from(o))
    }

    fn contains(&self, id: u64) -> bool {
        run_contains(self.base, self.offsets(), id)
    }

    /// Appends `id`, larger than every id here, if there is room and `id` is near enough to
    /// the first one; false otherwise (nothing changed).
    #[inline]
    fn try_push(&mut self, id: u64) -> bool {
        let len = usize::from(self.len);
        match Offset::try_from(id - self.base) {
            Ok(offset) if len < RECENT => {
                self.offsets[len] = offset;
                self.len += 1;
                true
            }
            _ => false,
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        run_iter(self.base, self.offsets())
    }
}

// The recent ids fill the entry's first cache line exactly.
const _: () =
    assert!(std::mem::size_of::<Recent>() == 64 && std::mem::align_of::<ClientIds>() == 64);

/// One client's ids (an entry exists only once the client has one). Invariant: the ids of
/// `full`, then of `recent`, are strictly increasing; every id in `others` is smaller than
/// the last of `recent`.
///
/// The newest ids live in the entry's first cache line (the entry is aligned to one), so the
/// check and the append of a new id, the common case, touch that line alone. Appended to a
/// segment the entry pointed to, each took two cache misses in a row, the entry and then
/// the segment's end: with 40 clients' orders interleaved over 15 books, the store into the
/// segment held 79 % of the appends' samples, and the appends 9 % of the one worker's.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct ClientIds {
    recent: Recent,
    /// The earlier rising ids, in order. `recent`'s move here when it is full, joining the
    /// last segment where they fit.
    full: Vec<Segment>,
    others: BTreeSet<u64>,
}

impl ClientIds {
    fn new(id: u64) -> Self {
        ClientIds {
            recent: Recent::new(id),
            full: Vec::new(),
            others: BTreeSet::new(),
        }
    }

    #[inline]
    fn last(&self) -> u64 {
        self.recent.last()
    }

    fn in_segments(&self, id: u64) -> bool {
        if id >= self.recent.base {
            return self.recent.contains(id);
        }
        // The last segment whose first id is at most `id` is the only one that can hold it.
        let after = self.full.partition_point(|s| s.base <= id);
        after > 0 && self.full[after - 1].contains(id)
    }

    #[inline]
    fn contains(&self, id: u64) -> bool {
        id <= self.last() && (self.in_segments(id) || self.others.contains(&id))
    }

    #[inline]
    fn insert(&mut self, id: u64) -> bool {
        if id <= self.last() {
            return !self.in_segments(id) && self.others.insert(id);
        }
        if !self.recent.try_push(id) {
            self.retire_recent(id);
        }
        true
    }

    /// Moves the recent ids to the segments and starts the recent ones afresh at `id`.
    #[cold]
    fn retire_recent(&mut self, id: u64) {
        let recent = std::mem::replace(&mut self.recent, Recent::new(id));
        for id in recent.iter() {
            if !self
                .full
                .last_mut()
                .is_some_and(|segment| segment.try_push(id))
            {
                self.full.push(Segment::new(id));
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.full
            .iter()
            .flat_map(Segment::iter)
            .chain(self.recent.iter())
            .chain(self.others.iter().copied())
    }
}

impl KeySet {
    pub(crate) fn new() -> Self {
        KeySet::default()
    }

    /// Adds a key; false if it was already there.
    #[inline]
    pub(crate) fn insert(&mut self, key: OrderKey) -> bool {
        let id = key.client_order_id;
        let added = if key.client.0 < NEAR {
            let index = key.client.0 as usize;
            match self.near.get_mut(index) {
                Some(Some(ids)) => ids.insert(id),
                _ => {
                    if index >= self.near.len() {
                        self.near.resize_with(index + 1, || None);
                    }
                    self.near[index] = Some(ClientIds::new(id));
                    true
                }
            }
        } else {
            match self.far.entry(key.client) {
                Entry::Occupied(mut ids) => ids.get_mut().insert(id),
                Entry::Vacant(place) => {
                    place.insert(ClientIds::new(id));
                    true
                }
            }
        };
        self.len += usize::from(added);
        added
    }

    #[inline]
    pub(crate) fn contains(&self, key: &OrderKey) -> bool {
        self.entry(key.client)
            .is_some_and(|ids| ids.contains(key.client_order_id))
    }

    #[inline]
    fn entry(&self, client: ClientId) -> Option<&ClientIds> {
        if client.0 < NEAR {
            self.near.get(client.0 as usize).and_then(Option::as_ref)
        } else {
            self.far.get(&client)
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every key, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = OrderKey> + '_ {
        let near = self.near.iter().enumerate().filter_map(|(number, ids)| {
            let ids = ids.as_ref()?;
            Some((ClientId(number as u32), ids))
        });
        let far = self.far.iter().map(|(&client, ids)| (client, ids));
        near.chain(far).flat_map(|(client, ids)| {
            ids.iter().map(move |client_order_id| OrderKey {
                client,
                client_order_id,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(client: u32, client_order_id: u64) -> OrderKey {
        OrderKey {
            client: ClientId(client),
            client_order_id,
        }
    }

    #[test]
    fn insert_contains_len() {
        let mut set = KeySet::new();
        for id in 0..10_000u64 {
            // Rising ids, and some from the far end, for every client.
            assert!(set.insert(key(id as u32 % 7, id)));
            assert!(set.insert(key(id as u32 % 7, u64::MAX - id)));
        }
        assert!(!set.insert(key(3, 3)));
        assert!(!set.insert(key(3, u64::MAX - 3)));
        // Out of order, then repeated.
        assert!(set.insert(key(1, 20_001)) && set.insert(key(1, 10_001)));
        assert!(!set.insert(key(1, 10_001)) && set.contains(&key(1, 10_001)));
        assert!(!set.contains(&key(1, 10_003)));
        assert!(set.contains(&key(3, 3)) && !set.contains(&key(4, 3)));
        assert_eq!(set.len(), 20_002);
        assert_eq!(set.iter().count(), 20_002);
    }

    #[test]
    fn many_segments_against_a_plain_set() {
        let mut set = KeySet::new();
        let mut plain = std::collections::HashSet::new();
        let key = |id| key(9, id);
        // Rising by 3 over several segments, with earlier ids filled in now and then.
        for i in 0..(3 * SEGMENT as u64) {
            let id = 3 * i;
            assert_eq!(set.insert(key(id)), plain.insert(id));
            if i % 5 == 0 {
                let back = id / 2;
                assert_eq!(set.insert(key(back)), plain.insert(back), "{back}");
            }
        }
        for id in 0..(9 * SEGMENT as u64 + 10) {
            assert_eq!(set.contains(&key(id)), plain.contains(&id), "{id}");
        }
        assert_eq!(set.len(), plain.len());
        // The last id kept beside the segments is theirs, across segment boundaries.
        let ids = &set.entry(ClientId(9)).unwrap();
        // 12,288 rising ids: the last 24 in the entry (12,288 = 438 x 28 + 24), the others in
        // segments of 4,096, 4,096 and 4,072.
        assert_eq!(ids.recent.iter().count(), 24);
        let sizes: Vec<usize> = ids.full.iter().map(|s| s.iter().count()).collect();
        assert_eq!(sizes, [SEGMENT, SEGMENT, SEGMENT - 24]);
        assert_eq!(ids.last(), 3 * (3 * SEGMENT as u64 - 1));
        assert_eq!(ids.iter().max(), Some(ids.last()));
    }

    #[test]
    fn a_first_id_becomes_the_entrys_last() {
        let mut set = KeySet::new();
        let key = key(1, 0);
        assert!(!set.contains(&key));
        assert!(set.insert(key) && set.contains(&key) && !set.insert(key));
        assert_eq!(set.entry(ClientId(1)).unwrap().last(), 0);
    }

    #[test]
    fn clients_numbered_near_and_far_against_a_plain_set() {
        let mut set = KeySet::new();
        let mut plain = std::collections::HashSet::new();
        let clients = [0, 1, 7, NEAR - 1, NEAR, NEAR + 1, 70_000, u32::MAX];
        for round in 0..50u64 {
            for (n, &client) in clients.iter().enumerate() {
                // Rising ids, a repeat now and then, and one from far back.
                let ids = [round * 3, round * 3, round / 2 + n as u64];
                for id in ids {
                    let key = key(client, id);
                    assert_eq!(set.insert(key), plain.insert(key), "{key:?}");
                    assert!(set.contains(&key));
                }
            }
        }
        for client in [2, NEAR - 2, NEAR + 2, u32::MAX - 1] {
            let key = key(client, 3);
            assert!(!set.contains(&key), "{key:?}");
        }
        assert_eq!(set.len(), plain.len());
        let listed: std::collections::HashSet<OrderKey> = set.iter().collect();
        assert_eq!(listed.len(), plain.len());
        assert_eq!(listed, plain);
        // Only the clients numbered from NEAR on are hashed.
        assert_eq!(set.far.len(), 4);
        assert_eq!(set.near.len(), NEAR as usize);
    }

    #[test]
    fn ids_too_far_apart_for_an_offset_start_new_segments() {
        let mut set = KeySet::new();
        let mut plain = std::collections::HashSet::new();
        let key = |id| key(2, id);
        // Steps just inside and just past an offset's reach, huge jumps, and ids near the top.
        let steps = [
            1,
            u64::from(Offset::MAX),
            u64::from(Offset::MAX) + 1,
            5_000_000_000,
        ];
        let mut id = 0;
        for i in 0..400 {
            id += steps[i % steps.len()];
            assert_eq!(set.insert(key(id)), plain.insert(id));
            // Every id so far, and its neighbours, answer as a plain set does.
            for probe in [id - 1, id, id + 1, id / 2] {
                assert_eq!(set.contains(&key(probe)), plain.contains(&probe), "{probe}");
            }
        }
        for top in [u64::MAX - 1, u64::MAX] {
            assert_eq!(set.insert(key(top)), plain.insert(top));
        }
        assert!(!set.insert(key(u64::MAX)) && set.contains(&key(u64::MAX)));
        for &id in &plain {
            assert!(set.contains(&key(id)) && !set.insert(key(id)), "{id}");
        }
        let mut listed: Vec<u64> = set.iter().map(|k| k.client_order_id).collect();
        listed.sort_unstable();
        let mut expected: Vec<u64> = plain.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        assert_eq!(set.len(), expected.len());
        // A jump past an offset's reach started a segment; steps within it did not.
        assert!(set.entry(ClientId(2)).unwrap().full.len() >= 200);
    }

    proptest::proptest! {
        /// Any mix of rising ids (small steps, steps past an offset's reach), ids from the
        /// past, repeats and clients numbered near and far answers as a plain set does.
        #[test]
        fn any_history_answers_as_a_plain_set(
            steps in proptest::collection::vec((0..6usize, 0..5u8, 0..u64::from(u32::MAX)), 1..2_000)
        ) {
            const CLIENTS: [u32; 6] = [0, 3, 39, NEAR - 1, NEAR, u32::MAX];
            let mut set = KeySet::new();
            let mut plain = std::collections::HashSet::new();
            let mut next = [1u64; CLIENTS.len()];
            for (client, kind, arg) in steps {
                let id = match kind {
                    // The next id, a little further on (the common case).
                    0 | 1 => next[client] + arg % 20,
                    // Past an offset's reach from the last.
                    2 => next[client] + u64::from(Offset::MAX) + arg,
                    // An id from the past (often one already there).
                    3 => arg % next[client],
                    // The last id again.
                    _ => next[client] - 1,
                };
                next[client] = next[client].max(id + 1);
                let key = key(CLIENTS[client], id);
                proptest::prop_assert_eq!(set.insert(key), plain.insert(key));
                proptest::prop_assert!(set.contains(&key));
                let beside = self::key(CLIENTS[client], id + 1);
                proptest::prop_assert_eq!(set.contains(&beside), plain.contains(&beside));
            }
            proptest::prop_assert_eq!(set.len(), plain.len());
            let listed: std::collections::HashSet<OrderKey> = set.iter().collect();
            proptest::prop_assert_eq!(listed.len(), set.len());
            proptest::prop_assert_eq!(listed, plain);
        }
    }
}
