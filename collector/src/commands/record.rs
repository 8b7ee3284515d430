//! `budget-top record`: listen and write every export request received as one OTLP/JSON line
//! (the format `check --input` and `replay` read, and the OpenTelemetry Collector's file
//! exporter writes). Each line is written and flushed as its request is taken from the
//! channel, and Ctrl-C / SIGTERM drain the channel before exiting, so nothing answered with
//! success is lost.

use super::listen::Signals;
use crate::cli::RecordArgs;
use crate::ingest;
use crate::otlp_lines::{RecordingError, Writer};

/// Runs `record` until Ctrl-C or SIGTERM.
pub async fn run(
    args: RecordArgs,
    carriers: std::sync::Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let path = &args.output;
    let mut file = Writer::create(path)?;
    // Before the receivers start: a SIGTERM right after the first request must be handled.
    let mut signals = Signals::new()?;
    let mut config = args.listen.ingest_config();
    config.keep_raw = true;
    config.keep_attributes = false;
    config.carriers = carriers;
    let mut ingest = ingest::start(config).await?;
    crate::stderr_line!("listening: {}", ingest.describe());
    for line in ingest.protection_lines() {
        crate::stderr_line!("{line}");
    }
    crate::stderr_line!("recording to {} (stop with Ctrl-C)", path.display());
    let mut requests = 0u64;
    loop {
        tokio::select! {
            batch = ingest.receiver.recv() => {
                let Some(batch) = batch else { break };
                requests += write_line(&mut file, batch)?;
            }
            () = signals.recv() => break,
        }
    }
    ingest.shutdown();
    ingest.receiver.close();
    while let Some(batch) = ingest.receiver.recv().await {
        requests += write_line(&mut file, batch)?;
    }
    file.sync()?;
    let stats = ingest.stats.snapshot();
    crate::stderr_line!(
        "recorded {requests} request(s), {} span(s) to {}; {} span(s) refused",
        stats.spans_accepted,
        path.display(),
        stats.spans_refused
    );
    Ok(())
}

/// Writes the request a batch came from (kept raw for this); returns the lines written.
fn write_line(file: &mut Writer, batch: crate::batch::Batch) -> Result<u64, RecordingError> {
    let Some(raw) = batch.raw else {
        return Ok(0);
    };
    file.write(&raw)?;
    Ok(1)
}
