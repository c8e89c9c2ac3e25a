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
//! - `fsync`: `append` encodes into a buffer; [`Journal::commit`] writes the buffer and waits
//!   for the disk (`fdatasync`). The engine commits once per batch of orders, so one fsync
//!   covers every order that arrived meanwhile (group commit); an order is acknowledged only
//!   after the commit that covers it.
//!
//! A buffered log's file may end in zeros (mapped space not yet used); the reader takes a zero
//! length field followed by nothing but zeros as the clean end, and trims it.
//!
//! # Recovery
//! [`Journal::open`] reads the file from the start and stops at the first record that is
//! incomplete (torn write), fails its checksum, has an impossible length or content, or breaks
//! the sequence. Everything before it is kept; the damaged tail is reported in a
//! [`TailCut`] and cut off the file (truncate, then fsync) so new records follow the last good
//! one. A damaged tail is never applied. A file that is not a log at all is refused with
//! [`LogError::NotALog`] and left untouched.

use std::fs::{File, OpenOptions};
use std::io;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::mapped::MappedAppender;
use crate::order::{ClientId, InstrumentId, Order, Role, Side};

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

/// Why recovery stopped reading before the end of the file.
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

/// A damaged tail that recovery cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailCut {
    /// File offset of the first damaged byte; the file now ends here.
    pub offset: u64,
    /// Bytes removed.
    pub dropped_bytes: u64,
    /// What was wrong.
    pub damage: TailDamage,
}

/// An open log, positioned after its last good record, ready to append.
#[derive(Debug)]
pub struct Journal {
    sink: Sink,
    path: PathBuf,
    next_seq: u64,
    /// The first error of an append, reported by the next commit.
    failed: Option<io::Error>,
}

/// Where appended records go.
#[derive(Debug)]
enum Sink {
    /// Encoded into `buf`, written (and fsynced if `fsync`) at commit.
    Write {
        file: File,
        buf: Vec<u8>,
        fsync: bool,
    },
    /// Copied into a mapping of the file as they are appended.
    Mapped(MappedAppender),
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
}

impl Journal {
    /// The file name of an engine's log inside a log directory.
    pub fn file_name(pair: usize, role: Role) -> String {
        format!("pair-{pair}-{role}.log")
    }

    /// Opens (or creates) the log of engine (`pair`, `role`) in `dir`, reads it back, cuts any
    /// damaged tail, and positions it for appending.
    pub fn open(dir: &Path, pair: usize, role: Role, mode: LogMode) -> Result<Recovered, LogError> {
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
        let header = header(pair as u16, role);

        let (orders, good_end, damage) = if bytes.len() < HEADER_BYTES {
            // Only a prefix of our own header may be torn (or a zeroed mapping); anything else
            // is not ours.
            if !header.starts_with(&bytes) && bytes.iter().any(|&b| b != 0) {
                return Err(LogError::NotALog { path });
            }
            let damage = (!bytes.is_empty()).then_some(TailDamage::TornHeader);
            (Vec::new(), 0, damage)
        } else {
            check_header(&path, &bytes[..HEADER_BYTES], pair as u16, role)?;
            let (orders, end, damage) = parse_records(&bytes[HEADER_BYTES..]);
            (orders, HEADER_BYTES + end, damage)
        };
        if damage.is_none() && good_end < bytes.len() {
            // Unused mapped space after the last record: not damage, just trimmed.
            file.set_len(good_end as u64).map_err(io)?;
        }

        let cut = damage.map(|damage| TailCut {
            offset: good_end as u64,
            dropped_bytes: (bytes.len() - good_end) as u64,
            damage,
        });
        if cut.is_some() {
            file.set_len(good_end as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        let mut append_at = good_end as u64;
        if good_end == 0 {
            append_at = HEADER_BYTES as u64;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(&header).map_err(io)?;
            file.sync_all().map_err(io)?;
            sync_dir(dir);
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        let sink = match mode {
            LogMode::Buffered => Sink::Mapped(MappedAppender::new(file, append_at).map_err(io)?),
            LogMode::None | LogMode::Fsync => Sink::Write {
                file,
                buf: Vec::with_capacity(64 * RECORD_BYTES),
                fsync: mode == LogMode::Fsync,
            },
        };
        let next_seq = orders.len() as u64 + 1;
        Ok(Recovered {
            journal: Journal {
                sink,
                path,
                next_seq,
                failed: None,
            },
            orders,
            cut,
        })
    }

    /// Appends the next record (sequence [`next_seq`](Journal::next_seq)). In `buffered` mode
    /// it is in the OS's hands on return; in `fsync` mode it reaches the file at the next
    /// [`commit`](Journal::commit). An error is reported by the next `commit`.
    pub fn append(&mut self, order: &Order) {
        let mut record = [0u8; RECORD_BYTES];
        encode(&mut record, self.next_seq, order);
        self.next_seq += 1;
        match &mut self.sink {
            Sink::Write { buf, .. } => buf.extend_from_slice(&record),
            Sink::Mapped(map) => {
                if let Err(e) = map.append(&record) {
                    self.failed.get_or_insert(e);
                }
            }
        }
    }

    /// The sequence number the next appended record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// True if appended records wait for a [`commit`](Journal::commit) to be written.
    pub fn has_pending(&self) -> bool {
        matches!(&self.sink, Sink::Write { buf, .. } if !buf.is_empty())
    }

    /// Makes every appended record as durable as the mode promises: in `fsync` mode, writes
    /// them and waits for the disk; in `buffered` mode they already are, and this only
    /// reports an error of an earlier append.
    pub fn commit(&mut self) -> Result<(), LogError> {
        if let Some(source) = self.failed.take() {
            return Err(self.error(source));
        }
        let Sink::Write { file, buf, fsync } = &mut self.sink else {
            return Ok(());
        };
        if buf.is_empty() {
            return Ok(());
        }
        let result = file
            .write_all(buf)
            .and_then(|()| if *fsync { file.sync_data() } else { Ok(()) });
        buf.clear();
        result.map_err(|source| self.error(source))
    }

    /// Writes and flushes to disk whatever is pending, whatever the mode (for a clean stop).
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.commit()?;
        let result = match &mut self.sink {
            Sink::Write { file, .. } => file.sync_data(),
            Sink::Mapped(map) => map.sync(),
        };
        result.map_err(|source| self.error(source))
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

/// Reads records until the end or the first damage. Returns the orders, the byte offset just
/// after the last good record, and the damage found, if any.
fn parse_records(bytes: &[u8]) -> (Vec<Order>, usize, Option<TailDamage>) {
    let mut orders = Vec::with_capacity(bytes.len() / RECORD_BYTES);
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < FRAME_BYTES {
            if rest.iter().all(|&b| b == 0) {
                return (orders, at, None);
            }
            return (orders, at, Some(torn(FRAME_BYTES, rest.len())));
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
        if len == 0 && rest.iter().all(|&b| b == 0) {
            // Mapped space never written: the clean end of a buffered log.
            return (orders, at, None);
        }
        if len as usize != PAYLOAD_BYTES {
            // A torn length field looks like any number; report a short file as torn.
            let damage = if rest.len() < RECORD_BYTES {
                torn(RECORD_BYTES, rest.len())
            } else {
                TailDamage::BadLength(len)
            };
            return (orders, at, Some(damage));
        }
        if rest.len() < RECORD_BYTES {
            return (orders, at, Some(torn(RECORD_BYTES, rest.len())));
        }
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        let payload = &rest[FRAME_BYTES..RECORD_BYTES];
        if checksum(&rest[..4], payload) != crc {
            return (orders, at, Some(TailDamage::BadChecksum));
        }
        let expected = orders.len() as u64 + 1;
        match decode(payload) {
            Some((seq, _)) if seq != expected => {
                return (
                    orders,
                    at,
                    Some(TailDamage::OutOfSequence {
                        expected,
                        found: seq,
                    }),
                )
            }
            Some((_, order)) => orders.push(order),
            None => return (orders, at, Some(TailDamage::BadField)),
        }
        at += RECORD_BYTES;
    }
    (orders, at, None)
}

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

    #[test]
    fn probe_measures_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(fsync_probe(dir.path(), 3, 2).unwrap().len(), 6);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
