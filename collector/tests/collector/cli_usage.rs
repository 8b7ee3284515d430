//! What a newcomer meets on the command line (issue 30): bad values refused with a sentence
//! that says the valid range (exit 2), flags that cannot go together refused, a listening
//! `check` that says how it ends, messages that say each thing once and where, and `record`
//! writing gzip when the file's name says so.

use std::time::Duration;

use prost::Message as _;

use crate::support::{
    RECEIVERS_ON_PORT_0, check_json, json_line, listen, reset_chain, run, scratch,
};

#[track_caller]
fn refused(args: &[&str], sentence: &str) {
    let out = run(args);
    assert_eq!(out.code, Some(2), "{args:?} is refused: {out:?}");
    assert!(
        out.stderr.contains(sentence),
        "{args:?} says {sentence:?}: {}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
}

#[test]
fn zero_limits_and_durations_are_refused_with_their_range() {
    let dir = scratch("cli_usage_zero");
    let file = dir.join("empty.jsonl");
    std::fs::write(&file, "").unwrap();
    let input = file.to_str().unwrap();
    // Each of these once meant something else than it says (0 spans kept one span in check
    // and everything in replay and the screen): now the range is said.
    for flag in [
        "--max-spans",
        "--max-body",
        "--max-inflight",
        "--max-connections",
    ] {
        refused(
            &["check", "--grpc", "127.0.0.1:0", flag, "0"],
            &format!("invalid value '0' for '{flag} "),
        );
        refused(
            &["check", "--http", "127.0.0.1:0", flag, "0"],
            "must be at least 1",
        );
    }
    refused(&["check", "--max-queued-spans", "0"], "must be at least 1");
    refused(&["--max-attribute-bytes", "0"], "must be at least 1");
    refused(&["replay", input, "--max-spans", "0"], "must be at least 1");
    refused(&["check", "--idle", "0s"], "must be longer than 0");
    refused(&["check", "--for", "0ms"], "must be longer than 0");
    refused(&["replay", input, "--speed", "-1"], "0: all at once");
    refused(&["replay", input, "--speed", "nan"], "more than 0");
    // The values that mean something still run.
    let out = run(&["check", "--input", input, "--max-spans", "1"]);
    assert_eq!(out.code, Some(0), "{out:?}");
}

#[test]
fn demo_check_refuses_a_clock_skew_its_scenario_has_no_clock_for() {
    // Accepted and ignored before: only absolute-deadline has a skewed clock.
    refused(
        &[
            "demo",
            "--check",
            "--scenario",
            "fixed-timeout",
            "--clock-skew",
            "500",
        ],
        "--clock-skew sets ledger's clock in absolute-deadline, and scenario fixed-timeout has no such clock",
    );
    refused(
        &["check", "--grpc", "localhost:4317"],
        "expected IP:PORT, such as 127.0.0.1:4317 or [::1]:4317",
    );
    refused(
        &["--http", "4318"],
        "a host name such as localhost is not looked up",
    );
    refused(
        &["demo", "--clock-skew", "ahead"],
        "must be whole milliseconds",
    );
}

#[test]
fn input_refuses_every_listening_flag_as_it_refuses_for() {
    let dir = scratch("cli_usage_input");
    let file = dir.join("empty.jsonl");
    std::fs::write(&file, "").unwrap();
    let input = file.to_str().unwrap();
    for listening in [
        &["--grpc", "127.0.0.1:4317"][..],
        &["--http", "127.0.0.1:4318"],
        &["--max-body", "10"],
        &["--max-inflight", "10"],
        &["--max-inflight-bytes", "10"],
        &["--max-queued-spans", "10"],
        &["--max-connections", "10"],
        &["--allow-remote"],
        &["--idle", "3s"],
        &["--for", "3s"],
    ] {
        let args = [&["check", "--input", input][..], listening].concat();
        refused(&args, "cannot be used with");
    }
}

#[test]
fn a_listening_check_says_how_it_ends() {
    let check = listen(&["check"]);
    let finished = check.terminate(Duration::from_secs(30));
    assert!(
        finished
            .stderr
            .contains("Ctrl-C or SIGTERM ends it and prints the report (no --idle or --for given)"),
        "{}",
        finished.stderr
    );
    // --idle waits for a first span: it says so, then ends at SIGTERM with the report.
    let check = listen(&["check", "--idle", "1s", "--format", "json"]);
    std::thread::sleep(Duration::from_millis(1500));
    let finished = check.terminate(Duration::from_secs(30));
    assert!(
        finished
            .stderr
            .contains("ends 1s after the last span (none yet: it waits for the first)"),
        "{}",
        finished.stderr
    );
    assert_eq!(finished.json()["summary"]["spans"], 0, "{finished:?}");
    // Durations are said as they are written: `--for 90m` is 1h 30m, not 90m or 5400s.
    let check = listen(&["check", "--for", "90m"]);
    let finished = check.terminate(Duration::from_secs(30));
    assert!(
        finished.stderr.contains("ends after 1h 30m, or at Ctrl-C"),
        "{}",
        finished.stderr
    );
}

#[test]
fn a_bad_line_is_said_at_its_column_with_its_field_and_a_missing_file_once() {
    let dir = scratch("cli_usage_messages");
    let file = dir.join("bad.jsonl");
    std::fs::write(
        &file,
        "{\"resourceSpans\":[]}\n{\"resourceSpans\":[]}\n{\"resourceSpans\":[]}\n  {1:2}\n",
    )
    .unwrap();
    let out = run(&["check", "--input", file.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(
            "bad.jsonl: line 4: invalid OTLP/JSON ExportTraceServiceRequest: key must be a string (column 4)"
        ),
        "the column in the file's line, no `?` for a field it cannot name: {}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("line 1"),
        "no second line number: {}",
        out.stderr
    );
    let field = dir.join("field.jsonl");
    std::fs::write(
        &field,
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"zz\"}]}]}]}\n",
    )
    .unwrap();
    let out = run(&["check", "--input", field.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("line 1: invalid OTLP/JSON ExportTraceServiceRequest: resourceSpans[0].scopeSpans[0].spans[0].traceId: expected an id in hex"),
        "{}",
        out.stderr
    );

    let missing = dir.join("missing.jsonl");
    let out = run(&["check", "--input", missing.to_str().unwrap()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("missing.jsonl: cannot open: "),
        "{out:?}"
    );
    assert_eq!(
        out.stderr.matches("No such file or directory").count(),
        1,
        "the cause once: {}",
        out.stderr
    );
}

#[test]
fn record_writes_gzip_when_the_name_ends_in_gz() {
    let dir = scratch("cli_usage_record_gz");
    let path = dir.join("rec.jsonl.gz");
    let recorder = listen(&["record", "-o", path.to_str().unwrap()]);
    recorder.post("application/x-protobuf", reset_chain(1).encode_to_vec());
    // Each line is flushed as it comes: readable while the recording goes on.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 20 {
        assert!(std::time::Instant::now() < deadline, "nothing written");
        std::thread::sleep(Duration::from_millis(50));
    }
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip's magic bytes");
    let out = check_json(&path);
    assert_eq!(out.code, Some(1), "the reset is read back: {out:?}");
    assert_eq!(out.json()["summary"]["spans"], 5, "{out:?}");
    // A name without .gz is plain JSON, as before.
    let plain = dir.join("rec.jsonl");
    let recorder = listen(&["record", "-o", plain.to_str().unwrap()]);
    recorder.terminate(Duration::from_secs(30));
    assert!(std::fs::read(&plain).unwrap().is_empty());
}

/// Runs budget-top with a stderr pipe whose reading end is already closed, as
/// `budget-top check ... 2> >(head -c 0)` gives it (stdout read by nobody); the exit status.
fn run_with_closed_stderr(args: &[&str]) -> Option<i32> {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::process::Command::new(crate::support::bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap()
        .code()
}

#[test]
fn a_closed_stderr_never_turns_a_run_into_a_panic() {
    let dir = scratch("cli_usage_closed_stderr");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    // The refusal nobody can read still exits 2 (it panicked: 101).
    assert_eq!(
        run_with_closed_stderr(&["check", "--input", "/nonexistent/spans.jsonl"]),
        Some(2)
    );
    // The warning that nothing was read, then the report: exit 0 as with a reader.
    assert_eq!(
        run_with_closed_stderr(&["check", "--input", empty.to_str().unwrap()]),
        Some(0)
    );
    // A listening check's start-up lines and its warning at the end.
    let listening = [&["check"][..], &RECEIVERS_ON_PORT_0, &["--for", "200ms"]].concat();
    assert_eq!(run_with_closed_stderr(&listening), Some(0));
}

#[test]
fn max_findings_0_says_how_many_it_left_out_never_no_findings() {
    let dir = scratch("cli_usage_max_findings_0");
    let file = dir.join("resets.jsonl");
    std::fs::write(
        &file,
        format!(
            "{}\n{}\n",
            json_line(&reset_chain(1)),
            json_line(&reset_chain(2))
        ),
    )
    .unwrap();
    let page = dir.join("page.html");
    let out = run(&[
        "check",
        "--input",
        file.to_str().unwrap(),
        "--max-findings",
        "0",
        "--html",
        page.to_str().unwrap(),
    ]);
    // Two budget_reset errors counted, none listed: the gate fails, and nothing says
    // "no findings" (the text and the page both did).
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stdout.contains("findings: 2 error"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("FINDINGS\n2 more finding(s) are counted above and not listed"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("no findings"), "{}", out.stdout);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("id=\"omitted\""),
        "the page says what it left out"
    );
    assert!(
        !html.contains("id=\"no-findings\""),
        "the page says no findings"
    );
}
