//! Remote actors over NATS, across two processes, beside the same work in one process and
//! beside NATS's own request-reply (the floor): ask round trips (rate, p50, p99) and one-way
//! tells (batched), plus the two candidate encodings of the wire.
//!
//! The benchmark starts its own `nats-server`s on free loopback ports (installing it with the
//! project's script when missing) and, for each, a second process (`troupe-bench
//! remote-serve`) that exports the echo actor and answers raw NATS requests. Both servers let
//! in only the benchmark's two users (nkeys made at run time); one of them speaks TLS (a
//! certificate made at run time), so every figure over NATS is measured with and without TLS
//! in the same run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use bytes::Bytes;
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::json;
use troupe::{Actor, Context, Handler, Message};
use troupe_remote::server::{Access, NatsServer, Role};
use troupe_remote::{Credentials, Node, NodeOptions, RemoteMessage};

use crate::report::{Record, Runner};
use crate::SystemConfig;

#[derive(Message, Serialize, Deserialize)]
#[reply(u64)]
pub struct Ping(pub u64);
impl RemoteMessage for Ping {
    const NAME: &'static str = "bench.ping";
}

#[derive(Message, Serialize, Deserialize)]
pub struct Tick(pub u64);
impl RemoteMessage for Tick {
    const NAME: &'static str = "bench.tick";
}

/// Ticks received since the last `Count`, and their sum; resets both.
#[derive(Message, Serialize, Deserialize)]
#[reply((u64, u64))]
pub struct Count;
impl RemoteMessage for Count {
    const NAME: &'static str = "bench.count";
}

#[derive(Default)]
pub struct Echo {
    ticks: u64,
    sum: u64,
}
impl Actor for Echo {}
impl Handler<Ping> for Echo {
    fn handle(&mut self, m: Ping, _: &mut Context<Self>) -> u64 {
        m.0 + 1
    }
}
impl Handler<Tick> for Echo {
    fn handle(&mut self, m: Tick, _: &mut Context<Self>) {
        self.ticks += 1;
        self.sum = self.sum.wrapping_add(m.0);
    }
}
impl Handler<Count> for Echo {
    fn handle(&mut self, _: Count, _: &mut Context<Self>) -> (u64, u64) {
        (
            std::mem::take(&mut self.ticks),
            std::mem::take(&mut self.sum),
        )
    }
}

const ECHO: &str = "bench.echo";
const RAW: &str = "bench.raw";

/// How the serving process signs in: its nkey seed file, and the authority to trust for TLS.
pub struct ServeAccess {
    pub nkey: Option<std::path::PathBuf>,
    pub ca: Option<std::path::PathBuf>,
}

impl ServeAccess {
    fn options(&self) -> NodeOptions {
        NodeOptions {
            credentials: self
                .nkey
                .clone()
                .map_or(Credentials::None, Credentials::NkeyFile),
            tls_ca: self.ca.clone(),
            inbox_prefix: "_INBOX.serve".into(),
            ..NodeOptions::default()
        }
    }
}

/// The serving process: exports the echo actor, answers raw requests, runs until killed or
/// until its standard input closes (the parent went away).
pub fn serve(url: &str, access: &ServeAccess, config: &SystemConfig) -> Result<()> {
    let system = config.build()?;
    let options = access.options();
    let node = Node::connect_blocking(url, options.clone())
        .with_context(|| format!("connecting to {url}"))?;
    node.export(ECHO, system.spawn(Echo::default()))
        .accept::<Ping, _>()
        .accept::<Tick, _>()
        .accept::<Count, _>()
        .start_blocking()
        .context("exporting the echo actor")?;
    let raw = node.block_on(options.nats_options()?.connect(url))?;
    let mut sub = node.block_on(raw.subscribe(RAW))?;
    node.block_on(raw.flush())?;
    let responder = raw.clone();
    node.runtime().spawn(async move {
        while let Some(msg) = sub.next().await {
            if let Some(reply) = msg.reply {
                let _ = responder.publish(reply, msg.payload).await;
            }
        }
    });
    println!("READY");
    // Ends when the parent closes our standard input (or kills us).
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {
        line.clear();
    }
    node.close_blocking();
    system.shutdown();
    Ok(())
}

/// Kills the serving process when the benchmark ends, whatever the outcome.
struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server_process(url: &str, access: &Access, config: &SystemConfig) -> Result<Server> {
    let exe = std::env::current_exe().context("locating troupe-bench")?;
    let mut command = Command::new(exe);
    command
        .args([
            "--workers",
            &config.workers.to_string(),
            "remote-serve",
            "--url",
            url,
        ])
        .arg("--nkey")
        .arg(access.seed_file("serve"));
    if let Some(ca) = access.ca() {
        command.arg("--ca").arg(ca);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the serving process")?;
    let stdout = child
        .stdout
        .take()
        .context("the serving process's output")?;
    let server = Server(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "READY" {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .context("the serving process did not get ready within 60 s")?;
    Ok(server)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds")
}

fn micros(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1_000.0
}

/// The latencies and the rate of one round of sequential round trips.
struct Trips {
    h: Histogram<u64>,
    start: Instant,
}

impl Trips {
    fn new() -> Self {
        Trips {
            h: histogram(),
            start: Instant::now(),
        }
    }

    /// Round trip `i`, begun at `began`, answered `got` (which must be `i + 1`).
    fn record(&mut self, i: u64, got: u64, began: Instant) -> Result<()> {
        self.h.record(began.elapsed().as_nanos().max(1) as u64)?;
        ensure!(got == i + 1, "round trip {i} answered {got}");
        Ok(())
    }

    /// [rate, p50 µs, p99 µs] after `n` round trips.
    fn figures(self, n: u64) -> [f64; 3] {
        [
            n as f64 / self.start.elapsed().as_secs_f64(),
            micros(&self.h, 0.5),
            micros(&self.h, 0.99),
        ]
    }
}

/// One round of `n` sequential round trips through `once`: [rate, p50 µs, p99 µs].
fn round_trips(n: u64, mut once: impl FnMut(u64) -> Result<u64>) -> Result<[f64; 3]> {
    let mut trips = Trips::new();
    for i in 0..n {
        let began = Instant::now();
        let got = once(i)?;
        trips.record(i, got, began)?;
    }
    Ok(trips.figures(n))
}

/// [`round_trips`] in a tokio task: `once(i)` is awaited.
async fn async_round_trips<F, Fut>(n: u64, mut once: F) -> Result<[f64; 3]>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<u64>>,
{
    let mut trips = Trips::new();
    for i in 0..n {
        let began = Instant::now();
        let got = once(i).await?;
        trips.record(i, got, began)?;
    }
    Ok(trips.figures(n))
}

/// One side of the benchmark: a server that lets in the two users only (over TLS or not), the
/// serving process, and this process's node and raw client on it.
struct Side {
    tls: bool,
    node: Node,
    raw: async_nats::Client,
    // Dropped in this order: the serving process, then its server, then the keys.
    _server: Server,
    _nats: NatsServer,
    _access: Access,
}

impl Side {
    fn start(config: &SystemConfig, tls: bool) -> Result<Side> {
        let access = Access::new(
            [
                Role::peer("bench").publish([RAW]),
                Role::peer("serve").subscribe([RAW]),
            ],
            tls,
        )
        .context("making the NATS users")?;
        let nats = NatsServer::secured(&access, false).context("starting nats-server")?;
        let url = nats.url();
        let server = start_server_process(&url, &access, config)?;
        let options = access.options("bench");
        let node = Node::connect_blocking(&url, options.clone())?;
        let raw = node.block_on(options.nats_options()?.connect(url.as_str()))?;
        Ok(Side {
            tls,
            node,
            raw,
            _server: server,
            _nats: nats,
            _access: access,
        })
    }

    fn security(&self) -> &'static str {
        if self.tls {
            "nkey+tls"
        } else {
            "nkey"
        }
    }
}

pub fn run(runner: &Runner, config: &SystemConfig, asks: u64, messages: u64) -> Result<()> {
    ensure!(
        asks >= 1 && messages >= 1,
        "remote needs at least one ask and one message"
    );
    let sides = [Side::start(config, false)?, Side::start(config, true)?];
    let system = config.build()?;
    let local = system.spawn(Echo::default());
    let notes = format!(
        "{}; two processes and one nats-server on this machine (loopback), each ask after the previous reply; the server lets in two nkey users",
        config.notes()
    );

    // Round trips: NATS by itself (the floor), troupe across processes (from a tokio task and
    // from a plain thread), each without and with TLS; troupe in one process.
    let mut runs: Vec<(&str, Option<&Side>)> = Vec::new();
    for side in &sides {
        for transport in ["nats-request", "troupe-remote", "troupe-remote-thread"] {
            runs.push((transport, Some(side)));
        }
    }
    runs.push(("in-process", None));
    for (transport, side) in runs {
        let security = side.map_or("none", Side::security);
        let label = format!("remote ask {transport} {security} {asks}");
        let (node, raw) = match side {
            Some(side) => (&side.node, &side.raw),
            None => (&sides[0].node, &sides[0].raw),
        };
        let ping = node.recipient::<Ping>(ECHO)?;
        let [rate, p50, p99] = runner.measure(&label, || match transport {
            "nats-request" => {
                let raw = raw.clone();
                let task = node.runtime().spawn(async_round_trips(asks, move |i| {
                    let raw = raw.clone();
                    async move {
                        let reply = raw
                            .request(RAW, Bytes::from((i + 1).to_le_bytes().to_vec()))
                            .await?;
                        let bytes: [u8; 8] =
                            reply.payload[..].try_into().context("an 8-byte echo")?;
                        Ok(u64::from_le_bytes(bytes))
                    }
                }));
                node.block_on(task)?
            }
            "troupe-remote" => {
                let ping = ping.clone();
                let task = node.runtime().spawn(async_round_trips(asks, move |i| {
                    let ask = ping.ask(Ping(i));
                    async move { Ok(ask.await?) }
                }));
                node.block_on(task)?
            }
            "troupe-remote-thread" => round_trips(asks, |i| Ok(ping.ask(Ping(i)).wait()?)),
            _ => round_trips(asks, |i| {
                local
                    .ask(Ping(i))
                    .wait()
                    .map_err(|e| anyhow::anyhow!("an in-process ask failed: {e}"))
            }),
        })?;
        let params = json!({ "asks": asks, "transport": transport, "security": security })
            .as_object()
            .expect("object")
            .clone();
        let what = match transport {
            "nats-request" => "NATS request-reply by itself (async-nats client in a tokio task, a raw responder task in the other process): the floor",
            "troupe-remote" => "a troupe ask from a tokio task (.await) to an actor exported by the other process",
            "troupe-remote-thread" => "a troupe ask from a plain thread (.wait()) to an actor exported by the other process",
            _ => "a troupe ask from a plain thread to an actor in the same process",
        };
        let what = match security {
            "nkey+tls" => format!("{what}; over TLS"),
            _ => what.to_string(),
        };
        for (metric, unit, samples) in [
            ("round_trips", "asks/s", rate),
            ("p50_latency", "us", p50),
            ("p99_latency", "us", p99),
        ] {
            runner.emit(&Record::new(
                "remote",
                metric,
                "troupe",
                params.clone(),
                unit,
                samples,
                &format!("{notes}; {what}"),
            ))?;
        }
    }

    // One-way: `messages` tells, then one ask that returns how many arrived.
    let mut runs: Vec<(&str, Option<&Side>)> =
        sides.iter().map(|s| ("troupe-remote", Some(s))).collect();
    runs.push(("in-process", None));
    for (transport, side) in runs {
        let security = side.map_or("none", Side::security);
        let node = &side.unwrap_or(&sides[0]).node;
        let tick = node.recipient::<Tick>(ECHO)?;
        let count = node.recipient::<Count>(ECHO)?;
        let label = format!("remote tell {transport} {security} {messages}");
        let mut frames = Vec::new();
        let [rate] = runner.measure(&label, || {
            let before = node.stats().frames_out;
            let start = Instant::now();
            let (got, sum) = if transport == "troupe-remote" {
                for i in 0..messages {
                    tick.tell(Tick(i))?;
                }
                count.ask(Count).timeout(Duration::from_secs(600)).wait()?
            } else {
                for i in 0..messages {
                    local
                        .tell(Tick(i))
                        .map_err(|_| anyhow::anyhow!("the local echo stopped"))?;
                }
                local
                    .ask(Count)
                    .wait()
                    .map_err(|e| anyhow::anyhow!("the count failed: {e}"))?
            };
            let elapsed = start.elapsed();
            if got != messages || sum != messages.wrapping_mul(messages - 1) / 2 {
                bail!("remote tell validation failed: {got} of {messages} arrived (sum {sum})");
            }
            frames.push(node.stats().frames_out - before);
            Ok([messages as f64 / elapsed.as_secs_f64()])
        })?;
        let params = json!({ "messages": messages, "transport": transport, "security": security })
            .as_object()
            .expect("object")
            .clone();
        let detail = if transport == "troupe-remote" {
            let mut f = frames.clone();
            f.sort_unstable();
            let median = f[f.len() / 2].max(1);
            format!(
                "tells from a plain thread to the actor in the other process, then one ask for the count; batched: {:.0} messages per NATS message (median of {} runs){}",
                messages as f64 / median as f64,
                f.len(),
                if security == "nkey+tls" { "; over TLS" } else { "" }
            )
        } else {
            "tells from a plain thread to an actor in the same process, then one ask for the count"
                .to_string()
        };
        runner.emit(&Record::new(
            "remote",
            "one_way",
            "troupe",
            params,
            "msgs/s",
            rate,
            &format!("{}; {detail}", config.notes()),
        ))?;
    }
    for side in &sides {
        side.node.close_blocking();
    }
    system.shutdown();
    codecs(runner)
}

/// A message the size of a trading order: what the wire carries most.
#[derive(Serialize, Deserialize, Clone, PartialEq, Debug)]
struct OrderLike {
    client: u32,
    client_order: u64,
    instrument: String,
    buy: bool,
    price_ticks: i64,
    volume: u32,
}

/// Encode time, decode time and size of the two candidate encodings, on the same message.
fn codecs(runner: &Runner) -> Result<()> {
    let mut order = OrderLike {
        client: 17,
        client_order: 123_456,
        instrument: "B3".into(),
        buy: true,
        price_ticks: 10_125,
        volume: 300,
    };
    let n = 1_000_000u64;
    for codec in ["postcard", "msgpack"] {
        let encode = |o: &OrderLike, buf: &mut Vec<u8>| -> Result<()> {
            buf.clear();
            match codec {
                "postcard" => troupe_remote::wire::encode_into(buf, o)?,
                _ => rmp_serde::encode::write(buf, o)?,
            }
            Ok(())
        };
        let decode = |buf: &[u8]| -> Result<OrderLike> {
            Ok(match codec {
                "postcard" => postcard::from_bytes(buf)?,
                _ => rmp_serde::from_slice(buf)?,
            })
        };
        let mut size = 0;
        let [enc, dec] = runner.measure(&format!("codec {codec}"), || {
            let mut buf = Vec::with_capacity(64);
            let start = Instant::now();
            for i in 0..n {
                order.client_order = i;
                encode(&order, &mut buf)?;
                std::hint::black_box(&buf);
            }
            let encoding = start.elapsed();
            size = buf.len();
            let start = Instant::now();
            for _ in 0..n {
                let back = decode(std::hint::black_box(&buf))?;
                ensure!(back == order, "the {codec} round trip changed the order");
            }
            let decoding = start.elapsed();
            Ok([
                encoding.as_nanos() as f64 / n as f64,
                decoding.as_nanos() as f64 / n as f64,
            ])
        })?;
        let params = json!({ "codec": codec, "bytes": size })
            .as_object()
            .expect("object")
            .clone();
        for (metric, samples) in [("encode_ns", enc), ("decode_ns", dec)] {
            runner.emit(&Record::new(
                "remote",
                metric,
                "troupe",
                params.clone(),
                "ns/msg",
                samples,
                &format!(
                    "an order-sized struct (6 fields, one 2-byte string) into a reused buffer, and back: {size} bytes encoded"
                ),
            ))?;
        }
    }
    Ok(())
}
