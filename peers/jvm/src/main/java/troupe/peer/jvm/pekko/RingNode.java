package troupe.peer.jvm.pekko;

import java.util.concurrent.CountDownLatch;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.Props;

/**
 * A node of the ring. It learns its successor from {@link Connect}; node 0 is the origin, which
 * starts the token on {@link Signal#START}, increments it each time it comes back, and at M
 * records the end and counts down {@link Run#finished}. Every node counts the tokens it received
 * and answers {@link Signal#REPORT} with that count.
 */
final class RingNode extends AbstractActor {
    record Connect(ActorRef next) {}

    /** The token; immutable, so nodes other than the origin forward the same object. */
    record Token(int origin, int value) {}

    enum Signal { START, REPORT }

    /** What one repetition observes from outside the actors. */
    static final class Run {
        final CountDownLatch connected;
        final CountDownLatch finished = new CountDownLatch(1);
        // Written by the origin before counting down `finished`, read after awaiting it.
        long startNanos;
        long endNanos;
        int finalValue;

        Run(int actors) {
            connected = new CountDownLatch(actors);
        }
    }

    private final int id;
    private final int rounds;
    private final Run run;
    private ActorRef next;
    private long received;

    private RingNode(int id, int rounds, Run run) {
        this.id = id;
        this.rounds = rounds;
        this.run = run;
    }

    static Props props(int id, int rounds, Run run) {
        return Props.create(RingNode.class, () -> new RingNode(id, rounds, run));
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(Token.class, this::onToken)
                .match(Connect.class, connect -> {
                    next = connect.next();
                    run.connected.countDown();
                })
                .matchEquals(Signal.START, start -> {
                    run.startNanos = System.nanoTime();
                    next.tell(new Token(id, 0), getSelf());
                })
                .matchEquals(Signal.REPORT, report -> getSender().tell(received, getSelf()))
                .build();
    }

    private void onToken(Token token) {
        received++;
        if (token.origin() != id) {
            next.tell(token, getSelf());
            return;
        }
        int value = token.value() + 1;
        if (value == rounds) {
            run.endNanos = System.nanoTime();
            run.finalValue = value;
            run.finished.countDown();
        } else {
            next.tell(new Token(id, value), getSelf());
        }
    }
}
