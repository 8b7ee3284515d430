//! `serve --forward` (CONVENTIONS §7) against a real Jaeger v2 (`scripts/jaeger.sh`).
//! `kept`: the demo's fixed-timeout and propagate traffic, recorded as its services sent it,
//! goes through serve, and Jaeger then holds exactly the traces with a finding and the hashed
//! share of the clean ones, each span for span as received, the verdict on its root; two
//! instances keep the same clean chains; a late span joins its trace. `outage`: Jaeger stopped
//! mid-run and started again on its ports blocks nothing and gets what was queued; a long
//! outage drops and fails chains and the counts add up; a 4xx is not retried and a 503 is;
//! SIGTERM with a full queue. `security`: TLS, mTLS, the token, and the flags refused.
//!
//! Jaeger checks no token: the token is checked by a second `budget-top serve` run as the
//! backend (its receivers refuse a wrong or missing token with 401 / UNAUTHENTICATED, §7).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use budget_top::ingest::decode::count_spans;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value as Json;

use crate::jaeger::Jaeger;
use crate::support::{Serving, runtime, serve};

mod kept;
mod outage;
mod security;

/// A span as a backend holds it: its service, its scope's name and version, the span.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    resource: Vec<KeyValue>,
    scope: (String, String),
    span: Span,
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every span of `requests` by trace id (hex), then span id (hex): the last copy of each.
fn by_trace(requests: &[ExportTraceServiceRequest]) -> BTreeMap<String, BTreeMap<String, Held>> {
    let mut out: BTreeMap<String, BTreeMap<String, Held>> = BTreeMap::new();
    for request in requests {
        for resource in &request.resource_spans {
            let attributes = resource
                .resource
                .as_ref()
                .map(|r| r.attributes.clone())
                .unwrap_or_default();
            for scope in &resource.scope_spans {
                let (name, version) = scope
                    .scope
                    .as_ref()
                    .map(|s| (s.name.clone(), s.version.clone()))
                    .unwrap_or_default();
                for span in &scope.spans {
                    out.entry(hex(&span.trace_id)).or_default().insert(
                        hex(&span.span_id),
                        Held {
                            resource: attributes.clone(),
                            scope: (name.clone(), version.clone()),
                            span: span.clone(),
                        },
                    );
                }
            }
        }
    }
    out
}

/// The trace `id` in Jaeger's query API (span id -> span), empty when it has none.
pub fn jaeger_trace(jaeger: &Jaeger, id: &str) -> BTreeMap<String, Held> {
    let (status, body) = jaeger.get(&format!("/api/v3/traces/{id}"));
    if status == 404 {
        return BTreeMap::new();
    }
    assert_eq!(status, 200, "{body}");
    let mut requests = Vec::new();
    for answer in serde_json::Deserializer::from_str(&body).into_iter::<Json>() {
        let answer = answer.unwrap();
        requests.push(serde_json::from_value(answer["result"].clone()).unwrap());
    }
    by_trace(&requests).remove(id).unwrap_or_default()
}

/// `/api/report`'s `forward` object once `done` says so (at most `limit`).
fn forward_when(api: SocketAddr, limit: Duration, done: impl Fn(&Json) -> bool) -> Json {
    let deadline = Instant::now() + limit;
    loop {
        let report = report(api);
        if done(&report["forward"]) {
            return report["forward"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "never so within {limit:?}: {:#}",
            report["forward"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn report(api: SocketAddr) -> Json {
    runtime().block_on(async {
        let body = reqwest::get(format!("http://{api}/api/report"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&body).unwrap()
    })
}

/// Whether everything kept is answered: sent, dropped or failed, nothing queued.
fn settled(forward: &Json) -> bool {
    let s = &forward["spans"];
    let n = |k: &str| s[k].as_u64().unwrap();
    n("queued") == 0 && n("sent") + n("dropped") + n("failed") == n("kept") && n("kept") > 0
}

/// Posts `request` as protobuf and returns how long it took to be accepted.
fn post(http: SocketAddr, request: &ExportTraceServiceRequest) -> Duration {
    runtime().block_on(async {
        let started = Instant::now();
        let status = reqwest::Client::new()
            .post(format!("http://{http}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(request.encode_to_vec())
            .send()
            .await
            .unwrap()
            .status();
        assert!(status.is_success(), "{status}");
        started.elapsed()
    })
}

/// A chain of trace `prefix` `n`: the support's reset chain (one `budget_reset` at orders), or,
/// when not `broken`, the same chain forwarding what remains (no finding).
pub fn chain(prefix: u8, n: u32, broken: bool) -> ExportTraceServiceRequest {
    use deadline_budget::semconv as k;
    let mut request = crate::support::reset_chain(1);
    let mut trace = [prefix; 16];
    trace[12..].copy_from_slice(&n.to_be_bytes());
    for resource in &mut request.resource_spans {
        for scope in &mut resource.scope_spans {
            for span in &mut scope.spans {
                span.trace_id = trace.to_vec();
                if !broken {
                    for a in &mut span.attributes {
                        let fixed = match a.key.as_str() {
                            k::FORWARDED_MS | k::TIMEOUT_MS if span.span_id == [4; 8] => 690,
                            k::RECEIVED_MS if span.span_id == [5; 8] => 690,
                            k::REMAINING_AT_START_MS if span.span_id == [5; 8] => 685,
                            _ => continue,
                        };
                        *a = crate::support::int(&a.key, fixed);
                    }
                }
            }
        }
    }
    request
}

/// The trace id (hex) of `request`'s first span.
pub fn trace_of(request: &ExportTraceServiceRequest) -> String {
    hex(&request.resource_spans[0].scope_spans[0].spans[0].trace_id)
}

/// Waits (`limit` at most) until Jaeger holds every span of `request`'s trace.
#[track_caller]
pub fn until_held_whole(jaeger: &Jaeger, request: &ExportTraceServiceRequest, limit: Duration) {
    let trace = trace_of(request);
    let deadline = Instant::now() + limit;
    while jaeger_trace(jaeger, &trace).len() < count_spans(request) as usize {
        assert!(Instant::now() < deadline, "{trace} never reached Jaeger");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `budget-top serve` forwarding to `url`: a chain judged once quiet for `settle`, the clean
/// ones kept at the share `sample`, and `more` flags.
pub fn forward_to(url: &str, settle: &str, sample: &str, more: &[&str]) -> Serving {
    let forwarding = [
        "--settle",
        settle,
        "--forward",
        url,
        "--forward-sample",
        sample,
    ];
    serve(&[&forwarding[..], more].concat())
}

/// The JSON report serve wrote at `path` (`--report`).
fn read_report(path: &std::path::Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
