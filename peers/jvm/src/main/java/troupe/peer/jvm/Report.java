package troupe.peer.jvm;

import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One result line of JSON Lines output (see ../PROTOCOL.md, "Output"): a (scenario, metric) with
 * every measured sample, median/min/max computed from them, whether the run's check passed, and
 * the machine it ran on. Fields are written in the protocol's order.
 */
final class Report {
    private final String scenario;
    private final String contender;
    private final Map<String, Object> params = new LinkedHashMap<>();
    private final String runtime;

    Report(String scenario, String contender, String runtime) {
        this.scenario = scenario;
        this.contender = contender;
        this.runtime = runtime;
    }

    /** Adds a scenario parameter; parameters are written in the order they were added. */
    Report param(String name, Object value) {
        params.put(name, value);
        return this;
    }

    /** Prints one line on stdout. */
    void emit(String metric, String unit, List<Double> samples, boolean validated, String notes) {
        double[] sorted = samples.stream().mapToDouble(Double::doubleValue).toArray();
        Arrays.sort(sorted);
        double median = 0;
        double min = 0;
        double max = 0;
        int n = sorted.length;
        if (n > 0) {
            min = sorted[0];
            max = sorted[n - 1];
            median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        }
        StringBuilder json = new StringBuilder(512);
        json.append('{');
        field(json, "scenario").append(string(scenario)).append(',');
        field(json, "metric").append(string(metric)).append(',');
        field(json, "contender").append(string(contender)).append(',');
        field(json, "params").append('{');
        boolean first = true;
        for (Map.Entry<String, Object> p : params.entrySet()) {
            if (!first) {
                json.append(',');
            }
            first = false;
            field(json, p.getKey()).append(value(p.getValue()));
        }
        json.append("},");
        field(json, "unit").append(string(unit)).append(',');
        field(json, "median").append(number(median)).append(',');
        field(json, "min").append(number(min)).append(',');
        field(json, "max").append(number(max)).append(',');
        List<String> written = new ArrayList<>(n);
        for (double s : samples) {
            written.add(number(s));
        }
        field(json, "samples").append('[').append(String.join(",", written)).append("],");
        field(json, "validated").append(validated).append(',');
        field(json, "notes").append(string(notes)).append(',');
        field(json, "machine").append('{');
        field(json, "cpu").append(string(Machine.cpu())).append(',');
        field(json, "cores").append(Machine.cores()).append(',');
        field(json, "os").append(string(Machine.os())).append(',');
        field(json, "runtime").append(string(runtime));
        json.append("}}");
        System.out.println(json);
        System.out.flush();
    }

    private static StringBuilder field(StringBuilder json, String name) {
        return json.append(string(name)).append(':');
    }

    private static String value(Object v) {
        if (v instanceof Number number) {
            return number(number.doubleValue());
        }
        return string(String.valueOf(v));
    }

    /**
     * A JSON number with at most 12 significant digits (enough for any figure measured here, and
     * it hides binary noise such as 16.075499999999998), in plain notation.
     */
    static String number(double v) {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            return "0";
        }
        BigDecimal d = new BigDecimal(v).round(new MathContext(12)).stripTrailingZeros();
        return d.scale() <= 0 ? d.toBigInteger().toString() : d.toPlainString();
    }

    /** A JSON string literal. */
    static String string(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
