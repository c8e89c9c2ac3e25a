package troupe.peer.jvm.threads;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.LongAdder;
import troupe.peer.jvm.Contender.SpawnOutcome;
import troupe.peer.jvm.Deadline;

/**
 * spawn on threads: N threads, each with its own capacity-1 mailbox. A thread's start-up is to
 * count itself and then block on its mailbox; it exits when it receives STOP.
 */
final class ThreadSpawn {
    private static final Object STOP = new Object();

    private ThreadSpawn() {}

    static SpawnOutcome run(ThreadFactory threads, int actors, Runnable whileAlive) throws Exception {
        LongAdder startedCount = new LongAdder();
        CountDownLatch started = new CountDownLatch(actors);
        CountDownLatch exited = new CountDownLatch(actors);
        List<BlockingQueue<Object>> mailboxes = new ArrayList<>(actors);

        long begin = System.nanoTime();
        for (int i = 0; i < actors; i++) {
            BlockingQueue<Object> mailbox = new ArrayBlockingQueue<>(1);
            mailboxes.add(mailbox);
            threads.newThread(() -> {
                startedCount.increment();
                started.countDown();
                try {
                    while (mailbox.take() != STOP) {
                        // an idle actor ignores everything but STOP
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    exited.countDown();
                }
            }).start();
        }
        Deadline.await(started, "spawned threads starting");
        long spawnNanos = System.nanoTime() - begin;

        whileAlive.run();
        for (BlockingQueue<Object> mailbox : mailboxes) {
            mailbox.put(STOP);
        }
        Deadline.await(exited, "spawned threads stopping");
        return new SpawnOutcome(spawnNanos, startedCount.sum());
    }
}
