//! Helpers: run the real `budget-top` binary (`binary`), build OTLP requests (`otlp`), run the
//! receivers (`receivers`) and the demo (`demo`) in the test, read reports, run other stacks.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_arguments,
    dead_code
)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Value as Json;

mod binary;
pub mod demo;
pub mod otlp;
pub mod receivers;

pub use binary::*;
pub use otlp::*;

/// Dead work a starved scheduler alone can make: a sleeping thread woken this late.
pub const NOISE_MS: i64 = 50;

/// Scheduling noise, not the chain's design: on a starved 2-core machine a thread can
/// oversleep by a few ms, so a hop stops a few ms after its caller (`orphaned_work` of that
/// size) or the root answers a few ms after the user's deadline (`late_answer` of that size).
/// A broken chain orphans hundreds of ms, and a cured one answers within its margin.
pub fn is_noise(finding: &Json) -> bool {
    match finding["kind"].as_str() {
        Some("orphaned_work") => finding["wasted_ms"].as_i64() <= Some(NOISE_MS),
        Some("late_answer") => finding["remaining_ms"].as_i64() >= Some(-NOISE_MS),
        _ => false,
    }
}

/// A cured chain's run: nothing in `report` beyond scheduling noise ([`is_noise`]), the exit
/// status its noise explains (1 only for a few ms of `orphaned_work`, an error; a
/// `late_answer` is a warning), and no more dead work than the noise makes (the callee below a
/// late hop ends before it, so it adds at most as much again).
#[track_caller]
pub fn assert_nothing_beyond_noise(report: &Json, finished: &Finished) {
    let noise: Vec<&Json> = report["findings"]
        .as_array()
        .expect("findings array")
        .iter()
        .filter(|f| is_noise(f))
        .collect();
    let errors = noise.iter().any(|f| f["severity"] == "error");
    assert_eq!(finished.code, Some(i32::from(errors)), "{finished:?}");
    assert_eq!(
        findings_beyond_noise(report),
        Vec::<Json>::new(),
        "nothing beyond noise: {report:#}"
    );
    let noise_ms: i64 = noise.iter().filter_map(|f| f["wasted_ms"].as_i64()).sum();
    let wasted = report["summary"]["wasted_ms"].as_i64().unwrap();
    assert!(wasted <= 2 * noise_ms, "{report:#}");
}

/// The report's findings, less its scheduling noise (`is_noise`).
pub fn findings_beyond_noise(report: &Json) -> Vec<Json> {
    let findings = report["findings"].as_array().unwrap();
    findings.iter().filter(|f| !is_noise(f)).cloned().collect()
}

/// The first finding of `kind` in a JSON report.
#[track_caller]
pub fn first_finding<'a>(report: &'a Json, kind: &str) -> &'a Json {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}: {report:#}"))
}

/// The (kind, service, span_name) of every finding in a JSON report, sorted.
#[track_caller]
pub fn finding_names(report: &Json) -> Vec<(String, String, String)> {
    let mut names: Vec<_> = report["findings"]
        .as_array()
        .expect("findings array")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["service"].as_str().unwrap().to_string(),
                f["span_name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    names.sort();
    names
}

/// The guide's chain (`tests/python/chain.py`, `tests/node/chain.js`) has run against `check`
/// over `transport`: its callers saw what the contract says, and the report names exactly the
/// three mistakes the chain makes, on `{prefix}-reports`, `{prefix}-search` and `{prefix}-orders`.
#[track_caller]
pub fn assert_guide_chain_classified(
    language: &str,
    prefix: &str,
    transport: &str,
    chain: std::process::Output,
    check: Listening,
) {
    assert!(
        chain.status.success(),
        "the {language} chain failed ({transport}):\n{}\n{}",
        String::from_utf8_lossy(&chain.stdout),
        String::from_utf8_lossy(&chain.stderr)
    );
    let statuses: Json = serde_json::from_slice(&chain.stdout).unwrap();
    assert_eq!(
        statuses,
        serde_json::json!({"checkout": 200, "report": 200, "search": 504, "refused": 504, "expired": 504}),
        "what the chain's callers saw ({transport})"
    );

    let finished = check.wait(Duration::from_secs(60));
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let report = finished.json();
    let expected: Vec<(String, String, String)> = [
        ("budget_reset", "reports", "GET inventory"),
        // batch: 250 ms of work on a 200 ms budget, its call refused, its 504 answered 50 ms
        // after the budget ran out: the deadline enforced a moment late, no late_answer.
        ("orphaned_work", "search", "GET /search"),
        ("shed_expired", "orders", "GET /orders"),
    ]
    .iter()
    .map(|(k, s, n)| (k.to_string(), format!("{prefix}-{s}"), n.to_string()))
    .collect();
    // The request that arrives with 0 ms is shed at once, even when "at once" is past its
    // budget on a busy machine: a shed is a failure, never a late answer.
    let names = finding_names(&report);
    assert_eq!(names, expected, "{transport}: {report:#}");
    // 5 chains: checkout 5 spans, report 5, search 3, refused 2 (the refused call's span is
    // exported, no request is made), expired 1; one trace each: trace context went through.
    assert_eq!(report["summary"]["traces"], 5, "{report:#}");
    assert_eq!(report["summary"]["spans"], 16, "{report:#}");
    let findings = report["findings"].as_array().unwrap();
    let reset = first_finding(&report, "budget_reset");
    assert_eq!(reset["forwarded_ms"], 3000, "{reset}");
    let remaining = reset["remaining_ms"].as_i64().unwrap();
    assert!((1..=1000).contains(&remaining), "{reset}");
    let orphan = findings
        .iter()
        .find(|f| f["kind"] == "orphaned_work" && f["service"] == format!("{prefix}-search"))
        .unwrap();
    // The search hop works 600 ms; its caller waits 100 ms (less the 10 ms margin, less transit).
    let wasted = orphan["wasted_ms"].as_i64().unwrap();
    assert!((1..=600).contains(&wasted), "{orphan}");
}

/// Runs `command` to completion with its output captured, killing it after `limit` (a build or
/// a registry that hangs fails the test instead of hanging it).
#[track_caller]
pub fn output_within(command: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {command:?}: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// Panics with both streams unless `out` succeeded.
#[track_caller]
pub fn assert_success(what: &str, out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The report's `orphaned_work` finding: its dead work (a few ms of its own, and all that is
/// below it) is all of the report's waste, as on a chain where one slow callee worked on.
#[track_caller]
pub fn orphan_with_all_the_waste(report: &Json) -> &Json {
    let wasted = report["summary"]["wasted_ms"].as_i64();
    let orphan = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "orphaned_work")
        .unwrap_or_else(|| panic!("no orphaned_work: {report:#}"));
    assert_eq!(orphan["wasted_ms"].as_i64(), wasted, "{orphan}");
    orphan
}

/// Whether `tool --version` (or `-version`) runs: a toolchain that is missing entirely.
pub fn tool_present(tool: &str, version_flag: &str) -> bool {
    Command::new(tool)
        .arg(version_flag)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What the tests build of other stacks (a Go binary, a Java classpath), each once per test run
/// and shared by the tests that need it, by name. A test waits while another builds it.
pub struct Builds<T>(std::sync::Mutex<Vec<(String, T)>>);

impl<T: Clone> Builds<T> {
    pub const fn new() -> Self {
        Builds(std::sync::Mutex::new(Vec::new()))
    }

    /// What `build` made of `name`, built the first time it is asked for.
    pub fn once(&self, name: &str, build: impl FnOnce() -> T) -> T {
        let mut built = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, done)) = built.iter().find(|(n, _)| n == name) {
            return done.clone();
        }
        let done = build();
        built.push((name.to_owned(), done.clone()));
        done
    }
}

/// The program of package `package` of the Go module in `module` (its modules from the Go
/// proxy into Go's own cache), built once per test run as `bin` under the target dir; `None`
/// (and a loud line) when there is no `go`. A failed download or build fails the test.
pub fn go_program_or_skip(test: &str, module: &str, package: &str, bin: &str) -> Option<PathBuf> {
    static BUILT: Builds<PathBuf> = Builds::new();
    if !tool_present("go", "version") {
        eprintln!("\n*** SKIPPED {test}: Go is not installed ***\n");
        return None;
    }
    let what = match package {
        "." => module.to_owned(),
        package => format!("{module}/{}", package.trim_start_matches("./")),
    };
    Some(BUILT.once(&what, || {
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join(bin);
        let out = output_within(
            Command::new("go")
                .args(["build", "-mod=readonly", "-trimpath", "-o"])
                .arg(&bin)
                .arg(package)
                .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(module)),
            Duration::from_secs(900),
        );
        assert_success(&format!("go build of {what}"), &out);
        bin
    }))
}

/// The binary a `scripts/NAME.sh` builds from Go source (Jaeger, Caddy) and prints, built
/// once per test run (the script caches it under the target dir); `None` (and a loud line)
/// when there is no `go`. A failed build fails the test.
pub fn go_tool_or_skip(test: &str, name: &str, limit: Duration) -> Option<String> {
    static BUILT: Builds<String> = Builds::new();
    if !tool_present("go", "version") {
        eprintln!("\n*** SKIPPED {test}: Go is not installed ({name} is built from Go) ***\n");
        return None;
    }
    Some(BUILT.once(name, || {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("..");
        let script = format!("scripts/{}.sh", name.to_lowercase());
        let out = output_within(
            Command::new("bash")
                .arg(repo.join(&script))
                .env("CARGO_TARGET_DIR", target),
            limit,
        );
        assert_success(&script, &out);
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }))
}

/// Held by the tests that time a burst of real requests against services of another stack
/// (`node_stock`, `python_stock`): on 2 cores, two bursts at once starve each other's timers
/// (an event loop or a GIL 200 ms late), and each test's timing is its subject.
pub fn one_burst_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static BURST: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BURST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A service of another stack run as a team runs it (`tests/node/stock`, `tests/python/stock`):
/// it prints its port when it listens; stopped with SIGTERM, it flushes its spans and prints
/// what it saw as one JSON line.
pub struct Service {
    child: Child,
    stdout: BufReader<ChildStdout>,
    pub port: u16,
}

impl Service {
    /// Spawns `command` and waits for the port it prints; `name` says who in a failure.
    #[track_caller]
    pub fn start(mut command: Command, name: &str) -> Service {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} printed {line:?}, not its port"));
        Service {
            child,
            stdout,
            port,
        }
    }

    /// SIGTERM, then what the service printed that it saw.
    #[track_caller]
    pub fn stop(mut self) -> Json {
        send_signal(&self.child, "-TERM");
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let _ = self.child.wait();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One burst of a stock pair (`node_stock`, `python_stock`): what `budget-top check` reported,
/// and what the client, the edge and the worker saw.
pub struct StockRun {
    pub report: Json,
    /// `check`'s exit status.
    pub code: Option<i32>,
    pub client: std::collections::BTreeMap<String, u64>,
    pub edge: Json,
    pub worker: Json,
}

impl StockRun {
    /// Runs a burst: `budget-top check --budget-header HEADER=ms` listening; `start` starts the
    /// worker and the edge against its OTLP/HTTP endpoint (worker first, given the worker's
    /// port for the edge); `client` sends the burst to the edge's port and prints its counts.
    /// The services are stopped once the work that outlived its callers could end.
    #[track_caller]
    pub fn burst(
        header: &str,
        start: impl FnOnce(&str) -> (Service, Service),
        client: impl FnOnce(u16) -> Command,
    ) -> StockRun {
        let check = listen(&[
            "check",
            "--idle",
            "3s",
            "--format",
            "json",
            "--budget-header",
            &format!("{header}=ms"),
        ]);
        let endpoint = format!("http://{}", check.http);
        let (worker, edge) = start(&endpoint);
        let out = client(edge.port).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let client = serde_json::from_slice(&out.stdout).unwrap();
        // Let the work that outlived its callers end (the fixed timeout is 2 s), then stop
        // the services: their exporters flush into budget-top, which goes idle.
        std::thread::sleep(Duration::from_millis(2500));
        let edge = edge.stop();
        let worker = worker.stop();
        let finished = check.wait(Duration::from_secs(60));
        assert!(matches!(finished.code, Some(0 | 1)), "{}", finished.stderr);
        StockRun {
            report: finished.json(),
            code: finished.code,
            client,
            edge,
            worker,
        }
    }

    /// Findings of `kind` on `service`.
    pub fn count(&self, kind: &str, service: &str) -> u64 {
        self.findings()
            .filter(|f| f["kind"] == kind && f["service"] == service)
            .count() as u64
    }

    pub fn findings(&self) -> impl Iterator<Item = &Json> {
        self.report["findings"].as_array().unwrap().iter()
    }

    /// A count the worker printed.
    pub fn worker(&self, what: &str) -> u64 {
        self.worker[what].as_u64().unwrap()
    }

    /// A count the client printed (0 when it saw none).
    pub fn client(&self, what: &str) -> u64 {
        self.client.get(what).copied().unwrap_or(0)
    }

    /// Chains with this outcome.
    pub fn outcome(&self, what: &str) -> u64 {
        self.report["summary"]["outcomes"][what].as_u64().unwrap()
    }

    pub fn wasted(&self) -> i64 {
        self.report["summary"]["wasted_ms"].as_i64().unwrap()
    }

    pub fn coverage(&self, what: &str) -> &Json {
        &self.report["summary"]["coverage"][what]
    }

    /// No chain is in flight or in error once everything arrived, and the outcomes agree with
    /// what the user saw: on a loaded machine an answer can reach the client after its own
    /// timeout, so the client's counts only move towards "gave up", and every 200, 503 and 504
    /// it got is an ok, shed and deadline_exceeded chain.
    #[track_caller]
    pub fn assert_outcomes_match_the_client(&self) {
        assert_eq!(self.outcome("in_flight"), 0, "{}", self.dump());
        assert_eq!(self.outcome("error"), 0, "{}", self.dump());
        for (status, outcome) in [("200", "ok"), ("503", "shed"), ("504", "deadline_exceeded")] {
            assert!(
                self.client(status) <= self.outcome(outcome),
                "{status}: {}",
                self.dump()
            );
        }
    }

    /// `service` passed the budget on: no `budget_dropped`, no `timeout_inverted` there.
    #[track_caller]
    pub fn assert_budget_passed_on(&self, service: &str) {
        for kind in ["budget_dropped", "timeout_inverted"] {
            assert_eq!(self.count(kind, service), 0, "{kind}: {}", self.dump());
        }
    }

    /// The report's edge -> worker.
    pub fn edge_figures(&self) -> &Json {
        self.report["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["caller"] == "edge" && e["callee"] == "worker")
            .unwrap_or_else(|| panic!("no edge -> worker: {}", self.report))
    }

    pub fn dump(&self) -> String {
        format!(
            "client {:?}\nedge {}\nworker {}\nsummary {}\nedges {}",
            self.client, self.edge, self.worker, self.report["summary"], self.report["edges"]
        )
    }
}

/// A current-thread runtime for a test's own clients (the server under test is a process).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A multi-threaded tokio runtime of `workers` threads (a server that runs while the test
/// blocks, an exporter that wants worker threads).
pub fn threaded_runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// A batch of `spans` and their `attributes`, as ingest gives the store.
pub fn batch(
    spans: Vec<deadline_budget::analysis::Span>,
    attributes: Vec<budget_top::batch::RawAttributes>,
) -> budget_top::batch::Batch {
    budget_top::batch::Batch {
        spans,
        attributes,
        raw: None,
        received: None,
    }
}

/// Sends `signal` (`-TERM`, `-INT`) to `child`, asserting it was delivered.
#[track_caller]
pub fn send_signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success(), "kill {signal} {pid}");
}
