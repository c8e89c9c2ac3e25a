//! How long an `Ask` polled by a task looks for its reply before it returns `Pending`.
//!
//! An `.await` that returns `Pending` costs the task's runtime a park and a wake-up of its
//! thread when the reply comes: a futex or eventfd write on the replying worker, then a
//! context switch. On the 2-core machine of the benchmarks that is 12-20 µs per round trip
//! (53-75 k asks/s from a tokio task), while the reply itself comes in well under a
//! microsecond. So the first poll spins a little, looking at the slot after every spin hint,
//! and only registers the waker if the reply has not come.
//!
//! A spin that fails is CPU taken from the runtime, so the budget adapts, per thread: a
//! success restores it to [`MAX_HINTS`], a failure halves it. At zero the thread does not spin,
//! except for a short probe every [`PROBE_EVERY`] polls, which restores the budget if replies
//! have become quick again. So a task asking an actor that takes milliseconds loses at most a
//! few microseconds a handful of times, then nothing.
//!
//! Never on a thread that runs actors (a pool's worker, or an actor's own thread): the reply
//! may need that very thread, and a worker has other actors to run.

use std::cell::Cell;

use crate::role;

/// The most spin hints of one poll: 256 hints are 6 µs at 25 ns a hint (measured on the
/// benchmarks' EPYC), about 10 µs on cores with slower hints. Under the cost of one park and
/// wake-up, well over the round trip to an actor on a running pool (0.3 µs).
pub(super) const MAX_HINTS: u32 = 256;
/// With the budget at zero, one poll in this many probes with [`PROBE_HINTS`].
pub(super) const PROBE_EVERY: u32 = 64;
/// The budget of a probe.
pub(super) const PROBE_HINTS: u32 = 16;

/// A thread's spin budget for polled asks.
#[derive(Debug)]
pub(super) struct Budget {
    hints: Cell<u32>,
    /// Polls without a spin since the budget reached zero.
    idle_polls: Cell<u32>,
}

impl Budget {
    pub(super) const fn new() -> Self {
        Budget {
            hints: Cell::new(MAX_HINTS),
            idle_polls: Cell::new(0),
        }
    }

    /// The hints this poll may spin (0: none).
    pub(super) fn hints(&self) -> u32 {
        let hints = self.hints.get();
        if hints > 0 {
            return hints;
        }
        let idle = self.idle_polls.get() + 1;
        if idle < PROBE_EVERY {
            self.idle_polls.set(idle);
            return 0;
        }
        self.idle_polls.set(0);
        PROBE_HINTS
    }

    /// What the spin of this poll found.
    pub(super) fn record(&self, replied: bool) {
        if replied {
            self.hints.set(MAX_HINTS);
            self.idle_polls.set(0);
        } else {
            self.hints.set(self.hints.get() / 2);
        }
    }
}

thread_local! {
    static BUDGET: Budget = const { Budget::new() };
}

/// Spins while `filled` is false, within this thread's budget; true if it became true. Does
/// not spin on threads that run actors, or under loom (whose models cover the waker path).
pub(super) fn until(filled: impl Fn() -> bool) -> bool {
    // A simulation's thread has nobody to wait for: the reply comes only once it runs on.
    if cfg!(troupe_loom) || role::runs_actors() || role::drives_simulation() {
        return false;
    }
    // A thread being torn down (its thread-locals gone) does not spin.
    BUDGET
        .try_with(|budget| {
            let hints = budget.hints();
            if hints == 0 {
                return false;
            }
            for _ in 0..hints {
                std::hint::spin_loop();
                if filled() {
                    budget.record(true);
                    return true;
                }
            }
            budget.record(false);
            false
        })
        .unwrap_or(false)
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    #[test]
    fn failures_halve_the_budget_down_to_none_then_probes_come_now_and_then() {
        let budget = Budget::new();
        let mut spun = Vec::new();
        for _ in 0..12 {
            let hints = budget.hints();
            spun.push(hints);
            if hints > 0 {
                budget.record(false);
            }
        }
        assert_eq!(spun, [256, 128, 64, 32, 16, 8, 4, 2, 1, 0, 0, 0]);
        // At zero: PROBE_EVERY - 1 polls without a spin, then one probe.
        let mut since_zero = 3; // the three zeros above
        loop {
            let hints = budget.hints();
            since_zero += 1;
            if hints > 0 {
                assert_eq!(hints, PROBE_HINTS);
                break;
            }
        }
        assert_eq!(since_zero, PROBE_EVERY);
        // A failed probe leaves it at zero: the next probe comes PROBE_EVERY polls later.
        budget.record(false);
        for _ in 1..PROBE_EVERY {
            assert_eq!(budget.hints(), 0);
        }
        assert_eq!(budget.hints(), PROBE_HINTS);
    }

    #[test]
    fn a_success_restores_the_whole_budget() {
        let budget = Budget::new();
        for _ in 0..20 {
            if budget.hints() > 0 {
                budget.record(false);
            }
        }
        assert_eq!(budget.hints(), 0);
        while budget.hints() == 0 {}
        budget.record(true);
        assert_eq!(budget.hints(), MAX_HINTS);
    }

    #[test]
    fn a_reply_already_there_is_seen_on_the_first_hint() {
        assert!(until(|| true));
    }

    #[test]
    fn no_spin_on_a_thread_that_runs_actors() {
        let _worker = role::enter(role::Role::Worker { may_block: false });
        let looks = Cell::new(0);
        assert!(!until(|| {
            looks.set(looks.get() + 1);
            true
        }));
        assert_eq!(looks.get(), 0);
    }
}
