//! Routers: one handle for a group of like actors (its routees), and the ways to pick one:
//! round robin, the smallest mailbox, a consistent hash of a key, or all of them (broadcast).
//! Akka's routers and kameo's actor pool.
//!
//! A router is not an actor: picking a routee is a read of the handle (an atomic counter for
//! round robin, the routees' mailbox lengths for the least busy), and the message goes straight
//! to the routee, so a router adds no hop and no mailbox of its own. Its routees are supervised
//! (by the system, or by the actor that spawned them) and restarted in place, so their
//! addresses, and the router's picks, stay good across failures. Clones share the routees and
//! the round-robin position.

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::Arc;

use crate::actor::kind::Kind;
use crate::actor::{Accepts, Actor, Context, Message};
use crate::addr::Addr;
use crate::error::SendError;
use crate::loom::{AtomicUsize, Ordering};
use crate::reply::Ask;
use crate::spawn::SpawnOptions;
use crate::system::System;

/// A group of like actors behind one handle. See the module note (`router.rs`).
///
/// ```
/// use std::num::NonZeroUsize;
/// use troupe::{Actor, Context, Handler, Message, Router, SpawnOptions, System};
/// struct Resizer;
/// impl Actor for Resizer {}
/// #[derive(Message)]
/// #[reply(u32)]
/// struct Resize(u32);
/// impl Handler<Resize> for Resizer {
///     fn handle(&mut self, msg: Resize, _: &mut Context<Self>) -> u32 { msg.0 / 2 }
/// }
/// let system = System::new();
/// let size = NonZeroUsize::new(4).unwrap();
/// let resizers = Router::spawn(&system, size, || Resizer, SpawnOptions::new());
/// assert_eq!(resizers.ask(Resize(640)).wait(), Ok(320)); // round robin
/// assert_eq!(resizers.least_busy().ask(Resize(10)).wait(), Ok(5));
/// assert_eq!(resizers.by_key("user-7").ask(Resize(8)).wait(), Ok(4)); // always the same routee
/// system.shutdown();
/// ```
pub struct Router<A: Actor> {
    routees: Arc<[Addr<A>]>,
    next: Arc<AtomicUsize>,
}

impl<A: Actor> Clone for Router<A> {
    fn clone(&self) -> Self {
        Router {
            routees: self.routees.clone(),
            next: self.next.clone(),
        }
    }
}

impl<A: Actor> std::fmt::Debug for Router<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Router<{}>({} routees)",
            std::any::type_name::<A>(),
            self.routees.len()
        )
    }
}

/// A router needs at least one routee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a router needs at least one routee")]
pub struct NoRoutees;

impl<A: Actor> Router<A> {
    /// A router over actors spawned elsewhere. Routees that stop are not replaced: spawn them
    /// supervised (restarted in place) to keep the router whole, as [`spawn`](Router::spawn)
    /// does.
    ///
    /// ```
    /// use troupe::{Actor, Router, System};
    /// struct Shard;
    /// impl Actor for Shard {}
    /// let system = System::new();
    /// let shards = Router::new((0..3).map(|_| system.spawn(Shard)).collect()).unwrap();
    /// assert_eq!(shards.len(), 3);
    /// assert!(Router::<Shard>::new(Vec::new()).is_err());
    /// system.shutdown();
    /// ```
    pub fn new(routees: Vec<Addr<A>>) -> Result<Self, NoRoutees> {
        if routees.is_empty() {
            return Err(NoRoutees);
        }
        Ok(Router {
            routees: routees.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Spawns `size` top-level routees built by `factory`, each supervised by the system:
    /// restarted in place when it fails, within the supervision of `options` (a service's
    /// workers may want [`SupervisorStrategy::without_limit`](crate::SupervisorStrategy::without_limit)
    /// with a back-off, so a poison message never takes a routee away for good).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::time::Duration;
    /// use troupe::{Actor, AskError, Context, Handler, Message, Router, SpawnOptions, SupervisorStrategy, System};
    /// struct Parser;
    /// impl Actor for Parser {}
    /// #[derive(Message)]
    /// #[reply(u32)]
    /// struct Parse(&'static str);
    /// impl Handler<Parse> for Parser {
    ///     fn handle(&mut self, msg: Parse, _: &mut Context<Self>) -> u32 {
    ///         msg.0.parse().expect("a number") // a poison message panics
    ///     }
    /// }
    /// let system = System::new();
    /// let supervision = SupervisorStrategy::one_for_one()
    ///     .without_limit()
    ///     .backoff(Duration::from_millis(1), Duration::from_millis(100));
    /// let parsers = Router::spawn(
    ///     &system,
    ///     NonZeroUsize::new(2).unwrap(),
    ///     || Parser,
    ///     SpawnOptions::new().supervision(supervision),
    /// );
    /// for _ in 0..10 {
    ///     assert_eq!(parsers.ask(Parse("poison")).wait(), Err(AskError::Panicked));
    /// }
    /// assert_eq!(parsers.ask(Parse("42")).wait(), Ok(42)); // still two routees
    /// system.shutdown();
    /// ```
    pub fn spawn(
        system: &System,
        size: NonZeroUsize,
        factory: impl Fn() -> A + Send + Sync + 'static,
        options: SpawnOptions,
    ) -> Self {
        Self::spawn_each(size, factory, |make| {
            system.spawn_supervised(make, options.clone())
        })
    }

    /// Spawns `size` routees built by `factory` as supervised children of the actor whose
    /// context this is (its [`supervisor_strategy`](crate::Actor::supervisor_strategy)
    /// applies; they stop with it).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use troupe::{Actor, Context, Handler, Message, Router, SpawnOptions, System};
    /// struct Worker;
    /// impl Actor for Worker {}
    /// #[derive(Message)]
    /// #[reply(u64)]
    /// struct Square(u64);
    /// impl Handler<Square> for Worker {
    ///     fn handle(&mut self, msg: Square, _: &mut Context<Self>) -> u64 { msg.0 * msg.0 }
    /// }
    /// struct Foreman { workers: Option<Router<Worker>> }
    /// impl Actor for Foreman {
    ///     fn started(&mut self, ctx: &mut Context<Self>) {
    ///         let three = NonZeroUsize::new(3).unwrap();
    ///         self.workers = Some(Router::spawn_children(ctx, three, || Worker, SpawnOptions::new()));
    ///     }
    /// }
    /// #[derive(Message)]
    /// #[reply(usize)]
    /// struct CountWorkers;
    /// impl Handler<CountWorkers> for Foreman {
    ///     fn handle(&mut self, _: CountWorkers, ctx: &mut Context<Self>) -> usize {
    ///         ctx.children_count()
    ///     }
    /// }
    /// let system = System::new();
    /// let foreman = system.spawn(Foreman { workers: None });
    /// assert_eq!(foreman.ask(CountWorkers).wait(), Ok(3));
    /// system.shutdown();
    /// ```
    pub fn spawn_children<P: Actor>(
        ctx: &mut Context<P>,
        size: NonZeroUsize,
        factory: impl Fn() -> A + Send + Sync + 'static,
        options: SpawnOptions,
    ) -> Self {
        Self::spawn_each(size, factory, |make| {
            ctx.spawn_supervised(make, options.clone())
        })
    }

    /// `size` routees, each spawned by `spawn` with a factory that calls `factory`.
    fn spawn_each<F: Fn() -> A + Send + Sync + 'static>(
        size: NonZeroUsize,
        factory: F,
        mut spawn: impl FnMut(Box<dyn FnMut() -> A + Send>) -> Addr<A>,
    ) -> Self {
        let factory = Arc::new(factory);
        let routees = (0..size.get())
            .map(|_| {
                let factory = factory.clone();
                spawn(Box::new(move || factory()))
            })
            .collect();
        Router {
            routees,
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The next routee in turn (round robin).
    #[inline]
    pub fn next(&self) -> &Addr<A> {
        &self.routees[self.turn()]
    }

    /// The round-robin position, moved on by one.
    #[inline]
    fn turn(&self) -> usize {
        // A load and a store, not a read-modify-write: only the spread of the picks depends on
        // the position, so two threads that pick at once may both take the same routee. A
        // locked add cost the sender about a third of its rate (`troupe-bench router`). The
        // position stays below the routee count: every store is of one loaded below it, plus
        // one, wrapped.
        let turn = self.next.load(Ordering::Relaxed);
        let after = turn + 1;
        self.next.store(
            if after == self.routees.len() {
                0
            } else {
                after
            },
            Ordering::Relaxed,
        );
        turn
    }

    /// The routee with the fewest messages waiting (the first such after the round-robin
    /// position, so that idle routees share the work). Reads every routee's mailbox length:
    /// a snapshot, which other senders may change at once.
    pub fn least_busy(&self) -> &Addr<A> {
        let n = self.routees.len();
        // From the round-robin position, so that idle routees share the work.
        let start = self.turn();
        let mut best = start;
        let mut fewest = usize::MAX;
        for i in 0..n {
            let at = (start + i) % n;
            let waiting = self.routees[at].mailbox_len();
            if waiting < fewest {
                fewest = waiting;
                best = at;
                if waiting == 0 {
                    break;
                }
            }
        }
        &self.routees[best]
    }

    /// The routee for `key`: always the same one for the same key (with the same number of
    /// routees), so a key's messages keep their order and its state one home. Jump consistent
    /// hashing (Lamping and Veach): a router of `n + 1` routees moves only about `1 / (n + 1)`
    /// of the keys. The key's hash is SipHash with fixed keys: the same in every process.
    pub fn by_key<K: Hash + ?Sized>(&self, key: &K) -> &Addr<A> {
        let mut hasher = std::hash::DefaultHasher::new();
        key.hash(&mut hasher);
        &self.routees[jump(hasher.finish(), self.routees.len())]
    }

    /// Tells the next routee in turn (see [`Addr::tell`]).
    pub fn tell<M, K>(&self, msg: M) -> Result<(), SendError<M>>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        self.next().tell(msg)
    }

    /// Asks the next routee in turn (see [`Addr::ask`]).
    pub fn ask<M, K>(&self, msg: M) -> Ask<M::Reply>
    where
        A: Accepts<M, K>,
        M: Message,
        K: Kind,
    {
        self.next().ask(msg)
    }

    /// Tells every routee a copy of `msg`; how many took it (the rest have stopped, or their
    /// bounded mailboxes were full).
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use troupe::{Actor, Context, Handler, Message, Router, SpawnOptions, System};
    /// struct Cache(u32);
    /// impl Actor for Cache {}
    /// #[derive(Message, Clone)]
    /// struct Invalidate;
    /// impl Handler<Invalidate> for Cache {
    ///     fn handle(&mut self, _: Invalidate, _: &mut Context<Self>) { self.0 = 0 }
    /// }
    /// let system = System::new();
    /// let caches = Router::spawn(&system, NonZeroUsize::new(3).unwrap(), || Cache(7), SpawnOptions::new());
    /// assert_eq!(caches.broadcast(Invalidate), 3);
    /// system.shutdown();
    /// ```
    pub fn broadcast<M, K>(&self, msg: M) -> usize
    where
        A: Accepts<M, K>,
        M: Message + Clone,
        K: Kind,
    {
        let (last, rest) = self.routees.split_last().expect("never empty");
        let sent = rest.iter().filter(|r| r.tell(msg.clone()).is_ok()).count();
        sent + usize::from(last.tell(msg).is_ok())
    }

    /// The routees.
    pub fn routees(&self) -> &[Addr<A>] {
        &self.routees
    }

    /// How many routees (never 0).
    pub fn len(&self) -> usize {
        self.routees.len()
    }

    /// False: a router always has a routee (for clippy's `len` without `is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Drains every routee ([`Addr::drain`]).
    pub fn drain(&self) {
        for routee in self.routees.iter() {
            routee.drain();
        }
    }

    /// Stops every routee ([`Addr::stop`]).
    pub fn stop(&self) {
        for routee in self.routees.iter() {
            routee.stop();
        }
    }
}

/// Jump consistent hash: the bucket in `0..buckets` of `key` (Lamping and Veach, "A Fast,
/// Minimal Memory, Consistent Hash Algorithm", 2014).
fn jump(mut key: u64, buckets: usize) -> usize {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < buckets as i64 {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as usize
}

#[cfg(all(test, not(troupe_loom)))]
mod tests {
    use super::jump;

    #[test]
    fn jump_spreads_keys_and_moves_few_when_a_bucket_is_added() {
        let keys = 20_000u64;
        let mut counts = [0usize; 10];
        let mut moved = 0;
        for k in 0..keys {
            let key = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let at10 = jump(key, 10);
            counts[at10] += 1;
            let at11 = jump(key, 11);
            if at11 != at10 {
                assert_eq!(at11, 10, "a key moves only to the new bucket");
                moved += 1;
            }
        }
        for c in counts {
            assert!((1_600..2_400).contains(&c), "{counts:?}");
        }
        // About 1/11 of the keys move.
        assert!((1_400..2_300).contains(&moved), "{moved}");
    }
}
