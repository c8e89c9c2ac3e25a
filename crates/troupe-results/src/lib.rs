//! The results every troupe benchmark program prints, and the report drawn from them.
//!
//! One schema (`peers/PROTOCOL.md`): a [`Record`] per (scenario, metric, contender, parameters)
//! with every repetition's sample, its median, min and max, whether the run checked its own
//! work, and the [`Machine`] it ran on. `troupe-bench`, `troupe-trading`, `troupe-store` and the
//! Rust peers all write it through this crate; [`read`] loads it back, naming the file and line
//! of anything malformed; [`report`] (feature `report`) turns one or more result files into a
//! self-contained HTML page with a chart and a table per scenario.

mod counters;
mod output;
pub mod probe;
mod read;
mod schema;
mod stats;
pub mod usage;

#[cfg(feature = "report")]
pub mod report;

pub use counters::{counts_work, describe_counters};
pub use output::{series_label, write_results, write_whole};
pub use read::{parse_lines, read_file, ReadError};
pub use schema::{command_line, commit_label, Machine, Record};
pub use stats::{human, params_text, summarize, time_left, utc_now, utc_stamp};
