//! Deferred replies: a handler answers an ask later, from a continuation or another actor; the
//! asker's timeout covers the whole wait; a dropped handle, a panic or a told message each end
//! it clearly.

use std::time::Duration;

use crate::common::{wait_for, LONG};
use troupe::{Actor, Addr, AskError, Context, Deferred, DeferredHandler, Handler, Message, System};

/// Answers `Lookup` after an async step, through a deferred reply.
struct Service {
    /// Replies kept to answer later (by `Release`), or dropped (by `Forget`).
    held: Vec<Deferred<String>>,
}
impl Actor for Service {}

struct Lookup(u32);
impl Message for Lookup {
    type Reply = String;
}
impl DeferredHandler<Lookup> for Service {
    fn handle(&mut self, msg: Lookup, reply: Deferred<String>, ctx: &mut Context<Self>) {
        ctx.pipe(
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                format!("user {}", msg.0)
            },
            move |name| Answered(name, reply),
        );
    }
}
struct Answered(String, Deferred<String>);
impl Message for Answered {
    type Reply = ();
}
impl Handler<Answered> for Service {
    fn handle(&mut self, msg: Answered, _: &mut Context<Self>) {
        msg.1.send(msg.0).unwrap();
    }
}

/// Defers and keeps the reply.
struct Hold;
impl Message for Hold {
    type Reply = String;
}
impl DeferredHandler<Hold> for Service {
    fn handle(&mut self, _: Hold, reply: Deferred<String>, _: &mut Context<Self>) {
        self.held.push(reply);
    }
}
/// Counts the held replies nobody waits for any more, and lets them go.
struct CountClosed;
impl Message for CountClosed {
    type Reply = usize;
}
impl Handler<CountClosed> for Service {
    fn handle(&mut self, _: CountClosed, _: &mut Context<Self>) -> usize {
        self.held
            .drain(..)
            .filter(|reply| reply.is_closed())
            .count()
    }
}
struct SendHeld(&'static str);
impl Message for SendHeld {
    type Reply = Vec<bool>;
}
impl Handler<SendHeld> for Service {
    fn handle(&mut self, msg: SendHeld, _: &mut Context<Self>) -> Vec<bool> {
        self.held
            .drain(..)
            .map(|reply| reply.send(msg.0.to_owned()).is_ok())
            .collect()
    }
}
/// Drops every held reply unsent.
struct Forget;
impl Message for Forget {
    type Reply = ();
}
impl Handler<Forget> for Service {
    fn handle(&mut self, _: Forget, _: &mut Context<Self>) {
        self.held.clear();
    }
}
/// Defers, then panics.
struct DeferThenPanic;
impl Message for DeferThenPanic {
    type Reply = String;
}
impl DeferredHandler<DeferThenPanic> for Service {
    fn handle(&mut self, _: DeferThenPanic, reply: Deferred<String>, _: &mut Context<Self>) {
        self.held.push(reply);
        panic!("deferred, then failed on purpose");
    }
}
/// Defers and answers at once, before the handler returns.
struct Early;
impl Message for Early {
    type Reply = u8;
}
impl DeferredHandler<Early> for Service {
    fn handle(&mut self, _: Early, reply: Deferred<u8>, _: &mut Context<Self>) {
        reply.send(42).unwrap();
    }
}

/// Another actor that answers on the service's behalf.
struct Oracle;
impl Actor for Oracle {}
struct Answer(Deferred<String>);
impl Message for Answer {
    type Reply = ();
}
impl Handler<Answer> for Oracle {
    fn handle(&mut self, msg: Answer, _: &mut Context<Self>) {
        msg.0.send("from the oracle".into()).unwrap();
    }
}
struct Delegate(Addr<Oracle>);
impl Message for Delegate {
    type Reply = String;
}
impl DeferredHandler<Delegate> for Service {
    fn handle(&mut self, msg: Delegate, reply: Deferred<String>, _: &mut Context<Self>) {
        msg.0.tell(Answer(reply)).unwrap();
    }
}

fn service(system: &System) -> Addr<Service> {
    system.spawn(Service { held: Vec::new() })
}

#[test]
fn a_deferred_reply_comes_from_a_continuation_or_another_actor() {
    let system = System::new();
    let service = service(&system);
    let asks: Vec<_> = (0..100).map(|i| service.ask(Lookup(i))).collect();
    for (i, ask) in asks.into_iter().enumerate() {
        assert_eq!(ask.wait_timeout(LONG), Ok(format!("user {i}")));
    }
    let oracle = system.spawn(Oracle);
    assert_eq!(
        service.ask(Delegate(oracle)).wait_timeout(LONG).as_deref(),
        Ok("from the oracle")
    );
    assert_eq!(service.ask(Early).wait_timeout(LONG), Ok(42));
    system.block_on(async {
        assert_eq!(service.ask(Lookup(9)).await.as_deref(), Ok("user 9"));
    });
    system.shutdown();
}

#[test]
fn the_askers_timeout_covers_the_whole_wait_and_a_late_reply_is_refused() {
    let system = System::new();
    let service = service(&system);
    let late = service.ask_timeout(Hold, Duration::from_millis(20));
    assert_eq!(
        late.wait(),
        Err(AskError::Timeout(Duration::from_millis(20)))
    );
    // The handle now says nobody waits, and sending gives the reply back.
    assert_eq!(service.ask(CountClosed).wait_timeout(LONG), Ok(1));
    let abandoned = service.ask(Hold);
    drop(abandoned);
    let kept = service.ask(Hold);
    assert_eq!(
        service.ask(SendHeld("now")).wait_timeout(LONG),
        Ok(vec![false, true]),
        "the abandoned ask's reply comes back, the kept one's goes"
    );
    assert_eq!(kept.wait_timeout(LONG).as_deref(), Ok("now"));
    // Told, not asked: nobody takes the reply.
    service.tell(Hold).unwrap();
    assert_eq!(
        service.ask(SendHeld("x")).wait_timeout(LONG),
        Ok(vec![false])
    );
    system.shutdown();
}

#[test]
fn a_dropped_handle_or_a_panic_ends_the_ask() {
    std::panic::set_hook(Box::new(|info| {
        if !info.to_string().contains("on purpose") {
            eprintln!("{info}");
        }
    }));
    let system = System::new();
    let service = service(&system);
    let forgotten = service.ask(Hold);
    service.tell(Forget).unwrap();
    assert_eq!(forgotten.wait_timeout(LONG), Err(AskError::NoReply));

    let failed = service.ask(DeferThenPanic);
    assert_eq!(failed.wait_timeout(LONG), Err(AskError::Panicked));
    // The top-level service stopped (system-supervised actors stop on failure); the handle
    // it kept went with it.
    wait_for("the service to stop", LONG, || service.is_stopped());
    system.shutdown();
}
