//! [`ActorId`]: a process-unique name for an actor, for logs, metrics and watch notices.

use std::fmt;

/// A process-unique actor id.
///
/// ```
/// let system = troupe::System::new();
/// # struct Idle;
/// # impl troupe::Actor for Idle {}
/// let a = system.spawn(Idle);
/// let b = system.spawn(Idle);
/// assert_ne!(a.id(), b.id());
/// system.shutdown();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorId(u64);

impl ActorId {
    /// The next id of this process.
    pub(crate) fn next() -> Self {
        // A plain counter read by nobody else: nothing for the model checker to find, and a
        // `static` cannot hold loom's atomic (see `loom.rs`).
        #[allow(clippy::disallowed_types)]
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        ActorId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
