//! `check --jaeger URL` and `replay --jaeger URL`: the traces a team already keeps in Jaeger,
//! read from its query API v3 (`/api/v3/services`, `/api/v3/traces?query.…`,
//! `/api/v3/traces/{id}`), which answers OTLP JSON.
//!
//! A source beside `--input`: [`fetch`] asks Jaeger (each service's search in the window, at
//! most `--limit` traces each, or the traces named by id), reads every trace once however many
//! services' searches bring it back (by trace id), leaves out the spans that started before the
//! window (a chain so cut is judged as partial, and counted), and yields one OTLP/JSON line a
//! trace, oldest first: a recording in memory ([`Fetched::reader`]), which `check` and `replay`
//! read as they read a file. Nothing downstream knows where the lines came from. Jaeger's own
//! adjustments (its clock-skew correction, its span id dedupe) are turned off
//! (`raw_traces=true`): budget-top corrects clocks itself, from the budgets.
//!
//! - [`client`]: the GETs (plain or TLS, a bearer token);
//! - [`answer`]: an answer's body cut into one line a trace.

pub mod answer;
pub mod client;

use std::collections::HashSet;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use deadline_budget::analysis::TraceId;
use serde::Serialize;

use crate::otlp_lines::Reader;
use crate::view_model::format::{count, counted};
pub use client::Base;
use client::Client;

/// `--limit`'s default: traces read per service.
pub const DEFAULT_LIMIT: usize = 1_000;
/// `--since`'s default.
pub const DEFAULT_SINCE: Duration = Duration::from_secs(3600);

/// What went wrong reading from Jaeger, in a sentence that names the URL.
#[derive(Debug, thiserror::Error)]
pub enum JaegerError {
    /// No connection, or it broke.
    #[error(
        "cannot reach Jaeger: GET {url}: {reason} (--jaeger takes the address of Jaeger's query API, its HTTP port, 16686 by default)"
    )]
    Unreachable {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// The TLS handshake failed.
    #[error(
        "GET {url}: the TLS handshake failed: {reason} (a certificate signed by a CA of your own: give it with --jaeger-ca)"
    )]
    Tls {
        /// The URL asked.
        url: String,
        /// Why.
        reason: String,
    },
    /// No answer in time.
    #[error("GET {url}: no answer within {}s (a search of fewer traces, --limit, or a shorter window answers sooner)", client::ANSWER_TIMEOUT.as_secs())]
    Timeout {
        /// The URL asked.
        url: String,
    },
    /// A 4xx or 5xx answer.
    #[error("GET {url} answered {status}: {message}{hint}")]
    Status {
        /// The URL asked.
        url: String,
        /// Its status.
        status: http::StatusCode,
        /// What its body said.
        message: String,
        /// What to do, when it is clear.
        hint: &'static str,
    },
    /// An answer that is not OTLP JSON.
    #[error(
        "GET {url} did not answer OTLP JSON ({reason}): is --jaeger the address of Jaeger's query API (Jaeger v2, or v1.5x and later, answer /api/v3)?"
    )]
    NotOtlp {
        /// The URL asked.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// A trace asked for by id that Jaeger does not have.
    #[error("trace {trace} is not in Jaeger: GET {url} answered 404 ({message})")]
    TraceNotFound {
        /// The trace id.
        trace: TraceId,
        /// The URL asked.
        url: String,
        /// What Jaeger said.
        message: String,
    },
}

/// What to read.
#[derive(Clone, Debug)]
pub enum Ask {
    /// Each service's traces whose spans started in the window, at most `limit` each.
    Search {
        /// The services (`--service`); empty: every service Jaeger lists.
        services: Vec<String>,
        /// The window, Unix ns: `--since`, or `--from`/`--to`.
        from_unix_nano: u64,
        to_unix_nano: u64,
        /// `--limit`.
        limit: usize,
    },
    /// These traces (`--trace-id`), whole.
    Traces(Vec<TraceId>),
}

/// The command line's `--jaeger …` flags, checked: where, what, and how to get in.
#[derive(Clone, Debug)]
pub struct Query {
    /// `--jaeger`.
    pub base: Base,
    /// What to read.
    pub ask: Ask,
    /// `--jaeger-token-file`.
    pub token_file: Option<PathBuf>,
    /// `--jaeger-ca`.
    pub ca: Option<PathBuf>,
}

/// What was asked and what came back: the summary line on stderr, and the report's `source`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// The query API (`--jaeger`).
    pub jaeger: String,
    /// The services searched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
    /// Whether they are every service Jaeger listed (no `--service`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub every_service: bool,
    /// The window, RFC 3339 (a search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// `--limit` (a search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The traces asked for by id.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace_ids: Vec<TraceId>,
    /// Traces read (each once), and their spans kept.
    pub traces: u64,
    pub spans: u64,
    /// Traces the searches answered in all (at most `--limit` each), counting each time a
    /// trace came back.
    pub traces_answered: u64,
    /// The services whose search Jaeger cut at `--limit` (it had more): their older traces in
    /// the window were not read.
    pub cut_at_limit: Vec<String>,
    /// Chains with spans that started before the window, left out: judged as partial.
    pub chains_cut_by_window: u64,
    /// The spans so left out.
    pub spans_before_window: u64,
    /// How long the reading took.
    pub seconds: f64,
}

impl Summary {
    /// The line for stderr: what was asked, what came back, what Jaeger cut (the services'
    /// names, which Jaeger sent, made safe to print).
    pub fn line(&self) -> String {
        let names = |list: &[String]| {
            list.iter()
                .map(|s| crate::span_text::for_report(s))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let asked = if self.trace_ids.is_empty() {
            let services = if self.every_service {
                format!(
                    "{} (every service it lists)",
                    counted(self.services.len() as u64, "service")
                )
            } else {
                names(&self.services)
            };
            format!(
                "{services} from {} to {}, at most {} traces each",
                self.from.as_deref().unwrap_or("?"),
                self.to.as_deref().unwrap_or("?"),
                count(self.limit.unwrap_or(0) as u64)
            )
        } else {
            counted(self.trace_ids.len() as u64, "trace")
        };
        let took = if self.seconds < 1.0 {
            format!("{:.0} ms", self.seconds * 1000.0)
        } else {
            format!("{:.1} s", self.seconds)
        };
        let mut line = format!(
            "jaeger {}: asked {asked}; read {} ({}) in {took}",
            self.jaeger,
            counted(self.traces, "trace"),
            counted(self.spans, "span"),
        );
        if self.traces_answered > self.traces {
            line.push_str(&format!(
                ", {} more answered by another service's search, read once",
                count(self.traces_answered - self.traces)
            ));
        }
        if self.cut_at_limit.is_empty() {
            if self.trace_ids.is_empty() {
                line.push_str("; no search reached --limit");
            }
        } else {
            line.push_str(&format!(
                "; Jaeger cut the search at --limit {} for {}: their older traces in the window were not read (raise --limit or narrow the window)",
                count(self.limit.unwrap_or(0) as u64),
                names(&self.cut_at_limit)
            ));
        }
        if self.chains_cut_by_window > 0 {
            line.push_str(&format!(
                "; {} began before the window: their {} before it are left out, and they are judged as partial",
                counted(self.chains_cut_by_window, "chain"),
                counted(self.spans_before_window, "span")
            ));
        }
        line
    }
}

/// What [`fetch`] read: one OTLP/JSON line a trace, oldest first, and the summary.
#[derive(Debug)]
pub struct Fetched {
    lines: Vec<u8>,
    /// Where each line came from (by line, from 1): its trace and the URL that answered it.
    origins: Vec<(String, String)>,
    /// What was asked and what came back.
    pub summary: Summary,
}

impl Fetched {
    /// The lines as a recording read from memory: what `check` and `replay` read.
    pub fn reader(&mut self) -> Reader {
        let name = PathBuf::from(format!("jaeger {}", self.summary.jaeger));
        Reader::from_bytes(name, std::mem::take(&mut self.lines))
    }

    /// Where line `line` (from 1) came from, for an error about it: "trace T, from GET URL".
    pub fn origin(&self, line: usize) -> Option<String> {
        let (trace, url) = self.origins.get(line.checked_sub(1)?)?;
        Some(format!("trace {trace}, answered by GET {url}"))
    }
}

/// Progress on stderr, when it is a terminal: services done, traces read, spans.
struct Progress {
    on: bool,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    fn show(&mut self, text: &str) {
        if self.on {
            let mut stderr = std::io::stderr().lock();
            // Back to the line's start, the line cleared: one line rewritten in place.
            let _ = write!(stderr, "\r\x1b[2K{text}");
            let _ = stderr.flush();
            self.shown = true;
        }
    }

    fn clear(&mut self) {
        if self.shown {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
            self.shown = false;
        }
    }
}

/// Reads what `query` asks for from Jaeger: see the module doc.
pub async fn fetch(query: &Query) -> anyhow::Result<Fetched> {
    let started = Instant::now();
    let mut client = Client::new(
        query.base.clone(),
        query.token_file.as_deref(),
        query.ca.as_deref(),
    )?;
    let mut progress = Progress::new();
    let mut summary = Summary {
        jaeger: query.base.url.clone(),
        ..Summary::default()
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut traces: Vec<(answer::Trace, String)> = Vec::new();
    let result = match &query.ask {
        Ask::Search {
            services,
            from_unix_nano,
            to_unix_nano,
            limit,
        } => {
            summary.from = Some(rfc3339(*from_unix_nano));
            summary.to = Some(rfc3339(*to_unix_nano));
            summary.limit = Some(*limit);
            summary.every_service = services.is_empty();
            summary.services = if services.is_empty() {
                list_services(&mut client).await?
            } else {
                services.clone()
            };
            search(
                &mut client,
                &mut summary,
                (*from_unix_nano, *to_unix_nano, *limit),
                &mut seen,
                &mut traces,
                &mut progress,
            )
            .await
        }
        Ask::Traces(ids) => {
            summary.trace_ids = ids.clone();
            by_id(
                &mut client,
                ids,
                &mut seen,
                &mut traces,
                &mut summary,
                &mut progress,
            )
            .await
        }
    };
    progress.clear();
    result?;
    // Oldest first, as a recording has them (and as replay paces them).
    traces.sort_by(|(a, _), (b, _)| {
        a.start_unix_nano
            .cmp(&b.start_unix_nano)
            .then(a.id.cmp(&b.id))
    });
    let mut lines = Vec::with_capacity(traces.iter().map(|(t, _)| t.line.len() + 1).sum());
    let mut origins = Vec::with_capacity(traces.len());
    for (trace, url) in traces {
        lines.extend_from_slice(&trace.line);
        lines.push(b'\n');
        origins.push((trace.id, url));
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(Fetched {
        lines,
        origins,
        summary,
    })
}

/// `GET /api/v3/services`.
async fn list_services(client: &mut Client) -> Result<Vec<String>, JaegerError> {
    #[derive(serde::Deserialize)]
    struct Services {
        #[serde(default)]
        services: Vec<String>,
    }
    let path = "/api/v3/services";
    let answer = client.get(path).await?;
    let url = client.url(path);
    if !answer.status.is_success() {
        return Err(status_error(url, &answer));
    }
    let listed: Services =
        serde_json::from_slice(&answer.body).map_err(|e| JaegerError::NotOtlp {
            url,
            reason: format!("not the list of services: {e}"),
        })?;
    let mut services = listed.services;
    services.sort();
    services.dedup();
    Ok(services)
}

/// Each service's search, its traces read once. Jaeger is asked for one trace more than
/// `--limit`: when it has that many, the search was cut, and the oldest is left out.
async fn search(
    client: &mut Client,
    summary: &mut Summary,
    (from, to, limit): (u64, u64, usize),
    seen: &mut HashSet<String>,
    traces: &mut Vec<(answer::Trace, String)>,
    progress: &mut Progress,
) -> Result<(), JaegerError> {
    let services = summary.services.clone();
    for (done, service) in services.iter().enumerate() {
        progress.show(&format!(
            "jaeger: {} of {} services, {} traces, {} spans; searching {service}",
            done,
            services.len(),
            count(summary.traces),
            count(summary.spans)
        ));
        let path = |n: usize| {
            format!(
                "/api/v3/traces?query.service_name={}&query.start_time_min={}&query.start_time_max={}&query.num_traces={n}&query.raw_traces=true",
                query_value(service),
                query_value(&rfc3339(from)),
                query_value(&rfc3339(to)),
            )
        };
        let (mut url, mut answer) = (
            client.url(&path(limit + 1)),
            client.get(&path(limit + 1)).await?,
        );
        let mut asked = limit + 1;
        // A store that holds at most --limit traces refuses a search one deeper: ask again for
        // --limit, and a full answer is then taken as cut.
        if answer.status.is_server_error() {
            url = client.url(&path(limit));
            answer = client.get(&path(limit)).await?;
            asked = limit;
        }
        let mut read = match read_answer(&url, &answer, Some(from)) {
            Ok(read) => read,
            // A search that found nothing is answered 404 "No traces found".
            Err(JaegerError::Status { status, .. }) if status == http::StatusCode::NOT_FOUND => {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        let cut = if asked > limit {
            read.len() > limit
        } else {
            read.len() >= limit
        };
        if cut {
            summary.cut_at_limit.push(service.clone());
        }
        if read.len() > limit {
            // The newest --limit, as Jaeger answers a search.
            read.sort_by(|a, b| {
                b.start_unix_nano
                    .cmp(&a.start_unix_nano)
                    .then(a.id.cmp(&b.id))
            });
            read.truncate(limit);
        }
        summary.traces_answered += read.len() as u64;
        read.retain(|t| seen.insert(t.id.clone()));
        take(read, &url, summary, traces);
    }
    Ok(())
}

/// Each trace asked for by id; one that Jaeger does not have is an error.
async fn by_id(
    client: &mut Client,
    ids: &[TraceId],
    seen: &mut HashSet<String>,
    traces: &mut Vec<(answer::Trace, String)>,
    summary: &mut Summary,
    progress: &mut Progress,
) -> Result<(), JaegerError> {
    for (done, id) in ids.iter().enumerate() {
        progress.show(&format!(
            "jaeger: {done} of {} traces, {} spans",
            ids.len(),
            count(summary.spans)
        ));
        let path = format!("/api/v3/traces/{id}?raw_traces=true");
        let url = client.url(&path);
        let answer = client.get(&path).await?;
        let mut read = match read_answer(&url, &answer, None) {
            Err(JaegerError::Status {
                status, message, ..
            }) if status == http::StatusCode::NOT_FOUND => {
                return Err(JaegerError::TraceNotFound {
                    trace: *id,
                    url,
                    message,
                });
            }
            other => other?,
        };
        summary.traces_answered += read.len() as u64;
        read.retain(|t| seen.insert(t.id.clone()));
        take(read, &url, summary, traces);
    }
    Ok(())
}

/// The traces read from one answer, counted into the summary.
fn take(
    read: Vec<answer::Trace>,
    url: &str,
    summary: &mut Summary,
    traces: &mut Vec<(answer::Trace, String)>,
) {
    for trace in read {
        if trace.spans_before > 0 {
            summary.chains_cut_by_window += 1;
            summary.spans_before_window += trace.spans_before;
        }
        if trace.spans == 0 {
            continue;
        }
        summary.traces += 1;
        summary.spans += trace.spans;
        traces.push((trace, url.to_owned()));
    }
}

/// An answer's traces, or the error its status or body says.
fn read_answer(
    url: &str,
    answer: &client::Answer,
    window_start: Option<u64>,
) -> Result<Vec<answer::Trace>, JaegerError> {
    if !answer.status.is_success() {
        return Err(status_error(url.to_owned(), answer));
    }
    answer::traces(&answer.body, window_start).map_err(|refusal| match refusal {
        answer::Refusal::NotOtlp(reason) => JaegerError::NotOtlp {
            url: url.to_owned(),
            reason,
        },
        answer::Refusal::Error(message) => JaegerError::Status {
            url: url.to_owned(),
            status: answer.status,
            message,
            hint: "",
        },
    })
}

/// A 4xx or 5xx answer as an error: Jaeger's own message when its body is its error object,
/// else the body's first line.
fn status_error(url: String, answer: &client::Answer) -> JaegerError {
    #[derive(serde::Deserialize)]
    struct Body {
        error: Details,
    }
    #[derive(serde::Deserialize)]
    struct Details {
        #[serde(default)]
        message: String,
    }
    let message = match serde_json::from_slice::<Body>(&answer.body) {
        Ok(body) => body.error.message,
        Err(_) => {
            let text = String::from_utf8_lossy(&answer.body);
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim();
            let clean: String = first
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect();
            if clean.is_empty() {
                answer
                    .status
                    .canonical_reason()
                    .unwrap_or("no reason given")
                    .to_owned()
            } else {
                clean
            }
        }
    };
    let hint = match answer.status {
        http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN => {
            " (what stands in front of Jaeger wants a token: give it with --jaeger-token-file)"
        }
        _ => "",
    };
    JaegerError::Status {
        url,
        status: answer.status,
        message,
        hint,
    }
}

/// A value for a URL's query string: percent-encoded but for the unreserved characters.
fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Unix ns as RFC 3339 in UTC, to the nanosecond.
pub fn rfc3339(unix_nano: u64) -> String {
    let time = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_nano))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    time.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// `--from`/`--to`: an RFC 3339 time (`2026-12-04T10:00:00Z`, `2026-12-04T11:00:00+01:00`) as
/// Unix ns.
pub fn parse_rfc3339(text: &str) -> Result<u64, String> {
    let time =
        time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339)
            .map_err(|e| {
                format!(
                    "expected an RFC 3339 time such as 2026-12-04T10:00:00Z, got {text:?} ({e})"
                )
            })?;
    u64::try_from(time.unix_timestamp_nanos()).map_err(|_| format!("{text:?} is before 1970"))
}

/// Now, Unix ns.
pub fn now_unix_nano() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `--trace-id`: 32 hex digits (a W3C trace id, as Jaeger's UI shows it).
pub fn parse_trace_id(text: &str) -> Result<TraceId, String> {
    let text = text.trim();
    let digits = text.as_bytes();
    if digits.len() != 32 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!(
            "expected a trace id of 32 hex digits, got {text:?}"
        ));
    }
    let mut out = [0u8; 16];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        let pair = std::str::from_utf8(pair).unwrap_or("00");
        out[i] = u8::from_str_radix(pair, 16).unwrap_or(0);
    }
    Ok(TraceId(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_and_write_as_rfc3339() {
        let ns = parse_rfc3339("2026-12-04T10:00:00Z").unwrap();
        assert_eq!(rfc3339(ns), "2026-12-04T10:00:00Z");
        assert_eq!(parse_rfc3339("2026-12-04T11:00:00+01:00").unwrap(), ns);
        assert_eq!(rfc3339(ns + 1_500_000), "2026-12-04T10:00:00.0015Z");
        assert!(parse_rfc3339("yesterday").is_err());
        assert!(parse_rfc3339("2026-12-04 10:00").is_err());
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("a b/c+d"), "a%20b%2Fc%2Bd");
        assert_eq!(
            query_value("2026-12-04T10:00:00Z"),
            "2026-12-04T10%3A00%3A00Z"
        );
    }

    #[test]
    fn a_trace_id_is_32_hex_digits() {
        assert_eq!(parse_trace_id(&"0a".repeat(16)).unwrap(), TraceId([10; 16]));
        assert!(parse_trace_id("abc").is_err());
        assert!(parse_trace_id(&"zz".repeat(16)).is_err());
    }
}
