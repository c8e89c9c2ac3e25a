//! The tests that need the whole process to themselves, as one test binary that runs them one
//! after another in a single test: the allocation counters (a global allocator that counts
//! every thread's allocations, so nothing else may run beside them) and the test of the
//! environment variable `TROUPE_WORKERS` (which every system built meanwhile would read).
//! Every other integration test is in `tests/suite`.
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

#[path = "../common/counting_alloc.rs"]
mod counting_alloc;

mod ask_allocations;
mod backlog_allocations;
mod ring_allocations;
mod workers_env;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// One test, so libtest runs nothing beside it: each scenario has the process to itself while
/// it counts. Each builds its own system and shuts it down (joining its threads) before the
/// next starts; the environment variable is set last and removed at its end.
#[test]
fn each_alone_in_turn() {
    ring_allocations::ring_messages_do_not_allocate();
    ask_allocations::steady_state_asks_do_not_allocate();
    backlog_allocations::a_catch_up_backlog_recycles_its_blocks();
    workers_env::troupe_workers_sets_the_default_pool_and_is_checked();
}
