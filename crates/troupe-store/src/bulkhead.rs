//! A bulkhead: at most `max_in_flight` calls to a backend at once, at most `max_queued` more
//! waiting, and anything beyond refused at once. A slow backend can then hold only its own
//! share of the store, never all of it.
//!
//! A plain value owned by the actor that calls the backend: [`Bulkhead::admit`] says whether a
//! call starts now, waits, or is refused; [`Bulkhead::finish`] frees its place and hands back
//! the next waiting call, if any.

use std::collections::VecDeque;

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
    /// - `max_queued` 100: resilience4j's thread-pool bulkhead queue (100). With calls timing
    ///   out after 1 s, a full queue waits at most about 2 s.
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
    /// Start it now.
    Start(T),
    /// It waits; [`Bulkhead::finish`] will hand it back when a place frees.
    Queued,
    /// Full: refuse it (it is handed back).
    Refused(T),
}

/// A bulkhead holding waiting calls of type `T`.
#[derive(Debug)]
pub struct Bulkhead<T> {
    config: BulkheadConfig,
    in_flight: usize,
    queue: VecDeque<T>,
    refused: u64,
}

impl<T> Bulkhead<T> {
    /// An empty bulkhead. `config` must have passed [`BulkheadConfig::check`].
    pub fn new(config: BulkheadConfig) -> Self {
        Self {
            config,
            in_flight: 0,
            queue: VecDeque::new(),
            refused: 0,
        }
    }

    /// Admits a call: start, wait, or refuse.
    pub fn admit(&mut self, call: T) -> Admission<T> {
        if self.in_flight < self.config.max_in_flight {
            self.in_flight += 1;
            Admission::Start(call)
        } else if self.queue.len() < self.config.max_queued {
            self.queue.push_back(call);
            Admission::Queued
        } else {
            self.refused += 1;
            Admission::Refused(call)
        }
    }

    /// A call in flight has finished: its place goes to the oldest waiting call, returned to
    /// be started (it is counted in flight already).
    pub fn finish(&mut self) -> Option<T> {
        debug_assert!(self.in_flight > 0, "finish without a call in flight");
        match self.queue.pop_front() {
            Some(next) => Some(next),
            None => {
                self.in_flight = self.in_flight.saturating_sub(1);
                None
            }
        }
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

    /// Calls in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Calls waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Calls refused so far.
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

    #[test]
    fn starts_up_to_the_limit_then_queues_then_refuses() {
        let mut b = bulkhead();
        assert_eq!(b.admit(1), Admission::Start(1));
        assert_eq!(b.admit(2), Admission::Start(2));
        assert_eq!(b.admit(3), Admission::Queued);
        assert_eq!(b.admit(4), Admission::Refused(4));
        assert_eq!((b.in_flight(), b.queued(), b.refused()), (2, 1, 1));
    }

    #[test]
    fn a_finished_call_hands_its_place_to_the_oldest_waiting() {
        let mut b = bulkhead();
        b.admit(1);
        b.admit(2);
        b.admit(3);
        assert_eq!(b.finish(), Some(3));
        assert_eq!((b.in_flight(), b.queued()), (2, 0));
        assert_eq!(b.admit(5), Admission::Queued);
        assert_eq!(b.finish(), Some(5));
        assert_eq!(b.finish(), None);
        assert_eq!(b.finish(), None);
        assert_eq!(b.in_flight(), 0);
        assert_eq!(b.admit(6), Admission::Start(6));
    }

    #[test]
    fn waiting_calls_leave_when_asked_and_the_rest_keep_their_order() {
        let mut b = Bulkhead::new(BulkheadConfig {
            max_in_flight: 1,
            max_queued: 5,
        });
        assert_eq!(b.oldest_waiting(), None);
        for call in 1..=5 {
            b.admit(call);
        }
        assert_eq!(b.oldest_waiting(), Some(&2));
        assert_eq!(b.remove_waiting(|call| call % 2 == 0), vec![2, 4]);
        assert_eq!((b.in_flight(), b.queued()), (1, 2));
        assert_eq!(b.oldest_waiting(), Some(&3));
        assert_eq!(b.finish(), Some(3));
        assert_eq!(b.finish(), Some(5));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn a_bulkhead_without_a_queue_refuses_at_the_limit() {
        let mut b = Bulkhead::new(BulkheadConfig {
            max_in_flight: 1,
            max_queued: 0,
        });
        assert_eq!(b.admit(1), Admission::Start(1));
        assert_eq!(b.admit(2), Admission::Refused(2));
        assert!(BulkheadConfig {
            max_in_flight: 0,
            max_queued: 5
        }
        .check()
        .is_err());
    }
}
