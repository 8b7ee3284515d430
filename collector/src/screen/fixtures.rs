//! Fixtures for the screen's tests and benches (feature `fixtures`, which only they turn on): a
//! fixed set of chains that covers every finding kind, at fixed times, and helpers that draw a
//! state into a `TestBackend`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_arguments)]

use std::sync::Arc;

use crate::store::Store;
use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Outcome, Span, SpanId, SpanKind, SpanStatus, TraceId,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::screen::{Mode, ScreenData, State};

/// Where every fixture chain starts (Unix ms): 2025-11-29 15:26:40 UTC.
pub const T0_MS: u64 = 1_764_430_000_000;
/// The screen's clock in the tests: 15 s after `T0_MS`.
pub const NOW_NS: u64 = (T0_MS + 15_000) * 1_000_000;

/// A trace id from a small number.
pub fn tid(n: u64) -> TraceId {
    let mut b = [0u8; 16];
    b[8..].copy_from_slice(&n.to_be_bytes());
    b[0] = 0xab;
    TraceId(b)
}

fn sid(trace: u64, n: u64) -> SpanId {
    SpanId(((trace << 16) | n).to_be_bytes())
}

/// Builds the spans of one chain; times in ms after the chain's own start.
#[derive(Debug)]
pub struct ChainBuilder {
    trace: u64,
    start_ms: u64,
    /// The spans so far.
    pub spans: Vec<Span>,
}

impl ChainBuilder {
    /// A chain `trace` starting `start_ms` after `T0_MS`.
    pub fn new(trace: u64, start_ms: u64) -> Self {
        ChainBuilder {
            trace,
            start_ms,
            spans: Vec::new(),
        }
    }

    /// A span with no budget attributes (as stock instrumentation writes it).
    #[allow(clippy::too_many_arguments)]
    pub fn span(
        &mut self,
        id: u64,
        parent: Option<u64>,
        service: &str,
        name: &str,
        kind: SpanKind,
        start: u64,
        end: u64,
    ) -> &mut Span {
        let t = T0_MS + self.start_ms;
        self.spans.push(Span {
            trace_id: tid(self.trace),
            span_id: sid(self.trace, id),
            parent_span_id: parent.map(|p| sid(self.trace, p)),
            service: Arc::from(service),
            name: Arc::from(name),
            kind,
            start_unix_nano: (t + start) * 1_000_000,
            end_unix_nano: (t + end) * 1_000_000,
            status: SpanStatus::Unset,
            budget: BudgetFacts::default(),
        });
        self.spans.last_mut().unwrap()
    }

    /// A hop that received `received` ms (`None`: no budget, source `none`).
    pub fn hop(
        &mut self,
        id: u64,
        parent: Option<u64>,
        service: &str,
        name: &str,
        start: u64,
        end: u64,
        received: Option<i64>,
    ) -> &mut Span {
        let s = self.span(id, parent, service, name, SpanKind::Server, start, end);
        s.budget.received_ms = received;
        s.budget.source = Some(if received.is_some() {
            BudgetSource::XBudgetMs
        } else {
            BudgetSource::None
        });
        s.budget.outcome = Some(Outcome::Ok);
        if let Some(r) = received {
            s.budget.remaining_at_start_ms = Some(r);
        }
        s
    }

    /// An edge hop that set its own budget.
    pub fn edge(
        &mut self,
        id: u64,
        service: &str,
        name: &str,
        start: u64,
        end: u64,
        default: i64,
    ) -> &mut Span {
        let s = self.span(id, None, service, name, SpanKind::Server, start, end);
        s.budget.default_ms = Some(default);
        s.budget.source = Some(BudgetSource::Default);
        s.budget.remaining_at_start_ms = Some(default);
        s.budget.outcome = Some(Outcome::Ok);
        s
    }

    /// A call that had `remaining` ms left and forwarded `forwarded` (`None`: dropped).
    pub fn call(
        &mut self,
        id: u64,
        parent: u64,
        service: &str,
        name: &str,
        start: u64,
        end: u64,
        remaining: i64,
        forwarded: Option<i64>,
    ) -> &mut Span {
        let s = self.span(
            id,
            Some(parent),
            service,
            name,
            SpanKind::Client,
            start,
            end,
        );
        s.budget.remaining_ms = Some(remaining);
        s.budget.forwarded_ms = forwarded;
        s.budget.timeout_ms = Some(forwarded.unwrap_or(remaining));
        s
    }
}

/// The fixed chains: every finding kind appears at least once, plus a healthy chain.
pub fn fixture_spans() -> Vec<Span> {
    let mut all = Vec::new();

    // 1. checkout: orders forwards a fixed 3000 ms with 700 left (reset); inventory keeps
    //    working 280 ms after orders' call gave up (orphaned work).
    let mut c = ChainBuilder::new(1, 0);
    c.edge(1, "gateway", "POST /checkout", 0, 1000, 1000);
    c.call(2, 1, "gateway", "POST orders", 5, 995, 995, Some(990));
    c.hop(3, Some(2), "orders", "POST /orders", 8, 990, Some(990));
    c.call(4, 3, "orders", "GET inventory", 290, 990, 700, Some(3000));
    c.hop(5, Some(4), "inventory", "GET /stock", 295, 1270, Some(3000));
    all.extend(c.spans);

    // 2. search: frontend calls catalog without forwarding (dropped at the call and the hop).
    let mut c = ChainBuilder::new(2, 2000);
    c.hop(1, None, "frontend", "GET /search", 0, 400, Some(800));
    c.call(2, 1, "frontend", "GET catalog", 10, 390, 790, None);
    c.hop(3, Some(2), "catalog", "GET /items", 12, 385, None);
    all.extend(c.spans);

    // 3. pay: the payment hop waits in its queue past its budget, then works anyway
    //    (queue pressure, ran after expiry).
    //    The user got a 504.
    let mut c = ChainBuilder::new(3, 4000);
    let g = c.edge(1, "gateway", "POST /pay", 0, 900, 500);
    g.budget.outcome = Some(Outcome::DeadlineExceeded);
    g.budget.http_status = Some(504);
    c.call(2, 1, "gateway", "POST payments", 5, 505, 495, Some(490));
    let h = c.hop(3, Some(2), "payments", "POST /charge", 8, 800, Some(490));
    h.budget.queue_wait_ms = Some(520);
    h.budget.remaining_at_start_ms = Some(-30);
    all.extend(c.spans);

    // 4. shed: one queue sheds an expired item, another is full (the right behaviour); the
    //    user is told 503.
    let mut c = ChainBuilder::new(4, 6000);
    let g = c.edge(1, "gateway", "GET /report", 0, 300, 250);
    g.budget.outcome = Some(Outcome::ShedFull);
    g.budget.http_status = Some(503);
    c.call(2, 1, "gateway", "GET reports", 5, 260, 245, Some(240));
    let h = c.hop(3, Some(2), "reports", "GET /report", 7, 255, Some(240));
    h.budget.queue_wait_ms = Some(248);
    h.budget.remaining_at_start_ms = Some(-8);
    h.budget.outcome = Some(Outcome::ShedExpired);
    h.status = SpanStatus::Error;
    c.call(4, 1, "gateway", "GET audit", 262, 270, 0, Some(1));
    let h = c.hop(5, Some(4), "audit", "GET /log", 263, 265, Some(1));
    h.budget.outcome = Some(Outcome::ShedFull);
    h.budget.remaining_at_start_ms = None;
    h.status = SpanStatus::Error;
    all.extend(c.spans);

    // 5. retry: two attempts that together forward more than remained.
    let mut c = ChainBuilder::new(5, 8000);
    c.hop(1, None, "cart", "PUT /cart", 0, 700, Some(600));
    let a = c.call(2, 1, "cart", "PUT pricing", 5, 305, 595, Some(400));
    a.budget.attempt = Some(1);
    a.budget.outcome = Some(Outcome::DeadlineExceeded);
    let a = c.call(3, 1, "cart", "PUT pricing", 310, 600, 290, Some(400));
    a.budget.attempt = Some(2);
    c.hop(4, Some(2), "pricing", "PUT /price", 7, 300, Some(400));
    c.hop(5, Some(3), "pricing", "PUT /price", 312, 598, Some(400));
    all.extend(c.spans);

    // 6. skew: a child that starts 40 ms before its parent (another host's clock).
    let mut c = ChainBuilder::new(6, 10_000);
    c.hop(1, None, "mobile-api", "GET /feed", 50, 400, Some(1500));
    c.call(2, 1, "mobile-api", "GET ranker", 60, 380, 1490, Some(1400));
    c.hop(3, Some(2), "ranker", "GET /rank", 20, 370, Some(1400));
    all.extend(c.spans);

    // 7. healthy: the budget is passed on and every hop finishes in time.
    let mut c = ChainBuilder::new(7, 12_000);
    c.edge(1, "gateway", "GET /home", 0, 180, 800);
    c.call(2, 1, "gateway", "GET profile", 5, 170, 795, Some(790));
    c.hop(3, Some(2), "profile", "GET /me", 7, 165, Some(790));
    c.call(4, 3, "profile", "GET avatars", 20, 120, 775, Some(770));
    c.hop(5, Some(4), "avatars", "GET /a", 22, 118, Some(770));
    all.extend(c.spans);

    // 8. a service with a hostile name: escape sequences, bidirectional overrides and
    // zero-width characters must not reach the terminal.
    let mut c = ChainBuilder::new(8, 14_000);
    c.hop(
        1,
        None,
        "evil\u{1b}[2J\u{1b}[31m\u{202e}svc\u{200b}",
        "GET /\u{7}bell\u{2066}\nline\u{feff}",
        0,
        50,
        Some(100),
    );
    all.extend(c.spans);

    // 9. layered fixed timeouts: the proxy gives the app 1000 ms; the app spends 940 ms in its
    //    database, then calls payments with an 800 ms timeout (timeout inverted), and goes on
    //    after the proxy has answered 504 (orphaned work).
    let mut c = ChainBuilder::new(9, 16_000);
    let p = c.span(1, None, "proxy", "POST /order", SpanKind::Server, 0, 1010);
    p.budget.http_status = Some(504);
    let to_app = c.span(2, Some(1), "proxy", "POST app", SpanKind::Client, 5, 1005);
    to_app.budget.timeout_ms = Some(1000);
    to_app.status = SpanStatus::Error;
    c.span(3, Some(2), "app", "POST /order", SpanKind::Server, 6, 1753);
    c.span(
        4,
        Some(3),
        "app",
        "SELECT orders",
        SpanKind::Client,
        10,
        950,
    );
    let out = c.span(
        5,
        Some(3),
        "app",
        "POST payments",
        SpanKind::Client,
        952,
        1752,
    );
    out.budget.timeout_ms = Some(800);
    out.status = SpanStatus::Error;
    c.span(
        6,
        Some(5),
        "payments",
        "POST /pay",
        SpanKind::Server,
        953,
        1760,
    );
    all.extend(c.spans);

    // 10. layered retries: storefront tries basket twice, and each basket tries warehouse
    //     twice: warehouse is called 4 times for one request (retry amplified), every attempt
    //     within its budget. Older than every chain but the first, so the newest-first list
    //     keeps the others where they were.
    let mut c = ChainBuilder::new(10, 1_000);
    c.edge(1, "storefront", "GET /cart", 0, 900, 1000);
    for (attempt, at, ids) in [(1, 5, 2), (2, 450, 8)] {
        let to_basket = c.call(
            ids,
            1,
            "storefront",
            "GET basket",
            at,
            at + 440,
            1000 - at as i64,
            Some(440),
        );
        to_basket.budget.attempt = Some(attempt);
        c.hop(
            ids + 1,
            Some(ids),
            "basket",
            "GET /basket",
            at + 2,
            at + 435,
            Some(440),
        );
        for (inner, from, id) in [(1, at + 5, ids + 2), (2, at + 217, ids + 4)] {
            let left = 440 - (from - at - 2) as i64;
            let to_warehouse = c.call(
                id,
                ids + 1,
                "basket",
                "GET warehouse",
                from,
                from + 210,
                left,
                Some(200),
            );
            to_warehouse.budget.attempt = Some(inner);
            c.hop(
                id + 1,
                Some(id),
                "warehouse",
                "GET /stock",
                from + 2,
                from + 208,
                Some(200),
            );
        }
    }
    all.extend(c.spans);

    all
}

/// A state holding the fixture chains, clock pinned, colour as asked. Chains are judged as soon
/// as they are quiet (`--settle 0s`): the totals a screenshot shows are the chains drawn.
pub fn fixture_state(color: bool) -> State {
    let mut data = ScreenData::new(Store::new(1_000_000).with_settle(std::time::Duration::ZERO));
    data.add_spans(fixture_spans(), NOW_NS);
    let mut state = State::new(data, Mode::Live);
    state.ui.color = color;
    state.now_unix_nano = NOW_NS;
    state.grpc_addr = Some("127.0.0.1:4317".parse().unwrap());
    state.http_addr = Some("127.0.0.1:4318".parse().unwrap());
    state.settle();
    state
}

/// An empty state (nothing received yet).
pub fn empty_state() -> State {
    let store = Store::new(1000).with_settle(std::time::Duration::ZERO);
    let mut state = State::new(ScreenData::new(store), Mode::Live);
    state.ui.color = false;
    state.now_unix_nano = NOW_NS;
    state.grpc_addr = Some("127.0.0.1:4317".parse().unwrap());
    state.http_addr = Some("127.0.0.1:4318".parse().unwrap());
    state.settle();
    state
}

/// Draw `state` on a `w`x`h` test terminal.
pub fn draw(state: &State, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|f| crate::screen::render(state, f.area(), f.buffer_mut()))
        .unwrap();
    terminal
}

/// The screen's text, one line per row (trailing spaces kept).
pub fn screen_text(terminal: &Terminal<TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// A state holding `services` services that call each other as a tree of three (`svc-00` the
/// edge, `svc-n` calling `svc-3n+1` to `svc-3n+3`): three chains down to each service, every
/// fifth call forwarding 3000 ms with less left (a reset; its callee runs on for nobody). The
/// Map of many services, for the tests and the bench; shown on the Map, clock pinned.
pub fn many_services_state(services: usize) -> State {
    let mut data = ScreenData::new(Store::new(1_000_000).with_settle(std::time::Duration::ZERO));
    let name = |i: usize| format!("svc-{i:02}");
    let mut spans = Vec::new();
    let mut trace = 10_000;
    for target in 0..services {
        let mut path = vec![target];
        while let Some(&last) = path.last().filter(|&&n| n > 0) {
            path.push((last - 1) / 3);
        }
        path.reverse();
        for copy in 0..3u64 {
            trace += 1;
            let mut c = ChainBuilder::new(trace, (target as u64 * 3 + copy) * 50);
            let mut end = 900u64;
            c.edge(1, &name(0), "GET /", 0, end, 1000);
            let mut budget = 1000i64;
            for (depth, pair) in path.windows(2).enumerate() {
                let (from, to) = (pair[0], pair[1]);
                let d = depth as u64;
                let (call, hop) = (2 * d + 2, 2 * d + 3);
                let parent = if d == 0 { 1 } else { 2 * d + 1 };
                let start = 10 * (d + 1);
                let left = budget - 10;
                let reset = to % 5 == 0;
                let forwarded = if reset { 3000 } else { left - 5 };
                let callee_end = if reset { end + 400 } else { end - 10 };
                c.call(
                    call,
                    parent,
                    &name(from),
                    &format!("GET {}", name(to)),
                    start,
                    end - 5,
                    left,
                    Some(forwarded),
                );
                c.hop(
                    hop,
                    Some(call),
                    &name(to),
                    "GET /",
                    start + 1,
                    callee_end,
                    Some(forwarded),
                );
                budget = forwarded;
                end = callee_end.min(end - 10).max(start + 20);
            }
            spans.extend(c.spans);
        }
    }
    data.add_spans(spans, NOW_NS);
    let mut state = State::new(data, Mode::Live);
    state.ui.color = true;
    state.now_unix_nano = NOW_NS;
    state.settle();
    state.ui.view = crate::screen::View::Map;
    state.data.map_wanted = true;
    state.data.refresh_tables();
    state
}
