//! `budget-top check` listening: `--for`, SIGTERM, and the receivers' counts in the report.

use std::time::Duration;

use crate::support::{listen, run};

#[test]
fn check_for_a_fixed_time_with_nothing_received_passes() {
    let check = listen(&["check", "--for", "300ms", "--format", "json"]);
    let finished = check.wait(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let report = finished.json();
    assert_eq!(report["summary"]["traces"], 0);
    assert_eq!(report["findings"], serde_json::json!([]));
    assert_eq!(report["ingest"]["spans_accepted"], 0);
}

#[test]
fn sigterm_stops_a_listening_check_with_its_report() {
    let check = listen(&["check"]);
    let finished = check.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    assert!(
        finished.stdout.contains("0 traces, 0 spans"),
        "{}",
        finished.stdout
    );
    assert!(
        finished.stdout.contains("no findings"),
        "{}",
        finished.stdout
    );
}

#[test]
fn a_port_in_use_is_a_one_line_error_naming_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&[
        "check",
        "--http",
        &addr,
        "--grpc",
        "127.0.0.1:0",
        "--for",
        "1s",
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(&addr) && out.stderr.contains("--http"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_non_loopback_address_is_refused_without_allow_remote() {
    // Nothing is bound: the address is refused before any socket opens, for every command.
    for command in [
        vec!["check", "--grpc", "0.0.0.0:0", "--for", "1s"],
        vec!["record", "--output", "/dev/null", "--http", "0.0.0.0:0"],
    ] {
        let out = run(&command);
        assert_eq!(out.code, Some(2), "{command:?}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(
            out.stderr.contains("0.0.0.0:0")
                && out.stderr.contains("not a loopback address")
                && out.stderr.contains("--allow-remote"),
            "{}",
            out.stderr
        );
    }
}
