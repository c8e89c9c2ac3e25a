//! A circuit breaker: stops calling a backend that keeps failing, and tries it again later.
//!
//! The states are one enum, with their legal data:
//!
//! ```text
//!            failure rate >= threshold over the last `window` calls (at least `minimum_calls`)
//!   Closed ──────────────────────────────────────────────────────────────────────────────► Open
//!     ▲                                                                                    │
//!     │ `half_open_calls` probes all succeed              `open_for` has passed            │
//!     └──────────────────────────── HalfOpen ◄──────────────────────────────────────────────┘
//!                                      │ any probe fails ──► Open (for `open_for` again)
//! ```
//!
//! A failure is an error answer or a timeout. It is a plain value owned by the actor that
//! calls the backend (no locks): the actor asks [`Breaker::permit`] before each call and tells
//! [`Breaker::record`] how it went. Time is passed in, so the tests control it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The breaker's settings. Defaults follow Hystrix's (a 20-call volume threshold, 50% errors,
/// a 5 s sleep window) with resilience4j's count-based window and half-open probes; see
/// [`BreakerConfig::default`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    /// How many of the most recent calls the failure rate is computed over.
    pub window: usize,
    /// Calls needed in the window before the rate can open the breaker.
    pub minimum_calls: usize,
    /// Failure rate (0.0-1.0] at or above which the breaker opens.
    pub failure_threshold: f64,
    /// How long it stays open before letting probes through.
    pub open_for: Duration,
    /// Probes let through while half-open; all must succeed to close.
    pub half_open_calls: usize,
}

impl Default for BreakerConfig {
    /// - `window` 20: Hystrix's `requestVolumeThreshold` (20); resilience4j's default window is
    ///   100 calls, which at a few hundred calls a second would keep a dead backend's callers
    ///   waiting for a timeout each for longer than needed.
    /// - `minimum_calls` 10: half the window, so that two failures in the first calls after a
    ///   start do not open it (resilience4j's `minimumNumberOfCalls` equals its window, 100).
    /// - `failure_threshold` 0.5: both libraries' default (50%).
    /// - `open_for` 5 s: Hystrix's `sleepWindowInMilliseconds` (5000); resilience4j's 60 s
    ///   keeps a recovered backend unused for a minute.
    /// - `half_open_calls` 3: resilience4j's is 10; 3 probes decide sooner, and each failing
    ///   probe costs its caller a timeout.
    fn default() -> Self {
        Self {
            window: 20,
            minimum_calls: 10,
            failure_threshold: 0.5,
            open_for: Duration::from_secs(5),
            half_open_calls: 3,
        }
    }
}

impl BreakerConfig {
    /// Checks the settings: each a one-line reason.
    pub fn check(&self) -> Result<(), String> {
        if self.window == 0 {
            return Err("the breaker's window must hold at least 1 call".into());
        }
        if self.minimum_calls == 0 || self.minimum_calls > self.window {
            return Err(format!(
                "the breaker's minimum calls must be between 1 and its window ({})",
                self.window
            ));
        }
        if !(self.failure_threshold > 0.0 && self.failure_threshold <= 1.0) {
            return Err("the breaker's failure threshold must be in (0, 1]".into());
        }
        if self.open_for.is_zero() {
            return Err("the breaker must stay open for more than 0 s".into());
        }
        if self.half_open_calls == 0 {
            return Err("the breaker needs at least 1 half-open probe".into());
        }
        Ok(())
    }
}

/// Where the breaker is, with what each state needs.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Calls go through; the outcomes of the last `window` calls (true = failed).
    Closed {
        /// Most recent last.
        outcomes: VecDeque<bool>,
    },
    /// Calls fail fast until `until`.
    Open {
        /// When probes may go through.
        until: Instant,
    },
    /// Probes go through, at most `half_open_calls` of them.
    HalfOpen {
        /// Probes let through so far.
        started: usize,
        /// Probes that came back successful.
        succeeded: usize,
    },
}

/// The state's name, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Calls go through.
    Closed,
    /// Calls fail fast.
    Open,
    /// Probes go through.
    HalfOpen,
}

/// Why a call may not be made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The breaker is open (or half-open with all its probes out).
    #[error("the circuit breaker is open: the service failed too often; retry later")]
    Open,
}

/// How a call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer.
    Success,
    /// An error answer, or no answer in time.
    Failure,
}

/// A permit to make one call, given by [`Breaker::permit`]; pass it back to
/// [`Breaker::record`]. (Move-only: one outcome per permit.)
#[derive(Debug)]
#[must_use = "record the call's outcome with Breaker::record"]
pub struct Permit {
    /// Given while half-open: a probe.
    probe: bool,
    /// The breaker's generation when given: outcomes of calls begun before the last
    /// transition do not count in the new state.
    generation: u64,
}

/// A circuit breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    config: BreakerConfig,
    state: State,
    /// Bumped on every transition.
    generation: u64,
    /// Times it has opened.
    opened: u64,
    /// Times it has closed again after opening.
    closed: u64,
}

impl Breaker {
    /// A closed breaker. `config` must have passed [`BreakerConfig::check`].
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: State::Closed {
                outcomes: VecDeque::with_capacity(config.window),
            },
            generation: 0,
            opened: 0,
            closed: 0,
        }
    }

    /// The current state's name (an open breaker whose time is up reads as half-open).
    pub fn phase(&self, now: Instant) -> Phase {
        match &self.state {
            State::Closed { .. } => Phase::Closed,
            State::Open { until } if now >= *until => Phase::HalfOpen,
            State::Open { .. } => Phase::Open,
            State::HalfOpen { .. } => Phase::HalfOpen,
        }
    }

    /// The state, for tests and inspection.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Times it has opened, and times it has closed again.
    pub fn transitions(&self) -> (u64, u64) {
        (self.opened, self.closed)
    }

    /// May a call be made now?
    pub fn permit(&mut self, now: Instant) -> Result<Permit, Refused> {
        if let State::Open { until } = self.state {
            if now < until {
                return Err(Refused::Open);
            }
            self.enter(State::HalfOpen {
                started: 0,
                succeeded: 0,
            });
        }
        let generation = self.generation;
        match &mut self.state {
            State::Closed { .. } => Ok(Permit {
                probe: false,
                generation,
            }),
            State::HalfOpen { started, .. } => {
                if *started >= self.config.half_open_calls {
                    return Err(Refused::Open);
                }
                *started += 1;
                Ok(Permit {
                    probe: true,
                    generation,
                })
            }
            State::Open { .. } => unreachable!("an open breaker past its time became half-open"),
        }
    }

    /// Records how the call made under `permit` went.
    pub fn record(&mut self, permit: Permit, outcome: Outcome, now: Instant) {
        if permit.generation != self.generation {
            // Begun under an earlier state: a slow call that was already counted against
            // the backend, or a probe of a half-open period that has ended.
            return;
        }
        let config = self.config;
        match &mut self.state {
            State::Closed { outcomes } => {
                debug_assert!(!permit.probe);
                if outcomes.len() == config.window {
                    outcomes.pop_front();
                }
                outcomes.push_back(outcome == Outcome::Failure);
                let calls = outcomes.len();
                let failures = outcomes.iter().filter(|failed| **failed).count();
                if calls >= config.minimum_calls
                    && failures as f64 >= config.failure_threshold * calls as f64
                {
                    self.open(now);
                }
            }
            State::HalfOpen { succeeded, .. } => match outcome {
                Outcome::Failure => self.open(now),
                Outcome::Success => {
                    *succeeded += 1;
                    if *succeeded >= config.half_open_calls {
                        self.closed += 1;
                        self.enter(State::Closed {
                            outcomes: VecDeque::with_capacity(config.window),
                        });
                    }
                }
            },
            // A permit of this generation was given in Closed or HalfOpen, and every move to
            // Open bumps the generation.
            State::Open { .. } => {}
        }
    }

    fn open(&mut self, now: Instant) {
        self.opened += 1;
        self.enter(State::Open {
            until: now + self.config.open_for,
        });
    }

    fn enter(&mut self, state: State) {
        self.state = state;
        self.generation += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BreakerConfig {
        BreakerConfig {
            window: 10,
            minimum_calls: 4,
            failure_threshold: 0.5,
            open_for: Duration::from_secs(5),
            half_open_calls: 2,
        }
    }

    fn call(breaker: &mut Breaker, outcome: Outcome, now: Instant) -> Result<(), Refused> {
        let permit = breaker.permit(now)?;
        breaker.record(permit, outcome, now);
        Ok(())
    }

    #[test]
    fn stays_closed_below_the_minimum_calls_and_the_threshold() {
        let now = Instant::now();
        let mut breaker = Breaker::new(config());
        for _ in 0..3 {
            call(&mut breaker, Outcome::Failure, now).unwrap();
        }
        assert_eq!(breaker.phase(now), Phase::Closed, "3 calls < minimum 4");
        let mut breaker = Breaker::new(config());
        for i in 0..100 {
            // 1 failure in 3, the first after two successes: below 50% in every window.
            let outcome = if i % 3 == 2 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            call(&mut breaker, outcome, now).unwrap();
        }
        assert_eq!(breaker.phase(now), Phase::Closed);
    }

    #[test]
    fn opens_at_the_threshold_and_fails_fast() {
        let now = Instant::now();
        let mut breaker = Breaker::new(config());
        call(&mut breaker, Outcome::Success, now).unwrap();
        call(&mut breaker, Outcome::Success, now).unwrap();
        call(&mut breaker, Outcome::Failure, now).unwrap();
        assert_eq!(breaker.phase(now), Phase::Closed);
        call(&mut breaker, Outcome::Failure, now).unwrap(); // 2 of 4: 50%
        assert_eq!(breaker.phase(now), Phase::Open);
        assert_eq!(breaker.permit(now).unwrap_err(), Refused::Open);
        assert_eq!(
            breaker
                .permit(now + Duration::from_millis(4_999))
                .unwrap_err(),
            Refused::Open
        );
        assert_eq!(breaker.transitions(), (1, 0));
    }

    #[test]
    fn the_window_forgets_old_outcomes() {
        let now = Instant::now();
        let mut breaker = Breaker::new(config());
        // A hundred successes long ago do not dilute failures now: the rate is over the
        // last 10 calls.
        for _ in 0..100 {
            call(&mut breaker, Outcome::Success, now).unwrap();
        }
        for _ in 0..4 {
            call(&mut breaker, Outcome::Failure, now).unwrap();
        }
        assert_eq!(
            breaker.phase(now),
            Phase::Closed,
            "4 failures in the last 10"
        );
        call(&mut breaker, Outcome::Failure, now).unwrap();
        assert_eq!(breaker.phase(now), Phase::Open, "5 failures in the last 10");
    }

    fn opened(now: Instant) -> Breaker {
        let mut breaker = Breaker::new(config());
        for _ in 0..4 {
            call(&mut breaker, Outcome::Failure, now).unwrap();
        }
        assert_eq!(breaker.phase(now), Phase::Open);
        breaker
    }

    #[test]
    fn half_open_lets_a_few_probes_through_and_closes_when_they_succeed() {
        let start = Instant::now();
        let mut breaker = opened(start);
        let later = start + Duration::from_secs(5);
        assert_eq!(breaker.phase(later), Phase::HalfOpen);
        let first = breaker.permit(later).unwrap();
        let second = breaker.permit(later).unwrap();
        assert_eq!(
            breaker.permit(later).unwrap_err(),
            Refused::Open,
            "2 probes at most"
        );
        breaker.record(first, Outcome::Success, later);
        assert_eq!(breaker.phase(later), Phase::HalfOpen);
        breaker.record(second, Outcome::Success, later);
        assert_eq!(breaker.phase(later), Phase::Closed);
        assert_eq!(breaker.transitions(), (1, 1));
        call(&mut breaker, Outcome::Success, later).unwrap();
    }

    #[test]
    fn a_failed_probe_opens_it_again_for_the_full_time() {
        let start = Instant::now();
        let mut breaker = opened(start);
        let later = start + Duration::from_secs(6);
        let probe = breaker.permit(later).unwrap();
        breaker.record(probe, Outcome::Failure, later);
        assert_eq!(breaker.phase(later), Phase::Open);
        assert_eq!(
            breaker.phase(later + Duration::from_millis(4_999)),
            Phase::Open
        );
        assert_eq!(
            breaker.phase(later + Duration::from_secs(5)),
            Phase::HalfOpen
        );
        assert_eq!(breaker.transitions(), (2, 0));
    }

    #[test]
    fn outcomes_of_calls_begun_before_a_transition_do_not_count() {
        let now = Instant::now();
        let mut breaker = Breaker::new(config());
        let slow = breaker.permit(now).unwrap();
        for _ in 0..4 {
            call(&mut breaker, Outcome::Failure, now).unwrap();
        }
        assert_eq!(breaker.phase(now), Phase::Open);
        // The slow call's success, arriving while open, changes nothing.
        breaker.record(slow, Outcome::Success, now);
        assert_eq!(breaker.phase(now), Phase::Open);
        // A probe from one half-open period cannot close the next.
        let later = now + Duration::from_secs(5);
        let stale = breaker.permit(later).unwrap();
        let failing = breaker.permit(later).unwrap();
        breaker.record(failing, Outcome::Failure, later);
        let again = later + Duration::from_secs(5);
        let fresh = breaker.permit(again).unwrap();
        breaker.record(stale, Outcome::Success, again);
        assert_eq!(breaker.phase(again), Phase::HalfOpen);
        breaker.record(fresh, Outcome::Success, again);
        assert_eq!(
            breaker.phase(again),
            Phase::HalfOpen,
            "one of two probes back"
        );
    }

    #[test]
    fn settings_are_checked() {
        assert!(BreakerConfig::default().check().is_ok());
        for bad in [
            BreakerConfig {
                window: 0,
                ..config()
            },
            BreakerConfig {
                minimum_calls: 0,
                ..config()
            },
            BreakerConfig {
                minimum_calls: 11,
                ..config()
            },
            BreakerConfig {
                failure_threshold: 0.0,
                ..config()
            },
            BreakerConfig {
                failure_threshold: 1.5,
                ..config()
            },
            BreakerConfig {
                failure_threshold: f64::NAN,
                ..config()
            },
            BreakerConfig {
                open_for: Duration::ZERO,
                ..config()
            },
            BreakerConfig {
                half_open_calls: 0,
                ..config()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
