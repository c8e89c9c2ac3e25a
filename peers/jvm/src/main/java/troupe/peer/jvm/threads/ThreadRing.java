package troupe.peer.jvm.threads;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import troupe.peer.jvm.Contender.RingOutcome;
import troupe.peer.jvm.Deadline;

/**
 * ring on threads: one thread per node, each blocked on its own capacity-1 queue and holding the
 * next node's queue. Node 0 is the origin: on START it sends the token to node 1; each time the
 * token comes back it increments the value, and at M it records the end time and sends STOP
 * around the ring, which every node forwards once before it exits.
 */
final class ThreadRing {
    private static final Object START = new Object();
    private static final Object STOP = new Object();

    /** The token; immutable, so nodes other than the origin forward the same object. */
    private record Token(int origin, int value) {}

    private ThreadRing() {}

    static RingOutcome run(ThreadFactory threads, int actors, int rounds) throws Exception {
        CountDownLatch started = new CountDownLatch(actors);
        CountDownLatch exited = new CountDownLatch(actors);
        long constructStart = System.nanoTime();
        List<BlockingQueue<Object>> inboxes = new ArrayList<>(actors);
        for (int i = 0; i < actors; i++) {
            inboxes.add(new ArrayBlockingQueue<>(1));
        }
        Node[] nodes = new Node[actors];
        for (int i = 0; i < actors; i++) {
            nodes[i] = new Node(i, inboxes.get(i), inboxes.get((i + 1) % actors), rounds, started, exited);
            threads.newThread(nodes[i]).start();
        }
        Deadline.await(started, "ring nodes starting");
        long constructNanos = System.nanoTime() - constructStart;

        inboxes.get(0).put(START);
        Deadline.await(exited, "ring to finish and stop");
        // Every node wrote its fields before counting down `exited`, which happens-before here.
        long tokens = 0;
        for (Node node : nodes) {
            tokens += node.received;
        }
        Node origin = nodes[0];
        return new RingOutcome(constructNanos, origin.endNanos - origin.startNanos, tokens, origin.finalValue);
    }

    private static final class Node implements Runnable {
        private final int id;
        private final BlockingQueue<Object> inbox;
        private final BlockingQueue<Object> next;
        private final int rounds;
        private final CountDownLatch started;
        private final CountDownLatch exited;
        long received;
        long startNanos;
        long endNanos;
        int finalValue;

        Node(int id, BlockingQueue<Object> inbox, BlockingQueue<Object> next, int rounds,
                CountDownLatch started, CountDownLatch exited) {
            this.id = id;
            this.inbox = inbox;
            this.next = next;
            this.rounds = rounds;
            this.started = started;
            this.exited = exited;
        }

        @Override
        public void run() {
            started.countDown();
            try {
                while (true) {
                    Object message = inbox.take();
                    if (message instanceof Token token) {
                        received++;
                        if (token.origin() != id) {
                            next.put(token);
                            continue;
                        }
                        int value = token.value() + 1;
                        if (value == rounds) {
                            endNanos = System.nanoTime();
                            finalValue = value;
                            next.put(STOP);
                        } else {
                            next.put(new Token(id, value));
                        }
                    } else if (message == START) {
                        startNanos = System.nanoTime();
                        next.put(new Token(id, 0));
                    } else if (message == STOP) {
                        // The origin started STOP and exits when it comes back; others pass it on.
                        if (id != 0) {
                            next.put(STOP);
                        }
                        return;
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                exited.countDown();
            }
        }
    }
}
