use std::time::Duration;
use troupe::sim::Simulation;
use troupe::{Actor, Context, Handler, Message};

struct Alarm {
    rang: u32,
}
impl Actor for Alarm {
    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.send_after(Duration::from_secs(10), Ring);
    }
}
#[derive(Message)]
struct Ring;
impl Handler<Ring> for Alarm {
    fn handle(&mut self, _: Ring, _: &mut Context<Self>) {
        self.rang += 1
    }
}
#[derive(Message)]
#[reply(u32)]
struct Rang;
impl Handler<Rang> for Alarm {
    fn handle(&mut self, _: Rang, _: &mut Context<Self>) -> u32 {
        self.rang
    }
}

#[test]
fn smoke() {
    let sim = Simulation::new(1);
    let alarm = sim.system().spawn(Alarm { rang: 0 });
    assert_eq!(alarm.ask(Rang).wait(), Ok(0));
    sim.advance(Duration::from_secs(9));
    assert_eq!(alarm.ask(Rang).wait(), Ok(0));
    sim.advance(Duration::from_secs(2));
    assert_eq!(alarm.ask(Rang).wait(), Ok(1));
    println!("steps {} elapsed {:?}", sim.steps(), sim.elapsed());
}
