//! The header (where spans come in, how fast, what was found) and the footer (keys, the search
//! prompt, the demo's lesson).

use deadline_budget::analysis::Severity;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use std::borrow::Cow;

use super::theme::Theme;
use super::{put, unicode_width};
use crate::screen::{Mode, State, View};
use crate::span_text::for_screen;
use crate::view_model::format::{count, fit, ms, rate, severity_glyph};

/// Draw the header: line 1 receivers and mode, line 2 live figures, line 3 the view tabs.
pub fn render(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let right = area.x + area.width;
    let w = |x: u16| right.saturating_sub(x);
    // Line 1: name, mode, receivers, paused.
    let y = area.y;
    let mut x = put(buf, area.x, y, "budget-top", area.width, theme.title());
    let mode = match &state.mode {
        Mode::Live => "live".to_string(),
        Mode::Replay(file) => format!("replay {}", for_screen(file)),
        Mode::Demo => "demo".to_string(),
    };
    x = put(buf, x + 1, y, &mode, w(x + 1), theme.accent());
    let mut receivers = Vec::new();
    if let Some(a) = state.grpc_addr {
        receivers.push(format!("gRPC {a}"));
    }
    if let Some(a) = state.http_addr {
        receivers.push(format!("HTTP {a}"));
    }
    if !receivers.is_empty() {
        x = put(buf, x + 2, y, &receivers.join("  "), w(x + 2), theme.dim());
        if let Some(protection) = state.protection {
            x = put(buf, x + 2, y, protection, w(x + 2), theme.dim());
        }
    }
    // Listening beyond loopback is a deliberate choice (--allow-remote): say so, every frame.
    let open = [state.grpc_addr, state.http_addr]
        .into_iter()
        .flatten()
        .any(|a| !a.ip().is_loopback());
    if open || state.open_to_anyone {
        // Neither TLS nor a token: anyone who can reach the port can send spans.
        let warning = if state.open_to_anyone {
            "⚠ ANYONE ON THE NETWORK CAN SEND"
        } else {
            "⚠ open to the network"
        };
        x = put(buf, x + 2, y, warning, w(x + 2), theme.alert());
    }
    if state.ui.paused {
        let badge = " PAUSED (space resumes) ";
        let bw = badge.chars().count() as u16;
        let bx = right.saturating_sub(bw).max(x + 1);
        put(buf, bx, y, badge, w(bx), theme.alert());
    }
    if area.height < 2 {
        return;
    }
    // Line 2: live figures.
    let y = area.y + 1;
    let now = state.now_unix_nano;
    let d = &state.data;
    let mut x = area.x;
    // A figure is drawn whole or not at all, and none after one that did not fit: at 120
    // columns "653 chains judged" was cut to "653 chains", which read as the held count.
    let mut full = false;
    let mut field = |buf: &mut Buffer, value: String, label: &str, style: Style| {
        let label_w = if label.is_empty() {
            0
        } else {
            1 + unicode_width(label)
        };
        if full || unicode_width(&value) + label_w > w(x) as usize {
            full = true;
            return;
        }
        x = put(buf, x, y, &value, w(x), style);
        if !label.is_empty() {
            x = put(buf, x + 1, y, label, w(x + 1), theme.dim());
        }
        x += 2;
    };
    field(
        buf,
        rate(d.span_rate.per_second(now)),
        "spans/s",
        theme.accent(),
    );
    field(
        buf,
        count(d.store.counters().chains_held),
        "chains",
        theme.accent(),
    );
    let dropped_style = if state.spans_dropped > 0 {
        theme.severity(Severity::Error)
    } else {
        theme.text()
    };
    field(buf, count(state.spans_dropped), "dropped", dropped_style);
    if state.requests_refused_unread > 0 {
        // Refused before reading under overload: how many spans they held is not known.
        field(
            buf,
            count(state.requests_refused_unread),
            "requests refused",
            theme.severity(Severity::Error),
        );
    }
    if state.requests_unauthenticated > 0 {
        // No or wrong bearer token: answered 401 / UNAUTHENTICATED, never read.
        field(
            buf,
            count(state.requests_unauthenticated),
            "unauthenticated",
            theme.severity(Severity::Warning),
        );
    }
    if state.requests_ignored > 0 {
        // Metrics and logs sent to the same endpoint: answered, dropped; not an error.
        field(
            buf,
            count(state.requests_ignored),
            "ignored (metrics/logs)",
            theme.dim(),
        );
    }
    let sev = d.store.finding_counts();
    for (s, n) in [
        (Severity::Error, sev.error),
        (Severity::Warning, sev.warning),
        (Severity::Info, sev.info),
    ] {
        let style = if n > 0 {
            theme.severity(s)
        } else {
            theme.dim()
        };
        let label = if area.width >= 100 { s.as_str() } else { "" };
        field(
            buf,
            format!("{} {}", severity_glyph(s), count(n)),
            label,
            style,
        );
    }
    // Since start: the work for nobody of every chain judged, held or evicted (CONVENTIONS.md
    // section 6), beside the rate at which it is found now.
    let wide = area.width >= 100;
    let totals = d.store.totals();
    let wasted_style = if totals.wasted_ms > 0 {
        theme.severity(Severity::Error)
    } else {
        theme.text()
    };
    let label = if wide { "wasted in all" } else { "wasted" };
    field(buf, ms(totals.wasted_ms), label, wasted_style);
    let waste = d.waste_rate.per_second(now);
    let waste_style = if waste > 0.0 {
        theme.severity(Severity::Error)
    } else {
        theme.text()
    };
    let label = if wide { "wasted ms/s" } else { "ms/s" };
    field(buf, rate(waste), label, waste_style);
    // A quiet screen means little when most hops carry no budget: say so, whole (what to do
    // stays on the line; in place of the chains judged); on the tabs' line when the figures
    // leave too little room here.
    let blind = blind_warning(state);
    if wide && blind.is_none() {
        field(buf, count(totals.traces), "chains judged", theme.dim());
    }
    let mut deferred = None;
    if let Some(choices) = blind {
        let room = w(x);
        let shortest = choices.last().map_or(0, |c| unicode_width(c));
        if shortest <= room as usize {
            put(
                buf,
                x,
                y,
                fitting(&choices, room),
                room,
                theme.severity(Severity::Warning),
            );
        } else {
            deferred = Some(choices);
        }
    }
    if area.height < 3 {
        return;
    }
    // Line 3: tabs, then the list's filter and order.
    let y = area.y + 2;
    let mut x = area.x;
    // The tabs lose their padding when a deferred warning would not fit beside them whole.
    let titles = View::ALL.map(|v| super::pane(v).title());
    let padded: usize = titles.iter().map(|t| unicode_width(t) + 3).sum();
    let shortest = deferred
        .as_ref()
        .and_then(|c| c.last())
        .map_or(0, |c| unicode_width(c) + 1);
    let pad = deferred.is_none() || padded + shortest <= area.width as usize;
    for (view, name) in View::ALL.into_iter().zip(titles) {
        let style = if state.ui.view == view {
            theme.selected()
        } else {
            theme.dim()
        };
        let tab = if pad {
            format!(" {name} ")
        } else {
            name.to_string()
        };
        x = put(buf, x, y, &tab, w(x), style);
        x = put(buf, x, y, "│", w(x), theme.dim());
    }
    let mut info = format!(" sort: {}", state.ui.query.sort.label());
    if state.data.last_minute {
        info.push_str("  tables: last minute");
    }
    if let Some(filter) = state.ui.query.filter.label() {
        info.push_str(&format!("  filter: {filter}"));
    }
    if !state.ui.query.search.is_empty() {
        info.push_str(&format!("  search: {}", for_screen(&state.ui.query.search)));
    }
    let evicted = state.data.store.counters().chains_evicted;
    if evicted > 0 {
        info.push_str(&format!("  evicted: {}", count(evicted)));
    }
    if let Some(choices) = deferred {
        let room = w(x + 1);
        x = put(
            buf,
            x + 1,
            y,
            &fit(fitting(&choices, room), room as usize),
            room,
            theme.severity(Severity::Warning),
        );
        // The order after it only whole; a filter or search, cut with an ellipsis if need be
        // (a list that shows less than everything must say so).
        let narrowed = state.ui.query.filter.label().is_some() || !state.ui.query.search.is_empty();
        if unicode_width(&info) > w(x) as usize && !narrowed {
            return;
        }
    }
    put(buf, x, y, &fit(&info, w(x) as usize), w(x), theme.dim());
}

/// The warning for a screen whose hops mostly carry no budget, longest first; `None` when the
/// budget is known well enough.
fn blind_warning(state: &State) -> Option<[String; 4]> {
    let coverage = state.data.store.coverage();
    if !coverage.is_blind() {
        return None;
    }
    let names: Vec<String> = coverage
        .services_without_budget
        .iter()
        .take(4)
        .map(|s| for_screen(s).into_owned())
        .collect();
    let (known, all) = (
        count(coverage.hops_with_budget),
        count(coverage.hops_with_budget + coverage.hops_without_budget),
    );
    Some([
        format!(
            "⚠ budget known on {known} of {all} hops: add --budget-header or the contract's attributes (none: {})",
            names.join(", ")
        ),
        format!(
            "⚠ budget known on {known} of {all} hops: add --budget-header or the contract's attributes"
        ),
        format!("⚠ budget known on {known} of {all} hops: add --budget-header"),
        format!("⚠ budget on {known}/{all} hops: --budget-header"),
    ])
}

/// Draw the footer: the search prompt while searching, else the message or the key hints; the
/// demo's scenario and lesson above them.
pub fn render_footer(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    let last = area.y + area.height - 1;
    if let Some(demo) = &state.demo
        && area.height >= 2
    {
        let y = area.y;
        let keys = unshadowed(&demo.keys, super::pane(state.ui.view).keys());
        let (scenario, keys) = (for_screen(&demo.scenario), for_screen(&keys));
        let (scenario, keys) = scenario_line(&scenario, &keys, area.width);
        let x = put(buf, area.x, y, "▶ ", area.width, theme.accent());
        let x = put(
            buf,
            x,
            y,
            &scenario,
            area.width.saturating_sub(x - area.x),
            theme.title(),
        );
        if !keys.is_empty() {
            let kx = x + 2;
            put(
                buf,
                kx,
                y,
                keys,
                (area.x + area.width).saturating_sub(kx),
                theme.dim(),
            );
        }
        // The lesson under it, wrapped, in the rows between the scenario line and the hints.
        let room = area.height.saturating_sub(2) as usize;
        for (i, line) in super::lesson_lines(state, area.width)
            .iter()
            .take(room)
            .enumerate()
        {
            put(
                buf,
                area.x,
                y + 1 + i as u16,
                line,
                area.width,
                theme.text(),
            );
        }
    }
    let line = if state.ui.searching {
        format!(
            "/{}▏  Enter keeps  Esc clears",
            for_screen(&state.ui.query.search)
        )
    } else if let Some(m) = &state.ui.message {
        for_screen(m).into_owned()
    } else {
        hints(state, area.width)
    };
    let style = if state.ui.searching {
        theme.title()
    } else {
        theme.dim()
    };
    // A message wider than the screen (a path, an error) ends with an ellipsis, not mid-word.
    put(
        buf,
        area.x,
        last,
        &fit(&line, area.width as usize),
        area.width,
        style,
    );
}

/// The demo's key hints (`1-9 0 ! @ scenario  c cure  ...`) without those of a key the view
/// answers itself: the view has it first.
fn unshadowed(keys: &str, view: &[super::keys::Key]) -> String {
    keys.split("  ")
        .filter(|hint| {
            let mut key = hint.split(' ').next().unwrap_or("").chars();
            match (key.next(), key.next()) {
                (Some(c), None) => !view
                    .iter()
                    .any(|k| k.codes.contains(&crossterm::event::KeyCode::Char(c))),
                _ => true,
            }
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// The demo's scenario line for a footer of `width`: the scenario, then its keys when they fit
/// whole. Short of room, the service knob ("  ·  settlement 750 ms") goes first (`[ ]` and
/// `+/-` show it again), then the keys.
fn scenario_line<'a>(scenario: &'a str, keys: &'a str, width: u16) -> (Cow<'a, str>, &'a str) {
    let room = (width as usize).saturating_sub(2);
    let fits = |s: &str| keys.is_empty() || unicode_width(s) + 2 + unicode_width(keys) <= room;
    if fits(scenario) {
        return (Cow::Borrowed(scenario), keys);
    }
    if let Some((head, _knob)) = scenario.split_once("  ·  ")
        && fits(head)
    {
        return (Cow::Borrowed(head), keys);
    }
    (Cow::Borrowed(scenario), "")
}

const EMPTY_HINTS: [&str; 1] = ["d demo  ? legend  q quit"];
/// On an empty screen that cannot start the demo (built without it, or no gRPC receiver).
const EMPTY_HINTS_NO_DEMO: [&str; 1] = ["? legend  q quit"];

/// The key hints for the view, the longest that fits `width` whole (so `q quit` is always on
/// the line).
fn hints(state: &State, width: u16) -> String {
    if state.data.is_empty() {
        let choices = if state.demo_startable {
            &EMPTY_HINTS
        } else {
            &EMPTY_HINTS_NO_DEMO
        };
        fitting(choices, width).to_string()
    } else {
        let choices = super::pane(state.ui.view).hints();
        fitting(&choices, width).to_string()
    }
}

/// The first of `choices` (longest first) that fits `width`, else the last.
fn fitting<S: AsRef<str>>(choices: &[S], width: u16) -> &str {
    choices
        .iter()
        .map(AsRef::as_ref)
        .find(|h| unicode_width(h) <= width as usize)
        .or(choices.last().map(AsRef::as_ref))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    use super::*;
    use crate::screen::data::ScreenData;

    fn first_line(grpc: &str) -> String {
        first_line_of(grpc, |_| ())
    }

    fn first_line_of(grpc: &str, set: impl FnOnce(&mut State)) -> String {
        let mut state = State::new(ScreenData::new(Store::new(1000)), Mode::Live);
        set(&mut state);
        state.grpc_addr = grpc.parse().ok();
        state.http_addr = "127.0.0.1:4318".parse().ok();
        let area = Rect::new(0, 0, 120, 3);
        let mut buf = Buffer::empty(area);
        render(&state, Theme { color: false }, area, &mut buf);
        (0..area.width)
            .map(|x| buf[(x, 0)].symbol().to_string())
            .collect()
    }

    #[test]
    fn the_key_hints_fit_and_always_end_with_q_quit() {
        let views = crate::screen::View::ALL.map(|v| super::super::pane(v).hints());
        for choices in [
            EMPTY_HINTS.map(String::from).to_vec(),
            EMPTY_HINTS_NO_DEMO.map(String::from).to_vec(),
        ]
        .into_iter()
        .chain(views)
        {
            for width in 80..=220 {
                let line = fitting(&choices, width);
                assert!(line.ends_with("q quit"), "at {width}: {line}");
                assert!(unicode_width(line) <= width as usize, "at {width}: {line}");
            }
        }
        // The longest shows where it fits: nothing is dropped for no reason.
        let chains = super::super::pane(crate::screen::View::Chains).hints();
        assert_eq!(fitting(&chains, 200), chains[0]);
    }

    #[test]
    fn a_figure_of_the_second_line_is_drawn_whole_or_not_at_all() {
        let labels = [
            "spans/s",
            "chains",
            "dropped",
            "requests refused",
            "unauthenticated",
            "ignored (metrics/logs)",
            "error",
            "warning",
            "info",
            "wasted in all",
            "wasted ms/s",
            "chains judged",
        ];
        for width in 100..=170 {
            let mut state = State::new(ScreenData::new(Store::new(1000)), Mode::Live);
            state.requests_refused_unread = 123_456;
            state.requests_unauthenticated = 7_890;
            state.requests_ignored = 45_678;
            let area = Rect::new(0, 0, width, 3);
            let mut buf = Buffer::empty(area);
            render(&state, Theme { color: false }, area, &mut buf);
            let line: String = (0..width).map(|x| buf[(x, 1)].symbol()).collect();
            let line = line.trim_end();
            assert!(
                labels.iter().any(|l| line.ends_with(l)),
                "at {width}, a label cut: {line}"
            );
            // "0 chains judged" cut to "0 chains" read as the chains held.
            assert!(
                !(line.contains("wasted ms/s") && line.ends_with(" chains")),
                "at {width}: {line}"
            );
        }
    }

    #[test]
    fn the_demos_key_hints_leave_out_a_key_the_view_answers_itself() {
        let keys = "1-9 0 ! @ scenario  c cure  [ ] service  +/- latency";
        // No view takes a demo key: `c` cures in every view, as the workshop's steps say.
        for view in crate::screen::View::ALL {
            let pane = super::super::pane(view).keys();
            assert_eq!(unshadowed(keys, pane), keys, "{view:?}");
        }
        // A view that did answer `c` itself would have it first, and its hint would go.
        let takes_c = [super::super::keys::Key {
            codes: &[crossterm::event::KeyCode::Char('c')],
            long: "c",
            short: "c",
            does: "its own",
            shown: 3,
            answer: |_, _| true,
        }];
        assert_eq!(
            unshadowed(keys, &takes_c),
            "1-9 0 ! @ scenario  [ ] service  +/- latency"
        );
    }

    #[test]
    fn the_header_says_when_receivers_are_open_to_the_network() {
        assert!(!first_line("127.0.0.1:4317").contains("open to the network"));
        let open = first_line("0.0.0.0:4317");
        assert!(open.contains("gRPC 0.0.0.0:4317"), "{open}");
        assert!(open.contains("⚠ open to the network"), "{open}");
    }

    #[test]
    fn the_header_says_what_protects_the_receivers_and_when_anyone_can_send() {
        let plain = first_line_of("127.0.0.1:4317", |s| s.protection = Some("plain, no token"));
        assert!(
            plain.contains("HTTP 127.0.0.1:4318  plain, no token"),
            "{plain}"
        );
        assert!(!plain.contains('⚠'), "{plain}");
        let guarded = first_line_of("0.0.0.0:4317", |s| s.protection = Some("plain, token"));
        assert!(guarded.contains("plain, token"), "{guarded}");
        assert!(guarded.contains("⚠ open to the network"), "{guarded}");
        let open = first_line_of("0.0.0.0:4317", |s| {
            s.protection = Some("plain, no token");
            s.open_to_anyone = true;
        });
        assert!(open.contains("⚠ ANYONE ON THE NETWORK CAN SEND"), "{open}");
    }
}
