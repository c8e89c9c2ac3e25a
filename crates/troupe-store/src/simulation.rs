//! The seed's scenario in deterministic simulation (`troupe::sim`): the store's actor part,
//! the simulated backends and the seed's load on one thread, in simulated time, from a seed;
//! then the seed's claims checked against the simulated latencies.
//!
//! What runs is the store's own code: [`App`] (the edge's calls, with its request timeout)
//! and the two [`BackendActor`](crate::actor_store::BackendActor)s with their real bulkhead,
//! call timeout and circuit breaker, reaching [`SimulatedBackends`] through the
//! [`Transport`](crate::transport::Transport) seam instead of HTTP. What does not run: the HTTP
//! layer (axum, hyper, the edge's load shedding), which needs real sockets; so the index,
//! served by the edge alone, answers in zero simulated time here, and what the simulation
//! checks of it is only that it always answers.
//!
//! The scenario ([`Scenario::seed_001`]): 300 users per kind thinking 500-1500 ms; 10 s
//! healthy; 40 s during which every search call that arrives hangs 30 s and answers 502; 20 s
//! recovered. About 60,000 requests, 70 s of simulated time, in a fraction of a second of
//! wall time in a release build ([`ScenarioOutcome::ratio`]).
//!
//! The claims ([`ScenarioOutcome::check`]), each on simulated time:
//! - healthy: every request answers 2xx; search and payments in the backends' latency;
//! - search hanging: index and payments unchanged (all 2xx, payments' slowest within the
//!   healthy latency); no search answer slower than the call timeout while the breaker is
//!   closed; the breaker opens within two call timeouts; once open, search fails fast (p99
//!   near 0; only the half-open probes wait, at most a call timeout);
//! - the bulkhead: never more search calls in progress than `max_in_flight`;
//! - recovered: the breaker closes again within a call timeout and an open period (plus a
//!   second for the load to send probes), stays closed, and search answers 2xx in the
//!   backends' latency from then on;
//! - every request is answered.
//!
//! ```no_run
//! let outcome = troupe_store::simulation::run_scenario(7);
//! println!("{outcome}");
//! outcome.check().unwrap();
//! println!("{:.0} s simulated per s of wall time", outcome.ratio());
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use troupe::sim::{Simulation, Strategy};

use crate::actor_store::{ActorStoreConfig, App, BackendSnapshot, BackendStats};
use crate::backends::{BackendsConfig, SearchMode};
use crate::load::{Ending, Kind};
use crate::sim_backends::SimulatedBackends;
use crate::sim_load::{Sample, SimLoadConfig, SimulatedLoad};

/// A whole scenario's settings.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Users per kind of request (the seed's 300).
    pub users_per_kind: usize,
    /// Think time between an answer and the next request (the seed's 500-1500 ms).
    pub think: (Duration, Duration),
    /// How long search is healthy first.
    pub healthy: Duration,
    /// How long search then hangs (each call arriving meanwhile waits `backends.hang`).
    pub hanging: Duration,
    /// How long the load goes on after search has recovered.
    pub recovered: Duration,
    /// The simulated services: latency 20 ms, hang 30 s.
    pub backends: BackendsConfig,
    /// The store: its call timeout, bulkhead, breaker, request timeout (the URLs are unused).
    pub store: ActorStoreConfig,
}

impl Scenario {
    /// The seed's: 300 users per kind, thinking 500-1500 ms; 10 s healthy, 40 s of hanging
    /// search (30 s per call), 20 s recovered; the store's default settings.
    pub fn seed_001() -> Self {
        Self {
            users_per_kind: 300,
            think: (Duration::from_millis(500), Duration::from_millis(1500)),
            healthy: Duration::from_secs(10),
            hanging: Duration::from_secs(40),
            recovered: Duration::from_secs(20),
            backends: BackendsConfig::default(),
            store: ActorStoreConfig::new("http://search.invalid", "http://payment.invalid"),
        }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Self::seed_001()
    }
}

/// Why a scenario could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The store's settings are not valid.
    #[error("the store's settings: {0}")]
    Settings(String),
    /// The simulation could not be built.
    #[error("the simulation could not be built: {0}")]
    Simulation(String),
}

/// The latencies of one group of requests (a phase and a kind, or a part of a phase).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySummary {
    /// The group: `healthy`, `search_hangs`, `recovered`; for search also
    /// `search_hangs:closed` (begun before the breaker first opened, or at that instant),
    /// `search_hangs:open` (begun after) and `recovered:closed` (begun after the breaker closed again); for
    /// payments also `recovered:settled` (begun a request timeout or more after search
    /// recovered and faults, if any, ended).
    pub group: &'static str,
    /// The kind of request.
    pub kind: Kind,
    /// Requests begun in the group and answered.
    pub requests: usize,
    /// Answered 2xx.
    pub ok: usize,
    /// Answered 503 (breaker open, bulkhead full).
    pub rejected: usize,
    /// Answered another error status (504 timeout, 502).
    pub errors: usize,
    /// Median latency (simulated).
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Slowest.
    pub max: Duration,
}

impl LatencySummary {
    fn of(group: &'static str, kind: Kind, samples: &[&Sample]) -> Self {
        let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
        latencies.sort_unstable();
        let count = |ending| samples.iter().filter(|s| s.ending == ending).count();
        Self {
            group,
            kind,
            requests: samples.len(),
            ok: count(Ending::Ok),
            rejected: count(Ending::Rejected),
            errors: count(Ending::Error),
            p50: quantile(&latencies, 0.5),
            p99: quantile(&latencies, 0.99),
            max: latencies.last().copied().unwrap_or_default(),
        }
    }
}

/// The nearest-rank quantile of sorted values (zero if none).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What one run of a scenario measured. Times are simulated and counted from the start of
/// the load, except `wall`.
#[derive(Debug, Clone)]
pub struct ScenarioOutcome {
    /// The scenario run.
    pub scenario: Scenario,
    /// The run's seed.
    pub seed: u64,
    /// The run's scheduling strategy.
    pub strategy: Strategy,
    /// Simulated time from the start of the load until every request was answered.
    pub simulated: Duration,
    /// Real time the run took (for [`run_scenario`]: building the simulation to dropping it).
    pub wall: Duration,
    /// Steps the simulation took.
    pub steps: u64,
    /// Requests answered.
    pub requests: usize,
    /// Requests still unanswered at the end (the claims want none).
    pub unanswered: usize,
    /// When search began to hang.
    pub hang_began: Duration,
    /// When search recovered.
    pub recovered_began: Duration,
    /// When the load stopped beginning requests.
    pub load_ended: Duration,
    /// Each time the search breaker opened.
    pub breaker_opened: Vec<Duration>,
    /// Each time it closed again.
    pub breaker_closed: Vec<Duration>,
    /// The most search calls in progress at once, at the search service.
    pub search_peak: u64,
    /// The most payment calls in progress at once.
    pub payment_peak: u64,
    /// The search actor's counters at the end.
    pub search: BackendSnapshot,
    /// The payment actor's counters at the end.
    pub payment: BackendSnapshot,
    /// Latencies per group and kind.
    pub summaries: Vec<LatencySummary>,
    /// The slowest search answer: when it began, and its latency.
    pub slowest_search: Option<(Duration, Duration)>,
}

/// A claim of the seed that a run broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The claim.
    pub claim: &'static str,
    /// What the run measured instead.
    pub measured: String,
}

/// The claims a run broke (at least one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} claim(s) broken:{}", .0.len(), .0.iter().map(|b| format!("\n  - {}: {}", b.claim, b.measured)).collect::<String>())]
pub struct ClaimsBroken(pub Vec<Broken>);

/// Slack on simulated latencies: timers and tokio's sleeps are whole milliseconds, so an
/// answer due after 20 ms comes after 20 to 21 ms.
const GRAIN: Duration = Duration::from_millis(2);

impl ScenarioOutcome {
    /// Simulated seconds per second of wall time.
    pub fn ratio(&self) -> f64 {
        self.simulated.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    /// The summary of `group` for `kind`, if any request of it was answered.
    pub fn summary(&self, group: &str, kind: Kind) -> Option<&LatencySummary> {
        self.summaries
            .iter()
            .find(|s| s.group == group && s.kind == kind)
    }

    /// Checks the seed's claims (see the module note); every broken one, if any.
    pub fn check(&self) -> Result<(), ClaimsBroken> {
        let mut broken = Vec::new();
        let mut claim = |holds: bool, claim: &'static str, measured: String| {
            if !holds {
                broken.push(Broken { claim, measured });
            }
        };
        let latency = self.scenario.backends.latency;
        let timeout = self.scenario.store.call_timeout;
        let store = &self.scenario.store;
        let empty = |group, kind| LatencySummary::of(group, kind, &[]);
        let get = |group: &'static str, kind| {
            self.summary(group, kind)
                .cloned()
                .unwrap_or_else(|| empty(group, kind))
        };
        let all_ok = |s: &LatencySummary| s.ok == s.requests;
        let in_latency =
            |s: &LatencySummary| s.requests == 0 || (s.p50 >= latency && s.max <= latency + GRAIN);
        let describe =
            |s: &LatencySummary| {
                format!(
                "{} {}: {} answered, {} ok, {} rejected, {} errors; p50 {:?}, p99 {:?}, max {:?}",
                s.group, s.kind.name(), s.requests, s.ok, s.rejected, s.errors, s.p50, s.p99, s.max
            )
            };

        claim(
            self.unanswered == 0,
            "every request is answered",
            format!("{} unanswered", self.unanswered),
        );
        for kind in Kind::ALL {
            let healthy = get("healthy", kind);
            claim(
                healthy.requests > 0 && all_ok(&healthy),
                "healthy: every request answers 2xx",
                describe(&healthy),
            );
        }
        for kind in [Kind::Search, Kind::Payment] {
            let healthy = get("healthy", kind);
            claim(
                in_latency(&healthy),
                "healthy: search and payments answer in the backends' latency",
                describe(&healthy),
            );
        }
        for phase in ["healthy", "search_hangs", "recovered"] {
            let index = get(phase, Kind::Index);
            claim(
                all_ok(&index) && index.max <= GRAIN,
                "the index always answers, at once",
                describe(&index),
            );
        }
        let healthy_payments = get("healthy", Kind::Payment);
        for phase in ["search_hangs", "recovered"] {
            let payments = get(phase, Kind::Payment);
            claim(
                payments.requests > 0
                    && all_ok(&payments)
                    && payments.p99 <= healthy_payments.p99 + Duration::from_millis(1)
                    && payments.max <= latency + GRAIN,
                "search hanging or recovered: payments answer 2xx at their healthy latency",
                describe(&payments),
            );
        }
        let closed = get("search_hangs:closed", Kind::Search);
        claim(
            closed.max <= timeout + GRAIN,
            "search hanging: no search answer slower than the call timeout while the breaker is \
             closed",
            describe(&closed),
        );
        match self
            .breaker_opened
            .iter()
            .find(|at| **at >= self.hang_began)
        {
            Some(opened) => claim(
                *opened - self.hang_began <= 2 * timeout,
                "search hanging: the breaker opens within two call timeouts",
                format!(
                    "opened {:?} after the hang began",
                    *opened - self.hang_began
                ),
            ),
            None => claim(
                false,
                "search hanging: the breaker opens",
                "it never opened".to_owned(),
            ),
        }
        let open = get("search_hangs:open", Kind::Search);
        claim(
            open.requests > 0 && open.p99 <= GRAIN && open.max <= timeout + GRAIN,
            "search hanging: once the breaker is open, search fails fast (p99 near 0, only \
             probes wait, at most a call timeout)",
            describe(&open),
        );
        if let Some((began, slowest)) = self.slowest_search {
            claim(
                slowest <= timeout + GRAIN,
                "no search answer is slower than the call timeout",
                format!("{slowest:?}, begun at {began:?}"),
            );
        }
        claim(
            self.search_peak <= store.bulkhead.max_in_flight as u64,
            "the bulkhead bounds the search calls in progress",
            format!(
                "{} at once, for a bulkhead of {}",
                self.search_peak, store.bulkhead.max_in_flight
            ),
        );
        let close_by =
            self.recovered_began + timeout + store.breaker.open_for + Duration::from_secs(1);
        let closed_again = self
            .breaker_closed
            .iter()
            .find(|at| **at >= self.recovered_began);
        match closed_again {
            Some(at) => {
                claim(
                    *at <= close_by,
                    "recovered: the breaker closes within a call timeout and an open period",
                    format!(
                        "closed {:?} after search recovered",
                        *at - self.recovered_began
                    ),
                );
                claim(
                    !self.breaker_opened.iter().any(|opened| opened > at),
                    "recovered: the breaker stays closed",
                    format!("opened at {:?}", self.breaker_opened),
                );
            }
            None => claim(
                false,
                "recovered: the breaker closes again",
                format!(
                    "opened at {:?}, closed at {:?}",
                    self.breaker_opened, self.breaker_closed
                ),
            ),
        }
        let after = get("recovered:closed", Kind::Search);
        claim(
            after.requests > 0 && all_ok(&after) && in_latency(&after),
            "recovered: once the breaker has closed, search answers 2xx in the backends' latency",
            describe(&after),
        );
        if broken.is_empty() {
            Ok(())
        } else {
            Err(ClaimsBroken(broken))
        }
    }
}

impl ScenarioOutcome {
    /// Checks what must hold while faults hit the backend actors (crashes, stalls of up to
    /// `max_stall`, stops; supervision rebuilding them), until search recovers and the faults
    /// end, and what must hold after:
    /// - every request is answered, none later than the request timeout (the edge's bound);
    /// - the bulkhead bounds the search calls in progress, across restarts;
    /// - the index always answers, at once;
    /// - from a request timeout after the faults end (`max_stall` must be shorter), payments
    ///   answer 2xx at the backends' latency;
    /// - the search breaker closes again (within a stall, a call timeout and an open period,
    ///   plus a second for the load to send probes, of the faults' end), and search then
    ///   answers 2xx at the backends' latency.
    pub fn check_under_faults(&self, max_stall: Duration) -> Result<(), ClaimsBroken> {
        let mut broken = Vec::new();
        let mut claim = |holds: bool, claim: &'static str, measured: String| {
            if !holds {
                broken.push(Broken { claim, measured });
            }
        };
        let latency = self.scenario.backends.latency;
        let store = &self.scenario.store;
        claim(
            self.unanswered == 0,
            "every request is answered",
            format!("{} unanswered", self.unanswered),
        );
        let slowest = self
            .summaries
            .iter()
            .filter(|s| s.requests > 0)
            .max_by_key(|s| s.max);
        if let Some(slowest) = slowest {
            claim(
                slowest.max <= store.request_timeout + GRAIN,
                "no request waits longer than the request timeout",
                format!(
                    "{} {}: {:?}",
                    slowest.group,
                    slowest.kind.name(),
                    slowest.max
                ),
            );
        }
        claim(
            self.search_peak <= store.bulkhead.max_in_flight as u64,
            "the bulkhead bounds the search calls in progress, restarts included",
            format!(
                "{} at once, for a bulkhead of {}",
                self.search_peak, store.bulkhead.max_in_flight
            ),
        );
        for phase in ["healthy", "search_hangs", "recovered"] {
            if let Some(index) = self.summary(phase, Kind::Index) {
                claim(
                    index.ok == index.requests && index.max <= GRAIN,
                    "the index always answers, at once",
                    format!("{index:?}"),
                );
            }
        }
        let settled = self.summary("recovered:settled", Kind::Payment);
        claim(
            settled
                .is_some_and(|s| s.requests > 0 && s.ok == s.requests && s.max <= latency + GRAIN),
            "after the faults: payments answer 2xx at the backends' latency",
            format!("{settled:?}"),
        );
        let close_by = self.recovered_began
            + max_stall
            + store.call_timeout
            + store.breaker.open_for
            + Duration::from_secs(1);
        match self
            .breaker_closed
            .iter()
            .find(|at| **at >= self.recovered_began)
        {
            Some(at) => claim(
                *at <= close_by,
                "after the faults: the breaker closes within a stall, a call timeout and an \
                 open period",
                format!(
                    "closed {:?} after the faults ended",
                    *at - self.recovered_began
                ),
            ),
            None => claim(
                false,
                "after the faults: the breaker closes again",
                format!(
                    "opened at {:?}, closed at {:?}",
                    self.breaker_opened, self.breaker_closed
                ),
            ),
        }
        let after = self.summary("recovered:closed", Kind::Search);
        claim(
            after.is_some_and(|s| s.requests > 0 && s.ok == s.requests && s.max <= latency + GRAIN),
            "after the faults, once the breaker has closed, search answers 2xx in the \
             backends' latency",
            format!("{after:?}"),
        );
        if broken.is_empty() {
            Ok(())
        } else {
            Err(ClaimsBroken(broken))
        }
    }
}

impl fmt::Display for ScenarioOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} ({}): {} requests, {:.1} s simulated in {:.3} s of wall time ({:.0}x), {} steps",
            self.seed,
            self.strategy,
            self.requests,
            self.simulated.as_secs_f64(),
            self.wall.as_secs_f64(),
            self.ratio(),
            self.steps
        )?;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        writeln!(
            f,
            "  search hangs at {:.1} s, recovers at {:.1} s; breaker opened at {:?} s, closed at {:?} s",
            self.hang_began.as_secs_f64(),
            self.recovered_began.as_secs_f64(),
            self.breaker_opened
                .iter()
                .map(|t| (t.as_secs_f64() * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
            self.breaker_closed
                .iter()
                .map(|t| (t.as_secs_f64() * 10.0).round() / 10.0)
                .collect::<Vec<_>>(),
        )?;
        writeln!(
            f,
            "  search calls in progress at most {} (bulkhead {}); search actor: {} calls, {} timed \
             out, {} expired waiting, {} failed fast, {} refused, {} restarts; payment actor: {} \
             restarts",
            self.search_peak,
            self.scenario.store.bulkhead.max_in_flight,
            self.search.calls,
            self.search.timed_out,
            self.search.expired,
            self.search.failed_fast,
            self.search.refused,
            self.search.restarts,
            self.payment.restarts
        )?;
        writeln!(
            f,
            "  {:<20} {:<8} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9}",
            "group", "kind", "answers", "ok", "503", "other", "p50 ms", "p99 ms", "max ms"
        )?;
        for s in &self.summaries {
            writeln!(
                f,
                "  {:<20} {:<8} {:>7} {:>7} {:>7} {:>7} {:>9.1} {:>9.1} {:>9.1}",
                s.group,
                s.kind.name(),
                s.requests,
                s.ok,
                s.rejected,
                s.errors,
                ms(s.p50),
                ms(s.p99),
                ms(s.max)
            )?;
        }
        Ok(())
    }
}

/// Runs the seed's scenario ([`Scenario::seed_001`]) once, from `seed` (random scheduling, no
/// faults), and measures it. For the benchmark program: [`ScenarioOutcome::ratio`] is the
/// simulated time per second of wall time; [`ScenarioOutcome::check`] the seed's claims.
///
/// Run it on a thread of its own (a simulation takes the thread that builds it until it is
/// dropped); it builds the simulation, runs the scenario, and drops it, all in `wall`.
///
/// # Panics
/// If the simulation cannot be built (the operating system refused its runtime), or a wait
/// in it can never end (a bug, reported with the seed).
pub fn run_scenario(seed: u64) -> ScenarioOutcome {
    let wall = Instant::now();
    let sim = Simulation::builder()
        .seed(seed)
        .max_steps(u64::MAX)
        .build()
        .unwrap_or_else(|e| panic!("{}", ScenarioError::Simulation(e.to_string())));
    let mut outcome =
        run(&sim, &Scenario::seed_001()).unwrap_or_else(|e| panic!("the seed's scenario: {e}"));
    drop(sim);
    outcome.wall = wall.elapsed();
    outcome
}

/// Runs `scenario` in `sim` (on the thread that built it) and measures it; the system is
/// left running (dropping the simulation shuts it down). For tests under
/// [`Explore`](troupe::sim::Explore), whose runs give the simulation.
pub fn run(sim: &Simulation, scenario: &Scenario) -> Result<ScenarioOutcome, ScenarioError> {
    let wall = Instant::now();
    let steps = sim.steps();
    let backends = SimulatedBackends::new(BackendsConfig {
        search_mode: SearchMode::Healthy,
        ..scenario.backends
    });
    let app = App::new(
        sim.system(),
        backends.search(),
        backends.payment(),
        &scenario.store,
    )
    .map_err(ScenarioError::Settings)?;
    let start = sim.now();
    let end = start + scenario.healthy + scenario.hanging + scenario.recovered;
    let load = SimulatedLoad::start(
        sim.system(),
        &app,
        &SimLoadConfig {
            users_per_kind: scenario.users_per_kind,
            think: scenario.think,
            end,
        },
        sim.random(),
    );
    let mut breaker = Transitions::default();
    let stats = app.search_stats().clone();
    breaker.watch(sim, &stats, start, scenario.healthy);
    backends.set_search_mode(SearchMode::Hang);
    let hang_began = sim.now() - start;
    breaker.watch(sim, &stats, start, scenario.hanging);
    backends.set_search_mode(SearchMode::Healthy);
    // Faults, if the simulation injects any, end here: the recovered phase is the liveness
    // phase.
    sim.heal();
    let recovered_began = sim.now() - start;
    breaker.watch(sim, &stats, start, end.saturating_duration_since(sim.now()));
    let load_ended = sim.now() - start;
    // Requests in progress at the end: each is bounded by the request timeout.
    let drain = scenario.store.request_timeout + scenario.store.call_timeout;
    sim.run_until(|| load.in_flight() == 0, drain);
    breaker.note(&stats, sim.now() - start);
    let simulated = sim.now() - start;
    let samples = load.samples();
    let opened_first = breaker
        .opened
        .iter()
        .copied()
        .find(|at| *at >= hang_began)
        .unwrap_or(Duration::MAX);
    let closed_again = breaker
        .closed
        .iter()
        .copied()
        .find(|at| *at >= recovered_began)
        .unwrap_or(Duration::MAX);
    let phase_of = |s: &Sample| {
        if s.began < hang_began {
            "healthy"
        } else if s.began < recovered_began {
            "search_hangs"
        } else {
            "recovered"
        }
    };
    let mut summaries = Vec::new();
    for phase in ["healthy", "search_hangs", "recovered"] {
        for kind in Kind::ALL {
            let group: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.kind == kind && phase_of(s) == phase)
                .collect();
            summaries.push(LatencySummary::of(phase, kind, &group));
        }
    }
    let search = |keep: &dyn Fn(&Sample) -> bool| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|s| s.kind == Kind::Search && keep(s))
            .collect()
    };
    summaries.push(LatencySummary::of(
        "search_hangs:closed",
        Kind::Search,
        &search(&|s| phase_of(s) == "search_hangs" && s.began <= opened_first),
    ));
    summaries.push(LatencySummary::of(
        "search_hangs:open",
        Kind::Search,
        &search(&|s| phase_of(s) == "search_hangs" && s.began > opened_first),
    ));
    summaries.push(LatencySummary::of(
        "recovered:closed",
        Kind::Search,
        // After: a request begun at the very instant of the close may have reached the actor
        // before it (turns take no simulated time).
        &search(&|s| s.began > closed_again),
    ));
    // A request timeout after the faults' end: past any stall (shorter) and any request
    // begun during the faults.
    let settled = recovered_began + scenario.store.request_timeout;
    let payments: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.kind == Kind::Payment && s.began >= settled)
        .collect();
    summaries.push(LatencySummary::of(
        "recovered:settled",
        Kind::Payment,
        &payments,
    ));
    let slowest_search = samples
        .iter()
        .filter(|s| s.kind == Kind::Search)
        .max_by_key(|s| s.latency)
        .map(|s| (s.began, s.latency));
    let stats = app.stats();
    Ok(ScenarioOutcome {
        scenario: scenario.clone(),
        seed: sim.seed(),
        strategy: sim.strategy(),
        simulated,
        wall: wall.elapsed(),
        steps: sim.steps() - steps,
        requests: samples.len(),
        unanswered: load.in_flight(),
        hang_began,
        recovered_began,
        load_ended,
        breaker_opened: breaker.opened,
        breaker_closed: breaker.closed,
        search_peak: backends.search_peak(),
        payment_peak: backends.payment_peak(),
        search: stats.search,
        payment: stats.payment,
        summaries,
        slowest_search,
    })
}

/// The search breaker's transitions, as the run goes.
#[derive(Default)]
struct Transitions {
    opened: Vec<Duration>,
    closed: Vec<Duration>,
}

impl Transitions {
    /// Runs the simulation for `length`, noting each transition when it happens.
    fn watch(
        &mut self,
        sim: &Simulation,
        stats: &Arc<BackendStats>,
        start: Instant,
        length: Duration,
    ) {
        let end = sim.now() + length;
        loop {
            let now = sim.now();
            if now >= end {
                return;
            }
            let (opened, closed) = (self.opened.len() as u64, self.closed.len() as u64);
            let changed = sim.run_until(
                || stats.opened() > opened || stats.closed() > closed,
                end - now,
            );
            self.note(stats, sim.now() - start);
            if !changed {
                return;
            }
        }
    }

    /// Notes the transitions made since the last look as happening at `at`.
    fn note(&mut self, stats: &BackendStats, at: Duration) {
        while (self.opened.len() as u64) < stats.opened() {
            self.opened.push(at);
        }
        while (self.closed.len() as u64) < stats.closed() {
            self.closed.push(at);
        }
    }
}
