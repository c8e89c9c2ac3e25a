//! Observing a running system (`SystemBuilder::observe`, `trace_messages`): what a message to
//! an observed actor carries ([`Observed`]: its type's name and the sender's span), and what
//! its delivery records (a span per handled message, the handler's time). The `System` methods
//! that read what `watch.rs` keeps are in `inspect.rs`.

use std::sync::Arc;
use std::time::Instant;

use crate::actor::{Actor, Context};
use crate::id::ActorId;
use crate::loom::Ordering;
use crate::raw::{Deliver, Discard};
use crate::reply::Ask;
use crate::watch::{self, ActorWatch, Observer};

/// A message to an observed actor: the payload, its type's name, and the span it was sent
/// from (with `trace_messages`).
pub(crate) struct Observed<P> {
    inner: P,
    message: &'static str,
    parent: Option<tracing::Span>,
    /// Counts the message as a dead letter if its actor stops before taking it.
    observer: Arc<Observer>,
}

impl<P> Observed<P> {
    /// Wraps `payload` for the actor `watch` observes; with spans on, the caller's current
    /// span becomes the parent of the handler's.
    pub(crate) fn new<A: Actor>(payload: P, watch: &ActorWatch) -> Self
    where
        P: Deliver<A>,
    {
        let message = payload.message_name();
        Self {
            inner: payload,
            message,
            parent: watch.observer.spans.then(tracing::Span::current),
            observer: watch.observer.clone(),
        }
    }

    /// The payload, unwrapped (a refused send hands it back).
    pub(crate) fn into_inner(self) -> P {
        self.inner
    }
}

/// The last segment of a type's path (`my_app::Worker` -> `Worker`), generics kept.
fn short(type_name: &'static str) -> &'static str {
    let end = type_name.find('<').unwrap_or(type_name.len());
    match type_name[..end].rfind("::") {
        Some(at) => &type_name[at + 2..],
        None => type_name,
    }
}

impl<A: Actor, P: Deliver<A>> Deliver<A> for Observed<P> {
    fn deliver(self, actor: &mut A, ctx: &mut Context<A>) {
        let Observed {
            inner,
            message,
            parent,
            observer,
        } = self;
        drop(observer);
        let cell = ctx.cell().clone();
        let id = cell.id();
        let span = parent.map(|parent| {
            let actor_type = std::any::type_name::<A>();
            tracing::info_span!(
                parent: &parent,
                "troupe.handle",
                otel.name = format!("{} {}", short(actor_type), short(message)),
                actor = %id,
                actor_type,
                message,
            )
        });
        let _entered = span.as_ref().map(tracing::Span::enter);
        let _handling = watch::handle_as(id);
        let started = Instant::now();
        inner.deliver(actor, ctx);
        let took = started.elapsed();
        if let Some(watch) = cell.shared.extras.get().and_then(|e| e.watch.as_deref()) {
            watch.handled(message, took);
        }
    }

    fn discard(self, why: Discard) {
        // Only a message lost to a stopped actor is a dead letter; an overflow is counted by
        // the bounded mailbox, a crash by the failure.
        if why == Discard::Stopped {
            self.observer.dead_letters.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.discard(why);
    }

    fn message_name(&self) -> &'static str {
        self.message
    }
}

/// An ask to the observed actor `target` was sent: if an observed actor's handler sent it, the
/// asker now waits on `target` until the answer comes.
pub(crate) fn asked<M: 'static>(
    watch: &ActorWatch,
    target: ActorId,
    ask: &Ask<impl Send + 'static>,
) {
    let Some(asker) = watch::handling() else {
        return;
    };
    if let Some(open) = ask.probe() {
        watch
            .observer
            .asked(asker, target, std::any::type_name::<M>(), open);
    }
}
