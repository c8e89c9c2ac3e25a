//! What each scenario's section shows: its records grouped into [`Chart`]s and tables.
//! Nothing is drawn here ([`super::chart`] draws, [`super::html`] writes the page).
//!
//! Every record of a section ends up in a table: under the chart that draws it, or in the
//! section's last table ("also measured") when no chart does.

use std::cmp::Reverse;

use super::model::{
    better, constant_params, group_by, metric_label, params_subset, percentile, short_metric,
    varying_params, Band, Bar, Chart, Dash, Item, Key, Line, Look, Mark, Plot, Scale,
};
use super::palette::{self, darken, series_shade, tint, Palette, Rgb};

/// What every builder needs: the series' labels and the contenders' colours.
pub(super) struct Ctx {
    pub labels: Vec<String>,
    pub palette: Palette,
}

impl Ctx {
    /// Whether the page shows more than one series.
    pub fn multi(&self) -> bool {
        self.labels.len() > 1
    }

    /// `base`, with the series' label after it when the page shows several series.
    pub fn named(&self, base: &str, series: usize) -> String {
        match self.labels.get(series) {
            Some(label) if self.multi() => format!("{base} · {label}"),
            _ => base.to_owned(),
        }
    }
}

/// One scenario's part of the page.
pub(super) struct Section<'a> {
    /// The HTML id (the table of contents links to it).
    pub id: String,
    pub title: String,
    /// What the scenario measures, in a sentence or two.
    pub intro: String,
    /// The contender every other is divided by in the tables' ratio column.
    pub reference: &'static str,
    pub blocks: Vec<Block<'a>>,
    /// Every record of the section.
    pub items: Vec<Item<'a>>,
}

/// A part of a section.
pub(super) enum Block<'a> {
    /// A chart, and the records it draws (listed in a table under it).
    Figure { chart: Chart, items: Vec<Item<'a>> },
    /// A table alone.
    Table {
        heading: String,
        items: Vec<Item<'a>>,
    },
    /// The section has no records; each of `commands` would make them.
    NoData { commands: &'static [&'static str] },
}

/// The scenarios with a layout of their own, in page order, with their titles and intros.
const SCENARIOS: &[(&str, &str, &str)] = &[
    (
        "ring",
        "ring: a token around a ring of actors (seed 000)",
        "N actors in a ring pass a token M times around. throughput: N × M messages over the \
         time until the token has gone round M times; construct: the time to spawn and link \
         the N actors.",
    ),
    (
        "spawn",
        "spawn: a million idle actors (seed 000 at scale)",
        "N idle actors are spawned and each has run once. spawn_time: wall time per actor; \
         memory: resident memory gained per actor.",
    ),
    (
        "counter",
        "counter: producers feeding one counting actor (seed 002)",
        "P producers each send K messages to one counting actor, then one request asks for the \
         sum. throughput: P × K messages over the time until the sum has arrived.",
    ),
    (
        "chain",
        "chain: actors against OS threads (seed 004)",
        "N stages in a line forward N messages from the source to the sink (N² hops); the \
         stages are actors (mode=actors) or OS threads joined by one-slot buffers \
         (mode=threads). elapsed: until the sink has received all N messages.",
    ),
    (
        "trading",
        "trading: the order-matching system, closed loop (seed 003)",
        "Each client has one order in flight: it sends the next when the last is acknowledged \
         (style request-reply: one ack from the primary once the standby has it; one-way: \
         one ack from each engine). The order log is off (none), in the page cache \
         (buffered) or synced to disk (fsync). Baselines without actors: threads (a thread \
         per client, a mutex per engine pair) and direct (plain calls on one thread).",
    ),
    (
        "trading-open-loop",
        "trading open loop: latency at a fixed offered rate",
        "Orders are sent at a fixed rate whatever the system's state; each order's latency \
         counts from its planned send time. The table under the chart gives the highest rate \
         whose p99 stayed under the bound.",
    ),
    (
        "fsync-probe",
        "fsync-probe: this disk's own fsync latency",
        "The latency of one small append and fdatasync on the disk the trading logs use, \
         measured in the same run: the floor under every fsync figure.",
    ),
    (
        "store",
        "store: the web store whose search service hangs (seed 001)",
        "300 users per request type (index page, search, payment) against two stores: \
         troupe-store (an actor per backend, timeouts, a circuit breaker, shedding) and \
         thread-per-request (200 request threads, a blocking client, no timeouts). The \
         search service answers in about 20 ms while healthy, then hangs, then recovers.",
    ),
];

/// The scenarios the store section shows.
const STORE: &[&str] = &["store", "store-timeline"];

/// How many sizes (ring sizes, spawn counts) of one metric get a chart each; the others are
/// listed in the section's last table.
const MAX_SIZES: usize = 4;

/// Every section of the page, in page order.
pub(super) fn build<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Section<'a>> {
    let of = |names: &[&str]| -> Vec<Item<'a>> {
        items
            .iter()
            .filter(|i| names.contains(&i.record.scenario.as_str()))
            .copied()
            .collect()
    };
    let mut sections = Vec::new();
    for &(name, title, intro) in SCENARIOS {
        let (reference, its) = if name == "store" {
            ("troupe-store", of(STORE))
        } else {
            ("troupe", of(&[name]))
        };
        if its.is_empty() && name != "store" {
            continue;
        }
        let blocks = match name {
            "ring" => sized_bars(
                ctx,
                "ring",
                &its,
                &["actors", "rounds"],
                &["throughput", "construct"],
            ),
            "spawn" => sized_bars(ctx, "spawn", &its, &["actors"], &["spawn_time", "memory"]),
            "counter" => counter(ctx, &its),
            "chain" => chain(ctx, &its),
            "trading" => trading(ctx, &its),
            "trading-open-loop" => open_loop(ctx, &its),
            "fsync-probe" => fsync_probe(ctx, &its),
            _ => store(ctx, &its),
        };
        sections.push(finish(
            name.to_owned(),
            title.to_owned(),
            intro.to_owned(),
            reference,
            its,
            blocks,
        ));
    }

    let mut others: Vec<&str> = items
        .iter()
        .map(|i| i.record.scenario.as_str())
        .filter(|s| !SCENARIOS.iter().any(|(k, _, _)| k == s) && !STORE.contains(s))
        .collect();
    others.sort_unstable();
    others.dedup();
    let mut ids: Vec<String> = ["sources", "contents", "top"]
        .iter()
        .chain(SCENARIOS.iter().map(|(k, _, _)| k))
        .map(|s| (*s).to_owned())
        .collect();
    for scenario in others {
        let its = of(&[scenario]);
        let blocks = generic(ctx, scenario, &its);
        let id = unique_id(&slug(scenario), &mut ids);
        let intro = "A scenario without a layout of its own: one bar chart per metric, a bar \
                     per contender and parameters.";
        sections.push(finish(
            id,
            scenario.to_owned(),
            intro.to_owned(),
            "troupe",
            its,
            blocks,
        ));
    }
    sections
}

/// The section, with a last table of every record no chart or table shows.
fn finish<'a>(
    id: String,
    title: String,
    intro: String,
    reference: &'static str,
    items: Vec<Item<'a>>,
    mut blocks: Vec<Block<'a>>,
) -> Section<'a> {
    let shown = |item: &Item<'_>| {
        blocks.iter().any(|b| match b {
            Block::Figure { items, .. } | Block::Table { items, .. } => {
                items.iter().any(|i| i.same(item))
            }
            Block::NoData { .. } => false,
        })
    };
    let rest: Vec<Item<'a>> = items.iter().filter(|i| !shown(i)).copied().collect();
    if !rest.is_empty() {
        blocks.push(Block::Table {
            heading: "Also measured (not drawn)".to_owned(),
            items: rest,
        });
    }
    Section {
        id,
        title,
        intro,
        reference,
        blocks,
        items,
    }
}

/// An HTML id for a scenario without a layout of its own: `scenario-` and the name in
/// lower-case letters, digits and dashes.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_owned();
    if out.is_empty() {
        "scenario".to_owned()
    } else {
        format!("scenario-{out}")
    }
}

/// `id`, or `id-2`, `id-3`, ... if it is taken; recorded as taken.
fn unique_id(id: &str, taken: &mut Vec<String>) -> String {
    let mut candidate = id.to_owned();
    let mut n = 2;
    while taken.contains(&candidate) {
        candidate = format!("{id}-{n}");
        n += 1;
    }
    taken.push(candidate.clone());
    candidate
}

/// The items grouped by metric, the metrics named in `order` first, then as they come.
fn by_metric<'a>(items: &[Item<'a>], order: &[&str]) -> Vec<(String, Vec<Item<'a>>)> {
    let mut groups = group_by(items, |i| i.record.metric.clone());
    groups.sort_by_key(|(m, _)| order.iter().position(|o| o == m).unwrap_or(order.len()));
    groups
}

/// The distinct values of `f` over `items`, in order of first appearance.
fn distinct<T: PartialEq>(items: &[Item<'_>], f: impl Fn(&Item<'_>) -> T) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        let v = f(item);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// The position of `value` in `known`, or after them in order of first appearance among `seen`.
fn known_first(value: &str, known: &[&str], seen: &[String]) -> usize {
    known
        .iter()
        .position(|k| *k == value)
        .unwrap_or_else(|| known.len() + seen.iter().position(|s| s == value).unwrap_or(seen.len()))
}

/// The subtitle: the parameters every item shares (other than `except`), and which way is
/// better for their unit.
fn subtitle(items: &[Item<'_>], except: &[&str]) -> String {
    let unit = items.first().map_or("", |i| i.record.unit.as_str());
    let shared = constant_params(items, except);
    if shared.is_empty() {
        better(unit).to_owned()
    } else {
        format!("{shared} · {}", better(unit))
    }
}

/// How a bar chart is cut: which group (x category) and which slot (bar in the group, with
/// its legend entry and colour) each record goes to. Groups and slots are ordered by their
/// rank, then by first appearance.
struct BarSpec<'s> {
    title: String,
    x_label: &'s str,
    y_label: Option<String>,
    y_scale: Scale,
    group: &'s dyn Fn(&Item<'_>) -> (u64, String),
    slot: &'s dyn Fn(&Item<'_>) -> (u64, String, Rgb),
}

fn bar_chart(items: &[Item<'_>], spec: BarSpec<'_>) -> Chart {
    let mut groups: Vec<(u64, String)> = distinct(items, |i| (spec.group)(i));
    groups.sort_by_key(|(rank, _)| *rank);
    let mut slots: Vec<(u64, String, Rgb)> = Vec::new();
    for item in items {
        let slot = (spec.slot)(item);
        if !slots.iter().any(|s| s.0 == slot.0 && s.1 == slot.1) {
            slots.push(slot);
        }
    }
    slots.sort_by_key(|s| s.0);
    let bars = items
        .iter()
        .filter_map(|item| {
            let g = (spec.group)(item);
            let s = (spec.slot)(item);
            let group = groups.iter().position(|x| *x == g)?;
            let slot = slots.iter().position(|x| x.0 == s.0 && x.1 == s.1)?;
            Some(Bar {
                group,
                slot,
                mark: Mark::of(item.record),
                look: Look {
                    colour: slots[slot].2,
                    dash: Dash::Solid,
                },
            })
        })
        .collect();
    let first = items.first().map(|i| i.record);
    Chart {
        title: spec.title,
        subtitle: subtitle(items, &[]),
        x_label: spec.x_label.to_owned(),
        y_label: spec.y_label.unwrap_or_else(|| {
            first.map_or_else(String::new, |r| metric_label(&r.metric, &r.unit))
        }),
        y_scale: spec.y_scale,
        plot: Plot::Bars {
            groups: groups.into_iter().map(|(_, g)| g).collect(),
            bars,
        },
        legend: slots
            .into_iter()
            .map(|(_, label, colour)| Key {
                label,
                look: Look {
                    colour,
                    dash: Dash::Solid,
                },
            })
            .collect(),
    }
}

/// Bars of one metric, a group per contender (with its parameters that differ among
/// `items`), a bar per series in it, in the contender's colour.
fn contender_bars(ctx: &Ctx, items: &[Item<'_>], title: String) -> Chart {
    let varying = varying_params(items, &[]);
    let name = |i: &Item<'_>| {
        let extra = params_subset(i, &varying);
        let contender = i.record.contender.as_str();
        if extra.is_empty() {
            (contender.to_owned(), contender.to_owned())
        } else {
            (
                format!("{contender}\n{extra}"),
                format!("{contender} ({extra})"),
            )
        }
    };
    bar_chart(
        items,
        BarSpec {
            title,
            x_label: "contender",
            y_label: None,
            y_scale: Scale::Auto,
            group: &|i| (palette::rank(&i.record.contender), name(i).0),
            slot: &|i| {
                let colour = ctx.palette.colour(&i.record.contender);
                (
                    palette::rank(&i.record.contender) * 1000 + i.series as u64,
                    ctx.named(&name(i).1, i.series),
                    series_shade(colour, i.series),
                )
            },
        },
    )
}

/// One bar chart per metric and size: the sizes of a metric with the most contenders first,
/// at most [`MAX_SIZES`] of them.
fn sized_bars<'a>(
    ctx: &Ctx,
    scenario: &str,
    items: &[Item<'a>],
    size_keys: &[&str],
    order: &[&str],
) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    for (metric, its) in by_metric(items, order) {
        let mut sizes = group_by(&its, |i| {
            size_keys.iter().map(|k| i.text(k)).collect::<Vec<_>>()
        });
        sizes.sort_by_key(|(_, members)| {
            Reverse(distinct(members, |i| i.record.contender.clone()).len())
        });
        for (_, members) in sizes.into_iter().take(MAX_SIZES) {
            let title = format!("{scenario}: {}", metric.replace('_', " "));
            let chart = contender_bars(ctx, &members, title);
            blocks.push(Block::Figure {
                chart,
                items: members,
            });
        }
    }
    blocks
}

/// How a line chart is cut: `x_key` is the x axis; each line is a `name` (with its rank and
/// colour) and series, and the parameters that differ among the items other than `x_key`
/// and `handled` (shown in the line's label, each with its own stroke).
struct LineSpec<'s> {
    title: String,
    x_key: &'s str,
    x_label: &'s str,
    x_log: bool,
    y_label: Option<String>,
    y_scale: Scale,
    handled: &'s [&'s str],
    name: &'s dyn Fn(&Item<'_>) -> (u64, String, Rgb),
    bands: Vec<Band>,
}

/// The chart, and the records it draws (those with a number for `x_key`).
fn line_chart<'a>(ctx: &Ctx, items: &[Item<'a>], spec: LineSpec<'_>) -> (Chart, Vec<Item<'a>>) {
    let drawn: Vec<Item<'a>> = items
        .iter()
        .filter(|i| i.number(spec.x_key).is_some())
        .copied()
        .collect();
    let mut except = vec![spec.x_key];
    except.extend_from_slice(spec.handled);
    let extras = varying_params(&drawn, &except);

    struct Building {
        rank: u64,
        name: String,
        colour: Rgb,
        extra: String,
        series: usize,
        points: Vec<(f64, Mark)>,
    }
    let mut lines: Vec<Building> = Vec::new();
    for item in &drawn {
        let (rank, name, colour) = (spec.name)(item);
        let extra = params_subset(item, &extras);
        let x = item.number(spec.x_key).unwrap_or(f64::NAN);
        let point = (x, Mark::of(item.record));
        match lines
            .iter_mut()
            .find(|l| l.name == name && l.extra == extra && l.series == item.series)
        {
            Some(line) => line.points.push(point),
            None => lines.push(Building {
                rank,
                name,
                colour,
                extra,
                series: item.series,
                points: vec![point],
            }),
        }
    }
    lines.sort_by_key(|l| (l.rank, l.series));
    let series = ctx.labels.len().max(1);
    let mut keys = Vec::new();
    let mut drawn_lines = Vec::new();
    for line in &lines {
        // A name's lines with different parameters get different strokes, as do series.
        let variants: Vec<&str> = {
            let mut v: Vec<&str> = Vec::new();
            for l in lines.iter().filter(|l| l.name == line.name) {
                if !v.contains(&l.extra.as_str()) {
                    v.push(&l.extra);
                }
            }
            v
        };
        let variant = variants.iter().position(|e| *e == line.extra).unwrap_or(0);
        let look = Look {
            colour: line.colour,
            dash: Dash::nth(line.series + series * variant),
        };
        let base = if line.extra.is_empty() {
            line.name.clone()
        } else {
            format!("{} ({})", line.name, line.extra)
        };
        keys.push(Key {
            label: ctx.named(&base, line.series),
            look,
        });
        let mut points = line.points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        drawn_lines.push(Line { look, points });
    }
    let first = drawn.first().map(|i| i.record);
    let chart = Chart {
        title: spec.title,
        subtitle: subtitle(&drawn, &[spec.x_key]),
        x_label: spec.x_label.to_owned(),
        y_label: spec.y_label.unwrap_or_else(|| {
            first.map_or_else(String::new, |r| metric_label(&r.metric, &r.unit))
        }),
        y_scale: spec.y_scale,
        plot: Plot::Lines {
            x_log: spec.x_log,
            lines: drawn_lines,
            bands: spec.bands,
        },
        legend: keys,
    };
    (chart, drawn)
}

/// The line's name, rank and colour for a chart whose lines are contenders.
fn by_contender(ctx: &Ctx) -> impl Fn(&Item<'_>) -> (u64, String, Rgb) + '_ {
    |i| {
        let c = &i.record.contender;
        (palette::rank(c), c.clone(), ctx.palette.colour(c))
    }
}

/// The line's name, rank and colour for a chart whose lines are percentiles.
fn by_percentile(i: &Item<'_>) -> (u64, String, Rgb) {
    let p = percentile(&i.record.metric).unwrap_or(100.0);
    (
        (p * 1000.0) as u64,
        short_metric(&i.record.metric).to_owned(),
        palette::percentile(p),
    )
}

/// Adds the chart unless it draws nothing.
fn push_lines<'a>(blocks: &mut Vec<Block<'a>>, (chart, items): (Chart, Vec<Item<'a>>)) {
    if !items.is_empty() {
        blocks.push(Block::Figure { chart, items });
    }
}

fn counter<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    for (metric, its) in by_metric(items, &["throughput"]) {
        let spec = LineSpec {
            title: format!("counter: {} over K", metric.replace('_', " ")),
            x_key: "per_producer",
            x_label: "K = messages per producer",
            x_log: true,
            y_label: None,
            y_scale: Scale::Auto,
            handled: &[],
            name: &name,
            bands: Vec::new(),
        };
        push_lines(&mut blocks, line_chart(ctx, &its, spec));
    }
    blocks
}

fn chain<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    for (metric, its) in by_metric(items, &["elapsed"]) {
        let spec = LineSpec {
            title: format!("chain: {} over N", metric.replace('_', " ")),
            x_key: "length",
            x_label: "N = stages in the chain",
            x_log: true,
            y_label: None,
            y_scale: Scale::Log,
            handled: &[],
            name: &name,
            bands: Vec::new(),
        };
        push_lines(&mut blocks, line_chart(ctx, &its, spec));
    }
    blocks
}

/// The log modes present, in the order none, buffered, fsync, then as they come.
fn log_modes<'a>(items: &[Item<'a>]) -> Vec<(String, Vec<Item<'a>>)> {
    let mut logs = group_by(items, |i| i.text("log"));
    let seen: Vec<String> = logs.iter().map(|(l, _)| l.clone()).collect();
    logs.sort_by_key(|(l, _)| known_first(l, &["none", "buffered", "fsync"], &seen));
    logs
}

/// `log=…` for a title (nothing when the records have no log mode).
fn log_title(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!(", log={log}")
    }
}

fn trading<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    for (log, its) in log_modes(items) {
        let throughput: Vec<Item<'a>> = its
            .iter()
            .filter(|i| i.record.metric == "throughput")
            .copied()
            .collect();
        let spec = LineSpec {
            title: format!("trading{}: throughput over clients", log_title(&log)),
            x_key: "clients",
            x_label: "clients",
            x_log: true,
            y_label: None,
            y_scale: Scale::Auto,
            handled: &["log"],
            name: &name,
            bands: Vec::new(),
        };
        push_lines(&mut blocks, line_chart(ctx, &throughput, spec));

        let latency: Vec<Item<'a>> = its
            .iter()
            .filter(|i| i.record.metric.starts_with("latency_p"))
            .copied()
            .collect();
        let mut who = group_by(&latency, |i| (i.record.contender.clone(), i.text("style")));
        who.sort_by_key(|((c, _), _)| palette::rank(c));
        for ((contender, style), members) in who {
            let style = if style.is_empty() {
                String::new()
            } else {
                format!(" ({style})")
            };
            let spec = LineSpec {
                title: format!(
                    "trading{}: {contender}{style} latency over clients",
                    log_title(&log)
                ),
                x_key: "clients",
                x_label: "clients",
                x_log: true,
                y_label: Some(format!(
                    "latency ({})",
                    members.first().map_or("", |i| i.record.unit.as_str())
                )),
                y_scale: Scale::Log,
                handled: &["log", "style"],
                name: &by_percentile,
                bands: Vec::new(),
            };
            push_lines(&mut blocks, line_chart(ctx, &members, spec));
        }
    }
    blocks
}

fn open_loop<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    for (log, its) in log_modes(items) {
        let p99: Vec<Item<'a>> = its
            .iter()
            .filter(|i| i.record.metric == "latency_p99")
            .copied()
            .collect();
        let spec = LineSpec {
            title: format!(
                "trading open loop{}: p99 latency over the offered rate",
                log_title(&log)
            ),
            x_key: "rate",
            x_label: "offered rate (orders/s)",
            x_log: true,
            y_label: None,
            y_scale: Scale::Log,
            handled: &["log", "orders"],
            name: &name,
            bands: Vec::new(),
        };
        push_lines(&mut blocks, line_chart(ctx, &p99, spec));
    }
    let max_rate: Vec<Item<'a>> = items
        .iter()
        .filter(|i| i.record.metric.starts_with("max_rate"))
        .copied()
        .collect();
    if !max_rate.is_empty() {
        blocks.push(Block::Table {
            heading: "The highest offered rate whose p99 stayed under the bound".to_owned(),
            items: max_rate,
        });
    }
    blocks
}

fn fsync_probe<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let latency: Vec<Item<'a>> = items
        .iter()
        .filter(|i| percentile(&i.record.metric).is_some())
        .copied()
        .collect();
    if latency.is_empty() {
        return Vec::new();
    }
    let varying = varying_params(&latency, &[]);
    let unit = latency[0].record.unit.clone();
    let chart = bar_chart(
        &latency,
        BarSpec {
            title: "fsync-probe: latency percentiles".to_owned(),
            x_label: "percentile",
            y_label: Some(format!("latency ({unit})")),
            y_scale: Scale::Auto,
            group: &|i| {
                let p = percentile(&i.record.metric).unwrap_or(100.0);
                (
                    (p * 1000.0) as u64,
                    short_metric(&i.record.metric).to_owned(),
                )
            },
            slot: &|i| {
                let c = &i.record.contender;
                let extra = params_subset(i, &varying);
                let base = if extra.is_empty() {
                    c.clone()
                } else {
                    format!("{c} ({extra})")
                };
                (
                    palette::rank(c) * 1000 + i.series as u64,
                    ctx.named(&base, i.series),
                    series_shade(ctx.palette.colour(c), i.series),
                )
            },
        },
    );
    vec![Block::Figure {
        chart,
        items: latency,
    }]
}

/// The store's closed-model figures, its capacity and its timeline; or what to run to get
/// them.
fn store<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    if items.is_empty() {
        return vec![Block::NoData {
            commands: &["troupe-store bench", "troupe-bench store"],
        }];
    }
    let closed: Vec<Item<'a>> = items
        .iter()
        .filter(|i| i.record.scenario == "store")
        .copied()
        .collect();
    let timeline: Vec<Item<'a>> = items
        .iter()
        .filter(|i| i.record.scenario == "store-timeline")
        .copied()
        .collect();
    let seen_requests = distinct(items, |i| i.text("request"));
    let request_rank = |r: &str| known_first(r, &["index", "search", "payment"], &seen_requests);
    let phases = distinct(&closed, |i| i.text("phase"));
    let phase_rank = |p: &str| phases.iter().position(|x| x == p).unwrap_or(phases.len()) as u64;
    let mut blocks = Vec::new();

    // Latency by phase, one chart per request type.
    let pcts = ["p50", "p90", "p99"];
    let mut requests = distinct(&closed, |i| i.text("request"));
    requests.retain(|r| !r.is_empty());
    requests.sort_by_key(|r| request_rank(r));
    for request in &requests {
        let its: Vec<Item<'a>> = closed
            .iter()
            .filter(|i| i.text("request") == *request && pcts.contains(&i.record.metric.as_str()))
            .copied()
            .collect();
        if its.is_empty() {
            continue;
        }
        let chart = bar_chart(
            &its,
            BarSpec {
                title: format!("store, {request} requests: latency by phase"),
                x_label: "phase",
                y_label: Some("latency (ms)".to_owned()),
                y_scale: Scale::Log,
                group: &|i| (phase_rank(&i.text("phase")), i.text("phase")),
                slot: &|i| {
                    let c = &i.record.contender;
                    let p = pcts.iter().position(|m| *m == i.record.metric).unwrap_or(0);
                    let shade = darken(
                        tint(ctx.palette.colour(c), [0.62, 0.32, 0.0][p]),
                        0.3 * i.series as f64,
                    );
                    (
                        palette::rank(c) * 1000 + p as u64 * 10 + i.series as u64,
                        ctx.named(&format!("{c} · {}", pcts[p]), i.series),
                        shade,
                    )
                },
            },
        );
        blocks.push(Block::Figure { chart, items: its });
    }

    // Throughput and failed requests by phase, a bar per store and request type.
    for (metric, title, y_label) in [
        ("throughput", "store: throughput by phase", None),
        (
            "not_ok",
            "store: requests not answered OK, by phase",
            Some("requests not OK (rejected, failed or unanswered)".to_owned()),
        ),
    ] {
        let its: Vec<Item<'a>> = closed
            .iter()
            .filter(|i| i.record.metric == metric)
            .copied()
            .collect();
        if its.is_empty() {
            continue;
        }
        let chart = bar_chart(
            &its,
            BarSpec {
                title: title.to_owned(),
                x_label: "phase",
                y_label,
                y_scale: Scale::Linear,
                group: &|i| (phase_rank(&i.text("phase")), i.text("phase")),
                slot: &|i| {
                    let c = &i.record.contender;
                    let r = request_rank(&i.text("request"));
                    let shade = darken(
                        tint(ctx.palette.colour(c), [0.0, 0.35, 0.62][r % 3]),
                        0.3 * i.series as f64,
                    );
                    (
                        palette::rank(c) * 1000 + r as u64 * 10 + i.series as u64,
                        ctx.named(&format!("{c} · {}", i.text("request")), i.series),
                        shade,
                    )
                },
            },
        );
        blocks.push(Block::Figure { chart, items: its });
    }

    // Capacity under the open model.
    let capacity: Vec<Item<'a>> = closed
        .iter()
        .filter(|i| i.record.metric == "capacity")
        .copied()
        .collect();
    if !capacity.is_empty() {
        let chart = bar_chart(
            &capacity,
            BarSpec {
                title: "store: capacity (open model)".to_owned(),
                x_label: "request type",
                y_label: None,
                y_scale: Scale::Linear,
                group: &|i| {
                    let request = i.text("request");
                    let bound = i.text("p99_under_ms");
                    let label = if bound.is_empty() {
                        request.clone()
                    } else {
                        format!("{request}\np99 under {bound} ms")
                    };
                    (request_rank(&request) as u64, label)
                },
                slot: &|i| {
                    let c = &i.record.contender;
                    (
                        palette::rank(c) * 1000 + i.series as u64,
                        ctx.named(c, i.series),
                        series_shade(ctx.palette.colour(c), i.series),
                    )
                },
            },
        );
        blocks.push(Block::Figure {
            chart,
            items: capacity,
        });
    }

    // The first run second by second, per store.
    let mut stores = distinct(&timeline, |i| i.record.contender.clone());
    stores.sort_by_key(|s| palette::rank(s));
    for store in &stores {
        let its: Vec<Item<'a>> = timeline
            .iter()
            .filter(|i| i.record.contender == *store)
            .copied()
            .collect();
        let bands = phase_bands(&its);
        let name = |i: &Item<'_>| {
            let r = i.text("request");
            let rank = request_rank(&r);
            (rank as u64, r, palette::category(rank))
        };
        for (metric, what, scale) in [
            ("p99", "p99 latency", Scale::Log),
            ("throughput", "throughput", Scale::Linear),
        ] {
            let of_metric: Vec<Item<'a>> = its
                .iter()
                .filter(|i| i.record.metric == metric)
                .copied()
                .collect();
            let spec = LineSpec {
                title: format!("store timeline, {store}: {what} per second"),
                x_key: "second",
                x_label: "second of the run (phases named above the plot; failure shaded)",
                x_log: false,
                y_label: None,
                y_scale: scale,
                handled: &["phase", "request"],
                name: &name,
                bands: bands.clone(),
            };
            push_lines(&mut blocks, line_chart(ctx, &of_metric, spec));
        }
    }
    blocks
}

/// The phases of a timeline as stretches of seconds; every phase other than `healthy` and
/// `recovered` is shaded.
fn phase_bands(items: &[Item<'_>]) -> Vec<Band> {
    let mut seconds: Vec<(f64, String)> = Vec::new();
    for item in items {
        if let Some(s) = item.number("second") {
            if !seconds.iter().any(|(t, _)| *t == s) {
                seconds.push((s, item.text("phase")));
            }
        }
    }
    seconds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut bands: Vec<Band> = Vec::new();
    for (second, phase) in seconds {
        match bands.last_mut() {
            Some(band) if band.label == phase => band.to = second + 0.5,
            _ => bands.push(Band {
                from: second - 0.5,
                to: second + 0.5,
                shaded: !matches!(phase.as_str(), "healthy" | "recovered" | ""),
                label: phase,
            }),
        }
    }
    if bands.iter().all(|b| b.label.is_empty()) {
        bands.clear();
    }
    bands
}

/// A scenario without a layout of its own: one bar chart per metric.
fn generic<'a>(ctx: &Ctx, scenario: &str, items: &[Item<'a>]) -> Vec<Block<'a>> {
    by_metric(items, &[])
        .into_iter()
        .map(|(metric, its)| Block::Figure {
            chart: contender_bars(
                ctx,
                &its,
                format!("{scenario}: {}", metric.replace('_', " ")),
            ),
            items: its,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_slugs_and_unique() {
        let mut taken = vec!["ring".to_owned()];
        assert_eq!(slug("Ask Me!"), "scenario-ask-me");
        assert_eq!(slug("<>"), "scenario");
        assert_eq!(unique_id("a", &mut taken), "a");
        assert_eq!(unique_id("a", &mut taken), "a-2");
    }
}
