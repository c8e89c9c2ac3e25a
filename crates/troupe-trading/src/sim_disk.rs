//! A simulated disk for the transaction logs: files kept in memory, flushes that take simulated
//! time, and the faults a real disk and a real crash bring, drawn from the running simulation's
//! seed (`troupe::sim`). A log opened on a [`SimDisk`] (see `ExchangeConfig::disk`) runs the
//! same recovery, append, commit and durability code as a log in a file; only the bytes' home
//! differs.
//!
//! # The model
//! Each file has the bytes a read sees (the page cache) and a *flushed* mark: the prefix that
//! is on the medium. Files only grow at their end, except when recovery cuts a torn tail.
//!
//! - A **write** puts bytes at the end of the file, in the page cache. Fault points
//!   (`troupe::sim::buggify`): `sim disk: write fails` (an error, nothing written) and
//!   `sim disk: torn write` (a prefix of the bytes written, then an error: a record cut short,
//!   as a crash in the middle of a write leaves one).
//! - A **flush** (`fdatasync`) covers the bytes written *before it began*: it takes the file's
//!   length when it begins and, when it completes, raises the flushed mark to that length, never
//!   further. An fsync log's flusher does not run on a thread of its own here (a thread would
//!   escape the simulation): it is [`SimFlusher`], whose flushes are timers of a device actor,
//!   completing after a simulated latency (a millisecond or a few; now and then, at the fault
//!   point `sim disk: slow flush`, up to two seconds). The flusher protocol of `flush.rs` is
//!   kept: one flush of a log at a time, each starting the moment the previous one ends if more
//!   was written, its target read before it begins, the durable mark raised only by a flush that
//!   succeeded, a failure reported once and for good. A flush the log's owner waits for (a
//!   commit without a flusher, a clean stop) completes at once, on the caller's turn.
//! - A flush **fails** at the fault point `sim disk: flush fails`. As on Linux, the bytes it
//!   did not flush are then lost to the medium even if a later flush succeeds (the kernel may
//!   have marked the dirty pages clean): no later flush of the process covers them, and a
//!   machine crash drops them. So a log that retried a failed flush would acknowledge orders a
//!   power cut then loses. (Once the process has ended, the next one's flushes cover what it
//!   reads back: a simplification; on Linux such pages may read back as they were written
//!   and never reach the disk.)
//! - A **crash** ([`SimDisk::crash`]) ends the process that has the files open: every handle
//!   opened before it is dead (its writes and flushes fail; a flush in flight never completes).
//!   [`Crash::Process`] keeps the page cache (what was written survives, as after `kill -9`);
//!   [`Crash::Machine`] keeps the flushed prefix of each file and a random part of the rest (all
//!   of it, none of it, or a cut at any byte: a torn last record), as a power cut does.
//!
//! Randomness comes from the simulation (`troupe::sim::random`); outside a simulation a
//! machine crash keeps exactly the flushed prefix and no fault point fires.
//!
//! # What the tests read
//! [`SimDisk::bytes_at`] gives a file's page cache or its flushed prefix: the simulation
//! (`simulation.rs`) reads it as each acknowledgement is sent, to check that the order's record
//! is where the durability rule says it must be by then.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use troupe::{Actor, Addr, Context, Handler, Message, System};

use crate::flush::{LogEvent, OnDurable, Watch};
use crate::log::LogError;

/// What a crash takes with it. See the module note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The process dies (`kill -9`): the page cache survives, so everything written survives.
    Process,
    /// The machine loses power: only the flushed prefix of each file surely survives; of the
    /// rest, all, none or a part cut at any byte.
    Machine,
}

/// Counts of what a [`SimDisk`] did and suffered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Writes that succeeded.
    pub writes: u64,
    /// Writes refused by the fault point `sim disk: write fails`.
    pub failed_writes: u64,
    /// Writes cut short by the fault point `sim disk: torn write`.
    pub torn_writes: u64,
    /// Flushes that succeeded.
    pub flushes: u64,
    /// Flushes failed by the fault point `sim disk: flush fails`.
    pub failed_flushes: u64,
    /// Crashes of either kind.
    pub crashes: u64,
    /// Bytes written but lost by machine crashes.
    pub bytes_lost: u64,
}

/// Which bytes of a file [`SimDisk::bytes_at`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// In the page cache: survives a crash of the process.
    Written,
    /// On the medium: survives a crash of the machine.
    Flushed,
}

/// A disk in memory for simulated runs of the exchange. Clones share the disk. See the module
/// note.
///
/// ```
/// use troupe::sim::Simulation;
/// use troupe_trading::{Crash, ExchangeConfig, Exchange, LogMode, SimDisk};
///
/// let sim = Simulation::new(1);
/// let disk = SimDisk::new(sim.system());
/// let config = ExchangeConfig {
///     log: LogMode::Fsync,
///     disk: Some(disk.clone()),
///     ..ExchangeConfig::seed()
/// };
/// let exchange = Exchange::start(sim.system(), config.clone()).unwrap();
/// exchange.shutdown();
/// disk.crash(Crash::Machine);
/// assert_eq!(disk.file_names().len(), 6); // two logs per engine pair, headers flushed
/// let again = Exchange::start(sim.system(), config).unwrap();
/// assert!(again.is_running());
/// again.shutdown();
/// ```
#[derive(Clone)]
pub struct SimDisk {
    shared: Arc<Mutex<Disk>>,
    device: Addr<Device>,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disk = self.lock();
        f.debug_struct("SimDisk")
            .field("files", &disk.files.len())
            .field("epoch", &disk.epoch)
            .field("counters", &disk.counters)
            .finish()
    }
}

struct Disk {
    files: BTreeMap<String, FileData>,
    /// Raised by each crash: handles of an older epoch belong to a dead process.
    epoch: u64,
    counters: DiskCounters,
}

#[derive(Default)]
struct FileData {
    /// What a read sees: the page cache.
    bytes: Vec<u8>,
    /// The prefix on the medium.
    flushed: usize,
    /// From here on, bytes a failed flush did not flush: no later flush covers them.
    lost_from: Option<usize>,
}

impl FileData {
    /// How far a flush that began when the file was `len` long may raise the flushed mark.
    fn flush_to(&mut self, len: usize) {
        let len = len.min(self.bytes.len());
        let len = self.lost_from.map_or(len, |lost| len.min(lost));
        self.flushed = self.flushed.max(len);
    }
}

fn dead() -> io::Error {
    io::Error::other("the process that opened this file has crashed")
}

impl SimDisk {
    /// An empty disk whose flushes are timed on `system` (a simulated system: the disk's device
    /// is an actor there).
    pub fn new(system: &System) -> SimDisk {
        SimDisk {
            shared: Arc::new(Mutex::new(Disk {
                files: BTreeMap::new(),
                epoch: 0,
                counters: DiskCounters::default(),
            })),
            device: system.spawn(Device),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Disk> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Crashes the process using the disk (every open handle dies), and with
    /// [`Crash::Machine`] also loses what was not flushed (see the module note). Returns the
    /// bytes lost.
    pub fn crash(&self, kind: Crash) -> u64 {
        let mut disk = self.lock();
        disk.epoch += 1;
        disk.counters.crashes += 1;
        let mut lost = 0;
        for file in disk.files.values_mut().filter(|_| kind == Crash::Process) {
            // The next process's flushes cover what it reads back (see the module note).
            file.lost_from = None;
        }
        if kind == Crash::Machine {
            for file in disk.files.values_mut() {
                let unflushed = file.bytes.len() - file.flushed;
                let room = file.lost_from.map_or(unflushed, |l| l - file.flushed);
                // All of the rest reached the medium, none of it, or a part cut anywhere.
                let kept = match troupe::sim::random().map(|r| r % 4) {
                    None | Some(0) => 0,
                    Some(1) => room,
                    Some(_) => {
                        let r = troupe::sim::random().unwrap_or(0);
                        (r % (room as u64 + 1)) as usize
                    }
                };
                let keep = file.flushed + kept.min(room);
                lost += (file.bytes.len() - keep) as u64;
                file.bytes.truncate(keep);
                file.flushed = keep;
                file.lost_from = None;
            }
        }
        disk.counters.bytes_lost += lost;
        lost
    }

    /// The names of the files on the disk.
    pub fn file_names(&self) -> Vec<String> {
        self.lock().files.keys().cloned().collect()
    }

    /// The bytes of a file as a read sees them (`None` if there is no such file).
    pub fn read(&self, name: &str) -> Option<Vec<u8>> {
        self.lock().files.get(name).map(|f| f.bytes.clone())
    }

    /// The bytes of a file at `level`: its page cache, or its flushed prefix.
    pub fn bytes_at(&self, name: &str, level: Held) -> Option<Vec<u8>> {
        self.lock().files.get(name).map(|f| match level {
            Held::Written => f.bytes.clone(),
            Held::Flushed => f.bytes[..f.flushed].to_vec(),
        })
    }

    /// What the disk has done so far.
    pub fn counters(&self) -> DiskCounters {
        self.lock().counters
    }

    /// A handle on the file `name`, created empty if missing, in the current epoch.
    pub(crate) fn open(&self, name: &str) -> SimFile {
        let mut disk = self.lock();
        disk.files.entry(name.to_owned()).or_default();
        SimFile {
            disk: self.shared.clone(),
            device: self.device.clone(),
            name: name.to_owned(),
            epoch: disk.epoch,
        }
    }
}

/// An open file of a [`SimDisk`], as a process holds it. Dead once the disk crashes.
#[derive(Clone)]
pub(crate) struct SimFile {
    disk: Arc<Mutex<Disk>>,
    device: Addr<Device>,
    name: String,
    epoch: u64,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .finish()
    }
}

/// A flush begun: it covers the file up to `len`.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    len: usize,
}

impl SimFile {
    /// The file's data, if this handle's process is alive.
    fn with<R>(&self, f: impl FnOnce(&mut FileData, &mut DiskCounters) -> R) -> io::Result<R> {
        let mut disk = self.disk.lock().unwrap_or_else(|p| p.into_inner());
        if disk.epoch != self.epoch {
            return Err(dead());
        }
        let disk = &mut *disk;
        let file = disk.files.entry(self.name.clone()).or_default();
        Ok(f(file, &mut disk.counters))
    }

    /// True while the process that opened this handle lives (no crash since).
    fn alive(&self) -> bool {
        self.with(|_, _| ()).is_ok()
    }

    /// Every byte of the file, as a read sees them.
    pub(crate) fn read_all(&self) -> io::Result<Vec<u8>> {
        self.with(|file, _| file.bytes.clone())
    }

    /// Cuts the file to `len` bytes (recovery cutting a torn tail). Durable once flushed.
    pub(crate) fn set_len(&self, len: usize) -> io::Result<()> {
        self.with(|file, _| {
            file.bytes.truncate(len);
            file.flushed = file.flushed.min(len);
            file.lost_from = file.lost_from.filter(|&l| l < len);
        })
    }

    /// Writes `bytes` at the end of the file, with the write faults of the module note.
    pub(crate) fn append(&self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return self.with(|_, _| ());
        }
        let fails = troupe::sim::buggify("sim disk: write fails");
        let torn = !fails && troupe::sim::buggify("sim disk: torn write");
        let cut = if torn {
            1 + troupe::sim::random().unwrap_or(0) as usize % bytes.len().max(1)
        } else {
            0
        };
        self.with(|file, counters| {
            if fails {
                counters.failed_writes += 1;
                return Err(io::Error::other("injected fault: the write failed"));
            }
            if torn {
                let cut = cut.min(bytes.len() - 1);
                file.bytes.extend_from_slice(&bytes[..cut]);
                counters.torn_writes += 1;
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!(
                        "injected fault: a torn write ({cut} of {} bytes)",
                        bytes.len()
                    ),
                ));
            }
            file.bytes.extend_from_slice(bytes);
            counters.writes += 1;
            Ok(())
        })?
    }

    /// Begins a flush: it will cover what is written now.
    fn begin_flush(&self) -> io::Result<Ticket> {
        self.with(|file, _| Ticket {
            len: file.bytes.len(),
        })
    }

    /// Completes a flush begun with `ticket`: the flushed mark rises to the ticket's length,
    /// unless the fault point `sim disk: flush fails` fires.
    fn complete_flush(&self, ticket: Ticket) -> io::Result<()> {
        let fails = troupe::sim::buggify("sim disk: flush fails");
        self.with(|file, counters| {
            if fails {
                counters.failed_flushes += 1;
                // What this flush should have covered never reaches the medium.
                let from = file.flushed;
                file.lost_from = Some(file.lost_from.map_or(from, |l| l.min(from)));
                return Err(io::Error::other("injected fault: fdatasync failed"));
            }
            file.flush_to(ticket.len);
            counters.flushes += 1;
            Ok(())
        })?
    }

    /// A flush the caller waits for: begun and completed at once.
    pub(crate) fn flush_now(&self) -> io::Result<()> {
        let ticket = self.begin_flush()?;
        self.complete_flush(ticket)
    }
}

/// The disk's device: completes each flush of a [`SimFlusher`] after a simulated latency.
/// Not a fault target of the tests (a device does not crash; its latency is the seed's).
pub(crate) struct Device;

impl Actor for Device {}

/// A flush to complete later.
struct Begin(Arc<Mutex<FlushState>>);
impl Message for Begin {
    type Reply = ();
}

/// A flush whose latency has passed.
struct Complete(Arc<Mutex<FlushState>>);
impl Message for Complete {
    type Reply = ();
}

impl Handler<Begin> for Device {
    fn handle(&mut self, Begin(state): Begin, ctx: &mut Context<Self>) {
        let millis = if troupe::sim::buggify("sim disk: slow flush") {
            100 + troupe::sim::random().unwrap_or(0) % 1_900
        } else {
            1 + troupe::sim::random().unwrap_or(0) % 4
        };
        ctx.send_after(Duration::from_millis(millis), Complete(state));
    }
}

impl Handler<Complete> for Device {
    fn handle(&mut self, Complete(state): Complete, _ctx: &mut Context<Self>) {
        let mut s = lock(&state);
        let Some((target, ticket)) = s.in_flight.take() else {
            return;
        };
        // A stopped flusher reports nothing more; a dead process hears of nothing.
        if s.stopped || s.failed.is_some() || !s.file.alive() {
            return;
        }
        match s.file.complete_flush(ticket) {
            Ok(()) => {
                s.succeeded(target);
                if s.written > s.durable {
                    s.begin(&state);
                }
            }
            Err(e) => s.failed(e),
        }
    }
}

fn lock(state: &Mutex<FlushState>) -> MutexGuard<'_, FlushState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The flusher of an fsync log on a [`SimDisk`]: the protocol of `flush.rs` without a thread.
/// See the module note.
pub(crate) struct SimFlusher {
    state: Arc<Mutex<FlushState>>,
}

impl fmt::Debug for SimFlusher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("SimFlusher")
            .field("file", &s.file.name)
            .field("written", &s.written)
            .field("durable", &s.durable)
            .finish()
    }
}

struct FlushState {
    file: SimFile,
    /// Every record up to this sequence number has been written.
    written: u64,
    /// Every record up to this sequence number is flushed.
    durable: u64,
    /// The flush in progress: its target and what it covers.
    in_flight: Option<(u64, Ticket)>,
    flushes: u64,
    /// The error that ended the flusher (kept: never retried).
    failed: Option<io::Error>,
    stopped: bool,
    on_durable: OnDurable,
    watch: Option<Watch>,
}

impl FlushState {
    fn see(&self, event: LogEvent) {
        if let Some(watch) = &self.watch {
            watch.see(event);
        }
    }

    fn error(&self, e: &io::Error) -> LogError {
        LogError::Io {
            path: self.file.name.clone().into(),
            source: io::Error::new(e.kind(), e.to_string()),
        }
    }

    /// Starts a flush of everything written, on the device.
    fn begin(&mut self, me: &Arc<Mutex<FlushState>>) {
        let Ok(ticket) = self.file.begin_flush() else {
            return; // the process is gone
        };
        let target = self.written;
        self.see(LogEvent::FlushBegan { upto: target });
        self.in_flight = Some((target, ticket));
        let _ = self.file.device.tell(Begin(me.clone()));
    }

    fn succeeded(&mut self, target: u64) {
        self.see(LogEvent::FlushDone { upto: target });
        self.flushes += 1;
        if target > self.durable {
            self.durable = target;
        }
        (self.on_durable)(Ok(target));
    }

    fn failed(&mut self, e: io::Error) {
        self.see(LogEvent::FlushFailed);
        let error = self.error(&e);
        self.failed = Some(e);
        (self.on_durable)(Err(error));
    }
}

impl SimFlusher {
    /// Starts the flusher of `file`, whose records up to `written` are in the file and up to
    /// `durable` flushed (if `written` is more, it flushes at once).
    pub(crate) fn start(
        file: SimFile,
        (written, durable): (u64, u64),
        watch: Option<Watch>,
        on_durable: OnDurable,
    ) -> SimFlusher {
        let state = Arc::new(Mutex::new(FlushState {
            file,
            written,
            durable,
            in_flight: None,
            flushes: 0,
            failed: None,
            stopped: false,
            on_durable,
            watch,
        }));
        if written > durable {
            lock(&state).begin(&state);
        }
        SimFlusher { state }
    }

    /// Every record up to `upto` has been written: the next flush covers them.
    pub(crate) fn written(&self, upto: u64) -> Result<(), LogError> {
        let mut s = lock(&self.state);
        if let Some(e) = &s.failed {
            return Err(s.error(e));
        }
        if upto > s.written {
            s.written = upto;
            if s.in_flight.is_none() && !s.stopped {
                s.begin(&self.state);
            }
        }
        Ok(())
    }

    /// Makes every record up to `upto` durable before returning: with a flush that begins and
    /// completes now, on the caller's turn (a simulation cannot block for the device).
    pub(crate) fn wait_durable(&self, upto: u64) -> Result<(), LogError> {
        let mut s = lock(&self.state);
        if let Some(e) = &s.failed {
            return Err(s.error(e));
        }
        if s.durable >= upto {
            return Ok(());
        }
        let target = s.written;
        s.see(LogEvent::FlushBegan { upto: target });
        match s.file.flush_now() {
            Ok(()) => {
                s.succeeded(target);
                Ok(())
            }
            Err(e) => {
                let error = s.error(&e);
                s.failed(e);
                Err(error)
            }
        }
    }

    /// Flushes that succeeded.
    pub(crate) fn flushes(&self) -> u64 {
        lock(&self.state).flushes
    }

    /// Flushes what is written and ends the flusher: nothing more is reported. Returns the
    /// flusher's error, if it failed.
    pub(crate) fn stop(&mut self) -> Result<(), LogError> {
        let written = lock(&self.state).written;
        let result = self.wait_durable(written);
        lock(&self.state).stopped = true;
        result
    }
}

impl Drop for SimFlusher {
    fn drop(&mut self) {
        lock(&self.state).stopped = true;
    }
}
