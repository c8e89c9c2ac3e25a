//! The `System` methods that read what an observed system keeps (`watch.rs`): the live actors
//! page by page, one actor, the handler times, the asks waited on and their cycles, dead
//! letters, asks timed out, and (feature `metrics`) publishing the read-at-scrape metrics.

use std::sync::Arc;

use crate::id::ActorId;
use crate::loom::Ordering;
use crate::system::System;
use crate::watch::{self, ActorInfo, ActorPage, HandlerStats, ObserveError, Observer, Wait};

/// The most actors one page of [`System::actors`] holds.
pub const MAX_PAGE: usize = 10_000;

impl System {
    fn observer_or_err(&self) -> Result<&Arc<Observer>, ObserveError> {
        self.shared().observer().ok_or(ObserveError::NotObserved)
    }

    /// True if the system was built with [`observe`](crate::SystemBuilder::observe) (or
    /// [`trace_messages`](crate::SystemBuilder::trace_messages)).
    pub fn is_observed(&self) -> bool {
        self.shared().observer().is_some()
    }

    /// Up to `limit` live actors (1 to [`MAX_PAGE`]) whose ids come after `after`, in id
    /// order, and the cursor of the next page. The cost is that of the page, however many
    /// actors the system has: walk a million actors page by page, or show the first page.
    ///
    /// ```
    /// # use troupe::{Actor, System};
    /// # struct Idle;
    /// # impl Actor for Idle {}
    /// let system = System::builder().observe().build().unwrap();
    /// let ids: Vec<_> = (0..5).map(|_| system.spawn(Idle).id()).collect();
    /// let mut seen = Vec::new();
    /// let mut after = None;
    /// loop {
    ///     let page = system.actors(after, 2).unwrap();
    ///     seen.extend(page.actors.iter().map(|a| a.id));
    ///     match page.next {
    ///         Some(next) => after = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// assert_eq!(seen, ids);
    /// assert!(System::new().actors(None, 10).is_err()); // not observed
    /// system.shutdown();
    /// ```
    pub fn actors(&self, after: Option<ActorId>, limit: usize) -> Result<ActorPage, ObserveError> {
        let observer = self.observer_or_err()?;
        if limit == 0 || limit > MAX_PAGE {
            return Err(ObserveError::PageSize {
                asked: limit,
                max: MAX_PAGE,
            });
        }
        let (described, next) = observer.page(after, limit);
        Ok(ActorPage {
            actors: described.into_iter().filter_map(watch::info).collect(),
            next,
        })
    }

    /// One live actor, if it is still there.
    pub fn actor(&self, id: ActorId) -> Result<Option<ActorInfo>, ObserveError> {
        Ok(self.observer_or_err()?.lookup(id).and_then(watch::info))
    }

    /// Live actors the observer lists (as [`live_actors`](System::live_actors), less those
    /// spawned and not yet listed).
    pub fn observed_actors(&self) -> Result<usize, ObserveError> {
        Ok(self.observer_or_err()?.len())
    }

    /// Time in handlers by actor type and message type, over every live actor, the longest
    /// total first. Its cost grows with the number of live actors.
    pub fn handler_stats(&self) -> Result<Vec<HandlerStats>, ObserveError> {
        let watches = self.observer_or_err()?.watches();
        Ok(watch::handler_stats(&watches))
    }

    /// The asks actors are waiting on now: sent from an observed actor's handler, not yet
    /// answered (nor given up by the asker).
    pub fn waits(&self) -> Result<Vec<Wait>, ObserveError> {
        Ok(self.observer_or_err()?.waits())
    }

    /// Cycles in the graph of waits now (actor A waits on B, which waits on A): each a list of
    /// actors, each waiting on the next and the last on the first, from the lowest id. Such
    /// actors can never answer each other if they hold their mailboxes while they wait
    /// (`await_then`, a blocking wait). Each cycle is also logged as a warning when the ask
    /// that closes it is sent.
    ///
    /// ```
    /// # use troupe::System;
    /// let system = System::builder().observe().build().unwrap();
    /// assert!(system.wait_cycles().unwrap().is_empty());
    /// system.shutdown();
    /// ```
    pub fn wait_cycles(&self) -> Result<Vec<Vec<ActorId>>, ObserveError> {
        Ok(self.observer_or_err()?.cycles_now())
    }

    /// The cycles of waits seen as they formed, oldest first (the latest 64), whether or not
    /// they are still there.
    pub fn wait_cycles_seen(&self) -> Result<Vec<Vec<ActorId>>, ObserveError> {
        Ok(self.observer_or_err()?.cycles_seen())
    }

    /// Messages lost because their actor stopped before it took them.
    pub fn dead_letters(&self) -> Result<u64, ObserveError> {
        Ok(self.observer_or_err()?.dead_letters.load(Ordering::Relaxed))
    }

    /// Asks to this system's actors that timed out before the answer came.
    pub fn asks_timed_out(&self) -> Result<u64, ObserveError> {
        Ok(self
            .observer_or_err()?
            .asks_timed_out
            .load(Ordering::Relaxed))
    }
}

#[cfg(feature = "metrics")]
impl System {
    /// Sets the gauges and counters that are read rather than counted as things happen
    /// (mailbox depths and actors by type, name and pool; dead letters; live actors; the
    /// pools' workers, turns, steals and parks) through the `metrics` facade. Call it before
    /// an exporter renders (a Prometheus scrape), or on a timer. Its cost grows with the number
    /// of live actors. The metrics counted as they happen (messages handled, handler time,
    /// failures, restarts, asks timed out) need no call. Needs the `metrics` feature.
    pub fn publish_metrics(&self) -> Result<(), ObserveError> {
        use std::collections::{HashMap, HashSet};

        use crate::watch::meters::{self, Group};

        let observer = self.observer_or_err()?;
        let mut groups: HashMap<Group, (usize, usize)> = HashMap::new();
        let mut after = None;
        loop {
            let (page, next) = observer.page(after, MAX_PAGE);
            for described in page {
                if let Some(watch) = &described.watch {
                    let sums = groups.entry(meters::group(watch)).or_default();
                    sums.0 += 1;
                    sums.1 += described.mailbox_len;
                }
            }
            match next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut published = observer.published.lock().unwrap_or_else(|p| p.into_inner());
        // A label set whose actors are all gone reads zero, not its last value.
        for gone in published.iter().filter(|g| !groups.contains_key(*g)) {
            metrics::gauge!("troupe_actors", gone.labels()).set(0.0);
            metrics::gauge!("troupe_mailbox_depth", gone.labels()).set(0.0);
        }
        for (group, (actors, depth)) in &groups {
            metrics::gauge!("troupe_actors", group.labels()).set(*actors as f64);
            metrics::gauge!("troupe_mailbox_depth", group.labels()).set(*depth as f64);
        }
        *published = groups.into_keys().collect::<HashSet<_>>();
        drop(published);
        let system = observer.system.to_string();
        metrics::counter!("troupe_dead_letters_total", "system" => system.clone())
            .absolute(observer.dead_letters.load(Ordering::Relaxed));
        metrics::gauge!("troupe_live_actors", "system" => system.clone())
            .set(self.live_actors() as f64);
        for pool in self.pool_metrics() {
            let labels = [("system", system.clone()), ("pool", pool.name.clone())];
            metrics::gauge!("troupe_pool_workers", &labels).set(pool.workers as f64);
            metrics::counter!("troupe_pool_turns_total", &labels).absolute(pool.turns);
            metrics::counter!("troupe_pool_steals_total", &labels).absolute(pool.steals);
            metrics::counter!("troupe_pool_parks_total", &labels).absolute(pool.parks);
        }
        Ok(())
    }
}
