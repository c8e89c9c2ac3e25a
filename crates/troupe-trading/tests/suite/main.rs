//! troupe-trading's integration tests, as one test binary: each file is a module (`cargo test -p
//! troupe-trading --test suite <file>::`); one binary compiles and links once.
//! `tests/distributed.rs` (node processes and NATS servers, whose leases must not miss their
//! limits on a loaded machine) keeps a process of its own.

mod cli;
mod crash;
mod dist_simulation;
mod durable_acks;
mod log_recovery;
mod reference_book;
mod router;
mod seed_scenario;
mod simulation;
