//! Hashing for two jobs: a fast hasher for the books' sets of order keys, and a stable,
//! specified hash for comparing state between engines, processes and program versions.
//!
//! `std`'s default hasher is keyed at random per process and its algorithm may change between
//! releases, so it can serve neither: the set hasher must be fast and the state hash must give
//! the same value for the same state in any process. Both are built on the splitmix64
//! finaliser (a bijective 64-bit mixer) and FNV-1a.

use std::hash::{BuildHasherDefault, Hasher};

/// The splitmix64 finaliser: a bijection on `u64` that spreads every input bit.
#[inline]
pub(crate) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A small, fast hasher for integer keys (not for untrusted input where flooding matters:
/// order keys come through validated sessions).
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(29) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Builds [`KeyHasher`]s.
pub(crate) type BuildKeyHasher = BuildHasherDefault<KeyHasher>;

/// A stable 64-bit state hash (FNV-1a over little-endian words). Same input, same value,
/// on every platform and in every process.
#[derive(Clone, Copy)]
pub(crate) struct StateHasher(u64);

impl StateHasher {
    pub(crate) fn new() -> Self {
        StateHasher(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn word(&mut self, n: u64) -> &mut Self {
        for b in n.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_hash_is_fixed() {
        // FNV-1a of eight zero bytes: a published test value, so the hash is what it says.
        assert_eq!(StateHasher::new().word(0).finish(), 0xa8c7_f832_281a_39c5);
    }

    #[test]
    fn mixer_is_not_identity() {
        assert_ne!(mix64(1), 1);
        assert_ne!(mix64(1), mix64(2));
    }
}
