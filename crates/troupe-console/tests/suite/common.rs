//! What the tests share: an observed system with a known supervision tree and a deliberate
//! cycle of asks, its console, and a plain HTTP/1.1 client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use troupe::{Actor, ActorId, Addr, Context, Deferred, DeferredHandler, Handler, Message, System};
use troupe_console::{Console, ConsoleHandle};

/// The top of the known tree: registers itself, spawns two named children.
pub struct Supervisor;
impl Actor for Supervisor {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("root-supervisor").expect("a free name");
        ctx.spawn(Clerk);
        ctx.spawn(Archivist);
    }
}

/// A named child of the supervisor, with no child of its own; handles notes.
pub struct Clerk;
impl Actor for Clerk {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("clerk-north").expect("a free name");
    }
}

/// A note for the clerk: something for the handler tables and the flame graph.
#[derive(Message)]
pub struct Note(pub u64);
impl Handler<Note> for Clerk {
    fn handle(&mut self, note: Note, _: &mut Context<Self>) {
        std::hint::black_box(note.0.wrapping_mul(31));
    }
}

/// The other named child: it has a child of its own.
pub struct Archivist;
impl Actor for Archivist {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("archivist-south").expect("a free name");
        ctx.spawn(Indexer::<String>(Vec::new()));
    }
}

/// The grandchild, generic so that its type's name holds a `<` the page must escape.
pub struct Indexer<T>(Vec<T>);
impl<T: Send + 'static> Actor for Indexer<T> {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("indexer-deep").expect("a free name");
        self.0.clear();
    }
}

/// Asks Beta inside its handler and holds its mailbox until the answer comes.
pub struct Alpha;
impl Actor for Alpha {}

/// Makes Alpha ask this Beta.
#[derive(Message)]
pub struct Kick(pub Addr<Beta>);
impl Handler<Kick> for Alpha {
    fn handle(&mut self, kick: Kick, ctx: &mut Context<Self>) {
        ctx.await_then(kick.0.ask(Ping), |_, _, _| {});
    }
}

/// What Beta asks Alpha back: Alpha cannot answer while it awaits.
#[derive(Message)]
pub struct Pong;
impl Handler<Pong> for Alpha {
    fn handle(&mut self, _: Pong, _: &mut Context<Self>) {}
}

/// Answers a ping only after asking Alpha, holding its mailbox meanwhile: the cycle.
pub struct Beta {
    /// Alpha.
    pub alpha: Addr<Alpha>,
}
impl Actor for Beta {}

/// Alpha's ask of Beta.
#[derive(Message)]
pub struct Ping;
impl DeferredHandler<Ping> for Beta {
    fn handle(&mut self, _: Ping, reply: Deferred<()>, ctx: &mut Context<Self>) {
        ctx.await_then(self.alpha.ask(Pong), move |_, _, _| {
            let _ = reply.send(());
        });
    }
}

/// The ids of the known actors.
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    pub supervisor: ActorId,
    pub clerk: ActorId,
    pub archivist: ActorId,
    pub indexer: ActorId,
    pub alpha: ActorId,
    pub beta: ActorId,
}

/// An observed system with the known tree and cycle, and its console on an ephemeral port.
pub struct Fixture {
    pub system: System,
    pub console: Option<ConsoleHandle>,
    pub ids: Ids,
}

impl Fixture {
    pub fn start() -> Fixture {
        let system = System::builder()
            .workers(2)
            .observe()
            .build()
            .expect("an observed system");
        let supervisor = system.spawn(Supervisor).id();
        let alpha = system.spawn(Alpha);
        let beta = system.spawn(Beta {
            alpha: alpha.clone(),
        });
        alpha
            .tell(Kick(beta.clone()))
            .expect("alpha takes the kick");

        // Wait (with a deadline) for the tree to be built and named, the notes handled and the
        // cycle formed.
        let find = |name: &str| {
            system
                .registered()
                .into_iter()
                .find(|(n, ..)| n == name)
                .map(|(_, id, _)| id)
        };
        let ids = poll_until("the known tree and the cycle", || {
            let ids = Ids {
                supervisor,
                clerk: find("clerk-north")?,
                archivist: find("archivist-south")?,
                indexer: find("indexer-deep")?,
                alpha: alpha.id(),
                beta: beta.id(),
            };
            let cycles = system.wait_cycles().expect("observed");
            cycles
                .iter()
                .any(|c| c.contains(&ids.alpha) && c.contains(&ids.beta))
                .then_some(ids)
        });
        let clerk = system
            .lookup::<Clerk>("clerk-north")
            .expect("the clerk is registered");
        for i in 0..200 {
            clerk.tell(Note(i)).expect("the clerk takes notes");
        }
        poll_until("the notes handled", || {
            let info = system.actor(ids.clerk).expect("observed")?;
            (info.processed == 200).then_some(())
        });
        let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap())
            .expect("the console starts");
        Fixture {
            system,
            console: Some(console),
            ids,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.console.as_ref().expect("serving").addr()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(console) = self.console.take() {
            console.shutdown().expect("the console stops cleanly");
        }
        let _ = self.system.shutdown_timeout(Duration::from_secs(10));
    }
}

/// Calls `probe` until it gives a value, failing after ten seconds.
pub fn poll_until<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A response: status, content type, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

/// One HTTP/1.1 GET on its own connection, with `host` as its Host header.
pub fn get_as(addr: SocketAddr, path: &str, host: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect to the console");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("receive");
    let text = String::from_utf8(response).expect("a UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "a body of known length: {head}"
    );
    Reply {
        status,
        content_type,
        body: body.to_owned(),
    }
}

/// One GET to `path`, addressed to the console's own address.
pub fn get(addr: SocketAddr, path: &str) -> Reply {
    get_as(addr, path, &addr.to_string())
}

/// A GET that must answer 200 with JSON.
pub fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let reply = get(addr, path);
    assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    assert_eq!(reply.content_type, "application/json", "{path}");
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", reply.body))
}
