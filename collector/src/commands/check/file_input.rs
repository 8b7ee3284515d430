//! `check --input`: a recording read into the store on every core, in bounded memory.
//!
//! Enters: an OTLP/JSON-lines file (gzip or not). Leaves: its spans in the store, in the order
//! of the lines, with the warnings on stderr in that order too.
//!
//! Three stages, each on its own thread, joined by bounded channels: a reader reads lines (and
//! inflates gzip) straight into line buffers, [`DECODERS`] decoders check them as UTF-8, parse
//! and decode them (line `i` goes to decoder `i % DECODERS`) and give the buffers back to the
//! reader, and the caller's thread takes the decoded batches in line order (the same round)
//! into the store, which judges and evicts as they come. Decoding the JSON is most of the
//! work, so it runs beside the store instead of before it; at most a few lines wait at each
//! step, so the file path holds little beyond the store.
//!
//! A line that does not parse stops the read with its line number, except the last line that
//! is not blank when it is cut short: skipped, with a warning (`CONVENTIONS.md` section 4). The
//! reader holds each line until it has seen whether another line that is not blank follows, so
//! a decoder knows whether a line that fails is that last one.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use deadline_budget::carrier::Carriers;

use crate::batch::Batch;
use crate::ingest::decode::{
    self, decoded_request::DecodedRequest, interner::Interner, json_lines,
};
use crate::otlp_lines::{self, Reader, RecordingError, Torn};
use crate::store::Store;

/// Threads that parse and decode lines: the JSON is most of the work.
const DECODERS: usize = 2;
/// Lines waiting for each decoder, and decoded lines waiting for the store, at most.
const AHEAD: usize = 2;
/// Line buffers given back to the reader, waiting to be used again, at most: each line read is
/// written over one (no allocation, no page to fault in) once the decoders are going.
const SPARE: usize = 2 * DECODERS * AHEAD;

/// A line for a decoder.
enum Line {
    Text {
        number: usize,
        /// As read: not checked as UTF-8 yet.
        bytes: Vec<u8>,
        /// No line that is not blank follows it.
        last: bool,
    },
    /// Reading failed here: nothing follows.
    Failed(RecordingError),
}

/// A line decoded, for the store.
enum Decoded {
    Batch {
        batch: Option<Batch>,
        warnings: Vec<String>,
    },
    /// The last line, cut short: skipped.
    Torn(Torn),
    Failed(RecordingError),
}

/// Reads every line of `reader` into `store` (with each span's attributes when
/// `keep_attributes`), warnings on stderr; the last line when it was cut short and skipped.
pub fn read_into(
    reader: Reader,
    store: &mut Store,
    carriers: &Arc<Carriers>,
    keep_attributes: bool,
) -> Result<Option<Torn>, RecordingError> {
    let path = &reader.path().to_owned();
    std::thread::scope(|scope| {
        let mut to_decoders = Vec::with_capacity(DECODERS);
        let mut from_decoders = Vec::with_capacity(DECODERS);
        let (spare_out, spare) = sync_channel(SPARE);
        for i in 0..DECODERS {
            let (lines, lines_in) = sync_channel(AHEAD);
            let (decoded_out, decoded) = sync_channel(AHEAD);
            let (carriers, spare_out) = (carriers.clone(), spare_out.clone());
            spawn(scope, path, format!("check-decode-{i}"), move || {
                decode_lines(
                    path,
                    &lines_in,
                    &decoded_out,
                    &spare_out,
                    carriers,
                    keep_attributes,
                );
            })?;
            to_decoders.push(lines);
            from_decoders.push(decoded);
        }
        drop(spare_out);
        spawn(scope, path, "check-read".into(), move || {
            read_lines(reader, &to_decoders, &spare);
        })?;
        store_in_order(path, &from_decoders, store)
    })
}

fn spawn<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    path: &Path,
    name: String,
    work: impl FnOnce() + Send + 'scope,
) -> Result<(), RecordingError> {
    std::thread::Builder::new()
        .name(name)
        .spawn_scoped(scope, work)
        .map(drop)
        .map_err(|source| RecordingError::Read {
            path: path.to_owned(),
            line: 0,
            source,
        })
}

/// The reader: each line to its decoder, once it is known whether a line that is not blank
/// follows (blank lines in between are held with it), read into a buffer a decoder gave back
/// when there is one. Stops at the end, on an error, or when the store stops taking.
fn read_lines(mut reader: Reader, decoders: &[SyncSender<Line>], spare: &Receiver<Vec<u8>>) {
    let mut next = 0;
    let mut send = |line: Line| {
        let sent = decoders[next % decoders.len()].send(line).is_ok();
        next += 1;
        sent
    };
    let mut held: Vec<Line> = Vec::new();
    let mut blank_buffer = None;
    loop {
        let buffer = match blank_buffer.take() {
            Some(buffer) => buffer,
            // None given back yet (or the decoders are gone): a new one.
            None => spare.try_recv().unwrap_or_default(),
        };
        let (number, bytes) = match reader.next_line(buffer) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                held.push(Line::Failed(error));
                break;
            }
        };
        let blank = bytes.iter().all(u8::is_ascii_whitespace);
        if !blank {
            for line in held.drain(..) {
                if !send(line) {
                    return;
                }
            }
        }
        let bytes = if blank {
            blank_buffer = Some(bytes);
            Vec::new()
        } else {
            bytes
        };
        held.push(Line::Text {
            number,
            bytes,
            last: false,
        });
    }
    for mut line in held {
        if let Line::Text { last, .. } = &mut line {
            *last = true;
        }
        if !send(line) {
            return;
        }
    }
}

/// A decoder: each line checked as UTF-8 (repaired, with a warning, when it is not), parsed and
/// decoded into a batch, in the order received, its buffer then given back to the reader. A
/// line is read straight into spans (`json_lines`) when it can be; else (and for `--html`,
/// which keeps each span's attributes) through the general OTLP/JSON reader, which names the
/// field in an error.
fn decode_lines(
    path: &Path,
    lines: &Receiver<Line>,
    decoded: &SyncSender<Decoded>,
    spare: &SyncSender<Vec<u8>>,
    carriers: Arc<Carriers>,
    keep_attributes: bool,
) {
    let mut interner = Interner::with_carriers(carriers);
    for line in lines {
        let out = match line {
            Line::Failed(error) => Decoded::Failed(error),
            Line::Text {
                number,
                bytes,
                last,
            } => {
                let (text, repaired) = otlp_lines::line_text(bytes);
                let warnings: Vec<String> = repaired
                    .into_iter()
                    .map(|message| format!("line {number}: {message}"))
                    .collect();
                // As `otlp_lines::parse_line` trims it.
                let json = text.trim().trim_start_matches('\u{feff}');
                let fast = if keep_attributes || json.is_empty() {
                    None
                } else {
                    json_lines::decode_line(json, &mut interner)
                };
                let out = match fast {
                    Some(out) => batch(number, out, warnings),
                    None => decode_line(
                        path,
                        number,
                        &text,
                        last,
                        warnings,
                        &mut interner,
                        keep_attributes,
                    ),
                };
                // Full (the reader is behind) or gone: the buffer is freed instead.
                if text.capacity() > 0 {
                    let _ = spare.try_send(text.into_bytes());
                }
                out
            }
        };
        if decoded.send(out).is_err() {
            return;
        }
    }
}

/// One line through the general reader: parsed into a request, then decoded.
fn decode_line(
    path: &Path,
    number: usize,
    text: &str,
    last: bool,
    warnings: Vec<String>,
    interner: &mut Interner,
    keep_attributes: bool,
) -> Decoded {
    match otlp_lines::parse_line(path, number, text) {
        Ok(None) => Decoded::Batch {
            batch: None,
            warnings,
        },
        Ok(Some(mut request)) => {
            let out = decode::decode_request(&mut request, interner, keep_attributes);
            drop(request);
            batch(number, out, warnings)
        }
        Err(RecordingError::Parse { message, .. }) if last && otlp_lines::cut_short(text) => {
            Decoded::Torn(Torn {
                line: number,
                message,
            })
        }
        Err(error) => Decoded::Failed(error),
    }
}

/// A line's spans for the store, with a warning when some were skipped.
fn batch(number: usize, out: DecodedRequest, mut warnings: Vec<String>) -> Decoded {
    if out.rejected > 0 {
        warnings.push(format!(
            "line {number}: {} span(s) skipped: {}",
            out.rejected,
            out.first_error.unwrap_or_default()
        ));
    }
    Decoded::Batch {
        batch: Some(Batch {
            spans: out.spans,
            attributes: out.attributes,
            raw: None,
            received: None,
        }),
        warnings,
    }
}

/// The store's side: decoded lines taken round the decoders in turn (the order of the lines).
fn store_in_order(
    path: &Path,
    decoders: &[Receiver<Decoded>],
    store: &mut Store,
) -> Result<Option<Torn>, RecordingError> {
    let mut torn = None;
    for next in 0.. {
        // A decoder that has nothing more means the reader sent no further line.
        let Ok(decoded) = decoders[next % decoders.len()].recv() else {
            break;
        };
        match decoded {
            Decoded::Batch { batch, warnings } => {
                for warning in warnings {
                    crate::stderr_line!("warning: {}: {warning}", path.display());
                }
                if let Some(batch) = batch {
                    store.insert_batch(batch);
                }
            }
            Decoded::Torn(cut) => torn = Some(cut),
            Decoded::Failed(error) => return Err(error),
        }
    }
    Ok(torn)
}
