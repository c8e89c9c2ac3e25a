//! The async I/O bridge: an actor talks to a TCP service without blocking its worker.
//! `pipe` delivers the result as a message (the actor keeps working); `await_then` holds the
//! mailbox until the result is in. Run: `cargo run -p troupe --example async_io`
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use troupe::{Actor, Context, Handler, Message, System};

/// Upper-cases what it receives: a stand-in for any network service.
async fn serve(listener: TcpListener) {
    while let Ok((mut socket, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut buf = [0u8; 64];
            while let Ok(n) = socket.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let _ = socket.write_all(&buf[..n].to_ascii_uppercase()).await;
            }
        });
    }
}

async fn call(addr: std::net::SocketAddr, text: String) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(text.as_bytes()).await?;
    let mut buf = vec![0u8; text.len()];
    stream.read_exact(&mut buf).await?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

struct Client {
    server: std::net::SocketAddr,
    answers: Vec<String>,
}
impl Actor for Client {}

struct Shout(String);
impl Message for Shout {
    type Reply = ();
}
impl Handler<Shout> for Client {
    fn handle(&mut self, msg: Shout, ctx: &mut Context<Self>) {
        let server = self.server;
        ctx.pipe(async move { call(server, msg.0).await }, Answer);
    }
}

struct Answer(std::io::Result<String>);
impl Message for Answer {
    type Reply = ();
}
impl Handler<Answer> for Client {
    fn handle(&mut self, msg: Answer, _: &mut Context<Self>) {
        self.answers
            .push(msg.0.unwrap_or_else(|e| format!("error: {e}")));
    }
}

struct ShoutInOrder(String);
impl Message for ShoutInOrder {
    type Reply = ();
}
impl Handler<ShoutInOrder> for Client {
    fn handle(&mut self, msg: ShoutInOrder, ctx: &mut Context<Self>) {
        let server = self.server;
        ctx.await_then(
            async move { call(server, msg.0).await },
            |me: &mut Client, _, out| {
                me.answers
                    .push(out.unwrap_or_else(|e| format!("error: {e}")));
            },
        );
    }
}

struct Answers;
impl Message for Answers {
    type Reply = Vec<String>;
}
impl Handler<Answers> for Client {
    fn handle(&mut self, _: Answers, _: &mut Context<Self>) -> Vec<String> {
        self.answers.clone()
    }
}

fn main() {
    let system = System::new();
    let listener = system
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind a local port");
    let server = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(serve(listener))
    });

    let client = system.spawn(Client {
        server,
        answers: Vec::new(),
    });
    client.tell(ShoutInOrder("in order".into())).unwrap();
    // `Answers` waits behind `ShoutInOrder`'s round trip, which holds the mailbox.
    println!(
        "after await_then: {:?}",
        client.ask(Answers).wait().unwrap()
    );
    client.tell(Shout("hello".into())).unwrap();
    // `pipe` does not hold the mailbox: this ask may well come back before the answer.
    println!(
        "right after pipe: {:?}",
        client.ask(Answers).wait().unwrap()
    );
    let start = std::time::Instant::now();
    while client.ask(Answers).wait().unwrap().len() < 2 && start.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    println!(
        "a moment later:   {:?}",
        client.ask(Answers).wait().unwrap()
    );
    system.shutdown();
}
