//! `budget-top record`: listen and write every export request received as one OTLP/JSON line
//! (the format `check --input` and `replay` read, and the OpenTelemetry Collector's file
//! exporter writes). Each line is written and flushed as its request is taken from the
//! channel, and Ctrl-C / SIGTERM drain the channel before exiting, so nothing answered with
//! success is lost.

use std::io::Write as _;

use anyhow::Context as _;

use crate::check::Signals;
use crate::cli::RecordArgs;
use crate::ingest;

/// Runs `record` until Ctrl-C or SIGTERM.
pub async fn run(
    args: RecordArgs,
    carriers: std::sync::Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let path = &args.output;
    let mut file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    // Before the receivers start: a SIGTERM right after the first request must be handled.
    let mut signals = Signals::new()?;
    let mut config = args.listen.ingest_config();
    config.keep_raw = true;
    config.keep_attributes = false;
    config.carriers = carriers;
    let mut ingest = ingest::start(config).await?;
    eprintln!("listening: {}", ingest.describe());
    eprintln!("recording to {} (stop with Ctrl-C)", path.display());
    let mut requests = 0u64;
    let mut line = Vec::new();
    loop {
        tokio::select! {
            batch = ingest.receiver.recv() => {
                let Some(batch) = batch else { break };
                requests += write_line(&mut file, &mut line, batch, path)?;
            }
            () = signals.recv() => break,
        }
    }
    ingest.shutdown();
    ingest.receiver.close();
    while let Some(batch) = ingest.receiver.recv().await {
        requests += write_line(&mut file, &mut line, batch, path)?;
    }
    file.sync_all()
        .with_context(|| format!("cannot flush {}", path.display()))?;
    let stats = ingest.stats.snapshot();
    eprintln!(
        "recorded {requests} request(s), {} span(s) to {}; {} span(s) refused",
        stats.spans_accepted,
        path.display(),
        stats.spans_refused
    );
    Ok(())
}

fn write_line(
    file: &mut std::fs::File,
    line: &mut Vec<u8>,
    batch: ingest::Batch,
    path: &std::path::Path,
) -> anyhow::Result<u64> {
    let Some(raw) = batch.raw else {
        return Ok(0);
    };
    line.clear();
    serde_json::to_writer(&mut *line, &raw).context("cannot encode a request as OTLP/JSON")?;
    line.push(b'\n');
    // One write per line: a stopped process leaves whole lines behind.
    file.write_all(line)
        .with_context(|| format!("cannot write to {}", path.display()))?;
    Ok(1)
}
