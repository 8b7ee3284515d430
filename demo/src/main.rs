//! `budget-demo`: run the demo services and their load standalone, exporting to any OTLP/gRPC
//! endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, default `http://127.0.0.1:4317`), until Ctrl-C or
//! the end of `--for`.

use std::time::Duration;

use anyhow::Context as _;
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
    /// List the scenarios and their lessons.
    List,
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
            }
            Ok(())
        }
        None => run(cli.run).await,
    }
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
    eprintln!("scenario {}: {}", demo.scenario(), demo.lesson());
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
