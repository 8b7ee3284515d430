//! Links from a chain to its trace (`--trace-url`) in every report and the API, and serve's
//! exemplars read back from a real Prometheus (`--enable-feature=exemplar-storage`): each is a
//! chain of `/api/report` with a finding of the series that carries it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde_json::Value as Json;

use crate::serve::{chain, get, post, prometheus, report_of, start_prometheus};
use crate::support::{T0, check_html, check_json, json_line, run, runtime, scratch, serve};

const TEMPLATE: &str = "https://grafana.example/explore?trace={trace_id}&orgId=1";

fn link(trace: &str) -> String {
    TEMPLATE.replace("{trace_id}", trace)
}

/// serve's reset chain `n` (a `budget_reset` at orders), with inventory working on 70 ms after
/// orders' call to it ended: an `orphaned_work` at inventory, dead work on orders → inventory.
fn orphan_chain(n: u32) -> ExportTraceServiceRequest {
    let mut request = chain(n, "frontend");
    for resource in &mut request.resource_spans {
        for scope in &mut resource.scope_spans {
            for span in &mut scope.spans {
                if span.name == "GET /stock" {
                    span.end_time_unix_nano = T0 + 150 * 1_000_000;
                }
            }
        }
    }
    request
}

#[test]
fn check_links_each_finding_and_chain_to_its_trace() {
    let dir = scratch("trace_links_check");
    let input = dir.join("chains.jsonl");
    let lines: Vec<String> = (0..3).map(|n| json_line(&orphan_chain(n))).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let input = input.to_str().unwrap();

    let json = run(&[
        "check",
        "--input",
        input,
        "--format",
        "json",
        "--trace-url",
        TEMPLATE,
    ]);
    assert_eq!(json.code, Some(1), "{json:?}");
    let report = json.json();
    let findings = report["findings"].as_array().unwrap();
    assert!(findings.len() >= 6, "{report}");
    for f in findings {
        assert_eq!(f["trace_url"], link(f["trace_id"].as_str().unwrap()), "{f}");
    }
    // Without a template, no link.
    let plain = run(&["check", "--input", input, "--format", "json"]);
    assert!(plain.json()["findings"][0].get("trace_url").is_none());

    // The text report: a line under each chain's.
    let text = run(&["check", "--input", input, "--trace-url", TEMPLATE]);
    let traces: BTreeSet<&str> = findings
        .iter()
        .map(|f| f["trace_id"].as_str().unwrap())
        .collect();
    for trace in &traces {
        let heading = format!(
            "chain {trace} frontend GET /checkout\n  trace: {}\n",
            link(trace)
        );
        assert!(
            text.stdout.contains(&heading),
            "{heading:?} in {}",
            text.stdout
        );
    }

    // merge reports chains too: the same links.
    let shard = dir.join("shard.json");
    std::fs::write(&shard, &plain.stdout).unwrap();
    let merged = run(&[
        "merge",
        shard.to_str().unwrap(),
        "--format",
        "json",
        "--trace-url",
        TEMPLATE,
    ]);
    for f in merged.json()["findings"].as_array().unwrap() {
        assert_eq!(f["trace_url"], link(f["trace_id"].as_str().unwrap()), "{f}");
    }
}

/// The page, read in Chromium as a person sees it: each drawn chain's heading and each of its
/// findings carries a link whose address is the template's text and the hex id.
#[test]
fn the_page_links_each_chain_heading_and_finding_row_to_its_trace() {
    let Some(chromium) = crate::html_report::chromium() else {
        return;
    };
    let dir = scratch("trace_links_page");
    let input = dir.join("chains.jsonl");
    let lines: Vec<String> = (0..2).map(|n| json_line(&orphan_chain(n))).collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let page = dir.join("report.html");
    let out = check_html(&input, &page, &["--trace-url", TEMPLATE]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let dom = crate::html_report::render(&chromium, &dir, &page, &dir.join("report.png"));
    let anchors: Vec<&str> = dom
        .split("<a class=\"trace-link\" href=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    let report = check_json(&input).json();
    let traces: BTreeSet<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["trace_id"].as_str().unwrap().to_owned())
        .collect();
    // The serialised DOM escapes `&` in an attribute.
    let expected: BTreeSet<String> = traces
        .iter()
        .map(|t| link(t).replace('&', "&amp;"))
        .collect();
    let found: BTreeSet<String> = anchors.iter().map(|a| a.to_string()).collect();
    assert_eq!(found, expected, "{anchors:?}");
    // Under each kind, each drawn chain's heading and each of its findings links.
    let headings = dom.matches("open the trace ↗</a></h4>").count();
    let rows = dom.matches(">trace ↗</a></li>").count();
    assert!(
        headings >= 2 && rows >= 2,
        "{headings} headings, {rows} finding rows"
    );
    assert_eq!(anchors.len(), headings + rows);
}

#[test]
fn a_template_without_the_trace_id_or_with_control_characters_is_refused() {
    for (template, words) in [
        ("http://jaeger:16686/trace/", "has no {trace_id}"),
        (
            "http://jaeger:16686/trace/{trace_id}\x1b]8;;evil\x1b\\",
            "control character",
        ),
        ("http://a/{trace_id}\nX-Injected: 1", "control character"),
        ("http://a/\u{9b}31m{trace_id}", "control character"),
    ] {
        for command in [
            vec!["check", "--input", "-"],
            vec!["serve"],
            vec!["replay", "x.jsonl"],
            vec!["merge", "x.json"],
            vec![],
        ] {
            let mut args = command.clone();
            args.extend(["--trace-url", template]);
            let out = run(&args);
            assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
            assert!(out.stderr.contains(words), "{args:?}: {}", out.stderr);
        }
    }
}

/// POSTs each chain as OTLP/JSON to serve's HTTP receiver.
async fn post_all(http: SocketAddr, chains: impl Iterator<Item = ExportTraceServiceRequest>) {
    for request in chains {
        assert_eq!(post(http, &request, None).await, 200);
    }
}

/// `/api/v1/query_exemplars` of `promql` over the last day: (series labels, trace id) pairs.
async fn exemplars(prometheus: &str, promql: &str) -> Vec<(Json, String)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let url = format!(
        "{prometheus}/api/v1/query_exemplars?query={promql}&start={}&end={}",
        now - 86_400,
        now + 3600
    );
    let Ok(response) = reqwest::get(url).await else {
        return Vec::new();
    };
    let body: Json = response.json().await.unwrap_or(Json::Null);
    let mut out = Vec::new();
    for series in body["data"].as_array().into_iter().flatten() {
        for e in series["exemplars"].as_array().into_iter().flatten() {
            if let Some(trace) = e["labels"]["trace_id"].as_str() {
                out.push((series["seriesLabels"].clone(), trace.to_owned()));
            }
        }
    }
    out
}

#[test]
fn prometheus_keeps_serves_exemplars_and_each_is_a_chain_of_that_series() {
    let Some(binary) = prometheus() else { return };
    let dir = scratch("trace_links_exemplars");
    let serving = serve(&["--settle", "100ms", "--trace-url", TEMPLATE]);
    let (http, api) = (serving.http, serving.api);
    let (mut prometheus, base) =
        start_prometheus(&binary, &dir, api, &["--enable-feature=exemplar-storage"]);
    let outcome: Result<_, String> = runtime().block_on(async {
        // Two rounds a few scrapes apart: each series' exemplar moves to the newer chain.
        post_all(http, (0..4).map(orphan_chain)).await;
        report_of(api, 4, None).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        post_all(http, (4..8).map(orphan_chain)).await;
        let report = report_of(api, 8, None).await;
        // Scraped every second: bounded at 90 s for a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let found = (
                exemplars(&base, "budget_top_findings_total").await,
                exemplars(&base, "budget_top_wasted_seconds_total").await,
                exemplars(&base, "budget_top_edge_latency_seconds_bucket").await,
            );
            let newest = |list: &Vec<(Json, String)>| {
                list.iter()
                    .any(|(_, t)| (4..8).any(|n| *t == format!("{}{:08x}", "07".repeat(12), n)))
            };
            if newest(&found.0) && newest(&found.1) && !found.2.is_empty() {
                return Ok((report, found));
            }
            if Instant::now() > deadline {
                return Err(format!("{found:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    let chains_lines = runtime().block_on(async {
        get(
            &format!("http://{api}/api/chains?kind=orphaned_work"),
            None,
            None,
        )
        .await
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let (report, (findings, wasted, latency)) = outcome.unwrap_or_else(|seen| {
        panic!(
            "Prometheus kept no exemplar of the newest chains: {seen}\nits log: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        )
    });
    let listed = report["findings"].as_array().unwrap();
    let has = |trace: &str, kind: Option<&str>, service: Option<&str>, wasted: bool| {
        listed.iter().any(|f| {
            f["trace_id"] == trace
                && kind.is_none_or(|k| f["kind"] == k)
                && service.is_none_or(|s| f["service"] == s)
                && (!wasted || f["wasted_ms"].as_i64().unwrap_or(0) > 0)
        })
    };
    for (series, trace) in &findings {
        let (kind, service) = (series["kind"].as_str(), series["service"].as_str());
        assert!(
            has(trace, kind, service, false),
            "{series} {trace}: not a finding of that series in {report}"
        );
    }
    for (series, trace) in &wasted {
        // Dead work in the callee, by the edge into it: the callee's finding explains it.
        assert!(
            has(trace, None, series["callee"].as_str(), true),
            "{series} {trace} in {report}"
        );
    }
    let traces: BTreeSet<&str> = listed
        .iter()
        .map(|f| f["trace_id"].as_str().unwrap())
        .collect();
    for (series, trace) in &latency {
        assert!(traces.contains(trace.as_str()), "{series} {trace}");
        assert!(
            series["le"].is_string() && series["caller"].is_string(),
            "{series}"
        );
    }

    // /api/chains: each line links to its trace, and `check --input` still reads the lines.
    assert_eq!(chains_lines.status, 200, "{}", chains_lines.body);
    let lines: Vec<&str> = chains_lines.body.lines().collect();
    assert_eq!(lines.len(), 8, "{}", chains_lines.body);
    for line in &lines {
        let chain: Json = serde_json::from_str(line).unwrap();
        let trace = chain["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(chain["trace_url"], link(&trace), "{line}");
    }
    let again = dir.join("chains.jsonl");
    std::fs::write(&again, &chains_lines.body).unwrap();
    let check = check_json(&again);
    assert_eq!(check.code, Some(1), "{check:?}");
    assert_eq!(check.json()["summary"]["traces"], 8);
    // The report serve writes links too.
    assert!(
        listed
            .iter()
            .all(|f| f["trace_url"] == link(f["trace_id"].as_str().unwrap()))
    );
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
}
