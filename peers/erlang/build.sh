#!/bin/sh
# Builds the Erlang peer: compiles bench_peer.erl into ebin/ (git-ignored).
# Idempotent; prints nothing on stdout (compiler messages go to stderr).
set -e
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v erlc >/dev/null 2>&1; then
    echo "erlc not found: run $here/install.sh (Debian package erlang-nox)" >&2
    exit 1
fi
mkdir -p "$here/ebin"
erlc +warnings_as_errors -o "$here/ebin" "$here/bench_peer.erl" 1>&2
