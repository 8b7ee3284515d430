//! Helpers: run the real `budget-top` binary, build OTLP requests, read reports.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_arguments,
    dead_code
)]

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use serde_json::Value as Json;

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_budget-top")
}

/// A scratch directory under the target dir, fresh for `name`.
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A running `budget-top` that listens on port 0 and told us where.
pub struct Listening {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    stderr_rest: mpsc::Receiver<String>,
}

/// What a finished run left.
#[derive(Debug)]
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    #[track_caller]
    pub fn json(&self) -> Json {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }
}

/// The child's stderr, a line at a time, read on a thread of its own (so the child never
/// blocks on a full pipe).
pub fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Starts `budget-top ARGS --grpc 127.0.0.1:0 --http 127.0.0.1:0` and waits for the
/// "listening: grpc A, http B" line.
#[track_caller]
pub fn listen(args: &[&str]) -> Listening {
    let mut child = Command::new(bin())
        .args(args)
        .args(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("budget-top did not print its listening line");
    let rest = line
        .strip_prefix("listening: ")
        .unwrap_or_else(|| panic!("unexpected first stderr line: {line}"));
    let mut grpc = None;
    let mut http = None;
    for part in rest.split(", ") {
        let (proto, addr) = part.split_once(' ').unwrap();
        match proto {
            "grpc" => grpc = Some(addr.parse().unwrap()),
            "http" => http = Some(addr.parse().unwrap()),
            other => panic!("unknown receiver {other}"),
        }
    }
    Listening {
        child,
        grpc: grpc.unwrap(),
        http: http.unwrap(),
        stderr_rest: rx,
    }
}

impl Listening {
    /// Waits for the process to exit by itself (e.g. `--idle`), killing it after `limit`.
    #[track_caller]
    pub fn wait(mut self, limit: Duration) -> Finished {
        let deadline = std::time::Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let mut stderr = String::new();
        while let Ok(line) = self.stderr_rest.recv_timeout(Duration::from_secs(5)) {
            stderr.push_str(&line);
            stderr.push('\n');
        }
        let finished = Finished {
            code: status.and_then(|s| s.code()),
            stdout,
            stderr,
        };
        assert!(
            status.is_some(),
            "budget-top did not stop within {limit:?}: {finished:?}"
        );
        finished
    }

    /// Sends SIGTERM, then waits.
    #[track_caller]
    pub fn terminate(self, limit: Duration) -> Finished {
        self.signal("-TERM", limit)
    }

    /// Sends a signal (`-TERM`, `-INT`), then waits.
    #[track_caller]
    pub fn signal(self, signal: &str, limit: Duration) -> Finished {
        send_signal(&self.child, signal);
        self.wait(limit)
    }
}

/// A running `budget-top serve` on ports picked by the system.
pub struct Serving {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub api: SocketAddr,
    stderr: mpsc::Receiver<String>,
}

/// Starts `budget-top serve ARGS` on port 0 everywhere and reads where it listens from its
/// start-up line (`serving: receivers grpc A, http B (...); API http(s)://C (...)`).
#[track_caller]
pub fn serve(args: &[&str]) -> Serving {
    let mut child = Command::new(bin())
        .arg("serve")
        .args(["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .args(["--api", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve printed no start-up line");
    let receivers = line
        .strip_prefix("serving: receivers ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    let grpc = receivers
        .strip_prefix("grpc ")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no gRPC address in {line}"))
        .parse()
        .unwrap();
    let http = receivers
        .split(", http ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let api = line
        .split("API http://")
        .nth(1)
        .or_else(|| line.split("API https://").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no API address in {line}"))
        .parse()
        .unwrap();
    Serving {
        child,
        grpc,
        http,
        api,
        stderr: rx,
    }
}

impl Serving {
    /// Sends SIGTERM and returns at once.
    pub fn signal(&self) {
        send_signal(&self.child, "-TERM");
    }

    /// The next line serve writes on stderr that contains `text` (at most `limit`), and the
    /// lines before it.
    #[track_caller]
    pub fn stderr_until(&self, text: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        let mut seen = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    seen.push_str(&line);
                    seen.push('\n');
                    if line.contains(text) {
                        return seen;
                    }
                }
                Err(_) => panic!("serve never said {text:?} within {limit:?}: {seen}"),
            }
        }
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGTERM and waits (at most `limit`) for the exit status and the rest of stderr.
    #[track_caller]
    pub fn terminate(self, limit: Duration) -> (Option<i32>, String) {
        self.signal();
        self.terminate_wait(limit)
    }

    /// Waits (at most `limit`) for the exit status and the rest of stderr, sending nothing.
    #[track_caller]
    pub fn terminate_wait(mut self, limit: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("serve did not stop within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            stderr.push_str(&line);
            stderr.push('\n');
        }
        (status.code(), stderr)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `budget-top ARGS` to completion.
#[track_caller]
pub fn run(args: &[&str]) -> Finished {
    let out = Command::new(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Finished {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

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

pub fn int(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

pub fn string(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

pub const SERVER: i32 = 2;
pub const CLIENT: i32 = 3;
/// A fixed base time: 2026-11-29T00:00:00Z in ns.
pub const T0: u64 = 1_764_374_400_000_000_000;
pub const MS: u64 = 1_000_000;

/// One OTLP span: trace `t`, span `s`, parent `p` (0 = none), start/end in ms after [`T0`].
pub fn span(
    t: u8,
    s: u8,
    p: u8,
    name: &str,
    kind: i32,
    start_ms: u64,
    end_ms: u64,
    attrs: Vec<KeyValue>,
) -> Span {
    Span {
        trace_id: vec![t; 16],
        span_id: vec![s; 8],
        parent_span_id: if p == 0 { Vec::new() } else { vec![p; 8] },
        name: name.into(),
        kind,
        start_time_unix_nano: T0 + start_ms * MS,
        end_time_unix_nano: T0 + end_ms * MS,
        attributes: attrs,
        ..Default::default()
    }
}

/// A request with one resource per (service, spans).
pub fn request(services: Vec<(&str, Vec<Span>)>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: services
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", service)],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

/// A chain whose `orders` forwards 3000 ms with only 700 ms left: exactly one `budget_reset`.
pub fn reset_chain(t: u8) -> ExportTraceServiceRequest {
    use deadline_budget::semconv as k;
    request(vec![
        (
            "frontend",
            vec![
                span(
                    t,
                    1,
                    0,
                    "GET /checkout",
                    SERVER,
                    0,
                    100,
                    vec![
                        string(k::SOURCE, "default"),
                        int(k::DEFAULT_MS, 1000),
                        int(k::REMAINING_AT_START_MS, 1000),
                        string(k::OUTCOME, "ok"),
                    ],
                ),
                span(
                    t,
                    2,
                    1,
                    "GET orders",
                    CLIENT,
                    5,
                    95,
                    vec![
                        int(k::REMAINING_MS, 995),
                        int(k::FORWARDED_MS, 995),
                        int(k::TIMEOUT_MS, 995),
                    ],
                ),
            ],
        ),
        (
            "orders",
            vec![
                span(
                    t,
                    3,
                    2,
                    "GET /orders",
                    SERVER,
                    10,
                    90,
                    vec![
                        int(k::RECEIVED_MS, 995),
                        string(k::SOURCE, "x-budget-ms"),
                        int(k::REMAINING_AT_START_MS, 990),
                        string(k::OUTCOME, "ok"),
                    ],
                ),
                span(
                    t,
                    4,
                    3,
                    "GET inventory",
                    CLIENT,
                    20,
                    80,
                    vec![
                        int(k::REMAINING_MS, 700),
                        int(k::FORWARDED_MS, 3000),
                        int(k::TIMEOUT_MS, 3000),
                    ],
                ),
            ],
        ),
        (
            "inventory",
            vec![span(
                t,
                5,
                4,
                "GET /stock",
                SERVER,
                25,
                75,
                vec![
                    int(k::RECEIVED_MS, 3000),
                    string(k::SOURCE, "x-budget-ms"),
                    int(k::REMAINING_AT_START_MS, 2995),
                    string(k::OUTCOME, "ok"),
                ],
            )],
        ),
    ])
}

/// The same chain as one OTLP/JSON line.
pub fn json_line(request: &ExportTraceServiceRequest) -> String {
    serde_json::to_string(request).unwrap()
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
    let reset = findings
        .iter()
        .find(|f| f["kind"] == "budget_reset")
        .unwrap();
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

/// Sends `signal` (`-TERM`, `-INT`) to `child`, asserting it was delivered.
#[track_caller]
pub fn send_signal(child: &Child, signal: &str) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status().unwrap();
    assert!(sent.success(), "kill {signal} {pid}");
}
