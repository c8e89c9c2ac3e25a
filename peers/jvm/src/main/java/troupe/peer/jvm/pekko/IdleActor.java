package troupe.peer.jvm.pekko;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.LongAdder;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.Props;
import org.apache.pekko.japi.pf.ReceiveBuilder;

/**
 * An actor of the spawn scenario: its start-up ({@code preStart}, run on the dispatcher when the
 * actor is first scheduled) counts it as started; afterwards it accepts and ignores any message.
 * The actors are spawned in {@link Group}s of {@value Group#SIZE}.
 */
final class IdleActor extends AbstractActor {
    /** Shared by every idle actor: it captures nothing, so one instance is enough. */
    private static final Receive IGNORE_ALL = ReceiveBuilder.create().matchAny(message -> { }).build();

    /** Counts the actors that ran their start-up. */
    static final class Probe {
        final LongAdder started = new LongAdder();
        final CountDownLatch allStarted;

        Probe(int actors) {
            allStarted = new CountDownLatch(actors);
        }
    }

    private final Probe probe;

    private IdleActor(Probe probe) {
        this.probe = probe;
    }

    static Props props(Probe probe) {
        return Props.create(IdleActor.class, () -> new IdleActor(probe));
    }

    @Override
    public void preStart() {
        probe.started.increment();
        probe.allStarted.countDown();
    }

    @Override
    public Receive createReceive() {
        return IGNORE_ALL;
    }

    /**
     * A parent of up to {@link #SIZE} idle actors, which it spawns in its own start-up. Pekko keeps
     * a parent's children in a sorted map, so a flat million children of one parent would spend
     * most of the spawn in that map; a two-level tree is how a Pekko user would hold a million.
     */
    static final class Group extends AbstractActor {
        static final int SIZE = 1000;

        private final int children;
        private final Props childProps;

        private Group(int children, Props childProps) {
            this.children = children;
            this.childProps = childProps;
        }

        static Props props(int children, Props childProps) {
            return Props.create(Group.class, () -> new Group(children, childProps));
        }

        @Override
        public void preStart() {
            for (int i = 0; i < children; i++) {
                getContext().actorOf(childProps);
            }
        }

        @Override
        public Receive createReceive() {
            return IGNORE_ALL;
        }
    }
}
