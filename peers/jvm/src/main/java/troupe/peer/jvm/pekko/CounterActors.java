package troupe.peer.jvm.pekko;

import java.util.concurrent.CompletableFuture;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.ActorRef;
import org.apache.pekko.actor.Props;

/**
 * The actors of the counter scenario (seed 002).
 *
 * <p>{@link Counting} holds the sum: {@code Add(n)} adds, {@code GetAndReset} replies the sum to
 * the sender and resets it. {@link Coordinator} runs one repetition: on {@link Go} it spawns P
 * {@link Producer} actors; each sends its K {@code Add(100)} one message at a time, in slices of
 * at most {@code slice} sends per turn so it hands the dispatcher thread back between slices;
 * when all P reported done, the coordinator sends {@code GetAndReset} (itself as reply-to) and
 * completes the Go's future with the reply.
 */
final class CounterActors {
    private CounterActors() {}

    record Add(long amount) {}

    enum Signal { GET_AND_RESET, CONTINUE, DONE }

    /** Starts one repetition; completed with the GetAndReset reply. */
    record Go(int producers, long perProducer, CompletableFuture<Long> reply) {}

    record Produce(long count, ActorRef counting) {}

    static final class Counting extends AbstractActor {
        private long sum;

        static Props props() {
            return Props.create(Counting.class, Counting::new);
        }

        @Override
        public Receive createReceive() {
            return receiveBuilder()
                    .match(Add.class, add -> sum += add.amount())
                    .matchEquals(Signal.GET_AND_RESET, request -> {
                        getSender().tell(sum, getSelf());
                        sum = 0;
                    })
                    .build();
        }
    }

    static final class Producer extends AbstractActor {
        private final int slice;
        private long remaining;
        private ActorRef counting;
        private ActorRef coordinator;

        private Producer(int slice) {
            this.slice = slice;
        }

        static Props props(int slice) {
            return Props.create(Producer.class, () -> new Producer(slice));
        }

        @Override
        public Receive createReceive() {
            return receiveBuilder()
                    .matchEquals(Signal.CONTINUE, next -> sendSlice())
                    .match(Produce.class, produce -> {
                        remaining = produce.count();
                        counting = produce.counting();
                        coordinator = getSender();
                        sendSlice();
                    })
                    .build();
        }

        private void sendSlice() {
            long sends = Math.min(slice, remaining);
            ActorRef self = getSelf();
            for (long i = 0; i < sends; i++) {
                counting.tell(new Add(100), self);
            }
            remaining -= sends;
            if (remaining > 0) {
                self.tell(Signal.CONTINUE, self);
            } else {
                coordinator.tell(Signal.DONE, self);
            }
        }
    }

    static final class Coordinator extends AbstractActor {
        private final ActorRef counting;
        private final int slice;
        private int pending;
        private CompletableFuture<Long> reply;

        private Coordinator(ActorRef counting, int slice) {
            this.counting = counting;
            this.slice = slice;
        }

        static Props props(ActorRef counting, int slice) {
            return Props.create(Coordinator.class, () -> new Coordinator(counting, slice));
        }

        @Override
        public Receive createReceive() {
            return receiveBuilder()
                    .match(Go.class, go -> {
                        reply = go.reply();
                        pending = go.producers();
                        for (int p = 0; p < go.producers(); p++) {
                            ActorRef producer = getContext().actorOf(Producer.props(slice));
                            producer.tell(new Produce(go.perProducer(), counting), getSelf());
                        }
                    })
                    .matchEquals(Signal.DONE, done -> {
                        getContext().stop(getSender());
                        if (--pending == 0) {
                            // Every producer has finished: only now ask for the sum.
                            counting.tell(Signal.GET_AND_RESET, getSelf());
                        }
                    })
                    .match(Long.class, sum -> reply.complete(sum))
                    .build();
        }
    }
}
