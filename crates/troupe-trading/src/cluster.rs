//! The seam between the distributed mode's node logic (`dist.rs`: engine, receiver, lease
//! keeper, client) and the world it runs in: NATS in production (`nats_cluster.rs`), or a
//! simulated cluster inside a `troupe::sim` simulation (`sim_cluster.rs`). The node logic is
//! generic over these traits (no `cfg`, no dynamic dispatch): the production build runs the
//! same code as before, through calls that inline to troupe-remote and async-nats.
//!
//! What a node needs, and what each implementation must promise (NATS's semantics, which the
//! simulation reproduces and the node logic may rely on, and nothing more):
//!
//! - [`Network`]: actors exported under names, and typed asks to them.
//!   - An ask goes to every actor exported under the name (a plain NATS subscription fans
//!     out), or to one member of a queue group ([`Export::in_group`]); the first reply wins.
//!   - Asks from one node to one name arrive in the order they were made; asks of different
//!     nodes, or to different names, may overtake each other.
//!   - Any ask may be lost, on the way there or back: the asker then sees
//!     [`RemoteError::TimedOut`] (or `Unreachable` if nothing exports the name) after its
//!     timeout, and cannot tell whether the far actor handled it. Core NATS never delivers a
//!     message twice; the simulation may (a resending proxy would), and the node logic must
//!     not care.
//!   - A process that ends takes its exports with it at once (its connection closes); a
//!     process that is frozen keeps them, and what is sent to it waits.
//! - [`KeyValue`]: a NATS key-value bucket (a JetStream stream with one message per key).
//!   - `create` succeeds only if the key holds nothing (never written, or expired); `update`
//!     only if the key's last revision is the one given (compare-and-set). Both return the new
//!     revision. Revisions are the bucket's stream sequence: they only grow, over all keys,
//!     and are never reused, even after an entry expired.
//!   - A bucket made with a maximum age (the lease bucket) forgets an entry that long after
//!     its last write, as seen by the server; never earlier, possibly a little later.
//!   - A request may fail without the caller knowing whether it was applied (the answer was
//!     lost): a failed `create` or `update` may have succeeded.
//! - [`Cluster`]: a node's whole world: the network, the two buckets, its clock, its process
//!   (ending it), and a hook that tells an observer what the node decided (a no-op in
//!   production; the simulation checks invariants on it).
//!
//! Time: [`Network::now`] is the clock the node's decisions read (a lease's validity); in
//! production the monotonic clock, in a simulation the simulated one. Futures the node runs
//! ([`Network::spawn`]) sleep with `tokio::time`, which a simulation also simulates.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use troupe::kind::Kind;
use troupe::{Accepts, Actor};
use troupe_remote::{RemoteError, RemoteMessage};

use crate::order::Order;

/// A message that crosses nodes: a [`RemoteMessage`] that can be copied (a simulated network
/// may deliver it twice), with a reply that can be copied too.
pub trait Wire: RemoteMessage<Reply: Clone> + Clone {}
impl<M: RemoteMessage<Reply: Clone> + Clone> Wire for M {}

/// Messaging between nodes: exports and typed asks. See the module note for the guarantees.
pub trait Network: Clone + Send + Sync + 'static {
    /// A typed address of an exported actor.
    type Peer<M: Wire>: Peer<M>;
    /// An export being built.
    type Export<A: Actor>: Export<A>;

    /// The actor(s) exported under `name`, wherever they run. Nothing is checked until an
    /// ask goes.
    fn recipient<M: Wire>(&self, name: &str) -> Result<Self::Peer<M>, RemoteError>;

    /// Starts exporting `addr` under `name` (then [`Export::accept`] each message type, and
    /// [`Export::start`]).
    fn export<A: Actor>(&self, name: &str, addr: troupe::Addr<A>) -> Self::Export<A>;

    /// Runs a future for this node (ended with the node's process).
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static);

    /// The node's clock.
    fn now(&self) -> Instant;
}

/// A typed address of a remote actor.
pub trait Peer<M: Wire>: Clone + Send + Sync + 'static {
    /// Sends `msg` and waits at most `timeout` for the reply.
    fn ask(
        &self,
        msg: M,
        timeout: Duration,
    ) -> impl Future<Output = Result<M::Reply, RemoteError>> + Send + 'static;
}

/// An export under construction: the message types it takes from the wire.
pub trait Export<A: Actor>: Sized {
    /// Accepts `M` from the wire, asked of the actor as in-process (`accept::<M, _>()`: the
    /// `_` is how the actor handles `M`, inferred).
    fn accept<M: Wire, K: Kind>(self) -> Self
    where
        A: Accepts<M, K>;

    /// Joins a queue group: each message goes to one member.
    fn in_group(self, group: &str) -> Self;

    /// Starts receiving (blocks for a round trip to the server in production).
    fn start(self) -> Result<(), RemoteError>;
}

/// One entry of a key-value bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvEntry {
    /// The value.
    pub value: Bytes,
    /// Its revision (the bucket's sequence number of the write).
    pub revision: u64,
}

/// Why a key-value request failed (it may still have been applied; see the module note).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key-value: {0}")]
pub struct KvError(pub String);

/// A key-value bucket: create-if-absent and compare-and-set on revisions. See the module
/// note.
pub trait KeyValue: Clone + Send + Sync + 'static {
    /// The key's entry, `None` if it holds nothing.
    fn entry(&self, key: &str) -> impl Future<Output = Result<Option<KvEntry>, KvError>> + Send;

    /// Writes `value` if the key holds nothing; the new revision.
    fn create(&self, key: &str, value: Bytes) -> impl Future<Output = Result<u64, KvError>> + Send;

    /// Writes `value` if the key's revision is `revision`; the new revision.
    fn update(
        &self,
        key: &str,
        value: Bytes,
        revision: u64,
    ) -> impl Future<Output = Result<u64, KvError>> + Send;
}

/// What a node decided, for an observer (the simulation's invariant checks). Borrowed, so
/// that making one costs nothing where nobody observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEvent<'a> {
    /// The node became primary of its pair (or took its lease again) at `epoch`, holding
    /// `applied` orders.
    Primary {
        /// The node.
        node: &'a str,
        /// Its epoch.
        epoch: u64,
        /// Orders it held then.
        applied: u64,
    },
    /// The primary acknowledged an order (the answer leaves the node now).
    Acked {
        /// The node.
        node: &'a str,
        /// Its epoch.
        epoch: u64,
        /// The order's sequence number.
        seq: u64,
        /// The order's key (client, client order id).
        key: (u32, u64),
    },
    /// A standby is about to cut its history and log back to their first `keep` orders,
    /// dropping `cut` orders that are not its primary's.
    CutBack {
        /// The node.
        node: &'a str,
        /// Orders kept.
        keep: u64,
        /// Orders cut.
        cut: u64,
    },
}

/// A node's world: the network, the lease and sync buckets, its process. See the module
/// note.
pub trait Cluster: Network {
    /// The buckets' type.
    type Bucket: KeyValue;

    /// The lease bucket (entries expire `lease` after their last write).
    fn leases(&self) -> &Self::Bucket;

    /// The sync bucket (no expiry).
    fn syncs(&self) -> &Self::Bucket;

    /// Ends the node's process with `code` after saying `why` on stderr. In production it
    /// does not return; in a simulation it returns, the node having ended (its actors stopped,
    /// its futures dropped): the caller returns at once.
    fn exit(&self, code: i32, why: &str);

    /// Tells an observer what the node decided (nothing in production).
    fn observe(&self, _event: NodeEvent<'_>) {}
}

/// Where a node's applied orders go: its log (the only thing that survives the node's
/// process). Written once per order, after the order is applied, before it is answered.
pub trait OrderLog: Send + 'static {
    /// Appends `order` and makes it as durable as the log promises.
    fn append(&mut self, order: &Order) -> Result<(), String>;

    /// Cuts the log back to its first `keep` orders, durably: the orders after them were an
    /// earlier primary's and never acknowledged at those places (see `dist.rs`, "One history").
    fn cut_back(&mut self, keep: u64) -> Result<(), String>;
}
