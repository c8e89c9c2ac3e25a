//! What the report shows, as plain data: records tagged with the series they came from, and
//! charts described independently of how they are drawn ([`super::chart`] draws them).

use serde_json::{Map, Value};

use super::palette::Rgb;
use crate::schema::Record;

/// A record and the index of the series (input file) it came from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Item<'a> {
    pub series: usize,
    pub record: &'a Record,
}

impl<'a> Item<'a> {
    /// The parameter `key` as text (`""` when the record has none).
    pub fn text(&self, key: &str) -> String {
        self.record
            .params
            .get(key)
            .map(value_text)
            .unwrap_or_default()
    }

    /// The parameter `key` as a finite number, if it is one.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.record
            .params
            .get(key)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite())
    }

    /// Whether this is the same record (not merely an equal one) as `other`.
    pub fn same(&self, other: &Item<'_>) -> bool {
        self.series == other.series && std::ptr::eq(self.record, other.record)
    }
}

/// A parameter's value as text: strings without their quotes, anything else as JSON.
pub(super) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The parameters as a key independent of their order, for matching records.
pub(super) fn params_key(params: &Map<String, Value>) -> String {
    let mut pairs: Vec<(&String, String)> =
        params.iter().map(|(k, v)| (k, v.to_string())).collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("\u{1f}")
}

/// `key=value` pairs of the record's parameters named in `keys`, in that order.
pub(super) fn params_subset(item: &Item<'_>, keys: &[String]) -> String {
    keys.iter()
        .filter_map(|k| {
            item.record
                .params
                .get(k)
                .map(|v| format!("{k}={}", value_text(v)))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every parameter name among `items`, in order of first appearance.
pub(super) fn param_names(items: &[Item<'_>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for item in items {
        for key in item.record.params.keys() {
            if !names.contains(key) {
                names.push(key.clone());
            }
        }
    }
    names
}

/// The parameters (other than `except`) whose value is not the same in every item.
pub(super) fn varying_params(items: &[Item<'_>], except: &[&str]) -> Vec<String> {
    param_names(items)
        .into_iter()
        .filter(|k| !except.contains(&k.as_str()))
        .filter(|k| {
            let first = items[0].record.params.get(k);
            items.iter().any(|i| i.record.params.get(k) != first)
        })
        .collect()
}

/// `key=value` of the parameters (other than `except`) that every item has, with one value.
pub(super) fn constant_params(items: &[Item<'_>], except: &[&str]) -> String {
    let Some(first) = items.first() else {
        return String::new();
    };
    let varying = varying_params(items, except);
    let keys: Vec<String> = param_names(items)
        .into_iter()
        .filter(|k| !except.contains(&k.as_str()) && !varying.contains(k))
        .collect();
    params_subset(first, &keys)
}

/// Groups `items` by `key`, the groups and their members in order of first appearance.
pub(super) fn group_by<'a, K: PartialEq>(
    items: &[Item<'a>],
    key: impl Fn(&Item<'a>) -> K,
) -> Vec<(K, Vec<Item<'a>>)> {
    let mut groups: Vec<(K, Vec<Item<'a>>)> = Vec::new();
    for item in items {
        let k = key(item);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, members)) => members.push(*item),
            None => groups.push((k, vec![*item])),
        }
    }
    groups
}

/// Whether a larger value is the better one: rates (units ending in `/s`) are.
pub(super) fn higher_is_better(unit: &str) -> bool {
    unit.ends_with("/s")
}

/// "higher is better" or "lower is better", for `unit`.
pub(super) fn better(unit: &str) -> &'static str {
    if higher_is_better(unit) {
        "higher is better"
    } else {
        "lower is better"
    }
}

/// The percentile a metric names: `latency_p99` is 99, `p999` and `latency_p99.9` are 99.9.
pub(super) fn percentile(metric: &str) -> Option<f64> {
    let name = metric.strip_prefix("latency_").unwrap_or(metric);
    let digits = name.strip_prefix('p')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    if !digits.contains('.') && digits.len() > 2 && digits.starts_with("99") {
        // `p999` is the 99.9th percentile, `p9999` the 99.99th.
        return format!("99.{}", &digits[2..]).parse().ok();
    }
    digits
        .parse()
        .ok()
        .filter(|p: &f64| (0.0..=100.0).contains(p))
}

/// A metric's short name in a legend: `latency_p99` is `p99`.
pub(super) fn short_metric(metric: &str) -> &str {
    metric.strip_prefix("latency_").unwrap_or(metric)
}

/// A metric and its unit as an axis description: `spawn time (us/actor)`.
pub(super) fn metric_label(metric: &str, unit: &str) -> String {
    let name = metric.replace('_', " ");
    if unit.is_empty() {
        name
    } else {
        format!("{name} ({unit})")
    }
}

/// One drawn value: the median, with the min–max range of its samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Mark {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// The run's own check failed (`validated: false`): drawn hollow.
    pub failed: bool,
}

impl Mark {
    pub fn of(record: &Record) -> Mark {
        Mark {
            median: record.median,
            min: record.min,
            max: record.max,
            failed: !record.validated,
        }
    }
}

/// How a line is stroked; each series of a chart gets its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dash {
    Solid,
    Dashed,
    Dotted,
    Long,
}

impl Dash {
    /// The stroke of the `n`th variant (series) of a line.
    pub fn nth(n: usize) -> Dash {
        [Dash::Solid, Dash::Dashed, Dash::Dotted, Dash::Long][n % 4]
    }
}

/// How a bar or a line looks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Look {
    pub colour: Rgb,
    pub dash: Dash,
}

/// The value axis: linear, logarithmic, or logarithmic when the values span more than two
/// decades and are all positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    Linear,
    Log,
    Auto,
}

/// One bar: in group `group` (a category on the x axis), at `slot` among the group's bars.
#[derive(Debug, Clone)]
pub(super) struct Bar {
    pub group: usize,
    pub slot: usize,
    pub mark: Mark,
    pub look: Look,
}

/// One line through points `(x, value)`.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub look: Look,
    pub points: Vec<(f64, Mark)>,
}

/// A stretch of the x axis named in the chart (a phase of a run), shaded if `shaded`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Band {
    pub from: f64,
    pub to: f64,
    pub label: String,
    pub shaded: bool,
}

/// What a chart draws.
#[derive(Debug, Clone)]
pub(super) enum Plot {
    /// Grouped bars over categories (labels may hold `\n` between lines).
    Bars { groups: Vec<String>, bars: Vec<Bar> },
    /// Lines over a numeric x axis.
    Lines {
        x_log: bool,
        lines: Vec<Line>,
        bands: Vec<Band>,
    },
}

/// One entry of a chart's legend.
#[derive(Debug, Clone)]
pub(super) struct Key {
    pub label: String,
    pub look: Look,
}

/// A chart, ready to draw.
#[derive(Debug, Clone)]
pub(super) struct Chart {
    pub title: String,
    /// The parameters every value shares, and which direction is better.
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub y_scale: Scale,
    pub plot: Plot,
    pub legend: Vec<Key>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_read_from_metric_names() {
        assert_eq!(percentile("latency_p5"), Some(5.0));
        assert_eq!(percentile("latency_p99.9"), Some(99.9));
        assert_eq!(percentile("p999"), Some(99.9));
        assert_eq!(percentile("p50"), Some(50.0));
        assert_eq!(percentile("throughput"), None);
        assert_eq!(percentile("p"), None);
    }

    #[test]
    fn params_keys_ignore_order() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"a":1,"b":"x"}"#).unwrap();
        let b: Map<String, Value> = serde_json::from_str(r#"{"b":"x","a":1}"#).unwrap();
        assert_eq!(params_key(&a), params_key(&b));
    }
}
