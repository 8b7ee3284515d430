//! The recording format: OTLP/JSON lines, one `ExportTraceServiceRequest` a line, gzip or not.
//!
//! It is what `record` writes, what the screen's `e` appends a chain to, what `check --input`
//! and `replay` read, and what the OpenTelemetry Collector's file exporter writes. [`Reader`]
//! reads it a request at a time (gzip detected by its magic bytes, `-` for standard input,
//! invalid UTF-8 repaired as the receivers repair it); [`Writer`] writes whole lines, so a
//! stopped process leaves whole lines behind. Every failure is a [`RecordingError`] whose
//! message says what went wrong and where (file and line).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write as _};
use std::path::{Path, PathBuf};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use crate::ingest;

/// What went wrong reading or writing a recording, and where.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be opened for reading.
    #[error("{}: cannot open: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A line could not be read (an I/O error, or a broken gzip stream).
    #[error("{}: {}cannot read: {source}", path.display(), at_line(*line))]
    Read {
        /// The file.
        path: PathBuf,
        /// The line being read (0: before the first).
        line: usize,
        /// Why.
        source: io::Error,
    },
    /// A line is not an OTLP/JSON export request.
    #[error("{}: line {line}: invalid OTLP/JSON ExportTraceServiceRequest: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// What the JSON reader said, naming the field.
        message: String,
    },
    /// The file could not be created or opened for writing.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A request could not be encoded as OTLP/JSON.
    #[error("cannot encode a request as OTLP/JSON: {0}")]
    Encode(#[source] serde_json::Error),
    /// A line could not be written (or the file flushed).
    #[error("cannot write to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!("line {line}: ")
    }
}

/// Bytes read from the file (and inflated from gzip) at a time.
const READ_BUFFER: usize = 256 * 1024;

/// Reads a recording a request at a time.
pub struct Reader {
    lines: Box<dyn BufRead + Send>,
    path: PathBuf,
    number: usize,
    bytes: Vec<u8>,
    text: String,
    /// The length of the line read last (bytes).
    last_length: usize,
    torn: Option<Torn>,
}

/// A last line cut short (a recorder killed mid-write, a file still being written): skipped,
/// not a failure (`CONVENTIONS.md` section 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torn {
    /// Its line (from 1).
    pub line: usize,
    /// What the JSON reader said.
    pub message: String,
}

impl Torn {
    /// The warning for stderr: "FILE: line N: cut short (…); skipped".
    pub fn warning(&self, path: &Path) -> String {
        format!(
            "{}: line {}: the last line is cut short ({}); skipped, everything before it is read",
            path.display(),
            self.line,
            self.message
        )
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("line", &self.number)
            .finish_non_exhaustive()
    }
}

/// One request of a recording.
#[derive(Debug)]
pub struct Request {
    /// Its line (from 1).
    pub line: usize,
    /// The request.
    pub request: ExportTraceServiceRequest,
}

impl Reader {
    /// Opens a recording, gzip-compressed or not; `-` is standard input.
    pub fn open(path: &Path) -> Result<Self, RecordingError> {
        let source: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).map_err(|source| RecordingError::Open {
                path: path.to_owned(),
                source,
            })?)
        };
        // Large reads: a recording is read whole, often hundreds of megabytes.
        let mut reader = BufReader::with_capacity(READ_BUFFER, source);
        let magic = reader.fill_buf().map_err(|source| RecordingError::Read {
            path: path.to_owned(),
            line: 0,
            source,
        })?;
        let lines: Box<dyn BufRead + Send> = if magic.starts_with(&[0x1f, 0x8b]) {
            let decoder = flate2::bufread::MultiGzDecoder::new(reader);
            Box::new(BufReader::with_capacity(READ_BUFFER, decoder))
        } else {
            Box::new(reader)
        };
        Ok(Reader {
            lines,
            path: path.to_owned(),
            number: 0,
            bytes: Vec::new(),
            text: String::new(),
            last_length: 0,
            torn: None,
        })
    }

    /// The last line, when it was cut short and skipped (known once `next_request` gave `None`).
    pub fn torn(&self) -> Option<&Torn> {
        self.torn.as_ref()
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next line as text, blank or not (`None` at the end), with its number: what a reader
    /// that parses lines elsewhere (`check --input`'s decoders) takes. Invalid UTF-8 is
    /// repaired and told as [`Reader::next_request`] tells it. A line cut short is for the
    /// caller to recognise ([`cut_short`], and whether a line that is not blank follows).
    pub fn next_text(
        &mut self,
        repaired: impl FnMut(usize, &str),
    ) -> Result<Option<(usize, String)>, RecordingError> {
        if !self.read_line(repaired)? {
            return Ok(None);
        }
        Ok(Some((self.number, std::mem::take(&mut self.text))))
    }

    /// Reads the next line into `self.text` and counts it; `false` at the end. A line that is
    /// not valid UTF-8 is repaired (U+FFFD for the bad bytes) and `repaired` told its number
    /// and what was repaired.
    fn read_line(&mut self, mut repaired: impl FnMut(usize, &str)) -> Result<bool, RecordingError> {
        self.number += 1;
        // The buffer of the line before, whichever of the two holds it.
        if self.bytes.capacity() < self.text.capacity() {
            self.bytes = std::mem::take(&mut self.text).into_bytes();
        }
        self.bytes.clear();
        self.text.clear();
        // A line taken away (`next_text`) leaves no buffer: the next one, likely as long, gets
        // its room at once instead of through a series of doublings (each a copy).
        self.bytes.reserve(self.last_length);
        let n = self
            .lines
            .read_until(b'\n', &mut self.bytes)
            .map_err(|source| RecordingError::Read {
                path: self.path.clone(),
                line: self.number,
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.last_length = n;
        // Checked once: valid UTF-8 (nearly always) becomes the text without a copy.
        match String::from_utf8(std::mem::take(&mut self.bytes)) {
            Ok(text) => self.text = text,
            Err(invalid) => {
                self.bytes = invalid.into_bytes();
                let (text, repairs) = ingest::utf8::repair_json(&self.bytes);
                self.text.push_str(&String::from_utf8_lossy(&text));
                if let Some(message) = repairs.message() {
                    repaired(self.number, &message);
                }
            }
        }
        Ok(true)
    }

    /// The next request, skipping blank lines; `None` at the end. A line that was not valid
    /// UTF-8 is kept with U+FFFD in place of the bad bytes (the receivers' rule), and
    /// `repaired` is told its number and what was repaired before the line is parsed.
    pub fn next_request(
        &mut self,
        mut repaired: impl FnMut(usize, &str),
    ) -> Result<Option<Request>, RecordingError> {
        loop {
            if !self.read_line(&mut repaired)? {
                return Ok(None);
            }
            match parse_line(&self.path, self.number, &self.text) {
                Ok(Some(request)) => {
                    return Ok(Some(Request {
                        line: self.number,
                        request,
                    }));
                }
                Ok(None) => {}
                Err(RecordingError::Parse { message, .. })
                    if cut_short(&self.text) && self.rest_is_blank()? =>
                {
                    self.torn = Some(Torn {
                        line: self.number,
                        message,
                    });
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether nothing but blank lines follows (reads them).
    fn rest_is_blank(&mut self) -> Result<bool, RecordingError> {
        let line = self.number;
        loop {
            self.bytes.clear();
            let n = self
                .lines
                .read_until(b'\n', &mut self.bytes)
                .map_err(|source| RecordingError::Read {
                    path: self.path.clone(),
                    line,
                    source,
                })?;
            if n == 0 {
                return Ok(true);
            }
            if !self.bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(false);
            }
        }
    }
}

/// Whether `line` is the beginning of a JSON value that ended too early: what a writer stopped
/// mid-line leaves behind (as opposed to a line that is wrong).
pub fn cut_short(line: &str) -> bool {
    let line = line.trim().trim_start_matches('\u{feff}');
    serde_json::from_str::<serde::de::IgnoredAny>(line).is_err_and(|e| e.is_eof())
}

/// Parses one line of a recording (line `number` of `path`, for the error); `None` for a blank
/// line.
pub fn parse_line(
    path: &Path,
    number: usize,
    line: &str,
) -> Result<Option<ExportTraceServiceRequest>, RecordingError> {
    // A byte-order mark (some Windows editors write one) is not JSON, and says nothing.
    let json = line.trim().trim_start_matches('\u{feff}');
    if json.is_empty() {
        return Ok(None);
    }
    ingest::json::parse_request_str(json)
        .map(Some)
        .map_err(|e| {
            // The column in the file's line, counted in characters from 1.
            let skipped = line.len() - line.trim_start().trim_start_matches('\u{feff}').len();
            let column = e
                .offset
                .and_then(|at| line.get(..skipped + at))
                .map(|before| before.chars().count() + 1);
            RecordingError::Parse {
                path: path.to_owned(),
                line: number,
                message: match column {
                    Some(column) => format!("{e} (column {column})"),
                    None => e.to_string(),
                },
            }
        })
}

/// Writes a recording a request at a time, each as one line written at once. A file whose name
/// ends in `.gz` is written gzip-compressed (as [`Reader`] reads it), each line flushed so that
/// what was written can be read back while the recording goes on.
#[derive(Debug)]
pub struct Writer {
    file: Output,
    path: PathBuf,
    line: Vec<u8>,
}

#[derive(Debug)]
enum Output {
    Plain(File),
    Gzip(flate2::write::GzEncoder<File>),
}

impl Writer {
    /// A new recording at `path` (an existing file is emptied).
    pub fn create(path: &Path) -> Result<Self, RecordingError> {
        let file = File::create(path).map_err(|source| RecordingError::Create {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self::on(file, path))
    }

    /// Adds to the recording at `path` (created when missing).
    pub fn append(path: &Path) -> Result<Self, RecordingError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| RecordingError::Create {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self::on(file, path))
    }

    fn on(file: File, path: &Path) -> Self {
        // A second gzip member when appending: MultiGzDecoder reads them one after another.
        let gzip = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
        let file = if gzip {
            Output::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            ))
        } else {
            Output::Plain(file)
        };
        Writer {
            file,
            path: path.to_owned(),
            line: Vec::new(),
        }
    }

    /// Writes `request` as one line.
    pub fn write(&mut self, request: &ExportTraceServiceRequest) -> Result<(), RecordingError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, request).map_err(RecordingError::Encode)?;
        self.line.push(b'\n');
        // One write per line: a stopped process leaves whole lines behind (gzip: flushed to a
        // byte boundary, so they can be read back).
        match &mut self.file {
            Output::Plain(file) => file.write_all(&self.line),
            Output::Gzip(gzip) => gzip.write_all(&self.line).and_then(|()| gzip.flush()),
        }
        .map_err(|source| RecordingError::Write {
            path: self.path.clone(),
            source,
        })
    }

    /// Flushes what was written to the disk; a gzip file gets its end (nothing may be written
    /// after).
    pub fn sync(&mut self) -> Result<(), RecordingError> {
        match &mut self.file {
            Output::Plain(file) => file.sync_all(),
            Output::Gzip(gzip) => gzip.try_finish().and_then(|()| gzip.get_ref().sync_all()),
        }
        .map_err(|source| RecordingError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: &str = r#"{"resourceSpans":[]}"#;

    /// Reads every request of `text` (written to a file of its own); the lines read, the torn
    /// line if any, or the error.
    fn read(name: &str, text: &str) -> Result<(Vec<usize>, Option<Torn>), RecordingError> {
        let path = std::env::temp_dir().join(format!(
            "budget-top-recording-{}-{name}.jsonl",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        let mut reader = Reader::open(&path).unwrap();
        let mut lines = Vec::new();
        let result = loop {
            match reader.next_request(|_, _| {}) {
                Ok(Some(r)) => lines.push(r.line),
                Ok(None) => break Ok((lines, reader.torn().cloned())),
                Err(e) => break Err(e),
            }
        };
        let _ = std::fs::remove_file(&path);
        result
    }

    #[test]
    fn a_last_line_cut_short_is_skipped_and_told() {
        let cut = &WHOLE[..12];
        let (lines, torn) = read("end", &format!("{WHOLE}\n{WHOLE}\n{cut}")).unwrap();
        assert_eq!(lines, vec![1, 2]);
        let torn = torn.unwrap();
        assert_eq!(torn.line, 3);
        assert!(
            torn.warning(Path::new("f.jsonl"))
                .starts_with("f.jsonl: line 3: the last line is cut short"),
            "{torn:?}"
        );
        // Blank lines after it change nothing; a whole last line without its newline is whole.
        let (lines, torn) = read("blank", &format!("{WHOLE}\n{cut}\n\n  \n")).unwrap();
        assert_eq!((lines, torn.map(|t| t.line)), (vec![1], Some(2)));
        let (lines, torn) = read("whole", &format!("{WHOLE}\n{WHOLE}")).unwrap();
        assert_eq!((lines, torn), (vec![1, 2], None));
    }

    #[test]
    fn a_line_cut_short_in_the_middle_or_a_wrong_last_line_still_fails_naming_it() {
        let cut = &WHOLE[..12];
        let err = read("middle", &format!("{WHOLE}\n{cut}\n{WHOLE}\n")).unwrap_err();
        assert!(
            matches!(err, RecordingError::Parse { line: 2, .. }),
            "{err}"
        );
        // Not a beginning of JSON cut short: wrong, not torn.
        let err = read("wrong", &format!("{WHOLE}\n{{\"resourceSpans\": [oops")).unwrap_err();
        assert!(
            matches!(err, RecordingError::Parse { line: 2, .. }),
            "{err}"
        );
        // Whole JSON that is not a request: wrong too.
        let err = read("not a request", &format!("{WHOLE}\n[1, 2]")).unwrap_err();
        assert!(
            matches!(err, RecordingError::Parse { line: 2, .. }),
            "{err}"
        );
    }
}
