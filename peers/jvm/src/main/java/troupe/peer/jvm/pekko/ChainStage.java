package troupe.peer.jvm.pekko;

import java.util.concurrent.CountDownLatch;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.Props;

/**
 * A stage of the chain (seed 004): forwards every message to the next stage. The last stage is a
 * {@link Sink}, which counts and sums what arrives and, at N messages, records the end time.
 */
final class ChainStage extends AbstractActor {
    /** What one repetition observes from outside the actors. */
    static final class Run {
        final CountDownLatch started;
        final CountDownLatch finished = new CountDownLatch(1);
        // Written by the sink before counting down `finished`, read after awaiting it.
        long endNanos;
        long received;
        long sum;

        Run(int stages) {
            started = new CountDownLatch(stages);
        }
    }

    private final ActorRef next;
    private final Run run;

    private ChainStage(ActorRef next, Run run) {
        this.next = next;
        this.run = run;
    }

    static Props props(ActorRef next, Run run) {
        return Props.create(ChainStage.class, () -> new ChainStage(next, run));
    }

    @Override
    public void preStart() {
        run.started.countDown();
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(Integer.class, message -> next.tell(message, getSelf()))
                .build();
    }

    static final class Sink extends AbstractActor {
        private final int expected;
        private final Run run;
        private long received;
        private long sum;

        private Sink(int expected, Run run) {
            this.expected = expected;
            this.run = run;
        }

        static Props props(int expected, Run run) {
            return Props.create(Sink.class, () -> new Sink(expected, run));
        }

        @Override
        public void preStart() {
            run.started.countDown();
        }

        @Override
        public Receive createReceive() {
            return receiveBuilder()
                    .match(Integer.class, message -> {
                        received++;
                        sum += message;
                        if (received == expected) {
                            run.endNanos = System.nanoTime();
                            run.received = received;
                            run.sum = sum;
                            run.finished.countDown();
                        }
                    })
                    .build();
        }
    }
}
