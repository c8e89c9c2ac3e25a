//! Node processes for the distributed mode's tests and benchmark: the NATS users of each role
//! (engine, client, operator) with their permissions, `troupe-trading node` processes signed
//! in as engines, a pair's primary, a standby in step. Every process is killed when its handle
//! is dropped, so a failing test leaves none behind.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use troupe_remote::server::{Access, Role, Unreaped};
use troupe_remote::Node;

use crate::dist::{node_history, node_state, NodeState, RECEIVE};
use crate::nats_cluster::{LEASE_BUCKET, SYNC_BUCKET};

/// What an engine node may publish: every troupe subject and answer, and the requests of
/// JetStream's API that the lease and sync buckets need (their streams' information and
/// creation, reads of their keys) and writes to their keys. Nothing else of JetStream.
pub fn engine_publish() -> Vec<String> {
    let mut subjects = vec!["troupe.>".to_string(), "_INBOX.>".to_string()];
    subjects.push("$JS.API.INFO".to_string());
    for bucket in [LEASE_BUCKET, SYNC_BUCKET] {
        let stream = format!("KV_{bucket}");
        subjects.extend([
            format!("$JS.API.STREAM.INFO.{stream}"),
            format!("$JS.API.STREAM.CREATE.{stream}"),
            format!("$JS.API.STREAM.MSG.GET.{stream}"),
            format!("$JS.API.DIRECT.GET.{stream}.>"),
            format!("$KV.{bucket}.>"),
        ]);
    }
    subjects
}

/// The three roles of the distributed mode, as NATS users:
/// - `engine`: a node (`troupe-trading node`): all of troupe's subjects, and the lease and
///   sync buckets ([`engine_publish`]). Only engines may write the buckets or send to an
///   engine (`Place`, `Join`, `Replicate`).
/// - `client`: may publish orders to the receivers (`troupe.x.trading.receive`) and read its
///   own answers (`_INBOX.client.>`), nothing else.
/// - `operator`: may ask any node's state (`troupe.x.trading.pair.*.state.*`) and read its
///   own answers, nothing else.
pub fn roles() -> [Role; 3] {
    [
        Role::new("engine")
            .publish(engine_publish())
            .subscribe(["troupe.>", "_INBOX.>"]),
        Role::new("client").publish([format!("troupe.x.{RECEIVE}")]),
        Role::new("operator").publish(["troupe.x.trading.pair.*.state.*"]),
    ]
}

/// Users for [`roles`] (nkeys made now, in a temporary directory), with TLS if `tls`.
pub fn access(tls: bool) -> std::io::Result<Access> {
    Access::new(roles(), tls)
}

/// A `troupe-trading node` process; killed (SIGKILL) when dropped.
pub struct NodeProcess {
    /// `None` once it has been reaped: its process id may then belong to another process, so
    /// nothing is signalled any more.
    child: Option<Unreaped>,
    ended: Option<ExitStatus>,
    /// Its node name.
    pub name: String,
    /// Its pair.
    pub pair: usize,
}

impl NodeProcess {
    /// Starts `binary node ...`, signed in as `access`'s engine user, and waits until it says
    /// it is ready.
    pub fn start(
        binary: &Path,
        nats: &str,
        access: &Access,
        pair: usize,
        name: &str,
        dir: &Path,
        lease: Duration,
    ) -> std::io::Result<NodeProcess> {
        let mut command = Command::new(binary);
        command
            .args([
                "node",
                "--nats",
                nats,
                "--pair",
                &pair.to_string(),
                "--name",
                name,
            ])
            .arg("--nats-nkey")
            .arg(access.seed_file("engine"));
        if let Some(ca) = access.ca() {
            command.arg("--nats-ca").arg(ca);
        }
        let mut child = Unreaped::spawn(
            command
                .arg("--dir")
                .arg(dir)
                .args(["--lease-ms", &lease.as_millis().to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )?;
        // A node's log (leases, failovers, its kills and restarts) goes on through `eprintln!`
        // rather than straight to this process's stderr, so a test harness keeps it with the
        // test's own output: shown when the test fails or with `--nocapture`, not in a passing
        // run, where the failures it reports are the ones the test causes on purpose.
        if let Some(stderr) = child.take_stderr() {
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    eprintln!("{line}");
                }
            });
        }
        let stdout = child.take_stdout().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if line.trim() == "READY" {
                    let _ = tx.send(());
                }
            }
        });
        let mut process = NodeProcess {
            child: Some(child),
            ended: None,
            name: name.to_string(),
            pair,
        };
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            process.kill();
            return Err(std::io::Error::other(format!("node {name} did not start")));
        }
        Ok(process)
    }

    /// Sends a signal (SIGSTOP, SIGCONT, ...). Refused once the process has been reaped.
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        let Some(child) = &self.child else {
            return Err(std::io::Error::other(format!(
                "node {} has ended",
                self.name
            )));
        };
        child.signal(signal)
    }

    /// Its process id, while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Unreaped::id)
    }

    /// Its exit status, if it has ended (reaping it).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if let Some(child) = self.child.take() {
            match child.try_reap() {
                Ok(status) => self.ended = Some(status),
                Err(child) => self.child = Some(child),
            }
        }
        self.ended
    }

    /// Kills it outright (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            self.ended = child.kill_and_reap().ok();
        }
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A node's state (without keys), or `None` if it does not answer.
pub fn state(node: &Node, pair: usize, name: &str) -> Option<NodeState> {
    node.block_on(node_state(node, pair, name)).ok()
}

/// A node's state with the keys of its whole history, or `None` if it does not answer.
pub fn history(node: &Node, pair: usize, name: &str) -> Option<NodeState> {
    node.block_on(node_history(node, pair, name)).ok()
}

/// Waits until one of `names` is the pair's primary; returns its state.
pub fn wait_primary(
    node: &Node,
    pair: usize,
    names: &[&str],
    limit: Duration,
) -> Option<NodeState> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for name in names {
            if let Some(s) = state(node, pair, name).filter(|s| s.primary) {
                return Some(s);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Waits until the two nodes of a pair are primary and standby, and the standby is in step
/// ([`in_step`]); returns (primary, standby) as last seen.
pub fn wait_in_step(
    node: &Node,
    pair: usize,
    names: [&str; 2],
    limit: Duration,
) -> Option<(NodeState, NodeState)> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let (Some(a), Some(b)) = (state(node, pair, names[0]), state(node, pair, names[1])) {
            if a.primary != b.primary {
                let (primary, standby) = if a.primary { (a, b) } else { (b, a) };
                // The standby asked again, after the primary answered.
                if let Some(later) = state(node, pair, &standby.node) {
                    if in_step(&primary, &standby, &later) {
                        return Some((primary, later));
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// True if a standby is in step with its primary: asked again (`later`) after the primary
/// answered (`primary`), it holds every order the primary held then. With orders flowing the
/// standby is ahead by those in flight (it applies each before the primary does), so equal
/// counts of `primary` and `standby` asked one after the other would be luck. The simulation
/// (`dist_sim`) decides with this function too.
pub fn in_step(primary: &NodeState, standby: &NodeState, later: &NodeState) -> bool {
    let _ = standby;
    primary.primary && !later.primary && later.applied >= primary.applied
}

/// `root/<name>` for each name.
pub fn node_dirs(root: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| root.join(n)).collect()
}
