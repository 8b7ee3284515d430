//! `budget-top record`: listen and write every export request received as one OTLP/JSON line
//! (the format `check --input` and `replay` read, and the OpenTelemetry Collector's file
//! exporter writes). Each line is written and flushed as its request is taken from the
//! channel, and Ctrl-C / SIGTERM drain the channel before exiting, so nothing answered with
//! success is lost.

use super::listen::Signals;
use crate::batch::Batch;
use crate::cli::RecordArgs;
use crate::ingest;
use crate::otlp_lines::Writer;
use crate::pump::{Intake, Pump, Tick};

/// Runs `record` until Ctrl-C or SIGTERM.
pub async fn run(
    args: RecordArgs,
    carriers: std::sync::Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let path = &args.output;
    let file = Writer::create(path)?;
    // Before the receivers start: a SIGTERM right after the first request must be handled.
    let mut signals = Signals::new()?;
    let mut config = args.listen.ingest_config();
    config.keep_raw = true;
    config.keep_attributes = false;
    config.carriers = carriers;
    let ingest = ingest::start(config).await?;
    crate::stderr_line!("listening: {}", ingest.describe());
    for line in ingest.protection_lines() {
        crate::stderr_line!("{line}");
    }
    crate::stderr_line!("recording to {} (stop with Ctrl-C)", path.display());
    let stats = ingest.stats.clone();
    let mut recording = Recording { file, requests: 0 };
    // No judging: the lines are written as they come.
    let mut pump = Pump::of(ingest);
    pump.feed_until(&mut recording, None, signals.recv())
        .await?;
    pump.drain(&mut recording).await?;
    recording.file.sync()?;
    let stats = stats.snapshot();
    crate::stderr_line!(
        "recorded {} request(s), {} span(s) to {}; {} span(s) refused",
        recording.requests,
        stats.spans_accepted,
        path.display(),
        stats.spans_refused
    );
    Ok(())
}

/// The file the pump feeds, and the lines written to it.
struct Recording {
    file: Writer,
    requests: u64,
}

impl Intake for Recording {
    /// Writes the request a batch came from (kept raw for this).
    fn take(&mut self, batch: Batch, _now_unix_nano: u64) -> anyhow::Result<()> {
        if let Some(raw) = batch.raw {
            self.file.write(&raw)?;
            self.requests += 1;
        }
        Ok(())
    }

    fn judge(&mut self, _tick: Tick) -> anyhow::Result<()> {
        Ok(())
    }
}
