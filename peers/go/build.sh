#!/usr/bin/env bash
# Builds the Go peer into bin/ (git-ignored). Standard library only, so it
# needs no network. Prints nothing on stdout unless something goes wrong.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: 'go' not found on PATH; run install.sh (apt-get install golang-go)" >&2
    exit 1
fi

# Use the installed toolchain as it is: never try to download another one.
export GOTOOLCHAIN=local
# The build cache needs a home; keep it inside this folder when there is none.
if [ -z "${GOCACHE:-}" ] && [ -z "${HOME:-}" ] && [ -z "${XDG_CACHE_HOME:-}" ]; then
    export GOCACHE="$here/.gocache"
fi

mkdir -p bin
go build -trimpath -buildvcs=false -o bin/troupe-peer-go . >&2
