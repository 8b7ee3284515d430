//! A real Python HTTP chain (`tests/python/chain.py`, built on `tests/python/budget.py`, the code
//! docs/instrumenting.md quotes) exports with the Python SDK's stock OTLP exporters (gRPC and
//! HTTP) to `budget-top check`, which classifies the chains. Uses the venv of `python_sdk`; skips
//! (loudly) only when there is no python3 at all.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::python_sdk::{python3, venv};
use crate::support::{finding_names, listen};

fn export_and_check(python: &Path, transport: &str) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let addr = if transport == "grpc" {
        check.grpc
    } else {
        check.http
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new(python)
        .arg(dir.join("chain.py"))
        .arg(transport)
        .arg(addr.to_string())
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python chain failed ({transport}):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let statuses: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        statuses,
        serde_json::json!({"checkout": 200, "report": 200, "search": 504, "refused": 504, "expired": 504}),
        "what the chain's callers saw ({transport})"
    );

    let finished = check.wait(Duration::from_secs(60));
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let report = finished.json();
    let expected: Vec<(String, String, String)> = [
        ("budget_reset", "py-reports", "GET inventory"),
        ("orphaned_work", "py-search", "GET /search"),
        ("shed_expired", "py-orders", "GET /orders"),
    ]
    .iter()
    .map(|(k, s, n)| (k.to_string(), s.to_string(), n.to_string()))
    .collect();
    assert_eq!(finding_names(&report), expected, "{transport}: {report:#}");
    // 5 chains: checkout 5 spans, report 5, search 3, refused 2 (the refused call's span is
    // exported, no request is made), expired 1; one trace each: trace context went through.
    assert_eq!(report["summary"]["traces"], 5, "{report:#}");
    assert_eq!(report["summary"]["spans"], 16, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    let reset = findings
        .iter()
        .find(|f| f["kind"] == "budget_reset")
        .unwrap();
    assert_eq!(reset["forwarded_ms"], 3000, "{reset}");
    let remaining = reset["remaining_ms"].as_i64().unwrap();
    assert!((1..=1000).contains(&remaining), "{reset}");
    let orphan = findings
        .iter()
        .find(|f| f["kind"] == "orphaned_work")
        .unwrap();
    let wasted = orphan["wasted_ms"].as_i64().unwrap();
    assert!((1..=600).contains(&wasted), "{orphan}");
}

#[test]
fn python_sdk_http_chain_over_grpc_and_http_is_classified() {
    let Some(python) = python3() else {
        eprintln!(
            "\n*** SKIPPED python_sdk_http_chain_over_grpc_and_http_is_classified: python3 is not installed ***\n"
        );
        return;
    };
    let venv_python = venv(&python);
    export_and_check(&venv_python, "grpc");
    export_and_check(&venv_python, "http");

    // The guide's read_budget against the contract's carriers (grpc-timeout units, invalid
    // values, which carrier wins), which the chain does not exercise.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new(&venv_python)
        .arg(dir.join("carriers.py"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "carriers.py failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
