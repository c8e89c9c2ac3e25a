//! Supervision: what a parent does when a child fails.
//!
//! This folder holds the strategy a user chooses ([`SupervisorStrategy`], [`Restart`]) and the
//! parent's side ([`children`]: its table of children and the pure decision of what a failure
//! calls for). The child's side (suspending, being rebuilt in place) is part of its life, in
//! `life.rs`; the two meet through the `ChildFailed` and `Restart` signals.
//!
//! A handler (or `started`) that panics does not take its worker thread down. The panic is
//! caught at the turn boundary, the actor is *suspended* (it handles no more messages, its
//! mailbox keeps them), and its parent is told. The parent applies its
//! [`SupervisorStrategy`] on its own turn:
//!
//! - the child's [`Restart`] policy says whether it may be restarted at all;
//! - the strategy's kind says who restarts: the failed child only ([`OneForOne`]), every child
//!   ([`OneForAll`]), or the failed child and every child spawned after it ([`RestForOne`]);
//! - the intensity limit (at most `max_restarts` within `within`) stops a crash loop: past it,
//!   the parent fails itself and *its* parent decides (escalation);
//! - an optional back-off delays each restart, doubling from `min` to `max`.
//!
//! A restart rebuilds the actor in place from the factory it was spawned with: same cell, same
//! address, same mailbox, so messages sent meanwhile (while it waited for the decision, or for
//! a back-off) reach the new instance, in order. The new instance's
//! [`Actor::restarted`](crate::Actor::restarted) hook sees why. Only the message whose handler
//! panicked is lost (its asker gets `AskError::Panicked`).
//!
//! Top-level actors are supervised by the system, which stops them when they fail: a
//! supervised actor's fate on panic is its supervisor's decision; an unsupervised one stops.
//!
//! [`OneForOne`]: StrategyKind::OneForOne
//! [`OneForAll`]: StrategyKind::OneForAll
//! [`RestForOne`]: StrategyKind::RestForOne

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::failure::Failure;

pub(crate) mod children;

/// Whether a supervised child may be restarted (Erlang's child restart types).
///
/// ```
/// use troupe::{Restart, SpawnOptions};
/// // A worker that finishes its job and stops for good, but is restarted if it crashes:
/// let options = SpawnOptions::new().restart(Restart::Transient);
/// # let _ = options;
/// assert_eq!(Restart::default(), Restart::Permanent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Restart {
    /// Restarted when it fails, and also when it stops itself (`ctx.stop()`); an external
    /// `addr.stop()` still stops it for good.
    #[default]
    Permanent,
    /// Restarted only when it fails.
    Transient,
    /// Never restarted.
    Temporary,
}

/// Who is restarted when one child fails.
///
/// ```
/// use troupe::{StrategyKind, SupervisorStrategy};
/// assert_eq!(SupervisorStrategy::default().kind, StrategyKind::OneForOne);
/// assert_eq!(SupervisorStrategy::rest_for_one().kind, StrategyKind::RestForOne);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StrategyKind {
    /// Only the failed child.
    #[default]
    OneForOne,
    /// Every child.
    OneForAll,
    /// The failed child and every child spawned after it.
    RestForOne,
}

/// Delay before a restart: `min`, doubling with each restart inside the intensity window, up
/// to `max`.
///
/// ```
/// use std::time::Duration;
/// use troupe::{Backoff, SupervisorStrategy};
/// let strategy = SupervisorStrategy::one_for_one().backoff(Duration::from_millis(10), Duration::from_secs(2));
/// assert_eq!(strategy.backoff, Some(Backoff { min: Duration::from_millis(10), max: Duration::from_secs(2) }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First delay.
    pub min: Duration,
    /// Longest delay.
    pub max: Duration,
}

/// How an actor supervises its children. Returned by
/// [`Actor::supervisor_strategy`](crate::Actor::supervisor_strategy).
///
/// ```
/// use std::time::Duration;
/// use troupe::{StrategyKind, SupervisorStrategy};
/// let strategy = SupervisorStrategy::one_for_all()
///     .intensity(5, Duration::from_secs(10))
///     .backoff(Duration::from_millis(10), Duration::from_secs(1));
/// assert_eq!(strategy.kind, StrategyKind::OneForAll);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupervisorStrategy {
    /// Who is restarted.
    pub kind: StrategyKind,
    /// Restarts allowed within `within`; one more escalates.
    pub max_restarts: u32,
    /// The intensity window.
    pub within: Duration,
    /// Delay before each restart, if any.
    pub backoff: Option<Backoff>,
}

impl Default for SupervisorStrategy {
    /// One-for-one, at most 3 restarts in 5 seconds, no back-off (Erlang's and Akka's defaults
    /// are of this order).
    fn default() -> Self {
        Self {
            kind: StrategyKind::OneForOne,
            max_restarts: 3,
            within: Duration::from_secs(5),
            backoff: None,
        }
    }
}

impl SupervisorStrategy {
    /// Restart only the failed child.
    ///
    /// ```
    /// use troupe::{Actor, StrategyKind, SupervisorStrategy};
    /// struct Supervisor;
    /// impl Actor for Supervisor {
    ///     // Workers that do not depend on each other.
    ///     fn supervisor_strategy(&self) -> SupervisorStrategy {
    ///         SupervisorStrategy::one_for_one()
    ///     }
    /// }
    /// assert_eq!(Supervisor.supervisor_strategy().kind, StrategyKind::OneForOne);
    /// ```
    pub fn one_for_one() -> Self {
        Self::default()
    }

    /// Restart every child when one fails.
    ///
    /// ```
    /// use troupe::{Actor, StrategyKind, SupervisorStrategy};
    /// struct Supervisor;
    /// impl Actor for Supervisor {
    ///     // A pipeline whose stages share state: restart them together.
    ///     fn supervisor_strategy(&self) -> SupervisorStrategy {
    ///         SupervisorStrategy::one_for_all()
    ///     }
    /// }
    /// assert_eq!(Supervisor.supervisor_strategy().kind, StrategyKind::OneForAll);
    /// ```
    pub fn one_for_all() -> Self {
        Self {
            kind: StrategyKind::OneForAll,
            ..Self::default()
        }
    }

    /// Restart the failed child and every child spawned after it.
    ///
    /// ```
    /// use troupe::{Actor, StrategyKind, SupervisorStrategy};
    /// struct Supervisor;
    /// impl Actor for Supervisor {
    ///     // Each child depends on those spawned before it (a connection, then its users).
    ///     fn supervisor_strategy(&self) -> SupervisorStrategy {
    ///         SupervisorStrategy::rest_for_one()
    ///     }
    /// }
    /// assert_eq!(Supervisor.supervisor_strategy().kind, StrategyKind::RestForOne);
    /// ```
    pub fn rest_for_one() -> Self {
        Self {
            kind: StrategyKind::RestForOne,
            ..Self::default()
        }
    }

    /// At most `max_restarts` restarts within `within`; one more escalates to the parent.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::SupervisorStrategy;
    /// // Give up (escalate) after the 11th failure within a minute.
    /// let strategy = SupervisorStrategy::one_for_one().intensity(10, Duration::from_secs(60));
    /// assert_eq!((strategy.max_restarts, strategy.within), (10, Duration::from_secs(60)));
    /// ```
    pub fn intensity(mut self, max_restarts: u32, within: Duration) -> Self {
        self.max_restarts = max_restarts;
        self.within = within;
        self
    }

    /// Restarts without limit: it never escalates. For a service's workers, where a poison
    /// message must not take a worker away for good; pair it with a
    /// [`backoff`](SupervisorStrategy::backoff), so that an actor failing at every message
    /// does not spin. (The default, 3 restarts in 5 s, is Erlang's intensity of 1 in 5 s and
    /// Akka's classic 10 in 1 minute in spirit: a failure that repeats at once is not cured
    /// by restarting, and the parent should hear of it.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::SupervisorStrategy;
    /// let strategy = SupervisorStrategy::one_for_one()
    ///     .without_limit()
    ///     .backoff(Duration::from_millis(10), Duration::from_secs(1));
    /// assert_eq!(strategy.max_restarts, u32::MAX);
    /// ```
    pub fn without_limit(mut self) -> Self {
        self.max_restarts = u32::MAX;
        self
    }

    /// Wait before restarting: `min` at first, doubling up to `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use troupe::SupervisorStrategy;
    /// // 50 ms before the first restart, then 100, 200, ... up to 5 s.
    /// let strategy = SupervisorStrategy::one_for_one()
    ///     .backoff(Duration::from_millis(50), Duration::from_secs(5));
    /// assert!(strategy.backoff.is_some());
    /// ```
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = Some(Backoff { min, max });
        self
    }
}

impl Restart {
    /// Whether a child with this policy is restarted after `failure` (`Failure::Exited`: it
    /// stopped itself).
    pub(crate) fn restarts_after(self, failure: &Failure) -> bool {
        match self {
            Restart::Permanent => true,
            Restart::Transient => *failure != Failure::Exited,
            Restart::Temporary => false,
        }
    }
}

/// The back-off doubles at most this many times (2^30 times its minimum).
const BACKOFF_DOUBLINGS: usize = 30;

/// A supervisor's recent restarts, for its intensity limit and back-off.
#[derive(Debug, Default)]
pub(crate) struct Intensity {
    restarts: VecDeque<Instant>,
}

impl Intensity {
    /// Records a restart at `now` under `strategy`: `None` if it goes past the intensity limit
    /// (the supervisor escalates), else the back-off to wait before it (if any).
    pub(crate) fn admit(
        &mut self,
        strategy: &SupervisorStrategy,
        now: Instant,
    ) -> Option<Option<Duration>> {
        while self
            .restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) > strategy.within)
        {
            self.restarts.pop_front();
        }
        self.restarts.push_back(now);
        if strategy.max_restarts == u32::MAX && self.restarts.len() > BACKOFF_DOUBLINGS + 1 {
            // Without a limit, only the back-off reads the count, and it stops doubling here.
            self.restarts.pop_front();
        }
        if self.restarts.len() > strategy.max_restarts as usize {
            self.restarts.clear();
            return None;
        }
        let delay = strategy.backoff.map(|b| {
            let doublings = (self.restarts.len() - 1).min(BACKOFF_DOUBLINGS) as u32;
            b.min.saturating_mul(1 << doublings).min(b.max)
        });
        Some(delay.filter(|d| !d.is_zero()))
    }
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::*;

    #[test]
    fn intensity_escalates_past_its_limit_and_backs_off_doubling() {
        let strategy = SupervisorStrategy::one_for_one()
            .intensity(3, Duration::from_secs(5))
            .backoff(Duration::from_millis(10), Duration::from_millis(25));
        let mut intensity = Intensity::default();
        let t0 = Instant::now();
        assert_eq!(
            intensity.admit(&strategy, t0),
            Some(Some(Duration::from_millis(10)))
        );
        assert_eq!(
            intensity.admit(&strategy, t0),
            Some(Some(Duration::from_millis(20)))
        );
        assert_eq!(
            intensity.admit(&strategy, t0),
            Some(Some(Duration::from_millis(25)))
        );
        assert_eq!(
            intensity.admit(&strategy, t0),
            None,
            "a fourth within 5 s escalates"
        );
        // Outside the window, restarts are allowed again.
        let later = t0 + Duration::from_secs(6);
        assert_eq!(
            intensity.admit(&strategy, later),
            Some(Some(Duration::from_millis(10)))
        );
    }

    #[test]
    fn restart_policies_say_who_comes_back() {
        let panicked = Failure::Panicked("x".into());
        assert!(Restart::Permanent.restarts_after(&Failure::Exited));
        assert!(Restart::Transient.restarts_after(&panicked));
        assert!(!Restart::Transient.restarts_after(&Failure::Exited));
        assert!(!Restart::Temporary.restarts_after(&panicked));
    }
}
