//! `budget-demo`: run the demo services and their load standalone, exporting to any OTLP/gRPC
//! endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, default `http://127.0.0.1:4317`), until Ctrl-C or
//! the end of `--for`. It says when its spans do not reach the endpoint.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use budget_demo::otlp_load::{FloodPlan, Pacing, Security, Target, flood_with};
use budget_demo::{
    Demo, DemoArgs, Scenario, at_least_one, parse_endpoint, parse_positive_duration,
};
use clap::error::ErrorKind;
use clap::{CommandFactory as _, Parser, Subcommand};

/// Demo services that teach deadline budget propagation, exporting spans over OTLP/gRPC.
#[derive(Debug, Parser)]
#[command(
    name = "budget-demo",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "budget-top demo's --workshop, --check, --format, --fail-on and --html need budget-top's \
screen or report: run `budget-top demo` for those."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the scenarios, in teaching order, with their lessons and what --cure changes.
    List,
    /// Flood an OTLP receiver with realistic traces and report spans per second.
    Load(LoadArgs),
    /// Write a recording of generated chains (OTLP/JSON lines, as `budget-top record` writes and
    /// `budget-top check --input` reads) for benchmarks: the same file for the same flags.
    Recording(RecordingArgs),
}

/// `budget-demo recording`: a large input for `budget-top check --input`, streamed to disk.
#[derive(Debug, clap::Args)]
struct RecordingArgs {
    /// Where to write it (`-` for standard output); not compressed (pipe it through gzip for a
    /// `.gz`, which `check --input` reads as well).
    #[arg(long, short, value_name = "FILE")]
    output: std::path::PathBuf,
    /// Spans in all, rounded up to whole lines of whole chains.
    #[arg(long, default_value_t = 100_000, value_name = "N", value_parser = at_least_one::<u64>)]
    spans: u64,
    /// Spans per line (one export request), at most (rounded up to whole chains).
    #[arg(long, default_value_t = 512, value_name = "N", value_parser = at_least_one::<usize>)]
    batch: usize,
    /// Hops per chain (each a SERVER and a CLIENT span).
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = at_least_one::<usize>)]
    depth: usize,
}

/// `budget-demo load`: a receiver benchmark's traffic (loopback only).
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["grpc", "http"])))]
struct LoadArgs {
    /// Send OTLP/gRPC to this address.
    #[arg(long, value_name = "ADDR", value_parser = parse_target_addr)]
    grpc: Option<SocketAddr>,
    /// Send OTLP/HTTP protobuf (POST /v1/traces) to this address.
    #[arg(long, value_name = "ADDR", value_parser = parse_target_addr)]
    http: Option<SocketAddr>,
    /// Spans to send in all, rounded up to whole requests of whole chains (the first line of
    /// the output says how many were sent).
    #[arg(long, default_value_t = 100_000, value_name = "N", value_parser = at_least_one::<u64>)]
    spans: u64,
    /// Spans per export request, at most (rounded up to whole chains; fewer when --spans is
    /// smaller).
    #[arg(long, default_value_t = 512, value_name = "N", value_parser = at_least_one::<usize>)]
    batch: usize,
    /// Hops per chain (each a SERVER and a CLIENT span).
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = at_least_one::<usize>)]
    depth: usize,
    /// Connections sending at once.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = at_least_one::<usize>)]
    connections: usize,
    /// Spans per second in all, more than 0 (default: as fast as the receiver takes them).
    #[arg(long, value_name = "R", required_if_eq("open_loop", "true"), value_parser = positive_rate)]
    rate: Option<f64>,
    /// Stop sending after this long even if spans remain (e.g. 5m; a bare number is seconds).
    #[arg(long = "for", value_name = "D", value_parser = parse_positive_duration)]
    run_for: Option<Duration>,
    /// Send at --rate whatever the answers, many requests in flight per connection (an
    /// overload test); without it each connection waits for its answer (a capacity test).
    #[arg(long)]
    open_loop: bool,
    /// With --open-loop: requests awaiting an answer at most; one due past it is not sent
    /// (counted as unsent).
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "open_loop", value_parser = at_least_one::<usize>)]
    max_inflight: usize,
    /// Send over TLS, trusting the receiver's certificate: FILE holds it or the CA that signed
    /// it (PEM), and it must name localhost (budget-top run with --tls-cert/--tls-key).
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// Send `Authorization: Bearer <token>` with every request, the token being FILE's
    /// contents (its trailing newline trimmed), as budget-top's --bearer-token-file wants.
    #[arg(long, value_name = "FILE")]
    bearer_token_file: Option<std::path::PathBuf>,
    /// What --tls-ca and --bearer-token-file hold, read (and refused with exit 2) at start.
    #[arg(skip)]
    security: Security,
}

/// A rate in spans per second: more than 0 and finite.
fn positive_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!(
            "must be a number of spans per second more than 0, got {text:?}"
        )),
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    demo: DemoArgs,
    /// The OTLP/gRPC endpoint, a URL or HOST:PORT [default: $OTEL_EXPORTER_OTLP_ENDPOINT, else
    /// http://127.0.0.1:4317]
    #[arg(long, value_name = "URL", value_parser = parse_endpoint)]
    endpoint: Option<String>,
    /// Stop after this long (e.g. 30s; a bare number is seconds); default: run until Ctrl-C.
    #[arg(long = "for", value_name = "D", value_parser = parse_positive_duration)]
    run_for: Option<Duration>,
    #[command(flatten)]
    budget_top_only: BudgetTopOnly,
}

/// `budget-top demo`'s own flags (the screen's workshop and the headless report), which need
/// budget-top: accepted here only to be refused with a pointer to it.
#[derive(Debug, clap::Args)]
struct BudgetTopOnly {
    #[arg(long, hide = true)]
    check: bool,
    #[arg(long, hide = true)]
    workshop: bool,
    #[arg(long, hide = true, value_name = "FORMAT")]
    format: Option<String>,
    #[arg(long, hide = true, value_name = "LIST")]
    fail_on: Option<String>,
    #[arg(long, hide = true, value_name = "FILE")]
    html: Option<String>,
}

impl BudgetTopOnly {
    /// The first such flag given.
    fn given(&self) -> Option<&'static str> {
        [
            (self.check, "--check"),
            (self.workshop, "--workshop"),
            (self.format.is_some(), "--format"),
            (self.fail_on.is_some(), "--fail-on"),
            (self.html.is_some(), "--html"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }
}

/// Exits with a usage error (status 2, as clap's own).
/// The receiver `load` sends to, `IP:PORT`: clap's own refusal said only "invalid socket
/// address syntax", and `localhost:4317` is not an address (nothing is looked up).
fn parse_target_addr(value: &str) -> Result<SocketAddr, String> {
    value.parse().map_err(|_| {
        "expected IP:PORT, such as 127.0.0.1:4317 (a host name such as localhost is not looked up)"
            .to_owned()
    })
}

fn refuse(kind: ErrorKind, message: String) -> ! {
    Cli::command().error(kind, message).exit()
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if let Some(Command::Load(args)) = &mut cli.command {
        match Security::from_files(args.tls_ca.as_deref(), args.bearer_token_file.as_deref()) {
            Ok(security) => args.security = security,
            Err(error) => refuse(ErrorKind::ValueValidation, error.to_string()),
        }
    }
    if let Some(flag) = cli.run.budget_top_only.given() {
        refuse(
            ErrorKind::ArgumentConflict,
            format!(
                "budget-demo has no {flag}: it runs the services and their load against an OTLP endpoint, \
without a screen or a report. `budget-top demo {flag}` runs the same demo into budget-top \
(budget-top demo --help lists its flags)"
            ),
        );
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            budget_demo::stderr_line!("budget-demo: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(error) => {
            budget_demo::stderr_line!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::List) => {
            for scenario in Scenario::ALL {
                budget_demo::stdout_line!("{:<17} {}", scenario.name(), scenario.lesson());
                if scenario.has_cure() {
                    budget_demo::stdout_line!("{:<17} --cure: {}", "", scenario.cured_lesson());
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Load(args)) => load(args).await.map(|()| ExitCode::SUCCESS),
        Some(Command::Recording(args)) => recording(&args).map(|()| ExitCode::SUCCESS),
        None => run(cli.run).await,
    }
}

fn recording(args: &RecordingArgs) -> anyhow::Result<()> {
    let to_stdout = args.output == std::path::Path::new("-");
    let out: Box<dyn std::io::Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?,
        )
    };
    let per_line = budget_demo::otlp_load::Template::spans_per_request(args.batch, args.depth);
    let lines = args.spans.div_ceil(per_line);
    match write_recording(out, lines, args) {
        Ok(()) => {}
        // `recording -o - | head`: the reader has what it wanted; a quiet end, as `list | head`.
        Err(e) if to_stdout && e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot write {}", args.output.display()));
        }
    }
    budget_demo::stderr_line!(
        "wrote {} spans in {lines} {} of {per_line} (chains of {} hops)",
        lines * per_line,
        if lines == 1 { "line" } else { "lines" },
        args.depth
    );
    Ok(())
}

/// Writes `lines` OTLP/JSON lines of the recording to `out`.
fn write_recording(
    out: Box<dyn std::io::Write>,
    lines: u64,
    args: &RecordingArgs,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    for n in 0..lines {
        let request = budget_demo::otlp_load::recording_request(n, args.batch, args.depth);
        serde_json::to_writer(&mut out, &request)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

async fn load(args: LoadArgs) -> anyhow::Result<()> {
    let target = match (args.grpc, args.http) {
        (Some(addr), _) => Target::Grpc(addr),
        (None, Some(addr)) => Target::Http(addr),
        (None, None) => anyhow::bail!("give --grpc ADDR or --http ADDR"),
    };
    let plan = FloodPlan {
        target,
        spans: args.spans,
        batch: args.batch,
        depth: args.depth,
        connections: args.connections,
        rate: args.rate,
        max_time: args.run_for,
        pacing: if args.open_loop {
            Pacing::Open {
                max_inflight: args.max_inflight,
            }
        } else {
            Pacing::Closed
        },
    };
    let to_send = plan.spans_to_send();
    if to_send != args.spans {
        // With --for the time may end it first: the rounded count is then only a bound.
        let sending = if args.run_for.is_some() {
            "sending at most"
        } else {
            "sending"
        };
        budget_demo::stderr_line!(
            "{sending} {to_send} spans, not {}: requests of {} spans, whole chains of {} hops",
            args.spans,
            plan.spans_per_request(),
            args.depth
        );
    }
    let r = flood_with(plan, &args.security).await?;
    // Line 1 is what scripts have parsed since issue 6 ("spans sent" = accepted); lines 2 and 3
    // count every answer by kind, as key=value pairs.
    budget_demo::stdout_line!(
        "spans sent: {}  seconds: {:.3}  spans/s: {:.0}  failed requests: {}",
        r.spans_sent,
        r.seconds,
        r.spans_per_second(),
        r.requests_throttled + r.requests_failed
    );
    budget_demo::stdout_line!(
        "spans offered={} accepted={} throttled={} failed={} unsent={}",
        r.spans_offered(),
        r.spans_sent,
        r.spans_throttled,
        r.spans_failed,
        r.spans_unsent
    );
    budget_demo::stdout_line!(
        "requests offered={} accepted={} throttled={} failed={} unsent={} resent={}",
        r.requests_offered(),
        r.requests_accepted,
        r.requests_throttled,
        r.requests_failed,
        r.requests_unsent,
        r.requests_resent
    );
    // Throttling is the expected answer to an open loop past capacity; in a closed loop (a
    // capacity measurement, which resends as told) a request still refused after its resends
    // means the figure is wrong.
    let failed = if args.open_loop {
        r.requests_failed
    } else {
        r.requests_throttled + r.requests_failed
    };
    if failed > 0 {
        anyhow::bail!("{failed} export requests failed");
    }
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let endpoint = match args.endpoint {
        Some(endpoint) => endpoint,
        None => match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Ok(endpoint) => parse_endpoint(&endpoint).unwrap_or_else(|error| {
                refuse(
                    ErrorKind::InvalidValue,
                    format!("OTEL_EXPORTER_OTLP_ENDPOINT: {error}"),
                )
            }),
            Err(_) => "http://127.0.0.1:4317".to_owned(),
        },
    };
    let config = args.demo.config(endpoint.clone(), args.run_for);
    if let Err(error) = config.check_latencies() {
        refuse(
            ErrorKind::InvalidValue,
            format!("--latency, scenario {}: {error}", config.scenario),
        );
    }
    if let Err(error) = config.check_clock_skew() {
        refuse(ErrorKind::ArgumentConflict, error.to_string());
    }
    let demo = Demo::start(config)
        .await
        .with_context(|| format!("starting the demo services (exporting to {endpoint})"))?;
    let cured = demo.scenario().cure_note(demo.cured());
    budget_demo::stderr_line!("scenario {}{cured}: {}", demo.scenario(), demo.lesson());
    for service in demo.services() {
        budget_demo::stderr_line!(
            "  {:<11} http://{}  work {} ms",
            service.name,
            service.addr,
            service.latency_ms
        );
    }
    budget_demo::stderr_line!("  load -> {}   spans -> {endpoint}", demo.edge_url());
    let bounded = args.demo.requests.is_some() || args.run_for.is_some();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut warned = false;
    loop {
        tokio::select! {
            () = demo.load_finished(), if bounded => break,
            signal = &mut ctrl_c => {
                signal.context("listening for Ctrl-C")?;
                break;
            }
            _ = tick.tick() => {
                // Said as soon as it shows, not only at the end: nothing may be listening.
                let exports = demo.exports().snapshot();
                if !warned && exports.failed > 0 {
                    warned = true;
                    budget_demo::stderr_line!(
                        "warning: spans are not reaching {endpoint}: {}",
                        exports.last_error.as_deref().unwrap_or("export failed")
                    );
                }
            }
        }
    }
    let counts = demo.load_counts();
    let exports = demo.exports();
    demo.shutdown().await;
    // Every request sent is accounted for: those without an answer when the load stopped
    // were abandoned in flight.
    budget_demo::stderr_line!(
        "sent {}: {} ok, {} shed (503), {} timed out (504), {} other, {} failed, {} abandoned in flight when the load stopped",
        counts.sent,
        counts.ok,
        counts.shed_full,
        counts.timed_out,
        counts.other_status,
        counts.failed,
        counts.sent.saturating_sub(counts.finished())
    );
    let exports = exports.snapshot();
    let why = exports.last_error.as_deref().unwrap_or("export failed");
    if exports.exported == 0 && exports.failed > 0 {
        budget_demo::stderr_line!(
            "no span reached {endpoint}: all {} were lost ({why}). Start budget-top (it listens on 127.0.0.1:4317) or another OTLP/gRPC receiver there, or give --endpoint",
            exports.failed
        );
        return Ok(ExitCode::FAILURE);
    }
    if exports.failed > 0 {
        budget_demo::stderr_line!(
            "spans: {} exported to {endpoint}, {} lost ({why})",
            exports.exported,
            exports.failed
        );
    } else {
        budget_demo::stderr_line!("spans: {} exported to {endpoint}", exports.exported);
    }
    Ok(ExitCode::SUCCESS)
}
