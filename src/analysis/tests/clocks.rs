//! Clocks that disagree (`CONVENTIONS.md` section 3): a measured offset is corrected before
//! the timing rules, and the finding says by how much and which way.

use super::*;

/// orders (own 1000 ms) calls ledger at 3010 with 500 ms as an absolute deadline; the call
/// ends at 3600. ledger really works from 3025 to 3900 (300 ms after orders stopped waiting),
/// but its clock is `behind` ms behind (negative: ahead), and it believed it received
/// 500 + `behind` ms.
fn ledger(behind: i64) -> Vec<Span> {
    let mut orders = span(1, None, "orders", SpanKind::Server, 3000, 4000);
    orders.budget.default_ms = Some(1000);
    orders.budget.source = Some(BudgetSource::Default);
    let c = call(2, 1, "orders", 3010, 3600, 990, Some(500));
    let at = |t: i64| (t - behind) as u64;
    let mut ledger = span(3, Some(2), "ledger", SpanKind::Server, at(3025), at(3900));
    ledger.budget.received_ms = Some(500 + behind);
    ledger.budget.source = Some(BudgetSource::XRequestDeadline);
    let work = span(4, Some(3), "ledger", SpanKind::Internal, at(3030), at(3890));
    vec![orders, c, ledger, work]
}

fn by_kind(a: &ChainAnalysis, kind: FindingKind) -> Vec<&Finding> {
    a.findings.iter().filter(|f| f.kind == kind).collect()
}

#[test]
fn a_clock_behind_measured_from_an_absolute_deadline_is_corrected_before_dead_work() {
    let a = analyse(ledger(3000));
    let skew = by_kind(&a, FindingKind::ClockSkew);
    assert_eq!(skew.len(), 1, "{:#?}", a.findings);
    assert_eq!(
        skew[0].message,
        "received 3500 ms from an absolute deadline but orders meant 500 ms: the clocks differ by about 3000 ms (ledger's is behind); its spans were moved 3,000 ms later, onto the clock of orders (~ on the waterfall)"
    );
    // On the corrected times: ledger worked 300 ms for nobody, as it would without the skew.
    let orphaned = by_kind(&a, FindingKind::OrphanedWork);
    assert_eq!(orphaned.len(), 1);
    assert_eq!(orphaned[0].wasted_ms, Some(300));
    assert_eq!(a.summary.wasted_ms, 300);
    // The reset (it believed 3500 ms) carries the dead work that only shows after correction.
    let reset = by_kind(&a, FindingKind::BudgetReset);
    assert_eq!(reset.len(), 1);
    assert_eq!(reset[0].wasted_ms, Some(300));
    // The rows say how far each of ledger's spans was moved; orders' were not.
    let moved: Vec<(u32, i32)> = a.rows.iter().map(|r| (r.span, r.moved_ms)).collect();
    assert_eq!(moved, vec![(0, 0), (1, 0), (2, 3000), (3, 3000)]);
    // Without the skew, the same dead work.
    let plain = analyse(ledger(0));
    assert_eq!(plain.summary.wasted_ms, 300);
    assert!(by_kind(&plain, FindingKind::ClockSkew).is_empty());
}

#[test]
fn a_clock_ahead_is_moved_earlier() {
    // ledger's clock 2000 ms ahead: it believed -1500 ms (already past), and its raw spans sit
    // 2000 ms late, past the call's end: without the correction all of it would look dead.
    let a = analyse(ledger(-2000));
    let skew = by_kind(&a, FindingKind::ClockSkew);
    assert_eq!(skew.len(), 1, "{:#?}", a.findings);
    assert!(
        skew[0]
            .message
            .ends_with("(ledger's is ahead); its spans were moved 2,000 ms earlier, onto the clock of orders (~ on the waterfall)"),
        "{}",
        skew[0].message
    );
    assert_eq!(a.summary.wasted_ms, 300);
    assert_eq!(a.rows[2].moved_ms, -2000);
}

#[test]
fn under_a_second_or_a_deadline_read_on_another_clock_nothing_is_moved() {
    // 900 ms ahead: within what `clock_skew` reports from a deadline, and it starts after its
    // call: no evidence, nothing moved.
    let a = analyse(ledger(-900));
    assert!(a.rows.iter().all(|r| r.moved_ms == 0));
    assert!(by_kind(&a, FindingKind::ClockSkew).is_empty());
    // The deadline it recorded disagrees with its own arrival + budget: the clock that read
    // the deadline did not time the spans (the demo's simulated skew): not moved by it.
    let mut spans = ledger(3000);
    let start_ms = (spans[2].start_unix_nano / 1_000_000) as i64;
    spans[2].budget.deadline_unix_ms = Some(start_ms + 500);
    let a = analyse(spans);
    // The raw ledger starts 2985 ms before its call: that is evidence too, a lower bound.
    let skew = by_kind(&a, FindingKind::ClockSkew);
    assert!(
        skew.iter().any(|f| f.message.starts_with(
            "ledger starts 2,985 ms before its parent in orders: its clock is at least that far behind; its spans were moved 2,985 ms later"
        )),
        "{skew:#?}"
    );
}

#[test]
fn a_hop_that_starts_before_its_call_is_moved_to_the_call_plus_the_edges_median_transit() {
    // Two calls to ranker: one on a clock it shares (transit 10 ms), one whose ranker starts
    // 40 ms before the call and ends 30 ms after it (raw).
    let spans = vec![
        span(1, None, "api", SpanKind::Server, 0, 1000),
        span(2, Some(1), "api", SpanKind::Client, 10, 300),
        span(3, Some(2), "ranker", SpanKind::Server, 20, 290),
        span(4, Some(1), "api", SpanKind::Client, 400, 700),
        span(5, Some(4), "ranker", SpanKind::Server, 360, 690),
    ];
    let a = analyse(spans.clone());
    let skew = by_kind(&a, FindingKind::ClockSkew);
    assert_eq!(skew.len(), 1);
    assert_eq!(skew[0].span_id, sid(5));
    assert_eq!(
        skew[0].message,
        "ranker starts 40 ms before its parent in api: its clock is at least that far behind; its spans were moved 50 ms later, onto the clock of api (~ on the waterfall)"
    );
    // Moved to 410..740: 40 ms past the call's end, 30 ms past the transit and tolerance.
    let row = a.rows.iter().find(|r| r.span == 4).unwrap();
    assert_eq!(row.moved_ms, 50);
    let orphaned = by_kind(&a, FindingKind::OrphanedWork);
    assert_eq!(orphaned.len(), 1);
    assert_eq!(orphaned[0].wasted_ms, Some(40));
    // Alone on its edge: no transit known, moved to the call's start exactly (400..730, still
    // 30 ms past the call: a span's length is not a clock's error).
    let a = analyse([spans[0].clone(), spans[3].clone(), spans[4].clone()]);
    assert_eq!(a.rows.iter().find(|r| r.span == 2).unwrap().moved_ms, 40);
    assert_eq!(
        by_kind(&a, FindingKind::OrphanedWork)
            .iter()
            .map(|f| f.wasted_ms)
            .collect::<Vec<_>>(),
        vec![Some(30)]
    );
}

#[test]
fn nested_hops_on_a_skewed_clock_are_each_measured_against_their_corrected_caller() {
    // web -> api (1000 ms behind) -> db (on api's machine: 1000 ms behind too) -> cache (on a
    // good clock). True times: api 20..900, its call 30..850, db 35..840, db's call 40..60,
    // cache 45..55; web's call ends at 500: api and db work for nobody after it.
    let spans = vec![
        span(1, None, "web", SpanKind::Server, 1000, 2000),
        span(2, Some(1), "web", SpanKind::Client, 1010, 1500),
        span(3, Some(2), "api", SpanKind::Server, 20, 900),
        span(4, Some(3), "api", SpanKind::Client, 30, 850),
        span(5, Some(4), "db", SpanKind::Server, 35, 840),
        span(6, Some(5), "db", SpanKind::Client, 40, 60),
        span(7, Some(6), "cache", SpanKind::Server, 1045, 1055),
    ];
    let a = analyse(spans);
    let moved = |id: u32| a.rows.iter().find(|r| r.span == id).unwrap().moved_ms;
    // (Rows name spans by arrival position: api is 2, its call 3, db 4, db's call 5, cache 6.)
    // api: moved to web's call start (no transit known on that edge): 990 ms later. Its call
    // moves with it; db starts before that corrected call, and is moved to it plus the api ->
    // db transit its own clock shows (5 ms); cache, on a good clock, is after db's corrected
    // call and stays.
    assert_eq!((moved(2), moved(3)), (990, 990));
    assert_eq!((moved(4), moved(5)), (990, 990));
    assert_eq!(moved(6), 0);
    let skewed: Vec<SpanId> = by_kind(&a, FindingKind::ClockSkew)
        .iter()
        .map(|f| f.span_id)
        .collect();
    assert_eq!(skewed, vec![sid(3), sid(5)]);
    // Dead work on the corrected times, each instant once: after web's call ended at 1500, db
    // worked to 1830 while api waited for it (its call ends at 1840), then api worked 50 ms.
    let dead: Vec<(u32, u32)> = a
        .rows
        .iter()
        .filter(|r| r.dead_ms > 0)
        .map(|r| (r.span, r.dead_ms))
        .collect();
    assert_eq!(dead, vec![(2, 50), (4, 330)]);
    assert_eq!(a.summary.wasted_ms, 380);
}
