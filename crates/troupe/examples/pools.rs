//! Isolation between pools: actors that block do not delay actors on another pool.
//! Run: `cargo run -p troupe --example pools`
use std::time::{Duration, Instant};

use troupe::{Actor, Context, Handler, Message, Placement, SpawnOptions, System};

struct LegacyClient;
impl Actor for LegacyClient {}
struct Query;
impl Message for Query {
    type Reply = ();
}
impl Handler<Query> for LegacyClient {
    fn handle(&mut self, _: Query, _: &mut Context<Self>) {
        std::thread::sleep(Duration::from_millis(50)); // a blocking call
    }
}

struct Echo;
impl Actor for Echo {}
struct Ping(u32);
impl Message for Ping {
    type Reply = u32;
}
impl Handler<Ping> for Echo {
    fn handle(&mut self, ping: Ping, _: &mut Context<Self>) -> u32 {
        ping.0
    }
}

fn main() {
    let system = System::builder().pool("legacy", 2, 16).build().unwrap();
    for _ in 0..50 {
        let client = system.spawn_with(
            LegacyClient,
            SpawnOptions::new().placement(Placement::Named("legacy")),
        );
        for _ in 0..4 {
            client.tell(Query).unwrap();
        }
    }
    // The legacy pool is now busy for seconds; the default pool is not affected.
    let echo = system.spawn(Echo);
    let start = Instant::now();
    for i in 0..10_000 {
        assert_eq!(echo.ask(Ping(i)).wait(), Ok(i));
    }
    println!(
        "10,000 round trips in {:?} while the legacy pool is blocked",
        start.elapsed()
    );
    for pool in system.pool_metrics() {
        println!("{pool:?}");
    }
    system.shutdown();
}
