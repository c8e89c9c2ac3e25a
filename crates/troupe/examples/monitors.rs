//! Watching, linking and naming actors. Run: `cargo run -p troupe --example monitors`
use std::time::Duration;

use troupe::{Actor, Addr, Context, Handler, Message, SpawnOptions, System, Terminated};

struct Job;
impl Actor for Job {}
struct Fail;
impl Message for Fail {
    type Reply = ();
}
impl Handler<Fail> for Job {
    fn handle(&mut self, _: Fail, _: &mut Context<Self>) {
        panic!("job failed");
    }
}

struct Monitor;
impl Actor for Monitor {}
impl Handler<Terminated> for Monitor {
    fn handle(&mut self, t: Terminated, _: &mut Context<Self>) {
        println!("actor {} ended: {}", t.id, t.reason);
    }
}
struct WatchJob(Addr<Job>);
impl Message for WatchJob {
    type Reply = ();
}
impl Handler<WatchJob> for Monitor {
    fn handle(&mut self, w: WatchJob, ctx: &mut Context<Self>) {
        ctx.watch(&w.0);
    }
}

fn main() {
    std::panic::set_hook(Box::new(|_| {}));
    let system = System::new();
    let monitor = system
        .spawn_named("monitor", SpawnOptions::new(), || Monitor)
        .expect("a fresh system has no actor named monitor");
    let calm = system.spawn(Job);
    let doomed = system.spawn(Job);
    let found: Addr<Monitor> = system.lookup("monitor").expect("registered by name");
    found.ask(WatchJob(calm.clone())).wait().unwrap();
    found.ask(WatchJob(doomed.clone())).wait().unwrap();
    calm.stop();
    doomed.tell(Fail).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    drop(monitor);
    system.shutdown();
}
