//! A stock gRPC client of another language (Python `grpcio` from PyPI) calls the demo's gRPC
//! service, `antifraud`, with real gRPC deadlines, while `budget-top record` takes the spans of
//! the running payment chain: the service reads its budget from `grpc-timeout`, stops at the
//! caller's deadline, and a spent budget is answered as `DEADLINE_EXCEEDED`, which the Python
//! client reports as such. Uses the venv of `python_sdk`; skips (loudly) only when there is no
//! python3 at all.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use budget_demo::{Demo, DemoConfig, LoadPlan, Scenario};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::Value as Json;

use crate::python_sdk::venv_python_or_skip;
use crate::support::{SERVER, listen, scratch};

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attr(&span.attributes, key) {
        Some(Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attr(&span.attributes, key) {
        Some(Value::IntValue(v)) => Some(*v),
        _ => None,
    }
}

/// The SERVER spans of `service` in a recording.
fn server_spans(recording: &str, service: &str) -> Vec<Span> {
    let mut found = Vec::new();
    for line in recording.lines() {
        let request: ExportTraceServiceRequest = serde_json::from_str(line).unwrap();
        for resource_spans in request.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            let name = attr(&resource.attributes, "service.name");
            if !matches!(name, Some(Value::StringValue(s)) if s == service) {
                continue;
            }
            for scope in resource_spans.scope_spans {
                found.extend(scope.spans.into_iter().filter(|s| s.kind == SERVER));
            }
        }
    }
    found
}

#[test]
fn python_grpcio_deadlines_reach_the_tonic_service_as_its_budget() {
    let Some(python) =
        venv_python_or_skip("python_grpcio_deadlines_reach_the_tonic_service_as_its_budget")
    else {
        return;
    };
    let path = scratch("grpc_python").join("rec.jsonl");
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    let runtime = crate::support::threaded_runtime(2);
    let results: Json = runtime.block_on(async {
        // budget-demo --scenario propagate --requests 5, at the workshop's figures.
        let mut config = DemoConfig::new(Scenario::Propagate, recorder.grpc.to_string());
        config.load = LoadPlan {
            rate: 5.0,
            jitter: 0.0,
            requests: Some(5),
            ..LoadPlan::default()
        };
        let demo = Demo::start(config).await.unwrap();
        let antifraud = demo
            .services()
            .into_iter()
            .find(|s| s.name == "antifraud")
            .unwrap()
            .addr;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/grpc_antifraud.py");
        let out = tokio::task::spawn_blocking(move || {
            Command::new(&python)
                .arg(script)
                .arg(antifraud.to_string())
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "the Python gRPC client failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::timeout(Duration::from_secs(30), demo.load_finished())
            .await
            .expect("the load finishes");
        // Every request answered: propagate's one settlement in four that is slow by design
        // (the fourth) is cut at pix-api's budget, a 504; the others are fine.
        let counts = demo.load_counts();
        assert_eq!((counts.ok, counts.timed_out), (4, 1), "{counts:?}");
        tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
            .await
            .expect("the demo shuts down");
        serde_json::from_slice(&out.stdout).unwrap()
    });
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");

    // What the Python client saw.
    let enough = &results["enough"];
    assert_eq!(enough["code"], "OK", "{results:#}");
    assert_eq!(enough["budget_source"], "grpc-timeout", "{results:#}");
    let budget = enough["budget_ms"].as_i64().unwrap();
    // gRPC's C core rounds the grpc-timeout it sends up to a coarser unit (2 s went out as
    // about 2010 ms): well within the contract's tolerance.
    assert!(
        (1500..=2100).contains(&budget),
        "antifraud had the 2 s deadline: {results:#}"
    );
    let short = &results["short"];
    assert_eq!(short["code"], "DEADLINE_EXCEEDED", "{results:#}");
    let spent = &results["spent"];
    assert_eq!(spent["code"], "DEADLINE_EXCEEDED", "{results:#}");
    assert_eq!(spent["details"], "budget spent on arrival", "{results:#}");
    assert!(
        spent["took_ms"].as_i64().unwrap() < 2000,
        "answered by antifraud, not by the client's 5 s deadline: {results:#}"
    );

    // What antifraud recorded: 5 calls from pix-api and 3 from Python, every budget that
    // arrived came in grpc-timeout.
    let recording = std::fs::read_to_string(&path).unwrap();
    let spans = server_spans(&recording, "antifraud");
    assert_eq!(spans.len(), 8, "{recording}");
    let from_grpc_timeout = spans
        .iter()
        .filter(|s| text(s, "budget.source") == Some("grpc-timeout"))
        .count();
    assert_eq!(from_grpc_timeout, 7, "all but the x-budget-ms one");
    // The short call: received its 100 ms (rounded up a little by gRPC's C core), and the work
    // did not outlive it.
    let short = spans
        .iter()
        .filter(|s| text(s, "budget.source") == Some("grpc-timeout"))
        .find(|s| int(s, "budget.received_ms").is_some_and(|ms| ms <= 110))
        .expect("the 100 ms call");
    assert!(
        matches!(
            text(short, "budget.outcome"),
            Some("deadline_exceeded" | "cancelled")
        ),
        "{short:?}"
    );
    let lasted_ms = (short.end_time_unix_nano - short.start_time_unix_nano) / 1_000_000;
    assert!(
        lasted_ms < 200,
        "antifraud worked {lasted_ms} ms for a 100 ms caller"
    );
    // The spent one: shed on arrival with gRPC's DEADLINE_EXCEEDED, never worked.
    let shed = spans
        .iter()
        .find(|s| text(s, "budget.source") == Some("x-budget-ms"))
        .expect("the spent call");
    assert_eq!(text(shed, "budget.outcome"), Some("shed_expired"));
    assert_eq!(int(shed, "rpc.grpc.status_code"), Some(4));
}
