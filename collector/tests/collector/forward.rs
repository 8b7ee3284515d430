//! `serve --forward` (CONVENTIONS §7) against a real Jaeger v2 (`scripts/jaeger.sh`): the demo's
//! fixed-timeout and propagate traffic, recorded as its services sent it, goes through serve,
//! and Jaeger then holds exactly the traces with a finding and the hashed share of the clean
//! ones, each span for span as received, the verdict on its root; Jaeger stopped mid-run and
//! started again on its ports blocks nothing and gets what was queued; a long outage drops and
//! fails chains and the counts add up; a 4xx is not retried and a 503 is; TLS, mTLS and the
//! token; SIGTERM with a full queue; two instances keep the same clean chains; a late span
//! joins its trace in Jaeger.
//!
//! Jaeger checks no token: the token is checked by a second `budget-top serve` run as the
//! backend (its receivers refuse a wrong or missing token with 401 / UNAUTHENTICATED, §7).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use budget_demo::{Demo, DemoConfig, LoadPlan, Scenario, Timing};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value as Json;

use crate::jaeger::{Jaeger, JaegerTls, Ports, jaeger_or_skip};
use crate::support::{Serving, listen, run, runtime, scratch, serve};

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

/// The value of attribute `key` of `span`.
fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
}

/// The same span without budget-top's verdict (what its service sent), in a form that leaves
/// out how Jaeger stores a span and not what it is: attributes sorted by key, an absent status
/// as the default one, and the warnings its query adds (`@jaeger@warnings`: a clock skew it
/// would have adjusted) left out.
fn as_sent(held: &Held) -> Held {
    let mut out = normal(held);
    out.span
        .attributes
        .retain(|a| !a.key.starts_with("budget_top."));
    out
}

/// See [`as_sent`].
fn normal(held: &Held) -> Held {
    let mut out = held.clone();
    out.resource.sort_by(|a, b| a.key.cmp(&b.key));
    out.span
        .attributes
        .retain(|a| !a.key.starts_with("@jaeger@"));
    out.span.attributes.sort_by(|a, b| a.key.cmp(&b.key));
    for event in &mut out.span.events {
        event.attributes.sort_by(|a, b| a.key.cmp(&b.key));
    }
    for link in &mut out.span.links {
        link.attributes.sort_by(|a, b| a.key.cmp(&b.key));
    }
    out.span.status.get_or_insert_with(Default::default);
    out
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

/// Sends `requests` to serve: the odd ones over gRPC (protobuf, read in place), the even ones
/// over HTTP as OTLP/JSON (read by the general decoder), each accepted.
fn send(serving: &Serving, requests: &[ExportTraceServiceRequest]) {
    runtime().block_on(async {
        let mut grpc = TraceServiceClient::connect(format!("http://{}", serving.grpc))
            .await
            .unwrap();
        let http = reqwest::Client::new();
        for (i, request) in requests.iter().enumerate() {
            if i % 2 == 0 {
                grpc.export(request.clone()).await.unwrap();
            } else {
                let status = http
                    .post(format!("http://{}/v1/traces", serving.http))
                    .header("content-type", "application/json")
                    .body(serde_json::to_string(request).unwrap())
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert!(status.is_success(), "{status}");
            }
        }
    });
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

/// Posts broken chains in waves of 100, each judged before the next: the chains waiting to be
/// judged fit their half of a small `--forward-buffer`, and the queue's half fills. Each
/// request is accepted at once, whatever the backend does.
fn in_waves(serving: &Serving, requests: &[ExportTraceServiceRequest]) {
    for (wave, requests) in requests.chunks(100).enumerate() {
        for request in requests {
            let took = post(serving.http, request);
            assert!(took < Duration::from_secs(2), "a request took {took:?}");
        }
        let judged = (100 * wave + requests.len()) as u64;
        forward_when(serving.api, Duration::from_secs(30), |f| {
            f["chains"]["finding"] == judged
        });
    }
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

fn spans_of(request: &ExportTraceServiceRequest) -> u64 {
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len() as u64)
        .sum()
}

/// The Collector's probabilistic_sampler hash, written again here from its description: FNV-1a
/// over the seed (0, four bytes) and the trace id, its low 14 bits below `floor(F × 16384)`.
fn hash_keeps(trace_id_hex: &str, share: f64) -> bool {
    let mut hash: u32 = 0x811c_9dc5;
    let bytes = (0..16).map(|i| u8::from_str_radix(&trace_id_hex[2 * i..2 * i + 2], 16).unwrap());
    for byte in [0u8; 4].into_iter().chain(bytes) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(16_777_619);
    }
    (hash & 0x3fff) < (share * 16384.0).floor() as u32
}

/// The demo's fixed-timeout and propagate traffic at a quarter of the workshop's figures, as
/// `budget-top record` received it: one export request a line.
fn record_demo(dir: &Path) -> Vec<ExportTraceServiceRequest> {
    let path = dir.join("demo.jsonl");
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    runtime().block_on(async {
        for (scenario, requests) in [(Scenario::FixedTimeout, 12), (Scenario::Propagate, 40)] {
            let mut config = DemoConfig::new(scenario, recorder.grpc.to_string());
            config.timing = Timing::new(0.25);
            config.load = LoadPlan {
                rate: 10.0,
                requests: Some(requests),
                ..LoadPlan::default()
            };
            let demo = Demo::start(config).await.unwrap();
            tokio::time::timeout(Duration::from_secs(60), demo.load_finished())
                .await
                .expect("the load finishes");
            tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
                .await
                .expect("the demo shuts down");
        }
    });
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn jaeger_holds_every_broken_chain_and_the_hashed_share_of_the_clean_ones_whole() {
    let Some(bin) = jaeger_or_skip("forward: jaeger_holds_every_broken_chain") else {
        return;
    };
    let dir = scratch("forward/demo");
    let requests = record_demo(&dir);
    let sent = by_trace(&requests);
    // Which chains have a finding at warning or above: the same analysis, of the same file.
    let checked = run(&[
        "check",
        "--input",
        dir.join("demo.jsonl").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let broken: BTreeSet<String> = checked.json()["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("count").is_none() && f["severity"] != "info")
        .map(|f| f["trace_id"].as_str().unwrap().to_owned())
        .collect();
    let clean: Vec<&String> = sent.keys().filter(|t| !broken.contains(*t)).collect();
    assert!(
        broken.len() >= 10 && clean.len() >= 30,
        "{} broken, {} clean",
        broken.len(),
        clean.len()
    );

    let jaeger = Jaeger::start(&bin);
    let share = 0.5;
    let serving = serve(&[
        "--settle",
        "1s",
        "--forward",
        &format!("grpc://{}", jaeger.otlp_grpc),
        "--forward-sample",
        &share.to_string(),
    ]);
    send(&serving, &requests);
    let sampled: BTreeSet<&String> = clean
        .iter()
        .copied()
        .filter(|t| hash_keeps(t, share))
        .collect();
    let forward = forward_when(serving.api, Duration::from_secs(60), |f| {
        settled(f) && f["chains"]["finding"].as_u64().unwrap() >= broken.len() as u64
    });
    assert_eq!(forward["chains"]["finding"], broken.len(), "{forward:#}");
    assert_eq!(forward["chains"]["sample"], sampled.len(), "{forward:#}");
    let kept_spans: usize = broken
        .iter()
        .chain(sampled.iter().copied())
        .map(|t| sent[t].len())
        .sum();
    assert_eq!(forward["spans"]["kept"], kept_spans, "{forward:#}");
    assert_eq!(forward["spans"]["sent"], kept_spans, "{forward:#}");
    // The sampled share of the clean chains, within a binomial bound (four deviations).
    let (n, p) = (clean.len() as f64, share);
    let sd = (n * p * (1.0 - p)).sqrt();
    assert!(
        (sampled.len() as f64 - n * p).abs() <= 4.0 * sd,
        "{} of {n} clean chains sampled at {p}",
        sampled.len()
    );

    // Jaeger holds exactly those, each span for span as received, the verdict on the root.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (trace, spans) in &sent {
        let keep = broken.contains(trace) || sampled.contains(trace);
        let stored = loop {
            let stored = jaeger_trace(&jaeger, trace);
            if !keep || stored.len() >= spans.len() || Instant::now() > deadline {
                break stored;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if !keep {
            assert!(
                stored.is_empty(),
                "{trace} is clean and not in the share, yet stored"
            );
            continue;
        }
        assert_eq!(
            stored.keys().collect::<Vec<_>>(),
            spans.keys().collect::<Vec<_>>(),
            "{trace}: not whole"
        );
        let mut marked = 0;
        for (id, held) in &stored {
            assert_eq!(
                as_sent(held),
                normal(&spans[id]),
                "{trace}/{id} changed on the way"
            );
            if let Some(Value::StringValue(kinds)) = attribute(&held.span, "budget_top.findings") {
                marked += 1;
                assert!(
                    held.span.parent_span_id.is_empty(),
                    "the verdict on a non-root span"
                );
                assert_eq!(
                    kinds.is_empty(),
                    !broken.contains(trace),
                    "{trace}: {kinds:?}"
                );
                assert!(matches!(
                    attribute(&held.span, "budget_top.wasted_ms"),
                    Some(Value::IntValue(_))
                ));
            }
        }
        assert_eq!(marked, 1, "{trace}: the verdict is on its root, once");
    }
    let (code, _) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0));
    jaeger.stop();
}

#[test]
fn jaeger_stopped_mid_run_blocks_nothing_and_gets_what_was_queued_once_back() {
    let Some(bin) = jaeger_or_skip("forward: jaeger_stopped_mid_run") else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let ports: Ports = jaeger.ports();
    let serving = serve(&[
        "--settle",
        "300ms",
        "--forward",
        &format!("grpc://{}", jaeger.otlp_grpc),
        "--forward-sample",
        "0",
    ]);
    let before: Vec<ExportTraceServiceRequest> = (0..10).map(|n| chain(0xa1, n, true)).collect();
    for request in &before {
        post(serving.http, request);
    }
    forward_when(serving.api, Duration::from_secs(30), |f| {
        settled(f) && f["chains"]["finding"] == 10
    });
    jaeger.stop();
    // Down: every request is still accepted at once, and the chains wait in the queue.
    let during: Vec<ExportTraceServiceRequest> = (0..30).map(|n| chain(0xa2, n, true)).collect();
    for request in &during {
        let took = post(serving.http, request);
        assert!(took < Duration::from_secs(2), "a request took {took:?}");
    }
    let waiting = forward_when(serving.api, Duration::from_secs(60), |f| {
        f["chains"]["finding"] == 40 && f["spans"]["retried"].as_u64().unwrap() > 0
    });
    assert_eq!(waiting["spans"]["failed"], 0, "{waiting:#}");
    assert_eq!(waiting["spans"]["dropped"], 0, "{waiting:#}");
    let jaeger = Jaeger::start_on(&bin, ports, None);
    let forward = forward_when(serving.api, Duration::from_secs(90), settled);
    let kept = 40 * spans_of(&before[0]);
    assert_eq!(forward["spans"]["sent"], kept, "{forward:#}");
    for request in &during {
        let trace = hex(&request.resource_spans[0].scope_spans[0].spans[0].trace_id);
        let deadline = Instant::now() + Duration::from_secs(30);
        while jaeger_trace(&jaeger, &trace).len() < spans_of(request) as usize {
            assert!(Instant::now() < deadline, "{trace} never reached Jaeger");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let (code, _) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0));
    jaeger.stop();
}

#[test]
fn a_long_outage_drops_and_fails_chains_and_the_counts_add_up_exactly() {
    // Nothing listens there: every attempt fails to connect.
    let nowhere = crate::otelcol_tier1::free_port();
    let dir = scratch("forward/outage");
    let report_path = dir.join("report.json");
    let serving = serve(&[
        "--settle",
        "200ms",
        "--forward",
        &format!("grpc://{nowhere}"),
        "--forward-sample",
        "0",
        "--forward-buffer",
        "200000",
        "--forward-retry-for",
        "3s",
        "--forward-timeout",
        "1s",
        "--report",
        report_path.to_str().unwrap(),
    ]);
    let requests: Vec<ExportTraceServiceRequest> = (0..300).map(|n| chain(0xb1, n, true)).collect();
    in_waves(&serving, &requests);
    let forward = forward_when(serving.api, Duration::from_secs(60), settled);
    let n = |k: &str| forward["spans"][k].as_u64().unwrap();
    assert!(n("dropped") > 0 && n("failed") > 0, "{forward:#}");
    assert_eq!(n("sent"), 0, "{forward:#}");
    let dropped = &forward["dropped"];
    assert!(dropped["queue"].as_u64().unwrap() > 0, "{forward:#}");
    assert_eq!(
        ["buffer", "queue", "stopped"]
            .map(|k| dropped[k].as_u64().unwrap())
            .iter()
            .sum::<u64>(),
        n("dropped"),
        "{forward:#}"
    );
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let spans = &report["forward"]["spans"];
    let get = |k: &str| spans[k].as_u64().unwrap();
    assert_eq!(get("kept"), 300 * spans_of(&requests[0]), "{spans}");
    assert_eq!(
        get("sent") + get("dropped") + get("failed"),
        get("kept"),
        "{spans}"
    );
    assert!(stderr.contains("forwarded 300 chain(s)"), "{stderr}");
}

/// A backend of our own on `addr`: answers each export with `answer(n)` (n counts from 0),
/// counting the requests.
fn fake_backend(
    answer: impl Fn(u64) -> (u16, Option<&'static str>) + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU64>, tokio::runtime::Runtime) {
    // Its own worker: the server runs while the test blocks on other runtimes.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    let answer = Arc::new(answer);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let (status, retry_after) = answer(n);
            assert!(!body.is_empty());
            async move {
                let mut response = axum::http::Response::builder().status(status);
                if let Some(after) = retry_after {
                    response = response.header("retry-after", after);
                }
                response
                    .header("content-type", "application/x-protobuf")
                    .body(axum::body::Body::empty())
                    .unwrap()
            }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    (addr, requests, runtime)
}

#[test]
fn a_4xx_is_never_retried_and_a_503_is_after_its_retry_after() {
    let (refusing, refused, _a) = fake_backend(|_| (400, None));
    let (busy, asked, _b) = fake_backend(|n| if n < 2 { (503, Some("1")) } else { (200, None) });
    for (backend, requests, expect_sent) in [(refusing, &refused, false), (busy, &asked, true)] {
        let serving = serve(&[
            "--settle",
            "200ms",
            "--forward",
            &format!("http://{backend}/v1/traces"),
            "--forward-sample",
            "0",
        ]);
        let chains: Vec<ExportTraceServiceRequest> = (0..5).map(|n| chain(0xc1, n, true)).collect();
        for request in &chains {
            post(serving.http, request);
        }
        let forward = forward_when(serving.api, Duration::from_secs(60), |f| {
            settled(f) && f["chains"]["finding"] == 5
        });
        let kept = 5 * spans_of(&chains[0]);
        let batches = forward["requests"]["sent"].as_u64().unwrap()
            + forward["requests"]["failed"].as_u64().unwrap();
        if expect_sent {
            assert_eq!(forward["spans"]["sent"], kept, "{forward:#}");
            assert!(
                forward["spans"]["retried"].as_u64().unwrap() > 0,
                "{forward:#}"
            );
            // Every batch sent once, and each refusal retried once more.
            assert_eq!(requests.load(Ordering::SeqCst), batches + 2, "{forward:#}");
        } else {
            assert_eq!(forward["spans"]["failed"], kept, "{forward:#}");
            assert_eq!(forward["spans"]["retried"], 0, "{forward:#}");
            assert_eq!(requests.load(Ordering::SeqCst), batches, "{forward:#}");
            let error = forward["last_error"].as_str().unwrap();
            assert!(
                error.contains("400") && error.contains("not retried"),
                "{error}"
            );
        }
        let (code, _) = serving.terminate(Duration::from_secs(60));
        assert_eq!(code, Some(0));
    }
}

#[test]
fn tls_and_mtls_reach_jaeger_over_grpc_and_http() {
    let Some(bin) = jaeger_or_skip("forward: tls_and_mtls_reach_jaeger") else {
        return;
    };
    let dir = scratch("forward/tls");
    let authority = crate::tls::ca();
    let (server_cert, server_key) = crate::tls::issue(&authority, &["localhost"], false);
    let (client_cert, client_key) = crate::tls::issue(&authority, &["budget-top"], false);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca = write("ca.pem", &authority.pem());
    let (cert, key) = (
        write("server.pem", &server_cert),
        write("server.key", &server_key),
    );
    let (ccert, ckey) = (
        write("client.pem", &client_cert),
        write("client.key", &client_key),
    );
    let tls = JaegerTls {
        cert: &cert,
        key: &key,
        client_ca: Some(&ca),
    };
    let jaeger = Jaeger::start_on(&bin, Ports::free(), Some(&tls));
    let endpoints = [
        format!("grpcs://localhost:{}", jaeger.otlp_grpc.port()),
        format!("https://localhost:{}/v1/traces", jaeger.otlp_http.port()),
    ];
    for (i, url) in endpoints.iter().enumerate() {
        let serving = serve(&[
            "--settle",
            "200ms",
            "--forward",
            url,
            "--forward-sample",
            "0",
            "--forward-ca",
            ca.to_str().unwrap(),
            "--forward-cert",
            ccert.to_str().unwrap(),
            "--forward-key",
            ckey.to_str().unwrap(),
        ]);
        let request = chain(0xd1, i as u32, true);
        post(serving.http, &request);
        let forward = forward_when(serving.api, Duration::from_secs(30), settled);
        assert_eq!(
            forward["spans"]["sent"],
            spans_of(&request),
            "{url}: {forward:#}"
        );
        let trace = hex(&request.resource_spans[0].scope_spans[0].spans[0].trace_id);
        let deadline = Instant::now() + Duration::from_secs(30);
        while jaeger_trace(&jaeger, &trace).len() < spans_of(&request) as usize {
            assert!(
                Instant::now() < deadline,
                "{url}: {trace} never reached Jaeger"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        serving.terminate(Duration::from_secs(30));
    }
    // Without the client certificate, Jaeger refuses the handshake: nothing is sent.
    let serving = serve(&[
        "--settle",
        "200ms",
        "--forward",
        &endpoints[0],
        "--forward-sample",
        "0",
        "--forward-ca",
        ca.to_str().unwrap(),
        "--forward-retry-for",
        "2s",
    ]);
    post(serving.http, &chain(0xd1, 9, true));
    let forward = forward_when(serving.api, Duration::from_secs(30), settled);
    assert_eq!(forward["spans"]["sent"], 0, "{forward:#}");
    assert!(
        forward["spans"]["failed"].as_u64().unwrap() > 0,
        "{forward:#}"
    );
    serving.terminate(Duration::from_secs(30));
    jaeger.stop();
}

#[test]
fn the_token_reaches_a_backend_that_checks_it_and_a_wrong_one_is_not_retried() {
    let dir = scratch("forward/token");
    let authority = crate::tls::ca();
    let (server_cert, server_key) = crate::tls::issue(&authority, &["localhost"], false);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let ca = write("ca.pem", &authority.pem());
    let (cert, key) = (
        write("server.pem", &server_cert),
        write("server.key", &server_key),
    );
    let token = write("token", "s3cret-token\n");
    let wrong = write("wrong", "not-the-token\n");
    let backend_report = dir.join("backend.json");
    // The backend: a budget-top whose receivers want TLS and the token (§7).
    let backend = serve(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--bearer-token-file",
        &token,
        "--settle",
        "200ms",
        "--report",
        backend_report.to_str().unwrap(),
    ]);
    for (file, accepted) in [(&token, true), (&wrong, false)] {
        let front = serve(&[
            "--settle",
            "200ms",
            "--forward",
            &format!("grpcs://localhost:{}", backend.grpc.port()),
            "--forward-ca",
            &ca,
            "--forward-token-file",
            file,
            "--forward-sample",
            "0",
        ]);
        let request = chain(0xe1, u32::from(accepted), true);
        post(front.http, &request);
        let forward = forward_when(front.api, Duration::from_secs(30), settled);
        if accepted {
            assert_eq!(forward["spans"]["sent"], spans_of(&request), "{forward:#}");
        } else {
            assert_eq!(
                forward["spans"]["failed"],
                spans_of(&request),
                "{forward:#}"
            );
            assert_eq!(forward["spans"]["retried"], 0, "{forward:#}");
            let error = forward["last_error"].as_str().unwrap();
            assert!(error.contains("Unauthenticated"), "{error}");
        }
        front.terminate(Duration::from_secs(30));
    }
    let (code, _) = backend.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0));
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(&backend_report).unwrap()).unwrap();
    let ingest = &report["ingest"];
    assert_eq!(
        ingest["spans_accepted"],
        spans_of(&chain(0xe1, 1, true)),
        "{ingest:#}"
    );
    assert_eq!(ingest["requests_unauthenticated"], 1, "{ingest:#}");
}

#[test]
fn sigterm_with_a_full_queue_stops_within_the_drain_and_says_what_was_left() {
    // A backend that takes connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap();
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
            if held.len() > 64 {
                break;
            }
        }
    });
    let dir = scratch("forward/sigterm");
    let report_path = dir.join("report.json");
    let serving = serve(&[
        "--settle",
        "200ms",
        "--forward",
        &format!("grpc://{silent}"),
        "--forward-sample",
        "0",
        "--forward-timeout",
        "60s",
        "--forward-buffer",
        "200000",
        "--report",
        report_path.to_str().unwrap(),
    ]);
    let requests: Vec<ExportTraceServiceRequest> = (0..300).map(|n| chain(0xf1, n, true)).collect();
    in_waves(&serving, &requests);
    let waiting = forward_when(serving.api, Duration::from_secs(30), |f| {
        f["dropped"]["queue"].as_u64().unwrap() > 0
    });
    assert!(
        waiting["spans"]["queued"].as_u64().unwrap() > 0,
        "{waiting:#}"
    );
    let stopping = Instant::now();
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    let took = stopping.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    // The drain's 10 s, and the judging and writing beside it.
    assert!(took < Duration::from_secs(25), "stopped in {took:?}");
    let report: Json =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let forward = &report["forward"];
    let get = |k: &str| forward["spans"][k].as_u64().unwrap();
    assert!(
        forward["dropped"]["stopped"].as_u64().unwrap() > 0,
        "{forward:#}"
    );
    assert_eq!(get("queued"), 0, "{forward:#}");
    assert_eq!(
        get("sent") + get("dropped") + get("failed"),
        get("kept"),
        "{forward:#}"
    );
    assert!(stderr.contains("left when serve stopped"), "{stderr}");
    drop(holder);
}

#[test]
fn two_instances_keep_the_same_clean_chains() {
    let Some(bin) = jaeger_or_skip("forward: two_instances_keep_the_same_clean_chains") else {
        return;
    };
    let share = 0.3;
    let requests: Vec<ExportTraceServiceRequest> =
        (0..200).map(|n| chain(0x42, n * 7919, false)).collect();
    let mut kept_by: Vec<BTreeSet<String>> = Vec::new();
    for _instance in 0..2 {
        let jaeger = Jaeger::start(&bin);
        let serving = serve(&[
            "--settle",
            "300ms",
            "--forward",
            &format!("grpc://{}", jaeger.otlp_grpc),
            "--forward-sample",
            &share.to_string(),
        ]);
        send(&serving, &requests);
        let forward = forward_when(serving.api, Duration::from_secs(30), |f| {
            settled(f) && report(serving.api)["summary"]["traces"] == 200
        });
        assert_eq!(forward["chains"]["finding"], 0, "{forward:#}");
        let mut kept = BTreeSet::new();
        for request in &requests {
            let trace = hex(&request.resource_spans[0].scope_spans[0].spans[0].trace_id);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let stored = jaeger_trace(&jaeger, &trace).len();
                if stored == spans_of(request) as usize {
                    kept.insert(trace);
                    break;
                }
                if !hash_keeps(&trace, share) {
                    assert_eq!(stored, 0, "{trace}");
                    break;
                }
                assert!(Instant::now() < deadline, "{trace} never reached Jaeger");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        assert_eq!(forward["chains"]["sample"], kept.len(), "{forward:#}");
        kept_by.push(kept);
        serving.terminate(Duration::from_secs(30));
        jaeger.stop();
    }
    assert_eq!(kept_by[0], kept_by[1]);
    let n = requests.len() as f64;
    let sd = (n * share * (1.0 - share)).sqrt();
    assert!(
        (kept_by[0].len() as f64 - n * share).abs() <= 4.0 * sd,
        "{}",
        kept_by[0].len()
    );
}

#[test]
fn a_late_span_of_a_forwarded_chain_joins_its_trace_in_jaeger() {
    let Some(bin) = jaeger_or_skip("forward: a_late_span_of_a_forwarded_chain") else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let serving = serve(&[
        "--settle",
        "300ms",
        "--forward",
        &format!("http://{}/v1/traces", jaeger.otlp_http),
        "--forward-sample",
        "0",
    ]);
    let whole = chain(0x77, 1, true);
    // Everything but inventory's span now; inventory's once the chain was forwarded.
    let mut early = whole.clone();
    let late_resource = early.resource_spans.pop().unwrap();
    let late = ExportTraceServiceRequest {
        resource_spans: vec![late_resource],
    };
    post(serving.http, &early);
    forward_when(serving.api, Duration::from_secs(30), |f| {
        settled(f) && f["chains"]["finding"] == 1
    });
    post(serving.http, &late);
    let forward = forward_when(serving.api, Duration::from_secs(30), |f| {
        settled(f) && f["late_spans"] == 1
    });
    assert_eq!(forward["spans"]["sent"], spans_of(&whole), "{forward:#}");
    let trace = hex(&whole.resource_spans[0].scope_spans[0].spans[0].trace_id);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = jaeger_trace(&jaeger, &trace);
        if stored.len() == spans_of(&whole) as usize {
            let expected = by_trace(std::slice::from_ref(&whole))
                .remove(&trace)
                .unwrap();
            for (id, held) in &stored {
                assert_eq!(as_sent(held), normal(&expected[id]), "{id}");
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the late span never joined: {stored:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    serving.terminate(Duration::from_secs(30));
    jaeger.stop();
}

#[test]
fn bad_forward_flags_are_refused_at_start_and_an_unreachable_backend_is_not() {
    let dir = scratch("forward/refusals");
    let empty = dir.join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let missing = dir.join("missing");
    let (garbage, missing, empty) = (
        garbage.to_str().unwrap(),
        missing.to_str().unwrap(),
        empty.to_str().unwrap(),
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--forward", "ftp://x:1"], "unknown scheme"),
        (vec!["--forward", "grpc://backend"], "needs its port"),
        (
            vec!["--forward", "http://x:4318/v1/traces?x=1"],
            "no user, query",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-sample", "2"],
            "a share from 0 to 1",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-sample", "0.00001"],
            "at least 1/16384",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-on", "fatal"],
            "invalid value",
        ),
        (vec!["--forward-sample", "0.5"], "--forward <URL>"),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-ca", missing],
            "(--forward-ca)",
        ),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-ca", garbage],
            "(--forward-ca)",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-ca", garbage],
            "is plain",
        ),
        (
            vec!["--forward", "grpcs://x:4317", "--forward-cert", garbage],
            "--forward-key",
        ),
        (
            vec![
                "--forward",
                "grpcs://x:4317",
                "--forward-cert",
                garbage,
                "--forward-key",
                garbage,
            ],
            "(--forward-cert)",
        ),
        (
            vec![
                "--forward",
                "grpc://x:4317",
                "--forward-token-file",
                missing,
            ],
            "cannot read the bearer token file",
        ),
        (
            vec!["--forward", "grpc://x:4317", "--forward-token-file", empty],
            "is empty (--forward-token-file)",
        ),
    ];
    for (args, sentence) in cases {
        let out = run(&[
            &[
                "serve",
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--api",
                "127.0.0.1:0",
            ][..],
            &args,
        ]
        .concat());
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(sentence),
            "{args:?} says {sentence:?}: {}",
            out.stderr
        );
    }
    // Nobody listens there: serve starts all the same, and says where it forwards.
    let nowhere = crate::otelcol_tier1::free_port();
    let serving = serve(&["--forward", &format!("grpc://{nowhere}")]);
    let said = serving.stderr_until("forwarding to", Duration::from_secs(10));
    assert!(
        said.contains(&format!("forwarding to grpc://{nowhere} (plain, no token)")),
        "{said}"
    );
    let (code, _) = serving.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0));
}
