//! A small busy system with its console: `cargo run -p troupe-console --example demo`, then
//! open the URL it prints. A desk of clerks handles a steady flow of orders, an archive with
//! an indexer takes what they file, an auditor checks one order in 100 and fails every two
//! seconds or so (and is restarted), and two actors ask each other inside their handlers: a
//! cycle of waits. `--port N` picks the port (default 0: a free one); `--seconds N` stops
//! after N seconds (default: run until killed).

use std::time::{Duration, Instant};

use troupe::{
    Actor, Addr, Context, Deferred, DeferredHandler, Handler, Message, SpawnOptions,
    SupervisorStrategy, System,
};
use troupe_console::Console;

struct Desk {
    clerks: Vec<Addr<Clerk>>,
    archive: Option<Addr<Archive>>,
    auditor: Option<Addr<Auditor>>,
    next: usize,
}
impl Actor for Desk {
    /// The desk restarts its failing auditor as often as it fails.
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::one_for_one().intensity(1_000, Duration::from_secs(1))
    }

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("front-desk").expect("a free name");
        let archive = ctx.spawn(Archive { filed: 0 });
        for i in 0..4 {
            let clerk = ctx.spawn(Clerk {
                archive: archive.clone(),
                handled: 0,
            });
            if i == 0 {
                self.auditor =
                    Some(ctx.spawn_supervised(|| Auditor { checked: 0 }, SpawnOptions::new()));
            }
            self.clerks.push(clerk);
        }
        self.archive = Some(archive);
    }
}

#[derive(Message)]
struct Order(u64);
impl Handler<Order> for Desk {
    fn handle(&mut self, order: Order, _: &mut Context<Self>) {
        let clerk = &self.clerks[self.next % self.clerks.len()];
        self.next += 1;
        if order.0.is_multiple_of(100) {
            if let Some(auditor) = &self.auditor {
                let _ = auditor.tell(Audit);
            }
        }
        let _ = clerk.tell(order);
    }
}

struct Clerk {
    archive: Addr<Archive>,
    handled: u64,
}
impl Actor for Clerk {}
impl Handler<Order> for Clerk {
    fn handle(&mut self, order: Order, _: &mut Context<Self>) {
        self.handled += 1;
        spin(Duration::from_micros(20 + order.0 % 40));
        let _ = self.archive.tell(File(order.0));
    }
}

#[derive(Message)]
struct File(u64);
struct Archive {
    filed: u64,
}
impl Actor for Archive {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("archive").expect("a free name");
        ctx.spawn(Indexer::<String> { keys: Vec::new() });
    }
}
impl Handler<File> for Archive {
    fn handle(&mut self, file: File, _: &mut Context<Self>) {
        self.filed += 1;
        spin(Duration::from_micros(5 + file.0 % 10));
    }
}

struct Indexer<K> {
    keys: Vec<K>,
}
impl<K: Send + 'static> Actor for Indexer<K> {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.register("indexer").expect("a free name");
        ctx.send_interval(Duration::from_millis(50), || Reindex);
    }
}
#[derive(Message)]
struct Reindex;
impl<K: Send + 'static> Handler<Reindex> for Indexer<K> {
    fn handle(&mut self, _: Reindex, _: &mut Context<Self>) {
        self.keys.clear();
        spin(Duration::from_micros(300));
    }
}

struct Auditor {
    checked: u64,
}
impl Actor for Auditor {}
#[derive(Message)]
struct Audit;
impl Handler<Audit> for Auditor {
    fn handle(&mut self, _: Audit, _: &mut Context<Self>) {
        self.checked += 1;
        if self.checked.is_multiple_of(200) {
            panic!("the auditor found a discrepancy (as it does every 200 audits)");
        }
    }
}

/// Asks Lender inside its handler, holding its mailbox until the answer comes.
struct Borrower;
impl Actor for Borrower {}
#[derive(Message)]
struct Start(Addr<Lender>);
impl Handler<Start> for Borrower {
    fn handle(&mut self, start: Start, ctx: &mut Context<Self>) {
        ctx.await_then(start.0.ask(Loan), |_, _, _| {});
    }
}
#[derive(Message)]
struct Collateral;
impl Handler<Collateral> for Borrower {
    fn handle(&mut self, _: Collateral, _: &mut Context<Self>) {}
}

/// Answers a loan only once the borrower has answered its own ask: it never will.
struct Lender {
    borrower: Addr<Borrower>,
}
impl Actor for Lender {}
#[derive(Message)]
struct Loan;
impl DeferredHandler<Loan> for Lender {
    fn handle(&mut self, _: Loan, reply: Deferred<()>, ctx: &mut Context<Self>) {
        ctx.await_then(self.borrower.ask(Collateral), move |_, _, _| {
            let _ = reply.send(());
        });
    }
}

fn spin(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

fn main() {
    let mut port = 0u16;
    let mut seconds: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        let parsed = value.as_deref().map(str::parse::<u64>);
        match (arg.as_str(), parsed) {
            ("--port", Some(Ok(n))) if n <= u64::from(u16::MAX) => port = n as u16,
            ("--seconds", Some(Ok(n))) => seconds = Some(n),
            _ => {
                eprintln!("usage: demo [--port N] [--seconds N]");
                std::process::exit(2);
            }
        }
    }
    let system = System::builder()
        .observe()
        .build()
        .expect("an observed system");
    let console = match Console::serve(system.clone(), ([127, 0, 0, 1], port).into()) {
        Ok(console) => console,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    };
    println!("console on {}", console.url());

    let desk = system.spawn(Desk {
        clerks: Vec::new(),
        archive: None,
        auditor: None,
        next: 0,
    });
    let borrower = system.spawn(Borrower);
    let lender = system.spawn(Lender {
        borrower: borrower.clone(),
    });
    let _ = borrower.tell(Start(lender));

    let started = Instant::now();
    let mut n = 0u64;
    while seconds.is_none_or(|s| started.elapsed() < Duration::from_secs(s)) {
        for _ in 0..200 {
            n += 1;
            let _ = desk.tell(Order(n));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(console);
    let _ = system.shutdown_timeout(Duration::from_secs(5));
}
