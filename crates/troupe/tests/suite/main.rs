//! troupe's integration tests that can share a process, as one test binary: each file is a
//! module (`cargo test -p troupe --test suite <file>::`). One binary compiles and links once;
//! the allocation counters (a counting global allocator) and the test of the environment
//! variable `TROUPE_WORKERS` keep a process of their own (`tests/alone`).
#![allow(clippy::disallowed_types)] // the tests count with std atomics; the runtime's go through its loom shim

#[path = "../common/mod.rs"]
mod common;

mod ask_wait;
mod catch_up;
mod deferred;
mod derive;
mod drain;
mod helping;
mod isolation;
mod layers;
mod lifecycle;
mod lifecycle_edges;
mod messaging;
mod observe;
mod observe_metrics;
mod outside_queues;
mod pipe;
mod rare_paths;
mod simulation;
mod state_machine;
mod supervision;
mod tokio_service;
mod trace_spans;
mod undelivered;
