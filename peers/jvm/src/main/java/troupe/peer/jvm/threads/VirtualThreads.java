package troupe.peer.jvm.threads;

import java.lang.reflect.Method;
import java.util.concurrent.ThreadFactory;

/**
 * Reaches virtual threads (JDK 21+) while the program is compiled for Java 17, so one jar serves
 * every contender: on an older JDK {@link #factory()} returns null and java-virtual is skipped.
 */
final class VirtualThreads {
    private VirtualThreads() {}

    /** {@code Thread.ofVirtual().factory()}, or null when this JDK has no virtual threads. */
    static ThreadFactory factory() {
        try {
            Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
            // Call through the public interface: the builder's own class is not public.
            Method factory = Class.forName("java.lang.Thread$Builder").getMethod("factory");
            return (ThreadFactory) factory.invoke(builder);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** The carrier pool's parallelism as the JDK will size it (the property, else the cores). */
    static int schedulerParallelism() {
        String configured = System.getProperty("jdk.virtualThreadScheduler.parallelism");
        if (configured != null) {
            try {
                return Integer.parseInt(configured.trim());
            } catch (NumberFormatException e) {
                // fall through to the JDK's default
            }
        }
        return Runtime.getRuntime().availableProcessors();
    }
}
