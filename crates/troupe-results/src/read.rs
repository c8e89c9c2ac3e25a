//! Reading result files back, every fault named by file and line.

use std::path::{Path, PathBuf};

use crate::schema::Record;

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {error}")]
    Io {
        path: PathBuf,
        /// Named `error`, not `source`: the message includes it, so it is not repeated as a
        /// cause.
        error: std::io::Error,
    },
    /// A line is not a record of the schema.
    #[error("{path}:{line}: not a result record: {what}")]
    Malformed {
        path: PathBuf,
        line: usize,
        what: String,
    },
    /// The last line ends mid-record (the run that wrote it was cut short).
    #[error("{path}:{line}: the file ends in the middle of a record (was its run cut short?)")]
    Truncated { path: PathBuf, line: usize },
    /// The file holds no record at all.
    #[error("{path}: holds no result records")]
    Empty { path: PathBuf },
}

/// Reads a JSON Lines results file (blank lines are skipped).
pub fn read_file(path: &Path) -> Result<Vec<Record>, ReadError> {
    let bytes = std::fs::read(path).map_err(|error| ReadError::Io {
        path: path.to_owned(),
        error,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        ReadError::Malformed {
            path: path.to_owned(),
            line,
            what: "not UTF-8 text".into(),
        }
    })?;
    parse_lines(&text, path)
}

/// Parses JSON Lines text read from `path` (named in errors only).
pub fn parse_lines(text: &str, path: &Path) -> Result<Vec<Record>, ReadError> {
    let mut records = Vec::new();
    let ends_cleanly = text.is_empty() || text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let number = i + 1;
        let record: Record = match serde_json::from_str(line) {
            Ok(r) => r,
            Err(e) if e.is_eof() && i + 1 == lines.len() && !ends_cleanly => {
                return Err(ReadError::Truncated {
                    path: path.to_owned(),
                    line: number,
                })
            }
            Err(e) => {
                return Err(ReadError::Malformed {
                    path: path.to_owned(),
                    line: number,
                    what: strip_position(&e.to_string()),
                })
            }
        };
        if let Some(what) = invalid(&record) {
            return Err(ReadError::Malformed {
                path: path.to_owned(),
                line: number,
                what,
            });
        }
        records.push(record);
    }
    if records.is_empty() {
        return Err(ReadError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(records)
}

/// What makes a well-formed record unusable, if anything.
fn invalid(r: &Record) -> Option<String> {
    for (field, value) in [
        ("scenario", &r.scenario),
        ("metric", &r.metric),
        ("contender", &r.contender),
    ] {
        if value.trim().is_empty() {
            return Some(format!("`{field}` is empty"));
        }
    }
    if r.samples.is_empty() {
        return Some("`samples` is empty".into());
    }
    for (field, value) in [("median", r.median), ("min", r.min), ("max", r.max)] {
        if !value.is_finite() {
            return Some(format!("`{field}` is not a finite number"));
        }
    }
    if r.samples.iter().any(|s| !s.is_finite()) {
        return Some("a sample is not a finite number".into());
    }
    None
}

/// serde_json appends "at line 1 column N" (always line 1 here: one record per line).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => {
            let column = message[at..].rsplit(' ').next().unwrap_or("");
            format!("{} (column {column})", &message[..at])
        }
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"scenario":"ring","metric":"throughput","contender":"troupe","params":{"actors":100},"unit":"msgs/s","median":2,"min":1,"max":3,"samples":[1,2,3],"validated":true,"machine":{"cpu":"x","cores":2,"os":"linux","runtime":"troupe 0.1.0"}}"#;

    fn parse(text: &str) -> Result<Vec<Record>, ReadError> {
        parse_lines(text, Path::new("r.jsonl"))
    }

    #[test]
    fn good_lines_parse_and_blank_lines_are_skipped() {
        let text = format!("{GOOD}\n\n{GOOD}\n");
        assert_eq!(parse(&text).unwrap().len(), 2);
    }

    #[test]
    fn a_malformed_line_is_named() {
        let text = format!("{GOOD}\n{{\"scenario\": 3}}\n{GOOD}\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(
            e.starts_with("r.jsonl:2: not a result record: invalid type"),
            "{e}"
        );
        assert!(!e.contains("at line 1"), "{e}");
    }

    #[test]
    fn a_missing_field_is_named() {
        let text = GOOD.replace(r#""unit":"msgs/s","#, "");
        let e = parse(&format!("{text}\n")).unwrap_err().to_string();
        assert!(
            e.contains("r.jsonl:1:") && e.contains("missing field `unit`"),
            "{e}"
        );
    }

    #[test]
    fn a_cut_last_line_is_called_truncated() {
        let text = format!("{GOOD}\n{}", &GOOD[..80]);
        let e = parse(&text).unwrap_err();
        assert!(matches!(e, ReadError::Truncated { line: 2, .. }), "{e}");
    }

    #[test]
    fn nothing_to_report_is_an_error() {
        assert!(matches!(parse("\n\n"), Err(ReadError::Empty { .. })));
    }

    #[test]
    fn records_without_samples_or_with_null_figures_are_refused() {
        let no_samples = GOOD.replace("[1,2,3]", "[]");
        let e = parse(&format!("{no_samples}\n")).unwrap_err().to_string();
        assert!(e.contains("`samples` is empty"), "{e}");
        let null = GOOD.replace(r#""median":2"#, r#""median":null"#);
        let e = parse(&format!("{null}\n")).unwrap_err().to_string();
        assert!(e.contains("r.jsonl:1:"), "{e}");
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let e = read_file(Path::new("no/such/results.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read no/such/results.jsonl: "), "{e}");
    }
}
