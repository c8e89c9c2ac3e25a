package troupe.peer.jvm.pekko;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.Version;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.Props;
import org.apache.pekko.pattern.Patterns;
import troupe.peer.jvm.Contender;
import troupe.peer.jvm.Deadline;
import troupe.peer.jvm.Machine;

/**
 * pekko: Apache Pekko classic actors (the Java {@code AbstractActor} API), configured the way its
 * documentation suggests for throughput: the default dispatcher is a fork-join pool of one thread
 * per core with a dispatcher {@code throughput} of {@value #DEFAULT_THROUGHPUT} messages per actor
 * per turn. One ActorSystem serves every repetition; each repetition's actors are children of a
 * fresh {@link Host}, stopped (and awaited) at the end of the repetition.
 *
 * <p>For experiments the tuning can be changed with system properties (pass them in
 * {@code PEER_JAVA_OPTS}): {@code peer.pekko.throughput}, {@code peer.pekko.mailbox}
 * ({@code unbounded}, Pekko's default, or {@code single-consumer}) and {@code peer.pekko.slice}
 * (Add messages a counter producer sends per turn).
 */
public final class PekkoContender implements Contender {
    static final int DEFAULT_THROUGHPUT = 100;
    static final String DEFAULT_MAILBOX = "unbounded";
    static final int DEFAULT_SLICE = 1000;

    private static final Duration DEADLINE = Duration.ofSeconds(DEADLINE_SECONDS);

    private final int cores = Runtime.getRuntime().availableProcessors();
    private final int throughput = Integer.getInteger("peer.pekko.throughput", DEFAULT_THROUGHPUT);
    private final String mailbox = System.getProperty("peer.pekko.mailbox", DEFAULT_MAILBOX);
    private final int slice = Integer.getInteger("peer.pekko.slice", DEFAULT_SLICE);
    private ActorSystem system;

    @Override
    public String name() {
        return "pekko";
    }

    @Override
    public String runtime() {
        return "pekko " + Version.current() + " on " + Machine.jdk();
    }

    @Override
    public String chainMode() {
        return "actors";
    }

    @Override
    public String unsupported(String scenario, String mode) {
        if (scenario.equals("chain") && mode != null && !mode.equals("actors")) {
            return "chain runs its stages as actors (--mode actors), not --mode " + mode;
        }
        return null;
    }

    @Override
    public String notes(String scenario) {
        String dispatcher = "classic actors, fork-join dispatcher of " + cores + " threads, throughput "
                + throughput + ", " + (mailbox.equals("single-consumer") ? "SingleConsumerOnlyUnboundedMailbox"
                : "default unbounded mailbox");
        return switch (scenario) {
            case "counter" -> dispatcher + "; producers are actors sending Add one by one, at most " + slice
                    + " per turn; GetAndReset is answered to a reply-to actor (the coordinator)";
            case "chain" -> dispatcher + "; the main thread is the source";
            case "spawn" -> dispatcher + "; " + IdleActor.Group.SIZE
                    + " idle actors per parent actor, start-up counted in preStart";
            default -> dispatcher;
        };
    }

    private ActorSystem system() {
        if (system == null) {
            system = ActorSystem.create("troupe-peer", config());
        }
        return system;
    }

    private Config config() {
        String mailboxType = mailbox.equals("single-consumer")
                ? "org.apache.pekko.dispatch.SingleConsumerOnlyUnboundedMailbox"
                : "org.apache.pekko.dispatch.UnboundedMailbox";
        String text = String.join("\n",
                "pekko {",
                "  loglevel = WARNING",
                "  stdout-loglevel = WARNING",
                "  log-dead-letters = off",
                "  log-dead-letters-during-shutdown = off",
                "  actor {",
                "    default-dispatcher {",
                "      executor = fork-join-executor",
                "      fork-join-executor {",
                "        parallelism-min = " + cores,
                "        parallelism-factor = 1.0",
                "        parallelism-max = " + cores,
                "      }",
                "      throughput = " + throughput,
                "    }",
                "    default-mailbox.mailbox-type = \"" + mailboxType + "\"",
                "  }",
                "}");
        return ConfigFactory.parseString(text).withFallback(ConfigFactory.load());
    }

    // ---- scenarios -------------------------------------------------------------------------

    @Override
    public RingOutcome ring(int actors, int rounds) throws Exception {
        RingNode.Run run = new RingNode.Run(actors);
        ActorRef host = system().actorOf(Host.props());
        try {
            long constructStart = System.nanoTime();
            ActorRef[] nodes = (ActorRef[]) ask(host, new Host.Build(context -> {
                ActorRef[] refs = new ActorRef[actors];
                for (int i = 0; i < actors; i++) {
                    refs[i] = context.actorOf(RingNode.props(i, rounds, run));
                }
                for (int i = 0; i < actors; i++) {
                    refs[i].tell(new RingNode.Connect(refs[(i + 1) % actors]), ActorRef.noSender());
                }
                return refs;
            }), "ring construction");
            Deadline.await(run.connected, "ring nodes connecting");
            long constructNanos = System.nanoTime() - constructStart;

            nodes[0].tell(RingNode.Signal.START, ActorRef.noSender());
            Deadline.await(run.finished, "ring rounds");

            long tokens = 0;
            for (ActorRef node : nodes) {
                tokens += (Long) ask(node, RingNode.Signal.REPORT, "ring node count");
            }
            return new RingOutcome(constructNanos, run.endNanos - run.startNanos, tokens, run.finalValue);
        } finally {
            stop(host);
        }
    }

    @Override
    public SpawnOutcome spawn(int actors, Runnable whileAlive) throws Exception {
        IdleActor.Probe probe = new IdleActor.Probe(actors);
        ActorRef host = system().actorOf(Host.props());
        try {
            CompletableFuture<Object> spawned;
            long begin = System.nanoTime();
            spawned = Patterns.ask(host, new Host.Build(context -> {
                Props idle = IdleActor.props(probe);
                for (int first = 0; first < actors; first += IdleActor.Group.SIZE) {
                    int size = Math.min(IdleActor.Group.SIZE, actors - first);
                    context.actorOf(IdleActor.Group.props(size, idle));
                }
                return null;
            }), DEADLINE).toCompletableFuture();
            Deadline.await(probe.allStarted, "spawned actors starting");
            long spawnNanos = System.nanoTime() - begin;
            Deadline.await(spawned, "spawning host");
            whileAlive.run();
            return new SpawnOutcome(spawnNanos, probe.started.sum());
        } finally {
            stop(host);
        }
    }

    @Override
    public CounterOutcome counter(int producers, long perProducer) throws Exception {
        ActorRef host = system().actorOf(Host.props());
        try {
            ActorRef coordinator = (ActorRef) ask(host, new Host.Build(context -> {
                ActorRef counting = context.actorOf(CounterActors.Counting.props());
                return context.actorOf(CounterActors.Coordinator.props(counting, slice));
            }), "counter construction");
            CompletableFuture<Long> reply = new CompletableFuture<>();
            long begin = System.nanoTime();
            coordinator.tell(new CounterActors.Go(producers, perProducer, reply), ActorRef.noSender());
            long sum = Deadline.await(reply, "GetAndReset reply");
            return new CounterOutcome(System.nanoTime() - begin, sum);
        } finally {
            stop(host);
        }
    }

    @Override
    public ChainOutcome chain(int length) throws Exception {
        ChainStage.Run run = new ChainStage.Run(length);
        ActorRef host = system().actorOf(Host.props());
        try {
            // Built from the sink back, so each stage is created knowing its successor.
            ActorRef first = (ActorRef) ask(host, new Host.Build(context -> {
                ActorRef next = context.actorOf(ChainStage.Sink.props(length, run));
                for (int stage = length - 1; stage >= 1; stage--) {
                    next = context.actorOf(ChainStage.props(next, run));
                }
                return next;
            }), "chain construction");
            Deadline.await(run.started, "chain stages starting");

            long begin = System.nanoTime();
            for (int i = 1; i <= length; i++) {
                first.tell(i, ActorRef.noSender());
            }
            Deadline.await(run.finished, "chain to deliver every message");
            return new ChainOutcome(run.endNanos - begin, run.received, run.sum);
        } finally {
            stop(host);
        }
    }

    @Override
    public void shutdown() throws Exception {
        if (system != null) {
            system.terminate();
            Deadline.await(system.getWhenTerminated().toCompletableFuture(), "actor system terminating");
        }
    }

    // ---- helpers ---------------------------------------------------------------------------

    private static Object ask(ActorRef target, Object message, String what) throws Exception {
        return Deadline.await(Patterns.ask(target, message, DEADLINE).toCompletableFuture(), what);
    }

    /** Stops a repetition's host and waits until it and all its children have terminated. */
    private static void stop(ActorRef host) throws Exception {
        Deadline.await(Patterns.gracefulStop(host, DEADLINE).toCompletableFuture(), "stopping actors");
    }
}
