//! The real `budget-top` binary: run to completion, listening, or serving, and what it left.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{output_within, runtime, send_signal};

/// The flags that put both receivers on port 0 of 127.0.0.1.
pub const RECEIVERS_ON_PORT_0: [&str; 4] = ["--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"];

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

/// Spawns `command` (stdin closed, stderr piped) and waits for its first line on stderr (`what`
/// says what is wrong without it).
#[track_caller]
fn spawn_until_first_line(
    command: &mut Command,
    what: &str,
) -> (Child, mpsc::Receiver<String>, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what}"));
    (child, rx, line)
}

/// Starts `budget-top ARGS --grpc 127.0.0.1:0 --http 127.0.0.1:0` and waits for the
/// "listening: grpc A, http B" line.
#[track_caller]
pub fn listen(args: &[&str]) -> Listening {
    let (child, rx, line) = spawn_until_first_line(
        Command::new(bin())
            .args(args)
            .args(RECEIVERS_ON_PORT_0)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped()),
        "budget-top did not print its listening line",
    );
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
    /// The receiver an exporter of `transport` sends to: `grpc`, else OTLP/HTTP.
    pub fn receiver(&self, transport: &str) -> SocketAddr {
        if transport == "grpc" {
            self.grpc
        } else {
            self.http
        }
    }

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

    /// Posts `body` to its OTLP/HTTP receiver as `content_type`, and checks it was accepted.
    #[track_caller]
    pub fn post(&self, content_type: &str, body: impl Into<reqwest::Body>) {
        let (url, body) = (format!("http://{}/v1/traces", self.http), body.into());
        let status = runtime().block_on(async {
            let request = reqwest::Client::new().post(url).body(body);
            let sent = request.header("content-type", content_type).send().await;
            sent.unwrap().status()
        });
        assert_eq!(status, 200);
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
    let (child, rx, line) = spawn_until_first_line(
        Command::new(bin())
            .arg("serve")
            .args(RECEIVERS_ON_PORT_0)
            .args(["--api", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null()),
        "serve printed no start-up line",
    );
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

/// `budget-top merge --format json` of the JSON reports the `shards` printed (each written to a
/// file in `dir` first): the merged report. A gate that fails (exit 1) still merges.
#[track_caller]
pub fn merge_reports(dir: &Path, shards: &[Finished]) -> Json {
    let mut args = vec!["merge".to_string(), "--format".into(), "json".into()];
    for (i, shard) in shards.iter().enumerate() {
        let path = dir.join(format!("shard-{i}.json"));
        std::fs::write(&path, &shard.stdout).unwrap();
        args.push(path.display().to_string());
    }
    let out = output_within(Command::new(bin()).args(&args), Duration::from_secs(60));
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "budget-top merge: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `budget-top check --input INPUT --html PAGE`, and `more` flags, run to completion.
#[track_caller]
pub fn check_html(input: &Path, page: &Path, more: &[&str]) -> Finished {
    let (input, page) = (input.to_str().unwrap(), page.to_str().unwrap());
    run(&[&["check", "--input", input, "--html", page][..], more].concat())
}

/// `budget-top check --input PATH --format json`, run to completion.
#[track_caller]
pub fn check_json(path: &Path) -> Finished {
    run(&[
        "check",
        "--input",
        path.to_str().unwrap(),
        "--format",
        "json",
    ])
}

/// `budget-top serve ARGS`, on port 0 everywhere, refuses to start: exit 2, and `sentence` on
/// stderr.
#[track_caller]
pub fn assert_serve_refuses(args: &[&str], sentence: &str) {
    let api: &[&str] = if args.contains(&"--api") {
        &[]
    } else {
        &["--api", "127.0.0.1:0"]
    };
    let out = run(&[&["serve"][..], &RECEIVERS_ON_PORT_0, api, args].concat());
    assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
    assert!(
        out.stderr.contains(sentence),
        "{args:?} says {sentence:?}: {}",
        out.stderr
    );
}
