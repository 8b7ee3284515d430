//! `budget-top check`: the analysis without the screen, for CI and scripts.
//!
//! Spans come from an OTLP/JSON-lines file (`--input`, gzip or not: what `record` and the
//! OpenTelemetry Collector's file exporter write) or from the receivers until the input goes
//! quiet (`--idle`) or for a fixed time (`--for`). The report goes to stdout as text or JSON
//! (and with `--html FILE` to a page as well); the exit status says whether a finding reached
//! `--fail-on`.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, IsTerminal as _, Read, Write as _};
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use deadline_budget::analysis::{Report, TraceId};
use deadline_budget::carrier::Carriers;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::time::Instant;

use crate::cli::{CheckArgs, FailOn, Format};
use crate::ingest::{self, Ingest, IngestCounts, decode};
use crate::store::Store;
use crate::{report_html, report_text};

/// The exit status for "bad usage or unreadable input".
pub const EXIT_USAGE: u8 = 2;

/// An error that means exit status 2, with a message that says what and where.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Runs `check`; returns the exit status (0 or 1). Errors mean exit status 2.
pub async fn run(args: CheckArgs, max_spans: usize, carriers: Arc<Carriers>) -> anyhow::Result<u8> {
    let mut store = Store::new(max_spans);
    // The page shows each drawn span's attributes: keep them only when it is asked for.
    let keep_attributes = args.html.is_some();
    let ingest_counts = match &args.input {
        Some(path) => {
            read_file(path, &mut store, carriers, keep_attributes)?;
            None
        }
        None => Some(listen(&args, &mut store, carriers, keep_attributes).await?),
    };
    if store.counters().spans_held == 0 && store.counters().chains_evicted == 0 {
        match &args.input {
            Some(path) => eprintln!(
                "warning: {}: no span was read (the input is empty or has no valid span); the report covers nothing",
                path.display()
            ),
            None => {
                eprintln!("warning: no span arrived while listening; the report covers nothing")
            }
        }
        if args.fail_on.contains(&FailOn::Empty) {
            print_report(
                &mut store,
                args.format,
                &args.fail_on,
                ingest_counts,
                max_spans,
                args.html.as_deref(),
            )?;
            return Ok(1);
        }
    }
    print_report(
        &mut store,
        args.format,
        &args.fail_on,
        ingest_counts,
        max_spans,
        args.html.as_deref(),
    )
}

/// Prints the report of what `store` holds to stdout in `format` (with a warning on stderr when
/// `--max-spans` evicted chains), and with `html` also writes it as a page to that file;
/// returns the exit status: 1 when a finding reaches `fail_on`.
pub fn print_report(
    store: &mut Store,
    format: Format,
    fail_on: &[FailOn],
    ingest_counts: Option<IngestCounts>,
    max_spans: usize,
    html: Option<&Path>,
) -> anyhow::Result<u8> {
    let report = store.report();
    let counters = store.counters();
    if counters.chains_evicted > 0 || counters.spans_over_limit > 0 {
        eprintln!(
            "warning: {} chain(s) ({} spans) evicted and {} span(s) not kept to stay under --max-spans {max_spans}; the report covers the rest",
            counters.chains_evicted, counters.spans_evicted, counters.spans_over_limit
        );
    }
    if counters.spans_conflicting > 0 {
        eprintln!(
            "warning: {} span(s) arrived again with the same id and different contents; the copy kept is the one that ends later, then has more budget facts (the same whatever the order they came in)",
            counters.spans_conflicting
        );
    }
    let roots: HashMap<TraceId, (Arc<str>, Arc<str>)> = store
        .chains()
        .map(|c| {
            (
                c.trace_id,
                (c.summary.root_service.clone(), c.summary.root_name.clone()),
            )
        })
        .collect();
    let out = match format {
        Format::Json => json_report(&report, ingest_counts)?,
        Format::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            report_text::render(
                &report,
                &roots,
                &store.edges(),
                ingest_counts.as_ref(),
                color,
            )
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .context("cannot write the report to stdout")?;
    stdout
        .flush()
        .context("cannot write the report to stdout")?;
    let fail = FailOn::threshold(fail_on);
    if let Some(path) = html {
        let page = report_html::render(store, &report, ingest_counts.as_ref(), fail);
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    }
    Ok(u8::from(report.fails(fail)))
}

/// The JSON report of CONVENTIONS section 4; when listening, an extra `ingest` object says
/// what the receivers accepted, refused and rejected.
pub fn json_report(report: &Report, ingest: Option<IngestCounts>) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(report).context("cannot serialise the report")?;
    if let (Some(counts), Some(object)) = (ingest, value.as_object_mut()) {
        object.insert("ingest".into(), serde_json::to_value(counts)?);
    }
    let mut out = serde_json::to_string_pretty(&value)?;
    out.push('\n');
    Ok(out)
}

/// Opens a file of OTLP/JSON lines, gzip-compressed or not (detected by its magic bytes);
/// `-` is standard input.
pub fn open_lines(path: &Path) -> Result<Box<dyn std::io::BufRead>, InputError> {
    let source: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| InputError(format!("{}: cannot open: {e}", path.display())))?,
        )
    };
    let mut reader = BufReader::new(source);
    let magic = reader
        .fill_buf()
        .map_err(|e| InputError(format!("{}: cannot read: {e}", path.display())))?;
    if magic.starts_with(&[0x1f, 0x8b]) {
        let decoder: Box<dyn Read> = Box::new(flate2::bufread::MultiGzDecoder::new(reader));
        Ok(Box::new(BufReader::new(decoder)))
    } else {
        Ok(Box::new(reader))
    }
}

/// Parses one line of a recording; `None` for a blank line.
pub fn parse_line(
    path: &Path,
    number: usize,
    line: &str,
) -> Result<Option<ExportTraceServiceRequest>, InputError> {
    // A byte-order mark (some Windows editors write one) is not JSON, and says nothing.
    let line = line.trim().trim_start_matches('\u{feff}');
    if line.is_empty() {
        return Ok(None);
    }
    ingest::json::parse_request(line.as_bytes())
        .map(Some)
        .map_err(|e| {
            InputError(format!(
                "{}: line {number}: invalid OTLP/JSON ExportTraceServiceRequest: {e}",
                path.display()
            ))
        })
}

/// Reads one line of a recording (up to and with its newline) into `line`; returns the bytes
/// read (0 at the end) and, when the line was not valid UTF-8, what was repaired: it is kept
/// with U+FFFD in place of the bad bytes, the rule of the receivers.
pub fn read_line(
    lines: &mut dyn std::io::BufRead,
    bytes: &mut Vec<u8>,
    line: &mut String,
    path: &Path,
    number: usize,
) -> Result<(usize, Option<String>), InputError> {
    bytes.clear();
    line.clear();
    let n = lines.read_until(b'\n', bytes).map_err(|e| {
        InputError(format!(
            "{}: line {number}: cannot read: {e}",
            path.display()
        ))
    })?;
    let (text, repairs) = ingest::utf8::repair_json(bytes);
    line.push_str(&String::from_utf8_lossy(&text));
    Ok((n, repairs.message()))
}

/// Reads every line of `path` into the store (with each span's attributes when
/// `keep_attributes`). Spans with bad ids are skipped with a warning on stderr; a line that is
/// not OTLP/JSON stops the check with its line number.
pub fn read_file(
    path: &Path,
    store: &mut Store,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) -> Result<(), InputError> {
    let mut lines = open_lines(path)?;
    let mut interner = decode::Interner::with_carriers(carriers);
    let (mut bytes, mut line) = (Vec::new(), String::new());
    let mut number = 0;
    loop {
        number += 1;
        let (n, repaired) = read_line(&mut *lines, &mut bytes, &mut line, path, number)?;
        if n == 0 {
            return Ok(());
        }
        if let Some(message) = repaired {
            eprintln!("warning: {}: line {number}: {message}", path.display());
        }
        let Some(mut request) = parse_line(path, number, &line)? else {
            continue;
        };
        let decoded = decode::decode_request(&mut request, &mut interner, keep_attributes);
        if decoded.rejected > 0 {
            eprintln!(
                "warning: {}: line {number}: {} span(s) skipped: {}",
                path.display(),
                decoded.rejected,
                decoded.first_error.unwrap_or_default()
            );
        }
        store.insert_batch(ingest::Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
        });
    }
}

/// Listens until `--idle`/`--for`/Ctrl-C/SIGTERM, feeding the store.
async fn listen(
    args: &CheckArgs,
    store: &mut Store,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) -> anyhow::Result<IngestCounts> {
    // Before the receivers start: a signal right after the first request must be handled.
    let mut signals = Signals::new()?;
    let mut config = args.listen.ingest_config();
    config.carriers = carriers;
    config.keep_attributes = keep_attributes;
    let mut ingest = ingest::start(config).await?;
    eprintln!("listening: {}", ingest.describe());
    let stop_at = args.for_.map(|d| Instant::now() + d);
    let stop = async {
        tokio::select! {
            () = sleep_until(stop_at) => {}
            () = signals.recv() => {}
        }
    };
    feed_until(&mut ingest, store, args.idle, stop).await;
    Ok(finish(ingest, store).await)
}

/// Feeds `store` from the receivers until `stop` completes or, with `idle`, once spans have
/// arrived and none came for that long. The receivers keep running: more can follow (e.g. what
/// services flush as they stop), until [`finish`].
pub async fn feed_until(
    ingest: &mut Ingest,
    store: &mut Store,
    idle: Option<Duration>,
    stop: impl Future<Output = ()>,
) {
    let mut stop = pin!(stop);
    let mut last_span: Option<Instant> = None;
    loop {
        let idle_at = match (idle, last_span) {
            (Some(idle), Some(last)) => Some(last + idle),
            _ => None,
        };
        tokio::select! {
            batch = ingest.receiver.recv() => {
                let Some(batch) = batch else { break };
                if !batch.spans.is_empty() {
                    last_span = Some(Instant::now());
                }
                store.insert_batch(batch);
            }
            () = sleep_until(idle_at) => break,
            () = &mut stop => break,
        }
    }
}

/// Stops the receivers and takes everything they accepted into `store`; returns their counts.
pub async fn finish(mut ingest: Ingest, store: &mut Store) -> IngestCounts {
    ingest.shutdown();
    // Whatever was answered with success is in the channel: take all of it.
    ingest.receiver.close();
    while let Some(batch) = ingest.receiver.recv().await {
        store.insert_batch(batch);
    }
    ingest.stats.snapshot()
}

/// Sleeps until `at`; forever when there is none.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Ctrl-C and SIGTERM, as one stream.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signals")
    }
}

impl Signals {
    /// Starts listening for both signals, from now on (not from the first `recv`).
    pub fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            #[cfg(unix)]
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            #[cfg(unix)]
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")?,
        })
    }

    /// Waits for Ctrl-C or SIGTERM.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
