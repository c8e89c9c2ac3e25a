//! The page as a reader sees it: the console of the known system opened in headless Chromium,
//! which runs the page's polls (in virtual time) and dumps the DOM they built.
//!
//! Checks that no script error and no console message occurs, that the known supervision
//! tree is drawn with its nesting, types (escaped) and names, that the cycle of asks is shown
//! naming both actors, and that the tables and the flame graph are drawn.
//!
//! Chromium is made present by `scripts/install-chromium.sh` (apt-get, as root) when it is
//! missing; where that is impossible the test says so loudly and skips.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use troupe::ActorId;

use crate::common::Fixture;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
    match Command::new("bash").arg(&script).status() {
        Ok(s) if s.success() => find(),
        _ => None,
    }
}

/// Chromium's stdout and stderr.
struct Run {
    dom: String,
    log: String,
}

/// Runs Chromium headless with `args`, killing it after `limit`.
fn run_chromium(chromium: &Path, profile: &Path, args: &[&str], limit: Duration) -> Run {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    // Read both while it runs: a DOM dump is far larger than a pipe holds.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("chromium's stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("chromium's stderr")));
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
        std::thread::sleep(Duration::from_millis(20));
    }
    Run {
        dom: stdout.join().expect("the stdout reader"),
        log: stderr.join().expect("the stderr reader"),
    }
}

/// The `<li>` of actor `id` in the tree, from its start tag to its matching end tag.
fn node(dom: &str, id: ActorId) -> &str {
    let start_tag = format!("<li class=\"node\" data-id=\"{id}\"");
    let start = dom
        .find(&start_tag)
        .unwrap_or_else(|| panic!("actor {id} is not in the tree"));
    let mut depth = 0usize;
    let mut at = start;
    loop {
        let open = dom[at..].find("<li").map(|i| at + i);
        let close = dom[at..].find("</li>").map(|i| at + i);
        match (open, close) {
            (Some(o), Some(c)) if o < c => {
                depth += 1;
                at = o + 3;
            }
            (_, Some(c)) => {
                depth -= 1;
                at = c + 5;
                if depth == 0 {
                    return &dom[start..at];
                }
            }
            _ => panic!("actor {id}'s <li> is not closed"),
        }
    }
}

/// The text of the element whose start tag begins with `start_tag`, up to its first `<`.
fn text_after<'d>(dom: &'d str, start_tag: &str) -> &'d str {
    let at = dom
        .find(start_tag)
        .unwrap_or_else(|| panic!("no {start_tag} in the page"));
    let rest = &dom[at..];
    let rest = &rest[rest.find('>').expect("a start tag") + 1..];
    &rest[..rest.find('<').unwrap_or(rest.len())]
}

#[test]
fn the_page_shows_the_tree_and_the_cycle() {
    let Some(chromium) = chromium() else {
        eprintln!();
        eprintln!("================================================================");
        eprintln!("SKIPPED: the console's browser test needs Chromium, and none could");
        eprintln!("be installed (run scripts/install-chromium.sh as root).");
        eprintln!("================================================================");
        return;
    };
    let fixture = Fixture::start();
    let ids = fixture.ids;
    let url = format!("http://{}/#check", fixture.addr());
    let profile = tempfile::tempdir().expect("a browser profile folder");
    let run = run_chromium(
        &chromium,
        profile.path(),
        &[
            "--window-size=1400,1000",
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=5000",
            "--dump-dom",
            &url,
        ],
        Duration::from_secs(60),
    );
    let dom = &run.dom;
    let excerpt = || &dom[..dom.len().min(3000)];

    // No script error, no console message of any kind.
    assert!(
        dom.contains("<pre id=\"errors\" hidden=\"\"></pre>"),
        "script errors: {}",
        text_after(dom, "<pre id=\"errors\"")
    );
    let console: Vec<&str> = run.log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    // No text runs out of its box.
    assert_eq!(
        text_after(dom, "<pre id=\"check\""),
        "[]",
        "text out of its box"
    );
    // The page polled more than once (the rates need two polls) and says it is live.
    let polls: u32 = dom
        .split("data-polls=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(polls >= 2, "the page polled {polls} times: {}", excerpt());
    assert!(dom.contains("class=\"status live\""), "{}", excerpt());

    // The known tree, nested: supervisor > clerk, archivist > indexer.
    let supervisor = node(dom, ids.supervisor);
    let clerk = node(dom, ids.clerk);
    let archivist = node(dom, ids.archivist);
    let indexer = node(dom, ids.indexer);
    assert!(supervisor.contains(clerk) && supervisor.contains(archivist));
    assert!(archivist.contains(indexer) && !clerk.contains(indexer));
    assert!(!indexer.contains("<ul"), "the indexer has no child");
    assert!(dom.contains(&format!(
        "<li class=\"node\" data-id=\"{}\" data-depth=\"2\"",
        ids.indexer
    )));
    for (li, short, name) in [
        (supervisor, "Supervisor", "root-supervisor"),
        (clerk, "Clerk", "clerk-north"),
        (archivist, "Archivist", "archivist-south"),
        // The type's `<` is escaped, not taken for a tag.
        (indexer, "Indexer&lt;String&gt;", "indexer-deep"),
    ] {
        let row = &li[..li.find("</div>").expect("the actor's row")];
        assert!(
            row.contains(&format!(">{short}</span>")),
            "{short} in {row}"
        );
        assert!(row.contains(&format!(">{name}</span>")), "{name} in {row}");
    }
    assert!(!dom.contains("<string>") && !dom.contains("<String>"));
    // Alpha and Beta are top-level, awaiting; their state has its colour.
    for awaiting in [ids.alpha, ids.beta] {
        assert!(
            node(dom, awaiting).contains("class=\"pill state-awaiting\">awaiting<"),
            "{}",
            node(dom, awaiting)
        );
    }
    assert!(
        clerk.contains("class=\"pill state-running\">running<"),
        "{clerk}"
    );

    // The cycle, prominent and naming both actors.
    let (a, b) = (ids.alpha, ids.beta);
    let cycle = format!("cycle: #{a} Alpha -&gt; #{b} Beta -&gt; #{a}");
    assert!(
        dom.contains("<section id=\"alert\">"),
        "the alert is shown: {}",
        excerpt()
    );
    let alert = &dom[dom.find("<section id=\"alert\">").unwrap()..];
    let alert = &alert[..alert.find("</section>").unwrap()];
    assert!(alert.contains(&cycle), "{cycle} in {alert}");
    let graph = &dom[dom
        .find("<section id=\"waits-section\">")
        .expect("the wait-for graph")..];
    let graph = &graph[..graph.find("</section>").unwrap()];
    assert!(
        graph.contains(&format!(
            "<div class=\"cycle\" data-cycle=\"{a} {b}\">{cycle}</div>"
        )),
        "{graph}"
    );
    // As seen when it formed: from Beta, whose ask closed it.
    let seen =
        format!("<div class=\"cycle old\">cycle: #{b} Beta -&gt; #{a} Alpha -&gt; #{b}</div>");
    assert!(graph.contains(&seen), "{seen} in {graph}");
    assert!(
        dom.contains("<tr class=\"in-cycle\">"),
        "the cycle's waits are marked"
    );

    // The pools, the slowest handlers and the flame graph are drawn.
    let pools = &dom[dom.find("<table id=\"pools\">").expect("the pools")..];
    assert!(pools.contains("<b>default</b>") && pools.contains("2 workers"));
    let handlers = &dom[dom.find("<table id=\"handlers\">").expect("the handlers")..];
    assert!(handlers.contains("<td title=\"") && handlers.contains(">Note</td>"));
    let flame = &dom[dom.find("<div id=\"flame\">").expect("the flame graph")..];
    let flame = &flame[..flame.find("</div>").unwrap()];
    assert!(
        flame.contains("aria-label=\"flame graph of time in handlers\""),
        "{flame}"
    );
    assert!(flame.matches("<rect").count() >= 5, "{flame}");
    assert!(
        flame.contains("<text") && flame.contains("all handlers: "),
        "{flame}"
    );
}
