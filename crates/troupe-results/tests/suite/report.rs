//! The HTML report rendered from the fixtures: its sections and charts, its numbers, its
//! escaping, and that it is well-formed.
//!
//! Well-formedness is checked by a small checker written here rather than an HTML parser: an
//! HTML5 parser (html5ever) repairs any markup without complaint, so it would not catch an
//! unclosed or misnested tag; an XML parser refuses valid HTML (`<meta charset="utf-8">`,
//! `<br>`). The checker balances tags (HTML's void elements and the SVG's self-closing
//! elements excepted), refuses a block element inside a paragraph, a stray `<` and a bare
//! `&`, which is what this page's markup can get wrong.

use std::path::{Path, PathBuf};

use troupe_results::report::{self, Series};
use troupe_results::Record;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn series(name: &str) -> Series {
    Series::from_file(&fixture(name)).expect("read the fixture")
}

fn both() -> String {
    report::render(&[series("results-a.jsonl"), series("results-b.jsonl")])
}

/// The HTML of the section with id `id` (up to the end of that section).
fn section<'p>(page: &'p str, id: &str) -> &'p str {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let rest = &page[start..];
    &rest[..rest.find("</section>").expect("the section ends") + "</section>".len()]
}

/// Every `<svg>…</svg>` of `html`.
fn svgs(html: &str) -> Vec<&str> {
    html.match_indices("<svg")
        .map(|(at, _)| {
            let rest = &html[at..];
            &rest[..rest.find("</svg>").expect("the svg ends") + "</svg>".len()]
        })
        .collect()
}

/// The page's text (outside tags and the stylesheet), entities left as they are.
fn text_of(html: &str) -> String {
    let mut html = html.to_owned();
    if let (Some(a), Some(b)) = (html.find("<style>"), html.find("</style>")) {
        html.replace_range(a..b, "");
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// A number written with an exponent (`1e6`, `2.5E-3`) in `text`, if any: digits, `e`, an
/// optional sign and digits, standing alone (a hash such as `900e8558d` is not a number).
fn exponent(text: &str) -> Option<String> {
    let b = text.as_bytes();
    (1..b.len().saturating_sub(1)).find_map(|i| {
        let after = if matches!(b[i + 1], b'+' | b'-') {
            i + 2
        } else {
            i + 1
        };
        if !(matches!(b[i], b'e' | b'E')
            && b[i - 1].is_ascii_digit()
            && b.get(after).is_some_and(u8::is_ascii_digit))
        {
            return None;
        }
        let mut start = i - 1;
        while start > 0 && (b[start - 1].is_ascii_digit() || b[start - 1] == b'.') {
            start -= 1;
        }
        let mut end = after;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        let alone = (start == 0 || !b[start - 1].is_ascii_alphanumeric())
            && (end == b.len() || !b[end].is_ascii_alphanumeric());
        alone.then(|| text[i.saturating_sub(10)..(after + 5).min(text.len())].to_owned())
    })
}

/// `inf` as a word (not in `info`, `infinite`) in `text`.
fn has_inf(text: &str) -> bool {
    let b = text.as_bytes();
    text.match_indices("inf").any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| b[i]);
        let after = b.get(at + 3).copied();
        !before.is_some_and(|c| c.is_ascii_alphabetic())
            && !after.is_some_and(|c| c.is_ascii_alphabetic())
    })
}

const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];
const BLOCKS: &[&str] = &[
    "address", "details", "div", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "header", "nav",
    "ol", "p", "section", "table", "ul",
];

/// Checks that every tag is closed, in order; see the module's comment.
fn well_formed(html: &str) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    let mut pos = 0;
    while pos < html.len() {
        let rest = &html[pos..];
        let Some(lt) = rest.find(['<', '&']) else {
            break;
        };
        let at = pos + lt;
        let tail = &html[at..];
        if let Some(after) = tail.strip_prefix('&') {
            let entity = after.find(';').map(|end| &after[..end]).filter(|e| {
                !e.is_empty()
                    && e.len() <= 10
                    && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '#')
            });
            if entity.is_none() {
                return Err(format!("a bare & at {at}: {}", &tail[..tail.len().min(40)]));
            }
            pos = at + 1;
            continue;
        }
        if tail.starts_with("<!--") {
            pos = at + tail.find("-->").ok_or("an unclosed comment")? + 3;
            continue;
        }
        if tail.starts_with("<!") {
            pos = at + tail.find('>').ok_or("an unclosed declaration")? + 1;
            continue;
        }
        let end = tail
            .find('>')
            .ok_or_else(|| format!("an unclosed tag at {at}"))?;
        let inner = &tail[1..end];
        let closing = inner.starts_with('/');
        let name_part = inner.trim_start_matches('/');
        let name_end = name_part
            .find(|c: char| c.is_whitespace() || c == '/')
            .unwrap_or(name_part.len());
        let name = &name_part[..name_end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!(
                "a stray < at {at}: {}",
                &tail[..tail.len().min(40)]
            ));
        }
        if closing {
            match open.pop() {
                Some(top) if top == name => {}
                top => return Err(format!("</{name}> at {at} closes {top:?}")),
            }
        } else if !(inner.ends_with('/') || VOID.contains(&name)) {
            if BLOCKS.contains(&name) && open.last() == Some(&"p") {
                return Err(format!("<{name}> inside <p> at {at}"));
            }
            if name == "style" || name == "script" {
                let close = format!("</{name}>");
                pos = at + tail.find(&close).ok_or("an unclosed style")? + close.len();
                continue;
            }
            open.push(name);
        }
        pos = at + end + 1;
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("never closed: {open:?}"))
    }
}

/// The cells of each row of the first table of `html` after `after`, and its header cells.
fn table_after(html: &str, after: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let start = html.find(after).expect("the marker") + after.len();
    let html = &html[start..];
    let table = &html[html.find("<table>").expect("a table")..];
    let table = &table[..table.find("</table>").expect("the table ends")];
    let cells = |row: &str, tag: &str| -> Vec<String> {
        row.split(&format!("<{tag}"))
            .skip(1)
            .map(|c| {
                text_of(&format!(
                    "<{tag}{}",
                    &c[..c.find(&format!("</{tag}>")).unwrap_or(c.len())]
                ))
                .trim()
                .to_owned()
            })
            .collect()
    };
    let mut rows = table.split("<tr>").skip(1);
    let header = cells(rows.next().expect("a header"), "th");
    (header, rows.map(|r| cells(r, "td")).collect())
}

/// A figure as `human` writes it (`0.132`, `45.6k`, `1.20M`) as a number.
fn parse_human(text: &str) -> f64 {
    let (number, scale) = match text.chars().last() {
        Some('k') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        Some('G') => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    number.parse::<f64>().expect("a number") * scale
}

#[test]
fn the_page_from_both_fixtures_has_every_section_and_chart() {
    let page = both();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for needle in [
        "<html lang=\"en\">",
        "<meta charset=\"utf-8\">",
        "<title>troupe benchmark report</title>",
        "<h1>troupe benchmark report</h1>",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    assert!(!page.contains("<script"), "no script");
    assert!(
        !page.contains("http://") || !page.contains("src="),
        "nothing loaded"
    );
    assert!(
        !page.contains("<img") && !page.contains("<link"),
        "no external resource"
    );

    // The sections in page order, each with at least its charts.
    let expected = [
        ("ring", 2),
        ("spawn", 2),
        ("counter", 1),
        ("chain", 1),
        ("trading", 8),
        ("trading-open-loop", 1),
        ("fsync-probe", 1),
        ("store", 10),
        ("scenario-ask", 1),
        ("scenario-restart", 1),
        ("scenario-timers", 1),
    ];
    let mut last = 0;
    for (id, charts) in expected {
        let at = page
            .find(&format!("<section id=\"{id}\">"))
            .unwrap_or_else(|| panic!("no section {id}"));
        assert!(at > last, "{id} out of order");
        last = at;
        assert!(
            page.contains(&format!("<a href=\"#{id}\">")),
            "{id} in the contents"
        );
        let found = svgs(section(&page, id)).len();
        assert!(found >= charts, "{id}: {found} charts, expected {charts}");
    }

    // Every chart has a title (bold text) and a name for screen readers, and a legend or
    // axis text; every chart's size is given.
    let all = svgs(&page);
    assert!(all.len() >= 29, "{} charts", all.len());
    for svg in &all {
        assert!(
            svg.contains("font-weight=\"bold\""),
            "a chart without a title"
        );
        assert!(!svg.contains("aria-label=\"\""), "a chart without a name");
        assert!(
            svg.contains("viewBox=\"0 0 860 "),
            "a chart of another size"
        );
        assert!(svg.contains("font-family=\"sans-serif\""));
    }
    // A table follows each chart.
    assert!(page.matches("<table>").count() > all.len());

    // Both series are named, the dirty commit marked.
    assert!(page.contains("results-a.jsonl"));
    assert!(page.contains("results-b.jsonl @ bbbbbbbbbbbb-dirty"));
    assert!(page.contains("class=\"dirty\""));
    assert!(page.contains("troupe · results-a.jsonl"));
    assert!(page.contains("troupe · results-b.jsonl @ bbbbbbbbbbbb-dirty"));
}

#[test]
fn numbers_are_formatted() {
    let page = both();
    assert!(!page.contains("NaN"), "NaN in the page");
    let text = text_of(&page);
    assert_eq!(exponent(&text), None, "a number with an exponent");
    assert!(!has_inf(&text), "inf in the page");
    assert!(!has_inf(&page), "inf in an attribute");
}

#[test]
fn the_failed_record_is_flagged() {
    let page = both();
    let failed = "<span class=\"failed\">FAILED</span>";
    assert_eq!(
        page.matches(failed).count(),
        1,
        "one failed record in the fixtures"
    );
    let counter = section(&page, "counter");
    let row = counter
        .split("<tr>")
        .find(|r| r.contains(failed))
        .expect("the failed row is in the counter section");
    assert!(
        row.contains(">erlang</td>") && row.contains(">3000000</td>"),
        "{row}"
    );
    assert!(counter.contains("Hollow: the run failed its own check."));
}

#[test]
fn the_ratio_column_divides_by_troupe() {
    let page = both();
    let ring = section(&page, "ring");
    // The throughput chart's table (construction times come first).
    let throughput = &ring[ring
        .find("messages per second around the ring")
        .expect("the ring's throughput chart")..];
    let (header, rows) = table_after(throughput, "</figure>");
    let ratio = header
        .iter()
        .position(|h| h == "÷ troupe")
        .expect("a ratio column");
    let contender = header.iter().position(|h| h == "contender").unwrap();
    let series = header.iter().position(|h| h == "series").unwrap();
    let go = rows
        .iter()
        .find(|r| r[contender] == "go-chan")
        .expect("a go-chan row");
    let value = parse_human(&go[ratio]);
    assert!(value > 0.0 && value < 1.0, "go-chan ÷ troupe = {value}");
    for row in &rows {
        if row[contender] == "troupe" {
            assert_eq!(row[ratio], "", "troupe is not divided by itself");
        }
        if row[series].starts_with("results-b") {
            assert_eq!(row[contender], "troupe");
        }
    }
}

#[test]
fn the_page_is_well_formed() {
    well_formed(&both()).unwrap();
    well_formed(&report::render(&[series("results-b.jsonl")])).unwrap();
    // The checker itself catches what it should.
    assert!(well_formed("<p><div></div></p>").is_err());
    assert!(well_formed("<div><span></div></span>").is_err());
    assert!(well_formed("<div>").is_err());
    assert!(well_formed("a < b").is_err());
    assert!(well_formed("a & b").is_err());
    assert!(well_formed("<br><svg><rect x=\"1\"/></svg>&amp;").is_ok());
}

#[test]
fn without_store_records_the_store_section_says_so() {
    let page = report::render(&[series("results-b.jsonl")]);
    let store = section(&page, "store");
    assert!(store.contains(
        "No data: run <code>troupe-store bench</code> (or <code>troupe-bench store</code>)."
    ));
    assert!(svgs(store).is_empty());
}

#[test]
fn text_from_the_data_is_escaped() {
    let mut records = series("results-b.jsonl").records;
    let mut evil = records[0].clone();
    evil.contender = "<script>alert(1)</script>".into();
    evil.command = Some("run --name '<b>' & \"x\"".into());
    evil.params.insert("note".into(), "<i>".into());
    records.push(evil.clone());
    evil.scenario = "<img src=x>".into();
    records.push(evil);
    let page = report::render(&[Series {
        label: "<label>".into(),
        records,
    }]);
    assert!(!page.contains("<script"));
    assert!(!page.contains("<img"));
    assert!(!page.contains("<label>") && !page.contains("'<b>'") && !page.contains("<i>"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("run --name &#39;&lt;b&gt;&#39; &amp; &quot;x&quot;"));
    well_formed(&page).unwrap();
}

#[test]
fn a_troupe_only_series_renders_with_blank_ratios() {
    let page = report::render(&[series("results-b.jsonl")]);
    well_formed(&page).unwrap();
    for id in ["ring", "spawn", "counter", "chain"] {
        let part = section(&page, id);
        assert!(!svgs(part).is_empty(), "{id} has a chart");
        let (header, rows) = table_after(part, "</figure>");
        assert!(
            !header.contains(&"series".to_owned()),
            "one series: no series column"
        );
        let ratio = header.iter().position(|h| h == "÷ troupe").unwrap();
        for row in rows {
            assert_eq!(row[ratio], "", "{id}: nothing to divide by");
        }
    }
    assert!(
        !page.contains("id=\"trading\""),
        "no trading records, no trading section"
    );
}

fn record(
    scenario: &str,
    metric: &str,
    contender: &str,
    params: &str,
    unit: &str,
    samples: &[f64],
) -> Record {
    let mut r = Record::new(
        scenario,
        metric,
        contender,
        serde_json::from_str(params).unwrap(),
        unit,
        samples.to_vec(),
        "",
    );
    // Not this test binary's name, nor this machine and commit, whose hashes could read as a
    // number with an exponent.
    r.command = Some("made-up".into());
    r.machine = troupe_results::Machine {
        cpu: "a test CPU".into(),
        cores: 2,
        os: "a test OS".into(),
        runtime: "troupe".into(),
        compiler: Some("rustc".into()),
        commit: Some("abcdef".into()),
    };
    r
}

#[test]
fn single_points_equal_values_and_zeros_still_draw() {
    let records = vec![
        // One x value on a log x axis.
        record(
            "counter",
            "throughput",
            "troupe",
            r#"{"producers":2,"per_producer":300}"#,
            "msgs/s",
            &[5.0, 5.0],
        ),
        // All values equal, on a linear and on a log axis.
        record(
            "ring",
            "throughput",
            "troupe",
            r#"{"actors":10,"rounds":10}"#,
            "msgs/s",
            &[3.0],
        ),
        record(
            "ring",
            "throughput",
            "go-chan",
            r#"{"actors":10,"rounds":10}"#,
            "msgs/s",
            &[3.0],
        ),
        record(
            "chain",
            "elapsed",
            "troupe",
            r#"{"length":10,"mode":"actors"}"#,
            "ms",
            &[2.0],
        ),
        record(
            "chain",
            "elapsed",
            "troupe",
            r#"{"length":100,"mode":"actors"}"#,
            "ms",
            &[2.0],
        ),
        // Zero and negative values on a log axis are not drawn, and the table says so.
        record(
            "chain",
            "elapsed",
            "os-threads",
            r#"{"length":10,"mode":"threads"}"#,
            "ms",
            &[0.0],
        ),
        record(
            "chain",
            "elapsed",
            "os-threads",
            r#"{"length":100,"mode":"threads"}"#,
            "ms",
            &[-1.0],
        ),
        // Only zeros.
        record(
            "spawn",
            "memory",
            "troupe",
            r#"{"actors":1}"#,
            "bytes/actor",
            &[0.0],
        ),
        // A scenario nobody knows, with a parameter missing from one record.
        record("mystery", "score", "x", r#"{"a":1}"#, "points", &[1.0]),
        record("mystery", "score", "y", r#"{}"#, "points", &[1e12]),
    ];
    let page = report::render(&[Series {
        label: "made up".into(),
        records,
    }]);
    well_formed(&page).unwrap();
    assert!(!page.contains("NaN"));
    assert_eq!(exponent(&text_of(&page)), None);
    let chain = section(&page, "chain");
    assert_eq!(chain.matches("not drawn: ≤ 0 on a log axis").count(), 2);
    assert!(chain.contains("2 values not drawn"));
    assert_eq!(svgs(section(&page, "counter")).len(), 1);
    assert_eq!(svgs(section(&page, "scenario-mystery")).len(), 1);
    for svg in svgs(&page) {
        assert!(svg.contains("<polyline") || svg.contains("<rect") || svg.contains("<circle"));
    }
}

#[test]
fn write_leaves_only_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("new/folder");
    let page = report::write(&[series("results-b.jsonl")], &out).unwrap();
    assert_eq!(page, out.join("index.html"));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["index.html"]);
    // Written again over the old page.
    report::write(&[series("results-a.jsonl")], &out).unwrap();
    assert!(std::fs::read_to_string(&page).unwrap().contains("trading"));
}

#[test]
fn labels_name_the_file_and_the_shared_commit() {
    assert_eq!(
        series("results-b.jsonl").label,
        "results-b.jsonl @ bbbbbbbbbbbb-dirty"
    );
    // Peer records carry no commit: no single commit is shared.
    assert_eq!(series("results-a.jsonl").label, "results-a.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("all-20261120-100000");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(fixture("results-b.jsonl"), run.join("results.jsonl")).unwrap();
    let s = Series::from_file(&run.join("results.jsonl")).unwrap();
    assert_eq!(
        s.label,
        "all-20261120-100000/results.jsonl @ bbbbbbbbbbbb-dirty"
    );
    assert!(Series::from_file(&dir.path().join("missing.jsonl")).is_err());
}

#[test]
fn the_exponent_check_finds_numbers_not_hashes() {
    assert!(exponent("median 1e6 msgs/s").is_some());
    assert!(exponent("x 2.5E-3 y").is_some());
    assert!(exponent("commit 900e8558d built").is_none());
    assert!(exponent("Linux 6.18.44-fc-v782").is_none());
    assert!(exponent("a1e5").is_none());
}
