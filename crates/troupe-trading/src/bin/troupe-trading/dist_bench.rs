//! `troupe-trading dist-bench`: the trading system across processes over NATS, beside the same
//! system in one process, and its failover time.
//!
//! Starts its own nats-server with JetStream and six node processes (a primary and a standby
//! for each of the seed's three pairs, buffered logs in a temporary directory), then:
//! The server lets in only the distributed mode's users (`dist_harness::roles`, nkeys made at
//! run time): the nodes sign in as `engine`, the clients as `client`, the state reads as
//! `operator`.
//! - closed loop at each client count: every client places an order, waits for its
//!   acknowledgement, places the next, for `--seconds`; orders/s, p50 and p99. The same, in one
//!   process (`Exchange`, request-reply, buffered logs, blocking clients).
//! - failover: four clients place orders on pair 0 while its primary is killed (SIGKILL)
//!   `--kills` times; each time, from the kill to the first acknowledgement by the new
//!   primary. The killed node is restarted, rejoins as standby and catches up before the next.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use serde_json::json;
use troupe_remote::server::NatsServer;
use troupe_remote::Node;
use troupe_results::Record;
use troupe_trading::dist::{DistClient, Placed, WireOrder};
use troupe_trading::dist_harness::{self as harness, NodeProcess};
use troupe_trading::{
    BlockingClient, Exchange, ExchangeConfig, InstrumentId, LogMode, Side, Style,
};

/// What to run.
pub struct DistPlan {
    pub clients: Vec<usize>,
    pub seconds: f64,
    pub kills: usize,
    pub lease: Duration,
    pub json: bool,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds")
}

fn wire(client: u32, id: u64, instruments: u16) -> WireOrder {
    WireOrder {
        client,
        client_order_id: id,
        instrument: (id % instruments as u64) as u16,
        buy: (id / instruments as u64 + client as u64).is_multiple_of(2),
        price: 100 + (id % 7) as i32 - 3,
        volume: 10 + (id % 13) as i32,
    }
}

struct Figures {
    rate: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Figures {
    /// From the latencies of every order placed in `seconds`.
    fn of(all: &Histogram<u64>, seconds: f64) -> Self {
        Figures {
            rate: all.len() as f64 / seconds,
            p50_us: all.value_at_quantile(0.5) as f64 / 1000.0,
            p99_us: all.value_at_quantile(0.99) as f64 / 1000.0,
        }
    }
}

fn emit(
    plan: &DistPlan,
    metric: &str,
    unit: &str,
    value: f64,
    params: serde_json::Value,
    notes: &str,
) -> Result<()> {
    if plan.json {
        let record = Record::new(
            "trading-dist",
            metric,
            "troupe",
            params.as_object().expect("object").clone(),
            unit,
            vec![value],
            notes,
        );
        println!("{}", serde_json::to_string(&record)?);
    }
    Ok(())
}

/// Closed loop across processes: `clients` tasks on the client node's runtime.
fn across(node: &Node, clients: usize, seconds: f64, base: u32) -> Result<Figures> {
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let mut client = DistClient::new(node)?;
            let stop = stop.clone();
            Ok(node.runtime().spawn(async move {
                let mut h = histogram();
                let mut id = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let t = Instant::now();
                    match client
                        .place(wire(base + c as u32, id, 15), Duration::from_secs(30))
                        .await
                    {
                        Ok(Placed::Acked(_)) => {}
                        other => return Err(format!("order {id}: {other:?}")),
                    }
                    let _ = h.record(t.elapsed().as_nanos().max(1) as u64);
                }
                Ok(h)
            }))
        })
        .collect::<Result<_>>()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut all = histogram();
    for task in tasks {
        let h = node
            .block_on(task)
            .context("a client task")?
            .map_err(|e| anyhow::anyhow!(e))?;
        all.add(h)?;
    }
    Ok(Figures::of(&all, seconds))
}

/// The same closed loop in one process.
fn in_process(clients: usize, seconds: f64, dir: &Path) -> Result<Figures> {
    let system = troupe::System::new();
    let exchange = Exchange::start(
        &system,
        ExchangeConfig {
            style: Style::RequestReply,
            log: LogMode::Buffered,
            log_dir: Some(dir.to_path_buf()),
            ..ExchangeConfig::seed()
        },
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let mut client = BlockingClient::connect(&exchange)?;
            let stop = stop.clone();
            Ok(std::thread::spawn(move || -> Result<Histogram<u64>> {
                let mut h = histogram();
                let mut id = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let o = wire(0, id, 15);
                    let t = Instant::now();
                    client.place(
                        InstrumentId(o.instrument),
                        if o.buy { Side::Buy } else { Side::Sell },
                        o.price,
                        o.volume,
                        Duration::from_secs(30),
                    )?;
                    let _ = h.record(t.elapsed().as_nanos().max(1) as u64);
                }
                Ok(h)
            }))
        })
        .collect::<Result<_>>()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut all = histogram();
    for t in threads {
        all.add(
            t.join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
        )?;
    }
    exchange.shutdown();
    system.shutdown();
    Ok(Figures::of(&all, seconds))
}

pub fn run(plan: &DistPlan) -> Result<()> {
    let binary = std::env::current_exe().context("locating troupe-trading")?;
    let access = harness::access(false).context("making the NATS users")?;
    let nats = NatsServer::secured(&access, true).context("starting nats-server with JetStream")?;
    let url = nats.url();
    let root = tempfile::tempdir()?;
    let mut names = Vec::new();
    for pair in 0..3 {
        for side in ["a", "b"] {
            names.push((pair, format!("p{pair}{side}")));
        }
    }
    let mut procs: Vec<Option<NodeProcess>> = names
        .iter()
        .map(|(pair, name)| {
            NodeProcess::start(
                &binary,
                &url,
                &access,
                *pair,
                name,
                &root.path().join(name),
                plan.lease,
            )
            .map(Some)
        })
        .collect::<std::io::Result<_>>()?;
    let node = Node::connect_blocking(&url, access.options("operator"))?;
    let client_node = Node::connect_blocking(&url, access.options("client"))?;
    for pair in 0..3 {
        let pair_names = [format!("p{pair}a"), format!("p{pair}b")];
        let refs = [pair_names[0].as_str(), pair_names[1].as_str()];
        if harness::wait_primary(&node, pair, &refs, Duration::from_secs(30)).is_none() {
            bail!("pair {pair} elected no primary");
        }
    }
    let say = |line: String| {
        if !plan.json {
            println!("{line}");
        }
    };
    say(format!(
        "{:>8}  {:>14}  {:>10}  {:>10}  {:>14}  {:>10}  {:>10}",
        "clients", "across orders/s", "p50 us", "p99 us", "in-proc orders/s", "p50 us", "p99 us"
    ));
    let notes = "request-reply, buffered logs; across: 6 node processes (3 pairs, primary and standby each) and one nats-server on this machine, clients as tokio tasks in one more process";
    for (i, &clients) in plan.clients.iter().enumerate() {
        let across = across(&client_node, clients, plan.seconds, 1000 * (i as u32 + 1))?;
        let dir = tempfile::tempdir()?;
        let local = in_process(clients, plan.seconds, dir.path())?;
        say(format!(
            "{clients:>8}  {:>14.0}  {:>10.0}  {:>10.0}  {:>14.0}  {:>10.1}  {:>10.1}",
            across.rate, across.p50_us, across.p99_us, local.rate, local.p50_us, local.p99_us
        ));
        for (mode, f) in [("across-processes", &across), ("in-process", &local)] {
            let params = json!({ "clients": clients, "mode": mode });
            emit(
                plan,
                "throughput",
                "orders/s",
                f.rate,
                params.clone(),
                notes,
            )?;
            emit(plan, "p50_latency", "us", f.p50_us, params.clone(), notes)?;
            emit(plan, "p99_latency", "us", f.p99_us, params, notes)?;
        }
    }

    // Failover of pair 0, `kills` times.
    if plan.kills > 0 {
        let acks: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..4u32)
            .map(|c| {
                let mut client = DistClient::new(&client_node)?;
                let acks = acks.clone();
                let stop = stop.clone();
                Ok(client_node.runtime().spawn(async move {
                    let mut id = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        id += 1;
                        // Pair 0's books only (instruments 0-4).
                        match client
                            .place(wire(900 + c, id, 5), Duration::from_secs(60))
                            .await
                        {
                            Ok(Placed::Acked(ack)) => acks
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push((Instant::now(), ack.map_or(0, |a| a.epoch))),
                            other => return Err(format!("order {id}: {other:?}")),
                        }
                    }
                    Ok(())
                }))
            })
            .collect::<Result<_>>()?;
        let mut times = Vec::new();
        for kill in 0..plan.kills {
            let Some((primary, _)) =
                harness::wait_in_step(&node, 0, ["p0a", "p0b"], Duration::from_secs(60))
            else {
                bail!("pair 0 did not get in step before kill {}", kill + 1);
            };
            // Let the standby be named in the sync key (it is, after its first answer).
            std::thread::sleep(plan.lease / 2);
            let index = names
                .iter()
                .position(|(_, n)| *n == primary.node)
                .expect("known node");
            let killed_at = Instant::now();
            drop(procs[index].take()); // SIGKILL
            let end = Instant::now() + Duration::from_secs(60);
            let took = loop {
                let first = acks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .find(|(t, epoch)| *t > killed_at && *epoch > primary.epoch)
                    .map(|(t, _)| *t - killed_at);
                if let Some(took) = first {
                    break took;
                }
                if Instant::now() > end {
                    bail!(
                        "kill {}: no acknowledgement from a new primary within 60 s",
                        kill + 1
                    );
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            times.push(took);
            say(format!(
                "kill {:>2}: first acknowledgement from the new primary after {:.0} ms",
                kill + 1,
                took.as_secs_f64() * 1e3
            ));
            procs[index] = Some(NodeProcess::start(
                &binary,
                &url,
                &access,
                0,
                &primary.node,
                &root.path().join(&primary.node),
                plan.lease,
            )?);
        }
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            client_node
                .block_on(task)?
                .map_err(|e| anyhow::anyhow!(e))?;
        }
        times.sort();
        let p50 = times[times.len() / 2].as_secs_f64() * 1e3;
        let max = times.last().expect("at least one kill").as_secs_f64() * 1e3;
        say(format!(
            "failover over {} kills (lease {} ms): p50 {p50:.0} ms, max {max:.0} ms",
            times.len(),
            plan.lease.as_millis()
        ));
        let params = json!({ "kills": times.len(), "lease_ms": plan.lease.as_millis() as u64 });
        let notes = "from kill -9 of pair 0's primary to the first acknowledgement by the new primary, four clients placing orders throughout";
        emit(plan, "failover_p50", "ms", p50, params.clone(), notes)?;
        emit(plan, "failover_max", "ms", max, params, notes)?;
    }
    node.close_blocking();
    client_node.close_blocking();
    Ok(())
}
