#!/usr/bin/env bash
# Makes a headless Chromium present for the report's browser test
# (crates/troupe-results/tests/suite/browser.rs), on a fresh Debian or Ubuntu machine.
# Idempotent: does nothing when a Chromium or Chrome is already on PATH.
# Installing needs root (or sudo without a password) and access to the apt repositories.
set -euo pipefail

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "$name is present: $(command -v "$name")" >&2
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "no Chromium on PATH and no apt-get to install it; install Chromium by hand" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "no Chromium on PATH, and installing it needs root: run 'apt-get install chromium' as root" >&2
    exit 1
fi
echo "installing Chromium with apt-get and a font (once; about 100 MB)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null 2>&1 || {
    echo "apt-get finished but no chromium is on PATH" >&2
    exit 1
}
echo "installed $(chromium --version 2>/dev/null || echo chromium)" >&2
