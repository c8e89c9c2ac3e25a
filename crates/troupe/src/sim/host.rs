//! What a simulated system reaches instead of threads ([`crate::runtime::Host`]): executors
//! that put a runnable actor among the simulation's ready steps, the simulation's own tasks for
//! the futures of `pipe`, `await_then` and `attach_stream`, and the list of spawned actors that
//! faults are aimed at.
//!
//! This is the part of the simulation any thread could reach (an executor is `Send + Sync`,
//! a waker may be cloned anywhere), so it sits behind one mutex; the driving loop
//! (`core.rs`) takes what is ready from here, one step at a time, and never holds the lock
//! while user code runs. A simulation runs on one thread: an actor scheduled from another
//! thread (a `std::thread` the test started, tokio's blocking pool) could not be replayed, so
//! the run fails at its next step with a message that says so.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::ThreadId;

use crate::erased::ErasedCell;
use crate::id::ActorId;
use crate::raw::{Executor, Runnable, Schedule};
use crate::role::Role;
use crate::runtime::{Host, HostedTask, IoFuture, IoTask};
use crate::scheduler::PoolConfig;

use super::rng::Rng;

/// An actor ready to run, with the role its thread would have.
pub(super) struct ReadyActor {
    pub(super) runnable: Runnable,
    pub(super) role: Role,
    /// Messages a turn may take on its executor.
    pub(super) throughput: usize,
    /// The step at which it became ready.
    pub(super) since: u64,
}

/// A spawned actor the simulation has not registered yet.
pub(super) struct Spawned {
    pub(super) cell: Weak<dyn ErasedCell>,
    pub(super) type_id: TypeId,
    pub(super) type_name: &'static str,
}

/// A future among the simulation's tasks.
pub(super) struct Task {
    /// `None` while it is being polled (it is taken out, so a poll may spawn or wake others).
    pub(super) future: Option<IoFuture>,
    pub(super) control: Arc<TaskControl>,
}

/// What a task's handle and its wakers share with the simulation.
pub(super) struct TaskControl {
    /// The task's number in the run (its slot may be reused; the number is not).
    pub(super) number: u64,
    pub(super) slot: usize,
    state: Mutex<TaskState>,
    host: Weak<HostShared>,
}

#[derive(Default)]
struct TaskState {
    /// On the ready list now.
    queued: bool,
    aborted: bool,
    finished: bool,
}

/// The simulation's state that executors, wakers and task handles reach.
pub(super) struct HostShared {
    owner: ThreadId,
    queue: Mutex<Queue>,
}

/// What is ready, and what was made since the driving loop last looked.
pub(super) struct Queue {
    pub(super) actors: Vec<ReadyActor>,
    /// Tasks to poll: slot and since (the step at which they were woken).
    pub(super) woken: Vec<(usize, u64)>,
    pub(super) tasks: slab::Slab<Task>,
    pub(super) spawned: Vec<Spawned>,
    pub(super) next_task: u64,
    /// The current step, for `since` (and the watchdog's look at progress).
    pub(super) step: u64,
    /// The driving loop's wait for anything to become ready (set while it lets time pass).
    pub(super) idle: Option<Waker>,
    /// What another thread did to the simulation, if anything (the run then fails).
    pub(super) foreign: Option<String>,
    /// Set once the system has released its threads: scheduled actors are stranded, as on
    /// joined pools.
    shut_down: bool,
    /// Actors scheduled after the shutdown: kept (never run), as a joined pool's queue keeps
    /// them.
    stranded: Vec<Runnable>,
    /// Decides whether a new future is polled at once, inside the turn that started it (as
    /// when a tokio thread finishes it before that turn is over); its own stream of the seed.
    eager: Rng,
    /// The chance of that, picked by the seed.
    eager_chance: f64,
}

impl Queue {
    /// True if a step is ready.
    pub(super) fn has_ready(&self) -> bool {
        !self.actors.is_empty() || !self.woken.is_empty()
    }

    fn wake_idle(&mut self) {
        if let Some(idle) = self.idle.take() {
            idle.wake();
        }
    }
}

impl HostShared {
    /// `eager_seed`, `eager_chance`: how often a new future is polled inside the turn that
    /// started it.
    pub(super) fn new(eager_seed: u64, eager_chance: f64) -> Arc<Self> {
        Arc::new(Self {
            owner: std::thread::current().id(),
            queue: Mutex::new(Queue {
                actors: Vec::new(),
                woken: Vec::new(),
                tasks: slab::Slab::new(),
                spawned: Vec::new(),
                next_task: 0,
                step: 0,
                idle: None,
                foreign: None,
                shut_down: false,
                stranded: Vec::new(),
                eager: Rng::new(eager_seed),
                eager_chance,
            }),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        // Every critical section is a push, a pop or a take: a poisoned lock is consistent.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes what a thread other than the simulation's does to it: the run can no longer be
    /// replayed, so the driving loop fails it at its next step (the work itself is kept, so
    /// that no actor is stranded meanwhile).
    fn check_thread(&self, queue: &mut Queue, what: &str) {
        let here = std::thread::current();
        if here.id() != self.owner && queue.foreign.is_none() {
            queue.foreign = Some(format!(
                "{what} from thread `{}`, outside the simulation's thread: a simulated system runs \
                 every actor, timer and future on the one thread that drives it, and work from \
                 another thread cannot be replayed from the seed (a `std::thread` or \
                 `tokio::task::spawn_blocking` escapes the simulation)",
                here.name().unwrap_or("unnamed")
            ));
        }
    }

    pub(super) fn push_actor(&self, runnable: Runnable, role: Role, throughput: usize) {
        let mut queue = self.lock();
        self.check_thread(&mut queue, "an actor was scheduled");
        if queue.shut_down {
            queue.stranded.push(runnable);
            return;
        }
        let since = queue.step;
        queue.actors.push(ReadyActor {
            runnable,
            role,
            throughput,
            since,
        });
        queue.wake_idle();
    }

    /// Takes every task out (to drop them when the simulation ends, breaking the cycles of
    /// futures that hold addresses of actors whose system holds the host).
    pub(super) fn take_tasks(&self) -> Vec<IoFuture> {
        let mut queue = self.lock();
        queue.woken.clear();
        let tasks = std::mem::take(&mut queue.tasks);
        drop(queue);
        tasks
            .into_iter()
            .filter_map(|(_, task)| task.future)
            .collect()
    }

    /// Takes every ready actor out (the simulation is ending).
    pub(super) fn take_actors(&self) -> Vec<ReadyActor> {
        let mut queue = self.lock();
        drop(std::mem::take(&mut queue.stranded));
        std::mem::take(&mut queue.actors)
    }

    /// Polls a task once (or drops it, aborted); true if it is over.
    pub(super) fn poll_task(
        &self,
        slot: usize,
        control: &Arc<TaskControl>,
        future: Option<IoFuture>,
    ) -> bool {
        let number = control.number;
        let aborted = control.dequeued();
        let done = match future {
            // Being polled further up this thread's stack (a nested loop): left to that poll.
            None => return false,
            Some(future) if aborted => {
                drop(future);
                true
            }
            Some(mut future) => {
                let waker = control.waker();
                let mut cx = TaskContext::from_waker(&waker);
                // A panic in a future ends it, as tokio ends a task that panics.
                let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    future.as_mut().poll(&mut cx)
                }));
                match polled {
                    Ok(Poll::Pending) => {
                        let mut queue = self.lock();
                        match queue.tasks.get_mut(slot) {
                            Some(task) if task.control.number == number => {
                                task.future = Some(future);
                                false
                            }
                            // The simulation ended meanwhile.
                            _ => {
                                drop(queue);
                                drop(future);
                                true
                            }
                        }
                    }
                    Ok(Poll::Ready(())) | Err(_) => true,
                }
            }
        };
        if done {
            control.finish();
            let mut queue = self.lock();
            if queue
                .tasks
                .get(slot)
                .is_some_and(|t| t.control.number == number)
            {
                let task = queue.tasks.remove(slot);
                drop(queue);
                drop(task);
            }
        }
        done
    }
}

impl TaskControl {
    fn state(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts the task on the ready list, unless it is on it already or over.
    fn wake_task(&self) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        {
            let mut state = self.state();
            if state.queued || state.finished {
                return;
            }
            state.queued = true;
        }
        let mut queue = host.lock();
        host.check_thread(&mut queue, "a simulated task was woken");
        let since = queue.step;
        queue.woken.push((self.slot, since));
        queue.wake_idle();
    }

    /// The task was taken off the ready list to be polled; true if it was aborted meanwhile.
    pub(super) fn dequeued(&self) -> bool {
        let mut state = self.state();
        state.queued = false;
        state.aborted
    }

    pub(super) fn finish(&self) {
        self.state().finished = true;
    }

    pub(super) fn waker(self: &Arc<Self>) -> Waker {
        Waker::from(Arc::new(TaskWaker(self.clone())))
    }
}

/// Wakes one simulated task.
struct TaskWaker(Arc<TaskControl>);

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.0.wake_task();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_task();
    }
}

/// A task's handle (a `StreamHandle`'s).
struct Handle(Arc<TaskControl>);

impl HostedTask for Handle {
    fn abort(&self) {
        let mut state = self.0.state();
        if state.finished || state.aborted {
            return;
        }
        state.aborted = true;
        drop(state);
        // Dropped at its next turn among the ready steps.
        self.0.wake_task();
    }

    fn is_finished(&self) -> bool {
        self.0.state().finished
    }
}

/// The host a simulated system is built on.
pub(super) struct SimHost {
    pub(super) shared: Arc<HostShared>,
}

impl Host for SimHost {
    fn pool(&self, config: &PoolConfig) -> Arc<Executor> {
        Executor::new(Arc::new(SimExecutor {
            shared: self.shared.clone(),
            role: Role::Worker {
                may_block: config.may_block,
            },
            throughput: config.throughput,
        }))
    }

    fn thread(&self, id: ActorId) -> Arc<Executor> {
        Executor::new(Arc::new(SimExecutor {
            shared: self.shared.clone(),
            role: Role::Actor(id),
            // As an actor's own thread: a turn's bound only sets how often it reads signals.
            throughput: 1024,
        }))
    }

    fn spawned(&self, cell: Weak<dyn ErasedCell>, type_id: TypeId, type_name: &'static str) {
        let mut queue = self.shared.lock();
        self.shared.check_thread(&mut queue, "an actor was spawned");
        queue.spawned.push(Spawned {
            cell,
            type_id,
            type_name,
        });
    }

    fn spawn(&self, future: IoFuture) -> IoTask {
        let mut queue = self.shared.lock();
        self.shared.check_thread(&mut queue, "a future was started");
        if queue.shut_down {
            // As by a runtime that has shut down: dropped, never polled.
            drop(queue);
            drop(future);
            return IoTask::Hosted(Arc::new(Finished));
        }
        let number = queue.next_task;
        queue.next_task += 1;
        let entry = queue.tasks.vacant_entry();
        let slot = entry.key();
        let control = Arc::new(TaskControl {
            number,
            slot,
            // Queued at once: its first poll is its first step.
            state: Mutex::new(TaskState {
                queued: true,
                ..TaskState::default()
            }),
            host: Arc::downgrade(&self.shared),
        });
        entry.insert(Task {
            future: Some(future),
            control: control.clone(),
        });
        let chance = queue.eager_chance;
        let eager = queue.eager.chance(chance);
        if eager {
            // Polled now, inside the turn that started it: as if it finished on another
            // thread before this turn went on.
            let future = queue.tasks[slot].future.take();
            drop(queue);
            // Not finished: it waits for its waker, like any other.
            self.shared.poll_task(slot, &control, future);
            return IoTask::Hosted(Arc::new(Handle(control)));
        }
        let since = queue.step;
        queue.woken.push((slot, since));
        queue.wake_idle();
        IoTask::Hosted(Arc::new(Handle(control)))
    }

    fn shut_down(&self) {
        self.shared.lock().shut_down = true;
    }
}

/// The handle of a future dropped at once (the system had shut down).
struct Finished;

impl HostedTask for Finished {
    fn abort(&self) {}

    fn is_finished(&self) -> bool {
        true
    }
}

/// A pool of a simulated system, or a thread-placed actor's "thread": scheduling puts the
/// actor among the ready steps, with the role a thread of that executor has.
struct SimExecutor {
    shared: Arc<HostShared>,
    role: Role,
    throughput: usize,
}

impl Schedule for SimExecutor {
    fn schedule(&self, runnable: Runnable) {
        self.shared.push_actor(runnable, self.role, self.throughput);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn is_pool(&self) -> bool {
        matches!(self.role, Role::Worker { .. })
    }
}
