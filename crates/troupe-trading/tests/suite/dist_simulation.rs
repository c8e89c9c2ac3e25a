//! The distributed mode in deterministic simulation (`troupe_trading::dist_sim`): every node
//! of every pair, the clients, the network and the key-value store in one simulation per seed,
//! with kills, pauses past the lease, partitions and a lossy, doubling network; the core
//! promises checked in every run (see the module note of `dist_sim`).
//!
//! `TROUPE_SIM_SEEDS=<n>` runs more seeds, `TROUPE_SIM_SEED=<replay line>` replays one run
//! (the line a failure prints), `TROUPE_SIM_NOTES=1` prints what its nodes note and what the
//! simulated cluster does, with simulated time. The long run: `TROUPE_SIM_SEEDS=100000 cargo test --release
//! -p troupe-trading --test suite -- --ignored dist_simulation::long_run` (the crate's README gives its time).

use troupe::sim::{Explore, Simulation, Strategy};
use troupe_trading::dist_sim::{run, run_seed, Scenario};

/// Past failures, replayed first.
/// - `1:pct3:-`: an acknowledged order was not at its sequence number in the log of a node
///   the sync record named. A standby applied a late order of an earlier primary while its
///   join to the new primary was on the way; the catch-up skipped the numbers it already held
///   without comparing them, `Replicate` confirmed any number it held, and `Join` compared
///   only the last key: the standby was named with a history that differed from the
///   primary's. Fixed by a digest of the whole history, checked by `Join`, `Replicate` and
///   the catch-up (`dist::digest`).
/// - `9:pct3:-`: a node with 17 orders took the lease of a pair whose primary had
///   acknowledged 61: its read of the sync record had failed (a lost answer; on a NATS
///   cluster, a bucket electing its leader answers errors for seconds), and a failed read was
///   taken for "no record yet", which makes any node eligible. Fixed: only a record the store
///   says is absent does.
/// - `86:random:-`: a standby read the sync record (which named it), then created the lease;
///   in between, the primary had dropped it from the record and acknowledged orders alone
///   until its lease ran out. Fixed: the record is read after the create, when no other node
///   can acknowledge any more (and the same for a primary taking its expired lease again).
/// - `151:pct3:-`: the primary dropped a standby whose naming in the sync record was still
///   being written, and acknowledged alone at once; the write then named the standby, which
///   took over without those orders. Fixed: such a standby is dropped by a second write
///   without it, after the first.
/// - `4:random:-` (the fifth seed random tried) and `1:pct3:-` (the second PCT tried): the two
///   nodes of a pair ended with two histories (5,542 and 5,564 orders, equal for the first
///   5,541; 3,980 and 3,897, equal for 3,896). A standby applies each order before its
///   primary; a primary killed with orders in flight came back, or another node took over,
///   without the orders the standby held beyond it, and the standby was refused by `Join` for
///   good. Fixed: a join finds where the histories part and the node cuts its own back there
///   (`OrderLog::cut_back`), then catches up; never an order acknowledged at its place (the
///   simulated cluster checks every cut).
/// - Found by the first 100,000-seed run (seeds 0-29,999 of it; the run then stopped, the
///   defects were fixed, and it ran again):
///   - `20112:random:-` (and `7334:random:-`): a standby was named in the sync record on a
///     confirmation of 75 orders while its primary had acknowledged 81 alone (the late answer
///     to a `Replicate` sent on the same node's earlier link); it took over without the 6.
///     Fixed: a standby is named only on a confirmation at or above the primary's count, and
///     answers of an earlier link are not the current link's.
///   - `11301:pct3:-`: a node's lease ran out while its takeover write of the sync record was
///     on its way; the primary took the lease again, and the late write named the other node
///     over it. (Here the late node could not acknowledge, its lease gone; but the record named
///     it, and a later takeover by it would have lost the primary's orders.) Fixed: a takeover
///     writes only over the record it read after creating the lease, a primary only over one
///     naming it, and a primary taking its lease again writes the record at its new epoch.
/// - Found by the second 100,000-seed run (seed 22,159 of it):
///   - `22159:pct3:-`: a primary whose lease ran out while the store was out of reach took it
///     again and rewrote the sync record at its new epoch with the value of its read; that
///     write met a conflict (the engine had just dropped its standby from the record, and went
///     on alone), and its retry wrote the old value over the drop. The dropped standby, named
///     again, took over without the 7 orders acknowledged alone since. Fixed: the retaking
///     write changes only the epoch of the record it reads before each try.
const CORPUS: &[&str] = &[
    "22159:pct3:-",
    "1:pct3:-",
    "9:pct3:-",
    "86:random:-",
    "151:pct3:-",
    "4:random:-",
    "20112:random:-",
    "7334:random:-",
    "11301:pct3:-",
];

fn core(name: &str, seeds: u64) -> Explore {
    Explore::new(name)
        .seeds(seeds)
        .strategies(&[Strategy::Random, Strategy::Pct { depth: 3 }])
        .corpus(CORPUS)
}

#[test]
fn no_acknowledged_order_is_lost_and_no_two_primaries_under_faults() {
    let summary = core("dist_core", 30).run(|sim| {
        let outcome = run(sim, &Scenario::default());
        if let Err(e) = outcome.check() {
            panic!("{e}\n{outcome}");
        }
    });
    eprintln!(
        "dist_core: {} runs, {} steps, {:?}",
        summary.runs, summary.steps, summary.elapsed
    );
}

#[test]
fn without_faults_the_replicas_hold_one_history() {
    let scenario = Scenario {
        faults: false,
        fault_phase: std::time::Duration::from_secs(5),
        ..Scenario::default()
    };
    Explore::new("dist_calm")
        .seeds(10)
        .strategies(&[Strategy::Random, Strategy::Pct { depth: 3 }])
        .run(|sim| {
            let outcome = run(sim, &scenario);
            outcome.check().unwrap();
            assert!(outcome.acked > 0, "{outcome}");
        });
}

/// Seed 4 (random) ended with two histories before a diverged standby cut its history back.
/// Which seeds lead a standby to cut back changes with the code (any change to the order of
/// the nodes' steps moves them), so this takes the first that does: its standby cuts, rejoins,
/// and every check holds.
#[test]
fn a_standby_whose_history_left_the_primary_s_cuts_it_back_and_rejoins() {
    let outcome = (0..300)
        .map(run_seed)
        .find(|outcome| outcome.counters.cut_backs > 0)
        .expect("a standby cuts back in one of the first 300 seeds");
    if let Err(e) = outcome.check() {
        panic!("{e}\n{outcome}");
    }
}

#[test]
fn a_seed_replays_exactly() {
    let (a, b) = (run_seed(11), run_seed(11));
    assert_eq!(
        (a.steps, a.acked, a.placed, a.simulated, a.counters.clone()),
        (b.steps, b.acked, b.placed, b.simulated, b.counters.clone())
    );
    assert!(a.acked > 0 && a.kills + a.pauses + a.cuts > 0, "{a}");
    let c = run_seed(12);
    assert_ne!(a.steps, c.steps, "another seed, another run");
}

#[test]
fn the_scenario_runs_in_a_given_simulation() {
    let sim = Simulation::builder()
        .seed(3)
        .strategy(Strategy::Pct { depth: 3 })
        .build()
        .unwrap();
    let outcome = run(&sim, &Scenario::default());
    assert_eq!(outcome.seed, 3);
    assert!(outcome.simulated >= std::time::Duration::from_secs(20));
}

/// The opt-in long run: the same checks over many seeds (100,000 unless `TROUPE_SIM_SEEDS`
/// says otherwise), in parallel over the cores.
#[test]
#[ignore = "long: minutes; run with --ignored"]
fn long_run_of_the_core_promises() {
    let summary = core("dist_core_long", 100_000).run(|sim| {
        let outcome = run(sim, &Scenario::default());
        if let Err(e) = outcome.check() {
            panic!("{e}\n{outcome}");
        }
    });
    eprintln!(
        "dist_core_long: {} runs, {} steps, {:?} ({:.0} seeds per minute)",
        summary.runs,
        summary.steps,
        summary.elapsed,
        summary.runs as f64 * 60.0 / summary.elapsed.as_secs_f64()
    );
}

/// A primary paused past its lease keeps its receiver in the queue group (as NATS keeps a
/// stopped subscriber), so a try in two goes unanswered while it is paused. With a fixed wait
/// of half a second per try, the slowest of three clients got 3-9 orders acknowledged in the
/// 4 s after the takeover on these eight seeds (under 2.3 a second; the real-process pause
/// test took 44-58 s for 200 orders); with tries that wait as long as the client's round-trip
/// estimate says, 19-65. The finder of that slowness: each client at least 3 a second.
#[test]
fn a_paused_primary_s_receiver_costs_the_clients_little() {
    for seed in 1..=8 {
        let sim = Simulation::builder()
            .seed(seed)
            .strategy(Strategy::Random)
            .build()
            .unwrap();
        let got =
            troupe_trading::dist_sim::paused_primary(&sim, 3, std::time::Duration::from_secs(6))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        eprintln!(
            "seed {seed}: {:?} acknowledged in {:?}, {} resends",
            got.acked, got.window, got.resends
        );
        assert!(
            got.slowest_rate() >= 3.0,
            "seed {seed}: a client got {:.1} orders a second acknowledged while the primary was paused: {got:?}",
            got.slowest_rate()
        );
    }
}
