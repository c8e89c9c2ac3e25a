//! A node: one NATS connection, the actors it exports, and the remote actors it talks to.

use std::collections::{HashMap, VecDeque};
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_nats::{Client, ConnectOptions, Subject};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::{mpsc, oneshot};
use troupe::kind::Kind as HandlerKind;
use troupe::{Accepts, Actor, Addr, AskError, StopReason};

use crate::access::{self, Credentials};
use crate::error::RemoteError;
use crate::trace;
use crate::wire::{
    self, code, down, Kind, Refusal, RefusalKind, RemoteMessage, ENTRY_ASK, ENTRY_ERR, ENTRY_OK,
    ENTRY_TELL, ENTRY_TRACED_ASK, ENTRY_TRACED_TELL, MIN_WIRE_VERSION, TRACE_VERSION, WIRE_VERSION,
};

/// How a node behaves. Every bound is checked by [`Node::connect`].
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The longest an ask waits for its reply (default 5 s).
    pub ask_timeout: Duration,
    /// How often the node says it is alive, from its first export on (default 100 ms). A
    /// watcher declares the node gone after `missed_heartbeats` intervals without one.
    pub heartbeat: Duration,
    /// Heartbeats missed before a watcher declares the exporting process gone (default 3).
    pub missed_heartbeats: u32,
    /// A batch frame is sealed once it holds this many bytes (default 64 KiB); a lone message
    /// goes out at once whatever its size.
    pub batch_bytes: usize,
    /// Bytes that may wait for the connection before tells and asks are refused with
    /// [`RemoteError::Backlogged`] (default 64 MiB).
    pub max_backlog_bytes: usize,
    /// The largest payload accepted from the wire (default 1 MiB; never more than the
    /// server's `max_payload`).
    pub max_payload: usize,
    /// The most entries (tells, asks, replies) one frame may hold (default 4096). A frame is
    /// sealed there, and a frame that announces more is refused whole before any entry is
    /// read, so the work one NATS message can ask of a node is bounded whatever its size.
    /// Every node of a system should use the same value (a larger one's frames are refused).
    pub max_frame_entries: u32,
    /// The most asks of one sender (one reply subject) this node works on at once (default
    /// 4096). An ask past it is answered at once with [`RefusalKind::Overloaded`], unhandled:
    /// one sender cannot take the whole node.
    pub max_asks_per_sender: u32,
    /// The most asks this node works on at once, from all senders (default 16,384). Past it,
    /// asks are answered with [`RefusalKind::Overloaded`] too. With replies of bounded size,
    /// this bounds the memory that asks can hold.
    pub max_asks_in_flight: u32,
    /// Who the node is to the NATS server (default: nobody, for a server without
    /// authorization).
    pub credentials: Credentials,
    /// A PEM file of the certificate authority to trust. With it the connection is TLS, and
    /// is refused if the server does not speak TLS (default: none).
    pub tls_ca: Option<PathBuf>,
    /// The root of the subjects answers come back on: `<inbox_prefix>.<node id>` for replies
    /// to asks, `<inbox_prefix>.<random>` for look-ups (default `_INBOX`). A server can then
    /// let a user read `<its prefix>.>` only: its own answers (see the crate README).
    pub inbox_prefix: String,
    /// The newest frame layout spoken: [`crate::wire::WIRE_VERSION`], with which a node reads
    /// every version from [`crate::wire::MIN_WIRE_VERSION`] on and writes each frame at the
    /// oldest version whose layout it uses. Another value only makes sense in tests of what a
    /// mismatched peer sees: the node then reads and writes that version only (and traces
    /// nothing below [`crate::wire::TRACE_VERSION`]).
    #[doc(hidden)]
    pub wire_version: u8,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            ask_timeout: Duration::from_secs(5),
            heartbeat: Duration::from_millis(100),
            missed_heartbeats: 3,
            batch_bytes: 64 * 1024,
            max_backlog_bytes: 64 << 20,
            max_payload: 1 << 20,
            max_frame_entries: 4096,
            max_asks_per_sender: 4096,
            max_asks_in_flight: 16_384,
            credentials: Credentials::None,
            tls_ca: None,
            inbox_prefix: "_INBOX".to_string(),
            wire_version: wire::WIRE_VERSION,
        }
    }
}

impl NodeOptions {
    fn validate(&self) -> Result<(), RemoteError> {
        let bad = |what: String| Err(RemoteError::InvalidOption(what));
        if self.ask_timeout < Duration::from_millis(1)
            || self.ask_timeout > Duration::from_secs(3600)
        {
            return bad(format!(
                "ask_timeout {:?} is outside 1 ms ..= 1 h",
                self.ask_timeout
            ));
        }
        if self.heartbeat < Duration::from_millis(10) || self.heartbeat > Duration::from_secs(60) {
            return bad(format!(
                "heartbeat {:?} is outside 10 ms ..= 60 s",
                self.heartbeat
            ));
        }
        if !(2..=100).contains(&self.missed_heartbeats) {
            return bad(format!(
                "missed_heartbeats {} is outside 2 ..= 100",
                self.missed_heartbeats
            ));
        }
        if !(256..=(8 << 20)).contains(&self.batch_bytes) {
            return bad(format!(
                "batch_bytes {} is outside 256 ..= 8 MiB",
                self.batch_bytes
            ));
        }
        if self.max_backlog_bytes < self.batch_bytes {
            return bad(format!(
                "max_backlog_bytes {} is below batch_bytes {}",
                self.max_backlog_bytes, self.batch_bytes
            ));
        }
        if !(64..=(64 << 20)).contains(&self.max_payload) {
            return bad(format!(
                "max_payload {} is outside 64 ..= 64 MiB",
                self.max_payload
            ));
        }
        if !(1..=1_000_000).contains(&self.max_frame_entries) {
            return bad(format!(
                "max_frame_entries {} is outside 1 ..= 1,000,000",
                self.max_frame_entries
            ));
        }
        if !(1..=10_000_000).contains(&self.max_asks_in_flight) {
            return bad(format!(
                "max_asks_in_flight {} is outside 1 ..= 10,000,000",
                self.max_asks_in_flight
            ));
        }
        if !(1..=self.max_asks_in_flight).contains(&self.max_asks_per_sender) {
            return bad(format!(
                "max_asks_per_sender {} is outside 1 ..= max_asks_in_flight ({})",
                self.max_asks_per_sender, self.max_asks_in_flight
            ));
        }
        if check_name(&self.inbox_prefix).is_err() || self.inbox_prefix.len() > 100 {
            return bad(format!(
                "inbox_prefix `{}`: use 1-100 characters from A-Z a-z 0-9 . _ - with no empty \
                 part between dots",
                self.inbox_prefix
            ));
        }
        Ok(())
    }

    /// The frame versions this node reads.
    fn reads(&self) -> RangeInclusive<u8> {
        if self.wire_version == WIRE_VERSION {
            MIN_WIRE_VERSION..=WIRE_VERSION
        } else {
            self.wire_version..=self.wire_version
        }
    }

    /// The version to write a frame at whose layout is that of version `needs`.
    fn writes(&self, needs: u8) -> u8 {
        if self.wire_version == WIRE_VERSION {
            needs
        } else {
            self.wire_version
        }
    }

    /// The options of a NATS connection that signs in as this node does: its credentials, its
    /// TLS and its inbox prefix. For another connection of the same process (JetStream, say)
    /// that the server must let in with the same rights. Reads the credential files now.
    pub fn nats_options(&self) -> Result<ConnectOptions, RemoteError> {
        self.validate()?;
        let options = self
            .credentials
            .apply(ConnectOptions::new())?
            .custom_inbox_prefix(&self.inbox_prefix);
        access::apply_tls(options, self.tls_ca.as_deref())
    }

    /// How long a watcher waits without a heartbeat before it declares the process gone.
    pub fn silence_limit(&self) -> Duration {
        self.heartbeat * self.missed_heartbeats
    }
}

/// What a node has sent, received and refused since it connected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// NATS messages published (batch frames, replies, heartbeats excluded).
    pub frames_out: u64,
    /// Tells queued to remote actors.
    pub tells_out: u64,
    /// Asks sent to remote actors.
    pub asks_out: u64,
    /// Frames received by exports and on the reply subject.
    pub frames_in: u64,
    /// Entries (tells, asks, replies) received.
    pub entries_in: u64,
    /// Tells that arrived for an actor that had stopped (dropped, as an in-process tell would be).
    pub undeliverable: u64,
    /// Trace contexts that came with messages and could not be read (feature `otel`): each
    /// message was delivered all the same, without a parent span. The first is logged.
    pub traces_ignored: u64,
    /// Frames or entries refused, by reason.
    pub refused: Vec<(RefusalKind, u64)>,
    /// Publications and subscriptions the NATS server refused for lack of permission (each
    /// is logged with what the server said).
    pub denied: u64,
}

impl NodeStats {
    /// All refusals, whatever the reason.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|(_, n)| n).sum()
    }

    /// Refusals of one kind.
    pub fn refused(&self, kind: RefusalKind) -> u64 {
        self.refused
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }
}

#[derive(Default)]
struct Counters {
    frames_out: AtomicU64,
    tells_out: AtomicU64,
    asks_out: AtomicU64,
    frames_in: AtomicU64,
    entries_in: AtomicU64,
    undeliverable: AtomicU64,
    traces_ignored: AtomicU64,
    refused: [AtomicU64; 8],
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A connection to NATS through which actors are exported and remote actors reached.
/// Cheap to clone; every clone is the same node.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
    _runtime: Arc<OwnedRuntime>,
}

/// Shuts the node's own runtime down when the last `Node` clone goes (tasks hold only the
/// inner part, so they never drop a runtime).
struct OwnedRuntime(Arc<Mutex<Option<Runtime>>>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        shut_down(&self.0);
    }
}

struct Pending {
    dest: Arc<str>,
    reply: oneshot::Sender<Result<Bytes, RemoteError>>,
}

struct Inner {
    client: Client,
    handle: Handle,
    /// The runtime of a node connected with `connect_blocking`: shut down by `close_blocking`,
    /// or by the last clone of the node (`OwnedRuntime`), never by a task.
    owned: Arc<Mutex<Option<Runtime>>>,
    id: String,
    reply_subject: Subject,
    opts: NodeOptions,
    /// The largest frame: the server's `max_payload`, or less.
    frame_limit: usize,
    counters: Counters,
    next_ask: AtomicU64,
    pending: Mutex<HashMap<u64, Pending>>,
    outboxes: Mutex<HashMap<String, Arc<Outbox>>>,
    flush: mpsc::UnboundedSender<Arc<Outbox>>,
    exports: Mutex<HashMap<String, oneshot::Sender<()>>>,
    /// Asks handed to exported actors and not answered yet, by sender.
    asks: Mutex<AsksInFlight>,
    /// Whether the heartbeat runs (from the first export on).
    beating: AtomicBool,
    closed: AtomicBool,
    /// Whether an unreadable trace context was logged (only the first is).
    trace_logged: AtomicBool,
    /// Shared with the connection's event callback, which exists before the node does.
    denied: Arc<AtomicU64>,
}

/// Asks an exported actor works on, by the subject its reply goes to.
#[derive(Default)]
struct AsksInFlight {
    total: u32,
    by_sender: HashMap<String, u32>,
}

/// The right to have one ask handled: taken before the ask reaches the actor, given back when
/// its reply is queued (or the ask is dropped). Move-only, so each admission is given back
/// exactly once.
struct AskPermit {
    node: Arc<Inner>,
    sender: Subject,
}

impl Drop for AskPermit {
    fn drop(&mut self) {
        let mut asks = lock(&self.node.asks);
        asks.total -= 1;
        if let Some(n) = asks.by_sender.get_mut(self.sender.as_str()) {
            *n -= 1;
            if *n == 0 {
                asks.by_sender.remove(self.sender.as_str());
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its data consistent: a poisoned lock is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks that `name` makes valid NATS subject tokens.
fn check_name(name: &str) -> Result<(), RemoteError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(RemoteError::InvalidName(name.to_string()))
    }
}

fn export_subject(name: &str) -> Subject {
    Subject::from(format!("troupe.x.{name}"))
}

fn down_subject(name: &str) -> Subject {
    Subject::from(format!("troupe.down.{name}"))
}

fn heartbeat_subject(node: &str) -> Subject {
    Subject::from(format!("troupe.hb.{node}"))
}

impl Node {
    /// Connects to the NATS server at `url` from inside a tokio runtime, whose tasks then carry
    /// the node's traffic.
    pub async fn connect(url: &str, opts: NodeOptions) -> Result<Node, RemoteError> {
        Self::connect_on(Handle::current(), url, opts).await
    }

    /// Connects from plain (non-async) code: the node runs its traffic on a runtime of its own
    /// with one thread, shut down by [`Node::close`] or when the last clone is dropped.
    pub fn connect_blocking(url: &str, opts: NodeOptions) -> Result<Node, RemoteError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("troupe-remote")
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Connect {
                url: url.to_string(),
                detail: format!("cannot start the node's runtime: {e}"),
            })?;
        let handle = runtime.handle().clone();
        // The runtime stays out of the future: a failed connect drops it here, outside any
        // async context.
        let node = handle.block_on(Self::connect_on(handle.clone(), url, opts))?;
        node.inner
            .owned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(runtime);
        Ok(node)
    }

    async fn connect_on(handle: Handle, url: &str, opts: NodeOptions) -> Result<Node, RemoteError> {
        opts.validate()?;
        let id = format!(
            "{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        );
        let denied = Arc::new(AtomicU64::new(0));
        let seen = denied.clone();
        let client = opts
            .nats_options()?
            .name(format!("troupe-{id}"))
            .connection_timeout(Duration::from_secs(5))
            .request_timeout(Some(opts.ask_timeout))
            .event_callback(move |event| {
                let seen = seen.clone();
                async move {
                    match event {
                        async_nats::Event::ServerError(async_nats::ServerError::Other(text))
                            if access::is_denial(&text) =>
                        {
                            seen.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!("the NATS server refused: {text}");
                        }
                        async_nats::Event::ServerError(e) => {
                            tracing::warn!("the NATS server says: {e}")
                        }
                        other => tracing::debug!("NATS connection: {other}"),
                    }
                }
            })
            .connect(servers(url)?)
            .await
            .map_err(|e| RemoteError::Connect {
                url: url.to_string(),
                detail: e.to_string(),
            })?;
        let frame_limit = client.server_info().max_payload.max(1024);
        // Never a NATS inbox of the client's (those end in a 22-character token of letters and
        // digits; the id has a '-').
        let reply_subject = Subject::from(format!("{}.{id}", opts.inbox_prefix));
        let mut replies =
            client
                .subscribe(reply_subject.clone())
                .await
                .map_err(|e| RemoteError::Connect {
                    url: url.to_string(),
                    detail: format!("cannot subscribe to the reply subject: {e}"),
                })?;
        // Replies cannot miss the subscription once the server has it.
        server_has_seen(&client)
            .await
            .map_err(|detail| RemoteError::Connect {
                url: url.to_string(),
                detail,
            })?;
        let (flush, mut to_flush) = mpsc::unbounded_channel::<Arc<Outbox>>();
        let inner = Arc::new(Inner {
            client,
            handle: handle.clone(),
            owned: Arc::new(Mutex::new(None)),
            id,
            reply_subject,
            opts,
            frame_limit,
            counters: Counters::default(),
            next_ask: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            outboxes: Mutex::new(HashMap::new()),
            flush,
            exports: Mutex::new(HashMap::new()),
            asks: Mutex::new(AsksInFlight::default()),
            beating: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            trace_logged: AtomicBool::new(false),
            denied,
        });
        // The writer: publishes what the outboxes hold, one frame per batch. A tell queued while
        // the writer is idle goes out at once; tells queued while it publishes wait for the next
        // round and leave together (flush on idle, batch under load).
        let weak = Arc::downgrade(&inner);
        handle.spawn(async move {
            while let Some(outbox) = to_flush.recv().await {
                let Some(node) = weak.upgrade() else { break };
                for frame in outbox.take() {
                    let sent = match &outbox.reply {
                        Some(reply) => {
                            node.client
                                .publish_with_reply(outbox.subject.clone(), reply.clone(), frame)
                                .await
                        }
                        None => node.client.publish(outbox.subject.clone(), frame).await,
                    };
                    match sent {
                        Ok(()) => add(&node.counters.frames_out, 1),
                        Err(e) => tracing::warn!(subject = %outbox.subject, "publish failed: {e}"),
                    }
                }
            }
        });
        // The reply reader.
        let weak = Arc::downgrade(&inner);
        handle.spawn(async move {
            while let Some(msg) = replies.next().await {
                let Some(node) = weak.upgrade() else { break };
                node.on_reply_frame(msg.payload);
            }
        });
        let owned = OwnedRuntime(inner.owned.clone());
        Ok(Node {
            inner,
            _runtime: Arc::new(owned),
        })
    }

    /// This node's id (its process id and start time), as watchers see it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The options it runs with.
    pub fn options(&self) -> &NodeOptions {
        &self.inner.opts
    }

    /// What it has sent, received and refused so far.
    pub fn stats(&self) -> NodeStats {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        NodeStats {
            frames_out: get(&c.frames_out),
            tells_out: get(&c.tells_out),
            asks_out: get(&c.asks_out),
            frames_in: get(&c.frames_in),
            entries_in: get(&c.entries_in),
            undeliverable: get(&c.undeliverable),
            traces_ignored: get(&c.traces_ignored),
            refused: RefusalKind::ALL
                .into_iter()
                .map(|k| (k, get(&c.refused[k.index()])))
                .collect(),
            denied: get(&self.inner.denied),
        }
    }

    /// Makes `addr` reachable from other processes under `name`, for the message types added
    /// with [`ExportBuilder::accept`]. Other message types are refused with
    /// [`RefusalKind::UnknownType`].
    pub fn export<A: Actor>(&self, name: &str, addr: Addr<A>) -> ExportBuilder<A> {
        ExportBuilder {
            node: self.clone(),
            name: name.to_string(),
            addr,
            routes: HashMap::new(),
            group: None,
        }
    }

    /// Stops exporting `name`: watchers learn it was unexported. Returns whether it was exported.
    pub fn unexport(&self, name: &str) -> bool {
        lock(&self.inner.exports)
            .remove(name)
            .is_some_and(|stop| stop.send(()).is_ok())
    }

    /// A typed address for the actor exported under `name`, wherever it runs. Nothing is
    /// checked until a message goes: a tell to a name nobody exports is lost as NATS loses it;
    /// an ask to one fails with [`RemoteError::Unreachable`].
    pub fn recipient<M: RemoteMessage>(
        &self,
        name: &str,
    ) -> Result<RemoteRecipient<M>, RemoteError> {
        check_name(name)?;
        let subject = export_subject(name);
        let outbox = self
            .inner
            .outbox(&subject, Some(self.inner.reply_subject.clone()));
        Ok(RemoteRecipient {
            node: self.clone(),
            name: Arc::from(name),
            outbox,
            _message: PhantomData,
        })
    }

    /// The id of the node that exports `name` now, or [`RemoteError::Unreachable`].
    pub async fn locate(&self, name: &str) -> Result<String, RemoteError> {
        check_name(name)?;
        self.inner.locate(name).await.map(|(node, _)| node)
    }

    /// Watches the actor exported under `name`: the returned [`RemoteWatch`] resolves when it
    /// stops, is unexported, or its process goes silent for
    /// [`NodeOptions::silence_limit`] of the exporter (`heartbeat` × `missed_heartbeats`,
    /// 300 ms by default), so a process killed outright is noticed within that bound plus one
    /// heartbeat. Fails with [`RemoteError::Unreachable`] if nothing exports `name` now.
    pub async fn watch(&self, name: &str) -> Result<RemoteWatch, RemoteError> {
        check_name(name)?;
        let client = &self.inner.client;
        // The down subject first: a stop after this point is seen.
        let mut downs = client
            .subscribe(down_subject(name))
            .await
            .map_err(|_| RemoteError::Unreachable(name.to_string()))?;
        server_has_seen(client)
            .await
            .map_err(|_| RemoteError::Unreachable(name.to_string()))?;
        let (node_id, beat_ms) = self.inner.locate(name).await?;
        let mut beats = client
            .subscribe(heartbeat_subject(&node_id))
            .await
            .map_err(|_| RemoteError::Unreachable(name.to_string()))?;
        let limit = Duration::from_millis(beat_ms as u64) * self.inner.opts.missed_heartbeats;
        let (tx, rx) = oneshot::channel();
        let version = self.inner.opts.reads();
        self.inner.handle.spawn(async move {
            let mut last = Instant::now();
            let mut tick = tokio::time::interval(limit / 4);
            let outcome = loop {
                tokio::select! {
                    beat = beats.next() => match beat {
                        Some(_) => last = Instant::now(),
                        None => break Down::Unreachable { silent_for: last.elapsed() },
                    },
                    msg = downs.next() => match msg {
                        Some(msg) => {
                            if let Some(down) = parse_down(&msg.payload, version.clone()) {
                                break down;
                            }
                        }
                        None => break Down::Unreachable { silent_for: last.elapsed() },
                    },
                    _ = tick.tick() => {
                        if last.elapsed() > limit {
                            break Down::Unreachable { silent_for: last.elapsed() };
                        }
                    }
                }
            };
            let _ = tx.send(outcome);
        });
        Ok(RemoteWatch {
            rx,
            handle: self.inner.handle.clone(),
        })
    }

    /// Unexports everything (watchers learn it), publishes what is queued, and closes the
    /// connection. Asks still waiting fail with [`RemoteError::Closed`].
    pub async fn close(&self) {
        self.inner.close().await;
    }

    /// [`Node::close`] from plain code.
    pub fn close_blocking(&self) {
        let inner = self.inner.clone();
        let handle = self.inner.handle.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        handle.spawn(async move {
            inner.close().await;
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(10));
        shut_down(&self.inner.owned);
    }

    /// The tokio runtime the node's traffic runs on (the caller's, or the node's own).
    pub fn runtime(&self) -> &Handle {
        &self.inner.handle
    }

    /// Runs `future` on the node's runtime, blocking this thread until it finishes. For plain
    /// threads and actors, never from inside an async context.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.inner.handle.block_on(future)
    }
}

impl Inner {
    /// Starts the heartbeat, once: a node says it is alive only from its first export on,
    /// since only exports are watched (and a client's server permissions need not let it
    /// publish heartbeats).
    fn start_heartbeat(self: &Arc<Self>) {
        if self.beating.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(self);
        let every = self.opts.heartbeat;
        let subject = heartbeat_subject(&self.id);
        self.handle.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(node) = weak.upgrade() else { break };
                if node.closed.load(Ordering::Acquire) {
                    break;
                }
                let _ = node.client.publish(subject.clone(), Bytes::new()).await;
            }
        });
    }

    /// Admits one ask of `sender`, or refuses it when the sender or the node already has as
    /// many in flight as it may.
    fn admit(self: &Arc<Self>, sender: &Subject) -> Result<AskPermit, Refusal> {
        let mut asks = lock(&self.asks);
        if asks.total >= self.opts.max_asks_in_flight {
            return Err(Refusal::new(
                RefusalKind::Overloaded,
                format!(
                    "this node works on {} asks already (max_asks_in_flight)",
                    asks.total
                ),
            ));
        }
        let mine = asks.by_sender.get(sender.as_str()).copied().unwrap_or(0);
        if mine >= self.opts.max_asks_per_sender {
            return Err(Refusal::new(
                RefusalKind::Overloaded,
                format!("{mine} asks of this sender are in flight already (max_asks_per_sender)"),
            ));
        }
        asks.total += 1;
        match asks.by_sender.get_mut(sender.as_str()) {
            Some(n) => *n += 1,
            None => {
                asks.by_sender.insert(sender.to_string(), 1);
            }
        }
        Ok(AskPermit {
            node: self.clone(),
            sender: sender.clone(),
        })
    }

    /// Checks a batch's entry count before any entry is read.
    fn check_count(&self, count: u32) -> Result<(), Refusal> {
        if count > self.opts.max_frame_entries {
            return Err(Refusal::new(
                RefusalKind::Oversized,
                format!(
                    "a frame of {count} entries, over the limit of {} (max_frame_entries)",
                    self.opts.max_frame_entries
                ),
            ));
        }
        Ok(())
    }

    fn outbox(&self, subject: &Subject, reply: Option<Subject>) -> Arc<Outbox> {
        lock(&self.outboxes)
            .entry(subject.to_string())
            .or_insert_with(|| {
                Arc::new(Outbox {
                    subject: subject.clone(),
                    reply,
                    state: Mutex::new(OutState::default()),
                })
            })
            .clone()
    }

    fn refuse(&self, refusal: &Refusal, subject: &str) {
        add(&self.counters.refused[refusal.kind.index()], 1);
        tracing::warn!(%subject, "refused: {refusal}");
    }

    /// The trace context to send with a tell or an ask now (see [`trace::outgoing`]): none to
    /// a peer set to a version without traces.
    fn trace_out(&self) -> Option<Vec<u8>> {
        if self.opts.wire_version < TRACE_VERSION {
            return None;
        }
        trace::outgoing()
    }

    /// A trace context that came with a message could not be read: counted, and said once.
    fn ignore_trace(&self, subject: &str, detail: &str) {
        add(&self.counters.traces_ignored, 1);
        if !self.trace_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                %subject,
                "a trace context was ignored, its message delivered without a parent span \
                 (later ones are only counted, in NodeStats::traces_ignored): {detail}"
            );
        }
    }

    /// Queues one entry for `outbox`; `write` appends it to a batch frame. `needs` is the
    /// oldest frame version whose layout has the entry: the frame it goes in is raised to it.
    fn queue(
        &self,
        outbox: &Arc<Outbox>,
        needs: u8,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(RemoteError::Closed);
        }
        let schedule = {
            let mut st = lock(&outbox.state);
            if st.bytes >= self.opts.max_backlog_bytes {
                return Err(RemoteError::Backlogged(st.bytes));
            }
            if st.count == 0 {
                st.current.clear();
                wire::start_batch(&mut st.current, self.opts.writes(MIN_WIRE_VERSION));
            }
            let mark = st.current.len();
            if let Err(e) = write(&mut st.current) {
                st.current.truncate(mark);
                return Err(e);
            }
            let size = st.current.len() - mark;
            let limit = self.frame_limit - wire::BATCH_HEADER;
            if size > limit {
                st.current.truncate(mark);
                return Err(RemoteError::TooLarge { size, limit });
            }
            if st.current.len() > self.frame_limit {
                // The entry does not fit beside the others: it starts the next frame.
                let entry = st.current.split_off(mark);
                st.seal();
                wire::start_batch(&mut st.current, self.opts.writes(MIN_WIRE_VERSION));
                st.current.extend_from_slice(&entry);
            }
            wire::raise_version(&mut st.current, self.opts.writes(needs));
            st.count += 1;
            st.bytes += size;
            if st.current.len() >= self.opts.batch_bytes || st.count >= self.opts.max_frame_entries
            {
                st.seal();
            }
            !std::mem::replace(&mut st.scheduled, true)
        };
        if schedule && self.flush.send(outbox.clone()).is_err() {
            return Err(RemoteError::Closed);
        }
        Ok(())
    }

    async fn locate(&self, name: &str) -> Result<(String, u32), RemoteError> {
        let mut frame = Vec::with_capacity(4);
        wire::header(&mut frame, self.opts.writes(MIN_WIRE_VERSION), Kind::Where);
        let reply = match tokio::time::timeout(
            self.opts.ask_timeout,
            self.client.request(export_subject(name), frame.into()),
        )
        .await
        {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::TimedOut => {
                return Err(RemoteError::TimedOut(self.opts.ask_timeout))
            }
            Err(_) => return Err(RemoteError::TimedOut(self.opts.ask_timeout)),
            Ok(Err(e)) => {
                tracing::debug!(%name, "locate: {e}");
                return Err(RemoteError::Unreachable(name.to_string()));
            }
        };
        let mut frame =
            wire::open(&reply.payload, self.opts.reads()).map_err(RemoteError::Refused)?;
        match frame.kind {
            Kind::Here => {
                let beat = frame.body.u32("heartbeat").map_err(RemoteError::Refused)?;
                Ok((frame.body.text(), beat))
            }
            Kind::Refused => Err(RemoteError::Refused(parse_refused(&mut frame.body).1)),
            other => Err(RemoteError::Refused(Refusal::new(
                RefusalKind::Malformed,
                format!("a {other:?} frame in answer to Where"),
            ))),
        }
    }

    /// A frame on this node's reply subject: replies to its asks, or a refusal of a frame it sent.
    fn on_reply_frame(&self, payload: Bytes) {
        add(&self.counters.frames_in, 1);
        let subject = self.reply_subject.as_str();
        if payload.len() > self.frame_limit {
            return self.refuse(
                &Refusal::new(
                    RefusalKind::Oversized,
                    format!("a frame of {} bytes", payload.len()),
                ),
                subject,
            );
        }
        let mut frame = match wire::open(&payload, self.opts.reads()) {
            Ok(frame) => frame,
            Err(refusal) => return self.refuse(&refusal, subject),
        };
        match frame.kind {
            Kind::Batch => {
                let result = (|| -> Result<(), Refusal> {
                    let count = frame.body.u32("count")?;
                    self.check_count(count)?;
                    for _ in 0..count {
                        let kind = frame.body.u8("entry kind")?;
                        let id = frame.body.u64("ask id")?;
                        let outcome = match kind {
                            ENTRY_OK => {
                                let bytes = frame.body.payload(self.opts.max_payload)?;
                                let start = bytes.as_ptr() as usize - payload.as_ptr() as usize;
                                Ok(payload.slice(start..start + bytes.len()))
                            }
                            ENTRY_ERR => {
                                let code = frame.body.u8("error code")?;
                                let detail = frame.body.short_text("error detail")?;
                                Err(error_from_code(code, detail))
                            }
                            other => {
                                return Err(Refusal::new(
                                    RefusalKind::Malformed,
                                    format!("entry kind {other} on a reply subject"),
                                ))
                            }
                        };
                        add(&self.counters.entries_in, 1);
                        if let Some(pending) = lock(&self.pending).remove(&id) {
                            let _ = pending.reply.send(outcome);
                        }
                    }
                    Ok(())
                })();
                if let Err(refusal) = result {
                    self.refuse(&refusal, subject);
                }
            }
            Kind::Refused => {
                let (dest, refusal) = parse_refused(&mut frame.body);
                tracing::warn!(%dest, "a frame sent there was refused: {refusal}");
                let mut pending = lock(&self.pending);
                let failed: Vec<u64> = pending
                    .iter()
                    .filter(|(_, p)| *p.dest == *dest)
                    .map(|(id, _)| *id)
                    .collect();
                for id in failed {
                    if let Some(p) = pending.remove(&id) {
                        let _ = p.reply.send(Err(RemoteError::Refused(refusal.clone())));
                    }
                }
            }
            other => self.refuse(
                &Refusal::new(
                    RefusalKind::Malformed,
                    format!("a {other:?} frame on a reply subject"),
                ),
                subject,
            ),
        }
    }

    async fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let exports: Vec<_> = lock(&self.exports).drain().collect();
        for (_, stop) in exports {
            let _ = stop.send(());
        }
        // Let the export tasks publish their Down frames and the writer drain.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = self.client.flush().await;
        for (_, p) in lock(&self.pending).drain() {
            let _ = p.reply.send(Err(RemoteError::Closed));
        }
    }
}

fn shut_down(owned: &Mutex<Option<Runtime>>) {
    if let Some(runtime) = lock(owned).take() {
        // Dropping a runtime blocks, which is refused inside an async context: hand it to a
        // thread of its own there.
        if Handle::try_current().is_ok() {
            std::thread::spawn(move || runtime.shutdown_background());
        } else {
            runtime.shutdown_background();
        }
    }
}

/// Returns once the server has processed everything this client sent before (its
/// subscriptions above all). `Client::flush` only empties the socket's buffer; this makes a
/// round trip: the server handles one connection's operations in order, so when a probe sent
/// to a fresh inbox comes back, every earlier subscription is in place.
async fn server_has_seen(client: &Client) -> Result<(), String> {
    let inbox = client.new_inbox();
    let mut probe = client
        .subscribe(inbox.clone())
        .await
        .map_err(|e| format!("cannot subscribe: {e}"))?;
    client
        .publish(inbox, Bytes::new())
        .await
        .map_err(|e| format!("cannot publish: {e}"))?;
    match tokio::time::timeout(Duration::from_secs(10), probe.next()).await {
        Ok(Some(_)) => Ok(()),
        _ => Err("the server did not answer within 10 s".to_string()),
    }
}

/// `url` as NATS server addresses: one URL, or several separated by commas (a cluster).
fn servers(url: &str) -> Result<Vec<async_nats::ServerAddr>, RemoteError> {
    url.split(',')
        .map(|one| {
            one.trim().parse().map_err(|e| RemoteError::Connect {
                url: url.to_string(),
                detail: format!("`{one}` is not a NATS server address: {e}"),
            })
        })
        .collect()
}

fn parse_refused(body: &mut wire::Reader<'_>) -> (String, Refusal) {
    let code = body.u8("refusal code").unwrap_or(0);
    let kind = RefusalKind::from_code(code).unwrap_or(RefusalKind::Malformed);
    let dest = body.short_text("refused subject").unwrap_or_default();
    (dest, Refusal::new(kind, body.text()))
}

fn error_from_code(code: u8, detail: String) -> RemoteError {
    match code {
        code::STOPPED => RemoteError::Actor(AskError::Stopped),
        code::PANICKED => RemoteError::Actor(AskError::Panicked),
        code::MAILBOX_FULL => RemoteError::Actor(AskError::MailboxFull),
        code::DROPPED => RemoteError::Actor(AskError::Dropped),
        code::NO_REPLY => RemoteError::Actor(AskError::NoReply),
        code::TIMED_OUT => RemoteError::TimedOut(Duration::ZERO),
        other => match RefusalKind::from_code(other) {
            Some(kind) => RemoteError::Refused(Refusal::new(kind, detail)),
            None => RemoteError::Refused(Refusal::new(
                RefusalKind::Malformed,
                format!("unknown error code {other}: {detail}"),
            )),
        },
    }
}

fn code_of(error: &AskError) -> u8 {
    match error {
        AskError::Stopped => code::STOPPED,
        AskError::Panicked => code::PANICKED,
        AskError::MailboxFull => code::MAILBOX_FULL,
        AskError::Dropped => code::DROPPED,
        AskError::NoReply => code::NO_REPLY,
        _ => code::TIMED_OUT,
    }
}

fn parse_down(payload: &[u8], version: RangeInclusive<u8>) -> Option<Down> {
    let mut frame = wire::open(payload, version).ok()?;
    if frame.kind != Kind::Down {
        return None;
    }
    let code = frame.body.u8("down code").ok()?;
    let reason = frame.body.text();
    Some(match code {
        down::STOPPED => Down::Stopped,
        down::FAILED => Down::Failed(reason),
        _ => Down::Unexported,
    })
}

#[derive(Default)]
struct OutState {
    ready: VecDeque<Bytes>,
    current: Vec<u8>,
    count: u32,
    bytes: usize,
    scheduled: bool,
}

impl OutState {
    fn seal(&mut self) {
        if self.count == 0 {
            self.current.clear();
            return;
        }
        wire::finish_batch(&mut self.current, self.count);
        let frame = std::mem::take(&mut self.current);
        self.ready.push_back(Bytes::from(frame));
        self.count = 0;
    }
}

/// Entries queued for one subject.
struct Outbox {
    subject: Subject,
    reply: Option<Subject>,
    state: Mutex<OutState>,
}

impl Outbox {
    fn take(&self) -> Vec<Bytes> {
        let mut st = lock(&self.state);
        st.seal();
        st.scheduled = false;
        st.bytes = 0;
        st.ready.drain(..).collect()
    }
}

/// What the actor exported under a name came to.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Down {
    /// It stopped normally.
    Stopped,
    /// It failed (and was not restarted); the failure as text.
    Failed(String),
    /// Its process unexported it (or closed its node).
    Unexported,
    /// Its process sent no heartbeat for this long: killed, hung, or cut off from NATS.
    Unreachable { silent_for: Duration },
}

/// Resolves when a watched remote actor is down. `.await` it, or [`RemoteWatch::wait_timeout`]
/// from plain code.
pub struct RemoteWatch {
    rx: oneshot::Receiver<Down>,
    handle: Handle,
}

impl RemoteWatch {
    /// Blocks until the actor is down, or `timeout` passes (`None`).
    pub fn wait_timeout(self, timeout: Duration) -> Option<Down> {
        let rx = self.rx;
        self.handle
            .block_on(async move { tokio::time::timeout(timeout, rx).await.ok()?.ok() })
    }
}

impl Future for RemoteWatch {
    type Output = Down;
    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Down> {
        Pin::new(&mut self.rx).poll(cx).map(|r| {
            r.unwrap_or(Down::Unreachable {
                silent_for: Duration::ZERO,
            })
        })
    }
}

/// A typed address of a remote actor: `tell` and `ask` as on an in-process
/// [`troupe::Recipient`]. Tells and asks from one recipient arrive in the order they were sent.
pub struct RemoteRecipient<M: RemoteMessage> {
    node: Node,
    name: Arc<str>,
    outbox: Arc<Outbox>,
    _message: PhantomData<fn(M)>,
}

impl<M: RemoteMessage> Clone for RemoteRecipient<M> {
    fn clone(&self) -> Self {
        Self {
            node: self.node.clone(),
            name: self.name.clone(),
            outbox: self.outbox.clone(),
            _message: PhantomData,
        }
    }
}

impl<M: RemoteMessage> RemoteRecipient<M> {
    /// The name it was exported under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Queues `msg` for the remote actor. Returns once it is queued: like an in-process tell it
    /// does not wait for delivery, and a message to a stopped actor is dropped there (counted
    /// as undeliverable by the far node).
    pub fn tell(&self, msg: M) -> Result<(), RemoteError> {
        let inner = &self.node.inner;
        let trace = inner.trace_out();
        let needs = trace.as_ref().map_or(MIN_WIRE_VERSION, |_| TRACE_VERSION);
        inner.queue(&self.outbox, needs, |buf| {
            match &trace {
                None => buf.push(ENTRY_TELL),
                Some(fields) => {
                    buf.push(ENTRY_TRACED_TELL);
                    wire::put_trace(buf, fields);
                }
            }
            wire::put_tag(buf, M::NAME, M::VERSION);
            wire::put_payload(buf, &msg).map_err(|e| RemoteError::Encode(e.to_string()))
        })?;
        add(&inner.counters.tells_out, 1);
        Ok(())
    }

    /// Sends `msg` and returns its reply: `.await` it, or [`RemoteAsk::wait`] from plain code.
    /// Fails after [`NodeOptions::ask_timeout`] with [`RemoteError::TimedOut`], or with
    /// [`RemoteError::Unreachable`] if by then nothing exports the name.
    pub fn ask(&self, msg: M) -> RemoteAsk<M::Reply> {
        let inner = &self.node.inner;
        let id = inner.next_ask.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&inner.pending).insert(
            id,
            Pending {
                dest: Arc::from(self.outbox.subject.as_str()),
                reply: tx,
            },
        );
        let trace = inner.trace_out();
        let needs = trace.as_ref().map_or(MIN_WIRE_VERSION, |_| TRACE_VERSION);
        let queued = inner.queue(&self.outbox, needs, |buf| {
            match &trace {
                None => buf.push(ENTRY_ASK),
                Some(_) => buf.push(ENTRY_TRACED_ASK),
            }
            buf.extend_from_slice(&id.to_le_bytes());
            if let Some(fields) = &trace {
                wire::put_trace(buf, fields);
            }
            wire::put_tag(buf, M::NAME, M::VERSION);
            wire::put_payload(buf, &msg).map_err(|e| RemoteError::Encode(e.to_string()))
        });
        // From here the entry goes with the ask, however it ends: answered, timed out,
        // refused at once, or dropped without being awaited.
        let pending = PendingGuard {
            node: self.node.clone(),
            id,
        };
        let early = match queued {
            Ok(()) => {
                add(&inner.counters.asks_out, 1);
                None
            }
            Err(e) => Some(e),
        };
        RemoteAsk {
            pending,
            name: self.name.clone(),
            rx,
            early,
            timeout: inner.opts.ask_timeout,
            _reply: PhantomData,
        }
    }
}

/// The reply to a remote ask.
#[must_use = "an ask does nothing useful unless its reply is awaited or waited for"]
pub struct RemoteAsk<R> {
    /// Removes the pending entry when the ask goes; holds the node.
    pending: PendingGuard,
    name: Arc<str>,
    rx: oneshot::Receiver<Result<Bytes, RemoteError>>,
    early: Option<RemoteError>,
    timeout: Duration,
    _reply: PhantomData<fn() -> R>,
}

impl<R: DeserializeOwned + Send + 'static> RemoteAsk<R> {
    /// Waits at most this long instead of the node's `ask_timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Blocks until the reply comes (plain threads and actors; never inside an async context).
    pub fn wait(self) -> Result<R, RemoteError> {
        let handle = self.pending.node.inner.handle.clone();
        handle.block_on(self.into_future())
    }

    async fn run(self) -> Result<R, RemoteError> {
        if let Some(e) = self.early {
            return Err(e);
        }
        let outcome = tokio::time::timeout(self.timeout, self.rx).await;
        let node = self.pending.node.clone();
        drop(self.pending);
        match outcome {
            Ok(Ok(Ok(bytes))) => {
                wire::decode::<R>(&bytes, "reply").map_err(|r| RemoteError::Decode(r.detail))
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(RemoteError::Closed),
            Err(_) => {
                // Say which: nobody exports the name (any more), or it is slow. The look-up
                // takes no longer than the ask itself was given.
                let look = tokio::time::timeout(self.timeout, node.inner.locate(&self.name));
                match look
                    .await
                    .unwrap_or(Err(RemoteError::TimedOut(self.timeout)))
                {
                    Err(RemoteError::Unreachable(name)) => Err(RemoteError::Unreachable(name)),
                    _ => Err(RemoteError::TimedOut(self.timeout)),
                }
            }
        }
    }
}

/// Forgets a pending ask when its waiter goes (answered, timed out or dropped).
struct PendingGuard {
    node: Node,
    id: u64,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        lock(&self.node.inner.pending).remove(&self.id);
    }
}

impl<R: DeserializeOwned + Send + 'static> IntoFuture for RemoteAsk<R> {
    type Output = Result<R, RemoteError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

type Route =
    Box<dyn Fn(&Arc<Inner>, &[u8], Option<(u64, &Subject)>) -> Result<(), Refusal> + Send + Sync>;

/// Builds an export: which message types the exported actor takes from the wire.
pub struct ExportBuilder<A: Actor> {
    node: Node,
    name: String,
    addr: Addr<A>,
    routes: HashMap<&'static str, (u16, Route)>,
    group: Option<String>,
}

impl<A: Actor> ExportBuilder<A> {
    /// Exports into a queue group: actors exported under the same name and group (in any
    /// process) share the traffic, each batch frame going to one of them. For stateless
    /// actors; one sender's messages may then be handled by different actors.
    pub fn in_group(mut self, group: &str) -> Self {
        self.group = Some(group.to_string());
        self
    }

    /// Accepts `M` from the wire: decoded, then told or asked to the actor as in-process.
    /// Written `accept::<M, _>()`: the `_` is how the actor handles `M` (a `Handler` or a
    /// `DeferredHandler`), which the compiler infers.
    pub fn accept<M: RemoteMessage, K: HandlerKind>(mut self) -> Self
    where
        A: Accepts<M, K>,
    {
        let addr = self.addr.clone();
        let route: Route = Box::new(move |node, payload, ask| {
            let msg: M = wire::decode(payload, M::NAME)?;
            match ask {
                None => {
                    if addr.tell(msg).is_err() {
                        add(&node.counters.undeliverable, 1);
                    }
                }
                Some((id, reply_to)) => {
                    let permit = node.admit(reply_to)?;
                    // Awaited on the node's runtime, whose thread reads the frames: a turn
                    // run there would stop the reading while a handler sleeps.
                    let ask = addr.ask(msg).without_help();
                    let node = node.clone();
                    let outbox = node.outbox(reply_to, None);
                    node.handle.clone().spawn(async move {
                        let result = ask.await;
                        // Given back once the reply is queued: what waits in the outbox is
                        // bounded by its own backlog limit.
                        let _permit = permit;
                        let queued = node.queue(&outbox, MIN_WIRE_VERSION, |buf| match &result {
                            Ok(reply) => {
                                buf.push(ENTRY_OK);
                                buf.extend_from_slice(&id.to_le_bytes());
                                wire::put_payload(buf, reply)
                                    .map_err(|e| RemoteError::Encode(e.to_string()))
                            }
                            Err(e) => {
                                wire::put_err(buf, id, code_of(e), &e.to_string());
                                Ok(())
                            }
                        });
                        if let Err(e) = queued {
                            // The asker times out; say why here.
                            tracing::warn!(subject = %outbox.subject, "a reply was not sent: {e}");
                            if matches!(e, RemoteError::Encode(_) | RemoteError::TooLarge { .. }) {
                                let _ = node.queue(&outbox, MIN_WIRE_VERSION, |buf| {
                                    wire::put_err(
                                        buf,
                                        id,
                                        RefusalKind::Oversized.code(),
                                        &e.to_string(),
                                    );
                                    Ok(())
                                });
                            }
                        }
                    });
                }
            }
            Ok(())
        });
        self.routes.insert(M::NAME, (M::VERSION, route));
        self
    }

    /// Starts serving the export. Fails if the name is invalid or already exported by this node.
    pub async fn start(self) -> Result<(), RemoteError> {
        check_name(&self.name)?;
        let inner = self.node.inner.clone();
        if inner.closed.load(Ordering::Acquire) {
            return Err(RemoteError::Closed);
        }
        if let Some(group) = &self.group {
            check_name(group)?;
        }
        let subscribed = match &self.group {
            Some(group) => {
                inner
                    .client
                    .queue_subscribe(export_subject(&self.name), group.clone())
                    .await
            }
            None => inner.client.subscribe(export_subject(&self.name)).await,
        };
        let mut sub = subscribed.map_err(|_| RemoteError::Unreachable(self.name.clone()))?;
        // Exported once the server has the subscription: a message sent after `start` returns
        // reaches the actor.
        server_has_seen(&inner.client)
            .await
            .map_err(|_| RemoteError::Unreachable(self.name.clone()))?;
        let (stop_tx, mut stop_rx) = oneshot::channel();
        {
            let mut exports = lock(&inner.exports);
            if exports.contains_key(&self.name) {
                return Err(RemoteError::InvalidName(format!(
                    "{} (already exported by this node)",
                    self.name
                )));
            }
            exports.insert(self.name.clone(), stop_tx);
        }
        inner.start_heartbeat();
        let name = self.name;
        let routes = self.routes;
        let stopped = self.addr.stopped();
        let node = inner.clone();
        inner.handle.spawn(async move {
            let mut stopped = std::pin::pin!(stopped);
            let reason = loop {
                tokio::select! {
                    msg = sub.next() => match msg {
                        Some(msg) => node.on_export_frame(&name, &routes, msg).await,
                        None => break None,
                    },
                    reason = &mut stopped => break reason.ok(),
                    _ = &mut stop_rx => break None,
                }
            };
            // Unsubscribe before saying so: a watcher that looks up the name after the Down
            // finds nobody.
            let _ = sub.unsubscribe().await;
            lock(&node.exports).remove(&name);
            let mut frame = Vec::new();
            wire::header(&mut frame, node.opts.writes(MIN_WIRE_VERSION), Kind::Down);
            match reason {
                Some(StopReason::Normal) => frame.push(down::STOPPED),
                Some(StopReason::Failed(failure)) => {
                    frame.push(down::FAILED);
                    frame.extend_from_slice(failure.to_string().as_bytes());
                }
                _ => frame.push(down::UNEXPORTED),
            }
            let _ = node.client.publish(down_subject(&name), frame.into()).await;
            let _ = node.client.flush().await;
        });
        Ok(())
    }

    /// [`ExportBuilder::start`] from plain code.
    pub fn start_blocking(self) -> Result<(), RemoteError> {
        let handle = self.node.inner.handle.clone();
        handle.block_on(self.start())
    }
}

impl Inner {
    async fn on_export_frame(
        self: &Arc<Self>,
        name: &str,
        routes: &HashMap<&'static str, (u16, Route)>,
        msg: async_nats::Message,
    ) {
        add(&self.counters.frames_in, 1);
        let subject = msg.subject.as_str();
        let reply_to = msg.reply.clone();
        let refused = |refusal: Refusal| async move {
            self.refuse(&refusal, subject);
            if let Some(reply) = reply_to {
                let mut frame = Vec::new();
                wire::header(
                    &mut frame,
                    self.opts.writes(MIN_WIRE_VERSION),
                    Kind::Refused,
                );
                frame.push(refusal.kind.code());
                frame.extend_from_slice(&(subject.len() as u16).to_le_bytes());
                frame.extend_from_slice(subject.as_bytes());
                frame.extend_from_slice(refusal.detail.as_bytes());
                let _ = self.client.publish(reply, frame.into()).await;
            }
        };
        if msg.payload.len() > self.frame_limit {
            return refused(Refusal::new(
                RefusalKind::Oversized,
                format!("a frame of {} bytes", msg.payload.len()),
            ))
            .await;
        }
        let mut frame = match wire::open(&msg.payload, self.opts.reads()) {
            Ok(frame) => frame,
            Err(refusal) => return refused(refusal).await,
        };
        match frame.kind {
            Kind::Where => {
                if let Some(reply) = &msg.reply {
                    let mut here = Vec::new();
                    wire::header(&mut here, self.opts.writes(MIN_WIRE_VERSION), Kind::Here);
                    let beat = self.opts.heartbeat.as_millis() as u32;
                    here.extend_from_slice(&beat.to_le_bytes());
                    here.extend_from_slice(self.id.as_bytes());
                    let _ = self.client.publish(reply.clone(), here.into()).await;
                }
            }
            Kind::Batch => {
                let reply = msg.reply.as_ref();
                // Asks refused for load are counted and answered one by one, and said once
                // per frame: a flood of them must not flood the log too.
                let mut overloaded: Option<Refusal> = None;
                let mut overloaded_n = 0u64;
                let result = (|| -> Result<(), Refusal> {
                    let count = frame.body.u32("count")?;
                    self.check_count(count)?;
                    for _ in 0..count {
                        let kind = frame.body.u8("entry kind")?;
                        let traced = matches!(kind, ENTRY_TRACED_TELL | ENTRY_TRACED_ASK);
                        if traced && frame.version < TRACE_VERSION {
                            return Err(Refusal::new(
                                RefusalKind::Malformed,
                                format!(
                                    "entry kind {kind} in a frame of version {}",
                                    frame.version
                                ),
                            ));
                        }
                        let ask = match kind {
                            ENTRY_TELL | ENTRY_TRACED_TELL => None,
                            ENTRY_ASK | ENTRY_TRACED_ASK => Some(frame.body.u64("ask id")?),
                            other => {
                                return Err(Refusal::new(
                                    RefusalKind::Malformed,
                                    format!("entry kind {other} sent to an export"),
                                ))
                            }
                        };
                        let trace = if traced { frame.body.trace()? } else { &[] };
                        let (type_name, version) = frame.body.tag()?;
                        let payload = frame.body.payload(self.opts.max_payload)?;
                        add(&self.counters.entries_in, 1);
                        let ask = match (ask, reply) {
                            (Some(id), Some(reply)) => Some((id, reply)),
                            (Some(_), None) => {
                                self.refuse(
                                    &Refusal::new(
                                        RefusalKind::Malformed,
                                        "an ask with no reply subject",
                                    ),
                                    subject,
                                );
                                continue;
                            }
                            (None, _) => None,
                        };
                        let routed = match routes.get(type_name) {
                            None => Err(Refusal::new(
                                RefusalKind::UnknownType,
                                format!("`{name}` does not accept `{type_name}`"),
                            )),
                            Some((v, _)) if *v != version => Err(Refusal::new(
                                RefusalKind::TypeVersion,
                                format!(
                                    "`{type_name}` version {version} sent, `{name}` accepts version {v}"
                                ),
                            )),
                            Some((_, route)) => {
                                // A traced message is told or asked inside a span parented
                                // to its sender's: the actor's own span becomes its child.
                                let span = if trace.is_empty() {
                                    None
                                } else {
                                    trace::receive_span(trace, name, type_name, ask.is_some())
                                        .unwrap_or_else(|detail| {
                                            self.ignore_trace(subject, &detail);
                                            None
                                        })
                                };
                                match span {
                                    Some(span) => span.in_scope(|| route(self, payload, ask)),
                                    None => route(self, payload, ask),
                                }
                            }
                        };
                        if let Err(refusal) = routed {
                            if refusal.kind == RefusalKind::Overloaded {
                                add(&self.counters.refused[refusal.kind.index()], 1);
                                overloaded_n += 1;
                                overloaded.get_or_insert_with(|| refusal.clone());
                            } else {
                                self.refuse(&refusal, subject);
                            }
                            if let Some((id, reply)) = ask {
                                let outbox = self.outbox(reply, None);
                                let _ = self.queue(&outbox, MIN_WIRE_VERSION, |buf| {
                                    wire::put_err(buf, id, refusal.kind.code(), &refusal.detail);
                                    Ok(())
                                });
                            }
                        }
                    }
                    Ok(())
                })();
                if let Some(first) = overloaded {
                    tracing::warn!(%subject, "refused {overloaded_n} asks of one frame: {first}");
                }
                if let Err(refusal) = result {
                    refused(refusal).await;
                }
            }
            other => {
                refused(Refusal::new(
                    RefusalKind::Malformed,
                    format!("a {other:?} frame sent to an export"),
                ))
                .await
            }
        }
    }
}
