//! The router (`Exchange::router`): the receivers' work run in the caller's turn gives every
//! order the answer a receiver gives it, and loses none.

use std::sync::mpsc;
use std::time::Duration;

use troupe::System;
use troupe_trading::{
    Ack, ClientId, Exchange, ExchangeConfig, InstrumentId, NewOrder, Outcome, RejectReason, Side,
};

const WAIT: Duration = Duration::from_secs(10);

fn order(client: ClientId, id: u64, instrument: u16, price: i32, volume: i32) -> NewOrder {
    NewOrder {
        client_order_id: id,
        client,
        price,
        volume,
        instrument: InstrumentId(instrument),
        side: Side::Buy,
    }
}

/// The seed's exchange (request-reply, no log) on a system of two workers.
fn seed_exchange() -> (System, Exchange) {
    let system = System::builder().workers(2).build().unwrap();
    let exchange = Exchange::start(&system, ExchangeConfig::seed()).unwrap();
    (system, exchange)
}

/// The outcome of `order`'s one ack (the seed's request-reply style), sent by the router or
/// through the client's receiver.
fn answer(
    exchange: &Exchange,
    by_router: bool,
    rx: &mpsc::Receiver<Ack>,
    order: NewOrder,
) -> Outcome {
    if by_router {
        exchange.router().submit(order);
    } else {
        exchange.submit(order).unwrap();
    }
    let ack = rx.recv_timeout(WAIT).expect("every order is answered");
    assert_eq!(ack.client_order_id, order.client_order_id);
    ack.outcome
}

#[test]
fn the_router_answers_every_order_as_a_receiver_does() {
    let (system, exchange) = seed_exchange();
    let mut outcomes = Vec::new();
    for by_router in [true, false] {
        let (tx, rx) = mpsc::channel();
        let me = exchange.connect(tx).unwrap();
        outcomes.push([
            answer(&exchange, by_router, &rx, order(me, 1, 0, 100, 5)),
            answer(&exchange, by_router, &rx, order(me, 1, 0, 100, 5)),
            answer(&exchange, by_router, &rx, order(me, 2, 0, 100, 0)),
            answer(&exchange, by_router, &rx, order(me, 3, 99, 100, 5)),
            answer(&exchange, by_router, &rx, order(me, 4, 1, 0, 5)),
            answer(&exchange, by_router, &rx, order(me, 5, 14, 1_000_000, 1)),
        ]);
        assert!(rx.try_recv().is_err(), "one ack per order");
    }
    assert_eq!(
        outcomes[0],
        [
            Outcome::Accepted { filled: 0 },
            Outcome::Rejected(RejectReason::DuplicateClientOrderId),
            Outcome::Rejected(RejectReason::NonPositiveVolume(0)),
            Outcome::Rejected(RejectReason::UnknownInstrument(99)),
            Outcome::Rejected(RejectReason::PriceOutOfRange(0)),
            Outcome::Accepted { filled: 0 },
        ]
    );
    assert_eq!(
        outcomes[0], outcomes[1],
        "the router and a receiver answer alike"
    );
    exchange.shutdown();
    system.shutdown();
}

#[test]
fn an_order_from_a_session_never_opened_reaches_no_engine() {
    let (system, exchange) = seed_exchange();
    let (tx, rx) = mpsc::channel();
    let me = exchange.connect(tx).unwrap();
    exchange
        .router()
        .submit(order(ClientId(4000), 1, 0, 100, 5));
    // An order sent after it by a connected client, to the same book, is answered: had the
    // stranger's order gone on, it would have been handled first.
    assert_eq!(
        answer(&exchange, true, &rx, order(me, 1, 0, 100, 5)),
        Outcome::Accepted { filled: 0 }
    );
    // A valid order for a known book: had it gone on, the primary would have applied it.
    let states = exchange.pair_states().unwrap();
    assert_eq!(states.iter().map(|p| p.primary.applied).sum::<u64>(), 1);
    assert_eq!(states.iter().map(|p| p.standby.applied).sum::<u64>(), 1);
    exchange.shutdown();
    system.shutdown();
}

#[test]
fn a_router_kept_past_the_exchange_refuses_its_orders() {
    let (system, exchange) = seed_exchange();
    let (tx, rx) = mpsc::channel();
    let me = exchange.connect(tx).unwrap();
    let router = exchange.router().clone();
    exchange.shutdown();
    // Whether the primary has stopped when the order reaches it or stops with the order in
    // its mailbox, the order is refused, never lost.
    router.submit(order(me, 1, 0, 100, 5));
    let ack = rx.recv_timeout(WAIT).expect("the order is answered");
    assert_eq!(ack.client_order_id, 1);
    assert_eq!(
        ack.outcome,
        Outcome::Rejected(RejectReason::EngineUnavailable)
    );
    system.shutdown();
}
