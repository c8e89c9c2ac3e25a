#![allow(clippy::disallowed_types)] // tests count with std atomics; the runtime's go through its loom shim
//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls `done` every millisecond until it holds; panics with `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Counts how many times values carrying it were dropped.
#[derive(Clone, Default)]
pub struct DropCounter(Arc<AtomicUsize>);

impl DropCounter {
    pub fn token(&self) -> Counted {
        Counted(self.0.clone())
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A value whose drop is counted.
pub struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One message of a flood: who sent it, its place in that sender's sequence (so a receiver
/// can check each sender's order), and a drop token (so every message's end is counted).
pub struct Item {
    pub from: u32,
    pub seq: u64,
    pub _token: Counted,
}
impl troupe::Message for Item {
    type Reply = ();
}

/// Threads of this process whose names start with `prefix` (from /proc; names are cut to
/// 15 bytes by the kernel, so keep prefixes short).
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .map(|name| name.starts_with(prefix))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0)
}

pub const LONG: Duration = Duration::from_secs(30);

/// Silences the panics tests cause on purpose (their message says "on purpose") and only those:
/// installed once per process over the hook that was there, which still reports every other
/// panic, so a test that fails in the same binary says why. (A hook that silenced everything,
/// even for a moment, hid the failures of tests running beside it.)
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn quiet_panics_on_purpose() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("on purpose") {
                previous(info);
            }
        }));
    });
}
