//! A counter that grows with time and costs a few nanoseconds to read, for timing every run of
//! turns a task runs for the pool (`external.rs`, `LONG_HELP`): two reads of the clock
//! (`Instant::now`) cost ~46 ns on the machines measured, a quarter of a whole ask a task helps
//! with (~160 ns); two reads of this, ~18 ns. Its rate is not known up front: a count of
//! [`SURELY_SHORT`] or more is turned into time with the rate measured since the pool began
//! (`External::began`), which reads the clock.
//!
//! # Safety
//! The one `unsafe` reads the processor's time-stamp counter (`rdtsc`): an instruction every
//! x86-64 processor has, which reads a register and touches no memory. Its intrinsic is
//! `unsafe` as every intrinsic is; nothing the caller does can make it unsound. A count read
//! on another core than the one before may be a little behind it: callers subtract with
//! `saturating_sub`, so that is zero, never a wrap.

/// Fewer ticks than this is far shorter than `LONG_HELP` at any rate the counter runs at
/// (the time-stamp counter of an x86-64 processor runs at its nominal frequency, at most a
/// few GHz: 100,000 ticks are at most ~100 us at 1 GHz; elsewhere a tick is a nanosecond).
pub(super) const SURELY_SHORT: u64 = 100_000;

/// The processor's time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(super) fn read() -> u64 {
    // SAFETY: `rdtsc` exists on every x86-64 processor and reads a counter; it touches no
    // memory and has no precondition (the intrinsic is `unsafe` only as every intrinsic
    // is). A count read on another core than the one before may be a little behind it,
    // which the caller's `saturating_sub` makes zero.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Nanoseconds since the first read (other processors: the clock itself).
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(super) fn read() -> u64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
