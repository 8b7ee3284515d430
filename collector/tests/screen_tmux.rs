//! The real binary on a real terminal: start `budget-top` in a tmux pane, send it one request
//! chain over OTLP/HTTP (JSON), check that the chain list and the finding are on screen, press
//! `q` and check that the shell gets the terminal back. Skipped (with a message) without tmux.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("run tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
fn wait_for(session: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pane = tmux(&["capture-pane", "-p", "-t", session]);
        if pane.contains(needle) {
            return pane;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared; the pane shows:\n{pane}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn attr_int(key: &str, v: i64) -> serde_json::Value {
    serde_json::json!({ "key": key, "value": { "intValue": v.to_string() } })
}

fn attr_str(key: &str, v: &str) -> serde_json::Value {
    serde_json::json!({ "key": key, "value": { "stringValue": v } })
}

/// One chain: orders forwards 3000 ms with 700 ms left (a reset), inventory keeps working.
fn export_request() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let t = |ms: u64| (now - 2_000_000_000 + ms * 1_000_000).to_string();
    let trace = "5b8efff798038103d269b633813fc60c";
    let span = |id: &str,
                parent: Option<&str>,
                name: &str,
                kind: u8,
                s: u64,
                e: u64,
                attrs: Vec<serde_json::Value>| {
        let mut v = serde_json::json!({
            "traceId": trace, "spanId": id, "name": name, "kind": kind,
            "startTimeUnixNano": t(s), "endTimeUnixNano": t(e), "attributes": attrs,
        });
        if let Some(p) = parent {
            v["parentSpanId"] = serde_json::json!(p);
        }
        v
    };
    let resource = |service: &str, spans: Vec<serde_json::Value>| {
        serde_json::json!({
            "resource": { "attributes": [attr_str("service.name", service)] },
            "scopeSpans": [ { "spans": spans } ],
        })
    };
    let orders = resource(
        "orders",
        vec![
            span(
                "1000000000000001",
                None,
                "POST /orders",
                2,
                0,
                800,
                vec![
                    attr_str("budget.source", "default"),
                    attr_int("budget.default_ms", 800),
                    attr_int("budget.remaining_at_start_ms", 800),
                    attr_str("budget.outcome", "ok"),
                ],
            ),
            span(
                "1000000000000002",
                Some("1000000000000001"),
                "GET inventory",
                3,
                100,
                800,
                vec![
                    attr_int("budget.remaining_ms", 700),
                    attr_int("budget.forwarded_ms", 3000),
                    attr_int("budget.timeout_ms", 700),
                ],
            ),
        ],
    );
    let inventory = resource(
        "inventory",
        vec![span(
            "1000000000000003",
            Some("1000000000000002"),
            "GET /stock",
            2,
            105,
            1080,
            vec![
                attr_str("budget.source", "x-budget-ms"),
                attr_int("budget.received_ms", 3000),
                attr_int("budget.remaining_at_start_ms", 3000),
                attr_str("budget.outcome", "ok"),
            ],
        )],
    );
    serde_json::json!({ "resourceSpans": [orders, inventory] }).to_string()
}

fn post(port: u16, body: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn the_real_screen_shows_a_chain_and_gives_the_terminal_back() {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("tmux is not installed: skipping the terminal test");
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let name = format!("budget-top-screen-{}", std::process::id());
    let session = Session(name.clone());
    let cmd = format!(
        "{} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}; echo SCREEN-EXITED $?; sleep 30",
        env!("CARGO_BIN_EXE_budget-top")
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "120",
            "-y",
            "40",
            &cmd,
        ])
        .env_remove("NO_COLOR")
        .status()
        .unwrap();
    assert!(started.success());
    wait_for(&session.0, "No spans yet");
    let answer = post(http, &export_request());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let pane = wait_for(&session.0, "budget_reset");
    assert!(pane.contains("orders POST /orders"), "{pane}");
    assert!(
        pane.contains("forwarded 3000 ms with only 700 ms left"),
        "{pane}"
    );
    tmux(&["send-keys", "-t", &session.0, "q"]);
    let pane = wait_for(&session.0, "SCREEN-EXITED 0");
    assert!(
        !pane.contains("budget_reset"),
        "the alternate screen is gone: {pane}"
    );
}

/// SIGTERM (a supervisor, `kill`) also gives the terminal back: cooked mode, main screen.
#[test]
fn sigterm_restores_the_terminal() {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("tmux is not installed: skipping the terminal test");
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let name = format!("budget-top-sigterm-{}", std::process::id());
    let session = Session(name.clone());
    let pid_file = std::env::temp_dir().join(format!("{name}.pid"));
    let cmd = format!(
        "sh -c 'echo $$ > {pid}; exec {bin} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}'; \
         echo SCREEN-EXITED $?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon' | sed 's/^/MODE:/'; sleep 30",
        pid = pid_file.display(),
        bin = env!("CARGO_BIN_EXE_budget-top"),
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "100",
            "-y",
            "30",
            &cmd,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    wait_for(&session.0, "No spans yet");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let pane = wait_for(&session.0, "MODE:");
    let _ = std::fs::remove_file(&pid_file);
    assert!(pane.contains("SCREEN-EXITED 0"), "{pane}");
    assert!(
        pane.contains("MODE:icanon"),
        "raw mode is off again: {pane}"
    );
    assert!(
        !pane.contains("No spans yet"),
        "the alternate screen is gone: {pane}"
    );
}

/// `budget-top replay FILE` plays a recording into the same screen.
#[test]
fn replay_plays_a_recording_into_the_screen() {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("tmux is not installed: skipping the terminal test");
        return;
    }
    let name = format!("budget-top-replay-{}", std::process::id());
    let session = Session(name.clone());
    let file = std::env::temp_dir().join(format!("{name}.jsonl"));
    std::fs::write(&file, format!("{}\n", export_request())).unwrap();
    let cmd = format!(
        "{} replay {}; echo SCREEN-EXITED $?; sleep 30",
        env!("CARGO_BIN_EXE_budget-top"),
        file.display()
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "120",
            "-y",
            "40",
            &cmd,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    let pane = wait_for(&session.0, "replay finished: 3 spans");
    assert!(
        pane.contains("replay /"),
        "the header names the recording: {pane}"
    );
    assert!(pane.contains("orders POST /orders"), "{pane}");
    assert!(pane.contains("budget_reset"), "{pane}");
    tmux(&["send-keys", "-t", &session.0, "q"]);
    wait_for(&session.0, "SCREEN-EXITED 0");
    let _ = std::fs::remove_file(&file);
}

/// Closing the terminal (the pty goes away: SIGHUP, then reads fail) ends the process.
#[test]
fn closing_the_terminal_ends_the_process() {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!("tmux is not installed: skipping the terminal test");
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let name = format!("budget-top-hangup-{}", std::process::id());
    let session = Session(name.clone());
    let pid_file = std::env::temp_dir().join(format!("{name}.pid"));
    let cmd = format!(
        "sh -c 'echo $$ > {pid}; exec {bin} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}'",
        pid = pid_file.display(),
        bin = env!("CARGO_BIN_EXE_budget-top"),
    );
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "100",
            "-y",
            "30",
            &cmd,
        ])
        .status()
        .unwrap();
    assert!(started.success());
    wait_for(&session.0, "No spans yet");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let _ = std::fs::remove_file(&pid_file);
    tmux(&["kill-session", "-t", &session.0]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let alive = Command::new("kill")
            .args(["-0", &pid])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "budget-top {pid} still runs after its terminal closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
