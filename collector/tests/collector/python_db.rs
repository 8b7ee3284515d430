//! A real database as the untraced callee: PostgreSQL (a scratch cluster the test starts on
//! 127.0.0.1 and a free port) behind a Python app (`tests/python/stock/db_app.py`: WSGI, and
//! psycopg2 through the stock DB-API instrumentation, which names its spans `SELECT` and `SET`
//! and says only `db.system` and `net.peer.name`), behind a gateway that gives up at 1 s
//! (`edge.py`). The app's own log is the truth:
//!
//! - a query that outlives the gateway is dead work on one edge, app -> 127.0.0.1 (the
//!   database, named by `net.peer.name`), untraced, once (not per SQL verb, nor on the edge
//!   into the app), within 15 % of what the app logged after the gateway gave up;
//! - queries cancelled by a `statement_timeout` got no answer: that timeout, inferred;
//! - three unique violations got an answer, fast: no timeout.
//!
//! Skipped, saying so, where there is no python3 or no PostgreSQL server binaries
//! (`.ci/tools postgresql` installs them).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::python_sdk::venv_python_or_skip;
use crate::python_stock::stock_python;
use crate::support::{Service, listen, one_burst_at_a_time, output_within};

/// Requests a phase sends at once.
const REQUESTS: u64 = 3;
/// The gateway's fixed timeout in the slow phase, ms.
const GATEWAY_MS: i64 = 1000;
/// The slow query.
const SLOW_S: f64 = 1.6;
/// The statement_timeout the app sets in the cancelled phase, ms.
const STATEMENT_TIMEOUT_MS: i64 = 950;

/// Where the PostgreSQL server's binaries are: on the PATH, else Debian's directory.
fn postgres_bin() -> Option<PathBuf> {
    let on_path = Command::new("pg_ctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return Some(PathBuf::new());
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// A scratch cluster: `initdb` into a fresh directory, the server on a free port, trust on
/// loopback only. Run as the `postgres` user when the test runs as root (the server refuses
/// root). Stopped and removed on drop.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
    dsn: String,
}

impl Cluster {
    fn command(&self, tool: &str) -> Command {
        let tool = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(tool);
            c
        } else {
            Command::new(tool)
        }
    }

    #[track_caller]
    fn start(bin: PathBuf) -> Cluster {
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let unique = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        // Under /tmp: every directory above it must be open to the postgres user.
        let dir =
            std::env::temp_dir().join(format!("budget-top-pg-{}-{unique}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root {
            let out = output_within(
                Command::new("chown").arg("postgres:postgres").arg(&dir),
                Duration::from_secs(30),
            );
            assert!(out.status.success(), "chown: {out:?}");
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cluster = Cluster {
            bin,
            dir: dir.clone(),
            as_postgres: is_root,
            dsn: format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        };
        let data = dir.join("data");
        let out = output_within(
            cluster
                .command("initdb")
                .args(["--auth=trust", "-U", "postgres", "-E", "UTF8", "-D"])
                .arg(&data),
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "initdb: {out:?}");
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.display()
        );
        let out = output_within(
            cluster
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-w", "-t", "60", "-o", &options, "start"]),
            Duration::from_secs(90),
        );
        assert!(out.status.success(), "pg_ctl start: {out:?}");
        cluster
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One phase: the app in `mode` and the gateway (giving up after `gateway_s`) exporting to
/// `endpoint`; REQUESTS users at once. Returns what the app logged of each request.
#[track_caller]
fn phase(python: &Path, endpoint: &str, dsn: &str, mode: &str, gateway_s: f64) -> Vec<Json> {
    let app = Service::start(
        stock_python(
            python,
            endpoint,
            "db_app",
            "db-app",
            &[
                dsn.to_owned(),
                mode.to_owned(),
                SLOW_S.to_string(),
                STATEMENT_TIMEOUT_MS.to_string(),
            ],
        ),
        "db-app",
    );
    let mut gateway = stock_python(
        python,
        endpoint,
        "edge",
        "db-gateway",
        &[
            format!("http://127.0.0.1:{}/", app.port),
            "fixed".to_owned(),
        ],
    );
    gateway.env("EDGE_FIXED_TIMEOUT_S", gateway_s.to_string());
    let gateway = Service::start(gateway, "db-gateway");
    let out = output_within(
        Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/stock/client.py"))
            .args([
                format!("http://127.0.0.1:{}/order", gateway.port),
                REQUESTS.to_string(),
                "3000".to_owned(),
            ])
            .env("PYTHONDONTWRITEBYTECODE", "1"),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "client: {out:?}");
    // The slow queries outlive the gateway: let them end before the app stops.
    std::thread::sleep(Duration::from_millis(1500));
    gateway.stop();
    let seen = app.stop();
    let requests = seen["requests"].as_array().unwrap().clone();
    assert_eq!(requests.len() as u64, REQUESTS, "{seen}");
    requests
}

/// The report's one untraced edge out of the app.
#[track_caller]
fn database_edge(report: &Json) -> &Json {
    let untraced: Vec<&Json> = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["untraced"] == true)
        .collect();
    assert_eq!(untraced.len(), 1, "{report:#}");
    assert_eq!(untraced[0]["caller"], "db-app", "{report:#}");
    assert_eq!(untraced[0]["callee"], "127.0.0.1", "{report:#}");
    untraced[0]
}

#[test]
fn a_database_is_an_untraced_callee_its_waits_counted_once_its_timeouts_inferred() {
    let test = "a_database_is_an_untraced_callee";
    let Some(bin) = postgres_bin() else {
        eprintln!(
            "\n*** SKIPPED {test}: no PostgreSQL server binaries (.ci/tools postgresql) ***\n"
        );
        return;
    };
    let Some(python) = venv_python_or_skip(test) else {
        return;
    };
    let _burst = one_burst_at_a_time();
    let cluster = Cluster::start(bin);

    // Slow queries behind a gateway that gives up at 1 s, then queries the database cancels
    // at the app's statement_timeout behind one that waits 2 s.
    let check = listen(&["check", "--idle", "3s", "--format", "json"]);
    let endpoint = format!("http://{}", check.http);
    let slow = phase(&python, &endpoint, &cluster.dsn, "slow", 1.0);
    let cancelled = phase(&python, &endpoint, &cluster.dsn, "cancel", 2.0);
    let finished = check.wait(Duration::from_secs(60));
    let report = finished.json();
    assert_eq!(finished.code, Some(1), "{finished:?}");
    for r in &cancelled {
        assert_eq!(r["what"], "QueryCanceled", "{r}");
    }
    let ms = |v: &Json| v.as_i64().unwrap() / 1_000_000;
    // The truth: how long each slow query ran after the gateway gave up on the app.
    let truth: i64 = slow
        .iter()
        .map(|r| (ms(&r["query"][1]) - (ms(&r["arrival"]) + GATEWAY_MS)).max(0))
        .sum();
    assert!(truth > 400, "{slow:?}");
    let db = database_edge(&report);
    // SELECT, and SET + SELECT: one edge, every query on it.
    assert_eq!(db["calls"], 3 * REQUESTS, "{report:#}");
    let wasted = db["wasted_ms"].as_i64().unwrap();
    assert!(
        (wasted - truth).abs() <= truth / 7 + 30 * REQUESTS as i64,
        "app -> database wasted {wasted} ms, the app logged {truth}: {report:#}"
    );
    // Counted once: the app only waited, so the edge into it carries next to nothing.
    let into_app = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["callee"] == "db-app")
        .unwrap();
    assert!(
        into_app["wasted_ms"].as_i64().unwrap() * 10 < wasted,
        "{report:#}"
    );
    let total = report["summary"]["wasted_ms"].as_i64().unwrap();
    assert!(
        (total - truth).abs() <= truth / 7 + 30 * REQUESTS as i64,
        "{report:#}"
    );
    // The cancelled queries ended at the statement_timeout: inferred.
    assert_eq!(db["timeout_inferred"], true, "{report:#}");
    let timeout = db["timeout_ms"].as_i64().unwrap();
    assert!(
        (STATEMENT_TIMEOUT_MS - 5..STATEMENT_TIMEOUT_MS + 60).contains(&timeout),
        "{report:#}"
    );
    // The app is blamed for its caller's give-up, naming the database's work below it.
    let orphaned: Vec<&Json> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "orphaned_work" && f["service"] == "db-app")
        .collect();
    assert_eq!(orphaned.len() as u64, REQUESTS, "{report:#}");
    for f in &orphaned {
        assert!(
            f["message"].as_str().unwrap().contains(": 127.0.0.1 "),
            "{f}"
        );
    }

    // Three unique violations: answered, at once, by the database: no timeout.
    let check = listen(&["check", "--idle", "3s", "--format", "json"]);
    let endpoint = format!("http://{}", check.http);
    let unique = phase(&python, &endpoint, &cluster.dsn, "unique", 2.0);
    for r in &unique {
        assert_eq!(r["what"], "UniqueViolation", "{r}");
    }
    let report = check.wait(Duration::from_secs(60)).json();
    let db = database_edge(&report);
    assert_eq!(db["calls"], REQUESTS, "{report:#}");
    assert_eq!(db["timeout_ms"], Json::Null, "{report:#}");
    assert_eq!(db["timeout_inferred"], false, "{report:#}");
}
