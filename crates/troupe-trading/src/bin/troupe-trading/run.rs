//! `run` and `inspect`: the system as a process with its logs in a directory.
//!
//! `run` recovers the exchange from its logs, then lets blocking clients place the seed
//! scenario's orders, one at a time each, and (with `--report-acks`) prints one line per
//! acknowledged order as soon as the acknowledgement arrives: `ack <client> <client order
//! id>`. Client order ids of a run start after every order already in the logs, so a
//! restarted run never reuses one.
//!
//! `inspect` recovers the exchange from its logs (cutting damaged tails, catching a short log
//! up with its peer), prints what it found and each engine's state, and stops.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::json;
use troupe_trading::{BlockingClient, Exchange, LogMode, Role, SeedScenario, Style};

use crate::bench::{exchange, system};
use crate::Setup;

pub struct RunPlan {
    pub style: Style,
    pub log: LogMode,
    pub clients: usize,
    pub rounds: u64,
    pub report_acks: bool,
}

fn print_recovery(exchange: &Exchange) {
    for r in exchange.recovery() {
        let cut = match r.cut {
            Some(c) => format!(
                "; damaged tail cut at byte {} ({} bytes dropped): {}",
                c.offset, c.dropped_bytes, c.damage
            ),
            None => String::new(),
        };
        eprintln!(
            "recovered pair {} {}: {} records, {} copied from its peer{cut}",
            r.pair, r.role, r.records, r.copied_from_peer
        );
    }
}

pub fn run(setup: &Setup, dir: &Path, plan: &RunPlan) -> Result<()> {
    let system = system(setup)?;
    let exchange = exchange(&system, plan.style, plan.log, dir)?;
    print_recovery(&exchange);
    let already: u64 = exchange
        .pair_states()?
        .iter()
        .map(|p| p.primary.applied)
        .sum();
    let scenario = SeedScenario::new(exchange.market());
    let per_round = scenario.orders_per_round();
    let stdout = std::io::stdout();
    let failures = std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.clients)
            .map(|_| {
                let mut client = BlockingClient::connect(&exchange)?;
                let (scenario, stdout) = (&scenario, &stdout);
                Ok(s.spawn(move || -> Result<()> {
                    for round in 0..plan.rounds {
                        for k in 0..per_round {
                            let mut order = scenario.order(client.id(), round, k);
                            order.client_order_id += already;
                            let done = client
                                .place_order(order, Duration::from_secs(60))
                                .with_context(|| {
                                    format!(
                                        "order {} of client {}",
                                        order.client_order_id,
                                        client.id().0
                                    )
                                })?;
                            if plan.report_acks {
                                let mut out = stdout.lock();
                                writeln!(out, "ack {} {}", client.id().0, done.client_order_id)?;
                                out.flush()?;
                            }
                        }
                    }
                    Ok(())
                }))
            })
            .collect::<Result<_>>()?;
        let errors: Vec<String> = handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("{e:#}")),
                Err(_) => Some("a client thread panicked".to_owned()),
            })
            .collect();
        anyhow::Ok(errors)
    })?;
    if !failures.is_empty() {
        bail!(
            "{} client(s) failed: {}",
            failures.len(),
            failures.join("; ")
        );
    }
    exchange.sync().map_err(anyhow::Error::msg)?;
    let states = exchange.pair_states()?;
    for p in &states {
        eprintln!(
            "pair {}: {} orders, {} trades, hashes {:016x} / {:016x}",
            p.primary.pair,
            p.primary.applied,
            p.primary.trades,
            p.primary.state_hash,
            p.standby.state_hash
        );
    }
    println!("done");
    exchange.shutdown();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}

pub fn inspect(setup: &Setup, dir: &Path, log: LogMode, keys: bool, json: bool) -> Result<()> {
    if log == LogMode::None {
        bail!("inspect reads logs: use --log buffered or --log fsync");
    }
    let system = system(setup)?;
    let exchange = exchange(&system, Style::RequestReply, log, dir)?;
    let states = exchange.pair_states()?;
    let mut engines = Vec::new();
    for r in exchange.recovery() {
        let pair = &states[r.pair];
        let state = if r.role == Role::Primary {
            pair.primary
        } else {
            pair.standby
        };
        let accepted = if keys {
            exchange
                .accepted_keys(r.pair, r.role)?
                .iter()
                .map(|k| json!([k.client.0, k.client_order_id]))
                .collect()
        } else {
            Vec::new()
        };
        if json {
            engines.push(json!({
                "pair": r.pair,
                "role": r.role.to_string(),
                "records": r.records,
                "copied_from_peer": r.copied_from_peer,
                "cut": r.cut.map(|c| json!({
                    "offset": c.offset,
                    "dropped_bytes": c.dropped_bytes,
                    "damage": c.damage.to_string(),
                })),
                "applied": state.applied,
                "trades": state.trades,
                "resting": state.resting,
                "state_hash": format!("{:016x}", state.state_hash),
                "keys": accepted,
            }));
        } else {
            let cut = r.cut.map_or(String::from("clean"), |c| {
                format!(
                    "tail cut at byte {} ({} bytes): {}",
                    c.offset, c.dropped_bytes, c.damage
                )
            });
            println!(
                "pair {} {:<7}: {} records ({} copied from peer), {cut}; {} applied, {} trades, {} resting, hash {:016x}",
                r.pair, r.role.to_string(), r.records, r.copied_from_peer, state.applied, state.trades, state.resting, state.state_hash
            );
        }
    }
    if json {
        println!("{}", json!({ "engines": engines }));
    }
    exchange.shutdown();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}
