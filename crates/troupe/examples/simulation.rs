//! A lease holder tested in simulation: an hour of simulated time in microseconds, then many
//! seeds with faults, and what a failure report looks like.
//!
//! `cargo run -p troupe --example simulation`

use std::time::{Duration, Instant};

use troupe::sim::{Explore, Faults, Simulation};
use troupe::{Actor, Context, Handler, Message};

/// Holds a lease for `ttl` after each renewal; renews itself every `ttl / 2`.
struct Lease {
    ttl: Duration,
    expires: Instant,
    renewals: u32,
}
impl Actor for Lease {
    fn started(&mut self, ctx: &mut Context<Self>) {
        self.expires = ctx.now() + self.ttl;
        ctx.send_interval(self.ttl / 2, || Renew);
    }
}

#[derive(Message)]
struct Renew;
impl Handler<Renew> for Lease {
    fn handle(&mut self, _: Renew, ctx: &mut Context<Self>) {
        self.expires = ctx.now() + self.ttl;
        self.renewals += 1;
    }
}

#[derive(Message)]
#[reply((bool, u32))]
struct Held;
impl Handler<Held> for Lease {
    fn handle(&mut self, _: Held, ctx: &mut Context<Self>) -> (bool, u32) {
        (ctx.now() < self.expires, self.renewals)
    }
}

fn lease() -> Lease {
    Lease {
        ttl: Duration::from_secs(10),
        // Replaced in `started`, from the system's clock.
        expires: Instant::now(),
        renewals: 0,
    }
}

fn main() {
    // One run: an hour goes by, the lease renewed 720 times.
    let wall = Instant::now();
    let sim = Simulation::new(1);
    let lease_holder = sim.system().spawn(lease());
    sim.advance(Duration::from_secs(3600));
    let (held, renewals) = lease_holder.ask(Held).wait().unwrap();
    println!(
        "after {:?} of simulated time ({:?} of real time): held {held}, {renewals} renewals",
        sim.elapsed(),
        wall.elapsed()
    );

    // Many runs, the lease holder stalled now and then: a stall longer than half the lease
    // lets it expire. Exploring finds the seed where it does, and says how to replay it.
    let found = Explore::new("lease_is_always_held")
        .seeds(200)
        .faults(
            Faults::none()
                .stalls(true)
                .target::<Lease>()
                .max_stall(Duration::from_secs(20)),
        )
        .find(|sim| {
            let lease_holder = sim.system().spawn(lease());
            for _ in 0..60 {
                sim.advance(Duration::from_secs(1));
                let (held, _) = lease_holder.ask(Held).wait().unwrap();
                assert!(held, "the lease expired at {:?}", sim.elapsed());
            }
        });
    match found {
        Ok(summary) => println!("no seed lost the lease in {} runs", summary.runs),
        Err(found) => println!("\n{found}"),
    }
}
