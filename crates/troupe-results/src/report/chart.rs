//! Drawing a [`Chart`] as an SVG string, with plotters' SVG backend.
//!
//! plotters maps values to pixels (a linear axis, or `(a..b).log_scale()`), draws the shapes
//! and the min–max whiskers (`ErrorBar::new_vertical`) and writes the SVG. The layout around
//! the plot (ticks, their labels, the legend below the plot) is computed here: plotters' key
//! points on a log axis leave a narrow range (0.9–1.1 ms) without a tick, and without the
//! `ttf` feature it can only guess how wide a text is. The SVG's text is `<text>` elements
//! the browser sets in its own `sans-serif`; this module estimates widths on the wide side and
//! wraps, shortens or skips labels so none leaves its place or the image.

use std::error::Error;

use plotters::coord::ranged1d::AsRangedCoord;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::{
    ChartBuilder, Circle, Color, DrawingArea, ErrorBar, FontStyle, FontTransform, IntoDrawingArea,
    IntoFont, IntoLogRange, PathElement, Polygon, RGBColor, Rectangle, SVGBackend, ShapeStyle,
    Text, TextStyle, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::html::escape;
use super::model::{Band, Bar, Chart, Dash, Key, Line, Mark, Marker, Plot, Scale};
use super::palette::{tint, Rgb};
use crate::stats::human;

/// The image's width (its height follows from what it holds).
const WIDTH: i32 = 860;
/// plotters' SVG backend writes `font-size` as the given size divided by this.
const FONT_SCALE: f64 = 1.24;
const TITLE_PX: f64 = 16.0;
const SUBTITLE_PX: f64 = 12.0;
const TICK_PX: f64 = 11.5;
const AXIS_PX: f64 = 12.5;
const LEGEND_PX: f64 = 12.0;
const VALUE_PX: f64 = 10.5;
const BAND_PX: f64 = 11.0;
/// Height of a line of tick labels, and of a legend row.
const TICK_LINE: i32 = 15;
const LEGEND_ROW: i32 = 20;
/// Height of each further line of a wrapped legend label.
const LEGEND_LINE: i32 = 15;
/// Width of a legend entry's swatch with the gap before its text.
const SWATCH: f64 = 30.0;

const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
const MUTED: RGBColor = RGBColor(0x55, 0x55, 0x55);
const AXIS: RGBColor = RGBColor(0x66, 0x66, 0x66);
const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);
const BAND_FILL: RGBColor = RGBColor(0xfb, 0xe4, 0xe4);
const BAND_EDGE: RGBColor = RGBColor(0xb0, 0x80, 0x80);

/// A drawn chart.
#[derive(Debug, Clone)]
pub(super) struct Drawn {
    /// The `<svg>` element.
    pub svg: String,
    /// Whether the value axis came out logarithmic.
    pub y_log: bool,
    /// Whether the x axis is logarithmic.
    pub x_log: bool,
    /// How many values could not be drawn (not finite, or not positive on a log axis).
    pub hidden: usize,
    /// Whether a drawn value failed its run's check (drawn hollow).
    pub failed: bool,
}

/// Draws `chart` as an SVG element.
pub(super) fn draw(chart: &Chart) -> Drawn {
    let frame = Frame::new(chart);
    let mut svg = String::new();
    let painted = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH as u32, frame.height as u32))
            .into_drawing_area();
        paint(&root, chart, &frame).and_then(|()| root.present().map_err(Into::into))
    };
    let legend = legend_svg(chart, &frame);
    match (painted, legend) {
        (Ok(()), Ok(keys)) => {
            if let Some(end) = svg.rfind("</svg>") {
                svg.insert_str(end, &keys);
            }
        }
        (Err(e), _) | (_, Err(e)) => svg = fallback(&chart.title, &e.to_string()),
    }
    let labelled = format!("<svg role=\"img\" aria-label=\"{}\" ", escape(&chart.title));
    Drawn {
        svg: svg.replacen("<svg ", &labelled, 1),
        y_log: frame.y.log,
        x_log: frame.x.as_ref().is_some_and(|x| x.log),
        hidden: frame.hidden,
        failed: frame.failed,
    }
}

/// A small SVG saying why a chart is missing (never expected: the backend writes to memory).
fn fallback(title: &str, why: &str) -> String {
    format!(
        "<svg width=\"{WIDTH}\" height=\"80\" viewBox=\"0 0 {WIDTH} 80\" xmlns=\"http://www.w3.org/2000/svg\">\
         <text x=\"10\" y=\"30\" font-family=\"sans-serif\" font-size=\"14\">{}: not drawn ({})</text></svg>",
        escape(title),
        escape(why)
    )
}

/// One axis: its range, whether it is logarithmic, and where its ticks are.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

/// One row of the legend: its entries (key index, label lines, width) and its height.
#[derive(Debug, Clone)]
struct LegendRow {
    entries: Vec<(usize, Vec<String>, f64)>,
    height: i32,
}

/// Where everything goes, computed before anything is drawn.
#[derive(Debug, Clone)]
struct Frame {
    y: Axis,
    /// The x axis of a line chart (bars are placed by group).
    x: Option<Axis>,
    height: i32,
    left: i32,
    top: i32,
    right: i32,
    bottom: i32,
    title_lines: Vec<String>,
    subtitle_lines: Vec<String>,
    /// Each band's label, as lines, and how many lines the tallest has.
    band_lines: Vec<Vec<String>>,
    /// The value axis's description, as columns (it is written upwards).
    y_label_lines: Vec<String>,
    /// The x axis's description, as lines.
    x_label_lines: Vec<String>,
    /// Each bar group's label, as lines.
    group_lines: Vec<Vec<String>>,
    legend: Vec<LegendRow>,
    legend_top: i32,
    hidden: usize,
    failed: bool,
}

/// Height of a title line, a subtitle line, an axis description line, a band label line.
const TITLE_LINE: i32 = 21;
const SUBTITLE_LINE: i32 = 16;
const AXIS_LINE: i32 = 16;
const BAND_LINE: i32 = 13;
/// Height of the plot itself.
const PLOT_HEIGHT: i32 = 300;
/// The widest a legend entry may be before its label wraps.
const LEGEND_ENTRY: f64 = 400.0;

impl Frame {
    fn new(chart: &Chart) -> Frame {
        let bars = matches!(chart.plot, Plot::Bars { .. });
        let marks = drawn_marks(&chart.plot);
        let y = value_axis(&marks, chart.y_scale, bars);
        let x = match &chart.plot {
            Plot::Lines {
                x_log,
                lines,
                bands,
            } => Some(x_axis(lines, bands, *x_log)),
            Plot::Bars { .. } => None,
        };
        let hidden = count_hidden(&chart.plot, &y, x.as_ref());
        let failed = marks.iter().any(|m| m.failed && visible(m, &y));

        let text_room = f64::from(WIDTH - 24);
        let title_lines = wrap(&clean(&chart.title), TITLE_PX, text_room);
        let subtitle_lines = if chart.subtitle.is_empty() {
            Vec::new()
        } else {
            wrap(&clean(&chart.subtitle), SUBTITLE_PX, text_room)
        };
        let mut y_label = chart.y_label.clone();
        if y.log {
            y_label.push_str(", log scale");
        }
        let y_label_lines = wrap(&clean(&y_label), AXIS_PX, f64::from(PLOT_HEIGHT));

        let widest_tick = y
            .ticks
            .iter()
            .map(|t| text_width(&tick_text(*t), TICK_PX))
            .fold(0.0, f64::max);
        let left = (widest_tick.ceil() as i32 + 36).max(64)
            + AXIS_LINE * (y_label_lines.len().max(1) as i32 - 1);
        let right = WIDTH - 26;
        let plot_width = f64::from(right - left);

        let band_lines: Vec<Vec<String>> = match (&chart.plot, &x) {
            (Plot::Lines { bands, .. }, Some(x)) => bands
                .iter()
                .map(|b| {
                    let share = if x.log {
                        (b.to.max(x.lo).ln() - b.from.max(x.lo).ln()) / (x.hi.ln() - x.lo.ln())
                    } else {
                        (b.to.min(x.hi) - b.from.max(x.lo)) / (x.hi - x.lo)
                    };
                    let room = (share * plot_width - 6.0).max(48.0);
                    wrap(&clean(&b.label), BAND_PX, room)
                })
                .collect(),
            _ => Vec::new(),
        };
        let band_rows = band_lines.iter().map(Vec::len).max().unwrap_or(0) as i32;

        let mut top = 12 + TITLE_LINE * title_lines.len() as i32;
        top += SUBTITLE_LINE * subtitle_lines.len() as i32 + 10;
        if band_rows > 0 {
            top += BAND_LINE * band_rows + 6;
        }
        let bottom = top + PLOT_HEIGHT;

        let group_lines = match &chart.plot {
            Plot::Bars { groups, .. } => {
                let width = plot_width / groups.len().max(1) as f64 - 8.0;
                groups.iter().map(|g| wrap(g, TICK_PX, width)).collect()
            }
            Plot::Lines { .. } => Vec::new(),
        };
        let label_lines = group_lines.iter().map(Vec::len).max().unwrap_or(1).max(1) as i32;
        let mut x_label = chart.x_label.clone();
        if x.as_ref().is_some_and(|x| x.log) {
            x_label.push_str(", log scale");
        }
        let x_label_lines = wrap(&clean(&x_label), AXIS_PX, plot_width);
        let legend_top =
            bottom + 7 + TICK_LINE * label_lines + 6 + AXIS_LINE * x_label_lines.len() as i32 + 8;
        let legend = legend_rows(&chart.legend, f64::from(WIDTH - 32));
        let height = legend_top + legend.iter().map(|r| r.height).sum::<i32>() + 8;
        Frame {
            y,
            x,
            height,
            left,
            top,
            right,
            bottom,
            title_lines,
            subtitle_lines,
            band_lines,
            y_label_lines,
            x_label_lines,
            group_lines,
            legend,
            legend_top,
            hidden,
            failed,
        }
    }
}

/// Every value of the plot.
fn drawn_marks(plot: &Plot) -> Vec<Mark> {
    match plot {
        Plot::Bars { bars, .. } => bars.iter().map(|b| b.mark).collect(),
        Plot::Lines { lines, .. } => lines
            .iter()
            .flat_map(|l| l.points.iter().map(|(_, m)| *m))
            .collect(),
    }
}

/// Whether a value can be drawn on the value axis.
fn visible(mark: &Mark, y: &Axis) -> bool {
    mark.median.is_finite() && (!y.log || mark.median > 0.0)
}

/// Whether an x position can be drawn on the x axis.
fn x_visible(x: f64, axis: &Axis) -> bool {
    x.is_finite() && (!axis.log || x > 0.0)
}

fn count_hidden(plot: &Plot, y: &Axis, x: Option<&Axis>) -> usize {
    match (plot, x) {
        (Plot::Lines { lines, .. }, Some(x)) => lines
            .iter()
            .flat_map(|l| &l.points)
            .filter(|(at, m)| !visible(m, y) || !x_visible(*at, x))
            .count(),
        _ => drawn_marks(plot).iter().filter(|m| !visible(m, y)).count(),
    }
}

/// The value axis for `marks`: log when asked (or, for `Auto`, when every value is positive
/// and they span more than two decades), padded so no range is empty.
fn value_axis(marks: &[Mark], scale: Scale, bars: bool) -> Axis {
    let medians: Vec<f64> = marks
        .iter()
        .map(|m| m.median)
        .filter(|v| v.is_finite())
        .collect();
    let positive: Vec<f64> = medians.iter().copied().filter(|v| *v > 0.0).collect();
    let log = match scale {
        Scale::Linear => false,
        Scale::Log => !positive.is_empty(),
        Scale::Auto => {
            let (lo, hi) = span(positive.iter().copied());
            !medians.is_empty() && positive.len() == medians.len() && hi / lo > 100.0
        }
    };
    let whiskers = marks
        .iter()
        .filter(|m| m.median.is_finite() && (!log || m.median > 0.0))
        .flat_map(|m| [m.min, m.median, m.max])
        .filter(|v| v.is_finite() && (!log || *v > 0.0));
    let (lo, hi) = span(whiskers);
    if log {
        log_axis(lo, hi, bars)
    } else if lo > hi {
        linear_axis(0.0, 1.0, bars)
    } else {
        linear_axis(lo, hi, bars)
    }
}

/// The x axis of a line chart: the points' x values and the bands, padded; ticks at the
/// values themselves when there are few of them (1, 2, 4, 8, 10, 20, 40 clients).
fn x_axis(lines: &[Line], bands: &[Band], log: bool) -> Axis {
    let usable = |x: &f64| x.is_finite() && (!log || *x > 0.0);
    let mut xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|(x, _)| *x))
        .filter(usable)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let edges = bands.iter().flat_map(|b| [b.from, b.to]).filter(usable);
    let (mut lo, mut hi) = span(xs.iter().copied().chain(edges));
    if lo > hi {
        (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        if lo == hi {
            (lo, hi) = (lo / 2.0, hi * 2.0);
        } else {
            let pad = (hi / lo).powf(0.04).max(1.12);
            (lo, hi) = (lo / pad, hi * pad);
        }
    } else if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() / 10.0 };
        (lo, hi) = (lo - pad, hi + pad);
    } else if bands.is_empty() {
        let pad = (hi - lo) * 0.03;
        (lo, hi) = (lo - pad, hi + pad);
    }
    let whole = xs.iter().all(|x| x.fract() == 0.0);
    let ticks = if !xs.is_empty() && xs.len() <= 12 {
        xs
    } else if log {
        log_ticks(lo, hi)
    } else {
        linear_ticks(lo, hi, 8, whole).2
    };
    Axis {
        lo,
        hi,
        log,
        ticks: ticks.into_iter().filter(|t| *t >= lo && *t <= hi).collect(),
    }
}

/// The smallest and largest of `values` (`(MAX, MIN)` when there are none).
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// A log axis over positive `lo..=hi`: bars start at a power of ten below every value.
fn log_axis(lo: f64, hi: f64, bars: bool) -> Axis {
    let (mut lo, mut hi) = if lo == hi {
        (lo / 2.0, hi * 2.0)
    } else {
        (lo, hi)
    };
    if bars {
        lo = 10f64.powf((lo / 1.2).log10().floor());
        hi *= 1.7;
    } else {
        lo /= 1.35;
        hi *= 1.35;
    }
    Axis {
        lo,
        hi,
        log: true,
        ticks: log_ticks(lo, hi),
    }
}

/// A linear axis from zero (or below, for negative values) to a round number above `hi`.
fn linear_axis(lo: f64, hi: f64, bars: bool) -> Axis {
    let lo = lo.min(0.0);
    let mut hi = hi.max(0.0);
    if hi - lo <= 0.0 {
        hi = lo + 1.0;
    }
    let room = (hi - lo) * if bars { 0.1 } else { 0.04 };
    let (lo, hi, ticks) = linear_ticks(lo, hi + room, 6, false);
    Axis {
        lo,
        hi,
        log: false,
        ticks,
    }
}

/// Round ticks covering `lo..=hi`, about `count` of them (whole numbers if `whole`): the
/// range widened to whole steps, and the ticks.
fn linear_ticks(lo: f64, hi: f64, count: usize, whole: bool) -> (f64, f64, Vec<f64>) {
    let step = nice_step((hi - lo) / count.max(1) as f64, whole);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let ticks = (0..=((last - first) as usize).min(50))
        .map(|i| round_to(((first + i as f64) * step).max(f64::MIN), step))
        .collect();
    (first * step, last * step, ticks)
}

/// `x` without the float noise of repeated steps (0.30000000000000004 is 0.3).
fn round_to(x: f64, step: f64) -> f64 {
    let digits = (-step.log10().floor()).max(0.0) as i32 + 2;
    let scale = 10f64.powi(digits.min(15));
    (x * scale).round() / scale
}

/// A step of 1, 2, 2.5 or 5 times a power of ten, at least `raw`; a whole number (and
/// never 2.5 times a power) if `whole`.
fn nice_step(raw: f64, whole: bool) -> f64 {
    if !raw.is_finite() || raw <= 0.0 || (whole && raw <= 1.0) {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 2.5 && !whole {
        2.5
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Ticks of a log axis: powers of ten (every other one, and so on, when there are many),
/// with 2x and 5x between them over a short range, and round linear steps over a range
/// shorter than a decade.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let first = lo.log10().ceil() as i32;
    let last = hi.log10().floor() as i32;
    let powers: Vec<f64> = (first..=last).map(|k| 10f64.powi(k)).collect();
    if powers.len() >= 3 {
        let every = powers.len().div_ceil(8);
        return powers.into_iter().step_by(every).collect();
    }
    let with_halves: Vec<f64> = (first - 1..=last)
        .flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k)))
        .filter(|t| *t >= lo && *t <= hi)
        .collect();
    if with_halves.len() >= 3 {
        return with_halves;
    }
    linear_ticks(lo, hi, 5, false)
        .2
        .into_iter()
        .filter(|t| *t > 0.0 && *t >= lo && *t <= hi)
        .collect()
}

/// A tick's label: [`human`] without trailing zeros (`20k`, `0.5`), never an exponent.
fn tick_text(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        let decimals = (-x.abs().log10()).ceil() as usize + 1;
        let text = format!("{x:.decimals$}");
        return text.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let text = human(x);
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    if number.contains('.') {
        let number = number.trim_end_matches('0').trim_end_matches('.');
        format!("{number}{suffix}")
    } else {
        text
    }
}

/// A generous estimate of how wide `text` is in a `sans-serif` font of `px` pixels (wide
/// fonts such as DejaVu Sans included).
pub(super) fn text_width(text: &str, px: f64) -> f64 {
    text.chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | '·' => 0.34,
            'f' | 't' | 'r' | 'I' | ' ' | '(' | ')' | '[' | ']' | '-' | '/' | '"' => 0.44,
            'm' | 'w' | 'M' | 'W' | '@' | '%' | '…' => 1.0,
            '_' | '=' | '+' | '<' | '>' | '~' | '#' | '&' => 0.86,
            'A'..='Z' => 0.76,
            '0'..='9' => 0.66,
            'a'..='z' => 0.64,
            c if c.is_ascii() => 0.64,
            _ => 1.05,
        })
        .sum::<f64>()
        * px
}

/// `text` broken into lines that fit `width`, at its `\n`s and spaces; a word too long for a
/// line is broken after a `-`, `=`, `/`, `_` or `,` in it where it can be, else anywhere.
/// Nothing is ever cut: a text longer than the room takes more lines.
fn wrap(text: &str, px: f64, width: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            let candidate = if line.is_empty() {
                word.to_owned()
            } else {
                format!("{line} {word}")
            };
            if text_width(&candidate, px) <= width {
                line = candidate;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            let mut rest = word.to_owned();
            while text_width(&rest, px) > width {
                let (head, tail) = break_word(&rest, px, width);
                lines.push(head);
                rest = tail;
            }
            line = rest;
        }
        lines.push(line);
    }
    lines
}

/// The longest head of `word` that fits `width` (ending after a break character where one
/// fits), and the rest; the head has at least one character.
fn break_word(word: &str, px: f64, width: f64) -> (String, String) {
    let chars: Vec<char> = word.chars().collect();
    let mut fits = 1;
    while fits < chars.len() && text_width(&chars[..=fits].iter().collect::<String>(), px) <= width
    {
        fits += 1;
    }
    let at = (1..fits)
        .rev()
        .find(|&i| matches!(chars[i - 1], '-' | '=' | '/' | '_' | ','))
        .unwrap_or(fits);
    (chars[..at].iter().collect(), chars[at..].iter().collect())
}

/// The legend laid out in rows that fit `width`; a long label wraps inside its entry.
fn legend_rows(keys: &[Key], width: f64) -> Vec<LegendRow> {
    let mut rows: Vec<LegendRow> = Vec::new();
    let mut used = 0.0;
    let most = LEGEND_ENTRY.min(width);
    for (i, key) in keys.iter().enumerate() {
        let lines = wrap(&clean(&key.label), LEGEND_PX, most - SWATCH - 20.0);
        let text = lines
            .iter()
            .map(|l| text_width(l, LEGEND_PX))
            .fold(0.0, f64::max);
        let w = SWATCH + text + 20.0;
        let height = (LEGEND_LINE * lines.len() as i32 + 5).max(LEGEND_ROW);
        match rows.last_mut() {
            Some(row) if used + w <= width => {
                row.entries.push((i, lines, w));
                row.height = row.height.max(height);
                used += w;
            }
            _ => {
                rows.push(LegendRow {
                    entries: vec![(i, lines, w)],
                    height,
                });
                used = w;
            }
        }
    }
    rows
}

/// Text from the data without control characters (which have no place in an SVG).
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn colour(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

/// A text style: `sans-serif` at `px` pixels, anchored at `pos`.
fn font(px: f64, ink: RGBColor, pos: Pos) -> TextStyle<'static> {
    ("sans-serif", px * FONT_SCALE)
        .into_font()
        .color(&ink)
        .pos(pos)
}

type Root<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Painted = Result<(), Box<dyn Error>>;
/// Values to pixels of the whole image.
type Mapping<'m> = &'m dyn Fn(f64, f64) -> (i32, i32);

fn paint(root: &Root<'_>, chart: &Chart, frame: &Frame) -> Painted {
    root.fill(&WHITE)?;
    let area = root.margin(
        frame.top,
        frame.height - frame.bottom,
        frame.left,
        WIDTH - frame.right,
    );
    let (y0, y1) = (frame.y.lo, frame.y.hi);
    let (x0, x1, x_log) = match &frame.x {
        Some(x) => (x.lo, x.hi, x.log),
        None => {
            let groups = match &chart.plot {
                Plot::Bars { groups, .. } => groups.len(),
                Plot::Lines { .. } => 1,
            };
            (0.0, groups.max(1) as f64, false)
        }
    };
    match (x_log, frame.y.log) {
        (false, false) => paint_in(root, &area, x0..x1, y0..y1, chart, frame),
        (false, true) => paint_in(root, &area, x0..x1, (y0..y1).log_scale(), chart, frame),
        (true, false) => paint_in(root, &area, (x0..x1).log_scale(), y0..y1, chart, frame),
        (true, true) => paint_in(
            root,
            &area,
            (x0..x1).log_scale(),
            (y0..y1).log_scale(),
            chart,
            frame,
        ),
    }
}

/// Paints the chart with plotters' mapping of `x` and `y` (linear or log) onto the plot
/// area `area`; everything is drawn on `root` in pixels.
fn paint_in<X, Y>(
    root: &Root<'_>,
    area: &Root<'_>,
    x: X,
    y: Y,
    chart: &Chart,
    frame: &Frame,
) -> Painted
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
{
    let context = ChartBuilder::on(area).build_cartesian_2d(x, y)?;
    let map = |a: f64, b: f64| context.backend_coord(&(a, b));
    if let Plot::Lines { bands, .. } = &chart.plot {
        paint_bands(root, frame, bands, &map)?;
    }
    paint_grid(root, frame, &map)?;
    match &chart.plot {
        Plot::Bars { groups, bars } => paint_bars(root, frame, groups.len(), bars, &map)?,
        Plot::Lines { lines, .. } => paint_lines(root, frame, lines, &map)?,
    }
    paint_axes(root, chart, frame, &map)?;
    Ok(())
}

/// The named stretches of the x axis: shaded where `shaded`, their names above the plot.
fn paint_bands(root: &Root<'_>, frame: &Frame, bands: &[Band], map: Mapping<'_>) -> Painted {
    let Some(x) = &frame.x else { return Ok(()) };
    for (band, lines) in bands.iter().zip(&frame.band_lines) {
        let from = band.from.max(x.lo);
        let to = band.to.min(x.hi);
        if from >= to || from.is_nan() || to.is_nan() || (x.log && from <= 0.0) {
            continue;
        }
        let (left, _) = map(from, frame.y.hi);
        let (right, _) = map(to, frame.y.hi);
        let (left, right) = (left.max(frame.left), right.min(frame.right));
        if band.shaded {
            root.draw(&Rectangle::new(
                [(left, frame.top), (right, frame.bottom)],
                BAND_FILL.filled(),
            ))?;
        }
        for edge in [left, right] {
            if edge > frame.left + 1 && edge < frame.right - 1 {
                root.draw(&DashedPathElement::new(
                    [(edge, frame.top), (edge, frame.bottom)],
                    4,
                    4,
                    BAND_EDGE.stroke_width(1),
                ))?;
            }
        }
        // Centred over the band, kept inside the image.
        let widest = lines
            .iter()
            .map(|l| text_width(l, BAND_PX))
            .fold(0.0, f64::max);
        let half = (widest / 2.0).ceil() as i32 + 2;
        let cx = ((left + right) / 2).clamp(half, WIDTH - half);
        let count = lines.len() as i32;
        for (j, line) in lines.iter().enumerate() {
            let y = frame.top - 4 - BAND_LINE * (count - 1 - j as i32);
            root.draw(&Text::new(
                line.clone(),
                (cx, y),
                font(BAND_PX, MUTED, Pos::new(HPos::Center, VPos::Bottom)),
            ))?;
        }
    }
    Ok(())
}

fn paint_grid(root: &Root<'_>, frame: &Frame, map: Mapping<'_>) -> Painted {
    for t in &frame.y.ticks {
        let (_, py) = map(frame.x.as_ref().map_or(0.0, |x| x.lo), *t);
        root.draw(&PathElement::new(
            [(frame.left, py), (frame.right, py)],
            GRID.stroke_width(1),
        ))?;
    }
    if let Some(x) = &frame.x {
        for t in &x.ticks {
            let (px, _) = map(*t, frame.y.lo);
            root.draw(&PathElement::new(
                [(px, frame.top), (px, frame.bottom)],
                GRID.mix(0.6).stroke_width(1),
            ))?;
        }
    }
    Ok(())
}

/// The pixel row of value `v`, clamped into the plot (whiskers below a log axis's range).
fn row(map: Mapping<'_>, frame: &Frame, v: f64) -> i32 {
    let v = if !v.is_finite() || (frame.y.log && v <= 0.0) {
        frame.y.lo
    } else {
        v.clamp(frame.y.lo, frame.y.hi)
    };
    // Rows do not depend on the column; any x inside the axis will do.
    map(frame.x.as_ref().map_or(0.0, |x| x.lo), v).1
}

fn paint_bars(
    root: &Root<'_>,
    frame: &Frame,
    groups: usize,
    bars: &[Bar],
    map: Mapping<'_>,
) -> Painted {
    let groups = groups.max(1);
    let group_width = f64::from(frame.right - frame.left) / groups as f64;
    let mut in_group: Vec<Vec<&Bar>> = vec![Vec::new(); groups];
    for bar in bars
        .iter()
        .filter(|b| b.group < groups && visible(&b.mark, &frame.y))
    {
        in_group[bar.group].push(bar);
    }
    for members in &mut in_group {
        members.sort_by_key(|b| b.slot);
    }
    let most = in_group.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let bar_width = (group_width * 0.8 / most as f64).clamp(2.0, 56.0);
    let gap = if bar_width > 8.0 { 2 } else { 0 };
    let labels_fit = bars
        .iter()
        .all(|b| text_width(&value_text(&b.mark), VALUE_PX) + 2.0 <= bar_width + 6.0);
    let base = frame.bottom;
    for (g, members) in in_group.iter().enumerate() {
        let centre = f64::from(frame.left) + group_width * (g as f64 + 0.5);
        let start = centre - bar_width * members.len() as f64 / 2.0;
        for (i, bar) in members.iter().enumerate() {
            let x0 = (start + bar_width * i as f64).round() as i32 + gap / 2;
            let x1 = (start + bar_width * (i + 1) as f64).round() as i32 - gap / 2;
            let top = row(map, frame, bar.mark.median);
            let fill = colour(bar.look.colour);
            if bar.mark.failed {
                root.draw(&Rectangle::new([(x0, top), (x1, base)], WHITE.filled()))?;
                root.draw(&Rectangle::new(
                    [(x0 + 1, top + 1), (x1 - 1, base - 1)],
                    fill.stroke_width(2),
                ))?;
            } else if bar.look.published {
                // A figure published elsewhere: a pale fill in an outline of its colour.
                root.draw(&Rectangle::new(
                    [(x0, top), (x1, base)],
                    colour(tint(bar.look.colour, 0.7)).filled(),
                ))?;
                root.draw(&Rectangle::new(
                    [(x0 + 1, top + 1), (x1 - 1, base - 1)],
                    fill.stroke_width(2),
                ))?;
            } else {
                root.draw(&Rectangle::new([(x0, top), (x1, base)], fill.filled()))?;
            }
            let cx = (x0 + x1) / 2;
            if x1 - x0 >= 10 && base - top >= 14 {
                let ink = if bar.look.published || bar.mark.failed {
                    fill
                } else {
                    WHITE
                };
                paint_marker(root, bar.look.marker, (cx, base - 8), 3, ink, true)?;
            }
            let (low, high) = (row(map, frame, bar.mark.min), row(map, frame, bar.mark.max));
            if high < low {
                // The whisker alone: `ErrorBar` would also circle the median, which on a
                // bar is its top edge already.
                let half = (bar_width * 0.22).clamp(1.0, 6.0) as i32;
                let style = ShapeStyle::from(&INK).stroke_width(1);
                root.draw(&PathElement::new([(cx, low), (cx, high)], style))?;
                for y in [low, high] {
                    root.draw(&PathElement::new([(cx - half, y), (cx + half, y)], style))?;
                }
            }
            if labels_fit {
                root.draw(&Text::new(
                    value_text(&bar.mark),
                    (cx, high.min(top) - 3),
                    font(VALUE_PX, INK, Pos::new(HPos::Center, VPos::Bottom)),
                ))?;
            }
        }
    }
    Ok(())
}

/// Draws a stroke through `pixels` in the line's dash.
fn stroke(root: &Root<'_>, pixels: Vec<(i32, i32)>, dash: Dash, ink: RGBColor) -> Painted {
    let style = ink.stroke_width(2);
    match dash {
        Dash::Solid => root.draw(&PathElement::new(pixels, style))?,
        Dash::Dashed => root.draw(&DashedPathElement::new(pixels, 8, 5, style))?,
        Dash::Dotted => root.draw(&DashedPathElement::new(pixels, 2, 4, style))?,
        Dash::Long => root.draw(&DashedPathElement::new(pixels, 16, 5, style))?,
    }
    Ok(())
}

fn paint_lines(root: &Root<'_>, frame: &Frame, lines: &[Line], map: Mapping<'_>) -> Painted {
    let Some(x) = &frame.x else { return Ok(()) };
    for line in lines {
        let mut points: Vec<(f64, Mark)> = line
            .points
            .iter()
            .copied()
            .filter(|(at, m)| x_visible(*at, x) && visible(m, &frame.y))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ink = colour(line.look.colour);
        // Runs of points close enough to join; a gap in the data ends a run.
        let mut runs: Vec<Vec<(i32, i32)>> = Vec::new();
        let mut last_x = f64::NAN;
        for (at, m) in &points {
            let pixel = (map(*at, frame.y.lo).0, row(map, frame, m.median));
            let joined = line.gap.is_none_or(|gap| *at - last_x <= gap + 1e-9);
            match runs.last_mut() {
                Some(run) if joined => run.push(pixel),
                _ => runs.push(vec![pixel]),
            }
            last_x = *at;
        }
        for run in runs.into_iter().filter(|r| r.len() >= 2) {
            stroke(root, run, line.look.dash, ink)?;
        }
        // Markers only where there are few points; a long timeline is a line.
        let marked = points.len() <= 40;
        for (at, mark) in &points {
            let (px, py) = (map(*at, frame.y.lo).0, row(map, frame, mark.median));
            let (low, high) = (row(map, frame, mark.min), row(map, frame, mark.max));
            if high < low {
                root.draw(&ErrorBar::new_vertical(px, low, py, high, ink.filled(), 8))?;
            }
            if marked {
                paint_marker(root, line.look.marker, (px, py), 4, ink, !mark.failed)?;
            }
        }
    }
    Ok(())
}

fn paint_axes(root: &Root<'_>, chart: &Chart, frame: &Frame, map: Mapping<'_>) -> Painted {
    let axis = AXIS.stroke_width(1);
    root.draw(&PathElement::new(
        [
            (frame.left, frame.top),
            (frame.left, frame.bottom),
            (frame.right, frame.bottom),
        ],
        axis,
    ))?;
    // Value ticks, right-aligned left of the plot.
    for t in &frame.y.ticks {
        let py = row(map, frame, *t);
        root.draw(&PathElement::new(
            [(frame.left - 4, py), (frame.left, py)],
            axis,
        ))?;
        root.draw(&Text::new(
            tick_text(*t),
            (frame.left - 7, py),
            font(TICK_PX, INK, Pos::new(HPos::Right, VPos::Center)),
        ))?;
    }
    // Categories or x ticks under the plot; a tick label that would touch the one before it
    // is left out.
    let below = frame.bottom + 7;
    match (&chart.plot, &frame.x) {
        (Plot::Bars { groups, .. }, _) => {
            let width = f64::from(frame.right - frame.left) / groups.len().max(1) as f64;
            for (g, lines) in frame.group_lines.iter().enumerate() {
                let cx = (f64::from(frame.left) + width * (g as f64 + 0.5)).round() as i32;
                for (i, line) in lines.iter().enumerate() {
                    root.draw(&Text::new(
                        clean(line),
                        (cx, below + TICK_LINE * i as i32),
                        font(TICK_PX, INK, Pos::new(HPos::Center, VPos::Top)),
                    ))?;
                }
            }
        }
        (Plot::Lines { .. }, Some(x)) => {
            let mut last_right = f64::MIN;
            for t in &x.ticks {
                let px = map(*t, frame.y.lo).0;
                let label = tick_text(*t);
                let half = text_width(&label, TICK_PX) / 2.0;
                let (l, r) = (f64::from(px) - half, f64::from(px) + half);
                root.draw(&PathElement::new(
                    [(px, frame.bottom), (px, frame.bottom + 4)],
                    axis,
                ))?;
                if l < last_right + 8.0 || l < 2.0 || r > f64::from(WIDTH) - 2.0 {
                    continue;
                }
                last_right = r;
                root.draw(&Text::new(
                    label,
                    (px, below),
                    font(TICK_PX, INK, Pos::new(HPos::Center, VPos::Top)),
                ))?;
            }
        }
        (Plot::Lines { .. }, None) => {}
    }
    let lines = frame
        .group_lines
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(1)
        .max(1) as i32;
    for (i, line) in frame.x_label_lines.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (
                (frame.left + frame.right) / 2,
                below + TICK_LINE * lines + 6 + AXIS_LINE * i as i32,
            ),
            font(AXIS_PX, INK, Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    let rotated = ("sans-serif", AXIS_PX * FONT_SCALE)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(&INK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in frame.y_label_lines.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (8 + AXIS_LINE * i as i32, (frame.top + frame.bottom) / 2),
            rotated.clone(),
        ))?;
    }
    let title = ("sans-serif", TITLE_PX * FONT_SCALE)
        .into_font()
        .style(FontStyle::Bold)
        .color(&INK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, line) in frame.title_lines.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (WIDTH / 2, 12 + TITLE_LINE * i as i32),
            title.clone(),
        ))?;
    }
    let subtitle_top = 12 + TITLE_LINE * frame.title_lines.len() as i32 + 3;
    for (i, line) in frame.subtitle_lines.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (WIDTH / 2, subtitle_top + SUBTITLE_LINE * i as i32),
            font(SUBTITLE_PX, MUTED, Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    Ok(())
}

/// The legend, under the plot, each row centred; each entry's swatch shows its colour, its
/// marker, and (for lines) its stroke. Each entry is its own `<g class="legend-key">` with
/// a `<title>` of its label, so a reader (or a test) can tell the entries apart.
fn legend_svg(chart: &Chart, frame: &Frame) -> Result<String, Box<dyn Error>> {
    let bars = matches!(chart.plot, Plot::Bars { .. });
    let mut out = String::new();
    let mut row_top = frame.legend_top;
    for row in &frame.legend {
        let cy = row_top + LEGEND_ROW / 2;
        let width: f64 = row.entries.iter().map(|(_, _, w)| w).sum();
        let mut x = (f64::from(WIDTH) - width) / 2.0;
        for (k, lines, w) in &row.entries {
            let key = &chart.legend[*k];
            let mut entry = String::new();
            {
                let root = SVGBackend::with_string(&mut entry, (WIDTH as u32, frame.height as u32))
                    .into_drawing_area();
                paint_key(&root, key, bars, lines, (x, cy))?;
                root.present()?;
            }
            let inner = entry
                .find('>')
                .and_then(|open| entry.rfind("</svg>").map(|close| &entry[open + 1..close]))
                .unwrap_or("");
            out.push_str(&format!(
                "<g class=\"legend-key\"><title>{}</title>{inner}</g>\n",
                escape(&key.label)
            ));
            x += w;
        }
        row_top += row.height;
    }
    Ok(out)
}

/// One legend entry: its swatch at `x`, its label's lines beside it.
fn paint_key(
    root: &Root<'_>,
    key: &Key,
    bars: bool,
    lines: &[String],
    (x, cy): (f64, i32),
) -> Painted {
    let look = key.look;
    let ink = colour(look.colour);
    let sx = x.round() as i32;
    if bars {
        if look.published {
            root.draw(&Rectangle::new(
                [(sx + 4, cy - 8), (sx + 22, cy + 8)],
                colour(tint(look.colour, 0.7)).filled(),
            ))?;
            root.draw(&Rectangle::new(
                [(sx + 5, cy - 7), (sx + 21, cy + 7)],
                ink.stroke_width(2),
            ))?;
            paint_marker(root, look.marker, (sx + 13, cy), 3, ink, true)?;
        } else {
            root.draw(&Rectangle::new(
                [(sx + 4, cy - 8), (sx + 22, cy + 8)],
                ink.filled(),
            ))?;
            paint_marker(root, look.marker, (sx + 13, cy), 3, WHITE, true)?;
        }
    } else {
        stroke(root, vec![(sx, cy), (sx + 26, cy)], look.dash, ink)?;
        paint_marker(root, look.marker, (sx + 13, cy), 4, ink, true)?;
    }
    for (i, line) in lines.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            ((x + SWATCH).round() as i32, cy + LEGEND_LINE * i as i32),
            font(LEGEND_PX, INK, Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Draws `marker` centred at `at`, `size` pixels from its centre to its edge.
fn paint_marker(
    root: &Root<'_>,
    marker: Marker,
    at: (i32, i32),
    size: i32,
    ink: RGBColor,
    fill: bool,
) -> Painted {
    let (x, y) = at;
    let s = size;
    let style = if fill {
        ink.filled()
    } else {
        ink.stroke_width(2)
    };
    let line = ink.stroke_width(2);
    match marker {
        Marker::Circle => root.draw(&Circle::new(at, s, style))?,
        Marker::Square => root.draw(&Rectangle::new([(x - s, y - s), (x + s, y + s)], style))?,
        Marker::Triangle => polygon(
            root,
            &[(x, y - s - 1), (x - s - 1, y + s), (x + s + 1, y + s)],
            ink,
            fill,
        )?,
        Marker::Down => polygon(
            root,
            &[(x, y + s + 1), (x - s - 1, y - s), (x + s + 1, y - s)],
            ink,
            fill,
        )?,
        Marker::Diamond => polygon(
            root,
            &[
                (x, y - s - 1),
                (x + s + 1, y),
                (x, y + s + 1),
                (x - s - 1, y),
            ],
            ink,
            fill,
        )?,
        Marker::Cross => {
            root.draw(&PathElement::new([(x - s, y - s), (x + s, y + s)], line))?;
            root.draw(&PathElement::new([(x - s, y + s), (x + s, y - s)], line))?;
        }
        Marker::Plus => {
            root.draw(&PathElement::new([(x - s - 1, y), (x + s + 1, y)], line))?;
            root.draw(&PathElement::new([(x, y - s - 1), (x, y + s + 1)], line))?;
        }
        Marker::Bar => root.draw(&Rectangle::new(
            [(x - s - 1, y - s / 2 - 1), (x + s + 1, y + s / 2 + 1)],
            style,
        ))?,
    }
    Ok(())
}

fn polygon(root: &Root<'_>, points: &[(i32, i32)], ink: RGBColor, fill: bool) -> Painted {
    if fill {
        root.draw(&Polygon::new(points.to_vec(), ink.filled()))?;
    } else {
        let mut closed = points.to_vec();
        closed.push(points[0]);
        root.draw(&PathElement::new(closed, ink.stroke_width(2)))?;
    }
    Ok(())
}

/// A bar's value as its label: `≥` before a lower bound.
fn value_text(mark: &Mark) -> String {
    if let Some(low) = mark.below {
        format!("< {}", tick_text(low))
    } else if mark.at_least {
        format!("≥ {}", tick_text(mark.median))
    } else {
        tick_text(mark.median)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick_text(20_000.0), "20k");
        assert_eq!(tick_text(1_500_000.0), "1.5M");
        assert_eq!(tick_text(0.5), "0.5");
        assert_eq!(tick_text(0.0002), "0.0002");
        assert_eq!(tick_text(100.0), "100");
        assert_eq!(tick_text(0.0), "0");
        assert_eq!(tick_text(-2.5), "-2.5");
    }

    #[test]
    fn log_ticks_exist_over_short_ranges() {
        let t = log_ticks(0.66, 1.48);
        assert!(t.len() >= 3, "{t:?}");
        let t = log_ticks(0.1, 100_000.0);
        assert_eq!(t, vec![0.1, 1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0]);
        let t = log_ticks(20.0, 300.0);
        assert!(t.contains(&50.0) && t.contains(&100.0), "{t:?}");
    }

    #[test]
    fn equal_values_still_get_a_range() {
        let m = Mark {
            median: 5.0,
            min: 5.0,
            max: 5.0,
            failed: false,
            at_least: false,
            below: None,
        };
        let a = value_axis(&[m, m], Scale::Linear, false);
        assert!(a.lo < a.hi && a.lo <= 5.0 && a.hi > 5.0);
        let a = value_axis(&[m], Scale::Log, true);
        assert!(a.log && a.lo < 5.0 && a.hi > 5.0);
        let zero = Mark {
            median: 0.0,
            min: 0.0,
            max: 0.0,
            failed: false,
            at_least: false,
            below: None,
        };
        let a = value_axis(&[zero], Scale::Log, false);
        assert!(!a.log && a.lo < a.hi);
    }

    #[test]
    fn wrapping_fits_the_width_and_never_cuts() {
        let text = "troupe-bounded\ncapacity=1000 more words here";
        let lines = wrap(text, 11.5, 120.0);
        for l in &lines {
            assert!(text_width(l, 11.5) <= 120.0 + 1e-9, "{l}");
        }
        let words = |s: &str| s.split_whitespace().collect::<String>();
        assert_eq!(words(&lines.join(" ")), words(text));
        assert!(lines.iter().all(|l| !l.contains('…')));
        // A word wider than the room breaks after a `-` or `=`, keeping every character.
        let long = "reply=deferred-pipe-continuation-sent";
        let lines = wrap(long, 12.0, 70.0);
        assert!(lines.len() > 1, "{lines:?}");
        assert_eq!(lines.concat(), long);
        assert!(
            lines[0].ends_with('=') || lines[0].ends_with('-'),
            "{lines:?}"
        );
        assert_eq!(wrap("abc", 12.0, 1000.0), ["abc"]);
    }
}
