//! A live web console for a running troupe system: its supervision tree, its pools and their
//! workers, the slowest handlers, the asks actors wait on and any cycle among them, and a flame
//! graph of the time spent in handlers. One self-contained page (no external assets, it works
//! offline) polls a few JSON endpoints every second.
//!
//! The console reads the system's observation API ([`System::actors`], [`System::waits`], ...),
//! so the system must be built with [`SystemBuilder::observe`](troupe::SystemBuilder::observe)
//! (or `trace_messages`). It listens on a loopback address only, and answers only requests
//! addressed to a loopback host name: it is for the people on the machine, not the network.
//!
//! ```
//! use troupe::System;
//! use troupe_console::Console;
//!
//! let system = System::builder().observe().build().unwrap();
//! let console = Console::serve(system.clone(), "127.0.0.1:0".parse().unwrap()).unwrap();
//! println!("console on {}", console.url());
//! console.shutdown().unwrap();
//! system.shutdown();
//! ```
//!
//! The server runs on a thread of its own (`troupe-console`) with a small current-thread
//! tokio runtime, so it works the same from a plain `main`, a tokio service, or a test, and it
//! never takes a worker of the system's pools or of the caller's runtime. To mount the
//! endpoints into an axum application of your own instead, use [`Console::router`].
//!
//! # Endpoints
//!
//! - `GET /`: the page.
//! - `GET /api/overview`: counts (live actors, listed, dead letters, asks timed out,
//!   escalations) and the pools (workers, turns, steals, parks, queued).
//! - `GET /api/actors?after=<id>&limit=<n>`: one page of live actors in id order (`limit` 1
//!   to [`MAX_PAGE`], default 1,000) and the cursor of the next page.
//! - `GET /api/handlers?top=<n>`: the handlers with the most time, by actor type and message
//!   type (`top` 1 to 1,000, default 20), with the totals over all of them.
//! - `GET /api/waits`: the asks waited on now, the cycles among them now, and the cycles seen
//!   as they formed, with the type and names of every actor they name.
//!
//! Bad input (an unknown parameter, a limit out of range, an id that is not a number) gets a
//! `400` with a one-line plain-text message. No request lists more than one page of actors.

#![deny(missing_docs)]

mod api;

use std::net::{SocketAddr, TcpListener};
use std::thread::JoinHandle;
use std::time::Duration;

use troupe::System;

pub use api::{DEFAULT_PAGE, DEFAULT_TOP, MAX_PAGE, MAX_TOP, MAX_WAITS};

/// How long a stopping console lets requests in flight finish before it closes them.
const GRACE: Duration = Duration::from_secs(1);

/// Why the console could not start, or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The system was built without observation.
    #[error("the console needs an observed system: build it with `System::builder().observe()`")]
    NotObserved,
    /// The address is not a loopback address.
    #[error("the console listens on a loopback address only (127.0.0.1, ::1), not {0}")]
    NotLoopback(SocketAddr),
    /// The text is not an address with a port.
    #[error("`{0}` is not an address with a port, such as 127.0.0.1:0")]
    BadAddress(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The console's runtime or thread could not be started.
    #[error("cannot start the console's thread: {0}")]
    Start(std::io::Error),
    /// The server stopped with an error.
    #[error("the console's server failed: {0}")]
    Serve(std::io::Error),
    /// The console's thread panicked.
    #[error("the console's thread panicked")]
    Panicked,
}

/// Reads a console address such as `127.0.0.1:0` from a command line or an environment
/// variable, and checks that it is a loopback address: the check [`Console::serve`] makes,
/// for a program to make up front, before it starts anything.
///
/// ```
/// use troupe_console::{loopback_addr, ConsoleError};
/// assert_eq!(loopback_addr("127.0.0.1:8080").unwrap().port(), 8080);
/// assert!(loopback_addr("[::1]:0").is_ok());
/// assert!(matches!(loopback_addr("0.0.0.0:80"), Err(ConsoleError::NotLoopback(_))));
/// assert!(matches!(loopback_addr("localhost"), Err(ConsoleError::BadAddress(_))));
/// ```
pub fn loopback_addr(text: &str) -> Result<SocketAddr, ConsoleError> {
    let addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| ConsoleError::BadAddress(text.to_owned()))?;
    if !addr.ip().is_loopback() {
        return Err(ConsoleError::NotLoopback(addr));
    }
    Ok(addr)
}

/// The console: [`serve`](Console::serve) it on a loopback port, or take its
/// [`router`](Console::router) into an axum application.
#[derive(Debug)]
#[non_exhaustive]
pub struct Console;

impl Console {
    /// Serves the console of `system` on `addr` (a loopback address; port 0 picks a free port,
    /// which [`ConsoleHandle::addr`] reports), from a thread of its own running a
    /// current-thread tokio runtime. The address is bound before this returns, so a port in
    /// use is an error here, and the page answers as soon as it returns. The console stops
    /// when the handle is shut down or dropped.
    ///
    /// ```
    /// use troupe_console::{Console, ConsoleError};
    /// let plain = troupe::System::new();
    /// let refused = Console::serve(plain.clone(), "127.0.0.1:0".parse().unwrap());
    /// assert!(matches!(refused, Err(ConsoleError::NotObserved)));
    /// plain.shutdown();
    ///
    /// let system = troupe::System::builder().observe().build().unwrap();
    /// let public = Console::serve(system.clone(), "0.0.0.0:0".parse().unwrap());
    /// assert!(matches!(public, Err(ConsoleError::NotLoopback(_))));
    /// system.shutdown();
    /// ```
    pub fn serve(system: System, addr: SocketAddr) -> Result<ConsoleHandle, ConsoleError> {
        let app = Self::router(system)?;
        if !addr.ip().is_loopback() {
            return Err(ConsoleError::NotLoopback(addr));
        }
        let listener =
            TcpListener::bind(addr).map_err(|source| ConsoleError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| ConsoleError::Bind { addr, source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| ConsoleError::Bind { addr, source })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .thread_name("troupe-console")
            .build()
            .map_err(ConsoleError::Start)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|source| ConsoleError::Bind { addr, source })?
        };
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("troupe-console".into())
            .spawn(move || runtime.block_on(run(listener, app, stopped)))
            .map_err(ConsoleError::Start)?;
        Ok(ConsoleHandle {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The console's routes (the page and its JSON endpoints), to serve from an axum
    /// application of your own. They refuse requests whose `Host` is not a loopback name
    /// (`localhost`, `127.0.0.1`, `[::1]`), which keeps other web sites' pages from reading
    /// them through a name that resolves to this machine; serve them on a loopback address.
    ///
    /// ```
    /// let system = troupe::System::builder().observe().build().unwrap();
    /// let app: axum::Router = troupe_console::Console::router(system.clone()).unwrap();
    /// # drop(app);
    /// system.shutdown();
    /// ```
    pub fn router(system: System) -> Result<axum::Router, ConsoleError> {
        if !system.is_observed() {
            return Err(ConsoleError::NotObserved);
        }
        Ok(api::router(system))
    }
}

/// Serves until `stopped` turns true (or its sender is dropped), then lets requests in flight
/// finish for up to [`GRACE`].
async fn run(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut signal = stopped.clone();
    let mut deadline = stopped;
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = signal.wait_for(|stop| *stop).await;
    });
    tokio::select! {
        result = server => result,
        _ = async {
            let _ = deadline.wait_for(|stop| *stop).await;
            tokio::time::sleep(GRACE).await;
        } => Ok(()),
    }
}

/// A console being served; dropping it stops the console (as [`shutdown`](Self::shutdown)
/// does, ignoring errors).
#[derive(Debug)]
pub struct ConsoleHandle {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl ConsoleHandle {
    /// The address the console listens on (with the port picked, if 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops taking connections, lets requests in flight finish (for a second at most), and
    /// waits for the console's thread to end.
    pub fn shutdown(mut self) -> Result<(), ConsoleError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ConsoleError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let _ = self.stop.send(true);
        match thread.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(ConsoleError::Serve(error)),
            Err(_) => Err(ConsoleError::Panicked),
        }
    }
}

impl Drop for ConsoleHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
