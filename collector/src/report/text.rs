//! The readable `check` report: totals, a table of findings per chain, a table of edges.
//! Colour (ANSI) only when asked; every string from a span is stripped of control characters
//! so nothing a service sends can move the cursor or change the terminal.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use deadline_budget::analysis::{
    ChainOutcome, EdgeAggregate, Finding, Report, Severity, Sketch, TraceId,
};

use super::Context;
use crate::span_text::for_report;
use crate::store::Store;
use crate::view_model::format::{grouped, ms_grouped};

/// Renders the report of what `store` holds: each chain named by its root span, the store's
/// edge aggregates beside the report's.
pub fn of_store(store: &Store, report: &Report, context: &Context<'_>, color: bool) -> String {
    let roots: HashMap<TraceId, (Arc<str>, Arc<str>)> = store
        .chains()
        .map(|c| {
            (
                c.trace_id,
                (c.summary.root_service.clone(), c.summary.root_name.clone()),
            )
        })
        .collect();
    render(report, &roots, &store.edges(), context, color)
}

/// Renders a report read back rather than made from a store (`merge`): no chain held to name,
/// the edges' aggregates read from the report's own.
pub fn of_report(report: &Report, context: &Context<'_>, color: bool) -> String {
    let edges: Vec<EdgeAggregate> = report
        .edges
        .iter()
        .map(EdgeAggregate::from_report)
        .collect();
    render(
        report,
        &HashMap::new(),
        &edges.iter().collect::<Vec<_>>(),
        context,
        color,
    )
}

/// Renders the report. `roots` names each chain by its root span (service, name); `edges`
/// are the store's aggregates (budget percentiles and waste per edge); `context` adds where the
/// spans came from and each chain's link to its trace (a line under the chain's).
pub fn render(
    report: &Report,
    roots: &HashMap<TraceId, (Arc<str>, Arc<str>)>,
    edges: &[&EdgeAggregate],
    context: &Context<'_>,
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
        "chains by outcome: {}; {} of work done for nobody",
        if outcomes.is_empty() {
            "none".to_owned()
        } else {
            outcomes.join(", ")
        },
        ms_grouped(s.wasted_ms)
    );
    if let Some(warning) = s.coverage.warning() {
        let _ = writeln!(
            out,
            "{}",
            paint(
                color,
                Some(Severity::Warning),
                format!("warning: {}", for_report(&warning))
            )
        );
    }
    if let Some(source) = context.source {
        let _ = writeln!(out, "{}", crate::span_text::for_screen(&source.line()));
    }
    if let Some(i) = context.ingest {
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
        if i.requests_unauthenticated > 0 {
            let _ = writeln!(
                out,
                "unauthenticated {} requests (no or wrong bearer token: answered 401 / UNAUTHENTICATED, unread)",
                i.requests_unauthenticated
            );
        }
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
            for_report(&f.service),
            for_report(&f.span_name),
            for_report(&f.message),
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
    // With every finding left out (`--max-findings 0`) the section still says how many.
    let omitted = omitted_note(report);
    if !by_chain.is_empty() || omitted.is_some() {
        out.push_str("\nFINDINGS\n");
        if let Some(note) = omitted {
            out.push_str(&note);
            out.push('\n');
        }
    }
    if !by_chain.is_empty() {
        line(&mut out, &header, None);
    }
    for (trace_id, findings) in &by_chain {
        let root = roots
            .get(trace_id)
            .map(|(service, name)| format!(" {} {}", for_report(service), for_report(name)))
            .unwrap_or_default();
        let _ = writeln!(out, "chain {trace_id}{root}");
        if let Some(links) = context.links {
            let _ = writeln!(out, "  trace: {}", links.link(*trace_id));
        }
        for f in findings {
            line(&mut out, &row_of(f), Some(f.severity));
        }
    }

    if !edges.is_empty() {
        out.push_str("\nEDGES\n");
        let s = &report.summary;
        if s.edge_calls_folded > 0 || s.service_hops_folded > 0 {
            out.push_str(&format!(
                "past {} edges and services, {} call(s) are counted on the edge other -> other and {} hop(s) on the service other\n",
                deadline_budget::analysis::MAX_TOTALS_KEYS,
                s.edge_calls_folded,
                s.service_hops_folded
            ));
        }
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
            let findings: Vec<String> = e
                .all_findings()
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            rows.push([
                for_report(&e.caller),
                for_report(&e.callee),
                e.calls.to_string(),
                percentiles(&e.received),
                percentiles(&e.forwarded),
                percentiles(&e.latency),
                match e.timeout() {
                    Some((t, true)) => format!("~{} (inferred)", ms_grouped(t)),
                    Some((t, false)) => ms_grouped(t),
                    None => "-".into(),
                },
                ms_grouped(e.wasted_ms),
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
    if !edges.is_empty() {
        out.push_str(&advice_section(edges));
    }
    if none_found(report) {
        out.push_str("\nno findings\n");
    }
    out
}

/// Whether the report found nothing at all: none listed and none left out of the list
/// (`--max-findings 0` lists none of the findings it counts, which is not "no findings").
pub fn none_found(report: &Report) -> bool {
    report.findings.is_empty() && report.summary.findings_omitted == 0
}

/// "12,345 more findings are counted above and not listed (--max-findings): per kind, the ones
/// that explain the most work for nobody are listed, then the newest", when the list is capped.
pub fn omitted_note(report: &Report) -> Option<String> {
    let omitted = report.summary.findings_omitted;
    (omitted > 0).then(|| {
        format!(
            "{omitted} more finding(s) are counted above and not listed (--max-findings): per kind, the ones that explain the most work for nobody are listed, then the newest"
        )
    })
}

/// The ADVICE section (`CONVENTIONS.md` section 4, "Advice"): one sentence per edge, the
/// timeout its measured latency suggests or how many more calls it needs.
fn advice_section(edges: &[&EdgeAggregate]) -> String {
    let mut out =
        String::from("\nADVICE (time out at the p99.9 of answered calls, from 100 calls)\n");
    for e in edges {
        let _ = writeln!(out, "  {}", for_report(&e.advice().sentence));
    }
    out
}

fn percentiles(d: &Sketch) -> String {
    match (d.p50(), d.p99()) {
        (Some(p50), Some(p99)) => format!("{}/{}", grouped(p50), ms_grouped(p99)),
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

#[cfg(test)]
mod tests {
    use deadline_budget::analysis::FindingKind;

    use super::*;

    /// The edges table counts an edge's own `timeout_oversized` as the report does, after its
    /// calls' findings.
    #[test]
    fn an_oversized_timeout_is_counted_with_the_edges_findings() {
        let mut edge = EdgeAggregate {
            caller: "orders".into(),
            callee: "inventory".into(),
            calls: 20,
            ..EdgeAggregate::default()
        };
        for _ in 0..20 {
            edge.latency.add(10);
        }
        edge.declared_timeouts.add(30_000);
        edge.findings.bump(FindingKind::BudgetDropped);
        let out = render(
            &Report::default(),
            &HashMap::new(),
            &[&edge],
            &Context::default(),
            false,
        );
        assert!(
            out.contains("budget_dropped 1, timeout_oversized 1"),
            "{out}"
        );
    }

    /// The ADVICE section says, per edge, the timeout to set from its p99.9 latency.
    #[test]
    fn the_advice_section_gives_each_edge_its_sentence() {
        let mut edge = EdgeAggregate {
            caller: "orders".into(),
            callee: "inventory".into(),
            calls: 412,
            ..EdgeAggregate::default()
        };
        edge.latency.add_n(400, 408);
        edge.latency.add_n(1520, 4);
        edge.declared_timeouts.add(3000);
        let out = render(
            &Report::default(),
            &HashMap::new(),
            &[&edge],
            &Context::default(),
            false,
        );
        assert!(
            out.contains("\nADVICE (time out at the p99.9 of answered calls, from 100 calls)\n  orders → inventory: 3,000 ms declared, p99.9 1,520 ms over 412 calls: time out at 1,600 ms\n"),
            "{out}"
        );
    }
}
