//! What the calling thread is to the runtime: a plain thread, a worker of a pool, or the
//! thread of one actor. Blocking calls (`Ask::wait`, `System::shutdown`) ask before they block:
//! a worker that blocks may be the very thread its reply needs, and an actor that waits for
//! every actor to stop waits for itself.

use std::cell::Cell;

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
