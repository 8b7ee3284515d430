//! Frame render time with 100,000 chains held, at 200x60: the cost of one redraw of the chain
//! list + waterfall (the default view), the edges view and the services view. Target: < 5 ms.
//! And the Map of 50 services: a frame (target: < 2 ms) and the map's build from the totals
//! (once a second while it is shown).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use budget_top::screen;

use std::hint::black_box;

use budget_top::store::Store;
use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use budget_top::screen::fixtures::{ChainBuilder, NOW_NS, many_services_state};
use budget_top::view_model::map::ServiceMap;
use screen::{Mode, ScreenData, State, View};

const CHAINS: u64 = 100_000;

/// 100,000 chains of 5 spans, one in four with a reset and orphaned work.
fn big_state() -> State {
    let mut data = ScreenData::new(Store::new(1_000_000));
    let mut spans = Vec::with_capacity(CHAINS as usize * 5);
    for t in 0..CHAINS {
        let mut c = ChainBuilder::new(t + 1000, t / 10);
        let services = ["gateway", "orders", "inventory", "payments", "search"];
        let callee = services[(t % 4 + 1) as usize];
        c.edge(1, "gateway", "POST /checkout", 0, 400 + t % 300, 1000);
        c.call(2, 1, "gateway", "POST call", 5, 390, 995, Some(990));
        let reset = t % 4 == 0;
        c.hop(
            3,
            Some(2),
            callee,
            "POST /work",
            8,
            if reset { 1300 } else { 380 },
            Some(990),
        );
        c.call(
            4,
            3,
            callee,
            "GET inventory",
            100,
            370,
            700,
            Some(if reset { 3000 } else { 690 }),
        );
        c.hop(
            5,
            Some(4),
            "inventory",
            "GET /stock",
            105,
            if reset { 1270 } else { 360 },
            Some(690),
        );
        spans.extend(c.spans);
    }
    data.add_spans(spans, NOW_NS);
    let mut state = State::new(data, Mode::Live);
    state.ui.color = true;
    state.now_unix_nano = NOW_NS;
    // The loop analyses a slice per frame and rebuilds the list at most once per ten times
    // its cost: settle (bounded) until every chain is analysed and listed.
    for _ in 0..10_000 {
        state.settle();
        if !state.data.store.has_dirty() && state.data.visible.len() == CHAINS as usize {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    state.ui.view = View::Services;
    state.settle();
    state.ui.view = View::Chains;
    state
}

fn render_frames(c: &mut Criterion) {
    let mut state = big_state();
    assert_eq!(state.data.visible.len(), CHAINS as usize);
    let area = Rect::new(0, 0, 200, 60);
    let mut buf = Buffer::empty(area);
    for (name, view) in [
        ("chains+waterfall", View::Chains),
        ("waterfall", View::Waterfall),
        ("edges", View::Edges),
        ("services", View::Services),
    ] {
        state.ui.view = view;
        c.bench_function(&format!("frame 200x60, 100k chains, {name}"), |b| {
            b.iter(|| {
                buf.reset();
                screen::render(black_box(&state), area, &mut buf);
            })
        });
    }
    // The list scrolled to the middle: only the rows on screen are drawn.
    state.ui.view = View::Chains;
    state.ui.selected = 50_000;
    c.bench_function("frame 200x60, 100k chains, list scrolled to 50,000", |b| {
        b.iter(|| {
            buf.reset();
            screen::render(black_box(&state), area, &mut buf);
        })
    });
}

/// What the loop pays on a tick when one chain arrived: analyse it, and rebuild the list order
/// when the throttle allows (amortised), and what one full rebuild of the list costs.
fn settle_tick(c: &mut Criterion) {
    let mut state = big_state();
    let mut n = 0u64;
    c.bench_function(
        "settle: one new chain per tick, 100k held (amortised)",
        |b| {
            b.iter(|| {
                n += 1;
                let mut chain = ChainBuilder::new(10_000_000 + n, 20_000);
                chain.edge(1, "gateway", "GET /new", 0, 10, 100);
                state.data.add_spans(chain.spans, NOW_NS);
                black_box(state.settle());
            })
        },
    );
    let mut state = big_state();
    c.bench_function("list rebuild: 100k chains, sorted", |b| {
        b.iter(|| {
            state.ui.query.sort = state.ui.query.sort.next();
            black_box(state.settle());
        })
    });
}

/// The Map of 50 services: one frame at 200x60 and at 80x24, and the map built anew from the
/// totals (layout included), as the screen does once a second while the Map shows.
fn map_frames(c: &mut Criterion) {
    let state = many_services_state(50);
    let map = state.data.map.as_ref().unwrap();
    assert_eq!(map.boxes.len(), 50);
    for (w, h) in [(200, 60), (80, 24)] {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        c.bench_function(&format!("frame {w}x{h}, the Map of 50 services"), |b| {
            b.iter(|| {
                buf.reset();
                screen::render(black_box(&state), area, &mut buf);
            })
        });
    }
    let totals = state.data.table_totals();
    c.bench_function("the map of 50 services, built from the totals", |b| {
        b.iter(|| black_box(ServiceMap::of_totals(black_box(totals))))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = render_frames, settle_tick, map_frames
}
criterion_main!(benches);
