//! A real Node.js HTTP chain (`tests/node/chain.js`, built on `tests/node/budget.js`, the code
//! docs/instrumenting.md quotes) exports with the OpenTelemetry Node.js SDK's stock OTLP
//! exporters (gRPC, HTTP protobuf, HTTP JSON, from npm) to `budget-top check`, which classifies
//! the chains. The test installs the pinned packages itself under the target dir; it skips
//! (loudly) only when there is no `node` at all. An npm failure fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{assert_guide_chain_classified, listen};

/// Pinned: versions that exist on npm (`npm view PKG version`). The 2.x SDK line and its
/// 0.223 exporters and instrumentations (undici 0.33 is the one built on instrumentation
/// 0.223): the newest (3.x / 0.30x) need Node >= 22.15, and CI has Node 20.
const PACKAGES: [&str; 11] = [
    "@opentelemetry/api@1.9.1",
    "@opentelemetry/core@2.12.1",
    "@opentelemetry/resources@2.12.1",
    "@opentelemetry/sdk-trace-base@2.12.1",
    "@opentelemetry/sdk-trace-node@2.12.1",
    "@opentelemetry/exporter-trace-otlp-grpc@0.223.1",
    "@opentelemetry/exporter-trace-otlp-http@0.223.1",
    "@opentelemetry/exporter-trace-otlp-proto@0.223.1",
    "@opentelemetry/instrumentation@0.223.0",
    "@opentelemetry/instrumentation-http@0.223.0",
    "@opentelemetry/instrumentation-undici@0.33.0",
];

pub fn node_installed() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `node_modules` with the pinned packages; reused while the pins match. Shared by the tests
/// that run Node.js (`node_stock` too), one at a time: they run in parallel in this binary.
pub fn node_modules() -> PathBuf {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("node-otel");
    let marker = dir.join("budget-top-pins.txt");
    let pins = PACKAGES.join("\n");
    let modules = dir.join("node_modules");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(pins.as_str()) && modules.exists() {
        return modules;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("npm")
        .args(["install", "--prefix"])
        .arg(&dir)
        .args([
            "--no-audit",
            "--no-fund",
            "--save-exact",
            "--loglevel=error",
            // bounded: a registry that does not answer fails the test instead of hanging it
            "--fetch-timeout=60000",
            "--fetch-retries=2",
        ])
        .args(PACKAGES)
        .output()
        .unwrap_or_else(|e| panic!("node is installed but npm could not be run: {e}"));
    assert!(
        out.status.success(),
        "npm install failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, pins).unwrap();
    modules
}

fn export_and_check(modules: &Path, transport: &str) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let addr = check.receiver(transport);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/chain.js");
    let out = Command::new("node")
        .arg(&script)
        .arg(transport)
        .arg(addr.to_string())
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    assert_guide_chain_classified("Node.js", "node", transport, out, check);
}

/// Runs a Node.js script of tests/node that checks itself (node:assert).
#[track_caller]
fn run_script(modules: &Path, script: &str) {
    let out = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .env("NODE_PATH", modules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Also runs tests/node/carriers.js: the guide's `readBudget` against the contract's carriers
/// (grpc-timeout units, invalid values, which carrier wins), which the chain does not exercise.
#[test]
fn node_sdk_chain_over_grpc_http_protobuf_and_http_json_is_classified() {
    if !node_installed() {
        eprintln!(
            "\n*** SKIPPED node_sdk_chain_over_grpc_http_protobuf_and_http_json_is_classified: node is not installed ***\n"
        );
        return;
    }
    let modules = node_modules();
    for transport in ["grpc", "http-proto", "http-json"] {
        export_and_check(&modules, transport);
    }
    run_script(&modules, "tests/node/carriers.js");
}
