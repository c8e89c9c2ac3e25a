//! A supervisor restarts a flaky worker; the worker's address stays valid and no other message
//! is lost. Run: `cargo run -p troupe --example supervision`
use std::time::Duration;

use troupe::{
    Actor, Addr, Context, Failure, Handler, Message, Restart, SpawnOptions, SupervisorStrategy,
    System,
};

/// Parses numbers; panics on garbage (a stand-in for any bug).
struct Parser {
    parsed: u32,
}

impl Actor for Parser {
    fn restarted(&mut self, _: &mut Context<Self>, reason: Option<&Failure>) {
        if let Some(reason) = reason {
            println!("parser restarted after: {reason}");
        }
    }
}

struct Parse(&'static str);
impl Message for Parse {
    type Reply = u32;
}
impl Handler<Parse> for Parser {
    fn handle(&mut self, msg: Parse, _: &mut Context<Self>) -> u32 {
        self.parsed += 1;
        msg.0.parse().expect("not a number")
    }
}

struct Supervisor;
impl Actor for Supervisor {
    fn supervisor_strategy(&self) -> SupervisorStrategy {
        // At most 5 restarts in 10 s, waiting 10 ms, then 20, 40... before each.
        SupervisorStrategy::one_for_one()
            .intensity(5, Duration::from_secs(10))
            .backoff(Duration::from_millis(10), Duration::from_millis(500))
    }
}

struct StartParser;
impl Message for StartParser {
    type Reply = Addr<Parser>;
}
impl Handler<StartParser> for Supervisor {
    fn handle(&mut self, _: StartParser, ctx: &mut Context<Self>) -> Addr<Parser> {
        ctx.spawn_supervised(
            || Parser { parsed: 0 },
            SpawnOptions::new().restart(Restart::Permanent),
        )
    }
}

fn main() {
    std::panic::set_hook(Box::new(|_| {})); // the panic below is on purpose
    let system = System::new();
    let supervisor = system.spawn(Supervisor);
    let parser = supervisor.ask(StartParser).wait().unwrap();

    println!("42   -> {:?}", parser.ask(Parse("42")).wait());
    println!("oops -> {:?}", parser.ask(Parse("oops")).wait()); // the handler panics
    println!("7    -> {:?}", parser.ask(Parse("7")).wait()); // a fresh instance answers
    println!("restarts: {}", parser.metrics().restarts);
    system.shutdown();
}
