package troupe.peer.jvm.threads;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import troupe.peer.jvm.Contender.CounterOutcome;
import troupe.peer.jvm.Deadline;

/**
 * counter on threads: one counting thread drains an unbounded LinkedBlockingQueue (its mailbox);
 * P producer threads put K {@code Add(100)} each. Once every producer has been joined, a
 * {@code GetAndReset} carrying a CompletableFuture is put in the queue and the counting thread
 * completes the future with the sum.
 */
final class ThreadCounter {
    private static final Object STOP = new Object();

    private record Add(long amount) {}

    private record GetAndReset(CompletableFuture<Long> reply) {}

    private ThreadCounter() {}

    static CounterOutcome run(ThreadFactory threads, int producers, long perProducer) throws Exception {
        BlockingQueue<Object> mailbox = new LinkedBlockingQueue<>();
        Thread counting = threads.newThread(() -> {
            long sum = 0;
            try {
                while (true) {
                    Object message = mailbox.take();
                    if (message instanceof Add add) {
                        sum += add.amount();
                    } else if (message instanceof GetAndReset request) {
                        request.reply().complete(sum);
                        sum = 0;
                    } else if (message == STOP) {
                        return;
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        counting.start();

        long begin = System.nanoTime();
        Thread[] senders = new Thread[producers];
        for (int p = 0; p < producers; p++) {
            senders[p] = threads.newThread(() -> {
                try {
                    for (long i = 0; i < perProducer; i++) {
                        mailbox.put(new Add(100));
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            senders[p].start();
        }
        for (Thread sender : senders) {
            Deadline.join(sender, "producer finishing");
        }
        GetAndReset request = new GetAndReset(new CompletableFuture<>());
        mailbox.put(request);
        long reply = Deadline.await(request.reply(), "GetAndReset reply");
        long nanos = System.nanoTime() - begin;

        mailbox.put(STOP);
        Deadline.join(counting, "counting thread stopping");
        return new CounterOutcome(nanos, reply);
    }
}
