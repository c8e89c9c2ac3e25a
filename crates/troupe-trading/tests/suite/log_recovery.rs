//! Damaged logs. A torn tail (torn writes, garbage, a flipped bit in the last record, a torn
//! header): recovery must report the damage, keep every complete record before it, cut the rest
//! off the file, and leave a log that accepts new records. Damage in the middle, with valid
//! records after it: opening must refuse with `LogError::MidFileDamage` and leave the file as it
//! was; salvage keeps what is contiguous. At the exchange level, a primary whose tail was cut
//! catches up from its standby, and a pair whose two logs are damaged at different records is
//! refused as it is, and salvaged on request with every acknowledged order.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use troupe_trading::{
    BlockingClient, ClientId, Exchange, ExchangeConfig, Journal, LogEnd, LogError, LogMode, Market,
    NewOrder, Order, Recovery, Role, Side, StartError, Style, TailDamage, RECORD_BYTES,
};

const BIN: &str = env!("CARGO_BIN_EXE_troupe-trading");

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

/// This test used to assert that damage in the middle cut the file there (losing the 17
/// valid records after it). Now: refused, nothing written; salvage alone keeps what is
/// contiguous (here, only what precedes the damage, since record 13 is lost) and keeps the
/// damaged file.
#[test]
fn damage_in_the_middle_is_refused_and_the_file_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 30);
    let mut bytes = std::fs::read(&path).unwrap();
    // Break the length field of record 12 (0-based): records 13..30 stay valid.
    let at = records_end(12) as usize;
    bytes[at] = 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let err = Journal::open(dir.path(), 0, Role::Primary, LogMode::Fsync).unwrap_err();
    match &err {
        LogError::MidFileDamage {
            path: p,
            offset,
            seq,
            damage,
            valid_after,
            first_valid_seq,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, records_end(12));
            assert_eq!(*seq, 13);
            assert!(matches!(damage, TailDamage::BadLength(_)), "{damage:?}");
            assert_eq!(*valid_after, 17);
            assert_eq!(*first_valid_seq, 14);
        }
        other => panic!("expected MidFileDamage, got {other:?}"),
    }
    let message = err.to_string();
    for words in [
        path.to_str().unwrap(),
        "byte 484",
        "sequence 13",
        "17 valid records",
    ] {
        assert!(message.contains(words), "{words:?} missing in: {message}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing written");

    // Salvage of this log alone: record 13 is gone, so nothing after it can be replayed.
    let r = Journal::open_with(
        dir.path(),
        0,
        Role::Primary,
        LogMode::Fsync,
        Recovery::Salvage,
    )
    .unwrap();
    assert_eq!(r.orders, orders(12));
    let salvaged = r.salvaged.clone().expect("salvage reported");
    assert_eq!((salvaged.kept_after, salvaged.dropped), (0, 17));
    let backup = salvaged.backup.expect("a backup");
    assert_eq!(std::fs::read(&backup).unwrap(), bytes, "damaged bytes kept");
    drop(r);
    assert_eq!(len(&path), records_end(12));
    still_appendable(dir.path(), 12);
}

/// Bytes put in between two records lose no record: salvage keeps every one of them.
#[test]
fn bytes_put_in_between_records_are_salvaged_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_log(dir.path(), 50);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = records_end(20) as usize;
    bytes.splice(at..at, [0xab; 11]);
    std::fs::write(&path, &bytes).unwrap();
    let scan = Journal::scan(dir.path(), 0, Role::Primary).unwrap();
    let LogEnd::MidFile(d) = scan.end else {
        panic!("{:?}", scan.end)
    };
    assert_eq!((d.offset, d.seq, d.valid_after), (records_end(20), 21, 30));
    assert_eq!(
        (d.first_valid_offset, d.first_valid_seq),
        (records_end(20) + 11, 21)
    );
    assert!(matches!(
        Journal::open(dir.path(), 0, Role::Primary, LogMode::Buffered),
        Err(LogError::MidFileDamage { .. })
    ));
    let r = Journal::open_with(
        dir.path(),
        0,
        Role::Primary,
        LogMode::Buffered,
        Recovery::Salvage,
    )
    .unwrap();
    assert_eq!(r.orders, orders(50), "every record kept");
    let salvaged = r.salvaged.clone().unwrap();
    assert_eq!((salvaged.kept_after, salvaged.dropped), (30, 0));
    drop(r);
    assert_eq!(len(&path), records_end(50));
    still_appendable(dir.path(), 50);
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
        .cloned()
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

/// Sets a file's modification time to a fixed moment in the past, so any write shows.
fn age(path: &Path) -> SystemTime {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_500_000_000);
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
    t
}

/// Every file in `dir` with its bytes and modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            (path.clone(), std::fs::read(&path).unwrap(), modified)
        })
        .collect();
    files.sort();
    files
}

fn flip_bit(path: &Path, seq: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    // A bit of the client order id of the record with sequence `seq`.
    bytes[records_end(seq - 1) as usize + 8 + 14] ^= 0x04;
    std::fs::write(path, &bytes).unwrap();
}

fn config_for(dir: &Path, recovery: Recovery) -> ExchangeConfig {
    ExchangeConfig {
        style: Style::RequestReply,
        log: LogMode::Fsync,
        log_dir: Some(dir.to_path_buf()),
        recovery,
        ..ExchangeConfig::seed()
    }
}

/// The user's report, reproduced: 400 acknowledged orders on pair 0; one bit flipped in record
/// 100 of the primary's log (300 valid records after it) and one in record 200 of the
/// standby's. It used to cut both logs to 199 records (201 acknowledged orders gone), even
/// under `inspect`. Now: opening refuses with the typed error and writes nothing; `inspect`
/// changes neither file; salvage rebuilds both logs with all 400 orders, each damaged record
/// taken from the other log, and keeps the damaged files.
#[test]
fn a_bit_flipped_in_each_log_of_a_pair_loses_no_acknowledged_order() {
    let dir = tempfile::tempdir().unwrap();
    let system = troupe::System::builder().workers(2).build().unwrap();
    let exchange = Exchange::start(&system, config_for(dir.path(), Recovery::Strict)).unwrap();
    let mut client = BlockingClient::connect(&exchange).unwrap();
    let a2 = exchange.market().lookup("A2").unwrap();
    let mut acked = BTreeSet::new();
    for i in 0..400 {
        let side = if i % 3 == 0 { Side::Buy } else { Side::Sell };
        let done = client
            .place(a2, side, 95 + i % 5, 10, Duration::from_secs(10))
            .unwrap();
        acked.insert((client.id(), done.client_order_id));
    }
    let before = exchange.pair_states().unwrap()[0];
    exchange.shutdown();
    system.shutdown();

    let primary = dir.path().join(Journal::file_name(0, Role::Primary));
    let standby = dir.path().join(Journal::file_name(0, Role::Standby));
    let (clean_p, clean_s) = (
        std::fs::read(&primary).unwrap(),
        std::fs::read(&standby).unwrap(),
    );
    assert_eq!(clean_p.len() as u64, records_end(400));
    flip_bit(&primary, 100);
    flip_bit(&standby, 200);
    for path in std::fs::read_dir(dir.path()).unwrap() {
        age(&path.unwrap().path());
    }
    let damaged = snapshot(dir.path());

    // Each log, opened on its own, refuses and is left alone.
    for (role, seq, valid_after) in [(Role::Primary, 100, 300), (Role::Standby, 200, 200)] {
        match Journal::open(dir.path(), 0, role, LogMode::Fsync) {
            Err(LogError::MidFileDamage {
                offset,
                seq: s,
                damage,
                valid_after: v,
                first_valid_seq,
                ..
            }) => {
                assert_eq!(offset, records_end(seq - 1));
                assert_eq!((s, v, first_valid_seq), (seq, valid_after, seq + 1));
                assert_eq!(damage, TailDamage::BadChecksum);
            }
            other => panic!("{role}: expected MidFileDamage, got {other:?}"),
        }
    }
    assert_eq!(snapshot(dir.path()), damaged, "a refusal writes nothing");

    // The exchange refuses too, before writing either log, and says what salvage would keep.
    let system = troupe::System::builder().workers(2).build().unwrap();
    let err = Exchange::start(&system, config_for(dir.path(), Recovery::Strict)).unwrap_err();
    match &err {
        StartError::Damaged {
            pair: 0,
            log: LogError::MidFileDamage { seq: 100, .. },
            salvage_keeps: 400,
            salvage_drops: 0,
        } => {}
        other => panic!("expected Damaged, got {other:?}"),
    }
    assert!(err.to_string().contains("salvage"), "{err}");
    system.shutdown();
    assert_eq!(
        snapshot(dir.path()),
        damaged,
        "a refused start writes nothing"
    );

    // `inspect` reports the damage of both logs, fails, and changes nothing; with --salvage it
    // shows the full recovery, still changing nothing.
    let out = Command::new(BIN)
        .args(["inspect", "--log", "fsync", "--workers", "2", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("inspect changed nothing"), "{stderr}");
    assert!(
        stdout.contains("MID-FILE DAMAGE at byte 3877, in the record due to hold sequence 100")
            && stdout.contains("300 valid records follow")
            && stdout.contains("sequence 200")
            && stdout.contains("200 valid records follow"),
        "{stdout}"
    );
    assert_eq!(snapshot(dir.path()), damaged, "inspect writes nothing");
    let out = Command::new(BIN)
        .args([
            "inspect",
            "--log",
            "fsync",
            "--workers",
            "2",
            "--salvage",
            "--json",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for e in v["engines"].as_array().unwrap() {
        if e["pair"] == 0 {
            assert_eq!(e["replayed"], 400, "{e}");
            assert_eq!(e["applied"], 400, "{e}");
            assert_eq!(e["salvage"]["dropped"], 0, "{e}");
        }
    }
    assert_eq!(
        snapshot(dir.path()),
        damaged,
        "inspect --salvage writes nothing"
    );

    // Salvage: all 400 orders back, each damaged record taken from the other log.
    let system = troupe::System::builder().workers(2).build().unwrap();
    let exchange = Exchange::start(&system, config_for(dir.path(), Recovery::Salvage)).unwrap();
    let report: Vec<_> = exchange
        .recovery()
        .iter()
        .filter(|r| r.pair == 0)
        .cloned()
        .collect();
    for (r, (records, kept)) in report.iter().zip([(99, 300), (199, 200)]) {
        assert_eq!(
            (r.records, r.copied_from_peer, r.replayed),
            (records, 1, 400)
        );
        let s = r.salvaged.as_ref().expect("salvaged");
        assert_eq!((s.kept_after, s.dropped), (kept, 0));
        let original = if r.role == Role::Primary {
            &damaged.iter().find(|f| f.0 == primary).unwrap().1
        } else {
            &damaged.iter().find(|f| f.0 == standby).unwrap().1
        };
        assert_eq!(
            &std::fs::read(s.backup.as_ref().unwrap()).unwrap(),
            original
        );
    }
    let after = exchange.pair_states().unwrap()[0];
    for (a, b) in [
        (after.primary, before.primary),
        (after.standby, before.standby),
    ] {
        assert_eq!(
            (a.applied, a.trades, a.resting, a.state_hash),
            (b.applied, b.trades, b.resting, b.state_hash),
            "{:?} back to its state before",
            a.role
        );
    }
    for role in [Role::Primary, Role::Standby] {
        let keys: BTreeSet<_> = exchange
            .accepted_keys(0, role)
            .unwrap()
            .iter()
            .map(|k| (k.client, k.client_order_id))
            .collect();
        assert!(keys.is_superset(&acked), "{role} lost acknowledged orders");
    }
    exchange.shutdown();
    system.shutdown();
    assert_eq!(
        std::fs::read(&primary).unwrap(),
        clean_p,
        "rebuilt as written"
    );
    assert_eq!(
        std::fs::read(&standby).unwrap(),
        clean_s,
        "rebuilt as written"
    );

    // Salvage of the primary's log alone (no peer to fill the gap): cut at the damage,
    // knowingly, and said so.
    let alone = tempfile::tempdir().unwrap();
    let copy = alone.path().join(Journal::file_name(0, Role::Primary));
    std::fs::copy(
        dir.path()
            .join(format!("{}.damaged", Journal::file_name(0, Role::Primary))),
        &copy,
    )
    .unwrap();
    let r = Journal::open_with(
        alone.path(),
        0,
        Role::Primary,
        LogMode::Fsync,
        Recovery::Salvage,
    )
    .unwrap();
    assert_eq!(r.orders.len(), 99);
    let s = r.salvaged.unwrap();
    assert_eq!((s.kept_after, s.dropped), (0, 300));
}

/// Both logs damaged at the same record: nothing can fill the gap. Refused; salvage keeps what
/// precedes it and reports the records dropped.
#[test]
fn a_gap_neither_log_covers_is_refused_and_salvage_reports_the_loss() {
    let dir = tempfile::tempdir().unwrap();
    for role in [Role::Primary, Role::Standby] {
        let mut r = Journal::open(dir.path(), 0, role, LogMode::Fsync).unwrap();
        for o in orders(60) {
            r.journal.append(&o);
        }
        r.journal.commit().unwrap();
        drop(r);
        flip_bit(&dir.path().join(Journal::file_name(0, role)), 40);
    }
    let system = troupe::System::builder().workers(1).build().unwrap();
    let err = Exchange::start(&system, config_for(dir.path(), Recovery::Strict)).unwrap_err();
    assert!(
        matches!(
            err,
            StartError::Damaged {
                pair: 0,
                salvage_keeps: 39,
                salvage_drops: 20,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("20 later sequence numbers would be dropped"));
    let exchange = Exchange::start(&system, config_for(dir.path(), Recovery::Salvage)).unwrap();
    for r in exchange.recovery().iter().filter(|r| r.pair == 0) {
        assert_eq!((r.records, r.replayed, r.copied_from_peer), (39, 39, 0));
        let s = r.salvaged.as_ref().unwrap();
        assert_eq!((s.kept_after, s.dropped), (0, 20));
    }
    exchange.shutdown();
    system.shutdown();
}
