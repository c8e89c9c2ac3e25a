#!/usr/bin/env bash
# Installs the toolchain of the Rust peers on a fresh Debian machine (run as root):
# cargo/rustc stable through rustup. Idempotent: does nothing when a recent enough cargo
# (rust-version in Cargo.toml, 1.88) is already on PATH or in ~/.cargo/bin.
set -euo pipefail
need_minor=88

[ -d "$HOME/.cargo/bin" ] && PATH="$HOME/.cargo/bin:$PATH"

recent_enough() {
    command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 || return 1
    local minor
    minor="$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')"
    [ "${minor:-0}" -ge "$need_minor" ] 2>/dev/null
}

recent_enough && exit 0

if command -v rustup >/dev/null 2>&1; then
    # rustup is there but its toolchain is missing or old.
    rustup toolchain install stable --profile minimal
    rustup default stable
else
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    if apt-cache show rustup >/dev/null 2>&1; then
        # Debian 13 and later package rustup itself.
        apt-get install -y -qq rustup build-essential >/dev/null
        rustup toolchain install stable --profile minimal
        rustup default stable
    else
        # Older Debian (its own rustc is too old for these crates): the official rustup-init.
        apt-get install -y -qq curl ca-certificates build-essential >/dev/null
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
            | sh -s -- -y --profile minimal --default-toolchain stable
    fi
fi

PATH="$HOME/.cargo/bin:$PATH"
recent_enough || { echo "install.sh: could not install cargo/rustc >= 1.$need_minor" >&2; exit 1; }
