//! Faults a simulated run injects, and how each run picks its own rates from its seed (swarm
//! testing, as TigerBeetle's VOPR does: a run with many crashes and no stalls finds other bugs
//! than one with a few of each, so the seed picks which kinds are on and how often each fires).
//!
//! Kinds:
//! - a **crash**: an actor fails as if the handler of its next message had panicked (the
//!   message is lost, its asker gets `AskError::Panicked`, the supervisor decides);
//! - a **stall**: an actor ready to run is held back for a while (microseconds to seconds of
//!   simulated time), so messages from others overtake its sends, its asks' timeouts fire
//!   first, and everything that depends on it waits, as on a descheduled thread;
//! - a **stop**: an actor is stopped (`Addr::stop`): for good, even a supervised one (a stop
//!   from outside is not a failure its supervisor restarts), so a test that counts on
//!   supervision bringing every actor back turns stops off (`Faults::all().stops(false)`);
//! - **fault points**: the code under test asks [`buggify`](super::buggify) whether to take its
//!   rare path; each point is switched on or off for the whole run, and an enabled one fires
//!   now and then (FoundationDB's `BUGGIFY`). In production it is always `false`.
//!
//! Faults reach only the actor types [`Faults::target`] names (every actor if none), and stop
//! when the test calls `Simulation::heal` (the liveness phase that follows).

use std::any::TypeId;
use std::time::Duration;

use crate::actor::Actor;

use super::rng::{mix, Rng};

/// Which faults a simulated run may inject, and their highest rates; each run picks its own
/// within these (swarm testing). See the module note.
///
/// ```
/// use std::time::Duration;
/// use troupe::sim::Faults;
/// # struct Engine;
/// # impl troupe::Actor for Engine {}
/// let faults = Faults::all().target::<Engine>().max_stall(Duration::from_millis(500));
/// assert!(!Faults::none().any());
/// assert!(faults.any());
/// ```
#[derive(Clone, Debug)]
pub struct Faults {
    crashes: bool,
    stalls: bool,
    stops: bool,
    buggify: bool,
    targets: Vec<(TypeId, &'static str)>,
    rate: f64,
    max_stall: Duration,
    limit: Option<u32>,
}

impl Default for Faults {
    fn default() -> Self {
        Self::none()
    }
}

impl Faults {
    /// No faults: only the schedule and the timing are the seed's.
    pub fn none() -> Self {
        Self {
            crashes: false,
            stalls: false,
            stops: false,
            buggify: false,
            targets: Vec::new(),
            rate: 0.02,
            max_stall: Duration::from_secs(1),
            limit: None,
        }
    }

    /// Every kind: crashes, stalls, stops and fault points.
    pub fn all() -> Self {
        Self {
            crashes: true,
            stalls: true,
            stops: true,
            buggify: true,
            ..Self::none()
        }
    }

    /// Actors crash as if a handler had panicked.
    pub fn crashes(mut self, on: bool) -> Self {
        self.crashes = on;
        self
    }

    /// Actors ready to run are held back for a while.
    pub fn stalls(mut self, on: bool) -> Self {
        self.stalls = on;
        self
    }

    /// Actors are stopped (`Addr::stop`: for good, even a supervised one).
    pub fn stops(mut self, on: bool) -> Self {
        self.stops = on;
        self
    }

    /// Fault points ([`buggify`](super::buggify)) may fire.
    pub fn buggify(mut self, on: bool) -> Self {
        self.buggify = on;
        self
    }

    /// Aims crashes, stalls and stops at actors of type `A` (call again for more types; with
    /// none, every actor is a target).
    pub fn target<A: Actor>(mut self) -> Self {
        self.targets
            .push((TypeId::of::<A>(), std::any::type_name::<A>()));
        self
    }

    /// The highest chance per step of a crash or a stall that a run may pick (default 0.02;
    /// stops are ten times rarer). Clamped to 0..=1.
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = rate.clamp(0.0, 1.0);
        self
    }

    /// The longest stall (default 1 s of simulated time).
    pub fn max_stall(mut self, max: Duration) -> Self {
        self.max_stall = max;
        self
    }

    /// At most `n` faults in a run (shrinking a failure lowers it).
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// True if any kind is on.
    pub fn any(&self) -> bool {
        self.crashes || self.stalls || self.stops || self.buggify
    }

    /// The kinds that are on, as letters (`c` crashes, `s` stalls, `x` stops, `b` fault
    /// points; `-` for none), as in a replay line.
    pub fn kinds(&self) -> String {
        let mut kinds = String::new();
        for (on, letter) in [
            (self.crashes, 'c'),
            (self.stalls, 's'),
            (self.stops, 'x'),
            (self.buggify, 'b'),
        ] {
            if on {
                kinds.push(letter);
            }
        }
        if kinds.is_empty() {
            kinds.push('-');
        }
        kinds
    }

    /// These faults with only the kinds `letters` names on (see [`kinds`](Faults::kinds)).
    pub fn with_kinds(mut self, letters: &str) -> Self {
        self.crashes = letters.contains('c');
        self.stalls = letters.contains('s');
        self.stops = letters.contains('x');
        self.buggify = letters.contains('b');
        self
    }

    pub(super) fn limit_value(&self) -> Option<u32> {
        self.limit
    }

    /// The plan of the run seeded `seed`.
    pub(super) fn plan(&self, seed: u64) -> FaultPlan {
        // A stream of its own, so a kind turned off (shrinking) leaves the others' rates and
        // the schedule's draws as they were.
        let mut rng = Rng::new(mix(seed ^ 0xFA_0175));
        let mut pick = |on: bool, high: f64| -> f64 {
            // Each kind the test allows is on in about half the runs, at a rate between a
            // hundredth of the highest and the highest.
            let enabled = rng.chance(0.5);
            let scale = rng.log_uniform(10_000, 1_000_000) as f64 / 1e6;
            if on && enabled {
                high * scale
            } else {
                0.0
            }
        };
        let crash = pick(self.crashes, self.rate);
        let stall = pick(self.stalls, self.rate);
        let stop = pick(self.stops, self.rate / 10.0);
        let buggify = pick(self.buggify, 0.25);
        FaultPlan {
            crash,
            stall,
            stop,
            buggify,
            max_stall_ns: u64::try_from(self.max_stall.as_nanos()).unwrap_or(u64::MAX),
            targets: self.targets.iter().map(|(id, _)| *id).collect(),
            limit: self.limit.unwrap_or(u32::MAX),
            active: true,
        }
    }
}

/// The faults of one run: the rates its seed picked.
#[derive(Clone, Debug)]
pub(super) struct FaultPlan {
    pub(super) crash: f64,
    pub(super) stall: f64,
    pub(super) stop: f64,
    /// How often an enabled fault point fires (0: fault points are off).
    pub(super) buggify: f64,
    pub(super) max_stall_ns: u64,
    targets: Vec<TypeId>,
    pub(super) limit: u32,
    /// Off once the test heals the system.
    pub(super) active: bool,
}

impl FaultPlan {
    /// True if faults may hit an actor of this type.
    pub(super) fn aims_at(&self, type_id: TypeId) -> bool {
        self.targets.is_empty() || self.targets.contains(&type_id)
    }

    /// A line for a report: the rates this run picked.
    pub(super) fn describe(&self) -> String {
        if self.crash + self.stall + self.stop + self.buggify == 0.0 {
            return "no faults".to_owned();
        }
        let mut parts = Vec::new();
        for (rate, name) in [
            (self.crash, "crash"),
            (self.stall, "stall"),
            (self.stop, "stop"),
            (self.buggify, "fault point"),
        ] {
            if rate > 0.0 {
                parts.push(format!("{name} {:.4}", rate));
            }
        }
        parts.join(", ")
    }
}
