//! A real Caddy (`scripts/caddy.sh`: v2.10, its standard modules) in front of a stock Python app
//! (`tests/python/stock/behind_proxy.py`): Caddy's `tracing` records only its SERVER span and
//! passes `traceparent` on, its `reverse_proxy` gives up at a fixed 1 s, and the app, traced by
//! the stock WSGI and requests instrumentation, waits on a third-party API that has no tracing.
//! Caddy's own access log (when it answered, and what) and the app's log are the truth:
//!
//! - `deadline_exceeded` on exactly the requests Caddy answered 504, `ok` on its 200s (Caddy
//!   records its own 504 as 200 UNSET, its span ended first);
//! - the caddy -> app timeout inferred from those calls, at Caddy's 1 s;
//! - `orphaned_work` on the app each time, and exit 1 from `check`;
//! - the wait on the API after Caddy gave up, within 15 % of what the logs show, as dead work on
//!   the app's untraced edge (named by the URL's host), once: none on caddy -> app, where the
//!   app only waited;
//! - no `shed_*`.
//!
//! Skipped, saying so, without Go (Caddy is built from it) or python3.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::otelcol_tier1::free_port;
use crate::python_sdk::venv_python_or_skip;
use crate::python_stock::stock_python;
use crate::support::{Service, go_tool_or_skip, listen, one_burst_at_a_time, scratch, send_signal};

/// Requests of each kind, sent at once.
const EACH: usize = 4;
/// Caddy's `response_header_timeout`, ms.
const PROXY_MS: i64 = 1000;

/// `scripts/caddy.sh`'s binary, or `None` (said on stderr) without Go.
fn caddy_or_skip(test: &str) -> Option<String> {
    go_tool_or_skip(test, "Caddy", Duration::from_secs(1200))
}

/// A running Caddy, stopped (and its spans flushed) with SIGTERM.
struct Caddy(Child);

impl Drop for Caddy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `got` is within 15 % of `want` (and a few ms a request, for a loaded machine's timers).
#[track_caller]
fn near(got: i64, want: i64, what: &str, report: &Json) {
    let slack = want / 7 + 20 * EACH as i64;
    assert!(
        (got - want).abs() <= slack,
        "{what}: {got} ms, the logs say {want}: {report:#}"
    );
}

#[test]
fn a_real_caddy_that_gives_up_is_a_call_abandoned_and_its_timeout_inferred() {
    let test = "a_real_caddy_that_gives_up_is_a_call_abandoned_and_its_timeout_inferred";
    let Some(caddy_bin) = caddy_or_skip(test) else {
        return;
    };
    let Some(python) = venv_python_or_skip(test) else {
        return;
    };
    let _burst = one_burst_at_a_time();
    let check = listen(&["check", "--idle", "3s", "--format", "json"]);
    let app = Service::start(
        stock_python(
            &python,
            &format!("http://{}", check.http),
            "behind_proxy",
            "app",
            &[],
        ),
        "app",
    );

    let dir = scratch("caddy");
    let access_log = dir.join("access.log");
    let port = free_port().port();
    let caddyfile = dir.join("Caddyfile");
    std::fs::write(
        &caddyfile,
        format!(
            "{{\n\tadmin off\n\tauto_https off\n}}\n:{port} {{\n\tbind 127.0.0.1\n\ttracing {{\n\t\tspan caddy\n\t}}\n\tlog {{\n\t\toutput file {}\n\t\tformat json\n\t}}\n\treverse_proxy 127.0.0.1:{} {{\n\t\ttransport http {{\n\t\t\tresponse_header_timeout {PROXY_MS}ms\n\t\t}}\n\t}}\n}}\n",
            access_log.display(),
            app.port
        ),
    )
    .unwrap();
    let caddy = Caddy(
        Command::new(&caddy_bin)
            .args(["run", "--adapter", "caddyfile", "--config"])
            .arg(&caddyfile)
            .env("OTEL_SERVICE_NAME", "caddy")
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}", check.grpc),
            )
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .env("XDG_DATA_HOME", &dir)
            .env("XDG_CONFIG_HOME", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ready_by = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < ready_by, "Caddy did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The users: the slow and the fast requests at once.
    let statuses: Vec<(String, u16)> = crate::support::runtime().block_on(async {
        let client = reqwest::Client::new();
        let sends = ["/slow", "/fast"].iter().flat_map(|path| {
            let client = client.clone();
            (0..EACH).map(move |_| {
                let client = client.clone();
                async move {
                    let url = format!("http://127.0.0.1:{port}{path}");
                    let status = client.get(url).send().await.unwrap().status().as_u16();
                    (path.to_string(), status)
                }
            })
        });
        futures::future::join_all(sends).await
    });
    // Every slow request is still waiting on the API after Caddy's second; wait for the app to
    // end them all before stopping it.
    std::thread::sleep(Duration::from_millis(1500));
    send_signal(&caddy.0, "-TERM");
    let app_seen = app.stop();
    let finished = check.wait(Duration::from_secs(60));
    let report = finished.json();
    drop(caddy);

    // What Caddy says it answered, and when (its log's `ts`, in seconds, is when it answered).
    let log = std::fs::read_to_string(&access_log).unwrap();
    let answers: Vec<Json> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter(|l| l["msg"] == "handled request")
        .collect();
    assert_eq!(answers.len(), 2 * EACH, "{log}");
    let gave_up: Vec<&Json> = answers.iter().filter(|a| a["status"] == 504).collect();
    assert_eq!(gave_up.len(), EACH, "Caddy gave up on the slow ones: {log}");
    assert!(
        gave_up.iter().all(|a| a["request"]["uri"] == "/slow"),
        "{log}"
    );
    assert_eq!(
        statuses.iter().filter(|(_, s)| *s == 504).count(),
        EACH,
        "{statuses:?}"
    );

    // Outcomes, read from Caddy's one span: never `ok` while its callee still worked.
    assert_eq!(
        finished.code,
        Some(1),
        "orphaned_work is an error: {finished:?}"
    );
    let outcomes = &report["summary"]["outcomes"];
    assert_eq!(outcomes["deadline_exceeded"], EACH as u64, "{report:#}");
    assert_eq!(outcomes["ok"], EACH as u64, "{report:#}");

    let edge = |caller: &str, callee: &str| -> &Json {
        report["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["caller"] == caller && e["callee"] == callee)
            .unwrap_or_else(|| panic!("no edge {caller} -> {callee}: {report:#}"))
    };
    let proxy = edge("caddy", "app");
    assert_eq!(proxy["timeout_inferred"], true, "{proxy:#}");
    let timeout = proxy["timeout_ms"].as_i64().unwrap();
    assert!(
        (timeout - PROXY_MS).abs() <= PROXY_MS / 50 + 5,
        "Caddy's 1 s, inferred: {proxy:#}"
    );
    // The app only waited: at most the few ms its middleware takes to end the span after the
    // call returns.
    let own = proxy["wasted_ms"].as_i64().unwrap();
    assert!(own <= 20 * EACH as i64, "the app only waited: {proxy:#}");

    let orphaned: Vec<&Json> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "orphaned_work")
        .collect();
    assert_eq!(orphaned.len(), EACH, "{report:#}");
    assert!(orphaned.iter().all(|f| f["service"] == "app"), "{report:#}");
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f["kind"].as_str().unwrap().starts_with("shed_")),
        "{report:#}"
    );

    // The truth: each slow request's end in the app's log, past the moment Caddy answered.
    let mut slow_ends: Vec<i64> = app_seen["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["path"] == "/slow")
        .map(|r| r["end_ns"].as_i64().unwrap() / 1_000_000)
        .collect();
    let mut gave_up_at: Vec<i64> = gave_up
        .iter()
        .map(|a| (a["ts"].as_f64().unwrap() * 1000.0) as i64)
        .collect();
    slow_ends.sort_unstable();
    gave_up_at.sort_unstable();
    assert_eq!(slow_ends.len(), EACH, "{app_seen}");
    let logged: i64 = slow_ends.iter().zip(&gave_up_at).map(|(e, g)| e - g).sum();
    let api = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["caller"] == "app" && e["untraced"] == true)
        .unwrap_or_else(|| panic!("no untraced edge out of the app: {report:#}"));
    assert_eq!(
        api["callee"], "127.0.0.1",
        "named by the URL's host: {api:#}"
    );
    near(
        api["wasted_ms"].as_i64().unwrap(),
        logged,
        "app -> API",
        &report,
    );
    near(
        report["summary"]["wasted_ms"].as_i64().unwrap(),
        logged,
        "the chains' waste",
        &report,
    );
}
