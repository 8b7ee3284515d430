//! What every view shares: the fixtures behind them, what fits at 80x24 (and below), colour and
//! its absence, hostile text from spans, and the empty screen.

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, View};
use crossterm::event::KeyCode;
use ratatui::style::Color;

use crate::support::{key, select_chain, snap};

#[test]
fn fixtures_cover_every_finding_kind() {
    let state = fixture_state(false);
    let mut seen = std::collections::BTreeSet::new();
    for id in &state.data.visible {
        let a = state.data.analysis(id).unwrap();
        for f in &a.findings {
            seen.insert(f.kind);
        }
    }
    for k in deadline_budget::analysis::FindingKind::ALL {
        // Judged per edge over at least 20 calls, or across chains for a report (the
        // analysis's tests cover them).
        if matches!(
            k,
            deadline_budget::analysis::FindingKind::TimeoutOversized
                | deadline_budget::analysis::FindingKind::ContextLost
        ) {
            continue;
        }
        assert!(seen.contains(&k), "no fixture shows {k}");
    }
}

/// What does not fit is marked or left out whole, never cut mid-word without a sign: names
/// end in `…`, the trace id shows whole or not at all, the table notes pick a shorter text.
#[test]
fn narrow_screens_mark_or_leave_out_what_does_not_fit() {
    let mut state = fixture_state(false);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("svc GET…"), "{text}");
    // On a wide screen the figures stay near the name they belong to.
    let wide = screen_text(&draw(&state, 200, 60));
    let row = wide
        .lines()
        .find(|l| l.contains("gateway POST /checkout"))
        .unwrap();
    let gap = row.find("1000ms").unwrap() - row.find("gateway").unwrap();
    assert!(gap < 72, "{row}");
    select_chain(&mut state, 1);
    key(&mut state, KeyCode::Enter);
    let trace = format!("trace {}", tid(1));
    let narrow = screen_text(&draw(&state, 80, 24));
    let title = narrow.lines().nth(3).unwrap();
    assert!(!title.contains("trace"), "{title}");
    let wide = screen_text(&draw(&state, 200, 60));
    assert!(wide.contains(&trace), "{wide}");
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Edges);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("TMO ~inferred"), "{text}");
    key(&mut state, KeyCode::Tab);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("DEAD work for nobody"), "{text}");
}

/// Below 80x24 the screen says what to do instead of drawing a broken layout.
#[test]
fn a_window_below_80x24_asks_to_be_made_bigger() {
    let state = fixture_state(false);
    for (w, h) in [(79, 24), (80, 23), (40, 10)] {
        let text = screen_text(&draw(&state, w, h));
        assert!(text.contains("make it bigger"), "{w}x{h}: {text}");
        assert!(!text.contains("Chains │"), "{w}x{h}: {text}");
    }
    assert!(!screen_text(&draw(&state, 80, 24)).contains("make it bigger"));
}

/// At 80x24 a line too long for the screen ends with `…` (a message, the header's coverage
/// warning), and an axis label is drawn whole or not at all: `┆3000ms` cut to `┆30` read as 30.
#[test]
fn lines_cut_at_80_columns_say_so() {
    use budget_top::screen::ScreenData;
    use budget_top::store::Store;
    let mut state = fixture_state(false);
    state.ui.message = Some(format!(
        "exported chain {} to budget-top-export.jsonl (check --input or replay reads it)",
        "0123456789abcdef".repeat(2)
    ));
    let text = screen_text(&draw(&state, 80, 24));
    let footer = text.lines().last().unwrap();
    assert!(footer.ends_with('…'), "{footer:?}");
    assert!(footer.starts_with("exported chain 0123"), "{footer:?}");

    // Stock instrumentation only: no hop carries a budget, and the header says so (once the
    // chain is judged: at once, with --settle 0s).
    let mut data = ScreenData::new(Store::new(1000).with_settle(std::time::Duration::ZERO));
    let mut c = ChainBuilder::new(1, 0);
    c.span(
        1,
        None,
        "gateway",
        "GET /",
        deadline_budget::analysis::SpanKind::Server,
        0,
        100,
    );
    data.add_spans(c.spans, NOW_NS);
    let mut blind = screen::State::new(data, screen::Mode::Live);
    blind.now_unix_nano = NOW_NS;
    blind.settle();
    let text = screen_text(&draw(&blind, 80, 24));
    let warning = text
        .lines()
        .find(|l| l.contains("⚠ budget"))
        .unwrap_or_else(|| panic!("{text}"));
    // At 80 columns the shorter form, whole: what to do is on the line, not cut off.
    assert!(
        warning.trim_end().ends_with("--budget-header"),
        "{warning:?}"
    );
    assert!(!warning.contains('…'), "{warning:?}");
    let text = screen_text(&draw(&blind, 200, 60));
    assert!(
        text.contains("⚠ budget known on 0 of 1 hops: add --budget-header or the contract's attributes (none: gateway)"),
        "whole where it fits: {text}"
    );

    // Every axis label of every waterfall at 80 columns is whole: a number and its unit.
    for trace in [1, 2, 3, 4, 9] {
        select_chain(&mut state, trace);
        key(&mut state, KeyCode::Enter);
        let text = screen_text(&draw(&state, 80, 24));
        let axis = text
            .lines()
            .find(|l| l.contains("┆0ms"))
            .unwrap_or_else(|| panic!("no axis: {text}"));
        for label in axis.split('┆').skip(1) {
            let label = label.trim_end();
            assert!(
                label.ends_with("ms") || label.ends_with('s'),
                "axis label {label:?} cut: {axis:?}"
            );
        }
        key(&mut state, KeyCode::Esc);
    }
}

#[test]
fn control_characters_from_spans_never_reach_the_screen() {
    let state = fixture_state(true);
    let terminal = draw(&state, 200, 60);
    let buf = terminal.backend().buffer();
    for cell in buf.content() {
        assert!(
            !cell.symbol().chars().any(char::is_control),
            "{:?}",
            cell.symbol()
        );
    }
    assert!(screen_text(&terminal).contains("evil[2J[31msvc"));
    // Nor bidirectional overrides or zero-width characters.
    for cell in buf.content() {
        assert!(
            !cell
                .symbol()
                .chars()
                .any(budget_top::span_text::is_unsafe_char),
            "{:?}",
            cell.symbol()
        );
    }
}

#[test]
fn no_color_draws_without_colour_but_with_the_same_text() {
    let plain = draw(&fixture_state(false), 200, 60);
    let coloured = draw(&fixture_state(true), 200, 60);
    assert_eq!(screen_text(&plain), screen_text(&coloured));
    let uses = |t: &ratatui::Terminal<ratatui::backend::TestBackend>| {
        t.backend()
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg != Color::Reset || c.bg != Color::Reset)
    };
    assert!(!uses(&plain));
    assert!(uses(&coloured));
    // The legend never explains by colour alone.
    for (color, says) in [
        (false, "(past │: more than remained)"),
        (true, "(red: more than remained)"),
    ] {
        let mut state = fixture_state(color);
        key(&mut state, KeyCode::Char('?'));
        let text = screen_text(&draw(&state, 120, 60));
        assert!(text.contains(says), "{text}");
    }
    // In colour, the worst finding is red.
    let buf = coloured.backend().buffer();
    let red = buf
        .content()
        .iter()
        .filter(|c| c.fg == Color::Red && c.symbol() == "✖")
        .count();
    assert!(red >= 1);
}

#[test]
fn empty_state_tells_the_user_what_to_set() {
    let mut state = empty_state();
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("empty", &state, w, h);
        assert!(text.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317"));
        assert!(text.contains("press d to start the demo"));
    }
    key(&mut state, KeyCode::Char('d'));
    assert!(state.ui.start_demo_requested);
}

/// Built without the demo (or listening without gRPC, where the demo exports), the empty
/// screen does not offer `d`, and `d` does nothing.
#[test]
fn an_empty_screen_that_cannot_start_the_demo_does_not_offer_it() {
    let mut state = empty_state();
    state.demo_startable = false;
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317"));
    assert!(!text.contains("press d"), "{text}");
    assert!(!text.contains("d demo"), "{text}");
    assert!(text.contains("? legend  q quit"), "{text}");
    assert!(!key(&mut state, KeyCode::Char('d')));
    assert!(!state.ui.start_demo_requested);
    assert_eq!(state.ui.message, None);
}
