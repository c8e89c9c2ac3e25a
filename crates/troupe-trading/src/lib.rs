//! # troupe-trading
//!
//! The limit-order trading system of seed 003 ("Yet Another Akka Benchmark"), built on the
//! troupe actor runtime.
//!
//! Clients send limit orders to stateless order [`Receiver`]s, which validate them against
//! the [`Market`] and route each to the matching engine that owns its order book. Engines work
//! in primary/standby pairs: the primary forwards every order to its standby, both match it
//! with the same deterministic price-time priority ([`OrderBook`]) and write it to their own
//! transaction log ([`Journal`]), and the client is acknowledged once both are done. On start
//! an [`Exchange`] replays its logs, cutting a torn tail; damage with valid records after it
//! stops the start unless salvage was asked for ([`Recovery`]).
//!
//! ```
//! use std::time::Duration;
//! use troupe_trading::{BlockingClient, Exchange, ExchangeConfig, LogMode, Side, Style};
//!
//! let logs = tempfile::tempdir().unwrap();
//! let system = troupe::System::builder().workers(2).build().unwrap();
//! let config = ExchangeConfig {
//!     style: Style::OneWay,
//!     log: LogMode::Fsync,
//!     log_dir: Some(logs.path().to_path_buf()),
//!     ..ExchangeConfig::seed()
//! };
//! let exchange = Exchange::start(&system, config).unwrap();
//! let mut client = BlockingClient::connect(&exchange).unwrap();
//! let c2 = exchange.market().lookup("C2").unwrap();
//! client.place(c2, Side::Buy, 98, 100, Duration::from_secs(10)).unwrap();
//! let pair = &exchange.pair_states().unwrap()[2];
//! assert_eq!(pair.primary.state_hash, pair.standby.state_hash);
//! exchange.shutdown();
//! system.shutdown();
//! ```
//!
//! [`simulation`] runs the exchange in deterministic simulation (`troupe::sim`), its logs on a
//! [`SimDisk`], under crashes, stalls, disk faults and process kills, and checks what it
//! promises.
//!
//! The crate's README describes the order flow, the commands of the `troupe-trading` binary
//! and the figures measured with it.

#![deny(missing_docs)]

mod book;
mod client;
pub mod cluster;
pub mod dist;
pub mod dist_harness;
pub mod dist_sim;
mod engine;
mod exchange;
mod flush;
mod hash;
mod keys;
pub mod load;
mod log;
mod mapped;
mod market;
pub mod nats_cluster;
mod order;
mod receiver;
mod scenario;
mod session;
mod shard;
pub mod sim_cluster;
mod sim_disk;
pub mod simulation;

pub use book::{Fill, OrderBook, Resting, Trade};
pub use client::{BlockingClient, Confirmation, OrderError};
pub use engine::{Engine, EngineState, Style};
pub use exchange::{Exchange, ExchangeConfig, LogRecovery, PairState, StartError, Stopped};
pub use flush::{LogEvent, LogObserver, OnDurable};
pub use log::{
    fsync_probe, Journal, LaterRecord, LogEnd, LogError, LogMode, LogScan, MidDamage, Recovered,
    Recovery, Salvaged, TailCut, TailDamage, RECORD_BYTES,
};
pub use market::{Instrument, Market, MarketError};
pub use order::{
    Ack, ClientId, InstrumentId, NewOrder, Order, OrderKey, Outcome, RejectReason, Role, Side,
};
pub use receiver::{Receiver, Router, Submit};
pub use scenario::SeedScenario;
pub use session::{AckSink, ConnectError};
pub use shard::Shard;
pub use sim_disk::{Crash, DiskCounters, Held, SimDisk};
