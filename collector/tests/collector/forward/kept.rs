//! What Jaeger holds: every broken chain and the hashed share of the clean ones, whole and as
//! sent, the same share on two instances, and a late span joining its forwarded trace.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use budget_demo::{LoadPlan, Scenario};
use budget_top::ingest::decode::count_spans;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;

use super::{
    Held, by_trace, chain, forward_to, forward_when, jaeger_trace, post, report, settled, trace_of,
};
use crate::jaeger::{Jaeger, jaeger_or_skip};
use crate::support::demo::record_demo;
use crate::support::{Serving, run, runtime, scratch};

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
fn demo_requests(dir: &Path) -> Vec<ExportTraceServiceRequest> {
    let path = dir.join("demo.jsonl");
    let load = |requests| LoadPlan {
        rate: 10.0,
        requests: Some(requests),
        ..LoadPlan::default()
    };
    let runs = [
        (Scenario::FixedTimeout, load(12)),
        (Scenario::Propagate, load(40)),
    ];
    record_demo(&path, 0.25, &runs);
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
    let requests = demo_requests(&dir);
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
    let url = format!("grpc://{}", jaeger.otlp_grpc);
    let serving = forward_to(&url, "1s", &share.to_string(), &[]);
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
        let url = format!("grpc://{}", jaeger.otlp_grpc);
        let serving = forward_to(&url, "300ms", &share.to_string(), &[]);
        send(&serving, &requests);
        let forward = forward_when(serving.api, Duration::from_secs(30), |f| {
            settled(f) && report(serving.api)["summary"]["traces"] == 200
        });
        assert_eq!(forward["chains"]["finding"], 0, "{forward:#}");
        let mut kept = BTreeSet::new();
        for request in &requests {
            let trace = trace_of(request);
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let stored = jaeger_trace(&jaeger, &trace).len();
                if stored == count_spans(request) as usize {
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
    let url = format!("http://{}/v1/traces", jaeger.otlp_http);
    let serving = forward_to(&url, "300ms", "0", &[]);
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
    assert_eq!(forward["spans"]["sent"], count_spans(&whole), "{forward:#}");
    let trace = trace_of(&whole);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = jaeger_trace(&jaeger, &trace);
        if stored.len() == count_spans(&whole) as usize {
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
