//! Writing a run's results: the JSON lines, and the report beside them.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::schema::Record;

/// Writes `records` as `dir/results.jsonl` and, with the `report` feature, the HTML report as
/// `dir/index.html` (its path is returned; without the feature, the JSON file's). `dir` is
/// created if missing; each file is written whole under a temporary name, then renamed, so a
/// reader never sees half a file.
pub fn write_results(dir: &Path, records: &[Record]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| named(e, dir))?;
    let mut text = Vec::new();
    for record in records {
        serde_json::to_writer(&mut text, record)?;
        text.push(b'\n');
    }
    let jsonl = dir.join("results.jsonl");
    write_whole(&jsonl, &text)?;
    #[cfg(feature = "report")]
    {
        let series = crate::report::Series {
            label: series_label("results.jsonl", records),
            records: records.to_vec(),
        };
        crate::report::write(&[series], dir)
    }
    #[cfg(not(feature = "report"))]
    Ok(jsonl)
}

/// A series' label: its file name, and its commit when all its records share one.
pub fn series_label(name: &str, records: &[Record]) -> String {
    let mut commits = records.iter().map(|r| r.machine.commit.as_deref());
    match commits.next() {
        Some(Some(first)) if commits.all(|c| c == Some(first)) => format!("{name} @ {first}"),
        _ => name.to_owned(),
    }
}

/// Writes `bytes` to `path` through a temporary file in the same folder, then renames it.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| named(e, path))
}

/// The error, its message naming the path.
fn named(e: std::io::Error, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
