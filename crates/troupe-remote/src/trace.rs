//! Trace contexts across processes (feature `otel`).
//!
//! The sender puts the W3C trace context of the span current at a tell or an ask into the
//! message's entry ([`outgoing`]); the receiver reads it back and delivers the message inside
//! a span whose parent is that context ([`receive_span`]). With `trace_messages` on the
//! receiving system, the actor's `troupe.handle` span is a child of that span: one trace from
//! the first sender through every process its messages cross.
//!
//! The contexts are read from and written to `tracing` spans with `tracing-opentelemetry`, and
//! encoded with OpenTelemetry's `TraceContextPropagator`. Without the feature, [`outgoing`]
//! always says there is nothing to send, and a trace that comes anyway is left unread.

/// The fields of the trace context of the span current on this thread, to send with a message
/// ([`crate::wire::put_trace_field`]): `None` when there is no span, when the span has no
/// valid OpenTelemetry context (no `tracing-opentelemetry` layer, tracing off), and always
/// without the `otel` feature. Then the entry goes untraced, as it went before traces.
#[cfg(feature = "otel")]
pub(crate) fn outgoing() -> Option<Vec<u8>> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let span = tracing::Span::current();
    if span.is_none() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut fields = Fields(Vec::with_capacity(80));
    opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .inject_context(&context, &mut fields);
    (!fields.0.is_empty()).then_some(fields.0)
}

/// Without the `otel` feature nothing is traced.
#[cfg(not(feature = "otel"))]
#[inline(always)]
pub(crate) fn outgoing() -> Option<Vec<u8>> {
    None
}

/// The fields of a trace field being written. A field with no value (the `tracestate` of most
/// spans) says nothing and is left out, and so is one that would take the fields past
/// [`crate::wire::MAX_TRACE_BYTES`] (a very long `tracestate`).
#[cfg(feature = "otel")]
struct Fields(Vec<u8>);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Injector for Fields {
    fn set(&mut self, key: &str, value: String) {
        if value.is_empty() {
            return;
        }
        if !crate::wire::put_trace_field(&mut self.0, key, &value) {
            tracing::debug!(key, "a trace field too long to send was left out");
        }
    }
}

/// The fields of a trace field read from the wire.
#[cfg(feature = "otel")]
struct Found<'a>(Vec<(&'a str, &'a str)>);

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Found<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        // Header names are case-insensitive, as in HTTP.
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| *v)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
}

/// The span to deliver a traced message in: a child of the trace context that came with it
/// (`fields`, the trace field's content), named after the export and the message type. `Ok(None)`
/// for an empty trace field; `Err` with what is wrong when the fields hold no valid context
/// (the message then goes without a parent). Without the `otel` feature, always `Ok(None)`.
#[cfg(feature = "otel")]
pub(crate) fn receive_span(
    fields: &[u8],
    export: &str,
    message: &str,
    ask: bool,
) -> Result<Option<tracing::Span>, String> {
    use opentelemetry::propagation::TextMapPropagator;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    if fields.is_empty() {
        return Ok(None);
    }
    let found = Found(crate::wire::trace_fields(fields)?);
    // From an empty context, not this thread's: the parent is what came, or nothing.
    let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .extract_with_context(&opentelemetry::Context::new(), &found);
    if !parent.span().span_context().is_valid() {
        let traceparent = opentelemetry::propagation::Extractor::get(&found, "traceparent");
        return Err(match traceparent {
            Some(text) => format!("`traceparent` is not a valid trace context: {text:.64}"),
            None => "no `traceparent` field".to_string(),
        });
    }
    let span = tracing::info_span!(
        parent: None,
        "troupe.receive",
        otel.name = format!("receive {export}"),
        otel.kind = if ask { "server" } else { "consumer" },
        export,
        message,
    );
    // Fails only when nothing records the span as OpenTelemetry's (no such layer, or the span
    // is off): there is then no trace to join.
    let _ = span.set_parent(parent);
    Ok(Some(span))
}

/// Without the `otel` feature a trace that comes is left unread.
#[cfg(not(feature = "otel"))]
#[inline(always)]
pub(crate) fn receive_span(
    _fields: &[u8],
    _export: &str,
    _message: &str,
    _ask: bool,
) -> Result<Option<tracing::Span>, String> {
    Ok(None)
}
