//! Seed 001, the online store (the `troupe-store` crate): the store on troupe and the
//! thread-per-request baseline under the seed's load, healthy and with search hanging.
//! Records in the suite's schema (`--json`), else the store's own table.

use std::time::Duration;

use anyhow::Result;
use troupe_store::backends::SearchMode;
use troupe_store::bench::{self, BenchConfig};
use troupe_store::load::Phase;

use crate::report::Runner;

/// The sizes the suite runs: the seed's 300 users per kind and its 30 s hang, in one
/// repetition with a shorter healthy phase (10 s, 40 s hanging, 40 s recovered), and the
/// capacity search at 1 s per rate. `runs` repetitions; `--quick` takes the test sizes.
pub fn config(quick: bool, runs: usize, open: bool) -> BenchConfig {
    let mut config = if quick {
        BenchConfig::quick()
    } else {
        let mut config = BenchConfig::seed();
        config.closed.phases = vec![
            phase("healthy", 10, SearchMode::Healthy),
            phase("search_hangs", 40, SearchMode::Hang),
            phase("recovered", 40, SearchMode::Healthy),
        ];
        config.open_step = Duration::from_secs(1);
        config
    };
    config.runs = runs;
    config.open = open && !quick;
    config
}

fn phase(name: &str, seconds: u64, search: SearchMode) -> Phase {
    Phase {
        name: name.to_owned(),
        duration: Duration::from_secs(seconds),
        search,
    }
}

/// Runs the store scenario and prints its results.
pub fn run(runner: &Runner, config: &BenchConfig) -> Result<()> {
    let report = bench::run(config, &mut |line| eprintln!("store: {line}"))?;
    for record in troupe_store::report::records(&report) {
        // Records are kept for the suite's report; printed with --json.
        if runner.json {
            runner.emit(&record)?;
        } else {
            runner.keep(record);
        }
    }
    if !runner.json {
        println!("{}", troupe_store::report::table(&report));
        print!("{}", troupe_store::report::counters(&report));
    }
    Ok(())
}
