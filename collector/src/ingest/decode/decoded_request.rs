//! What one export request decodes to ([`DecodedRequest`]), and the building of each span from
//! the fields any decoding path read (`SpanParts`), so all give the same spans, rejections and
//! reasons.
//!
//! Enters: one span's fields and facts, from prost's request (`decode`'s entry points), the
//! protobuf bytes in place (`protobuf`) or a recording's line (`json_lines`). Leaves: an
//! [`analysis::Span`](deadline_budget::analysis::Span), or why the span was rejected, counted in
//! [`DecodedRequest`].

use std::sync::Arc;

use deadline_budget::analysis::{Span, SpanId, SpanKind, SpanStatus, TraceId};

use super::facts::FactsReader;
use super::interner::Interner;
use super::utf8::Utf8Repairs;
use crate::batch::{RawAttributes, Received, truncate};

/// What one request decoded to.
#[derive(Debug, Default)]
pub struct DecodedRequest {
    /// The valid spans, in request order.
    pub spans: Vec<Span>,
    /// The raw attributes of each span (same index as `spans`), when asked for.
    pub attributes: Vec<RawAttributes>,
    /// Each valid span as received (same index as `spans`), when asked for.
    pub received: Option<Box<Received>>,
    /// Spans rejected (ids of the wrong length).
    pub rejected: u64,
    /// Why the first rejected span was rejected.
    pub first_error: Option<String>,
    /// Strings that were not valid UTF-8, kept with U+FFFD in place of each bad sequence (the
    /// span is kept): see [`Utf8Repairs`].
    pub repaired: Utf8Repairs,
}

impl DecodedRequest {
    /// Spans in the request, valid or not.
    pub fn total(&self) -> u64 {
        self.spans.len() as u64 + self.rejected
    }

    /// What `partial_success.error_message` says: why spans were rejected, and which strings
    /// were repaired; empty when there is nothing to say.
    pub fn message(&self) -> String {
        let parts: Vec<String> = self
            .first_error
            .iter()
            .cloned()
            .chain(self.repaired.message())
            .collect();
        parts.join("; ")
    }

    /// Keeps a valid span, or counts a rejected one; whether it was kept.
    pub(super) fn push(&mut self, span: Result<Span, String>) -> bool {
        match span {
            Ok(span) => {
                self.spans.push(span);
                true
            }
            Err(reason) => {
                self.rejected += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(reason);
                }
                false
            }
        }
    }
}

/// The fields of one OTLP span the analysis reads, borrowed from either decoding path.
#[derive(Debug, Default)]
pub(super) struct SpanParts<'a> {
    pub(super) trace_id: &'a [u8],
    pub(super) span_id: &'a [u8],
    pub(super) parent_span_id: &'a [u8],
    pub(super) name: &'a str,
    pub(super) kind: i32,
    pub(super) start_unix_nano: u64,
    pub(super) end_unix_nano: u64,
    pub(super) status_code: Option<i32>,
}

impl SpanParts<'_> {
    pub(super) fn build(
        self,
        facts: FactsReader<'_>,
        service: &Arc<str>,
        interner: &mut Interner,
    ) -> Result<Span, String> {
        let name = self.name;
        let trace_id: [u8; 16] = self.trace_id.try_into().map_err(|_| {
            format!(
                "span {:?}: trace_id must be 16 bytes, got {}",
                truncate(name, 64),
                self.trace_id.len()
            )
        })?;
        if trace_id == [0; 16] {
            return Err(format!(
                "span {:?}: trace_id is all zero",
                truncate(name, 64)
            ));
        }
        let span_id: [u8; 8] = self.span_id.try_into().map_err(|_| {
            format!(
                "span {:?}: span_id must be 8 bytes, got {}",
                truncate(name, 64),
                self.span_id.len()
            )
        })?;
        // Invalid by the OTLP specification; a child naming it as its parent would be taken
        // for a root (an all-zero parent means "none") and its edge would vanish.
        if span_id == [0; 8] {
            return Err(format!(
                "span {:?}: span_id is all zero",
                truncate(name, 64)
            ));
        }
        let parent_span_id = match <[u8; 8]>::try_from(self.parent_span_id) {
            // An all-zero parent is how some exporters say "no parent".
            Ok(id) => (id != [0; 8]).then_some(SpanId(id)),
            Err(_) if self.parent_span_id.is_empty() => None,
            Err(_) => {
                return Err(format!(
                    "span {:?}: parent_span_id must be 0 or 8 bytes, got {}",
                    truncate(name, 64),
                    self.parent_span_id.len()
                ));
            }
        };
        let kind = match self.kind {
            2 => SpanKind::Server,
            3 => SpanKind::Client,
            4 => SpanKind::Producer,
            5 => SpanKind::Consumer,
            _ => SpanKind::Internal,
        };
        let status = match self.status_code {
            Some(1) => SpanStatus::Ok,
            Some(2) => SpanStatus::Error,
            _ => SpanStatus::Unset,
        };
        let name = interner.intern(name);
        let budget = facts.finish(kind, self.start_unix_nano, &mut |n| interner.intern(n));
        Ok(Span {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            parent_span_id,
            service: service.clone(),
            name,
            kind,
            start_unix_nano: self.start_unix_nano,
            end_unix_nano: self.end_unix_nano,
            status,
            budget,
        })
    }
}
