#!/usr/bin/env bash
# Installs the JVM peers' toolchain on a fresh Debian machine (idempotent, run as root):
# a JDK 17+ and Maven. The java-virtual contender also needs a JDK 21 or newer; it is installed
# when the distribution has one (e.g. openjdk-21-jdk-headless), otherwise java-virtual is skipped.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=jdk.sh
. "$here/jdk.sh"

updated=""
apt_install() {
    if [ -z "$updated" ]; then
        apt-get update -qq
        updated=yes
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

packages=()
[ -n "$(find_java 17)" ] || packages+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || packages+=(maven)
if [ "${#packages[@]}" -gt 0 ]; then
    apt_install "${packages[@]}"
fi

if [ -z "$(find_java 21)" ]; then
    [ -n "$updated" ] || { apt-get update -qq; updated=yes; }
    newest=$(apt-cache search --names-only '^openjdk-[0-9]+-jdk-headless$' | cut -d' ' -f1 \
             | sed -E 's/^openjdk-([0-9]+)-.*/\1 &/' | sort -n | awk '$1 >= 21 {p=$2} END {print p}')
    if [ -n "$newest" ]; then
        apt_install "$newest"
    else
        echo "note: this distribution has no JDK 21 or newer package; java-virtual needs one" \
             "(set JAVA_HOME to it, or put it under /usr/lib/jvm); pekko and java-threads run on 17" >&2
    fi
fi
