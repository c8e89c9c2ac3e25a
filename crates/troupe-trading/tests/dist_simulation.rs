//! The distributed mode in deterministic simulation (`troupe_trading::dist_sim`): every node
//! of every pair, the clients, the network and the key-value store in one simulation per seed,
//! with kills, pauses past the lease, partitions and a lossy, doubling network; the core
//! promises checked in every run (see the module note of `dist_sim`).
//!
//! `TROUPE_SIM_SEEDS=<n>` runs more seeds, `TROUPE_SIM_SEED=<replay line>` replays one run
//! (the line a failure prints). The long run: `TROUPE_SIM_SEEDS=100000 cargo test --release
//! -p troupe-trading --test dist_simulation -- --ignored` (the crate's README gives its time).

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
const CORPUS: &[&str] = &["1:pct3:-", "9:pct3:-", "86:random:-", "151:pct3:-"];

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

/// The known weakness, kept as a finding: after faults, the two nodes of a pair may not end with
/// one history. A standby can hold orders of an earlier primary that were never acknowledged
/// (it applied them, the primary died before it did); the new primary goes on without them, and
/// the standby, whose history then differs, is refused by `Join` for good (rightly: it is never
/// named again, so nothing acknowledged is at stake), but nothing cuts its log back to rejoin.
/// The simulator must find such a run; the fix (cutting a diverged log back to the primary's)
/// is left to a later change.
#[test]
fn the_simulator_finds_replicas_that_end_with_two_histories() {
    for strategy in [Strategy::Random, Strategy::Pct { depth: 3 }] {
        let found = Explore::new("dist_diverge")
            .seeds(200)
            .strategy(strategy)
            .find(|sim| {
                let outcome = run(sim, &Scenario::default());
                if let Err(e) = outcome.check() {
                    panic!("core: {e}");
                }
                outcome.check_converged().unwrap();
            });
        match found {
            Ok(summary) => panic!("{strategy}: no divergence in {} runs", summary.runs),
            Err(found) => {
                assert!(!found.message.contains("core:"), "{found}");
                eprintln!(
                    "dist_diverge ({strategy}): found after {} runs, seed {}, replay \
                     TROUPE_SIM_SEED={}: {}",
                    found.runs, found.seed, found.replay, found.message
                );
            }
        }
    }
}

#[test]
fn without_faults_the_replicas_hold_one_history() {
    // No drill either: its kill of a primary with orders in flight is a fault, and can leave
    // the two histories of the known weakness.
    let scenario = Scenario {
        faults: false,
        drill: false,
        fault_phase: std::time::Duration::from_secs(5),
        ..Scenario::default()
    };
    Explore::new("dist_calm")
        .seeds(10)
        .strategies(&[Strategy::Random, Strategy::Pct { depth: 3 }])
        .run(|sim| {
            let outcome = run(sim, &scenario);
            outcome.check().unwrap();
            outcome.check_converged().unwrap();
            assert!(outcome.acked > 0, "{outcome}");
        });
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
