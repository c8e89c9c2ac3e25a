//! What the kernel counted for this process: CPU time, page faults, preemptions (`getrusage`,
//! every thread). Read before and after a repetition, it says what the figure does not: CPU
//! time spent whatever else the machine did, fresh memory taken (each new page a fault), or a
//! core lost to another program for a while.

/// Key of a repetition's CPUs kept busy in `Record::counters` (see [`ProcessUsage::cpus`]).
pub const CPUS: &str = "cpus";

/// The process's counts so far, or (from [`ProcessUsage::since`]) over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessUsage {
    /// CPU time, user and system, in microseconds.
    pub cpu_us: f64,
    /// Page faults, minor and major (`ru_minflt + ru_majflt`).
    pub page_faults: u64,
    /// Times a thread was descheduled while it could still run (`ru_nivcsw`, involuntary
    /// context switches).
    pub preemptions: u64,
}

impl ProcessUsage {
    /// The counts so far (all zero where `getrusage` is not available).
    #[cfg(unix)]
    pub fn now() -> Self {
        // SAFETY: getrusage writes one `rusage` into the zeroed value it is given and reads
        // nothing else.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut usage);
            usage
        };
        let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
        let count = |n: libc::c_long| u64::try_from(n).unwrap_or(0);
        ProcessUsage {
            cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
            page_faults: count(usage.ru_minflt) + count(usage.ru_majflt),
            preemptions: count(usage.ru_nivcsw),
        }
    }

    /// The counts so far (all zero where `getrusage` is not available).
    #[cfg(not(unix))]
    pub fn now() -> Self {
        ProcessUsage::default()
    }

    /// CPU time over `wall`, the interval's wall time, to two decimals: how many CPUs the
    /// process kept busy in it. A sending thread and a worker that the kernel put on one CPU
    /// show about 1, on two about 2 (BENCHMARKS.md, "Three modes"). `None` for an interval
    /// too short to divide by.
    pub fn cpus(&self, wall: std::time::Duration) -> Option<f64> {
        let wall_us = wall.as_secs_f64() * 1e6;
        (wall_us >= 1.0).then(|| (self.cpu_us / wall_us * 100.0).round() / 100.0)
    }

    /// The counts between `before` and `self`.
    pub fn since(&self, before: &ProcessUsage) -> ProcessUsage {
        ProcessUsage {
            cpu_us: (self.cpu_us - before.cpu_us).max(0.0),
            page_faults: self.page_faults.saturating_sub(before.page_faults),
            preemptions: self.preemptions.saturating_sub(before.preemptions),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn cpus_busy_is_cpu_time_over_wall_time() {
        let cpus = |cpu_us: f64, wall| {
            ProcessUsage {
                cpu_us,
                ..ProcessUsage::default()
            }
            .cpus(wall)
        };
        let ms = std::time::Duration::from_millis(1);
        assert_eq!(cpus(2_000.0, ms), Some(2.0));
        assert_eq!(cpus(1_004.0, ms), Some(1.0));
        assert_eq!(cpus(1_006.0, ms), Some(1.01));
        assert_eq!(cpus(0.0, ms * 8), Some(0.0));
        assert_eq!(cpus(500.0, std::time::Duration::ZERO), None);
    }

    #[test]
    fn fresh_memory_and_work_are_counted() {
        let before = ProcessUsage::now();
        // 64 pages the process never touched, each written once; then some arithmetic.
        let mut pages = vec![0u8; 64 * 4096];
        for page in pages.chunks_mut(4096) {
            page[0] = 1;
        }
        let sum: u64 = (0..20_000_000u64).fold(0, |a, x| a.wrapping_add(x * x));
        std::hint::black_box((&pages, sum));
        let spent = ProcessUsage::now().since(&before);
        assert!(spent.page_faults >= 1, "{spent:?}");
        assert!(spent.cpu_us > 0.0, "{spent:?}");
    }
}
