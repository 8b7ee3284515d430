//! A real Go gRPC chain (`tests/go/main.go` on `tests/go/budget`, the code docs/instrumenting.md
//! quotes): grpc-go with the stock otelgrpc instrumentation and OTLP/gRPC exporter, the deadline
//! flowing through `context`, exports to `budget-top check`. The variant that passes its context
//! on has nothing to report; the one that calls on with `context.Background()` and its own 2 s
//! timeout shows the reset and the work nobody waited for. The test builds the chain itself
//! (modules from the Go proxy into Go's own cache, the binary under the target dir); it skips
//! (loudly) only when there is no `go` at all. A failed download or build fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::support::{
    Finished, assert_nothing_beyond_noise, assert_success, finding_names, findings_beyond_noise,
    go_program_or_skip, listen, orphan_with_all_the_waste, output_within,
};

/// The chain's binary, built once per test run (`go build` is a no-op when nothing changed).
pub fn gochain_or_skip(test: &str) -> Option<PathBuf> {
    go_program_or_skip(test, "tests/go", ".", "go-chain/gochain")
}

/// Runs the chain's `variant` against a fresh `check`; returns what the user saw and the report.
fn run_variant(gochain: &Path, variant: &str) -> (Json, Finished) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let out = output_within(
        Command::new(gochain)
            .arg(variant)
            .arg(check.grpc.to_string()),
        Duration::from_secs(60),
    );
    assert_success(&format!("the Go chain ({variant})"), &out);
    let seen: Json = serde_json::from_slice(&out.stdout).unwrap();
    (seen, check.wait(Duration::from_secs(60)))
}

/// What the user saw: the fast checkouts answered, the slow one cut off at its 1 s deadline.
#[track_caller]
fn assert_user_saw(seen: &Json) {
    assert_eq!(
        seen,
        &serde_json::json!({"fast-1": ["OK"], "fast-2": ["OK"], "slow": ["DeadlineExceeded"]})
    );
}

/// Three chains of frontend -> orders -> inventory: five spans each (a SERVER span per hop, a
/// CLIENT span per call), one trace each: the trace context went through otelgrpc. The slow
/// one ended `deadline_exceeded` at the root; every hop knew its budget (from `ctx.Deadline()`).
#[track_caller]
fn assert_three_whole_chains(report: &Json) {
    let summary = &report["summary"];
    assert_eq!(summary["traces"], 3, "{report:#}");
    assert_eq!(summary["spans"], 15, "{report:#}");
    assert_eq!(summary["hops"], 9, "{report:#}");
    assert_eq!(
        summary["outcomes"],
        serde_json::json!({"ok": 2, "late": 0, "deadline_exceeded": 1, "shed": 0, "cancelled": 0, "error": 0, "in_flight": 0}),
        "{report:#}"
    );
    assert_eq!(summary["coverage"]["hops_with_budget"], 9, "{report:#}");
    assert_eq!(summary["coverage"]["hops_without_budget"], 0, "{report:#}");
}

#[test]
fn go_grpc_chain_passing_its_context_on_has_nothing_to_report() {
    let Some(gochain) =
        gochain_or_skip("go_grpc_chain_passing_its_context_on_has_nothing_to_report")
    else {
        return;
    };
    let (seen, finished) = run_variant(&gochain, "propagate");
    assert_user_saw(&seen);
    // Even the slow checkout: inventory gave up with its deadline, before orders stopped waiting.
    // Only scheduling noise can show (a few ms, on busy cores).
    let report = finished.json();
    assert_nothing_beyond_noise(&report, &finished);
    assert_three_whole_chains(&report);
    let edges: Vec<(&str, &str, i64)> = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["caller"].as_str().unwrap(),
                e["callee"].as_str().unwrap(),
                e["calls"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        vec![
            ("go-propagate-frontend", "go-propagate-orders", 3),
            ("go-propagate-orders", "go-propagate-inventory", 3),
        ],
        "{report:#}"
    );
}

#[test]
fn go_grpc_chain_with_a_fixed_timeout_resets_the_budget_and_orphans_work() {
    let Some(gochain) =
        gochain_or_skip("go_grpc_chain_with_a_fixed_timeout_resets_the_budget_and_orphans_work")
    else {
        return;
    };
    let (seen, finished) = run_variant(&gochain, "fixed");
    assert_user_saw(&seen);
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let report = finished.json();
    // No timeout_inverted for orders' 2 s: the reset on the same call explains it.
    let reset = || {
        (
            "budget_reset".to_string(),
            "go-fixed-orders".to_string(),
            "shop.Inventory/Reserve".to_string(),
        )
    };
    assert_eq!(
        finding_names(&serde_json::json!({"findings": findings_beyond_noise(&report)})),
        vec![
            reset(),
            reset(),
            reset(),
            (
                "orphaned_work".into(),
                "go-fixed-orders".into(),
                "shop.Orders/Place".into()
            ),
        ],
        "{report:#}"
    );
    assert_three_whole_chains(&report);
    // The slow chain: inventory worked about 510 ms after frontend gave up, while orders only
    // waited for it: that once, not twice.
    let wasted = report["summary"]["wasted_ms"].as_i64().unwrap();
    assert!((300..=1500).contains(&wasted), "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    let orphan = orphan_with_all_the_waste(&report);
    for f in findings.iter().filter(|f| f["kind"] == "budget_reset") {
        // grpc-go forwarded the 2 s of context.WithTimeout; about 980 ms were left.
        let forwarded = f["forwarded_ms"].as_i64().unwrap();
        let remaining = f["remaining_ms"].as_i64().unwrap();
        assert!((1900..=2000).contains(&forwarded), "{f}");
        assert!((700..=1000).contains(&remaining), "{f}");
        // On the slow chain the reset names inventory's dead work below it; elsewhere none.
        if f["trace_id"] == orphan["trace_id"] {
            let below = f["wasted_ms"].as_i64().unwrap();
            assert!((300..=1500).contains(&below), "inventory's dead work: {f}");
        } else {
            assert_eq!(f["wasted_ms"], Json::Null, "{f}");
        }
    }
}
