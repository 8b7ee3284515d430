//! A proxy that records one span (`tests/go_http/proxy`): `httputil.ReverseProxy` inside
//! `otelhttp.NewHandler` with a fixed 1 s `ResponseHeaderTimeout`, passing `traceparent` on as
//! Caddy does, in front of an app that does slow work, calls a traced API, then waits on a
//! plain-HTTP service with no tracing. Stock instrumentation only; the program's own logs
//! (when the proxy gave up, the API's work, the app's wait) are the truth:
//!
//! - `deadline_exceeded` on exactly the requests the proxy gave up on (it answered 502, the
//!   ReverseProxy's own answer, while the app still worked), `ok` on the others;
//! - the proxy -> app timeout inferred from those calls;
//! - `orphaned_work` on the app, naming the API's dead work, and exit 1 from `check`;
//! - the dead work within 15 % of what the logs show after the proxy gave up, the API's on
//!   app -> api and the wait on the untraced service on an edge of its own, once;
//! - no `shed_*`.

use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::go_http::go_http_program_or_skip;
use crate::support::{assert_success, listen, output_within};

const REQUESTS: u64 = 8;

/// `got` is within 15 % of `want` (and a few ms a request, for a loaded machine's timers).
#[track_caller]
fn near(got: i64, want: i64, what: &str, report: &Json) {
    let slack = want / 7 + 20 * REQUESTS as i64;
    assert!(
        (got - want).abs() <= slack,
        "{what}: {got} ms, the logs say {want}: {report:#}"
    );
}

#[test]
fn a_proxy_that_records_one_span_gives_up_abandons_its_callee_and_infers_its_timeout() {
    let Some(proxy) = go_http_program_or_skip("go_proxy", "./proxy", "proxy") else {
        return;
    };
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let out = output_within(
        Command::new(&proxy)
            .arg(REQUESTS.to_string())
            .arg(check.grpc.to_string()),
        Duration::from_secs(120),
    );
    assert_success("the Go proxy, app and api", &out);
    let logs: Json = serde_json::from_slice(&out.stdout).unwrap();
    let finished = check.wait(Duration::from_secs(60));
    let report = finished.json();
    // orphaned_work is an error.
    assert_eq!(finished.code, Some(1), "{finished:?}");

    let requests = logs["requests"].as_array().unwrap();
    assert_eq!(requests.len() as u64, REQUESTS, "{logs}");
    let gave_up: Vec<&Json> = requests
        .iter()
        .filter(|r| r["gave_up_ns"].is_i64())
        .collect();
    // Every slow request outlives the proxy's second; the fast ones do not.
    assert_eq!(gave_up.len() as u64, REQUESTS / 2, "{logs}");
    assert_eq!(logs["client"]["502"], REQUESTS / 2, "{logs}");
    assert_eq!(report["summary"]["traces"], REQUESTS, "{report:#}");

    let outcomes = &report["summary"]["outcomes"];
    assert_eq!(outcomes["deadline_exceeded"], REQUESTS / 2, "{report:#}");
    assert_eq!(outcomes["ok"], REQUESTS / 2, "{report:#}");

    let edges = report["edges"].as_array().unwrap();
    let edge = |callee: &str| {
        edges
            .iter()
            .find(|e| e["callee"] == callee)
            .unwrap_or_else(|| panic!("no edge to {callee}: {report:#}"))
    };
    let into_app = edge("go-proxy-app");
    assert_eq!(into_app["caller"], "go-proxy-edge", "{report:#}");
    assert_eq!(into_app["timeout_inferred"], true, "{report:#}");
    let timeout = into_app["timeout_ms"].as_i64().unwrap();
    assert!((995..1150).contains(&timeout), "{report:#}");

    // The truth, from the logs: what the api worked, and how long the app waited on the
    // untraced service, after the proxy gave up.
    let after = |r: &Json, what: &str| {
        let t = r["gave_up_ns"].as_i64().unwrap();
        let (start, end) = (r[what][0].as_i64().unwrap(), r[what][1].as_i64().unwrap());
        (end - start.max(t)).max(0) / 1_000_000
    };
    let api_after: i64 = gave_up.iter().map(|r| after(r, "api")).sum();
    let legacy_after: i64 = gave_up.iter().map(|r| after(r, "legacy")).sum();
    near(
        edge("go-proxy-api")["wasted_ms"].as_i64().unwrap(),
        api_after,
        "app -> api",
        &report,
    );
    // The untraced service: one edge, named by the call's server.address, every call on it.
    let untraced: Vec<&Json> = edges.iter().filter(|e| e["untraced"] == true).collect();
    assert_eq!(untraced.len(), 1, "{report:#}");
    assert_eq!(untraced[0]["callee"], "127.0.0.1", "{report:#}");
    assert_eq!(untraced[0]["calls"], REQUESTS, "{report:#}");
    near(
        untraced[0]["wasted_ms"].as_i64().unwrap(),
        legacy_after,
        "app -> 127.0.0.1",
        &report,
    );
    near(
        report["summary"]["wasted_ms"].as_i64().unwrap(),
        api_after + legacy_after,
        "the chains",
        &report,
    );

    let findings = report["findings"].as_array().unwrap();
    let orphaned: Vec<&Json> = findings
        .iter()
        .filter(|f| f["kind"] == "orphaned_work")
        .collect();
    assert_eq!(orphaned.len(), gave_up.len(), "{report:#}");
    for f in &orphaned {
        assert_eq!(f["service"], "go-proxy-app", "{f}");
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains("after go-proxy-edge stopped waiting")
                && message.contains("go-proxy-api "),
            "{f}"
        );
    }
    assert!(
        findings
            .iter()
            .all(|f| !f["kind"].as_str().unwrap().starts_with("shed_")),
        "{report:#}"
    );
}
