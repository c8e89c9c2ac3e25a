//! Deterministic simulation: a whole troupe system on one thread, every choice the runtime
//! leaves open taken from a seed, time simulated, faults injected, and any run replayed exactly.
//!
//! ```
//! use std::time::Duration;
//! use troupe::sim::Simulation;
//! use troupe::{Actor, Context, Handler, Message};
//!
//! /// Forgets its count an hour after the last visit.
//! struct Visits { count: u32, timer: Option<troupe::TimerId> }
//! impl Actor for Visits {}
//! #[derive(Message)]
//! #[reply(u32)]
//! struct Visit;
//! impl Handler<Visit> for Visits {
//!     fn handle(&mut self, _: Visit, ctx: &mut Context<Self>) -> u32 {
//!         if let Some(timer) = self.timer.take() { ctx.cancel_timer(timer); }
//!         self.timer = Some(ctx.send_after(Duration::from_secs(3600), Forget));
//!         self.count += 1;
//!         self.count
//!     }
//! }
//! #[derive(Message)]
//! struct Forget;
//! impl Handler<Forget> for Visits {
//!     fn handle(&mut self, _: Forget, _: &mut Context<Self>) { self.count = 0 }
//! }
//!
//! let sim = Simulation::new(7);
//! let visits = sim.system().spawn(Visits { count: 0, timer: None });
//! assert_eq!(visits.ask(Visit).wait(), Ok(1));
//! sim.advance(Duration::from_secs(59 * 60));
//! assert_eq!(visits.ask(Visit).wait(), Ok(2));
//! sim.advance(Duration::from_secs(61 * 60)); // an hour and a minute: in microseconds of real time
//! assert_eq!(visits.ask(Visit).wait(), Ok(1));
//! ```
//!
//! # What the seed decides, and what stays guaranteed
//! The runtime's guarantees hold in a simulation as on threads: messages from one sender
//! arrive in the order sent, each message is handled once or handed back, a reply reaches its
//! ask or says why not, supervisors see failures in order. What the runtime leaves open is the
//! seed's: which ready actor runs next, how many messages a turn takes, how messages of
//! different senders interleave (through which sender runs when), when a timer fires beside
//! messages that are ready at the same time, and when a future's wake-up is acted on.
//!
//! # The parts
//! - `host.rs`: the executors, tasks and spawn hook a simulated system is built on
//!   (`runtime::Host`), instead of pools of threads;
//! - `core.rs`: the loop that takes one step at a time, and the simulated clock;
//! - `strategy.rs`: random, PCT, fair and FIFO choice of the next step;
//! - `faults.rs`: crashes, stalls, stops and fault points, rates picked by each seed;
//! - `trace.rs`: the hash of every step (replay, determinism check) and the steps to print;
//! - `explore.rs`: many seeds in parallel under `cargo test`, a corpus, replay, shrinking;
//! - `rng.rs`: the generator a seed starts (fixed here, so a seed means the same run forever).
//!
//! The simulation enters the runtime through its seams only: an executor (`raw::Schedule`),
//! the timer service's clock, the system's `Host`, and the thread's `role::Drive` (what a
//! blocking call does on the thread that drives a simulation). Nothing in the hot path knows
//! it exists.
//!
//! # What escapes
//! - `std::time::Instant::now()` and `SystemTime` in user code read the real clock: use
//!   `ctx.now()` / `system.now()` (or `tokio::time::Instant::now()` inside futures), which are
//!   the simulated clock here and the real one in production.
//! - A `std::thread` the test starts, and `tokio::task::spawn_blocking`, run for real: work
//!   they send to the system is refused with a panic that says so.
//! - Real sockets and files work, but their timing is the operating system's, not the seed's;
//!   and since the simulated clock jumps whenever nothing is ready, a wait on them sees time
//!   fly. Give the code under test a simulated transport or disk instead.
//! - `tokio::select!` without `biased;` draws from tokio's own random generator: the branch
//!   it polls first is not the seed's.
//! - `HashMap` iteration order (a random hash key per map) in user code.
//! - `Placement::Thread` and the `blocking` pool are simulated like any pool: an actor there
//!   may block on `Ask::wait`, which runs the simulation (nested) until the reply is in.

mod core;
mod explore;
mod faults;
mod host;
mod rng;
mod strategy;
mod trace;

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::BuildError;
use crate::role::{self, Drive};
use crate::system::{System, SystemBuilder};

pub use explore::{Explore, Found, Summary};
pub use faults::Faults;
pub use strategy::Strategy;

use self::core::{Core, RunConfig};
use host::{HostShared, SimHost};

/// True if the calling thread runs a simulation (the code under test can use it to skip real
/// I/O; prefer a simulated transport given from outside).
pub fn is_simulated() -> bool {
    role::drives_simulation()
}

/// A fault point, as FoundationDB's `BUGGIFY`: in production always `false`; in a simulation
/// with fault points on, each `site` is switched on or off for the whole run the first time
/// it is reached, and an enabled site returns `true` now and then. Put it where the code has a
/// rare path worth exercising (a write that fails, a reply that is lost, a retry that races).
///
/// ```
/// fn write(log: &mut Vec<u64>, record: u64) -> std::io::Result<()> {
///     if troupe::sim::buggify("log: write fails") {
///         return Err(std::io::Error::other("injected"));
///     }
///     log.push(record);
///     Ok(())
/// }
/// let mut log = Vec::new();
/// assert!(write(&mut log, 1).is_ok()); // outside a simulation, never injected
/// ```
pub fn buggify(site: &'static str) -> bool {
    with_core(|core| core.buggify(site)).unwrap_or(false)
}

/// A random number from the running simulation's seed (`None` outside a simulation): for the
/// test's own choices, so that they replay with the seed.
pub fn random() -> Option<u64> {
    with_core(Core::random)
}

fn with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    let driver = role::driver()?;
    let core = driver.as_any().downcast_ref::<Core>()?;
    Some(f(core))
}

/// Builds a [`Simulation`].
///
/// ```
/// use std::time::Duration;
/// use troupe::sim::{Faults, Simulation, Strategy};
/// let sim = Simulation::builder()
///     .seed(42)
///     .strategy(Strategy::Pct { depth: 3 })
///     .faults(Faults::all())
///     .system(troupe::System::builder().pool("db", 2, 8))
///     .max_time(Duration::from_secs(600))
///     .build()
///     .unwrap();
/// assert_eq!(sim.seed(), 42);
/// ```
#[derive(Clone, Debug)]
pub struct SimulationBuilder {
    seed: u64,
    strategy: Strategy,
    faults: Faults,
    system: SystemBuilder,
    max_steps: u64,
    max_time: Duration,
    record: bool,
    pct_steps: u64,
}

impl Default for SimulationBuilder {
    fn default() -> Self {
        Self {
            seed: 0,
            strategy: Strategy::Random,
            faults: Faults::none(),
            system: SystemBuilder::default(),
            max_steps: 10_000_000,
            max_time: Duration::from_secs(24 * 3600),
            record: false,
            pct_steps: 2_000,
        }
    }
}

impl SimulationBuilder {
    /// The seed (default 0).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How the next step is picked (default [`Strategy::Random`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// The faults the run may inject (default none).
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// The system's settings (pools, throughput, name); `tokio_handle` is refused (the
    /// simulation has its own runtime), and the worker counts only name the pools.
    pub fn system(mut self, system: SystemBuilder) -> Self {
        self.system = system;
        self
    }

    /// The most steps a run may take before it is reported as a livelock (default 10 M).
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// The most simulated time a run may last (default 24 hours).
    pub fn max_time(mut self, time: Duration) -> Self {
        self.max_time = time;
        self
    }

    /// Keeps every step, to print ([`Simulation::trace`]); off by default (only a hash).
    pub fn record(mut self, on: bool) -> Self {
        self.record = on;
        self
    }

    /// How many steps PCT spreads its priority changes over (default 2,000: about a short
    /// test's length).
    pub fn pct_steps(mut self, steps: u64) -> Self {
        self.pct_steps = steps.max(1);
        self
    }

    /// Builds the simulation and its system, on the calling thread, which drives it from now
    /// until the simulation is dropped.
    ///
    /// Fails if this thread already drives a simulation (one at a time per thread: drop the
    /// first before building the next).
    pub fn build(self) -> Result<Simulation, BuildError> {
        if role::drives_simulation() {
            return Err(BuildError::Config(
                "this thread already drives a simulation: drop it before building another"
                    .to_owned(),
            ));
        }
        // How often a new future is polled inside the turn that started it: the seed's
        // (never under FIFO, which draws nothing).
        let mut picks = rng::Rng::new(rng::mix(self.seed ^ 0xEA6E7));
        let eager = match self.strategy {
            Strategy::Fifo => 0.0,
            _ => [0.0, 0.1, 0.5][picks.below(3) as usize],
        };
        let host = HostShared::new(picks.next_u64(), eager);
        let config = RunConfig {
            seed: self.seed,
            strategy: self.strategy,
            plan: self.faults.plan(self.seed),
            max_steps: self.max_steps,
            max_time: self.max_time,
            record: self.record,
            expected_steps: self.pct_steps,
        };
        let core = Rc::new(Core::new(host.clone(), config).map_err(BuildError::Thread)?);
        let io = core.runtime().handle().clone();
        let clock = core.clock().clone();
        let system = self.system.build_hosted(
            Arc::new(SimHost {
                shared: host.clone(),
            }),
            io,
            clock,
        )?;
        core.set_timers(system.timers());
        let driving = role::drive(core.clone());
        Ok(Simulation {
            core,
            host,
            system: Some(system),
            faults: self.faults,
            _driving: driving,
        })
    }
}

/// A simulated troupe system and the loop that runs it, on the thread that built it. See the
/// module note.
///
/// Blocking calls on this thread (`Ask::wait`, `System::shutdown`, `System::block_on`) run the
/// simulation until what they wait for has happened, in simulated time; a wait that can never
/// end (nothing left to run, no timer pending) panics with the seed instead of hanging.
/// Dropping it shuts the system down the same way.
pub struct Simulation {
    core: Rc<Core>,
    host: Arc<HostShared>,
    system: Option<System>,
    faults: Faults,
    _driving: role::Driving,
}

impl Simulation {
    /// A simulation with this seed, random scheduling, no faults and a default system.
    ///
    /// # Panics
    /// If the simulation's runtime cannot be built (the operating system refused it).
    pub fn new(seed: u64) -> Simulation {
        match Self::builder().seed(seed).build() {
            Ok(sim) => sim,
            Err(error) => panic!("could not build the simulation: {error}"),
        }
    }

    /// A builder, for the strategy, faults, limits and the system's settings.
    pub fn builder() -> SimulationBuilder {
        SimulationBuilder::default()
    }

    /// The simulated system (clone it freely).
    pub fn system(&self) -> &System {
        self.system
            .as_ref()
            .expect("the system lives as long as the simulation")
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.core.config().seed
    }

    /// The run's strategy.
    pub fn strategy(&self) -> Strategy {
        self.core.config().strategy
    }

    /// The faults the test allowed (the run picked its rates within them).
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The simulated clock.
    pub fn now(&self) -> Instant {
        self.core.now()
    }

    /// Simulated time since the simulation began.
    pub fn elapsed(&self) -> Duration {
        self.core.elapsed()
    }

    /// Runs the simulation for `duration` of simulated time: everything due meanwhile
    /// happens, in order, and the clock ends at least `duration` later (timers are whole
    /// milliseconds, so up to one more).
    pub fn advance(&self, duration: Duration) {
        let until = self.now() + duration;
        self.core.run_until(&mut || false, Some(until), &|| {
            format!("{duration:?} to pass")
        });
    }

    /// Runs every step that is ready now, and what they make ready, without moving the clock.
    pub fn run_until_idle(&self) {
        let now = self.now();
        self.core.run_until(&mut || false, Some(now), &|| {
            "nothing to be ready".to_owned()
        });
    }

    /// Runs the simulation until `done` holds (true), or until `timeout` of simulated time has
    /// passed (false).
    pub fn run_until(&self, mut done: impl FnMut() -> bool, timeout: Duration) -> bool {
        let until = self.now() + timeout;
        self.core.run_until(&mut done, Some(until), &|| {
            "a condition of the test".to_owned()
        })
    }

    /// Ends the fault phase: no fault is injected from now on, so the test can check that the
    /// system recovers (the liveness phase).
    pub fn heal(&self) {
        self.core.heal();
    }

    /// A random number from the run's seed.
    pub fn random(&self) -> u64 {
        self.core.random()
    }

    /// Steps taken so far (turns, polls, timers).
    pub fn steps(&self) -> u64 {
        self.core.steps()
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> u32 {
        self.core.faults_injected()
    }

    /// A hash of every step so far: equal for two runs of one seed (the determinism check).
    pub fn trace_hash(&self) -> u64 {
        self.core.trace_hash()
    }

    /// The last `n` steps, one per line (kept only when built with `record(true)`).
    pub fn trace(&self, n: usize) -> String {
        let recorded = self.core.take_recording();
        recorded.tail(n)
    }

    fn core(&self) -> &Rc<Core> {
        &self.core
    }

    /// Shuts the system down in simulated time, as dropping the simulation does.
    ///
    /// # Panics
    /// If the shutdown can never finish (actors that nothing will stop), naming the seed.
    pub fn shutdown(&mut self) {
        if let Some(system) = &self.system {
            system.shutdown();
        }
    }

    /// Gives the system up without shutting it down (after a failure, whose actors may never
    /// stop): the simulation's own state is still released.
    pub(crate) fn abandon(mut self) {
        if let Some(system) = self.system.take() {
            std::mem::forget(system);
        }
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        if let Some(system) = self.system.take() {
            if !std::thread::panicking() {
                // In simulated time: a shutdown that cannot finish is reported (a panic naming
                // the seed), as any other wait that can never end.
                system.shutdown();
            }
            drop(system);
        }
        // The futures, ready actors and timers may hold addresses of actors whose system
        // holds the host: dropped now, so that no cycle outlives the run.
        drop(self.host.take_tasks());
        drop(self.host.take_actors());
        self.core.clear();
    }
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed())
            .field("strategy", &self.strategy())
            .field("steps", &self.steps())
            .field("elapsed", &self.elapsed())
            .finish()
    }
}
