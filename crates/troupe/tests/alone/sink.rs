//! An actor that adds up what it is told, shared by the allocation tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use troupe::{Actor, Context, Handler, Message};

/// Adds every `Add` to the total it shares.
pub struct Sink(pub Arc<AtomicU64>);
impl Actor for Sink {}

pub struct Add(pub u64);
impl Message for Add {
    type Reply = ();
}
impl Handler<Add> for Sink {
    fn handle(&mut self, msg: Add, _: &mut Context<Self>) {
        self.0.fetch_add(msg.0, Ordering::Relaxed);
    }
}
