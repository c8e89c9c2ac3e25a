//! Observing a running system (`SystemBuilder::observe`, `trace_messages`): what a message to
//! an observed actor carries ([`Observed`]: its type's name and the sender's span), and what
//! its delivery records (a span per handled message, the handler's time). The `System` methods
//! that read what `watch.rs` keeps are in `inspect.rs`.

use crate::actor::{Actor, Context};
use crate::id::ActorId;
use crate::raw::{Deliver, Discard};
use crate::reply::Ask;
use crate::watch::{self, ActorWatch};

/// How many messages, each caused by the one before, one trace follows: the handler of a
/// message further down such a chain starts a trace of its own, linked to the one it came from
/// (`follows_from`). A message loop (a ring, a ping-pong, an actor that tells itself) would
/// otherwise make one endless trace in which no span can close, since a subscriber keeps a
/// span open while it has children: the registry's memory grows without end, and closing the
/// chain at last recurses once per span (a stack overflow at a ring's 100,000 hops).
pub const TRACE_DEPTH: u32 = 64;

thread_local! {
    /// Where in its causal chain the code running on this thread is: the depth of the message
    /// whose handler runs, or of the one whose timer, pipe or continuation runs (0 elsewhere).
    static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// What a message (or a timer, a pipe, a continuation) was caused by: the span it was sent
/// from and its depth in the chain of causes.
pub(crate) struct Cause {
    span: tracing::Span,
    depth: u32,
}

impl Cause {
    /// The code running on this thread.
    pub(crate) fn current() -> Self {
        Self {
            span: tracing::Span::current(),
            depth: DEPTH.with(std::cell::Cell::get),
        }
    }

    /// Runs as this cause until the guard drops: its span entered, its depth this thread's.
    pub(crate) fn enter(&self) -> Entered<'_> {
        Entered {
            _span: self.span.enter(),
            depth_before: DEPTH.with(|d| d.replace(self.depth)),
        }
    }
}

/// See [`Cause::enter`].
pub(crate) struct Entered<'a> {
    _span: tracing::span::Entered<'a>,
    depth_before: u32,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(self.depth_before));
    }
}

/// A future run as a cause (`pipe`, an attached stream): entered at every poll.
pub(crate) struct InCause<F> {
    pub(crate) cause: Cause,
    pub(crate) future: std::pin::Pin<Box<F>>,
}

impl<F: std::future::Future> std::future::Future for InCause<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.cause.enter();
        this.future.as_mut().poll(cx)
    }
}

/// A message to an observed actor: the payload, its type's name, and what it was sent from
/// (with `trace_messages`).
pub(crate) struct Observed<P> {
    inner: P,
    message: &'static str,
    parent: Option<Cause>,
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
            parent: watch.observer.spans.then(Cause::current),
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
        } = self;
        let cell = ctx.cell().clone();
        let id = cell.id();
        let cause = parent.map(|parent| {
            let actor_type = std::any::type_name::<A>();
            // Within the depth, a child of its cause's span; past it, the root of a new trace.
            let (within, depth) = match parent.depth + 1 {
                depth if depth <= TRACE_DEPTH => (true, depth),
                _ => (false, 0),
            };
            let span = tracing::info_span!(
                parent: if within { parent.span.id() } else { None },
                "troupe.handle",
                otel.name = format!("{} {}", short(actor_type), short(message)),
                actor = %id,
                actor_type,
                message,
            );
            if !within {
                span.follows_from(&parent.span);
            }
            Cause { span, depth }
        });
        let _entered = cause.as_ref().map(Cause::enter);
        let _handling = watch::handle_as(id);
        // The TSC clock (quanta): a handler's time costs two reads of a few nanoseconds, where
        // the OS clock took about 23 ns a read here (40 % of an observed ring's time).
        let started = quanta::Instant::now();
        inner.deliver(actor, ctx);
        let took = started.elapsed();
        if let Some(watch) = cell.shared.watch() {
            watch.handled(message, took);
        }
    }

    fn discard(self, why: Discard) {
        // A message lost to a stopped actor is counted as a dead letter where its mailbox is
        // closed (`life.rs`), with the rest.
        self.inner.discard(why);
    }

    fn undelivered(self, actor: &mut A, ctx: &mut Context<A>, why: Discard) {
        self.inner.undelivered(actor, ctx, why);
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
