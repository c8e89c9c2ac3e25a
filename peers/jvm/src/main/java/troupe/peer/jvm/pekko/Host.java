package troupe.peer.jvm.pekko;

import java.util.function.Function;
import org.apache.pekko.Done;
import org.apache.pekko.actor.AbstractActor;
import org.apache.pekko.actor.Props;
import org.apache.pekko.actor.Status;

/**
 * The parent of one repetition's actors. It runs a {@link Build} recipe in its own context (so
 * the actors the recipe spawns are its children) and replies with what the recipe returned.
 * Stopping the host stops every actor of the repetition, and its termination says they are gone.
 */
final class Host extends AbstractActor {
    /** Spawns and wires actors in the host's context; returns what the asker needs (or null). */
    record Build(Function<AbstractActor.ActorContext, Object> recipe) {}

    static Props props() {
        return Props.create(Host.class, Host::new);
    }

    @Override
    public Receive createReceive() {
        return receiveBuilder()
                .match(Build.class, build -> {
                    Object reply;
                    try {
                        Object result = build.recipe().apply(getContext());
                        reply = result == null ? Done.getInstance() : result;
                    } catch (RuntimeException e) {
                        // Fail the asker's future now rather than let it wait for its deadline.
                        reply = new Status.Failure(e);
                    }
                    getSender().tell(reply, getSelf());
                })
                .build();
    }
}
