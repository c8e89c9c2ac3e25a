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
    /// The value is the top of the sweep that measured it (the highest rate tried held), so
    /// the truth is this or more: labelled `≥`.
    pub at_least: bool,
    /// Nothing the sweep tried held: the truth is below this, its lowest step (labelled `<`).
    pub below: Option<f64>,
}

impl Mark {
    pub fn of(record: &Record) -> Mark {
        Mark {
            median: record.median,
            min: record.min,
            max: record.max,
            failed: !record.validated,
            at_least: at_sweep_top(record),
            below: below_sweep(record),
        }
    }

    /// One known value, with no spread and no check: a seed's published figure, or a count
    /// of nothing where a record is missing.
    pub fn exact(value: f64) -> Mark {
        Mark {
            median: value,
            min: value,
            max: value,
            failed: false,
            at_least: false,
            below: None,
        }
    }
}

/// The parameter a sweep's record names its highest step by (`highest_rate_tried` of the
/// store's capacity search).
pub(super) const SWEEP_TOP: &str = "highest_rate_tried";

/// Whether the record's value is the highest step its sweep tried: the sweep stopped because
/// it ran out of steps, not because the value failed, so the value is a lower bound.
pub(super) fn at_sweep_top(record: &Record) -> bool {
    record
        .params
        .get(SWEEP_TOP)
        .and_then(Value::as_f64)
        .is_some_and(|top| top > 0.0 && record.median >= top)
}

/// The parameter a sweep's record names its lowest step by.
pub(super) const SWEEP_BOTTOM: &str = "lowest_rate_tried";

/// The sweep's lowest step, when the record's value is under it: nothing the sweep tried
/// held (a capacity of 0 means "below the lowest rate tried", not "none").
pub(super) fn below_sweep(record: &Record) -> Option<f64> {
    record
        .params
        .get(SWEEP_BOTTOM)
        .and_then(Value::as_f64)
        .filter(|low| *low > 0.0 && record.median < *low)
}

/// How far apart a record's repetitions are before a chart says so: the largest over the
/// smallest sample.
pub(super) const SPREAD_LIMIT: f64 = 1.5;

/// The record's spread (largest sample over smallest) when it is over [`SPREAD_LIMIT`];
/// `None` for records whose samples are too few, not positive, or close together.
pub(super) fn wide_spread(record: &Record) -> Option<f64> {
    if record.samples.len() < 2
        || record.min.is_nan()
        || record.min <= 0.0
        || !record.max.is_finite()
    {
        return None;
    }
    let spread = record.max / record.min;
    (spread > SPREAD_LIMIT).then_some(spread)
}

/// The shape drawn at a line's points, on a bar and in the legend: each entry of a chart gets
/// its own, so series differ by more than their colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
    Down,
    Plus,
    Bar,
}

impl Marker {
    /// The marker of the `n`th legend entry.
    pub fn nth(n: usize) -> Marker {
        use Marker::*;
        [Circle, Square, Triangle, Diamond, Cross, Down, Plus, Bar][n % 8]
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
    pub marker: Marker,
    /// A figure published elsewhere (a seed's own), not measured here: drawn outlined.
    pub published: bool,
}

impl Look {
    /// A measured series in `colour`, stroked `dash` (its marker is set when the chart is
    /// finished, see [`Chart::finish`]).
    pub fn new(colour: Rgb, dash: Dash) -> Look {
        Look {
            colour,
            dash,
            marker: Marker::Circle,
            published: false,
        }
    }
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
    /// Points further apart on x than this are not joined: the line stops at a gap in the
    /// data instead of drawing a straight line across it.
    pub gap: Option<f64>,
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
    /// One entry per bar slot (`Bar::slot` is its index) or per line (in order).
    pub legend: Vec<Key>,
    /// Sentences under the chart: what a reader must know to read it right (wide spreads,
    /// lower bounds, where published figures come from).
    pub notes: Vec<String>,
}

impl Chart {
    /// Gives every legend entry its own colour and marker (a colour shared with an earlier
    /// entry is shaded until it differs), and the bars and lines their entry's look.
    pub fn finish(mut self) -> Chart {
        let mut used: Vec<Rgb> = Vec::new();
        for (i, key) in self.legend.iter_mut().enumerate() {
            key.look.colour = distinct_colour(key.look.colour, &used);
            key.look.marker = Marker::nth(i);
            used.push(key.look.colour);
        }
        match &mut self.plot {
            Plot::Bars { bars, .. } => {
                for bar in bars {
                    if let Some(key) = self.legend.get(bar.slot) {
                        bar.look = key.look;
                    }
                }
            }
            Plot::Lines { lines, .. } => {
                for (line, key) in lines.iter_mut().zip(&self.legend) {
                    line.look = key.look;
                }
            }
        }
        self
    }
}

/// `colour`, or the first shade of it far enough from every colour in `used`.
pub(super) fn distinct_colour(colour: Rgb, used: &[Rgb]) -> Rgb {
    use super::palette::{category, darken, tint};
    let far = |c: Rgb| used.iter().all(|u| colour_distance(c, *u) >= MIN_DISTANCE);
    let shades = [
        colour,
        tint(colour, 0.45),
        darken(colour, 0.45),
        tint(colour, 0.7),
        darken(colour, 0.7),
    ];
    shades
        .into_iter()
        .chain((0..12).map(category))
        .find(|c| far(*c))
        .unwrap_or(colour)
}

/// How far apart two colours must be to tell them apart at a glance (in RGB, 0 to 441).
const MIN_DISTANCE: f64 = 60.0;

pub(super) fn colour_distance(a: Rgb, b: Rgb) -> f64 {
    let d = |x: u8, y: u8| (f64::from(x) - f64::from(y)).powi(2);
    (d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)).sqrt()
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
