//! Charts of a benchmark report, as SVG files (plotters' SVG backend: text stays `<text>`).
//!
//! - `store-summary.svg`: the seed's chart. One panel per store; for each phase and request
//!   kind, the median (p50) and the 90% line (p90) latency, as bars on a log axis.
//! - `store-throughput.svg`: answers per second for each phase and kind, the stores side by
//!   side.
//! - `store-timeline-<contender>.svg`: one store's first run, second by second: p99 latency per
//!   kind (log axis) above, answers per second per kind below, the phase starts as dashed
//!   lines, and the seconds the search breaker was open (or half-open) as shaded bands.
//! - `store-capacity.svg` (when the report has a capacity search): the open model's p99
//!   against the offered rate, one line per store, and the p99 bound.
//!
//! Figures over several runs are medians over the runs. What cannot be drawn (NaN, infinite
//! or negative figures, phases without requests, stores missing from the report) is left
//! out; latencies under 0.1 ms are drawn at 0.1 ms, where the log axes end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bench::{BenchReport, ClosedRun, StoreKind};
use crate::load::{Kind, Summary};

/// The lowest latency the log axes show (ms); smaller latencies are drawn there.
const FLOOR_MS: f64 = 0.1;
/// The highest latency the log axes may reach (ms), against absurd figures.
const CEILING_MS: f64 = 1e9;
/// The most seconds a timeline spans, against absurd second numbers.
const MAX_SECONDS: u64 = 1_000_000;
/// Room on the right of the timelines for their legends (px).
const LEGEND_ROOM: i32 = 200;

const SUMMARY_SIZE: (u32, u32) = (1000, 600);
const TIMELINE_SIZE: (u32, u32) = (1000, 720);

const TEXT: RGBColor = RGBColor(30, 30, 30);
const RULE: RGBColor = RGBColor(110, 110, 110);
const BREAKER_OPEN: RGBColor = RGBColor(214, 39, 40);
const BREAKER_HALF_OPEN: RGBColor = RGBColor(230, 170, 20);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Drawn = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// Writes the report's charts as SVG files into `dir`; returns their paths.
///
/// Always writes `store-summary.svg` and `store-throughput.svg` (saying so when the report
/// has no closed runs), one `store-timeline-<contender>.svg` per store that has a closed run,
/// and `store-capacity.svg` when the report has capacity searches. Figures that cannot be
/// drawn are skipped rather than reported. An error means the directory or a file could not
/// be written (or plotters failed to draw, which the cleaned figures should never make it do).
pub fn write_charts(report: &BenchReport, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the chart directory {}", dir.display()))?;
    let mut written = Vec::new();
    let summary = render(SUMMARY_SIZE, |root| summary_chart(report, root))?;
    written.push(save(dir, "store-summary.svg", &summary)?);
    let throughput = render(SUMMARY_SIZE, |root| throughput_chart(report, root))?;
    written.push(save(dir, "store-throughput.svg", &throughput)?);
    for store in stores_of(report) {
        let first = report
            .closed
            .iter()
            .filter(|run| run.store == store)
            .min_by_key(|run| run.run);
        if let Some(run) = first {
            let svg = render(TIMELINE_SIZE, |root| timeline_chart(run, root))?;
            let name = format!("store-timeline-{}.svg", store.contender());
            written.push(save(dir, &name, &svg)?);
        }
    }
    if !report.capacity.is_empty() {
        let svg = render(SUMMARY_SIZE, |root| capacity_chart(report, root))?;
        written.push(save(dir, "store-capacity.svg", &svg)?);
    }
    Ok(written)
}

/// Draws one chart into an SVG document held in memory.
fn render(size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Drawn) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present())
            .map_err(|e| anyhow!("drawing a chart: {e}"))?;
    }
    Ok(svg)
}

fn save(dir: &Path, name: &str, svg: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// The figures.

/// The stores with closed runs, in `StoreKind` order.
fn stores_of(report: &BenchReport) -> Vec<StoreKind> {
    let mut stores: Vec<StoreKind> = report.closed.iter().map(|run| run.store).collect();
    stores.sort();
    stores.dedup();
    stores
}

/// The phases in the report's order, then any others the runs name.
fn phases_of(report: &BenchReport) -> Vec<String> {
    let mut phases: Vec<String> = Vec::new();
    let named = report.closed.iter().flat_map(|run| {
        let summaries = run.report.summaries.iter().map(|s| &s.phase);
        let starts = run.report.phase_starts.iter().map(|(name, _)| name);
        summaries.chain(starts)
    });
    for name in report.phases.iter().chain(named) {
        if !phases.contains(name) {
            phases.push(name.clone());
        }
    }
    phases
}

/// How many runs a store has.
fn runs_of(report: &BenchReport, store: StoreKind) -> usize {
    let mut runs: Vec<usize> = report
        .closed
        .iter()
        .filter(|run| run.store == store)
        .map(|run| run.run)
        .collect();
    runs.sort_unstable();
    runs.dedup();
    runs.len()
}

/// The median of the finite values, if there is one.
fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        Some(values[middle])
    } else {
        Some((values[middle - 1] + values[middle]) / 2.0)
    }
}

/// One figure of one store, phase and kind: the median over the store's runs of what `pick`
/// takes from each run's summary (`None` leaves a run out).
fn figure(
    report: &BenchReport,
    store: StoreKind,
    phase: &str,
    kind: Kind,
    pick: impl Fn(&Summary) -> Option<f64>,
) -> Option<f64> {
    median(
        report
            .closed
            .iter()
            .filter(|run| run.store == store)
            .filter_map(|run| {
                run.report
                    .summaries
                    .iter()
                    .find(|s| s.phase == phase && s.kind == kind)
            })
            .filter_map(pick),
    )
}

/// A latency, if the phase had requests to measure it over.
fn latency(summary: &Summary, value: f64) -> Option<f64> {
    (summary.requests > 0 && value.is_finite()).then_some(value)
}

/// The bounds of a log latency axis holding `values`: whole powers of ten, from at most 1 ms
/// (at least 0.1 ms) to above the largest value, two decades at least.
fn log_bounds(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (mut low, mut high) = (f64::INFINITY, 0.0_f64);
    for value in values.into_iter().filter(|v| v.is_finite()) {
        let value = value.clamp(FLOOR_MS, CEILING_MS);
        low = low.min(value);
        high = high.max(value);
    }
    if !low.is_finite() {
        return (1.0, 1000.0);
    }
    let bottom = 10_f64.powf(low.log10().floor()).clamp(FLOOR_MS, 1.0);
    let top = 10_f64.powf((high * 1.5).log10().ceil()).max(bottom * 100.0);
    // A hair wider, so that rounding in plotters' key points keeps the end labels.
    (bottom * (1.0 - 1e-9), top * (1.0 + 1e-9))
}

/// The top of a linear axis from 0 holding `values`.
fn linear_top(values: impl IntoIterator<Item = f64>) -> f64 {
    let high = values
        .into_iter()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .fold(0.0_f64, f64::max);
    (high * 1.15).clamp(1.0, 1e15)
}

fn fmt_ms(value: f64) -> String {
    if value < 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

fn fmt_number(value: f64) -> String {
    if value.abs() >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn runs_note(runs: usize) -> String {
    match runs {
        0 => String::new(),
        1 => ", 1 run".to_owned(),
        n => format!(", median over {n} runs"),
    }
}

// ---------------------------------------------------------------------------------------------
// Styles.

fn store_color(store: StoreKind) -> RGBColor {
    match store {
        StoreKind::Troupe => RGBColor(31, 119, 180),
        StoreKind::Threads => RGBColor(214, 39, 40),
    }
}

/// The lighter shade of a store's color, for its medians.
fn store_light(store: StoreKind) -> RGBColor {
    match store {
        StoreKind::Troupe => RGBColor(140, 190, 225),
        StoreKind::Threads => RGBColor(245, 150, 130),
    }
}

fn kind_color(kind: Kind) -> RGBColor {
    match kind {
        Kind::Index => RGBColor(44, 160, 44),
        Kind::Search => RGBColor(255, 127, 14),
        Kind::Payment => RGBColor(148, 103, 189),
    }
}

fn text(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size)).pos(Pos::new(h, v))
}

fn bold(size: f64, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size, FontStyle::Bold)).pos(Pos::new(h, v))
}

fn titled<'a>(
    root: &Area<'a>,
    title: &str,
) -> Result<Area<'a>, DrawingAreaErrorKind<std::io::Error>> {
    root.titled(title, bold(22.0, HPos::Center, VPos::Top))
}

/// Says in the middle of `area` that there is nothing to draw.
fn no_data(area: &Area<'_>, message: &str) -> Drawn {
    let (w, h) = area.dim_in_pixel();
    let style = text(18.0, HPos::Center, VPos::Center).color(&RULE);
    area.draw_text(message, &style, ((w / 2) as i32, (h / 2) as i32))
}

// ---------------------------------------------------------------------------------------------
// Category charts: x = (phase, kind), evenly spaced.

/// The categories: every kind within every phase.
fn categories(phases: &[String]) -> Vec<(usize, Kind)> {
    (0..phases.len())
        .flat_map(|phase| Kind::ALL.into_iter().map(move |kind| (phase, kind)))
        .collect()
}

/// Draws the category axis' labels (each kind under its category, each phase under its
/// group) and rules between the groups. `bottom` and `top` are the y axis' ends.
fn draw_categories<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    root: &Area<'_>,
    phases: &[String],
    (bottom, top): (f64, f64),
) -> Drawn {
    let per_phase = Kind::ALL.len();
    let rules: Vec<PathElement<(f64, f64)>> = (1..phases.len())
        .map(|p| {
            let x = (p * per_phase) as f64 - 0.5;
            PathElement::new(vec![(x, bottom), (x, top)], RULE.mix(0.6))
        })
        .collect();
    chart.draw_series(rules)?;
    let kind_style = text(12.0, HPos::Center, VPos::Top).color(&TEXT);
    for (i, (_, kind)) in categories(phases).into_iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64, bottom));
        root.draw(&PathElement::new(vec![(x, y), (x, y + 5)], TEXT))?;
        root.draw_text(kind.name(), &kind_style, (x, y + 7))?;
    }
    let phase_style = bold(13.0, HPos::Center, VPos::Top).color(&TEXT);
    for (p, name) in phases.iter().enumerate() {
        let center = (p * per_phase) as f64 + (per_phase as f64 - 1.0) / 2.0;
        let (x, y) = chart.backend_coord(&(center, bottom));
        root.draw_text(name, &phase_style, (x, y + 25))?;
    }
    Ok(())
}

fn category_axis(n: usize) -> std::ops::Range<f64> {
    -0.5..n as f64 - 0.5
}

/// A bar's left and right ends: bar `j` of `of` in category `i`.
fn bar_span(i: usize, j: usize, of: usize) -> (f64, f64) {
    let width = 0.8 / of.max(1) as f64;
    let left = i as f64 - 0.4 + j as f64 * width;
    (left + width * 0.06, left + width * 0.94)
}

fn legend_box(color: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
}

fn legend_line(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style)
}

fn summary_chart(report: &BenchReport, root: &Area<'_>) -> Drawn {
    let stores = stores_of(report);
    let phases = phases_of(report);
    let categories = categories(&phases);
    let runs = stores
        .iter()
        .map(|store| runs_of(report, *store))
        .max()
        .unwrap_or(0);
    let title = format!(
        "Latency per phase and request kind: median (p50) and 90% line (p90){}",
        runs_note(runs)
    );
    let area = titled(root, &title)?;
    if stores.is_empty() || categories.is_empty() {
        return no_data(&area, "no closed runs in this report");
    }
    // Per store, per category: [p50, p90].
    let figures: Vec<Vec<[Option<f64>; 2]>> = stores
        .iter()
        .map(|&store| {
            categories
                .iter()
                .map(|&(phase, kind)| {
                    let phase = &phases[phase];
                    [
                        figure(report, store, phase, kind, |s| latency(s, s.p50_ms)),
                        figure(report, store, phase, kind, |s| latency(s, s.p90_ms)),
                    ]
                })
                .collect()
        })
        .collect();
    let (bottom, top) = log_bounds(figures.iter().flatten().flatten().flatten().copied());
    let panels = area.split_evenly((1, stores.len()));
    for ((panel, &store), figures) in panels.iter().zip(&stores).zip(&figures) {
        let mut chart = ChartBuilder::on(panel)
            .caption(store.contender(), bold(17.0, HPos::Center, VPos::Top))
            .margin(10)
            .x_label_area_size(66)
            .y_label_area_size(62)
            .build_cartesian_2d(category_axis(categories.len()), (bottom..top).log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|_| String::new())
            .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
            .y_label_formatter(&|v| fmt_ms(*v))
            .x_desc("phase / request kind")
            .y_desc("latency (ms, log scale)")
            .label_style(text(12.0, HPos::Center, VPos::Center).color(&TEXT))
            .draw()?;
        draw_categories(&mut chart, root, &phases, (bottom, top))?;
        let series = [
            ("p50 (median)", store_light(store)),
            ("p90 (90% line)", store_color(store)),
        ];
        for (j, (label, color)) in series.into_iter().enumerate() {
            let bars: Vec<Rectangle<(f64, f64)>> = figures
                .iter()
                .enumerate()
                .filter_map(|(i, values)| {
                    let value = values[j]?;
                    let (left, right) = bar_span(i, j, series.len());
                    Some(Rectangle::new(
                        [(left, bottom), (right, value.clamp(bottom, top))],
                        color.filled(),
                    ))
                })
                .collect();
            chart
                .draw_series(bars)?
                .label(label)
                .legend(legend_box(color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RULE.mix(0.5))
            .draw()?;
    }
    Ok(())
}

fn throughput_chart(report: &BenchReport, root: &Area<'_>) -> Drawn {
    let stores = stores_of(report);
    let phases = phases_of(report);
    let categories = categories(&phases);
    let runs = stores
        .iter()
        .map(|store| runs_of(report, *store))
        .max()
        .unwrap_or(0);
    let title = format!(
        "Throughput per phase and request kind (answers of any status per second{})",
        runs_note(runs)
    );
    let area = titled(root, &title)?;
    if stores.is_empty() || categories.is_empty() {
        return no_data(&area, "no closed runs in this report");
    }
    // Per store, per category.
    let figures: Vec<Vec<Option<f64>>> = stores
        .iter()
        .map(|&store| {
            categories
                .iter()
                .map(|&(phase, kind)| {
                    figure(report, store, &phases[phase], kind, |s| {
                        Some(s.throughput).filter(|t| *t >= 0.0)
                    })
                })
                .collect()
        })
        .collect();
    let top = linear_top(figures.iter().flatten().flatten().copied());
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .margin_top(20)
        .x_label_area_size(66)
        .y_label_area_size(70)
        .build_cartesian_2d(category_axis(categories.len()), 0.0..top)?;
    chart
        .configure_mesh()
        .max_light_lines(4)
        .disable_x_mesh()
        .x_label_formatter(&|_| String::new())
        .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
        .y_label_formatter(&|v| fmt_number(*v))
        .x_desc("phase / request kind")
        .y_desc("throughput (answered requests/s)")
        .label_style(text(12.0, HPos::Center, VPos::Center).color(&TEXT))
        .draw()?;
    draw_categories(&mut chart, root, &phases, (0.0, top))?;
    for (j, (&store, values)) in stores.iter().zip(&figures).enumerate() {
        let color = store_color(store);
        let bars: Vec<Rectangle<(f64, f64)>> = values
            .iter()
            .enumerate()
            .filter_map(|(i, value)| {
                let value = (*value)?;
                let (left, right) = bar_span(i, j, stores.len());
                Some(Rectangle::new(
                    [(left, 0.0), (right, value.min(top))],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(store.contender())
            .legend(legend_box(color));
        // The figure above each bar, so that a zero shows as one.
        let figure_style = text(10.0, HPos::Center, VPos::Bottom).color(&TEXT);
        for (i, value) in values.iter().enumerate() {
            if let Some(value) = value {
                let (left, right) = bar_span(i, j, stores.len());
                let (x, y) = chart.backend_coord(&((left + right) / 2.0, value.min(top)));
                root.draw_text(&fmt_number(*value), &figure_style, (x, y - 2))?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RULE.mix(0.5))
        .draw()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Timelines.

/// A stretch of seconds in which the search breaker was not closed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Band {
    from: f64,
    to: f64,
    half_open: bool,
}

/// The breaker's open and half-open stretches: each sample covers its second; neighbouring
/// samples in the same state make one band.
fn breaker_bands(samples: &[(u64, String)]) -> Vec<Band> {
    let mut samples: Vec<(u64, bool)> = samples
        .iter()
        .filter(|(second, _)| *second < MAX_SECONDS)
        .filter_map(|(second, state)| {
            match state.trim().to_ascii_lowercase().replace('-', "_").as_str() {
                "open" => Some((*second, false)),
                "half_open" => Some((*second, true)),
                _ => None,
            }
        })
        .collect();
    samples.sort_unstable();
    samples.dedup();
    let mut bands: Vec<Band> = Vec::new();
    for (second, half_open) in samples {
        let from = second as f64;
        match bands.last_mut() {
            Some(last) if last.half_open == half_open && from <= last.to => {
                last.to = last.to.max(from + 1.0);
            }
            _ => bands.push(Band {
                from,
                to: from + 1.0,
                half_open,
            }),
        }
    }
    bands
}

/// Splits points at gaps of more than one second, so lines do not bridge silent seconds.
fn segments(points: &[(u64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut previous: Option<u64> = None;
    for &(second, value) in points {
        let point = (second as f64 + 0.5, value);
        match (previous, out.last_mut()) {
            (Some(p), Some(current)) if second <= p + 1 => current.push(point),
            _ => out.push(vec![point]),
        }
        previous = Some(second);
    }
    out
}

/// How a legend entry is shown.
#[derive(Clone, Copy)]
enum Swatch {
    /// A short line, as the series is drawn.
    Line(ShapeStyle),
    /// A filled box.
    Block(RGBAColor),
}

/// Draws a legend with its top left corner at `(x, y)` (pixels of `root`). Plotters' own
/// legend is clipped to the plotting area; this one may stand beside it.
fn draw_legend(root: &Area<'_>, (x, y): (i32, i32), entries: &[(String, Swatch)]) -> Drawn {
    if entries.is_empty() {
        return Ok(());
    }
    let style = text(12.0, HPos::Left, VPos::Center).color(&TEXT);
    let mut text_width = 0;
    for (label, _) in entries {
        text_width = text_width.max(root.estimate_text_size(label, &style)?.0 as i32);
    }
    let row = 18;
    let width = text_width + 50;
    let height = row * entries.len() as i32 + 8;
    root.draw(&Rectangle::new(
        [(x, y), (x + width, y + height)],
        WHITE.filled(),
    ))?;
    root.draw(&Rectangle::new(
        [(x, y), (x + width, y + height)],
        RULE.mix(0.5),
    ))?;
    for (i, (label, swatch)) in entries.iter().enumerate() {
        let middle = y + 4 + row * i as i32 + row / 2;
        match *swatch {
            Swatch::Line(line) => {
                root.draw(&PathElement::new(
                    vec![(x + 8, middle), (x + 30, middle)],
                    line,
                ))?;
            }
            Swatch::Block(color) => {
                root.draw(&Rectangle::new(
                    [(x + 8, middle - 6), (x + 30, middle + 6)],
                    color.filled(),
                ))?;
            }
        }
        root.draw_text(label, &style, (x + 38, middle))?;
    }
    Ok(())
}

/// The breaker's states as drawn: half-open or not, color, name.
const BREAKER_STATES: [(bool, RGBColor, f64, &str); 2] = [
    (false, BREAKER_OPEN, 0.16, "search breaker open"),
    (true, BREAKER_HALF_OPEN, 0.22, "search breaker half-open"),
];

/// Draws the breaker bands across the plot; returns their legend entries.
fn draw_bands<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    bands: &[Band],
    (bottom, top): (f64, f64),
) -> Result<Vec<(String, Swatch)>, DrawingAreaErrorKind<std::io::Error>> {
    let mut legend = Vec::new();
    for (half_open, color, alpha, name) in BREAKER_STATES {
        let rects: Vec<Rectangle<(f64, f64)>> = bands
            .iter()
            .filter(|band| band.half_open == half_open)
            .map(|band| {
                Rectangle::new(
                    [(band.from, bottom), (band.to, top)],
                    color.mix(alpha).filled(),
                )
            })
            .collect();
        if rects.is_empty() {
            continue;
        }
        chart.draw_series(rects)?;
        legend.push((name.to_owned(), Swatch::Block(color.mix(alpha + 0.1))));
    }
    Ok(legend)
}

/// Draws a dashed rule at each phase start; names the phases at the top if `names`.
fn draw_phase_starts<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    root: &Area<'_>,
    starts: &[(String, f64)],
    (bottom, top): (f64, f64),
    names: bool,
) -> Drawn {
    let style = bold(12.0, HPos::Left, VPos::Top).color(&TEXT);
    for (name, at) in starts {
        chart.draw_series(DashedLineSeries::new(
            vec![(*at, bottom), (*at, top)],
            6,
            4,
            RULE.stroke_width(1),
        ))?;
        if names {
            let (x, y) = chart.backend_coord(&(*at, top));
            root.draw_text(name, &style, (x + 4, y + 4))?;
        }
    }
    Ok(())
}

fn timeline_chart(run: &ClosedRun, root: &Area<'_>) -> Drawn {
    let report = &run.report;
    let title = format!(
        "{}: p99 latency and answers, second by second (run {})",
        run.store.contender(),
        run.run + 1
    );
    let area = titled(root, &title)?;
    let seconds: Vec<_> = report
        .seconds
        .iter()
        .filter(|s| s.second < MAX_SECONDS)
        .collect();
    let starts: Vec<(String, f64)> = report
        .phase_starts
        .iter()
        .filter(|(_, at)| at.is_finite() && *at >= 0.0 && *at < MAX_SECONDS as f64)
        .cloned()
        .collect();
    let bands = breaker_bands(&report.breaker);
    let last_second = seconds.iter().map(|s| s.second).max();
    let x_max = [
        last_second.map_or(0.0, |s| s as f64 + 1.0),
        starts.iter().map(|(_, at)| at + 1.0).fold(0.0, f64::max),
        bands.iter().map(|band| band.to).fold(0.0, f64::max),
        1.0,
    ]
    .into_iter()
    .fold(0.0, f64::max);

    let height = area.dim_in_pixel().1 as i32;
    let (upper, lower) = area.split_vertically(height * 57 / 100);

    // p99 latency per second, per kind; a line breaks where a kind had no answers.
    let (bottom, top) = log_bounds(seconds.iter().map(|s| s.p99_ms));
    let mut chart = ChartBuilder::on(&upper)
        .margin(10)
        .margin_right(LEGEND_ROOM)
        .x_label_area_size(40)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..x_max, (bottom..top).log_scale())?;
    chart
        .configure_mesh()
        .max_light_lines(4)
        .x_label_formatter(&|v| fmt_number(*v))
        .y_label_formatter(&|v| fmt_ms(*v))
        .x_desc("seconds since the run began")
        .y_desc("p99 latency (ms, log scale)")
        .draw()?;
    let mut legend = draw_bands(&mut chart, &bands, (bottom, top))?;
    draw_phase_starts(&mut chart, root, &starts, (bottom, top), true)?;
    for kind in Kind::ALL {
        let mut by_second: BTreeMap<u64, f64> = BTreeMap::new();
        for s in seconds
            .iter()
            .filter(|s| s.kind == kind && s.p99_ms.is_finite())
        {
            let p99 = by_second.entry(s.second).or_insert(s.p99_ms);
            *p99 = p99.max(s.p99_ms);
        }
        let points: Vec<(u64, f64)> = by_second
            .into_iter()
            .map(|(second, p99)| (second, p99.clamp(bottom, top)))
            .collect();
        let style = kind_color(kind).filled().stroke_width(2);
        for segment in segments(&points) {
            chart.draw_series(LineSeries::new(segment, style).point_size(2))?;
        }
        if !points.is_empty() {
            legend.push((format!("{} p99", kind.name()), Swatch::Line(style)));
        }
    }
    let (x, y) = chart.backend_coord(&(x_max, top));
    draw_legend(root, (x + 14, y), &legend)?;

    // Answers per second, per kind; a second without answers counts 0.
    let mut answers: BTreeMap<(Kind, u64), u64> = BTreeMap::new();
    for s in &seconds {
        *answers.entry((s.kind, s.second)).or_insert(0) += s.answers;
    }
    let top = linear_top(answers.values().map(|n| *n as f64));
    let mut chart = ChartBuilder::on(&lower)
        .margin(10)
        .margin_right(LEGEND_ROOM)
        .x_label_area_size(40)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..x_max, 0.0..top)?;
    chart
        .configure_mesh()
        .max_light_lines(4)
        .x_label_formatter(&|v| fmt_number(*v))
        .y_label_formatter(&|v| fmt_number(*v))
        .x_desc("seconds since the run began")
        .y_desc("answers per second")
        .draw()?;
    let mut legend = draw_bands(&mut chart, &bands, (0.0, top))?;
    draw_phase_starts(&mut chart, root, &starts, (0.0, top), false)?;
    if let Some(last) = last_second {
        for kind in Kind::ALL {
            let style = kind_color(kind).filled().stroke_width(2);
            let points: Vec<(f64, f64)> = (0..=last)
                .map(|second| {
                    let n = answers.get(&(kind, second)).copied().unwrap_or(0);
                    (second as f64 + 0.5, (n as f64).min(top))
                })
                .collect();
            chart.draw_series(LineSeries::new(points, style))?;
            legend.push((format!("{} answers/s", kind.name()), Swatch::Line(style)));
        }
    }
    let (x, y) = chart.backend_coord(&(x_max, top));
    draw_legend(root, (x + 14, y), &legend)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Capacity.

/// One capacity search as drawn.
struct CapacityLine {
    store: StoreKind,
    /// The highest rate that held, if any (and finite).
    held: Option<f64>,
    /// (offered rate, p99 ms), by rate, the undrawable left out.
    points: Vec<(f64, f64)>,
}

fn capacity_chart(report: &BenchReport, root: &Area<'_>) -> Drawn {
    let area = titled(
        root,
        "Capacity (open model, GET /, healthy backends): p99 latency against offered rate",
    )?;
    // The points of each store's first run; what held, as the median over its runs.
    let lines: Vec<CapacityLine> = report
        .capacity
        .iter()
        .enumerate()
        .filter(|(i, capacity)| {
            !report.capacity[..*i]
                .iter()
                .any(|earlier| earlier.store == capacity.store)
        })
        .map(|(_, capacity)| {
            let mut points: Vec<(f64, f64)> = capacity
                .points
                .iter()
                .filter(|p| p.rate.is_finite() && p.rate >= 0.0 && p.p99_ms.is_finite())
                .map(|p| (p.rate, p.p99_ms))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let helds: Vec<f64> = report
                .capacity
                .iter()
                .filter(|c| c.store == capacity.store)
                .filter_map(|c| c.held.filter(|rate| rate.is_finite()))
                .collect();
            let held = (!helds.is_empty()).then(|| crate::report::median(&helds));
            CapacityLine {
                store: capacity.store,
                held,
                points,
            }
        })
        .collect();
    let bound = Some(report.open_p99_ms).filter(|ms| ms.is_finite() && *ms > 0.0);
    let x_max = linear_top(
        lines
            .iter()
            .flat_map(|line| line.points.iter().map(|p| p.0)),
    );
    let (bottom, top) = log_bounds(
        lines
            .iter()
            .flat_map(|line| line.points.iter().map(|p| p.1))
            .chain(bound),
    );
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .margin_top(20)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, (bottom..top).log_scale())?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| fmt_number(*v))
        .y_label_formatter(&|v| fmt_ms(*v))
        .x_desc("offered rate (requests/s)")
        .y_desc("p99 latency (ms, log scale)")
        .draw()?;
    if let Some(bound) = bound {
        let style = RULE.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, bound), (x_max, bound)],
                8,
                5,
                style,
            ))?
            .label(format!("p99 bound ({} ms)", fmt_number(bound)))
            .legend(legend_line(style));
    }
    for CapacityLine {
        store,
        held,
        points,
    } in lines
    {
        let style = store_color(store).filled().stroke_width(2);
        let held = match held {
            Some(rate) => format!("held {} req/s", fmt_number(rate)),
            None => "held no rate".to_owned(),
        };
        let points: Vec<(f64, f64)> = points
            .into_iter()
            .map(|(rate, p99)| (rate, p99.clamp(bottom, top)))
            .collect();
        chart
            .draw_series(LineSeries::new(points, style).point_size(4))?
            .label(format!("{} ({held})", store.contender()))
            .legend(legend_line(style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(RULE.mix(0.5))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Capacity;
    use crate::load::{ClosedReport, OpenPoint, Second};

    const PHASES: [&str; 3] = ["healthy", "search_hangs", "recovered"];

    /// A directory under the system's temporary directory, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "troupe-store-chart-{test}-{}-{nanos}",
                std::process::id()
            ));
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn summary(phase: &str, kind: Kind, p50: f64, p90: f64, throughput: f64) -> Summary {
        Summary {
            phase: phase.to_owned(),
            kind,
            requests: 100,
            ok: 100,
            rejected: 0,
            errors: 0,
            failed: 0,
            unfinished: 0,
            throughput,
            p50_ms: p50,
            p90_ms: p90,
            p99_ms: p90 * 2.0,
            p999_ms: p90 * 3.0,
            max_ms: p90 * 4.0,
        }
    }

    fn second(second: u64, kind: Kind, answers: u64, p99: f64) -> Second {
        Second {
            second,
            kind,
            answers,
            ok: answers,
            p50_ms: p99 / 2.0,
            p99_ms: p99,
        }
    }

    /// A closed run: the baseline's latencies reach 30 s while search hangs, and its answers
    /// stop; the troupe store stays fast and opens its breaker.
    fn closed_run(store: StoreKind, run: usize, scale: f64) -> ClosedRun {
        let hanging = store == StoreKind::Threads;
        let mut summaries = Vec::new();
        for phase in PHASES {
            for kind in Kind::ALL {
                let slow = hanging && phase == "search_hangs";
                let (p50, p90) = if slow {
                    (30_000.0, 30_050.0)
                } else if kind == Kind::Index {
                    (0.05, 0.4)
                } else {
                    (21.0 * scale, 24.0 * scale)
                };
                let throughput = if slow { 0.0 } else { 290.0 * scale };
                summaries.push(summary(phase, kind, p50, p90, throughput));
            }
        }
        let mut seconds = Vec::new();
        for s in 0..9 {
            for kind in Kind::ALL {
                let silent =
                    hanging && (3..6).contains(&s) || hanging && s == 6 && kind == Kind::Search;
                if !silent {
                    let p99 = if kind == Kind::Index {
                        0.0
                    } else {
                        25.0 + s as f64
                    };
                    seconds.push(second(s, kind, 280 + s, p99));
                }
            }
        }
        if hanging {
            seconds.push(second(6, Kind::Search, 250, 30_010.0));
        }
        let breaker = if hanging {
            Vec::new()
        } else {
            (0..9)
                .map(|s| {
                    let state = match s {
                        3 | 4 => "open",
                        5 => "half_open",
                        _ => "closed",
                    };
                    (s, state.to_owned())
                })
                .collect()
        };
        ClosedRun {
            store,
            run,
            report: ClosedReport {
                summaries,
                seconds,
                breaker,
                phase_starts: vec![
                    ("healthy".to_owned(), 0.0),
                    ("search_hangs".to_owned(), 3.0),
                    ("recovered".to_owned(), 6.0),
                ],
            },
            stats: None,
        }
    }

    fn point(rate: f64, p99: f64) -> OpenPoint {
        OpenPoint {
            rate,
            achieved: rate,
            errors: 0,
            p50_ms: p99 / 3.0,
            p99_ms: p99,
            p999_ms: p99 * 2.0,
        }
    }

    fn report() -> BenchReport {
        BenchReport {
            closed: vec![
                closed_run(StoreKind::Troupe, 0, 1.0),
                closed_run(StoreKind::Threads, 0, 1.0),
                closed_run(StoreKind::Troupe, 1, 1.2),
                closed_run(StoreKind::Threads, 1, 1.1),
            ],
            capacity: vec![
                Capacity {
                    run: 0,
                    store: StoreKind::Troupe,
                    points: vec![point(2_000.0, 0.8), point(5_000.0, 2.5)],
                    held: Some(5_000.0),
                },
                Capacity {
                    run: 0,
                    store: StoreKind::Threads,
                    points: vec![point(2_000.0, 1.5), point(5_000.0, 40.0)],
                    held: Some(2_000.0),
                },
            ],
            phases: PHASES.iter().map(|p| (*p).to_owned()).collect(),
            users_per_kind: 5,
            open_p99_ms: 10.0,
        }
    }

    fn read(path: &Path) -> String {
        let svg = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        assert!(!svg.is_empty(), "{} is empty", path.display());
        assert!(svg.starts_with("<svg"), "{} is not SVG", path.display());
        assert!(
            svg.trim_end().ends_with("</svg>"),
            "{} is cut short",
            path.display()
        );
        svg
    }

    #[test]
    fn median_of_runs() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, f64::NAN, 2.0, 3.0]), Some(2.5));
        assert_eq!(median([f64::NAN, f64::INFINITY]), None);
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn breaker_bands_merge_neighbours() {
        let samples: Vec<(u64, String)> = [
            (5, "half_open"),
            (1, "closed"),
            (2, "open"),
            (3, "open"),
            (4, "open"),
            (7, "open"),
        ]
        .iter()
        .map(|(s, state)| (*s, (*state).to_owned()))
        .collect();
        let bands = breaker_bands(&samples);
        let spans: Vec<(f64, f64, bool)> =
            bands.iter().map(|b| (b.from, b.to, b.half_open)).collect();
        assert_eq!(
            spans,
            vec![(2.0, 5.0, false), (5.0, 6.0, true), (7.0, 8.0, false)]
        );
    }

    #[test]
    fn charts_of_a_report() {
        let dir = TempDir::new("report");
        let report = report();
        let paths = write_charts(&report, &dir.0).expect("the charts are written");
        let names: Vec<String> = paths
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        let expected = [
            "store-summary.svg",
            "store-throughput.svg",
            "store-timeline-troupe-store.svg",
            "store-timeline-thread-per-request.svg",
            "store-capacity.svg",
        ];
        assert_eq!(names, expected);
        let contenders = ["troupe-store", "thread-per-request"];
        for name in expected {
            let path = dir.0.join(name);
            assert!(path.is_file(), "{name} is missing");
            let svg = read(&path);
            // Every chart names the stores it shows.
            for contender in contenders {
                let shown = !name.starts_with("store-timeline") || name.contains(contender);
                if shown {
                    assert!(svg.contains(contender), "{name} does not name {contender}");
                }
            }
            // Every chart of the closed runs names the phases (the capacity search has none).
            if name != "store-capacity.svg" {
                for phase in PHASES {
                    assert!(svg.contains(phase), "{name} does not name {phase}");
                }
            }
        }
        let summary = read(&dir.0.join("store-summary.svg"));
        for label in [
            "p50 (median)",
            "p90 (90% line)",
            "latency (ms, log scale)",
            "median over 2 runs",
        ] {
            assert!(summary.contains(label), "the summary lacks {label}");
        }
        let troupe = read(&dir.0.join("store-timeline-troupe-store.svg"));
        assert!(troupe.contains("search breaker open"));
        assert!(troupe.contains("search breaker half-open"));
        assert!(troupe.contains("answers per second"));
        let threads = read(&dir.0.join("store-timeline-thread-per-request.svg"));
        assert!(!threads.contains("search breaker open"));
        let capacity = read(&dir.0.join("store-capacity.svg"));
        assert!(capacity.contains("p99 bound (10 ms)"));
        assert!(capacity.contains("offered rate (requests/s)"));
    }

    #[test]
    fn charts_of_an_empty_report() {
        let dir = TempDir::new("empty");
        let report = BenchReport {
            closed: Vec::new(),
            capacity: Vec::new(),
            phases: Vec::new(),
            users_per_kind: 0,
            open_p99_ms: f64::NAN,
        };
        let paths = write_charts(&report, &dir.0).expect("the charts are written");
        assert_eq!(paths.len(), 2);
        for path in &paths {
            let svg = read(path);
            assert!(svg.contains("no closed runs in this report"));
        }
    }

    #[test]
    fn charts_of_odd_figures() {
        // One store only, figures NaN, infinite, negative and zero, a phase without
        // requests, seconds out of order and repeated, an unknown breaker state, an empty
        // capacity search.
        let dir = TempDir::new("odd");
        let mut run = closed_run(StoreKind::Troupe, 3, 1.0);
        for (i, s) in run.report.summaries.iter_mut().enumerate() {
            match i % 4 {
                0 => s.p50_ms = f64::NAN,
                1 => s.p90_ms = f64::INFINITY,
                2 => s.throughput = -1.0,
                _ => s.requests = 0,
            }
        }
        run.report.seconds.reverse();
        run.report.seconds.push(second(2, Kind::Index, 0, f64::NAN));
        run.report.seconds.push(second(2, Kind::Index, 7, 1e300));
        run.report.breaker.push((4, "sideways".to_owned()));
        run.report.phase_starts.push(("later".to_owned(), f64::NAN));
        let report = BenchReport {
            closed: vec![run],
            capacity: vec![
                Capacity {
                    run: 0,
                    store: StoreKind::Threads,
                    points: Vec::new(),
                    held: None,
                },
                Capacity {
                    run: 0,
                    store: StoreKind::Troupe,
                    points: vec![point(f64::NAN, 1.0), point(1_000.0, 0.0)],
                    held: Some(f64::NAN),
                },
            ],
            phases: vec!["healthy".to_owned()],
            users_per_kind: 1,
            open_p99_ms: 0.0,
        };
        let paths = write_charts(&report, &dir.0).expect("the charts are written");
        assert_eq!(paths.len(), 4);
        for path in &paths {
            let svg = read(path);
            assert!(svg.contains("troupe-store"));
            assert!(!svg.contains("NaN"), "{} draws NaN", path.display());
        }
    }
}
