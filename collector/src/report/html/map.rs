//! The page's map of services: the screen's Map as inline SVG, from the same [`ServiceMap`]
//! (its layout's cells scaled to pixels, its marks and words), with room for every label in
//! full. Each box links to its row of the services table, each edge to its row of the edges
//! table (the section, past the table's [`TABLE_ROWS`]); at most [`MAX_BOXES`] boxes, and the
//! page says which services it folded into `other`.

use std::fmt::Write as _;

use super::{Esc, Page, TABLE_ROWS};
use crate::service_figures::service_stats;
use crate::view_model::edges::worst_first;
use crate::view_model::format::count;
use crate::view_model::layout::Pointing;
use crate::view_model::legend::MAP_MARKS;
use crate::view_model::map::{MAX_BOXES, ServiceMap};

/// One cell of the layout, in CSS pixels (about a character of the map's 11.5 px monospace).
const CELL_W: u32 = 7;
const CELL_H: u32 = 18;
/// The cells the map is fitted to, when its labels can shorten enough: the page's width.
const PAGE_CELLS: u16 = 168;
/// Folded services named on the page.
const FOLDED_NAMED: usize = 12;

/// The centre of a cell.
fn centre(x: u16, y: u16) -> (u32, u32) {
    (
        u32::from(x) * CELL_W + CELL_W / 2,
        u32::from(y) * CELL_H + CELL_H / 2,
    )
}

impl Page<'_> {
    pub(super) fn map(&mut self) {
        let totals = self.store.totals();
        let map = ServiceMap::of_totals(totals);
        self.out
            .push_str("<section id=\"map\">\n<h2>The map: who calls whom</h2>\n");
        if map.boxes.is_empty() {
            self.out.push_str("<p>No calls seen.</p>\n</section>\n");
            return;
        }
        // The tables' rows each box and edge links to, in their order.
        let mut edge_rows = self.store.edges();
        worst_first(&mut edge_rows);
        let service_rows = service_stats(totals);
        let placed = map.layout.place(map.label_room(PAGE_CELLS));
        let (width, height) = (
            u32::from(placed.width) * CELL_W,
            u32::from(map.layout.height) * CELL_H,
        );
        let _ = write!(
            self.out,
            r##"<div class="map-frame"><svg class="map" id="map-svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="services and the calls between them">
<defs><marker id="m-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#4a5568"/></marker>
<marker id="m-arrow-error" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0L10 5L0 10z" fill="#c53030"/></marker></defs>
"##
        );
        for (e, edge) in map.edges.iter().enumerate() {
            let (Some(points), Some((_, _, pointing)), Some((lx, ly, room))) =
                (placed.line(e), placed.arrow(e), placed.label(e))
            else {
                continue;
            };
            let href = edge_rows
                .iter()
                .position(|r| r.caller == edge.row.0 && r.callee == edge.row.1)
                .filter(|&i| i < TABLE_ROWS)
                .map_or("#edges".to_string(), |i| format!("#edge-{i}"));
            let sev = edge.worst.map_or("none".to_string(), |s| s.to_string());
            let label = map.label(e, room);
            let (from, to) = (&map.boxes[edge.from].shown, &map.boxes[edge.to].shown);
            // Through the cells' centres; the ends on the boxes' borders (the arrowhead's tip
            // on its callee's).
            let mut line: Vec<(u32, u32)> = points.iter().map(|&(x, y)| centre(x, y)).collect();
            let edge_x = |x: u16, right: bool| u32::from(x + u16::from(right)) * CELL_W;
            let forward = pointing == Pointing::Right;
            if let (Some(p), Some(&(x, _))) = (line.first_mut(), points.first()) {
                p.0 = edge_x(x, forward);
            }
            if let (Some(p), Some(&(x, _))) = (line.last_mut(), points.last()) {
                p.0 = edge_x(x, forward);
            }
            let points: Vec<String> = line.iter().map(|(x, y)| format!("{x},{y}")).collect();
            let marker = match (
                pointing,
                edge.worst == Some(deadline_budget::analysis::Severity::Error),
            ) {
                (Pointing::Right, false) => r#" marker-end="url(#m-arrow)""#,
                (Pointing::Right, true) => r#" marker-end="url(#m-arrow-error)""#,
                (Pointing::Left, false) => r#" marker-start="url(#m-arrow)""#,
                (Pointing::Left, true) => r#" marker-start="url(#m-arrow-error)""#,
            };
            let (tx, ty) = (
                u32::from(lx) * CELL_W,
                u32::from(ly) * CELL_H + CELL_H / 2 - 4,
            );
            let _ = writeln!(
                self.out,
                r#"<a href="{href}" class="map-edge" id="map-edge-{e}"><g class="me sev-{sev}"><title>{} → {}: {}</title><polyline points="{}"{marker}/><text class="ml" x="{tx}" y="{ty}">{}</text></g></a>"#,
                Esc(from),
                Esc(to),
                Esc(edge.labels.first().map_or("", String::as_str)),
                points.join(" "),
                Esc(label),
            );
        }
        for (b, mb) in map.boxes.iter().enumerate() {
            let (x, y, w, h) = placed.node(b);
            let href = mb
                .row
                .as_ref()
                .and_then(|name| service_rows.iter().position(|(n, _)| n == name))
                .filter(|&i| i < TABLE_ROWS)
                .map_or(
                    if mb.untraced { "#edges" } else { "#services" }.to_string(),
                    |i| format!("#service-{i}"),
                );
            let mut class = String::from("mb");
            if mb.works_for_nobody() {
                class.push_str(" nobody");
            } else if mb.waits_for_nobody() {
                class.push_str(" waits");
            }
            if mb.untraced {
                class.push_str(" untraced");
            }
            let (px, py) = (u32::from(x) * CELL_W, u32::from(y) * CELL_H);
            let _ = write!(
                self.out,
                r#"<a href="{href}" class="map-box" id="map-box-{b}"><g class="{class}"><rect x="{px}" y="{py}" width="{}" height="{}" rx="4"/>"#,
                u32::from(w) * CELL_W,
                u32::from(h) * CELL_H,
            );
            for (k, text) in mb.lines().iter().enumerate() {
                let row = u32::from(y) + 1 + k as u32;
                let _ = write!(
                    self.out,
                    r#"<text class="l{k}" x="{}" y="{}">{}</text>"#,
                    px + CELL_W,
                    row * CELL_H + CELL_H / 2 + 4,
                    Esc(text)
                );
            }
            self.out.push_str("</g></a>\n");
        }
        self.out.push_str("</svg></div>\n");
        if map.folded > 0 {
            let other = map.boxes.last().map_or(&[][..], |b| &b.folded[..]);
            let named: Vec<String> = other
                .iter()
                .take(FOLDED_NAMED)
                .map(|n| Esc(&crate::span_text::for_report(n)).to_string())
                .collect();
            let more = other.len().saturating_sub(FOLDED_NAMED);
            let _ = writeln!(
                self.out,
                r#"<p class="cut" id="map-folded">At most {MAX_BOXES} boxes: the {} busiest of {} services are drawn, and {} quieter ones are folded into <b>other</b>: {}{}.</p>"#,
                count((map.boxes.len() - 1) as u64),
                count(map.services as u64),
                count(map.folded as u64),
                named.join(", "),
                if more > 0 {
                    format!(" and {} more", count(more as u64))
                } else {
                    String::new()
                },
            );
        }
        self.out.push_str("<ul class=\"legend map-legend\">\n");
        for (mark, text) in MAP_MARKS {
            let _ = writeln!(
                self.out,
                "<li><code>{}</code> {}</li>",
                Esc(mark),
                Esc(text)
            );
        }
        self.out.push_str(
            "</ul>\n<p class=\"note\">Callers on the left, their callees to the right, from the same totals as the tables below (a click on a box or an edge goes to its row); the screen's Map tab draws the same layout.</p>\n</section>\n",
        );
    }
}
