//! The pipeline a team sets up (docs/serve.md), its shipped files run as they are:
//! `deploy/otelcol.yaml` in the real OpenTelemetry Collector (`scripts/otelcol.sh`) fanning
//! traces out to a backend and to budget-top over TLS with the bearer token, and
//! `deploy/prometheus.yml`, `deploy/budget-top.rules.yml` through Debian's `promtool`
//! (`check config`, `check rules`, `test rules` with `deploy/budget-top.rules.test.yml`), and
//! `deploy/prometheus.yml` in the real Prometheus, reaching budget-top over TLS with the token.
//! The Collector leg runs against `budget-top check` listening: the receivers, TLS and token are
//! the ones `serve` has. Skips (loudly) only where Go is absent or promtool cannot be installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;

use crate::otelcol_tier1::{Collector, free_port, otelcol};
use crate::support::{
    finding_names, listen, output_within, reset_chain, scratch, serve, tool_present,
};
use crate::tls::{ca, issue};

/// The files a team copies, under `deploy/`.
fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file)
}

/// The metric families of CONVENTIONS §7, the only names the rules may use.
const FAMILIES: [&str; 10] = [
    "budget_top_spans_total",
    "budget_top_chains_total",
    "budget_top_findings_total",
    "budget_top_wasted_seconds_total",
    "budget_top_edge_calls_total",
    "budget_top_edge_latency_seconds",
    "budget_top_edge_timeout_seconds",
    "budget_top_hops_total",
    "budget_top_requests_total",
    "budget_top_series_overflow_total",
];

/// promtool: on the PATH, else installed by `.ci/tools prometheus`. `None`, said loudly, only
/// when it is absent and cannot be installed.
fn promtool() -> Option<&'static str> {
    static FOUND: OnceLock<bool> = OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        if tool_present("promtool", "--version") {
            return true;
        }
        let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools");
        eprintln!("promtool is missing: installing it with {}", tools.display());
        let _ = Command::new(&tools)
            .arg("prometheus")
            .stdin(Stdio::null())
            .status();
        let found = tool_present("promtool", "--version");
        if !found {
            eprintln!(
                "\n*** SKIPPED: promtool is not installed and `.ci/tools prometheus` could not install it; the shipped Prometheus files are NOT checked ***\n"
            );
        }
        found
    });
    found.then_some("promtool")
}

/// Runs promtool with `args` in `dir`; its output, or a failure with both streams.
#[track_caller]
fn promtool_ok(dir: &Path, args: &[&str]) -> String {
    let out = output_within(
        Command::new(promtool().unwrap())
            .args(args)
            .current_dir(dir),
        Duration::from_secs(120),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// A CA, and a server certificate it signed for `localhost` and 127.0.0.1, written under `dir`:
/// (CA, certificate, key).
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let authority = ca();
    let (cert, key) = issue(&authority, &["localhost", "127.0.0.1"], false);
    let write = |file: &str, text: &str| {
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    };
    (
        write("ca.pem", &authority.pem()),
        write("server.pem", &cert),
        write("server.key", &key),
    )
}

/// What the budget-top of these tests runs with, in `dir`: the [`certificates`] and a token.
struct Secrets {
    /// The CA that issued the certificate, for the clients to trust.
    ca: PathBuf,
    token: PathBuf,
    /// `--tls-cert`, `--tls-key` and `--bearer-token-file`, each with its file.
    flags: [String; 6],
}

fn secrets(dir: &Path) -> Secrets {
    let (ca, cert, key) = certificates(dir);
    let token = dir.join("token");
    std::fs::write(&token, "s3cret-Token_42\n").unwrap();
    let file = |path: &Path| path.display().to_string();
    let flags = [
        "--tls-cert".into(),
        file(&cert),
        "--tls-key".into(),
        file(&key),
        "--bearer-token-file".into(),
        file(&token),
    ];
    Secrets { ca, token, flags }
}

impl Secrets {
    fn flags(&self) -> Vec<&str> {
        self.flags.iter().map(String::as_str).collect()
    }
}

#[test]
fn the_shipped_prometheus_config_and_rules_pass_promtool_check() {
    let Some(_) = promtool() else { return };
    // Laid out as /etc/prometheus would be: the files side by side, the secrets in budget-top/.
    let dir = scratch("pipeline_promtool_check");
    for file in ["prometheus.yml", "budget-top.rules.yml"] {
        std::fs::copy(deploy(file), dir.join(file)).unwrap();
    }
    // promtool checks that the token and CA files exist: without them the config is refused.
    let out = output_within(
        Command::new("promtool")
            .args(["check", "config", "prometheus.yml"])
            .current_dir(&dir),
        Duration::from_secs(60),
    );
    assert!(
        !out.status.success(),
        "no token file, yet the config passed"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("budget-top/token"),
        "{out:?}"
    );
    std::fs::create_dir_all(dir.join("budget-top")).unwrap();
    std::fs::write(dir.join("budget-top/token"), "s3cret-Token_42\n").unwrap();
    certificates(&dir.join("budget-top"));
    let checked = promtool_ok(&dir, &["check", "config", "prometheus.yml"]);
    assert!(checked.contains("SUCCESS: 1 rule files found"), "{checked}");
    let rules = promtool_ok(&dir, &["check", "rules", "budget-top.rules.yml"]);
    assert!(rules.contains("SUCCESS: 11 rules found"), "{rules}");
}

#[test]
fn the_shipped_alerts_fire_where_the_rules_test_says_and_only_there() {
    let Some(_) = promtool() else { return };
    let out = promtool_ok(&deploy(""), &["test", "rules", "budget-top.rules.test.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");

    // Each alert is tested with series that must fire it and a time at which none may.
    let rules = std::fs::read_to_string(deploy("budget-top.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(deploy("budget-top.rules.test.yml")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(
        alerts,
        [
            "BudgetTopWastedSecondsRising",
            "BudgetTopNewBudgetReset",
            "BudgetTopBudgetCoverageFalling"
        ]
    );
    for alert in alerts {
        let cases: Vec<&str> = tests
            .split("- eval_time: ")
            .filter(|case| case.contains(&format!("alertname: {alert}\n")))
            .collect();
        assert!(
            cases.iter().any(|c| c.contains("exp_alerts: []")),
            "{alert}: no case where it must stay silent"
        );
        assert!(
            cases.iter().any(|c| c.contains("exp_labels:")),
            "{alert}: no case where it must fire"
        );
    }
    // Every recording rule is checked by a promql_expr_test.
    for record in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- record: "))
    {
        assert!(
            tests.contains(&format!("- expr: {record}\n")),
            "{record} has no promql_expr_test"
        );
    }
}

#[test]
fn the_rules_use_only_the_contracts_metric_names() {
    let rules = std::fs::read_to_string(deploy("budget-top.rules.yml")).unwrap();
    let tests = std::fs::read_to_string(deploy("budget-top.rules.test.yml")).unwrap();
    for text in [&rules, &tests] {
        let mut rest = text.as_str();
        while let Some(at) = rest.find("budget_top_") {
            let preceded_by_colon = at > 0 && rest.as_bytes()[at - 1] == b':';
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            // Recorded series (`edge:budget_top_...:rate5m`) are the rules' own names.
            if preceded_by_colon {
                continue;
            }
            let family = name.strip_suffix("_bucket").unwrap_or(&name);
            assert!(
                FAMILIES.contains(&family),
                "{name} is not a CONVENTIONS §7 family"
            );
        }
    }
}

/// Chains sent through the Collector, five spans each.
const CHAINS: u8 = 20;

/// The Collector configuration's second exporter, for this test only: the same budget-top,
/// trusted over TLS, but without the token. Merged over deploy/otelcol.yaml by `--config`.
const NO_TOKEN: &str = "\
exporters:
  otlp_grpc/no-token:
    endpoint: ${env:BUDGET_TOP_OTLP}
    tls:
      ca_file: ${env:BUDGET_TOP_CA_FILE}
service:
  pipelines:
    traces:
      exporters: [otlp_grpc/backend, otlp_grpc/budget-top, otlp_grpc/no-token]
";

#[test]
fn the_collector_sends_every_span_to_the_backend_and_to_budget_top_over_tls_with_the_token() {
    if !tool_present("go", "version") {
        eprintln!(
            "\n*** SKIPPED: Go is not installed, so the Collector cannot be built; deploy/otelcol.yaml is NOT run ***\n"
        );
        return;
    }
    let otelcol = otelcol();
    let dir = scratch("pipeline_collector");
    let secrets = secrets(&dir);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secrets.token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let check = ["check", "--for", "300s", "--format", "json"];
    let budget_top = listen(&[&check[..], &secrets.flags()].concat());
    let backend = listen(&["check", "--for", "300s", "--format", "json"]);
    let no_token = dir.join("no-token.yaml");
    std::fs::write(&no_token, NO_TOKEN).unwrap();
    let receiver = free_port();
    let collector = Collector::start(
        &otelcol,
        &[&deploy("otelcol.yaml"), &no_token],
        &[
            ("OTELCOL_OTLP_GRPC", receiver.to_string()),
            ("OTELCOL_OTLP_HTTP", free_port().to_string()),
            ("TRACES_BACKEND", backend.grpc.to_string()),
            ("BUDGET_TOP_OTLP", budget_top.grpc.to_string()),
            ("BUDGET_TOP_CA_FILE", secrets.ca.display().to_string()),
            ("BUDGET_TOP_TOKEN", "s3cret-Token_42".to_string()),
        ],
    );

    // The services' spans, into the Collector's otlp receiver.
    let runtime = crate::support::runtime();
    runtime.block_on(async {
        let mut client = TraceServiceClient::connect(format!("http://{receiver}"))
            .await
            .unwrap();
        for t in 1..=CHAINS {
            client.export(reset_chain(t)).await.unwrap();
        }
    });
    let log = collector.stop();

    // The exporter without the token was refused, for good (never retried), and said so; the
    // others logged nothing wrong.
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("\terror\t")).collect();
    assert!(
        !errors.is_empty(),
        "the exporter without the token was served:\n{log}"
    );
    for line in &errors {
        assert!(
            line.contains("otlp_grpc/no-token") && line.contains("Unauthenticated"),
            "an error other than the missing token:\n{log}"
        );
    }

    let budget_top = budget_top.terminate(Duration::from_secs(30));
    let backend = backend.terminate(Duration::from_secs(30));
    assert!(
        budget_top.stderr.contains("receivers: TLS, token"),
        "{budget_top:?}"
    );
    let report = budget_top.json();
    let spans = 5 * u64::from(CHAINS);
    assert_eq!(report["summary"]["traces"], u64::from(CHAINS), "{report:#}");
    assert_eq!(report["summary"]["spans"], spans, "{report:#}");
    assert_eq!(report["ingest"]["spans_accepted"], spans, "{report:#}");
    // Both exporters were handed the same batches: every one the token carried in was refused
    // once without it, unread.
    let accepted = report["ingest"]["requests_accepted"].as_u64().unwrap();
    assert!(accepted >= 1, "{report:#}");
    assert_eq!(
        report["ingest"]["requests_unauthenticated"], accepted,
        "{report:#}"
    );
    // The backend got the same spans, and the same chains judge alike.
    let backend_report = backend.json();
    assert_eq!(
        backend_report["summary"]["spans"], spans,
        "{backend_report:#}"
    );
    assert_eq!(
        finding_names(&backend_report),
        finding_names(&report),
        "{backend_report:#}"
    );
    assert_eq!(
        finding_names(&report).len(),
        usize::from(CHAINS),
        "one budget_reset per chain: {report:#}"
    );
}

/// Prometheus (Debian's `prometheus`, beside promtool), the way `.ci/tools` installs it.
fn prometheus_or_skip(test: &str) -> bool {
    if promtool().is_some() && tool_present("prometheus", "--version") {
        return true;
    }
    eprintln!(
        "\n*** SKIPPED {test}: prometheus is not installed and `.ci/tools prometheus` could not install it ***\n"
    );
    false
}

#[test]
fn prometheus_reaches_budget_top_over_tls_with_the_shipped_token_file() {
    let test = "prometheus_reaches_budget_top_over_tls_with_the_shipped_token_file";
    if !prometheus_or_skip(test) {
        return;
    }
    // /etc/prometheus as docs/serve.md lays it out, the shipped files unchanged but for the
    // target's address.
    let dir = scratch("pipeline_prometheus");
    let secret_dir = dir.join("budget-top");
    std::fs::create_dir_all(&secret_dir).unwrap();
    let secrets = secrets(&secret_dir);
    // `serve` with the TLS and token the shipped configuration expects (CONVENTIONS §7: one TLS
    // configuration and one token for the receivers and the API).
    let budget_top = serve(&secrets.flags());
    let shipped = std::fs::read_to_string(deploy("prometheus.yml")).unwrap();
    let target = r#"- targets: ["budget-top:9464"]"#;
    assert!(shipped.contains(target), "{shipped}");
    let config = shipped.replace(target, &format!(r#"- targets: ["{}"]"#, budget_top.api));
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    std::fs::copy(
        deploy("budget-top.rules.yml"),
        dir.join("budget-top.rules.yml"),
    )
    .unwrap();

    let web = free_port();
    let mut prometheus = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first scrape comes within one scrape_interval (15 s) of the start.
    let runtime = crate::support::runtime();
    let seen = runtime.block_on(async {
        let client = reqwest::Client::new();
        let give_up = tokio::time::Instant::now() + Duration::from_secs(90);
        let mut last = serde_json::Value::Null;
        while tokio::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let Ok(answer) = client
                .get(format!("http://{web}/api/v1/targets"))
                .send()
                .await
            else {
                continue;
            };
            let Ok(body) = answer.json::<serde_json::Value>().await else {
                continue;
            };
            let target = body["data"]["activeTargets"][0].clone();
            if target["health"] != "unknown" && target["health"].is_string() {
                return Ok(target);
            }
            last = body;
        }
        Err(last)
    });
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let target = seen.unwrap_or_else(|last| panic!("Prometheus never scraped:\n{last:#}"));
    assert_eq!(target["scrapePool"], "budget-top", "{target:#}");
    assert_eq!(
        target["scrapeUrl"],
        format!("https://{}/metrics", budget_top.api),
        "{target:#}"
    );
    // Up: the CA trusted the certificate, the token file let the scrape in, the text parsed.
    assert_eq!(target["health"], "up", "{target:#}");
    assert_eq!(target["lastError"], "", "{target:#}");
    let (code, stderr) = budget_top.terminate(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{stderr}");
}

/// The second pipeline (docs/serve.md, "Only the chains that matter"): `deploy/otelcol-forward.yaml`
/// in the real Collector sends every span to `budget-top serve` alone, over TLS with the
/// token; serve forwards the broken chains to a real Jaeger and keeps the clean ones
/// (`--forward-sample 0`): Jaeger holds exactly the broken chains, every span of them.
#[test]
fn the_forwarding_pipeline_sends_everything_to_budget_top_and_only_the_broken_chains_on() {
    let Some(jaeger_bin) = crate::jaeger::jaeger_or_skip("the_forwarding_pipeline") else {
        return;
    };
    let otelcol = otelcol();
    let dir = scratch("pipeline_forward");
    let secrets = secrets(&dir);
    let report = dir.join("report.json");
    let jaeger = crate::jaeger::Jaeger::start(&jaeger_bin);
    let serving = crate::forward::forward_to(
        &format!("grpc://{}", jaeger.otlp_grpc),
        "300ms",
        "0",
        &[
            &secrets.flags()[..],
            &["--report", report.to_str().unwrap()],
        ]
        .concat(),
    );
    let receiver = free_port();
    let collector = Collector::start(
        &otelcol,
        &[&deploy("otelcol-forward.yaml")],
        &[
            ("OTELCOL_OTLP_GRPC", receiver.to_string()),
            ("OTELCOL_OTLP_HTTP", free_port().to_string()),
            ("BUDGET_TOP_OTLP", serving.grpc.to_string()),
            ("BUDGET_TOP_CA_FILE", secrets.ca.display().to_string()),
            ("BUDGET_TOP_TOKEN", "s3cret-Token_42".to_string()),
        ],
    );
    let chains: Vec<_> = (0..u32::from(CHAINS))
        .flat_map(|n| {
            [
                crate::forward::chain(0x5b, n, true),
                crate::forward::chain(0x5c, n, false),
            ]
        })
        .collect();
    crate::support::runtime().block_on(async {
        let mut client = TraceServiceClient::connect(format!("http://{receiver}"))
            .await
            .unwrap();
        for chain in &chains {
            client.export(chain.clone()).await.unwrap();
        }
    });
    let log = collector.stop();
    assert!(!log.contains("\terror\t"), "{log}");
    // Every broken chain reaches Jaeger whole.
    for chain in chains.iter().step_by(2) {
        crate::forward::until_held_whole(&jaeger, chain, Duration::from_secs(60));
    }
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    for chain in chains.iter().skip(1).step_by(2) {
        assert!(
            crate::forward::jaeger_trace(&jaeger, &crate::forward::trace_of(chain)).is_empty(),
            "a clean chain was forwarded"
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let spans = 5 * 2 * u64::from(CHAINS);
    assert_eq!(report["summary"]["spans"], spans, "{report:#}");
    assert_eq!(
        report["forward"]["chains"]["finding"],
        u64::from(CHAINS),
        "{report:#}"
    );
    assert_eq!(report["forward"]["spans"]["sent"], spans / 2, "{report:#}");
    jaeger.stop();
}
