//! The trading system across processes: engine nodes as separate `troupe-trading node`
//! processes, a real `nats-server` with JetStream (installed by
//! `scripts/install-nats-server.sh` when missing), clients placing orders while a primary is
//! killed outright, or paused past its lease and resumed.
//!
//! Every check is on state: every acknowledged order is in the survivor's history exactly
//! once, primary and rejoined standby hold equal books, and no sequence number was ever
//! acknowledged for two different orders (two primaries).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use troupe_remote::server::NatsServer;
use troupe_remote::{Node, NodeOptions};
use troupe_trading::dist::{DistAck, DistClient, NodeState, Placed, WireOrder};
use troupe_trading::dist_harness::{self as harness, state, NodeProcess};

const LEASE_MS: u64 = 1000;

/// The tests run one at a time. Each starts nats-server (three of them for the kill test) and
/// four or two node processes, and checks leases of one second and failover within a few:
/// with both at once on a 2-core machine, lease renewals and takeovers fell behind those
/// limits (2 of 3 runs failed, with no code change, while each test alone passed).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds [`ONE_AT_A_TIME`] for a test (a test that failed while holding it does not stop the
/// next one).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn start_node(url: &str, pair: usize, name: &str, dir: &Path) -> NodeProcess {
    NodeProcess::start(
        Path::new(env!("CARGO_BIN_EXE_troupe-trading")),
        url,
        pair,
        name,
        dir,
        Duration::from_millis(LEASE_MS),
    )
    .expect("start a node")
}

/// Waits until one node of the pair is primary; returns its name.
fn primary_of(node: &Node, pair: usize, names: &[&str], limit: Duration) -> String {
    harness::wait_primary(node, pair, names, limit)
        .unwrap_or_else(|| panic!("pair {pair} has no primary"))
        .node
}

fn wait_in_step(node: &Node, pair: usize, names: [&str; 2]) -> (NodeState, NodeState) {
    harness::wait_in_step(node, pair, names, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("pair {pair} never got in step"))
}

/// Starts again every node process that has ended (as a supervisor would).
fn revive(procs: &mut HashMap<String, NodeProcess>, url: &str, dirs: &HashMap<String, PathBuf>) {
    for (name, proc) in procs.iter_mut() {
        if let Some(status) = proc.try_wait() {
            eprintln!("node {name} ended ({status}); starting it again");
            *proc = start_node(url, proc.pair, name, &dirs[name]);
        }
    }
}

/// Every acknowledgement the clients received, by pair.
#[derive(Default)]
struct Acks {
    /// (pair, client, client order id) -> the ack (None: found applied on a resend).
    by_key: HashMap<(usize, u32, u64), Option<DistAck>>,
    /// When each ack arrived, with its epoch.
    times: Vec<(Instant, usize, u64)>,
}

/// Instruments 0-4 are pair 0's books, 5-9 pair 1's (the seed market).
fn order(client: u32, id: u64, pairs: &[usize]) -> (usize, WireOrder) {
    let pair = pairs[(id as usize) % pairs.len()];
    let instrument = (pair * 5) as u16 + (id % 5) as u16;
    let buy = (id / 5 + client as u64).is_multiple_of(2);
    (
        pair,
        WireOrder {
            client,
            client_order_id: id,
            instrument,
            buy,
            price: 100 + (id % 7) as i32 - 3,
            volume: 10 + (id % 13) as i32,
        },
    )
}

/// Clients placing orders until `stop` is set; every order is acknowledged before the next.
fn run_clients(
    node: &Node,
    clients: u32,
    pairs: Vec<usize>,
    acks: Arc<Mutex<Acks>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<u64>> {
    (0..clients)
        .map(|c| {
            let mut client = DistClient::new(node).unwrap();
            let acks = acks.clone();
            let stop = stop.clone();
            let pairs = pairs.clone();
            node.runtime().spawn(async move {
                let mut id = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    id += 1;
                    let (pair, o) = order(c, id, &pairs);
                    match client.place(o, Duration::from_secs(30)).await {
                        Ok(Placed::Acked(ack)) => {
                            let mut a = acks.lock().unwrap();
                            let epoch = ack.map_or(0, |a| a.epoch);
                            a.times.push((Instant::now(), pair, epoch));
                            assert!(
                                a.by_key.insert((pair, c, id), ack).is_none(),
                                "an order acknowledged twice to its client"
                            );
                        }
                        Ok(Placed::Rejected(why)) => panic!("order {c}/{id} rejected: {why}"),
                        Err(e) => panic!("order {c}/{id} never acknowledged: {e}"),
                    }
                }
                id
            })
        })
        .collect()
}

#[track_caller]
fn wait_acks(acks: &Arc<Mutex<Acks>>, n: usize) {
    let end = Instant::now() + Duration::from_secs(60);
    while acks.lock().unwrap().by_key.len() < n {
        assert!(
            Instant::now() < end,
            "orders stalled at {} of {n}",
            acks.lock().unwrap().by_key.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Checks that every acknowledged order of `pair` is in `primary`'s history exactly once,
/// that nothing else is (clients resend until acknowledged), and that no sequence number
/// was acknowledged for two orders.
fn check_history(acks: &Acks, pair: usize, primary: &NodeState) {
    let acked: BTreeSet<(u32, u64)> = acks
        .by_key
        .keys()
        .filter(|(p, _, _)| *p == pair)
        .map(|(_, c, id)| (*c, *id))
        .collect();
    let mut seen = BTreeSet::new();
    for key in &primary.keys {
        assert!(
            seen.insert(*key),
            "order {key:?} applied twice in pair {pair}"
        );
    }
    assert_eq!(
        seen, acked,
        "pair {pair}: the history holds exactly the acknowledged orders"
    );
    let mut by_seq: BTreeMap<u64, (u32, u64)> = BTreeMap::new();
    for ((p, c, id), ack) in &acks.by_key {
        if let (true, Some(ack)) = (*p == pair, ack) {
            if let Some(other) = by_seq.insert(ack.seq, (*c, *id)) {
                panic!(
                    "pair {pair}: seq {} acknowledged for {other:?} and {:?}",
                    ack.seq,
                    (c, id)
                );
            }
            assert_eq!(
                primary.keys[(ack.seq - 1) as usize],
                (*c, *id),
                "pair {pair}: the ack's sequence number is the order's place in the history"
            );
        }
    }
}

fn dirs(root: &Path, names: &[&str]) -> HashMap<String, PathBuf> {
    names
        .iter()
        .map(|n| (n.to_string(), root.join(n)))
        .collect()
}

#[test]
fn kill_9_of_a_primary_loses_no_acknowledged_order_and_the_node_rejoins() {
    let _alone = one_at_a_time();
    // A 3-node NATS cluster, the key-value buckets replicated on all three; every process
    // knows every server.
    let mut nats = NatsServer::cluster_jetstream(3).expect("a 3-node nats-server cluster");
    let url = NatsServer::urls(&nats);
    let root = tempfile::tempdir().unwrap();
    let names = ["p0a", "p0b", "p1a", "p1b"];
    let dirs = dirs(root.path(), &names);
    let mut procs: HashMap<String, NodeProcess> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        procs.insert(
            name.to_string(),
            start_node(&url, i / 2, name, &dirs[*name]),
        );
    }
    let node = Node::connect_blocking(&url, NodeOptions::default()).unwrap();
    let p0 = primary_of(&node, 0, &["p0a", "p0b"], Duration::from_secs(20));
    let p1 = primary_of(&node, 1, &["p1a", "p1b"], Duration::from_secs(20));
    let acks = Arc::new(Mutex::new(Acks::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks = run_clients(&node, 4, vec![0, 1], acks.clone(), stop.clone());

    wait_acks(&acks, 400);
    // The standby of pair 0 is in step and named before the kill.
    let standby0 = if p0 == "p0a" { "p0b" } else { "p0a" };
    wait_in_step(&node, 0, ["p0a", "p0b"]);
    let killed_at = Instant::now();
    let epoch_before = state(&node, 0, standby0).unwrap().epoch;
    drop(procs.remove(&p0)); // SIGKILL
    let new0 = primary_of(&node, 0, &[standby0], Duration::from_secs(20));
    assert_eq!(new0, standby0);
    let _ = new0;
    // The first acknowledgement from the new primary.
    let end = Instant::now() + Duration::from_secs(20);
    let failover = loop {
        let first = acks
            .lock()
            .unwrap()
            .times
            .iter()
            .find(|(t, pair, epoch)| *t > killed_at && *pair == 0 && *epoch > epoch_before)
            .map(|(t, _, _)| *t - killed_at);
        if let Some(d) = first {
            break d;
        }
        assert!(
            Instant::now() < end,
            "no acknowledgement from a new primary of pair 0"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!(
        "pair 0 failed over: first acknowledgement from the new primary {failover:?} after kill -9"
    );
    assert!(failover < Duration::from_millis(LEASE_MS * 3 + 2000));

    // The killed node comes back as standby and catches up.
    procs.insert(p0.clone(), start_node(&url, 0, &p0, &dirs[&p0]));
    let total = acks.lock().unwrap().by_key.len();
    wait_acks(&acks, total + 400);

    // Pair 1 was not disturbed by pair 0's failover: the same primary.
    assert_eq!(
        harness::wait_primary(&node, 1, &["p1a", "p1b"], Duration::from_secs(5)).map(|s| s.node),
        Some(p1.clone()),
        "pair 1 kept its primary"
    );

    // A NATS server of the cluster killed under load: the clients and nodes connected to it
    // reconnect to the others, the buckets keep their quorum (2 of 3), and orders go on. A
    // primary whose lease ran out while the buckets elected a new leader may lose it to its
    // standby and end itself (exit 3): like a supervisor would, the test starts it again.
    nats[1].kill();
    let total = acks.lock().unwrap().by_key.len();
    let end = Instant::now() + Duration::from_secs(90);
    while acks.lock().unwrap().by_key.len() < total + 400 {
        assert!(
            Instant::now() < end,
            "orders stalled after a NATS server was killed"
        );
        revive(&mut procs, &url, &dirs);
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in tasks {
        node.block_on(task).expect("a client task");
    }
    revive(&mut procs, &url, &dirs);
    let (primary0, standby0_state) = wait_in_step(&node, 0, ["p0a", "p0b"]);
    assert_eq!(primary0.hash, standby0_state.hash, "pair 0: equal books");
    assert_eq!(
        primary0.keys, standby0_state.keys,
        "pair 0: equal histories"
    );
    let acks = acks.lock().unwrap();
    check_history(&acks, 0, &primary0);

    let (primary1, standby1) = wait_in_step(&node, 1, ["p1a", "p1b"]);
    assert_eq!(primary1.hash, standby1.hash, "pair 1: equal books");
    check_history(&acks, 1, &primary1);
    eprintln!(
        "pair 0: {} orders, pair 1: {} orders",
        primary0.applied, primary1.applied
    );
    node.close_blocking();
}

#[test]
fn a_primary_paused_past_its_lease_never_acknowledges_again() {
    let _alone = one_at_a_time();
    let nats = NatsServer::start_jetstream().expect("nats-server with JetStream");
    let url = nats.url();
    let root = tempfile::tempdir().unwrap();
    let names = ["s0a", "s0b"];
    let dirs = dirs(root.path(), &names);
    let mut procs: HashMap<String, NodeProcess> = HashMap::new();
    for name in names {
        procs.insert(name.to_string(), start_node(&url, 0, name, &dirs[name]));
    }
    let node = Node::connect_blocking(&url, NodeOptions::default()).unwrap();
    let old = primary_of(&node, 0, &names, Duration::from_secs(20));
    let other = if old == "s0a" { "s0b" } else { "s0a" };
    let acks = Arc::new(Mutex::new(Acks::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tasks = run_clients(&node, 3, vec![0], acks.clone(), stop.clone());
    wait_acks(&acks, 300);
    wait_in_step(&node, 0, names);

    // Pause the primary (its clock runs on, its lease is not renewed), let the standby take
    // over, then resume it: it must not acknowledge anything, and it ends itself.
    procs[&old].signal(libc::SIGSTOP).unwrap();
    primary_of(&node, 0, &[other], Duration::from_secs(20));
    let total = acks.lock().unwrap().by_key.len();
    wait_acks(&acks, total + 200);
    procs[&old].signal(libc::SIGCONT).unwrap();
    let mut paused = procs.remove(&old).unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = paused.try_wait() {
            break status;
        }
        assert!(
            Instant::now() < end,
            "the deposed primary did not end itself"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(3),
        "the deposed primary exits with code 3"
    );
    let total = acks.lock().unwrap().by_key.len();
    wait_acks(&acks, total + 200);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for task in tasks {
        node.block_on(task).expect("a client task");
    }
    let survivor = state(&node, 0, other).unwrap();
    assert!(survivor.primary);
    check_history(&acks.lock().unwrap(), 0, &survivor);
    node.close_blocking();
}
