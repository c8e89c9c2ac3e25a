//! The set of order keys a book has accepted: every order's (client, client order id), kept
//! forever so a reused id is refused.
//!
//! Two costs of a plain hash set showed in the benchmarks. Its table doubles when full and
//! moves every key at once: with hundreds of thousands of keys, a pause of a millisecond or
//! more, during which the engine's mailbox fills (the open loop saw it as a p99 of
//! milliseconds). And its keys land at random places in a table far larger than the cache, so
//! every check and every insert is a cache miss (a third of the engines' time in `perf`).
//!
//! Clients number their orders upwards, so per client the ids are kept in two parts: `rising`,
//! the ids that were each larger than every id before them, in order (a new id is checked
//! against the last one and appended: O(1), in cache), and `others`, a B-tree for the ids that
//! came out of order (O(log n)). An id is in the set if it is in either part. `rising` is kept
//! in fixed-size segments, so it never moves what it holds: growing a single vector would copy
//! it and fault in fresh pages, and with every book growing at about the same moment that
//! still showed as a pause in the open loop. The B-tree grows a node at a time.

use std::collections::{BTreeSet, HashMap};

use crate::hash::BuildKeyHasher;
use crate::order::{ClientId, OrderKey};

/// A set of order keys. See the module note.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeySet {
    clients: HashMap<ClientId, ClientIds, BuildKeyHasher>,
    len: usize,
}

/// Ids per segment of `rising` (32 KiB).
const SEGMENT: usize = 4096;

/// One client's ids. Invariant: the ids of `rising`, segment after segment, are strictly
/// increasing; every segment but the last is full; every id in `others` is smaller than the
/// last id of `rising`; `last` is the last id of `rising` (`None` while it is empty).
#[derive(Debug, Clone, Default)]
struct ClientIds {
    rising: Vec<Vec<u64>>,
    /// Kept beside `rising` (written only where `insert` appends to it): the check of a new
    /// id, the common case, reads this entry alone. Read through `rising`, it took the
    /// segment's header and then its last id, two cache misses in a row: with 40 clients'
    /// orders interleaved, `OrderBook::contains` held 13 % of the one worker's samples in
    /// `perf`, most of them on those two loads.
    last: Option<u64>,
    others: BTreeSet<u64>,
}

impl ClientIds {
    #[inline]
    fn last(&self) -> Option<u64> {
        self.last
    }

    fn in_rising(&self, id: u64) -> bool {
        // The last segment whose first id is at most `id` is the only one that can hold it.
        let after = self.rising.partition_point(|s| s[0] <= id);
        after > 0 && self.rising[after - 1].binary_search(&id).is_ok()
    }

    #[inline]
    fn contains(&self, id: u64) -> bool {
        match self.last() {
            None => false,
            Some(last) if id > last => false,
            Some(_) => self.in_rising(id) || self.others.contains(&id),
        }
    }

    #[inline]
    fn insert(&mut self, id: u64) -> bool {
        match self.last() {
            Some(last) if id <= last => !self.in_rising(id) && self.others.insert(id),
            _ => {
                match self.rising.last_mut() {
                    Some(segment) if segment.len() < SEGMENT => segment.push(id),
                    _ => {
                        let mut segment = Vec::with_capacity(SEGMENT);
                        segment.push(id);
                        self.rising.push(segment);
                    }
                }
                self.last = Some(id);
                true
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.rising
            .iter()
            .flatten()
            .chain(self.others.iter())
            .copied()
    }
}

impl KeySet {
    pub(crate) fn new() -> Self {
        KeySet::default()
    }

    /// Adds a key; false if it was already there.
    #[inline]
    pub(crate) fn insert(&mut self, key: OrderKey) -> bool {
        let added = self
            .clients
            .entry(key.client)
            .or_default()
            .insert(key.client_order_id);
        self.len += usize::from(added);
        added
    }

    #[inline]
    pub(crate) fn contains(&self, key: &OrderKey) -> bool {
        self.clients
            .get(&key.client)
            .is_some_and(|ids| ids.contains(key.client_order_id))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every key, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = OrderKey> + '_ {
        self.clients.iter().flat_map(|(&client, ids)| {
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

    #[test]
    fn insert_contains_len() {
        let mut set = KeySet::new();
        let key = |c, id| OrderKey {
            client: ClientId(c),
            client_order_id: id,
        };
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
        let key = |id| OrderKey {
            client: ClientId(9),
            client_order_id: id,
        };
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
        let ids = &set.clients[&ClientId(9)];
        assert_eq!(ids.rising.len(), 3);
        assert_eq!(ids.last, ids.rising.last().and_then(|s| s.last()).copied());
        assert_eq!(ids.last, Some(3 * (3 * SEGMENT as u64 - 1)));
    }

    #[test]
    fn a_first_id_becomes_the_entrys_last() {
        let mut set = KeySet::new();
        let key = OrderKey {
            client: ClientId(1),
            client_order_id: 0,
        };
        assert!(!set.contains(&key));
        assert!(set.insert(key) && set.contains(&key) && !set.insert(key));
        assert_eq!(set.clients[&ClientId(1)].last, Some(0));
    }
}
