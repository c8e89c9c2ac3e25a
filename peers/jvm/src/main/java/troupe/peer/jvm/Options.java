package troupe.peer.jvm;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * The parsed command line of one invocation (see ../PROTOCOL.md, "Command line").
 *
 * <pre>
 * run ring    --actors N --rounds M            [--repeat R] [--warmup W] [--contender NAME]
 * run spawn   --actors N                       [--repeat R] [--warmup W] [--contender NAME]
 * run counter --producers P --per-producer K   [--repeat R] [--warmup W] [--contender NAME]
 * run chain   --length N --mode actors|threads [--repeat R] [--warmup W] [--contender NAME]
 * </pre>
 *
 * Options are {@code --name value} or {@code --name=value}. A usage error is reported as a
 * {@link UsageException}; {@link Main} prints it and exits with status 2.
 */
final class Options {
    static final String USAGE = String.join("\n",
            "usage:",
            "  run ring    --actors N --rounds M            [--repeat R] [--warmup W] [--contender NAME]",
            "  run spawn   --actors N                       [--repeat R] [--warmup W] [--contender NAME]",
            "  run counter --producers P --per-producer K   [--repeat R] [--warmup W] [--contender NAME]",
            "  run chain   --length N --mode actors|threads [--repeat R] [--warmup W] [--contender NAME]",
            "contenders: pekko (default), java-threads, java-virtual");

    private static final Map<String, Set<String>> SCENARIO_OPTIONS = Map.of(
            "ring", Set.of("actors", "rounds"),
            "spawn", Set.of("actors"),
            "counter", Set.of("producers", "per-producer"),
            "chain", Set.of("length", "mode"));
    private static final Set<String> COMMON_OPTIONS = Set.of("repeat", "warmup", "contender");

    final String scenario;
    final String contender;
    final int repeat;
    final int warmup;
    final int actors;       // ring, spawn
    final int rounds;       // ring
    final int producers;    // counter
    final long perProducer; // counter
    final int length;       // chain
    /** chain only: the mode asked for, or null when --mode was not given. */
    final String mode;

    static final class UsageException extends Exception {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private Options(String scenario, Map<String, String> values) throws UsageException {
        this.scenario = scenario;
        this.contender = values.getOrDefault("contender", "pekko");
        this.repeat = intOption(values, "repeat", 1, 1);
        this.warmup = intOption(values, "warmup", 0, 0);
        boolean ring = scenario.equals("ring");
        this.actors = ring || scenario.equals("spawn") ? intOption(values, "actors", -1, ring ? 2 : 1) : 0;
        this.rounds = ring ? intOption(values, "rounds", -1, 1) : 0;
        boolean counter = scenario.equals("counter");
        // One producer per core by default, as in the seed.
        this.producers = counter
                ? intOption(values, "producers", Runtime.getRuntime().availableProcessors(), 1) : 0;
        this.perProducer = counter ? intOption(values, "per-producer", -1, 1) : 0;
        boolean chain = scenario.equals("chain");
        this.length = chain ? intOption(values, "length", -1, 1) : 0;
        this.mode = chain ? values.get("mode") : null;
        if (mode != null && !mode.equals("actors") && !mode.equals("threads")) {
            throw new UsageException("chain --mode must be actors or threads, not '" + mode + "'");
        }
    }

    static Options parse(String[] args) throws UsageException {
        if (args.length == 0 || args[0].equals("-h") || args[0].equals("--help")) {
            throw new UsageException("a scenario is required");
        }
        String scenario = args[0];
        Set<String> allowed = SCENARIO_OPTIONS.get(scenario);
        if (allowed == null) {
            throw new UsageException("unknown scenario '" + scenario + "'");
        }
        Map<String, String> values = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("--")) {
                throw new UsageException("unexpected argument '" + arg + "'");
            }
            String name = arg.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new UsageException("--" + name + " needs a value");
            }
            if (!allowed.contains(name) && !COMMON_OPTIONS.contains(name)) {
                throw new UsageException("unknown option --" + name + " for " + scenario);
            }
            values.put(name, value);
        }
        return new Options(scenario, values);
    }

    /** The value of an integer option; {@code fallback < 0} means the option is required. */
    private static int intOption(Map<String, String> values, String name, int fallback, int min)
            throws UsageException {
        String text = values.get(name);
        if (text == null) {
            if (fallback < 0) {
                throw new UsageException("--" + name + " is required");
            }
            return fallback;
        }
        int value;
        try {
            value = Integer.parseInt(text.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + " must be an integer, not '" + text + "'");
        }
        if (value < min) {
            throw new UsageException("--" + name + " must be at least " + min);
        }
        return value;
    }
}
