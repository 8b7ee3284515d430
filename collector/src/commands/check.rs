//! `budget-top check`: the analysis without the screen, for CI and scripts.
//!
//! Spans come from an OTLP/JSON-lines file (`--input`, gzip or not: what `record` and the
//! OpenTelemetry Collector's file exporter write), from Jaeger (`--jaeger`: its traces read as
//! such a file, [`crate::jaeger`]), or from the receivers until the input goes quiet (`--idle`)
//! or for a fixed time (`--for`). The report goes to stdout as text or JSON
//! (and with `--html FILE` to a page as well); the exit status says whether a finding reached
//! `--fail-on`.

use std::io::{IsTerminal as _, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use deadline_budget::carrier::Carriers;
use deadline_budget::duration::format_duration;
use tokio::time::Instant;

mod file_input;

use super::listen::{self, Signals};
use crate::cli::{CheckArgs, FailOn, Format};
use crate::ingest::{self, IngestCounts};
use crate::jaeger;
use crate::otlp_lines::{Reader, RecordingError};
use crate::pump::sleep_until;
use crate::report::json::{self as report_json, Additions};
use crate::report::{Context, html as report_html, text as report_text};
use crate::store::{Retention, Store};

/// The exit status for "bad usage or unreadable input".
pub const EXIT_USAGE: u8 = 2;

/// Runs `check`; returns the exit status (0 or 1). Errors mean exit status 2.
pub async fn run(
    args: CheckArgs,
    retention: Retention,
    carriers: Arc<Carriers>,
) -> anyhow::Result<u8> {
    let mut store = if args.reads() {
        // A file is read against the clock, on two threads.
        retention.store()
    } else {
        // Listening, the chains held are judged on one thread at the end (less CPU, a few
        // tenths of a second more to wait).
        retention.store().with_analyses_on_one_thread()
    };
    // The page shows each drawn span's attributes: keep them only when it is asked for.
    let keep_attributes = args.html.is_some();
    let links = args.jaeger.trace_url(&args.links);
    let mut source = None;
    let (ingest_counts, lines_torn) =
        match (&args.input, args.jaeger.query(jaeger::now_unix_nano())) {
            (_, Some(query)) => {
                let mut fetched = jaeger::fetch(&query).await?;
                crate::stderr_line!("{}", fetched.summary.line());
                let torn = read_fetched(&mut fetched, &mut store, carriers, keep_attributes)?;
                source = Some(fetched.summary);
                (None, torn)
            }
            (Some(path), None) => (
                None,
                read_file(path, &mut store, carriers, keep_attributes)?,
            ),
            (None, None) => (
                Some(listen(&args, &mut store, carriers, keep_attributes).await?),
                0,
            ),
        };
    let empty = store.counters().spans_held == 0 && store.counters().chains_evicted == 0;
    if empty {
        match (&args.input, &source) {
            (_, Some(source)) => crate::stderr_line!(
                "warning: jaeger {}: no trace was read (no span in the window, or no service); the report covers nothing",
                source.jaeger
            ),
            (Some(path), None) => crate::stderr_line!(
                "warning: {}: no span was read (the input is empty or has no valid span); the report covers nothing",
                path.display()
            ),
            (None, None) => {
                crate::stderr_line!(
                    "warning: no span arrived while listening; the report covers nothing"
                )
            }
        }
    }
    let context = Context {
        ingest: ingest_counts.as_ref(),
        source: source.as_ref(),
        links: links.as_ref(),
    };
    let status = print_report(
        &mut store,
        args.format,
        &args.fail_on,
        &context,
        lines_torn,
        retention.max_spans,
        args.html.as_deref(),
    )?;
    // `check` ends the process next: freeing a million spans' allocations one by one would cost
    // CPU for memory the exit gives back anyway (docs/performance.md, "`check` forgets its
    // store at exit").
    std::mem::forget(store);
    Ok(if empty && args.fail_on.contains(&FailOn::Empty) {
        1
    } else {
        status
    })
}

/// Reads what Jaeger answered into the store as a recording is read; a line the decoders
/// refuse is an error naming the trace and the URL that answered it.
fn read_fetched(
    fetched: &mut jaeger::Fetched,
    store: &mut Store,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) -> anyhow::Result<u64> {
    match read_lines(fetched.reader(), store, carriers, keep_attributes) {
        Ok(torn) => Ok(torn),
        Err(RecordingError::Parse { line, message, .. }) => Err(anyhow::anyhow!(
            "{}: not OTLP JSON: {message}",
            fetched
                .origin(line)
                .unwrap_or_else(|| format!("jaeger {}", fetched.summary.jaeger))
        )),
        Err(other) => Err(other.into()),
    }
}

/// Prints the report of what `store` holds to stdout in `format` (with a warning on stderr when
/// `--max-spans` evicted chains), and with `html` also writes it as a page to that file;
/// returns the exit status: 1 when a finding reaches `fail_on`. `lines_torn` counts a file's
/// last line skipped for being cut short; `context` says where the spans came from and links
/// each chain to its trace.
pub fn print_report(
    store: &mut Store,
    format: Format,
    fail_on: &[FailOn],
    context: &Context<'_>,
    lines_torn: u64,
    max_spans: usize,
    html: Option<&Path>,
) -> anyhow::Result<u8> {
    let report = store.report();
    let counters = store.counters();
    if counters.chains_evicted > 0 {
        crate::stderr_line!(
            "note: {} chain(s) ({} spans) were judged and let go to stay under --max-spans {max_spans}: the counts cover them, the findings list names what they found, their waterfalls are not kept",
            counters.chains_evicted,
            counters.spans_evicted
        );
    }
    if counters.spans_after_verdict > 0 || counters.spans_over_limit > 0 {
        crate::stderr_line!(
            "warning: {} span(s) arrived after their chain was judged and let go, and {} span(s) did not fit a chain already holding --max-spans {max_spans}: they are counted, not judged (a larger --max-spans keeps them)",
            counters.spans_after_verdict,
            counters.spans_over_limit
        );
    }
    if counters.spans_conflicting > 0 {
        crate::stderr_line!(
            "warning: {} span(s) arrived again with the same id and different contents; the copy kept is the one that ends later, then has more budget facts (the same whatever the order they came in)",
            counters.spans_conflicting
        );
    }
    let out = match format {
        Format::Json => {
            let store = (counters.spans_after_verdict > 0 || counters.chains_evicted > 0)
                .then_some(&counters);
            let additions = Additions {
                lines_torn,
                store,
                forward: None,
            };
            report_json::render(&report, context, additions)?
        }
        Format::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            report_text::of_store(store, &report, context, color)
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
        let page = report_html::render(store, &report, context, fail);
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    }
    Ok(u8::from(report.fails(fail)))
}

/// Reads every line of `path` into the store (with each span's attributes when
/// `keep_attributes`). Spans with bad ids are skipped with a warning on stderr; a line that is
/// not OTLP/JSON stops the check with its line number, except a last line cut short, which is
/// skipped with a warning. Returns how many lines were skipped so (0 or 1). The lines are
/// decoded on other threads, beside the store (`file_input`).
pub fn read_file(
    path: &Path,
    store: &mut Store,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) -> Result<u64, RecordingError> {
    read_lines(Reader::open(path)?, store, carriers, keep_attributes)
}

/// The same from a reader already open: a file, or a source's lines in memory.
fn read_lines(
    reader: Reader,
    store: &mut Store,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) -> Result<u64, RecordingError> {
    let path = reader.path().to_owned();
    Ok(
        match file_input::read_into(reader, store, &carriers, keep_attributes)? {
            Some(torn) => {
                crate::stderr_line!("warning: {}", torn.warning(&path));
                1
            }
            None => 0,
        },
    )
}

/// How a listening `check` ends, for the line under "listening: ...".
fn how_it_ends(args: &CheckArgs) -> String {
    match (args.idle, args.for_) {
        (None, None) => {
            "Ctrl-C or SIGTERM ends it and prints the report (no --idle or --for given)".to_owned()
        }
        (Some(idle), None) => format!(
            "ends {} after the last span (none yet: it waits for the first), or at Ctrl-C or SIGTERM, and prints the report",
            format_duration(idle)
        ),
        (None, Some(d)) => format!(
            "ends after {}, or at Ctrl-C or SIGTERM, and prints the report",
            format_duration(d)
        ),
        (Some(idle), Some(d)) => format!(
            "ends {} after the last span (none yet) or after {} at most, or at Ctrl-C or SIGTERM, and prints the report",
            format_duration(idle),
            format_duration(d)
        ),
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
    let ingest = ingest::start(config).await?;
    crate::stderr_line!("listening: {}", ingest.describe());
    for line in ingest.protection_lines() {
        crate::stderr_line!("{line}");
    }
    // Without this line a listening check looks hung: say how it ends.
    crate::stderr_line!("{}", how_it_ends(args));
    let stop_at = args.for_.map(|d| Instant::now() + d);
    let stop = async {
        tokio::select! {
            () = sleep_until(stop_at) => {}
            () = signals.recv() => {}
        }
    };
    let stats = ingest.stats.clone();
    let mut pump = listen::pump(ingest, store);
    pump.feed_until(store, args.idle, stop).await?;
    pump.drain(store).await?;
    Ok(stats.snapshot())
}
