//! The Edges and Services tables: the store's totals, the same waste as the list, and `m` for
//! the last minute.

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State, View};
use crossterm::event::KeyCode;

use crate::support::{call_to, key, snap};

#[test]
fn edges_view_names_the_broken_links() {
    let mut state = fixture_state(false);
    key(&mut state, KeyCode::Tab);
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Edges);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("edges", &state, w, h);
        assert!(text.contains("orders → inventory"));
        assert!(text.contains("frontend → catalog"));
    }
    // Enter on the worst edge lists the chains through its callee.
    key(&mut state, KeyCode::Enter);
    state.settle();
    assert_eq!(state.ui.view, View::Chains);
    assert_eq!(state.ui.query.search, "inventory");
    assert_eq!(state.data.visible, vec![tid(1)]);
}

#[test]
fn services_view_shows_littles_law_and_dead_work() {
    let mut state = fixture_state(false);
    // Shift-Tab from the list: the Map, then Services.
    key(&mut state, KeyCode::BackTab);
    key(&mut state, KeyCode::BackTab);
    assert_eq!(state.ui.view, View::Services);
    state.settle();
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("services", &state, w, h);
        assert!(text.contains("payments"));
        assert!(text.contains("Little's law"), "{text}");
    }
    let payments = state
        .data
        .services
        .iter()
        .find(|(n, _)| &**n == "payments")
        .unwrap();
    assert!(
        payments.1.dead_share() > 0.3,
        "payments worked mostly for nobody"
    );
}

/// One truth on every screen: the chain list's wasted ms, the services' dead work and the
/// edges' waste are the same milliseconds (a root hop's own dead work has no edge into it).
#[test]
fn the_list_the_services_and_the_edges_count_the_same_waste() {
    let mut state = fixture_state(false);
    key(&mut state, KeyCode::BackTab);
    key(&mut state, KeyCode::BackTab);
    assert_eq!(state.ui.view, View::Services);
    state.settle();
    let mut chains = 0;
    let mut roots = 0;
    for id in &state.data.visible {
        let view = state.data.chain_view(id).unwrap();
        chains += view.summary.wasted_ms;
        roots += view
            .rows()
            .filter(|(row, span)| row.parent_row.is_none() && span.kind.is_hop())
            .map(|(row, _)| i64::from(row.dead_ms))
            .sum::<i64>();
    }
    let services: i64 = state
        .data
        .services
        .iter()
        .map(|(_, s)| s.totals.wasted_ms)
        .sum();
    let edges: i64 = state.data.store.edges().iter().map(|e| e.wasted_ms).sum();
    assert!(chains > 0);
    assert_eq!(services, chains);
    assert_eq!(state.data.store.wasted_ms(), chains);
    assert_eq!(edges, chains - roots);
    // The cart chain's root answered past the budget it was given: a late answer, not dead
    // work (no span shows its caller gone); no fixture's root works past its own span's end.
    assert_eq!(roots, 0);
}

/// The Edges and Services tables are the store's totals (`CONVENTIONS.md` section 6): every
/// chain judged, evicted ones included; `m` switches both to the chains judged in the last
/// minute, and back; the header says so.
#[test]
fn m_shows_the_tables_over_the_last_minute_evicted_chains_counted() {
    use budget_top::screen::ScreenData;
    use budget_top::store::Store;
    let s = 1_000_000_000;
    let store = Store::new(6).with_settle(std::time::Duration::ZERO);
    let mut state = State::new(ScreenData::new(store), screen::Mode::Live);
    state.ui.view = View::Edges;
    state.now_unix_nano = NOW_NS;
    state.data.add_spans(call_to(1, "orders"), NOW_NS);
    state.data.add_spans(call_to(2, "orders"), NOW_NS);
    state.settle();
    // 90 s later: two chains to payments; the orders chains leave memory (6 spans at most).
    state.now_unix_nano = NOW_NS + 90 * s;
    state
        .data
        .add_spans(call_to(3, "payments"), NOW_NS + 90 * s);
    state
        .data
        .add_spans(call_to(4, "payments"), NOW_NS + 90 * s);
    state.settle();
    assert_eq!(state.data.store.counters().chains_evicted, 2);
    let calls = |state: &State| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = state
            .data
            .table_totals()
            .edges
            .sorted()
            .iter()
            .map(|e| (e.callee.to_string(), e.calls))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        calls(&state),
        [("orders".into(), 2), ("payments".into(), 2)],
        "since start, the evicted chains counted"
    );
    assert!(key(&mut state, KeyCode::Char('m')));
    assert_eq!(calls(&state), [("payments".into(), 2)], "the last minute");
    let text = screen_text(&draw(&state, 120, 30));
    assert!(text.contains("tables: last minute"), "{text}");
    assert!(text.contains("m minute/all"), "{text}");
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Services);
    let services: Vec<&str> = state.data.services.iter().map(|(n, _)| &**n).collect();
    assert!(!services.contains(&"orders"), "{services:?}");
    assert!(services.contains(&"payments"), "{services:?}");
    let text = screen_text(&draw(&state, 120, 30));
    assert!(text.contains("last minute (m: since start)"), "{text}");
    assert!(key(&mut state, KeyCode::Char('m')));
    let services: Vec<&str> = state.data.services.iter().map(|(n, _)| &**n).collect();
    assert!(services.contains(&"orders"), "{services:?}");
    assert_eq!(calls(&state).len(), 2, "since start again");
}
