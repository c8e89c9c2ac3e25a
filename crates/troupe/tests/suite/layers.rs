//! The crate's structure, checked: layers import downward only, in the order `lib.rs` lists
//! its modules, and `unsafe` lives only where the invariants it relies on are argued.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The top-level modules in the order `lib.rs` declares them.
fn layer_order() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            line.strip_prefix("mod ")
                .or_else(|| line.strip_prefix("pub mod "))
        })
        .map(|rest| rest.trim_end_matches(';').trim().to_owned())
        .collect()
}

/// The top-level module a file belongs to (`raw/cell.rs` → `raw`).
fn module_of(file: &Path) -> String {
    let relative = file.strip_prefix(src()).expect("under src");
    let first = relative.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

/// The code of a file without its comments (line comments and doc comments), so that a path
/// mentioned in prose is not taken for a use.
fn code_of(file: &Path) -> String {
    std::fs::read_to_string(file)
        .expect("a source file")
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names through `crate::`, including grouped imports
/// (`use crate::{a, b::c}`).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    used.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

#[test]
fn layers_import_downward_only() {
    let order = layer_order();
    assert!(order.len() > 10, "lib.rs lists the layers: {order:?}");
    let rank = |name: &str| order.iter().position(|m| m == name);
    let mut violations = Vec::new();
    for file in rust_files(&src()) {
        if file.ends_with("lib.rs") {
            continue;
        }
        let module = module_of(&file);
        let Some(own) = rank(&module) else {
            violations.push(format!(
                "{}: module `{module}` is not in lib.rs",
                file.display()
            ));
            continue;
        };
        for used in crate_paths(&code_of(&file)) {
            match rank(&used) {
                // Items re-exported at the crate root (`crate::ActorId`) are names, not layers.
                None => {}
                Some(r) if r <= own => {}
                Some(_) => violations.push(format!(
                    "{} (layer `{module}`) uses `crate::{used}`, which lib.rs lists after it",
                    file.strip_prefix(src()).unwrap().display()
                )),
            }
        }
    }
    assert!(
        violations.is_empty(),
        "upward imports:\n{}",
        violations.join("\n")
    );
}

/// `unsafe` is confined to the files whose module notes argue its invariants: the raw cell
/// and its type erasure, the lock-free structures (the reply slot and its inline callback
/// among them), the two places where the scheduler reaches thread-local or boxed state, the
/// scheduler's read of the processor's time-stamp counter, and the wake-up handshake's
/// process-wide barrier (a system call). The public API layer has none.
#[test]
fn unsafe_lives_only_where_it_is_argued() {
    let allowed: BTreeSet<&str> = [
        "raw/cell.rs",
        "raw/envelope.rs",
        "raw/run_next.rs",
        "mailbox.rs",
        "signal.rs",
        "lazy.rs",
        "reply/slot.rs",
        "reply/forward.rs",
        "scheduler/worker.rs",
        "scheduler/dedicated.rs",
        "scheduler/counter.rs",
        "scheduler/idle.rs",
    ]
    .into_iter()
    .collect();
    let mut found = BTreeSet::new();
    for file in rust_files(&src()) {
        let code = code_of(&file);
        if code
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| w == "unsafe")
        {
            let relative = file
                .strip_prefix(src())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            found.insert(relative);
        }
    }
    let unexpected: Vec<_> = found
        .iter()
        .filter(|f| !allowed.contains(f.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "`unsafe` outside the files that argue it: {unexpected:?}"
    );
    for api in [
        "addr.rs",
        "actor.rs",
        "context.rs",
        "system.rs",
        "life.rs",
        "drain.rs",
        "router.rs",
        "turn.rs",
    ] {
        assert!(!found.contains(api), "{api} must hold no unsafe");
    }
}

#[test]
fn the_path_scanner_reads_grouped_imports() {
    let used = crate_paths(
        "use crate::{loom::Ordering, raw::{Cell, Turn}};\nlet x = crate::id::ActorId::next();",
    );
    assert!(
        used.contains("loom") && used.contains("raw") && used.contains("id"),
        "{used:?}"
    );
}
