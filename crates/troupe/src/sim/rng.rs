//! The simulation's random numbers: one generator per run, seeded from the run's seed, whose
//! every draw is a choice of the run (which actor runs next, how many messages a turn takes,
//! which fault fires).
//!
//! Written here rather than taken from a crate on purpose: a replay is a seed plus this file,
//! so the sequence a seed gives must never change with a dependency's version (the `rand`
//! crate's small generators say their streams may change between releases). The algorithm is
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014),
//! which passes BigCrush and needs one word of state.

/// A seeded generator. See the module note.
#[derive(Clone, Debug)]
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    /// A number in `0..n` (`n > 0`), without the bias of a plain remainder (Lemire's
    /// multiply-and-shift: the bias is below 2^-64 · n, far under anything a run can see).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p` (clamped to 0..=1).
    pub(super) fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        // 53 random bits: every f64 in [0, 1) that a draw can be.
        ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }

    /// A duration between `low` and `high` nanoseconds, uniform on a log scale (as many short
    /// ones as long ones, so both microsecond races and second-long stalls happen).
    pub(super) fn log_uniform(&mut self, low: u64, high: u64) -> u64 {
        let (low, high) = (low.max(1) as f64, high.max(low.max(1)) as f64);
        let t = ((self.next_u64() >> 11) as f64) / ((1u64 << 53) as f64);
        (low * (high / low).powf(t)).round() as u64
    }
}

/// SplitMix64's finaliser: a bijection that spreads every input bit over the output.
pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_gives_the_same_sequence() {
        // The reference values of SplitMix64 from seed 0: a replay depends on them.
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(rng.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_stays_in_range_and_reaches_every_value() {
        let mut rng = Rng::new(7);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            seen[rng.below(5) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 1_500), "{seen:?}");
    }

    #[test]
    fn log_uniform_stays_within_its_bounds() {
        let mut rng = Rng::new(3);
        for _ in 0..10_000 {
            let d = rng.log_uniform(1_000, 2_000_000_000);
            assert!((1_000..=2_000_000_000).contains(&d));
        }
    }
}
