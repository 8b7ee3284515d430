//! `budget-top check --input FILE`: exit codes 0/1/2, gzip files, text and JSON reports.

use std::io::Write as _;

use deadline_budget::semconv as k;

use crate::support::{
    CLIENT, SERVER, call_budget, check_json, edge_budget, finding_names, hop_budget, int,
    json_line, request, reset_chain, run, scratch, span,
};

/// A healthy chain: the budget shrinks hop by hop, queue pressure on `worker` (a warning).
fn pressure_chain(t: u8) -> String {
    let mut worker = hop_budget(990, 390);
    worker.push(int(k::QUEUE_WAIT_MS, 600));
    json_line(&request(vec![
        (
            "api",
            vec![
                span(t, 1, 0, "POST /jobs", SERVER, 0, 300, edge_budget(1000)),
                span(
                    t,
                    2,
                    1,
                    "POST worker",
                    CLIENT,
                    5,
                    290,
                    call_budget(995, 990),
                ),
            ],
        ),
        (
            "worker",
            vec![span(t, 3, 2, "POST /work", SERVER, 10, 280, worker)],
        ),
    ]))
}

fn write(dir: &std::path::Path, name: &str, lines: &[String]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn exit_status_follows_fail_on() {
    let dir = scratch("check_exit_status");
    let warning_only = write(&dir, "warning.jsonl", &[pressure_chain(1)]);
    let out = run(&["check", "--input", &warning_only, "--format", "json"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        finding_names(&out.json()),
        vec![(
            "queue_pressure".into(),
            "worker".into(),
            "POST /work".into()
        )]
    );
    let out = run(&["check", "--input", &warning_only, "--fail-on", "warning"]);
    assert_eq!(out.code, Some(1), "{out:?}");

    let with_error = write(
        &dir,
        "error.jsonl",
        &[pressure_chain(1), String::new(), json_line(&reset_chain(2))],
    );
    let out = run(&["check", "--input", &with_error, "--format", "json"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2);
    assert_eq!(report["summary"]["findings"]["error"], 1);
    assert_eq!(report["summary"]["findings"]["warning"], 1);
    assert!(
        report.get("ingest").is_none(),
        "no receivers, no ingest counts"
    );
}

#[test]
fn text_report_has_a_table_per_chain_and_per_edge_without_colour_when_piped() {
    let dir = scratch("check_text");
    let file = write(&dir, "chains.jsonl", &[json_line(&reset_chain(3))]);
    let out = run(&["check", "--input", &file]);
    assert_eq!(out.code, Some(1));
    let text = &out.stdout;
    assert!(text.contains("1 traces, 5 spans"), "{text}");
    assert!(
        text.contains(&format!("chain {} frontend GET /checkout", "03".repeat(16))),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.contains("budget_reset"))
        .unwrap_or_else(|| panic!("no budget_reset row: {text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..3], ["error", "budget_reset", "orders"], "{row}");
    assert!(
        row.ends_with("forwarded 3000 ms with only 700 ms left"),
        "{row}"
    );
    assert!(text.contains("3,000/3,000 ms"), "edge percentiles: {text}");
    assert!(
        text.contains("EDGES") && text.contains("orders    inventory"),
        "{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn gzip_files_are_read() {
    let dir = scratch("check_gzip");
    let path = dir.join("chains.jsonl.gz");
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::default(),
    );
    writeln!(encoder, "{}", json_line(&reset_chain(4))).unwrap();
    encoder.finish().unwrap();
    let out = check_json(&path);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.json()["summary"]["spans"], 5);
}

#[test]
fn unreadable_input_exits_2_saying_what_and_where() {
    let dir = scratch("check_bad_input");
    let file = write(
        &dir,
        "bad.jsonl",
        &[pressure_chain(1), "{\"resourceSpans\": [oops".into()],
    );
    let out = run(&["check", "--input", &file]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("bad.jsonl: line 2: invalid OTLP/JSON"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());

    let out = run(&[
        "check",
        "--input",
        dir.join("missing.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("missing.jsonl: cannot open"),
        "{}",
        out.stderr
    );

    let out = run(&["check", "--format", "yaml"]);
    assert_eq!(out.code, Some(2), "bad usage: {out:?}");
}

/// A recorder killed mid-write leaves its last line cut short: everything before it is judged,
/// the line is named on stderr and counted (`ingest.lines_torn`), and the exit status is the
/// findings'. The same line anywhere else is a bad file.
#[test]
fn a_last_line_cut_short_is_skipped_with_a_warning_and_counted() {
    let dir = scratch("check_torn_line");
    let whole = json_line(&reset_chain(2));
    let cut = &whole[..whole.len() / 2];
    let path = dir.join("torn.jsonl");
    std::fs::write(&path, format!("{}\n{whole}\n{cut}", pressure_chain(1))).unwrap();
    let file = path.to_string_lossy().into_owned();
    let out = run(&["check", "--input", &file, "--format", "json"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("torn.jsonl: line 3: the last line is cut short"),
        "{}",
        out.stderr
    );
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2);
    assert_eq!(report["ingest"]["lines_torn"], 1);
    // The text report too: the same warning, the same verdict.
    let out = run(&["check", "--input", &file]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("line 3: the last line is cut short"));

    // On standard input as well.
    use std::process::{Command, Stdio};
    let mut child = Command::new(crate::support::bin())
        .args(["check", "--input", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(std::fs::read(&path).unwrap().as_slice())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ingest"]["lines_torn"], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("-: line 3: the last line is cut short"));

    // Cut short in the middle: a bad line, exit 2, named.
    let middle = write(
        &dir,
        "middle.jsonl",
        &[pressure_chain(1), cut.to_owned(), whole],
    );
    let out = run(&["check", "--input", &middle]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr
            .contains("middle.jsonl: line 2: invalid OTLP/JSON"),
        "{}",
        out.stderr
    );
}

#[test]
fn spans_with_bad_ids_in_a_file_are_skipped_with_a_warning() {
    let dir = scratch("check_bad_ids");
    let mut req = reset_chain(5);
    req.resource_spans[0].scope_spans[0].spans[0].trace_id = vec![1; 5];
    let file = write(&dir, "ids.jsonl", &[json_line(&req)]);
    let out = run(&["check", "--input", &file, "--format", "json"]);
    assert_eq!(out.json()["summary"]["spans"], 4);
    assert!(
        out.stderr.contains(
            "line 1: 1 span(s) skipped: span \"GET /checkout\": trace_id must be 16 bytes, got 5"
        ),
        "{}",
        out.stderr
    );
}

/// The lines are decoded on several threads: what is said about them still comes in the order
/// of the lines, blank lines and a cut last line included.
#[test]
fn warnings_about_many_lines_come_in_the_order_of_the_lines() {
    let dir = scratch("check_warning_order");
    let mut lines = Vec::new();
    for i in 0..9u8 {
        let mut req = reset_chain(10 + i);
        req.resource_spans[0].scope_spans[0].spans[0].trace_id = vec![1; 5];
        lines.push(json_line(&req));
        lines.push(String::new());
    }
    let cut = json_line(&reset_chain(30));
    lines.push(cut[..cut.len() / 2].to_owned());
    let file = write(&dir, "order.jsonl", &lines);
    let out = run(&["check", "--input", &file, "--format", "json"]);
    assert_eq!(out.json()["summary"]["spans"], 9 * 4, "{}", out.stderr);
    let told: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.split(": line ").nth(1))
        .filter_map(|l| l.split(':').next())
        .collect();
    assert_eq!(
        told,
        ["1", "3", "5", "7", "9", "11", "13", "15", "17", "19"],
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("order.jsonl: line 19: the last line is cut short"),
        "{}",
        out.stderr
    );
}

#[test]
fn collector_style_batches_with_many_resources_and_scopes_are_read() {
    use opentelemetry_proto::tonic::trace::v1::ScopeSpans;
    // What the OpenTelemetry Collector's batching sends: one request, several resources, each
    // with several scopes, mixing traces.
    let mut req = reset_chain(1);
    let other = reset_chain(2);
    for (mine, theirs) in req.resource_spans.iter_mut().zip(other.resource_spans) {
        let spans = theirs.scope_spans.into_iter().flat_map(|s| s.spans);
        for span in spans {
            mine.scope_spans.push(ScopeSpans {
                spans: vec![span],
                ..Default::default()
            });
        }
    }
    let dir = scratch("check_collector_batches");
    let file = write(&dir, "batched.jsonl", &[json_line(&req)]);
    let out = run(&["check", "--input", &file, "--format", "json"]);
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2, "{report:#}");
    assert_eq!(report["summary"]["spans"], 10);
    assert_eq!(report["summary"]["findings"]["error"], 2);
}

/// `edge` forwards 400 ms; `backend` shows only a captured header saying it got more.
fn captured_header_chain(
    t: u8,
    key: &str,
    value: opentelemetry_proto::tonic::common::v1::any_value::Value,
) -> String {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
    let header = KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    };
    json_line(&request(vec![
        (
            "edge",
            vec![
                span(t, 1, 0, "GET /api", SERVER, 0, 100, edge_budget(500)),
                span(t, 2, 1, "GET backend", CLIENT, 5, 95, call_budget(495, 400)),
            ],
        ),
        (
            "backend",
            vec![span(t, 3, 2, "GET /data", SERVER, 10, 90, vec![header])],
        ),
    ]))
}

#[test]
fn budgets_from_captured_headers_alone_are_understood() {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, any_value::Value};
    let deadline_ms = (crate::support::T0 / crate::support::MS) as i64 + 10 + 5000;
    let cases = [
        (k::HTTP_HEADER_BUDGET_MS, Value::StringValue("5000".into())),
        (
            k::HTTP_HEADER_GRPC_TIMEOUT,
            Value::ArrayValue(ArrayValue {
                values: vec![AnyValue {
                    value: Some(Value::StringValue("5S".into())),
                }],
            }),
        ),
        (
            k::RPC_METADATA_GRPC_TIMEOUT,
            Value::StringValue("5000m".into()),
        ),
        (
            k::HTTP_HEADER_REQUEST_DEADLINE,
            Value::StringValue(deadline_ms.to_string()),
        ),
    ];
    let dir = scratch("check_captured_headers");
    for (i, (key, value)) in cases.into_iter().enumerate() {
        let file = write(
            &dir,
            &format!("{i}.jsonl"),
            &[captured_header_chain(1, key, value)],
        );
        let out = run(&["check", "--input", &file, "--format", "json"]);
        let report = out.json();
        let reset = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == "budget_reset" && f["service"] == "backend")
            .unwrap_or_else(|| panic!("{key}: no budget_reset on backend: {report:#}"));
        assert_eq!(reset["received_ms"], 5000, "{key}: {reset}");
        assert_eq!(reset["forwarded_ms"], 400, "{key}: {reset}");
    }
}

#[test]
fn stdin_is_read_with_a_dash_and_evictions_are_warned_about() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(crate::support::bin())
        .args([
            "check",
            "--input",
            "-",
            "--format",
            "json",
            "--max-spans",
            "5",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = format!(
        "{}\n{}\n",
        json_line(&reset_chain(1)),
        json_line(&reset_chain(2))
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // Only the newest chain fits in 5 spans; the first is judged as it is let go, and both
    // are counted.
    assert_eq!(report["summary"]["traces"], 2, "{report}");
    assert_eq!(report["summary"]["findings"]["error"], 2, "{report}");
    assert_eq!(report["ingest"]["chains_evicted"], 1, "{report}");
    assert!(
        stderr.contains("1 chain(s) (5 spans) were judged and let go"),
        "{stderr}"
    );
}

#[test]
fn a_chain_100_000_hops_deep_with_a_parent_cycle_is_checked_without_overflow() {
    use opentelemetry_proto::tonic::trace::v1::Span;
    let n: u32 = 100_000;
    let id = |i: u32| {
        let mut v = vec![0u8; 8];
        v[4..].copy_from_slice(&(i + 1).to_be_bytes());
        v
    };
    let spans: Vec<Span> = (0..n)
        .map(|i| Span {
            trace_id: vec![7; 16],
            span_id: id(i),
            // Each hop's parent is the one before; the first names the last: one big cycle.
            parent_span_id: id(if i == 0 { n - 1 } else { i - 1 }),
            name: "hop".into(),
            kind: if i % 2 == 0 { SERVER } else { CLIENT },
            start_time_unix_nano: crate::support::T0 + u64::from(i) * 1000,
            end_time_unix_nano: crate::support::T0 + 10_000_000_000 - u64::from(i) * 1000,
            ..Default::default()
        })
        .collect();
    let dir = scratch("check_deep_chain");
    let file = write(
        &dir,
        "deep.jsonl",
        &[json_line(&request(vec![("deep", spans)]))],
    );
    let out = run(&["check", "--input", &file, "--format", "json"]);
    assert!(matches!(out.code, Some(0 | 1)), "{}", out.stderr);
    assert_eq!(out.json()["summary"]["spans"], u64::from(n));
}

/// Every chain judged once and counted once (CONVENTIONS §6): 3,000 chains with a reset and
/// work for nobody each, read with a --max-spans that holds a fifth of them, give the same
/// report as holding them all, and every chain is in it.
#[test]
fn every_chain_is_counted_once_whatever_max_spans_holds() {
    let dir = scratch("check_counted_once");
    let path = dir.join("chains.jsonl");
    let mut lines = Vec::new();
    for n in 0..3000u16 {
        let mut request = reset_chain(1);
        for rs in &mut request.resource_spans {
            for ss in &mut rs.scope_spans {
                for span in &mut ss.spans {
                    span.trace_id[..2].copy_from_slice(&n.to_be_bytes());
                    if span.name == "GET /stock" {
                        // inventory works on 120 ms after orders stopped waiting for it.
                        span.end_time_unix_nano = crate::support::T0 + 200 * crate::support::MS;
                    }
                }
            }
        }
        lines.push(json_line(&request));
    }
    std::fs::write(&path, lines.join("\n")).unwrap();
    let report = |extra: &[&str]| {
        let mut args = vec![
            "check",
            "--input",
            path.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let mut json = run(&args).json();
        json.as_object_mut().unwrap().remove("ingest");
        json["findings"]
            .as_array_mut()
            .unwrap()
            .sort_by_key(|f| f.to_string());
        json
    };
    let all = report(&[]);
    let bounded = report(&["--max-spans", "3000"]);
    let s = &all["summary"];
    assert_eq!(s["traces"], 3000, "{s}");
    assert_eq!(s["findings_by_kind"]["orphaned_work"], 3000, "{s}");
    assert_eq!(s["findings_by_kind"]["budget_reset"], 3000, "{s}");
    assert!(s["wasted_ms"].as_i64().unwrap() >= 3000 * 100, "{s}");
    assert_eq!(bounded, all);
}
