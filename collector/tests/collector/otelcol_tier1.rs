//! docs/scale.md's tier 1 for real: the OpenTelemetry Collector built from its Go modules
//! (`scripts/otelcol.sh`) runs `docs/otelcol-tier1.yaml`, ports rendered through its
//! environment variables, in front of three `budget-top check` instances. The Go SDK's chains
//! (`tests/go`, OTLP/gRPC) go through it and, the same spans, straight to a fourth instance.
//! Each chain must reach exactly one shard, whole, on the shard its trace ID names, and
//! `budget-top merge` must turn the shards' reports into the fourth instance's report, exactly.
//! Skips (loudly) only when there is no `go` at all; a failed build fails the test.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::go_grpc::gochain_or_skip;
use crate::support::{Finished, assert_success, listen, merge_reports, output_within, scratch};

/// Chains per run of the Go chain: three per round (two fast, one slow).
const ROUNDS: usize = 8;

/// `scripts/otelcol.sh`'s binary, built into this target dir (cached there).
pub fn otelcol() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("..");
    let out = output_within(
        Command::new("bash")
            .arg(repo.join("scripts/otelcol.sh"))
            .env("CARGO_TARGET_DIR", target),
        Duration::from_secs(1200),
    );
    assert_success("scripts/otelcol.sh", &out);
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A free port on loopback for the Collector's receivers (it cannot tell which port 0 became).
pub fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// A running Collector and what it has logged so far.
pub struct Collector {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: String,
}

impl Collector {
    /// Runs `otelcol` with `configs` (merged in order, as `--config` does) and `env`, and waits
    /// for "Everything is ready".
    #[track_caller]
    pub fn start(otelcol: &str, configs: &[&Path], env: &[(&str, String)]) -> Collector {
        let mut command = Command::new(otelcol);
        for config in configs {
            command.arg("--config").arg(config);
        }
        let mut child = command
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut collector = Collector {
            child,
            lines,
            log: String::new(),
        };
        let ready_by = Instant::now() + Duration::from_secs(60);
        loop {
            let left = ready_by.saturating_duration_since(Instant::now());
            match collector.lines.recv_timeout(left) {
                Ok(line) => {
                    let ready = line.contains("Everything is ready");
                    collector.log.push_str(&line);
                    collector.log.push('\n');
                    if ready {
                        return collector;
                    }
                }
                Err(_) => {
                    let _ = collector.child.kill();
                    let _ = collector.child.wait();
                    panic!("the Collector did not start:\n{}", collector.log);
                }
            }
        }
    }

    /// SIGTERM (a stopping Collector flushes its batch and its exporters' queues), waits for a
    /// successful exit, and returns everything it logged.
    #[track_caller]
    pub fn stop(mut self) -> String {
        crate::support::send_signal(&self.child, "-TERM");
        let stop_by = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > stop_by {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the Collector did not stop within 30 s:\n{}", self.log);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
            self.log.push_str(&line);
            self.log.push('\n');
        }
        assert!(
            status.success(),
            "the Collector failed ({status}):\n{}",
            self.log
        );
        self.log
    }
}

/// The shard docs/otelcol-tier1.yaml routes a trace to, by its first hex digit.
fn shard_of(trace_id: &str) -> usize {
    match trace_id.as_bytes()[0] {
        b'0'..=b'4' => 0,
        b'5'..=b'9' | b'a' => 1,
        _ => 2,
    }
}

/// The report without the listener's own `ingest` counts (they count requests, which the
/// Collector batches differently), findings in a fixed order. Everything else, percentiles
/// included, must be equal: sketches merge bucket by bucket.
fn comparable(mut report: Json) -> Json {
    report.as_object_mut().unwrap().remove("ingest");
    report["findings"].as_array_mut().unwrap().sort_by_key(|f| {
        (
            f["trace_id"].as_str().unwrap().to_string(),
            f["span_id"].as_str().unwrap().to_string(),
            f["kind"].as_str().unwrap().to_string(),
        )
    });
    report
}

#[test]
fn collector_tier1_routes_each_chain_whole_to_one_budget_top_and_the_shards_merge() {
    let test = "collector_tier1_routes_each_chain_whole_to_one_budget_top_and_the_shards_merge";
    let Some(gochain) = gochain_or_skip(test) else {
        return;
    };
    let otelcol = otelcol();
    let shards: Vec<_> = (0..3)
        .map(|_| listen(&["check", "--for", "300s", "--format", "json"]))
        .collect();
    let whole = listen(&["check", "--for", "300s", "--format", "json"]);

    let (tier1, tier1_http) = (free_port(), free_port());
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/otelcol-tier1.yaml");
    let collector = Collector::start(
        &otelcol,
        &[&config],
        &[
            ("TIER1_OTLP_GRPC", tier1.to_string()),
            ("TIER1_OTLP_HTTP", tier1_http.to_string()),
            ("BUDGET_TOP_1", shards[0].grpc.to_string()),
            ("BUDGET_TOP_2", shards[1].grpc.to_string()),
            ("BUDGET_TOP_3", shards[2].grpc.to_string()),
        ],
    );

    // The same spans through tier 1 and, for comparison, straight to one instance.
    let out = output_within(
        Command::new(&gochain)
            .args(["fixed", &tier1.to_string(), &whole.grpc.to_string()])
            .env("GOCHAIN_ROUNDS", ROUNDS.to_string()),
        Duration::from_secs(120),
    );
    assert_success("the Go chain through the Collector", &out);

    let log = collector.stop();
    assert!(
        !log.contains("\terror\t"),
        "the Collector logged errors:\n{log}"
    );

    let shards: Vec<Finished> = shards
        .into_iter()
        .map(|s| s.terminate(Duration::from_secs(30)))
        .collect();
    let whole = whole.terminate(Duration::from_secs(30));
    let whole_report = whole.json();
    let chains = 3 * ROUNDS;
    assert_eq!(
        whole_report["summary"]["traces"], chains,
        "{whole_report:#}"
    );
    assert_eq!(
        whole_report["summary"]["spans"],
        5 * chains,
        "{whole_report:#}"
    );

    // Every chain of the fixed variant has a finding, so the findings name every trace.
    let mut home: BTreeMap<String, usize> = BTreeMap::new();
    for (i, shard) in shards.iter().enumerate() {
        let report = shard.json();
        let mut traces: Vec<String> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["trace_id"].as_str().unwrap().to_string())
            .collect();
        traces.sort();
        traces.dedup();
        assert_eq!(
            report["summary"]["traces"],
            traces.len(),
            "shard {i}: {report:#}"
        );
        // Whole chains: five spans each, nothing of a chain elsewhere.
        assert_eq!(
            report["summary"]["spans"],
            5 * traces.len(),
            "shard {i}: {report:#}"
        );
        for trace in traces {
            assert_eq!(shard_of(&trace), i, "trace {trace} reached shard {i}");
            assert!(
                home.insert(trace.clone(), i).is_none(),
                "{trace} reached two shards"
            );
        }
    }
    assert_eq!(home.len(), chains, "every chain reached a shard: {home:?}");
    let used: std::collections::BTreeSet<_> = home.values().collect();
    assert!(
        used.len() >= 2,
        "{chains} random trace IDs all on one shard: {home:?}"
    );

    let merged = merge_reports(&scratch("otelcol_tier1_merge"), &shards);
    assert_eq!(comparable(merged), comparable(whole_report));
}
