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

fn main() -> ExitCode {
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
