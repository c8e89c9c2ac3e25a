//! Giving the core away while waiting, unless a yield lately cost this thread a time slice.
//!
//! A thread that waits a few microseconds for another (an asker for its reply, a worker that
//! ran out of work for more) spins, and after a while yields its core now and then: when there
//! are more runnable threads than cores, the thread it waits for may be the one sharing its
//! core, runnable but not running, and a spin that never yields holds it off.
//!
//! Beside busy threads (other programs' loops, `troupe-bench --contention 2`) a yield instead
//! hands the core to one of them, which keeps it for a whole time slice: the yielding thread
//! stays runnable and waits that slice out even when what it waits for is there a microsecond
//! later, where a parked thread would have been woken by it at once. A worker yielding while
//! it searched for work, and an asker yielding while it looked for its reply, each met such a
//! slice on most round trips: asks with a deadline from a plain thread fell from 0.4-0.9 M a
//! second to 20-120 k (BENCHMARKS.md, "A yield that loses the core").
//!
//! So each thread times its yields: one that kept the core away for [`LOST`] or more (a
//! thread sharing the core with the waiter runs a short turn and gives it back well within
//! that; a busy loop keeps it for its slice) makes the next [`SKIPPED_AFTER_LOSS`] calls
//! return at once without yielding, and the caller parks rather than spin on. Then a yield is
//! tried again, so a machine that became quiet gets its yields back.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A yield that kept the core away this long lost it to another runnable thread (a task's
/// look for its reply, `reply/spin.rs`, ends at such a yield too, and a send waiting for a
/// catch-up actor, `raw/cell.rs`, naps from then on).
pub(crate) const LOST: Duration = Duration::from_micros(20);

/// Calls that do not yield after a yield lost the core.
const SKIPPED_AFTER_LOSS: u32 = 64;

/// One thread's record of its yields.
#[derive(Debug)]
struct Yields {
    /// Calls left that return without yielding.
    skip: Cell<u32>,
}

impl Yields {
    const fn new() -> Self {
        Yields { skip: Cell::new(0) }
    }

    /// True if the caller should yield now; false while yields are skipped (one fewer left).
    fn may_yield(&self) -> bool {
        match self.skip.get() {
            0 => true,
            left => {
                self.skip.set(left - 1);
                false
            }
        }
    }

    /// A yield took `took`: true if the core came back soon; false if it was lost, and the
    /// next [`SKIPPED_AFTER_LOSS`] calls are skipped.
    fn yielded(&self, took: Duration) -> bool {
        if took >= LOST {
            self.skip.set(SKIPPED_AFTER_LOSS);
            false
        } else {
            true
        }
    }
}

thread_local! {
    static YIELDS: Yields = const { Yields::new() };
}

/// Yields the core unless this thread's yields lately lost it (see the module note). True if
/// the core came back soon: the caller may go on waiting actively; false if it yielded and
/// lost the core for long, or did not yield at all: the caller should stop spinning and park
/// (or do whatever it does when a spin ends).
pub(crate) fn yield_now() -> bool {
    YIELDS
        .try_with(|yields| {
            if !yields.may_yield() {
                return false;
            }
            let start = Instant::now();
            std::thread::yield_now();
            yields.yielded(start.elapsed())
        })
        // While the thread's locals are torn down: a plain yield.
        .unwrap_or_else(|_| {
            std::thread::yield_now();
            true
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_yields_go_on_yielding() {
        let yields = Yields::new();
        for _ in 0..1000 {
            assert!(yields.may_yield());
            assert!(yields.yielded(Duration::from_micros(3)));
        }
    }

    #[test]
    fn a_lost_core_skips_the_next_calls_then_tries_again() {
        let yields = Yields::new();
        assert!(yields.may_yield());
        assert!(
            !yields.yielded(LOST),
            "a yield that took LOST lost the core"
        );
        for _ in 0..SKIPPED_AFTER_LOSS {
            assert!(!yields.may_yield(), "skipped");
        }
        assert!(yields.may_yield(), "tried again");
        // Still lost: skipped as long again.
        assert!(!yields.yielded(Duration::from_millis(3)));
        for _ in 0..SKIPPED_AFTER_LOSS {
            assert!(!yields.may_yield());
        }
        // Quiet again: every call yields.
        assert!(yields.may_yield());
        assert!(yields.yielded(Duration::from_micros(1)));
        assert!(yields.may_yield());
    }

    #[test]
    fn the_threads_own_yield_reports_whether_it_came_back() {
        // On a fresh thread with no record: it yields; on a quiet machine the core comes back
        // at once, on a busy one it may not. Either way the next calls follow the record.
        std::thread::spawn(|| {
            let came_back = yield_now();
            let skipping = YIELDS.with(|y| y.skip.get());
            assert_eq!(skipping == 0, came_back);
        })
        .join()
        .unwrap();
    }
}
