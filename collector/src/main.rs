//! budget-top: an OTLP sink that shows deadline budgets flowing through a chain of services.
//!
//! Data flows one way: `ingest` (OTLP/gRPC + OTLP/HTTP) -> a bounded channel -> one loop that
//! owns the `store` -> the analysis -> the screen or the `check` report. All of it is the
//! `budget_top` library next to this file; here the command line is parsed and dispatched to
//! `budget_top::commands`, one module per subcommand.

use std::process::ExitCode;

use budget_top::cli::{Cli, Command};
use budget_top::commands::{check, live, merge, record, replay, serve};
use clap::{CommandFactory as _, Parser as _};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some((subcommand, refusal)) = cli.refusal() {
        // As clap's own usage errors: the sentence, the subcommand's usage, exit status 2.
        let mut command = Cli::command();
        command.build();
        match command.find_subcommand_mut(subcommand) {
            Some(sub) => sub.error(clap::error::ErrorKind::ArgumentConflict, refusal),
            None => command.error(clap::error::ErrorKind::ArgumentConflict, refusal),
        }
        .exit();
    }
    let carriers = cli.carriers();
    let retention = cli.retention();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            budget_top::stderr_line!("budget-top: cannot start the async runtime: {error}");
            return ExitCode::from(check::EXIT_USAGE);
        }
    };
    let result: anyhow::Result<u8> = runtime.block_on(async move {
        match cli.command {
            Some(Command::Check(args)) => check::run(*args, retention, carriers).await,
            Some(Command::Record(args)) => record::run(args, carriers).await.map(|()| 0),
            Some(Command::Merge(args)) => merge::run(&args, retention.max_findings),
            Some(Command::Serve(args)) => serve::run(*args, retention, carriers).await,
            // The demo's services exporting to our own receivers: screen, workshop or --check.
            #[cfg(feature = "demo")]
            Some(Command::Demo(args)) => {
                budget_top::commands::demo::run(args, retention, carriers).await
            }
            Some(Command::Replay(args)) => {
                replay::run(*args, retention, carriers).await.map(|()| 0)
            }
            // The live screen, fed by the receivers.
            None => live::run(
                cli.listen,
                retention,
                cli.max_attribute_bytes,
                carriers,
                cli.links.trace_url,
            )
            .await
            .map(|()| 0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            budget_top::stderr_line!("budget-top: {}", causes(&error));
            ExitCode::from(check::EXIT_USAGE)
        }
    }
}

/// The error and its causes, joined by `: ` as `{:#}` does, but each said once: a message that
/// already ends with its cause's words (`cannot open: No such file or directory`) is not
/// followed by them again.
fn causes(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}
