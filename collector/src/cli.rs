//! The command line (clap derive). `check` and `record` run here; the live screen (no
//! subcommand), `demo` and `replay` are dispatched from `main.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use deadline_budget::analysis::Severity;
use deadline_budget::carrier::{Carrier, Carriers, Form};
use deadline_budget::duration::parse_duration;

use crate::batch;
use crate::forward;
use crate::ingest;
use crate::jaeger;
use crate::store;
use crate::view_model::trace_url::TraceUrl;

/// A live terminal view of deadline budgets flowing through a chain of services.
#[derive(Debug, Parser)]
#[command(name = "budget-top", version, about)]
pub struct Cli {
    /// What to do; without one, the live screen.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Listening and retention options for the live screen.
    #[command(flatten)]
    pub listen: Listen,
    /// The link from a chain to its trace, for the live screen.
    #[command(flatten)]
    pub links: Links,
    /// Chains held at most, counted in spans (at least 1); the oldest chains go first.
    #[arg(long, global = true, default_value_t = store::DEFAULT_MAX_SPANS, value_name = "N", value_parser = at_least_one)]
    pub max_spans: usize,
    /// How long a chain must be quiet before it is judged and counted in the totals (a span
    /// arriving later judges it again while it is held). D: 3s, 500ms, 2m, 1h; a bare number
    /// is seconds.
    #[arg(long, global = true, default_value = "5s", value_name = "D", value_parser = parse_duration)]
    pub settle: std::time::Duration,
    /// Findings a report lists at most; its counts stay exact. Per kind, the findings that
    /// explain the most dead work are kept, then the newest.
    #[arg(long, global = true, default_value_t = deadline_budget::analysis::DEFAULT_MAX_FINDINGS, value_name = "N")]
    pub max_findings: usize,
    /// Raw span attributes the live screen holds for its detail popup, in bytes, all chains
    /// together (as much again may wait to be taken in); past it the oldest chains'
    /// attributes are dropped first (at least 1). Each span keeps at most 16 KiB, each value
    /// 4 KiB.
    #[arg(long, default_value_t = batch::DEFAULT_MAX_ATTRIBUTE_BYTES, value_name = "BYTES", value_parser = at_least_one)]
    pub max_attribute_bytes: usize,
    /// A budget header of your own, read from captured headers before the built-in carriers
    /// (repeatable, in order). FORM: ms, s, deadline-ms, deadline-s or grpc.
    #[arg(long = "budget-header", global = true, value_name = "NAME=FORM", value_parser = parse_budget_header)]
    pub budget_headers: Vec<Carrier>,
}

impl Cli {
    /// How chains are held and judged (`--max-spans`, `--settle`, `--max-findings`).
    pub fn retention(&self) -> store::Retention {
        store::Retention {
            max_spans: self.max_spans,
            settle: self.settle,
            max_findings: self.max_findings,
        }
    }

    /// The carriers to read: the `--budget-header`s in order, then the built-in ones.
    pub fn carriers(&self) -> Arc<Carriers> {
        Arc::new(Carriers::with_own(self.budget_headers.iter().cloned()))
    }

    /// Flags that parse but do not go together, in a sentence that says what to do instead:
    /// the subcommand they belong to and the sentence. `main` refuses them as clap refuses
    /// its own usage errors (exit status 2).
    pub fn refusal(&self) -> Option<(&'static str, String)> {
        match &self.command {
            #[cfg(feature = "demo")]
            Some(Command::Demo(args)) => args.refusal().map(|r| ("demo", r)),
            Some(Command::Check(args)) => args.jaeger.refusal().map(|r| ("check", r)),
            Some(Command::Replay(args)) => args.jaeger.refusal().map(|r| ("replay", r)),
            _ => None,
        }
    }
}

/// A duration (`3s`, `500ms`, `2m`, `1h`, or a bare number of seconds) longer than zero.
pub fn positive_duration(value: &str) -> Result<Duration, String> {
    let duration = parse_duration(value)?;
    if duration.is_zero() {
        Err(format!(
            "must be longer than 0 (e.g. 3s or 500ms), got {value:?}"
        ))
    } else {
        Ok(duration)
    }
}

/// `replay --speed`: a finite number, 0 or more (0: no pacing).
fn replay_speed(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(speed) if speed >= 0.0 && speed.is_finite() => Ok(speed),
        _ => Err(format!(
            "expected how many times faster than recorded, more than 0 (0: all at once, no pacing), got {value:?}"
        )),
    }
}

/// A count or a size that must be 1 or more (`--max-spans`, `--max-body`...): 0 would keep or
/// take nothing, so it is refused rather than read as some other limit.
pub fn at_least_one(value: &str) -> Result<usize, String> {
    match value.trim().replace('_', "").parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "expected a whole number of at least 1, got {value:?}"
        )),
    }
}

/// `--budget-header NAME=FORM`.
pub fn parse_budget_header(value: &str) -> Result<Carrier, String> {
    let forms = Form::ALL.map(Form::as_str).join(", ");
    let (name, form) = value
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=FORM (FORM one of {forms}), got {value:?}"))?;
    let form = Form::parse(form.trim())
        .ok_or_else(|| format!("unknown form {form:?}: expected one of {forms}"))?;
    Carrier::own(name, form).map_err(|_| format!("{name:?} is not a valid header name"))
}

/// A listen address, `IP:PORT`: clap's own refusal said only "invalid socket address syntax",
/// and `localhost:4317` looks right to a newcomer but is not an address (nothing is looked up).
pub fn parse_listen_addr(value: &str) -> Result<SocketAddr, String> {
    value.parse().map_err(|_| {
        "expected IP:PORT, such as 127.0.0.1:4317 or [::1]:4317 (port 0 picks a free one; a host name such as localhost is not looked up)".to_owned()
    })
}

/// `--trace-url`: a link from each chain to its trace in the tool a team already uses.
#[derive(Clone, Debug, Default, Args)]
pub struct Links {
    /// Link each chain to its trace: TEMPLATE with `{trace_id}` replaced by the trace id in
    /// hex, e.g. http://jaeger:16686/trace/{trace_id} or a Grafana Explore URL (refused
    /// without `{trace_id}` or with control characters). In the reports (`trace_url`), the
    /// page, the screen's waterfall and detail (a hyperlink where the terminal takes one), and
    /// serve's /api/chains. With --jaeger, the Jaeger UI's own link is the default.
    #[arg(long, value_name = "TEMPLATE", value_parser = TraceUrl::parse)]
    pub trace_url: Option<TraceUrl>,
}

/// `--jaeger URL` and what to read there: a source of traces beside `--input`.
#[derive(Clone, Debug, Default, Args)]
pub struct JaegerArgs {
    /// Read the traces from Jaeger's query API at URL (v3, its HTTP port: 16686 by default)
    /// instead of a file or the receivers: each service's traces of the last --since, at most
    /// --limit each, every trace read once; judged as a recording is.
    #[arg(long, value_name = "URL", value_parser = jaeger::Base::parse)]
    pub jaeger: Option<jaeger::Base>,
    /// With --jaeger: a service whose traces to read (repeatable) [default: every service
    /// Jaeger lists].
    #[arg(long = "service", value_name = "NAME", requires = "jaeger")]
    pub services: Vec<String>,
    /// With --jaeger: the traces whose spans started in the last D (3s, 500ms, 2m, 1h; a bare
    /// number is seconds) [default: 1h].
    #[arg(long, value_name = "D", value_parser = positive_duration, requires = "jaeger", conflicts_with_all = ["from", "to"])]
    pub since: Option<Duration>,
    /// With --jaeger: the window's start, RFC 3339 (2026-12-04T10:00:00Z), instead of
    /// --since; spans that started before it are left out, and a chain so cut is judged as
    /// partial.
    #[arg(long, value_name = "T", value_parser = jaeger::parse_rfc3339, requires = "jaeger")]
    pub from: Option<u64>,
    /// With --from: the window's end, RFC 3339 [default: now].
    #[arg(long, value_name = "T", value_parser = jaeger::parse_rfc3339, requires = "from")]
    pub to: Option<u64>,
    /// With --jaeger: traces read at most per service (Jaeger answers the newest; the summary
    /// says which searches it cut there) [default: 1000].
    #[arg(long, value_name = "N", value_parser = at_least_one, requires = "jaeger")]
    pub limit: Option<usize>,
    /// With --jaeger: read these traces (32 hex digits, repeatable) instead of searching; one
    /// Jaeger does not have is an error.
    #[arg(long = "trace-id", value_name = "ID", value_parser = jaeger::parse_trace_id, requires = "jaeger", conflicts_with_all = ["services", "since", "from", "to", "limit"])]
    pub trace_ids: Vec<deadline_budget::analysis::TraceId>,
    /// With --jaeger: send `Authorization: Bearer <token>`, the token being FILE's contents
    /// (trailing newline trimmed), to what stands in front of Jaeger.
    #[arg(long, value_name = "FILE", requires = "jaeger")]
    pub jaeger_token_file: Option<PathBuf>,
    /// With an https:// --jaeger: trust the CA (PEM) that signed Jaeger's certificate
    /// [default: the system's roots].
    #[arg(long, value_name = "FILE", requires = "jaeger")]
    pub jaeger_ca: Option<PathBuf>,
}

impl JaegerArgs {
    /// The query these flags describe, when `--jaeger` is given; `now` ends `--since`'s window.
    pub fn query(&self, now_unix_nano: u64) -> Option<jaeger::Query> {
        let base = self.jaeger.clone()?;
        let ask = if self.trace_ids.is_empty() {
            let (from, to) = match self.from {
                Some(from) => (from, self.to.unwrap_or(now_unix_nano)),
                None => {
                    let since = self.since.unwrap_or(jaeger::DEFAULT_SINCE);
                    let back = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
                    (now_unix_nano.saturating_sub(back), now_unix_nano)
                }
            };
            jaeger::Ask::Search {
                services: self.services.clone(),
                from_unix_nano: from,
                to_unix_nano: to,
                limit: self.limit.unwrap_or(jaeger::DEFAULT_LIMIT),
            }
        } else {
            jaeger::Ask::Traces(self.trace_ids.clone())
        };
        Some(jaeger::Query {
            base,
            ask,
            token_file: self.jaeger_token_file.clone(),
            ca: self.jaeger_ca.clone(),
        })
    }

    /// The link to a trace: `--trace-url`, else Jaeger's own with `--jaeger`.
    pub fn trace_url(&self, links: &Links) -> Option<TraceUrl> {
        links
            .trace_url
            .clone()
            .or_else(|| self.jaeger.as_ref().map(|base| TraceUrl::jaeger(&base.url)))
    }

    /// `--from` after `--to`: a sentence, for `Cli::refusal`.
    fn refusal(&self) -> Option<String> {
        match (self.from, self.to) {
            (Some(from), Some(to)) if from >= to => Some(format!(
                "--from {} is not before --to {}: the window would be empty",
                jaeger::rfc3339(from),
                jaeger::rfc3339(to)
            )),
            _ => None,
        }
    }
}

/// Where to receive OTLP.
#[derive(Clone, Debug, Args)]
pub struct Listen {
    /// OTLP/gRPC listen address, IP:PORT (port 0 picks a free port; a host name is refused).
    #[arg(long, value_name = "ADDR", default_value = ingest::DEFAULT_GRPC, value_parser = parse_listen_addr)]
    pub grpc: SocketAddr,
    /// OTLP/HTTP listen address, IP:PORT (port 0 picks a free port; a host name is refused).
    #[arg(long, value_name = "ADDR", default_value = ingest::DEFAULT_HTTP, value_parser = parse_listen_addr)]
    pub http: SocketAddr,
    /// Largest request body accepted, in bytes, before and after decompression (at least 1).
    #[arg(long, value_name = "BYTES", default_value_t = ingest::DEFAULT_MAX_BODY, value_parser = at_least_one)]
    pub max_body: usize,
    /// Requests read and decoded at once (both receivers); past it a request waits up to
    /// 250 ms, then is refused (RESOURCE_EXHAUSTED / 503) before its body is read (at least 1)
    #[arg(long, value_name = "N", default_value_t = ingest::DEFAULT_MAX_INFLIGHT, value_parser = at_least_one)]
    pub max_inflight: usize,
    /// Bytes the request bodies being read may hold between them, counted as they arrive
    /// (never below --max-body); a body that would go past it is cut off and its request
    /// refused (RESOURCE_EXHAUSTED / 503)
    #[arg(long, value_name = "BYTES", default_value_t = ingest::DEFAULT_MAX_INFLIGHT_BYTES)]
    pub max_inflight_bytes: usize,
    /// Spans waiting for the store; past it requests are refused (RESOURCE_EXHAUSTED / 503)
    /// (at least 1)
    #[arg(long, value_name = "N", default_value_t = ingest::DEFAULT_MAX_QUEUED_SPANS, value_parser = at_least_one)]
    pub max_queued_spans: usize,
    /// Connections held open per receiver; past it a new connection is served at once and
    /// the one idle longest (or still sending its first request) is closed to make room (at
    /// least 1)
    #[arg(long, value_name = "N", default_value_t = ingest::DEFAULT_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub max_connections: usize,
    /// Allow --grpc/--http on an address other than loopback (other machines can then send
    /// spans); without it such an address is refused
    #[arg(long)]
    pub allow_remote: bool,
    /// Every OTLP request must carry `Authorization: Bearer <token>`, the token being FILE's
    /// contents (trailing newline trimmed); others get 401 / UNAUTHENTICATED, unread
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// Both receivers speak TLS with this certificate (PEM; with --tls-key); a plain client
    /// is refused, a handshake must finish within 10 s
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// mTLS: every client must present a certificate this CA (PEM) signed (needs --tls-cert)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}

impl Listen {
    /// The ingest configuration these flags describe.
    pub fn ingest_config(&self) -> ingest::IngestConfig {
        ingest::IngestConfig {
            grpc: Some(self.grpc),
            http: Some(self.http),
            max_body: self.max_body,
            max_inflight: self.max_inflight,
            max_inflight_bytes: self.max_inflight_bytes,
            max_queued_spans: self.max_queued_spans,
            max_connections: self.max_connections,
            allow_remote: self.allow_remote,
            bearer_token_file: self.bearer_token_file.clone(),
            tls: match (&self.tls_cert, &self.tls_key) {
                (Some(cert), Some(key)) => Some(ingest::receive::tls::TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    client_ca: self.client_ca.clone(),
                }),
                _ => None,
            },
            ..ingest::IngestConfig::default()
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse spans headlessly and report findings (for CI and scripts).
    Check(Box<CheckArgs>),
    /// Listen and write every export request received as one OTLP/JSON line.
    Record(RecordArgs),
    /// Play a recording into the live screen, or the traces read from Jaeger.
    Replay(Box<ReplayArgs>),
    /// Merge the JSON reports of several instances into the report one instance would have
    /// written had it received everything.
    Merge(MergeArgs),
    /// Run headless for days beside a team's Collector: the receivers, the judging, and an
    /// HTTP API with Prometheus metrics, the report and the chains of a finding.
    Serve(Box<ServeArgs>),
    /// Run the demo services into budget-top: live, as a workshop, or headless (--check).
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
}

/// The flags of `check` that only mean something when listening: `--input` refuses them all.
const LISTENING: [&str; 14] = [
    "idle",
    "for_",
    "grpc",
    "http",
    "max_body",
    "max_inflight",
    "max_inflight_bytes",
    "max_queued_spans",
    "max_connections",
    "allow_remote",
    "bearer_token_file",
    "tls_cert",
    "tls_key",
    "client_ca",
];

/// `budget-top check`.
#[derive(Debug, Args)]
// `--jaeger` reads, as `--input` does: the listening flags are refused beside it too.
#[command(group(clap::ArgGroup::new("listening").args(LISTENING).multiple(true).conflicts_with("jaeger")))]
pub struct CheckArgs {
    /// Read OTLP/JSON lines from FILE (gzip or not; `-` for stdin) instead of listening (the
    /// listening flags are then refused).
    #[arg(long, value_name = "FILE", conflicts_with_all = LISTENING, conflicts_with = "jaeger")]
    pub input: Option<PathBuf>,
    /// Read the traces from Jaeger instead.
    #[command(flatten)]
    pub jaeger: JaegerArgs,
    /// Where to listen when there is no --input or --jaeger.
    #[command(flatten)]
    pub listen: Listen,
    /// Stop once spans have arrived and none came for D (3s, 500ms, 2m, 1h; a bare number is
    /// seconds). Without --idle or --for, Ctrl-C or SIGTERM ends the listening and prints the
    /// report.
    #[arg(long, value_name = "D", value_parser = positive_duration)]
    pub idle: Option<Duration>,
    /// Stop after listening for D (a bare number is seconds).
    #[arg(long = "for", id = "for_", value_name = "D", value_parser = positive_duration)]
    pub for_: Option<Duration>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exit 1 when a finding reaches this severity; `empty` (alone or in a list, e.g.
    /// `warning,empty`) also fails when no span was read, so a gate cannot pass on nothing.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "error")]
    pub fail_on: Vec<FailOn>,
    /// Also write the report as one self-contained HTML page to FILE: the summary and exit
    /// status, sortable edges and services tables, and the worst chains of each finding kind
    /// drawn as waterfalls (readable offline; nothing loads from the network).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The link from a chain to its trace.
    #[command(flatten)]
    pub links: Links,
}

impl CheckArgs {
    /// Whether spans come from a source that is read (a file, Jaeger), not from listening.
    pub fn reads(&self) -> bool {
        self.input.is_some() || self.jaeger.jaeger.is_some()
    }
}

/// `budget-top merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// JSON reports (`check --format json`, `merge --format json`), one per instance.
    #[arg(value_name = "REPORT.json", required = true)]
    pub reports: Vec<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exit 1 when a finding reaches this severity (`empty`: also when the reports hold no
    /// chain), as for `check`.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "error")]
    pub fail_on: Vec<FailOn>,
    /// Also write the merged report as an HTML page to FILE (the figures and findings; no
    /// waterfalls: the reports carry no spans).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The link from a finding's chain to its trace.
    #[command(flatten)]
    pub links: Links,
}

/// The default `--api` address of `serve`.
pub const DEFAULT_API: &str = "127.0.0.1:9464";

/// The default `--max-series` of `serve`.
pub const DEFAULT_MAX_SERIES: usize = 10_000;

/// `budget-top serve`.
#[derive(Debug, Args)]
#[command(
    after_help = "The API answers GET /metrics (Prometheus text, or OpenMetrics when asked for), \
/api/report (the JSON report of the chains judged so far), /api/chains?kind=K&limit=N (the newest \
judged chains with that finding, as OTLP/JSON lines), /healthz and /readyz (these two need no \
token). SIGTERM or Ctrl-C closes the listeners, judges every chain held, writes --report and \
--html, and exits 0; a second signal exits at once."
)]
pub struct ServeArgs {
    /// Where to listen for OTLP.
    #[command(flatten)]
    pub listen: Listen,
    /// The HTTP API's address (loopback unless --allow-remote; the receivers' TLS and token;
    /// port 0 picks a free port)
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_API)]
    pub api: SocketAddr,
    /// Label sets each metric family holds at most; past it a new set is recorded with every
    /// label `other`, counted in budget_top_series_overflow_total (at least 1)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_SERIES, value_parser = at_least_one)]
    pub max_series: usize,
    /// At SIGTERM or Ctrl-C, write the JSON report of everything received to FILE (checked
    /// at start: a path that cannot be written is refused then)
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// At SIGTERM or Ctrl-C, also write the report as one self-contained HTML page to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The link from a chain to its trace (the reports, /api/chains).
    #[command(flatten)]
    pub links: Links,
    /// Sending the chains that matter on to a trace backend.
    #[command(flatten)]
    pub forward: ForwardArgs,
}

/// `serve --forward` and its flags.
#[derive(Clone, Debug, Args)]
pub struct ForwardArgs {
    /// Send every chain with a finding at or above --forward-on, and a --forward-sample share
    /// of the others, whole and as received, to this OTLP endpoint once judged: grpc://HOST:PORT
    /// (or HOST:PORT), grpcs://HOST:PORT (TLS), http(s)://HOST[:PORT]/v1/traces (protobuf)
    #[arg(long, value_name = "URL", value_parser = forward_url)]
    pub forward: Option<forward::endpoint::Endpoint>,
    /// The lowest severity that forwards a chain
    #[arg(
        long,
        value_enum,
        value_name = "SEVERITY",
        default_value = "warning",
        requires = "forward"
    )]
    pub forward_on: Threshold,
    /// The share of the other chains forwarded, 0 to 1, decided by a hash of the trace id
    /// (every shard and any other implementation keeps the same ones; rounded down to 1/16384)
    #[arg(long, value_name = "F", default_value_t = forward::DEFAULT_SAMPLE, value_parser = forward_sample, requires = "forward")]
    pub forward_sample: f64,
    /// Bytes of spans as received held for forwarding: half for chains waiting to be judged
    /// (a span past it is not held, counted), half for chains waiting to be sent (a chain past
    /// it is dropped, counted)
    #[arg(long, value_name = "BYTES", default_value_t = forward::DEFAULT_BUFFER, value_parser = at_least_two, requires = "forward")]
    pub forward_buffer: usize,
    /// How long a batch the backend answers "retry later" (or does not answer) is retried,
    /// with exponential backoff and jitter, before its spans count as failed (0: never retried)
    #[arg(long, value_name = "D", default_value = "5m", value_parser = parse_duration, requires = "forward")]
    pub forward_retry_for: Duration,
    /// How long one export request may take before it counts as unanswered (and is retried)
    #[arg(long, value_name = "D", default_value = "10s", value_parser = positive_duration, requires = "forward")]
    pub forward_timeout: Duration,
    /// With grpcs:// or https://: trust the backend's certificate if this CA (PEM) signed it,
    /// instead of the system's roots
    #[arg(long, value_name = "FILE", requires = "forward")]
    pub forward_ca: Option<PathBuf>,
    /// mTLS: present this client certificate (PEM) to the backend (with --forward-key)
    #[arg(long, value_name = "FILE", requires_all = ["forward", "forward_key"])]
    pub forward_cert: Option<PathBuf>,
    /// The private key of --forward-cert (PEM)
    #[arg(long, value_name = "FILE", requires_all = ["forward", "forward_cert"])]
    pub forward_key: Option<PathBuf>,
    /// Send `Authorization: Bearer <token>` with every export request, the token being FILE's
    /// contents (trailing newline trimmed)
    #[arg(long, value_name = "FILE", requires = "forward")]
    pub forward_token_file: Option<PathBuf>,
}

impl ForwardArgs {
    /// The forwarding these flags describe, when `--forward` is given.
    pub fn config(&self) -> Option<forward::ForwardConfig> {
        Some(forward::ForwardConfig {
            endpoint: self.forward.clone()?,
            files: forward::endpoint::ForwardFiles {
                ca: self.forward_ca.clone(),
                cert: self.forward_cert.clone(),
                key: self.forward_key.clone(),
                token: self.forward_token_file.clone(),
            },
            on: self.forward_on.severity(),
            sample: forward::sample::Share::of(self.forward_sample)?,
            buffer: self.forward_buffer,
            retry_for: self.forward_retry_for,
            timeout: self.forward_timeout,
        })
    }
}

/// `--forward URL`.
fn forward_url(value: &str) -> Result<forward::endpoint::Endpoint, String> {
    forward::endpoint::Endpoint::parse(value)
}

/// `--forward-sample F`: a share that keeps something, or 0.
fn forward_sample(value: &str) -> Result<f64, String> {
    let share = value.trim().parse::<f64>().ok();
    match share.and_then(forward::sample::Share::of) {
        Some(_) => Ok(share.unwrap_or_default()),
        None => Err(format!(
            "expected a share from 0 to 1 (0.01 forwards 1 % of the chains without a finding), either 0 or at least 1/16384 (0.000062), got {value:?}"
        )),
    }
}

/// A size that must be 2 or more (it is split in two halves).
fn at_least_two(value: &str) -> Result<usize, String> {
    match at_least_one(value)? {
        1 => Err("must be at least 2".to_owned()),
        n => Ok(n),
    }
}

/// `--forward-on`: a severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Threshold {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Any finding.
    Info,
}

impl Threshold {
    /// The severity.
    pub fn severity(self) -> Severity {
        match self {
            Threshold::Error => Severity::Error,
            Threshold::Warning => Severity::Warning,
            Threshold::Info => Severity::Info,
        }
    }
}

/// `budget-top record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The file to write (created or truncated); gzip-compressed when its name ends in `.gz`.
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
    /// Where to listen.
    #[command(flatten)]
    pub listen: Listen,
}

/// `budget-top replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording (OTLP/JSON lines, gzip or not). A line that cannot be read stops the replay;
    /// on `q` its reason is printed and the exit status is 2.
    #[arg(required_unless_present = "jaeger", conflicts_with = "jaeger")]
    pub file: Option<PathBuf>,
    /// Play the traces read from Jaeger instead, as a recording of them.
    #[command(flatten)]
    pub jaeger: JaegerArgs,
    /// The link from a chain to its trace.
    #[command(flatten)]
    pub links: Links,
    /// Play N times faster than recorded (0.5: half as fast); 0 plays it all at once, with no
    /// pacing.
    #[arg(long, value_name = "N", default_value_t = 1.0, allow_negative_numbers = true, value_parser = replay_speed)]
    pub speed: f64,
}

/// `budget-top demo`: the demo's services and load (the same options as `budget-demo`), on the
/// live screen, as a guided workshop, or headless with the `check` report.
#[cfg(feature = "demo")]
#[derive(Debug, Args)]
// Its own group id: the flattened `budget_demo::DemoArgs` already takes the name `DemoArgs`.
#[group(id = "demo-command")]
#[command(
    after_help = "Without --scenario the screen runs the workshop from its first broken step. Keys on \
the screen: 1-9, 0, ! and @ switch scenario, c runs the scenario cured (and back), [ ] select a \
service, +/- change its latency by 50 ms, w next workshop step, q quit."
)]
pub struct DemoArgs {
    /// The scenario, traffic and timing.
    #[command(flatten)]
    pub run: budget_demo::DemoArgs,
    /// No screen: run the services and load, then print the same report as `budget-top check`
    /// (same exit status).
    #[arg(long)]
    pub check: bool,
    /// With --check: send load for D, then report once the requests in flight are answered (at
    /// most 10 s more; default 15s, a bare number is seconds; with --requests, until every
    /// request is answered or D has passed).
    #[arg(long = "for", id = "for_", value_name = "D", value_parser = positive_duration)]
    pub for_: Option<Duration>,
    /// With --check: the report format on stdout [default: text].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// With --check: exit 1 when a finding reaches this severity; `empty` (alone or in a list,
    /// e.g. `warning,empty`) also fails when no span arrived [default: error].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub fail_on: Vec<FailOn>,
    /// With --check: also write the report as one self-contained HTML page to FILE, as
    /// `budget-top check --html` does.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Walk through the scenarios in teaching order: each step says what is about to happen and
    /// what to look at, and waits for `w` before the next (on the screen: not with --check).
    #[arg(long)]
    pub workshop: bool,
    /// The link from a chain to its trace (when the demo also exports to a trace backend).
    #[command(flatten)]
    pub links: Links,
}

#[cfg(feature = "demo")]
impl DemoArgs {
    /// Why these flags cannot run together, in words: the workshop needs the screen, and the
    /// report's flags need `--check`.
    pub fn refusal(&self) -> Option<String> {
        if self.check && self.workshop {
            return Some(
                "--workshop needs the screen (each step waits for `w`), and --check has none: \
drop --check for the workshop, or run one step headless with `--check --scenario NAME`"
                    .to_owned(),
            );
        }
        let report_flags = [
            (self.for_.is_some(), "--for"),
            (self.format.is_some(), "--format"),
            (!self.fail_on.is_empty(), "--fail-on"),
            (self.html.is_some(), "--html"),
        ];
        let given = report_flags
            .iter()
            .find_map(|(given, flag)| given.then_some(*flag))?;
        (!self.check).then(|| {
            format!(
                "{given} goes with --check (the headless report); the screen runs until `q`. \
Add --check, or drop {given}"
            )
        })
    }
}

/// The check report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable table.
    Text,
    /// The JSON report of CONVENTIONS section 4.
    Json,
}

/// `--fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Any finding.
    Info,
    /// No span read at all (an empty file or stdin, or nothing arrived); with no severity
    /// beside it, errors fail too.
    Empty,
}

impl FailOn {
    /// The lowest severity that fails (`empty` alone keeps the default, errors).
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Error | FailOn::Empty => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }

    /// The lowest severity any of `list` fails on.
    pub fn threshold(list: &[FailOn]) -> Severity {
        list.iter()
            .filter(|f| **f != FailOn::Empty)
            .map(|f| f.severity())
            .min()
            .unwrap_or(Severity::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_parses_the_conventions_command_lines() {
        let cli = Cli::try_parse_from([
            "budget-top",
            "check",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--idle",
            "3s",
            "--format",
            "json",
            "--fail-on",
            "warning",
            "--html",
            "report.html",
        ])
        .unwrap();
        let Some(Command::Check(args)) = cli.command else {
            panic!("not check");
        };
        assert_eq!(args.html, Some(PathBuf::from("report.html")));
        assert_eq!(args.idle, Some(Duration::from_secs(3)));
        assert_eq!(args.format, Format::Json);
        assert_eq!(FailOn::threshold(&args.fail_on), Severity::Warning);
        let parse = |list: &str| {
            let cli = Cli::try_parse_from(["budget-top", "check", "--fail-on", list]).unwrap();
            let Some(Command::Check(args)) = cli.command else {
                panic!("not check");
            };
            args.fail_on
        };
        assert_eq!(parse("empty"), vec![FailOn::Empty]);
        assert_eq!(FailOn::threshold(&parse("empty")), Severity::Error);
        assert_eq!(parse("info,empty"), vec![FailOn::Info, FailOn::Empty]);
        assert_eq!(FailOn::threshold(&parse("info,empty")), Severity::Info);
        assert!(
            Cli::try_parse_from(["budget-top", "check", "--input", "x", "--idle", "3s"]).is_err()
        );
    }

    #[test]
    #[cfg(feature = "demo")]
    fn demo_takes_the_demo_options_and_the_check_options() {
        let cli = Cli::try_parse_from([
            "budget-top",
            "demo",
            "--scenario",
            "fixed-timeout",
            "--time-scale",
            "0.5",
            "--latency",
            "inventory=900",
            "--check",
            "--for",
            "6s",
            "--format",
            "json",
            "--fail-on",
            "warning",
        ])
        .unwrap();
        let Some(Command::Demo(args)) = cli.command else {
            panic!("not demo");
        };
        assert_eq!(args.run.scenario, Some(budget_demo::Scenario::FixedTimeout));
        assert_eq!(args.run.time_scale, 0.5);
        assert_eq!(args.run.latencies, vec![("inventory".to_owned(), 900)]);
        assert!(args.check && !args.workshop);
        assert_eq!(args.for_, Some(Duration::from_secs(6)));
        assert_eq!(args.format, Some(Format::Json));
        assert_eq!(args.fail_on, vec![FailOn::Warning]);
    }

    #[test]
    #[cfg(feature = "demo")]
    fn demo_report_options_need_check_and_the_workshop_has_a_screen() {
        // Refused by clap, or by `Cli::refusal` with a sentence (both exit 2).
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["budget-top", "demo"], args].concat())
                .map_err(|e| e.to_string())
                .and_then(|cli| match cli.refusal() {
                    Some((_, refusal)) => Err(refusal),
                    None => Ok(cli),
                })
        };
        assert!(parse(&[]).is_ok());
        assert!(parse(&["--workshop"]).is_ok());
        assert!(parse(&["--for", "5s"]).is_err());
        assert!(parse(&["--format", "json"]).is_err());
        assert!(parse(&["--html", "report.html"]).is_err());
        assert!(parse(&["--fail-on", "warning"]).is_err());
        assert!(parse(&["--check", "--html", "report.html"]).is_ok());
        assert!(parse(&["--check", "--fail-on", "warning,empty"]).is_ok());
        assert!(parse(&["--check", "--workshop"]).is_err());
        assert!(parse(&["--scenario", "nope"]).is_err());
    }
}
