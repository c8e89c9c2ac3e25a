//! Many seeds of one test, under `cargo test`: in parallel over the cores, within a time
//! budget, past failures first; a failure is checked for determinism, shrunk, and reported
//! with the command that replays it.
//!
//! Environment (each overrides the test's own setting):
//! - `TROUPE_SIM_SEED=<replay>`: runs that one run only (a seed, or a whole replay line
//!   `seed:strategy:faults[:limit]` as a failure prints it), keeping its trace;
//! - `TROUPE_SIM_SEEDS=<n>`: how many seeds;
//! - `TROUPE_SIM_FIRST_SEED=<s>`: the first of them (a long run split over machines or over
//!   time: `0` and `50000` with 50,000 each is the run of 100,000);
//! - `TROUPE_SIM_SECONDS=<s>`: the wall-clock budget (seeds not begun by then are skipped);
//! - `TROUPE_SIM_THREADS=<n>`: threads (default: one per core);
//! - `TROUPE_SIM_STEP_SECONDS=<s>`: the watchdog's patience (default 120).
//!
//! A step is a turn, a poll or a timer, and user code runs inside it: a handler that never
//! returns (an endless loop, a blocking call that escapes the simulation) would hang the test
//! without a word. A watchdog thread looks at every run in progress; one whose step count has
//! not moved for `TROUPE_SIM_STEP_SECONDS` is reported with its replay line, and the process
//! is aborted, so `cargo test` ends with the seed rather than hanging.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use crate::system::SystemBuilder;

use super::faults::Faults;
use super::host::HostShared;
use super::strategy::Strategy;
use super::trace::Recorded;
use super::Simulation;

/// What a run is: enough to replay it exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Replay {
    seed: u64,
    strategy: Strategy,
    /// The fault kinds on (letters, see `Faults::kinds`).
    kinds: String,
    limit: Option<u32>,
}

impl Replay {
    fn line(&self) -> String {
        let mut line = format!("{}:{}:{}", self.seed, self.strategy, self.kinds);
        if let Some(limit) = self.limit {
            line.push_str(&format!(":{limit}"));
        }
        line
    }

    /// Reads a replay line, or a bare seed (with the test's strategies and faults).
    fn parse(text: &str, explore: &Explore) -> Result<Replay, String> {
        let mut parts = text.trim().split(':');
        let seed = parts
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| format!("`{text}` does not start with a seed (a whole number)"))?;
        let mut replay = explore.replay_of(seed);
        if let Some(strategy) = parts.next() {
            replay.strategy = Strategy::parse(strategy).ok_or_else(|| {
                format!("`{strategy}` is not a strategy (random, pct3, fair, fifo)")
            })?;
        }
        if let Some(kinds) = parts.next() {
            if !kinds.chars().all(|c| "csxb-".contains(c)) {
                return Err(format!(
                    "`{kinds}` is not a set of fault kinds (letters of `csxb`, or `-`)"
                ));
            }
            replay.kinds = kinds.to_owned();
        }
        if let Some(limit) = parts.next() {
            replay.limit = Some(
                limit
                    .parse()
                    .map_err(|_| format!("`{limit}` is not a fault limit (a whole number)"))?,
            );
        }
        if parts.next().is_some() {
            return Err(format!(
                "`{text}` has more parts than seed:strategy:faults:limit"
            ));
        }
        Ok(replay)
    }
}

/// A failure an exploration found.
#[derive(Clone, Debug)]
pub struct Found {
    /// The seed of the failing run.
    pub seed: u64,
    /// Its strategy.
    pub strategy: Strategy,
    /// Runs made until it was found (the failing one included).
    pub runs: u64,
    /// What failed (the panic's message).
    pub message: String,
    /// The line that replays it: `TROUPE_SIM_SEED=<replay>`.
    pub replay: String,
    /// The smallest run still failing that shrinking found (fewer fault kinds, fewer faults),
    /// as a replay line, if it differs from `replay`.
    pub shrunk: Option<String>,
    /// Faults in the failing run, and in the shrunk one.
    pub faults: (u32, u32),
    /// Steps of the failing run.
    pub steps: u64,
    /// The fault rates the failing run picked.
    pub fault_rates: String,
    /// The first step at which two runs of the seed differed (`None`: they were identical).
    pub nondeterministic_at: Option<u64>,
    /// The last steps of the failing run.
    pub trace: String,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let package = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "<package>".into());
        writeln!(f, "simulation failed: {}", self.message)?;
        writeln!(
            f,
            "  seed {} (strategy {}), after {} runs; {} steps, {} faults ({})",
            self.seed, self.strategy, self.runs, self.steps, self.faults.0, self.fault_rates
        )?;
        match self.nondeterministic_at {
            None => writeln!(
                f,
                "  determinism: a second run of the seed took the same steps"
            )?,
            Some(step) => writeln!(
                f,
                "  NOT DETERMINISTIC: a second run of the seed differed at step {step} (see the \
                 module note of troupe::sim for what escapes a simulation)"
            )?,
        }
        writeln!(
            f,
            "  replay: TROUPE_SIM_SEED={} cargo test -p {package} <this test> (with this run's \
             cargo options, such as --release or --test)",
            self.replay
        )?;
        if let Some(shrunk) = &self.shrunk {
            writeln!(
                f,
                "  shrunk to {} faults: TROUPE_SIM_SEED={shrunk} cargo test -p {package} <this test>",
                self.faults.1
            )?;
        }
        write!(f, "  last steps:\n{}", self.trace)
    }
}

/// What an exploration ran.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Runs made.
    pub runs: u64,
    /// Steps over all runs.
    pub steps: u64,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// True if the time budget ended the exploration before every seed ran.
    pub cut_short: bool,
}

/// Runs one test over many seeds. See the module note.
///
/// ```
/// use troupe::sim::{Explore, Faults};
/// use troupe::{Actor, Context, Handler, Message};
/// struct Counter(u64);
/// impl Actor for Counter {}
/// #[derive(Message)]
/// #[reply(u64)]
/// struct Add(u64);
/// impl Handler<Add> for Counter {
///     fn handle(&mut self, add: Add, _: &mut Context<Self>) -> u64 { self.0 += add.0; self.0 }
/// }
/// let summary = Explore::new("counter_adds").seeds(50).run(|sim| {
///     let counter = sim.system().spawn(Counter(0));
///     let asks: Vec<_> = (1..=3).map(|i| counter.ask(Add(i))).collect();
///     let last = asks.into_iter().map(|a| a.wait().unwrap()).max();
///     assert_eq!(last, Some(6));
/// });
/// assert_eq!(summary.runs, 50);
/// ```
#[derive(Clone)]
pub struct Explore {
    name: String,
    seeds: u64,
    first_seed: u64,
    strategies: Vec<Strategy>,
    faults: Faults,
    system: Arc<dyn Fn() -> SystemBuilder + Send + Sync>,
    budget: Option<Duration>,
    corpus: Vec<String>,
    max_steps: u64,
    max_time: Duration,
    threads: usize,
    check_determinism: bool,
}

impl std::fmt::Debug for Explore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Explore")
            .field("name", &self.name)
            .field("seeds", &self.seeds)
            .field("strategies", &self.strategies)
            .field("faults", &self.faults)
            .finish()
    }
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => panic!("{name}=`{value}` is not a valid number"),
    }
}

impl Explore {
    /// An exploration named `name` (the test's name, printed in reports): 100 seeds from 0,
    /// strategies random, PCT (depth 3) and fair in turn, no faults.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            seeds: 100,
            first_seed: 0,
            strategies: vec![Strategy::Random, Strategy::Pct { depth: 3 }, Strategy::Fair],
            faults: Faults::none(),
            system: Arc::new(SystemBuilder::default),
            budget: None,
            corpus: Vec::new(),
            max_steps: 10_000_000,
            max_time: Duration::from_secs(24 * 3600),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            check_determinism: false,
        }
    }

    /// How many seeds (default 100; `TROUPE_SIM_SEEDS` overrides).
    pub fn seeds(mut self, n: u64) -> Self {
        self.seeds = n;
        self
    }

    /// The first seed (default 0): seeds are `first .. first + n` (`TROUPE_SIM_FIRST_SEED`
    /// overrides).
    pub fn first_seed(mut self, seed: u64) -> Self {
        self.first_seed = seed;
        self
    }

    /// One strategy for every run.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategies = vec![strategy];
        self
    }

    /// Strategies taken in turn, seed by seed.
    pub fn strategies(mut self, strategies: &[Strategy]) -> Self {
        assert!(!strategies.is_empty(), "an exploration needs a strategy");
        self.strategies = strategies.to_vec();
        self
    }

    /// The faults runs may inject (each seed picks its rates).
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// The settings of each run's system.
    pub fn system(mut self, make: impl Fn() -> SystemBuilder + Send + Sync + 'static) -> Self {
        self.system = Arc::new(make);
        self
    }

    /// Stops starting seeds after this much wall-clock time (`TROUPE_SIM_SECONDS` overrides).
    pub fn time_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Replay lines of past failures, run before the seeds.
    pub fn corpus(mut self, lines: &[&str]) -> Self {
        self.corpus = lines.iter().map(|l| (*l).to_owned()).collect();
        self
    }

    /// The most steps a run may take (default 10 M, as a `Simulation`'s).
    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    /// The most simulated time a run may last (default 24 hours).
    pub fn max_time(mut self, time: Duration) -> Self {
        self.max_time = time;
        self
    }

    /// Runs every seed twice and fails if the two runs took different steps (something in the
    /// test escapes the simulation: see the module note of `troupe::sim`); the report names
    /// the first step that differed. Doubles the cost.
    pub fn check_determinism(mut self) -> Self {
        self.check_determinism = true;
        self
    }

    /// Threads to run seeds on (default one per core; `TROUPE_SIM_THREADS` overrides).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    fn replay_of(&self, seed: u64) -> Replay {
        let index = seed.wrapping_sub(self.first_seed);
        Replay {
            seed,
            strategy: self.strategies[(index % self.strategies.len() as u64) as usize],
            kinds: self.faults.kinds(),
            limit: self.faults.limit_value(),
        }
    }

    fn simulation(&self, replay: &Replay, record: bool) -> Simulation {
        let mut faults = self.faults.clone().with_kinds(&replay.kinds);
        if let Some(limit) = replay.limit {
            faults = faults.limit(limit);
        }
        Simulation::builder()
            .seed(replay.seed)
            .strategy(replay.strategy)
            .faults(faults)
            .system((self.system)())
            .max_steps(self.max_steps)
            .max_time(self.max_time)
            .record(record)
            .build()
            .unwrap_or_else(|e| panic!("{}: could not build a simulation: {e}", self.name))
    }

    /// Runs the test for every seed; panics with a report (seed, replay command, trace) at the
    /// first failure.
    pub fn run(self, test: impl Fn(&Simulation) + Send + Sync) -> Summary {
        match self.explore(&test) {
            Ok(summary) => summary,
            Err(found) => panic!("{}: {found}", self.name),
        }
    }

    /// Runs the test for every seed and returns the first failure instead of panicking: for a
    /// test that proves the simulation finds a known defect. `Ok` if none failed.
    pub fn find(self, test: impl Fn(&Simulation) + Send + Sync) -> Result<Summary, Box<Found>> {
        self.explore(&test)
    }

    fn explore(&self, test: &(dyn Fn(&Simulation) + Send + Sync)) -> Result<Summary, Box<Found>> {
        quiet_panics_when_asked();
        let started = Instant::now();
        if let Ok(line) = std::env::var("TROUPE_SIM_SEED") {
            let replay =
                Replay::parse(&line, self).unwrap_or_else(|e| panic!("TROUPE_SIM_SEED: {e}"));
            return match run_one(self, &replay, test, true) {
                Outcome::Passed { steps, .. } => {
                    eprintln!(
                        "{}: replay {} passed ({steps} steps)",
                        self.name,
                        replay.line()
                    );
                    Ok(Summary {
                        runs: 1,
                        steps,
                        elapsed: started.elapsed(),
                        cut_short: false,
                    })
                }
                Outcome::Failed { .. } => Err(Box::new(self.report(&replay, 1, test))),
            };
        }
        let mut runs = 0;
        let mut steps = 0;
        for line in &self.corpus {
            let replay = Replay::parse(line, self)
                .unwrap_or_else(|e| panic!("{}: corpus line: {e}", self.name));
            runs += 1;
            match run_one(self, &replay, test, false) {
                Outcome::Passed { steps: s, .. } => steps += s,
                Outcome::Failed { .. } => return Err(Box::new(self.report(&replay, runs, test))),
            }
        }
        let seeds = env::<u64>("TROUPE_SIM_SEEDS").unwrap_or(self.seeds);
        let first_seed = env::<u64>("TROUPE_SIM_FIRST_SEED").unwrap_or(self.first_seed);
        let budget = env::<f64>("TROUPE_SIM_SECONDS")
            .map(Duration::from_secs_f64)
            .or(self.budget);
        let threads = env::<usize>("TROUPE_SIM_THREADS")
            .unwrap_or(self.threads)
            .clamp(1, 256);

        struct Shared {
            next: u64,
            runs: u64,
            steps: u64,
            failed: Option<u64>,
            cut_short: bool,
        }
        let shared = Mutex::new(Shared {
            next: 0,
            runs: 0,
            steps: 0,
            failed: None,
            cut_short: false,
        });
        let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let index = {
                        let mut s = lock();
                        if s.next >= seeds || s.failed.is_some_and(|f| s.next > f) {
                            return;
                        }
                        if budget.is_some_and(|b| started.elapsed() >= b) {
                            s.cut_short = true;
                            return;
                        }
                        s.next += 1;
                        s.next - 1
                    };
                    let replay = self.replay_of(first_seed.wrapping_add(index));
                    let mut outcome = run_one(self, &replay, test, false);
                    if let (true, Outcome::Passed { hash, .. }) = (self.check_determinism, &outcome)
                    {
                        // The same seed again must take the same steps.
                        let first = *hash;
                        if let Outcome::Passed { hash, .. } = run_one(self, &replay, test, false) {
                            if hash != first {
                                outcome = Outcome::Failed {
                                    message: "two runs of the seed took different steps".into(),
                                    recorded: Recorded::default(),
                                    rates: String::new(),
                                };
                            }
                        }
                    }
                    let mut s = lock();
                    s.runs += 1;
                    match outcome {
                        Outcome::Passed { steps, .. } => s.steps += steps,
                        Outcome::Failed { .. } => {
                            s.failed = Some(s.failed.map_or(index, |f| f.min(index)));
                        }
                    }
                });
            }
        });
        let s = lock();
        if let Some(index) = s.failed {
            let replay = self.replay_of(first_seed.wrapping_add(index));
            return Err(Box::new(self.report(&replay, runs + index + 1, test)));
        }
        Ok(Summary {
            runs: runs + s.runs,
            steps: steps + s.steps,
            elapsed: started.elapsed(),
            cut_short: s.cut_short,
        })
    }

    /// The report of a failing run: run again recording (twice: the determinism check), then
    /// shrunk.
    fn report(
        &self,
        replay: &Replay,
        runs: u64,
        test: &(dyn Fn(&Simulation) + Send + Sync),
    ) -> Found {
        let (message, first, fault_rates) = match run_one(self, replay, test, true) {
            Outcome::Failed {
                message,
                recorded,
                rates,
            } => (message, recorded, rates),
            Outcome::Passed { .. } => (
                "the run failed once, then passed when run again, or two runs of the seed took \
                 different steps: not deterministic"
                    .to_owned(),
                Recorded::default(),
                String::new(),
            ),
        };
        let second = match run_one(self, replay, test, true) {
            Outcome::Failed { recorded, .. } => recorded,
            Outcome::Passed { .. } => Recorded::default(),
        };
        // A seed that passes but is not deterministic: compare two recorded runs.
        let (first, second) = if first.step_hashes.is_empty() && second.step_hashes.is_empty() {
            (
                recorded_run(self, replay, test),
                recorded_run(self, replay, test),
            )
        } else {
            (first, second)
        };
        let nondeterministic_at = first.first_difference(&second);
        let faults = first.events.iter().filter(|(_, e)| e.is_fault()).count() as u32;
        let (shrunk, shrunk_faults) = self.shrink(replay, faults, test);
        let mut trace = first.tail(30);
        if let Some(step) = nondeterministic_at {
            trace.push_str(&format!("  step {step} in the first run:\n"));
            for e in first.events_of(step) {
                trace.push_str(&format!("    {e}\n"));
            }
            trace.push_str("  and in the second:\n");
            for e in second.events_of(step) {
                trace.push_str(&format!("    {e}\n"));
            }
        }
        Found {
            seed: replay.seed,
            strategy: replay.strategy,
            runs,
            message,
            replay: replay.line(),
            shrunk: (shrunk != *replay).then(|| shrunk.line()),
            faults: (faults, shrunk_faults),
            steps: first.step_hashes.len() as u64,
            fault_rates,
            nondeterministic_at,
            trace,
        }
    }

    /// The smallest run that still fails: fault kinds off one by one, then fewer faults.
    fn shrink(
        &self,
        replay: &Replay,
        faults: u32,
        test: &(dyn Fn(&Simulation) + Send + Sync),
    ) -> (Replay, u32) {
        let fails = |r: &Replay| matches!(run_one(self, r, test, false), Outcome::Failed { .. });
        let mut best = replay.clone();
        let mut best_faults = faults;
        if faults == 0 {
            return (best, 0);
        }
        let mut none = best.clone();
        none.kinds = "-".to_owned();
        if fails(&none) {
            return (none, 0);
        }
        for letter in ['c', 's', 'x', 'b'] {
            if !best.kinds.contains(letter) {
                continue;
            }
            let mut fewer = best.clone();
            fewer.kinds = best.kinds.replace(letter, "");
            if fewer.kinds.is_empty() {
                fewer.kinds = "-".to_owned();
            }
            if fails(&fewer) {
                best = fewer;
            }
        }
        // Fewer faults: the smallest limit that still fails (halving, then stepping down).
        let mut high = best_faults;
        let mut low = 0;
        while low + 1 < high {
            let mid = (low + high) / 2;
            let mut limited = best.clone();
            limited.limit = Some(mid);
            if fails(&limited) {
                high = mid;
            } else {
                low = mid;
            }
        }
        if high < best_faults {
            best.limit = Some(high);
            best_faults = high;
        }
        (best, best_faults)
    }
}

enum Outcome {
    Passed {
        steps: u64,
        hash: u64,
    },
    Failed {
        message: String,
        recorded: Recorded,
        rates: String,
    },
}

fn run_one(
    explore: &Explore,
    replay: &Replay,
    test: &(dyn Fn(&Simulation) + Send + Sync),
    record: bool,
) -> Outcome {
    let _quiet = Quiet::enter();
    let mut steps = 0;
    let mut hash = 0;
    let mut recorded = Recorded::default();
    let mut rates = String::new();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = explore.simulation(replay, record);
        let _watched = watch(&explore.name, replay.line(), sim.host.clone());
        rates = sim.core().plan().describe();
        let tested = catch_unwind(AssertUnwindSafe(|| test(&sim)));
        // A shutdown that can never finish fails the run too.
        let shut = match &tested {
            Ok(()) => catch_unwind(AssertUnwindSafe(|| sim.shutdown())),
            Err(_) => Ok(()),
        };
        steps = sim.steps();
        hash = sim.trace_hash();
        if record {
            recorded = sim.core().take_recording();
        }
        match (tested, shut) {
            (Err(panic), _) => {
                // The run has failed; its steps, hash and recording are taken.
                release_failed(sim);
                std::panic::resume_unwind(panic)
            }
            (Ok(()), Err(panic)) => {
                sim.abandon();
                std::panic::resume_unwind(panic)
            }
            (Ok(()), Ok(())) => drop(sim),
        }
    }));
    match result {
        Ok(()) => Outcome::Passed { steps, hash },
        Err(panic) => Outcome::Failed {
            message: panic_message(&*panic),
            recorded,
            rates,
        },
    }
}

/// A passing run of `replay`, recorded.
fn recorded_run(
    explore: &Explore,
    replay: &Replay,
    test: &(dyn Fn(&Simulation) + Send + Sync),
) -> Recorded {
    let _quiet = Quiet::enter();
    let mut recorded = Recorded::default();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = explore.simulation(replay, true);
        match catch_unwind(AssertUnwindSafe(|| test(&sim))) {
            Ok(()) => {
                sim.shutdown();
                recorded = sim.core().take_recording();
            }
            // A failed run records nothing here (the runs that failed were recorded).
            Err(_) => release_failed(sim),
        }
    }));
    recorded
}

/// After a failed run: shuts its system down still, so that what its actors hold is freed,
/// and gives it up only if that cannot finish either (actors that nothing will stop). Not
/// left to the simulation's drop, which cannot shut down while a panic unwinds.
fn release_failed(mut sim: Simulation) {
    match catch_unwind(AssertUnwindSafe(|| sim.shutdown())) {
        Ok(()) => drop(sim),
        Err(_) => sim.abandon(),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not text".to_owned()
    }
}

/// A run the watchdog looks at.
struct Watched {
    id: u64,
    name: String,
    line: String,
    host: Arc<HostShared>,
    step: u64,
    since: Instant,
}

static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());

fn watched() -> std::sync::MutexGuard<'static, Vec<Watched>> {
    WATCHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends the watch of a run when dropped.
struct Watch(u64);

impl Drop for Watch {
    fn drop(&mut self) {
        watched().retain(|w| w.id != self.0);
    }
}

/// Puts a run under the watchdog (started with the first run). See the module note.
fn watch(name: &str, line: String, host: Arc<HostShared>) -> Watch {
    static START: Once = Once::new();
    static NEXT: Mutex<u64> = Mutex::new(0);
    START.call_once(|| {
        let patience =
            Duration::from_secs_f64(env::<f64>("TROUPE_SIM_STEP_SECONDS").unwrap_or(120.0));
        let spawned = std::thread::Builder::new()
            .name("troupe-sim-watchdog".to_owned())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(500));
                for w in watched().iter_mut() {
                    let step = w.host.lock().step;
                    if step != w.step {
                        (w.step, w.since) = (step, Instant::now());
                    } else if w.since.elapsed() >= patience {
                        // Straight to the process's stderr: the test harness captures what
                        // `eprintln!` prints on threads a test started, and the abort would
                        // lose it.
                        use std::io::Write as _;
                        let _ = writeln!(
                            std::io::stderr(),
                            "{}: a simulation step has run for {:?} without ending (a handler \
                             that never returns, or a turn that never ends), at step {step}; \
                             replay: TROUPE_SIM_SEED={} (aborting: nothing else would end it)",
                            w.name,
                            w.since.elapsed(),
                            w.line
                        );
                        std::process::abort();
                    }
                }
            });
        if let Err(error) = spawned {
            eprintln!("no watchdog for simulated runs: {error}");
        }
    });
    let id = {
        let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
        *next += 1;
        *next
    };
    watched().push(Watched {
        id,
        name: name.to_owned(),
        line,
        host,
        step: 0,
        since: Instant::now(),
    });
    Watch(id)
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While it lives, panics on this thread are not printed (the report says what failed).
struct Quiet(bool);

impl Quiet {
    fn enter() -> Self {
        Quiet(QUIET.with(|q| q.replace(true)))
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(self.0));
    }
}

/// Installs (once per process) a panic hook that stays silent on threads inside `Quiet` and
/// hands every other panic to the hook that was there before.
fn quiet_panics_when_asked() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}
