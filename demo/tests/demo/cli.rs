//! The `budget-demo` binary: runs until `--for` ends or Ctrl-C, then stops cleanly (exit 0, the
//! spans of the run flushed to the endpoint).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::sink::Sink;

fn demo(args: &[&str], endpoint: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .args(args)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

async fn wait(mut child: std::process::Child, limit: Duration) -> (i32, String) {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("budget-demo did not stop within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_at_the_end_of_for_with_its_spans_flushed() {
    let sink = Sink::start().await;
    let child = demo(
        &["--for", "1s", "--rate", "5", "--time-scale", "0.25"],
        &sink.endpoint(),
    );
    let (code, stderr) = wait(child, Duration::from_secs(30)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("scenario fixed-timeout"),
        "without --scenario, the first where something goes wrong: {stderr}"
    );
    let servers = sink.spans().iter().filter(|s| s.kind == 2).count();
    assert!(
        servers >= 3,
        "the run's spans reached the endpoint: {servers}"
    );
}

#[test]
fn list_shows_every_scenario_its_lesson_and_its_cure() {
    let output = Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .arg("list")
        .output()
        .unwrap();
    assert!(output.status.success());
    let list = String::from_utf8_lossy(&output.stdout);
    for scenario in budget_demo::Scenario::ALL {
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("{:<17} ", scenario.name())))
            .unwrap_or_else(|| panic!("{scenario} missing:\n{list}"));
        assert!(line.ends_with(scenario.lesson()), "{line}");
        if scenario.has_cure() {
            assert!(
                list.contains(&format!("--cure: {}", scenario.cured_lesson())),
                "{list}"
            );
        }
    }
    assert_eq!(list.lines().filter(|l| !l.starts_with(' ')).count(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_it_cleanly() {
    let sink = Sink::start().await;
    let child = demo(
        &["--scenario", "no-cancel", "--time-scale", "0.25"],
        &sink.endpoint(),
    );
    // Let it start and send a few requests.
    let started = Instant::now();
    while sink.spans().is_empty() && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (code, stderr) = wait(child, Duration::from_secs(30)).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("sent "),
        "prints what the load saw: {stderr}"
    );
    // It adds up: every request sent is answered, failed, or abandoned when the load stopped.
    let line = stderr.lines().find(|l| l.starts_with("sent ")).unwrap();
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .filter(|n| ![503, 504].contains(n))
        .collect();
    assert_eq!(numbers.len(), 7, "{line}");
    assert_eq!(numbers[0], numbers[1..].iter().sum::<u64>(), "{line}");
    assert!(
        line.ends_with("abandoned in flight when the load stopped"),
        "{line}"
    );
    assert!(
        stderr.contains("spans: "),
        "says what was exported: {stderr}"
    );
}

fn run_to_end(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .args(args)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn budget_top_demos_own_flags_are_refused_pointing_at_it() {
    for args in [
        &["--check"][..],
        &["--workshop"],
        &["--format", "json"],
        &["--fail-on", "warning"],
        &["--html", "report.html"],
    ] {
        let output = run_to_end(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("budget-demo has no {}", args[0]))
                && stderr.contains(&format!("`budget-top demo {}`", args[0])),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn bad_values_are_refused_with_their_range() {
    // A CA file without a certificate, and an empty token file.
    let dir = std::env::temp_dir().join(format!("budget-demo-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_pem = dir.join("ca.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let empty = dir.join("token");
    std::fs::write(&empty, "").unwrap();
    let (not_pem, empty) = (
        not_pem.to_string_lossy().into_owned(),
        empty.to_string_lossy().into_owned(),
    );
    for (args, sentence) in [
        (&["--jitter", "2"][..], "must be from 0 to 1"),
        (&["--time-scale", "0"], "must be from 0.05 to 10"),
        (&["--rate", "0"], "must be from 0.01 to 10000"),
        (&["--requests", "0"], "must be at least 1"),
        (&["--for", "0s"], "must be longer than 0"),
        (
            &["--endpoint", "notaurl"],
            "expected a URL such as http://127.0.0.1:4317, or HOST:PORT",
        ),
        (
            &["--latency", "nosuch=5"],
            "no service \"nosuch\" in this scenario; it runs: bff, gateway, inventory, orders",
        ),
        (
            &["--clock-skew", "abc"],
            "must be whole milliseconds, e.g. 2000 ahead or -1500 behind",
        ),
        // Only absolute-deadline has a skewed clock: elsewhere the flag did nothing.
        (
            &["--scenario", "fixed-timeout", "--clock-skew", "500"],
            "scenario fixed-timeout has no such clock: add --scenario absolute-deadline",
        ),
        (
            &["load", "--grpc", "localhost:4317"],
            "expected IP:PORT, such as 127.0.0.1:4317 (a host name such as localhost is not looked up)",
        ),
        (
            &["load", "--grpc", "127.0.0.1:1", "--spans", "0"],
            "must be at least 1",
        ),
        (
            &["load", "--grpc", "127.0.0.1:1", "--batch", "0"],
            "must be at least 1",
        ),
        (
            &["load", "--grpc", "127.0.0.1:1", "--rate", "0"],
            "more than 0",
        ),
        (
            &[
                "load",
                "--grpc",
                "127.0.0.1:1",
                "--open-loop",
                "--rate",
                "9",
                "--max-inflight",
                "0",
            ],
            "must be at least 1",
        ),
        (
            &[
                "load",
                "--grpc",
                "127.0.0.1:1",
                "--tls-ca",
                "/nonexistent/ca.pem",
            ],
            "cannot read /nonexistent/ca.pem (--tls-ca)",
        ),
        (
            &["load", "--grpc", "127.0.0.1:1", "--tls-ca", &not_pem],
            "(--tls-ca) holds no certificate",
        ),
        (
            &[
                "load",
                "--grpc",
                "127.0.0.1:1",
                "--bearer-token-file",
                &empty,
            ],
            "(--bearer-token-file) is empty",
        ),
    ] {
        let output = run_to_end(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(sentence), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_listening_it_says_the_spans_went_nowhere() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let child = demo(
        &["--for", "1s", "--rate", "5", "--time-scale", "0.25"],
        &endpoint,
    );
    let (code, stderr) = wait(child, Duration::from_secs(30)).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("no span reached {endpoint}")),
        "{stderr}"
    );
    // The exporter's layers each add the cause: it is said once.
    assert!(
        stderr.contains("Connection refused")
            && !stderr.contains("tcp connect error: tcp connect error"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_says_when_it_sends_more_than_asked() {
    let sink = Sink::start().await;
    let output = tokio::task::spawn_blocking(move || {
        let output = run_to_end(&["load", "--grpc", &sink.addr.to_string(), "--spans", "100"]);
        (output, sink.spans().len())
    })
    .await
    .unwrap();
    let (output, received) = output;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    // Whole chains of 4 hops (8 spans) in one request no larger than asked: 13 chains.
    assert!(
        stderr
            .contains("sending 104 spans, not 100: requests of 104 spans, whole chains of 4 hops"),
        "{stderr}"
    );
    assert!(stdout.starts_with("spans sent: 104 "), "{stdout}");
    assert_eq!(received, 104);
}

#[test]
fn list_into_a_closed_pipe_is_no_panic() {
    // `budget-demo list | head -0`: println! panicked (exit 101) on the closed pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .arg("list")
        .stdout(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_stdout_and_stderr_closed_ends_as_it_would_with_readers() {
    let sink = Sink::start().await;
    let (err_reader, err_writer) = std::io::pipe().unwrap();
    let (out_reader, out_writer) = std::io::pipe().unwrap();
    drop(err_reader);
    drop(out_reader);
    let mut child = Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .args(["--for", "1s", "--rate", "5", "--time-scale", "0.25"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint())
        .stdin(Stdio::null())
        .stdout(out_writer)
        .stderr(err_writer)
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("budget-demo did not stop within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        status.code(),
        Some(0),
        "the scenario, the summary: unread, no panic"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cure_on_a_scenario_right_already_says_it_changes_nothing() {
    let sink = Sink::start().await;
    let child = demo(
        &[
            "--scenario",
            "propagate",
            "--cure",
            "--requests",
            "1",
            "--for",
            "1s",
            "--time-scale",
            "0.25",
        ],
        &sink.endpoint(),
    );
    let (code, stderr) = wait(child, Duration::from_secs(30)).await;
    assert_eq!(code, 0, "{stderr}");
    // It said `propagate (cured)`, as though there had been something to cure.
    assert!(
        stderr.contains("scenario propagate (right already: --cure changes nothing): "),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_with_for_says_the_rounded_count_is_a_bound() {
    // `load --open-loop --for 2s` may be ended by --for long before the rounded count is sent.
    let sink = Sink::start().await;
    let output = tokio::task::spawn_blocking(move || {
        run_to_end(&[
            "load",
            "--grpc",
            &sink.addr.to_string(),
            "--spans",
            "100",
            "--for",
            "30s",
        ])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("sending at most 104 spans, not 100: requests of 104 spans"),
        "{stderr}"
    );
}

#[test]
fn recording_into_a_closed_pipe_ends_quietly() {
    // `budget-demo recording -o - | head`: 'Error: Broken pipe (os error 32)' and exit 1.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .args(["recording", "--spans", "100000", "-o", "-"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn recording_of_one_line_says_line() {
    let dir = std::env::temp_dir().join(format!("recording-one-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("one.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_budget-demo"))
        .args(["recording", "--spans", "10", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("wrote 512 spans in 1 line of 512 (chains of 4 hops)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
