#!/usr/bin/env bash
# Builds the JVM peers into target/troupe-peer-jvm.jar (one runnable jar for every contender).
# Idempotent; offline when Maven's local repository already holds what the build needs, online
# otherwise. Prints nothing on stdout except errors.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# shellcheck source=jdk.sh
. ./jdk.sh

if ! command -v mvn >/dev/null 2>&1; then
    echo "error: mvn not found: run $here/install.sh (apt-get install maven)" >&2
    exit 1
fi
java=$(find_java 17)
if [ -z "$java" ]; then
    echo "error: no JDK 17 or newer found (JAVA_HOME, PATH, /usr/lib/jvm): run $here/install.sh" >&2
    exit 1
fi
# Maven compiles with the JDK of JAVA_HOME: point it at the one found.
JAVA_HOME=$(dirname "$(dirname "$(readlink -f "$java")")")
export JAVA_HOME

jar=target/troupe-peer-jvm.jar
if [ -f "$jar" ] && [ -z "$(find pom.xml src -newer "$jar" -print -quit)" ]; then
    exit 0  # up to date
fi

# Maven writes its errors on stdout: send everything to stderr.
if ! mvn -q -o -B package >/dev/null 2>&1; then
    mvn -q -B package 1>&2
fi
if [ -z "$(find_java 21)" ]; then
    echo "note: no JDK 21 or newer found: the java-virtual contender will be skipped" >&2
fi
