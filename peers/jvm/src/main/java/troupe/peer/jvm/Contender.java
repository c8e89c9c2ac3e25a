package troupe.peer.jvm;

/**
 * One variant this program can run ({@code --contender NAME}).
 *
 * <p>Each scenario method performs one full repetition and returns what it measured together with
 * what the run's own check needs; {@link Main} does the timing bookkeeping, the validation and the
 * output, the same way for every contender. A method throws {@link java.util.concurrent.TimeoutException}
 * when the run did not finish within {@link #DEADLINE_SECONDS}, which counts as a failed check.
 */
public interface Contender {
    /** How long one repetition may take before it is declared lost (a lost message hangs forever). */
    long DEADLINE_SECONDS = 30 * 60;

    /** The name given to {@code --contender}. */
    String name();

    /** What ran: the library and JDK versions, for {@code machine.runtime}. */
    String runtime();

    /**
     * Why a scenario cannot be run, or null when it can. {@code mode} is chain's {@code --mode}
     * (null when not given).
     */
    String unsupported(String scenario, String mode);

    /** The chain mode this contender's stages implement ("actors" or "threads"). */
    String chainMode();

    /** One sentence on how the contender is configured for a scenario, for {@code notes}. */
    String notes(String scenario);

    /** ring: N nodes, M rounds of one token (seed 000). */
    RingOutcome ring(int actors, int rounds) throws Exception;

    /**
     * spawn: start N idle actors, call {@code whileAlive} once all have run their start-up (this is
     * where the memory is read), then stop them all.
     */
    SpawnOutcome spawn(int actors, Runnable whileAlive) throws Exception;

    /** counter: P producers each send K {@code Add(100)}, then one GetAndReset (seed 002). */
    CounterOutcome counter(int producers, long perProducer) throws Exception;

    /** chain: N stages, N messages 1..N from a source through every stage to the sink (seed 004). */
    ChainOutcome chain(int length) throws Exception;

    /** Releases what outlives a repetition (e.g. an actor system); called once, at the end. */
    void shutdown() throws Exception;

    /**
     * @param constructNanos time to spawn and connect the nodes
     * @param runNanos time from sending the first token until the origin saw the last round
     * @param tokensReceived the sum over nodes of the tokens each received
     * @param finalValue the token's value when the run ended
     */
    record RingOutcome(long constructNanos, long runNanos, long tokensReceived, long finalValue) {}

    /**
     * @param spawnNanos time from before the first spawn until every actor ran its start-up
     * @param started how many actors ran their start-up
     */
    record SpawnOutcome(long spawnNanos, long started) {}

    /**
     * @param nanos time from starting the producers until the GetAndReset reply arrived
     * @param reply the value GetAndReset returned
     */
    record CounterOutcome(long nanos, long reply) {}

    /**
     * @param nanos time from starting to send until the sink received every message
     * @param received how many messages the sink received
     * @param sum the sum of the messages the sink received
     */
    record ChainOutcome(long nanos, long received, long sum) {}
}
