//! How far apart two cores are right now: the time a write on one core takes to be seen on
//! another.
//!
//! On a virtual machine the host decides which physical cores carry the guest's CPUs, and it
//! moves them: the same two CPUs are sometimes neighbours sharing a cache (a line crosses in
//! about 40 ns here) and sometimes far apart (about 200 ns), for minutes at a time. Every
//! message between two cores pays that crossing at least once, so a benchmark of message
//! passing runs at two speeds that have nothing to do with the program. Measured right before
//! each repetition and kept beside its sample, it tells a slow repetition on a far pair of cores
//! from one slow for a reason of its own.
//!
//! Two threads, each pinned to one of the first two CPUs this process may run on, bounce one
//! cache line: one writes an odd number and waits for the next even one, the other answers.
//! The figure is half a round trip, the median of a few batches. A busy machine (another
//! program on those CPUs) makes the threads wait for their turn, and the figure then says how
//! long a hand-over between two cores took, which is what a benchmark meets too. The probe
//! stops after [`BUDGET`] whatever it has measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The key of the figure in a repetition's counters (`Record::counters`).
pub const CORE_TO_CORE: &str = "core_to_core_ns";

/// The figure as recorded: nanoseconds to one decimal.
pub fn core_to_core_value(ns: f64) -> Value {
    json!((ns * 10.0).round() / 10.0)
}

/// Round trips per batch.
const ROUND_TRIPS: u64 = 2_000;
/// Batches; the median is kept.
const BATCHES: usize = 5;
/// The longest the probe runs.
pub const BUDGET: Duration = Duration::from_millis(50);
/// Written by the leader to tell the follower to stop.
const STOP: u64 = u64::MAX;

/// One cache line of its own, so nothing else shares what the threads bounce.
#[repr(align(128))]
struct Line(AtomicU64);

/// Half a round trip of one cache line between the first two CPUs this process may use, in
/// nanoseconds (the median of a few batches); `None` with fewer than two CPUs, where pinning
/// is not possible, or if not one batch finished within [`BUDGET`].
pub fn core_to_core_ns() -> Option<f64> {
    let (a, b) = first_two_cpus()?;
    let line = Line(AtomicU64::new(0));
    let line = &line;
    std::thread::scope(|s| {
        let follower = s.spawn(move || {
            if !pin(b) {
                return;
            }
            follow(&line.0);
        });
        let leader = s.spawn(move || {
            let pinned = pin(a);
            let batches = if pinned { lead(&line.0) } else { Vec::new() };
            line.0.store(STOP, Ordering::Release);
            batches
        });
        let mut batches = leader.join().ok()?;
        follower.join().ok()?;
        if batches.is_empty() {
            return None;
        }
        batches.sort_by(f64::total_cmp);
        Some(batches[batches.len() / 2])
    })
}

/// Answers every odd value with the next even one until told to stop.
fn follow(line: &AtomicU64) {
    loop {
        let seen = line.load(Ordering::Acquire);
        if seen == STOP {
            return;
        }
        if seen % 2 == 1 {
            // Fails only if the leader wrote STOP meanwhile: the next load sees it.
            let _ = line.compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Runs the batches; returns each finished batch's half round trip in nanoseconds, or, if the
/// budget ran out before the first batch finished, the round trips made so far as one batch.
fn lead(line: &AtomicU64) -> Vec<f64> {
    let deadline = Instant::now() + BUDGET;
    let mut value = 0u64;
    let mut batches = Vec::with_capacity(BATCHES);
    let half_trip =
        |start: Instant, trips: u64| start.elapsed().as_nanos() as f64 / (2 * trips) as f64;
    for _ in 0..BATCHES {
        let start = Instant::now();
        for trip in 0..ROUND_TRIPS {
            value += 1;
            line.store(value, Ordering::Release);
            let mut spins = 0u32;
            while line.load(Ordering::Acquire) != value + 1 {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(4096) && Instant::now() >= deadline {
                    if batches.is_empty() && trip > 0 {
                        batches.push(half_trip(start, trip));
                    }
                    return batches;
                }
            }
            value += 1;
        }
        batches.push(half_trip(start, ROUND_TRIPS));
        if Instant::now() >= deadline {
            break;
        }
    }
    batches
}

/// The key of the host's speed right before a repetition (`host_speed`) in its counters.
pub const HOST_SPEED: &str = "host_chase_m";

/// The host's speed as recorded: millions of steps a second, to one decimal.
pub fn host_speed_value(m: f64) -> Value {
    json!((m * 10.0).round() / 10.0)
}

/// Entries of the chase's cycle: 64 KiB, more than a core's first-level cache and far less
/// than any second-level one.
const CHASE_ENTRIES: usize = 8 * 1024;
/// One window of the chase; each CPU runs [`CHASE_WINDOWS`] of them.
const CHASE_WINDOW: Duration = Duration::from_micros(500);
const CHASE_WINDOWS: usize = 8;
/// Steps between two reads of the clock.
const CHASE_STEPS: u32 = 256;

/// How fast this host runs plain code right now: a chase through a random cycle of 64 KiB
/// (each step one load that depends on the one before, from the second-level cache), on each
/// of the first two CPUs this process may use in turn, in millions of steps a second (the
/// median of short windows on both; on one CPU if the process may use only one). `None`
/// where CPUs cannot be pinned.
///
/// Why: how fast a virtual CPU runs depends on what the host runs beside it. On the shared
/// host the benchmarks were measured on, the same chase pinned to one CPU ran 170-330 M steps
/// a second from one 10 ms window to the next (a 4 KiB chase, in the first-level cache, moved
/// 10-20 %; a 4 MiB one fourfold). Every repetition of a benchmark meets that too; measured
/// right before each repetition and kept beside its sample, it tells a slow host from a slow
/// run (`troupe-bench compare` prints each contender's spread beside the host's).
pub fn host_speed() -> Option<f64> {
    let mut windows = Vec::with_capacity(2 * CHASE_WINDOWS);
    for cpu in allowed_cpus(2) {
        let measured = std::thread::scope(|s| {
            s.spawn(move || pin(cpu).then(chase_windows))
                .join()
                .ok()
                .flatten()
        })?;
        windows.extend(measured);
    }
    if windows.is_empty() {
        return None;
    }
    windows.sort_by(f64::total_cmp);
    Some(windows[windows.len() / 2])
}

/// Builds the cycle (Sattolo's shuffle: one cycle through every entry) and chases it for
/// [`CHASE_WINDOWS`] windows; each window's rate in millions of steps a second.
fn chase_windows() -> Vec<f64> {
    let mut next: Vec<u32> = (0..CHASE_ENTRIES as u32).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..CHASE_ENTRIES).rev() {
        // xorshift64: a fixed sequence, so every probe chases the same cycle.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % i as u64) as usize;
        next.swap(i, j);
    }
    let mut at = 0u32;
    // Once round the cycle so its lines are in the cache before the first window.
    for _ in 0..CHASE_ENTRIES {
        at = next[at as usize];
    }
    let mut rates = Vec::with_capacity(CHASE_WINDOWS);
    for _ in 0..CHASE_WINDOWS {
        let start = Instant::now();
        let mut steps = 0u64;
        while start.elapsed() < CHASE_WINDOW {
            for _ in 0..CHASE_STEPS {
                at = next[at as usize];
            }
            steps += u64::from(CHASE_STEPS);
        }
        rates.push(steps as f64 / start.elapsed().as_secs_f64() / 1e6);
    }
    std::hint::black_box(at);
    rates
}

fn first_two_cpus() -> Option<(usize, usize)> {
    match allowed_cpus(2)[..] {
        [a, b] => Some((a, b)),
        _ => None,
    }
}

/// The first `n` CPUs (or fewer) this process may run on; empty where that cannot be read.
#[cfg(target_os = "linux")]
fn allowed_cpus(n: usize) -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // its size into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let got = unsafe { libc::sched_getaffinity(0, size, &mut set) };
    if got != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET only reads the set, for indices below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .take(n)
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus(_n: usize) -> Vec<usize> {
    Vec::new()
}

/// Pins the calling thread to `cpu`; false if the system refused.
#[cfg(target_os = "linux")]
fn pin(cpu: usize) -> bool {
    // SAFETY: as in `first_two_cpus`; CPU_SET writes one bit of the set for an index below
    // CPU_SETSIZE (`cpu` came from such an index).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn pin(_cpu: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_speed_is_measured_on_every_cpu_it_may_pin() {
        let start = Instant::now();
        let measured = host_speed();
        // Two CPUs' windows, plus starting two threads on a loaded machine.
        assert!(start.elapsed() < 2 * CHASE_WINDOW * CHASE_WINDOWS as u32 + Duration::from_secs(5));
        if allowed_cpus(1).is_empty() {
            assert_eq!(measured, None, "no CPU to pin to: no figure");
        } else {
            let m = measured.expect("a CPU to pin to: a figure");
            // A step is one load from the cache: well under a microsecond, well over a
            // nanosecond's fraction on any machine this runs on.
            assert!(m > 1.0 && m < 10_000.0, "millions of steps a second: {m}");
        }
    }

    #[test]
    fn the_probe_measures_two_cpus_within_its_budget() {
        let start = Instant::now();
        let measured = core_to_core_ns();
        // The budget, plus starting and joining two threads on a loaded machine.
        assert!(start.elapsed() < BUDGET + Duration::from_secs(5));
        if cfg!(target_os = "linux") && first_two_cpus().is_some() {
            let ns = measured.expect("two CPUs to pin to: a figure");
            assert!(ns.is_finite() && ns > 0.0, "half a round trip: {ns}");
        } else {
            assert_eq!(measured, None, "no two CPUs to pin to: no figure");
        }
    }
}
