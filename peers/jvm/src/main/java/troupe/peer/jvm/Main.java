package troupe.peer.jvm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import troupe.peer.jvm.pekko.PekkoContender;
import troupe.peer.jvm.threads.ThreadContender;

/**
 * The JVM peer program of troupe's benchmark comparison (see ../PROTOCOL.md).
 *
 * <p>It holds three contenders, chosen with {@code --contender}: {@code pekko} (Apache Pekko
 * classic actors), {@code java-threads} (platform threads and blocking queues) and
 * {@code java-virtual} (the same on virtual threads). Every repetition, warm-up ones included,
 * runs in this one process so measured repetitions come from a warmed-up JVM. Results go to
 * stdout as JSON Lines; progress and diagnostics go to stderr.
 *
 * <p>Exit status: 0 when every check passed, 1 when a check failed (the lines are still printed,
 * with {@code "validated":false}), 2 for a usage error, 3 for a scenario the contender does not
 * implement.
 */
public final class Main {
    private static final int EXIT_FAILED = 1;
    private static final int EXIT_USAGE = 2;
    private static final int EXIT_UNSUPPORTED = 3;
    /** Scenarios of PROTOCOL.md no contender here implements yet. */
    private static final List<String> NOT_IMPLEMENTED = List.of("fanout");

    private Main() {}

    public static void main(String[] args) {
        if (args.length > 0 && NOT_IMPLEMENTED.contains(args[0])) {
            System.err.println("unsupported: " + args[0] + " for " + contenderArg(args));
            System.exit(EXIT_UNSUPPORTED);
            return;
        }
        Options options;
        try {
            options = Options.parse(args);
        } catch (Options.UsageException e) {
            System.err.println("error: " + e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(EXIT_USAGE);
            return;
        }
        Contender contender = create(options.contender, options.scenario);
        String unsupported = contender.unsupported(options.scenario, options.mode);
        if (unsupported != null) {
            System.err.println(contender.name() + ": " + unsupported);
            System.err.println("unsupported: " + options.scenario + " for " + contender.name());
            System.exit(EXIT_UNSUPPORTED);
            return;
        }
        boolean ok = switch (options.scenario) {
            case "ring" -> ring(options, contender);
            case "spawn" -> spawn(options, contender);
            case "counter" -> counter(options, contender);
            case "chain" -> chain(options, contender);
            default -> throw new IllegalStateException(options.scenario);
        };
        try {
            contender.shutdown();
        } catch (Exception e) {
            System.err.println("error: shutting down " + contender.name() + ": " + e);
        }
        if (!ok) {
            System.err.println(options.scenario + " (" + options.contender + "): validation FAILED");
        }
        System.exit(ok ? 0 : EXIT_FAILED);
    }

    /** The value of {@code --contender} (or {@code --contender=}), else the default. */
    private static String contenderArg(String[] args) {
        String name = "pekko";
        for (int i = 1; i < args.length; i++) {
            if (args[i].startsWith("--contender=")) {
                name = args[i].substring("--contender=".length());
            } else if (args[i].equals("--contender") && i + 1 < args.length) {
                name = args[i + 1];
            }
        }
        return name;
    }

    private static Contender create(String name, String scenario) {
        switch (name) {
            case "pekko":
                return new PekkoContender();
            case "java-threads":
                return ThreadContender.platform();
            case "java-virtual":
                ThreadContender virtual = ThreadContender.virtual();
                if (virtual == null) {
                    System.err.println("java-virtual: virtual threads need a JDK 21 or newer; this is "
                            + Machine.jdk() + " (the run launcher looks for one in JAVA_HOME and /usr/lib/jvm)");
                    System.err.println("unsupported: " + scenario + " for java-virtual");
                    System.exit(EXIT_UNSUPPORTED);
                }
                return virtual;
            default:
                System.err.println("error: unknown contender '" + name + "'");
                System.err.println(Options.USAGE);
                System.exit(EXIT_USAGE);
                return null;
        }
    }

    // ---- scenarios -------------------------------------------------------------------------

    private static boolean ring(Options o, Contender c) {
        long expectedTokens = (long) o.actors * o.rounds;
        Samples s = repeat(o, 2, rep -> {
            Contender.RingOutcome r = c.ring(o.actors, o.rounds);
            double constructMs = round(r.constructNanos() / 1e6, 3);
            double throughput = round(expectedTokens / (r.runNanos() / 1e9), 0);
            boolean ok = r.tokensReceived() == expectedTokens && r.finalValue() == o.rounds;
            String detail = String.format("construct %.3f ms, %.0f msgs/s, tokens %d (expected %d), value %d (expected %d)",
                    constructMs, throughput, r.tokensReceived(), expectedTokens, r.finalValue(), o.rounds);
            return new Measured(new double[] {constructMs, throughput}, ok, detail);
        });
        Report report = new Report("ring", c.name(), c.runtime())
                .param("actors", o.actors).param("rounds", o.rounds);
        String notes = notes(o, c);
        report.emit("construct", "ms", s.values.get(0), s.ok, notes);
        report.emit("throughput", "msgs/s", s.values.get(1), s.ok, notes);
        return s.ok;
    }

    private static boolean spawn(Options o, Contender c) {
        List<Double> memory = new ArrayList<>();
        long[] heapPerActor = {-1};
        Samples s = repeat(o, 1, rep -> {
            // Memory is read around the first repetition's spawn only: later repetitions reuse
            // heap the JVM has already taken from the OS, so their RSS would not grow.
            boolean measureMemory = rep == 0;
            long rssBefore = 0;
            long heapBefore = 0;
            if (measureMemory) {
                Machine.collectGarbage();
                rssBefore = Machine.rssBytes();
                heapBefore = Machine.heapUsedBytes();
            }
            long[] after = {0, 0};
            Contender.SpawnOutcome r = c.spawn(o.actors, () -> {
                if (measureMemory) {
                    Machine.collectGarbage();
                    after[0] = Machine.rssBytes();
                    after[1] = Machine.heapUsedBytes();
                }
            });
            if (measureMemory) {
                double perActor = (after[0] - rssBefore) / (double) o.actors;
                memory.add((double) Math.round(perActor));
                heapPerActor[0] = Math.round((after[1] - heapBefore) / (double) o.actors);
                System.err.printf("spawn %s: RSS %d -> %d bytes (%.0f bytes/actor), live heap %d bytes/actor%n",
                        c.name(), rssBefore, after[0], perActor, heapPerActor[0]);
            }
            double usPerActor = round(r.spawnNanos() / 1e3 / o.actors, 3);
            boolean ok = r.started() == o.actors;
            String detail = String.format("%.3f us/actor, started %d (expected %d)", usPerActor, r.started(), o.actors);
            return new Measured(new double[] {usPerActor}, ok, detail);
        });
        Report report = new Report("spawn", c.name(), c.runtime()).param("actors", o.actors);
        String notes = notes(o, c);
        report.emit("spawn_time", "us/actor", s.values.get(0), s.ok, notes);
        String memoryNotes = c.notes("spawn") + "; VmRSS after minus before the first repetition's spawn"
                + (o.warmup > 0 ? " (a warm-up one)" : "") + ", each read after System.gc()"
                + (heapPerActor[0] >= 0 ? "; live heap " + heapPerActor[0] + " bytes/actor" : "")
                + "; " + Machine.heapFlags();
        report.emit("memory", "bytes/actor", memory, s.ok, memoryNotes);
        return s.ok;
    }

    private static boolean counter(Options o, Contender c) {
        long messages = (long) o.producers * o.perProducer;
        long expected = messages * 100;
        Samples s = repeat(o, 1, rep -> {
            Contender.CounterOutcome r = c.counter(o.producers, o.perProducer);
            double throughput = round(messages / (r.nanos() / 1e9), 0);
            boolean ok = r.reply() == expected;
            String detail = String.format("%.0f msgs/s, reply %d (expected %d)", throughput, r.reply(), expected);
            return new Measured(new double[] {throughput}, ok, detail);
        });
        new Report("counter", c.name(), c.runtime())
                .param("producers", o.producers).param("per_producer", o.perProducer)
                .emit("throughput", "msgs/s", s.values.get(0), s.ok, notes(o, c));
        return s.ok;
    }

    private static boolean chain(Options o, Contender c) {
        long n = o.length;
        long expectedSum = n * (n + 1) / 2;
        Samples s = repeat(o, 1, rep -> {
            Contender.ChainOutcome r = c.chain(o.length);
            double ms = round(r.nanos() / 1e6, 3);
            boolean ok = r.received() == n && r.sum() == expectedSum;
            String detail = String.format("%.3f ms, received %d (expected %d), sum %d (expected %d)",
                    ms, r.received(), n, r.sum(), expectedSum);
            return new Measured(new double[] {ms}, ok, detail);
        });
        new Report("chain", c.name(), c.runtime())
                .param("length", o.length).param("mode", c.chainMode())
                .emit("elapsed", "ms", s.values.get(0), s.ok, notes(o, c));
        return s.ok;
    }

    /** Rounds to a number of decimals: the figures are not more precise than that. */
    private static double round(double value, int decimals) {
        double scale = Math.pow(10, decimals);
        return Math.round(value * scale) / scale;
    }

    // ---- repetitions -----------------------------------------------------------------------

    private static String notes(Options o, Contender c) {
        return c.notes(o.scenario) + "; " + Machine.heapFlags() + "; " + o.warmup
                + " warm-up and " + o.repeat + " measured repetitions in one JVM";
    }

    /** What one repetition measured, one value per metric, and whether its check passed. */
    private record Measured(double[] values, boolean ok, String detail) {}

    @FunctionalInterface
    private interface Repetition {
        Measured run(int index) throws Exception;
    }

    /** The measured values, one list per metric, and whether every repetition passed. */
    private record Samples(List<List<Double>> values, boolean ok) {}

    /**
     * Runs {@code o.warmup} unmeasured then {@code o.repeat} measured repetitions and collects the
     * measured values. Stops at the first failed check: that repetition's values are kept (even a
     * warm-up's) so the output shows what went wrong.
     */
    private static Samples repeat(Options o, int metrics, Repetition repetition) {
        List<List<Double>> values = new ArrayList<>();
        for (int m = 0; m < metrics; m++) {
            values.add(new ArrayList<>());
        }
        int total = o.warmup + o.repeat;
        for (int rep = 0; rep < total; rep++) {
            boolean measured = rep >= o.warmup;
            Measured result;
            try {
                result = repetition.run(rep);
            } catch (TimeoutException e) {
                System.err.printf("%s %s: repetition %d/%d timed out after %d s: %s%n",
                        o.scenario, o.contender, rep + 1, total, Contender.DEADLINE_SECONDS, e.getMessage());
                return new Samples(values, false);
            } catch (Exception e) {
                System.err.printf("%s %s: repetition %d/%d failed: %s%n", o.scenario, o.contender, rep + 1, total, e);
                return new Samples(values, false);
            }
            System.err.printf("%s %s: repetition %d/%d (%s) %s validated=%s%n", o.scenario, o.contender,
                    rep + 1, total, measured ? "measured" : "warm-up", result.detail, result.ok);
            if (measured || !result.ok) {
                for (int m = 0; m < metrics; m++) {
                    values.get(m).add(result.values[m]);
                }
            }
            if (!result.ok) {
                return new Samples(values, false);
            }
        }
        return new Samples(values, true);
    }
}
