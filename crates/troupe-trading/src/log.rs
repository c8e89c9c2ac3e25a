//! The transaction log: one append-only file per matching engine, holding every order the
//! engine accepted, in sequence order.
//!
//! # Format
//! A 16-byte header (`TRDLOG` magic, format version, the engine's pair and role), then records:
//!
//! ```text
//! +-----------+-----------+--------------------------------------------------------------+
//! | len: u32  | crc: u32  | payload (len bytes): seq u64, client u32, client order id u64,|
//! |           |           | instrument u16, side u8, price u32, volume u32               |
//! +-----------+-----------+--------------------------------------------------------------+
//! ```
//! All integers little-endian. `crc` is CRC-32 (IEEE) of the length bytes and the payload.
//! Sequence numbers start at 1 and rise by one per record.
//!
//! # Durability modes ([`LogMode`])
//! - `buffered`: [`Journal::append`] copies the record into a shared memory mapping of the
//!   file (see `mapped.rs`), which puts it in the OS page cache at once, as a `write` would:
//!   it survives a crash of the process, not of the machine. No system call per record.
//! - `fsync`: `append` encodes into a buffer. [`Journal::commit`] writes the buffer and waits
//!   for the disk (`fdatasync`): one flush covers every record appended since the last (group
//!   commit). The engine does not wait: it starts the log's flusher
//!   ([`Journal::start_flusher`], see `flush.rs`), a thread that runs `fdatasync` back to
//!   back, and hands it each batch with [`Journal::submit`], which writes the batch to the file
//!   and returns. The flusher reports each durable mark; an order is acknowledged only after a
//!   flush that began after its record was written.
//!
//! A buffered log's file may end in zeros (mapped space not yet used); the reader takes a zero
//! length field followed by nothing but zeros as the clean end, and trims it.
//!
//! # Recovery
//! Reading a log back ([`Journal::scan`], which only reads, or [`Journal::open_with`]) takes
//! records from the start while they are whole, pass their checksum, hold possible values and
//! carry the next sequence number. The first record that does not is *damage*, and what comes
//! after it decides what kind:
//!
//! - **Nothing valid follows** (the file ends inside a record, or in bytes that hold no valid
//!   record): a *torn tail*, what a crash in the middle of a write leaves. Opening the log for
//!   writing reports it ([`TailCut`]) and cuts it off (truncate, then fsync), so that new
//!   records follow the last good one; a torn tail is never applied. A buffered log's trailing
//!   zeros (mapped space never used) are its clean end, not damage: trimmed, not reported.
//! - **Valid records follow**: *mid-file damage* (a flipped bit, a bad sector, a stray write,
//!   bytes put in or taken out). Records are fixed size ([`RECORD_BYTES`]), but the reader
//!   does not count on the damage keeping them aligned: it looks for further valid records at
//!   every byte offset after the damage (a length field of exactly one record's payload, a
//!   matching CRC and possible values; a chance match is about one in 2^64). Cutting the file
//!   there would destroy orders that were acknowledged, so opening refuses with
//!   [`LogError::MidFileDamage`], which names the file, the byte offset, the sequence number
//!   due there and how many valid records follow, and writes nothing.
//!
//! # Salvage: keep only what is contiguous
//! [`Recovery::Salvage`] is the explicit, knowing choice to go on with a log that has mid-file
//! damage. It rebuilds the log from its good records, and keeps the valid records after the
//! damage only while their sequence numbers carry on without a gap: that is the case when the
//! damage is bytes put in and no record was lost. From the first sequence number the file no
//! longer holds, every record is dropped, and counted in the report ([`Salvaged`]).
//!
//! Why a record after a gap is not kept: an order log is not a set of independent facts. Each
//! order was matched against the books every earlier order left; replaying order 102 without
//! order 101 builds books that never existed and trades no client was told about, and a
//! primary and standby that agree on a wrong state. So salvage of one log alone means "cut at
//! the first missing record, knowingly". Only the other log of the pair can fill such a gap:
//! the exchange salvages a pair's two logs together (see `exchange.rs`), taking each record
//! one log lacks from the other; what neither log holds is lost from there on, and reported.
//!
//! Salvage never destroys the damaged bytes: the rebuilt log is written to a new file, synced,
//! and renamed over the old one, which stays beside it as `<log>.damaged` (a hard link, or a
//! copy where the file system has none; `.damaged.2` and so on if that name is taken). A crash
//! during salvage leaves either the damaged log or the rebuilt one in place, never neither.
//!
//! A file that is not a log at all is refused with [`LogError::NotALog`] and left untouched.
//! [`Journal::scan`] opens the file read-only and never changes it (no truncate, no sync, no
//! mapping, no file created): `troupe-trading inspect` reads logs with it.

use std::fs::{File, OpenOptions};
use std::io;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::flush::{Flusher, LogObserver, OnDurable, Watch, Worker};
use crate::mapped::MappedAppender;
use crate::order::{ClientId, InstrumentId, Order, Role, Side};
use crate::sim_disk::{SimDisk, SimFile, SimFlusher};

/// How durable an order is before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogMode {
    /// No log at all: state lives in memory only.
    None,
    /// Written to the OS (survives a crash of the process, not of the machine), as the seed did.
    Buffered,
    /// Written and flushed to the disk with `fdatasync`, one flush per batch (group commit).
    Fsync,
}

impl LogMode {
    /// The mode's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            LogMode::None => "none",
            LogMode::Buffered => "buffered",
            LogMode::Fsync => "fsync",
        }
    }
}

impl std::str::FromStr for LogMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(LogMode::None),
            "buffered" => Ok(LogMode::Buffered),
            "fsync" => Ok(LogMode::Fsync),
            other => Err(format!(
                "unknown log mode `{other}`; use none, buffered or fsync"
            )),
        }
    }
}

const MAGIC: [u8; 6] = *b"TRDLOG";
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 16;
const PAYLOAD_BYTES: usize = 31;
const FRAME_BYTES: usize = 8;
/// Bytes one record takes on disk.
pub const RECORD_BYTES: usize = FRAME_BYTES + PAYLOAD_BYTES;

/// Problems with a log file that recovery cannot fix by cutting its tail.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The operating system refused a file operation.
    #[error("log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file does not start with a log header; it was left untouched.
    #[error(
        "{path} is not a transaction log (bad header); move it away or choose another directory"
    )]
    NotALog {
        /// The file.
        path: PathBuf,
    },
    /// The file is a log of a newer or unknown format version.
    #[error("{path} has log format version {found}, this program reads version {VERSION}")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u16,
    },
    /// Valid records follow damage in the middle of the file: cutting it there would lose
    /// them. Nothing was written to the file.
    #[error(
        "log {path} is damaged at byte {offset}, in the record due to hold sequence {seq} \
         ({damage}), and {valid_after} valid records follow the damage (the first with \
         sequence {first_valid_seq}); cutting the log there would lose them, so it was left \
         untouched. `troupe-trading inspect` shows what each log holds; `--salvage` \
         (Recovery::Salvage) rebuilds the log from its own valid records and its peer's, \
         keeping the damaged file as {path}.damaged"
    )]
    MidFileDamage {
        /// The file.
        path: PathBuf,
        /// File offset of the first damaged record.
        offset: u64,
        /// The sequence number due there.
        seq: u64,
        /// What is wrong with the record there.
        damage: TailDamage,
        /// Valid records found after the damage.
        valid_after: u64,
        /// The sequence number of the first of them.
        first_valid_seq: u64,
    },
    /// The file belongs to another engine (pair or role differ).
    #[error("{path} belongs to pair {found_pair} {found_role}, expected pair {pair} {role}")]
    WrongEngine {
        /// The file.
        path: PathBuf,
        /// Expected pair.
        pair: u16,
        /// Expected role.
        role: Role,
        /// Pair in the file.
        found_pair: u16,
        /// Role in the file.
        found_role: Role,
    },
}

/// What is wrong with the first record recovery could not take (at the tail or in the middle
/// of the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TailDamage {
    /// The file ends inside a record (a write was torn by a crash).
    #[error("torn record: {available} of {needed} bytes present")]
    Torn {
        /// Bytes the record needs.
        needed: usize,
        /// Bytes left in the file.
        available: usize,
    },
    /// A record length no record can have.
    #[error("impossible record length {0}")]
    BadLength(u32),
    /// The checksum does not match the bytes.
    #[error("checksum mismatch")]
    BadChecksum,
    /// The record's sequence number is not the next one.
    #[error("sequence {found} where {expected} was due")]
    OutOfSequence {
        /// The next sequence number.
        expected: u64,
        /// The one in the record.
        found: u64,
    },
    /// The checksum matches but a field is impossible (side, zero volume or price).
    #[error("impossible field value")]
    BadField,
    /// The header itself is incomplete (a crash while the file was being created).
    #[error("incomplete header")]
    TornHeader,
}

/// A damaged tail (no valid record after the damage). Opening the log for writing cuts it off;
/// a read-only [`Journal::scan`] only reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailCut {
    /// File offset of the first damaged byte; once cut, the file ends here.
    pub offset: u64,
    /// Bytes from there to the end of the file (removed by the cut).
    pub dropped_bytes: u64,
    /// What was wrong.
    pub damage: TailDamage,
}

/// Damage in the middle of a log: valid records follow it. See the module note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MidDamage {
    /// File offset of the first damaged record (the end of the good records before it).
    pub offset: u64,
    /// The sequence number due there (one more than the good records before it).
    pub seq: u64,
    /// What is wrong with the record there.
    pub damage: TailDamage,
    /// Valid records found after the damage, wherever they are.
    pub valid_after: u64,
    /// File offset of the first of them.
    pub first_valid_offset: u64,
    /// Its sequence number (`seq` if no record was lost, higher if some were).
    pub first_valid_seq: u64,
}

/// A valid record found after mid-file damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaterRecord {
    /// Its file offset.
    pub offset: u64,
    /// Its sequence number.
    pub seq: u64,
    /// The order.
    pub order: Order,
}

/// How the records of a log file end, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEnd {
    /// The last good record ends the file (or there is no file, or no record).
    Clean,
    /// Zeros after the last record: a buffered log's unused mapped space. Not damage; trimmed
    /// when the log is opened for writing.
    Spare {
        /// Bytes of zeros.
        bytes: u64,
    },
    /// A torn or damaged tail with nothing valid after it: cut when the log is opened for
    /// writing.
    TornTail(TailCut),
    /// Damage with valid records after it: opening refuses ([`LogError::MidFileDamage`])
    /// unless salvaging.
    MidFile(MidDamage),
}

/// What [`Journal::scan`] read from a log file, which it did not change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogScan {
    /// The file.
    pub path: PathBuf,
    /// False if there is no such file (nothing was created).
    pub exists: bool,
    /// The file's length.
    pub file_bytes: u64,
    /// The good records from the start, in sequence order (record `i` has sequence `i + 1`).
    pub orders: Vec<Order>,
    /// How they end.
    pub end: LogEnd,
    /// With mid-file damage: every valid record found after it, in file order.
    pub later: Vec<LaterRecord>,
}

impl LogScan {
    /// The error opening refuses this log with, if it has mid-file damage.
    pub fn refusal(&self) -> Option<LogError> {
        let LogEnd::MidFile(d) = self.end else {
            return None;
        };
        Some(LogError::MidFileDamage {
            path: self.path.clone(),
            offset: d.offset,
            seq: d.seq,
            damage: d.damage,
            valid_after: d.valid_after,
            first_valid_seq: d.first_valid_seq,
        })
    }

    /// The records of this log that salvage keeps on its own: the good records, then the valid
    /// records after the damage as long as their sequence numbers carry on without a gap.
    pub fn contiguous(&self) -> Vec<Order> {
        let mut history = self.orders.clone();
        for r in &self.later {
            if r.seq != history.len() as u64 + 1 {
                break;
            }
            history.push(r.order);
        }
        history
    }

    /// What salvage does to this log when it is rebuilt to hold `history` (`None` if it has
    /// no mid-file damage). `backup` is where the damaged bytes went (`None` in a dry run).
    pub fn salvage_report(&self, history: &[Order], backup: Option<PathBuf>) -> Option<Salvaged> {
        let LogEnd::MidFile(damage) = self.end else {
            return None;
        };
        let good = self.orders.len() as u64;
        let kept_after = self
            .later
            .iter()
            .filter(|r| r.seq > good && history.get(r.seq as usize - 1) == Some(&r.order))
            .count() as u64;
        Some(Salvaged {
            damage,
            kept_after,
            dropped: damage.valid_after - kept_after,
            backup,
        })
    }

    /// The valid records after the damage whose sequence numbers rise, in file order: the
    /// records this log can offer a salvage (a record that goes back in sequence, and all
    /// after it, are not trusted).
    pub fn usable_later(&self) -> impl Iterator<Item = &LaterRecord> {
        let mut last = self.orders.len() as u64;
        self.later.iter().take_while(move |r| {
            let rises = r.seq > last;
            last = r.seq;
            rises
        })
    }
}

/// How [`Journal::open_with`] treats mid-file damage (damage that valid records follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recovery {
    /// Refuse with [`LogError::MidFileDamage`] and write nothing. A torn tail is still cut.
    #[default]
    Strict,
    /// Rebuild the log from its good records and the valid records after the damage whose
    /// sequence numbers carry on without a gap; drop the rest, keep the damaged file as
    /// `<log>.damaged`, and report it all in [`Salvaged`]. See the module note.
    Salvage,
}

/// What salvaging a log with mid-file damage did (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// The damage.
    pub damage: MidDamage,
    /// Valid records of this log after the damage that the rebuilt log keeps.
    pub kept_after: u64,
    /// Valid records of this log after the damage that the rebuilt log does not keep (they
    /// follow a gap in the sequence; they remain in the backup).
    pub dropped: u64,
    /// Where the damaged file's bytes are kept (`None` only in a dry run, which wrote nothing).
    pub backup: Option<PathBuf>,
}

/// An open log, positioned after its last good record, ready to append.
#[derive(Debug)]
pub struct Journal {
    sink: Sink,
    path: PathBuf,
    pair: usize,
    role: Role,
    next_seq: u64,
    /// Every record up to this sequence number has been written to the file.
    written: u64,
    /// Every record up to this sequence number is on disk (as far as commits without a
    /// flusher know: the flusher keeps its own mark).
    durable: u64,
    /// Commits made without a flusher that wrote something.
    commits: u64,
    /// The first error of a write (of an append in `buffered` mode, of a batch otherwise). It
    /// sticks, as a failed flush does: the file may now end in part of a record, and the
    /// records of the failed write are not in it, so nothing appended from there on can be
    /// made durable. Every later submit, commit, sync and close reports it (`close` still
    /// stops the flusher, which flushes what was written before the failure).
    failed: Option<io::Error>,
    /// A flush made by a commit failed: the log can promise nothing more (never retried: see
    /// `flush.rs`), and every later commit, submit or flusher start reports it.
    flush_failed: Option<io::Error>,
    /// In fsync mode, once started: the flusher of what [`Journal::submit`] wrote (a thread;
    /// on a simulated disk, the simulation's device).
    flusher: Option<Worker>,
    watch: Option<Watch>,
}

/// Where appended records go.
#[derive(Debug)]
enum Sink {
    /// Encoded into `buf`, written (and fsynced if `fsync`) at commit. The file is shared
    /// with the flusher, which only calls `fdatasync` on it.
    Write {
        file: Arc<File>,
        buf: Vec<u8>,
        fsync: bool,
    },
    /// Copied into a mapping of the file as they are appended.
    Mapped(MappedAppender),
    /// A file of a simulated disk (`sim_disk.rs`): written as each record is appended in
    /// `buffered` mode, as the mapping is; encoded into `buf` and written at commit otherwise.
    Sim {
        file: SimFile,
        buf: Vec<u8>,
        mode: LogMode,
    },
}

/// Where a log lives: a directory of files, or a simulated disk.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// Files in this directory.
    Dir(&'a Path),
    /// Files of this simulated disk.
    Sim(&'a SimDisk),
}

/// What [`Journal::open`] found.
#[derive(Debug)]
pub struct Recovered {
    /// The log, ready to append.
    pub journal: Journal,
    /// Every good record's order, in sequence order (record `i` has sequence `i + 1`).
    pub orders: Vec<Order>,
    /// The damaged tail that was cut, if any.
    pub cut: Option<TailCut>,
    /// The mid-file damage that was salvaged, if any (only with [`Recovery::Salvage`]).
    pub salvaged: Option<Salvaged>,
}

impl Journal {
    /// The file name of an engine's log inside a log directory.
    pub fn file_name(pair: usize, role: Role) -> String {
        format!("pair-{pair}-{role}.log")
    }

    /// Reads the log of engine (`pair`, `role`) in `dir` without changing anything: the file
    /// is opened read-only (a missing file is reported, not created), nothing is cut, trimmed,
    /// synced or mapped. Fails only if the file cannot be read or is not this engine's log;
    /// damage of any kind is reported in the [`LogScan`].
    pub fn scan(dir: &Path, pair: usize, role: Role) -> Result<LogScan, LogError> {
        let path = dir.join(Self::file_name(pair, role));
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(LogScan {
                    path,
                    exists: false,
                    file_bytes: 0,
                    orders: Vec::new(),
                    end: LogEnd::Clean,
                    later: Vec::new(),
                })
            }
            Err(source) => return Err(LogError::Io { path, source }),
        };
        let mut bytes = Vec::new();
        if let Err(source) = file.read_to_end(&mut bytes) {
            return Err(LogError::Io { path, source });
        }
        examine(path, &bytes, pair as u16, role)
    }

    /// Opens (or creates) the log of engine (`pair`, `role`) in `dir`, reads it back, cuts a
    /// torn tail, and positions it for appending. Mid-file damage is refused
    /// ([`LogError::MidFileDamage`]) with nothing written: see [`Journal::open_with`].
    pub fn open(dir: &Path, pair: usize, role: Role, mode: LogMode) -> Result<Recovered, LogError> {
        Self::open_with(dir, pair, role, mode, Recovery::Strict)
    }

    /// [`Journal::scan`] of a log wherever it lives.
    pub(crate) fn scan_in(place: Place<'_>, pair: usize, role: Role) -> Result<LogScan, LogError> {
        let disk = match place {
            Place::Dir(dir) => return Self::scan(dir, pair, role),
            Place::Sim(disk) => disk,
        };
        let name = Self::file_name(pair, role);
        match disk.read(&name) {
            None => Ok(LogScan {
                path: PathBuf::from(name),
                exists: false,
                file_bytes: 0,
                orders: Vec::new(),
                end: LogEnd::Clean,
                later: Vec::new(),
            }),
            Some(bytes) => examine(PathBuf::from(name), &bytes, pair as u16, role),
        }
    }

    /// [`Journal::open`] of a log wherever it lives.
    pub(crate) fn open_in(
        place: Place<'_>,
        pair: usize,
        role: Role,
        mode: LogMode,
    ) -> Result<Recovered, LogError> {
        match place {
            Place::Dir(dir) => Self::open(dir, pair, role, mode),
            Place::Sim(disk) => Self::open_sim(disk, pair, role, mode),
        }
    }

    /// [`Journal::open`] on a simulated disk: the same reading, cutting and header as in a
    /// directory, on the disk's file (mid-file damage is refused; salvage is for real files).
    fn open_sim(
        disk: &SimDisk,
        pair: usize,
        role: Role,
        mode: LogMode,
    ) -> Result<Recovered, LogError> {
        let name = Self::file_name(pair, role);
        let path = PathBuf::from(&name);
        let io = |source| LogError::Io {
            path: path.clone(),
            source,
        };
        let file = disk.open(&name);
        let bytes = file.read_all().map_err(io)?;
        let scan = examine(path.clone(), &bytes, pair as u16, role)?;
        if let Some(refusal) = scan.refusal() {
            return Err(refusal);
        }
        let good_end = bytes.len() as u64 - trailing_bytes(&scan.end);
        let cut = match scan.end {
            LogEnd::TornTail(cut) => Some(cut),
            _ => None,
        };
        if good_end < bytes.len() as u64 {
            // As in a directory: the cut is made durable before anything follows it.
            file.set_len(good_end as usize).map_err(io)?;
            if cut.is_some() {
                file.flush_now().map_err(io)?;
            }
        }
        if good_end == 0 {
            file.append(&header(pair as u16, role)).map_err(io)?;
            file.flush_now().map_err(io)?;
        }
        if mode == LogMode::Fsync && cut.is_none() && !scan.orders.is_empty() {
            // As in a directory: what was read back is flushed before it counts as durable.
            file.flush_now().map_err(io)?;
        }
        let sink = Sink::Sim {
            file,
            buf: Vec::with_capacity(64 * RECORD_BYTES),
            mode,
        };
        Ok(Recovered {
            journal: Self::with_sink(sink, path, (pair, role), scan.orders.len()),
            orders: scan.orders,
            cut,
            salvaged: None,
        })
    }

    /// [`Journal::open`], with mid-file damage treated as `recovery` says: refused
    /// ([`Recovery::Strict`]) or salvaged from this log alone ([`Recovery::Salvage`]: the
    /// records after the first gap in the sequence are dropped, see the module note).
    pub fn open_with(
        dir: &Path,
        pair: usize,
        role: Role,
        mode: LogMode,
        recovery: Recovery,
    ) -> Result<Recovered, LogError> {
        let path = dir.join(Self::file_name(pair, role));
        let io = |source| LogError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(|source| LogError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let scan = examine(path.clone(), &bytes, pair as u16, role)?;
        if let Some(refusal) = scan.refusal() {
            drop(file);
            return match recovery {
                Recovery::Strict => Err(refusal),
                Recovery::Salvage => {
                    let history = scan.contiguous();
                    Self::rebuild(dir, pair, role, mode, &scan, &history)
                }
            };
        }

        let good_end = bytes.len() as u64 - trailing_bytes(&scan.end);
        let cut = match scan.end {
            LogEnd::TornTail(cut) => Some(cut),
            _ => None,
        };
        if good_end < bytes.len() as u64 {
            // A torn tail, or unused mapped space after the last record (not damage, just
            // trimmed). The cut is made durable before anything is appended after it.
            file.set_len(good_end).map_err(io)?;
            if cut.is_some() {
                file.sync_all().map_err(io)?;
            }
        }
        let mut append_at = good_end;
        if good_end == 0 {
            append_at = HEADER_BYTES as u64;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(&header(pair as u16, role)).map_err(io)?;
            file.sync_all().map_err(io)?;
            sync_dir(dir);
        }
        if mode == LogMode::Fsync && cut.is_none() && !scan.orders.is_empty() {
            // The journal counts every record read back as durable, but a process that died
            // before its flush leaves records in the page cache only: flushed first.
            file.sync_data().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let journal =
            Journal::positioned(file, path, (pair, role), mode, append_at, scan.orders.len())?;
        Ok(Recovered {
            journal,
            orders: scan.orders,
            cut,
            salvaged: None,
        })
    }

    /// Replaces a log that has mid-file damage by one holding exactly `history` (which must
    /// start with the log's good records), keeping the damaged file as `<log>.damaged`, and
    /// opens it for appending. `scan` is what the damaged file held.
    ///
    /// The new log is written to `<log>.salvage`, synced, and renamed over the old one after
    /// the old one got its second name, so a crash at any point leaves a whole log in place.
    pub(crate) fn rebuild(
        dir: &Path,
        pair: usize,
        role: Role,
        mode: LogMode,
        scan: &LogScan,
        history: &[Order],
    ) -> Result<Recovered, LogError> {
        let path = scan.path.clone();
        let io = |source| LogError::Io {
            path: path.clone(),
            source,
        };
        if !matches!(scan.end, LogEnd::MidFile(_)) || !history.starts_with(&scan.orders) {
            return Err(io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only a log with mid-file damage is rebuilt, keeping its good records",
            )));
        }

        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".salvage");
        let tmp = PathBuf::from(tmp_name);
        let tmp_io = |source| LogError::Io {
            path: tmp.clone(),
            source,
        };
        let mut out = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(tmp_io)?;
        let mut bytes = Vec::with_capacity(HEADER_BYTES + history.len() * RECORD_BYTES);
        bytes.extend_from_slice(&header(pair as u16, role));
        let mut record = [0u8; RECORD_BYTES];
        for (i, order) in history.iter().enumerate() {
            encode(&mut record, i as u64 + 1, order);
            bytes.extend_from_slice(&record);
        }
        out.write_all(&bytes).map_err(tmp_io)?;
        out.sync_all().map_err(tmp_io)?;
        drop(out);
        let backup = keep_aside(&path)?;
        sync_dir(dir);
        std::fs::rename(&tmp, &path).map_err(io)?;
        sync_dir(dir);

        let mut recovered = Self::open(dir, pair, role, mode)?;
        if recovered.orders != history {
            return Err(io(io::Error::other(
                "the rebuilt log does not read back as written",
            )));
        }
        recovered.salvaged = scan.salvage_report(history, Some(backup));
        Ok(recovered)
    }

    fn positioned(
        file: File,
        path: PathBuf,
        (pair, role): (usize, Role),
        mode: LogMode,
        append_at: u64,
        records: usize,
    ) -> Result<Journal, LogError> {
        let sink = match mode {
            LogMode::Buffered => match MappedAppender::new(file, append_at) {
                Ok(map) => Sink::Mapped(map),
                Err(source) => return Err(LogError::Io { path, source }),
            },
            LogMode::None | LogMode::Fsync => Sink::Write {
                file: Arc::new(file),
                buf: Vec::with_capacity(64 * RECORD_BYTES),
                fsync: mode == LogMode::Fsync,
            },
        };
        Ok(Self::with_sink(sink, path, (pair, role), records))
    }

    /// A journal writing to `sink`, which holds `records` good records.
    fn with_sink(sink: Sink, path: PathBuf, (pair, role): (usize, Role), records: usize) -> Self {
        Journal {
            sink,
            path,
            pair,
            role,
            next_seq: records as u64 + 1,
            written: records as u64,
            durable: records as u64,
            commits: 0,
            failed: None,
            flush_failed: None,
            flusher: None,
            watch: None,
        }
    }

    /// Lets `observer` watch this log's writes and flushes (fsync mode; see `flush.rs`). Set
    /// before [`start_flusher`](Journal::start_flusher) for the flusher's steps to be seen.
    pub fn observe(&mut self, observer: Arc<dyn LogObserver>) {
        self.watch = Some(Watch {
            observer,
            pair: self.pair,
            role: self.role,
        });
    }

    /// Starts the log's flusher, a thread that runs `fdatasync` while the caller goes on (see
    /// `flush.rs`): from now on [`submit`](Journal::submit) writes a batch and hands it to the
    /// flusher without waiting for the disk. After each flush, `on_durable` is called on the
    /// flusher's thread with the sequence number up to which every record is on disk; or once
    /// with the error that ended the flusher. In `fsync` mode only (the other modes have
    /// nothing to flush: this does nothing); starting it twice does nothing more.
    pub fn start_flusher(
        &mut self,
        on_durable: impl FnMut(Result<u64, LogError>) + Send + 'static,
    ) -> Result<(), LogError> {
        let fsync = match &self.sink {
            Sink::Write { fsync, .. } => *fsync,
            Sink::Sim { mode, .. } => *mode == LogMode::Fsync,
            Sink::Mapped(_) => false,
        };
        if !fsync || self.flusher.is_some() {
            return Ok(());
        }
        if let Some(e) = &self.flush_failed {
            return Err(self.error(io::Error::new(e.kind(), e.to_string())));
        }
        // Whatever is written but not yet durable is the flusher's to flush first.
        let on_durable: OnDurable = Box::new(on_durable);
        let marks = (self.written, self.durable);
        let flusher = match &self.sink {
            Sink::Write { file, .. } => Worker::Thread(Flusher::start(
                file.clone(),
                &self.path,
                marks,
                self.watch.clone(),
                on_durable,
            )?),
            Sink::Sim { file, .. } => Worker::Sim(SimFlusher::start(
                file.clone(),
                marks,
                self.watch.clone(),
                on_durable,
            )),
            Sink::Mapped(_) => return Ok(()),
        };
        self.flusher = Some(flusher);
        Ok(())
    }

    /// Writes the appended records to the file and, with a flusher running, hands them to it
    /// and returns without waiting for the disk: the flusher reports when they are durable.
    /// Without a flusher this is [`commit`](Journal::commit).
    pub fn submit(&mut self) -> Result<(), LogError> {
        if self.flusher.is_none() {
            return self.commit();
        }
        self.write_out()?;
        let flusher = self.flusher.as_ref().expect("checked above");
        flusher.written(self.written)
    }

    /// Writes what is in the buffer to the file (no flush) and raises the written mark.
    fn write_out(&mut self) -> Result<(), LogError> {
        if let Some(e) = self.failed.as_ref().or(self.flush_failed.as_ref()) {
            return Err(self.error(io::Error::new(e.kind(), e.to_string())));
        }
        let result = match &mut self.sink {
            Sink::Write { buf, .. } | Sink::Sim { buf, .. } if buf.is_empty() => return Ok(()),
            Sink::Write { file, buf, .. } => {
                let result = (&**file).write_all(buf);
                buf.clear();
                result
            }
            Sink::Sim { file, buf, .. } => {
                let result = file.append(buf);
                buf.clear();
                result
            }
            Sink::Mapped(_) => return Ok(()),
        };
        if let Err(source) = result {
            self.failed = Some(io::Error::new(source.kind(), source.to_string()));
            return Err(self.error(source));
        }
        self.written = self.next_seq - 1;
        if let Some(watch) = &self.watch {
            watch.see(crate::flush::LogEvent::Written { upto: self.written });
        }
        Ok(())
    }

    /// Appends the next record (sequence [`next_seq`](Journal::next_seq)). In `buffered` mode
    /// it is in the OS's hands on return; in `fsync` mode it reaches the file at the next
    /// [`commit`](Journal::commit). An error is reported by the next `commit`, and by every
    /// commit after it.
    pub fn append(&mut self, order: &Order) {
        let mut record = [0u8; RECORD_BYTES];
        encode(&mut record, self.next_seq, order);
        self.next_seq += 1;
        match &mut self.sink {
            Sink::Write { buf, .. } => buf.extend_from_slice(&record),
            // After a failed write nothing more is written: a record after the failed one
            // would be a valid record after damage (found by the simulation tests, in the
            // records recovery copies from the peer's log).
            Sink::Mapped(map) => {
                if self.failed.is_none() {
                    if let Err(e) = map.append(&record) {
                        self.failed = Some(e);
                    }
                }
            }
            Sink::Sim {
                file,
                mode: LogMode::Buffered,
                ..
            } => {
                if self.failed.is_none() {
                    if let Err(e) = file.append(&record) {
                        self.failed = Some(e);
                    }
                }
            }
            Sink::Sim { buf, .. } => buf.extend_from_slice(&record),
        }
    }

    /// The sequence number the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// True if appended records wait for a [`commit`](Journal::commit) to be written.
    pub fn has_pending(&self) -> bool {
        matches!(&self.sink, Sink::Write { buf, .. } | Sink::Sim { buf, .. } if !buf.is_empty())
    }

    /// Makes every appended record as durable as the mode promises: in `fsync` mode, writes
    /// them and waits for the disk (with a flusher running, for the flush that covers them);
    /// in `buffered` mode they already are, and this only reports an error of an earlier
    /// append.
    pub fn commit(&mut self) -> Result<(), LogError> {
        let wrote = self.has_pending();
        self.write_out()?;
        if let Some(flusher) = &self.flusher {
            flusher.written(self.written)?;
            return flusher.wait_durable(self.written);
        }
        let flushed = match &self.sink {
            Sink::Write {
                file, fsync: true, ..
            } if wrote => file.sync_data(),
            Sink::Sim {
                file,
                mode: LogMode::Fsync,
                ..
            } if wrote => file.flush_now(),
            _ => return Ok(()),
        };
        self.commits += 1;
        if let Err(e) = flushed {
            let copy = io::Error::new(e.kind(), e.to_string());
            self.flush_failed = Some(e);
            return Err(self.error(copy));
        }
        self.durable = self.written;
        Ok(())
    }

    /// Writes and flushes to disk whatever is pending, whatever the mode (for a clean stop).
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.commit()?;
        if self.flusher.is_some() {
            // The flush that covers the last record has returned.
            return Ok(());
        }
        let result = match &mut self.sink {
            Sink::Write { file, .. } => file.sync_data(),
            Sink::Mapped(map) => map.sync(),
            Sink::Sim { file, .. } => file.flush_now(),
        };
        result.map_err(|source| self.error(source))
    }

    /// [`sync`](Journal::sync), then stops the flusher, if one runs, and joins its thread.
    /// Returns the first error of either. Appending after a close is allowed: the log is then
    /// committed without a flusher again.
    pub fn close(&mut self) -> Result<(), LogError> {
        let synced = self.sync();
        let stopped = match self.flusher.take() {
            Some(mut flusher) => {
                let stopped = flusher.stop();
                self.commits += flusher.flushes();
                match &stopped {
                    // The flusher flushed everything written before it ended.
                    Ok(()) => self.durable = self.written,
                    // Its failure outlives it: commits without it must not flush again.
                    Err(LogError::Io { source, .. }) => {
                        self.flush_failed = Some(io::Error::new(source.kind(), source.to_string()));
                    }
                    Err(_) => {}
                }
                stopped
            }
            None => Ok(()),
        };
        synced.and(stopped)
    }

    /// Cuts the log back to its first `keep` records, durably, and appends after them: a
    /// replica whose last orders are not its primary's (orders of an earlier primary that were
    /// never acknowledged) drops them before it takes the primary's (see `dist.rs`). Whatever
    /// was appended and not yet committed is committed first. Refused while a flusher runs
    /// ([`close`](Journal::close) it first) and for a cut past the end.
    pub fn cut_back(&mut self, keep: u64) -> Result<(), LogError> {
        if self.flusher.is_some() {
            return Err(self.error(io::Error::other("a log is cut back only without a flusher")));
        }
        self.commit()?;
        let held = self.next_seq - 1;
        if keep > held {
            return Err(self.error(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a cut to {keep} records, past the end ({held})"),
            )));
        }
        let end = (HEADER_BYTES + keep as usize * RECORD_BYTES) as u64;
        let result = match &mut self.sink {
            Sink::Write { file, .. } => file
                .set_len(end)
                .and_then(|()| (&**file).seek(SeekFrom::Start(end)).map(|_| ()))
                .and_then(|()| file.sync_all()),
            Sink::Mapped(map) => map.cut_back(end).and_then(|()| map.sync()),
            Sink::Sim { file, .. } => file.set_len(end as usize).and_then(|()| file.flush_now()),
        };
        if let Err(source) = result {
            self.failed = Some(io::Error::new(source.kind(), source.to_string()));
            return Err(self.error(source));
        }
        self.next_seq = keep + 1;
        self.written = self.written.min(keep);
        self.durable = self.durable.min(keep);
        Ok(())
    }

    /// Flushes made (in fsync mode each is one `fdatasync` covering a batch: group commit),
    /// by [`commit`](Journal::commit) and by the flusher.
    pub fn commits(&self) -> u64 {
        self.commits + self.flusher.as_ref().map_or(0, Worker::flushes)
    }

    fn error(&self, source: io::Error) -> LogError {
        LogError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The log's file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn header(pair: u16, role: Role) -> [u8; HEADER_BYTES] {
    let mut h = [0u8; HEADER_BYTES];
    h[..6].copy_from_slice(&MAGIC);
    h[6..8].copy_from_slice(&VERSION.to_le_bytes());
    h[8..10].copy_from_slice(&pair.to_le_bytes());
    h[10] = role as u8;
    h
}

fn check_header(path: &Path, h: &[u8], pair: u16, role: Role) -> Result<(), LogError> {
    if h[..6] != MAGIC || h[11..].iter().any(|&b| b != 0) {
        return Err(LogError::NotALog {
            path: path.to_path_buf(),
        });
    }
    let version = u16::from_le_bytes([h[6], h[7]]);
    if version != VERSION {
        return Err(LogError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    let found_pair = u16::from_le_bytes([h[8], h[9]]);
    let found_role = match h[10] {
        0 => Role::Primary,
        1 => Role::Standby,
        _ => {
            return Err(LogError::NotALog {
                path: path.to_path_buf(),
            })
        }
    };
    if found_pair != pair || found_role != role {
        return Err(LogError::WrongEngine {
            path: path.to_path_buf(),
            pair,
            role,
            found_pair,
            found_role,
        });
    }
    Ok(())
}

fn encode(record: &mut [u8; RECORD_BYTES], seq: u64, order: &Order) {
    record[..4].copy_from_slice(&(PAYLOAD_BYTES as u32).to_le_bytes());
    let p = &mut record[FRAME_BYTES..];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    p[8..12].copy_from_slice(&order.client().0.to_le_bytes());
    p[12..20].copy_from_slice(&order.client_order_id().to_le_bytes());
    p[20..22].copy_from_slice(&order.instrument().0.to_le_bytes());
    p[22] = order.side() as u8;
    p[23..27].copy_from_slice(&order.price().to_le_bytes());
    p[27..31].copy_from_slice(&order.volume().to_le_bytes());
    let crc = checksum(&record[..4], &record[FRAME_BYTES..]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
}

fn checksum(len: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(len);
    h.update(payload);
    h.finalize()
}

/// Bytes of `end` after the last good record.
fn trailing_bytes(end: &LogEnd) -> u64 {
    match end {
        LogEnd::Clean => 0,
        LogEnd::Spare { bytes } => *bytes,
        LogEnd::TornTail(cut) => cut.dropped_bytes,
        LogEnd::MidFile(_) => 0,
    }
}

/// Reads the whole of a log file's bytes into a [`LogScan`] (the file is named `path`).
pub(crate) fn examine(
    path: PathBuf,
    bytes: &[u8],
    pair: u16,
    role: Role,
) -> Result<LogScan, LogError> {
    let file_bytes = bytes.len() as u64;
    let mut scan = LogScan {
        path,
        exists: true,
        file_bytes,
        orders: Vec::new(),
        end: LogEnd::Clean,
        later: Vec::new(),
    };
    if bytes.len() < HEADER_BYTES {
        // Only a prefix of our own header may be torn (or a zeroed mapping); anything else is
        // not ours.
        if !header(pair, role).starts_with(bytes) && bytes.iter().any(|&b| b != 0) {
            return Err(LogError::NotALog { path: scan.path });
        }
        if !bytes.is_empty() {
            scan.end = LogEnd::TornTail(TailCut {
                offset: 0,
                dropped_bytes: file_bytes,
                damage: TailDamage::TornHeader,
            });
        }
        return Ok(scan);
    }
    check_header(&scan.path, &bytes[..HEADER_BYTES], pair, role)?;
    let records = &bytes[HEADER_BYTES..];
    let (orders, at, damage) = parse_records(records);
    let good_end = (HEADER_BYTES + at) as u64;
    scan.orders = orders;
    scan.end = match damage {
        None if at == records.len() => LogEnd::Clean,
        None => LogEnd::Spare {
            bytes: file_bytes - good_end,
        },
        Some(damage) => {
            scan.later = resync(records, at)
                .map(|(offset, seq, order)| LaterRecord {
                    offset: (HEADER_BYTES + offset) as u64,
                    seq,
                    order,
                })
                .collect();
            match scan.later.first() {
                None => LogEnd::TornTail(TailCut {
                    offset: good_end,
                    dropped_bytes: file_bytes - good_end,
                    damage,
                }),
                Some(first) => LogEnd::MidFile(MidDamage {
                    offset: good_end,
                    seq: scan.orders.len() as u64 + 1,
                    damage,
                    valid_after: scan.later.len() as u64,
                    first_valid_offset: first.offset,
                    first_valid_seq: first.seq,
                }),
            }
        }
    };
    Ok(scan)
}

/// Reads records until the end or the first damage. Returns the orders, the byte offset just
/// after the last good record, and the damage found, if any (none if the rest is zeros: the
/// clean end of a buffered log).
fn parse_records(bytes: &[u8]) -> (Vec<Order>, usize, Option<TailDamage>) {
    let mut orders = Vec::with_capacity(bytes.len() / RECORD_BYTES);
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let zero_len = rest.len() < FRAME_BYTES || rest[..4] == [0; 4];
        if zero_len && rest.iter().all(|&b| b == 0) {
            // Mapped space never written: the clean end of a buffered log.
            return (orders, at, None);
        }
        let expected = orders.len() as u64 + 1;
        match read_record(rest) {
            Ok((seq, order)) if seq == expected => orders.push(order),
            Ok((found, _)) => {
                return (
                    orders,
                    at,
                    Some(TailDamage::OutOfSequence { expected, found }),
                )
            }
            Err(damage) => return (orders, at, Some(damage)),
        }
        at += RECORD_BYTES;
    }
    (orders, at, None)
}

/// Reads the record at the start of `rest`.
fn read_record(rest: &[u8]) -> Result<(u64, Order), TailDamage> {
    if rest.len() < FRAME_BYTES {
        return Err(torn(FRAME_BYTES, rest.len()));
    }
    let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
    if len as usize != PAYLOAD_BYTES {
        // A torn length field looks like any number; report a short file as torn.
        return Err(if rest.len() < RECORD_BYTES {
            torn(RECORD_BYTES, rest.len())
        } else {
            TailDamage::BadLength(len)
        });
    }
    if rest.len() < RECORD_BYTES {
        return Err(torn(RECORD_BYTES, rest.len()));
    }
    let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
    let payload = &rest[FRAME_BYTES..RECORD_BYTES];
    if checksum(&rest[..4], payload) != crc {
        return Err(TailDamage::BadChecksum);
    }
    decode(payload).ok_or(TailDamage::BadField)
}

/// Every valid record at or after byte `from` of `bytes`, found at any offset (damage need not
/// keep records aligned), as (offset, sequence, order), in file order.
fn resync(bytes: &[u8], from: usize) -> impl Iterator<Item = (usize, u64, Order)> + '_ {
    let len_field = (PAYLOAD_BYTES as u32).to_le_bytes();
    let mut at = from;
    std::iter::from_fn(move || {
        while at + RECORD_BYTES <= bytes.len() {
            let here = at;
            if bytes[here..here + 4] == len_field {
                if let Ok((seq, order)) = read_record(&bytes[here..]) {
                    at = here + RECORD_BYTES;
                    return Some((here, seq, order));
                }
            }
            at += 1;
        }
        None
    })
}

/// Gives the file at `path` a second name, `<path>.damaged` (or `.damaged.2`, ...: the first
/// free one), so its bytes outlive the rebuilt log that replaces it. A hard link where the
/// file system has them, else a synced copy. Returns the name.
fn keep_aside(path: &Path) -> Result<PathBuf, LogError> {
    for n in 1..=MAX_BACKUPS {
        let mut name = path.as_os_str().to_owned();
        name.push(".damaged");
        if n > 1 {
            name.push(format!(".{n}"));
        }
        let backup = PathBuf::from(name);
        let io = |source| LogError::Io {
            path: backup.clone(),
            source,
        };
        match std::fs::hard_link(path, &backup) {
            Ok(()) => return Ok(backup),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => {}
        }
        // No hard links here: copy, never overwriting an earlier backup.
        let mut copy = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => return Err(io(source)),
        };
        let mut original = File::open(path).map_err(|source| LogError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        io::copy(&mut original, &mut copy).map_err(io)?;
        copy.sync_all().map_err(io)?;
        return Ok(backup);
    }
    Err(LogError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{MAX_BACKUPS} backups of this log exist already; move some away"),
        ),
    })
}

/// Most `.damaged` copies of one log kept side by side.
const MAX_BACKUPS: u32 = 1000;

fn torn(needed: usize, available: usize) -> TailDamage {
    TailDamage::Torn { needed, available }
}

fn decode(p: &[u8]) -> Option<(u64, Order)> {
    let u64_at = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().expect("4 bytes"));
    let seq = u64_at(0);
    let client = u32_at(8);
    let client_order_id = u64_at(12);
    let instrument = u16::from_le_bytes([p[20], p[21]]);
    let side = match p[22] {
        0 => Side::Buy,
        1 => Side::Sell,
        _ => return None,
    };
    let price = u32_at(23);
    let volume = u32_at(27);
    if price == 0 || volume == 0 || price > i32::MAX as u32 || volume > i32::MAX as u32 {
        return None;
    }
    Some((
        seq,
        Order::new_checked(
            ClientId(client),
            client_order_id,
            InstrumentId(instrument),
            side,
            price,
            volume,
        ),
    ))
}

/// Makes a new file's directory entry durable (best effort: not every platform supports
/// syncing a directory).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Measures this disk's own `fdatasync` latency the way the logs use it: `writers` threads,
/// each with a scratch file of its own in `dir`, each `count` times appending one record and
/// flushing it. Returns every flush's duration; the files are removed after.
///
/// One writer is the disk's best case. The exchange has six engines flushing their own logs
/// at the same time, so `writers = 6` shows what the disk gives under the system's own
/// concurrency.
pub fn fsync_probe(dir: &Path, count: usize, writers: usize) -> Result<Vec<Duration>, LogError> {
    std::fs::create_dir_all(dir).map_err(|source| LogError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let runs: Vec<Result<Vec<Duration>, LogError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers.max(1))
            .map(|w| s.spawn(move || probe_one(&dir.join(format!("fsync-probe-{w}.tmp")), count)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe thread does not panic"))
            .collect()
    });
    let mut times = Vec::with_capacity(count * writers);
    for run in runs {
        times.extend(run?);
    }
    Ok(times)
}

fn probe_one(path: &Path, count: usize) -> Result<Vec<Duration>, LogError> {
    let io = |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io)?;
    let record = [0x5au8; RECORD_BYTES];
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        file.write_all(&record).map_err(io)?;
        let start = Instant::now();
        file.sync_data().map_err(io)?;
        times.push(start.elapsed());
    }
    drop(file);
    std::fs::remove_file(path).map_err(io)?;
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(i: u64) -> Order {
        Order::new_checked(ClientId(3), i, InstrumentId(2), Side::Sell, 97, 1000)
    }

    #[test]
    fn records_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Fsync).unwrap();
        assert!(r.orders.is_empty() && r.cut.is_none());
        for i in 0..10 {
            r.journal.append(&order(i));
        }
        r.journal.commit().unwrap();
        drop(r);
        let r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Fsync).unwrap();
        assert_eq!(r.orders, (0..10).map(order).collect::<Vec<_>>());
        assert_eq!(r.journal.next_seq(), 11);
        assert!(r.cut.is_none());
    }

    /// A log cut back keeps its first records, takes new ones after them, and reads back as
    /// exactly that, in every mode; a buffered log's cut crosses a mapped chunk's boundary.
    #[test]
    fn a_log_cut_back_keeps_its_first_records_and_appends_after_them() {
        let per_chunk = (crate::mapped::CHUNK as usize - HEADER_BYTES) / RECORD_BYTES;
        for (mode, total, keep) in [
            (LogMode::Fsync, 10, 7),
            (LogMode::None, 10, 0),
            (LogMode::Buffered, 10, 3),
            (LogMode::Buffered, per_chunk + 100, per_chunk - 5),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut r = Journal::open(dir.path(), 0, Role::Standby, mode).unwrap();
            for i in 0..total as u64 {
                r.journal.append(&order(i));
            }
            // Some of them not committed yet: the cut commits them first.
            r.journal.cut_back(keep as u64).unwrap();
            assert_eq!(r.journal.next_seq(), keep as u64 + 1);
            assert!(r.journal.cut_back(keep as u64 + 1).is_err(), "past the end");
            for i in 0..3 {
                r.journal.append(&order(1_000_000 + i));
            }
            r.journal.commit().unwrap();
            drop(r);
            let back = Journal::open(dir.path(), 0, Role::Standby, mode).unwrap();
            let expected: Vec<Order> = (0..keep as u64)
                .chain(1_000_000..1_000_003)
                .map(order)
                .collect();
            assert_eq!(back.orders.len(), expected.len(), "{mode:?}");
            assert!(
                back.orders == expected,
                "{mode:?}: the records read back differ"
            );
            assert!(back.cut.is_none(), "{mode:?}: a clean end, not a torn tail");
        }
    }

    /// The same on a simulated disk (the logs of `troupe::sim` runs).
    #[test]
    fn a_log_on_a_simulated_disk_is_cut_back_too() {
        let sim = troupe::sim::Simulation::new(5);
        let disk = SimDisk::new(sim.system());
        for (pair, mode) in [(0, LogMode::Fsync), (1, LogMode::Buffered)] {
            let mut r = Journal::open_in(Place::Sim(&disk), pair, Role::Standby, mode).unwrap();
            for i in 0..8 {
                r.journal.append(&order(i));
            }
            r.journal.cut_back(5).unwrap();
            r.journal.append(&order(99));
            r.journal.commit().unwrap();
            let scan = Journal::scan_in(Place::Sim(&disk), pair, Role::Standby).unwrap();
            let expected: Vec<Order> = (0..5).chain([99]).map(order).collect();
            assert!(scan.orders == expected, "{mode:?}");
        }
    }

    #[test]
    fn another_engines_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered).unwrap());
        std::fs::rename(
            dir.path().join(Journal::file_name(0, Role::Primary)),
            dir.path().join(Journal::file_name(1, Role::Standby)),
        )
        .unwrap();
        assert!(matches!(
            Journal::open(dir.path(), 1, Role::Standby, LogMode::Buffered),
            Err(LogError::WrongEngine { .. })
        ));
    }

    #[test]
    fn a_foreign_file_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(Journal::file_name(0, Role::Primary));
        std::fs::write(&path, b"hello, this is not a log at all").unwrap();
        assert!(matches!(
            Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered),
            Err(LogError::NotALog { .. })
        ));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"hello, this is not a log at all"
        );
    }

    /// A log of `n` records for pair 0's primary in `dir`; returns its bytes.
    fn log_of(dir: &Path, n: u64) -> Vec<u8> {
        let mut r = Journal::open(dir, 0, Role::Primary, LogMode::Fsync).unwrap();
        for i in 0..n {
            r.journal.append(&order(i));
        }
        r.journal.commit().unwrap();
        std::fs::read(r.journal.path()).unwrap()
    }

    fn at(record: usize) -> usize {
        HEADER_BYTES + record * RECORD_BYTES
    }

    fn examine_bytes(bytes: &[u8]) -> LogScan {
        examine(PathBuf::from("test.log"), bytes, 0, Role::Primary).unwrap()
    }

    #[test]
    fn scan_of_a_missing_log_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not-yet");
        let scan = Journal::scan(&missing, 0, Role::Primary).unwrap();
        assert!(!scan.exists && scan.orders.is_empty() && scan.end == LogEnd::Clean);
        assert!(!missing.exists(), "a scan creates no directory");
    }

    #[test]
    fn records_shifted_by_removed_bytes_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = log_of(dir.path(), 30);
        // Five bytes of record 10 (sequence 11) disappear: every later record moves.
        bytes.drain(at(10) + 3..at(10) + 8);
        let scan = examine_bytes(&bytes);
        assert_eq!(scan.orders.len(), 10);
        let LogEnd::MidFile(d) = scan.end else {
            panic!("{:?}", scan.end)
        };
        assert_eq!((d.offset, d.seq, d.valid_after), (at(10) as u64, 11, 19));
        assert_eq!(
            (d.first_valid_offset, d.first_valid_seq),
            (at(11) as u64 - 5, 12)
        );
        assert_eq!(scan.later.last().unwrap().seq, 30);
        // Sequence 11 is gone: salvage of this log alone stops before it.
        assert_eq!(scan.contiguous().len(), 10);
    }

    #[test]
    fn zeros_before_valid_records_are_damage_not_the_clean_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = log_of(dir.path(), 20);
        // A page never written back before a power cut, with later pages written.
        bytes[at(5)..at(8)].fill(0);
        let scan = examine_bytes(&bytes);
        let LogEnd::MidFile(d) = scan.end else {
            panic!("{:?}", scan.end)
        };
        assert_eq!(d.damage, TailDamage::BadLength(0));
        assert_eq!((d.seq, d.valid_after, d.first_valid_seq), (6, 12, 9));
    }

    #[test]
    fn garbage_and_zeros_after_the_last_record_are_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = log_of(dir.path(), 8);
        bytes.extend_from_slice(&[7; 25]);
        bytes.extend_from_slice(&[0; 4096]);
        let scan = examine_bytes(&bytes);
        assert_eq!(scan.orders.len(), 8);
        let LogEnd::TornTail(cut) = scan.end else {
            panic!("{:?}", scan.end)
        };
        assert_eq!(cut.offset, at(8) as u64);
        assert_eq!(cut.dropped_bytes, 25 + 4096);
        // Nothing but zeros after the last record: the clean end of a buffered log.
        let mut spare = log_of(dir.path(), 8);
        spare.extend_from_slice(&[0; 100]);
        assert_eq!(examine_bytes(&spare).end, LogEnd::Spare { bytes: 100 });
    }

    #[test]
    fn a_record_out_of_sequence_with_records_after_it_is_mid_file_damage() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = log_of(dir.path(), 12);
        // Record 4 (sequence 5) is missing whole: the file jumps from 4 to 6.
        let mut cut = bytes[..at(4)].to_vec();
        cut.extend_from_slice(&bytes[at(5)..]);
        let scan = examine_bytes(&cut);
        let LogEnd::MidFile(d) = scan.end else {
            panic!("{:?}", scan.end)
        };
        assert_eq!(
            d.damage,
            TailDamage::OutOfSequence {
                expected: 5,
                found: 6
            }
        );
        assert_eq!((d.valid_after, d.first_valid_seq), (7, 6));
        assert_eq!(scan.usable_later().count(), 7);
    }

    /// Records every step of a log, and can hold the flusher at the start of a flush (the
    /// observer runs on the flusher's thread just before `fdatasync`) until the test lets it
    /// go: so the tests order writes and flushes without timing anything.
    #[derive(Debug, Default)]
    struct Gate {
        events: std::sync::Mutex<Vec<crate::LogEvent>>,
        hold: std::sync::Mutex<bool>,
        moved: std::sync::Condvar,
    }

    impl Gate {
        fn set_hold(&self, hold: bool) {
            *self.hold.lock().unwrap() = hold;
            self.moved.notify_all();
        }

        fn events(&self) -> Vec<crate::LogEvent> {
            self.events.lock().unwrap().clone()
        }

        /// Waits until `event` has been recorded.
        fn wait_for(&self, event: crate::LogEvent) {
            let mut events = self.events.lock().unwrap();
            while !events.contains(&event) {
                events = self.moved.wait(events).unwrap();
            }
        }
    }

    impl crate::LogObserver for Gate {
        fn event(&self, _pair: usize, _role: Role, event: crate::LogEvent) {
            self.events.lock().unwrap().push(event);
            self.moved.notify_all();
            if let crate::LogEvent::FlushBegan { .. } = event {
                let mut hold = self.hold.lock().unwrap();
                while *hold {
                    hold = self.moved.wait(hold).unwrap();
                }
            }
        }
    }

    #[test]
    fn the_next_batch_is_written_while_a_flush_runs_and_flushed_after_it() {
        use crate::LogEvent::{FlushBegan, FlushDone, Written};
        let dir = tempfile::tempdir().unwrap();
        let mut r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Fsync).unwrap();
        let gate = Arc::new(Gate::default());
        r.journal.observe(gate.clone());
        let (tx, durable) = std::sync::mpsc::channel();
        r.journal
            .start_flusher(move |d| tx.send(d.map_err(|e| e.to_string())).unwrap())
            .unwrap();

        gate.set_hold(true);
        for i in 0..3 {
            r.journal.append(&order(i));
        }
        r.journal.submit().unwrap();
        gate.wait_for(FlushBegan { upto: 3 });
        // The flush of 1..=3 is held open: the next batch is written meanwhile, and nothing
        // is reported durable yet.
        for i in 3..5 {
            r.journal.append(&order(i));
        }
        r.journal.submit().unwrap();
        assert_eq!(
            gate.events(),
            [
                Written { upto: 3 },
                FlushBegan { upto: 3 },
                Written { upto: 5 }
            ]
        );
        assert!(durable.try_recv().is_err());

        gate.set_hold(false);
        // The held flush began before 4 and 5 were written: it covers only 1..=3. The next
        // flush covers them.
        assert_eq!(durable.recv().unwrap(), Ok(3));
        assert_eq!(durable.recv().unwrap(), Ok(5));
        assert_eq!(
            gate.events(),
            [
                Written { upto: 3 },
                FlushBegan { upto: 3 },
                Written { upto: 5 },
                FlushDone { upto: 3 },
                FlushBegan { upto: 5 },
                FlushDone { upto: 5 },
            ]
        );
        assert_eq!(r.journal.commits(), 2);
        r.journal.close().unwrap();
        drop(r);
        let r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Fsync).unwrap();
        assert_eq!(r.orders, (0..5).map(order).collect::<Vec<_>>());
    }

    #[test]
    fn commit_and_close_wait_for_the_flusher_and_join_it() {
        let dir = tempfile::tempdir().unwrap();
        // Pair 9 is this test's alone: its flusher's thread name tells it apart.
        let mut r = Journal::open(dir.path(), 9, Role::Standby, LogMode::Fsync).unwrap();
        let (tx, durable) = std::sync::mpsc::channel();
        r.journal
            .start_flusher(move |d| tx.send(d.map_err(|e| e.to_string())).unwrap())
            .unwrap();
        let flusher_threads = || {
            std::fs::read_dir("/proc/self/task")
                .map(|tasks| {
                    tasks
                        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                        .filter(|name| name.starts_with("flush pair-9"))
                        .count()
                })
                .unwrap_or(1)
        };
        for i in 0..4 {
            r.journal.append(&order(i));
        }
        // A commit with a flusher running returns once the flusher has flushed the records.
        r.journal.commit().unwrap();
        assert_eq!(durable.recv().unwrap(), Ok(4));
        // The thread names itself when it starts; it has flushed, so it has started.
        assert_eq!(flusher_threads(), 1);
        r.journal.append(&order(4));
        r.journal.close().unwrap();
        assert_eq!(durable.recv().unwrap(), Ok(5));
        // A joined thread may stay listed in `/proc` for a moment after `join` returns (the
        // kernel clears its id first): gone within that moment, or not joined.
        let joined_by = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while flusher_threads() != 0 {
            assert!(
                std::time::Instant::now() < joined_by,
                "close joined the flusher"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Closed, the log still commits, on the caller's thread.
        r.journal.append(&order(5));
        r.journal.commit().unwrap();
        drop(r);
        let r = Journal::open(dir.path(), 9, Role::Standby, LogMode::Fsync).unwrap();
        assert_eq!(r.orders.len(), 6);
    }

    /// An fsync journal writing into a pipe: `write` works, `fdatasync` fails (EINVAL), a real
    /// flush error. Keep the reader alive while the journal writes.
    fn journal_on_a_pipe() -> (std::io::PipeReader, Journal) {
        let (reader, writer) = std::io::pipe().unwrap();
        let file = File::from(std::os::fd::OwnedFd::from(writer));
        let journal = Journal::positioned(
            file,
            PathBuf::from("pipe.log"),
            (0, Role::Primary),
            LogMode::Fsync,
            HEADER_BYTES as u64,
            0,
        )
        .unwrap();
        (reader, journal)
    }

    #[test]
    fn a_failed_flush_is_reported_once_and_nothing_after_it_becomes_durable() {
        let (reader, mut journal) = journal_on_a_pipe();
        let gate = Arc::new(Gate::default());
        journal.observe(gate.clone());
        let (tx, reports) = std::sync::mpsc::channel();
        journal
            .start_flusher(move |d| tx.send(d.map_err(|e| e.to_string())).unwrap())
            .unwrap();
        journal.append(&order(0));
        journal.submit().unwrap();
        let report = reports.recv().unwrap();
        assert!(
            report.as_ref().is_err_and(|e| e.contains("pipe.log")),
            "{report:?}"
        );
        gate.wait_for(crate::LogEvent::FlushFailed);
        // Sticky: later batches are refused, a commit fails, close reports it; the flusher
        // reported nothing durable and reports nothing more.
        journal.append(&order(1));
        assert!(matches!(journal.submit(), Err(LogError::Io { .. })));
        journal.append(&order(2));
        assert!(journal.commit().is_err());
        assert!(journal.close().is_err());
        assert!(reports.try_recv().is_err());
        // Closed, the log does not flush again on its own either.
        journal.append(&order(3));
        assert!(journal.commit().is_err());
        assert!(journal.start_flusher(|_| {}).is_err());
        assert!(!gate
            .events()
            .iter()
            .any(|e| matches!(e, crate::LogEvent::FlushDone { .. })));
        drop(reader);
    }

    #[test]
    fn a_failed_commit_flush_is_never_retried() {
        let (_reader, mut journal) = journal_on_a_pipe();
        journal.append(&order(0));
        assert!(journal.commit().is_err(), "fdatasync on a pipe fails");
        // A later flush could succeed without the records on disk: the log refuses to go on.
        journal.append(&order(1));
        assert!(journal.commit().is_err());
        assert!(journal.start_flusher(|_| {}).is_err());
        assert!(journal.submit().is_err());
    }

    #[test]
    fn probe_measures_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(fsync_probe(dir.path(), 3, 2).unwrap().len(), 6);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
