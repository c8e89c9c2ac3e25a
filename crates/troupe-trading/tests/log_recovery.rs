//! Damaged log tails: torn writes, garbage, flipped bits. Recovery must report the damage,
//! keep every complete record before it, cut the rest off the file, and leave a log that
//! accepts new records. At the exchange level, a primary whose tail was cut catches up from
//! its standby, and both come back equal.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use troupe_trading::{
    BlockingClient, ClientId, Exchange, ExchangeConfig, Journal, LogMode, Market, NewOrder, Order,
    Role, Side, Style, TailDamage, RECORD_BYTES,
};

const HEADER: u64 = 16;

fn orders(n: u64) -> Vec<Order> {
    let market = Market::seed();
    (0..n)
        .map(|i| {
            let side = if i % 2 == 0 { Side::Sell } else { Side::Buy };
            let o = NewOrder::limit(
                ClientId(1),
                i + 1,
                market.lookup("A1").unwrap(),
                side,
                90 + (i % 7) as i32,
                100,
            );
            market.validate(&o).unwrap()
        })
        .collect()
}

/// Writes a log of `n` records for pair 0's primary; returns its path.
fn write_log(dir: &Path, n: u64) -> PathBuf {
    let mut r = Journal::open(dir, 0, Role::Primary, LogMode::Fsync).unwrap();
    for o in orders(n) {
        r.journal.append(&o);
    }
    r.journal.commit().unwrap();
    r.journal.path().to_path_buf()
}

fn reopen(dir: &Path) -> troupe_trading::Recovered {
    Journal::open(dir, 0, Role::Primary, LogMode::Fsync).unwrap()
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

fn records_end(n: u64) -> u64 {
    HEADER + n * RECORD_BYTES as u64
}

/// After a cut, the log takes new records and reads back clean.
fn still_appendable(dir: &Path, expect: u64) {
    let mut r = reopen(dir);
    assert!(r.cut.is_none(), "the cut is permanent: {:?}", r.cut);
    assert_eq!(r.orders.len() as u64, expect);
    let extra = orders(expect + 1).pop().unwrap();
    r.journal.append(&extra);
    r.journal.commit().unwrap();
    drop(r);
    let r = reopen(dir);
    assert!(r.cut.is_none());
    assert_eq!(r.orders.len() as u64, expect + 1);
    assert_eq!(r.orders.last(), Some(&extra));
}

#[test]
fn garbage_after_the_last_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 20);
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3]).unwrap();
    drop(f);
    let r = reopen(dir.path());
    let cut = r.cut.expect("damage reported");
    assert_eq!(r.orders, orders(20), "every complete record kept");
    assert_eq!(cut.offset, records_end(20));
    assert_eq!(cut.dropped_bytes, 7);
    assert!(matches!(cut.damage, TailDamage::Torn { .. }));
    drop(r);
    assert_eq!(len(&path), records_end(20), "the tail is cut off the file");
    still_appendable(dir.path(), 20);
}

#[test]
fn a_torn_last_record_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 10);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(records_end(10) - 5).unwrap();
    drop(f);
    let r = reopen(dir.path());
    assert_eq!(r.orders, orders(9));
    let cut = r.cut.expect("damage reported");
    assert_eq!(cut.offset, records_end(9));
    assert_eq!(cut.dropped_bytes, RECORD_BYTES as u64 - 5);
    assert_eq!(
        cut.damage,
        TailDamage::Torn {
            needed: RECORD_BYTES,
            available: RECORD_BYTES - 5
        }
    );
    drop(r);
    still_appendable(dir.path(), 9);
}

#[test]
fn a_flipped_bit_in_the_last_record_fails_its_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 10);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let r = reopen(dir.path());
    assert_eq!(r.orders, orders(9));
    assert_eq!(r.cut.unwrap().damage, TailDamage::BadChecksum);
    drop(r);
    still_appendable(dir.path(), 9);
}

#[test]
fn damage_in_the_middle_keeps_everything_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 30);
    let mut bytes = std::fs::read(&path).unwrap();
    // Break the length field of record 12 (0-based): records 0..12 stay.
    let at = records_end(12) as usize;
    bytes[at] = 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let r = reopen(dir.path());
    assert_eq!(r.orders, orders(12));
    let cut = r.cut.unwrap();
    assert_eq!(cut.offset, records_end(12));
    assert_eq!(cut.dropped_bytes, 18 * RECORD_BYTES as u64);
    assert!(matches!(cut.damage, TailDamage::BadLength(_)));
}

#[test]
fn a_torn_header_starts_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 3);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(7).unwrap();
    drop(f);
    let r = reopen(dir.path());
    assert!(r.orders.is_empty());
    assert_eq!(r.cut.unwrap().damage, TailDamage::TornHeader);
    drop(r);
    assert_eq!(len(&path), HEADER);
    still_appendable(dir.path(), 0);
}

#[test]
fn exchange_repairs_a_cut_primary_from_its_standby() {
    let dir = tempfile::tempdir().unwrap();
    let config = ExchangeConfig {
        style: Style::RequestReply,
        log: LogMode::Fsync,
        log_dir: Some(dir.path().to_path_buf()),
        ..ExchangeConfig::seed()
    };
    let system = troupe::System::builder().workers(2).build().unwrap();
    let exchange = Exchange::start(&system, config.clone()).unwrap();
    let mut client = BlockingClient::connect(&exchange).unwrap();
    let a2 = exchange.market().lookup("A2").unwrap();
    for i in 0..25 {
        let side = if i % 3 == 0 { Side::Buy } else { Side::Sell };
        client
            .place(a2, side, 95 + i % 5, 10, Duration::from_secs(10))
            .unwrap();
    }
    let before = exchange.pair_states().unwrap()[0];
    exchange.shutdown();
    system.shutdown();

    // Tear the primary's last record.
    let path = dir.path().join(Journal::file_name(0, Role::Primary));
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(records_end(25) - 1).unwrap();
    drop(f);

    let system = troupe::System::builder().workers(2).build().unwrap();
    let exchange = Exchange::start(&system, config).unwrap();
    let report: Vec<_> = exchange
        .recovery()
        .iter()
        .filter(|r| r.pair == 0)
        .copied()
        .collect();
    assert_eq!(report[0].role, Role::Primary);
    assert_eq!(report[0].records, 24);
    assert!(report[0].cut.is_some());
    assert_eq!(report[0].copied_from_peer, 1);
    assert_eq!(report[1].records, 25);
    let after = exchange.pair_states().unwrap()[0];
    assert_eq!(after.primary.state_hash, before.primary.state_hash);
    assert_eq!(after.standby.state_hash, before.standby.state_hash);
    exchange.shutdown();
    system.shutdown();
}

#[test]
fn logs_of_different_histories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), 5);
    let mut s = Journal::open(dir.path(), 0, Role::Standby, LogMode::Fsync).unwrap();
    for o in orders(6).iter().rev() {
        s.journal.append(o);
    }
    s.journal.commit().unwrap();
    drop(s);
    let config = ExchangeConfig {
        log: LogMode::Fsync,
        log_dir: Some(dir.path().to_path_buf()),
        ..ExchangeConfig::seed()
    };
    let system = troupe::System::builder().workers(1).build().unwrap();
    let err = Exchange::start(&system, config).unwrap_err();
    assert!(
        matches!(
            err,
            troupe_trading::StartError::Diverged { pair: 0, seq: 1 }
        ),
        "{err}"
    );
    system.shutdown();
}

#[test]
fn a_buffered_log_left_by_a_crash_ends_in_zeros_and_reads_clean() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered).unwrap();
    for o in orders(40) {
        r.journal.append(&o);
    }
    let path = r.journal.path().to_path_buf();
    // A crash: the mapping is never trimmed, the file keeps its zeroed spare space.
    std::mem::forget(r);
    assert!(len(&path) > records_end(40));
    let r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered).unwrap();
    assert!(r.cut.is_none(), "unused space is not damage");
    assert_eq!(r.orders, orders(40));
    drop(r);
    assert_eq!(
        len(&path),
        records_end(40),
        "a clean close trims the spare space"
    );
}

#[test]
fn a_torn_record_in_a_buffered_log_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered).unwrap();
    for o in orders(10) {
        r.journal.append(&o);
    }
    let path = r.journal.path().to_path_buf();
    std::mem::forget(r);
    // Half of an eleventh record made it into the mapping before the crash.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = records_end(10) as usize;
    bytes[at..at + 4].copy_from_slice(&31u32.to_le_bytes());
    bytes[at + 4..at + 20].fill(0x77);
    std::fs::write(&path, &bytes).unwrap();
    let r = Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered).unwrap();
    assert_eq!(r.orders, orders(10));
    let cut = r.cut.expect("the torn record is reported");
    assert_eq!(cut.offset, records_end(10));
    assert_eq!(cut.damage, TailDamage::BadChecksum);
}
