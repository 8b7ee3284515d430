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

/// Reads a recording a request at a time.
pub struct Reader {
    lines: Box<dyn BufRead + Send>,
    path: PathBuf,
    number: usize,
    bytes: Vec<u8>,
    text: String,
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
        let mut reader = BufReader::new(source);
        let magic = reader.fill_buf().map_err(|source| RecordingError::Read {
            path: path.to_owned(),
            line: 0,
            source,
        })?;
        let lines: Box<dyn BufRead + Send> = if magic.starts_with(&[0x1f, 0x8b]) {
            let decoder = flate2::bufread::MultiGzDecoder::new(reader);
            Box::new(BufReader::new(decoder))
        } else {
            Box::new(reader)
        };
        Ok(Reader {
            lines,
            path: path.to_owned(),
            number: 0,
            bytes: Vec::new(),
            text: String::new(),
        })
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next request, skipping blank lines; `None` at the end. A line that was not valid
    /// UTF-8 is kept with U+FFFD in place of the bad bytes (the receivers' rule), and
    /// `repaired` is told its number and what was repaired before the line is parsed.
    pub fn next_request(
        &mut self,
        mut repaired: impl FnMut(usize, &str),
    ) -> Result<Option<Request>, RecordingError> {
        loop {
            self.number += 1;
            self.bytes.clear();
            self.text.clear();
            let n = self
                .lines
                .read_until(b'\n', &mut self.bytes)
                .map_err(|source| RecordingError::Read {
                    path: self.path.clone(),
                    line: self.number,
                    source,
                })?;
            if n == 0 {
                return Ok(None);
            }
            let (text, repairs) = ingest::utf8::repair_json(&self.bytes);
            self.text.push_str(&String::from_utf8_lossy(&text));
            if let Some(message) = repairs.message() {
                repaired(self.number, &message);
            }
            if let Some(request) = parse_line(&self.path, self.number, &self.text)? {
                return Ok(Some(Request {
                    line: self.number,
                    request,
                }));
            }
        }
    }
}

/// Parses one line of a recording (line `number` of `path`, for the error); `None` for a blank
/// line.
pub fn parse_line(
    path: &Path,
    number: usize,
    line: &str,
) -> Result<Option<ExportTraceServiceRequest>, RecordingError> {
    // A byte-order mark (some Windows editors write one) is not JSON, and says nothing.
    let line = line.trim().trim_start_matches('\u{feff}');
    if line.is_empty() {
        return Ok(None);
    }
    ingest::json::parse_request(line.as_bytes())
        .map(Some)
        .map_err(|e| RecordingError::Parse {
            path: path.to_owned(),
            line: number,
            message: e.to_string(),
        })
}

/// Writes a recording a request at a time, each as one line written at once.
#[derive(Debug)]
pub struct Writer {
    file: File,
    path: PathBuf,
    line: Vec<u8>,
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
        // One write per line: a stopped process leaves whole lines behind.
        self.file
            .write_all(&self.line)
            .map_err(|source| RecordingError::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// Flushes what was written to the disk.
    pub fn sync(&self) -> Result<(), RecordingError> {
        self.file
            .sync_all()
            .map_err(|source| RecordingError::Write {
                path: self.path.clone(),
                source,
            })
    }
}
