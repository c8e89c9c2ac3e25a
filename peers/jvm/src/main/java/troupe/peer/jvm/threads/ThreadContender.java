package troupe.peer.jvm.threads;

import java.util.concurrent.ThreadFactory;
import troupe.peer.jvm.Contender;
import troupe.peer.jvm.Machine;

/**
 * java-threads and java-virtual: actors written as plain Java threads, each blocked on a
 * java.util.concurrent blocking queue that serves as its mailbox. The two contenders run the same
 * code and differ only in the ThreadFactory: platform (OS) threads, or virtual threads on the
 * JDK's default scheduler (a ForkJoinPool of one carrier per core).
 */
public final class ThreadContender implements Contender {
    private final String name;
    private final ThreadFactory threads;
    private final boolean virtual;

    private ThreadContender(String name, ThreadFactory threads, boolean virtual) {
        this.name = name;
        this.threads = threads;
        this.virtual = virtual;
    }

    /** java-threads: one platform thread per actor. */
    public static ThreadContender platform() {
        ThreadFactory platform = task -> {
            Thread thread = new Thread(task);
            thread.setDaemon(true);
            return thread;
        };
        return new ThreadContender("java-threads", platform, false);
    }

    /** java-virtual: one virtual thread per actor, or null when this JDK has none (before 21). */
    public static ThreadContender virtual() {
        ThreadFactory factory = VirtualThreads.factory();
        return factory == null ? null : new ThreadContender("java-virtual", factory, true);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String runtime() {
        return Machine.jdk() + (virtual ? " virtual threads" : " platform threads");
    }

    @Override
    public String chainMode() {
        // Virtual threads are the JDK's lightweight unit, as goroutines are Go's.
        return virtual ? "actors" : "threads";
    }

    @Override
    public String unsupported(String scenario, String mode) {
        if (scenario.equals("spawn") && !virtual) {
            return "spawn is not run on platform threads: one OS thread per actor does not reach the "
                    + "scenario's 1,000,000 actors (use java-virtual)";
        }
        if (scenario.equals("chain") && mode != null && !mode.equals(chainMode())) {
            return "chain runs its stages as " + (virtual ? "virtual threads (--mode actors)"
                    : "OS threads (--mode threads)") + ", not --mode " + mode;
        }
        return null;
    }

    @Override
    public String notes(String scenario) {
        String unit = virtual
                ? "virtual thread (default scheduler, " + VirtualThreads.schedulerParallelism() + " carriers)"
                : "platform thread";
        return switch (scenario) {
            case "ring" -> "one " + unit + " per node, ArrayBlockingQueue(1) mailboxes";
            case "spawn" -> "one " + unit + " per actor, started and blocked on its own ArrayBlockingQueue(1) mailbox";
            case "counter" -> "one " + unit + " per producer putting Add records into one LinkedBlockingQueue "
                    + "drained by a counting " + unit + "; GetAndReset carries a CompletableFuture reply";
            case "chain" -> "one " + unit + " per stage joined by ArrayBlockingQueue(1) buffers, the main thread is the source";
            default -> unit;
        };
    }

    @Override
    public RingOutcome ring(int actors, int rounds) throws Exception {
        return ThreadRing.run(threads, actors, rounds);
    }

    @Override
    public SpawnOutcome spawn(int actors, Runnable whileAlive) throws Exception {
        return ThreadSpawn.run(threads, actors, whileAlive);
    }

    @Override
    public CounterOutcome counter(int producers, long perProducer) throws Exception {
        return ThreadCounter.run(threads, producers, perProducer);
    }

    @Override
    public ChainOutcome chain(int length) throws Exception {
        return ThreadChain.run(threads, length);
    }

    @Override
    public void shutdown() {
        // Nothing outlives a repetition: every scenario joins or awaits the threads it started.
    }
}
