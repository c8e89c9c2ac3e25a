//! What each scenario's section shows: its records grouped into [`Chart`]s and tables.
//! Nothing is drawn here ([`super::chart`] draws, [`super::html`] writes the page).
//!
//! Every record of a section ends up in a table: under the chart that draws it, or in the
//! section's last table ("also measured") when no chart does.

use std::cmp::Reverse;

use super::model::{
    at_sweep_top, below_sweep, better, constant_params, group_by, metric_label, params_subset,
    percentile, short_metric, varying_params, wide_spread, Band, Bar, Chart, Dash, Item, Key, Line,
    Look, Mark, Marker, Plot, Scale, SPREAD_LIMIT,
};
use super::palette::{self, darken, series_shade, tint, Palette, Rgb};
use super::seeds::{self, Seed};
use crate::stats::human;

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
    /// A seed's published figures, as rows of (who, what, value).
    Published {
        heading: String,
        rows: Vec<[String; 3]>,
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
const STORE: &[&str] = &["store", "store-open", "store-timeline"];

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
            "ring" => ring(ctx, &its),
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
            Block::NoData { .. } | Block::Published { .. } => false,
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
                look: Look::new(slots[slot].2, Dash::Solid),
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
                look: Look::new(colour, Dash::Solid),
            })
            .collect(),
        notes: Vec::new(),
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
            blocks.push(figure(chart, members));
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
        let look = Look::new(line.colour, Dash::nth(line.series + series * variant));
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
        drawn_lines.push(Line {
            look,
            points,
            gap: None,
        });
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
        notes: Vec::new(),
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

/// Adds the chart unless it draws nothing.
fn push_lines<'a>(blocks: &mut Vec<Block<'a>>, (chart, items): (Chart, Vec<Item<'a>>)) {
    if !items.is_empty() {
        blocks.push(figure(chart, items));
    }
}

/// The drawn chart of `items`, finished (every legend entry its own colour and marker), with
/// the notes a reader needs: values that are the top of their sweep, and wide spreads.
fn figure<'a>(mut chart: Chart, items: Vec<Item<'a>>) -> Block<'a> {
    if let Some(note) = sweep_top_note(&items) {
        chart.notes.push(note);
    }
    if let Some(note) = spread_note(&items) {
        chart.notes.push(note);
    }
    Block::Figure {
        chart: chart.finish(),
        items,
    }
}

/// Who (and at what) the chart shows as a lower bound, when anyone: the value is the highest
/// step its sweep tries.
fn sweep_top_note(items: &[Item<'_>]) -> Option<String> {
    let tops: Vec<String> = items
        .iter()
        .filter(|i| at_sweep_top(i.record))
        .map(|i| {
            format!(
                "{} ({} {})",
                i.record.contender,
                human(i.record.median),
                i.record.unit
            )
        })
        .collect();
    let bottoms: Vec<String> = items
        .iter()
        .filter_map(|i| {
            below_sweep(i.record)
                .map(|low| format!("{} ({} {})", i.record.contender, human(low), i.record.unit))
        })
        .collect();
    let mut notes = Vec::new();
    if !tops.is_empty() {
        notes.push(format!(
            "“≥”: {} held at the highest step the sweep tries, so the figure is a lower bound, \
             not a measured limit.",
            tops.join(", ")
        ));
    }
    if !bottoms.is_empty() {
        notes.push(format!(
            "“<”: {} held none of the steps the sweep tries, so the figure is below its lowest \
             step (named here), not zero.",
            bottoms.join(", ")
        ));
    }
    (!notes.is_empty()).then(|| notes.join(" "))
}

/// The records whose repetitions lie more than [`SPREAD_LIMIT`] apart, when any do.
fn spread_note(items: &[Item<'_>]) -> Option<String> {
    let mut wide: Vec<(f64, String)> = items
        .iter()
        .filter_map(|i| {
            let spread = wide_spread(i.record)?;
            let params = params_subset(i, &super::model::param_names(&[*i]));
            let who = if params.is_empty() {
                i.record.contender.clone()
            } else {
                format!("{} at {params}", i.record.contender)
            };
            let why =
                extremes_explained(i.record).map_or(String::new(), |text| format!(": {text}"));
            Some((spread, format!("{who} ({spread:.1}×{why})")))
        })
        .collect();
    if wide.is_empty() {
        return None;
    }
    wide.sort_by(|a, b| b.0.total_cmp(&a.0));
    let count = wide.len();
    let shown: Vec<String> = wide.into_iter().take(4).map(|(_, s)| s).collect();
    let more = if count > shown.len() {
        format!(" and {} more", count - shown.len())
    } else {
        String::new()
    };
    Some(format!(
        "Wide spread: the largest repetition is over {SPREAD_LIMIT}× the smallest for {}{more}; \
         read those medians with care (the whiskers show the range).",
        shown.join(", ")
    ))
}

/// What the runtime counted in a record's smallest and largest repetitions, when every
/// repetition carries counters of its work: e.g. `smallest 16.8M with width 2 after 1 change,
/// 2.9 messages per turn; largest 27.3M with width 1 after 4 changes, 6.0 messages per turn`.
fn extremes_explained(record: &crate::Record) -> Option<String> {
    let counters = &record.counters;
    if counters.len() != record.samples.len() || !counters.iter().any(crate::counts_work) {
        return None;
    }
    // The first smallest and the first largest repetition.
    let first_by = |order: fn(&f64, &f64) -> std::cmp::Ordering| {
        (0..record.samples.len()).min_by(|&a, &b| order(&record.samples[a], &record.samples[b]))
    };
    let (low, high) = (first_by(f64::total_cmp)?, first_by(|a, b| b.total_cmp(a))?);
    let say = |at: usize| {
        format!(
            "{} with {}",
            human(record.samples[at]),
            crate::describe_counters(&counters[at])
        )
    };
    Some(format!("smallest {}; largest {}", say(low), say(high)))
}

/// The look of the `n`th published (seed) series of a chart.
fn published_look(n: usize) -> Look {
    Look {
        colour: seeds::colour(n),
        dash: Dash::Dashed,
        marker: Marker::Circle,
        published: true,
    }
}

/// Adds the seed's figures to a bar chart, each beside the measured bars of the group it
/// belongs to (`(group label, who, value)`; a figure whose group the chart does not have is
/// left out). Returns how many were added; the chart says where they come from.
fn add_published_bars(
    chart: &mut Chart,
    seed: &Seed,
    figures: impl IntoIterator<Item = (String, String, f64)>,
) -> usize {
    let Plot::Bars { groups, bars } = &mut chart.plot else {
        return 0;
    };
    let mut added = 0;
    for (group, who, value) in figures {
        let Some(g) = groups.iter().position(|x| *x == group) else {
            continue;
        };
        let label = seed.label(&who);
        let slot = match chart.legend.iter().position(|k| k.label == label) {
            Some(slot) => slot,
            None => {
                let n = chart.legend.iter().filter(|k| k.look.published).count();
                chart.legend.push(Key {
                    label,
                    look: published_look(n),
                });
                chart.legend.len() - 1
            }
        };
        bars.push(Bar {
            group: g,
            slot,
            mark: Mark::exact(value),
            look: chart.legend[slot].look,
        });
        added += 1;
    }
    if added > 0 {
        chart.notes.push(seed.note());
    }
    added
}

/// Adds the seed's series to a line chart as dashed lines of their own.
fn add_published_lines(chart: &mut Chart, seed: &Seed, series: &[(&str, &[(u64, f64)])]) {
    let Plot::Lines { lines, .. } = &mut chart.plot else {
        return;
    };
    if lines.is_empty() {
        return;
    }
    for (n, (who, points)) in series.iter().enumerate() {
        let look = published_look(n);
        chart.legend.push(Key {
            label: seed.label(who),
            look,
        });
        lines.push(Line {
            look,
            points: points
                .iter()
                .map(|(x, v)| (*x as f64, Mark::exact(*v)))
                .collect(),
            gap: None,
        });
    }
    chart.notes.push(seed.note());
}

/// A seed's published figures as a table, when it published any.
fn published_table<'a>(seed: &Seed, rows: Vec<[String; 3]>) -> Option<Block<'a>> {
    (!rows.is_empty()).then(|| Block::Published {
        heading: format!(
            "Seed {}'s published figures (measured on {})",
            seed.number, seed.hardware
        ),
        rows,
    })
}

/// A whole number with thousands separated: `20,000`.
fn count_text(n: f64) -> String {
    let digits = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A bar slot per contender (with the parameters in `varying`) and series.
fn contender_slot(ctx: &Ctx, i: &Item<'_>, varying: &[String]) -> (u64, String, Rgb) {
    let c = &i.record.contender;
    let extra = params_subset(i, varying);
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
}

/// One of the ring's seed charts: metric, title, value axis, the seed's figures.
type RingChart<'s> = (&'s str, &'s str, Option<String>, &'s [(&'s str, u64, f64)]);

/// Seed 000: the time to build a ring of N actors and the messages per second around it,
/// a bar per runtime for each ring size, beside the seed's Erlang and Scala figures.
fn ring<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let seed = &seeds::RING;
    let mut blocks = Vec::new();
    let charts: [RingChart<'_>; 2] = [
        (
            "construct",
            "ring (seed 000): time to spawn and link N actors",
            Some("time to construct the ring (ms)".to_owned()),
            seeds::RING_SPAWN_MS,
        ),
        (
            "throughput",
            "ring (seed 000): messages per second around the ring",
            None,
            seeds::RING_RATE,
        ),
    ];
    for (metric, title, y_label, published) in charts {
        let its: Vec<Item<'a>> = items
            .iter()
            .filter(|i| i.record.metric == metric && i.number("actors").is_some())
            .copied()
            .collect();
        if its.is_empty() {
            continue;
        }
        let varying = varying_params(&its, &["actors", "rounds"]);
        let group = |n: f64| format!("{} actors", count_text(n));
        let mut chart = bar_chart(
            &its,
            BarSpec {
                title: title.to_owned(),
                x_label: "N = actors in the ring",
                y_label,
                y_scale: Scale::Log,
                group: &|i| {
                    let n = i.number("actors").unwrap_or(0.0);
                    (n as u64, group(n))
                },
                slot: &|i| contender_slot(ctx, i, &varying),
            },
        );
        add_published_bars(
            &mut chart,
            seed,
            published
                .iter()
                .map(|(who, n, v)| (group(*n as f64), (*who).to_owned(), *v)),
        );
        blocks.push(figure(chart, its));
    }
    let rest: Vec<Item<'a>> = items
        .iter()
        .filter(|i| !matches!(i.record.metric.as_str(), "construct" | "throughput"))
        .copied()
        .collect();
    blocks.extend(sized_bars(ctx, "ring", &rest, &["actors", "rounds"], &[]));
    let mut rows: Vec<[String; 3]> = seeds::RING_SPAWN_MS
        .iter()
        .map(|(who, n, ms)| {
            [
                (*who).to_owned(),
                format!("construct a ring of {} actors", count_text(*n as f64)),
                format!("{} ms", human(*ms)),
            ]
        })
        .collect();
    rows.extend(seeds::RING_RATE.iter().map(|(who, n, rate)| {
        [
            (*who).to_owned(),
            format!("100 M messages round a ring of {n} actors"),
            format!("{} msgs/s", human(*rate)),
        ]
    }));
    blocks.extend(published_table(seed, rows));
    blocks
}

fn counter<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    seed_over_size(
        ctx,
        items,
        SeedOverSize {
            metric: "throughput",
            title: "counter (seed 002): {} against messages per producer",
            x_key: "per_producer",
            x_label: "K = messages per producer",
            seed: &seeds::COUNTER,
            published: seeds::COUNTER_RATE,
            what: &|k| format!("{} messages per producer", count_text(k as f64)),
            unit: "msgs/s",
        },
    )
}

/// A seed whose scenario runs at several sizes: a log-log chart per metric against the size,
/// the seed's own published series drawn on the chart of `metric` and listed in a table.
struct SeedOverSize<'s> {
    metric: &'static str,
    /// The chart's title; `{}` stands for the metric.
    title: &'static str,
    x_key: &'static str,
    x_label: &'static str,
    seed: &'s Seed,
    published: &'s [(&'s str, &'s [(u64, f64)])],
    /// How a table row names a size.
    what: &'s dyn Fn(u64) -> String,
    unit: &'static str,
}

fn seed_over_size<'a>(ctx: &Ctx, items: &[Item<'a>], s: SeedOverSize<'_>) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    for (metric, its) in by_metric(items, &[s.metric]) {
        let spec = LineSpec {
            title: s.title.replace("{}", &metric.replace('_', " ")),
            x_key: s.x_key,
            x_label: s.x_label,
            x_log: true,
            y_label: None,
            y_scale: Scale::Log,
            handled: &[],
            name: &name,
            bands: Vec::new(),
        };
        let (mut chart, drawn) = line_chart(ctx, &its, spec);
        if metric == s.metric {
            add_published_lines(&mut chart, s.seed, s.published);
        }
        push_lines(&mut blocks, (chart, drawn));
    }
    let rows = series_rows(s.published, s.what, s.unit);
    blocks.extend(published_table(s.seed, rows));
    blocks
}

/// A seed's series as table rows.
fn series_rows(
    series: &[(&str, &[(u64, f64)])],
    what: impl Fn(u64) -> String,
    unit: &str,
) -> Vec<[String; 3]> {
    series
        .iter()
        .flat_map(|(who, points)| {
            points
                .iter()
                .map(|(x, v)| [(*who).to_owned(), what(*x), format!("{} {unit}", human(*v))])
        })
        .collect()
}

fn chain<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    seed_over_size(
        ctx,
        items,
        SeedOverSize {
            metric: "elapsed",
            title: "chain (seed 004): threads against actors, {} over N",
            x_key: "length",
            x_label: "N = stages in the chain, and messages sent through it",
            seed: &seeds::CHAIN,
            published: seeds::CHAIN_MS,
            what: &|n| format!("N = {}", count_text(n as f64)),
            unit: "ms",
        },
    )
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
    match log {
        "" => String::new(),
        "none" => ", without the log".to_owned(),
        other => format!(", log={other}"),
    }
}

/// Seed 003: throughput and latency percentiles against clients, a line per contender and
/// style (request-reply, one-way), with and without the order log, beside the baselines
/// without actors.
fn trading<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let name = by_contender(ctx);
    let mut first = true;
    for (log, its) in log_modes(items) {
        for metric in ["throughput", "latency_p50", "latency_p95", "latency_p99"] {
            let of_metric: Vec<Item<'a>> = its
                .iter()
                .filter(|i| i.record.metric == metric)
                .copied()
                .collect();
            let what = if metric == "throughput" {
                "throughput".to_owned()
            } else {
                format!("{} latency", short_metric(metric))
            };
            let spec = LineSpec {
                title: format!(
                    "trading (seed 003){}: {what} against clients",
                    log_title(&log)
                ),
                x_key: "clients",
                x_label: "clients, each with one order in flight",
                x_log: true,
                y_label: None,
                y_scale: if metric == "throughput" {
                    Scale::Auto
                } else {
                    Scale::Log
                },
                handled: &["log"],
                name: &name,
                bands: Vec::new(),
            };
            let (mut chart, drawn) = line_chart(ctx, &of_metric, spec);
            if first && !drawn.is_empty() {
                chart
                    .notes
                    .push(format!("Seed 003 measured on {}.", seeds::TRADING.hardware));
                first = false;
            }
            push_lines(&mut blocks, (chart, drawn));
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
    vec![figure(chart, latency)]
}

/// A phase's name as the charts show it: `search_hangs` (or `hanging`) is "search hangs".
fn phase_name(phase: &str) -> String {
    match phase {
        "search_hangs" | "hanging" => "search hangs".to_owned(),
        other => other.replace('_', " "),
    }
}

/// The store's closed-model figures, its capacity and its timeline; or what to run to get
/// them.
fn store<'a>(ctx: &Ctx, items: &[Item<'a>]) -> Vec<Block<'a>> {
    if items.is_empty() {
        return vec![Block::NoData {
            commands: &["troupe-store bench", "troupe-bench store"],
        }];
    }
    let seed = &seeds::STORE;
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
    let group = |i: &Item<'_>| {
        let phase = i.text("phase");
        (phase_rank(&phase), phase_name(&phase))
    };
    let mut blocks = Vec::new();

    // The seed's chart: p50 and p90 by phase, one chart per request type.
    let pcts = ["p50", "p90"];
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
        let mut chart = bar_chart(
            &its,
            BarSpec {
                title: format!(
                    "store (seed 001), {request} requests: p50 and p90 latency by phase"
                ),
                x_label: "phase of the run",
                y_label: Some("latency (ms)".to_owned()),
                y_scale: Scale::Log,
                group: &group,
                slot: &|i| {
                    let c = &i.record.contender;
                    let p = pcts.iter().position(|m| *m == i.record.metric).unwrap_or(0);
                    let shade = darken(
                        tint(ctx.palette.colour(c), [0.45, 0.0][p]),
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
        add_published_bars(
            &mut chart,
            seed,
            seeds::STORE_FIGURES
                .iter()
                .filter(|f| f.2 == request && pcts.contains(&f.3))
                .map(|f| (phase_name(f.1), format!("{} {}", f.0, f.3), f.4)),
        );
        blocks.push(figure(chart, its));
    }

    // Answers per second, and answers OK per second, by phase: a bar per store and request.
    for (metric, title, y_label) in [
        (
            "throughput",
            "store (seed 001): answers per second by phase",
            "answers of any status per second (req/s)",
        ),
        (
            "ok_rate",
            "store: requests answered OK per second, by phase",
            "answered OK per second (req/s)",
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
        let mut chart = bar_chart(
            &its,
            BarSpec {
                title: title.to_owned(),
                x_label: "phase of the run",
                y_label: Some(y_label.to_owned()),
                y_scale: Scale::Linear,
                group: &group,
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
        if metric == "throughput" {
            add_published_bars(
                &mut chart,
                seed,
                seeds::STORE_FIGURES
                    .iter()
                    .filter(|f| f.3 == "throughput")
                    .map(|f| (phase_name(f.1), format!("{} · {}", f.0, f.2), f.4)),
            );
        }
        blocks.push(figure(chart, its));
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
                slot: &|i| contender_slot(ctx, i, &[]),
            },
        );
        blocks.push(figure(chart, capacity));
    }

    // The capacity search point by point: p99 against the offered rate.
    let open: Vec<Item<'a>> = items
        .iter()
        .filter(|i| i.record.scenario == "store-open" && i.record.metric == "p99")
        .copied()
        .collect();
    let name = by_contender(ctx);
    let spec = LineSpec {
        title: "store: p99 latency against the offered rate (open model)".to_owned(),
        x_key: "rate",
        x_label: "offered rate (requests/s, fixed arrival times)",
        x_log: true,
        y_label: Some("p99 latency from the planned start (ms)".to_owned()),
        y_scale: Scale::Log,
        handled: &["request"],
        name: &name,
        bands: Vec::new(),
    };
    push_lines(&mut blocks, line_chart(ctx, &open, spec));

    // The first run second by second, per store.
    let mut stores = distinct(&timeline, |i| i.record.contender.clone());
    stores.sort_by_key(|s| palette::rank(s));
    for store in &stores {
        let its: Vec<Item<'a>> = timeline
            .iter()
            .filter(|i| i.record.contender == *store)
            .copied()
            .collect();
        blocks.extend(timeline_figures(ctx, store, &its, &request_rank));
    }
    let rows: Vec<[String; 3]> = seeds::STORE_FIGURES
        .iter()
        .map(|(who, phase, request, metric, value)| {
            let unit = if *metric == "throughput" {
                "req/s"
            } else {
                "ms"
            };
            [
                (*who).to_owned(),
                format!("{}, {request}: {metric}", phase_name(phase)),
                format!("{} {unit}", human(*value)),
            ]
        })
        .collect();
    blocks.extend(published_table(seed, rows));
    blocks
}

/// One store's run second by second: answers per second (a second without answers drawn as
/// zero) and p99 latency (a second without answers left blank), the phases named.
fn timeline_figures<'a>(
    ctx: &Ctx,
    store: &str,
    its: &[Item<'a>],
    request_rank: &dyn Fn(&str) -> usize,
) -> Vec<Block<'a>> {
    let mut blocks = Vec::new();
    let bands = phase_bands(its);
    let seconds: Vec<f64> = its.iter().filter_map(|i| i.number("second")).collect();
    let (first, last) = seconds
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    let name = |i: &Item<'_>| {
        let r = i.text("request");
        let rank = request_rank(&r);
        (rank as u64, r, palette::category(rank))
    };
    for (metric, what, scale) in [
        ("throughput", "answers per second", Scale::Linear),
        ("p99", "p99 latency per second", Scale::Log),
    ] {
        let of_metric: Vec<Item<'a>> = its
            .iter()
            .filter(|i| i.record.metric == metric)
            .copied()
            .collect();
        let spec = LineSpec {
            title: format!("store timeline, {store}: {what}"),
            x_key: "second",
            x_label: "second of the run (the phases named above the plot; failure shaded)",
            x_log: false,
            y_label: None,
            y_scale: scale,
            handled: &["phase", "request"],
            name: &name,
            bands: bands.clone(),
        };
        let (mut chart, drawn) = line_chart(ctx, &of_metric, spec);
        if let Plot::Lines { lines, .. } = &mut chart.plot {
            for line in lines.iter_mut() {
                if metric == "throughput" && first <= last {
                    line.points = fill_gaps(&line.points, first, last, 1.0);
                } else {
                    line.gap = Some(1.0);
                }
            }
        }
        chart.notes.push(if metric == "throughput" {
            "A second in which no answer came is drawn as zero.".to_owned()
        } else {
            "A second in which no answer came has no latency: the line stops there.".to_owned()
        });
        push_lines(&mut blocks, (chart, drawn));
    }
    blocks
}

/// The points with a zero at every step from `first` to `last` that has none: a count that
/// is missing is a count of nothing, and a line drawn straight across the gap would say
/// otherwise.
pub(super) fn fill_gaps(
    points: &[(f64, Mark)],
    first: f64,
    last: f64,
    step: f64,
) -> Vec<(f64, Mark)> {
    let mut out: Vec<(f64, Mark)> = points.to_vec();
    if step.is_nan() || step <= 0.0 || !first.is_finite() || !last.is_finite() {
        return out;
    }
    let steps = ((last - first) / step).round().clamp(0.0, 1e6) as usize;
    for k in 0..=steps {
        let x = first + step * k as f64;
        if !points.iter().any(|(at, _)| (at - x).abs() < step / 2.0) {
            out.push((x, Mark::exact(0.0)));
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
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
        let label = phase_name(&phase);
        match bands.last_mut() {
            Some(band) if band.label == label => band.to = second + 0.5,
            _ => bands.push(Band {
                from: second - 0.5,
                to: second + 0.5,
                shaded: !matches!(phase.as_str(), "healthy" | "recovered" | ""),
                label,
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
        .map(|(metric, its)| {
            let chart = contender_bars(
                ctx,
                &its,
                format!("{scenario}: {}", metric.replace('_', " ")),
            );
            figure(chart, its)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Record;
    use serde_json::json;

    fn record(metric: &str, contender: &str, params: serde_json::Value, samples: &[f64]) -> Record {
        Record::new(
            "store",
            metric,
            contender,
            params.as_object().cloned().unwrap_or_default(),
            "req/s",
            samples.to_vec(),
            "",
        )
    }

    fn item(record: &Record) -> Item<'_> {
        Item { series: 0, record }
    }

    fn ctx(contenders: &[&str]) -> Ctx {
        Ctx {
            labels: vec!["a".into()],
            palette: Palette::new(contenders.iter().copied()),
        }
    }

    #[test]
    fn gaps_in_a_count_are_zeros() {
        let one = Mark::exact(5.0);
        let filled = fill_gaps(&[(0.0, one), (3.0, one)], 0.0, 4.0, 1.0);
        let xs: Vec<f64> = filled.iter().map(|(x, _)| *x).collect();
        assert_eq!(xs, [0.0, 1.0, 2.0, 3.0, 4.0]);
        let values: Vec<f64> = filled.iter().map(|(_, m)| m.median).collect();
        assert_eq!(values, [5.0, 0.0, 0.0, 5.0, 0.0]);
        // Nothing to fill, and nonsense steps leave the points alone.
        assert_eq!(fill_gaps(&[(0.0, one)], 0.0, 0.0, 1.0).len(), 1);
        assert_eq!(fill_gaps(&[(0.0, one)], 0.0, 9.0, 0.0).len(), 1);
    }

    #[test]
    fn a_timeline_draws_a_silent_second_as_zero_and_breaks_its_latency() {
        let records: Vec<Record> = [0, 1, 4]
            .iter()
            .flat_map(|&second| {
                let params = json!({"request": "index", "second": second, "phase": "healthy"});
                let mut answers = record("throughput", "troupe-store", params.clone(), &[300.0]);
                answers.scenario = "store-timeline".into();
                let mut p99 = record("p99", "troupe-store", params, &[2.0]);
                p99.scenario = "store-timeline".into();
                [answers, p99]
            })
            .collect();
        let items: Vec<Item<'_>> = records.iter().map(item).collect();
        let blocks = timeline_figures(&ctx(&["troupe-store"]), "troupe-store", &items, &|_| 0);
        let charts: Vec<&Chart> = blocks
            .iter()
            .filter_map(|b| match b {
                Block::Figure { chart, .. } => Some(chart),
                _ => None,
            })
            .collect();
        assert_eq!(charts.len(), 2);
        let Plot::Lines { lines, .. } = &charts[0].plot else {
            panic!("a line chart")
        };
        let points: Vec<(f64, f64)> = lines[0]
            .points
            .iter()
            .map(|(x, m)| (*x, m.median))
            .collect();
        assert_eq!(
            points,
            [
                (0.0, 300.0),
                (1.0, 300.0),
                (2.0, 0.0),
                (3.0, 0.0),
                (4.0, 300.0)
            ]
        );
        let Plot::Lines { lines, .. } = &charts[1].plot else {
            panic!("a line chart")
        };
        assert_eq!(
            lines[0].gap,
            Some(1.0),
            "latency stops at the silent seconds"
        );
        assert_eq!(lines[0].points.len(), 3, "no latency is made up");
    }

    #[test]
    fn the_top_of_a_sweep_is_a_lower_bound() {
        let top = record(
            "capacity",
            "troupe-store",
            json!({"request": "index", "highest_rate_tried": 100_000.0}),
            &[100_000.0],
        );
        let below = record(
            "capacity",
            "thread-per-request",
            json!({"request": "index", "highest_rate_tried": 100_000.0}),
            &[10_000.0],
        );
        let unswept = record("capacity", "x", json!({"request": "index"}), &[100_000.0]);
        assert!(Mark::of(&top).at_least);
        assert!(!Mark::of(&below).at_least && !Mark::of(&unswept).at_least);
        let note = sweep_top_note(&[item(&top), item(&below)]).expect("a note");
        assert!(note.contains("troupe-store") && !note.contains("thread-per-request"));
        assert!(sweep_top_note(&[item(&below)]).is_none());
        let Block::Figure { chart, .. } = figure(
            contender_bars(&ctx(&["troupe-store"]), &[item(&top)], "t".into()),
            vec![item(&top)],
        ) else {
            panic!("a figure")
        };
        assert!(chart.notes.iter().any(|n| n.contains("lower bound")));
        let svg = super::super::chart::draw(&chart).svg;
        assert!(svg.contains("≥ 100k"), "the bar's label says at least");

        // Nothing held: not a capacity of zero, but below the lowest rate tried.
        let none = record(
            "capacity",
            "thread-per-request",
            json!({"request": "index", "lowest_rate_tried": 2_000.0}),
            &[0.0],
        );
        assert_eq!(Mark::of(&none).below, Some(2_000.0));
        assert_eq!(Mark::of(&below).below, None);
        let note = sweep_top_note(&[item(&none)]).expect("a note");
        assert!(
            note.contains("below its lowest step") && note.contains("(2000 req/s)"),
            "{note}"
        );
        let Block::Figure { chart, .. } = figure(
            contender_bars(&ctx(&["thread-per-request"]), &[item(&none)], "t".into()),
            vec![item(&none)],
        ) else {
            panic!("a figure")
        };
        let svg = super::super::chart::draw(&chart).svg;
        assert!(svg.contains("&lt; 2000"), "{svg}");
    }

    #[test]
    fn a_wide_spread_is_noted_and_a_narrow_one_is_not() {
        let wide = record(
            "throughput",
            "troupe",
            json!({"actors": 100}),
            &[1.0, 1.6, 1.2],
        );
        let narrow = record(
            "throughput",
            "erlang",
            json!({"actors": 100}),
            &[1.0, 1.4, 1.2],
        );
        let single = record("throughput", "go-chan", json!({"actors": 100}), &[3.0]);
        let note = spread_note(&[item(&wide), item(&narrow), item(&single)]).expect("a note");
        assert!(note.contains("troupe at actors=100 (1.6×)"), "{note}");
        assert!(!note.contains("erlang") && !note.contains("go-chan"));
        assert!(spread_note(&[item(&narrow), item(&single)]).is_none());
        // A record whose repetitions carry the runtime's counters says what differed.
        let mut counted = wide.clone();
        counted.counters = [(2, 2.9, 185.0), (1, 6.0, 179.0), (1, 4.0, 180.0)]
            .iter()
            .map(|&(width, per_turn, ns)| {
                let v = json!({"width": width, "width_changes": 1,
                    "messages_per_turn": per_turn, "core_to_core_ns": ns});
                v.as_object().unwrap().clone()
            })
            .collect();
        let note = spread_note(&[item(&counted)]).expect("a note");
        assert!(
            note.contains(
                "troupe at actors=100 (1.6×: smallest 1.00 with width 2 after 1 change, 2.9 \
                 messages per turn, 185 ns apart; largest 1.60 with width 1 after 1 change, 6.0 \
                 messages per turn, 179 ns apart)"
            ),
            "{note}"
        );
        // Only the cores' distance (a peer's): nothing more to say.
        let mut probed = wide.clone();
        probed.counters = vec![
            json!({"core_to_core_ns": 25.0})
                .as_object()
                .unwrap()
                .clone();
            3
        ];
        let note = spread_note(&[item(&probed)]).expect("a note");
        assert!(note.contains("troupe at actors=100 (1.6×)"), "{note}");
    }

    #[test]
    fn every_legend_entry_gets_its_own_colour_and_marker() {
        // Three bars of one contender: before, all three were troupe's red.
        let records: Vec<Record> = ["plain", "deferred", "deferred-pipe"]
            .iter()
            .map(|reply| record("round_trips", "troupe", json!({"reply": reply}), &[1.0]))
            .collect();
        let items: Vec<Item<'_>> = records.iter().map(item).collect();
        let chart = contender_bars(&ctx(&["troupe"]), &items, "ask".into()).finish();
        assert_eq!(chart.legend.len(), 3);
        for (i, a) in chart.legend.iter().enumerate() {
            for b in &chart.legend[i + 1..] {
                assert!(
                    super::super::model::colour_distance(a.look.colour, b.look.colour) >= 60.0,
                    "{} and {} look alike",
                    a.label,
                    b.label
                );
                assert_ne!(a.look.marker, b.look.marker);
            }
        }
        let Plot::Bars { bars, .. } = &chart.plot else {
            panic!("bars")
        };
        for bar in bars {
            assert_eq!(
                bar.look, chart.legend[bar.slot].look,
                "a bar looks like its entry"
            );
        }
    }

    #[test]
    fn published_figures_join_only_the_groups_the_chart_has() {
        let records = [record(
            "construct",
            "troupe",
            json!({"actors": 100}),
            &[0.05],
        )];
        let items: Vec<Item<'_>> = records.iter().map(item).collect();
        let mut chart = contender_bars(&ctx(&["troupe"]), &items, "ring".into());
        let Plot::Bars { groups, .. } = &chart.plot else {
            panic!("bars")
        };
        let group = groups[0].clone();
        let added = add_published_bars(
            &mut chart,
            &seeds::RING,
            [
                (group, "Erlang R12B".to_owned(), 0.2),
                ("no such group".to_owned(), "Erlang R12B".to_owned(), 120.0),
            ],
        );
        assert_eq!(added, 1);
        assert_eq!(chart.legend.len(), 2);
        assert!(chart.legend[1].look.published);
        assert_eq!(chart.legend[1].label, "Erlang R12B · seed 000, published");
        assert!(chart
            .notes
            .iter()
            .any(|n| n.contains("not on this machine")));
    }

    #[test]
    fn ids_are_slugs_and_unique() {
        let mut taken = vec!["ring".to_owned()];
        assert_eq!(slug("Ask Me!"), "scenario-ask-me");
        assert_eq!(slug("<>"), "scenario");
        assert_eq!(unique_id("a", &mut taken), "a");
        assert_eq!(unique_id("a", &mut taken), "a-2");
    }
}
