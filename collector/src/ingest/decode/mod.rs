//! Decoding: OTLP export requests -> [`Span`], the compact record the store and the analysis
//! read.
//!
//! Enters: an `ExportTraceServiceRequest`, either already decoded by prost (a file line, or
//! when the whole request is kept for `record`) or as its protobuf bytes straight off the wire
//! ([`decode_protobuf`]: the receivers' hot path, which reads the bytes in place and allocates
//! nothing per attribute, see `protobuf`). Leaves: a [`DecodedRequest`]: spans with their budget
//! facts decoded, the raw attributes when the screen wants them, and a count of spans rejected
//! with the reason for the first one (for `partial_success`). Both paths share `SpanParts` and
//! the facts reader (`facts`), so they give the same spans for the same request.
//!
//! The room: this file the entry points; `protobuf` a request read in place, over
//! `protobuf_wire` (just enough of the wire format to walk a message); `otlp_json` OTLP/JSON
//! read as the Collector reads it; `json_lines` a recording's lines read in place straight into
//! spans; `facts` the contract's reading of a span; `decoded_request` what a request decodes
//! to; `utf8` invalid UTF-8 repaired; `interner` the names shared.

pub mod decoded_request;
pub mod facts;
pub mod interner;
pub mod json_lines;
pub mod otlp_json;
mod protobuf;
pub mod protobuf_wire;
pub mod utf8;

use std::sync::Arc;

use deadline_budget::analysis::Span;
use deadline_budget::carrier::Carriers;
use deadline_budget::semconv;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1 as otlp;

use crate::batch::{self, RawAttributes, Received, ReceivedBuilder, Scope, truncate};
use decoded_request::{DecodedRequest, SpanParts};
use facts::{FactsReader, value_ref};
use interner::Interner;
use protobuf_wire::ProtobufError;

/// What to keep of each valid span beside the span itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// Its raw attributes ([`DecodedRequest::attributes`]), for the detail view.
    pub attributes: bool,
    /// The span as received ([`DecodedRequest::received`]), for `serve --forward`.
    pub received: bool,
}

/// Decodes every span of `request`. With `keep_attributes`, each valid span's attributes are
/// kept in [`DecodedRequest::attributes`].
pub fn decode_request(
    request: &mut ExportTraceServiceRequest,
    interner: &mut Interner,
    keep_attributes: bool,
) -> DecodedRequest {
    let keep = Keep {
        attributes: keep_attributes,
        received: false,
    };
    decode_request_keeping(request, interner, keep)
}

/// [`decode_request`], keeping what `keep` says.
pub fn decode_request_keeping(
    request: &mut ExportTraceServiceRequest,
    interner: &mut Interner,
    keep: Keep,
) -> DecodedRequest {
    let mut out = DecodedRequest::default();
    let mut received = keep.received.then(ReceivedBuilder::default);
    let carriers = interner.carriers().clone();
    for resource_spans in &mut request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| find_str(&r.attributes, "service.name"))
            .unwrap_or("unknown_service");
        let service = interner.intern(service);
        let resource: Option<Arc<[u8]>> = received.is_some().then(|| {
            let bare = otlp::ResourceSpans {
                resource: resource_spans.resource.clone(),
                scope_spans: Vec::new(),
                schema_url: resource_spans.schema_url.clone(),
            };
            prost::Message::encode_to_vec(&bare).into()
        });
        for scope_spans in &mut resource_spans.scope_spans {
            if let (Some(received), Some(resource)) = (received.as_mut(), &resource) {
                let bare = otlp::ScopeSpans {
                    scope: scope_spans.scope.clone(),
                    spans: Vec::new(),
                    schema_url: scope_spans.schema_url.clone(),
                };
                received.scope(Arc::new(Scope {
                    resource: resource.clone(),
                    scope: prost::Message::encode_to_vec(&bare).into(),
                }));
            }
            for span in &mut scope_spans.spans {
                if out.push(decode_span(span, &service, interner, &carriers)) {
                    if keep.attributes {
                        out.attributes
                            .push(RawAttributes::from_key_values(&span.attributes));
                    }
                    if let Some(received) = received.as_mut() {
                        received.span(span);
                    }
                }
            }
        }
    }
    out.received = received.map(|r| Box::new(r.finish()));
    out
}

/// Counts the spans in a request (for refusal accounting).
pub fn count_spans(request: &ExportTraceServiceRequest) -> u64 {
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len() as u64)
        .sum()
}

fn decode_span(
    span: &otlp::Span,
    service: &Arc<str>,
    interner: &mut Interner,
    carriers: &Carriers,
) -> Result<Span, String> {
    let mut facts = FactsReader::new(carriers);
    for kv in &span.attributes {
        facts.attribute(kv.key.as_bytes(), value_ref(kv.value.as_ref()));
    }
    if let Some(e) = span
        .events
        .iter()
        .find(|e| e.name == semconv::EXCEPTION_EVENT)
    {
        facts.exception_event = true;
        for kv in &e.attributes {
            facts.exception_attribute(kv.key.as_bytes(), value_ref(kv.value.as_ref()));
        }
    }
    if let Some(status) = &span.status {
        facts.failure_words(&status.message);
    }
    SpanParts {
        trace_id: &span.trace_id,
        span_id: &span.span_id,
        parent_span_id: &span.parent_span_id,
        name: &span.name,
        kind: span.kind,
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        status_code: span.status.as_ref().map(|s| s.code),
    }
    .build(facts, service, interner)
}

fn find_str<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| value_ref(kv.value.as_ref()).str())
}

/// Decodes an `ExportTraceServiceRequest` straight from its protobuf bytes: the same spans,
/// facts and rejections as prost followed by [`decode_request`], without building the request
/// (no allocation per attribute, no copy of a string the analysis does not keep). With
/// `keep_attributes`, only each valid span's attributes are decoded into `KeyValue`s.
///
/// Strings are read as [`Utf8Repairs`](utf8::Utf8Repairs) says: the service name, the span name and every
/// attribute's key and (top-level) string value are checked, and a string that is not UTF-8 is
/// kept with U+FFFD in place of its bad bytes, and counted. Fields the analysis skips (event
/// names, links, status messages) are not checked (prost would reject invalid UTF-8 there);
/// malformed framing is an error.
pub fn decode_protobuf(
    body: &[u8],
    interner: &mut Interner,
    keep_attributes: bool,
) -> Result<DecodedRequest, ProtobufError> {
    let keep = Keep {
        attributes: keep_attributes,
        received: false,
    };
    decode_protobuf_keeping(body, interner, keep)
}

/// [`decode_protobuf`], keeping what `keep` says: each span as received is a slice of `body`
/// ([`DecodedRequest::received`]'s bytes are left empty: the caller puts the body there).
pub fn decode_protobuf_keeping(
    body: &[u8],
    interner: &mut Interner,
    keep: Keep,
) -> Result<DecodedRequest, ProtobufError> {
    use protobuf_wire::{Field, fields};
    let keep_attributes = keep.attributes;
    let mut received = keep.received.then(Received::default);
    // ~300 bytes a span on the wire is typical: one allocation instead of a doubling series.
    let mut out = DecodedRequest {
        spans: Vec::with_capacity(body.len() / 256),
        ..DecodedRequest::default()
    };
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut scratch = KeyValue::default();
    let carriers = interner.carriers().clone();
    for field in fields(body) {
        let (1, Field::Len(resource_spans)) = field? else {
            continue;
        };
        let service = match protobuf::service_name(resource_spans)? {
            Some(name) => {
                let name = String::from_utf8_lossy(name);
                if let std::borrow::Cow::Owned(_) = name {
                    out.repaired.add(|| {
                        format!(
                            "resource attribute \"service.name\" {:?}",
                            truncate(&name, 64)
                        )
                    });
                }
                interner.intern(&name)
            }
            None => interner.intern("unknown_service"),
        };
        let resource: Option<Arc<[u8]>> = match received {
            Some(_) => Some(batch::fields_but(resource_spans, 2)?.into()),
            None => None,
        };
        for field in fields(resource_spans) {
            let (2, Field::Len(scope_spans)) = field? else {
                continue;
            };
            if let (Some(received), Some(resource)) = (received.as_mut(), &resource) {
                received.scopes.push(Arc::new(Scope {
                    resource: resource.clone(),
                    scope: batch::fields_but(scope_spans, 2)?.into(),
                }));
            }
            for field in fields(scope_spans) {
                let (2, Field::Len(span)) = field? else {
                    continue;
                };
                kept.clear();
                let pushed = protobuf::decode_span_bytes(
                    span,
                    &service,
                    interner,
                    &carriers,
                    keep_attributes.then_some(&mut kept),
                    &mut out,
                )?;
                if pushed && keep_attributes {
                    out.attributes.push(protobuf::keep(&kept, &mut scratch)?);
                }
                if pushed && let Some(received) = received.as_mut() {
                    received.push_slice(body, span);
                }
            }
        }
    }
    out.received = received.map(Box::new);
    Ok(out)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hostile_tests;

#[cfg(test)]
mod properties;
