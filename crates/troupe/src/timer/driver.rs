//! The timer service: one thread that sleeps until the next deadline, then runs what is due.
//!
//! # State
//! [`Shared`] holds one mutex over the [`Wheel`] of timers, the tick the driver sleeps until
//! (`sleeping_until`) and the shutdown flag, plus a condvar the driver sleeps on. All the
//! protocol below happens under that mutex, so it needs no atomics and no orderings of its own.
//! Ticks are milliseconds since an [`Instant`] taken at start (the monotonic clock).
//!
//! # Protocol
//! - *Scheduling* inserts the timer under the lock. If the driver sleeps until a later tick
//!   than the new deadline, the scheduler clears `sleeping_until` (so later schedulers don't
//!   wake it again) and notifies the condvar after unlocking. Otherwise the driver sees the timer
//!   when it next reads the wheel: it decides how long to sleep only while holding the lock,
//!   after reading the wheel, and the wait releases the lock atomically, so no wake-up is lost.
//!   An idle service (empty wheel) waits with no timeout and uses no CPU.
//! - *The driver* loops: lock; if shut down, stop; advance the wheel to now, moving the due
//!   actions out into a batch; if the batch is empty, publish the tick of the wheel's next work
//!   and wait until it (or until woken); otherwise unlock, run the batch, lock again and put the
//!   repeating actions back.
//! - *Actions run outside the lock*, one after another on the driver thread, each under
//!   `catch_unwind`: a panicking action is reported by the panic hook and the driver carries on
//!   (a repeating action that panics is stopped). Actions must be short; in troupe they send a
//!   message. An action may schedule and cancel timers itself.
//! - *A repeating timer* keeps one wheel entry, and so one [`TimerId`], for its whole life: when
//!   it comes due the driver re-arms the entry for its next firing and takes the action out to
//!   run it, then puts it back (or removes the entry, if the action returned `false`). Its n-th
//!   firing is due `first + n * every` after it was scheduled, counted from the schedule, not
//!   from when the action ran, so it does not drift; firings already in the past when it is
//!   re-armed (the driver was held up) are skipped, not run in a burst.
//! - *Cancel* removes the entry. It reports `true` when the timer had not fired and now never
//!   will; for a repeating timer, `true` while it had not stopped (a firing already running on
//!   the driver thread finishes, and no other follows).
//! - *Shutdown* sets the flag, wakes the driver and joins it. The driver leaves its loop and
//!   drops the whole wheel: pending actions are dropped, never run. A handle that schedules
//!   after shutdown gets its action dropped at once and an id that cancels nothing.
//!
//! # Invariants
//! - User code (an action, or the drop of one) never runs under the lock: the wheel only ever
//!   drops `Timer` shells whose action was taken out first, and `cancel` drops what it removed
//!   after unlocking. So actions and destructors can call back into the service.
//! - A repeating timer's action is out of its entry only between one `advance` and the next,
//!   on the driver thread, which puts it back before advancing again: the wheel never finds a
//!   due repeating entry without its action.
//! - A timer never fires early: a deadline is rounded up to a whole tick, and the tick counts
//!   whole milliseconds elapsed.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::wheel::{Key, Wheel};

/// The length of a tick.
const TICK: Duration = Duration::from_millis(1);
const TICK_NS: u128 = TICK.as_nanos();

/// Due actions a driver keeps room for between batches; a bigger burst's buffer is released.
const BATCH_RETAINED: usize = 4096;

/// A one-shot action.
pub(crate) type Action = Box<dyn FnOnce() + Send>;
/// A repeating action; it returns `false` to stop.
pub(crate) type RepeatingAction = Box<dyn FnMut() -> bool + Send>;

/// Names a scheduled timer, to cancel it (`Context::cancel_timer`). Only meaningful to the
/// system that issued it.
///
/// ```
/// use std::time::Duration;
/// use troupe::{Actor, Context, Handler, Message, System, TimerId};
/// /// Keeps the id of its timer to cancel it on demand.
/// struct Reminder { timer: Option<TimerId> }
/// impl Actor for Reminder {
///     fn started(&mut self, ctx: &mut Context<Self>) {
///         self.timer = Some(ctx.send_after(Duration::from_secs(3600), Remind));
///     }
/// }
/// #[derive(Message)]
/// struct Remind;
/// impl Handler<Remind> for Reminder {
///     fn handle(&mut self, _: Remind, _: &mut Context<Self>) {}
/// }
/// #[derive(Message)]
/// #[reply(bool)]
/// struct Dismiss;
/// impl Handler<Dismiss> for Reminder {
///     fn handle(&mut self, _: Dismiss, ctx: &mut Context<Self>) -> bool {
///         self.timer.take().is_some_and(|timer| ctx.cancel_timer(timer))
///     }
/// }
/// let system = System::new();
/// let reminder = system.spawn(Reminder { timer: None });
/// assert_eq!(reminder.ask(Dismiss).wait(), Ok(true));
/// system.shutdown();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(Option<Key>);

/// A timer as the wheel holds it.
enum Timer {
    /// `None` once the driver has taken the action out to run it.
    Once(Option<Action>),
    /// Boxed: repeating timers are few, and this keeps every one-shot entry small.
    Every(Box<Repeating>),
}

struct Repeating {
    grid: Grid,
    /// `None` while the action runs on the driver thread.
    action: Option<RepeatingAction>,
}

/// When a repeating timer fires: the n-th time `first + n * period` nanoseconds after the
/// service's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Grid {
    first: u128,
    period: u128,
    /// The firing the timer is armed for.
    count: u128,
}

impl Grid {
    /// A period shorter than a tick is taken as one tick.
    fn new(first: u128, period: Duration) -> Self {
        Self {
            first,
            period: period.as_nanos().max(TICK_NS),
            count: 0,
        }
    }

    fn tick(&self) -> u64 {
        ceil_tick(
            self.first
                .saturating_add(self.count.saturating_mul(self.period)),
        )
    }

    /// Arms the earliest firing after the current one that is due after tick `now`, and returns
    /// its tick. Firings whose time has passed are skipped.
    fn advance_past(&mut self, now: u64) -> u64 {
        // ceil(t / TICK) > now exactly when t > now * TICK.
        let now_ns = u128::from(now) * TICK_NS;
        let first_after_now = match now_ns.checked_sub(self.first) {
            Some(since_first) => since_first / self.period + 1,
            None => 0,
        };
        self.count = (self.count + 1).max(first_after_now);
        self.tick()
    }
}

/// The smallest tick at or after `ns` nanoseconds from the origin.
fn ceil_tick(ns: u128) -> u64 {
    u64::try_from(ns.div_ceil(TICK_NS)).unwrap_or(u64::MAX)
}

/// How long after the origin tick `tick` begins.
fn tick_offset(tick: u64) -> Duration {
    let ns = u128::from(tick) * TICK_NS;
    let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % 1_000_000_000) as u32)
}

/// An action the driver took out of the wheel to run.
enum Due {
    Once(Action),
    Every(Key, RepeatingAction),
}

struct State {
    wheel: Wheel<Timer>,
    /// The tick the driver waits for (`u64::MAX`: no deadline, an empty wheel); `None` while it
    /// is awake or has already been woken.
    sleeping_until: Option<u64>,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    /// The driver waits on this; notified by a scheduler with an earlier deadline, or shutdown.
    wake: Condvar,
    /// Tick 0.
    origin: Instant,
    /// The clock of a simulated system (`sim/`), which fires due timers itself; `None`: the
    /// monotonic clock and a driver thread.
    simulated: Option<Arc<SimulatedClock>>,
}

/// The clock of a simulated system: a time the simulation sets as it moves its clock (it does
/// so between steps, never while timers are read).
pub(crate) struct SimulatedClock {
    now: Mutex<Instant>,
}

impl SimulatedClock {
    pub(crate) fn new(start: Instant) -> Arc<Self> {
        Arc::new(Self {
            now: Mutex::new(start),
        })
    }

    pub(crate) fn set(&self, now: Instant) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = now;
    }

    pub(crate) fn now(&self) -> Instant {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Shared {
    fn new(simulated: Option<Arc<SimulatedClock>>) -> Self {
        Self {
            state: Mutex::new(State {
                wheel: Wheel::new(),
                sleeping_until: None,
                shutdown: false,
            }),
            wake: Condvar::new(),
            origin: simulated
                .as_ref()
                .map_or_else(Instant::now, |clock| clock.now()),
            simulated,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under the lock and the wheel does not panic, so a poisoned lock
        // (a bug elsewhere) still guards a consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Nanoseconds since the origin.
    fn now_ns(&self) -> u128 {
        match &self.simulated {
            None => self.origin.elapsed().as_nanos(),
            Some(clock) => clock
                .now()
                .saturating_duration_since(self.origin)
                .as_nanos(),
        }
    }

    /// Whole ticks since the origin.
    fn now_tick(&self) -> u64 {
        u64::try_from(self.now_ns() / TICK_NS).unwrap_or(u64::MAX)
    }

    fn insert(&self, deadline: u64, timer: Timer) -> TimerId {
        let mut state = self.lock();
        if state.shutdown {
            drop(state);
            drop(timer);
            return TimerId(None);
        }
        let key = state.wheel.insert(deadline, timer);
        let wake = matches!(state.sleeping_until, Some(until) if deadline < until);
        if wake {
            state.sleeping_until = None;
        }
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        TimerId(Some(key))
    }

    /// Waits until the wheel's next work is due, a scheduler wakes the driver, or a spurious
    /// wake-up; the caller looks again either way.
    fn sleep<'a>(&'a self, mut state: MutexGuard<'a, State>, now: u64) -> MutexGuard<'a, State> {
        let next = state.wheel.next_deadline();
        if next.is_some_and(|tick| tick <= now) {
            return state;
        }
        state.sleeping_until = Some(next.unwrap_or(u64::MAX));
        let until = next.and_then(|tick| self.origin.checked_add(tick_offset(tick)));
        let mut state = match until {
            Some(until) => {
                let timeout = until.saturating_duration_since(Instant::now());
                self.wake
                    .wait_timeout(state, timeout)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => self
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
        };
        state.sleeping_until = None;
        state
    }
}

/// The driver thread's loop. See the module note.
fn drive(shared: &Shared) {
    let mut due: Vec<Due> = Vec::new();
    let mut ran: Vec<(Key, RepeatingAction, bool)> = Vec::new();
    let mut retired: Vec<RepeatingAction> = Vec::new();
    let mut state = shared.lock();
    while !state.shutdown {
        let now = shared.now_tick();
        state
            .wheel
            .advance_rearm(now, |key, timer| take_due(key, timer, now, &mut due));
        if due.is_empty() {
            state = shared.sleep(state, now);
            continue;
        }
        drop(state);
        run(&mut due, &mut ran);
        state = shared.lock();
        for (key, action, keep) in ran.drain(..) {
            retired.extend(put_back(&mut state, key, action, keep));
        }
        if !retired.is_empty() {
            drop(state);
            let _ = panic::catch_unwind(AssertUnwindSafe(|| retired.clear()));
            state = shared.lock();
        }
    }
    let pending = std::mem::take(&mut state.wheel);
    drop(state);
    drop(pending);
}

/// Gives a repeating timer's action back to its entry after a firing (`keep`: it asked to go
/// on), or removes the entry; the action comes back when the timer is over (stopped, or
/// cancelled while it ran), to be dropped outside the lock.
fn put_back(
    state: &mut State,
    key: Key,
    action: RepeatingAction,
    keep: bool,
) -> Option<RepeatingAction> {
    let entry = if keep {
        state.wheel.get_mut(key)
    } else {
        // The shell removed here holds no action: dropping it runs no user code.
        state.wheel.remove(key);
        None
    };
    match entry {
        Some(Timer::Every(repeating)) => {
            repeating.action = Some(action);
            None
        }
        _ => Some(action),
    }
}

/// The wheel's verdict on a due timer: takes its action into `due`, and re-arms a repeating
/// one for its next firing after `now`.
fn take_due(key: Key, timer: &mut Timer, now: u64, due: &mut Vec<Due>) -> Option<u64> {
    match timer {
        Timer::Once(action) => {
            due.extend(action.take().map(Due::Once));
            None
        }
        Timer::Every(repeating) => {
            // Always present here: the driver puts it back before it advances again.
            let action = repeating.action.take()?;
            due.push(Due::Every(key, action));
            Some(repeating.grid.advance_past(now))
        }
    }
}

/// Runs a batch of due actions; each repeating one comes back in `ran` with whether to keep it.
fn run(due: &mut Vec<Due>, ran: &mut Vec<(Key, RepeatingAction, bool)>) {
    for job in due.drain(..) {
        match job {
            Due::Once(action) => {
                let _ = panic::catch_unwind(AssertUnwindSafe(action));
            }
            Due::Every(key, mut action) => {
                let keep = panic::catch_unwind(AssertUnwindSafe(&mut action)).unwrap_or(false);
                ran.push((key, action, keep));
            }
        }
    }
    due.shrink_to(BATCH_RETAINED);
}

/// A cloneable handle to a [`TimerService`], for scheduling and cancelling from many threads.
/// It does not keep the driver running: after the service shuts down, scheduling drops the
/// action.
#[derive(Clone)]
pub(crate) struct TimerHandle {
    shared: Arc<Shared>,
}

impl TimerHandle {
    /// Runs `action` once, on the driver thread, `delay` from now (rounded up to a whole tick).
    pub(crate) fn schedule(&self, delay: Duration, action: Action) -> TimerId {
        let deadline = ceil_tick(self.shared.now_ns().saturating_add(delay.as_nanos()));
        self.shared.insert(deadline, Timer::Once(Some(action)))
    }

    /// Runs `action` on the driver thread `first` from now, then every `every` after that
    /// (counted from the schedule, so it does not drift), until it returns `false`, panics or is
    /// cancelled. Firings missed while the driver was held up are skipped. A period below one
    /// tick is taken as one tick.
    pub(crate) fn schedule_repeating(
        &self,
        first: Duration,
        every: Duration,
        action: RepeatingAction,
    ) -> TimerId {
        let grid = Grid::new(self.shared.now_ns().saturating_add(first.as_nanos()), every);
        let repeating = Repeating {
            grid,
            action: Some(action),
        };
        self.shared
            .insert(grid.tick(), Timer::Every(Box::new(repeating)))
    }

    /// Stops timer `id`. Returns `true` if it was still pending and will now not fire (a
    /// repeating timer: will not fire again, though a firing already under way finishes), `false`
    /// if it had already fired, stopped or been cancelled.
    pub(crate) fn cancel(&self, id: TimerId) -> bool {
        let Some(key) = id.0 else {
            return false;
        };
        let removed = self.shared.lock().wheel.remove(key);
        // Dropped here, after the lock: the action's destructor may use the service.
        removed.is_some()
    }

    /// Timers scheduled and neither fired (one-shot), stopped nor cancelled.
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests; the runtime goes through `TimerHandle`
    pub(crate) fn pending(&self) -> usize {
        self.shared.lock().wheel.len()
    }

    /// Entries the wheel holds room for (tests check it stops growing).
    #[cfg(all(test, not(troupe_loom)))]
    fn capacity(&self) -> usize {
        self.shared.lock().wheel.capacity()
    }

    /// The time of the service's clock (the simulated one, for a simulated system).
    pub(crate) fn now(&self) -> Instant {
        match &self.shared.simulated {
            None => Instant::now(),
            Some(clock) => clock.now(),
        }
    }

    /// When the wheel next has work (never later than the earliest deadline; `None`: no timer
    /// pending). For a simulation, which has no driver thread and moves its clock itself.
    pub(crate) fn next_work(&self) -> Option<Instant> {
        let tick = self.shared.lock().wheel.next_deadline()?;
        self.shared.origin.checked_add(tick_offset(tick))
    }

    /// The timers due by the clock's time, taken out of the wheel (a repeating one re-armed for
    /// its next firing), for a simulation to fire one by one with [`DueTimer::fire`].
    pub(crate) fn take_due(&self) -> Vec<DueTimer> {
        let mut due = Vec::new();
        let mut state = self.shared.lock();
        let now = self.shared.now_tick();
        state
            .wheel
            .advance_rearm(now, |key, timer| take_due(key, timer, now, &mut due));
        drop(state);
        due.into_iter().map(DueTimer).collect()
    }
}

/// A timer taken out of the wheel because it is due ([`TimerHandle::take_due`]).
pub(crate) struct DueTimer(Due);

impl DueTimer {
    /// Runs the action (a panic is caught, as on the driver thread; a repeating timer that
    /// panics is stopped); a repeating timer's action goes back to its entry.
    pub(crate) fn fire(self, timers: &TimerHandle) {
        match self.0 {
            Due::Once(action) => {
                let _ = panic::catch_unwind(AssertUnwindSafe(action));
            }
            Due::Every(key, mut action) => {
                let keep = panic::catch_unwind(AssertUnwindSafe(&mut action)).unwrap_or(false);
                let retired = put_back(&mut timers.shared.lock(), key, action, keep);
                let _ = panic::catch_unwind(AssertUnwindSafe(|| drop(retired)));
            }
        }
    }
}

/// Owns the driver thread, named `<name>-timer`. Dropping it shuts the service down like
/// [`TimerService::shutdown`].
pub(crate) struct TimerService {
    handle: TimerHandle,
    driver: Option<JoinHandle<()>>,
}

impl TimerService {
    /// Starts the driver thread.
    pub(crate) fn start(name: &str) -> io::Result<TimerService> {
        let shared = Arc::new(Shared::new(None));
        let for_driver = Arc::clone(&shared);
        let driver = thread::Builder::new()
            .name(format!("{name}-timer"))
            .spawn(move || drive(&for_driver))?;
        Ok(TimerService {
            handle: TimerHandle { shared },
            driver: Some(driver),
        })
    }

    /// A service with no thread, on a simulated clock: the simulation fires what is due
    /// ([`TimerHandle::take_due`]).
    pub(crate) fn simulated(clock: Arc<SimulatedClock>) -> TimerService {
        TimerService {
            handle: TimerHandle {
                shared: Arc::new(Shared::new(Some(clock))),
            },
            driver: None,
        }
    }

    /// A handle for other threads.
    pub(crate) fn handle(&self) -> TimerHandle {
        self.handle.clone()
    }

    /// See [`TimerHandle::schedule`].
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests; the runtime goes through `TimerHandle`
    pub(crate) fn schedule(&self, delay: Duration, action: Action) -> TimerId {
        self.handle.schedule(delay, action)
    }

    /// See [`TimerHandle::schedule_repeating`].
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests; the runtime goes through `TimerHandle`
    pub(crate) fn schedule_repeating(
        &self,
        first: Duration,
        every: Duration,
        action: RepeatingAction,
    ) -> TimerId {
        self.handle.schedule_repeating(first, every, action)
    }

    /// See [`TimerHandle::cancel`].
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests; the runtime goes through `TimerHandle`
    pub(crate) fn cancel(&self, id: TimerId) -> bool {
        self.handle.cancel(id)
    }

    /// See [`TimerHandle::pending`].
    #[cfg_attr(any(not(test), troupe_loom), allow(dead_code))] // used by the tests; the runtime goes through `TimerHandle`
    pub(crate) fn pending(&self) -> usize {
        self.handle.pending()
    }

    /// Stops the driver and waits for it. Pending actions are dropped, not run; a batch already
    /// running finishes first.
    pub(crate) fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(driver) = self.driver.take() else {
            // A simulated service has no thread: its pending timers are dropped here, as the
            // driver would drop them, outside the lock.
            let mut state = self.handle.shared.lock();
            if self.handle.shared.simulated.is_some() && !state.shutdown {
                state.shutdown = true;
                let pending = std::mem::take(&mut state.wheel);
                drop(state);
                drop(pending);
            }
            return;
        };
        self.handle.shared.lock().shutdown = true;
        self.handle.shared.wake.notify_one();
        // An action that owned the service and dropped it would otherwise join itself; the
        // driver leaves its loop when that action returns.
        if driver.thread().id() != thread::current().id() {
            // The driver catches actions' panics; an error here is a bug already reported by
            // the panic hook, and a destructor must not panic again.
            let _ = driver.join();
        }
    }
}

impl Drop for TimerService {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(all(test, not(troupe_loom)))]
#[allow(clippy::disallowed_types)] // the tests count with std atomics, outside any model
mod tests {
    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
    use std::sync::mpsc;

    use super::*;

    /// A generous bound that only guards against hangs; the tests check results, not times.
    const PATIENCE: Duration = Duration::from_secs(30);

    /// Polls `done` until it holds, or gives up after [`PATIENCE`].
    fn eventually(mut done: impl FnMut() -> bool) -> bool {
        let give_up = Instant::now() + PATIENCE;
        while !done() {
            if Instant::now() > give_up {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn grid_keeps_its_phase_and_skips_missed_firings() {
        let mut grid = Grid::new(10_500_000, Duration::from_micros(2_500));
        assert_eq!(grid.tick(), 11);
        assert_eq!(grid.advance_past(11), 13, "13.0 ms");
        assert_eq!(grid.advance_past(13), 16, "15.5 ms rounds up");
        assert_eq!(grid.advance_past(16), 18, "18.0 ms");
        // Held up until 30 ms: 20.5, 23.0, 25.5, 28.0 are skipped; 30.5 rounds up to 31.
        assert_eq!(grid.advance_past(30), 31);
        assert_eq!(grid.count, 8);
        let mut tiny = Grid::new(0, Duration::from_nanos(1));
        assert_eq!(tiny.advance_past(0), 1, "at least a tick apart");
    }

    #[test]
    fn runs_an_action_on_the_named_driver_thread() {
        let service = TimerService::start("smoke").unwrap();
        let (tx, rx) = mpsc::channel();
        service.schedule(
            Duration::from_millis(5),
            Box::new(move || tx.send(thread::current().name().map(String::from)).unwrap()),
        );
        let name = rx.recv_timeout(PATIENCE).unwrap();
        assert_eq!(name.as_deref(), Some("smoke-timer"));
        assert!(eventually(|| service.pending() == 0));
        service.shutdown();
    }

    #[test]
    fn a_million_timers_fire_once_each_and_cancelled_ones_never() {
        const N: usize = 1_000_000;
        struct Counters {
            runs: Vec<AtomicU8>,
            fired: AtomicUsize,
        }
        let counters = Arc::new(Counters {
            runs: (0..N).map(|_| AtomicU8::new(0)).collect(),
            fired: AtomicUsize::new(0),
        });
        let service = TimerService::start("million").unwrap();
        let schedule = |i: usize, spread_us: u64| {
            // A multiplicative hash spreads the delays over 0..spread without a generator.
            let delay = Duration::from_micros((i as u64).wrapping_mul(2_654_435_761) % spread_us);
            let counters = Arc::clone(&counters);
            service.schedule(
                delay,
                Box::new(move || {
                    counters.runs[i].fetch_add(1, Relaxed);
                    counters.fired.fetch_add(1, Relaxed);
                }),
            )
        };
        let ids: Vec<TimerId> = (0..N).map(|i| schedule(i, 2_000_000)).collect();
        // Every other one. A timer due in the first moments may have fired already: then
        // cancel says so, and it must have run exactly once like the others.
        let cancelled: Vec<bool> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| i % 2 == 0 && service.cancel(id))
            .collect();
        let expected = N - cancelled.iter().filter(|&&c| c).count();
        assert!(expected < N, "some cancels came in time");
        assert!(eventually(|| counters.fired.load(Relaxed) >= expected));
        assert!(eventually(|| service.pending() == 0));
        assert!(!service.cancel(ids[1]), "fired timers cannot be cancelled");
        assert!(!service.cancel(ids[0]), "nor cancelled ones twice");

        // A second round fits in the memory the first one grew.
        let capacity = service.handle().capacity();
        assert!(capacity >= N / 4);
        let again: Vec<TimerId> = (0..N / 4).map(|i| schedule(i, 50_000)).collect();
        assert_eq!(service.handle().capacity(), capacity);
        assert!(eventually(|| service.pending() == 0));
        service.shutdown();

        assert_eq!(counters.fired.load(Relaxed), expected + again.len());
        for (i, &was_cancelled) in cancelled.iter().enumerate() {
            let second_round = u8::from(i < again.len());
            let runs = counters.runs[i].load(Relaxed);
            let want = if was_cancelled { 0 } else { 1 } + second_round;
            assert_eq!(runs, want, "timer {i} (cancelled: {was_cancelled})");
        }
    }

    #[test]
    fn repeating_timer_fires_repeatedly_until_cancelled() {
        let service = TimerService::start("repeat").unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&count);
        let id = service.schedule_repeating(
            Duration::from_millis(1),
            Duration::from_millis(2),
            Box::new(move || {
                counter.fetch_add(1, Relaxed);
                true
            }),
        );
        assert!(eventually(|| count.load(Relaxed) >= 5));
        assert_eq!(service.pending(), 1, "one entry for its whole life");
        assert!(service.cancel(id));
        let at_cancel = count.load(Relaxed);
        assert!(!service.cancel(id));
        assert_eq!(service.pending(), 0);
        // The driver runs timers in deadline order: once this marker, due after several
        // periods, has run, the repeating timer has had its chances to fire again.
        let (tx, rx) = mpsc::channel();
        service.schedule(
            Duration::from_millis(20),
            Box::new(move || tx.send(()).unwrap()),
        );
        rx.recv_timeout(PATIENCE).unwrap();
        assert!(
            count.load(Relaxed) <= at_cancel + 1,
            "at most a firing under way when cancelled"
        );
        service.shutdown();
    }

    #[test]
    fn repeating_timer_stops_when_its_action_says_so() {
        let service = TimerService::start("repeat-stop").unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let (counter, guard) = (Arc::clone(&count), Counted(Arc::clone(&dropped)));
        let id = service.schedule_repeating(
            Duration::ZERO,
            Duration::from_millis(1),
            Box::new(move || {
                let _keep = &guard;
                counter.fetch_add(1, Relaxed) + 1 < 3
            }),
        );
        assert!(
            eventually(|| dropped.load(Relaxed) == 1),
            "dropped once stopped"
        );
        assert_eq!(count.load(Relaxed), 3);
        assert_eq!(service.pending(), 0);
        assert!(!service.cancel(id));
        service.shutdown();
    }

    #[test]
    fn shutdown_drops_pending_actions_without_running_them() {
        let service = TimerService::start("shutdown").unwrap();
        let handle = service.handle();
        let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for i in 0..1000u64 {
            let (runs, guard) = (Arc::clone(&runs), Counted(Arc::clone(&drops)));
            service.schedule(
                Duration::from_secs(3600 + i),
                Box::new(move || {
                    let _keep = &guard;
                    runs.fetch_add(1, Relaxed);
                }),
            );
        }
        let guard = Counted(Arc::clone(&drops));
        service.schedule_repeating(
            Duration::from_secs(3600),
            Duration::from_secs(1),
            Box::new(move || {
                let _keep = &guard;
                true
            }),
        );
        assert_eq!(service.pending(), 1001);
        assert_eq!(drops.load(Relaxed), 0);
        service.shutdown();
        assert_eq!(drops.load(Relaxed), 1001, "every pending action dropped");
        assert_eq!(runs.load(Relaxed), 0);

        // A handle outliving the service: its actions are dropped at once.
        let guard = Counted(Arc::clone(&drops));
        let id = handle.schedule(Duration::ZERO, Box::new(move || drop(guard)));
        assert_eq!(drops.load(Relaxed), 1002);
        assert!(!handle.cancel(id));
        assert_eq!(handle.pending(), 0);
    }

    #[test]
    fn dropping_the_service_shuts_it_down() {
        let drops = Arc::new(AtomicUsize::new(0));
        let service = TimerService::start("drop").unwrap();
        let guard = Counted(Arc::clone(&drops));
        service.schedule(Duration::from_secs(3600), Box::new(move || drop(guard)));
        drop(service);
        assert_eq!(drops.load(Relaxed), 1);
    }

    #[test]
    fn cancelled_timer_is_dropped_not_run() {
        let service = TimerService::start("cancel").unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = Counted(Arc::clone(&drops));
        let id = service.schedule(Duration::from_secs(3600), Box::new(move || drop(guard)));
        assert_eq!(service.pending(), 1);
        assert!(service.cancel(id));
        assert_eq!(drops.load(Relaxed), 1);
        assert!(!service.cancel(id));
        assert_eq!(service.pending(), 0);
        service.shutdown();
    }

    #[test]
    fn panicking_action_does_not_stop_later_ones() {
        let service = TimerService::start("panic").unwrap();
        let after = Arc::new(AtomicUsize::new(0));
        service.schedule(
            Duration::from_millis(1),
            Box::new(|| panic!("boom (expected)")),
        );
        service.schedule_repeating(
            Duration::from_millis(1),
            Duration::from_millis(1),
            Box::new(|| panic!("boom again (expected)")),
        );
        let counter = Arc::clone(&after);
        service.schedule(
            Duration::from_millis(5),
            Box::new(move || {
                counter.fetch_add(1, Relaxed);
            }),
        );
        assert!(eventually(|| after.load(Relaxed) == 1));
        assert_eq!(
            service.pending(),
            0,
            "the panicking repeating timer was stopped"
        );
        service.shutdown();
    }

    #[test]
    fn earlier_timer_wakes_a_driver_sleeping_for_a_later_one() {
        let service = TimerService::start("wake").unwrap();
        service.schedule(Duration::from_secs(3600), Box::new(|| {}));
        // Let the driver go to sleep for the hour.
        assert!(eventually(|| service
            .handle
            .shared
            .lock()
            .sleeping_until
            .is_some()));
        let (tx, rx) = mpsc::channel();
        service.schedule(
            Duration::from_millis(2),
            Box::new(move || tx.send(()).unwrap()),
        );
        rx.recv_timeout(PATIENCE).expect("the driver was woken");
        assert_eq!(service.pending(), 1);
        service.shutdown();
    }

    #[test]
    fn actions_may_schedule_and_cancel_timers() {
        let service = TimerService::start("reentrant").unwrap();
        let handle = service.handle();
        let (tx, rx) = mpsc::channel();
        service.schedule(
            Duration::ZERO,
            Box::new(move || {
                let doomed = handle.schedule(Duration::from_secs(3600), Box::new(|| {}));
                assert!(handle.cancel(doomed));
                handle.schedule(
                    Duration::from_millis(1),
                    Box::new(move || tx.send(()).unwrap()),
                );
            }),
        );
        rx.recv_timeout(PATIENCE).unwrap();
        assert!(eventually(|| service.pending() == 0));
        service.shutdown();
    }

    #[test]
    fn many_threads_schedule_through_handles() {
        const THREADS: usize = 4;
        const EACH: usize = 10_000;
        let service = TimerService::start("fan-in").unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (handle, fired) = (service.handle(), Arc::clone(&fired));
                thread::spawn(move || {
                    for i in 0..EACH {
                        let fired = Arc::clone(&fired);
                        let delay = Duration::from_micros(((t * EACH + i) % 20_000) as u64);
                        handle.schedule(
                            delay,
                            Box::new(move || {
                                fired.fetch_add(1, Relaxed);
                            }),
                        );
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert!(eventually(|| fired.load(Relaxed) == THREADS * EACH));
        assert!(eventually(|| service.pending() == 0));
        service.shutdown();
    }

    /// Not a test: a rough cost per operation through the service (lock, box, wheel) for a
    /// million timers. Run with
    /// `cargo test --release -p troupe measure_service -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn measure_service_with_a_million_timers() {
        const N: usize = 1_000_000;
        let service = TimerService::start("measure").unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let ids: Vec<TimerId> = (0..N)
            .map(|i| {
                let fired = Arc::clone(&fired);
                let delay =
                    Duration::from_micros((i as u64).wrapping_mul(2_654_435_761) % 2_000_000);
                service.schedule(
                    delay + Duration::from_millis(500),
                    Box::new(move || {
                        fired.fetch_add(1, Relaxed);
                    }),
                )
            })
            .collect();
        let scheduled = start.elapsed();
        let start = Instant::now();
        let cancelled = ids
            .iter()
            .step_by(2)
            .filter(|&&id| service.cancel(id))
            .count();
        let cancelling = start.elapsed();
        assert!(eventually(|| service.pending() == 0));
        println!(
            "schedule {:.1} ns, cancel {:.1} ns ({cancelled} cancelled), {} fired",
            scheduled.as_nanos() as f64 / N as f64,
            cancelling.as_nanos() as f64 / (N / 2) as f64,
            fired.load(Relaxed),
        );
        service.shutdown();
    }
}
