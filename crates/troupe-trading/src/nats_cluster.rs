//! The distributed mode's production world ([`cluster`](crate::cluster)'s traits over NATS):
//! a troupe-remote [`Node`] is the [`Network`], NATS key-value buckets (JetStream) are the
//! [`KeyValue`] stores, the process is the process. Each method is one call to troupe-remote
//! or async-nats, as the node logic made before the seam existed.

use std::future::{Future, IntoFuture};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use troupe::kind::Kind;
use troupe::{Accepts, Actor, Addr};
use troupe_remote::{ExportBuilder, Node, NodeOptions, RemoteError, RemoteRecipient};

use crate::cluster::{Cluster, Export, KeyValue, KvEntry, KvError, Network, OrderLog, Peer, Wire};
use crate::dist::{NodeConfig, NodeError};
use crate::log::Journal;
use crate::order::Order;

impl Network for Node {
    type Peer<M: Wire> = RemoteRecipient<M>;
    type Export<A: Actor> = ExportBuilder<A>;

    fn recipient<M: Wire>(&self, name: &str) -> Result<RemoteRecipient<M>, RemoteError> {
        Node::recipient(self, name)
    }

    fn export<A: Actor>(&self, name: &str, addr: Addr<A>) -> ExportBuilder<A> {
        Node::export(self, name, addr)
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.runtime().spawn(task);
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl<M: Wire> Peer<M> for RemoteRecipient<M> {
    fn ask(
        &self,
        msg: M,
        timeout: Duration,
    ) -> impl Future<Output = Result<M::Reply, RemoteError>> + Send + 'static {
        RemoteRecipient::ask(self, msg)
            .timeout(timeout)
            .into_future()
    }
}

impl<A: Actor> Export<A> for ExportBuilder<A> {
    fn accept<M: Wire, K: Kind>(self) -> Self
    where
        A: Accepts<M, K>,
    {
        ExportBuilder::accept::<M, K>(self)
    }

    fn in_group(self, group: &str) -> Self {
        ExportBuilder::in_group(self, group)
    }

    fn start(self) -> Result<(), RemoteError> {
        self.start_blocking()
    }
}

/// A NATS key-value bucket, every call bounded by `patience`.
///
/// async-nats waits up to 30 s for a write's acknowledgement (5 s for a read): a write whose
/// answer was lost held a primary's sync write that long, so that its standby was not named
/// when its primary was killed (the real-process tests, 1 in 3 runs). Bounded, a call that
/// takes longer is an error, which every caller already takes as "the outcome is unknown:
/// read again".
#[derive(Clone)]
pub struct NatsBucket {
    store: kv::Store,
    patience: Duration,
}

impl NatsBucket {
    async fn bounded<T, E: std::fmt::Display>(
        &self,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, KvError> {
        match tokio::time::timeout(self.patience, call).await {
            Ok(result) => result.map_err(kv_error),
            Err(_) => Err(KvError(format!(
                "no answer from the store within {:?}",
                self.patience
            ))),
        }
    }
}

fn kv_error<E: std::fmt::Display>(e: E) -> KvError {
    KvError(e.to_string())
}

impl KeyValue for NatsBucket {
    async fn entry(&self, key: &str) -> Result<Option<KvEntry>, KvError> {
        let entry = self.bounded(self.store.entry(key.to_string())).await?;
        Ok(entry.map(|e| KvEntry {
            value: e.value,
            revision: e.revision,
        }))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<u64, KvError> {
        self.bounded(self.store.create(key, value)).await
    }

    async fn update(&self, key: &str, value: Bytes, revision: u64) -> Result<u64, KvError> {
        self.bounded(self.store.update(key, value, revision)).await
    }
}

/// The lease bucket's name.
pub const LEASE_BUCKET: &str = "trading_lease";
/// The sync bucket's name.
pub const SYNC_BUCKET: &str = "trading_sync";

/// A node's world over NATS: its troupe-remote connection and the two buckets.
#[derive(Clone)]
pub struct NatsCluster {
    node: Node,
    leases: NatsBucket,
    syncs: NatsBucket,
}

fn nats<E: std::fmt::Display>(e: E) -> NodeError {
    NodeError::Nats(e.to_string())
}

impl NatsCluster {
    /// Opens (or creates) the lease and sync buckets on the servers of `config.nats`, with a
    /// connection of its own for JetStream, beside `node` for messages, signed in as `options`
    /// say (the same user as `node`).
    pub async fn open(
        node: Node,
        config: &NodeConfig,
        options: &NodeOptions,
    ) -> Result<Self, NodeError> {
        let servers: Vec<async_nats::ServerAddr> = config
            .nats
            .split(',')
            .map(|u| u.trim().parse().map_err(nats))
            .collect::<Result<_, _>>()?;
        let client = options
            .nats_options()
            .map_err(nats)?
            .retry_on_initial_connect()
            // A bucket request the server refuses for lack of permission only times out here:
            // say why on the node's stderr.
            .event_callback(|event| async move {
                if let async_nats::Event::ServerError(e) = event {
                    eprintln!("nats (key-value connection): {e}");
                }
            })
            .connect(servers)
            .await
            .map_err(nats)?;
        let js = jetstream::new(client);
        // Replicated on every server of a cluster, up to 3 (a lone server keeps one copy).
        let replicas = config.nats.split(',').count().clamp(1, 3);
        let bucket = |name: &str, max_age: Duration| kv::Config {
            bucket: name.to_string(),
            history: 1,
            max_age,
            num_replicas: replicas,
            ..Default::default()
        };
        // A cluster's JetStream needs a meta leader first: retry for a while.
        let open = |name: &'static str, max_age: Duration| {
            let js = js.clone();
            let config = bucket(name, max_age);
            async move {
                let end = Instant::now() + Duration::from_secs(30);
                loop {
                    let tried = match js.get_key_value(name).await {
                        Ok(store) => Ok(store),
                        Err(_) => js.create_key_value(config.clone()).await.map_err(nats),
                    };
                    match tried {
                        Ok(store) => return Ok(store),
                        Err(e) if Instant::now() > end => return Err(e),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
        };
        // Half a lease: a renewal that waits longer could not have kept the lease anyway.
        let patience = (config.lease / 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
        let leases = NatsBucket {
            store: open(LEASE_BUCKET, config.lease).await?,
            patience,
        };
        let syncs = NatsBucket {
            store: open(SYNC_BUCKET, Duration::ZERO).await?,
            patience,
        };
        Ok(NatsCluster {
            node,
            leases,
            syncs,
        })
    }

    /// The troupe-remote connection.
    pub fn node(&self) -> &Node {
        &self.node
    }
}

impl Network for NatsCluster {
    type Peer<M: Wire> = RemoteRecipient<M>;
    type Export<A: Actor> = ExportBuilder<A>;

    fn recipient<M: Wire>(&self, name: &str) -> Result<RemoteRecipient<M>, RemoteError> {
        self.node.recipient(name)
    }

    fn export<A: Actor>(&self, name: &str, addr: Addr<A>) -> ExportBuilder<A> {
        self.node.export(name, addr)
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.node.runtime().spawn(task);
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}

impl Cluster for NatsCluster {
    type Bucket = NatsBucket;

    fn leases(&self) -> &NatsBucket {
        &self.leases
    }

    fn syncs(&self) -> &NatsBucket {
        &self.syncs
    }

    fn exit(&self, code: i32, why: &str) {
        eprintln!("{why}");
        std::process::exit(code);
    }
}

/// A node's transaction log on disk: each order appended and committed (written per order,
/// as the log mode promises).
pub struct JournalLog(pub Journal);

impl OrderLog for JournalLog {
    fn append(&mut self, order: &Order) -> Result<(), String> {
        self.0.append(order);
        self.0.commit().map_err(|e| format!("log: {e}"))
    }

    fn cut_back(&mut self, keep: u64) -> Result<(), String> {
        self.0.cut_back(keep).map_err(|e| format!("log: {e}"))
    }
}
