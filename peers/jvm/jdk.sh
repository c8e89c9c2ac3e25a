# Finding a JDK, shared by build.sh, run and install.sh (sourced, not run).
#
# java_major JAVA        prints the feature version of a java binary (17, 21, 25...), or 0.
# find_java MIN          prints a java binary of version >= MIN, or nothing. Looks at
#                        $JAVA_HOME/bin/java, then the java on PATH, then the newest
#                        /usr/lib/jvm/*/bin/java.

java_major() {
    local line
    line=$("$1" -version 2>&1 | grep -m1 -E 'version "' || true)
    line=${line#*version \"}
    line=${line%%\"*}
    case "$line" in
        1.*) echo 1 ;;                   # 1.8.0_x and older
        [0-9]*) echo "${line%%[^0-9]*}" ;;
        *) echo 0 ;;
    esac
}

find_java() {
    local min=$1 candidate best="" best_major=0 major
    for candidate in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null || true)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && [ "$(java_major "$candidate")" -ge "$min" ]; then
            echo "$candidate"
            return 0
        fi
    done
    for candidate in /usr/lib/jvm/*/bin/java; do
        [ -x "$candidate" ] || continue
        major=$(java_major "$candidate")
        if [ "$major" -ge "$min" ] && [ "$major" -gt "$best_major" ]; then
            best=$candidate
            best_major=$major
        fi
    done
    [ -n "$best" ] && echo "$best"
    return 0
}
