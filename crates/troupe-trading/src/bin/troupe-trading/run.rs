//! `run` and `inspect`: the system as a process with its logs in a directory.
//!
//! `run` recovers the exchange from its logs (cutting torn tails, catching a short log up with
//! its peer; refusing logs with mid-file damage unless `--salvage`), then lets blocking
//! clients place the seed scenario's orders, one at a time each, and (with `--report-acks`)
//! prints one line per acknowledged order as soon as the acknowledgement arrives: `ack
//! <client> <client order id>`. Client order ids of a run start after every order already in
//! the logs, so a restarted run never reuses one. What recovery did goes to stderr; a salvage
//! is reported in capitals.
//!
//! `inspect` only reads: it opens every log read-only ([`Journal::scan`]), prints what each
//! holds (good records, a torn tail, mid-file damage and the valid records after it), then
//! replays the logs in memory on an exchange that runs without logs, and prints each engine's
//! state and what `run` would do to the logs. It creates, cuts, syncs and maps nothing. With
//! mid-file damage it fails (after printing the logs) unless `--salvage` asks it to show what
//! `run --salvage` would recover.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use troupe::System;
use troupe_trading::{
    BlockingClient, Exchange, ExchangeConfig, Journal, LogEnd, LogMode, LogRecovery, LogScan,
    Market, Recovery, Role, SeedScenario, Style,
};

use crate::bench::system;
use crate::Setup;

pub struct RunPlan {
    pub style: Style,
    pub log: LogMode,
    pub clients: usize,
    pub rounds: u64,
    pub report_acks: bool,
    pub salvage: bool,
}

pub struct InspectPlan {
    pub log: LogMode,
    pub keys: bool,
    pub json: bool,
    pub salvage: bool,
}

/// An exchange on the logs in `dir`.
fn exchange(
    system: &System,
    style: Style,
    log: LogMode,
    dir: &Path,
    salvage: bool,
    read_only: bool,
) -> Result<Exchange> {
    let config = ExchangeConfig {
        style,
        log,
        log_dir: Some(dir.to_path_buf()),
        max_sessions: 4096,
        recovery: if salvage {
            Recovery::Salvage
        } else {
            Recovery::Strict
        },
        read_only,
        ..ExchangeConfig::seed()
    };
    Exchange::start(system, config).context("starting the exchange")
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
            "recovered pair {} {}: {} records, {} copied from its peer, {} replayed{cut}",
            r.pair, r.role, r.records, r.copied_from_peer, r.replayed
        );
        if let Some(s) = &r.salvaged {
            let backup = s
                .backup
                .as_ref()
                .map_or(String::from("(none)"), |b| b.display().to_string());
            eprintln!(
                "SALVAGED pair {} {} log {}: damage at byte {}, sequence {} ({}); of the {} \
                 valid records after it, {} kept and {} DROPPED; {} records taken from its \
                 peer; the damaged file is kept as {backup}",
                r.pair,
                r.role,
                r.path.display(),
                s.damage.offset,
                s.damage.seq,
                s.damage.damage,
                s.damage.valid_after,
                s.kept_after,
                s.dropped,
                r.copied_from_peer,
            );
        }
    }
}

pub fn run(setup: &Setup, dir: &Path, plan: &RunPlan) -> Result<()> {
    let system = system(setup)?;
    let exchange = exchange(&system, plan.style, plan.log, dir, plan.salvage, false)?;
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

/// One line on what a log file holds.
fn describe(scan: &LogScan) -> String {
    let n = scan.orders.len();
    if !scan.exists {
        return "no file".to_owned();
    }
    match scan.end {
        LogEnd::Clean => format!("{n} records, clean"),
        LogEnd::Spare { bytes } => format!(
            "{n} records, clean, then {bytes} bytes of unused mapped space (trimmed when the \
             log is next opened for writing)"
        ),
        LogEnd::TornTail(c) => format!(
            "{n} records, then a torn tail at byte {} ({} bytes): {}; `run` cuts it",
            c.offset, c.dropped_bytes, c.damage
        ),
        LogEnd::MidFile(d) => format!(
            "{n} records, then MID-FILE DAMAGE at byte {}, in the record due to hold sequence \
             {}: {}; {} valid records follow it (the first at byte {}, sequence {}); `run` \
             refuses this log, `run --salvage` rebuilds it",
            d.offset, d.seq, d.damage, d.valid_after, d.first_valid_offset, d.first_valid_seq
        ),
    }
}

fn scan_json(pair: usize, role: Role, scan: &LogScan) -> Value {
    let (end, spare, tail, damage) = match scan.end {
        LogEnd::Clean => ("clean", 0, Value::Null, Value::Null),
        LogEnd::Spare { bytes } => ("spare", bytes, Value::Null, Value::Null),
        LogEnd::TornTail(c) => (
            "torn-tail",
            0,
            json!({
                "offset": c.offset,
                "dropped_bytes": c.dropped_bytes,
                "damage": c.damage.to_string(),
            }),
            Value::Null,
        ),
        LogEnd::MidFile(d) => (
            "mid-file-damage",
            0,
            Value::Null,
            json!({
                "offset": d.offset,
                "seq": d.seq,
                "damage": d.damage.to_string(),
                "valid_after": d.valid_after,
                "first_valid_offset": d.first_valid_offset,
                "first_valid_seq": d.first_valid_seq,
            }),
        ),
    };
    json!({
        "pair": pair,
        "role": role.to_string(),
        "path": scan.path.display().to_string(),
        "exists": scan.exists,
        "file_bytes": scan.file_bytes,
        "records": scan.orders.len(),
        "end": end,
        "spare_bytes": spare,
        "torn_tail": tail,
        "damage": damage,
    })
}

/// What start-up would do to one log, in words.
fn planned(r: &LogRecovery) -> String {
    let mut out = Vec::new();
    if let Some(c) = r.cut {
        out.push(format!("`run` cuts the torn tail at byte {}", c.offset));
    }
    if let Some(s) = &r.salvaged {
        out.push(format!(
            "`run --salvage` rebuilds it, keeping {} and dropping {} of the {} valid records \
             after the damage",
            s.kept_after, s.dropped, s.damage.valid_after
        ));
    }
    if r.copied_from_peer > 0 {
        out.push(format!("{} records come from its peer", r.copied_from_peer));
    }
    if out.is_empty() {
        "nothing to repair".to_owned()
    } else {
        out.join("; ")
    }
}

pub fn inspect(setup: &Setup, dir: &Path, plan: &InspectPlan) -> Result<()> {
    if plan.log == LogMode::None {
        bail!("inspect reads logs: use --log buffered or --log fsync");
    }
    // A folder that is not there holds no logs: said, not printed as six empty logs.
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{} is not a folder", dir.display()),
        Err(e) => bail!("cannot read the folder {}: {e}", dir.display()),
    }
    // First, what each file holds, read-only.
    let mut logs = Vec::new();
    let mut damaged = false;
    for pair in 0..Market::seed().pairs() {
        for role in [Role::Primary, Role::Standby] {
            let scan = Journal::scan(dir, pair, role)?;
            damaged |= matches!(scan.end, LogEnd::MidFile(_));
            if plan.json {
                logs.push(scan_json(pair, role, &scan));
            } else {
                println!(
                    "log pair {pair} {:<7} {}: {}",
                    role.to_string(),
                    scan.path.display(),
                    describe(&scan)
                );
            }
        }
    }

    // Then the state the logs recover to, replayed in memory.
    let system = system(setup)?;
    let exchange = match exchange(
        &system,
        Style::RequestReply,
        plan.log,
        dir,
        plan.salvage,
        true,
    ) {
        Ok(exchange) => exchange,
        Err(e) => {
            if plan.json {
                println!(
                    "{}",
                    json!({ "logs": logs, "engines": [], "error": format!("{e:#}") })
                );
            }
            system.shutdown_timeout(Duration::from_secs(60))?;
            let hint = if damaged {
                " (`inspect --salvage` shows what `run --salvage` would recover)"
            } else {
                ""
            };
            return Err(e.context(format!("inspect changed nothing{hint}")));
        }
    };
    let states = exchange.pair_states()?;
    let mut engines = Vec::new();
    for r in exchange.recovery() {
        let pair = &states[r.pair];
        let state = if r.role == Role::Primary {
            pair.primary
        } else {
            pair.standby
        };
        let accepted = if plan.keys {
            exchange
                .accepted_keys(r.pair, r.role)?
                .iter()
                .map(|k| json!([k.client.0, k.client_order_id]))
                .collect()
        } else {
            Vec::new()
        };
        if plan.json {
            engines.push(json!({
                "pair": r.pair,
                "role": r.role.to_string(),
                "records": r.records,
                "copied_from_peer": r.copied_from_peer,
                "replayed": r.replayed,
                "torn_tail": r.cut.map(|c| json!({
                    "offset": c.offset,
                    "dropped_bytes": c.dropped_bytes,
                    "damage": c.damage.to_string(),
                })),
                "salvage": r.salvaged.as_ref().map(|s| json!({
                    "offset": s.damage.offset,
                    "seq": s.damage.seq,
                    "valid_after": s.damage.valid_after,
                    "kept_after": s.kept_after,
                    "dropped": s.dropped,
                })),
                "plan": planned(r),
                "applied": state.applied,
                "trades": state.trades,
                "resting": state.resting,
                "state_hash": format!("{:016x}", state.state_hash),
                "keys": accepted,
            }));
        } else {
            println!(
                "pair {} {:<7}: {} replayed ({} of its own, {} from its peer): {}; {} applied, {} trades, {} resting, hash {:016x}",
                r.pair,
                r.role.to_string(),
                r.replayed,
                r.replayed - r.copied_from_peer,
                r.copied_from_peer,
                planned(r),
                state.applied,
                state.trades,
                state.resting,
                state.state_hash
            );
        }
    }
    if plan.json {
        println!("{}", json!({ "logs": logs, "engines": engines }));
    }
    exchange.shutdown();
    system.shutdown_timeout(Duration::from_secs(60))?;
    Ok(())
}
