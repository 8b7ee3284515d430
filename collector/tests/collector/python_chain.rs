//! A real Python HTTP chain (`tests/python/chain.py`, built on `tests/python/budget.py`, the code
//! docs/instrumenting.md quotes) exports with the Python SDK's stock OTLP exporters (gRPC and
//! HTTP) to `budget-top check`, which classifies the chains. Uses the venv of `python_sdk`; skips
//! (loudly) only when there is no python3 at all.

use std::path::Path;
use std::process::Command;

use crate::python_sdk::venv_python_or_skip;
use crate::support::{assert_guide_chain_classified, listen};

fn export_and_check(python: &Path, transport: &str) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let addr = check.receiver(transport);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new(python)
        .arg(dir.join("chain.py"))
        .arg(transport)
        .arg(addr.to_string())
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_guide_chain_classified("Python", "py", transport, out, check);
}

#[test]
fn python_sdk_http_chain_over_grpc_and_http_is_classified() {
    let Some(venv_python) =
        venv_python_or_skip("python_sdk_http_chain_over_grpc_and_http_is_classified")
    else {
        return;
    };
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
