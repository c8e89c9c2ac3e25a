//! A parent's side of supervision: its table of children and what a child's failure calls for.
//!
//! [`Children::decide`] is pure bookkeeping (restart policy, strategy kind, intensity window,
//! back-off): it returns a [`Decision`], and the parent's turn (`life.rs`) carries it out by
//! signalling the children, arming a timer, or failing itself.

use std::time::{Duration, Instant};

use super::{Intensity, Restart, StrategyKind, SupervisorStrategy};
use crate::erased::ErasedRef;
use crate::failure::Failure;

/// A child as its parent knows it.
pub(crate) struct ChildEntry {
    pub(crate) cell: ErasedRef,
    pub(crate) restart: Restart,
    /// Spawned with a factory, so it can be rebuilt.
    pub(crate) restartable: bool,
    /// Spawn order, for rest-for-one.
    seq: u64,
}

/// A parent's children and its recent restarts (for the intensity limit).
#[derive(Default)]
pub(crate) struct Children {
    slab: slab::Slab<ChildEntry>,
    next_seq: u64,
    intensity: Intensity,
}

/// What a child's failure calls for.
pub(crate) enum Decision {
    /// The child has already stopped: nothing to do.
    Nothing,
    /// Stop the child for good (its restart policy, or the parent stopping, says so).
    Stop(ErasedRef),
    /// Restart these children in place after `delay` (if any); the failed one is told why.
    Restart {
        targets: Vec<(ErasedRef, Option<Failure>)>,
        delay: Option<Duration>,
    },
    /// Too many restarts too fast: the parent fails itself, and its own supervisor decides.
    /// Its children stop when it is restarted or stopped.
    Escalate(Failure),
}

impl Children {
    /// Adds a child; `make` gets its key and returns its cell.
    pub(crate) fn add<R>(
        &mut self,
        restart: Restart,
        restartable: bool,
        make: impl FnOnce(usize) -> (ErasedRef, R),
    ) -> R {
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = self.slab.vacant_entry();
        let (cell, out) = make(entry.key());
        entry.insert(ChildEntry {
            cell,
            restart,
            restartable,
            seq,
        });
        out
    }

    /// Removes a child that has stopped.
    pub(crate) fn remove(&mut self, key: usize) -> Option<ChildEntry> {
        self.slab.try_remove(key)
    }

    /// Children alive (not yet reported stopped).
    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Child `key`'s cell, if it is still alive.
    pub(crate) fn get(&self, key: usize) -> Option<ErasedRef> {
        self.slab.get(key).map(|child| child.cell.clone())
    }

    /// Every child's cell.
    pub(crate) fn cells(&self) -> impl Iterator<Item = &ErasedRef> {
        self.slab.iter().map(|(_, child)| &child.cell)
    }

    /// What the failure of child `key` calls for under `strategy`, at `now`. `stopping`: the
    /// parent is stopping, so nothing is restarted.
    pub(crate) fn decide(
        &mut self,
        key: usize,
        failure: &Failure,
        strategy: &SupervisorStrategy,
        stopping: bool,
        now: Instant,
    ) -> Decision {
        let Some(entry) = self.slab.get(key) else {
            return Decision::Nothing;
        };
        let restartable = entry.restartable && !stopping && entry.restart.restarts_after(failure);
        if !restartable {
            return Decision::Stop(entry.cell.clone());
        }
        let Some(delay) = self.intensity.admit(strategy, now) else {
            return Decision::Escalate(Failure::Escalated {
                child: Box::new(failure.clone()),
            });
        };
        let failed_seq = entry.seq;
        let targets = self
            .slab
            .iter()
            .filter(|(k, child)| match strategy.kind {
                StrategyKind::OneForOne => *k == key,
                StrategyKind::OneForAll => true,
                StrategyKind::RestForOne => child.seq >= failed_seq,
            })
            .map(|(k, child)| {
                let reason = (k == key).then(|| failure.clone());
                (child.cell.clone(), reason)
            })
            .collect();
        Decision::Restart { targets, delay }
    }
}
