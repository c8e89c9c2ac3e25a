//! Records the exact versions of the runtime crates (read from Cargo.lock) and of rustc,
//! so that each result line can name in `machine.runtime` what actually ran.

use std::{env, fs, path::Path, process::Command};

/// Crates whose locked version is exported as `PEER_VERSION_<NAME>` (dashes become underscores).
const CRATES: &[&str] = &["tokio", "actix", "actix-rt", "ractor", "kameo"];

fn main() {
    let dir = env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let lock = Path::new(&dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = fs::read_to_string(&lock).unwrap_or_default();

    for name in CRATES {
        let key = format!("PEER_VERSION_{}", name.to_uppercase().replace('-', "_"));
        let version = locked_version(&text, name).unwrap_or_else(|| "unknown".into());
        println!("cargo:rustc-env={key}={version}");
    }

    // "rustc 1.95.0 (…)" -> "rustc 1.95.0"
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "rustc unknown".into());
    println!("cargo:rustc-env=PEER_RUSTC_VERSION={version}");
}

/// Finds `version = "…"` right after `name = "<name>"` in a Cargo.lock `[[package]]` entry.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let next = lines.next()?.trim();
            return next
                .strip_prefix("version = \"")
                .and_then(|v| v.strip_suffix('"'))
                .map(str::to_string);
        }
    }
    None
}
