//! A time estimate before a scenario whose sizes, though within the bounds, ask for a long run
//! (a chain of 100,000 stages is 10^10 hops; a ring of a million actors a million times round is
//! 10^12): one line on stderr saying about how long it will take and how to stop it, so that
//! nobody waits an hour on a silent terminal. On a terminal the repetitions' progress bar
//! shows what is done; the line is printed either way, since a run in a pipe is watched too.
//!
//! The rates are the slow end of this repository's own figures on a 2-core machine
//! (`BENCHMARKS.md`), so the estimate is the order of magnitude, not a promise.

use std::time::Duration;

use crate::report::{human, Runner};

/// Runs estimated to take at least this long are announced.
const ANNOUNCE_FROM: Duration = Duration::from_secs(60);

/// Work a scenario is about to do: `units` of `unit` per repetition, at about `per_second`.
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub units: f64,
    pub unit: &'static str,
    pub per_second: f64,
}

impl Work {
    /// The whole run's time: every warm-up and measured repetition.
    pub fn time(&self, runner: &Runner) -> Duration {
        let repetitions = (runner.warmup + runner.repeat) as f64;
        Duration::from_secs_f64((self.units * repetitions / self.per_second).min(1e12))
    }

    /// The estimate line, if the run is long enough to deserve one.
    pub fn line(&self, runner: &Runner, label: &str) -> Option<String> {
        let time = self.time(runner);
        (time >= ANNOUNCE_FROM).then(|| {
            format!(
                "{label}: about {} ({} {} x {} repetitions at about {} per second); Ctrl-C stops it",
                long_duration(time),
                human(self.units),
                self.unit,
                runner.warmup + runner.repeat,
                human(self.per_second),
            )
        })
    }

    /// Prints the estimate line on stderr when the run will be long.
    pub fn announce(&self, runner: &Runner, label: &str) {
        if let Some(line) = self.line(runner, label) {
            eprintln!("{line}");
        }
    }
}

/// `1 min 30 s`, `2 h 5 min`, `3 days`, `40 years`.
fn long_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=3_599 => format!("{} min {} s", s / 60, s % 60),
        3_600..=172_799 => format!("{} h {} min", s / 3_600, s % 3_600 / 60),
        172_800..=63_071_999 => format!("{} days", s / 86_400),
        _ => format!("{} years", s / 31_536_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runner(warmup: usize, repeat: usize) -> Runner {
        Runner {
            warmup,
            repeat,
            json: false,
            kept: Default::default(),
        }
    }

    #[test]
    fn a_short_run_says_nothing() {
        let ring = Work {
            units: 100.0 * 1e6,
            unit: "hops",
            per_second: 40e6,
        };
        assert_eq!(ring.line(&runner(1, 5), "ring 100x1000000"), None);
    }

    #[test]
    fn a_long_run_says_about_how_long_and_how_to_stop() {
        let chain = Work {
            units: 1e10,
            unit: "hops",
            per_second: 60e6,
        };
        let line = chain.line(&runner(1, 5), "chain 100000 actors").unwrap();
        assert!(
            line.starts_with("chain 100000 actors: about 16 min 40 s ("),
            "{line}"
        );
        assert!(line.contains("x 6 repetitions"), "{line}");
        assert!(line.ends_with("Ctrl-C stops it"), "{line}");
    }

    #[test]
    fn durations_read_in_the_largest_sensible_unit() {
        assert_eq!(long_duration(Duration::from_secs(90)), "1 min 30 s");
        assert_eq!(long_duration(Duration::from_secs(7_500)), "2 h 5 min");
        assert_eq!(long_duration(Duration::from_secs(3 * 86_400)), "3 days");
        assert_eq!(
            long_duration(Duration::from_secs(40 * 31_536_000)),
            "40 years"
        );
    }
}
