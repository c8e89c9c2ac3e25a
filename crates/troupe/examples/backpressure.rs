//! Bounded mailboxes: refuse, drop, or make the sender wait.
//! Run: `cargo run -p troupe --example backpressure`
use std::time::Duration;

use troupe::{Actor, Context, Handler, Message, Overflow, SendError, SpawnOptions, System};

struct Disk;
impl Actor for Disk {}

struct Write(u32);
impl Message for Write {
    type Reply = ();
}
impl Handler<Write> for Disk {
    fn handle(&mut self, write: Write, _: &mut Context<Self>) {
        std::thread::sleep(Duration::from_micros(50)); // a slow device
        std::hint::black_box(write.0);
    }
}

fn main() {
    let system = System::new();

    // Refuse when full: the sender gets its message back and decides.
    let disk = system.spawn_with(Disk, SpawnOptions::new().bounded(64, Overflow::Fail));
    let mut refused = 0;
    for i in 0..10_000 {
        if let Err(SendError::Full(_msg)) = disk.tell(Write(i)) {
            refused += 1;
        }
    }
    println!("fail:        {refused} refused, {:?}", disk.metrics());

    // Or wait for room (asynchronously): nothing is refused, the producer slows down.
    let patient = system.spawn_with(Disk, SpawnOptions::new().bounded(64, Overflow::Fail));
    system.block_on(async {
        for i in 0..2_000 {
            patient.send(Write(i)).await.expect("disk is running");
        }
    });
    println!("wait:        0 refused, {:?}", patient.metrics());

    // Or keep the newest and drop the oldest (telemetry, say).
    let lossy = system.spawn_with(Disk, SpawnOptions::new().bounded(64, Overflow::DropOldest));
    for i in 0..10_000 {
        lossy.tell(Write(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    println!("drop oldest: {:?}", lossy.metrics());
    system.shutdown();
}
