//! W3C Trace Context (`traceparent`, `tracestate`) on the wire, so one request chain forms one
//! trace across services without configuring a global propagator.
//!
//! The server layer extracts the caller's span context and makes it the parent of the SERVER
//! span; the client injects the CLIENT span's context into each outgoing request. Both go
//! through `tracing-opentelemetry`, so they take effect when the application's subscriber has an
//! `OpenTelemetryLayer`, and are harmless no-ops otherwise.

use std::str::FromStr;

use http::{HeaderMap, HeaderValue};
use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C `traceparent` header name.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C `tracestate` header name.
pub const TRACESTATE: &str = "tracestate";

/// Parse a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`) into a remote span context.
/// Unknown versions are read by their first four fields, as the W3C spec asks; all-zero ids and
/// version `ff` are rejected.
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let version = parts.next()?;
    let trace_id = parts.next()?;
    let span_id = parts.next()?;
    let flags = parts.next()?;
    let rest = parts.next();
    let is_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !is_hex(version, 2) || version == "ff" || (version == "00" && rest.is_some()) {
        return None;
    }
    if !is_hex(trace_id, 32) || !is_hex(span_id, 16) || !is_hex(flags, 2) {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
        true,
        TraceState::default(),
    ))
}

/// Format a span context as a version-00 `traceparent` value.
pub fn format_traceparent(cx: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    )
}

/// The caller's context from `traceparent` (and `tracestate`), when present and valid.
pub fn extract(headers: &HeaderMap) -> Option<Context> {
    const TRACEPARENT_NAME: http::HeaderName = http::HeaderName::from_static(TRACEPARENT);
    let parent = headers.get(TRACEPARENT_NAME)?.to_str().ok()?;
    let mut span_context = parse_traceparent(parent)?;
    if let Some(state) = headers
        .get(TRACESTATE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| TraceState::from_str(v).ok())
    {
        span_context = SpanContext::new(
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags(),
            true,
            state,
        );
    }
    Some(Context::new().with_remote_span_context(span_context))
}

/// Make the caller's context in `headers` the parent of `span` (a no-op without one, or when the
/// subscriber has no `OpenTelemetryLayer`).
pub fn set_parent_from(span: &tracing::Span, headers: &HeaderMap) {
    if let Some(cx) = extract(headers) {
        // Fails only when the span is already started or disabled: nothing to do then.
        let _ = span.set_parent(cx);
    }
}

/// Write `span`'s OpenTelemetry context into `headers` as `traceparent` (and `tracestate`), so
/// the callee's SERVER span becomes its child. A no-op when the span has no valid context.
pub fn inject(span: &tracing::Span, headers: &mut HeaderMap) {
    let cx = span.context();
    let span_ref = cx.span();
    let span_context = span_ref.span_context();
    if !span_context.is_valid() {
        return;
    }
    if let Ok(value) = HeaderValue::from_str(&format_traceparent(span_context)) {
        headers.insert(TRACEPARENT, value);
    }
    let state = span_context.trace_state().header();
    if !state.is_empty()
        && let Ok(value) = HeaderValue::from_str(&state)
    {
        headers.insert(TRACESTATE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_garbage() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = parse_traceparent(value).unwrap();
        assert!(cx.is_remote() && cx.is_sampled());
        assert_eq!(format_traceparent(&cx), value);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
                .is_some()
        );
    }
}
