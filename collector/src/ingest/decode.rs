//! OTLP spans -> [`analysis::Span`]: the compact record the store and the analysis read.
//!
//! Enters: an `ExportTraceServiceRequest` (from gRPC, HTTP or a file line). Leaves: spans with
//! their budget facts decoded, the raw attributes (moved, not copied) when the screen wants them,
//! and a count of spans rejected with the reason for the first one (for `partial_success`).

use std::collections::HashSet;
use std::sync::Arc;

use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Outcome, Span, SpanId, SpanKind, SpanStatus, TraceId,
};
use deadline_budget::semconv;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1 as otlp;

/// Longest span or service name kept (bytes); longer names are cut at a char boundary.
const MAX_NAME_BYTES: usize = 512;
/// Most raw attributes kept per span for the detail view.
const MAX_KEPT_ATTRIBUTES: usize = 256;
/// The interner forgets everything past this many distinct strings, so hostile input
/// (a new name per span) cannot grow it without bound.
const MAX_INTERNED: usize = 65_536;

/// Interns service and span names so a million stored spans share a handful of strings.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
}

impl Interner {
    /// The shared copy of `s` (cut to a sane length).
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        let s = truncate(s, MAX_NAME_BYTES);
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        if self.strings.len() >= MAX_INTERNED {
            self.strings.clear();
        }
        let arc: Arc<str> = Arc::from(s);
        self.strings.insert(arc.clone());
        arc
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What one request decoded to.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The valid spans, in request order.
    pub spans: Vec<Span>,
    /// The raw attributes of each span (same index as `spans`), when asked for.
    pub attributes: Vec<Box<[KeyValue]>>,
    /// Spans rejected (ids of the wrong length).
    pub rejected: u64,
    /// Why the first rejected span was rejected.
    pub first_error: Option<String>,
}

/// Decodes every span of `request`. With `keep_attributes`, the attributes are moved out of
/// the request into [`Decoded::attributes`] (the request is left without them).
pub fn decode_request(
    request: &mut ExportTraceServiceRequest,
    interner: &mut Interner,
    keep_attributes: bool,
) -> Decoded {
    let mut out = Decoded::default();
    for resource_spans in &mut request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| find_str(&r.attributes, "service.name"))
            .unwrap_or("unknown_service");
        let service = interner.intern(service);
        for scope_spans in &mut resource_spans.scope_spans {
            for span in &mut scope_spans.spans {
                match decode_span(span, &service, interner) {
                    Ok(decoded) => {
                        out.spans.push(decoded);
                        if keep_attributes {
                            let mut attrs = std::mem::take(&mut span.attributes);
                            attrs.truncate(MAX_KEPT_ATTRIBUTES);
                            out.attributes.push(attrs.into_boxed_slice());
                        }
                    }
                    Err(reason) => {
                        out.rejected += 1;
                        if out.first_error.is_none() {
                            out.first_error = Some(reason);
                        }
                    }
                }
            }
        }
    }
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
) -> Result<Span, String> {
    let trace_id: [u8; 16] = span.trace_id.as_slice().try_into().map_err(|_| {
        format!(
            "span {:?}: trace_id must be 16 bytes, got {}",
            truncate(&span.name, 64),
            span.trace_id.len()
        )
    })?;
    if trace_id == [0; 16] {
        return Err(format!(
            "span {:?}: trace_id is all zero",
            truncate(&span.name, 64)
        ));
    }
    let span_id: [u8; 8] = span.span_id.as_slice().try_into().map_err(|_| {
        format!(
            "span {:?}: span_id must be 8 bytes, got {}",
            truncate(&span.name, 64),
            span.span_id.len()
        )
    })?;
    let parent_span_id = match span.parent_span_id.len() {
        0 => None,
        8 => {
            let mut id = [0u8; 8];
            id.copy_from_slice(&span.parent_span_id);
            // An all-zero parent is how some exporters say "no parent".
            (id != [0; 8]).then_some(SpanId(id))
        }
        n => {
            return Err(format!(
                "span {:?}: parent_span_id must be 0 or 8 bytes, got {n}",
                truncate(&span.name, 64)
            ));
        }
    };
    let kind = match span.kind {
        2 => SpanKind::Server,
        3 => SpanKind::Client,
        4 => SpanKind::Producer,
        5 => SpanKind::Consumer,
        _ => SpanKind::Internal,
    };
    let status = match span.status.as_ref().map(|s| s.code) {
        Some(1) => SpanStatus::Ok,
        Some(2) => SpanStatus::Error,
        _ => SpanStatus::Unset,
    };
    let budget = budget_facts(&span.attributes, span.start_time_unix_nano);
    Ok(Span {
        trace_id: TraceId(trace_id),
        span_id: SpanId(span_id),
        parent_span_id,
        service: service.clone(),
        name: interner.intern(&span.name),
        kind,
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        status,
        budget,
    })
}

/// Reads the contract's attributes; falls back to captured headers when `budget.*` says
/// nothing about where the budget came from.
pub fn budget_facts(attributes: &[KeyValue], start_unix_nano: u64) -> BudgetFacts {
    let mut facts = BudgetFacts::default();
    let mut header_budget_ms: Option<&str> = None;
    let mut header_grpc_timeout: Option<&str> = None;
    let mut header_deadline: Option<&str> = None;
    for kv in attributes {
        let value = kv.value.as_ref();
        match kv.key.as_str() {
            semconv::RECEIVED_MS => facts.received_ms = int_of(value),
            semconv::SOURCE => facts.source = str_of(value).and_then(BudgetSource::parse),
            semconv::DEFAULT_MS => facts.default_ms = int_of(value),
            semconv::QUEUE_WAIT_MS => facts.queue_wait_ms = int_of(value),
            semconv::REMAINING_AT_START_MS => facts.remaining_at_start_ms = int_of(value),
            semconv::OUTCOME => facts.outcome = str_of(value).and_then(Outcome::parse),
            semconv::REMAINING_MS => facts.remaining_ms = int_of(value),
            semconv::FORWARDED_MS => facts.forwarded_ms = int_of(value),
            semconv::TIMEOUT_MS => facts.timeout_ms = int_of(value),
            semconv::SLA_MS => facts.sla_ms = int_of(value),
            semconv::ATTEMPT => facts.attempt = int_of(value),
            semconv::HTTP_RESPONSE_STATUS_CODE => facts.http_status = int_of(value),
            semconv::RPC_GRPC_STATUS_CODE | semconv::RPC_STATUS_CODE => {
                facts.rpc_status = facts.rpc_status.or(int_of(value));
            }
            semconv::ERROR_TYPE => facts.error_type = str_of(value).map(Arc::from),
            semconv::HTTP_HEADER_BUDGET_MS => header_budget_ms = header_of(value),
            semconv::HTTP_HEADER_GRPC_TIMEOUT | semconv::RPC_METADATA_GRPC_TIMEOUT => {
                header_grpc_timeout = header_grpc_timeout.or(header_of(value));
            }
            semconv::HTTP_HEADER_REQUEST_DEADLINE => header_deadline = header_of(value),
            _ => {}
        }
    }
    if facts.source.is_none() && facts.received_ms.is_none() {
        let start_ms = (start_unix_nano / 1_000_000) as i64;
        from_headers(
            &mut facts,
            header_budget_ms,
            header_grpc_timeout,
            header_deadline,
            start_ms,
        );
    }
    facts
}

/// The contract's carrier order: the first present and valid header wins; present but
/// invalid ones make the source `invalid` when nothing valid follows.
fn from_headers(
    facts: &mut BudgetFacts,
    budget_ms: Option<&str>,
    grpc_timeout: Option<&str>,
    deadline: Option<&str>,
    start_ms: i64,
) {
    let mut saw_invalid = false;
    if let Some(v) = budget_ms {
        match carrier::parse_budget_ms(v) {
            Some(ms) => {
                facts.received_ms = Some(ms);
                facts.source = Some(BudgetSource::XBudgetMs);
                return;
            }
            None => saw_invalid = true,
        }
    }
    if let Some(v) = grpc_timeout {
        match carrier::parse_grpc_timeout_ms(v) {
            Some(ms) => {
                facts.received_ms = Some(ms);
                facts.source = Some(BudgetSource::GrpcTimeout);
                return;
            }
            None => saw_invalid = true,
        }
    }
    if let Some(v) = deadline {
        match carrier::parse_deadline_unix_ms(v) {
            Some(deadline_ms)
                if deadline_ms.saturating_sub(start_ms).abs()
                    <= deadline_budget::carrier::MAX_DEADLINE_DISTANCE_MS =>
            {
                facts.deadline_unix_ms = Some(deadline_ms);
                facts.received_ms = Some(deadline_ms - start_ms);
                facts.source = Some(BudgetSource::XRequestDeadline);
                return;
            }
            _ => saw_invalid = true,
        }
    }
    if saw_invalid {
        facts.source = Some(BudgetSource::Invalid);
    }
}

/// Captured header values, decoded with the library's own codecs so the collector reads a
/// header exactly as a service built with the library would.
mod carrier {
    use deadline_budget::carrier as lib;

    fn ms(d: std::time::Duration) -> Option<i64> {
        i64::try_from(d.as_millis()).ok()
    }

    pub fn parse_budget_ms(v: &str) -> Option<i64> {
        lib::parse_x_budget_ms(v).ok().and_then(ms)
    }

    pub fn parse_grpc_timeout_ms(v: &str) -> Option<i64> {
        lib::parse_grpc_timeout(v).ok().and_then(ms)
    }

    pub fn parse_deadline_unix_ms(v: &str) -> Option<i64> {
        lib::parse_request_deadline_unix_ms(v).ok()
    }
}

fn find_str<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| str_of(kv.value.as_ref()))
}

fn str_of(value: Option<&AnyValue>) -> Option<&str> {
    match value?.value.as_ref()? {
        Value::StringValue(s) => Some(s),
        _ => None,
    }
}

/// Integers as the contract writes them; also doubles and numeric strings, which other SDKs
/// produce for the same attribute.
fn int_of(value: Option<&AnyValue>) -> Option<i64> {
    match value?.value.as_ref()? {
        Value::IntValue(i) => Some(*i),
        Value::DoubleValue(d) if d.is_finite() && d.abs() < 9.0e15 => Some(*d as i64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A captured header: a string, or (as the HTTP semantic conventions say) an array of strings
/// of which the first is used.
fn header_of(value: Option<&AnyValue>) -> Option<&str> {
    match value?.value.as_ref()? {
        Value::StringValue(s) => Some(s),
        Value::ArrayValue(array) => array.values.first().and_then(|v| str_of(Some(v))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
    }

    #[test]
    fn budget_attributes_win_over_captured_headers() {
        let facts = budget_facts(
            &[
                kv(semconv::RECEIVED_MS, Value::IntValue(800)),
                kv(semconv::SOURCE, Value::StringValue("x-budget-ms".into())),
                kv(
                    semconv::HTTP_HEADER_BUDGET_MS,
                    Value::StringValue("5".into()),
                ),
            ],
            0,
        );
        assert_eq!(facts.received_ms, Some(800));
        assert_eq!(facts.source, Some(BudgetSource::XBudgetMs));
    }

    #[test]
    fn captured_headers_give_a_budget_without_budget_attributes() {
        let facts = budget_facts(
            &[kv(
                semconv::HTTP_HEADER_BUDGET_MS,
                Value::StringValue("750".into()),
            )],
            0,
        );
        assert_eq!(
            (facts.received_ms, facts.source),
            (Some(750), Some(BudgetSource::XBudgetMs))
        );

        let array = Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
            values: vec![AnyValue {
                value: Some(Value::StringValue("250m".into())),
            }],
        });
        let facts = budget_facts(&[kv(semconv::RPC_METADATA_GRPC_TIMEOUT, array)], 0);
        assert_eq!(
            (facts.received_ms, facts.source),
            (Some(250), Some(BudgetSource::GrpcTimeout))
        );

        let facts = budget_facts(
            &[kv(
                semconv::HTTP_HEADER_GRPC_TIMEOUT,
                Value::StringValue("2S".into()),
            )],
            0,
        );
        assert_eq!(facts.received_ms, Some(2000));

        let start_ns = 1_764_430_000_000 * 1_000_000;
        let facts = budget_facts(
            &[kv(
                semconv::HTTP_HEADER_REQUEST_DEADLINE,
                Value::StringValue("1764430000.25".into()),
            )],
            start_ns,
        );
        assert_eq!(facts.received_ms, Some(250));
        assert_eq!(facts.deadline_unix_ms, Some(1_764_430_000_250));
        assert_eq!(facts.source, Some(BudgetSource::XRequestDeadline));
    }

    #[test]
    fn invalid_captured_headers_are_flagged_not_trusted() {
        for bad in ["-5", "12abc", "99999999999999", ""] {
            let facts = budget_facts(
                &[kv(
                    semconv::HTTP_HEADER_BUDGET_MS,
                    Value::StringValue(bad.into()),
                )],
                0,
            );
            assert_eq!(facts.received_ms, None, "{bad}");
            assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
        }
        for bad in ["123456789S", "10x", "S", "1.5S"] {
            let facts = budget_facts(
                &[kv(
                    semconv::RPC_METADATA_GRPC_TIMEOUT,
                    Value::StringValue(bad.into()),
                )],
                0,
            );
            assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
        }
        // A deadline more than 24 h away is absurd.
        let facts = budget_facts(
            &[kv(
                semconv::HTTP_HEADER_REQUEST_DEADLINE,
                Value::StringValue("9999999999999".into()),
            )],
            1_000_000,
        );
        assert_eq!(facts.source, Some(BudgetSource::Invalid));
    }

    #[test]
    fn spans_with_wrong_id_lengths_are_rejected_and_counted() {
        let good = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "ok".into(),
            kind: 2,
            ..Default::default()
        };
        let bad_trace = otlp::Span {
            trace_id: vec![1; 15],
            ..good.clone()
        };
        let bad_parent = otlp::Span {
            parent_span_id: vec![3; 4],
            ..good.clone()
        };
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                scope_spans: vec![otlp::ScopeSpans {
                    spans: vec![good, bad_trace, bad_parent],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let decoded = decode_request(&mut request, &mut Interner::default(), false);
        assert_eq!(decoded.spans.len(), 1);
        assert_eq!(decoded.rejected, 2);
        assert!(
            decoded
                .first_error
                .unwrap()
                .contains("trace_id must be 16 bytes, got 15")
        );
        assert_eq!(&*decoded.spans[0].service, "unknown_service");
        assert_eq!(decoded.spans[0].kind, SpanKind::Server);
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;

    fn one_span(span: otlp::Span, service: &str) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue(service.into())),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                scope_spans: vec![otlp::ScopeSpans {
                    spans: vec![span],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn absurd_content_is_bounded_not_trusted() {
        let attrs: Vec<KeyValue> = (0..100_000)
            .map(|i| KeyValue {
                key: format!("k{i}"),
                ..Default::default()
            })
            .collect();
        let span = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            parent_span_id: vec![2; 8], // its own parent: kept, the analysis cuts the loop
            name: "é".repeat(10_000),
            start_time_unix_nano: u64::MAX, // the year 2554
            end_time_unix_nano: 0,          // ends before it starts
            attributes: attrs,
            ..Default::default()
        };
        let mut request = one_span(span, &"s".repeat(100_000));
        let decoded = decode_request(&mut request, &mut Interner::default(), true);
        let span = &decoded.spans[0];
        assert!(span.name.len() <= MAX_NAME_BYTES && span.name.chars().all(|c| c == 'é'));
        assert!(span.service.len() <= MAX_NAME_BYTES);
        assert_eq!(span.duration_ms(), 0);
        assert_eq!(decoded.attributes[0].len(), MAX_KEPT_ATTRIBUTES);
    }

    #[test]
    fn the_interner_stays_bounded_under_ten_thousand_services_per_name() {
        let mut interner = Interner::default();
        for i in 0..(MAX_INTERNED + 10) {
            let _ = interner.intern(&format!("service-{i}"));
        }
        assert!(interner.strings.len() <= MAX_INTERNED);
        let a = interner.intern("orders");
        let b = interner.intern("orders");
        assert!(Arc::ptr_eq(&a, &b));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use prost::Message as _;

    fn any_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<String>().prop_map(Value::StringValue),
            any::<i64>().prop_map(Value::IntValue),
            any::<f64>().prop_map(Value::DoubleValue),
            any::<bool>().prop_map(Value::BoolValue),
            proptest::collection::vec(any::<String>(), 0..3).prop_map(|v| {
                Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: v
                        .into_iter()
                        .map(|s| AnyValue {
                            value: Some(Value::StringValue(s)),
                        })
                        .collect(),
                })
            }),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(semconv::RECEIVED_MS.to_string()),
            Just(semconv::SOURCE.to_string()),
            Just(semconv::FORWARDED_MS.to_string()),
            Just(semconv::OUTCOME.to_string()),
            Just(semconv::HTTP_HEADER_BUDGET_MS.to_string()),
            Just(semconv::RPC_METADATA_GRPC_TIMEOUT.to_string()),
            Just(semconv::HTTP_HEADER_REQUEST_DEADLINE.to_string()),
            any::<String>(),
        ]
    }

    fn span() -> impl Strategy<Value = otlp::Span> {
        // Mostly well-formed ids, so the attribute paths are exercised too.
        let id = |len: usize| {
            prop_oneof![
                8 => proptest::collection::vec(any::<u8>(), len..=len),
                1 => proptest::collection::vec(any::<u8>(), 0..20),
            ]
        };
        let parent = prop_oneof![
            2 => Just(Vec::new()),
            6 => proptest::collection::vec(any::<u8>(), 8..=8),
            1 => proptest::collection::vec(any::<u8>(), 0..12),
        ];
        (
            id(16),
            id(8),
            parent,
            any::<String>(),
            any::<i32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((key(), any_value()), 0..6),
        )
            .prop_map(
                |(trace_id, span_id, parent_span_id, name, kind, start, end, attrs)| otlp::Span {
                    trace_id,
                    span_id,
                    parent_span_id,
                    name,
                    kind,
                    start_time_unix_nano: start,
                    end_time_unix_nano: end,
                    attributes: attrs
                        .into_iter()
                        .map(|(key, v)| KeyValue {
                            key,
                            value: Some(AnyValue { value: Some(v) }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            )
    }

    proptest! {
        #[test]
        fn any_request_decodes_without_panicking_and_every_span_is_counted(
            spans in proptest::collection::vec(span(), 0..12)
        ) {
            let total = spans.len();
            let valid = spans
                .iter()
                .filter(|s| {
                    s.trace_id.len() == 16
                        && s.trace_id.iter().any(|b| *b != 0)
                        && s.span_id.len() == 8
                        && matches!(s.parent_span_id.len(), 0 | 8)
                })
                .count();
            let mut request = ExportTraceServiceRequest {
                resource_spans: vec![otlp::ResourceSpans {
                    scope_spans: vec![otlp::ScopeSpans { spans, ..Default::default() }],
                    ..Default::default()
                }],
            };
            let decoded = decode_request(&mut request, &mut Interner::default(), true);
            prop_assert_eq!(decoded.spans.len(), valid);
            prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, total as u64);
            prop_assert_eq!(decoded.attributes.len(), valid);
            for s in &decoded.spans {
                prop_assert!(s.name.len() <= MAX_NAME_BYTES);
                prop_assert!(s.parent_span_id != Some(SpanId([0; 8])));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_protobuf_path(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(mut request) = ExportTraceServiceRequest::decode(bytes.as_slice()) {
                let decoded = decode_request(&mut request, &mut Interner::default(), false);
                prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, count_spans(&request));
            }
        }
    }
}
