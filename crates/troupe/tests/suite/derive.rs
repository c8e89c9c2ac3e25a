//! `#[derive(Message)]`: the reply type from `#[reply(T)]`, `()` without it, generics kept.

use troupe::{Actor, Context, Handler, Message, System};

#[derive(Message)]
struct Add(u64);

#[derive(Message)]
#[reply(Result<u64, String>)]
struct Total;

#[derive(Message)]
#[reply(Vec<T>)]
struct Repeat<T: Clone + Send + 'static> {
    item: T,
    times: usize,
}

#[derive(Message)]
#[reply(&'static str)]
enum Mode {
    Loud,
    Quiet,
}

#[derive(Default)]
struct Sum(u64);
impl Actor for Sum {}
impl Handler<Add> for Sum {
    fn handle(&mut self, msg: Add, _: &mut Context<Self>) {
        self.0 += msg.0;
    }
}
impl Handler<Total> for Sum {
    fn handle(&mut self, _: Total, _: &mut Context<Self>) -> Result<u64, String> {
        Ok(self.0)
    }
}
impl Handler<Repeat<char>> for Sum {
    fn handle(&mut self, msg: Repeat<char>, _: &mut Context<Self>) -> Vec<char> {
        vec![msg.item; msg.times]
    }
}
impl Handler<Mode> for Sum {
    fn handle(&mut self, msg: Mode, _: &mut Context<Self>) -> &'static str {
        match msg {
            Mode::Loud => "LOUD",
            Mode::Quiet => "quiet",
        }
    }
}

#[test]
fn derived_messages_carry_their_reply_types() {
    let system = System::new();
    let sum = system.spawn(Sum::default());
    sum.tell(Add(2)).unwrap();
    sum.tell(Add(3)).unwrap();
    assert_eq!(sum.ask(Total).wait(), Ok(Ok(5)));
    assert_eq!(
        sum.ask(Repeat {
            item: 'x',
            times: 3
        })
        .wait(),
        Ok(vec!['x'; 3])
    );
    assert_eq!(sum.ask(Mode::Loud).wait(), Ok("LOUD"));
    assert_eq!(sum.ask(Mode::Quiet).wait(), Ok("quiet"));
    system.shutdown();
}
