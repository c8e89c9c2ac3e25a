//! The report as a reader sees it: rendered from the fixtures, opened in headless Chromium.
//!
//! Checks that no script error or console error occurs, that the page loads nothing from
//! anywhere (it is self-contained), that every chart's SVG has a size, and that no text leaves
//! its box (no horizontal scroll of the page, no table cell wider than itself, no chart text
//! outside its chart), that the seeds' charts compare several runtimes (and the seed's own
//! published figures where it gives numbers), that no chart text is cut short ("…"), and
//! that every legend entry of a chart has a colour of its own. Keeps a screenshot of the page as
//! `results/report-check/screenshot.png` at the workspace's root.
//!
//! Chromium is made present by `scripts/install-chromium.sh` (apt-get, as root) when it is
//! missing; where that is impossible the test says so loudly and skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use troupe_results::report::{self, Series};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A Chromium on PATH, installing one through the project's script if there is none.
fn chromium() -> Option<PathBuf> {
    let find = || {
        [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ]
        .iter()
        .find_map(|name| {
            let out = Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .ok()?;
            let path = String::from_utf8(out.stdout).ok()?;
            let path = path.trim();
            (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
        })
    };
    if let Some(found) = find() {
        return Some(found);
    }
    let script = workspace_root().join("scripts/install-chromium.sh");
    let status = Command::new("bash").arg(&script).status();
    match status {
        Ok(s) if s.success() => find(),
        _ => None,
    }
}

/// Runs Chromium headless with `args`, killing it after `limit`; returns its stdout.
fn run_chromium(chromium: &Path, profile: &Path, args: &[&str], limit: Duration) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    // Read stdout while it runs: a DOM dump is far larger than a pipe holds.
    let mut stdout = child.stdout.take().expect("chromium's stdout");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut text).map(|_| text)
    });
    let started = Instant::now();
    loop {
        if child.try_wait().expect("wait for chromium").is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?} (args {args:?})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = reader
        .join()
        .expect("the reader thread")
        .expect("chromium's output");
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs in the page: records errors from the start, and once the page has loaded, measures
/// it and writes the findings as JSON into `<pre id="troupe-check">`.
const CHECK_SCRIPT: &str = r#"<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push('error: ' + e.message));
window.addEventListener('unhandledrejection', e => window.__errors.push('rejection: ' + e.reason));
for (const level of ['error', 'warn']) {
  const original = console[level].bind(console);
  console[level] = (...a) => { window.__errors.push(level + ': ' + a.join(' ')); original(...a); };
}
window.addEventListener('load', () => {
  const svgs = [...document.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'));
  const sizes = svgs.map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; });
  const overflowing = [];
  const page = document.documentElement;
  if (page.scrollWidth > window.innerWidth + 1) overflowing.push('page: ' + page.scrollWidth + ' > ' + window.innerWidth);
  for (const el of document.querySelectorAll('td, th, h1, h2, h3, p, li, caption, figcaption')) {
    if (el.scrollWidth > el.clientWidth + 1) overflowing.push(el.tagName + ': ' + el.textContent.slice(0, 60));
  }
  for (const svg of svgs) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        overflowing.push('chart text: ' + t.textContent.slice(0, 60));
    }
  }
  const white = c => !c || c === 'none' || /^#?(fff|ffffff)$/i.test(c) || /^#222222$/i.test(c);
  const charts = svgs.map(svg => ({
    title: svg.getAttribute('aria-label') || '',
    keys: [...svg.querySelectorAll('g.legend-key')].map(g => {
      const shapes = [...g.querySelectorAll('rect, path, circle, polygon, polyline, line')];
      const colours = shapes.flatMap(e => [e.getAttribute('fill'), e.getAttribute('stroke')])
        .filter(c => !white(c)).map(c => c.toLowerCase());
      const title = g.querySelector('title');
      return {label: title ? title.textContent : '', colour: colours[0] || '',
              shapes: shapes.map(e => e.tagName).join(',')};
    }),
    cut: [...svg.querySelectorAll('text')].map(t => t.textContent).filter(t => t.includes('\u2026')),
  }));
  const resources = performance.getEntriesByType('resource').map(r => r.name);
  const pre = document.createElement('pre');
  pre.id = 'troupe-check';
  pre.textContent = JSON.stringify({errors: window.__errors, sizes, overflowing, resources, charts,
                                    tables: document.querySelectorAll('table').length});
  document.body.appendChild(pre);
});
</script>"#;

#[test]
fn the_report_renders_cleanly_in_a_browser() {
    let Some(chromium) = chromium() else {
        eprintln!();
        eprintln!("================================================================");
        eprintln!("SKIPPED: the report's browser test needs Chromium, and none could");
        eprintln!("be installed (run scripts/install-chromium.sh as root).");
        eprintln!("================================================================");
        return;
    };
    let series = vec![
        Series::from_file(&fixture("results-a.jsonl")).expect("fixture a"),
        Series::from_file(&fixture("results-b.jsonl")).expect("fixture b"),
    ];
    let out = workspace_root().join("results/report-check");
    let page = report::write(&series, &out).expect("write the report");
    let html = std::fs::read_to_string(&page).expect("read the report");
    assert!(
        !html.contains("<script"),
        "the report itself needs no script"
    );

    // The checked copy: the same page with the measuring script first in <head>.
    let checked = out.join("check.html");
    let with_script = html.replacen("<head>", &format!("<head>{CHECK_SCRIPT}"), 1);
    assert_ne!(with_script, html, "the page has a <head>");
    std::fs::write(&checked, with_script).expect("write the checked copy");

    let profile = tempfile::tempdir().expect("a browser profile folder");
    let url = |p: &Path| format!("file://{}", p.canonicalize().expect("page path").display());
    let dom = run_chromium(
        &chromium,
        profile.path(),
        &[
            "--window-size=1280,900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            &url(&checked),
        ],
        Duration::from_secs(120),
    );
    let start = dom.find("<pre id=\"troupe-check\">").unwrap_or_else(|| {
        panic!(
            "the check did not run; the DOM:\n{}",
            &dom[..dom.len().min(2000)]
        )
    });
    let json = &dom[start + "<pre id=\"troupe-check\">".len()..];
    let json = &json[..json.find("</pre>").expect("end of the check")];
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let check: serde_json::Value = serde_json::from_str(&json).expect("the check's JSON");

    assert_eq!(check["errors"], serde_json::json!([]), "console errors");
    assert_eq!(
        check["resources"],
        serde_json::json!([]),
        "the page loaded resources"
    );
    let sizes = check["sizes"].as_array().expect("sizes");
    assert!(sizes.len() >= 10, "only {} charts", sizes.len());
    for (i, size) in sizes.iter().enumerate() {
        let (w, h) = (size[0].as_f64().unwrap(), size[1].as_f64().unwrap());
        assert!(w > 100.0 && h > 100.0, "chart {i} is {w} x {h}");
    }
    assert_eq!(
        check["overflowing"],
        serde_json::json!([]),
        "text out of its box"
    );
    assert!(check["tables"].as_u64().unwrap() >= sizes.len() as u64 / 2);

    let charts = check["charts"].as_array().expect("the charts");
    for chart in charts {
        let title = chart["title"].as_str().unwrap_or_default();
        assert_eq!(
            chart["cut"],
            serde_json::json!([]),
            "a cut label in {title}"
        );
        // Every legend entry of a chart in a colour of its own.
        let keys = chart["keys"].as_array().expect("legend keys");
        let mut colours: Vec<&str> = Vec::new();
        for key in keys {
            let colour = key["colour"].as_str().unwrap_or_default();
            assert!(
                !colour.is_empty(),
                "{title}: no colour for {}",
                key["label"]
            );
            assert!(
                !colours.contains(&colour),
                "{title}: {} has the colour of another entry ({colour})",
                key["label"]
            );
            colours.push(colour);
        }
    }
    // The seeds' own charts, each with more than one series and one of them the seed's own
    // published figures where the seed gives numbers.
    for (seed, published) in [
        ("seed 000", true),
        ("seed 001", true),
        ("seed 002", true),
        ("seed 003", false),
        ("seed 004", true),
    ] {
        let of_seed: Vec<&serde_json::Value> = charts
            .iter()
            .filter(|c| c["title"].as_str().unwrap_or_default().contains(seed))
            .collect();
        assert!(!of_seed.is_empty(), "no chart of {seed}");
        for chart in &of_seed {
            let keys = chart["keys"].as_array().unwrap();
            assert!(keys.len() > 1, "{}: one series only", chart["title"]);
        }
        let labels: Vec<&str> = of_seed
            .iter()
            .flat_map(|c| c["keys"].as_array().unwrap())
            .filter_map(|k| k["label"].as_str())
            .collect();
        let runtimes: Vec<&str> = labels
            .iter()
            .filter(|l| !l.contains("published"))
            .map(|l| l.split([' ', '·']).next().unwrap_or_default())
            .collect();
        assert!(
            runtimes.iter().any(|r| *r != runtimes[0]),
            "{seed}: one runtime only ({labels:?})"
        );
        assert_eq!(
            labels
                .iter()
                .any(|l| l.contains(&format!("{seed}, published"))),
            published,
            "{seed}: the seed's published figures ({labels:?})"
        );
    }

    // The screenshot, kept as an artifact.
    let shot = out.join("screenshot.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(
        &chromium,
        profile.path(),
        &[
            "--window-size=1280,2400",
            &format!("--screenshot={}", shot.display()),
            &url(&page),
        ],
        Duration::from_secs(120),
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real screenshot"
    );
    eprintln!("screenshot: {}", shot.display());
}
