//! `budget-top replay FILE`: a recording played into the screen, paced as it was recorded;
//! `replay --jaeger URL`: the traces read from Jaeger, played as a recording of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::cli::ReplayArgs;
use crate::ingest::decode::{self, interner};
use crate::jaeger;
use crate::otlp_lines::{Reader, RecordingError, Torn};
use crate::pump::wall_clock;
use crate::screen::{Controls, LiveConfig, Mode, run_live};
use crate::store::Retention;

/// `budget-top replay FILE`: play a recording (OTLP/JSON lines, gzip or not) into the same
/// screen, paced by the spans' own start times, `speed` times faster (0 or less: as fast as it
/// reads). The screen's clock follows the recording, so rates and λ read as they were. A
/// line that cannot be read stops the feed and, once the screen closes, is the error. With
/// `--jaeger`, the traces are read first (before the screen takes the terminal, the summary
/// left on it), oldest first, and played as a recording.
pub async fn run(
    args: ReplayArgs,
    retention: Retention,
    carriers: Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let speed = args.speed;
    let links = args.jaeger.trace_url(&args.links);
    // Fail before taking over the terminal when the file cannot be opened or Jaeger read.
    let reader = match (args.jaeger.query(jaeger::now_unix_nano()), &args.file) {
        (Some(query), _) => {
            let mut fetched = jaeger::fetch(&query).await?;
            crate::stderr_line!("{}", fetched.summary.line());
            fetched.reader()
        }
        (None, Some(file)) => Reader::open(file)?,
        (None, None) => anyhow::bail!("replay needs a recording, or --jaeger URL"),
    };
    let file = reader.path().to_owned();
    let (tx, rx) = mpsc::channel::<Batch>(64);
    let notice = Arc::new(Mutex::new(None));
    let torn: Arc<Mutex<Option<Torn>>> = Arc::new(Mutex::new(None));
    let recording_t0 = Arc::new(AtomicU64::new(0));
    let started = std::time::Instant::now();
    let feeder = {
        let (notice, recording_t0, torn) = (notice.clone(), recording_t0.clone(), torn.clone());
        tokio::task::spawn_blocking(move || {
            let path = reader.path().display().to_string();
            let (text, failed) =
                match feed_recording(reader, speed, &tx, &recording_t0, started, carriers) {
                    Ok((n, None)) => (format!("replay finished: {n} spans from {path}"), None),
                    Ok((n, Some(cut))) => {
                        let line = cut.line;
                        if let Ok(mut t) = torn.lock() {
                            *t = Some(cut);
                        }
                        let text = format!(
                            "replay finished: {n} spans from {path}; line {line} cut short, skipped"
                        );
                        (text, None)
                    }
                    // The screen's line may be narrower than the reason: q prints it whole.
                    Err(e) => (
                        format!("replay stopped on bad input (q quits and prints why): {e}"),
                        Some(e),
                    ),
                };
            if let Ok(mut n) = notice.lock() {
                *n = Some(text);
            }
            failed
        })
    };
    let clock_t0 = recording_t0.clone();
    let pace = if speed > 0.0 && speed.is_finite() {
        speed
    } else {
        1.0
    };
    let controls = Controls {
        clock: Box::new(move || match clock_t0.load(Ordering::Relaxed) {
            0 => wall_clock(),
            t0 => t0 + (started.elapsed().as_nanos() as f64 * pace) as u64,
        }),
        notice: Some(notice),
        ..Controls::default()
    };
    let config = LiveConfig {
        mode: Mode::Replay(file.display().to_string()),
        retention,
        links,
        ..LiveConfig::default()
    };
    let result = run_live(config, rx, controls).await;
    // The screen was stderr: the warning comes once it has given the terminal back.
    if let Some(torn) = torn.lock().ok().and_then(|t| t.clone()) {
        crate::stderr_line!("warning: {}", torn.warning(&file));
    }
    // A recording that stopped on bad input ends the replay as `check` ends on it: with the
    // reason on stderr (the terminal restored) and exit status 2.
    if feeder.is_finished()
        && let Ok(Some(error)) = feeder.await
    {
        result?;
        return Err(error.into());
    }
    result
}

/// Read the recording and send its batches, sleeping so they arrive as they were recorded.
/// Returns the spans sent, and the last line when it was cut short and skipped; stops quietly
/// when the screen has gone.
fn feed_recording(
    mut reader: Reader,
    speed: f64,
    tx: &mpsc::Sender<Batch>,
    recording_t0: &AtomicU64,
    started: std::time::Instant,
    carriers: Arc<deadline_budget::carrier::Carriers>,
) -> Result<(u64, Option<Torn>), RecordingError> {
    let mut interner = interner::Interner::with_carriers(carriers);
    let mut sent = 0u64;
    // Repaired UTF-8 is shown as U+FFFD; stderr is the screen here, so no warning.
    while let Some(mut line) = reader.next_request(|_, _| {})? {
        let decoded = decode::decode_request(&mut line.request, &mut interner, true);
        let Some(first) = decoded.spans.iter().map(|s| s.start_unix_nano).min() else {
            continue;
        };
        let t0 = match recording_t0.compare_exchange(0, first, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => first,
            Err(t0) => t0,
        };
        if speed > 0.0 && speed.is_finite() {
            let due = Duration::from_nanos((first.saturating_sub(t0) as f64 / speed) as u64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait.min(Duration::from_secs(60)));
            }
        }
        sent += decoded.spans.len() as u64;
        let batch = Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
            received: None,
        };
        if tx.blocking_send(batch).is_err() {
            return Ok((sent, None));
        }
    }
    Ok((sent, reader.torn().cloned()))
}
