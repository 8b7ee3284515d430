//! `budget-demo`: run the demo services and their load standalone, exporting to any OTLP/gRPC
//! endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, default `http://127.0.0.1:4317`), until Ctrl-C or
//! the end of `--for`.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};
use budget_demo::{Demo, DemoArgs, Scenario, parse_duration};
use clap::{Parser, Subcommand};

/// Demo services that teach deadline budget propagation, exporting spans over OTLP/gRPC.
#[derive(Debug, Parser)]
#[command(name = "budget-demo", version, args_conflicts_with_subcommands = true)]
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
}

/// `budget-demo load`: a receiver benchmark's traffic (loopback only).
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["grpc", "http"])))]
struct LoadArgs {
    /// Send OTLP/gRPC to this address.
    #[arg(long, value_name = "ADDR")]
    grpc: Option<SocketAddr>,
    /// Send OTLP/HTTP protobuf (POST /v1/traces) to this address.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Spans to send in all.
    #[arg(long, default_value_t = 100_000)]
    spans: u64,
    /// Spans per export request.
    #[arg(long, default_value_t = 512)]
    batch: usize,
    /// Hops per chain (each a SERVER and a CLIENT span).
    #[arg(long, default_value_t = 4)]
    depth: usize,
    /// Connections sending at once.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Spans per second in all (default: as fast as the receiver takes them).
    #[arg(long, required_if_eq("open_loop", "true"))]
    rate: Option<f64>,
    /// Stop sending after this long even if spans remain (e.g. 5m).
    #[arg(long = "for", value_parser = parse_duration)]
    run_for: Option<Duration>,
    /// Send at --rate whatever the answers, many requests in flight per connection (an
    /// overload test); without it each connection waits for its answer (a capacity test).
    #[arg(long)]
    open_loop: bool,
    /// With --open-loop: requests awaiting an answer at most; one due past it is not sent
    /// (counted as unsent).
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "open_loop")]
    max_inflight: usize,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    demo: DemoArgs,
    /// The OTLP/gRPC endpoint [default: $OTEL_EXPORTER_OTLP_ENDPOINT, else http://127.0.0.1:4317]
    #[arg(long)]
    endpoint: Option<String>,
    /// Stop after this long (e.g. 30s); default: run until Ctrl-C.
    #[arg(long = "for", value_parser = parse_duration)]
    run_for: Option<Duration>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::List) => {
            for scenario in Scenario::ALL {
                println!("{:<17} {}", scenario.name(), scenario.lesson());
                if scenario.has_cure() {
                    println!("{:<17} --cure: {}", "", scenario.cured_lesson());
                }
            }
            Ok(())
        }
        Some(Command::Load(args)) => load(args).await,
        None => run(cli.run).await,
    }
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
    let r = flood(plan).await?;
    // Line 1 is what scripts have parsed since issue 6 ("spans sent" = accepted); lines 2 and 3
    // count every answer by kind, as key=value pairs.
    println!(
        "spans sent: {}  seconds: {:.3}  spans/s: {:.0}  failed requests: {}",
        r.spans_sent,
        r.seconds,
        r.spans_per_second(),
        r.requests_throttled + r.requests_failed
    );
    println!(
        "spans offered={} accepted={} throttled={} failed={} unsent={}",
        r.spans_offered(),
        r.spans_sent,
        r.spans_throttled,
        r.spans_failed,
        r.spans_unsent
    );
    println!(
        "requests offered={} accepted={} throttled={} failed={} unsent={}",
        r.requests_offered(),
        r.requests_accepted,
        r.requests_throttled,
        r.requests_failed,
        r.requests_unsent
    );
    // Throttling is the expected answer to an open loop past capacity; in a closed loop (a
    // capacity measurement) any refusal means the figure is wrong.
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

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let endpoint = args
        .endpoint
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .unwrap_or_else(|| "http://127.0.0.1:4317".to_owned());
    let config = args.demo.config(endpoint.clone(), args.run_for);
    let demo = Demo::start(config)
        .await
        .with_context(|| format!("starting the demo services (exporting to {endpoint})"))?;
    let cured = if demo.cured() { " (cured)" } else { "" };
    eprintln!("scenario {}{cured}: {}", demo.scenario(), demo.lesson());
    for service in demo.services() {
        eprintln!(
            "  {:<11} http://{}  work {} ms",
            service.name, service.addr, service.latency_ms
        );
    }
    eprintln!("  load -> {}   spans -> {endpoint}", demo.edge_url());
    let bounded = args.demo.requests.is_some() || args.run_for.is_some();
    tokio::select! {
        () = demo.load_finished(), if bounded => {}
        signal = tokio::signal::ctrl_c() => signal.context("listening for Ctrl-C")?,
    }
    let counts = demo.load_counts();
    demo.shutdown().await;
    eprintln!(
        "sent {}: {} ok, {} shed (503), {} timed out (504), {} other, {} failed",
        counts.sent,
        counts.ok,
        counts.shed_full,
        counts.timed_out,
        counts.other_status,
        counts.failed
    );
    Ok(())
}
