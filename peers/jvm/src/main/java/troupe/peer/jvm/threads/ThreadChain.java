package troupe.peer.jvm.threads;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import troupe.peer.jvm.Contender.ChainOutcome;
import troupe.peer.jvm.Deadline;

/**
 * chain on threads (seed 004): N threads in a line joined by capacity-1 blocking buffers. The
 * calling thread is the source and puts 1..N into stage 1's buffer; stages 1..N-1 each pass
 * exactly N messages on and exit; stage N is the sink, which counts and sums them.
 */
final class ThreadChain {
    private ThreadChain() {}

    static ChainOutcome run(ThreadFactory threads, int length) throws Exception {
        List<BlockingQueue<Integer>> buffers = new ArrayList<>(length);
        for (int i = 0; i < length; i++) {
            buffers.add(new ArrayBlockingQueue<>(1));
        }
        CountDownLatch started = new CountDownLatch(length);
        CountDownLatch exited = new CountDownLatch(length);
        for (int i = 0; i < length - 1; i++) {
            BlockingQueue<Integer> in = buffers.get(i);
            BlockingQueue<Integer> out = buffers.get(i + 1);
            threads.newThread(() -> {
                started.countDown();
                try {
                    for (int m = 0; m < length; m++) {
                        out.put(in.take());
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    exited.countDown();
                }
            }).start();
        }
        Sink sink = new Sink(buffers.get(length - 1), length, started, exited);
        threads.newThread(sink).start();
        Deadline.await(started, "chain stages starting");

        long begin = System.nanoTime();
        BlockingQueue<Integer> first = buffers.get(0);
        for (int i = 1; i <= length; i++) {
            first.put(i);
        }
        Deadline.await(exited, "chain to deliver every message");
        // The sink wrote its fields before counting down `exited`, which happens-before here.
        return new ChainOutcome(sink.endNanos - begin, sink.received, sink.sum);
    }

    private static final class Sink implements Runnable {
        private final BlockingQueue<Integer> in;
        private final int expected;
        private final CountDownLatch started;
        private final CountDownLatch exited;
        long received;
        long sum;
        long endNanos;

        Sink(BlockingQueue<Integer> in, int expected, CountDownLatch started, CountDownLatch exited) {
            this.in = in;
            this.expected = expected;
            this.started = started;
            this.exited = exited;
        }

        @Override
        public void run() {
            started.countDown();
            try {
                while (received < expected) {
                    sum += in.take();
                    received++;
                }
                endNanos = System.nanoTime();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                exited.countDown();
            }
        }
    }
}
