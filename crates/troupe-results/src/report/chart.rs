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
    IntoFont, IntoLogRange, PathElement, RGBColor, Rectangle, SVGBackend, ShapeStyle, Text,
    TextStyle, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::html::escape;
use super::model::{Band, Bar, Chart, Dash, Key, Line, Mark, Plot, Scale};
use super::palette::Rgb;
use crate::stats::human;

/// The image's width, and its height without the legend.
const WIDTH: i32 = 860;
const BASE_HEIGHT: i32 = 420;
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
    if let Err(e) = painted {
        svg = fallback(&chart.title, &e.to_string());
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
    /// Each bar group's label, as lines.
    group_lines: Vec<Vec<String>>,
    /// The legend: rows of (key index, label as shown, width).
    legend: Vec<Vec<(usize, String, f64)>>,
    hidden: usize,
    failed: bool,
}

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

        let widest_tick = y
            .ticks
            .iter()
            .map(|t| text_width(&tick_text(*t), TICK_PX))
            .fold(0.0, f64::max);
        let left = (widest_tick.ceil() as i32 + 36).max(64);
        let right = WIDTH - 26;
        let mut top = if chart.subtitle.is_empty() { 44 } else { 62 };
        if matches!(&chart.plot, Plot::Lines { bands, .. } if !bands.is_empty()) {
            top += 16;
        }
        let group_lines = match &chart.plot {
            Plot::Bars { groups, .. } => {
                let width = f64::from(right - left) / groups.len().max(1) as f64 - 8.0;
                groups.iter().map(|g| wrap(g, TICK_PX, width, 3)).collect()
            }
            Plot::Lines { .. } => Vec::new(),
        };
        let label_lines = group_lines.iter().map(Vec::len).max().unwrap_or(1).max(1) as i32;
        let bottom = BASE_HEIGHT - (44 + TICK_LINE * label_lines);
        let legend = legend_rows(&chart.legend, f64::from(WIDTH - 32));
        let height = if legend.is_empty() {
            BASE_HEIGHT
        } else {
            BASE_HEIGHT + 6 + LEGEND_ROW * legend.len() as i32
        };
        Frame {
            y,
            x,
            height,
            left,
            top,
            right,
            bottom,
            group_lines,
            legend,
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

/// `text` cut (with an ellipsis) to fit `width`.
fn fit(text: &str, px: f64, width: f64) -> String {
    if text_width(text, px) <= width {
        return text.to_owned();
    }
    let mut kept: String = text.to_owned();
    while !kept.is_empty() && text_width(&kept, px) + text_width("…", px) > width {
        kept.pop();
    }
    format!("{}…", kept.trim_end())
}

/// `text` broken into at most `max_lines` lines that fit `width`, at its `\n`s and spaces;
/// a word too long for a line, and the rest of a text too long for the lines, are cut.
fn wrap(text: &str, px: f64, width: f64, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            let candidate = if line.is_empty() {
                word.to_owned()
            } else {
                format!("{line} {word}")
            };
            if text_width(&candidate, px) <= width || line.is_empty() {
                line = candidate;
            } else {
                lines.push(std::mem::take(&mut line));
                line = word.to_owned();
            }
        }
        lines.push(line);
    }
    let cut = lines.len() > max_lines;
    lines.truncate(max_lines);
    if cut {
        if let Some(last) = lines.last_mut() {
            last.push('…');
        }
    }
    lines.into_iter().map(|l| fit(&l, px, width)).collect()
}

/// The legend laid out in rows that fit `width`.
fn legend_rows(keys: &[Key], width: f64) -> Vec<Vec<(usize, String, f64)>> {
    let mut rows: Vec<Vec<(usize, String, f64)>> = Vec::new();
    let mut used = 0.0;
    for (i, key) in keys.iter().enumerate() {
        let label = fit(&clean(&key.label), LEGEND_PX, width - SWATCH - 20.0);
        let w = SWATCH + text_width(&label, LEGEND_PX) + 20.0;
        match rows.last_mut() {
            Some(row) if used + w <= width => {
                row.push((i, label, w));
                used += w;
            }
            _ => {
                rows.push(vec![(i, label, w)]);
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
    paint_legend(root, chart, frame)?;
    Ok(())
}

/// The named stretches of the x axis: shaded where `shaded`, their names above the plot.
fn paint_bands(root: &Root<'_>, frame: &Frame, bands: &[Band], map: Mapping<'_>) -> Painted {
    let Some(x) = &frame.x else { return Ok(()) };
    for band in bands {
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
        let label = fit(&clean(&band.label), BAND_PX, f64::from(right - left - 4));
        if label != "…" {
            root.draw(&Text::new(
                label,
                ((left + right) / 2, frame.top - 4),
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
        .all(|b| text_width(&tick_text(b.mark.median), VALUE_PX) + 2.0 <= bar_width + 6.0);
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
            } else {
                root.draw(&Rectangle::new([(x0, top), (x1, base)], fill.filled()))?;
            }
            let cx = (x0 + x1) / 2;
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
                    tick_text(bar.mark.median),
                    (cx, high.min(top) - 3),
                    font(VALUE_PX, INK, Pos::new(HPos::Center, VPos::Bottom)),
                ))?;
            }
        }
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
        let pixels: Vec<(i32, i32)> = points
            .iter()
            .map(|(at, m)| (map(*at, frame.y.lo).0, row(map, frame, m.median)))
            .collect();
        if pixels.len() >= 2 {
            let style = ink.stroke_width(2);
            match line.look.dash {
                Dash::Solid => root.draw(&PathElement::new(pixels.clone(), style))?,
                Dash::Dashed => root.draw(&DashedPathElement::new(pixels.clone(), 8, 5, style))?,
                Dash::Dotted => root.draw(&DashedPathElement::new(pixels.clone(), 2, 4, style))?,
                Dash::Long => root.draw(&DashedPathElement::new(pixels.clone(), 16, 5, style))?,
            }
        }
        for ((_, mark), (px, py)) in points.iter().zip(&pixels) {
            let (low, high) = (row(map, frame, mark.min), row(map, frame, mark.max));
            if high < low {
                root.draw(&ErrorBar::new_vertical(
                    *px,
                    low,
                    *py,
                    high,
                    ink.filled(),
                    8,
                ))?;
            } else {
                root.draw(&Circle::new((*px, *py), 4, ink.filled()))?;
            }
            if mark.failed {
                root.draw(&Circle::new((*px, *py), 2, WHITE.filled()))?;
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
    let plot_width = f64::from(frame.right - frame.left);
    let mut x_label = chart.x_label.clone();
    if frame.x.as_ref().is_some_and(|x| x.log) {
        x_label.push_str(", log scale");
    }
    root.draw(&Text::new(
        fit(&clean(&x_label), AXIS_PX, plot_width),
        (
            (frame.left + frame.right) / 2,
            below + TICK_LINE * lines + 6,
        ),
        font(AXIS_PX, INK, Pos::new(HPos::Center, VPos::Top)),
    ))?;
    let mut y_label = chart.y_label.clone();
    if frame.y.log {
        y_label.push_str(", log scale");
    }
    let rotated = ("sans-serif", AXIS_PX * FONT_SCALE)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(&INK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    root.draw(&Text::new(
        fit(
            &clean(&y_label),
            AXIS_PX,
            f64::from(frame.bottom - frame.top),
        ),
        (8, (frame.top + frame.bottom) / 2),
        rotated,
    ))?;
    let title = ("sans-serif", TITLE_PX * FONT_SCALE)
        .into_font()
        .style(FontStyle::Bold)
        .color(&INK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    root.draw(&Text::new(
        fit(&clean(&chart.title), TITLE_PX, f64::from(WIDTH - 24)),
        (WIDTH / 2, 12),
        title,
    ))?;
    if !chart.subtitle.is_empty() {
        root.draw(&Text::new(
            fit(&clean(&chart.subtitle), SUBTITLE_PX, f64::from(WIDTH - 24)),
            (WIDTH / 2, 36),
            font(SUBTITLE_PX, MUTED, Pos::new(HPos::Center, VPos::Top)),
        ))?;
    }
    Ok(())
}

/// The legend, under the plot, each row centred.
fn paint_legend(root: &Root<'_>, chart: &Chart, frame: &Frame) -> Painted {
    let bars = matches!(chart.plot, Plot::Bars { .. });
    for (r, entries) in frame.legend.iter().enumerate() {
        let cy = BASE_HEIGHT + 6 + LEGEND_ROW * r as i32 + LEGEND_ROW / 2;
        let width: f64 = entries.iter().map(|(_, _, w)| w).sum();
        let mut x = (f64::from(WIDTH) - width) / 2.0;
        for (k, label, w) in entries {
            let look = chart.legend[*k].look;
            let ink = colour(look.colour);
            let sx = x.round() as i32;
            if bars {
                root.draw(&Rectangle::new(
                    [(sx + 6, cy - 6), (sx + 20, cy + 6)],
                    ink.filled(),
                ))?;
            } else {
                let ends = [(sx, cy), (sx + 24, cy)];
                let style = ink.stroke_width(2);
                match look.dash {
                    Dash::Solid => root.draw(&PathElement::new(ends, style))?,
                    Dash::Dashed => root.draw(&DashedPathElement::new(ends, 8, 5, style))?,
                    Dash::Dotted => root.draw(&DashedPathElement::new(ends, 2, 4, style))?,
                    Dash::Long => root.draw(&DashedPathElement::new(ends, 16, 5, style))?,
                }
                root.draw(&Circle::new((sx + 12, cy), 4, ink.filled()))?;
            }
            root.draw(&Text::new(
                label.clone(),
                ((x + SWATCH).round() as i32, cy),
                font(LEGEND_PX, INK, Pos::new(HPos::Left, VPos::Center)),
            ))?;
            x += w;
        }
    }
    Ok(())
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
        };
        let a = value_axis(&[zero], Scale::Log, false);
        assert!(!a.log && a.lo < a.hi);
    }

    #[test]
    fn wrapping_respects_width_and_lines() {
        let lines = wrap(
            "troupe-bounded\ncapacity=1000 more words here",
            11.5,
            120.0,
            3,
        );
        assert!(lines.len() <= 3);
        for l in &lines {
            assert!(text_width(l, 11.5) <= 120.0 + 1e-9, "{l}");
        }
        assert_eq!(fit("abc", 12.0, 1000.0), "abc");
        assert!(fit(&"x".repeat(200), 12.0, 100.0).ends_with('…'));
    }
}
