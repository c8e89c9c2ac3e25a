//! How long an `Ask` polled by a task looks for its reply before it returns `Pending`.
//!
//! An `.await` that returns `Pending` costs the task's runtime a park and a wake-up of its
//! thread when the reply comes: a futex or eventfd write on the replying worker, then a
//! context switch. On the 2-core machine of the benchmarks that is 12-20 µs per round trip
//! (53-75 k asks/s from a tokio task), while the reply itself comes in well under a
//! microsecond. So a poll looks at the slot after every spin hint for a while first.
//!
//! **Help first.** A wait that may run its request's turn itself (a plain thread's, or a
//! task's while `SystemBuilder::tasks_help` allows it, while no worker has taken the turn)
//! does so before it looks (`role::help_until`, called by `Ask::poll` and `Taker::wait`): the
//! turn run here needs no worker and no wake-up, where a look waits for a worker to take it.
//! Asks from a helping task measured 3.7-3.9 M/s looking (6 µs) before helping, 6.3-7.5 M/s
//! helping first (`troupe-bench ask`, quiet). A plain thread that helped in vain spins and
//! parks in `Taker::wait`; a task looks here, then returns `Pending`.
//!
//! **Why so long.** While the actor's worker is running, the reply comes in well under a
//! microsecond. When the worker has parked (it searched for work for a few microseconds and
//! found none, because this task was itself parked), the reply comes only after the worker's
//! wake-up: 15-40 µs on the benchmarks' virtual machine. A look shorter than that never sees
//! such a reply, so the task parks, and the worker, which finds nothing while the task wakes,
//! parks too: every later round trip pays both wake-ups, a slow mode that a short look never
//! leaves (with a 6 µs look, `troupe-bench ask` from a tokio task measured anywhere from
//! 27 k to 4.1 M asks/s in one process). A look of [`SPIN_FOR`] covers a worker's wake-up;
//! the first reply it sees has the worker running again, and the next round trip is fast.
//!
//! **Why the look yields, and stops at a long yield.** Beside busy threads the worker
//! that must answer is often queued on this very core (woken by this thread's send), and a
//! look that only spins holds it off for the whole look: beside two busy threads, a 50 µs
//! look that only spun fell into a mode of 18 k asks/s. But a yield can also hand the core
//! to a busy thread for the rest of its time slice (milliseconds), where a parked thread is
//! back as soon as it is woken: a yield that kept the core away for 20 µs ends the look.
//!
//! **Adapting.** A look that fails is CPU taken from the runtime, so the budget is per thread
//! ([`Budget`]): a look that sees the reply restores it to [`SPIN_FOR`], a failed one halves
//! it (below a microsecond it is zero), and at zero one poll in [`PROBE_EVERY`] looks for the
//! whole [`SPIN_FOR`] again. A reply that came within [`SPIN_FOR`] of a `Pending` restores the
//! budget too ([`answered_after`]): a look would have seen it. A task asking an actor that
//! answers in milliseconds loses about 100 µs of looking over its first few asks, then one
//! look in 64.
//!
//! Never on a thread that runs actors (a pool's worker, or an actor's own thread): the reply
//! may need that very thread, and a worker has other actors to run.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::{give_way, role};

/// The longest one poll looks: over a parked worker's wake-up (15-40 µs measured on the
/// benchmarks' virtual machine), well over the round trip to a running one (0.3 µs).
const SPIN_FOR: Duration = Duration::from_micros(50);
/// A budget halved below this is zero.
const MIN_SPIN: Duration = Duration::from_micros(1);
/// With the budget at zero, one poll in this many looks for the whole [`SPIN_FOR`].
const PROBE_EVERY: u32 = 64;
/// Looks between two reads of the clock and two yields: 0.4 µs at 25 ns a hint, where a
/// reply from a running worker comes; the clock costs about 20 ns.
const LOOKS_PER_CLOCK: u32 = 16;

/// A thread's look budget.
#[derive(Debug)]
struct Budget {
    /// Zero, or [`MIN_SPIN`] up to [`SPIN_FOR`].
    left: Cell<Duration>,
    /// Waits without a look since the budget reached zero.
    idle: Cell<u32>,
}

impl Budget {
    const fn new() -> Self {
        Budget {
            left: Cell::new(SPIN_FOR),
            idle: Cell::new(0),
        }
    }

    /// How long this wait may look (zero: not at all).
    fn allowed(&self) -> Duration {
        match self.left.get() {
            Duration::ZERO => {
                let idle = self.idle.get() + 1;
                if idle < PROBE_EVERY {
                    self.idle.set(idle);
                    Duration::ZERO
                } else {
                    self.idle.set(0);
                    SPIN_FOR
                }
            }
            left => left,
        }
    }

    /// What the look of this wait found.
    fn record(&self, replied: bool) {
        if replied {
            self.restore();
        } else {
            let half = self.left.get() / 2;
            self.left.set(if half < MIN_SPIN {
                Duration::ZERO
            } else {
                half
            });
        }
    }

    fn restore(&self) {
        self.left.set(SPIN_FOR);
        self.idle.set(0);
    }

    /// A reply seen `waited` after its ask returned `Pending`: had the look lasted that long,
    /// it would have seen it.
    fn answered_after(&self, waited: Duration) {
        if waited <= SPIN_FOR {
            self.restore();
        }
    }
}

thread_local! {
    static BUDGET: Budget = const { Budget::new() };
}

/// Whether this thread may look at all: not on threads that run actors, nor under loom (whose
/// models cover the waker path), nor on a simulation's thread (the reply comes only once the
/// simulation runs on).
fn may_look() -> bool {
    !(cfg!(troupe_loom) || role::runs_actors() || role::drives_simulation())
}

/// Looks while `filled` is false, within this thread's budget; true if it became true.
pub(super) fn until(filled: &dyn Fn() -> bool) -> bool {
    if !may_look() {
        return false;
    }
    // A thread being torn down (its thread-locals gone) does not look.
    BUDGET
        .try_with(|budget| {
            let allowed = budget.allowed();
            if allowed.is_zero() {
                return false;
            }
            let replied = look(allowed, filled);
            budget.record(replied);
            replied
        })
        .unwrap_or(false)
}

/// A reply came `waited` after its ask's poll returned `Pending` (see [`Budget::answered_after`]).
pub(super) fn answered_after(waited: Duration) {
    if may_look() {
        let _ = BUDGET.try_with(|budget| budget.answered_after(waited));
    }
}

/// Spin hints with a look after each, for about `allowed`, reading the clock and yielding the
/// core every [`LOOKS_PER_CLOCK`] looks. A yield (with the looks after it) that kept the core
/// away for [`give_way::LOST`] ends the look, the same bound as a waiting thread's or a
/// searching worker's yields: a worker that ran on this core during the yield answers within
/// a few microseconds, while a busy thread keeps the core until its time slice ends
/// (milliseconds), and a thread that parks gets it back as soon as it is woken.
fn look(allowed: Duration, filled: &dyn Fn() -> bool) -> bool {
    let start = Instant::now();
    let mut last = start;
    loop {
        for _ in 0..LOOKS_PER_CLOCK {
            std::hint::spin_loop();
            if filled() {
                return true;
            }
        }
        let now = Instant::now();
        if now - start >= allowed || now - last >= give_way::LOST {
            return false;
        }
        last = now;
        std::thread::yield_now();
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    #[test]
    fn failures_halve_the_budget_down_to_none() {
        let budget = Budget::new();
        let mut allowed = Vec::new();
        for _ in 0..9 {
            let now = budget.allowed();
            allowed.push(now.as_nanos());
            if !now.is_zero() {
                budget.record(false);
            }
        }
        assert_eq!(
            allowed,
            [50_000, 25_000, 12_500, 6_250, 3_125, 1_562, 0, 0, 0]
        );
    }

    #[test]
    fn at_zero_one_poll_in_probe_every_looks_for_the_whole_budget() {
        let budget = Budget::new();
        while budget.allowed() > Duration::ZERO {
            budget.record(false);
        }
        // The zero that ended the loop was the first of PROBE_EVERY - 1 polls without a look.
        for _ in 2..PROBE_EVERY {
            assert!(budget.allowed().is_zero());
        }
        assert_eq!(budget.allowed(), SPIN_FOR, "the probe");
        // A failed probe: zero again, and the next probe PROBE_EVERY polls later.
        budget.record(false);
        for _ in 1..PROBE_EVERY {
            assert!(budget.allowed().is_zero());
        }
        assert_eq!(budget.allowed(), SPIN_FOR);
        // A successful one restores the budget.
        budget.record(true);
        assert_eq!(budget.allowed(), SPIN_FOR);
        assert_eq!(budget.allowed(), SPIN_FOR);
    }

    #[test]
    fn a_reply_seen_restores_the_whole_budget() {
        let budget = Budget::new();
        budget.record(false);
        budget.record(false);
        assert_eq!(budget.allowed(), SPIN_FOR / 4);
        budget.record(true);
        assert_eq!(budget.allowed(), SPIN_FOR);
    }

    #[test]
    fn a_reply_that_came_soon_after_pending_restores_the_budget_a_late_one_does_not() {
        let budget = Budget::new();
        while !budget.allowed().is_zero() {
            budget.record(false);
        }
        budget.answered_after(SPIN_FOR + Duration::from_micros(1));
        assert!(budget.allowed().is_zero(), "a look would not have seen it");
        budget.answered_after(Duration::from_micros(30));
        assert_eq!(budget.allowed(), SPIN_FOR, "a look would have seen it");
    }

    /// Runs `f` on a fresh thread: its own budget, whole.
    fn on_a_fresh_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f).join().unwrap();
    }

    fn budget() -> Duration {
        BUDGET.with(|budget| budget.left.get())
    }

    /// `until` with a `filled` that counts its looks and says yes at look `at` (never with
    /// `None`): whether it saw it, and the looks.
    fn look_for(at: Option<u64>) -> (bool, u64) {
        let looks = Cell::new(0u64);
        let seen = until(&|| {
            looks.set(looks.get() + 1);
            Some(looks.get()) == at
        });
        (seen, looks.get())
    }

    #[test]
    fn a_reply_already_there_is_seen_at_the_first_look() {
        on_a_fresh_thread(|| {
            assert_eq!(look_for(Some(1)), (true, 1));
            assert_eq!(budget(), SPIN_FOR);
        });
    }

    #[test]
    fn a_reply_that_comes_during_the_look_is_seen() {
        // At the 16th look: before the clock is first read, however slow the machine.
        on_a_fresh_thread(|| {
            assert_eq!(look_for(Some(16)), (true, 16));
            assert_eq!(budget(), SPIN_FOR);
        });
    }

    #[test]
    fn a_look_that_sees_nothing_ends_and_halves_the_budget() {
        on_a_fresh_thread(|| {
            let (seen, looks) = look_for(None);
            assert!(!seen);
            assert!(looks >= u64::from(LOOKS_PER_CLOCK));
            assert_eq!(budget(), SPIN_FOR / 2);
        });
    }

    #[test]
    fn a_look_whose_thread_lost_the_core_for_a_while_ends_there() {
        // The 20th look "loses the core" for 30 µs (a sleep), as a yield to a busy thread does:
        // the look ends at its next read of the clock, well inside its 50 µs.
        let looks = Cell::new(0u32);
        assert!(!look(SPIN_FOR, &|| {
            looks.set(looks.get() + 1);
            if looks.get() == 20 {
                std::thread::sleep(give_way::LOST + Duration::from_micros(10));
            }
            false
        }));
        assert!(looks.get() <= 2 * LOOKS_PER_CLOCK, "{} looks", looks.get());
    }

    #[test]
    fn no_look_on_a_thread_that_runs_actors() {
        let _worker = role::enter(role::Role::Worker { may_block: false });
        assert_eq!(look_for(Some(1)), (false, 0));
    }
}
