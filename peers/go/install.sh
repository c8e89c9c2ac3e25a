#!/usr/bin/env bash
# Installs the Go toolchain for this peer on a Debian machine (run as root).
# Idempotent: does nothing when 'go' is already on PATH.
set -euo pipefail

if command -v go >/dev/null 2>&1; then
    echo "go peer: $(go version) already installed" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "go peer: 'go' is missing and apt-get is not available; install Go 1.19 or newer" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q golang-go >&2
echo "go peer: installed $(go version)" >&2
