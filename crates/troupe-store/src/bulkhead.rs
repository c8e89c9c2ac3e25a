//! A bulkhead: at most `max_in_flight` calls to a backend at once, at most `max_queued` more
//! waiting, and anything beyond refused at once. A slow backend can then hold only its own
//! share of the store, never all of it.
//!
//! Owned by the actor that calls the backend: [`Bulkhead::admit`] says whether a call starts
//! now, waits, or is refused; [`Bulkhead::next_to_start`] hands back the oldest waiting call once a
//! place is free. A call that starts gets a [`Place`], which it holds until it ends: the actor
//! moves it into the call's future, so the place is freed when the future completes or is
//! dropped, not when the actor hears of it. The places are counted in [`Places`], which
//! outlives the actor's instance: when a supervisor rebuilds a failed actor, the calls its old
//! instance left in flight keep their places and the new instance's bulkhead counts them (a
//! count kept in the actor's own fields would restart at zero, and the backend would see up to
//! twice the bound), and since no message has to arrive for a place to be freed, a message
//! lost in the failure cannot leak one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The bulkhead's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkheadConfig {
    /// Calls in flight at most.
    pub max_in_flight: usize,
    /// Calls waiting for a place at most.
    pub max_queued: usize,
}

impl Default for BulkheadConfig {
    /// - `max_in_flight` 64: the seed's load sends about 300 calls a second to each backend,
    ///   each taking 20 ms, so 6 are in flight on average; 64 leaves ten times that for bursts
    ///   (resilience4j's semaphore bulkhead allows 25 by default, Hystrix's thread pool 10:
    ///   both sized for blocking threads, which cost far more than an async call).
    /// - `max_queued` 100: resilience4j's thread-pool bulkhead queue (100). The store's call
    ///   timeout counts from admission, so a waiting call is answered within it (1 s), started
    ///   or not.
    fn default() -> Self {
        Self {
            max_in_flight: 64,
            max_queued: 100,
        }
    }
}

impl BulkheadConfig {
    /// Checks the settings.
    pub fn check(&self) -> Result<(), String> {
        if self.max_in_flight == 0 {
            return Err("the bulkhead must allow at least 1 call in flight".into());
        }
        Ok(())
    }
}

/// What [`Bulkhead::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission<T> {
    /// Start it now, holding this place.
    Start(T, Place),
    /// It waits; [`Bulkhead::next_to_start`] will hand it back when a place is free.
    Queued,
    /// Full: refuse it (it is handed back).
    Refused(T),
}

/// The places in use of one bulkhead, shared by every instance of the actor that owns it (and
/// by the calls holding them). Clone it into each instance.
#[derive(Debug, Clone, Default)]
pub struct Places(Arc<AtomicUsize>);

impl Places {
    /// Places in use: calls in flight.
    pub fn in_use(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Takes a place if fewer than `max` are in use.
    fn take(&self, max: usize) -> Option<Place> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < max).then_some(used + 1)
            })
            .ok()
            .map(|_| Place(self.0.clone()))
    }
}

/// A call's place in flight: freed when dropped.
#[derive(Debug)]
#[must_use = "a place is freed when dropped: keep it as long as the call runs"]
pub struct Place(Arc<AtomicUsize>);

impl PartialEq for Place {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Place {}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A bulkhead holding waiting calls of type `T`.
#[derive(Debug)]
pub struct Bulkhead<T> {
    config: BulkheadConfig,
    places: Places,
    queue: VecDeque<T>,
    refused: u64,
}

impl<T> Bulkhead<T> {
    /// An empty bulkhead with places of its own. `config` must have passed
    /// [`BulkheadConfig::check`].
    pub fn new(config: BulkheadConfig) -> Self {
        Self::sharing(config, Places::default())
    }

    /// An empty queue over `places`, which calls of an earlier instance may still hold.
    pub fn sharing(config: BulkheadConfig, places: Places) -> Self {
        Self {
            config,
            places,
            queue: VecDeque::new(),
            refused: 0,
        }
    }

    /// Admits a call: start (if a place is free and no call waits before it), wait, or
    /// refuse.
    pub fn admit(&mut self, call: T) -> Admission<T> {
        if self.queue.is_empty() {
            if let Some(place) = self.places.take(self.config.max_in_flight) {
                return Admission::Start(call, place);
            }
        }
        if self.queue.len() < self.config.max_queued {
            self.queue.push_back(call);
            Admission::Queued
        } else {
            self.refused += 1;
            Admission::Refused(call)
        }
    }

    /// The oldest waiting call and a place for it, if one waits and a place is free (call it
    /// until `None` after calls end).
    pub fn next_to_start(&mut self) -> Option<(T, Place)> {
        if self.queue.is_empty() {
            return None;
        }
        let place = self.places.take(self.config.max_in_flight)?;
        let call = self.queue.pop_front()?;
        Some((call, place))
    }

    /// The call that has waited longest, if any.
    pub fn oldest_waiting(&self) -> Option<&T> {
        self.queue.front()
    }

    /// Takes out the waiting calls for which `leave` holds (their callers gave up, or their
    /// time ran out), oldest first; the others keep their order.
    pub fn remove_waiting(&mut self, mut leave: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut left = Vec::new();
        let mut kept = VecDeque::with_capacity(self.queue.len());
        for call in self.queue.drain(..) {
            if leave(&call) {
                left.push(call);
            } else {
                kept.push_back(call);
            }
        }
        self.queue = kept;
        left
    }

    /// Calls in flight (places in use), this instance's and earlier ones'.
    pub fn in_flight(&self) -> usize {
        self.places.in_use()
    }

    /// Calls waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Calls this bulkhead refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulkhead() -> Bulkhead<u32> {
        Bulkhead::new(BulkheadConfig {
            max_in_flight: 2,
            max_queued: 1,
        })
    }

    fn started(admission: Admission<u32>) -> (u32, Place) {
        match admission {
            Admission::Start(call, place) => (call, place),
            other => panic!("expected a start, got {other:?}"),
        }
    }

    #[test]
    fn starts_up_to_the_limit_then_queues_then_refuses() {
        let mut b = bulkhead();
        let one = started(b.admit(1));
        let two = started(b.admit(2));
        assert_eq!((one.0, two.0), (1, 2));
        assert_eq!(b.admit(3), Admission::Queued);
        assert_eq!(b.admit(4), Admission::Refused(4));
        assert_eq!((b.in_flight(), b.queued(), b.refused()), (2, 1, 1));
    }

    #[test]
    fn a_place_freed_goes_to_the_oldest_waiting_call() {
        let mut b = bulkhead();
        let one = started(b.admit(1));
        let _two = started(b.admit(2));
        assert_eq!(b.admit(3), Admission::Queued);
        assert!(b.next_to_start().is_none(), "no place free yet");
        drop(one);
        let (three, _place) = b.next_to_start().expect("a place is free");
        assert_eq!(three, 3);
        assert_eq!((b.in_flight(), b.queued()), (2, 0));
        assert!(b.next_to_start().is_none(), "nothing waits");
    }

    #[test]
    fn a_new_call_does_not_overtake_a_waiting_one() {
        let mut b = bulkhead();
        let one = started(b.admit(1));
        let _two = started(b.admit(2));
        assert_eq!(b.admit(3), Admission::Queued);
        drop(one);
        // A place is free, but 3 waited first.
        assert_eq!(b.admit(4), Admission::Refused(4));
        assert_eq!(b.next_to_start().map(|(call, _)| call), Some(3));
    }

    #[test]
    fn places_held_by_an_earlier_instance_count_until_their_calls_end() {
        let config = BulkheadConfig {
            max_in_flight: 2,
            max_queued: 1,
        };
        let places = Places::default();
        let mut old = Bulkhead::sharing(config, places.clone());
        let (_, left_in_flight) = started(old.admit(1));
        drop(old);
        let mut new: Bulkhead<u32> = Bulkhead::sharing(config, places.clone());
        let _two = started(new.admit(2));
        assert_eq!(
            new.admit(3),
            Admission::Queued,
            "the old call still holds its place"
        );
        assert_eq!(new.in_flight(), 2);
        drop(left_in_flight);
        assert_eq!(places.in_use(), 1);
        assert_eq!(new.next_to_start().map(|(call, _)| call), Some(3));
    }

    #[test]
    fn waiting_calls_leave_when_asked_and_the_rest_keep_their_order() {
        let mut b = Bulkhead::new(BulkheadConfig {
            max_in_flight: 1,
            max_queued: 5,
        });
        assert_eq!(b.oldest_waiting(), None);
        let first = started(b.admit(1));
        for call in 2..=5 {
            assert_eq!(b.admit(call), Admission::Queued);
        }
        assert_eq!(b.oldest_waiting(), Some(&2));
        assert_eq!(b.remove_waiting(|call| call % 2 == 0), vec![2, 4]);
        assert_eq!((b.in_flight(), b.queued()), (1, 2));
        assert_eq!(b.oldest_waiting(), Some(&3));
        drop(first);
        let (three, place) = b.next_to_start().unwrap();
        assert_eq!(three, 3);
        drop(place);
        assert_eq!(b.next_to_start().map(|(call, _)| call), Some(5));
    }

    #[test]
    fn a_bulkhead_without_a_queue_refuses_at_the_limit() {
        let mut b = Bulkhead::new(BulkheadConfig {
            max_in_flight: 1,
            max_queued: 0,
        });
        let _one = started(b.admit(1));
        assert_eq!(b.admit(2), Admission::Refused(2));
        assert!(BulkheadConfig {
            max_in_flight: 0,
            max_queued: 5
        }
        .check()
        .is_err());
    }
}
