//! `rust-peers`: the Rust contenders of troupe-bench (see PROTOCOL.md one folder up).
//!
//! ```text
//! rust-peers ring    --actors N --rounds M          [--repeat R] [--warmup W] [--contender NAME]
//! rust-peers spawn   --actors N                     [...]
//! rust-peers counter --producers P --per-producer K [...]
//! rust-peers chain   --length N --mode actors|threads [...]
//! ```
//! NAME is one of tokio, tokio-current, actix, ractor, kameo.

mod actix_peer;
mod common;
mod kameo_peer;
mod ractor_peer;
mod tokio_peer;

use std::process::ExitCode;

use clap::Parser;
use common::{Cli, Contender, Peer};

/// Scenarios of PROTOCOL.md no contender here implements yet: answered with status 3 and an
/// `unsupported:` line, as the protocol asks, rather than as an unknown subcommand.
const NOT_IMPLEMENTED: &[&str] = &["fanout"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(scenario) = args.get(1).filter(|s| NOT_IMPLEMENTED.contains(&s.as_str())) {
        let contender = args
            .windows(2)
            .filter(|w| w[0] == "--contender")
            .map(|w| w[1].as_str())
            .chain(args.iter().filter_map(|a| a.strip_prefix("--contender=")))
            .last()
            .unwrap_or("tokio");
        eprintln!("unsupported: {scenario} for {contender}");
        return ExitCode::from(3);
    }
    let cli = Cli::parse();
    let mut peer: Box<dyn Peer> = match cli.contender {
        Contender::Tokio => Box::new(tokio_peer::TokioPeer::new(true)),
        Contender::TokioCurrent => Box::new(tokio_peer::TokioPeer::new(false)),
        Contender::Actix => Box::new(actix_peer::ActixPeer::new()),
        Contender::Ractor => Box::new(ractor_peer::RactorPeer::new()),
        Contender::Kameo => Box::new(kameo_peer::KameoPeer::new()),
    };
    common::drive(&cli, peer.as_mut())
}
