//! The OpenTelemetry Python SDK's stock OTLP exporters (gRPC and HTTP, from PyPI) send chains
//! to `budget-top check`, which classifies them. The test installs what it needs itself into a
//! venv under the target dir; it skips (loudly) only when there is no python3 at all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::{finding_names, listen};

/// Pinned: versions that exist on PyPI (`pip index versions opentelemetry-sdk`). The
/// instrumentations (for `python_stock`) are the 0.66b2 release that goes with SDK 1.45.2;
/// `grpcio` is the stock gRPC client of `grpc_python` (a wheel for Python 3.11 exists). The SDK and the exporters carry metrics and
/// logs as well as traces: nothing more is needed for them. `python_db` drives psycopg2
/// through the DB-API instrumentation (the psycopg2 one is built on it and has no 0.66b2).
const PACKAGES: [&str; 8] = [
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
    "opentelemetry-instrumentation-wsgi==0.66b2",
    "opentelemetry-instrumentation-requests==0.66b2",
    "opentelemetry-instrumentation-dbapi==0.66b2",
    "psycopg2-binary==2.9.13",
    "grpcio==1.85.1",
];

pub fn python3() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from("python3"))
}

/// The venv's python for `test`, or `None` (said loudly) when the machine has no python3 at
/// all; a failed pip install fails the test.
pub fn venv_python_or_skip(test: &str) -> Option<PathBuf> {
    let Some(python) = python3() else {
        eprintln!("\n*** SKIPPED {test}: python3 is not installed ***\n");
        return None;
    };
    Some(venv(&python))
}

/// A venv with the pinned packages; reused while the pins match. Shared by the tests that run
/// Python (`python_chain` and `python_stock` too), one at a time: they run in parallel in this
/// binary.
pub fn venv(python: &Path) -> PathBuf {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-otel-venv");
    let marker = dir.join("budget-top-pins.txt");
    let pins = PACKAGES.join("\n");
    let bin = dir.join("bin").join("python");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(pins.as_str()) && bin.exists() {
        return bin;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let status = Command::new(python)
        .args(["-m", "venv"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success(), "python3 -m venv {} failed", dir.display());
    let out = Command::new(&bin)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(PACKAGES)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pip install failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, pins).unwrap();
    bin
}

fn export_and_check(python: &Path, transport: &str) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let addr = check.receiver(transport);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/export_chains.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(transport)
        .arg(addr.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python exporter failed ({transport}):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let finished = check.wait(Duration::from_secs(60));
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let report = finished.json();
    assert_eq!(
        finding_names(&report),
        vec![
            (
                "budget_reset".into(),
                "py-backend".into(),
                "GET /data".into()
            ),
            (
                "budget_reset".into(),
                "py-orders".into(),
                "GET inventory".into()
            ),
        ],
        "{transport}: {report:#}"
    );
    assert_eq!(report["summary"]["spans"], 8, "{report:#}");
    let captured = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["service"] == "py-backend")
        .unwrap();
    assert_eq!(
        (
            captured["received_ms"].as_i64(),
            captured["forwarded_ms"].as_i64()
        ),
        (Some(5000), Some(400)),
        "{captured}"
    );
}

#[test]
fn python_sdk_exporters_over_grpc_and_http_are_classified() {
    let Some(venv_python) =
        venv_python_or_skip("python_sdk_exporters_over_grpc_and_http_are_classified")
    else {
        return;
    };
    export_and_check(&venv_python, "grpc");
    export_and_check(&venv_python, "http");
}

/// Issue 13: an SDK given one `OTEL_EXPORTER_OTLP_ENDPOINT` exports metrics and logs there too.
/// Pointed at `budget-top check`, the stock exporters log no error (a 404 or UNIMPLEMENTED
/// before, logged at every export), the span is classified, and the report counts the other
/// signals as ignored.
#[test]
fn python_sdk_exporting_every_signal_to_one_endpoint_logs_no_error() {
    let Some(python) =
        venv_python_or_skip("python_sdk_exporting_every_signal_to_one_endpoint_logs_no_error")
    else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/export_signals.py");
    for transport in ["grpc", "http"] {
        let check = listen(&["check", "--idle", "2s", "--format", "json"]);
        let addr = check.receiver(transport);
        let out = Command::new(&python)
            .arg(&script)
            .arg(transport)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
            .env("OTEL_EXPORTER_OTLP_INSECURE", "true")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the Python SDK logged export errors ({transport}):\n{stderr}"
        );
        let finished = check.wait(Duration::from_secs(60));
        assert_eq!(finished.code, Some(0), "{finished:?}");
        let report = finished.json();
        assert_eq!(report["summary"]["spans"], 1, "{transport}: {report:#}");
        let ingest = &report["ingest"];
        // Logs once, metrics at the flush and again at shutdown (the SDK's final collection).
        let ignored = ingest["requests_ignored"].as_u64().unwrap();
        assert!((2..=3).contains(&ignored), "{transport}: {ingest:#}");
        assert_eq!(ingest["requests_rejected"], 0, "{transport}: {ingest:#}");
    }
}
