#!/usr/bin/env bash
# Makes a nats-server of version 2.10 or later present for the remote-actor tests and the
# distributed trading system (crates/troupe-remote, crates/troupe-trading), whose key-value
# leases need JetStream as servers of 2.10 and later speak it.
#
# Idempotent. In order:
#   1. a nats-server on PATH of version >= 2.10: nothing to do;
#   2. target/tools/nats-server already built by this script: nothing to do;
#   3. Go present: builds nats-server $VERSION from the Go module proxy into target/tools/
#      (about a minute on 2 cores, once);
#   4. otherwise: apt-get install nats-server (root or passwordless sudo); Debian's package may
#      be older than 2.10, which serves everything but the JetStream tests.
set -euo pipefail

VERSION=v2.12.3
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/target/tools"

new_enough() {
    # "nats-server: v2.12.3" -> 2 12
    local v
    v="$("$1" --version 2>/dev/null | sed -n 's/.*v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
    [ -n "$v" ] || return 1
    set -- $v
    [ "$1" -gt 2 ] || { [ "$1" -eq 2 ] && [ "$2" -ge 10 ]; }
}

if command -v nats-server >/dev/null 2>&1 && new_enough "$(command -v nats-server)"; then
    echo "nats-server is present: $(command -v nats-server)" >&2
    exit 0
fi
if [ -x "$tools/nats-server" ] && new_enough "$tools/nats-server"; then
    echo "nats-server is present: $tools/nats-server" >&2
    exit 0
fi
if command -v go >/dev/null 2>&1; then
    mkdir -p "$tools"
    # Tests start servers in parallel: one build at a time, the others wait for it.
    exec 9>"$tools/.nats-server.lock"
    flock 9
    if [ -x "$tools/nats-server" ] && new_enough "$tools/nats-server"; then
        exit 0
    fi
    echo "building nats-server $VERSION with Go into $tools (once)" >&2
    GOBIN="$tools" GOFLAGS=-mod=mod go install "github.com/nats-io/nats-server/v2@$VERSION"
    "$tools/nats-server" --version >&2
    exit 0
fi
if command -v nats-server >/dev/null 2>&1; then
    echo "nats-server on PATH is older than 2.10 and Go is missing to build a newer one: the JetStream tests will fail" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no nats-server, no Go and no apt-get: install Go or nats-server >= 2.10 by hand" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "no nats-server and no Go; installing nats-server needs root: run 'apt-get install nats-server' as root" >&2
    exit 1
fi
echo "installing nats-server with apt-get (once)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends nats-server >/dev/null
command -v nats-server >/dev/null 2>&1 || {
    echo "apt-get finished but no nats-server is on PATH" >&2
    exit 1
}
echo "installed $(nats-server --version 2>/dev/null || echo nats-server)" >&2
