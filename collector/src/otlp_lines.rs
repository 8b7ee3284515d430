//! The recording format: OTLP/JSON lines, one `ExportTraceServiceRequest` a line, gzip or not.
//!
//! It is what `record` writes, what the screen's `e` appends a chain to, what `check --input`
//! and `replay` read, and what the OpenTelemetry Collector's file exporter writes. [`Reader`]
//! reads it a request at a time (gzip detected by its magic bytes, `-` for standard input,
//! invalid UTF-8 repaired as the receivers repair it); [`Writer`] writes whole lines, so a
//! stopped process leaves whole lines behind. Every failure is a [`RecordingError`] whose
//! message says what went wrong and where (file and line).

use std::fs::File;
use std::io::{self, Read, Write as _};
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

/// Bytes read from the file (and inflated from gzip) at a time, straight into the line being
/// read: what follows its end (half a read on average) is copied to the next line.
const READ_CHUNK: usize = 64 * 1024;

/// Reads a recording a request at a time.
pub struct Reader {
    /// The file, or its gzip stream inflated.
    source: Box<dyn Read + Send>,
    /// Bytes read past the end of the last line, from `spilled_at` on.
    spill: Vec<u8>,
    spilled_at: usize,
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
        let mut source: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).map_err(|source| RecordingError::Open {
                path: path.to_owned(),
                source,
            })?)
        };
        // The first bytes say whether it is gzip.
        let mut first = vec![0; READ_CHUNK];
        let mut filled = 0;
        while filled < 2 {
            match source.read(&mut first[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(RecordingError::Read {
                        path: path.to_owned(),
                        line: 0,
                        source,
                    });
                }
            }
        }
        first.truncate(filled);
        let (source, spill): (Box<dyn Read + Send>, Vec<u8>) = if first.starts_with(&[0x1f, 0x8b]) {
            let compressed = io::Cursor::new(first).chain(source);
            (
                Box::new(flate2::read::MultiGzDecoder::new(compressed)),
                Vec::new(),
            )
        } else {
            (source, first)
        };
        Ok(Reader {
            source,
            spill,
            spilled_at: 0,
            path: path.to_owned(),
            number: 0,
            bytes: Vec::new(),
            text: String::new(),
            last_length: 0,
            torn: None,
        })
    }

    /// Reads `bytes` (OTLP/JSON lines, not gzip) as a recording named `name` in messages: a
    /// source that made its lines in memory (`--jaeger`).
    pub fn from_bytes(name: PathBuf, bytes: Vec<u8>) -> Self {
        Reader {
            source: Box::new(io::Cursor::new(bytes)),
            spill: Vec::new(),
            spilled_at: 0,
            path: name,
            number: 0,
            bytes: Vec::new(),
            text: String::new(),
            last_length: 0,
            torn: None,
        }
    }

    /// The last line, when it was cut short and skipped (known once `next_request` gave `None`).
    pub fn torn(&self) -> Option<&Torn> {
        self.torn.as_ref()
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next line's bytes as read, blank or not, with its number (`None` at the end), in
    /// `buffer` (a line given back, to be used again: its contents do not matter): what a
    /// reader that parses lines elsewhere (`check --input`'s decoders) takes. The bytes are not
    /// checked: [`line_text`] makes them text, as [`Reader::next_request`] does. A line cut short
    /// is for the caller to recognise ([`cut_short`], and whether a line that is not blank
    /// follows).
    pub fn next_line(
        &mut self,
        mut buffer: Vec<u8>,
    ) -> Result<Option<(usize, Vec<u8>)>, RecordingError> {
        self.number += 1;
        // A line taken away leaves no buffer: the next one, likely as long, gets its room (and
        // a read's beyond) at once instead of through a series of doublings (each a copy).
        buffer.reserve((self.last_length + READ_CHUNK).saturating_sub(buffer.len()));
        let n = self
            .read_raw(&mut buffer)
            .map_err(|source| RecordingError::Read {
                path: self.path.clone(),
                line: self.number,
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.last_length = n;
        Ok(Some((self.number, buffer)))
    }

    /// Reads the next line, with its `\n` if it has one, into `out` (its contents and length
    /// replaced; what it held is written over, so a buffer used before costs nothing to fill),
    /// reading the file straight into it; returns its length, 0 at the end.
    fn read_raw(&mut self, out: &mut Vec<u8>) -> io::Result<usize> {
        let mut filled = 0;
        let rest = &self.spill[self.spilled_at..];
        if !rest.is_empty() {
            let (take, whole) = match memchr::memchr(b'\n', rest) {
                Some(end) => (end + 1, true),
                None => (rest.len(), false),
            };
            if out.len() < take {
                out.resize(take, 0);
            }
            out[..take].copy_from_slice(&rest[..take]);
            self.spilled_at += take;
            filled = take;
            if whole {
                out.truncate(filled);
                return Ok(filled);
            }
        }
        self.spill.clear();
        self.spilled_at = 0;
        loop {
            // Room for one read, written over where the buffer held bytes already (no zeroing).
            if out.len() < filled + READ_CHUNK {
                out.resize(filled + READ_CHUNK, 0);
            }
            let n = match self.source.read(&mut out[filled..filled + READ_CHUNK]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    out.truncate(filled);
                    return Err(e);
                }
            };
            if n == 0 {
                out.truncate(filled);
                return Ok(filled);
            }
            let read = filled..filled + n;
            filled += n;
            if let Some(at) = memchr::memchr(b'\n', &out[read.clone()]) {
                let end = read.start + at + 1;
                self.spill.extend_from_slice(&out[end..filled]);
                out.truncate(end);
                return Ok(end);
            }
        }
    }

    /// Reads the next line into `self.text` and counts it; `false` at the end. A line that is
    /// not valid UTF-8 is repaired (U+FFFD for the bad bytes) and `repaired` told its number
    /// and what was repaired.
    fn read_line(&mut self, mut repaired: impl FnMut(usize, &str)) -> Result<bool, RecordingError> {
        // The buffer of the line before, whichever of the two holds it.
        let buffer = if self.bytes.capacity() < self.text.capacity() {
            std::mem::take(&mut self.text).into_bytes()
        } else {
            std::mem::take(&mut self.bytes)
        };
        let Some((number, bytes)) = self.next_line(buffer)? else {
            return Ok(false);
        };
        let (text, repairs) = line_text(bytes);
        self.text = text;
        if let Some(message) = repairs {
            repaired(number, &message);
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
        let mut bytes = std::mem::take(&mut self.bytes);
        loop {
            let n = self
                .read_raw(&mut bytes)
                .map_err(|source| RecordingError::Read {
                    path: self.path.clone(),
                    line,
                    source,
                })?;
            if n == 0 {
                return Ok(true);
            }
            if !bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(false);
            }
        }
    }
}

/// A line's bytes as text: valid UTF-8 (nearly always) becomes the text without a copy;
/// else it is repaired (U+FFFD for the bad bytes, as the receivers repair it), with what was
/// repaired.
pub fn line_text(bytes: Vec<u8>) -> (String, Option<String>) {
    match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(invalid) => {
            let (text, repairs) = ingest::decode::utf8::repair_json(invalid.as_bytes());
            (
                String::from_utf8_lossy(&text).into_owned(),
                repairs.message(),
            )
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
    ingest::decode::otlp_json::parse_request_str(json)
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

    #[test]
    fn lines_longer_than_a_read_come_whole_into_buffers_used_before_gzip_or_not() {
        // Lines of every length around a read's, blank ones, and a last one without its newline.
        let lines: Vec<String> = [
            0,
            1,
            READ_CHUNK - 1,
            READ_CHUNK,
            3 * READ_CHUNK + 7,
            5,
            0,
            9,
        ]
        .iter()
        .enumerate()
        .map(|(i, &n)| "x".repeat(n) + &i.to_string())
        .collect();
        let text = lines.join("\n");
        let plain = std::env::temp_dir().join(format!(
            "budget-top-recording-{}-long.jsonl",
            std::process::id()
        ));
        let gzip = plain.with_extension("jsonl.gz");
        std::fs::write(&plain, &text).unwrap();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gzip, encoder.finish().unwrap()).unwrap();
        for path in [&plain, &gzip] {
            let mut reader = Reader::open(path).unwrap();
            // A buffer given back holds the line before (longer or shorter): written over.
            let mut buffer = b"left over from a line before".repeat(10_000);
            let mut read = Vec::new();
            while let Some((number, bytes)) = reader.next_line(buffer).unwrap() {
                assert_eq!(number, read.len() + 1);
                read.push(String::from_utf8(bytes.clone()).unwrap());
                buffer = bytes;
            }
            let expected: Vec<String> = lines
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    if i + 1 < lines.len() {
                        format!("{l}\n")
                    } else {
                        l.clone()
                    }
                })
                .collect();
            assert!(read == expected, "{}", path.display());
        }
        let _ = std::fs::remove_file(&plain);
        let _ = std::fs::remove_file(&gzip);
    }

    #[test]
    fn a_line_not_utf8_is_repaired_and_told() {
        let (text, repaired) = line_text(b"{\"a\":\"x\xffy\"}\n".to_vec());
        assert_eq!(text, "{\"a\":\"x\u{fffd}y\"}\n");
        assert!(repaired.is_some_and(|m| m.contains("not valid UTF-8")));
        assert_eq!(line_text(b"{}".to_vec()), ("{}".to_owned(), None));
    }
}
