//! How a backend actor reaches its service: the seam between the store's logic (bulkhead,
//! timeout, breaker, in [`BackendActor`](crate::actor_store::BackendActor)) and the wire.
//!
//! A [`Transport`] makes one call and says how it went; it knows nothing of timeouts, limits or
//! breakers, which stay in the actor. The store runs on [`HttpTransport`] (hyper's pooled
//! client, real HTTP); a simulation gives the same actor the simulated services of
//! [`sim_backends`](crate::sim_backends), whose latency and hangs are futures on the simulated
//! clock. Nothing in the actor's code paths knows which one it has.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::actor_store::{Call, CallError};

/// A call in progress: its answer as JSON, or why there is none.
pub type CallFuture =
    Pin<Box<dyn Future<Output = Result<serde_json::Value, CallError>> + Send + 'static>>;

/// One backend service, as its actor calls it. See the module note.
pub trait Transport: Send + Sync + 'static {
    /// Starts `call`. The future owns what it needs (it outlives the borrow of `self`); the
    /// actor bounds it with its call timeout and drops it then, which must abandon the call.
    fn call(&self, call: Call) -> CallFuture;
}

/// The largest answer read from a backend (bytes); more is treated as garbage.
const MAX_BACKEND_ANSWER: usize = 1024 * 1024;

/// The pooled HTTP client the store shares between its backends.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A backend service over HTTP: `GET`/`POST` of JSON to a base URL, through hyper's pooled
/// client.
pub struct HttpTransport {
    name: &'static str,
    base: String,
    client: HttpClient,
}

impl HttpTransport {
    /// Calls the service named `name` (in error messages) at `base`, e.g.
    /// `http://127.0.0.1:4001` (a trailing `/` is ignored).
    pub fn new(name: &'static str, base: &str, client: HttpClient) -> Self {
        Self {
            name,
            base: base.trim_end_matches('/').to_owned(),
            client,
        }
    }
}

impl Transport for HttpTransport {
    fn call(&self, call: Call) -> CallFuture {
        let (name, client) = (self.name, self.client.clone());
        let uri = format!("{}{}", self.base, call.path);
        Box::pin(async move {
            let request = hyper::Request::builder()
                .method(call.method)
                .uri(uri)
                .header("content-type", "application/json")
                .body(Full::new(call.body.unwrap_or_default()))
                .map_err(|e| CallError::Unreachable(name, e.to_string()))?;
            let response = client
                .request(request)
                .await
                .map_err(|e| CallError::Unreachable(name, e.to_string()))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BACKEND_ANSWER)
                .collect()
                .await
                .map_err(|_| CallError::Garbage(name))?
                .to_bytes();
            if !status.is_success() {
                return Err(CallError::Status(name, status.as_u16()));
            }
            serde_json::from_slice(&body).map_err(|_| CallError::Garbage(name))
        })
    }
}
