//! Parking and waking workers. The protocol and its proof sketch are in `README.md` next to
//! this file; the short of it:
//!
//! - A worker with nothing to do *searches* (steals) for a short, bounded while, then registers
//!   as a *sleeper*, looks once more, and parks.
//! - Whoever makes work visible to other workers (pushes to the injector or to a local queue
//!   while busy) calls [`Idle::notify_one`], which wakes one sleeper unless a worker is already
//!   searching: that searcher will find the work, or look again after registering to sleep.
//! - A woken worker counts as searching; when a searcher finds work and it was the last
//!   searcher, it wakes one more if work remains, so a burst of work fans out across workers.

use std::time::{Duration, Instant};

use crossbeam_utils::sync::{Parker, Unparker};
use crossbeam_utils::CachePadded;

use crate::loom::{AtomicUsize, Mutex, Ordering};

/// The sleepers, most recent last (woken first: its cache is warmest), and the clock of the
/// times when every worker slept (counted on the cold path only: registering and waking).
struct Sleepers {
    list: Vec<usize>,
    /// Since when every worker sleeps, if they do.
    all_since: Option<Instant>,
    /// Time every worker slept, intervals ended so far.
    all_total: Duration,
    /// Woken when a time of every worker asleep ends (the pool's monitor, `narrow.rs`).
    watcher: Option<Unparker>,
}

impl Sleepers {
    /// A sleeper is woken: if every worker slept, that time ends now.
    fn end_all_asleep(&mut self) {
        if let Some(since) = self.all_since.take() {
            self.all_total += since.elapsed();
            if let Some(watcher) = &self.watcher {
                watcher.unpark();
            }
        }
    }
}

/// The heavy side of a lopsided handshake between notifiers and sleepers (the scheme of
/// `membarrier(2)`'s own example): a notifier that finds no sleeper by a plain load after its
/// push, and a sleeper that makes every running thread of the process execute a full memory
/// barrier between registering and its last look. Wherever that barrier lands in a
/// notifier's program, either the notifier's load comes after it, and so after the
/// registration, which it sees; or the notifier's push comes before it, and so before the
/// sleeper's last look, which sees the push. Notifiers push on every message that wakes an
/// idle actor, sleepers register once per park, so the cost moves to the rare side. Where the
/// barrier is not available (not Linux, a kernel without it, a sandbox that refuses it), or
/// `TROUPE_ASYMMETRIC_WAKE=0`, notifiers read with a read-modify-write as before. Loom cannot
/// model a process-wide barrier: under loom the symmetric handshake alone runs (its models
/// are in this file).
#[cfg(all(target_os = "linux", not(troupe_loom)))]
mod heavy {
    use std::sync::OnceLock;

    const QUERY: libc::c_int = 0;
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: `membarrier` takes a command and two integer arguments, touches no memory of
        // the caller's, and returns an error code for a command the kernel does not know.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_uint,
                0 as libc::c_int,
            )
        }
    }

    /// True if this process may use the barrier: registered once, at the first pool.
    pub(super) fn available() -> bool {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        *REGISTERED.get_or_init(|| {
            if std::env::var_os("TROUPE_ASYMMETRIC_WAKE").is_some_and(|v| v == "0") {
                return false;
            }
            let both = PRIVATE_EXPEDITED | REGISTER_PRIVATE_EXPEDITED;
            let supported = membarrier(QUERY);
            supported >= 0
                && supported & both as libc::c_long == both as libc::c_long
                && membarrier(REGISTER_PRIVATE_EXPEDITED) == 0
        })
    }

    /// Makes every running thread of this process execute a full memory barrier. False if the
    /// kernel refused (it does not once the process registered; the caller then must not park
    /// for good).
    pub(super) fn barrier() -> bool {
        membarrier(PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(not(all(target_os = "linux", not(troupe_loom))))]
mod heavy {
    pub(super) fn available() -> bool {
        false
    }

    pub(super) fn barrier() -> bool {
        true
    }
}

/// How a worker that registered to sleep may park.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Park {
    /// Until woken.
    ForGood,
    /// For a moment, then it looks again: the lopsided handshake's barrier was refused, so a
    /// notifier may have missed it.
    Briefly,
}

/// Wakes one parked worker. Boxed so the model checker can put its own threads' wake-ups
/// here; it is only called on the cold path (a sleeper to wake).
type Wake = Box<dyn Fn() + Send + Sync>;

pub(crate) struct Idle {
    /// Workers registered in `sleepers` (parked, or about to park). Every push from outside
    /// a worker reads it with a read-modify-write (`notify_one`), so it has a cache line of
    /// its own: workers change `num_searching` each time they run out of work and find more,
    /// and sharing its line made every such push miss in the cache.
    num_sleeping: CachePadded<AtomicUsize>,
    /// Workers awake and looking for work.
    num_searching: CachePadded<AtomicUsize>,
    /// Workers set aside by the pool's monitor (`narrow.rs`): neither searching nor sleepers,
    /// so no notifier counts on them, but idle.
    set_aside: AtomicUsize,
    /// Indices of sleeping workers, and how long all of them slept.
    sleepers: Mutex<Sleepers>,
    wakes: Box<[Wake]>,
    /// The handshake is lopsided (see `heavy`): notifiers read `num_sleeping` with a plain
    /// load, sleepers pay a process-wide barrier.
    lopsided: bool,
}

impl Idle {
    /// One parker per worker; worker `i` is woken through `parkers[i]`.
    pub(crate) fn new(parkers: &[Parker]) -> Self {
        Self::with_wakes(
            parkers
                .iter()
                .map(|p| {
                    let unparker = p.unparker().clone();
                    Box::new(move || unparker.unpark()) as Wake
                })
                .collect(),
        )
    }

    /// `wakes[i]` wakes worker `i`.
    fn with_wakes(wakes: Vec<Wake>) -> Self {
        Self {
            num_sleeping: CachePadded::new(AtomicUsize::new(0)),
            // Workers start awake and searching.
            num_searching: CachePadded::new(AtomicUsize::new(wakes.len())),
            set_aside: AtomicUsize::new(0),
            sleepers: Mutex::new(Sleepers {
                list: Vec::with_capacity(wakes.len()),
                all_since: None,
                all_total: Duration::ZERO,
                watcher: None,
            }),
            wakes: wakes.into_boxed_slice(),
            lopsided: heavy::available(),
        }
    }

    /// Workers not running a turn now: searching for work, or registered as sleepers.
    /// Approximate: a worker changing between the two may be counted twice, so a reader that
    /// needs "all idle" looks twice.
    pub(crate) fn idle_workers(&self) -> usize {
        self.num_sleeping.load(Ordering::Acquire)
            + self.num_searching.load(Ordering::Acquire)
            + self.set_aside.load(Ordering::Acquire)
    }

    /// Workers set aside now.
    pub(crate) fn set_aside(&self) -> usize {
        self.set_aside.load(Ordering::Acquire)
    }

    /// A worker steps aside (`narrow.rs`). One that was searching no longer counts as such,
    /// so a notifier wakes a sleeper instead of relying on it.
    pub(crate) fn step_aside(&self, was_searching: bool) {
        self.set_aside.fetch_add(1, Ordering::SeqCst);
        if was_searching {
            self.num_searching.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A worker set aside comes back, searching.
    pub(crate) fn step_back(&self) {
        self.num_searching.fetch_add(1, Ordering::SeqCst);
        self.set_aside.fetch_sub(1, Ordering::SeqCst);
    }

    /// Unparks worker `index` (set aside, or parked), whatever it is doing: it looks at the
    /// pool's width and its queues again.
    pub(crate) fn nudge(&self, index: usize) {
        (self.wakes[index])();
    }

    /// Called after work was pushed where other workers see it: wakes a sleeper unless a
    /// searcher will find the work.
    #[inline]
    pub(crate) fn notify_one(&self) {
        if self.lopsided {
            // Only the compiler must keep the push before this load; the sleeper's barrier
            // does the rest (see `heavy`).
            crate::loom::compiler_fence();
            if self.num_sleeping.load(Ordering::Relaxed) == 0 {
                return;
            }
        }
        self.notify_ordered();
    }

    /// As `notify_one`, always through the read-modify-write: for a worker that left the
    /// searchers (a searcher that found work, one stepping aside) and wakes a sleeper for work
    /// a notifier left to it as a searcher. That notifier read `num_searching` after its own
    /// read-modify-write of `num_sleeping`, and the two read-modify-writes are what orders
    /// the one with the other (see `README.md`): the lopsided argument covers pushes only.
    pub(crate) fn notify_ordered(&self) {
        // A read-modify-write (adding nothing) rather than a plain load: it reads the latest
        // `num_sleeping`, and it is ordered with the sleeper's own read-modify-write of the same
        // counter in `register_sleeper`. Either ours comes first, and the sleeper's Acquire
        // synchronises with our Release, so its look at the queues sees the work we pushed; or
        // the sleeper's comes first, and we see it registered. (Cheaper than a SeqCst fence.)
        let sleeping = self.num_sleeping.fetch_add(0, Ordering::AcqRel);
        if sleeping == 0 || self.num_searching.load(Ordering::Acquire) > 0 {
            return;
        }
        self.wake_one();
    }

    #[cold]
    fn wake_one(&self) {
        let mut sleepers = self.lock();
        let Some(index) = sleepers.list.pop() else {
            return;
        };
        sleepers.end_all_asleep();
        // The woken worker counts as searching from now, so other notifiers don't wake more.
        self.num_sleeping.fetch_sub(1, Ordering::SeqCst);
        self.num_searching.fetch_add(1, Ordering::SeqCst);
        drop(sleepers);
        (self.wakes[index])();
    }

    /// A searching worker found work. Returns true if it was the last searcher, in which case
    /// the caller should `notify_one` if it can see more work.
    #[inline]
    pub(crate) fn stop_searching(&self) -> bool {
        self.num_searching.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// A worker that ran out of local work starts searching.
    pub(crate) fn start_searching(&self) {
        self.num_searching.fetch_add(1, Ordering::SeqCst);
    }

    /// A searching worker gives up and will sleep. Follow with `register_sleeper`.
    pub(crate) fn give_up_searching(&self) {
        self.num_searching.fetch_sub(1, Ordering::SeqCst);
    }

    /// Registers worker `index` as sleeping. The caller must then look for work once more
    /// (and call `wake_up` whatever it finds) before parking, as the result says.
    pub(crate) fn register_sleeper(&self, index: usize) -> Park {
        let mut sleepers = self.lock();
        sleepers.list.push(index);
        if sleepers.list.len() + self.set_aside.load(Ordering::SeqCst) >= self.wakes.len() {
            sleepers.all_since = Some(Instant::now());
        }
        // Pairs with the read-modify-write in `notify_one` (see there).
        self.num_sleeping.fetch_add(1, Ordering::AcqRel);
        drop(sleepers);
        // And with a notifier's plain load (see `heavy`).
        if !self.lopsided || heavy::barrier() {
            Park::ForGood
        } else {
            Park::Briefly
        }
    }

    /// Worker `index` is awake again (it found work before parking, or its park returned).
    /// Afterwards it counts as searching, whether a notifier woke it or not.
    pub(crate) fn wake_up(&self, index: usize) {
        let mut sleepers = self.lock();
        if let Some(pos) = sleepers.list.iter().position(|&i| i == index) {
            // Not taken by a notifier: undo our own registration.
            sleepers.list.swap_remove(pos);
            sleepers.end_all_asleep();
            self.num_sleeping.fetch_sub(1, Ordering::SeqCst);
            self.num_searching.fetch_add(1, Ordering::SeqCst);
        }
        // Otherwise a notifier popped us and already counted us as searching.
    }

    /// Wakes every worker (shutdown).
    pub(crate) fn wake_all(&self) {
        let mut sleepers = self.lock();
        sleepers.end_all_asleep();
        for index in sleepers.list.drain(..) {
            self.num_sleeping.fetch_sub(1, Ordering::SeqCst);
            self.num_searching.fetch_add(1, Ordering::SeqCst);
            (self.wakes[index])();
        }
        drop(sleepers);
        for wake in self.wakes.iter() {
            wake();
        }
    }

    /// Time every worker (set aside or registered as a sleeper) has slept so far: the pool
    /// had nothing to do. Read by the monitor (`narrow.rs`), which measures the rate of
    /// messages only while the pool was not all asleep.
    pub(crate) fn all_asleep(&self) -> Duration {
        let sleepers = self.lock();
        sleepers.all_total
            + sleepers
                .all_since
                .map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// True while every worker sleeps.
    pub(crate) fn all_asleep_now(&self) -> bool {
        self.lock().all_since.is_some()
    }

    /// `watcher` is unparked whenever a time of every worker asleep ends.
    pub(crate) fn watch(&self, watcher: Unparker) {
        self.lock().watcher = Some(watcher);
    }

    fn lock(&self) -> crate::loom::MutexGuard<'_, Sleepers> {
        // Every critical section is a push, pop or remove: a poisoned lock is still consistent.
        self.sleepers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Model check of the protocol in `README.md`: a worker that finds nothing goes through
/// give-up, register, last look and park while a producer pushes work and notifies. If a
/// wake-up could be lost, the worker would park for ever and loom reports the deadlock. Run
/// with `RUSTFLAGS="--cfg troupe_loom" cargo test -p troupe --release --lib loom_`.
#[cfg(all(test, troupe_loom))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc};

    /// The work queue, reduced to a count (the injector's `len` plays this part).
    struct Work(AtomicUsize);

    impl Work {
        fn take(&self) -> bool {
            let mut n = self.0.load(Ordering::Acquire);
            while n > 0 {
                match self
                    .0
                    .compare_exchange(n, n - 1, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return true,
                    Err(now) => n = now,
                }
            }
            false
        }
        fn visible(&self) -> bool {
            self.0.load(Ordering::Acquire) > 0
        }
    }

    /// One worker's loop until it has run `jobs` pieces of work, as `worker.rs` does it.
    fn worker(idle: &Idle, work: &Work, jobs: usize) {
        let mut done = 0;
        while done < jobs {
            if work.take() {
                done += 1;
                continue;
            }
            idle.give_up_searching();
            let park = idle.register_sleeper(0);
            assert_eq!(
                park,
                Park::ForGood,
                "loom runs the symmetric handshake alone"
            );
            if !work.visible() {
                thread::park();
            }
            idle.wake_up(0);
        }
    }

    #[test]
    fn loom_parking_loses_no_wake_up() {
        loom::model(|| {
            let work = Arc::new(Work(AtomicUsize::new(0)));
            let handle: Arc<Mutex<Option<thread::Thread>>> = Arc::new(Mutex::new(None));
            let idle = {
                let handle = handle.clone();
                Arc::new(Idle::with_wakes(vec![Box::new(move || {
                    if let Some(worker) = handle.lock().unwrap().as_ref() {
                        worker.unpark();
                    }
                })]))
            };
            let w = {
                let (idle, work) = (idle.clone(), work.clone());
                thread::spawn(move || worker(&idle, &work, 2))
            };
            *handle.lock().unwrap() = Some(w.thread().clone());
            for _ in 0..2 {
                // The producer side of `PoolShared::inject`: push, then notify.
                work.0.fetch_add(1, Ordering::Release);
                idle.notify_one();
            }
            w.join().unwrap();
        });
    }

    /// A searching worker steps aside (`narrow.rs`) just as a producer pushes work and, seeing
    /// a searcher, wakes nobody. The worker that steps aside notifies after its count fell
    /// (`worker.rs`, `step_aside`), so the sleeping worker is woken: if it were not, it would
    /// park for ever and loom reports the deadlock.
    #[test]
    fn loom_stepping_aside_loses_no_wake_up() {
        loom::model(|| {
            let work = Arc::new(Work(AtomicUsize::new(0)));
            let handle: Arc<Mutex<Option<thread::Thread>>> = Arc::new(Mutex::new(None));
            let idle = {
                let handle = handle.clone();
                Arc::new(Idle::with_wakes(vec![
                    Box::new(move || {
                        if let Some(worker) = handle.lock().unwrap().as_ref() {
                            worker.unpark();
                        }
                    }),
                    // The worker that steps aside is never parked in this model.
                    Box::new(|| {}),
                ]))
            };
            // Worker 0 runs out of work and sleeps until it has taken the one job.
            let w = {
                let (idle, work) = (idle.clone(), work.clone());
                thread::spawn(move || worker(&idle, &work, 1))
            };
            *handle.lock().unwrap() = Some(w.thread().clone());
            // Worker 1, searching, steps aside.
            let aside = {
                let idle = idle.clone();
                thread::spawn(move || {
                    idle.step_aside(true);
                    idle.notify_ordered();
                })
            };
            work.0.fetch_add(1, Ordering::Release);
            idle.notify_one();
            aside.join().unwrap();
            w.join().unwrap();
        });
    }
}
