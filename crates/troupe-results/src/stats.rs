//! Summary statistics and number formatting shared by every program and the report.

use serde_json::{Map, Value};

/// Median (mean of the middle two for an even count), min and max. NaN for no samples.
pub fn summarize(samples: &[f64]) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    (median, sorted[0], sorted[n - 1])
}

/// A number with three significant digits and an SI suffix (1.23M, 45.6k, 0.123); never an
/// exponent.
pub fn human(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let (scaled, suffix) = if x.abs() >= 1e9 {
        (x / 1e9, "G")
    } else if x.abs() >= 1e6 {
        (x / 1e6, "M")
    } else if x.abs() >= 1e4 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if scaled.abs() >= 100.0 || scaled == 0.0 {
        0
    } else if scaled.abs() >= 10.0 {
        1
    } else if scaled.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{scaled:.digits$}{suffix}")
}

/// Parameters as `key=value` pairs, in the record's order.
pub fn params_text(params: &Map<String, Value>) -> String {
    params
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The time the remaining `total - done` steps will take at the average of the `done` steps
/// that took `elapsed`; None before the first step is done and once all are.
pub fn time_left(
    elapsed: std::time::Duration,
    done: u64,
    total: u64,
) -> Option<std::time::Duration> {
    (done > 0 && done < total).then(|| elapsed.mul_f64((total - done) as f64 / done as f64))
}

/// Now, in UTC, as RFC 3339 (`2026-11-23T14:05:09Z`).
pub fn utc_now() -> String {
    let now = time::OffsetDateTime::now_utc().replace_nanosecond(0);
    match now {
        Ok(t) => t
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| t.unix_timestamp().to_string()),
        Err(_) => time::OffsetDateTime::now_utc().unix_timestamp().to_string(),
    }
}

/// Now, in UTC, for file and folder names (`20261123-140509`).
pub fn utc_stamp() -> String {
    let t = time::OffsetDateTime::now_utc();
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert!(summarize(&[]).0.is_nan());
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human(31_234_567.0), "31.2M");
        assert_eq!(human(0.1234), "0.123");
        assert_eq!(human(45_600.0), "45.6k");
        assert_eq!(human(123.4), "123");
        assert_eq!(human(0.0), "0");
        assert_eq!(human(2.5e12), "2500G");
    }

    #[test]
    fn time_left_comes_from_the_average_step() {
        use std::time::Duration;
        assert_eq!(time_left(Duration::from_secs(10), 0, 4), None);
        assert_eq!(
            time_left(Duration::from_secs(10), 1, 4),
            Some(Duration::from_secs(30))
        );
        assert_eq!(time_left(Duration::from_secs(10), 4, 4), None);
    }

    #[test]
    fn stamps_look_like_dates() {
        let s = utc_stamp();
        assert_eq!(s.len(), 15, "{s}");
        assert!(s.starts_with("20"));
        assert!(utc_now().ends_with('Z'));
    }
}
