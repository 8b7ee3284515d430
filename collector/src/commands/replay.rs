//! `budget-top replay FILE`: a recording played into the screen, paced as it was recorded;
//! `replay --jaeger URL`: the traces read from Jaeger, played as a recording of them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::batch::Batch;
use crate::cli::ReplayArgs;
use crate::ingest::decode::decoded_request::DecodedRequest;
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
    let mut reader = match (args.jaeger.query(jaeger::now_unix_nano()), &args.file) {
        (Some(query), _) => {
            let mut fetched = jaeger::fetch(&query).await?;
            crate::stderr_line!("{}", fetched.summary.line());
            fetched.reader()
        }
        (None, Some(file)) => Reader::open(file)?,
        (None, None) => anyhow::bail!("replay needs a recording, or --jaeger URL"),
    };
    let file = reader.path().to_owned();
    let mut interner = interner::Interner::with_carriers(carriers);
    // The first spans are read before the screen starts, so that its clock is the recording's
    // from the first frame: a wall clock that went back to an older recording's time when its
    // first line was read left every chain unjudged (the store's clock only moves forward).
    let first = next_spans(&mut reader, &mut interner);
    let recording_t0 = first
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .and_then(start_of);
    let (tx, rx) = mpsc::channel::<Batch>(64);
    let notice = Arc::new(Mutex::new(None));
    let torn: Arc<Mutex<Option<Torn>>> = Arc::new(Mutex::new(None));
    let started = std::time::Instant::now();
    let feeder = {
        let (notice, torn) = (notice.clone(), torn.clone());
        tokio::task::spawn_blocking(move || {
            let path = reader.path().display().to_string();
            let feed = Feed {
                reader,
                interner,
                speed,
                t0: recording_t0.unwrap_or(0),
                started,
            };
            let (text, failed) = match feed.run(first, &tx) {
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
    let pace = if speed > 0.0 && speed.is_finite() {
        speed
    } else {
        1.0
    };
    let controls = Controls {
        clock: Box::new(move || match recording_t0 {
            None => wall_clock(),
            Some(t0) => t0 + (started.elapsed().as_nanos() as f64 * pace) as u64,
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

/// The next request of the recording that holds spans, decoded; `None` at its end.
fn next_spans(
    reader: &mut Reader,
    interner: &mut interner::Interner,
) -> Result<Option<DecodedRequest>, RecordingError> {
    // Repaired UTF-8 is shown as U+FFFD; stderr is the screen here, so no warning.
    while let Some(mut line) = reader.next_request(|_, _| {})? {
        let decoded = decode::decode_request(&mut line.request, interner, true);
        if !decoded.spans.is_empty() {
            return Ok(Some(decoded));
        }
    }
    Ok(None)
}

/// When a request's first span started (Unix ns).
fn start_of(decoded: &DecodedRequest) -> Option<u64> {
    decoded.spans.iter().map(|s| s.start_unix_nano).min()
}

/// A recording being played: what reads it, and the pace.
struct Feed {
    reader: Reader,
    interner: interner::Interner,
    speed: f64,
    /// The recording's first span's start (Unix ns): the screen's clock then.
    t0: u64,
    /// When the screen's clock was at `t0`.
    started: std::time::Instant,
}

impl Feed {
    /// Sends `first` and the recording's other batches, each once it is due: its first span's
    /// offset from the recording's first, `speed` times faster. Returns the spans sent, and
    /// the last line when it was cut short and skipped; stops quietly when the screen has gone.
    fn run(
        mut self,
        first: Result<Option<DecodedRequest>, RecordingError>,
        tx: &mpsc::Sender<Batch>,
    ) -> Result<(u64, Option<Torn>), RecordingError> {
        let mut next = first?;
        let mut sent = 0u64;
        while let Some(decoded) = next {
            if let Some(start) = start_of(&decoded)
                && self.speed > 0.0
                && self.speed.is_finite()
            {
                let due = Duration::from_nanos(
                    (start.saturating_sub(self.t0) as f64 / self.speed) as u64,
                );
                if let Some(wait) = due.checked_sub(self.started.elapsed()) {
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
            next = next_spans(&mut self.reader, &mut self.interner)?;
        }
        Ok((sent, self.reader.torn().cloned()))
    }
}
