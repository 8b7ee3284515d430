//! A real Go HTTP pair (`tests/go_http/main.go`): net/http with the stock otelhttp handler and
//! client transport, the OTLP/gRPC exporter, nothing of budget-top's. The edge that calls
//! pricing with `context.Background()` (the classic Go mistake) splits every request in two
//! traces: `context_lost` on every such call, each linked to the one request it came from; the
//! edge that passes `r.Context()` on has one trace per request and nothing to report. The test
//! builds the pair itself (modules from the Go proxy into Go's own cache, the binary under the
//! target dir); it skips (loudly) only when there is no `go` at all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::support::{Finished, assert_success, go_program_or_skip, listen, output_within};

const REQUESTS: u64 = 6;

/// The program of package `package` of `tests/go_http` (its own module: the stock otelhttp
/// instrumentation and the OTLP/gRPC exporter), built once under the target dir as `name`;
/// `None` (and a loud line) when there is no `go`.
pub fn go_http_program_or_skip(test: &str, package: &str, name: &str) -> Option<PathBuf> {
    go_program_or_skip(test, "tests/go_http", package, &format!("go-http/{name}"))
}

fn run_variant(gohttp: &Path, variant: &str) -> Finished {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let out = output_within(
        Command::new(gohttp)
            .args([variant, &REQUESTS.to_string()])
            .arg(check.grpc.to_string()),
        Duration::from_secs(60),
    );
    assert_success(&format!("the Go HTTP pair ({variant})"), &out);
    let seen: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen, serde_json::json!({"200": REQUESTS}));
    check.wait(Duration::from_secs(60))
}

fn lost(report: &Json) -> Vec<&Json> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "context_lost")
        .collect()
}

#[test]
fn go_http_calls_made_with_context_background_lost_their_context_and_r_context_did_not() {
    let Some(gohttp) =
        go_http_program_or_skip("go_http_calls_made_with_context_background", ".", "gohttp")
    else {
        return;
    };
    let finished = run_variant(&gohttp, "background");
    // A warning: the default --fail-on error passes.
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let report = finished.json();
    // Every request split in two: the edge's hop, and its call with pricing's hop under it.
    assert_eq!(report["summary"]["traces"], 2 * REQUESTS, "{report:#}");
    let found = lost(&report);
    assert_eq!(found.len() as u64, REQUESTS, "{report:#}");
    let mut linked: Vec<&str> = Vec::new();
    for f in &found {
        assert_eq!(f["service"], "go-http-background-edge", "{f}");
        assert_eq!(
            f["message"],
            "go-http-background-edge called go-http-background-pricing outside its request's trace: no deadline, no cancellation and no trace reached go-http-background-pricing (Go: pass r.Context() on)"
        );
        // Requests 30 ms apart: each call lies inside exactly one request, another trace.
        let to = f["linked_trace_id"].as_str().unwrap();
        assert_ne!(to, f["trace_id"].as_str().unwrap(), "{f}");
        linked.push(to);
    }
    linked.sort_unstable();
    linked.dedup();
    assert_eq!(
        linked.len() as u64,
        REQUESTS,
        "one request each: {report:#}"
    );
    let edge = &report["edges"][0];
    assert_eq!(edge["caller"], "go-http-background-edge", "{report:#}");
    assert_eq!(edge["callee"], "go-http-background-pricing", "{report:#}");
    assert_eq!(edge["findings"]["context_lost"], REQUESTS, "{report:#}");

    let finished = run_variant(&gohttp, "request");
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let report = finished.json();
    assert_eq!(report["summary"]["traces"], REQUESTS, "{report:#}");
    assert!(lost(&report).is_empty(), "{report:#}");
    assert_eq!(report["edges"][0]["findings"], serde_json::json!({}));
}
