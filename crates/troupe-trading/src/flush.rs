//! The flusher of an fsync log: a thread of the log's own that runs `fdatasync` back to back,
//! so that the engine writing the log never waits for the disk.
//!
//! # Protocol
//! The log's owner (the engine's [`Journal`](crate::Journal)) encodes records into a buffer
//! and, once per batch, writes the buffer to the file itself: a `write` into the OS's page
//! cache, microseconds. Then it raises the log's *written* mark to the last sequence number
//! written ([`Flusher::written`]) and goes back to its orders. The flusher thread waits until
//! the written mark is above the *durable* mark, takes the written mark as its flush's
//! *target*, calls `fdatasync`, and when that returns raises the durable mark to the target
//! and reports it (the `on_durable` callback: the engine gets a message and acknowledges what
//! the mark now covers). Then it starts over at once if more was written meanwhile.
//!
//! So the write of the next batch overlaps the flush of the previous one: records that arrive
//! while a flush runs are written at once, and the next flush starts the moment the previous
//! one returns, covering all of them. An order waits for at most the rest of the flush in
//! progress when its record was written, then one flush of its own.
//!
//! # Durability rule
//! An order is acknowledged only after an `fdatasync` that began after its record was written:
//!
//! - the written mark rises only after the `write` of every record up to it has returned;
//! - a flush reads the written mark (its target) before it calls `fdatasync`, so every record
//!   up to the target was in the file before the flush began, and is on the disk when it
//!   returns;
//! - the durable mark is only ever set to the target of a flush that returned without error,
//!   and the engine acknowledges an order only once a durable mark (its own, and in
//!   request-reply style its standby's, which the standby sends on the same way) covers it.
//!
//! One flush runs at a time. That keeps the failure rule below exact: with flushes of one file
//! running side by side, a failed one could be reported by the kernel to one caller while a
//! second, concurrent one returns success without the lost pages being on disk.
//!
//! # Failure
//! A failed `fdatasync` ends the flusher for good and is never retried: after a failed flush
//! the kernel may have dropped the dirty pages it could not write and marked them clean, so a
//! later flush could succeed without the records being on disk. The error is kept: the durable
//! mark never rises again, the callback reports the error (once), and every later
//! [`Flusher::written`], [`Flusher::wait_durable`] and [`Flusher::stop`] returns it.
//!
//! # Shutdown
//! [`Flusher::stop`] (and dropping the flusher) asks the thread to end: it first flushes
//! whatever is written and not yet durable, then ends; `stop` joins it.
//!
//! # Observing
//! A [`LogObserver`] sees each step as it happens, on the thread that takes it: a batch
//! written, a flush begun, a flush done. The tests use it to check the durability rule
//! against the acknowledgements the clients received.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::log::LogError;
use crate::order::Role;
use crate::sim_disk::SimFlusher;

/// One step of an fsync log, as a [`LogObserver`] sees it. Sequence numbers are the log's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEvent {
    /// Every record up to `upto` has been written to the file (its `write` returned).
    Written {
        /// The last sequence number written.
        upto: u64,
    },
    /// An `fdatasync` is about to begin; it covers every record up to `upto`.
    FlushBegan {
        /// The flush's target.
        upto: u64,
    },
    /// That `fdatasync` returned without error: every record up to `upto` is on the disk.
    FlushDone {
        /// The flush's target.
        upto: u64,
    },
    /// An `fdatasync` failed; nothing more becomes durable.
    FlushFailed,
}

/// Watches the writes and flushes of fsync logs, for tests and diagnostics. Called on the
/// thread that takes each step, in the order the steps happen, and must not block for long.
pub trait LogObserver: Send + Sync + fmt::Debug {
    /// The log of engine (`pair`, `role`) took a step.
    fn event(&self, pair: usize, role: Role, event: LogEvent);
}

/// Where the flusher reports: after each flush, `Ok(upto)` (every record up to `upto` is on
/// disk); or once, `Err` with the error that ended it. Called on the flusher's thread.
pub type OnDurable = Box<dyn FnMut(Result<u64, LogError>) + Send>;

/// The flusher of an fsync log, as the log holds it: a thread of its own (this module), or on a
/// simulated disk the same protocol run by the simulation's device (`sim_disk.rs`). Chosen
/// when the log is opened; one `match` per batch.
#[derive(Debug)]
pub(crate) enum Worker {
    /// A thread running `fdatasync` back to back.
    Thread(Flusher),
    /// Flushes of a simulated disk.
    Sim(SimFlusher),
}

impl Worker {
    /// See [`Flusher::written`].
    pub(crate) fn written(&self, upto: u64) -> Result<(), LogError> {
        match self {
            Worker::Thread(f) => f.written(upto),
            Worker::Sim(f) => f.written(upto),
        }
    }

    /// See [`Flusher::wait_durable`].
    pub(crate) fn wait_durable(&self, upto: u64) -> Result<(), LogError> {
        match self {
            Worker::Thread(f) => f.wait_durable(upto),
            Worker::Sim(f) => f.wait_durable(upto),
        }
    }

    /// See [`Flusher::flushes`].
    pub(crate) fn flushes(&self) -> u64 {
        match self {
            Worker::Thread(f) => f.flushes(),
            Worker::Sim(f) => f.flushes(),
        }
    }

    /// See [`Flusher::stop`].
    pub(crate) fn stop(&mut self) -> Result<(), LogError> {
        match self {
            Worker::Thread(f) => f.stop(),
            Worker::Sim(f) => f.stop(),
        }
    }
}

/// The flusher of one fsync log. See the module note.
pub(crate) struct Flusher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Flusher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flusher")
            .field("path", &self.shared.path)
            .field("running", &self.thread.is_some())
            .finish()
    }
}

struct Shared {
    file: Arc<File>,
    path: PathBuf,
    state: Mutex<State>,
    /// The flusher waits here for something to flush, or to stop.
    work: Condvar,
    /// [`Flusher::wait_durable`] waits here for the durable mark.
    durable: Condvar,
    observer: Option<Watch>,
}

/// An observer and the engine it watches.
#[derive(Clone)]
pub(crate) struct Watch {
    pub(crate) observer: Arc<dyn LogObserver>,
    pub(crate) pair: usize,
    pub(crate) role: Role,
}

impl Watch {
    pub(crate) fn see(&self, event: LogEvent) {
        self.observer.event(self.pair, self.role, event);
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("observer", &self.observer)
            .field("pair", &self.pair)
            .field("role", &self.role)
            .finish()
    }
}

struct State {
    /// Every record up to this sequence number has been written to the file.
    written: u64,
    /// Every record up to this sequence number is on disk.
    durable: u64,
    /// Flushes that returned without error.
    flushes: u64,
    /// The error that ended the flusher.
    failed: Option<io::Error>,
    /// Asked to end once everything written is durable.
    stop: bool,
}

impl Flusher {
    /// Starts the flusher of `file` (named `path`), whose records up to `written` are in the
    /// file and up to `durable` already on disk (if `written` is more, it flushes at once).
    pub(crate) fn start(
        file: Arc<File>,
        path: &Path,
        (written, durable): (u64, u64),
        observer: Option<Watch>,
        on_durable: OnDurable,
    ) -> Result<Flusher, LogError> {
        let shared = Arc::new(Shared {
            file,
            path: path.to_path_buf(),
            state: Mutex::new(State {
                written,
                durable,
                flushes: 0,
                failed: None,
                stop: false,
            }),
            work: Condvar::new(),
            durable: Condvar::new(),
            observer,
        });
        let name = match path.file_stem() {
            Some(stem) => format!("flush {}", stem.to_string_lossy()),
            None => "log flusher".to_owned(),
        };
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn({
                let shared = shared.clone();
                move || run(&shared, on_durable)
            })
            .map_err(|source| LogError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Flusher {
            shared,
            thread: Some(thread),
        })
    }

    /// Every record up to `upto` has been written to the file (its `write` returned): the
    /// next flush covers them. Fails with the flusher's error if it has failed.
    pub(crate) fn written(&self, upto: u64) -> Result<(), LogError> {
        let mut s = self.shared.lock();
        if let Some(e) = &s.failed {
            return Err(self.shared.error(e));
        }
        if upto > s.written {
            s.written = upto;
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// Waits until every record up to `upto` (which must have been reported
    /// [`written`](Flusher::written)) is on disk.
    pub(crate) fn wait_durable(&self, upto: u64) -> Result<(), LogError> {
        let mut s = self.shared.lock();
        loop {
            if let Some(e) = &s.failed {
                return Err(self.shared.error(e));
            }
            if s.durable >= upto {
                return Ok(());
            }
            if s.written < upto || self.thread.is_none() {
                return Err(self.shared.error(&io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "waiting for records that were never handed to the flusher",
                )));
            }
            s = self
                .shared
                .durable
                .wait(s)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Flushes that returned without error.
    pub(crate) fn flushes(&self) -> u64 {
        self.shared.lock().flushes
    }

    /// Flushes what is written, ends the thread and joins it. Returns the flusher's error, if
    /// it failed. Stopping again does nothing more.
    pub(crate) fn stop(&mut self) -> Result<(), LogError> {
        let Some(thread) = self.thread.take() else {
            return self.result();
        };
        {
            let mut s = self.shared.lock();
            s.stop = true;
            self.shared.work.notify_one();
        }
        if thread.join().is_err() {
            // `run` does not panic on its own; the callback might.
            let mut s = self.shared.lock();
            s.failed
                .get_or_insert_with(|| io::Error::other("the log's flusher thread panicked"));
            self.shared.durable.notify_all();
        }
        self.result()
    }

    fn result(&self) -> Result<(), LogError> {
        match &self.shared.lock().failed {
            Some(e) => Err(self.shared.error(e)),
            None => Ok(()),
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        // The owner reports errors through `stop`; here there is no one left to tell.
        let _ = self.stop();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every unlock: a panic elsewhere does not spoil it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the flusher's error (an `io::Error` is not `Clone`), as a [`LogError`].
    fn error(&self, e: &io::Error) -> LogError {
        LogError::Io {
            path: self.path.clone(),
            source: io::Error::new(e.kind(), e.to_string()),
        }
    }

    fn see(&self, event: LogEvent) {
        if let Some(watch) = &self.observer {
            watch.see(event);
        }
    }
}

/// The flusher's thread. See the module note.
fn run(shared: &Shared, mut on_durable: OnDurable) {
    loop {
        let target = {
            let mut s = shared.lock();
            while s.written == s.durable && !s.stop {
                s = shared.work.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            if s.written == s.durable {
                return; // asked to stop, and everything written is durable
            }
            s.written
        };
        // Every record up to `target` was written before the mark was raised to it: this
        // flush began after their writes, so it covers them.
        shared.see(LogEvent::FlushBegan { upto: target });
        let result = shared.file.sync_data();
        match result {
            Ok(()) => {
                shared.see(LogEvent::FlushDone { upto: target });
                {
                    let mut s = shared.lock();
                    s.durable = target;
                    s.flushes += 1;
                }
                shared.durable.notify_all();
                on_durable(Ok(target));
            }
            Err(e) => {
                shared.see(LogEvent::FlushFailed);
                let error = shared.error(&e);
                shared.lock().failed = Some(e);
                shared.durable.notify_all();
                on_durable(Err(error));
                return;
            }
        }
    }
}
