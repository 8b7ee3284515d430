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
}
