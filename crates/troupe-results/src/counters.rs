//! Words for a repetition's counters (`Record::counters`): what the runtime did in it, so a
//! slow repetition explains itself wherever results are shown (`troupe-bench compare`'s
//! tables, the HTML report's note on a wide spread).

use serde_json::{Map, Value};

use crate::probe::{CORE_TO_CORE, HOST_SPEED};
use crate::usage::CPUS;

/// Counts shown when above zero: (key, one of them).
const COUNTS: [(&str, &str); 8] = [
    ("parks", "park"),
    ("steals", "steal"),
    ("lent_turns", "lent turn"),
    ("helped_turns", "helped turn"),
    ("catch_up_waits", "catch-up wait"),
    ("aside_waits", "aside wait"),
    ("page_faults", "page fault"),
    ("preemptions", "preemption"),
];

/// Rates per order shown when above zero (the trading benchmark's): (key, what, decimals).
const PER_ORDER: [(&str, &str, usize); 4] = [
    ("turns_per_order", "turns", 2),
    ("cpu_us_per_order", "µs of CPU", 3),
    ("steals_per_order", "steals", 4),
    ("parks_per_order", "parks", 4),
];

/// The counters a repetition carries, in words: e.g. `width 2 after 1 change, 2.9 messages
/// per turn, 13 parks, 185 ns apart`. Keys it does not know are left out; empty if it knows
/// none.
pub fn describe_counters(counters: &Map<String, Value>) -> String {
    let number = |key: &str| counters.get(key).and_then(Value::as_f64);
    let mut parts = Vec::new();
    if let Some(width) = number("width") {
        let changes = number("width_changes").unwrap_or(0.0);
        parts.push(format!(
            "width {width:.0} after {changes:.0} change{}",
            if changes == 1.0 { "" } else { "s" }
        ));
    }
    if let Some(per_turn) = number("messages_per_turn") {
        parts.push(format!("{per_turn:.1} messages per turn"));
    }
    if let Some(cpus) = number(CPUS) {
        parts.push(format!("{cpus:.1} CPUs busy"));
    }
    for (key, what, decimals) in PER_ORDER {
        if let Some(x) = number(key).filter(|&x| x > 0.0) {
            parts.push(format!("{x:.decimals$} {what} per order"));
        }
    }
    for (key, one) in COUNTS {
        if let Some(n) = number(key).filter(|&n| n > 0.0) {
            parts.push(if n == 1.0 {
                format!("1 {one}")
            } else {
                format!("{n:.0} {one}s")
            });
        }
    }
    if let Some(ns) = number(CORE_TO_CORE) {
        parts.push(format!("{ns:.0} ns apart"));
    }
    if let Some(m) = number(HOST_SPEED) {
        parts.push(format!("host at {m:.0} M steps/s"));
    }
    parts.join(", ")
}

/// True if the counters say what a runtime did (not only what the probes said of the host).
pub fn counts_work(counters: &Map<String, Value>) -> bool {
    counters
        .keys()
        .any(|k| k != CORE_TO_CORE && k != HOST_SPEED)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn known_counters_in_words() {
        let pool = map(json!({"turns": 1000, "width": 2, "width_changes": 1,
            "messages_per_turn": 2.94, "cpus": 1.04, "parks": 13, "steals": 1, "lent_turns": 0,
            "aside_waits": 37, "page_faults": 3484, "preemptions": 1, "core_to_core_ns": 185.2}));
        assert_eq!(
            describe_counters(&pool),
            "width 2 after 1 change, 2.9 messages per turn, 1.0 CPUs busy, 13 parks, 1 steal, \
             37 aside waits, 3484 page faults, 1 preemption, 185 ns apart"
        );
        assert!(counts_work(&pool));
        let trading = map(
            json!({"width": 1.0, "width_changes": 2.0, "turns_per_order": 2.44,
            "cpu_us_per_order": 0.251, "steals_per_order": 0.0, "parks_per_order": 0.0012}),
        );
        assert_eq!(
            describe_counters(&trading),
            "width 1 after 2 changes, 2.44 turns per order, 0.251 µs of CPU per order, \
             0.0012 parks per order"
        );
        let probe_only = map(json!({"core_to_core_ns": 22.5}));
        assert_eq!(describe_counters(&probe_only), "22 ns apart");
        assert!(!counts_work(&probe_only));
        let probes_only = map(json!({"core_to_core_ns": 80.4, "host_chase_m": 412.6}));
        assert_eq!(
            describe_counters(&probes_only),
            "80 ns apart, host at 413 M steps/s"
        );
        assert!(!counts_work(&probes_only));
        assert_eq!(describe_counters(&map(json!({"unknown": 1}))), "");
    }
}
