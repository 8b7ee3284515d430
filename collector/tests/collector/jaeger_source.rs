//! `check --jaeger` and `replay --jaeger` against a real Jaeger v2 (`jaeger.rs`): the demo's
//! fixed-timeout spans, recorded and sent to Jaeger's OTLP port, judged from its query API as
//! the recording is judged; `--service`, `--since`, `--from`/`--to`, `--limit`; a token checked
//! by a proxy in front of Jaeger; TLS on Jaeger's own query API; and each error.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde_json::Value as Json;

use crate::jaeger::{Jaeger, jaeger_or_skip};
use crate::support::demo::record_demo;
use crate::support::{Finished, T0, check_json, json_line, run, scratch};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// serve's reset chain (frontend → orders → inventory, one `budget_reset` at orders) as trace
/// `n`, its root service named `root`, moved to start at `start_ns`.
pub fn chain_at(n: u32, root: &str, start_ns: u64) -> ExportTraceServiceRequest {
    let mut request = crate::serve::chain(n, root);
    for span in request
        .resource_spans
        .iter_mut()
        .flat_map(|r| &mut r.scope_spans)
        .flat_map(|s| &mut s.spans)
    {
        span.start_time_unix_nano = span.start_time_unix_nano - T0 + start_ns;
        span.end_time_unix_nano = span.end_time_unix_nano - T0 + start_ns;
    }
    request
}

/// The trace id of [`chain_at`]'s trace `n`, in hex.
fn trace_hex(n: u32) -> String {
    format!("{}{:08x}", "07".repeat(12), n)
}

/// The demo's fixed-timeout scenario, 10 requests at twice the workshop's speed, recorded by
/// `budget-top record`: the file.
fn demo_recording(name: &str) -> std::path::PathBuf {
    use budget_demo::{LoadPlan, Scenario};
    let path = scratch(name).join("fixed-timeout.jsonl");
    let load = LoadPlan {
        rate: 5.0,
        jitter: 0.0,
        requests: Some(10),
        ..LoadPlan::default()
    };
    record_demo(&path, 0.5, &[(Scenario::FixedTimeout, load)]);
    path
}

/// The findings as (kind, trace, span, service, message, wasted ms), sorted: what two reports
/// of the same spans must agree on whatever order the chains came in.
fn findings(report: &Json) -> Vec<(String, String, String, String, String, Option<i64>)> {
    let mut out: Vec<_> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (
                s("kind"),
                s("trace_id"),
                s("span_id"),
                s("service"),
                s("message"),
                f["wasted_ms"].as_i64(),
            )
        })
        .collect();
    out.sort();
    out
}

#[track_caller]
fn check_jaeger(jaeger: &Jaeger, args: &[&str]) -> Finished {
    let mut all = vec![
        "check",
        "--jaeger",
        jaeger.query.as_str(),
        "--format",
        "json",
    ];
    all.extend_from_slice(args);
    run(&all)
}

#[test]
fn check_jaeger_judges_the_demo_spans_as_check_input_judges_their_recording() {
    let Some(bin) =
        jaeger_or_skip("check_jaeger_judges_the_demo_spans_as_check_input_judges_their_recording")
    else {
        return;
    };
    let recording = demo_recording("jaeger_source_demo");
    let jaeger = Jaeger::start(&bin);
    let text = std::fs::read_to_string(&recording).unwrap();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        jaeger.send(line);
    }
    let from_file = check_json(&recording);
    let file = from_file.json();
    let traces = file["summary"]["traces"].as_u64().unwrap();
    assert!(traces >= 10, "{}", from_file.stdout);
    jaeger.wait_for_traces("gateway", traces as usize, Duration::from_secs(30));

    let from_jaeger = check_jaeger(&jaeger, &[]);
    assert_eq!(from_jaeger.code, from_file.code, "{from_jaeger:?}");
    assert_eq!(
        from_file.code,
        Some(1),
        "fixed-timeout's resets are errors: {from_file:?}"
    );
    let report = from_jaeger.json();
    for figure in [
        "traces",
        "spans",
        "hops",
        "wasted_ms",
        "outcomes",
        "findings",
        "coverage",
    ] {
        assert_eq!(
            report["summary"][figure], file["summary"][figure],
            "summary.{figure}: {}",
            from_jaeger.stderr
        );
    }
    assert!(file["summary"]["wasted_ms"].as_i64().unwrap() > 0);
    assert_eq!(findings(&report), findings(&file));
    assert_eq!(
        report["edges"].as_array().map(Vec::len),
        file["edges"].as_array().map(Vec::len)
    );
    // What was asked and what came back: every service Jaeger lists, each trace read once.
    let source = &report["source"];
    assert_eq!(source["traces"], traces, "{source}");
    assert_eq!(source["every_service"], true, "{source}");
    assert_eq!(source["cut_at_limit"], serde_json::json!([]), "{source}");
    assert!(
        source["traces_answered"].as_u64().unwrap() > traces,
        "{source}"
    );
    assert!(
        from_jaeger
            .stderr
            .contains(&format!("jaeger {}: asked 4 services", jaeger.query))
            && from_jaeger
                .stderr
                .contains(&format!("read {traces} traces")),
        "{}",
        from_jaeger.stderr
    );
    // Each finding links to its trace in Jaeger's UI.
    for f in report["findings"].as_array().unwrap() {
        assert_eq!(
            f["trace_url"].as_str().unwrap(),
            format!("{}/trace/{}", jaeger.query, f["trace_id"].as_str().unwrap())
        );
    }

    // The same as text, and the page, with the same exit status.
    let dir = recording.parent().unwrap();
    let page = dir.join("jaeger.html");
    let text = run(&[
        "check",
        "--jaeger",
        &jaeger.query,
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(text.code, Some(1), "{text:?}");
    let first = &report["findings"][0]["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.stdout
            .contains(&format!("  trace: {}/trace/{first}\n", jaeger.query)),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("jaeger http://127.0.0.1:"),
        "{}",
        text.stdout
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("href=\"{}/trace/", jaeger.query)),
        "the page links to Jaeger"
    );
    jaeger.stop();
}

#[test]
fn service_since_from_to_and_limit_choose_what_is_read() {
    let Some(bin) = jaeger_or_skip("service_since_from_to_and_limit_choose_what_is_read") else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let now = now_ns();
    let minute = 60_000_000_000u64;
    // 5 chains of frontend 10 minutes ago, 3 of it 2 hours ago, 4 of mobile 5 minutes ago.
    for n in 0..5 {
        jaeger.send(&json_line(&chain_at(n, "frontend", now - 10 * minute)));
    }
    for n in 5..8 {
        jaeger.send(&json_line(&chain_at(n, "frontend", now - 120 * minute)));
    }
    for n in 8..12 {
        jaeger.send(&json_line(&chain_at(n, "mobile", now - 5 * minute)));
    }
    jaeger.wait_for_traces("orders", 12, Duration::from_secs(30));
    let traces = |out: &Finished| -> u64 {
        assert_eq!(out.code, Some(1), "{out:?}");
        out.json()["summary"]["traces"].as_u64().unwrap()
    };

    assert_eq!(traces(&check_jaeger(&jaeger, &["--service", "mobile"])), 4);
    assert_eq!(
        traces(&check_jaeger(
            &jaeger,
            &["--service", "mobile", "--service", "frontend"]
        )),
        9
    );
    // Every service (frontend, mobile, orders, inventory): each trace once.
    let all = check_jaeger(&jaeger, &[]);
    assert_eq!(traces(&all), 9, "the last hour: {}", all.stderr);
    assert_eq!(all.json()["source"]["traces_answered"], 5 + 4 + 9 + 9);
    assert_eq!(traces(&check_jaeger(&jaeger, &["--since", "3h"])), 12);
    assert_eq!(traces(&check_jaeger(&jaeger, &["--since", "7m"])), 4);

    // The window given as RFC 3339: the three old chains alone.
    let (from, to) = (
        budget_top::jaeger::rfc3339(now - 150 * minute),
        budget_top::jaeger::rfc3339(now - 60 * minute),
    );
    let old = check_jaeger(&jaeger, &["--from", &from, "--to", &to]);
    assert_eq!(traces(&old), 3, "{}", old.stderr);
    assert_eq!(old.json()["source"]["from"], from);

    // --limit cuts the search, and stderr and the report say where.
    let cut = check_jaeger(
        &jaeger,
        &["--service", "orders", "--since", "3h", "--limit", "2"],
    );
    assert_eq!(traces(&cut), 2, "{}", cut.stderr);
    assert_eq!(
        cut.json()["source"]["cut_at_limit"],
        serde_json::json!(["orders"])
    );
    assert!(
        cut.stderr
            .contains("Jaeger cut the search at --limit 2 for orders"),
        "{}",
        cut.stderr
    );
    let uncut = check_jaeger(
        &jaeger,
        &["--service", "orders", "--since", "3h", "--limit", "12"],
    );
    assert!(
        uncut.stderr.contains("no search reached --limit"),
        "{}",
        uncut.stderr
    );
    jaeger.stop();
}

#[test]
fn a_chain_the_window_cuts_is_judged_as_partial_and_counted() {
    let Some(bin) = jaeger_or_skip("a_chain_the_window_cuts_is_judged_as_partial_and_counted")
    else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let second = 1_000_000_000u64;
    // --from falls 3 ms into chain 1: its root (at 0 ms) is before it, every other span after.
    let from = (now_ns() / second - 600) * second;
    jaeger.send(&json_line(&chain_at(1, "frontend", from - 3_000_000)));
    jaeger.send(&json_line(&chain_at(2, "frontend", from + 60 * second)));
    jaeger.wait_for_traces("orders", 2, Duration::from_secs(30));
    let from = budget_top::jaeger::rfc3339(from);
    let out = check_jaeger(&jaeger, &["--from", &from]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2, "{report}");
    assert_eq!(report["source"]["chains_cut_by_window"], 1, "{report}");
    assert_eq!(report["source"]["spans_before_window"], 1, "{report}");
    // Its root left out: the chain is partial, never judged ok or failed.
    assert_eq!(report["summary"]["outcomes"]["in_flight"], 1, "{report}");
    assert_eq!(report["summary"]["outcomes"]["ok"], 1, "{report}");
    assert!(
        out.stderr.contains("1 chain began before the window: their 1 span before it are left out, and they are judged as partial"),
        "{}",
        out.stderr
    );
    let text = run(&["check", "--jaeger", &jaeger.query, "--from", &from]);
    assert!(text.stdout.contains("judged as partial"), "{}", text.stdout);
    jaeger.stop();
}

#[test]
fn trace_ids_are_read_whole_and_one_jaeger_lacks_is_an_error() {
    let Some(bin) = jaeger_or_skip("trace_ids_are_read_whole_and_one_jaeger_lacks_is_an_error")
    else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    for n in 0..3 {
        jaeger.send(&json_line(&chain_at(
            n,
            "frontend",
            now_ns() - 60_000_000_000,
        )));
    }
    jaeger.wait_for_traces("orders", 3, Duration::from_secs(30));
    let two = check_jaeger(
        &jaeger,
        &["--trace-id", &trace_hex(0), "--trace-id", &trace_hex(2)],
    );
    assert_eq!(two.code, Some(1), "{two:?}");
    let report = two.json();
    assert_eq!(report["summary"]["traces"], 2);
    assert_eq!(report["summary"]["spans"], 10);
    let missing = trace_hex(77);
    let out = check_jaeger(
        &jaeger,
        &["--trace-id", &trace_hex(0), "--trace-id", &missing],
    );
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "trace {missing} is not in Jaeger: GET {}/api/v3/traces/{missing}",
            jaeger.query
        )) && out.stderr.contains("answered 404"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    jaeger.stop();
}

/// `app` served on a loopback port by a runtime of its own (its thread serves while the test
/// waits on a command): the address, and the runtime that ends it when dropped.
fn serve_app(app: axum::Router) -> (SocketAddr, tokio::runtime::Runtime) {
    let runtime = crate::support::threaded_runtime(1);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, runtime)
}

/// A reverse proxy in front of Jaeger, as a team puts one (Jaeger checks no token itself):
/// every request must carry `Authorization: Bearer <token>`, else 401.
fn token_proxy(upstream: String, token: &'static str) -> (SocketAddr, tokio::runtime::Runtime) {
    use axum::extract::Request;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    serve_app(axum::Router::new().fallback(move |request: Request| {
        let upstream = upstream.clone();
        async move {
            let wanted = format!("Bearer {token}");
            let given = request
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok());
            if given != Some(wanted.as_str()) {
                return (StatusCode::UNAUTHORIZED, "401 Authorization Required\n").into_response();
            }
            let path = request
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            let answer = reqwest::get(format!("{upstream}{path}")).await.unwrap();
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            let body = answer.bytes().await.unwrap();
            Response::builder()
                .status(status)
                .body(axum::body::Body::from(body))
                .unwrap()
        }
    }))
}

#[test]
fn the_token_reaches_what_stands_in_front_of_jaeger() {
    let Some(bin) = jaeger_or_skip("the_token_reaches_what_stands_in_front_of_jaeger") else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    jaeger.send(&json_line(&chain_at(
        1,
        "frontend",
        now_ns() - 60_000_000_000,
    )));
    jaeger.wait_for_traces("orders", 1, Duration::from_secs(30));
    let (proxy, _runtime) = token_proxy(jaeger.query.clone(), "s3cret");
    let url = format!("http://{proxy}");
    let dir = scratch("jaeger_token");
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "guess\n").unwrap();

    let ok = run(&[
        "check",
        "--jaeger",
        &url,
        "--jaeger-token-file",
        token.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(ok.code, Some(1), "{ok:?}");
    assert_eq!(ok.json()["summary"]["traces"], 1);
    for args in [vec![], vec!["--jaeger-token-file", wrong.to_str().unwrap()]] {
        let mut all = vec!["check", "--jaeger", url.as_str()];
        all.extend(args);
        let out = run(&all);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(
            out.stderr.contains(&format!(
                "GET {url}/api/v3/services answered 401 Unauthorized: 401 Authorization Required"
            )) && out.stderr.contains("--jaeger-token-file"),
            "{}",
            out.stderr
        );
    }
    let empty = dir.join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let out = run(&[
        "check",
        "--jaeger",
        &url,
        "--jaeger-token-file",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("is empty (--jaeger-token-file)"),
        "{}",
        out.stderr
    );
    jaeger.stop();
}

#[test]
fn jaeger_over_tls_is_read_with_its_ca() {
    let Some(bin) = jaeger_or_skip("jaeger_over_tls_is_read_with_its_ca") else {
        return;
    };
    let dir = scratch("jaeger_tls");
    let authority = crate::tls::ca();
    let (cert, key) = crate::tls::issue(&authority, &["localhost"], false);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (ca, cert, key) = (
        write("ca.pem", &authority.pem()),
        write("jaeger.pem", &cert),
        write("jaeger.key", &key),
    );
    let stranger = write("stranger.pem", &crate::tls::ca().pem());
    let overlay = write(
        "tls.yaml",
        &format!(
            "extensions:\n  jaeger_query:\n    http:\n      tls:\n        cert_file: {}\n        key_file: {}\n",
            cert.display(),
            key.display()
        ),
    );
    let jaeger = Jaeger::start_with(&bin, Some(&overlay));
    jaeger.send(&json_line(&chain_at(
        1,
        "frontend",
        now_ns() - 60_000_000_000,
    )));
    let url = format!("https://localhost:{}", jaeger.query_port);
    // Stored a batch after it was sent: read until it is there (at most 30 s).
    let until = Instant::now() + Duration::from_secs(30);
    let report = loop {
        let out = run(&[
            "check",
            "--jaeger",
            &url,
            "--jaeger-ca",
            ca.to_str().unwrap(),
            "--format",
            "json",
        ]);
        if out.code == Some(1) {
            break out.json();
        }
        assert!(out.code == Some(0) && Instant::now() < until, "{out:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(report["summary"]["traces"], 1);
    assert_eq!(
        report["findings"][0]["trace_url"],
        format!("{url}/trace/{}", trace_hex(1))
    );
    for ca in [None, Some(&stranger)] {
        let mut args = vec!["check", "--jaeger", url.as_str()];
        if let Some(ca) = ca {
            args.extend(["--jaeger-ca", ca.to_str().unwrap()]);
        }
        let out = run(&args);
        assert_eq!(out.code, Some(2), "{out:?}");
        assert!(
            out.stderr.contains(&format!(
                "GET {url}/api/v3/services: the TLS handshake failed"
            )) && out.stderr.contains("--jaeger-ca"),
            "{}",
            out.stderr
        );
    }
    // Plain HTTP to the TLS port: Jaeger's answer is not the API's.
    let plain = run(&[
        "check",
        "--jaeger",
        &format!("http://127.0.0.1:{}", jaeger.query_port),
    ]);
    assert_eq!(plain.code, Some(2), "{plain:?}");
    assert!(
        plain
            .stderr
            .starts_with("budget-top: GET http://127.0.0.1:"),
        "{}",
        plain.stderr
    );
    jaeger.stop();
}

/// A server that answers every GET with `status` and `body`: what stands at a wrong address.
fn answering(status: u16, body: &'static str) -> (String, tokio::runtime::Runtime) {
    let (addr, runtime) = serve_app(axum::Router::new().fallback(move || async move {
        (axum::http::StatusCode::from_u16(status).unwrap(), body)
    }));
    (format!("http://{addr}"), runtime)
}

#[test]
fn each_failure_to_read_jaeger_is_a_sentence_and_exit_2() {
    let Some(bin) = jaeger_or_skip("each_failure_to_read_jaeger_is_a_sentence_and_exit_2") else {
        return;
    };
    let expect = |args: &[&str], words: &[&str]| {
        let mut all = vec!["check"];
        all.extend_from_slice(args);
        let out = run(&all);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert_eq!(
            out.stderr.lines().filter(|l| !l.is_empty()).count(),
            1,
            "one sentence: {}",
            out.stderr
        );
        for w in words {
            assert!(
                out.stderr.contains(w),
                "{args:?}: {w:?} not in {}",
                out.stderr
            );
        }
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    };
    // Nobody listens.
    let closed = crate::otelcol_tier1::free_port();
    expect(
        &["--jaeger", &format!("http://{closed}")],
        &[
            "cannot reach Jaeger: GET http://",
            "/api/v3/services",
            "Connection refused",
        ],
    );
    // A 5xx and a 4xx, named with their URL.
    let (server_error, _a) = answering(503, "upstream connect error");
    expect(
        &["--jaeger", &server_error],
        &[&format!(
            "GET {server_error}/api/v3/services answered 503 Service Unavailable: upstream connect error"
        )],
    );
    let (html, _b) = answering(200, "<html><body>Please log in</body></html>");
    expect(
        &["--jaeger", &html],
        &[&format!(
            "GET {html}/api/v3/services did not answer OTLP JSON"
        )],
    );
    // A real Jaeger: a search deeper than its store holds is its own 500; a service's search
    // that answers something else than OTLP JSON is refused.
    let jaeger = Jaeger::start(&bin);
    jaeger.send(&json_line(&chain_at(
        1,
        "frontend",
        now_ns() - 60_000_000_000,
    )));
    jaeger.wait_for_traces("orders", 1, Duration::from_secs(30));
    expect(
        &["--jaeger", &jaeger.query, "--limit", "2000000"],
        &[
            "/api/v3/traces?query.service_name=",
            "answered 500 Internal Server Error",
            "search depth",
        ],
    );
    // The wrong port: Jaeger's OTLP receiver, which is not its query API.
    expect(
        &["--jaeger", &format!("http://{}", jaeger.otlp_http)],
        &[&format!(
            "GET http://{}/api/v3/services answered 404",
            jaeger.otlp_http
        )],
    );
    jaeger.stop();
    // Usage: refused by the command line, before anything is asked.
    for (args, words) in [
        (
            vec!["--jaeger", "localhost:16686"],
            "must start with http:// or https://",
        ),
        (vec!["--service", "x"], "--jaeger"),
        (
            vec!["--jaeger", "http://127.0.0.1:9", "--input", "x.jsonl"],
            "cannot be used with",
        ),
        (
            vec!["--jaeger", "http://127.0.0.1:9", "--idle", "3s"],
            "cannot be used with",
        ),
        (
            vec!["--jaeger", "http://127.0.0.1:9", "--from", "yesterday"],
            "RFC 3339",
        ),
        (
            vec![
                "--jaeger",
                "http://127.0.0.1:9",
                "--since",
                "1h",
                "--from",
                "2026-01-01T00:00:00Z",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "--jaeger",
                "http://127.0.0.1:9",
                "--from",
                "2026-01-02T00:00:00Z",
                "--to",
                "2026-01-01T00:00:00Z",
            ],
            "is not before --to",
        ),
        (
            vec!["--jaeger", "http://127.0.0.1:9", "--trace-id", "abc"],
            "32 hex digits",
        ),
        (
            vec![
                "--jaeger",
                "http://127.0.0.1:9",
                "--jaeger-ca",
                "/nonexistent.pem",
            ],
            "--jaeger-ca is for an https:// URL",
        ),
    ] {
        let mut all = vec!["check"];
        all.extend(args.iter().copied());
        let out = run(&all);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(words),
            "{args:?}: {words:?} not in {}",
            out.stderr
        );
    }
    let missing_ca = run(&[
        "check",
        "--jaeger",
        "https://127.0.0.1:9",
        "--jaeger-ca",
        "/nonexistent.pem",
    ]);
    assert_eq!(missing_ca.code, Some(2), "{missing_ca:?}");
    assert!(
        missing_ca.stderr.contains("/nonexistent.pem (--jaeger-ca)"),
        "{}",
        missing_ca.stderr
    );
}

/// `replay --jaeger` reads before it takes the terminal: a Jaeger it cannot reach is the same
/// sentence and exit 2, with no screen drawn.
#[test]
fn replay_jaeger_fails_before_the_screen_as_check_does() {
    let closed = crate::otelcol_tier1::free_port();
    let out = run(&["replay", "--jaeger", &format!("http://{closed}")]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("cannot reach Jaeger"), "{}", out.stderr);
    let out = run(&["replay"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    let out = run(&["replay", "x.jsonl", "--jaeger", "http://127.0.0.1:9"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
}
