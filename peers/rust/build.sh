#!/usr/bin/env bash
# Builds the Rust peers (release) inside this folder. Idempotent; the artifacts go to target/,
# which is git-ignored. Works offline once the crates in Cargo.lock are in Cargo's cache.
# Prints nothing on stdout; errors go to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "build.sh: cargo not found (run install.sh)" >&2; exit 1; }

# Use the crates already fetched when the network is not there; fetch them otherwise.
offline=()
if cargo fetch --locked --manifest-path "$here/Cargo.toml" --offline >/dev/null 2>&1; then
    offline=(--offline)
fi
cargo build --release --locked --quiet "${offline[@]}" --manifest-path "$here/Cargo.toml" 1>&2
