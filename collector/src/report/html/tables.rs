//! The page's edges and services tables, sortable by a click on a column head (the script in
//! `assets`); in the screen's order, at most [`TABLE_ROWS`] rows each.

use std::fmt::Write as _;
use std::sync::Arc;

use deadline_budget::analysis::{FindingKind, Severity};

use super::{Esc, Page, TABLE_ROWS, TableName, sort_value};
use crate::service_figures::{ServiceStats, service_stats};
use crate::span_text::for_report;
use crate::view_model::edges::{TimeoutMark, late, of_severity, worst_first};
use crate::view_model::format::{count, ms_grouped, opt_ms_grouped, severity_glyph};

impl Page<'_> {
    pub(super) fn edges(&mut self) {
        let mut rows = self.store.edges();
        // The screen's order.
        worst_first(&mut rows);
        self.out.push_str(
            "<section id=\"edges\">\n<h2>Edges: caller → callee</h2>\n<table class=\"data sortable\" id=\"edges-table\"><thead><tr><th>CALLER → CALLEE</th><th>CALLS</th><th>RESETS</th><th>DROPS</th><th>LATE</th><th>WARN</th><th>LAT p50</th><th>LAT p99</th><th>TIMEOUT</th><th>RCV p50</th><th>FWD p50</th><th>WASTED</th></tr></thead><tbody>\n",
        );
        for (i, e) in rows.iter().take(TABLE_ROWS).enumerate() {
            let n = |k| e.findings.get(k);
            let warn = of_severity(e, Severity::Warning);
            let _ = write!(
                self.out,
                "<tr id=\"edge-{i}\"><td class=\"t\">{} → {}</td>",
                TableName(&e.caller),
                TableName(&e.callee)
            );
            for (v, flagged) in [
                (e.calls, false),
                (n(FindingKind::BudgetReset), true),
                (n(FindingKind::BudgetDropped), true),
                (late(e), true),
                (warn, true),
            ] {
                count_cell(&mut self.out, v, flagged);
            }
            ms_cell(&mut self.out, e.latency.p50());
            ms_cell(&mut self.out, e.latency.p99());
            let (timeout, value) = match e.timeout() {
                None => ("·".to_string(), None),
                Some((t, inferred)) => {
                    let mut text = format!("{}{}", if inferred { "~" } else { "" }, ms_grouped(t));
                    match TimeoutMark::of(e) {
                        Some(TimeoutMark::Inverted) => {
                            let glyph = severity_glyph(FindingKind::TimeoutInverted.severity());
                            let _ = write!(text, " {glyph} inverted");
                        }
                        Some(TimeoutMark::Oversized) => {
                            let glyph = severity_glyph(FindingKind::TimeoutOversized.severity());
                            let _ = write!(text, " {glyph} oversized");
                        }
                        None => {}
                    }
                    (text, Some(t))
                }
            };
            let _ = write!(
                self.out,
                "<td data-v=\"{}\">{}</td>",
                sort_value(value),
                Esc(&timeout)
            );
            ms_cell(&mut self.out, e.received.p50());
            ms_cell(&mut self.out, e.forwarded.p50());
            let _ = writeln!(
                self.out,
                "<td data-v=\"{}\"{}>{}</td></tr>",
                e.wasted_ms,
                if e.wasted_ms > 0 {
                    " class=\"late-text\""
                } else {
                    ""
                },
                if e.wasted_ms > 0 {
                    ms_grouped(e.wasted_ms)
                } else {
                    "·".into()
                }
            );
        }
        self.out.push_str("</tbody></table>\n");
        if rows.is_empty() {
            self.out.push_str("<p>No calls seen.</p>\n");
        }
        if rows.len() > TABLE_ROWS {
            let _ = writeln!(
                self.out,
                "<p class=\"cut\">The {TABLE_ROWS} first of {} edges, in the order above.</p>",
                count(rows.len() as u64)
            );
        }
        self.out.push_str(
            "<p class=\"note\">RESETS forwarded more than remained · DROPS forwarded none · LATE work after the deadline or after the caller gave up · WARN warnings · LAT the call's duration · TIMEOUT declared, ~ inferred from calls that got no answer · RCV budget received · FWD budget forwarded · WASTED dead work in the callee and below it. A click on a column head sorts.</p>\n</section>\n",
        );
    }

    /// The advice (`CONVENTIONS.md` section 4, "Advice"): one sentence per edge, in the
    /// edges table's order, at most [`TABLE_ROWS`].
    pub(super) fn advice(&mut self) {
        let mut rows = self.store.edges();
        worst_first(&mut rows);
        self.out.push_str(
            "<section id=\"advice\">\n<h2>Advice: what to set</h2>\n<p class=\"note\">Per edge with at least 100 answered calls: time out at their p99.9 latency (0.1 % of good calls cut), rounded up to two significant figures and capped by the callee's budget p50 when budgets flow; when the edge retries, the attempts must fit the caller's budget.</p>\n<ul class=\"advice\">\n",
        );
        for e in rows.iter().take(TABLE_ROWS) {
            let _ = writeln!(
                self.out,
                "<li>{}</li>",
                Esc(&for_report(&e.advice().sentence))
            );
        }
        self.out.push_str("</ul>\n");
        if rows.is_empty() {
            self.out.push_str("<p>No calls seen.</p>\n");
        }
        self.out.push_str("</section>\n");
    }

    pub(super) fn services(&mut self) {
        // Rates over the whole run: from the first judged chain's start to the last one's end.
        let totals = self.store.totals();
        let seconds = totals.traffic_ns() as f64 / 1e9;
        let rows = service_stats(totals);
        self.out.push_str(
            "<section id=\"services\">\n<h2>Services</h2>\n<table class=\"data sortable\" id=\"services-table\"><thead><tr><th>SERVICE</th><th>HOPS</th><th>λ /s</th><th>W</th><th>L = λW</th><th>QUEUE p50</th><th>QUEUE p99</th><th>DEAD WORK</th><th>DEAD SHARE</th></tr></thead><tbody>\n",
        );
        for (i, (name, s)) in rows.iter().take(TABLE_ROWS).enumerate() {
            service_row(&mut self.out, i, name, s);
        }
        self.out.push_str("</tbody></table>\n");
        if rows.len() > TABLE_ROWS {
            let _ = writeln!(
                self.out,
                "<p class=\"cut\">The {TABLE_ROWS} first of {} services, the largest dead-work share first.</p>",
                count(rows.len() as u64)
            );
        }
        let _ = writeln!(
            self.out,
            "<p class=\"note\">λ arrivals/s and W mean time in service over the whole run ({seconds:.1} s, first span to last); L = λ×W requests in flight (Little's law); DEAD WORK work done for callers who had given up, and its share of the service's work.</p>\n</section>"
        );
    }
}

fn count_cell(out: &mut String, v: u64, flagged: bool) {
    let class = if flagged && v > 0 {
        " class=\"late-text\""
    } else {
        ""
    };
    let text = if flagged && v == 0 {
        "·".into()
    } else {
        count(v)
    };
    let _ = write!(out, "<td data-v=\"{v}\"{class}>{text}</td>");
}

fn ms_cell(out: &mut String, v: Option<i64>) {
    let _ = write!(
        out,
        "<td data-v=\"{}\">{}</td>",
        sort_value(v),
        opt_ms_grouped(v)
    );
}

fn service_row(out: &mut String, i: usize, name: &Arc<str>, s: &ServiceStats) {
    let (lambda, w, l) = s.littles_law();
    let dead = s.dead_share();
    let filled = (dead * 20.0).round() as usize;
    let _ = write!(
        out,
        "<tr id=\"service-{i}\"><td class=\"t\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{lambda:.3}\">{lambda:.1}</td><td data-v=\"{w:.1}\">{} ms</td><td data-v=\"{l:.3}\">{l:.1}</td>",
        TableName(name),
        s.totals.hops,
        count(s.totals.hops),
        w.round() as i64,
    );
    ms_cell(out, s.totals.queue_wait.p50());
    ms_cell(out, s.totals.queue_wait.p99());
    let _ = writeln!(
        out,
        "<td data-v=\"{}\">{}</td><td data-v=\"{dead:.4}\"{}><span class=\"share\" aria-hidden=\"true\">{}{}</span> {:.0}%</td></tr>",
        s.totals.wasted_ms,
        ms_grouped(s.totals.wasted_ms),
        if dead > 0.0 {
            " class=\"late-text\""
        } else {
            ""
        },
        "▓".repeat(filled.min(20)),
        "░".repeat(20 - filled.min(20)),
        dead * 100.0,
    );
}
