//! The driving loop: one step at a time, on the thread that drives the simulation.
//!
//! # A step
//! What may run is every actor scheduled and not running (its `Runnable`), every future woken
//! (or new), and every timer due by the simulated clock. The run's strategy picks one; a fault
//! may hit it (an actor crashes or stalls) or another actor (a stop); then it runs: a turn of
//! the actor with a budget the seed picks, one poll of the future, or the timer's action. User
//! code runs with no lock held and no borrow of the loop's state, so it may spawn, schedule,
//! wake, and even block (an `Ask::wait` on the `blocking` pool runs the loop again, nested).
//!
//! # Time
//! The clock is the paused clock of the simulation's own tokio runtime (current-thread,
//! `start_paused`): `tokio::time` inside futures and troupe's timers read the same time. It
//! moves only when nothing is ready: the loop then lets the runtime sleep until the earliest
//! of troupe's next timer, the end of a stall and the caller's deadline, and tokio's
//! auto-advance jumps straight there, or to an earlier `tokio::time` deadline of a future,
//! whose wake-up makes it ready. Turns take no simulated time.
//!
//! # Ends
//! `run_until` returns when the caller's condition holds, or at its deadline. With no deadline
//! and nothing that could ever make the condition hold (nothing ready, no timer pending), the
//! run is stuck: it panics, naming what it waited for, and so does a run past its step or time
//! limit. A panic inside a turn (a nested wait that got stuck) would be caught at the turn's
//! boundary as a handler's panic, so it is kept and raised again by the outer loop.

use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use crate::erased::ErasedCell;
use crate::id::ActorId;
use crate::raw::Ran;
use crate::role::{self, Drive};
use crate::runtime::IoFuture;
use crate::signal::Signal;
use crate::timer::{DueTimer, SimulatedClock, TimerHandle};

use super::faults::FaultPlan;
use super::host::{HostShared, ReadyActor, TaskControl};
use super::rng::Rng;
use super::strategy::{Candidate, Chooser, Key, Strategy};
use super::trace::{Event, Offset, Recorded, Trace};

/// Messages a turn may take at most in a simulation when its pool allows more (thread-placed
/// actors, whose pools allow 1024): the seed picks a budget up to it.
const MAX_BUDGET: usize = 64;

/// The settings of one run.
#[derive(Clone, Debug)]
pub(super) struct RunConfig {
    pub(super) seed: u64,
    pub(super) strategy: Strategy,
    pub(super) plan: FaultPlan,
    pub(super) max_steps: u64,
    pub(super) max_time: Duration,
    pub(super) record: bool,
    pub(super) expected_steps: u64,
}

/// An actor the run knows of.
struct Known {
    cell: Weak<dyn ErasedCell>,
    type_id: TypeId,
}

/// What the loop keeps between steps; borrowed only between user code.
struct RunState {
    rng: Rng,
    fault_rng: Rng,
    chooser: Chooser,
    step: u64,
    /// Timers taken out of the wheel and not yet fired: the timer, since, number.
    due: Vec<(DueTimer, u64, u64)>,
    timers_fired: u64,
    /// Actors held back by a stall, until the time given.
    stalled: Vec<(ReadyActor, Instant)>,
    known: Vec<Known>,
    numbers: HashMap<ActorId, u32>,
    plan: FaultPlan,
    trace: Trace,
    /// Whether each fault point seen so far is switched on for the run.
    sites: HashMap<&'static str, bool>,
    /// The chance that a turn's budget is one message (else up to the pool's throughput).
    single_message: f64,
    candidates: Vec<Candidate>,
}

/// A step picked, taken out of the ready lists.
enum Picked {
    Nothing,
    /// The step is over already (an actor held back by a stall, a task gone).
    Held(u64),
    Turn {
        step: u64,
        ready: ReadyActor,
        number: u32,
        budget: usize,
    },
    Poll {
        step: u64,
        slot: usize,
        control: Arc<TaskControl>,
        future: Option<IoFuture>,
    },
    Timer {
        step: u64,
        timer: DueTimer,
        number: u64,
    },
}

/// The simulation's driving loop. See the module note.
pub(super) struct Core {
    host: Arc<HostShared>,
    runtime: tokio::runtime::Runtime,
    /// The runtime's clock as the system's timers read it, set whenever it may have moved.
    clock: Arc<SimulatedClock>,
    timers: RefCell<Option<TimerHandle>>,
    run: RefCell<RunState>,
    config: RunConfig,
    start: Instant,
    /// A failure raised inside a turn, raised again by the outermost loop.
    failure: RefCell<Option<String>>,
    /// Loops running on this thread (a nested one runs inside a turn).
    depth: Cell<u32>,
}

impl Core {
    pub(super) fn new(host: Arc<HostShared>, config: RunConfig) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()?;
        let start = clock_of(runtime.handle());
        let mut rng = Rng::new(config.seed);
        let chooser = Chooser::new(config.strategy, &mut rng, config.expected_steps);
        let single_message = [0.25, 0.5, 0.9][rng.below(3) as usize];
        let fault_rng = Rng::new(config.seed.rotate_left(17) ^ 0xFA17);
        Ok(Self {
            host,
            clock: SimulatedClock::new(start),
            runtime,
            timers: RefCell::new(None),
            run: RefCell::new(RunState {
                rng,
                fault_rng,
                chooser,
                step: 0,
                due: Vec::new(),
                timers_fired: 0,
                stalled: Vec::new(),
                known: Vec::new(),
                numbers: HashMap::new(),
                plan: config.plan.clone(),
                trace: Trace::new(config.record),
                sites: HashMap::new(),
                single_message,
                candidates: Vec::new(),
            }),
            config,
            start,
            failure: RefCell::new(None),
            depth: Cell::new(0),
        })
    }

    pub(super) fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    pub(super) fn clock(&self) -> &Arc<SimulatedClock> {
        &self.clock
    }

    /// Reads the runtime's clock into the one the timers read (after anything that may have
    /// moved it: the runtime's own turns, a future's poll).
    fn sync_clock(&self) {
        self.clock.set(clock_of(self.runtime.handle()));
    }

    pub(super) fn set_timers(&self, timers: TimerHandle) {
        *self.timers.borrow_mut() = Some(timers);
    }

    pub(super) fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Simulated time since the run began.
    pub(super) fn elapsed(&self) -> Duration {
        self.now().saturating_duration_since(self.start)
    }

    pub(super) fn trace_hash(&self) -> u64 {
        self.run.borrow().trace.hash()
    }

    pub(super) fn faults_injected(&self) -> u32 {
        self.run.borrow().trace.faults
    }

    pub(super) fn plan(&self) -> FaultPlan {
        self.run.borrow().plan.clone()
    }

    pub(super) fn take_recording(&self) -> Recorded {
        self.run.borrow_mut().trace.take()
    }

    /// Drops what the run still holds (actors held back, timers taken out): the simulation is
    /// over.
    pub(super) fn clear(&self) {
        let (stalled, due) = {
            let mut run = self.run.borrow_mut();
            (
                std::mem::take(&mut run.stalled),
                std::mem::take(&mut run.due),
            )
        };
        drop(stalled);
        drop(due);
        self.timers.borrow_mut().take();
    }

    /// No more faults (the liveness phase).
    pub(super) fn heal(&self) {
        self.run.borrow_mut().plan.active = false;
    }

    /// A random number from the run's generator (for the test's own choices).
    pub(super) fn random(&self) -> u64 {
        self.run.borrow_mut().rng.next_u64()
    }

    /// A fault point: true if it fires now. Each point is switched on or off for the run the
    /// first time it is reached.
    pub(super) fn buggify(&self, site: &'static str) -> bool {
        let mut run = self.run.borrow_mut();
        let run = &mut *run;
        if !run.plan.active || run.plan.buggify == 0.0 || run.trace.faults >= run.plan.limit {
            return false;
        }
        let enabled = *run
            .sites
            .entry(site)
            .or_insert_with(|| run.fault_rng.chance(0.5));
        let fired = enabled && run.fault_rng.chance(run.plan.buggify);
        if enabled {
            let step = run.step;
            run.trace.push(step, Event::Buggify { site, fired });
        }
        fired
    }

    /// Registers the actors spawned since the last step.
    fn register_spawned(&self, run: &mut RunState) {
        let spawned = std::mem::take(&mut self.host.lock().spawned);
        for actor in spawned {
            let number = run.known.len() as u32;
            if let Some(cell) = actor.cell.upgrade() {
                run.numbers.insert(cell.actor_id(), number);
            }
            run.known.push(Known {
                cell: actor.cell,
                type_id: actor.type_id,
            });
            let step = run.step;
            run.trace.push(
                step,
                Event::Spawn {
                    actor: number,
                    type_name: actor.type_name,
                },
            );
        }
    }

    /// Takes the timers due by now out of the wheel; true if there were any.
    fn refresh_due(&self, run: &mut RunState) -> bool {
        let now = self.now();
        // Stalls that are over: their actors are ready again.
        let mut i = 0;
        while i < run.stalled.len() {
            if run.stalled[i].1 <= now {
                let (mut ready, _) = run.stalled.remove(i);
                ready.since = run.step;
                self.host.lock().actors.push(ready);
            } else {
                i += 1;
            }
        }
        let Some(timers) = self.timers.borrow().clone() else {
            return false;
        };
        let due = timers.take_due();
        let any = !due.is_empty();
        for timer in due {
            let number = run.timers_fired;
            run.timers_fired += 1;
            let since = run.step;
            run.due.push((timer, since, number));
        }
        any
    }

    /// One step: picks something ready and runs it. False if nothing was ready.
    fn step(&self) -> bool {
        let picked = self.pick();
        let (step, event) = match picked {
            Picked::Nothing => return false,
            Picked::Held(step) => (step, None),
            Picked::Turn {
                step,
                ready,
                number,
                budget,
            } => {
                // User code from here to the end of the match: no lock, no borrow held.
                let role = ready.role;
                let ended = {
                    let _role = role::enter(role);
                    let _running = role::run_turn_of(ready.runnable.id());
                    ready.runnable.run(budget, None)
                };
                let end = match ended {
                    Ran::Idle => 0,
                    Ran::Yield(again) => {
                        self.host.push_actor(again, role, ready.throughput);
                        1
                    }
                    Ran::Stopped => 2,
                };
                let budget = budget as u32;
                let event = Event::Turn {
                    actor: number,
                    budget,
                    end,
                };
                (step, Some(event))
            }
            Picked::Poll {
                step,
                slot,
                control,
                future,
            } => {
                let number = control.number;
                let done = self.host.poll_task(slot, &control, future);
                // A future may move the runtime's clock (`tokio::time::advance`).
                self.sync_clock();
                (step, Some(Event::Poll { task: number, done }))
            }
            Picked::Timer {
                step,
                timer,
                number,
            } => {
                let timers = self.timers.borrow().clone();
                if let Some(timers) = timers {
                    timer.fire(&timers);
                }
                (step, Some(Event::Timer { timer: number }))
            }
        };
        let mut run = self.run.borrow_mut();
        if let Some(event) = event {
            run.trace.push(step, event);
        }
        run.trace.end_step(step);
        true
    }

    /// Picks the next step and takes it out of the ready lists, with the faults that hit it.
    fn pick(&self) -> Picked {
        let mut run = self.run.borrow_mut();
        self.register_spawned(&mut run);
        let run = &mut *run;
        let mut queue = self.host.lock();
        let (actors, tasks) = (queue.actors.len(), queue.woken.len());
        if actors + tasks + run.due.len() == 0 {
            return Picked::Nothing;
        }
        run.candidates.clear();
        for ready in &queue.actors {
            let key = Key::Actor(Self::number_of_id(&run.numbers, ready.runnable.id()));
            run.candidates.push(Candidate {
                key,
                since: ready.since,
            });
        }
        for &(slot, since) in &queue.woken {
            let number = queue.tasks.get(slot).map_or(u64::MAX, |t| t.control.number);
            run.candidates.push(Candidate {
                key: Key::Task(number),
                since,
            });
        }
        for (_, since, number) in &run.due {
            run.candidates.push(Candidate {
                key: Key::Timer(*number),
                since: *since,
            });
        }
        let chosen = run.chooser.choose(&mut run.rng, run.step, &run.candidates);
        run.step += 1;
        queue.step = run.step;
        let step = run.step;

        if chosen < actors {
            let ready = queue.actors.swap_remove(chosen);
            drop(queue);
            let number = Self::number_of_id(&run.numbers, ready.runnable.id());
            // Faults aimed at the actor about to run.
            let target = run
                .known
                .get(number as usize)
                .filter(|k| run.plan.active && run.plan.aims_at(k.type_id))
                .and_then(|k| k.cell.upgrade());
            let may_fault = target.is_some() && run.trace.faults < run.plan.limit;
            if may_fault && run.fault_rng.chance(run.plan.stall) {
                let nanos = run.fault_rng.log_uniform(100_000, run.plan.max_stall_ns);
                run.trace.push(
                    step,
                    Event::Stall {
                        actor: number,
                        nanos,
                    },
                );
                let until = self.now() + Duration::from_nanos(nanos);
                run.stalled.push((ready, until));
                return Picked::Held(step);
            }
            if may_fault && run.fault_rng.chance(run.plan.crash) {
                run.trace.push(step, Event::Crash { actor: number });
                if let Some(cell) = &target {
                    // Taken by the turn about to run, before its messages.
                    cell.signal(Signal::Crash);
                }
            }
            self.maybe_stop_someone(run, step);
            let budget = self.budget(run, &ready);
            return Picked::Turn {
                step,
                ready,
                number,
                budget,
            };
        }
        if chosen < actors + tasks {
            let (slot, _) = queue.woken.swap_remove(chosen - actors);
            let Some(task) = queue.tasks.get_mut(slot) else {
                return Picked::Held(step);
            };
            let control = task.control.clone();
            let future = task.future.take();
            drop(queue);
            self.maybe_stop_someone(run, step);
            return Picked::Poll {
                step,
                slot,
                control,
                future,
            };
        }
        drop(queue);
        let (timer, _, number) = run.due.swap_remove(chosen - actors - tasks);
        self.maybe_stop_someone(run, step);
        Picked::Timer {
            step,
            timer,
            number,
        }
    }

    fn number_of_id(numbers: &HashMap<ActorId, u32>, id: ActorId) -> u32 {
        numbers.get(&id).copied().unwrap_or(u32::MAX)
    }

    /// Now and then (the plan's stop rate), stops a random target actor.
    fn maybe_stop_someone(&self, run: &mut RunState, step: u64) {
        if !run.plan.active
            || run.plan.stop == 0.0
            || run.trace.faults >= run.plan.limit
            || !run.fault_rng.chance(run.plan.stop)
        {
            return;
        }
        let targets: Vec<usize> = run
            .known
            .iter()
            .enumerate()
            .filter(|(_, k)| run.plan.aims_at(k.type_id) && k.cell.strong_count() > 0)
            .map(|(i, _)| i)
            .collect();
        if targets.is_empty() {
            return;
        }
        let number = targets[run.fault_rng.below(targets.len() as u64) as usize];
        if let Some(cell) = run.known[number].cell.upgrade() {
            run.trace.push(
                step,
                Event::Stop {
                    actor: number as u32,
                },
            );
            // Sent with no borrow of the queue held: a stop may schedule the actor.
            cell.signal(Signal::Stop);
        }
    }

    /// The budget of a turn: one message often, else up to the pool's throughput (FIFO, which
    /// draws nothing: the pool's throughput, as on a worker).
    fn budget(&self, run: &mut RunState, ready: &ReadyActor) -> usize {
        let most = ready.throughput.min(MAX_BUDGET);
        if self.config.strategy == Strategy::Fifo {
            return most;
        }
        if run.rng.chance(run.single_message) {
            1
        } else {
            1 + run.rng.below(most as u64) as usize
        }
    }

    /// Lets the runtime run its own tasks and fire its due timers, without moving the clock.
    fn turn_runtime(&self) {
        self.runtime.block_on(YieldOnce(false));
        self.sync_clock();
    }

    /// Lets the clock run until `target` or until something becomes ready; true if something
    /// did.
    fn idle_until(&self, target: Instant) -> bool {
        let idle = IdleUntil {
            sleep: Box::pin(tokio::time::sleep_until(target.into())),
            host: &self.host,
        };
        let woken = self.runtime.block_on(idle);
        self.sync_clock();
        self.host.lock().idle = None;
        let mut run = self.run.borrow_mut();
        let at = u64::try_from(self.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let step = run.step;
        run.trace.push(step, Event::Clock { at });
        woken
    }

    /// Raises a failure (stuck, past a limit): as a panic, kept so that an outer loop raises
    /// it again if a turn's boundary catches it.
    fn fail(&self, message: String) -> ! {
        let message = format!(
            "{message}\n  (simulation seed {}, strategy {}, step {}, at {} of simulated time)",
            self.config.seed,
            self.config.strategy,
            self.run.borrow().step,
            Offset(u64::try_from(self.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        );
        *self.failure.borrow_mut() = Some(message.clone());
        panic!("{message}");
    }

    fn check_failure(&self) {
        let failure = self.failure.borrow().clone();
        if let Some(message) = failure {
            panic!("{message}");
        }
        let foreign = self.host.lock().foreign.take();
        if let Some(message) = foreign {
            self.fail(message);
        }
    }

    fn limits(&self, what: &dyn Fn() -> String) {
        let steps = self.run.borrow().step;
        if steps >= self.config.max_steps {
            self.fail(format!(
                "the simulation ran {steps} steps (its limit) while waiting for {}: a livelock, or \
                 raise `max_steps`",
                what()
            ));
        }
    }

    fn horizon(&self) -> Instant {
        self.start + self.config.max_time
    }
}

impl Drive for Core {
    fn run_until(
        &self,
        done: &mut dyn FnMut() -> bool,
        deadline: Option<Instant>,
        what: &dyn Fn() -> String,
    ) -> bool {
        let _runtime = self.runtime.enter();
        self.depth.set(self.depth.get() + 1);
        struct Leave<'a>(&'a Cell<u32>);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        let _leave = Leave(&self.depth);
        loop {
            self.check_failure();
            if done() {
                return true;
            }
            self.limits(what);
            if self.step() {
                continue;
            }
            // Nothing ready: the runtime's own work, and what is due now.
            self.turn_runtime();
            let due = self.refresh_due(&mut self.run.borrow_mut());
            if due || self.host.lock().has_ready() {
                continue;
            }
            if done() {
                return true;
            }
            let now = self.now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return false;
            }
            // Idle: let time pass until something can happen.
            let next_timer = self
                .timers
                .borrow()
                .as_ref()
                .and_then(TimerHandle::next_work);
            let stall_end = self
                .run
                .borrow()
                .stalled
                .iter()
                .map(|(_, until)| *until)
                .min();
            let target = [next_timer, stall_end, deadline]
                .into_iter()
                .flatten()
                .min();
            let horizon = self.horizon();
            match target {
                Some(target) if target <= horizon => {
                    self.idle_until(target.max(now));
                }
                _ => {
                    // Nothing of troupe's is pending: only the runtime's own timers could
                    // still make something happen before the limit.
                    let woken = self.idle_until(horizon.max(now));
                    let due = self.refresh_due(&mut self.run.borrow_mut());
                    if !woken && !due && !self.host.lock().has_ready() {
                        if target.is_none() {
                            self.fail(format!(
                                "stuck: nothing can run and no timer is pending, so this never \
                                 happens: {}",
                                what()
                            ));
                        }
                        self.fail(format!(
                            "the simulation reached its time limit ({:?} of simulated time) \
                             while waiting for {}",
                            self.config.max_time,
                            what()
                        ));
                    }
                }
            }
            self.refresh_due(&mut self.run.borrow_mut());
        }
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn steps(&self) -> u64 {
        self.run.borrow().step
    }

    fn stuck(&self, what: &str) -> ! {
        self.fail(format!(
            "stuck: nothing can run any more, so this never happens: {what}"
        ))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The time of the simulation's runtime: its paused clock.
///
/// Only the driving loop reads it, and copies it into the [`SimulatedClock`] the system's
/// timers read: a boxed closure calling tokio from the timer service made the release
/// profile's thin LTO drop tokio's functions while keeping the closure, and test binaries that
/// never simulate failed to link (undefined symbols; seen with rustc 1.95 and tokio 1.54).
fn clock_of(runtime: &tokio::runtime::Handle) -> Instant {
    let _runtime = runtime.enter();
    tokio::time::Instant::now().into_std()
}

/// Completes at its second poll: lets the runtime run what it has once.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Completes when something becomes ready (true), or when the clock reaches the sleep's
/// deadline (false).
struct IdleUntil<'a> {
    sleep: Pin<Box<tokio::time::Sleep>>,
    host: &'a Arc<HostShared>,
}

impl Future for IdleUntil<'_> {
    type Output = bool;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<bool> {
        {
            let mut queue = self.host.lock();
            if queue.has_ready() {
                return Poll::Ready(true);
            }
            queue.idle = Some(cx.waker().clone());
        }
        self.sleep.as_mut().poll(cx).map(|()| false)
    }
}
