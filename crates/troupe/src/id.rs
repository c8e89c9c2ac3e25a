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

    /// The id as a number: what it displays as, and what [`FromStr`](std::str::FromStr)
    /// reads back (ids order as their numbers do).
    ///
    /// ```
    /// let system = troupe::System::new();
    /// # struct Idle;
    /// # impl troupe::Actor for Idle {}
    /// let id = system.spawn(Idle).id();
    /// assert_eq!(id.as_u64().to_string(), id.to_string());
    /// system.shutdown();
    /// ```
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// Reads an id as it is displayed (a whole number), for a cursor or an id given in a query
/// string. Any number parses: whether an actor has that id is for the reader to look up.
///
/// ```
/// use troupe::ActorId;
/// let system = troupe::System::new();
/// # struct Idle;
/// # impl troupe::Actor for Idle {}
/// let id = system.spawn(Idle).id();
/// assert_eq!(id.to_string().parse::<ActorId>(), Ok(id));
/// assert!("abc".parse::<ActorId>().is_err());
/// assert!("-1".parse::<ActorId>().is_err());
/// system.shutdown();
/// ```
impl std::str::FromStr for ActorId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(ActorId)
    }
}

impl fmt::Display for ActorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
