//! The page: its header, the sources, the table of contents, and each section's charts
//! (drawn by [`super::chart`]) with the table of the records under each.
//!
//! Every text that comes from the data goes through [`escape`].

use std::collections::HashMap;
use std::fmt::Write as _;

use super::chart;
use super::model::{at_sweep_top, below_sweep, better, param_names, params_key, value_text, Item};
use super::palette;
use super::sections::{Block, Ctx, Section};
use super::Series;
use crate::stats::human;

/// Tables with more rows than this are folded (`<details>`), open on a click.
const FOLD_ROWS: usize = 24;

/// The contenders every other is divided by, per section (see [`Section::reference`]).
const REFERENCES: &[&str] = &["troupe", "troupe-store"];

/// `text` safe inside HTML text and attribute values; control characters (which HTML does
/// not allow) become spaces.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The medians of the reference contenders, by series, scenario, metric and parameters.
struct Ratios {
    medians: HashMap<(usize, String, String, String, String), f64>,
}

impl Ratios {
    fn new(items: &[Item<'_>]) -> Ratios {
        let mut medians = HashMap::new();
        for item in items {
            let r = item.record;
            if REFERENCES.contains(&r.contender.as_str()) {
                medians
                    .entry(Self::key(item, &r.contender))
                    .or_insert(r.median);
            }
        }
        Ratios { medians }
    }

    fn key(item: &Item<'_>, reference: &str) -> (usize, String, String, String, String) {
        let r = item.record;
        (
            item.series,
            r.scenario.clone(),
            r.metric.clone(),
            params_key(&r.params),
            reference.to_owned(),
        )
    }

    /// The item's median over the reference's, if there is one to divide by.
    fn of(&self, item: &Item<'_>, reference: &str) -> Option<f64> {
        if item.record.contender == reference {
            return None;
        }
        let base = *self.medians.get(&Self::key(item, reference))?;
        let ratio = item.record.median / base;
        (base != 0.0 && ratio.is_finite()).then_some(ratio)
    }
}

const STYLE: &str = "\
:root{color-scheme:light}\
*{box-sizing:border-box}\
body{font-family:sans-serif;color:#1d1d1f;background:#fff;margin:0 auto;max-width:1120px;\
padding:0 20px 64px;line-height:1.45;overflow-wrap:break-word}\
h1{font-size:1.8em;margin:1em 0 .2em}\
h2{font-size:1.35em;margin:2.2em 0 .5em;padding-bottom:.2em;border-bottom:2px solid #c1121f}\
h3{font-size:1.05em;margin:1.6em 0 .4em}\
a{color:#1d4e89}\
p.meta{color:#555;margin-top:0}\
nav ol{columns:2;column-gap:2em;padding-left:1.4em}\
figure{margin:1.6em 0 .4em}\
svg{max-width:100%;height:auto;display:block}\
figcaption{font-size:.85em;color:#555;margin-top:.3em}\
.table{overflow-x:auto;margin:.2em 0 1.4em}\
table{border-collapse:collapse;font-size:.85em}\
caption{text-align:left;caption-side:top;color:#555;padding:0 0 .35em;font-size:.95em}\
th,td{border-bottom:1px solid #e2e2e2;padding:.28em .65em;text-align:left;vertical-align:top}\
th{background:#f3f3f3;font-weight:600}\
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
td.num{white-space:nowrap}\
td code{overflow-wrap:anywhere;font-size:.92em;color:#333}\
td.command{min-width:14em}\
td.id{white-space:nowrap}\
.failed{color:#c1121f;font-weight:bold}\
.dirty{color:#a4000f;background:#ffe3e3;font-weight:bold;padding:0 .3em;border-radius:3px}\
.note{color:#8a5a00;font-size:.9em}\
.nodata{padding:.8em 1em;background:#f6f6f6;border-left:4px solid #aaa}\
ul.plain{list-style:none;margin:0;padding:0}\
details{margin:.3em 0 1em}\
summary{cursor:pointer;color:#1d4e89}\
";

/// The whole page.
pub(super) fn page(
    ctx: &Ctx,
    series: &[Series],
    items: &[Item<'_>],
    sections: &[Section<'_>],
    generated: &str,
) -> String {
    let ratios = Ratios::new(items);
    let mut out = String::with_capacity(1 << 20);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<title>troupe benchmark report</title>\n");
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");

    out.push_str("<header id=\"top\">\n<h1>troupe benchmark report</h1>\n");
    let _ = writeln!(
        out,
        "<p class=\"meta\">Generated {} from {} record{} in {} series.</p>",
        escape(generated),
        items.len(),
        if items.len() == 1 { "" } else { "s" },
        series.len()
    );
    out.push_str(
        "<p>Every chart shows medians, with a whisker from the smallest to the largest \
         repetition; a hollow mark is a run that failed its own check. Under each chart, \
         the table of the records it draws.",
    );
    if ctx.multi() {
        out.push_str(
            " Each series (input file) is drawn on its own, labelled “contender · series”: \
             the first in full colour with solid lines, the next ones in other shades and \
             strokes (see each legend).",
        );
    }
    out.push_str("</p>\n");
    let failed = items.iter().filter(|i| !i.record.validated).count();
    if failed > 0 {
        let _ = writeln!(
            out,
            "<p class=\"failed\">{failed} record{} failed {} run’s own check \
             (marked FAILED in the tables).</p>",
            if failed == 1 { "" } else { "s" },
            if failed == 1 { "its" } else { "their" },
        );
    }
    out.push_str("</header>\n");

    out.push_str("<nav id=\"contents\">\n<h2>Contents</h2>\n<ol>\n");
    out.push_str("<li><a href=\"#sources\">Sources</a></li>\n");
    for section in sections {
        let _ = writeln!(
            out,
            "<li><a href=\"#{}\">{}</a></li>",
            escape(&section.id),
            escape(&section.title)
        );
    }
    out.push_str("</ol>\n</nav>\n");

    sources(&mut out, ctx, series);
    for section in sections {
        section_html(&mut out, ctx, section, &ratios);
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// One row per series: where and when its records were measured, and by what.
fn sources(out: &mut String, ctx: &Ctx, series: &[Series]) {
    out.push_str("<section id=\"sources\">\n<h2>Sources</h2>\n");
    if series.is_empty() {
        out.push_str("<p class=\"nodata\">No result files were given.</p>\n</section>\n");
        return;
    }
    out.push_str("<div class=\"table\" style=\"overflow-x:auto\"><table>\n");
    out.push_str(
        "<caption>A series is one results file. A commit marked <span class=\"dirty\">-dirty</span> \
         was built from uncommitted changes.</caption>\n",
    );
    out.push_str(
        "<thead><tr><th>series</th><th class=\"num\">records</th><th>machine</th>\
         <th>commit</th><th>measured (UTC)</th><th>contender: runtime (compiler)</th></tr></thead>\n<tbody>\n",
    );
    for (i, s) in series.iter().enumerate() {
        let records = &s.records;
        let machines = counted(records.iter().map(|r| {
            format!(
                "{}, {} cores, {}",
                r.machine.cpu, r.machine.cores, r.machine.os
            )
        }));
        let commits = counted(
            records
                .iter()
                .map(|r| r.machine.commit.clone().unwrap_or_default()),
        );
        let mut times: Vec<&str> = records.iter().filter_map(|r| r.time.as_deref()).collect();
        times.sort_unstable();
        let untimed = records.len() - times.len();
        let mut when = match (times.first(), times.last()) {
            (Some(a), Some(b)) if a == b => escape(a),
            (Some(a), Some(b)) => format!("{} – {}", escape(a), escape(b)),
            _ => "not recorded".to_owned(),
        };
        if untimed > 0 && !times.is_empty() {
            let _ = write!(
                when,
                " <span class=\"note\">({untimed} without a time)</span>"
            );
        }
        let mut contenders: Vec<&str> = records.iter().map(|r| r.contender.as_str()).collect();
        contenders.sort_by_key(|c| (palette::rank(c), *c));
        contenders.dedup();
        let mut runtimes = String::from("<ul class=\"plain\">");
        for c in contenders {
            let used = counted(records.iter().filter(|r| r.contender == c).map(|r| {
                match &r.machine.compiler {
                    Some(compiler) => format!("{} ({compiler})", r.machine.runtime),
                    None => r.machine.runtime.clone(),
                }
            }));
            let list: Vec<String> = used.iter().map(|(u, _)| escape(u)).collect();
            let _ = write!(
                runtimes,
                "<li><b>{}</b>: {}</li>",
                escape(c),
                list.join("; ")
            );
        }
        runtimes.push_str("</ul>");
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(ctx.labels.get(i).map_or(s.label.as_str(), String::as_str)),
            records.len(),
            lines(&machines, escape),
            lines(&commits, commit_html),
            when,
            runtimes
        );
    }
    out.push_str("</tbody></table></div>\n</section>\n");
}

/// The distinct values and how often each occurs, in order of first appearance.
fn counted(values: impl Iterator<Item = String>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for v in values {
        match out.iter_mut().find(|(x, _)| *x == v) {
            Some((_, n)) => *n += 1,
            None => out.push((v, 1)),
        }
    }
    out
}

/// Counted values one per line, each with its count when there are several.
fn lines(values: &[(String, usize)], show: impl Fn(&str) -> String) -> String {
    if let [(only, _)] = values {
        return show(only);
    }
    values
        .iter()
        .map(|(v, n)| format!("{} <span class=\"note\">({n} records)</span>", show(v)))
        .collect::<Vec<_>>()
        .join("<br>")
}

/// A commit, its `-dirty` marked; none given says so.
fn commit_html(commit: &str) -> String {
    if commit.is_empty() {
        return "<span class=\"note\">none given</span>".to_owned();
    }
    if commit.contains("-dirty") {
        format!(
            "<span class=\"dirty\" title=\"built from uncommitted changes\">{}</span>",
            escape(commit)
        )
    } else {
        escape(commit)
    }
}

fn section_html(out: &mut String, ctx: &Ctx, section: &Section<'_>, ratios: &Ratios) {
    let _ = writeln!(
        out,
        "<section id=\"{}\">\n<h2>{}</h2>\n<p>{}</p>",
        escape(&section.id),
        escape(&section.title),
        escape(&section.intro)
    );
    notes(out, &section.items);
    for block in &section.blocks {
        match block {
            Block::Figure { chart, items } => {
                let drawn = chart::draw(chart);
                out.push_str("<figure>\n");
                out.push_str(&drawn.svg);
                out.push_str("\n<figcaption>");
                out.push_str(match &chart.plot {
                    super::model::Plot::Bars { .. } => {
                        "Bars: medians; whiskers: min to max of the repetitions."
                    }
                    super::model::Plot::Lines { .. } => {
                        "Points: medians; whiskers: min to max of the repetitions."
                    }
                });
                if drawn.failed {
                    out.push_str(
                        " <span class=\"failed\">Hollow: the run failed its own check.</span>",
                    );
                }
                if drawn.hidden > 0 {
                    let _ = write!(
                        out,
                        " <span class=\"note\">{} value{} not drawn ({}; see the table).</span>",
                        drawn.hidden,
                        if drawn.hidden == 1 { "" } else { "s" },
                        if drawn.y_log || drawn.x_log {
                            "zero or negative, on a log axis"
                        } else {
                            "not a number"
                        }
                    );
                }
                for note in &chart.notes {
                    let _ = write!(out, " <span class=\"note\">{}</span>", escape(note));
                }
                out.push_str("</figcaption>\n</figure>\n");
                table(out, ctx, items, section.reference, ratios, drawn.y_log);
            }
            Block::Table { heading, items } => {
                let _ = writeln!(out, "<h3>{}</h3>", escape(heading));
                table(out, ctx, items, section.reference, ratios, false);
            }
            Block::Published { heading, rows } => {
                let _ = writeln!(out, "<h3>{}</h3>", escape(heading));
                out.push_str(
                    "<div class=\"table\"><table>\n<thead><tr><th>published for</th>\
                     <th>figure</th><th class=\"num\">value</th></tr></thead>\n<tbody>\n",
                );
                for [who, what, value] in rows {
                    let _ = writeln!(
                        out,
                        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
                        escape(who),
                        escape(what),
                        escape(value)
                    );
                }
                out.push_str("</tbody></table></div>\n");
            }
            Block::NoData { commands } => {
                let runs: Vec<String> = commands
                    .iter()
                    .map(|c| format!("<code>{}</code>", escape(c)))
                    .collect();
                let (first, rest) = runs
                    .split_first()
                    .map_or(("", &[][..]), |(f, r)| (f.as_str(), r));
                let _ = write!(out, "<p class=\"nodata\">No data: run {first}");
                if !rest.is_empty() {
                    let _ = write!(out, " (or {})", rest.join(", or "));
                }
                out.push_str(".</p>\n");
            }
        }
    }
    out.push_str("</section>\n");
}

/// How each contender of a section was configured (the records' notes), when any says.
fn notes(out: &mut String, items: &[Item<'_>]) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for item in items {
        let pair = (item.record.contender.as_str(), item.record.notes.trim());
        if !pair.1.is_empty() && !seen.contains(&pair) {
            seen.push(pair);
        }
    }
    if seen.is_empty() {
        return;
    }
    seen.sort_by_key(|(c, _)| palette::rank(c));
    out.push_str("<details>\n<summary>How each contender was configured</summary>\n<ul>\n");
    for (contender, note) in seen {
        let _ = writeln!(
            out,
            "<li><b>{}</b>: {}</li>",
            escape(contender),
            escape(note)
        );
    }
    out.push_str("</ul>\n</details>\n");
}

/// The rows in a reading order: by parameters and metric as they first appear, then by
/// contender, then by series.
fn ordered<'a>(items: &[Item<'a>]) -> Vec<Item<'a>> {
    let mut params: Vec<String> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for item in items {
        let key = params_key(&item.record.params);
        if !params.contains(&key) {
            params.push(key);
        }
        if !metrics.contains(&item.record.metric.as_str()) {
            metrics.push(&item.record.metric);
        }
    }
    let mut rows = items.to_vec();
    rows.sort_by_key(|i| {
        let key = params_key(&i.record.params);
        (
            params.iter().position(|p| *p == key),
            metrics.iter().position(|m| *m == i.record.metric),
            palette::rank(&i.record.contender),
            i.record.contender.clone(),
            i.series,
        )
    });
    rows
}

/// The table of `items`: a row per record.
fn table(
    out: &mut String,
    ctx: &Ctx,
    items: &[Item<'_>],
    reference: &str,
    ratios: &Ratios,
    log_axis: bool,
) {
    if items.is_empty() {
        return;
    }
    let rows = ordered(items);
    let params = param_names(&rows);
    let mut metrics: Vec<&str> = rows.iter().map(|i| i.record.metric.as_str()).collect();
    metrics.dedup();
    metrics.sort_unstable();
    metrics.dedup();
    let mut units: Vec<&str> = rows.iter().map(|i| i.record.unit.as_str()).collect();
    units.sort_unstable();
    units.dedup();
    let one_unit = (units.len() == 1).then(|| units[0]);

    let fold = rows.len() > FOLD_ROWS;
    if fold {
        let _ = writeln!(
            out,
            "<details>\n<summary>Table of the {} records</summary>",
            rows.len()
        );
    }
    out.push_str("<div class=\"table\" style=\"overflow-x:auto\"><table>\n<caption>");
    let directions: Vec<String> = units
        .iter()
        .map(|u| {
            if u.is_empty() {
                better(u).to_owned()
            } else {
                format!("{}: {}", escape(u), better(u))
            }
        })
        .collect();
    let _ = write!(
        out,
        "{}. ÷ {ref}: this median divided by {ref}’s median with the same parameters \
         (and series); under 1 means a smaller figure than {ref}’s.",
        directions.join("; "),
        ref = escape(reference)
    );
    out.push_str("</caption>\n<thead><tr>");
    if ctx.multi() {
        out.push_str("<th>series</th>");
    }
    out.push_str("<th>contender</th>");
    if metrics.len() > 1 {
        out.push_str("<th>metric</th>");
    }
    for p in &params {
        let _ = write!(out, "<th>{}</th>", escape(p));
    }
    let unit_header = one_unit
        .filter(|u| !u.is_empty())
        .map(|u| format!(" ({})", escape(u)))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<th class=\"num\">median{unit_header}</th><th class=\"num\">min</th><th class=\"num\">max</th>\
         <th class=\"num\">n</th><th class=\"num\">÷ {}</th><th>validated</th><th>command</th></tr></thead>\n<tbody>\n",
        escape(reference)
    );
    for item in &rows {
        let r = item.record;
        out.push_str("<tr>");
        if ctx.multi() {
            let label = ctx.labels.get(item.series).map_or("", String::as_str);
            let _ = write!(out, "<td>{}</td>", escape(label));
        }
        // Names and parameters stay on one line (the series and the command wrap).
        let _ = write!(out, "<td class=\"id\">{}</td>", escape(&r.contender));
        if metrics.len() > 1 {
            let _ = write!(out, "<td class=\"id\">{}</td>", escape(&r.metric));
        }
        for p in &params {
            let value = r.params.get(p).map(value_text).unwrap_or_default();
            let _ = write!(out, "<td class=\"id\">{}</td>", escape(&value));
        }
        let unit = if one_unit.is_some() {
            ""
        } else {
            r.unit.as_str()
        };
        let mut median = number(r.median, unit);
        if let Some(low) = below_sweep(r) {
            median = format!(
                "&lt; {}<br><span class=\"note\">no step of the sweep held</span>",
                number(low, unit)
            );
        } else if at_sweep_top(r) {
            median = format!(
                "≥ {median}<br><span class=\"note\">the highest step the sweep tries</span>"
            );
        }
        if log_axis && r.median.is_finite() && r.median <= 0.0 {
            median.push_str("<br><span class=\"note\">not drawn: ≤ 0 on a log axis</span>");
        }
        let ratio = ratios.of(item, reference).map(human).unwrap_or_default();
        let validated = if r.validated {
            "yes"
        } else {
            "<span class=\"failed\">FAILED</span>"
        };
        let command = r
            .command
            .as_deref()
            .map(|c| format!("<code>{}</code>", escape(c)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<td class=\"num\">{median}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{ratio}</td><td>{validated}</td><td class=\"command\">{command}</td></tr>",
            number(r.min, unit),
            number(r.max, unit),
            r.samples.len()
        );
    }
    out.push_str("</tbody></table></div>\n");
    if fold {
        out.push_str("</details>\n");
    }
}

/// A figure as [`human`] gives it, with its unit when the header does not give it.
fn number(x: f64, unit: &str) -> String {
    if !x.is_finite() {
        return "–".to_owned();
    }
    if unit.is_empty() {
        human(x)
    } else {
        format!("{} {}", human(x), escape(unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_controls() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>\u{0}"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt; "
        );
    }

    #[test]
    fn numbers_have_no_exponent_and_no_nan() {
        assert_eq!(number(f64::NAN, "ms"), "–");
        assert_eq!(number(1.5e9, "msgs/s"), "1.50G msgs/s");
    }
}
