//! The search and payment services of [`backends`](crate::backends), simulated: the same
//! answers, the same 20 ms, the same 30-second hang, as futures that sleep on tokio's clock,
//! which in a `troupe::sim` simulation is the simulated one. They plug into the store's
//! backend actors through the [`Transport`] seam, in place of HTTP.
//!
//! What a call does is decided when it arrives (as in the real search service, whose mode at
//! a call's arrival decides its fate):
//! - search `healthy`: sleeps the latency, answers [`results_for`] the query;
//! - search `hang`: sleeps the hang (30 s), answers 502;
//! - search `garbage`: sleeps the latency, answers something that is not JSON;
//! - payment: sleeps the latency, answers a receipt numbered from 1.
//!
//! A call the store abandons (its timeout drops the future) ends at once, as a closed
//! connection would end it for the client. The services count the calls in progress, as the
//! store sees them (from the call's start to its answer or abandonment), and the most at once:
//! what the store's bulkhead must bound.
//!
//! Outside a simulation they work too, in real time (tokio's clock).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::actor_store::{Call, CallError};
use crate::backends::{results_for, BackendsConfig, SearchMode};
use crate::transport::{CallFuture, Transport};
use crate::{Payment, PaymentReceipt};

/// Calls in progress at one service, and the most at once.
#[derive(Debug, Default)]
struct Gauge {
    calls: AtomicU64,
    now: AtomicU64,
    peak: AtomicU64,
}

impl Gauge {
    fn enter(self: &Arc<Self>) -> InProgress {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let now = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        InProgress(self.clone())
    }
}

/// One call in progress; its end (answer or abandonment) when dropped.
struct InProgress(Arc<Gauge>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Shared {
    config: BackendsConfig,
    mode: AtomicU8,
    search: Arc<Gauge>,
    payment: Arc<Gauge>,
    payments: AtomicU64,
}

/// The two simulated services. Clone it freely: clones share the services.
#[derive(Clone)]
pub struct SimulatedBackends {
    shared: Arc<Shared>,
}

impl SimulatedBackends {
    /// Services with these settings (latency, hang, search's mode at start).
    pub fn new(config: BackendsConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                config,
                mode: AtomicU8::new(config.search_mode.as_u8()),
                search: Arc::default(),
                payment: Arc::default(),
                payments: AtomicU64::new(0),
            }),
        }
    }

    /// The search service, for a backend actor.
    pub fn search(&self) -> Arc<dyn Transport> {
        Arc::new(Search(self.shared.clone()))
    }

    /// The payment service, for a backend actor.
    pub fn payment(&self) -> Arc<dyn Transport> {
        Arc::new(Pay(self.shared.clone()))
    }

    /// Switches the search service's mode; calls that arrived before keep their fate.
    pub fn set_search_mode(&self, mode: SearchMode) {
        self.shared.mode.store(mode.as_u8(), Ordering::SeqCst);
    }

    /// The search service's mode.
    pub fn search_mode(&self) -> SearchMode {
        SearchMode::from_u8(self.shared.mode.load(Ordering::SeqCst))
    }

    /// Search calls received so far.
    pub fn search_calls(&self) -> u64 {
        self.shared.search.calls.load(Ordering::Relaxed)
    }

    /// Search calls in progress now.
    pub fn search_in_progress(&self) -> u64 {
        self.shared.search.now.load(Ordering::Relaxed)
    }

    /// The most search calls in progress at once so far.
    pub fn search_peak(&self) -> u64 {
        self.shared.search.peak.load(Ordering::Relaxed)
    }

    /// Payment calls received so far.
    pub fn payment_calls(&self) -> u64 {
        self.shared.payment.calls.load(Ordering::Relaxed)
    }

    /// The most payment calls in progress at once so far.
    pub fn payment_peak(&self) -> u64 {
        self.shared.payment.peak.load(Ordering::Relaxed)
    }
}

/// The query `q` of a search path (`/search?q=...`), percent-decoded; `None` if missing or
/// not UTF-8.
fn query_of(path: &str) -> Option<String> {
    let (_, query) = path.split_once('?')?;
    let value = query.split('&').find_map(|pair| pair.strip_prefix("q="))?;
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The simulated search service.
struct Search(Arc<Shared>);

impl Transport for Search {
    fn call(&self, call: Call) -> CallFuture {
        let shared = self.0.clone();
        Box::pin(async move {
            let _in_progress = shared.search.enter();
            // The mode when the call arrives decides its fate.
            let mode = SearchMode::from_u8(shared.mode.load(Ordering::SeqCst));
            let Some(query) = query_of(&call.path).filter(|q| crate::check_query(q).is_ok()) else {
                return Err(CallError::Status("search", 400));
            };
            match mode {
                SearchMode::Healthy => {
                    tokio::time::sleep(shared.config.latency).await;
                    serde_json::to_value(results_for(&query))
                        .map_err(|_| CallError::Garbage("search"))
                }
                SearchMode::Hang => {
                    tokio::time::sleep(shared.config.hang).await;
                    Err(CallError::Status("search", 502))
                }
                SearchMode::Garbage => {
                    tokio::time::sleep(shared.config.latency).await;
                    Err(CallError::Garbage("search"))
                }
            }
        })
    }
}

/// The simulated payment service.
struct Pay(Arc<Shared>);

impl Transport for Pay {
    fn call(&self, call: Call) -> CallFuture {
        let shared = self.0.clone();
        Box::pin(async move {
            let _in_progress = shared.payment.enter();
            let payment: Payment = call
                .body
                .as_deref()
                .and_then(|body| serde_json::from_slice(body).ok())
                .ok_or(CallError::Status("payment", 400))?;
            if crate::check_amount(payment.amount_cents).is_err() {
                return Err(CallError::Status("payment", 400));
            }
            tokio::time::sleep(shared.config.latency).await;
            let payment_id = shared.payments.fetch_add(1, Ordering::Relaxed) + 1;
            serde_json::to_value(PaymentReceipt {
                payment_id,
                item: payment.item,
                amount_cents: payment.amount_cents,
                status: "approved".to_owned(),
            })
            .map_err(|_| CallError::Garbage("payment"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_read_from_the_path() {
        assert_eq!(query_of("/search?q=shoes").as_deref(), Some("shoes"));
        assert_eq!(
            query_of("/search?x=1&q=red%20shoes%26x%3D1").as_deref(),
            Some("red shoes&x=1")
        );
        assert_eq!(query_of("/search?q=%C3%A9").as_deref(), Some("é"));
        assert_eq!(query_of("/search"), None);
        assert_eq!(query_of("/search?q=%4"), None);
    }
}
