//! The tests that need the whole process to themselves, as one test binary that runs them one
//! after another in a single test: the allocation counters (a global allocator that counts
//! every thread's allocations, so nothing else may run beside them; one also counts the bytes
//! not yet freed) and the test of the
//! environment variable `TROUPE_WORKERS` (which every system built meanwhile would read).
//! Every other integration test is in `tests/suite`.
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

#[path = "../common/counting_alloc.rs"]
mod counting_alloc;

mod ask_allocations;
mod backlog_allocations;
mod named_spawns;
mod ring_allocations;
mod sink;
mod swinging_backlog;
mod workers_env;

#[global_allocator]
static GLOBAL: counting_alloc::Counting = counting_alloc::Counting;

/// Waits until every other thread of the process sleeps: a system's threads (its workers, its
/// timer, its async runtime's) have then started and gone idle once, so the allocations a
/// thread makes when it starts (its name, its runtime's thread-locals) are not counted in a
/// window meant for messages. `build` returns as soon as the threads are created; on a busy
/// host one may first run long after, in the middle of a measured window.
pub fn until_other_threads_sleep() {
    let start = std::time::Instant::now();
    loop {
        let awake = other_threads_awake();
        if awake.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "threads still awake after 60 s: {awake:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The names and states of the other threads not sleeping (Linux's `/proc/self/task`; none
/// elsewhere, where the wait is skipped).
fn other_threads_awake() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    // `/proc/thread-self` links to `<pid>/task/<tid>` of the calling thread.
    let me = std::fs::read_link("/proc/thread-self").ok();
    let me = me.as_deref().and_then(|link| link.file_name()?.to_str());
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid = task.file_name();
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            // `pid (name) state ...`: the name may hold spaces and parentheses.
            let close = stat.rfind(')')?;
            let name = &stat[stat.find('(')? + 1..close];
            let state = stat[close + 1..].trim_start().chars().next()?;
            (tid.to_str() != me && state != 'S').then(|| format!("{name}: {state}"))
        })
        .collect()
}

/// One test, so libtest runs nothing beside it: each scenario has the process to itself while
/// it counts. Each builds its own system and shuts it down (joining its threads) before the
/// next starts; the environment variable is set last and removed at its end.
#[test]
fn each_alone_in_turn() {
    ring_allocations::ring_messages_do_not_allocate();
    ask_allocations::steady_state_asks_do_not_allocate();
    backlog_allocations::a_catch_up_backlog_recycles_its_blocks();
    backlog_allocations::a_plain_thread_keeps_a_catch_up_backlog_in_recycled_blocks();
    swinging_backlog::a_swinging_backlog_recycles_its_blocks();
    named_spawns::named_spawns_give_their_names_back();
    workers_env::troupe_workers_sets_the_default_pool_and_is_checked();
}
