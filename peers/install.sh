#!/usr/bin/env bash
# Installs every toolchain the peer programs need, on a fresh Debian machine (run as root).
# Each peer's own install.sh is idempotent and does nothing when its toolchain is present.
#   peers/install.sh            every peer
#   peers/install.sh go erlang  only those
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "$#" -gt 0 ]; then
    peers=("$@")
else
    peers=()
    for manifest in "$here"/*/peer.json; do
        peers+=("$(basename "$(dirname "$manifest")")")
    done
fi

status=0
for peer in "${peers[@]}"; do
    script="$here/$peer/install.sh"
    if [ ! -f "$script" ]; then
        echo "no peer named '$peer' (expected $script)" >&2
        status=1
        continue
    fi
    echo "== $peer" >&2
    if ! bash "$script"; then
        echo "installing the $peer toolchain failed; its contenders will be skipped" >&2
        status=1
    fi
done
exit "$status"
