//! A minimal OTLP/gRPC trace receiver for tests: keeps every span it receives, with its
//! resource's `service.name`, so a test can check what the demo services exported.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// One received span, flattened.
#[derive(Clone, Debug)]
pub struct SinkSpan {
    pub service: String,
    pub name: String,
    pub kind: i32,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: Vec<(String, String)>,
}

impl SinkSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<SinkSpan>>>);

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .map(text)
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    spans.push(SinkSpan {
                        service: service.clone(),
                        name: s.name.clone(),
                        kind: s.kind,
                        trace_id: s.trace_id.clone(),
                        span_id: s.span_id.clone(),
                        parent_span_id: s.parent_span_id.clone(),
                        start_unix_nano: s.start_time_unix_nano,
                        end_unix_nano: s.end_time_unix_nano,
                        attributes: s
                            .attributes
                            .iter()
                            .map(|kv| (kv.key.clone(), text(kv)))
                            .collect(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A running sink on 127.0.0.1:0.
pub struct Sink {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<SinkSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start() -> Sink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = Receiver::default();
        let spans = receiver.0.clone();
        let task = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(receiver))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
                .await
                .unwrap();
        });
        Sink { addr, spans, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<SinkSpan> {
        self.spans.lock().unwrap().clone()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The span as the library's analysis reads it (what a collector would decode from OTLP).
pub fn to_analysis(s: &SinkSpan) -> deadline_budget::analysis::Span {
    use deadline_budget::analysis::*;
    let int = |key: &str| s.attr(key).and_then(|v| v.parse::<i64>().ok());
    let mut trace_id = [0u8; 16];
    trace_id.copy_from_slice(&s.trace_id);
    let mut span_id = [0u8; 8];
    span_id.copy_from_slice(&s.span_id);
    let parent_span_id = (s.parent_span_id.len() == 8).then(|| {
        let mut p = [0u8; 8];
        p.copy_from_slice(&s.parent_span_id);
        SpanId(p)
    });
    Span {
        trace_id: TraceId(trace_id),
        span_id: SpanId(span_id),
        parent_span_id,
        service: s.service.as_str().into(),
        name: s.name.as_str().into(),
        kind: match s.kind {
            2 => SpanKind::Server,
            3 => SpanKind::Client,
            4 => SpanKind::Producer,
            5 => SpanKind::Consumer,
            _ => SpanKind::Internal,
        },
        start_unix_nano: s.start_unix_nano,
        end_unix_nano: s.end_unix_nano,
        status: SpanStatus::Unset,
        budget: BudgetFacts {
            received_ms: int("budget.received_ms"),
            source: s.attr("budget.source").and_then(BudgetSource::parse),
            default_ms: int("budget.default_ms"),
            queue_wait_ms: int("budget.queue_wait_ms"),
            remaining_at_start_ms: int("budget.remaining_at_start_ms"),
            outcome: s.attr("budget.outcome").and_then(Outcome::parse),
            remaining_ms: int("budget.remaining_ms"),
            forwarded_ms: int("budget.forwarded_ms"),
            timeout_ms: int("budget.timeout_ms"),
            sla_ms: int("budget.sla_ms"),
            attempt: int("budget.attempt"),
            http_status: int("http.response.status_code"),
            ..BudgetFacts::default()
        },
    }
}
