//! The HTML report: one self-contained page drawn from one or more result files.
//!
//! Each input file is a [`Series`]. The page has a header (when it was made, the sources:
//! machines, commits, dates, runtimes), a table of contents, and a section per scenario in a
//! fixed order (ring, spawn, counter, chain, trading, trading-open-loop, fsync-probe, store,
//! then any other scenario by name). Each section has charts (inline SVG drawn with plotters)
//! and, under each chart, the table of the records it draws: median, min, max, number of
//! repetitions, the ratio to troupe's median, whether the run's own check passed, and the
//! command that produced it. With several series every chart draws each series on its own,
//! so a change between commits shows at a glance.
//!
//! The page needs nothing else: inline CSS, no script, no font, no request anywhere.
//!
//! The work is split in four parts: `model` (the data a chart is made of), `sections`
//! (which records go into which chart, per scenario), `chart` (drawing a chart as SVG) and
//! `html` (the page and its tables).

use std::path::{Path, PathBuf};

use crate::read::{read_file, ReadError};
use crate::schema::Record;

mod chart;
mod html;
mod model;
mod palette;
mod seeds;
mod sections;

/// The records of one input file, and how the page names them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The name in legends and tables: the file's name, and its commit when all its records
    /// share one (`results-a.jsonl @ 3f2c1e9a0b1d`).
    pub label: String,
    pub records: Vec<Record>,
}

impl Series {
    /// Reads a results file (JSON Lines, see [`read_file`]).
    ///
    /// The label is the file's name, with ` @ <commit>` when all its records share one
    /// commit. A file named `results.jsonl` (the name every run writes into its own folder)
    /// is named with its folder too (`all-20261120-100000/results.jsonl`), so the runs of a
    /// report over several folders can be told apart.
    pub fn from_file(path: &Path) -> Result<Series, ReadError> {
        let records = read_file(path)?;
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
        let folder = path
            .parent()
            .and_then(Path::file_name)
            .map(|f| f.to_string_lossy().into_owned());
        let name = match folder {
            Some(folder) if file == "results.jsonl" && !folder.is_empty() => {
                format!("{folder}/{file}")
            }
            _ => file,
        };
        Ok(Series {
            label: crate::output::series_label(&name, &records),
            records,
        })
    }
}

/// The whole page, as HTML.
pub fn render(series: &[Series]) -> String {
    render_at(series, &crate::stats::utc_now())
}

/// The page, saying it was generated at `generated`.
fn render_at(series: &[Series], generated: &str) -> String {
    let items = items_of(series);
    let ctx = context(series, &items);
    let sections = sections::build(&ctx, &items);
    html::page(&ctx, series, &items, &sections, generated)
}

/// One chart of the page, drawn: the section it is in, its title, and its SVG (a standalone
/// image: `<svg xmlns=…>` with inline text).
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The section's id (`ring`, `store`, ...).
    pub section: String,
    pub title: String,
    pub svg: String,
    /// What a reader must know to read it right (the page writes these under the chart).
    pub notes: Vec<String>,
}

impl Figure {
    /// A file name made from the title: `store-timeline-troupe-store-answers-per-second.svg`.
    pub fn file_name(&self) -> String {
        let mut name = String::new();
        for c in self.title.chars() {
            if c.is_ascii_alphanumeric() {
                name.push(c.to_ascii_lowercase());
            } else if !name.ends_with('-') {
                name.push('-');
            }
        }
        format!("{}.svg", name.trim_matches('-'))
    }
}

/// Every chart the page of `series` draws, in page order: for a program that wants the
/// images without the page (`troupe-store bench` writes its section's charts as files).
pub fn figures(series: &[Series]) -> Vec<Figure> {
    let items = items_of(series);
    let ctx = context(series, &items);
    sections::build(&ctx, &items)
        .into_iter()
        .flat_map(|section| {
            let id = section.id.clone();
            section
                .blocks
                .into_iter()
                .filter_map(move |block| match block {
                    sections::Block::Figure { chart, .. } => Some(Figure {
                        section: id.clone(),
                        title: chart.title.clone(),
                        svg: chart::draw(&chart).svg,
                        notes: chart.notes.clone(),
                    }),
                    _ => None,
                })
        })
        .collect()
}

fn items_of(series: &[Series]) -> Vec<model::Item<'_>> {
    series
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.records
                .iter()
                .map(move |record| model::Item { series: i, record })
        })
        .collect()
}

fn context(series: &[Series], items: &[model::Item<'_>]) -> sections::Ctx {
    sections::Ctx {
        labels: distinct_labels(series),
        palette: palette::Palette::new(items.iter().map(|i| i.record.contender.as_str())),
    }
}

/// The series' labels, made distinct (`name (2)`) where two are the same.
fn distinct_labels(series: &[Series]) -> Vec<String> {
    let mut labels: Vec<String> = Vec::with_capacity(series.len());
    for s in series {
        let mut label = s.label.clone();
        let mut n = 2;
        while labels.contains(&label) {
            label = format!("{} ({n})", s.label);
            n += 1;
        }
        labels.push(label);
    }
    labels
}

/// Writes the page as `dir/index.html` (creating `dir`) and returns that path. The page is
/// written under a temporary name in `dir` and then renamed, so no reader ever sees half of
/// it.
pub fn write(series: &[Series], dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let page = dir.join("index.html");
    crate::output::write_whole(&page, render(series).as_bytes())?;
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(
        scenario: &str,
        metric: &str,
        contender: &str,
        params: serde_json::Value,
        unit: &str,
        median: f64,
    ) -> Record {
        let mut r = Record::new(
            scenario,
            metric,
            contender,
            params.as_object().cloned().unwrap_or_default(),
            unit,
            vec![median],
            "",
        );
        r.time = Some("2026-01-01T00:00:00Z".into());
        r
    }

    #[test]
    fn figures_are_the_pages_charts_with_file_names() {
        let records = vec![
            record(
                "counter",
                "throughput",
                "troupe",
                json!({"producers": 2, "per_producer": 300}),
                "msgs/s",
                5.0,
            ),
            record(
                "counter",
                "throughput",
                "troupe",
                json!({"producers": 2, "per_producer": 3000}),
                "msgs/s",
                6.0,
            ),
        ];
        let series = [Series {
            label: "x".into(),
            records,
        }];
        let figures = figures(&series);
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].section, "counter");
        assert_eq!(
            figures[0].file_name(),
            "counter-seed-002-throughput-against-messages-per-producer.svg"
        );
        assert!(figures[0].svg.starts_with("<svg "));
        assert!(figures[0]
            .svg
            .contains("xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(render_at(&series, "now").contains(&figures[0].svg));
    }

    #[test]
    fn labels_are_made_distinct() {
        let s = Series {
            label: "results.jsonl".into(),
            records: vec![],
        };
        assert_eq!(
            distinct_labels(&[s.clone(), s.clone(), s]),
            ["results.jsonl", "results.jsonl (2)", "results.jsonl (3)"]
        );
    }

    #[test]
    fn an_empty_report_still_renders() {
        let page = render_at(&[], "now");
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("No data"));
        assert!(page.contains("No result files were given"));
    }

    #[test]
    fn one_point_and_zero_values_draw() {
        let records = vec![
            record(
                "counter",
                "throughput",
                "troupe",
                json!({"producers": 2, "per_producer": 300}),
                "msgs/s",
                5.0,
            ),
            record(
                "chain",
                "elapsed",
                "troupe",
                json!({"length": 10, "mode": "actors"}),
                "ms",
                0.0,
            ),
            record(
                "chain",
                "elapsed",
                "troupe",
                json!({"length": 100, "mode": "actors"}),
                "ms",
                2.0,
            ),
            record(
                "ring",
                "throughput",
                "troupe",
                json!({"actors": 1, "rounds": 1}),
                "msgs/s",
                7.0,
            ),
            record(
                "ring",
                "throughput",
                "erlang",
                json!({"actors": 1, "rounds": 1}),
                "msgs/s",
                7.0,
            ),
        ];
        let page = render_at(
            &[Series {
                label: "x".into(),
                records,
            }],
            "now",
        );
        assert!(
            page.contains("not drawn: ≤ 0 on a log axis"),
            "the zero on chain's log axis"
        );
        assert!(page.contains("1 value not drawn"));
        assert!(!page.contains("NaN") && !page.contains("inf<"));
    }
}
