//! The readable `check` report: totals, a table of findings per chain, a table of edges.
//! Colour (ANSI) only when asked; every string from a span is stripped of control characters
//! so nothing a service sends can move the cursor or change the terminal.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use deadline_budget::analysis::{
    ChainOutcome, Distribution, EdgeAggregate, Finding, Report, Severity, TraceId,
};

use crate::ingest::IngestCounts;

/// Renders the report. `roots` names each chain by its root span (service, name); `edges`
/// are the store's aggregates (budget percentiles and waste per edge).
pub fn render(
    report: &Report,
    roots: &HashMap<TraceId, (Arc<str>, Arc<str>)>,
    edges: &[&EdgeAggregate],
    ingest: Option<&IngestCounts>,
    color: bool,
) -> String {
    let mut out = String::new();
    let s = &report.summary;
    let _ = writeln!(
        out,
        "{} traces, {} spans, {} hops; findings: {} error, {} warning, {} info",
        s.traces,
        s.spans,
        s.hops,
        paint(color, Some(Severity::Error), s.findings.error),
        paint(color, Some(Severity::Warning), s.findings.warning),
        s.findings.info
    );
    let outcomes: Vec<String> = ChainOutcome::ALL
        .into_iter()
        .filter(|&o| s.outcomes.get(o) > 0)
        .map(|o| format!("{} {}", s.outcomes.get(o), o.as_str()))
        .collect();
    let _ = writeln!(
        out,
        "chains by outcome: {}; {} ms of work done for nobody",
        if outcomes.is_empty() {
            "none".to_owned()
        } else {
            outcomes.join(", ")
        },
        s.wasted_ms
    );
    if let Some(warning) = s.coverage.warning() {
        let _ = writeln!(
            out,
            "{}",
            paint(
                color,
                Some(Severity::Warning),
                format!("warning: {}", clean(&warning))
            )
        );
    }
    if let Some(i) = ingest {
        let _ = writeln!(
            out,
            "received {} spans in {} requests; refused {} requests, store behind ({} spans counted; {} refused before reading, spans unknown); rejected {} spans and {} requests (invalid)",
            i.spans_accepted,
            i.requests_accepted,
            i.requests_refused,
            i.spans_refused,
            i.requests_refused_unread,
            i.spans_rejected,
            i.requests_rejected
        );
        let _ = writeln!(
            out,
            "ignored {} requests (metrics and logs: answered with success, dropped)",
            i.requests_ignored
        );
        if i.connections_evicted + i.connections_refused > 0 {
            let _ = writeln!(
                out,
                "connections: {} closed to make room past --max-connections (idle or unfinished), {} refused (all busy)",
                i.connections_evicted, i.connections_refused
            );
        }
    }

    let mut by_chain: BTreeMap<TraceId, Vec<&Finding>> = BTreeMap::new();
    for f in &report.findings {
        by_chain.entry(f.trace_id).or_default().push(f);
    }
    let row_of = |f: &Finding| {
        [
            f.severity.as_str().to_string(),
            f.kind.as_str().to_string(),
            clean(&f.service),
            clean(&f.span_name),
            clean(&f.message),
        ]
    };
    let header = ["SEVERITY", "KIND", "SERVICE", "SPAN", "MESSAGE"].map(String::from);
    // One set of column widths for every chain, so the table reads as one.
    let widths = column_widths(
        &std::iter::once(header.clone())
            .chain(report.findings.iter().map(row_of))
            .collect::<Vec<_>>(),
    );
    let line = |out: &mut String, row: &[String; 5], severity: Option<Severity>| {
        let first = format!("{:<w$}", row[0], w = widths[0]);
        let _ = writeln!(
            out,
            "  {}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            paint(color, severity, first),
            row[1],
            row[2],
            row[3],
            row[4],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
    };
    if !by_chain.is_empty() {
        out.push_str("\nFINDINGS\n");
        line(&mut out, &header, None);
    }
    for (trace_id, findings) in &by_chain {
        let root = roots
            .get(trace_id)
            .map(|(service, name)| format!(" {} {}", clean(service), clean(name)))
            .unwrap_or_default();
        let _ = writeln!(out, "chain {trace_id}{root}");
        for f in findings {
            line(&mut out, &row_of(f), Some(f.severity));
        }
    }

    if !edges.is_empty() {
        out.push_str("\nEDGES\n");
        let mut rows = vec![[
            "CALLER".to_string(),
            "CALLEE".to_string(),
            "CALLS".to_string(),
            "RECEIVED p50/p99".to_string(),
            "FORWARDED p50/p99".to_string(),
            "LATENCY p50/p99".to_string(),
            "TIMEOUT".to_string(),
            "WASTED".to_string(),
            "FINDINGS".to_string(),
        ]];
        for e in edges {
            let mut findings: Vec<String> =
                e.findings.iter().map(|(k, n)| format!("{k} {n}")).collect();
            if e.oversized().is_some() {
                findings.push("timeout_oversized 1".into());
            }
            rows.push([
                clean(&e.caller),
                clean(&e.callee),
                e.calls.to_string(),
                percentiles(&e.received),
                percentiles(&e.forwarded),
                percentiles(&e.latency),
                match e.timeout() {
                    Some((t, true)) => format!("~{t} ms (inferred)"),
                    Some((t, false)) => format!("{t} ms"),
                    None => "-".into(),
                },
                format!("{} ms", e.wasted_ms),
                if findings.is_empty() {
                    "-".into()
                } else {
                    findings.join(", ")
                },
            ]);
        }
        let widths = column_widths(&rows);
        for row in &rows {
            let _ = writeln!(
                out,
                "  {:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {:>w4$}  {:>w5$}  {:>w6$}  {:>w7$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6],
                row[7],
                row[8],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4],
                w5 = widths[5],
                w6 = widths[6],
                w7 = widths[7],
            );
        }
    }
    if report.findings.is_empty() {
        out.push_str("\nno findings\n");
    }
    out
}

fn percentiles(d: &Distribution) -> String {
    match (d.p50(), d.p99()) {
        (Some(p50), Some(p99)) => format!("{p50}/{p99} ms"),
        _ => "-".into(),
    }
}

fn column_widths<const N: usize>(rows: &[[String; N]]) -> [usize; N] {
    let mut widths = [0; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

fn paint(color: bool, severity: Option<Severity>, text: impl std::fmt::Display) -> String {
    let code = match severity {
        Some(Severity::Error) => "31",
        Some(Severity::Warning) => "33",
        _ => return text.to_string(),
    };
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Control characters (escape sequences, newlines, tabs) become spaces; bidirectional
/// overrides and zero-width characters are removed (a span name cannot reorder or hide the
/// text around it); long values are cut. The HTML report cleans every span string the same way
/// before escaping it.
pub fn clean(s: &str) -> String {
    let mut out: String = s
        .chars()
        .filter(|&c| !hidden(c))
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().filter(|&c| !hidden(c)).nth(200).is_some() {
        out.push('…');
    }
    out
}

/// Characters that change how the text around them reads without showing themselves: the
/// bidirectional embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069), and
/// the zero-width and other invisible format characters (U+200B-U+200F, U+2060-U+206F, U+FEFF,
/// the soft hyphen, variation selectors, tags...), which take no cell: they misalign columns
/// and make one name look like another.
pub fn hidden(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Whether a character from a span must not reach a terminal as it is: a control character
/// (escape sequences, newlines, tabs move the cursor) or a [`hidden`] one. The screen removes
/// them; the text report turns control characters into spaces and removes the hidden ones.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || hidden(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_strings_cannot_reach_the_terminal_as_escapes() {
        assert_eq!(clean("a\x1b[2Jb\nc"), "a [2Jb c");
        assert_eq!(clean(&"x".repeat(300)).chars().count(), 201);
    }

    #[test]
    fn span_strings_cannot_reorder_or_hide_text() {
        // RIGHT-TO-LEFT OVERRIDE would show "gpj.exe" as "exe.jpg"; zero-width characters make
        // two names look the same.
        assert_eq!(clean("a\u{202e}gpj.exe\u{202c}"), "agpj.exe");
        assert_eq!(clean("or\u{200b}ders\u{2066}\u{feff}"), "orders");
        assert_eq!(clean("ملف"), "ملف");
        assert_eq!(
            clean("svc\u{202e}nimda\u{202c}\u{200b}x\u{feff}\u{2066}y\u{2069}\u{e0041}\u{00ad}"),
            "svcnimdaxy"
        );
        // Every kept character takes the cells its width says.
        for c in [
            '\u{200d}',
            '\u{2060}',
            '\u{00ad}',
            '\u{e0041}',
            '\u{061c}',
            '\u{1b}',
        ] {
            assert!(is_unsafe_char(c), "{c:?}");
        }
        for c in ['é', '→', '日', ' ', '-', 'م'] {
            assert!(!is_unsafe_char(c), "{c:?}");
        }
    }
}
