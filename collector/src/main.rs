//! budget-top: an OTLP sink that shows deadline budgets flowing through a chain of services.
//!
//! Data flows one way: `ingest` (OTLP/gRPC + OTLP/HTTP) -> a bounded channel -> one loop that
//! owns the `store` -> the analysis -> the screen or the `check` report. The collector core
//! (ingest, store, check, record) is the `budget_top` library next to this file; the screen's
//! modules (`app`, `view`, `term`) belong to this binary.

use std::process::ExitCode;

use budget_top::cli::{Cli, Command};
use budget_top::{check, record};
use clap::Parser as _;

// The live screen (screen engineer): `app::run_live` is the entry point.
mod app;
mod term;
mod view;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("budget-top: cannot start the async runtime: {error}");
            return ExitCode::from(check::EXIT_USAGE);
        }
    };
    let result: anyhow::Result<u8> = runtime.block_on(async move {
        match cli.command {
            Some(Command::Check(args)) => check::run(args, cli.max_spans).await,
            Some(Command::Record(args)) => record::run(args).await.map(|()| 0),
            // DISPATCH POINT (demo engineer): `budget_demo::...` runs the scenarios here.
            Some(Command::Demo(_args)) => not_yet("demo"),
            // DISPATCH POINT (screen engineer): `app::run_live(..)` in replay mode plays a recording.
            Some(Command::Replay(args)) => app::run_replay(args.file, args.speed, cli.max_spans)
                .await
                .map(|()| 0),
            // The live screen (screen engineer's `app`), fed by the receivers.
            None => live(cli.listen, cli.max_spans).await.map(|()| 0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("budget-top: {error:#}");
            ExitCode::from(check::EXIT_USAGE)
        }
    }
}

/// Starts the receivers and hands their batches and refusal count to the screen.
async fn live(listen: budget_top::cli::Listen, max_spans: usize) -> anyhow::Result<()> {
    let ingest = budget_top::ingest::start(listen.ingest_config()).await?;
    let stats = ingest.stats.clone();
    let controls = app::Controls {
        spans_dropped: Some(Box::new(move || {
            stats
                .spans_refused
                .load(std::sync::atomic::Ordering::Relaxed)
        })),
        ..app::Controls::default()
    };
    let config = app::LiveConfig {
        mode: app::Mode::Live,
        grpc_addr: ingest.grpc_addr,
        http_addr: ingest.http_addr,
        max_spans,
    };
    let result = app::run_live(config, ingest.receiver, controls).await;
    ingest.shutdown_token.cancel();
    result
}

fn not_yet(what: &str) -> anyhow::Result<u8> {
    anyhow::bail!("{what} is not in this build yet; `budget-top check` and `budget-top record` are")
}
