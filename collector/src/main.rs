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
mod demo;
mod term;
mod view;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let carriers = cli.carriers();
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
            Some(Command::Check(args)) => check::run(args, cli.max_spans, carriers).await,
            Some(Command::Record(args)) => record::run(args, carriers).await.map(|()| 0),
            // The demo's services exporting to our own receivers: screen, workshop or --check.
            Some(Command::Demo(args)) => demo::run(args, cli.max_spans, carriers).await,
            // DISPATCH POINT (screen engineer): `app::run_live(..)` in replay mode plays a recording.
            Some(Command::Replay(args)) => {
                app::run_replay(args.file, args.speed, cli.max_spans, carriers)
                    .await
                    .map(|()| 0)
            }
            // The live screen (screen engineer's `app`), fed by the receivers.
            None => live(cli.listen, cli.max_spans, cli.max_attribute_bytes, carriers)
                .await
                .map(|()| 0),
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

/// Starts the receivers and hands their batches and refusal count to the screen; `d` on the
/// empty screen starts the demo services exporting to these receivers.
async fn live(
    listen: budget_top::cli::Listen,
    max_spans: usize,
    max_attribute_bytes: usize,
    carriers: std::sync::Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let mut config = listen.ingest_config();
    config.carriers = carriers;
    // What may wait in the channel is bounded like what the store holds.
    config.max_queued_attribute_bytes = max_attribute_bytes;
    let ingest = budget_top::ingest::start(config).await?;
    let stats = ingest.stats.clone();
    let (demo_control, start_demo, demo_driver) = match demo::for_live_screen(ingest.grpc_addr) {
        Some(d) => (Some(d.control), Some(d.start), Some(d.driver)),
        None => (None, None, None),
    };
    let controls = app::Controls {
        demo: demo_control,
        start_demo,
        refused: Some(Box::new(move || app::Refused::of(&stats))),
        ..app::Controls::default()
    };
    let config = app::LiveConfig {
        mode: app::Mode::Live,
        grpc_addr: ingest.grpc_addr,
        http_addr: ingest.http_addr,
        max_spans,
        max_attribute_bytes,
    };
    let result = app::run_live(config, ingest.receiver, controls).await;
    ingest.shutdown_token.cancel();
    if let Some(driver) = demo_driver {
        driver.stop().await;
    }
    result
}
