//! Narrowing: a pool runs on as many of its workers as handle the most messages.
//!
//! # Why
//! Two workers are not always faster than one. Where actors mostly talk to each other (a
//! counting actor fed by producers on every core, a fork-join from a thread outside the
//! pool, an exchange whose engines run where their last order ran), every message that
//! crosses between cores moves cache lines, and what a crossing costs depends on the host:
//! on the same two virtual CPUs it was ~25 ns one minute and ~200 ns the next
//! (BENCHMARKS.md, "Two speeds of the host"). When crossings are dear, one worker handles
//! twice as many messages as two; when they are cheap and the handlers do real work, two
//! handle half as many again as one. No rule fixed in advance is right on both.
//!
//! # How
//! A monitor thread per pool (one that may narrow: not for blocking code, at least two
//! workers) reads, every [`TICK`], the messages the workers' turns handled (each worker
//! publishes a running count with plain stores, `RunNext::counting`). It keeps the pool's
//! *width*, the number of workers that take work (the others are *set aside*: they hand
//! back what they hold and park). The pool starts on one worker, and climbs one worker at a
//! time:
//! - every so often it tries the next width for a few ticks (the first not measured; the
//!   window starts only once the workers are as many as the width, since a worker steps
//!   aside only between turns; one clearly worse tick ends it);
//! - time when every worker slept is left out: the rate is of a pool with work (the gaps
//!   between a benchmark's repetitions, a service between requests);
//! - the first trial comes after ~40 ms of work (a trial of two workers that came earlier
//!   could take the second of two long turns, a counter's producers, to the other worker,
//!   where it runs to its end however the trial ends);
//! - a trial of one worker fewer that did 2x better than both the ticks before it and the
//!   best that width did lately is kept at once; one that did 10 % better than both goes
//!   back to the width before for as long again, and is kept only if it also beats that
//!   (work whose rate rises or falls by itself, or has phases, such as a chain filling up
//!   after its actors were spawned, is not taken for the trial's doing). A trial of one
//!   worker more is kept at once at 10 % better ([`SURE_WIDER`]): every worker at work is
//!   where a pool without narrowing stays anyway, and going back to check cost a short run
//!   its gain (the trading benchmark's 750,000 orders, a tenth of a second, spent 5-10 ms more
//!   at one worker: 6.72 M orders/s at the median with the check at 1.25x, 7.01 M without);
//! - after a trial not kept, it waits at least four times as long before the next (the
//!   square of how much worse it did; up to [`MAX_WAIT`]) and tries the other way where both
//!   are open; after one kept, it goes on the same way soon, or, if it cannot, waits at
//!   least [`KEPT_WAIT`];
//! - a rate that moves 2x from the one measured after the last trial (the host or the work
//!   changed) makes a trial due at once (it starts once the ticks agree, below), at most
//!   once per `KEPT_WAIT`;
//! - a trial waits until the ticks it is compared with agree ([`STEADY`]: the fastest
//!   handled at most 1.25x the slowest's rate), for [`UNSTEADY_WAIT`] at most. A tick
//!   holding the gap between a benchmark's warm-up and its measured run handled a tenth of
//!   the others; in a base of four it made a trial of two workers look 1.26-1.44x better
//!   when it was no better than one, and the pool ran its trading benchmark on two workers
//!   at twice the CPU per order (BENCHMARKS.md, "A trial waits for a steady base").
//!
//! # What it never does
//! - Hold back work: an actor runnable on a worker that steps aside goes to the injector,
//!   which the workers still taking work read; a set-aside worker's run-next position is
//!   closed first, and the actor waiting there runs before it steps aside.
//! - Leave a stuck turn alone: if the workers taking work handle nothing for [`STALL`]
//!   while work waits (a handler that blocks, or computes for long), the pool widens at
//!   once to all its workers and does not narrow again for a while ([`STALL_HOLD`],
//!   doubling while stalls recur).
//! - Cost an idle pool anything: once every worker sleeps and nothing was handled, the
//!   monitor parks until the first worker is woken (`Idle::watch`).
//!
//! A worker reads the width once per turn (a line that changes a few times a second at
//! most) and steps aside only between turns. A turn it is in when the pool narrows past it
//! runs on, but its sends to a catch-up actor that is behind wait for the working workers
//! (`PoolShared::wait_aside`): the one kind of long turn that would otherwise keep the pool
//! as wide as when it began, to its end (a counting actor's producers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::sync::Parker;

use super::PoolShared;
use crate::loom::Ordering;

/// How often the monitor reads the counters while the pool works.
pub(super) const TICK: Duration = Duration::from_millis(5);
/// Ticks at the current width, just before a trial, that the trial is compared with.
const BASE_TICKS: usize = 4;
/// Ticks of a trial: the first is the change settling, the rest are measured.
const TRIAL_TICKS: usize = 4;
/// A tick in which the pool had work for less than this is not measured.
const MIN_ACTIVE: Duration = Duration::from_millis(1);
/// Ticks a trial waits for its workers to step aside (~0.5 s) before it is given up.
const MAX_PENDING: u32 = 100;
/// How fast the best rate seen at a width is forgotten.
const PEAK_HALF_LIFE: Duration = Duration::from_secs(2);
/// A trial that did this much better (than the ticks before it and than the best the width
/// did lately) is kept without going back to check; one that did `GAIN` better than both is
/// checked.
const SURE_GAIN: f64 = 2.0;
/// The same for a trial of one worker more: no check (see the module note), so a wider
/// trial is kept at `GAIN`.
const SURE_WIDER: f64 = GAIN;

/// The gain that keeps a trial at once (`wider`: of one worker more).
fn sure(wider: bool) -> f64 {
    if wider {
        SURE_WIDER
    } else {
        SURE_GAIN
    }
}

/// A trial's width is kept only if it handled this much more per second.
const GAIN: f64 = 1.10;
/// A trial whose first measured tick handled less than this share of the rate before it
/// ends there.
const WORSE: f64 = 0.75;
/// Ticks between trials after a kept one that gained little; multiplied by 4 or more after
/// each trial not kept.
const MIN_WAIT: u32 = 8;
/// At least this long (in ticks: ~1 s) after a trial that was kept: a turn that began at
/// the old width runs to its end there, so a trial right after a change would measure both.
const KEPT_WAIT: u32 = 200;
/// At most this long between trials (in ticks: ~10 s).
const MAX_WAIT: u32 = 2048;
/// A rate this many times higher or lower than the one the last trial settled at makes a
/// trial due at once.
const CHANGED: f64 = 2.0;
/// The ticks a trial is compared with agree if the fastest handled at most this many times
/// what the slowest did.
const STEADY: f64 = 1.25;
/// Ticks a trial waits at most for the ticks before it to agree ([`STEADY`]), ~0.3 s.
const UNSTEADY_WAIT: u32 = 64;
/// The working workers handled nothing for this long while work waited: widen.
pub(super) const STALL: Duration = Duration::from_millis(10);
/// After a stall, no narrowing for this long (doubled while stalls recur, up to 16x).
const STALL_HOLD: Duration = Duration::from_millis(250);

/// Where the climb is.
enum Phase {
    /// At the current width; `wait` ticks until the next trial, and once it is due, the
    /// ticks it has waited (`unsteady`) for the ticks before it to agree.
    Settled { wait: u32, unsteady: u32 },
    /// Trying another width (the previous one was `from`, measured at `base` messages per
    /// second in the ticks just before).
    Trial {
        from: usize,
        base: f64,
        window: Window,
    },
    /// Back at `from` after a trial that did better (`trial_rate` at `trial`), measuring it
    /// again: the trial is kept only if it also beats what `from` does after it, so a rate
    /// that was rising or falling anyway is not taken for the trial's doing.
    Check {
        trial: usize,
        trial_rate: f64,
        base: f64,
        window: Window,
    },
}

impl Phase {
    /// Settled, with `wait` ticks to the next trial.
    fn settled(wait: u32) -> Self {
        Phase::Settled { wait, unsteady: 0 }
    }
}

/// A measurement of a few ticks at one width.
struct Window {
    width: usize,
    /// Ticks waited for the workers to be as many as `width` (a worker steps aside only
    /// between turns).
    pending: u32,
    /// Ticks measured from then on (the first is the change settling in, not counted).
    ticks: usize,
    handled: u64,
    elapsed: Duration,
}

/// What a window says after a tick.
enum Measured {
    /// Not done yet.
    Going,
    /// Done: the rate, messages per second.
    Rate(f64),
    /// Its workers never became as many as its width.
    GivenUp,
}

impl Window {
    fn new(width: usize) -> Self {
        Window {
            width,
            pending: 0,
            ticks: 0,
            handled: 0,
            elapsed: Duration::ZERO,
        }
    }

    /// Adds a tick of `handled` messages in `elapsed` with `working` workers; `base` is the
    /// rate it is compared with (a first measured tick below `WORSE` of it ends the window).
    fn tick(&mut self, working: usize, handled: u64, elapsed: Duration, base: f64) -> Measured {
        if self.ticks == 0 && working != self.width {
            self.pending += 1;
            return if self.pending < MAX_PENDING {
                Measured::Going
            } else {
                Measured::GivenUp
            };
        }
        if elapsed < MIN_ACTIVE {
            return Measured::Going;
        }
        self.ticks += 1;
        if self.ticks > 1 {
            self.handled += handled;
            self.elapsed += elapsed;
        }
        let clearly_worse = self.ticks == 2 && rate(&[(handled, elapsed)]) < base * WORSE;
        if self.ticks < TRIAL_TICKS && !clearly_worse {
            return Measured::Going;
        }
        Measured::Rate(rate(&[(self.handled, self.elapsed)]))
    }
}

/// Messages per second over `ticks`.
fn rate(ticks: &[(u64, Duration)]) -> f64 {
    let handled: u64 = ticks.iter().map(|t| t.0).sum();
    let time: Duration = ticks.iter().map(|t| t.1).sum();
    handled as f64 / time.as_secs_f64().max(1e-9)
}

/// The monitor's state between ticks.
struct Climb {
    workers: usize,
    phase: Phase,
    /// Ticks between trials now (multiplied after each trial not kept).
    wait: u32,
    /// Messages handled in each of the last ticks at the current width, and the time the pool
    /// had work in it, most recent last (at most `BASE_TICKS`; ticks of a pool that had work
    /// for less than `MIN_ACTIVE` are left out).
    recent: Vec<(u64, Duration)>,
    /// Direction of the next trial where both are open: true for one worker fewer. A kept
    /// trial goes on the same way; one not kept turns round.
    narrower_next: bool,
    /// The rate measured at the width the last trial settled on (in the first full window
    /// after it).
    decided: Option<f64>,
    /// When a moved rate last started a trial.
    asked_at: Option<Instant>,
    /// The best base window at the current width lately (see `peak_at`), and when it was
    /// last updated.
    peak: f64,
    peak_seen: Option<Instant>,
    /// No narrowing before this (after a stall).
    hold_until: Option<Instant>,
    hold: Duration,
}

/// Whether `ticks` agree: the fastest handled at most [`STEADY`] times the slowest's rate.
fn steady(ticks: &[(u64, Duration)]) -> bool {
    let (slowest, fastest) = ticks
        .iter()
        .map(|tick| rate(std::slice::from_ref(tick)))
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
            (lo.min(r), hi.max(r))
        });
    fastest <= slowest * STEADY
}

impl Climb {
    fn new(workers: usize) -> Self {
        Climb {
            workers,
            // The first trial after `MIN_WAIT` ticks of work: a trial of two workers that
            // came earlier could take the second of two long turns (a counter's producers)
            // to the other worker, where it runs to its end however the trial ends.
            phase: Phase::settled(MIN_WAIT),
            wait: MIN_WAIT,
            recent: Vec::with_capacity(BASE_TICKS),
            narrower_next: true,
            decided: None,
            asked_at: None,
            peak: 0.0,
            peak_seen: None,
            hold_until: None,
            hold: STALL_HOLD,
        }
    }

    /// One tick: `handled` messages in `elapsed` at `width`, with `working` workers not set
    /// aside (more than `width` while one finishes its turn). Returns the width to set.
    fn tick(
        &mut self,
        width: usize,
        working: usize,
        handled: u64,
        elapsed: Duration,
        now: Instant,
    ) -> usize {
        let held = self.hold_until.is_some_and(|until| now < until);
        let peak = self.peak_at(now);
        match &mut self.phase {
            Phase::Settled { wait, unsteady } => {
                // Measured only once the workers are as many as the width (after a return
                // from a trial, one may still be finishing a turn).
                if elapsed >= MIN_ACTIVE && working == width {
                    if self.recent.len() == BASE_TICKS {
                        self.recent.remove(0);
                    }
                    self.recent.push((handled, elapsed));
                }
                *wait = wait.saturating_sub(1);
                if self.recent.len() < BASE_TICKS || handled == 0 {
                    return width;
                }
                let base = rate(&self.recent);
                self.peak = peak.max(base);
                self.peak_seen = Some(now);
                // The rate moved far from the one measured after the last trial: the work or
                // the host changed, and the width that was best may not be. (At most once per
                // `KEPT_WAIT`, so work whose rate swings by itself does not trial all along.)
                match self.decided {
                    None => self.decided = Some(base),
                    Some(decided) if base > decided * CHANGED || base < decided / CHANGED => {
                        let quiet = self
                            .asked_at
                            .is_none_or(|at| now.saturating_duration_since(at) >= TICK * KEPT_WAIT);
                        if quiet {
                            self.asked_at = Some(now);
                            *wait = 0;
                        }
                        self.decided = Some(base);
                    }
                    Some(_) => {}
                }
                if *wait > 0 {
                    return width;
                }
                // Ticks that disagree among themselves measure the work changing (the gap
                // between a benchmark's warm-up and its measured run, a load that comes in
                // phases), not the width: a trial compared with them would be judged against
                // a rate that neither width does. It waits until they agree, or for
                // `UNSTEADY_WAIT` at most (work that never settles is still tried).
                if !steady(&self.recent) && *unsteady < UNSTEADY_WAIT {
                    *unsteady += 1;
                    return width;
                }
                let narrower = width > 1 && !held;
                let wider = width < self.workers;
                let try_narrower = match (narrower, wider) {
                    (true, true) => self.narrower_next,
                    (true, false) => true,
                    (false, true) => false,
                    (false, false) => return width,
                };
                self.narrower_next = try_narrower;
                let next = if try_narrower { width - 1 } else { width + 1 };
                self.phase = Phase::Trial {
                    from: width,
                    base,
                    window: Window::new(next),
                };
                next
            }
            Phase::Trial { from, base, window } => {
                let (from, base, trial) = (*from, *base, window.width);
                match window.tick(working, handled, elapsed, base) {
                    Measured::Going => trial,
                    Measured::GivenUp => self.not_kept(from, 2.0),
                    // Far better, and better than the best this width did lately: no trend
                    // of a few ticks, nor a slow phase of the work just before, does that. A
                    // wider trial needs less: every worker at work is where a pool without
                    // narrowing stays anyway.
                    Measured::Rate(trial_rate)
                        if trial_rate > base.max(peak) * sure(trial > from) =>
                    {
                        self.kept(trial, trial_rate / base.max(1.0))
                    }
                    Measured::Rate(trial_rate) if trial_rate > base.max(peak) * GAIN => {
                        // Better: back to `from` to see whether it does as well again.
                        self.phase = Phase::Check {
                            trial,
                            trial_rate,
                            base,
                            window: Window::new(from),
                        };
                        from
                    }
                    Measured::Rate(trial_rate) => {
                        self.not_kept(from, (base / trial_rate.max(1.0)).powi(2))
                    }
                }
            }
            Phase::Check {
                trial,
                trial_rate,
                base,
                window,
            } => {
                let (trial, trial_rate, base, from) = (*trial, *trial_rate, *base, window.width);
                // Nothing is clearly worse here: the window measures what is kept anyway.
                match window.tick(working, handled, elapsed, 0.0) {
                    Measured::Going => from,
                    Measured::GivenUp => self.not_kept(from, 2.0),
                    Measured::Rate(after) if trial_rate > base.max(after) * GAIN => {
                        self.kept(trial, trial_rate / base.max(after).max(1.0))
                    }
                    Measured::Rate(after) => {
                        self.not_kept(from, (base.max(after) / trial_rate.max(1.0)).powi(2))
                    }
                }
            }
        }
    }

    /// The trial of `trial` is kept, with `gain` over the width before: returns it. The
    /// clearer the gain, the longer until the next trial (as for a loss), and a width just
    /// kept holds for a while (`KEPT_WAIT`); unless the climb can go on the same way, which
    /// it tries soon.
    fn kept(&mut self, trial: usize, gain: f64) -> usize {
        self.peak = 0.0;
        let factor = (gain * gain).clamp(1.0, 64.0) as u32;
        let goes_on = if self.narrower_next {
            trial > 1
        } else {
            trial < self.workers
        };
        self.wait = if goes_on {
            MIN_WAIT
        } else {
            MIN_WAIT.saturating_mul(factor).clamp(KEPT_WAIT, MAX_WAIT)
        };
        self.recent.clear();
        self.phase = Phase::settled(self.wait);
        self.decided = None;
        trial
    }

    /// The trial is not kept: back to `from`. The worse it did (`factor`, at least 4), the
    /// longer until the next (a trial costs what it loses, and a turn that began in it runs
    /// to its end at its width), which tries the other way where both are open.
    fn not_kept(&mut self, from: usize, factor: f64) -> usize {
        let factor = factor.clamp(4.0, 64.0) as u32;
        self.wait = self.wait.saturating_mul(factor).min(MAX_WAIT);
        self.narrower_next = !self.narrower_next;
        self.recent.clear();
        self.phase = Phase::settled(self.wait);
        self.decided = None;
        from
    }

    /// The highest rate of a base window at the current width, halved every `PEAK_HALF_LIFE`
    /// since it was last raised.
    fn peak_at(&self, now: Instant) -> f64 {
        let Some(seen) = self.peak_seen else {
            return 0.0;
        };
        let halves =
            now.saturating_duration_since(seen).as_secs_f64() / PEAK_HALF_LIFE.as_secs_f64();
        self.peak * 0.5f64.powf(halves)
    }

    /// The working workers stalled: all of them work from now, for a while.
    fn stalled(&mut self, now: Instant) -> usize {
        self.peak = 0.0;
        let recurring = self.hold_until.is_some_and(|until| now < until + self.hold);
        self.hold = if recurring {
            (self.hold * 2).min(STALL_HOLD * 16)
        } else {
            STALL_HOLD
        };
        self.hold_until = Some(now + self.hold);
        self.recent.clear();
        self.wait = MIN_WAIT;
        self.decided = None;
        self.phase = Phase::settled(MIN_WAIT);
        self.workers
    }
}

/// The monitor thread's body: ticks until the pool shuts down.
pub(super) fn run(shared: Arc<PoolShared>, parker: Parker) {
    let workers = shared.stealers.len();
    let mut climb = Climb::new(workers);
    // Each worker's count at the last tick (allocated once: the monitor allocates nothing
    // while it runs).
    let mut last: Vec<u64> = shared
        .handled
        .iter()
        .map(|h| h.load(Ordering::Relaxed))
        .collect();
    let mut last_at = Instant::now();
    let mut last_asleep = shared.idle.all_asleep();
    // When the working workers last handled a message, or no work waited.
    let mut progress_at = last_at;
    shared.idle.watch(parker.unparker().clone());
    let mut asleep_now = false;
    loop {
        if asleep_now {
            // Woken by the first worker woken (`Idle::watch`), or at shutdown.
            parker.park();
        } else {
            parker.park_timeout(TICK);
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let width = shared.width.load(Ordering::Relaxed);
        let (mut handled, mut working) = (0, 0);
        for (index, (count, last)) in shared.handled.iter().zip(&mut last).enumerate() {
            let count = count.load(Ordering::Relaxed);
            let delta = count - *last;
            *last = count;
            handled += delta;
            if index < width {
                working += delta;
            }
        }
        // Time the whole pool slept does not count: the rate is of a pool with work.
        let asleep = shared.idle.all_asleep();
        let elapsed = (now - last_at).saturating_sub(asleep.saturating_sub(last_asleep));
        last_at = now;
        last_asleep = asleep;

        let waiting = shared.work_waiting();
        if working > 0 || !waiting || shared.idle.idle_workers() >= workers {
            progress_at = now;
        }
        // Only once the workers set aside have stepped aside: until then they work too.
        let working_now = workers - shared.idle.set_aside();
        if working_now > width {
            progress_at = now;
        }
        let next = if width < workers && now - progress_at >= STALL {
            progress_at = now;
            climb.stalled(now)
        } else {
            climb.tick(width, working_now, handled, elapsed, now)
        };
        asleep_now = handled == 0 && !waiting && next == width && shared.idle.all_asleep_now();
        if next != width {
            shared.set_width(next, width);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS5: Duration = Duration::from_millis(5);

    /// Runs ticks at `rate(width)` messages per 5 ms until `ticks` have passed; the widths seen.
    fn climb(workers: usize, ticks: usize, rate: impl Fn(usize) -> u64) -> Vec<usize> {
        let mut climb = Climb::new(workers);
        let mut width = workers;
        let start = Instant::now();
        (0..ticks)
            .map(|i| {
                width = climb.tick(width, width, rate(width), MS5, start + MS5 * i as u32);
                width
            })
            .collect()
    }

    #[test]
    fn narrows_when_one_worker_handles_more() {
        let widths = climb(2, 200, |w| if w == 1 { 2_000 } else { 1_000 });
        assert_eq!(*widths.last().unwrap(), 1);
        // Once narrowed it tries two again, less and less often.
        let wide_ticks = widths.iter().skip(50).filter(|&&w| w == 2).count();
        assert!(wide_ticks < 30, "{wide_ticks} ticks at two workers");
    }

    #[test]
    fn stays_wide_when_two_workers_handle_more() {
        let widths = climb(2, 400, |w| if w == 2 { 1_500 } else { 1_000 });
        assert_eq!(*widths.last().unwrap(), 2);
        let narrow_ticks = widths.iter().filter(|&&w| w == 1).count();
        assert!(narrow_ticks < 40, "{narrow_ticks} ticks at one worker");
    }

    #[test]
    fn a_small_gain_is_not_worth_a_change() {
        let widths = climb(2, 200, |w| if w == 1 { 1_050 } else { 1_000 });
        assert_eq!(*widths.last().unwrap(), 2);
    }

    #[test]
    fn a_rate_that_rises_by_itself_is_not_taken_for_a_trials_gain() {
        // Whatever the width, each tick handles 4 % more than the one before: a trial of
        // either width does better than the ticks before it, but not than those after.
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 2;
        let mut rate = 1_000.0f64;
        for i in 0..120 {
            width = climb.tick(width, width, rate as u64, MS5, start + MS5 * i);
            rate *= 1.04;
            if matches!(climb.phase, Phase::Settled { .. }) {
                assert_eq!(width, 2, "tick {i}: a trial was kept");
            }
        }
    }

    #[test]
    fn a_gap_in_the_work_before_a_trial_does_not_make_it_look_better() {
        // One worker handles more than two, but the last tick before the first trial held
        // a gap in the work (a tenth of the rate): against a base with it, two workers would
        // look 1.2x better. The trial waits for ticks that agree, and one worker is kept.
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 1;
        let mut at_two = 0;
        for i in 0..400 {
            let now = start + MS5 * i;
            // The pool sleeps until the work starts: the first trial is due by then.
            if i < 10 {
                assert_eq!(climb.tick(width, width, 0, Duration::ZERO, now), 1);
                continue;
            }
            let rate = match (i, width) {
                (13, _) => 100,
                (_, 1) => 1_000,
                _ => 950,
            };
            width = climb.tick(width, width, rate, MS5, now);
            at_two += usize::from(width == 2);
        }
        assert_eq!(width, 1);
        assert!(at_two < 20, "{at_two} ticks at two workers");
    }

    #[test]
    fn work_that_never_settles_is_still_tried() {
        // Every other tick handles twice as much: the base never agrees, and two workers,
        // 3x better, are tried anyway after the longest wait.
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 1;
        let mut first_at_two = None;
        for i in 0..200u32 {
            let rate = if width == 2 {
                6_000
            } else {
                1_000 * (1 + u64::from(i % 2))
            };
            width = climb.tick(width, width, rate, MS5, start + MS5 * i);
            if width == 2 && first_at_two.is_none() {
                first_at_two = Some(i);
            }
        }
        assert_eq!(width, 2);
        let first = first_at_two.expect("a trial of two workers");
        assert!(
            first >= MIN_WAIT + UNSTEADY_WAIT - 1,
            "tried at tick {first}"
        );
    }

    #[test]
    fn an_idle_pool_is_left_as_it_is() {
        let widths = climb(4, 100, |_| 0);
        assert!(widths.iter().all(|&w| w == 4));
    }

    #[test]
    fn climbs_one_worker_at_a_time_to_the_best_width() {
        // Best at two of four workers.
        let rate = |w: usize| [0, 1_000, 3_000, 2_000, 1_500][w];
        let widths = climb(4, 600, rate);
        assert_eq!(*widths.last().unwrap(), 2);
        assert!(widths.windows(2).all(|p| p[0].abs_diff(p[1]) <= 1));
    }

    #[test]
    fn a_trial_is_measured_only_once_its_workers_stepped_aside() {
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 2;
        let mut i = 0;
        // Settle at two workers, until the first trial narrows.
        while width == 2 {
            width = climb.tick(2, 2, 1_000, MS5, start + MS5 * i);
            i += 1;
        }
        // The second worker is still in a turn: however well the ticks go, they are not the
        // trial's.
        for _ in 0..50 {
            assert_eq!(climb.tick(1, 2, 1_000, MS5, start + MS5 * i), 1);
            i += 1;
        }
        // It never steps aside: the trial is given up.
        for _ in 0..MAX_PENDING {
            width = climb.tick(1, 2, 1_000, MS5, start + MS5 * i);
            i += 1;
            if width == 2 {
                break;
            }
        }
        assert_eq!(width, 2);
    }

    #[test]
    fn a_rate_that_moves_far_starts_a_trial_at_once() {
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 2;
        // Two workers are better: the trial of one fails, and the next waits long.
        let rate = |w: usize| if w == 2 { 2_000 } else { 1_000 };
        for i in 0..20 {
            width = climb.tick(width, width, rate(width), MS5, start + MS5 * i);
        }
        assert_eq!(width, 2);
        let Phase::Settled { wait, .. } = climb.phase else {
            panic!("settled after the failed trial");
        };
        assert!(wait > 10, "{wait} ticks to the next trial");
        // The host slows down three times over: a trial follows within a few ticks.
        let mut tried = false;
        for i in 20..30 {
            width = climb.tick(width, width, 600, MS5, start + MS5 * i);
            tried |= width == 1;
        }
        assert!(tried, "no trial after the rate fell");
    }

    #[test]
    fn a_wider_trial_a_little_better_is_kept_without_going_back() {
        let mut climb = Climb::new(2);
        let start = Instant::now();
        let mut width = 1;
        let mut widths = Vec::new();
        for i in 0..40 {
            let rate = if width == 2 { 1_150 } else { 1_000 };
            width = climb.tick(width, width, rate, MS5, start + MS5 * i);
            widths.push(width);
        }
        let first = widths.iter().position(|&w| w == 2).expect("a trial of two");
        assert!(
            widths[first..].iter().all(|&w| w == 2),
            "went back to one worker after the trial: {widths:?}"
        );
    }

    #[test]
    fn a_stall_widens_and_holds_narrowing_off() {
        let mut climb = Climb::new(2);
        let start = Instant::now();
        assert_eq!(climb.stalled(start), 2);
        // Within the hold no trial narrows, however much better one worker would be.
        for i in 0..40 {
            let now = start + MS5 * i;
            assert_eq!(climb.tick(2, 2, 1_000, MS5, now), 2);
        }
        // A second stall soon after holds for longer.
        let again = start + Duration::from_millis(300);
        climb.stalled(again);
        assert_eq!(climb.hold, STALL_HOLD * 2);
    }

    /// A system of two workers, its default pool, and actors that count what they are sent.
    mod pools {
        use crate::loom::{AtomicBool, Ordering::SeqCst};
        use std::sync::{mpsc, Arc};
        use std::time::{Duration, Instant};

        use crate::scheduler::PoolShared;
        use crate::{Actor, Addr, Context, Handler, Message, SpawnOptions, System};

        struct Count(u64);
        impl Actor for Count {}

        struct Add;
        impl Message for Add {
            type Reply = ();
        }
        impl Handler<Add> for Count {
            fn handle(&mut self, _: Add, _: &mut Context<Self>) {
                self.0 += 1;
            }
        }

        struct Get;
        impl Message for Get {
            type Reply = u64;
        }
        impl Handler<Get> for Count {
            fn handle(&mut self, _: Get, _: &mut Context<Self>) -> u64 {
                self.0
            }
        }

        /// Sleeps in its handler: a turn that holds its worker.
        struct Sleeper;
        impl Actor for Sleeper {}
        struct Sleep(Duration);
        impl Message for Sleep {
            type Reply = ();
        }
        impl Handler<Sleep> for Sleeper {
            fn handle(&mut self, msg: Sleep, _: &mut Context<Self>) {
                std::thread::sleep(msg.0);
            }
        }

        fn default_pool(system: &System) -> Arc<PoolShared> {
            system.shared().pools()[0]
                .pool()
                .expect("the default pool runs")
                .clone()
        }

        /// The default pool, once its second worker has stepped aside.
        fn narrowed_to_one(system: &System) -> Arc<PoolShared> {
            let pool = default_pool(system);
            pool.set_width(1, 2);
            wait_until("the second worker to step aside", || {
                pool.idle.set_aside() == 1
            });
            pool
        }

        fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !done() {
                assert!(Instant::now() < deadline, "timed out waiting for {what}");
                std::thread::sleep(Duration::from_millis(1));
            }
        }

        #[test]
        fn a_worker_set_aside_hands_back_its_actors_and_comes_back() {
            // No monitor: the test sets the width itself.
            let system = System::builder()
                .workers(2)
                .narrowing(false)
                .build()
                .unwrap();
            let pool = default_pool(&system);
            let actors: Vec<_> = (0..64).map(|_| system.spawn(Count(0))).collect();
            for round in 0..6u64 {
                // Narrow and widen while messages flow: from this thread, and actors waking
                // actors on the workers (each `Add` is told by the pool's own turns too, via
                // the asks below).
                let (width, before) = if round % 2 == 0 { (1, 2) } else { (2, 1) };
                pool.set_width(width, before);
                for i in 0..20_000u64 {
                    actors[(i % 64) as usize].tell(Add).unwrap();
                }
                if width == 1 {
                    wait_until("the second worker to step aside", || {
                        pool.idle.set_aside() == 1
                    });
                } else {
                    wait_until("the second worker to come back", || {
                        pool.idle.set_aside() == 0
                    });
                }
                let total: u64 = actors.iter().map(|a| a.ask(Get).wait().unwrap()).sum();
                assert_eq!(total, 20_000 * (round + 1), "round {round}");
            }
            let metrics = system.pool_metrics();
            assert_eq!(metrics[0].width_changes, 6);
            system.shutdown();
        }

        /// Holds its worker until `release` is set: a turn on the working worker that
        /// handles nothing for as long.
        struct Hold {
            started: mpsc::Sender<()>,
            release: Arc<AtomicBool>,
        }
        impl Message for Hold {
            type Reply = ();
        }
        impl Handler<Hold> for Count {
            fn handle(&mut self, msg: Hold, _: &mut Context<Self>) {
                msg.started.send(()).unwrap();
                while !msg.release.load(SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }

        /// In one turn: says which worker runs it, waits for `go`, tells `n` `Add`s to `to`,
        /// and says it is done.
        struct Producer {
            to: Addr<Count>,
            said: mpsc::Sender<&'static str>,
            at: mpsc::Sender<String>,
        }
        impl Actor for Producer {}
        struct Produce {
            n: u64,
            go: Arc<AtomicBool>,
        }
        impl Message for Produce {
            type Reply = ();
        }
        impl Handler<Produce> for Producer {
            fn handle(&mut self, msg: Produce, _: &mut Context<Self>) {
                let thread = std::thread::current().name().unwrap_or_default().to_owned();
                self.at.send(thread).unwrap();
                while !msg.go.load(SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                for _ in 0..msg.n {
                    self.to.tell(Add).unwrap();
                }
                self.said.send("done").unwrap();
            }
        }

        #[test]
        fn a_turn_set_aside_waits_at_a_catch_up_send_and_never_for_a_stuck_worker() {
            let system = System::builder()
                .workers(2)
                .narrowing(false)
                .name("aside")
                .build()
                .unwrap();
            // The sink holds worker 0 (the only one taking work when it starts its turn)...
            let pool = narrowed_to_one(&system);
            let sink = system.spawn_with(Count(0), SpawnOptions::new().catch_up(64));
            let release = Arc::new(AtomicBool::new(false));
            let (started, held) = mpsc::channel();
            sink.tell(Hold {
                started,
                release: release.clone(),
            })
            .unwrap();
            held.recv_timeout(Duration::from_secs(20)).unwrap();
            let (said, done) = mpsc::channel();
            let (at, thread) = mpsc::channel();
            let producer = system.spawn(Producer {
                to: sink.clone(),
                said,
                at,
            });
            // ... so the producer, once worker 1 is back, runs on worker 1.
            pool.set_width(2, 1);
            let go = Arc::new(AtomicBool::new(false));
            producer
                .tell(Produce {
                    n: 10_000,
                    go: go.clone(),
                })
                .unwrap();
            let thread = thread.recv_timeout(Duration::from_secs(20)).unwrap();
            assert!(thread.ends_with("-1"), "the producer runs on {thread}");
            // Narrowed past worker 1 in the producer's turn: its sends find the sink behind
            // (held, 10,000 messages queued) and wait; worker 0 handles nothing, so each wait
            // ends after one look and the turn runs to its end while the sink is still held.
            pool.set_width(1, 2);
            go.store(true, SeqCst);
            assert_eq!(done.recv_timeout(Duration::from_secs(20)), Ok("done"));
            let waits = pool.aside_waits.load(crate::loom::Ordering::Relaxed);
            assert!(waits >= 1, "no send of the set-aside turn waited");
            assert_eq!(
                system.pool_metrics()[0].aside_waits,
                waits,
                "PoolMetrics reports the waits"
            );
            release.store(true, SeqCst);
            assert_eq!(sink.ask(Get).wait().unwrap(), 10_000);
            system.shutdown_timeout(Duration::from_secs(20)).unwrap();
        }

        #[test]
        fn shutdown_wakes_a_worker_set_aside() {
            let system = System::builder()
                .workers(2)
                .narrowing(false)
                .build()
                .unwrap();
            narrowed_to_one(&system);
            let actor = system.spawn(Count(0));
            actor.tell(Add).unwrap();
            assert_eq!(actor.ask(Get).wait().unwrap(), 1);
            system.shutdown_timeout(Duration::from_secs(20)).unwrap();
        }

        #[test]
        fn a_narrowed_pool_widens_when_a_turn_holds_its_worker() {
            // Asks wait without running turns themselves, so only a worker can answer.
            let system = System::builder()
                .workers(2)
                .waiters_help(false)
                .build()
                .unwrap();
            let pool = narrowed_to_one(&system);
            let sleeper = system.spawn(Sleeper);
            let counter = system.spawn(Count(0));
            sleeper.tell(Sleep(Duration::from_secs(3))).unwrap();
            // The sleeper holds the one working worker (give it the time to start).
            std::thread::sleep(Duration::from_millis(20));
            let start = Instant::now();
            counter.tell(Add).unwrap();
            assert_eq!(counter.ask(Get).wait().unwrap(), 1);
            let waited = start.elapsed();
            // The monitor saw nothing handled for `STALL` while work waited, and widened.
            assert!(
                waited < Duration::from_millis(1_500),
                "the ask waited {waited:?} behind a sleeping turn"
            );
            assert_eq!(pool.width.load(crate::loom::Ordering::Relaxed), 2);
            system.shutdown_timeout(Duration::from_secs(20)).unwrap();
        }
    }
}
