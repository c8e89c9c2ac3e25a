//! What the calling thread is to the runtime: a plain thread, a worker of a pool, or the
//! thread of one actor. Blocking calls (`Ask::wait`, `System::shutdown`) ask before they block:
//! a worker that blocks may be the very thread its reply needs, and an actor that waits for
//! every actor to stop waits for itself. A thread that drives a simulation ([`Drive`]) runs it
//! where it would block.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use crate::id::ActorId;

/// The calling thread's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Not a thread of any system.
    Plain,
    /// A worker of a pool; `may_block` on pools meant for blocking code (`blocking`).
    Worker { may_block: bool },
    /// The thread of one thread-backed actor.
    Actor(ActorId),
}

thread_local! {
    static ROLE: Cell<Role> = const { Cell::new(Role::Plain) };
    /// The actor whose turn runs on this thread, where a handler may block (a worker of a pool
    /// for blocking code): a wait for its own reply can be refused.
    static RUNNING: Cell<Option<ActorId>> = const { Cell::new(None) };
}

/// The actor whose turn runs on this worker (set only where handlers may block).
pub(crate) fn running() -> Option<ActorId> {
    RUNNING.with(Cell::get)
}

/// Records that `actor`'s turn runs on this thread until the guard is dropped.
pub(crate) fn run_turn_of(actor: ActorId) -> Running {
    let before = RUNNING.with(|r| r.replace(Some(actor)));
    Running { before }
}

/// Restores the thread's previous running actor when dropped.
pub(crate) struct Running {
    before: Option<ActorId>,
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(self.before));
    }
}

/// The calling thread's role.
pub(crate) fn current() -> Role {
    ROLE.with(Cell::get)
}

/// True on a thread that runs actors (a worker, or an actor's own thread).
pub(crate) fn runs_actors() -> bool {
    current() != Role::Plain
}

/// Gives the calling thread `role` until the guard is dropped.
pub(crate) fn enter(role: Role) -> Entered {
    let before = ROLE.with(|r| r.replace(role));
    Entered { before }
}

/// Restores the thread's previous role when dropped.
pub(crate) struct Entered {
    before: Role,
}

impl Drop for Entered {
    fn drop(&mut self) {
        ROLE.with(|r| r.set(self.before));
    }
}

/// A thread that drives a simulated system (`sim/`): where another thread would block (an
/// `Ask::wait`, a shutdown, `System::block_on`), it runs the simulation instead, until what it
/// waits for has happened. Set by the simulation for the length of its run on that thread.
pub(crate) trait Drive {
    /// Runs the simulation until `done` holds (true), or until the simulated clock reaches
    /// `deadline` (false). A simulation that can never make `done` hold without a deadline
    /// (nothing can run, no timer is pending) panics, saying it was waiting for `what`.
    fn run_until(
        &self,
        done: &mut dyn FnMut() -> bool,
        deadline: Option<Instant>,
        what: &dyn Fn() -> String,
    ) -> bool;
    /// The simulated clock.
    fn now(&self) -> Instant;
    /// Steps the simulation has taken so far (turns, polls, timers fired).
    fn steps(&self) -> u64;
    /// Reports that what a thread waits for can never happen, as a panic naming the seed.
    fn stuck(&self, what: &str) -> !;
    /// The simulation itself, for its own module to reach.
    fn as_any(&self) -> &dyn std::any::Any;
}

thread_local! {
    static DRIVER: RefCell<Option<Rc<dyn Drive>>> = const { RefCell::new(None) };
}

/// The simulation the calling thread drives, if any.
pub(crate) fn driver() -> Option<Rc<dyn Drive>> {
    DRIVER.try_with(|d| d.borrow().clone()).ok().flatten()
}

/// True if the calling thread drives a simulation.
pub(crate) fn drives_simulation() -> bool {
    DRIVER.try_with(|d| d.borrow().is_some()).unwrap_or(false)
}

/// Makes the calling thread drive `driver` until the guard is dropped.
pub(crate) fn drive(driver: Rc<dyn Drive>) -> Driving {
    let before = DRIVER.with(|d| d.borrow_mut().replace(driver));
    Driving { before }
}

/// Restores the thread's previous driver (usually none) when dropped.
pub(crate) struct Driving {
    before: Option<Rc<dyn Drive>>,
}

impl Drop for Driving {
    fn drop(&mut self) {
        let before = self.before.take();
        let _ = DRIVER.try_with(|d| *d.borrow_mut() = before);
    }
}

/// How a plain thread that waits for a reply from `target` can do the work itself: run the
/// target's turn if it scheduled it and no worker has taken it yet (`scheduler/external.rs`),
/// and what that turn wakes, until `done` holds. True if `done` held. Installed by the
/// scheduler on a thread's first schedule onto a pool; the layers below the scheduler reach it
/// only here.
pub(crate) type Help = fn(target: ActorId, done: &dyn Fn() -> bool, by: Waiter) -> bool;

/// Who waits for a reply, which decides whether the system lets it help
/// (`SystemBuilder::waiters_help`, `SystemBuilder::tasks_help`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A thread that does nothing else until the reply comes: `Ask::wait`, or an ask awaited
    /// in `System::block_on`.
    Thread,
    /// A task of an executor whose thread has other tasks to run.
    Task,
}

thread_local! {
    static HELP: Cell<Option<Help>> = const { Cell::new(None) };
}

/// Lets the calling thread help with `help` when it waits (see [`Help`]).
pub(crate) fn install_help(help: Help) {
    let _ = HELP.try_with(|h| h.set(Some(help)));
}

thread_local! {
    /// Set while the thread blocks in `System::block_on` (see [`blocks_on`]).
    static BLOCKING_ON: Cell<bool> = const { Cell::new(false) };
}

/// The calling thread blocks in `System::block_on` until this is dropped.
pub(crate) struct BlockingOn(bool);

impl Drop for BlockingOn {
    fn drop(&mut self) {
        let _ = BLOCKING_ON.try_with(|b| b.set(self.0));
    }
}

/// Marks the calling thread as blocked in `System::block_on` (nested calls restore the outer
/// mark as they end).
pub(crate) fn enter_blocking_on() -> BlockingOn {
    BlockingOn(BLOCKING_ON.try_with(|b| b.replace(true)).unwrap_or(false))
}

/// True while the calling thread blocks in `System::block_on`: a future polled there is
/// waited for by a thread that does nothing else, so an `Ask` it awaits may help as a
/// blocking wait does. Any other poll is a task of some executor whose thread has other tasks
/// to run: it runs a turn only where the system allows tasks to (`SystemBuilder::tasks_help`;
/// a handler that sleeps or hangs would hold them all).
pub(crate) fn blocks_on() -> bool {
    BLOCKING_ON.try_with(Cell::get).unwrap_or(false)
}

/// A plain thread about to wait for `target` runs its turn, if it scheduled it itself and no
/// worker has taken it, and what that turn wakes, until `done` holds (see [`Help`]); true if
/// `done` held. Nothing on a thread that runs actors or drives
/// a simulation, or that never scheduled onto a pool.
pub(crate) fn help_until(target: ActorId, done: &dyn Fn() -> bool, by: Waiter) -> bool {
    if runs_actors() || drives_simulation() {
        return false;
    }
    match HELP.try_with(Cell::get) {
        Ok(Some(help)) => help(target, done, by),
        _ => false,
    }
}
