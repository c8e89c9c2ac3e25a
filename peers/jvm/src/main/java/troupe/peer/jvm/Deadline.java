package troupe.peer.jvm;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** Waiting with the per-repetition deadline, so a lost message fails the run instead of hanging it. */
public final class Deadline {
    private Deadline() {}

    public static void await(CountDownLatch latch, String what) throws InterruptedException, TimeoutException {
        if (!latch.await(Contender.DEADLINE_SECONDS, TimeUnit.SECONDS)) {
            throw new TimeoutException(what + " (" + latch.getCount() + " still missing)");
        }
    }

    public static <T> T await(Future<T> future, String what) throws Exception {
        try {
            return future.get(Contender.DEADLINE_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new TimeoutException(what);
        }
    }

    public static void join(Thread thread, String what) throws InterruptedException, TimeoutException {
        thread.join(TimeUnit.SECONDS.toMillis(Contender.DEADLINE_SECONDS));
        if (thread.isAlive()) {
            throw new TimeoutException(what);
        }
    }
}
