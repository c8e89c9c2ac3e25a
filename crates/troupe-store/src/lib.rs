//! The online store of seed 001 ("Scaling Scala vs. Java"), twice: on troupe, and as the
//! thread-per-request baseline the seed measured against it, with the backends they call and
//! the load that shows the difference.
//!
//! - [`backends`]: the search and payment services, real HTTP on loopback, answering JSON
//!   after 20 ms; search can be switched to hang (30 s, then 502) and back.
//! - [`listener`]: the listening sockets, with the accept backlog a deployment sets (both
//!   stores and the backends).
//! - [`edge`]: where the troupe store meets its clients: a deadline on each request's head and
//!   body, a size limit enforced from `Content-Length`, a cap on connections.
//! - [`actor_store`]: the store on troupe and axum. One actor per backend owns its transport
//!   ([`transport`]: HTTP), its bulkhead ([`bulkhead`]), its per-call timeout and its circuit
//!   breaker ([`breaker`]); the edge sheds load with 503 rather than queueing without bound.
//! - [`thread_store`]: the same endpoints on a synchronous server with a 200-thread pool and a
//!   blocking HTTP client without timeouts, configured as the seed's Tomcat was.
//! - [`load`]: the seed's closed model (300 users per request type, thinking 500-1500 ms),
//!   phases (healthy, search hanging, recovered), and an open model at fixed arrival rates.
//! - [`simulation`]: the troupe store's actor part under the seed's scenario in deterministic
//!   simulation (`troupe::sim`), with the backends simulated ([`sim_backends`]) and the load
//!   as actors on timers ([`sim_load`]), and the seed's claims checked on simulated time.
//!
//! The endpoints, the same on both stores:
//!
//! | request | what it does |
//! |---|---|
//! | `GET /` | the index page, served locally |
//! | `GET /search?q=...` | calls the search service |
//! | `POST /pay` `{"item": 7, "amount_cents": 1999}` | calls the payment service |
//! | `POST /checkout` `{"query": "shoes", "amount_cents": 1999}` | search, then pay for the first hit |
//!
//! Every error is a JSON object `{"error": "..."}` with a 4xx or 5xx status.

use serde::{Deserialize, Serialize};

pub mod breaker;
pub mod bulkhead;
pub mod backends;
pub mod transport;
pub mod listener;
pub mod edge;
pub mod actor_store;
pub mod thread_store;
pub mod load;
pub mod sim_backends;
pub mod sim_load;
pub mod simulation;
pub mod bench;
pub mod report;

/// How long each backend takes to answer when healthy (the seed's 20 ms).
pub const BACKEND_LATENCY: std::time::Duration = std::time::Duration::from_millis(20);

/// The most a request body may hold, on both stores and the backends (bytes).
pub const MAX_BODY: usize = 16 * 1024;

/// One product, as search finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its price.
    pub price_cents: u64,
}

/// What search answers (the search service's answer, passed on by the store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResults {
    /// The query.
    pub query: String,
    /// What matched.
    pub results: Vec<Product>,
}

/// A payment request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payment {
    /// The product paid for.
    pub item: u64,
    /// The amount.
    pub amount_cents: u64,
}

/// What the payment service answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaymentReceipt {
    /// The payment's id.
    pub payment_id: u64,
    /// The product paid for.
    pub item: u64,
    /// The amount.
    pub amount_cents: u64,
    /// `approved`.
    pub status: String,
}

/// A checkout: search, then pay for the first hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkout {
    /// What to search for.
    pub query: String,
    /// What to pay.
    pub amount_cents: u64,
}

/// What a checkout answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutReceipt {
    /// The product bought.
    pub product: Product,
    /// The payment.
    pub payment: PaymentReceipt,
}

/// The index page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPage {
    /// The store's name.
    pub store: String,
    /// Featured products.
    pub featured: Vec<Product>,
}

/// Every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a person to read.
    pub error: String,
}

/// The index page both stores serve (built locally, no backend).
pub fn index_page(store: &str) -> IndexPage {
    IndexPage {
        store: store.to_owned(),
        featured: (1..=3)
            .map(|id| Product {
                id,
                name: format!("featured product {id}"),
                price_cents: 999 * id,
            })
            .collect(),
    }
}

/// Checks a search query: 1 to 200 characters.
pub fn check_query(query: &str) -> Result<(), String> {
    if query.is_empty() {
        return Err("the query `q` must not be empty".to_owned());
    }
    if query.len() > 200 {
        return Err("the query `q` must be at most 200 characters".to_owned());
    }
    Ok(())
}

/// Checks a payment: a positive amount of at most 1,000,000.00.
pub fn check_amount(amount_cents: u64) -> Result<(), String> {
    if amount_cents == 0 || amount_cents > 100_000_000 {
        return Err("`amount_cents` must be between 1 and 100000000".to_owned());
    }
    Ok(())
}
