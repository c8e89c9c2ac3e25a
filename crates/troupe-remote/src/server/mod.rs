//! Starts and stops `nats-server` processes on loopback ports: for the tests and the
//! benchmark, which never use a server they did not start.
//!
//! A missing `nats-server` is made present by the project's `scripts/install-nats-server.sh`
//! (built with Go, or apt-get as root); where that is impossible, [`NatsServer::start`] says
//! how to install it. [`NatsServer::secured`] starts one that lets in only the users of an
//! [`Access`] (nkeys made at run time, each with its permissions), over TLS if asked.

mod access;
mod process;

pub use access::{Access, Role};
pub use process::Unreaped;

use std::io::{self, BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` process this program started; killed when dropped.
pub struct NatsServer {
    child: Option<Unreaped>,
    port: u16,
    cluster_port: Option<u16>,
    /// Its directory (configuration, ports file, JetStream store): kept across a kill, so a
    /// restart finds its data, as a server restarted on the same disk would.
    _dir: Option<tempdir::TempDir>,
    /// How it was started, to start it again ([`NatsServer::restart`]).
    command: Vec<std::ffi::OsString>,
}

mod tempdir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A directory removed when dropped.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> std::io::Result<Self> {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "troupe-nats-{tag}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir)?;
            Ok(Self(dir))
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The port of the first URL under `key` in a ports file (`{"nats":["nats://127.0.0.1:4222"]}`).
fn port_after(text: &str, key: &str) -> Option<u16> {
    let rest = &text[text.find(key)? + key.len()..];
    let url = &rest[rest.find("://")? + 3..];
    let end = url.find('"')?;
    url[..end].rsplit(':').next()?.parse().ok()
}

/// `(major, minor)` of a nats-server binary, from `--version`.
fn version_of(binary: &std::path::Path) -> Option<(u32, u32)> {
    let out = Command::new(binary).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "nats-server: v2.12.3"
    let v = text.trim().rsplit('v').next()?;
    let mut parts = v.trim().split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The `nats-server` to run: one of version 2.10 or later (JetStream as the client speaks
/// it) built by the project's script into `target/tools/`, or on PATH; made present by
/// `scripts/install-nats-server.sh` when there is none. An older one on PATH is used if
/// nothing newer can be had (everything but JetStream works with it).
pub fn nats_server_binary() -> io::Result<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = || -> Vec<PathBuf> {
        let mut found = vec![root.join("target/tools/nats-server")];
        if let Ok(out) = Command::new("sh")
            .args(["-c", "command -v nats-server"])
            .output()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                found.push(PathBuf::from(path));
            }
        }
        found.retain(|p| p.exists());
        found
    };
    let pick = |all: &[PathBuf]| {
        all.iter()
            .find(|p| version_of(p).is_some_and(|v| v >= (2, 10)))
            .cloned()
    };
    if let Some(found) = pick(&candidates()) {
        return Ok(found);
    }
    let script = root.join("scripts/install-nats-server.sh");
    let _ = Command::new("bash").arg(&script).status();
    let all = candidates();
    pick(&all).or_else(|| all.first().cloned()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "nats-server is not installed and could not be: run scripts/install-nats-server.sh \
             (it builds one with Go, or installs Debian's as root)",
        )
    })
}

impl NatsServer {
    /// One server on a free loopback port (chosen by the server itself), ready for clients when
    /// this returns.
    pub fn start() -> io::Result<NatsServer> {
        Self::launch("single", false, None, |_| {})
    }

    /// One server with JetStream on (its store in a temporary directory removed with it): for
    /// key-value leases.
    pub fn start_jetstream() -> io::Result<NatsServer> {
        Self::launch("jetstream", true, None, |_| {})
    }

    /// One server that lets in only the users of `access`, each with its permissions (over TLS
    /// if `access` has certificates), with JetStream on if asked.
    pub fn secured(access: &Access, jetstream: bool) -> io::Result<NatsServer> {
        Self::launch("secured", jetstream, Some(access), |_| {})
    }

    /// A cluster of `n` such servers (see [`NatsServer::cluster_jetstream`]): the users and
    /// permissions of `access` on each. The routes between the servers are on loopback and
    /// carry no client credentials.
    pub fn secured_cluster(
        n: usize,
        access: &Access,
        jetstream: bool,
    ) -> io::Result<Vec<NatsServer>> {
        Self::cluster_with(n, jetstream, Some(access))
    }

    /// A cluster of `n` servers on loopback: the first is the seed the others route to (they
    /// learn each other from it), and each is ready for clients when this returns.
    pub fn cluster(n: usize) -> io::Result<Vec<NatsServer>> {
        Self::cluster_with(n, false, None)
    }

    /// A cluster of `n` servers with JetStream on (each with its own store), for replicated
    /// key-value buckets. JetStream elects its meta leader once a majority is routed: clients
    /// may have to retry their first JetStream calls for a few seconds.
    pub fn cluster_jetstream(n: usize) -> io::Result<Vec<NatsServer>> {
        Self::cluster_with(n, true, None)
    }

    fn cluster_with(
        n: usize,
        jetstream: bool,
        access: Option<&Access>,
    ) -> io::Result<Vec<NatsServer>> {
        if jetstream {
            // JetStream's cluster wants every server to have routes configured, so the route
            // ports are chosen up front: held open together (so they differ), then released
            // just before the servers start.
            let listeners: Vec<std::net::TcpListener> = (0..n)
                .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
                .collect::<io::Result<_>>()?;
            let ports: Vec<u16> = listeners
                .iter()
                .map(|l| l.local_addr().map(|a| a.port()))
                .collect::<io::Result<_>>()?;
            drop(listeners);
            let routes = ports
                .iter()
                .map(|p| format!("nats-route://127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(",");
            return ports
                .iter()
                .enumerate()
                .map(|(i, port)| Self::spawn_routed(&format!("node{i}"), *port, &routes, access))
                .collect();
        }
        let mut servers = Vec::with_capacity(n);
        let seed = Self::launch("node0", jetstream, access, |cmd| {
            cluster_member(cmd, "node0", "nats://127.0.0.1:-1");
        })?;
        let seed_route = seed
            .cluster_port
            .map(|port| format!("nats-route://127.0.0.1:{port}"));
        servers.push(seed);
        for i in 1..n {
            let tag = format!("node{i}");
            servers.push(Self::launch(&tag, jetstream, access, |cmd| {
                cluster_member(cmd, &tag, "nats://127.0.0.1:-1");
                if let Some(seed) = &seed_route {
                    cmd.args(["--routes", seed]);
                }
            })?);
        }
        Ok(servers)
    }

    /// The client URLs of several servers, comma-separated, as `Node::connect` takes them.
    pub fn urls(servers: &[NatsServer]) -> String {
        servers
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A JetStream server of a cluster whose route ports are all known.
    fn spawn_routed(
        tag: &str,
        cluster_port: u16,
        routes: &str,
        access: Option<&Access>,
    ) -> io::Result<Self> {
        Self::launch(tag, true, access, |cmd| {
            cluster_member(cmd, tag, &format!("nats://127.0.0.1:{cluster_port}"));
            cmd.args(["--routes", routes]);
        })
    }

    fn launch(
        tag: &str,
        jetstream: bool,
        access: Option<&Access>,
        configure: impl FnOnce(&mut Command),
    ) -> io::Result<Self> {
        let binary = nats_server_binary()?;
        let dir = tempdir::TempDir::new(tag)?;
        let mut cmd = Command::new(binary);
        if let Some(access) = access {
            // Users and TLS only exist in a configuration file; the flags below still apply
            // (they override the file).
            let config = dir.path().join("server.conf");
            std::fs::write(&config, access.server_config())?;
            cmd.arg("-c").arg(config);
        }
        // Port -1: the server picks a free port and writes it to the ports file, so servers
        // started at once by parallel tests never race for a port.
        cmd.args(["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if jetstream {
            cmd.arg("--jetstream")
                .arg("--store_dir")
                .arg(dir.path().join("js"));
        }
        configure(&mut cmd);
        let command = std::iter::once(cmd.get_program().to_owned())
            .chain(cmd.get_args().map(ToOwned::to_owned))
            .collect();
        let child = spawn_logged(&mut cmd)?;
        let mut server = NatsServer {
            child: Some(child),
            port: 0,
            cluster_port: None,
            _dir: None,
            command,
        };
        let (port, cluster_port) = server.read_ports(dir.path(), Duration::from_secs(10))?;
        server.port = port;
        server.cluster_port = cluster_port;
        server._dir = Some(dir);
        server.wait_ready(Duration::from_secs(10))?;
        Ok(server)
    }

    /// Reads the client and cluster ports from the ports file the server writes once it listens.
    fn read_ports(
        &mut self,
        dir: &std::path::Path,
        limit: Duration,
    ) -> io::Result<(u16, Option<u16>)> {
        let start = Instant::now();
        loop {
            let text = std::fs::read_dir(dir)?
                .filter_map(Result::ok)
                .find(|e| e.file_name().to_string_lossy().ends_with(".ports"))
                .and_then(|e| std::fs::read_to_string(e.path()).ok());
            if let Some(port) = text.as_deref().and_then(|t| port_after(t, "\"nats\"")) {
                let cluster = text.as_deref().and_then(|t| port_after(t, "\"cluster\""));
                return Ok((port, cluster));
            }
            self.still_running()?;
            if start.elapsed() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nats-server wrote no ports file within {limit:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_ready(&mut self, limit: Duration) -> io::Result<()> {
        let start = Instant::now();
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            self.still_running()?;
            if start.elapsed() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "nats-server did not listen on port {} within {limit:?}",
                        self.port
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// An error if the server has already exited (while starting).
    fn still_running(&mut self) -> io::Result<()> {
        if let Some(child) = self.child.take() {
            match child.try_reap() {
                Ok(status) => {
                    return Err(io::Error::other(format!(
                        "nats-server exited at start ({status}); run with TROUPE_NATS_LOG=1 to see its log"
                    )))
                }
                Err(child) => self.child = Some(child),
            }
        }
        Ok(())
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Its client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its cluster (route) port, for servers of a cluster.
    pub fn cluster_port(&self) -> Option<u16> {
        self.cluster_port
    }

    /// Starts it again after [`kill`](NatsServer::kill), on the same ports, with the same
    /// configuration and JetStream store (what it had written survives, as on a real disk).
    /// Does nothing if it runs.
    pub fn restart(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let port = self.port.to_string();
        let mut args: Vec<std::ffi::OsString> = self.command[1..].to_vec();
        // The port it picked at first (`-p -1`) is its port from now on.
        if let Some(at) = args.windows(2).position(|w| w[0] == "-p" && w[1] == "-1") {
            args[at + 1] = port.into();
        }
        let mut cmd = Command::new(&self.command[0]);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        self.child = Some(spawn_logged(&mut cmd)?);
        self.wait_ready(Duration::from_secs(10))
    }

    /// True while its process runs (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Sends a signal (SIGSTOP, SIGCONT, ...) to its process. Refused once it was killed.
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        let Some(child) = &self.child else {
            return Err(io::Error::other("the server was killed"));
        };
        child.signal(signal)
    }

    /// Kills it outright (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = child.kill_and_reap();
        }
    }
}

/// Starts `cmd`, draining its log (stderr) on a thread so it never blocks on a full pipe; the
/// log is printed with `TROUPE_NATS_LOG` set.
fn spawn_logged(cmd: &mut Command) -> io::Result<Unreaped> {
    let mut child = Unreaped::spawn(cmd)?;
    if let Some(stderr) = child.take_stderr() {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if std::env::var_os("TROUPE_NATS_LOG").is_some() {
                    eprintln!("nats-server: {line}");
                }
            }
        });
    }
    Ok(child)
}

/// Makes `cmd` a member of the one cluster these servers form, named `tag`, listening for
/// routes on `listen`.
fn cluster_member(cmd: &mut Command, tag: &str, listen: &str) {
    cmd.args([
        "--server_name",
        tag,
        "--cluster_name",
        "troupe",
        "--cluster",
        listen,
    ]);
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}
