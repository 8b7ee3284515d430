//! The chains a load sends. Chains of `depth` hops (each a SERVER and a CLIENT span with the
//! contract's `budget.*` attributes and the HTTP attributes real instrumentation adds, about
//! ten a span) are encoded once into a [`Template`] export request; each request sent is a copy
//! of it with fresh trace ids patched into the bytes, so the generator spends its time on the
//! wire, not on encoding. [`recording_request`] writes `budget-demo recording`'s lines, every
//! chain a little different.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span::SpanKind,
};
use prost::Message as _;

/// The first 8 bytes of every template trace id: unlikely anywhere else in the encoding.
const MARKER: [u8; 8] = [0xb7, 0x1d, 0x9e, 0x42, 0x13, 0x37, 0xc0, 0xde];
/// Service names of the hops, edge first (cycled for deeper chains).
const SERVICES: [&str; 8] = [
    "gateway",
    "bff",
    "orders",
    "inventory",
    "payments",
    "ledger",
    "notify",
    "search",
];

/// One encoded export request and where its trace ids sit in the bytes.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    trace_id_offsets: Vec<usize>,
    spans: u64,
    /// Written into every trace id, so two runs against one receiver do not collide.
    run: u32,
}

impl Template {
    /// The spans [`Template::new`] puts in a request: `batch` rounded up to whole chains of
    /// `depth` hops (two spans each).
    pub fn spans_per_request(batch: usize, depth: usize) -> u64 {
        let per_chain = 2 * depth.max(1);
        (batch.div_ceil(per_chain).max(1) * per_chain) as u64
    }

    /// Encode chains of `depth` hops until about `batch` spans.
    pub fn new(batch: usize, depth: usize) -> Self {
        let depth = depth.max(1);
        let per_chain = 2 * depth;
        let chains = batch.div_ceil(per_chain).max(1);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // One ResourceSpans per service, holding that service's spans of every chain.
        let mut by_service: Vec<Vec<Span>> = vec![Vec::new(); depth];
        for chain in 0..chains {
            let mut trace_id = MARKER.to_vec();
            trace_id.extend_from_slice(&[0; 4]);
            trace_id.extend_from_slice(&(chain as u32).to_be_bytes());
            hops(&trace_id, depth, now, &mut by_service);
        }
        let request = request_of(by_service);
        let bytes = request.encode_to_vec();
        let trace_id_offsets = bytes
            .windows(MARKER.len())
            .enumerate()
            .filter(|(_, w)| *w == MARKER)
            .map(|(i, _)| i)
            .collect();
        Self {
            bytes,
            trace_id_offsets,
            spans: (chains * per_chain) as u64,
            run: (now >> 10) as u32,
        }
    }

    /// Spans in one request.
    pub fn spans(&self) -> u64 {
        self.spans
    }

    /// Request number `n`: the template with trace ids unique to this run and `n`.
    pub fn request(&self, n: u32) -> Bytes {
        let mut bytes = self.bytes.clone();
        for &offset in &self.trace_id_offsets {
            bytes[offset + 4..offset + 8].copy_from_slice(&self.run.to_be_bytes());
            bytes[offset + 8..offset + 12].copy_from_slice(&n.to_be_bytes());
        }
        Bytes::from(bytes)
    }
}

fn service(hop: usize) -> &'static str {
    SERVICES[hop % SERVICES.len()]
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// How one chain differs from the template's: its work per hop, and the mistakes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    /// Milliseconds of work at each hop before it calls the next.
    work_ms: u64,
    /// Hop 1 receives more budget than hop 0 forwarded (`budget_reset`).
    reset: bool,
    /// The last call of the chain gives up after 5 ms while its callee works on
    /// (`orphaned_work`).
    give_up: bool,
}

/// The template's chain: 20 ms of work per hop, correctly propagated.
const RIGHT: Shape = Shape {
    work_ms: 20,
    reset: false,
    give_up: false,
};

/// The spans of one chain: every hop a SERVER span and a CLIENT span to the next hop, with a
/// budget that is correctly propagated (1200 ms at the edge, 20 ms of work per hop).
fn hops(trace_id: &[u8], depth: usize, now: u64, out: &mut [Vec<Span>]) {
    shaped_hops(trace_id, depth, now, RIGHT, out);
}

/// The spans of one chain of `shape`.
fn shaped_hops(trace_id: &[u8], depth: usize, now: u64, shape: Shape, out: &mut [Vec<Span>]) {
    const MS: u64 = 1_000_000;
    let step = shape.work_ms + 1;
    let mut parent: Vec<u8> = Vec::new();
    let mut budget: i64 = 1200;
    for (hop, spans) in out.iter_mut().enumerate().take(depth) {
        let server_id = ((hop as u64) * 2 + 1).to_be_bytes().to_vec();
        let client_id = ((hop as u64) * 2 + 2).to_be_bytes().to_vec();
        let start = now + (hop as u64) * step * MS;
        let end = now + (2 * depth as u64 - hop as u64) * step * MS;
        let path = format!("/{}", service(hop));
        if hop == 1 && shape.reset {
            budget += 500;
        }
        let mut server_attrs = vec![
            text("http.request.method", "GET"),
            text("url.path", &path),
            text("url.scheme", "http"),
            int("http.response.status_code", 200),
            text("network.protocol.version", "1.1"),
            text("server.address", "127.0.0.1"),
            text("budget.outcome", "ok"),
            int("budget.remaining_at_start_ms", budget),
        ];
        if hop == 0 {
            server_attrs.push(text("budget.source", "default"));
            server_attrs.push(int("budget.default_ms", budget));
        } else {
            server_attrs.push(text("budget.source", "x-budget-ms"));
            server_attrs.push(int("budget.received_ms", budget));
        }
        spans.push(Span {
            trace_id: trace_id.to_vec(),
            span_id: server_id.clone(),
            parent_span_id: parent.clone(),
            name: format!("GET {path}"),
            kind: SpanKind::Server as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: server_attrs,
            ..Span::default()
        });
        let remaining = budget - shape.work_ms as i64;
        let mut forwarded = remaining - 10;
        let give_up = shape.give_up && hop + 2 == depth;
        let (client_end, status, code) = if give_up {
            forwarded = 5;
            let status = Status {
                code: StatusCode::Error as i32,
                message: "deadline exceeded".into(),
            };
            (start + (shape.work_ms + 5) * MS, Some(status), 504)
        } else {
            (end - MS, None, 200)
        };
        let callee = format!("/{}", service(hop + 1));
        spans.push(Span {
            trace_id: trace_id.to_vec(),
            span_id: client_id.clone(),
            parent_span_id: server_id,
            name: format!("GET {}", service(hop + 1)),
            kind: SpanKind::Client as i32,
            start_time_unix_nano: start + shape.work_ms * MS,
            end_time_unix_nano: client_end,
            attributes: vec![
                text("http.request.method", "GET"),
                text("url.full", &format!("http://127.0.0.1:8080{callee}")),
                text("server.address", "127.0.0.1"),
                int("server.port", 8080),
                int("http.response.status_code", code),
                int("budget.remaining_ms", remaining),
                int("budget.forwarded_ms", forwarded),
                int("budget.timeout_ms", forwarded),
                int("budget.sla_ms", 2000),
                int("budget.attempt", 1),
            ],
            status,
            ..Span::default()
        });
        parent = client_id;
        budget = forwarded;
    }
}

/// Request number `n` of a recording of chains of `depth` hops, `batch` spans at most (whole
/// chains): what `budget-demo recording` writes, one line each. Every chain differs a little
/// (its work per hop, 5 to 41 ms; its start, a millisecond after the one before), one in ten
/// resets its budget at hop 1 and one in thirteen gives up on its last call while the callee
/// works on, so the report has latencies, findings and wasted time to total. The same `n`
/// gives the same request.
pub fn recording_request(n: u64, batch: usize, depth: usize) -> ExportTraceServiceRequest {
    const START: u64 = 1_764_547_200_000_000_000; // 2025-12-01T00:00:00Z
    let depth = depth.max(1);
    let chains = batch.div_ceil(2 * depth).max(1) as u64;
    let mut by_service: Vec<Vec<Span>> = vec![Vec::new(); depth];
    for chain in 0..chains {
        let number = n * chains + chain;
        let mut trace_id = MARKER[..4].to_vec();
        trace_id.extend_from_slice(&number.to_be_bytes());
        trace_id.extend_from_slice(&[0; 4]);
        let shape = Shape {
            work_ms: 5 + number % 37,
            reset: number % 10 == 3,
            give_up: depth >= 2 && number % 13 == 7,
        };
        shaped_hops(
            &trace_id,
            depth,
            START + number * 1_000_000,
            shape,
            &mut by_service,
        );
    }
    request_of(by_service)
}

/// One export request: a `ResourceSpans` per hop's service, holding its spans.
fn request_of(by_service: Vec<Vec<Span>>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: by_service
            .into_iter()
            .enumerate()
            .map(|(hop, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        text("service.name", service(hop)),
                        text("telemetry.sdk.language", "rust"),
                    ],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "budget-demo-load".into(),
                        ..InstrumentationScope::default()
                    }),
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every span of a request.
    fn spans(r: &ExportTraceServiceRequest) -> Vec<Span> {
        r.resource_spans
            .iter()
            .flat_map(|rs| rs.scope_spans.iter().flat_map(|s| s.spans.clone()))
            .collect()
    }

    #[test]
    fn a_template_request_decodes_with_fresh_trace_ids_and_whole_chains() {
        let template = Template::new(512, 4);
        assert_eq!(template.spans() % 8, 0, "whole chains of 4 hops x 2 spans");
        assert!(template.spans() >= 512 && template.spans() < 520);
        let a = ExportTraceServiceRequest::decode(template.request(7)).unwrap();
        let b = ExportTraceServiceRequest::decode(template.request(8)).unwrap();
        let (sa, sb) = (spans(&a), spans(&b));
        assert_eq!(sa.len() as u64, template.spans());
        assert_eq!(a.resource_spans.len(), 4, "one resource per service");
        for (x, y) in sa.iter().zip(&sb) {
            assert_eq!(&x.trace_id[8..12], &7u32.to_be_bytes());
            assert_eq!(&y.trace_id[8..12], &8u32.to_be_bytes());
            assert_eq!(x.span_id, y.span_id);
            assert!(x.attributes.len() >= 10, "{}", x.name);
        }
    }

    #[test]
    fn a_recording_line_is_the_same_each_time_and_no_two_lines_share_a_chain() {
        assert_eq!(recording_request(3, 512, 4), recording_request(3, 512, 4));
        let (a, b) = (
            spans(&recording_request(0, 512, 4)),
            spans(&recording_request(1, 512, 4)),
        );
        assert_eq!(a.len() as u64, Template::spans_per_request(512, 4));
        let ids = |s: &[Span]| -> std::collections::BTreeSet<Vec<u8>> {
            s.iter().map(|s| s.trace_id.clone()).collect()
        };
        assert_eq!(ids(&a).len(), 64, "64 chains of 8 spans");
        assert!(ids(&a).is_disjoint(&ids(&b)));
        // Some chains give up on their last call (an error status), the others answer.
        let errors = a.iter().filter(|s| s.status.is_some()).count();
        assert!(errors > 0 && errors < 64, "{errors}");
    }
}
