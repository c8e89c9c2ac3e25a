package troupe.peer.jvm;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/** Facts about the machine and this process: CPU, OS, resident set size, JVM flags. */
public final class Machine {
    private Machine() {}

    static String cpu() {
        String model = field(Path.of("/proc/cpuinfo"), "model name", ':');
        return model != null ? model : System.getProperty("os.arch", "unknown");
    }

    static int cores() {
        return Runtime.getRuntime().availableProcessors();
    }

    /** e.g. "Debian GNU/Linux 12 (bookworm), linux/amd64, kernel 6.1.0". */
    static String os() {
        StringBuilder os = new StringBuilder();
        String pretty = field(Path.of("/etc/os-release"), "PRETTY_NAME", '=');
        if (pretty != null) {
            os.append(pretty.replace("\"", "")).append(", ");
        }
        os.append(System.getProperty("os.name", "unknown").toLowerCase(Locale.ROOT))
                .append('/').append(System.getProperty("os.arch", "unknown"))
                .append(", kernel ").append(System.getProperty("os.version", "unknown"));
        return os.toString();
    }

    /** "JDK 17.0.15". */
    public static String jdk() {
        return "JDK " + System.getProperty("java.version", "?");
    }

    /** The heap and GC flags the JVM was started with, e.g. "-Xms1g -Xmx4g", or "default heap". */
    static String heapFlags() {
        List<String> flags = ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> a.startsWith("-Xm") || a.startsWith("-XX:+Use") && a.endsWith("GC"))
                .collect(Collectors.toList());
        return flags.isEmpty() ? "default heap" : String.join(" ", flags);
    }

    /** The resident set size of this process in bytes (VmRSS of /proc/self/status), or -1. */
    static long rssBytes() {
        String value = field(Path.of("/proc/self/status"), "VmRSS", ':');
        if (value == null) {
            return -1;
        }
        String kb = value.replace("kB", "").trim();
        try {
            return Long.parseLong(kb) * 1024;
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** Heap in use (committed minus free), in bytes. */
    static long heapUsedBytes() {
        Runtime rt = Runtime.getRuntime();
        return rt.totalMemory() - rt.freeMemory();
    }

    /** Runs full collections so that a memory reading holds live data, not garbage. */
    static void collectGarbage() {
        for (int i = 0; i < 2; i++) {
            System.gc();
        }
    }

    /** The value of the first "key SEP value" line of a file, trimmed, or null. */
    private static String field(Path file, String key, char separator) {
        try {
            for (String line : Files.readAllLines(file)) {
                int at = line.indexOf(separator);
                if (at >= 0 && line.substring(0, at).trim().equals(key)) {
                    return line.substring(at + 1).trim();
                }
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
        return null;
    }
}
