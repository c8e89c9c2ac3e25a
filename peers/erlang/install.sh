#!/bin/sh
# Installs the Erlang/OTP toolchain (erl, erlc) on Debian; idempotent, run as root.
set -e
if command -v erl >/dev/null 2>&1 && command -v erlc >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y erlang-nox
