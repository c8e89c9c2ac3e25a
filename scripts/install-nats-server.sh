#!/usr/bin/env bash
# Makes a `nats-server` present for the remote-actor tests and benchmarks (crates/troupe-remote),
# on a fresh Debian or Ubuntu machine. Idempotent: does nothing when one is already on PATH.
# Installing needs root (or sudo without a password) and access to the apt repositories.
set -euo pipefail

if command -v nats-server >/dev/null 2>&1; then
    echo "nats-server is present: $(command -v nats-server)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "no nats-server on PATH and no apt-get to install it; install nats-server by hand" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    echo "no nats-server on PATH, and installing it needs root: run 'apt-get install nats-server' as root" >&2
    exit 1
fi
echo "installing nats-server with apt-get (once)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends nats-server >/dev/null
# The Debian package starts a system-wide server as a service where services run; the tests
# start their own servers on ephemeral ports and need none.
command -v nats-server >/dev/null 2>&1 || {
    echo "apt-get finished but no nats-server is on PATH" >&2
    exit 1
}
echo "installed $(nats-server --version 2>/dev/null || echo nats-server)" >&2
