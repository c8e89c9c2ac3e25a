//! The order receiver: the stateless front door.
//!
//! A receiver validates each [`NewOrder`] against the [`Market`] (known instrument, positive
//! volume, price inside the band) and routes it to the primary engine that owns its book. It
//! keeps nothing between orders, so any receiver accepts any order and clients may use any of
//! them; the exchange runs several so that clients do not all queue on one mailbox.
//!
//! A bad order is answered right here with a typed [`RejectReason`] and never reaches an
//! engine. Orders from a client id that never connected cannot be answered at all and are
//! dropped (counted nowhere but in the client's own missing ack: the client API does not let
//! this happen).
//!
//! The work itself is a [`Router`], a value: a receiver runs it in its turns, and a client
//! actor in the exchange's process may run it in its own turn (one message fewer per order).
//! The router answers exactly as a receiver does; it has no mailbox, so where a receiver's
//! mailbox would hold a burst of orders, the router runs each where it was placed.

use std::sync::Arc;

use troupe::{Actor, Addr, Context, Handler, Message};

use crate::engine::{Engine, Place};
use crate::market::Market;
use crate::order::{Ack, NewOrder, Outcome, RejectReason, Role};
use crate::session::Sessions;

/// A client's order for a receiver.
#[derive(Debug, Clone, Copy)]
pub struct Submit(pub NewOrder);

impl Message for Submit {
    type Reply = ();
}

/// What a receiver does with an order, as a value: validate it and tell the primary that owns
/// its book. It keeps nothing between orders, so it runs wherever an order is: in a
/// [`Receiver`]'s turn, or in the turn of the client actor that placed the order
/// ([`Exchange::router`](crate::Exchange::router)), one message fewer per order.
#[derive(Clone)]
pub struct Router {
    market: Arc<Market>,
    primaries: Arc<[Addr<Engine>]>,
    sessions: Arc<Sessions>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("pairs", &self.primaries.len())
            .finish()
    }
}

impl Router {
    pub(crate) fn new(
        market: Arc<Market>,
        primaries: Arc<[Addr<Engine>]>,
        sessions: Arc<Sessions>,
    ) -> Self {
        Router {
            market,
            primaries,
            sessions,
        }
    }

    /// Validates `order` and tells its primary `Place`; a bad order, or one whose engine has
    /// stopped, is answered with a rejection on the client's session. An order from a client
    /// id that never connected cannot be answered and is dropped.
    #[inline]
    pub fn submit(&self, order: NewOrder) {
        if !self.sessions.is_connected(order.client) {
            return;
        }
        let valid = match self.market.validate(&order) {
            Ok(valid) => valid,
            Err(reason) => return self.reject(&order, reason),
        };
        let pair = self
            .market
            .pair_of(valid.instrument())
            .expect("a validated order names a known instrument");
        if self.primaries[pair].tell(Place(valid)).is_err() {
            self.reject(&order, RejectReason::EngineUnavailable);
        }
    }

    fn reject(&self, order: &NewOrder, reason: RejectReason) {
        let _ = self.sessions.deliver(
            order.client,
            Ack {
                client_order_id: order.client_order_id,
                outcome: Outcome::Rejected(reason),
                from: Role::Primary,
            },
        );
    }
}

/// A stateless order receiver: a [`Router`] with a mailbox. See the module note.
pub struct Receiver {
    router: Router,
}

impl Actor for Receiver {}

impl Receiver {
    pub(crate) fn new(router: Router) -> Self {
        Receiver { router }
    }
}

impl Handler<Submit> for Receiver {
    #[inline]
    fn handle(&mut self, Submit(order): Submit, _ctx: &mut Context<Self>) {
        self.router.submit(order);
    }
}
