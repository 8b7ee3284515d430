//! `budget-top serve` (CONVENTIONS §7), the real binary on real sockets: OTLP sent to its
//! receivers, its API read over HTTP. The metrics say what `/api/report` says; the scraper's
//! `Accept` picks OpenMetrics; the token guards everything but the probes; `/api/chains` gives
//! chains `check --input` reads again and refuses what it cannot answer; label sets past
//! `--max-series` go to `other`, counted, and 100,000 service names keep them and the memory
//! bounded; a scraper at 100/s is served without costing ingest a span; SIGTERM during a flood
//! loses no accepted span, and a second signal exits 130 at once without the report;
//! a bad file or flag is refused at start. And a real Prometheus (Debian's `prometheus`,
//! installed by `.ci/tools` when missing) scrapes it and finds the same counts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::Value as Json;

use crate::support::{assert_serve_refuses, reset_chain, run, runtime, scratch, serve};

/// An answer: status, content type, body.
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

pub async fn get(url: &str, token: Option<&str>, accept: Option<&str>) -> Answer {
    let client = reqwest::Client::new();
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: response.text().await.unwrap(),
    }
}

pub async fn post(
    http: SocketAddr,
    request: &ExportTraceServiceRequest,
    token: Option<&str>,
) -> u16 {
    let mut post = reqwest::Client::new()
        .post(format!("http://{http}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(request.encode_to_vec());
    if let Some(token) = token {
        post = post.header("authorization", format!("Bearer {token}"));
    }
    post.send().await.unwrap().status().as_u16()
}

/// The reset chain (one `budget_reset` at orders) with trace `n` and `frontend` named
/// `caller`.
pub fn chain(n: u32, caller: &str) -> ExportTraceServiceRequest {
    let mut request = reset_chain(1);
    let mut trace = [7u8; 16];
    trace[12..].copy_from_slice(&n.to_be_bytes());
    for resource in &mut request.resource_spans {
        for scope in &mut resource.scope_spans {
            for span in &mut scope.spans {
                span.trace_id = trace.to_vec();
            }
        }
        let service = &mut resource.resource.as_mut().unwrap().attributes[0];
        if format!("{:?}", service.value).contains("\"frontend\"") {
            *service = crate::support::string("service.name", caller);
        }
    }
    request
}

/// `/api/report` once it has judged `traces` chains (at most 60 s).
pub async fn report_of(api: SocketAddr, traces: u64, token: Option<&str>) -> Json {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = get(&format!("http://{api}/api/report"), token, None).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let report: Json = serde_json::from_str(&answer.body).unwrap();
        if report["summary"]["traces"] == traces {
            return report;
        }
        assert!(
            Instant::now() < deadline,
            "{traces} chains never judged: {report}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `/metrics` (the text format) once it counts `chains` chains judged (at most 60 s): the
/// loop publishes the totals on its timer and they are encoded after, so a scrape right after
/// `/api/report` counts them may still show the publish before.
async fn metrics_of(api: SocketAddr, chains: u64) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = get(&format!("http://{api}/metrics"), None, None).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        if sum(&samples(&answer.body), "budget_top_chains_total") == chains as f64 {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{chains} chains never in /metrics: {}",
            answer.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `name{labels}` → value, from the text exposition.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').unwrap();
            (key.to_owned(), value.parse().unwrap())
        })
        .collect()
}

/// The sum of every sample of `name` (a family's own samples, not its histogram's parts).
fn sum(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn metrics_say_what_the_report_says_and_the_api_answers_every_query() {
    let serving = serve(&["--settle", "100ms"]);
    let dir = scratch("serve_metrics");
    let (http, api) = (serving.http, serving.api);
    runtime().block_on(async {
        // The probes before anything arrives: up, and ready (the receivers are bound).
        assert_eq!(get(&format!("http://{api}/healthz"), None, None).await.status, 200);
        assert_eq!(get(&format!("http://{api}/readyz"), None, None).await.status, 200);
        for n in 0..12 {
            assert_eq!(post(http, &chain(n, "frontend"), None).await, 200);
        }
        // A malformed request: rejected, counted.
        let bad = reqwest::Client::new()
            .post(format!("http://{http}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(vec![0xff, 0xff, 0xff])
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        let report = report_of(api, 12, None).await;

        let text = metrics_of(api, 12).await;
        assert!(
            text.content_type.starts_with("text/plain; version=0.0.4"),
            "{}",
            text.content_type
        );
        assert!(!text.body.contains("# EOF"), "{}", text.body);
        let m = samples(&text.body);
        let ingest = &report["ingest"];
        let summary = &report["summary"];
        let at = |key: &str| m.get(key).copied().unwrap_or_else(|| panic!("no {key} in {m:?}"));
        assert_eq!(at("budget_top_spans_total{result=\"accepted\"}"), 60.0);
        assert_eq!(
            at("budget_top_spans_total{result=\"accepted\"}"),
            ingest["spans_accepted"].as_f64().unwrap()
        );
        assert_eq!(at("budget_top_requests_total{result=\"accepted\"}"), 12.0);
        assert_eq!(
            at("budget_top_requests_total{result=\"rejected\"}"),
            ingest["requests_rejected"].as_f64().unwrap()
        );
        assert_eq!(at("budget_top_requests_total{result=\"rejected\"}"), 1.0);
        assert_eq!(sum(&m, "budget_top_chains_total"), 12.0);
        assert_eq!(
            at("budget_top_chains_total{outcome=\"ok\"}"),
            summary["outcomes"]["ok"].as_f64().unwrap()
        );
        assert_eq!(
            at("budget_top_findings_total{kind=\"budget_reset\",severity=\"error\",service=\"orders\"}"),
            12.0
        );
        let findings = &summary["findings"];
        let listed = ["error", "warning", "info"]
            .iter()
            .map(|s| findings[s].as_f64().unwrap())
            .sum::<f64>();
        assert_eq!(sum(&m, "budget_top_findings_total"), listed);
        assert_eq!(
            at("budget_top_hops_total{budget=\"known\"}"),
            summary["coverage"]["hops_with_budget"].as_f64().unwrap()
        );
        assert_eq!(
            at("budget_top_hops_total{budget=\"unknown\"}"),
            summary["coverage"]["hops_without_budget"].as_f64().unwrap()
        );
        for edge in report["edges"].as_array().unwrap() {
            let labels = format!(
                "{{caller=\"{}\",callee=\"{}\"}}",
                edge["caller"].as_str().unwrap(),
                edge["callee"].as_str().unwrap()
            );
            let calls = edge["calls"].as_f64().unwrap();
            assert_eq!(at(&format!("budget_top_edge_calls_total{labels}")), calls);
            assert_eq!(
                at(&format!("budget_top_wasted_seconds_total{labels}")),
                edge["wasted_ms"].as_f64().unwrap() / 1000.0
            );
            assert_eq!(
                at(&format!("budget_top_edge_latency_seconds_count{labels}")),
                calls
            );
            let inf = format!(
                "budget_top_edge_latency_seconds_bucket{{caller=\"{}\",callee=\"{}\",le=\"+Inf\"}}",
                edge["caller"].as_str().unwrap(),
                edge["callee"].as_str().unwrap()
            );
            assert_eq!(at(&inf), calls);
            if let Some(timeout) = edge["timeout_ms"].as_f64() {
                let labels = format!(
                    "{{caller=\"{}\",callee=\"{}\",inferred=\"{}\"}}",
                    edge["caller"].as_str().unwrap(),
                    edge["callee"].as_str().unwrap(),
                    edge["timeout_inferred"]
                );
                assert_eq!(
                    at(&format!("budget_top_edge_timeout_seconds{labels}")),
                    timeout / 1000.0
                );
            }
        }
        // orders -> inventory: its calls took 60 ms each, in the 0.1 s bucket and not the 0.05.
        assert_eq!(
            at("budget_top_edge_latency_seconds_bucket{caller=\"orders\",callee=\"inventory\",le=\"0.05\"}"),
            0.0
        );
        assert_eq!(
            at("budget_top_edge_latency_seconds_bucket{caller=\"orders\",callee=\"inventory\",le=\"0.1\"}"),
            12.0
        );

        // OpenMetrics when the scraper asks for it, as Prometheus does.
        let open = get(
            &format!("http://{api}/metrics"),
            None,
            Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        )
        .await;
        assert!(
            open.content_type.starts_with("application/openmetrics-text"),
            "{}",
            open.content_type
        );
        assert!(open.body.ends_with("# EOF\n"), "{}", open.body);
        assert!(
            open.body
                .contains("budget_top_spans_total{result=\"accepted\"} 60\n"),
            "{}",
            open.body
        );

        // The chains of a finding, as lines `check --input` reads and judges alike.
        let chains = get(
            &format!("http://{api}/api/chains?kind=budget_reset&limit=3"),
            None,
            None,
        )
        .await;
        assert_eq!(chains.status, 200, "{}", chains.body);
        assert_eq!(chains.body.lines().count(), 3, "{}", chains.body);
        let file = dir.join("chains.jsonl");
        std::fs::write(&file, &chains.body).unwrap();
        let check = run(&["check", "--input", file.to_str().unwrap(), "--format", "json"]);
        assert_eq!(check.code, Some(1), "{check:?}");
        let again = check.json();
        assert_eq!(again["summary"]["traces"], 3);
        assert_eq!(again["summary"]["findings_by_kind"]["budget_reset"], 3, "{again}");
        let any = get(&format!("http://{api}/api/chains"), None, None).await;
        assert_eq!(any.body.lines().count(), 12);
        let none = get(&format!("http://{api}/api/chains?kind=late_answer"), None, None).await;
        assert_eq!((none.status, none.body.as_str()), (200, ""));
        for bad in [
            "kind=nope",
            "limit=0",
            "limit=10001",
            "limit=ten",
            "kind=budget_reset&limit=-1",
        ] {
            let answer = get(&format!("http://{api}/api/chains?{bad}"), None, None).await;
            assert_eq!(answer.status, 400, "{bad}: {}", answer.body);
        }
        let answer = get(&format!("http://{api}/api/chains?limit=10000"), None, None).await;
        assert_eq!(answer.status, 200);
        // Anything else: 404 or 405, never a 5xx.
        assert_eq!(get(&format!("http://{api}/nope"), None, None).await.status, 404);
        assert_eq!(get(&format!("http://{api}/api"), None, None).await.status, 404);
        let posted = reqwest::Client::new()
            .post(format!("http://{api}/metrics"))
            .send()
            .await
            .unwrap();
        assert_eq!(posted.status(), 405);
    });
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn the_token_guards_the_api_and_the_receivers_but_not_the_probes() {
    let dir = scratch("serve_token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let serving = serve(&["--bearer-token-file", token_file.to_str().unwrap()]);
    let (http, api) = (serving.http, serving.api);
    runtime().block_on(async {
        for probe in ["healthz", "readyz"] {
            let answer = get(&format!("http://{api}/{probe}"), None, None).await;
            assert_eq!(answer.status, 200, "{probe}: {}", answer.body);
        }
        for path in ["metrics", "api/report", "api/chains"] {
            let url = format!("http://{api}/{path}");
            assert_eq!(get(&url, None, None).await.status, 401, "{path}");
            assert_eq!(get(&url, Some("wrong"), None).await.status, 401, "{path}");
            assert_eq!(get(&url, Some("s3cret"), None).await.status, 200, "{path}");
        }
        // The scheme in any case.
        let lower = reqwest::Client::new()
            .get(format!("http://{api}/metrics"))
            .header("authorization", "bearer s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(lower.status(), 200);
        assert_eq!(post(http, &chain(1, "frontend"), None).await, 401);
        assert_eq!(post(http, &chain(1, "frontend"), Some("s3cret")).await, 200);
        let m = samples(
            &get(&format!("http://{api}/metrics"), Some("s3cret"), None)
                .await
                .body,
        );
        assert_eq!(
            m["budget_top_requests_total{result=\"unauthenticated\"}"],
            1.0
        );
        assert_eq!(m["budget_top_requests_total{result=\"accepted\"}"], 1.0);
    });
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn label_sets_past_max_series_go_to_other_and_are_counted() {
    let serving = serve(&["--settle", "100ms", "--max-series", "10"]);
    let (http, api) = (serving.http, serving.api);
    runtime().block_on(async {
        for n in 0..50 {
            let caller = format!("frontend-{n:02}");
            assert_eq!(post(http, &chain(n, &caller), None).await, 200);
        }
        report_of(api, 50, None).await;
        let m = samples(&metrics_of(api, 50).await.body);
        let calls: Vec<(&String, &f64)> = m
            .iter()
            .filter(|(k, _)| k.starts_with("budget_top_edge_calls_total{"))
            .collect();
        // frontend-NN -> orders: 10 of their own and `other`; orders -> inventory is one of the
        // ten first seen or in `other`, so every call is still counted.
        assert_eq!(calls.len(), 11, "{calls:?}");
        assert_eq!(sum(&m, "budget_top_edge_calls_total"), 100.0);
        let other = m["budget_top_edge_calls_total{caller=\"other\",callee=\"other\"}"];
        assert!(other >= 40.0, "{other}");
        assert_eq!(
            m["budget_top_series_overflow_total{family=\"budget_top_edge_calls_total\"}"],
            41.0
        );
        let buckets = m
            .keys()
            .filter(|k| k.starts_with("budget_top_edge_latency_seconds_count{"))
            .count();
        assert_eq!(buckets, 11, "a histogram's buckets count as one set");
    });
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sigterm_during_a_flood_keeps_every_accepted_span_in_the_report() {
    let dir = scratch("serve_flood");
    let report = dir.join("report.json");
    let serving = serve(&["--report", report.to_str().unwrap()]);
    let http = serving.http;
    let acknowledged = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Four senders, each at most 2,000 requests of 5 spans or 60 s, until refused.
    let senders: Vec<_> = (0..4u32)
        .map(|sender| {
            let acknowledged = acknowledged.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                runtime().block_on(async move {
                    let client = reqwest::Client::new();
                    let started = Instant::now();
                    for i in 0..2000u32 {
                        if stop.load(Ordering::Relaxed)
                            || started.elapsed() > Duration::from_secs(60)
                        {
                            break;
                        }
                        let body = chain(sender * 100_000 + i, "frontend").encode_to_vec();
                        let sent = client
                            .post(format!("http://{http}/v1/traces"))
                            .header("content-type", "application/x-protobuf")
                            .body(body)
                            .send()
                            .await;
                        match sent {
                            Ok(r) if r.status() == 200 => {
                                acknowledged.fetch_add(5, Ordering::Relaxed);
                            }
                            Ok(_) => {}
                            // The receivers are closed: the flood is over.
                            Err(_) => break,
                        }
                    }
                });
            })
        })
        .collect();
    // SIGTERM once the flood is under way.
    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged.load(Ordering::Relaxed) < 500 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, stderr) = serving.terminate(Duration::from_secs(120));
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.join().unwrap();
    }
    assert_eq!(code, Some(0), "{stderr}");
    let written: Json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let accepted = written["ingest"]["spans_accepted"].as_u64().unwrap();
    let acknowledged = acknowledged.load(Ordering::Relaxed);
    assert!(acknowledged >= 500, "{acknowledged}");
    // Every span a sender was told was accepted is in the report, and nothing else.
    assert!(accepted >= acknowledged, "{accepted} < {acknowledged}");
    assert_eq!(
        written["summary"]["spans"].as_u64().unwrap(),
        accepted,
        "{stderr}"
    );
    assert_eq!(written["summary"]["traces"].as_u64().unwrap(), accepted / 5);
    assert!(stderr.contains("wrote the report of"), "{stderr}");
}

#[test]
fn a_scraper_at_100_per_second_is_served_and_ingest_loses_nothing() {
    let dir = scratch("serve_scraper");
    let report = dir.join("report.json");
    let serving = serve(&["--settle", "100ms", "--report", report.to_str().unwrap()]);
    let (http, api) = (serving.http, serving.api);
    // The scraper: every 10 ms for 2 s (at most 200 scrapes), counting what was not a 200.
    let scraper = std::thread::spawn(move || {
        runtime().block_on(async move {
            let (mut scrapes, mut failed) = (0u32, Vec::new());
            let started = Instant::now();
            while scrapes < 200 && started.elapsed() < Duration::from_secs(2) {
                let answer = get(&format!("http://{api}/metrics"), None, None).await;
                scrapes += 1;
                if answer.status != 200 {
                    failed.push(answer.status);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (scrapes, failed)
        })
    });
    // Meanwhile 200 chains, one request each: one sender at a time is never refused for load
    // without the scraper, so none may be with it.
    const CHAINS: u32 = 200;
    runtime().block_on(async {
        for n in 0..CHAINS {
            assert_eq!(
                post(http, &chain(n, "frontend"), None).await,
                200,
                "chain {n}"
            );
        }
        report_of(api, u64::from(CHAINS), None).await;
    });
    let (scrapes, failed) = scraper.join().unwrap();
    assert!(scrapes > 0);
    assert!(
        failed.is_empty(),
        "{} of {scrapes} scrapes failed: {failed:?}",
        failed.len()
    );
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    let written: Json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let spans = u64::from(CHAINS) * 5;
    assert_eq!(written["ingest"]["spans_accepted"], spans, "{written}");
    assert_eq!(written["ingest"]["spans_refused"], 0, "{written}");
    assert_eq!(written["ingest"]["requests_refused"], 0, "{written}");
    assert_eq!(written["summary"]["spans"], spans);
    assert_eq!(written["summary"]["traces"], u64::from(CHAINS));
}

/// `VmHWM` (peak resident set) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_hundred_thousand_service_names_keep_the_series_and_the_memory_bounded() {
    const CHAINS: u32 = 50_000;
    const PER_REQUEST: u32 = 500;
    const MAX_SERIES: usize = 1000;
    const MAX_SPANS: u64 = 300_000;
    let dir = scratch("serve_many_services");
    let report = dir.join("report.json");
    let serving = serve(&[
        "--settle",
        "100ms",
        "--max-series",
        &MAX_SERIES.to_string(),
        "--max-spans",
        &MAX_SPANS.to_string(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let (http, api) = (serving.http, serving.api);
    let m = runtime().block_on(async {
        // 50,000 chains whose frontend and orders are named after the chain: 100,000 names.
        for first in (0..CHAINS).step_by(PER_REQUEST as usize) {
            let mut request = ExportTraceServiceRequest::default();
            for n in first..first + PER_REQUEST {
                let mut one = chain(n, &format!("frontend-{n}"));
                for resource in &mut one.resource_spans {
                    let service = &mut resource.resource.as_mut().unwrap().attributes[0];
                    if format!("{:?}", service.value).contains("\"orders\"") {
                        *service = crate::support::string("service.name", &format!("orders-{n}"));
                    }
                }
                request.resource_spans.extend(one.resource_spans);
            }
            // A request refused for load (the store behind) is sent again, at most 200 times.
            let mut tries = 0;
            while post(http, &request, None).await != 200 {
                tries += 1;
                assert!(tries < 200, "chains from {first} never accepted");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let m = samples(&get(&format!("http://{api}/metrics"), None, None).await.body);
            if sum(&m, "budget_top_chains_total") == f64::from(CHAINS) {
                return m;
            }
            assert!(Instant::now() < deadline, "never judged: {m:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    // Every family: at most --max-series label sets of its own, and `other`.
    let mut sets: BTreeMap<&str, std::collections::BTreeSet<String>> = BTreeMap::new();
    for key in m.keys() {
        let (name, labels) = key.split_once('{').unwrap_or((key, ""));
        let family = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_count")
            .trim_end_matches("_sum");
        let labels: Vec<&str> = labels
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.starts_with("le="))
            .collect();
        sets.entry(family).or_default().insert(labels.join(","));
    }
    for (family, labels) in &sets {
        assert!(
            labels.len() <= MAX_SERIES + 1,
            "{family}: {} label sets",
            labels.len()
        );
    }
    assert_eq!(sets["budget_top_edge_calls_total"].len(), MAX_SERIES + 1);
    // Two edges a chain (frontend-N -> orders-N, orders-N -> inventory): every call counted.
    assert_eq!(
        sum(&m, "budget_top_edge_calls_total"),
        f64::from(2 * CHAINS)
    );
    // The sets past the cap, counted: the totals hold at most MAX_TOTALS_KEYS edges (and
    // their own `other`), and each one past --max-series is one here.
    let overflow = m["budget_top_series_overflow_total{family=\"budget_top_edge_calls_total\"}"];
    let totals = deadline_budget::analysis::MAX_TOTALS_KEYS;
    assert_eq!(overflow, (totals + 1 - MAX_SERIES) as f64, "{overflow}");
    assert!(
        m.keys().any(|k| k.starts_with("budget_top_findings_total{") && k.contains("service=\"other\"")),
        "the findings of 50,000 services past the cap are in `other`"
    );
    // The peak resident set: 100 MiB for the program and its buffers, 2 KiB for each span
    // --max-spans lets the store hold (several times a span's cost in docs/performance.md,
    // "Memory: the store"), 1 KiB for each label set the 11 families may hold.
    let peak = peak_rss_kib(serving.pid());
    let bound = 100 * 1024 + 2 * MAX_SPANS + 11 * MAX_SERIES as u64;
    assert!(peak < bound, "peak RSS {peak} KiB, bound {bound} KiB");
    let (code, stderr) = serving.terminate(Duration::from_secs(120));
    assert_eq!(code, Some(0), "{stderr}");
    let written: Json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let spans = u64::from(CHAINS) * 5;
    assert_eq!(written["ingest"]["spans_accepted"], spans);
    assert_eq!(written["summary"]["spans"], spans);
    assert_eq!(written["summary"]["traces"], u64::from(CHAINS));
    eprintln!("peak RSS {peak} KiB (bound {bound} KiB)");
}

#[test]
fn a_second_signal_exits_at_once_with_130_and_no_report() {
    use std::io::Write as _;
    let dir = scratch("serve_second_signal");
    let report = dir.join("report.json");
    let mut serving = serve(&["--report", report.to_str().unwrap()]);
    // An API request that has sent half its head: the shutdown waits for it (up to the header
    // timeout, 10 s), which holds serve in "finishing the requests in progress".
    let mut half = std::net::TcpStream::connect(serving.api).unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\nHost: budget-top\r\n")
        .unwrap();
    // The request is read once it is accepted: a whole request after it on another connection
    // is answered only once serve runs, so the half one is in progress by then.
    runtime().block_on(async {
        assert_eq!(
            get(&format!("http://{}/healthz", serving.api), None, None)
                .await
                .status,
            200
        );
    });
    serving.signal();
    let said = serving.stderr_until(
        "finishing the requests in progress",
        Duration::from_secs(60),
    );
    assert!(
        serving.running(),
        "serve stopped before the half request was finished: {said}"
    );
    serving.signal();
    // 130 rather than 0: the drain did not end on its own (that writes the report and exits 0).
    let (code, stderr) = serving.terminate_wait(Duration::from_secs(60));
    assert_eq!(code, Some(130), "{said}{stderr}");
    assert!(stderr.contains("a second signal"), "{stderr}");
    assert!(!stderr.contains("wrote the report"), "{stderr}");
    assert!(!report.exists(), "a second signal writes no report");
    drop(half);
}

#[test]
fn bad_files_and_flags_are_refused_at_start() {
    let dir = scratch("serve_refusals");
    let empty = dir.join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let report_in_missing_dir = dir.join("no/such/dir/report.json");
    let missing_token = dir.join("missing");
    let cases: [(Vec<&str>, &str); 7] = [
        (
            vec!["--report", report_in_missing_dir.to_str().unwrap()],
            "cannot write",
        ),
        (vec!["--report", dir.to_str().unwrap()], "is a directory"),
        (
            vec!["--html", report_in_missing_dir.to_str().unwrap()],
            "(--html)",
        ),
        (
            vec!["--bearer-token-file", missing_token.to_str().unwrap()],
            "cannot read the bearer token file",
        ),
        (
            vec!["--bearer-token-file", empty.to_str().unwrap()],
            "is empty",
        ),
        (
            vec![
                "--tls-cert",
                garbage.to_str().unwrap(),
                "--tls-key",
                garbage.to_str().unwrap(),
            ],
            "(--tls-cert)",
        ),
        (vec!["--api", "0.0.0.0:0"], "pass --allow-remote"),
    ];
    for (args, sentence) in cases {
        assert_serve_refuses(&args, sentence);
    }
    let out = run(&["serve", "--max-series", "0"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("must be at least 1"), "{out:?}");
}

/// Prometheus's binary: on the PATH, else installed by the project's `.ci/tools`. `None`,
/// said loudly, only when it is absent and cannot be installed.
pub fn prometheus() -> Option<PathBuf> {
    let on_path = || {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join("prometheus"))
            .find(|p| p.is_file())
    };
    if let Some(found) = on_path() {
        return Some(found);
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools");
    eprintln!(
        "prometheus is missing: installing it with {}",
        tools.display()
    );
    let _ = Command::new(&tools)
        .arg("prometheus")
        .stdin(Stdio::null())
        .status();
    let found = on_path();
    if found.is_none() {
        eprintln!(
            "\n*** SKIPPED: prometheus is not installed and `.ci/tools prometheus` could not install it; a real Prometheus scraping serve is NOT tested ***\n"
        );
    }
    found
}

/// A Prometheus (`binary`, its files in `dir`) scraping `api` every second, with `flags`: the
/// process and its base URL.
pub fn start_prometheus(
    binary: &Path,
    dir: &Path,
    api: SocketAddr,
    flags: &[&str],
) -> (std::process::Child, String) {
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: budget-top\n    static_configs:\n      - targets: ['{api}']\n"
        ),
    )
    .unwrap();
    let prometheus = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    (prometheus, format!("http://127.0.0.1:{port}"))
}

/// A port nobody listens on now (Prometheus's --web.listen-address takes no port 0).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Prometheus's answer to an instant query: the single value, if any.
async fn query(prometheus: &str, promql: &str) -> Option<f64> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let response = reqwest::Client::new()
        .get(format!("{prometheus}/api/v1/query?query={encoded}"))
        .send()
        .await
        .ok()?;
    let body: Json = response.json().await.ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_the_counts_the_report_gives() {
    let Some(binary) = prometheus() else { return };
    let dir = scratch("serve_prometheus");
    let serving = serve(&["--settle", "100ms"]);
    let (http, api) = (serving.http, serving.api);
    let (mut prometheus, base) = start_prometheus(&binary, &dir, api, &[]);
    let outcome = runtime().block_on(async {
        for n in 0..20 {
            assert_eq!(post(http, &chain(n, "frontend"), None).await, 200);
        }
        let report = report_of(api, 20, None).await;
        let expected = [
            ("sum(budget_top_chains_total)", 20.0),
            (
                "budget_top_spans_total{result=\"accepted\"}",
                report["ingest"]["spans_accepted"].as_f64().unwrap(),
            ),
            (
                "sum(budget_top_findings_total{kind=\"budget_reset\"})",
                report["summary"]["findings_by_kind"]["budget_reset"]
                    .as_f64()
                    .unwrap(),
            ),
            (
                "budget_top_edge_calls_total{caller=\"orders\",callee=\"inventory\"}",
                20.0,
            ),
            (
                "sum(budget_top_edge_latency_seconds_count)",
                report["edges"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["calls"].as_f64().unwrap())
                    .sum(),
            ),
        ];
        // Scraped every second: bounded at 90 s for a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let mut seen = Vec::new();
            for (promql, want) in &expected {
                seen.push((promql, query(&base, promql).await, want));
            }
            if seen.iter().all(|(_, got, want)| *got == Some(**want)) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{seen:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    if let Err(seen) = outcome {
        panic!(
            "Prometheus never showed the report's counts: {seen}\nits log: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
    }
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
}
