//! The real binary on a real terminal: start `budget-top` in a tmux pane, send it one request
//! chain over OTLP/HTTP (JSON), check that the chain list and the finding are on screen, press
//! `q` and check that the shell gets the terminal back; and every demo scenario, as a newcomer
//! starts it, opens on its lesson without a key. Skipped (with a message) without tmux.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use budget_demo::Scenario;

/// Inside a check given to `Session::expect`: fails the check with the message unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}

// The Map on the real demo.
mod map;

/// A tmux server of its own (`tmux -L NAME`) holding one session of the same name: other tests
/// that kill a tmux server (or the default one) cannot take it down. Dropping it ends the server.
/// The server's name, and its socket file (found while it runs).
struct Session(String, String);

impl Session {
    /// Starts `cmd` in a detached `width`x`height` pane, with `NO_COLOR` unset.
    #[track_caller]
    fn start(label: &str, width: u16, height: u16, cmd: &str) -> Session {
        let name = format!("budget-top-{label}-{}", std::process::id());
        let mut session = Session(name.clone(), String::new());
        let (w, h) = (width.to_string(), height.to_string());
        let started = Command::new("tmux")
            .args([
                "-L",
                &name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                &name,
            ])
            .args(["-x", &w, "-y", &h, cmd])
            .env_remove("NO_COLOR")
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(started.success(), "tmux new-session failed");
        session.1 = session
            .tmux(&["display-message", "-p", "#{socket_path}"])
            .trim()
            .to_string();
        session
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.0])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn capture(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.0])
    }

    fn keys(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", &self.0, keys]);
    }

    /// Polls the pane until it shows `needle` (at most `WAIT`); returns what it showed.
    #[track_caller]
    fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |pane| pane.contains(needle))
    }

    /// Polls the pane until `done` holds (at most `WAIT`), then returns it.
    #[track_caller]
    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        self.expect(&format!("{what:?}"), |pane| {
            ensure!(done(pane), "never appeared");
            Ok(())
        })
    }

    /// Polls the pane until `check` passes on one capture (at most `WAIT`), then returns it; on
    /// time out, fails with the check's last reason. A capture can catch a frame half drawn, so
    /// every claim about a frame is checked on the same capture and retried, never read once.
    #[track_caller]
    fn expect(&self, what: &str, check: impl Fn(&str) -> Result<(), String>) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let pane = self.capture();
            match check(&pane) {
                Ok(()) => return pane,
                Err(why) => assert!(
                    Instant::now() < deadline,
                    "{what}: {why}; the pane shows:\n{pane}"
                ),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .stderr(std::process::Stdio::null())
            .status();
        // The socket file outlives a killed server: remove it too, or every run leaves one.
        if self.1.ends_with(&self.0) {
            let _ = std::fs::remove_file(&self.1);
        }
    }
}

/// The longest wait for something to appear: a safety net for a loaded 2-core machine, not a
/// timing assertion (every wait polls and returns as soon as the pane shows it).
const WAIT: Duration = Duration::from_secs(40);

fn no_tmux() -> bool {
    let missing = Command::new("tmux")
        .arg("-V")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true);
    if missing {
        eprintln!("tmux is not installed: skipping the terminal test");
    }
    missing
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
    export_request_ago(Duration::from_secs(2))
}

/// The same chain, `age` ago.
fn export_request_ago(age: Duration) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let at = now - age.as_nanos() as u64;
    let t = |ms: u64| (at + ms * 1_000_000).to_string();
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
    if no_tmux() {
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let cmd = format!(
        "{} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}; echo SCREEN-EXITED $?; sleep 60",
        env!("CARGO_BIN_EXE_budget-top")
    );
    let session = Session::start("screen", 120, 40, &cmd);
    session.wait_for("No spans yet");
    let answer = post(http, &export_request());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    session.expect("the chain and its reset, explained", |pane| {
        ensure!(pane.contains("budget_reset"), "no finding");
        ensure!(pane.contains("orders POST /orders"), "no chain row");
        ensure!(
            pane.contains("forwarded 3000 ms with only 700 ms left"),
            "no explanation"
        );
        Ok(())
    });
    session.keys("q");
    let pane = session.wait_for("SCREEN-EXITED 0");
    assert!(
        !pane.contains("budget_reset"),
        "the alternate screen is gone: {pane}"
    );
}

/// The "Done means" of the live screen: the real `budget-top demo` on a real terminal shows a
/// chain with its finding and the lesson, `q` ends it, the shell gets a clean terminal back and
/// the receivers' ports are closed.
#[test]
fn the_real_demo_shows_a_finding_and_the_lesson_then_q_gives_the_shell_back() {
    if no_tmux() {
        return;
    }
    let cmd = format!(
        "{} demo --scenario fixed-timeout --time-scale 0.5; echo EXITED:$?; sleep 60",
        env!("CARGO_BIN_EXE_budget-top")
    );
    let session = Session::start("demo", 120, 40, &cmd);
    // A chain row whose worst finding is the reset (the glyph tells it from the lesson's own
    // mention of budget_reset).
    let pane = session.expect("the reset and its lesson", |pane| {
        ensure!(
            pane.contains("✖ budget_reset"),
            "no chain row with the reset"
        );
        ensure!(pane.contains("budget-top demo"), "the header says demo");
        ensure!(pane.contains("gateway"), "the chain's root service");
        ensure!(pane.contains("3/12 fixed-timeout"), "the scenario line");
        ensure!(
            pane.contains("bff forwards a fixed 3 s instead of what remains"),
            "the lesson"
        );
        ensure!(
            pane.contains("after the gateway gave up") && pane.contains("(budget_reset)."),
            "the whole lesson, wrapped"
        );
        Ok(())
    });
    let ports: Vec<u16> = pane
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("127.0.0.1:"))
        .filter_map(|p| p.parse().ok())
        .collect();
    assert_eq!(
        ports.len(),
        2,
        "gRPC and HTTP receivers in the header: {pane}"
    );
    session.keys("q");
    let pane = session.wait_until("EXITED:0", |pane| pane.contains("EXITED:"));
    assert!(pane.contains("EXITED:0"), "budget-top demo exits 0: {pane}");
    for gone in ["budget-top demo", "✖", "fixed-timeout", "Chains │"] {
        assert!(
            !pane.contains(gone),
            "the alternate screen is gone, yet {gone:?} is on it:\n{pane}"
        );
    }
    for port in ports {
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still listens after the demo ended"
        );
    }
}

/// The user's point of view on the real screen: in fixed-timeout every request ends in a 504
/// for its user, so no chain row ever reads `ok` (in flight or answered), and Services counts
/// inventory's work for nobody although inventory itself did nothing wrong.
#[test]
fn the_real_demo_never_calls_a_failed_chain_ok_and_counts_dead_work_at_every_depth() {
    if no_tmux() {
        return;
    }
    let cmd = format!(
        "{} demo --scenario fixed-timeout --time-scale 0.5; sleep 60",
        env!("CARGO_BIN_EXE_budget-top")
    );
    let session = Session::start("outcome", 120, 40, &cmd);
    let is_row = |line: &str| {
        let t = line.trim_start_matches(['▶', ' ']);
        t.len() > 8 && t.as_bytes()[2] == b':' && t.as_bytes()[5] == b':'
    };
    session.expect(
        "three chain rows that ended in a 504, and none fine",
        |pane| {
            let rows = pane.lines().filter(|l| is_row(l));
            ensure!(
                rows.clone().filter(|l| l.contains(" 504 ")).count() >= 3,
                "fewer than three 504 rows"
            );
            for line in rows {
                ensure!(
                    (line.contains(" 504 ")
                        || line.contains(" in flight ")
                        || line.contains(" cancelled "))
                        && !line.contains(" ok "),
                    "a chain of fixed-timeout that reads as fine: {line}"
                );
            }
            Ok(())
        },
    );
    // Services (Shift-Tab past the Map): inventory's dead work share, though no finding is
    // inventory's own.
    session.keys("BTab");
    session.keys("BTab");
    session.wait_until("inventory's dead work above 30 %", |pane| {
        pane.contains("DEAD WORK")
            && pane
                .lines()
                .find(|l| l.trim_start_matches(['▶', ' ']).starts_with("inventory"))
                .and_then(|l| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_suffix('%').and_then(|n| n.parse::<u32>().ok()))
                })
                .is_some_and(|share| share > 30)
    });
}

/// SIGTERM (a supervisor, `kill`) also gives the terminal back: cooked mode, main screen.
#[test]
fn sigterm_restores_the_terminal() {
    if no_tmux() {
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let pid_file =
        std::env::temp_dir().join(format!("budget-top-sigterm-{}.pid", std::process::id()));
    let cmd = format!(
        "sh -c 'echo $$ > {pid}; exec {bin} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}'; \
         echo SCREEN-EXITED $?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon' | sed 's/^/MODE:/'; sleep 60",
        pid = pid_file.display(),
        bin = env!("CARGO_BIN_EXE_budget-top"),
    );
    let session = Session::start("sigterm", 100, 30, &cmd);
    session.wait_for("No spans yet");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let pane = session.wait_for("MODE:");
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

/// A panic while the screen owns the terminal: the panic hook (the same `term` module, in the
/// `panic_screen` example that `cargo test` builds) leaves the alternate screen and raw mode
/// before the message is printed, so the shell gets a usable terminal and the message is read.
#[test]
fn a_panic_restores_the_terminal_and_its_message_is_readable() {
    if no_tmux() {
        return;
    }
    let example = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples/panic_screen");
    assert!(
        example.exists(),
        "{} is missing: `cargo test -p budget-top` builds it (or `cargo build -p budget-top --example panic_screen`)",
        example.display()
    );
    let cmd = format!(
        "{bin}; echo SCREEN-EXITED $?; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\?icanon' | sed 's/^/MODE:/'; sleep 60",
        bin = example.display(),
    );
    let session = Session::start("panic", 100, 30, &cmd);
    session.wait_for("SCREEN-UP");
    session.keys("x");
    let pane = session.wait_for("MODE:");
    assert!(pane.contains("SCREEN-EXITED 101"), "{pane}");
    assert!(
        pane.contains("MODE:icanon"),
        "raw mode is off again: {pane}"
    );
    assert!(
        pane.contains("a deliberate panic while the screen owns the terminal"),
        "the panic message is on the restored terminal: {pane}"
    );
    assert!(
        !pane.contains("SCREEN-UP"),
        "the alternate screen is gone: {pane}"
    );
}

/// `budget-top replay FILE` plays a recording into the same screen, on the recording's clock:
/// a recording made long ago is judged into the header's totals once quiet for `--settle`.
#[test]
fn replay_plays_a_recording_into_the_screen() {
    if no_tmux() {
        return;
    }
    let file = std::env::temp_dir().join(format!("budget-top-replay-{}.jsonl", std::process::id()));
    let a_year_ago = Duration::from_secs(400 * 24 * 3600);
    std::fs::write(&file, format!("{}\n", export_request_ago(a_year_ago))).unwrap();
    let cmd = format!(
        "{} replay --settle 1s {}; echo SCREEN-EXITED $?; sleep 60",
        env!("CARGO_BIN_EXE_budget-top"),
        file.display()
    );
    let session = Session::start("replay", 120, 40, &cmd);
    session.expect("the recording played", |pane| {
        ensure!(pane.contains("replay finished: 3 spans"), "not finished");
        ensure!(pane.contains("replay /"), "the header names the recording");
        ensure!(pane.contains("orders POST /orders"), "no chain row");
        ensure!(pane.contains("budget_reset"), "no finding");
        Ok(())
    });
    // Judged into the totals, as `check` of the same file judges it: the reset and the work
    // for nobody below it (the screen's clock went back a year and judged nothing before).
    session.wait_for("✖ 2 error");
    session.keys("q");
    session.wait_for("SCREEN-EXITED 0");
    let _ = std::fs::remove_file(&file);
}

/// A replay that stops on a bad line says so on the screen (at 80x24), and on `q` prints the
/// whole reason and exits 2, as `check` does on the same file.
#[test]
fn replay_of_a_bad_file_prints_its_reason_whole_and_exits_2() {
    if no_tmux() {
        return;
    }
    let file = std::env::temp_dir().join(format!(
        "budget-top-replay-bad-{}.jsonl",
        std::process::id()
    ));
    let err = file.with_extension("stderr");
    std::fs::write(&file, format!("{}\n{{1:2}}\n", export_request())).unwrap();
    let cmd = format!(
        "{} replay {} 2>{}; echo SCREEN-EXITED $?; sleep 60",
        env!("CARGO_BIN_EXE_budget-top"),
        file.display(),
        err.display()
    );
    let session = Session::start("replay-bad", 80, 24, &cmd);
    session.wait_for("replay stopped on bad input");
    session.keys("q");
    session.wait_for("SCREEN-EXITED 2");
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(
        stderr.contains(
            "line 2: invalid OTLP/JSON ExportTraceServiceRequest: key must be a string (column 2)"
        ),
        "{stderr}"
    );
    let check = Command::new(env!("CARGO_BIN_EXE_budget-top"))
        .args(["check", "--input", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(2), "check exits 2 on it too");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&err);
}

/// Closing the terminal (the pty goes away: SIGHUP, then reads fail) ends the process.
#[test]
fn closing_the_terminal_ends_the_process() {
    if no_tmux() {
        return;
    }
    let (grpc, http) = (free_port(), free_port());
    let pid_file =
        std::env::temp_dir().join(format!("budget-top-hangup-{}.pid", std::process::id()));
    let cmd = format!(
        "sh -c 'echo $$ > {pid}; exec {bin} --grpc 127.0.0.1:{grpc} --http 127.0.0.1:{http}'",
        pid = pid_file.display(),
        bin = env!("CARGO_BIN_EXE_budget-top"),
    );
    let session = Session::start("hangup", 100, 30, &cmd);
    session.wait_for("No spans yet");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let _ = std::fs::remove_file(&pid_file);
    session.tmux(&["kill-session", "-t", &session.0]);
    let deadline = Instant::now() + WAIT;
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

/// What a scenario's first screen must show without a key press: the panel's title (the
/// finding kind and its severity, which the lesson line below never spells so) and the start of
/// its explanation.
fn lesson_on_screen(scenario: Scenario) -> [&'static str; 2] {
    match scenario {
        Scenario::Propagate => ["─ no findings ─", "It ended in a 504 for its user"],
        // Once the first calls stuck on payments end (20 s at half scale) and free a worker.
        Scenario::SlowDependency => ["queue_pressure (warning)", "Queue pressure: waiting"],
        Scenario::FixedTimeout => ["budget_reset (error)", "Reset: a service forwarded"],
        Scenario::DropHeader => ["budget_dropped (error)", "Dropped: the budget was not"],
        Scenario::AbsoluteDeadline => ["clock_skew (warning)", "Clock skew: an absolute deadline"],
        Scenario::ProxyTimeouts => [
            "timeout_inverted (warning)",
            "Timeout inverted: this call's",
        ],
        Scenario::NoCancel => ["orphaned_work (error)", "Orphaned work: this hop kept"],
        Scenario::NoDequeueCheck => ["ran_after_expiry (error)", "Ran after expiry: work started"],
        // Which of the two an item gets is a coin toss (demo/README.md): either teaches it.
        Scenario::Burst => ["(info) at orders", "Shed ("],
        Scenario::MessageDeadline => ["ran_after_expiry (error) at worker", "Ran after expiry:"],
        Scenario::RetryStorm => [
            "retry_over_budget (warning)",
            "Retry over budget: the retries",
        ],
        Scenario::RetryLayers => ["retry_amplified (warning)", "Retry amplified: retries in"],
    }
}

/// A session started at an instant, and what its pane must show.
type Watched = (String, Session, [&'static str; 2], Instant);

/// Waits for every session to show its `needles` (polling all of them in turn, so twenty
/// sessions cost one capture each per round); returns how long after its start each did.
#[track_caller]
fn wait_for_all(sessions: &[Watched]) -> Vec<(String, Duration)> {
    let started = Instant::now();
    let mut shown: Vec<Option<Duration>> = vec![None; sessions.len()];
    loop {
        for (i, (_, session, needles, since)) in sessions.iter().enumerate() {
            if shown[i].is_none() && needles.iter().all(|n| session.capture().contains(n)) {
                shown[i] = Some(since.elapsed());
            }
        }
        if shown.iter().all(Option::is_some) {
            break;
        }
        if started.elapsed() > LESSON_WAIT {
            let missing: Vec<String> = sessions
                .iter()
                .zip(&shown)
                .filter(|(_, t)| t.is_none())
                .map(|((what, session, needles, _), _)| {
                    format!("{what}: {needles:?} never appeared:\n{}", session.capture())
                })
                .collect();
            panic!("{}", missing.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    sessions
        .iter()
        .zip(shown)
        .map(|((what, ..), t)| (what.clone(), t.unwrap_or_default()))
        .collect()
}

/// The safety net of the lesson tests: twenty demos share two busy cores. Each lesson shows in
/// a few seconds; the times are printed (`--nocapture`), not asserted.
const LESSON_WAIT: Duration = Duration::from_secs(90);

/// A newcomer's first command, exactly (`cargo run --release -- demo` runs this binary with
/// this one argument): the workshop from its first broken step, a finding selected and
/// explained, without a key, at a common terminal size and at the smallest one.
#[test]
fn the_first_run_shows_a_finding_and_its_explanation_without_a_key() {
    if no_tmux() {
        return;
    }
    let cmd = format!("{} demo; sleep 60", env!("CARGO_BIN_EXE_budget-top"));
    let sessions: Vec<_> = [(120, 40), (80, 24)]
        .into_iter()
        .map(|(w, h)| {
            let what = format!("budget-top demo at {w}x{h}");
            let since = Instant::now();
            let session = Session::start(&format!("first-{w}"), w, h, &cmd);
            (
                what,
                session,
                ["budget_reset (error)", "Reset: a service forwarded"],
                since,
            )
        })
        .collect();
    for (what, took) in wait_for_all(&sessions) {
        eprintln!("{what}: the finding and its explanation after {took:.1?}");
    }
    for (what, session, ..) in &sessions {
        session.expect(what, |pane| {
            ensure!(
                pane.contains("step 4/13 fixed-timeout"),
                "the workshop, at its first broken step"
            );
            ensure!(pane.contains("w next"), "says how to go on");
            ensure!(pane.contains("q quit"), "says how to leave");
            Ok(())
        });
    }
}

/// Every scenario, as `budget-top demo --scenario S` starts it, at 120x40 and at 80x24: its
/// lesson's finding kind and explanation are on screen without a key press. Half scale
/// (`--time-scale 0.5`): the same stories, sooner. All twenty run at once.
#[test]
fn every_scenario_opens_on_its_lesson_at_120x40_and_80x24() {
    if no_tmux() {
        return;
    }
    let mut sessions = Vec::new();
    for (w, h) in [(120, 40), (80, 24)] {
        for scenario in Scenario::ALL {
            let cmd = format!(
                "{} demo --scenario {scenario} --time-scale 0.5; sleep 60",
                env!("CARGO_BIN_EXE_budget-top")
            );
            let since = Instant::now();
            let session = Session::start(&format!("{scenario}-{w}"), w, h, &cmd);
            sessions.push((
                format!("{scenario} at {w}x{h}"),
                session,
                lesson_on_screen(scenario),
                since,
            ));
        }
    }
    for (what, took) in wait_for_all(&sessions) {
        eprintln!("{what}: its lesson after {took:.1?}");
    }
}

/// `--trace-url`: the waterfall's title and the detail popup show the link to the chain's
/// trace; where the terminal takes hyperlinks (`FORCE_HYPERLINK=1` here: tmux 3.3 does not
/// pass them on, so the program's own output is read from `pipe-pane`), each is an OSC 8
/// sequence holding the template's text and the hex id alone, and the columns after it stay
/// where they were drawn.
#[test]
fn the_trace_url_is_on_the_waterfall_and_in_the_detail_as_a_hyperlink() {
    if no_tmux() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("budget-top-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chain.jsonl");
    std::fs::write(&file, format!("{}\n", export_request())).unwrap();
    let raw = dir.join("raw.out");
    let link = "http://jaeger.example:16686/trace/5b8efff798038103d269b633813fc60c";
    for (width, height, hyperlinks) in [(200u16, 60u16, true), (80, 24, false)] {
        let _ = std::fs::remove_file(&raw);
        let cmd = format!(
            "sleep 1; env FORCE_HYPERLINK={} {} replay {} --trace-url 'http://jaeger.example:16686/trace/{{trace_id}}'; echo SCREEN-EXITED $?; sleep 60",
            u8::from(hyperlinks),
            env!("CARGO_BIN_EXE_budget-top"),
            file.display()
        );
        let session = Session::start("links", width, height, &cmd);
        session.tmux(&[
            "pipe-pane",
            "-o",
            "-t",
            &session.0,
            &format!("cat >> {}", raw.display()),
        ]);
        session.wait_for("replay finished: 3 spans");
        // The waterfall (Enter on the list), then the detail of its row (Enter again).
        session.keys("Enter");
        session.expect("the waterfall's title", |pane| {
            ensure!(pane.contains("HOP / CALL"), "no waterfall");
            let title = pane
                .lines()
                .find(|l| l.starts_with("─ orders POST /orders"))
                .ok_or("no waterfall title")?;
            if width == 200 {
                ensure!(title.contains(&format!(" {link} ─")), "no link: {title}");
            } else {
                ensure!(
                    !title.contains("http://"),
                    "the link fits only whole: {title}"
                );
            }
            ensure!(
                title.chars().count() == width as usize && title.ends_with('─'),
                "the title is not the pane's width: {title}"
            );
            Ok(())
        });
        session.keys("Enter");
        let border = |l: &str| {
            l.char_indices()
                .filter(|(_, c)| *c == '│')
                .map(|(i, _)| l[..i].chars().count())
                .collect::<Vec<_>>()
        };
        session.expect("the link in the detail", |pane| {
            let rows: Vec<&str> = pane.lines().collect();
            let heading = rows
                .iter()
                .position(|l| l.contains("link to the trace (--trace-url)"))
                .ok_or("no heading")?;
            let shown: String = rows[heading + 1..]
                .iter()
                .take_while(|l| !l.contains("kind "))
                .map(|l| l.split('│').nth(1).unwrap_or("").trim())
                .collect();
            ensure!(
                shown == link,
                "not the whole link, cut over rows to fit: {shown}"
            );
            let (under, at) = (
                border(rows.get(heading + 1).unwrap_or(&"")),
                border(rows[heading]),
            );
            ensure!(
                under == at && at.len() == 2,
                "the popup's borders move: {at:?} {under:?}"
            );
            Ok(())
        });
        // Escape, then q once it has closed the popup (sent together, they read as Alt-q).
        session.keys("Escape");
        session.wait_until("the popup closed", |pane| {
            !pane.contains("link to the trace")
        });
        session.keys("q");
        session.wait_for("SCREEN-EXITED 0");
        let out = std::fs::read(&raw).unwrap_or_default();
        let out = String::from_utf8_lossy(&out);
        let sequences: Vec<&str> = out.split("\x1b]8;").skip(1).collect();
        if hyperlinks {
            // Each link opens with its id and URI, holds its text, and closes.
            let opened: Vec<&str> = sequences
                .iter()
                .filter(|s| !s.starts_with(";\x1b\\"))
                .copied()
                .collect();
            assert!(opened.len() >= 2, "the title and the popup: {out:?}");
            for s in &opened {
                let (params, rest) = s.split_once(';').unwrap();
                assert_eq!(params, "id=5b8efff798038103d269b633813fc60c", "{s:?}");
                let (uri, _) = rest.split_once("\x1b\\").unwrap();
                assert_eq!(uri, link, "only the template's text and the hex id");
            }
            assert_eq!(
                sequences.len(),
                2 * opened.len(),
                "every link is closed: {out:?}"
            );
        } else {
            assert!(
                sequences.is_empty(),
                "no OSC 8 where the terminal is not known to take it"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
