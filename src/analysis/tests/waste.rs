//! Dead work counted once along a path, untraced callees, abandoned calls and proxies that
//! record one span (`CONVENTIONS.md` section 3): each rule at its edge, against a truth
//! computed by hand from the spans' times.

use super::*;

/// A hop with no budget attributes, as stock instrumentation writes it.
fn stock(id: u64, parent: Option<u64>, service: &str, start: u64, end: u64) -> Span {
    span(id, parent, service, SpanKind::Server, start, end)
}

/// A CLIENT span with no budget attributes.
fn client(id: u64, parent: u64, service: &str, start: u64, end: u64) -> Span {
    span(id, Some(parent), service, SpanKind::Client, start, end)
}

/// Each edge's (caller, callee, untraced, wasted ms).
fn edges(a: &ChainAnalysis) -> Vec<(String, String, bool, i64)> {
    a.edges
        .iter()
        .map(|e| {
            (
                e.caller.to_string(),
                e.callee.to_string(),
                e.untraced,
                e.wasted_ms,
            )
        })
        .collect()
}

#[test]
fn two_calls_in_parallel_each_count_their_own_callee() {
    // The user's gateway gives up at 300; api fans out to stock (works to 800) and prices (to
    // 600) at once and waits for both: every instant after 300 is the callees' work, not api's.
    let spans = vec![
        stock(1, None, "gateway", 0, 1000),
        client(2, 1, "gateway", 5, 300),
        stock(3, Some(2), "api", 10, 810),
        client(4, 3, "api", 20, 805),
        stock(5, Some(4), "stock", 21, 800),
        client(6, 3, "api", 20, 605),
        stock(7, Some(6), "prices", 22, 600),
    ];
    let a = analyse(spans);
    // api: 300..810, waiting on one call or the other until 805: its own 5 ms.
    assert_eq!(
        dead_by_service(&a),
        vec![
            ("api".to_owned(), 5),
            ("stock".to_owned(), 500),
            ("prices".to_owned(), 300)
        ]
    );
    assert_eq!(a.summary.wasted_ms, 805);
    let api = a.rows.iter().find(|r| r.span == 2).unwrap();
    assert_eq!((api.waiting_ms, api.late_ms), (505, 5));
}

#[test]
fn a_wait_on_a_traced_callee_that_itself_waits_counts_nowhere_twice() {
    // gateway gives up at 1000; bff waits on orders, orders on inventory, inventory works on
    // to 1600: inventory's 600 ms and the few ms each hop spends after its call returns.
    let spans = vec![
        stock(1, None, "gateway", 0, 1000),
        client(2, 1, "gateway", 5, 1000),
        stock(3, Some(2), "bff", 6, 1620),
        client(4, 3, "bff", 10, 1610),
        stock(5, Some(4), "orders", 11, 1608),
        client(6, 5, "orders", 40, 1600),
        stock(7, Some(6), "inventory", 41, 1600),
    ];
    let a = analyse(spans);
    assert_eq!(
        dead_by_service(&a),
        vec![
            ("bff".to_owned(), 10),
            ("orders".to_owned(), 8),
            ("inventory".to_owned(), 600)
        ]
    );
    assert_eq!(a.summary.wasted_ms, 618);
    // bff's own caller gave up: its finding names the work below it, each part once.
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::OrphanedWork)
        .unwrap();
    assert_eq!(f.span_id, sid(3));
    assert_eq!(f.wasted_ms, Some(618));
    assert_eq!(
        f.message,
        "bff went on 620 ms (10 ms of its own work) after gateway stopped waiting; 608 ms of work below it for nobody: orders 8, inventory 600"
    );
    let on_edges: Vec<i64> = a.edges.iter().map(|e| e.wasted_ms).collect();
    assert_eq!(on_edges, vec![10, 8, 600]);
}

#[test]
fn work_beside_an_open_call_is_work() {
    // After its caller gave up at 500, api renders a page (an internal span) while its call
    // is still open: that is work, not waiting.
    let spans = vec![
        stock(1, None, "edge", 0, 1000),
        client(2, 1, "edge", 5, 500),
        stock(3, Some(2), "api", 6, 900),
        client(4, 3, "api", 10, 800),
        stock(5, Some(4), "worker", 11, 800),
        span(6, Some(3), "api", SpanKind::Internal, 600, 700),
    ];
    let a = analyse(spans);
    // api: 500..900, waiting 500..800 but working 600..700 meanwhile: 100 + 100.
    assert_eq!(
        dead_by_service(&a),
        vec![("api".to_owned(), 200), ("worker".to_owned(), 300)]
    );
}

/// A Flask app behind a gateway that gives up at 1000: the app queries PostgreSQL (stock
/// psycopg2 names its spans `SET` and `SELECT` and says `db.system` and `net.peer.name`).
fn app_and_database(slow_select: u64) -> Vec<Span> {
    let mut set = client(4, 3, "app", 20, 22);
    set.name = Arc::from("SET");
    let mut select = client(5, 3, "app", 30, slow_select);
    select.name = Arc::from("SELECT");
    for s in [&mut set, &mut select] {
        s.budget.callee_name = Some(Arc::from("postgresql"));
    }
    vec![
        stock(1, None, "gateway", 0, 1000),
        client(2, 1, "gateway", 2, 1000),
        stock(3, Some(2), "app", 4, slow_select + 5),
        set,
        select,
    ]
}

#[test]
fn a_wait_on_an_untraced_callee_is_dead_work_on_its_own_edge_once() {
    let a = analyse(app_and_database(1600));
    // The app only waited on the database after the gateway left: 600 ms, on app ->
    // postgresql; the edge into the app carries its own 5 ms.
    assert_eq!(dead_by_service(&a), vec![("app".to_owned(), 605)]);
    assert_eq!(a.summary.wasted_ms, 605);
    assert_eq!(
        edges(&a),
        vec![
            ("gateway".into(), "app".into(), false, 5),
            ("app".into(), "postgresql".into(), true, 0),
            ("app".into(), "postgresql".into(), true, 600)
        ]
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::OrphanedWork)
        .unwrap();
    assert_eq!(f.wasted_ms, Some(605));
    assert_eq!(
        f.message,
        "app went on 605 ms (5 ms of its own work) after gateway stopped waiting; 600 ms of work below it for nobody: postgresql 600"
    );
    // A database call carries no budget attributes: it is no budget_dropped, even below a
    // hop that had a budget.
    let mut spans = app_and_database(1600);
    spans[2].budget.received_ms = Some(990);
    spans[2].budget.source = Some(BudgetSource::XBudgetMs);
    let a = analyse(spans);
    assert!(
        a.findings
            .iter()
            .all(|f| f.kind != FindingKind::BudgetDropped)
    );
    // The waterfall draws the app waiting, the query's tail as the work for nobody.
    let select = a.rows.iter().find(|r| r.span == 4).unwrap();
    assert_eq!(select.late_ms, 600);
    let app = a.rows.iter().find(|r| r.span == 2).unwrap();
    assert_eq!((app.waiting_ms, app.late_ms), (600, 5));
    // That wait is dead work already (on app → postgresql): no request held for nobody.
    assert_eq!((app.dead_ms, app.held_ms), (605, 0));
}

#[test]
fn an_untraced_callee_is_named_as_the_contract_says() {
    let mut spans = app_and_database(900);
    spans[4].budget.callee_name = None;
    let a = analyse(spans);
    // Nothing names it: the span's name.
    assert_eq!(a.edges[2].callee.as_ref(), "SELECT");
    // A refused call was never made: no edge.
    let mut spans = app_and_database(900);
    spans[4].budget.outcome = Some(Outcome::Refused);
    assert_eq!(analyse(spans).edges.len(), 2);
}

/// `n` calls of app -> postgresql that failed after `ms` ms, as `error_type` and the words
/// the collector read say.
fn database_failures(n: u64, ms: u64, error_type: &str, other_cause: bool) -> EdgeStats {
    let mut stats = EdgeStats::new();
    for i in 0..n {
        let mut chain = Chain::new(TraceId([i as u8 + 1; 16]));
        let mut spans = app_and_database(30 + ms);
        spans[4].status = SpanStatus::Error;
        spans[4].budget.exception_event = true;
        spans[4].budget.error_type = Some(Arc::from(error_type));
        spans[4].budget.other_cause = other_cause;
        for mut s in spans {
            s.trace_id = chain.trace_id();
            chain.insert(s);
        }
        stats.add(&chain.analyse(&Options::default()));
    }
    stats
}

#[test]
fn a_cancelled_query_infers_its_timeout_and_fast_failures_of_another_cause_infer_none() {
    // statement_timeout = 950 ms: psycopg2 raises QueryCanceled at 950.
    let stats = database_failures(3, 950, "QueryCanceled", false);
    let e = stats.get("app", "postgresql").unwrap();
    assert_eq!(e.timeout(), Some((950, true)));
    assert!(e.untraced());
    // Three unique violations at 1 ms, three refused connections: answers, not a timeout.
    for (error_type, words) in [
        ("UniqueViolation", false),
        ("psycopg2.errors.UniqueViolation", false),
        ("ConnectionRefusedError", false),
        ("OperationalError", true),
        ("*url.Error", true),
    ] {
        let stats = database_failures(3, 1, error_type, words);
        assert_eq!(
            stats.get("app", "postgresql").unwrap().timeout(),
            None,
            "{error_type}"
        );
    }
}

/// seed 003's PIX shape: api (root, 1200 ms budget) races its fetch to antifraude against a
/// timer, answers 504 at 1230 and never aborts the fetch; antifraude works to 1402.
fn left_open() -> Vec<Span> {
    let mut api = stock(1, None, "api", 0, 1230);
    api.budget.http_status = Some(504);
    api.budget.received_ms = Some(1200);
    api.budget.source = Some(BudgetSource::XBudgetMs);
    let mut fetch = client(2, 1, "api", 10, 1410);
    fetch.budget.remaining_ms = Some(1190);
    fetch.budget.forwarded_ms = Some(1190);
    vec![
        api,
        fetch,
        stock(3, Some(2), "antifraude", 12, 1402),
        span(4, Some(3), "antifraude", SpanKind::Internal, 12, 1400),
    ]
}

#[test]
fn a_call_its_hop_left_open_when_it_answered_is_abandoned_work() {
    let a = analyse(left_open());
    assert_eq!(kinds(&a), vec![(FindingKind::OrphanedWork, sid(3))]);
    let f = &a.findings[0];
    assert_eq!(f.wasted_ms, Some(172));
    assert_eq!(
        f.message,
        "api answered at 1,230 ms and left its call open: antifraude worked 172 ms for nobody"
    );
    assert_eq!(a.summary.wasted_ms, 172);
    assert!(a.has_at_least(Severity::Error));
    // Its 504, 30 ms past its budget, is the deadline enforced, a moment late: no late_answer.
    assert_eq!(a.summary.outcome, ChainOutcome::DeadlineExceeded);
}

/// A Caddy-like proxy (root, one SERVER span) in front of app: app's span hangs right under
/// it. The proxy gave up at 1000 and answered 200 UNSET (its own 504, recorded after its span
/// ended); app worked to 1900.
fn proxied(proxy_end: u64, app_end: u64, trace: u8) -> Vec<Span> {
    let mut proxy = stock(1, None, "proxy", 0, proxy_end);
    proxy.budget.http_status = Some(200);
    let mut spans = vec![
        proxy,
        stock(2, Some(1), "app", 2, app_end),
        span(3, Some(2), "app", SpanKind::Internal, 2, app_end),
    ];
    for s in &mut spans {
        s.trace_id = TraceId([trace; 16]);
    }
    spans
}

#[test]
fn a_proxy_that_records_one_span_abandons_its_callee_and_never_reads_ok() {
    let a = analyse(proxied(1002, 1900, 7));
    assert_eq!(kinds(&a), vec![(FindingKind::OrphanedWork, sid(2))]);
    assert_eq!(a.findings[0].wasted_ms, Some(898));
    assert_eq!(
        a.findings[0].message,
        "app worked 898 ms after proxy stopped waiting"
    );
    // One chain alone cannot tell a timeout from a hang-up: cancelled, never ok.
    assert_eq!(a.summary.outcome, ChainOutcome::Cancelled);
    let e = &a.edges[0];
    assert_eq!((e.latency_ms, e.unanswered_ms), (Some(1000), Some(1000)));
    assert_eq!(
        e.root_left,
        Some(RootLeft {
            after_ms: 1000,
            answered: true
        })
    );
    // Over the chains, three calls given up on at 1000 ms are the edge's timeout: those
    // chains are deadline_exceeded; one that ended at 400 (its caller hung up) stays
    // cancelled; one answered in time is ok.
    let mut chains: Vec<Vec<Span>> = (1..=3).map(|t| proxied(1002, 1900, t)).collect();
    chains.push(proxied(402, 1900, 4));
    chains.push(proxied(502, 500, 5));
    let report = Report::from_spans(chains.into_iter().flatten(), &Options::default());
    let edge = &report.edges[0];
    assert_eq!((edge.timeout_ms, edge.timeout_inferred), (Some(1000), true));
    let o = &report.summary.outcomes;
    assert_eq!((o.deadline_exceeded, o.cancelled, o.ok), (3, 1, 1));
    // Merged, a shard's outcomes are judged again from the merged edge.
    let merged = Report::merge([&report, &report], 100);
    let o = &merged.summary.outcomes;
    assert_eq!((o.deadline_exceeded, o.cancelled, o.ok), (6, 2, 2));
}

#[test]
fn a_proxy_hop_with_two_callee_hops_waits_on_both_and_relays_its_504() {
    // The proxy retried: its first try of app gave up at 500 (app worked on to 700), its
    // second answered 504 at 950, which the proxy relayed at 952. The user's client gave up
    // at 800: proxy waited from then on; app's second try is the work for nobody.
    let mut proxy = stock(2, Some(1), "proxy", 5, 952);
    proxy.budget.http_status = Some(504);
    let mut second = stock(4, Some(2), "app", 502, 950);
    second.budget.http_status = Some(504);
    let spans = vec![
        stock(10, None, "client", 0, 1000),
        {
            let mut c = client(1, 10, "client", 2, 800);
            c.status = SpanStatus::Error;
            c
        },
        proxy,
        stock(3, Some(2), "app", 7, 700),
        span(5, Some(3), "app", SpanKind::Internal, 7, 700),
        second,
        span(6, Some(4), "app", SpanKind::Internal, 502, 949),
    ];
    let a = analyse(spans);
    // Not a shed: its 504 is app's, relayed; and the proxy itself did 2 ms for nobody.
    assert!(
        a.findings
            .iter()
            .all(|f| !matches!(f.kind, FindingKind::ShedExpired | FindingKind::ShedFull))
    );
    assert_eq!(
        dead_by_service(&a),
        vec![("proxy".to_owned(), 2), ("app".to_owned(), 150)]
    );
    let proxy_row = a.rows.iter().find(|r| r.span == 2).unwrap();
    assert_eq!(proxy_row.waiting_ms, 150);
    // Each try is a call of its own, from its start until it was done (the proxy's span was
    // still open when either ended).
    let tries: Vec<Option<i64>> = a.edges.iter().skip(1).map(|e| e.latency_ms).collect();
    assert_eq!(tries, vec![Some(693), Some(448)]);
}

#[test]
fn a_failure_after_the_deadline_is_no_late_answer_and_a_late_200_is() {
    // The stock Java agent's Deadline: the call times out at exactly what remains, then the
    // root answers 504 a few ms after its budget ran out.
    let mut root = stock(1, None, "orders", 0, 1020);
    root.budget.received_ms = Some(1000);
    root.budget.source = Some(BudgetSource::XBudgetMs);
    root.budget.http_status = Some(504);
    let mut a = analyse([root.clone()]);
    assert!(a.findings.iter().all(|f| f.kind != FindingKind::LateAnswer));
    assert_eq!(a.summary.outcome, ChainOutcome::DeadlineExceeded);
    root.budget.http_status = Some(200);
    a = analyse([root]);
    assert_eq!(kinds(&a), vec![(FindingKind::LateAnswer, sid(1))]);
    assert_eq!(a.summary.outcome, ChainOutcome::Late);
}

#[test]
fn the_advice_leaves_out_answers_nobody_read_and_stays_within_the_callers_budget() {
    // orders (969 ms budget) calls payments with no timeout: 110 answers in 80 ms, and 40 s
    // answers that came after gateway gave up on orders.
    let mut stats = EdgeStats::new();
    for i in 0..130u64 {
        let slow = i >= 110;
        let mut chain = Chain::new(TraceId([i as u8 + 1; 16]));
        let payments_end = if slow { 40_010 } else { 90 };
        let mut orders = stock(2, Some(1), "orders", 2, payments_end + 2);
        orders.budget.received_ms = Some(969);
        orders.budget.source = Some(BudgetSource::XBudgetMs);
        let gateway_call_end = if slow { 971 } else { payments_end + 3 };
        for mut s in [
            stock(10, None, "gateway", 0, gateway_call_end + 1),
            client(1, 10, "gateway", 1, gateway_call_end),
            orders,
            client(3, 2, "orders", 8, payments_end + 1),
            stock(4, Some(3), "payments", 9, payments_end),
        ] {
            s.trace_id = chain.trace_id();
            chain.insert(s);
        }
        stats.add(&chain.analyse(&Options::default()));
    }
    let e = stats.get("orders", "payments").unwrap();
    let advice = e.advice();
    assert_eq!(advice.calls, 110, "{advice:?}");
    assert!(advice.timeout_ms.unwrap() <= 969, "{advice:?}");
    // Even were every answer in time, the caller's budget caps it.
    let mut fast = e.clone();
    fast.answered_for_nobody = Distribution::default();
    let advice = fast.advice();
    assert_eq!(advice.timeout_ms, Some(969), "{advice:?}");
    assert_eq!(advice.capped_by_budget_ms, Some(969));
    assert!(
        advice
            .sentence
            .ends_with("(capped by the caller's budget p50, 969 ms)"),
        "{}",
        advice.sentence
    );
}

#[test]
fn a_proxy_relaying_its_callees_503_is_not_a_shed_of_its_own() {
    let mut proxy = stock(1, None, "proxy", 0, 30);
    proxy.budget.http_status = Some(503);
    let mut app = stock(2, Some(1), "app", 2, 28);
    app.budget.http_status = Some(503);
    let a = analyse([proxy, app]);
    // app shed the request; the proxy relayed its 503: the user was shed, once.
    assert_eq!(kinds(&a), vec![(FindingKind::ShedFull, sid(2))]);
    assert_eq!(a.summary.outcome, ChainOutcome::Shed);
}
