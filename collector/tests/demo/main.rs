//! The demo end to end: each scenario's services export real OTLP/gRPC to a real
//! `budget-top check --format json` process, and its report shows exactly the findings the
//! scenario teaches. Figures run at half scale (`Timing::new(0.5)`) to keep the suite fast.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// `budget-top demo` as a user runs it (needs the binary built with the demo).
#[cfg(feature = "demo")]
mod cli;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use budget_demo::{Demo, DemoConfig, LoadCounts, LoadPlan, Scenario, Timing};
use serde_json::Value as Json;

const SCALE: f64 = 0.5;

/// A `budget-top check` listening on port 0; killed if the test ends before it exits.
struct Check {
    child: Option<Child>,
    grpc: SocketAddr,
}

impl Check {
    #[track_caller]
    fn start() -> Check {
        let mut child = Command::new(env!("CARGO_BIN_EXE_budget-top"))
            .args(["check", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .args(["--idle", "3s", "--format", "json"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("budget-top runs");
        let rx = lines_of(child.stderr.take().unwrap());
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("budget-top prints where it listens");
        let grpc = line
            .strip_prefix("listening: ")
            .and_then(|rest| rest.split(", ").find_map(|p| p.strip_prefix("grpc ")))
            .unwrap_or_else(|| panic!("unexpected stderr line: {line}"))
            .parse()
            .unwrap();
        Check {
            child: Some(child),
            grpc,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.grpc)
    }

    /// Wait for `--idle` to end the check; returns (exit code, JSON report).
    #[track_caller]
    fn report(mut self) -> (i32, Json) {
        let mut child = self.child.take().unwrap();
        let limit = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < limit, "budget-top check did not go idle");
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = stdout_of(&mut child);
        let json = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e}): {stdout}"));
        (status.code().expect("exited normally"), json)
    }
}

impl Drop for Check {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct Outcome {
    code: i32,
    report: Json,
    counts: LoadCounts,
}

impl Outcome {
    fn findings(&self) -> &Vec<Json> {
        self.report["findings"].as_array().expect("findings")
    }

    /// The kinds found, leaving out orphaned work short enough to be scheduling noise.
    fn kinds(&self) -> BTreeSet<String> {
        self.findings()
            .iter()
            .filter(|f| !is_noise(f))
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The check's exit status, had it not counted noise as an error.
    fn code_without_noise(&self) -> i32 {
        let noise_only = self
            .findings()
            .iter()
            .filter(|f| f["severity"] == "error")
            .all(is_noise);
        if self.code == 1 && noise_only {
            0
        } else {
            self.code
        }
    }

    fn of_kind(&self, kind: &str) -> Vec<&Json> {
        self.findings()
            .iter()
            .filter(|f| f["kind"] == kind && !is_noise(f))
            .collect()
    }

    fn dump(&self) -> String {
        self.findings()
            .iter()
            .map(|f| format!("{} {}: {}", f["kind"], f["service"], f["message"]))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Run `requests` requests of `scenario` against a fresh `budget-top check`.
async fn run(scenario: Scenario, requests: u64) -> Outcome {
    let check = Check::start();
    let mut config = DemoConfig::new(scenario, check.endpoint());
    config.timing = Timing::new(SCALE);
    config.load = LoadPlan {
        rate: 10.0,
        jitter: 0.0,
        requests: Some(requests),
        ..LoadPlan::default()
    };
    let demo = Demo::start(config).await.expect("the demo starts");
    tokio::time::timeout(Duration::from_secs(30), demo.load_finished())
        .await
        .expect("the load finishes");
    let counts = demo.load_counts();
    // Shutdown lets work that outlived its caller end, then flushes every exporter.
    tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
        .await
        .expect("the demo shuts down");
    let (code, report) = tokio::task::spawn_blocking(move || check.report())
        .await
        .unwrap();
    Outcome {
        code,
        report,
        counts,
    }
}

/// The scenarios' effects are hundreds of ms; on a loaded 2-core box a hanging-up caller is
/// noticed, and a request crosses loopback, tens of ms late, which the contract's 5 ms
/// tolerance reports as orphaned work.
const NOISE_MS: i64 = 25;

/// Also work that started within 1 ms of its deadline (recorded as 0 ms left) and wasted no
/// more than the noise.
/// All of `child`'s stdout, to its end.
fn stdout_of(child: &mut Child) -> String {
    let mut stdout = String::new();
    let mut pipe = child.stdout.take().expect("stdout is piped");
    pipe.read_to_string(&mut stdout).unwrap();
    stdout
}

/// The lines `pipe` gives, as they come. Drained to the end even once nobody reads them: a
/// closed pipe would make the child's later lines fail (and the child with them).
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

fn is_noise(finding: &Json) -> bool {
    let kind = &finding["kind"];
    (kind == "orphaned_work" || kind == "ran_after_expiry")
        && finding["wasted_ms"].as_i64().unwrap_or(0) <= NOISE_MS
}

fn set(kinds: &[&str]) -> BTreeSet<String> {
    kinds.iter().map(|k| (*k).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_propagate_has_no_findings_and_every_request_is_one_trace() {
    let run = run(Scenario::Propagate, 3).await;
    assert_eq!(run.counts.ok, 3, "{:?}", run.counts);
    assert_eq!(run.code_without_noise(), 0, "{}", run.dump());
    assert!(run.kinds().is_empty(), "{}", run.dump());
    let summary = &run.report["summary"];
    assert_eq!(summary["traces"], 3, "{summary}");
    // pix-api, antifraud, settlement: three hops per request.
    assert_eq!(summary["hops"], 9, "{summary}");
    let edges: BTreeSet<(String, String)> = run.report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["caller"].as_str().unwrap().to_owned(),
                e["callee"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        BTreeSet::from([
            ("pix-api".to_owned(), "antifraud".to_owned()),
            ("pix-api".to_owned(), "settlement".to_owned()),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_fixed_timeout_is_budget_reset_at_bff() {
    let run = run(Scenario::FixedTimeout, 2).await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.kinds(),
        set(&["budget_reset", "orphaned_work"]),
        "{}",
        run.dump()
    );
    for reset in run.of_kind("budget_reset") {
        assert_eq!(reset["service"], "bff");
        assert_eq!(reset["forwarded_ms"], 1500, "a fixed 3 s at half scale");
    }
    // The user's point of view: each reset names the work below it done for nobody
    // (inventory's, about 625 ms at full scale, while orders only waits for it: counted once),
    // that is all the chain wasted, and the edge into inventory counts nearly all of it.
    let resets = run.of_kind("budget_reset");
    let mut total = 0;
    for reset in &resets {
        let wasted = reset["wasted_ms"].as_i64().unwrap_or(0);
        assert!((200..=450).contains(&wasted), "{reset}");
        let message = reset["message"].as_str().unwrap();
        assert!(
            message.contains("of work below it for nobody: "),
            "{message}"
        );
        assert!(message.contains("inventory"), "{message}");
        total += wasted;
    }
    let summary = &run.report["summary"];
    assert_eq!(summary["wasted_ms"], total, "{summary}");
    let edge = |caller: &str, callee: &str| {
        run.report["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["caller"] == caller && e["callee"] == callee)
            .unwrap_or_else(|| panic!("no edge {caller} -> {callee}: {}", run.report))
            .clone()
    };
    let into_orders = edge("bff", "orders")["wasted_ms"].as_i64().unwrap();
    let into_inventory = edge("orders", "inventory")["wasted_ms"].as_i64().unwrap();
    assert!(into_inventory > 0, "{}", run.report);
    assert_eq!(into_orders + into_inventory, total);
    assert!(into_orders * 10 < into_inventory, "{}", run.report);
    // Every request ended in a 504 for its user, and the report says so.
    assert_eq!(
        summary["outcomes"]["deadline_exceeded"], run.counts.timed_out,
        "{summary} {:?}",
        run.counts
    );
    assert_eq!(summary["outcomes"]["ok"], 0, "{summary}");
    for orphan in run.of_kind("orphaned_work") {
        assert_eq!(orphan["service"], "orders", "{orphan}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_drop_header_is_budget_dropped_at_bff() {
    let run = run(Scenario::DropHeader, 2).await;
    assert_eq!(run.code, 1);
    assert_eq!(run.kinds(), set(&["budget_dropped"]), "{}", run.dump());
    assert!(
        run.findings().iter().all(|f| f["service"] == "bff"),
        "{}",
        run.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_no_cancel_is_orphaned_work_in_settlement() {
    let run = run(Scenario::NoCancel, 2).await;
    assert_eq!(run.code, 1);
    assert_eq!(run.kinds(), set(&["orphaned_work"]), "{}", run.dump());
    for orphan in run.of_kind("orphaned_work") {
        assert_eq!(orphan["service"], "settlement");
        assert!(orphan["wasted_ms"].as_i64().unwrap() >= 200, "{orphan}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_retry_storm_is_retry_over_budget_only() {
    let run = run(Scenario::RetryStorm, 2).await;
    assert_eq!(
        run.code_without_noise(),
        0,
        "a warning does not fail the check"
    );
    assert_eq!(run.kinds(), set(&["retry_over_budget"]), "{}", run.dump());
}

/// A callee's deadline starts when the request arrives, so in a burst the last hops may end a
/// few ms after their caller gave up: that is transit, not work. Real orphaned work here would
/// be a whole item (175 ms at half scale).
const TRANSIT_MS: i64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_burst_sheds_and_never_starts_an_expired_item() {
    let run = run(Scenario::Burst, 40).await;
    assert_eq!(
        run.counts.shed_full, 16,
        "4 run, 20 queue, 16 shed: {:?}",
        run.counts
    );
    assert_eq!(run.counts.ok + run.counts.timed_out, 24, "{:?}", run.counts);
    let kinds = run.kinds();
    assert!(kinds.contains("shed_full"), "{}", run.dump());
    // shed_expired shows when an expired item reaches the front before its deadline-cut
    // neighbour frees a worker: with every item arriving together that is a coin toss, so it is
    // counted, not required (the demo's own test checks each item's outcome).
    assert!(run.of_kind("shed_expired").len() <= 8, "{}", run.dump());
    assert!(!kinds.contains("ran_after_expiry"), "{}", run.dump());
    for finding in run.findings().iter().filter(|f| !is_noise(f)) {
        match finding["kind"].as_str().unwrap() {
            "shed_full" | "shed_expired" | "queue_pressure" => {}
            "orphaned_work" => assert!(
                finding["wasted_ms"].as_i64().unwrap() <= TRANSIT_MS,
                "{finding}"
            ),
            other => panic!("unexpected {other}: {}", run.dump()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_no_dequeue_check_runs_expired_items() {
    let run = run(Scenario::NoDequeueCheck, 40).await;
    assert_eq!(run.code, 1);
    assert_eq!(run.counts.shed_full, 16, "{:?}", run.counts);
    let kinds = run.kinds();
    assert!(kinds.contains("ran_after_expiry"), "{}", run.dump());
    assert!(!kinds.contains("shed_expired"), "{}", run.dump());
    let wasted = run
        .of_kind("ran_after_expiry")
        .iter()
        .filter_map(|f| f["wasted_ms"].as_i64())
        .max()
        .unwrap();
    assert!(wasted >= 100, "an expired item runs its 175 ms: {wasted}");
}
