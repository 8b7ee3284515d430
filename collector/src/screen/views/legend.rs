//! The legend (`?`): every mark of the waterfall, every finding kind, the figures beside each
//! row, the chain list's columns and the keys, in plain words (from [`crate::view_model::legend`],
//! which the HTML page reads too).

use deadline_budget::analysis::FindingKind;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span as TextSpan};

use super::boxed;
use super::popup::{fitted, hanging, scrolled};
use super::theme::Theme;
use crate::view_model::format::severity_glyph;
use crate::view_model::legend::{MAP_MARKS, MARKS, MarkRole, ROW_FIGURES};

/// The legend's widest box.
pub(super) const LEGEND_WIDTH: u16 = 100;

/// Draw the legend, scrolled down `scroll` rows.
pub fn render(theme: Theme, area: Rect, scroll: u16, buf: &mut Buffer) {
    let lines = lines(theme, LEGEND_WIDTH.min(area.width).saturating_sub(2));
    let rect = fitted(area, LEGEND_WIDTH, &lines);
    let inner = boxed(buf, rect, "legend  (Esc closes)", theme);
    scrolled(buf, rect, inner, lines, scroll, theme);
}

/// The legend's text, for a box `width` cells wide inside.
pub(super) fn lines(theme: Theme, width: u16) -> Vec<Line<'static>> {
    let glyph = |g: &'static str, style, text: &'static str| {
        Line::from(vec![
            TextSpan::styled(format!(" {g:<3}"), style),
            TextSpan::raw(text),
        ])
    };
    let mut lines = vec![Line::styled(
        "The waterfall: one row per hop (a service handling the request) and call",
        theme.title(),
    )];
    for mark in MARKS {
        let style = match mark.role {
            MarkRole::Budget => theme.budget(),
            MarkRole::Queue => theme.queue(),
            MarkRole::Work => theme.work(),
            MarkRole::Late => theme.late(),
            MarkRole::Waiting => theme.waiting(),
            MarkRole::Call => theme.call(),
            MarkRole::Dim => theme.dim(),
        };
        // Without colour a reset's excess is told by where it lies, not by red.
        let text = match mark.glyph {
            "┄" if !theme.color => "the budget the call forwarded (past │: more than remained)",
            _ => mark.text,
        };
        lines.push(glyph(mark.glyph, style, text));
    }
    lines.push(glyph(
        "─",
        theme.dim(),
        "a span of the hop's own (its work, a database query)",
    ));
    lines.push(Line::styled("Findings", theme.title()));
    for kind in FindingKind::ALL {
        let sev = kind.severity();
        let head = TextSpan::styled(
            format!(" {} {:<18}", severity_glyph(sev), kind.as_str()),
            theme.severity(sev),
        );
        lines.extend(hanging(head, kind.meaning(), theme.text(), width));
    }
    lines.push(Line::styled("The figures beside each row", theme.title()));
    lines.extend(hanging(
        TextSpan::raw(" "),
        ROW_FIGURES,
        theme.text(),
        width,
    ));
    lines.extend(hanging(
        TextSpan::raw(" "),
        "#2 before a call: the second attempt of a retried call",
        theme.text(),
        width,
    ));
    lines.push(Line::styled("The chain list", theme.title()));
    for text in [
        "OUTCOME: how the request ended for its user (in flight, ok, late, 504, shed, cancelled, error)",
        "WASTED: the work its services did after everyone above had stopped waiting",
    ] {
        lines.extend(hanging(TextSpan::raw(" "), text, theme.text(), width));
    }
    lines.push(Line::styled("The map", theme.title()));
    for (mark, text) in MAP_MARKS {
        let head = TextSpan::styled(format!(" {mark} "), theme.text());
        lines.extend(hanging(head, text, theme.text(), width));
    }
    lines.push(Line::styled("Keys", theme.title()));
    for keys in [
        "↑↓ j k move · PgUp PgDn a page · g G top, bottom · Enter open (on an edge or service: its chains) · Esc back",
        "Tab next view · Shift-Tab previous view · n/N next/previous finding of the selected chain · / search",
        "f filter: all, only chains with findings, only failed chains · s sort (newest, longest, most waste) · space pause · q quit",
        "e append the selected chain to budget-top-export.jsonl (check --input and replay read it)",
        "m in Edges, Services and Map: the tables and the map over the chains judged in the last minute, or since start",
        "Map: ←→↑↓ select, box to box along the edges · h j k l, the wheel or a drag pan · Enter the edge's Edges row (its advice) or the box's Services row · o (c outside the demo) opens the worst chain through it, in its waterfall",
        "mouse: a click selects a row (a second click opens it), the wheel scrolls",
        "in a popup like this one: ↑↓ PgUp PgDn and the wheel scroll, Esc closes",
        "budget-top demo: 1-9 0 ! @ scenario · c cure it (run it with its mistake fixed) · [ ] pick a service · +/- its latency · w next workshop step",
    ] {
        lines.extend(hanging(TextSpan::raw(" "), keys, theme.text(), width));
    }
    lines
}
