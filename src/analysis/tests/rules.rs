//! Each rule's cases, family by family as in `rules/`: reset and drop, expiry and orphaned work,
//! queues, retries, clock skew.

use super::*;

#[test]
fn budget_reset_when_a_call_forwards_more_than_remained() {
    let mut spans = healthy();
    spans[3].budget.forwarded_ms = Some(947); // remaining 941 + 5 < 947
    spans[4].budget.received_ms = Some(947);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.severity),
        (FindingKind::BudgetReset, sid(4), Severity::Error)
    );
    assert_eq!(
        (f.remaining_ms, f.forwarded_ms, f.received_ms),
        (Some(941), Some(947), None)
    );
    assert_eq!(f.message, "forwarded 947 ms with only 941 ms left");
    // Within tolerance: nothing.
    spans[3].budget.forwarded_ms = Some(946);
    spans[4].budget.received_ms = Some(946);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn budget_reset_when_a_hop_received_more_than_its_caller_forwarded() {
    let mut spans = healthy();
    spans[4].budget.received_ms = Some(5000); // a proxy reset it
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetReset, sid(5)));
    assert_eq!((f.received_ms, f.forwarded_ms), (Some(5000), Some(800)));
    assert_eq!(
        f.message,
        "received 5000 ms but orders forwarded only 800 ms"
    );
    assert_eq!(a.edges[1].count(FindingKind::BudgetReset), 1);

    // grpc-timeout: 1 ms of rounding on top of the 5. x-request-deadline: the same tolerance
    // (5 ms, 1 of rounding): a clock that is off is measured (clock_skew past 1 s), never
    // absorbed.
    for source in [BudgetSource::GrpcTimeout, BudgetSource::XRequestDeadline] {
        spans[4].budget.source = Some(source);
        spans[4].budget.received_ms = Some(806);
        assert_eq!(kinds(&analyse(spans.clone())), vec![], "{source:?}");
        spans[4].budget.received_ms = Some(807);
        assert_eq!(
            kinds(&analyse(spans.clone())),
            vec![(FindingKind::BudgetReset, sid(5))],
            "{source:?}"
        );
    }
    // 1001 ms more: a clock that far behind, measured and corrected (its spans, recorded on
    // that clock, moved back onto orders').
    spans[4].budget.received_ms = Some(1801);
    behind(&mut spans[4], 1001);
    assert_eq!(
        kinds(&analyse(spans)),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
}

#[test]
fn budget_dropped_when_a_hop_with_a_budget_calls_without_forwarding() {
    let mut spans = healthy();
    spans[5].budget.forwarded_ms = None;
    spans[6] = hop(7, Some(6), "payments", 131, 279, None);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(6)));
    assert_eq!(
        (f.received_ms, f.remaining_ms, f.forwarded_ms),
        (Some(950), Some(841), None)
    );
    assert_eq!(
        f.message,
        "orders had 841 ms left but forwarded no budget on this call"
    );
    assert_eq!(a.edges[2].count(FindingKind::BudgetDropped), 1);

    // A call refused for lack of budget is the right behaviour.
    spans[5].budget.outcome = Some(Outcome::Refused);
    spans.truncate(6);
    assert_eq!(kinds(&analyse(spans.clone())), vec![]);
    // A database call traced by stock instrumentation (no budget attributes, no callee hop).
    spans[5] = span(6, Some(3), "orders", SpanKind::Client, 130, 280);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn budget_dropped_when_a_hop_lost_the_budget_its_caller_forwarded() {
    let mut spans = healthy();
    spans[6] = hop(7, Some(6), "payments", 131, 279, None);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(7)));
    assert_eq!(
        f.message,
        "payments received no budget although orders forwarded 400 ms"
    );
    assert_eq!(f.forwarded_ms, Some(400));

    spans[6].budget.source = Some(BudgetSource::Default);
    spans[6].budget.default_ms = Some(30_000);
    let a = analyse(spans.clone());
    assert_eq!(
        only(&a).message,
        "payments fell back to its own default of 30000 ms although orders forwarded 400 ms"
    );

    // No CLIENT span (an uninstrumented client): the caller hop had a budget.
    spans[6] = hop(7, Some(3), "payments", 131, 279, None);
    spans.remove(5);
    let a = analyse(spans);
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(7)));
    assert_eq!(
        f.message,
        "payments received no budget although its caller orders had a 950 ms budget"
    );
    assert_eq!(
        a.edges.last().map(|e| (&*e.caller, &*e.callee)),
        Some(("orders", "payments"))
    );
}

#[test]
fn ran_after_expiry_when_work_started_with_no_budget_left() {
    let mut s = hop(1, None, "inventory", 0, 500, Some(250));
    s.budget.queue_wait_ms = Some(300);
    s.budget.remaining_at_start_ms = Some(-50);
    let a = analyse([s.clone()]);
    let kinds_found = kinds(&a);
    // A root that also answered 250 ms after the budget it received ran out.
    assert_eq!(
        kinds_found,
        vec![
            (FindingKind::RanAfterExpiry, sid(1)),
            (FindingKind::QueuePressure, sid(1)),
            (FindingKind::LateAnswer, sid(1))
        ]
    );
    let f = &a.findings[0];
    assert_eq!(
        (f.remaining_ms, f.wasted_ms, f.received_ms),
        (Some(-50), Some(200), Some(250))
    );
    assert_eq!(
        f.message,
        "inventory started work 50 ms after its deadline and worked 200 ms for nobody"
    );
    // A root's dead work rests on its own span's end only: none here.
    assert_eq!(a.summary.wasted_ms, 0);

    // Shed at dequeue instead: the right behaviour, no waste (and its 504, however late, is
    // the deadline enforced: no late_answer).
    s.budget.outcome = Some(Outcome::ShedExpired);
    s.end_unix_nano = (T0 + 300) * 1_000_000;
    let a = analyse([s]);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::ShedExpired, sid(1)),
            (FindingKind::QueuePressure, sid(1)),
        ]
    );
    assert_eq!(a.findings[0].severity, Severity::Info);
    assert_eq!(
        a.findings[0].message,
        "shed at dequeue: expired after 300 ms in the queue with a 250 ms budget"
    );
    assert_eq!(a.summary.wasted_ms, 0);
}

#[test]
fn ran_after_expiry_when_a_span_of_the_hop_started_after_its_deadline() {
    let spans = vec![
        hop(1, None, "payments", 0, 400, Some(100)),
        span(2, Some(1), "payments", SpanKind::Internal, 10, 60),
        span(3, Some(1), "payments", SpanKind::Internal, 150, 250),
        span(4, Some(3), "payments", SpanKind::Internal, 160, 200),
        {
            let mut refused = call(5, 1, "payments", 300, 300, -200, None);
            refused.budget.outcome = Some(Outcome::Refused);
            refused
        },
    ];
    let a = analyse(spans);
    // The root also answered 300 ms after its budget ran out.
    assert_eq!(a.findings.len(), 2, "{:#?}", a.findings);
    assert_eq!(
        (a.findings[0].kind, a.findings[0].span_id),
        (FindingKind::LateAnswer, sid(1))
    );
    let f = &a.findings[1];
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::RanAfterExpiry, sid(3), Some(100))
    );
    assert_eq!(
        f.message,
        "payments started \"payments 3\" 50 ms after its deadline and worked 100 ms for nobody"
    );
    assert_eq!(
        a.rows[2].findings.iter().collect::<Vec<_>>(),
        vec![FindingKind::RanAfterExpiry]
    );
    assert_eq!(a.rows[2].worst(), Some(Severity::Error));
}

#[test]
fn orphaned_work_from_timing_alone() {
    let mut client = span(2, Some(1), "orders", SpanKind::Client, 10, 100);
    client.name = Arc::from("GET inventory");
    let spans = vec![
        span(1, None, "orders", SpanKind::Server, 0, 110),
        client,
        span(3, Some(2), "inventory", SpanKind::Server, 12, 380),
    ];
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::OrphanedWork, sid(3), Some(280))
    );
    assert_eq!(
        f.message,
        "inventory worked 280 ms after orders stopped waiting"
    );
    assert_eq!((a.summary.wasted_ms, a.edges[0].wasted_ms), (280, 280));

    // Ending within tolerance of the caller giving up is fine.
    let mut ok = spans.clone();
    ok[2].end_unix_nano = (T0 + 105) * 1_000_000;
    assert_eq!(kinds(&analyse(ok)), vec![]);
    // A consumer of a message outlives its producer by design.
    let mut queue = spans;
    queue[1].kind = SpanKind::Producer;
    queue[2].kind = SpanKind::Consumer;
    assert_eq!(kinds(&analyse(queue)), vec![]);
}

#[test]
fn orphaned_work_allows_the_request_transit_time() {
    // The request took 30 ms to reach inventory; inventory used exactly the budget it got, so
    // it ends 30 ms after orders stopped waiting: not orphaned work.
    let spans = |callee_end: u64| {
        vec![
            span(1, None, "orders", SpanKind::Server, 0, 110),
            span(2, Some(1), "orders", SpanKind::Client, 10, 100),
            span(3, Some(2), "inventory", SpanKind::Server, 40, callee_end),
        ]
    };
    assert_eq!(kinds(&analyse(spans(130))), vec![]);
    assert_eq!(kinds(&analyse(spans(135))), vec![]);
    // Past transit + tolerance it is orphaned, and the waste is the whole overlap.
    let a = analyse(spans(136));
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::OrphanedWork, sid(3), Some(36))
    );
    // A hop that shed the request did no work for anybody.
    let mut shed = spans(400);
    shed[2].budget.outcome = Some(Outcome::ShedExpired);
    assert_eq!(
        kinds(&analyse(shed)),
        vec![(FindingKind::ShedExpired, sid(3))]
    );
}

#[test]
fn shed_full_and_shed_expired_are_info() {
    let mut full = hop(3, Some(2), "inventory", 11, 12, Some(800));
    full.budget.outcome = Some(Outcome::ShedFull);
    let spans = vec![
        hop(1, None, "orders", 0, 100, Some(900)),
        call(2, 1, "orders", 10, 13, 890, Some(800)),
        full,
    ];
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.severity, f.span_id),
        (FindingKind::ShedFull, Severity::Info, sid(3))
    );
    assert!(!a.has_at_least(Severity::Warning));

    // The callee's span is missing: the call's outcome tells.
    let mut call_only = spans;
    call_only.pop();
    call_only[1].budget.outcome = Some(Outcome::ShedExpired);
    let a = analyse(call_only);
    assert_eq!(kinds(&a), vec![(FindingKind::ShedExpired, sid(2))]);
}

#[test]
fn queue_pressure_when_waiting_more_than_half_the_budget() {
    let mut s = hop(1, None, "inventory", 0, 700, Some(1000));
    s.budget.queue_wait_ms = Some(501);
    s.budget.remaining_at_start_ms = Some(499);
    let a = analyse([s.clone()]);
    let f = only(&a);
    assert_eq!(
        (f.kind, f.severity, f.received_ms),
        (FindingKind::QueuePressure, Severity::Warning, Some(1000))
    );
    assert_eq!(
        f.message,
        "waited 501 ms in the queue: more than half (50.1 %) of its 1000 ms budget"
    );
    s.budget.queue_wait_ms = Some(500);
    assert_eq!(kinds(&analyse([s])), vec![]);
}

fn attempt(id: u64, start: u64, end: u64, n: i64, remaining: i64, forwarded: i64) -> Span {
    let mut s = call(id, 1, "orders", start, end, remaining, Some(forwarded));
    s.name = Arc::from("GET inventory");
    s.budget.attempt = Some(n);
    s
}

#[test]
fn retry_over_budget_when_attempts_together_forward_more_than_remained() {
    // Each attempt alone is within budget, but the first failed fast and the second got the
    // whole budget again.
    let spans = vec![
        hop(1, None, "orders", 0, 1000, Some(1000)),
        attempt(2, 0, 10, 1, 1000, 1000),
        attempt(3, 10, 990, 2, 990, 990),
    ];
    let a = analyse(spans);
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::RetryOverBudget, sid(3)));
    assert_eq!((f.remaining_ms, f.forwarded_ms), (Some(1000), Some(1990)));
    assert_eq!(
        f.message,
        "2 attempts forwarded 1990 ms in total with only 1000 ms left at the first"
    );
}

/// The row of the span with id `id`.
fn row_of(a: &Analysed, id: u64) -> Row {
    let k = a
        .row_spans
        .iter()
        .position(|s| s.span_id == sid(id))
        .unwrap();
    a.rows[k]
}

#[test]
fn every_attempt_of_a_retried_call_is_marked_on_its_row_grouped_by_hop_and_name() {
    // Two attempts of one call under two internal spans of the same hop: one retry group (the
    // hop's calls of one name), whatever span they hang under. Another call of the hop, and a
    // call of this name in another hop, are not retries.
    let mut internal_a = span(10, Some(1), "orders", SpanKind::Internal, 0, 400);
    internal_a.name = Arc::from("try");
    let mut internal_b = span(11, Some(1), "orders", SpanKind::Internal, 400, 900);
    internal_b.name = Arc::from("try again");
    let mut first = attempt(2, 10, 300, 1, 990, 300);
    first.parent_span_id = Some(sid(10));
    let mut second = attempt(3, 410, 800, 2, 590, 300);
    second.parent_span_id = Some(sid(11));
    let mut same_name = call(7, 6, "inventory", 420, 500, 290, Some(100));
    same_name.name = Arc::from("GET inventory");
    let spans = vec![
        hop(1, None, "orders", 0, 1000, Some(1000)),
        internal_a,
        internal_b,
        first,
        second,
        call(4, 1, "orders", 900, 950, 100, Some(50)),
        hop(5, Some(2), "inventory", 11, 290, Some(300)),
        hop(6, Some(3), "inventory", 411, 790, Some(300)),
        same_name,
        hop(8, Some(4), "stock", 901, 940, Some(50)),
        hop(9, Some(7), "stock", 421, 490, Some(100)),
    ];
    let a = analyse(spans);
    assert!(row_of(&a, 2).retried && row_of(&a, 3).retried);
    for other in [1, 4, 5, 7, 10] {
        assert!(!row_of(&a, other).retried, "span {other}");
    }
}

#[test]
fn a_call_with_no_callee_hop_awaits_it_for_a_grace_after_the_chain_ended() {
    let mut refused = call(3, 1, "orders", 20, 21, 0, None);
    refused.budget.outcome = Some(Outcome::Refused);
    let spans = vec![
        hop(1, None, "orders", 0, 300, Some(1000)),
        call(2, 1, "orders", 10, 290, 990, Some(900)),
        refused,
        call(4, 1, "orders", 30, 200, 970, Some(800)),
        hop(5, Some(4), "inventory", 31, 199, Some(800)),
    ];
    let a = analyse(spans);
    assert!(row_of(&a, 2).awaits_callee);
    for other in [1, 3, 4, 5] {
        assert!(!row_of(&a, other).awaits_callee, "span {other}");
    }
    let ended = (T0 + 300) * 1_000_000;
    assert!(a.awaits_callee(ended));
    assert!(a.awaits_callee(ended + CALLEE_GRACE_NS));
    assert!(!a.awaits_callee(ended + CALLEE_GRACE_NS + 1));
    let answered = analyse(healthy());
    assert!(!answered.awaits_callee(ended));
}

#[test]
fn retry_over_budget_when_an_attempt_starts_after_the_deadline() {
    let spans = vec![
        hop(1, None, "orders", 0, 1200, Some(1000)),
        attempt(2, 0, 300, 1, 1000, 300),
        attempt(3, 300, 600, 2, 700, 300),
        attempt(4, 1010, 1100, 3, -10, 300),
    ];
    let a = analyse(spans);
    let found = kinds(&a);
    // The late attempt; its forwarding more than remained is also a reset; and orders answered
    // 200 ms after its budget ran out.
    assert_eq!(
        found,
        vec![
            (FindingKind::LateAnswer, sid(1)),
            (FindingKind::BudgetReset, sid(4)),
            (FindingKind::RetryOverBudget, sid(4))
        ]
    );
    assert_eq!(
        a.findings[2].message,
        "attempt 3 started 10 ms after the deadline of orders"
    );
}

#[test]
fn retries_that_share_the_budget_are_fine() {
    let spans = vec![
        hop(1, None, "orders", 0, 1000, Some(1000)),
        attempt(2, 0, 300, 1, 1000, 300),
        attempt(3, 300, 600, 2, 700, 300),
        attempt(4, 600, 900, 3, 400, 300),
    ];
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

/// A hop of the first layer's service (budget `budget`) and everything below it: each layer
/// of `layers` (service, attempts) calls the next service (`leaf` after the last) that many
/// times in a row, each attempt's callee doing the same below it. The budgets fit everywhere:
/// only the multiplying shows. Returns the hop's spans and its end.
fn layered_hop(
    ids: &mut u64,
    parent: Option<u64>,
    layers: &[(&'static str, i64)],
    leaf: &'static str,
    start: u64,
    budget: i64,
) -> (Vec<Span>, u64) {
    let id = *ids;
    *ids += 1;
    let Some((&(service, attempts), below)) = layers.split_first() else {
        return (
            vec![hop(id, parent, leaf, start, start + 10, Some(budget))],
            start + 10,
        );
    };
    let callee = below.first().map_or(leaf, |l| l.0);
    let forward = budget / 10;
    let (mut spans, mut t) = (Vec::new(), start + 1);
    for n in 1..=attempts {
        let call_id = *ids;
        *ids += 1;
        let (sub, end) = layered_hop(ids, Some(call_id), below, leaf, t + 1, forward);
        let mut c = call(
            call_id,
            id,
            service,
            t,
            end + 1,
            budget - (t - start) as i64,
            Some(forward),
        );
        c.name = Arc::from(format!("GET {callee}"));
        c.budget.attempt = Some(n);
        spans.push(c);
        spans.extend(sub);
        t = end + 2;
    }
    spans.insert(0, hop(id, parent, service, start, t, Some(budget)));
    (spans, t)
}

fn layered(layers: &[(&'static str, i64)], leaf: &'static str) -> Vec<Span> {
    layered_hop(&mut 1, None, layers, leaf, 0, 1_000_000).0
}

#[test]
fn retry_amplified_when_two_layers_retry_gives_the_product_and_the_path() {
    let a = analyse(layered(&[("bff", 3), ("orders", 2)], "inventory"));
    let f = only(&a);
    assert_eq!(
        (f.kind, f.severity, f.service.as_ref()),
        (FindingKind::RetryAmplified, Severity::Warning, "orders")
    );
    assert_eq!(f.span_name.as_ref(), "GET inventory");
    assert_eq!(
        f.message,
        "inventory was called 6 times for one request: bff tried orders 3 times, orders tried inventory 2 times each"
    );
    // On the call that went over the 3 of the largest layer: the 4th call on inventory.
    let calls_on_inventory: Vec<SpanId> = a
        .row_spans
        .iter()
        .filter(|s| s.kind == SpanKind::Client && s.name.as_ref() == "GET inventory")
        .map(|s| (s.start_unix_nano, s.span_id))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    assert_eq!(calls_on_inventory.len(), 6);
    assert_eq!(f.span_id, calls_on_inventory[3]);
}

#[test]
fn retry_amplified_at_three_layers_names_each_callee_past_the_largest_layer() {
    let a = analyse(layered(
        &[("gateway", 2), ("bff", 3), ("orders", 2)],
        "inventory",
    ));
    let mut messages: Vec<&str> = a
        .findings
        .iter()
        .map(|f| {
            assert_eq!(f.kind, FindingKind::RetryAmplified, "{}", f.message);
            f.message.as_str()
        })
        .collect();
    messages.sort_unstable();
    assert_eq!(
        messages,
        vec![
            "inventory was called 12 times for one request: gateway tried bff 2 times, bff tried orders 3 times each, orders tried inventory 2 times each",
            "orders was called 6 times for one request: gateway tried bff 2 times, bff tried orders 3 times each",
        ]
    );
}

#[test]
fn no_retry_amplified_on_one_layers_retries_nor_where_the_product_stays_within_the_largest() {
    // One layer retries: 3 calls on orders, its 3 attempts.
    assert_eq!(kinds(&analyse(layered(&[("bff", 3)], "orders"))), vec![]);
    // bff retries, orders calls inventory once per attempt: 3 calls, bff's 3.
    assert_eq!(
        kinds(&analyse(layered(&[("bff", 3), ("orders", 1)], "inventory"))),
        vec![]
    );
    // Only the lower layer retries: 2 calls on inventory.
    assert_eq!(
        kinds(&analyse(layered(&[("bff", 1), ("orders", 2)], "inventory"))),
        vec![]
    );
}

#[test]
fn clock_skew_when_a_child_starts_before_its_parent() {
    let mut spans = healthy();
    // inventory's clock is 40 ms behind.
    spans[4].start_unix_nano = (T0 - 9) * 1_000_000;
    spans[4].end_unix_nano = (T0 + 79) * 1_000_000;
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.severity),
        (FindingKind::ClockSkew, sid(5), Severity::Warning)
    );
    assert_eq!(
        f.message,
        "inventory starts 39 ms before its parent in orders: its clock is at least that far behind; its spans were moved 39 ms later, onto the clock of orders (~ on the waterfall)"
    );
    // One millisecond is within tolerance.
    spans[4].start_unix_nano = (T0 + 29) * 1_000_000;
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn clock_skew_when_an_absolute_deadline_disagrees_with_the_relative_budget() {
    let mut spans = healthy();
    spans[4].budget.deadline_unix_ms = Some(T0 as i64 + 31 + 800 + 1500);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::ClockSkew, sid(5)));
    assert_eq!(
        f.message,
        "absolute deadline is 1500 ms later than arrival + 800 ms budget by the clock of inventory"
    );
    spans[4].budget.deadline_unix_ms = Some(T0 as i64 + 31 + 800 - 900);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn clock_skew_when_an_absolute_deadline_gives_the_callee_another_budget() {
    let mut spans = healthy();
    // inventory's clock is 2 s behind orders': the absolute deadline reads as 2 s more, and
    // its spans are 2 s early. Corrected, it worked inside its call: no dead work.
    let plain = spans.clone();
    spans[4].budget.source = Some(BudgetSource::XRequestDeadline);
    spans[4].budget.received_ms = Some(2795);
    behind(&mut spans[4], 1995);
    let a = analyse(spans.clone());
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
    assert_eq!(
        a.findings[1].message,
        "received 2795 ms from an absolute deadline but orders meant 800 ms: the clocks differ by about 1995 ms (inventory's is behind); its spans were moved 1,995 ms later, onto the clock of orders (~ on the waterfall)"
    );
    assert_eq!(a.summary.wasted_ms, 0);
    // 2 s ahead: the callee believes it has nothing left; no reset, still skew, moved back.
    let mut ahead = plain.clone();
    ahead[4].budget.source = Some(BudgetSource::XRequestDeadline);
    ahead[4].budget.received_ms = Some(-1200);
    behind(&mut ahead[4], -2000);
    let a = analyse(ahead);
    assert_eq!(kinds(&a), vec![(FindingKind::ClockSkew, sid(5))]);
    assert_eq!(a.summary.wasted_ms, 0);
    // Within a second: nothing.
    let mut near = plain;
    near[4].budget.source = Some(BudgetSource::XRequestDeadline);
    near[4].budget.received_ms = Some(790);
    assert_eq!(kinds(&analyse(near)), vec![]);
}

#[test]
fn ran_after_expiry_from_a_queue_wait_that_used_up_the_budget() {
    let mut s = span(1, None, "inventory", SpanKind::Consumer, 0, 450);
    s.budget.received_ms = Some(200);
    s.budget.source = Some(BudgetSource::XBudgetMs);
    s.budget.queue_wait_ms = Some(250);
    let a = analyse([s]);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::RanAfterExpiry, sid(1)),
            (FindingKind::QueuePressure, sid(1)),
            (FindingKind::LateAnswer, sid(1))
        ]
    );
    assert_eq!(
        (a.findings[0].remaining_ms, a.findings[0].wasted_ms),
        (Some(-50), Some(200))
    );
}

#[test]
fn an_item_cancelled_in_the_queue_never_ran_though_its_wait_used_up_the_budget() {
    // orders' queue drops a read whose caller hung up: the wait is the whole budget, the outcome
    // `cancelled`, and no `remaining_at_start_ms`, as it never started.
    let mut s = span(1, None, "orders", SpanKind::Server, 0, 968);
    s.budget.received_ms = Some(968);
    s.budget.source = Some(BudgetSource::XBudgetMs);
    s.budget.queue_wait_ms = Some(968);
    s.budget.outcome = Some(Outcome::Cancelled);
    let a = analyse([s.clone()]);
    assert_eq!(kinds(&a), vec![(FindingKind::QueuePressure, sid(1))]);
    // Had it been taken from the queue and run, it would have said so.
    s.budget.outcome = Some(Outcome::Ok);
    s.end_unix_nano += 150 * 1_000_000;
    let ran = analyse([s]);
    assert!(
        kinds(&ran).contains(&(FindingKind::RanAfterExpiry, sid(1))),
        "{:?}",
        kinds(&ran)
    );
}

#[test]
fn an_edge_with_its_own_default_a_short_queue_and_an_uninstrumented_client_is_fine() {
    let mut edge = hop(1, None, "frontend", 0, 300, None);
    edge.budget.source = Some(BudgetSource::Default);
    edge.budget.default_ms = Some(2000);
    edge.budget.remaining_at_start_ms = Some(1990);
    edge.budget.queue_wait_ms = Some(10);
    // orders is called by a client that writes no span, yet the budget arrived by grpc-timeout.
    let mut orders = hop(2, Some(1), "orders", 20, 280, Some(1900));
    orders.budget.source = Some(BudgetSource::GrpcTimeout);
    let a = analyse([edge, orders]);
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.summary.edge_budget_ms, Some(2000));
    assert_eq!(a.summary.edge_budget_source, Some(BudgetSource::Default));
    assert_eq!(
        a.edges,
        vec![EdgeSample {
            caller: Arc::from("frontend"),
            callee: Arc::from("orders"),
            received_ms: Some(1900),
            forwarded_ms: None,
            findings: None,
            wasted_ms: 0,
            // frontend's own span stands for the call: from orders' start to its end.
            latency_ms: Some(260),
            timeout_ms: None,
            unanswered_ms: None,
            call: None,
            wait_slack: Some(WaitSlack {
                slack_ms: 1985,
                left_ms: 1980,
                hop_budget_ms: Some(2000)
            }),
            attempt: None,
            caller_budget_ms: Some(2000),
            untraced: false,
            answered_for_nobody: false,
            root_left: None,
            remaining_ms: None,
        }]
    );
}

#[test]
fn a_service_without_budget_attributes_is_not_blamed_for_what_it_does_not_say() {
    // Stock OpenTelemetry spans only: no budget.* anywhere, and everything on time.
    let spans = vec![
        span(1, None, "frontend", SpanKind::Server, 0, 100),
        span(2, Some(1), "frontend", SpanKind::Client, 10, 90),
        span(3, Some(2), "orders", SpanKind::Server, 11, 89),
        span(4, Some(3), "orders", SpanKind::Client, 20, 80),
    ];
    let a = analyse(spans);
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.summary.edge_budget_ms, None);
    // orders' call reached nothing traced: an edge of its own, to the callee the span names
    // (here nothing but its span name), with nothing wasted on it.
    let edges: Vec<(&str, &str, bool, i64)> = a
        .edges
        .iter()
        .map(|e| (&*e.caller, &*e.callee, e.untraced, e.wasted_ms))
        .collect();
    assert_eq!(
        edges,
        vec![
            ("frontend", "orders", false, 0),
            ("orders", "orders 4", true, 0)
        ]
    );
}

#[test]
fn clock_skew_when_the_collector_decoded_the_absolute_deadline_itself() {
    // As the collector decodes a captured `x-request-deadline`: received = deadline - arrival,
    // so the hop's own view agrees with itself; the caller's forwarded budget does not.
    // inventory's clock is 2000 ms behind: its spans too.
    let mut spans = healthy();
    behind(&mut spans[4], 2000);
    let arrival = T0 as i64 + 31 - 2000;
    spans[4].budget.source = Some(BudgetSource::XRequestDeadline);
    spans[4].budget.deadline_unix_ms = Some(arrival + 2800);
    spans[4].budget.received_ms = Some(2800);
    let a = analyse(spans);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
    assert!(
        a.findings[1]
            .message
            .contains("the clocks differ by about 2000 ms")
    );
}

/// orders -> a proxy that records spans but no budget -> inventory.
fn through_proxy(received: i64) -> Vec<Span> {
    let mut inventory = hop(5, Some(4), "inventory", 13, 88, Some(received));
    inventory.budget.source = Some(BudgetSource::XEnvoyExpectedRqTimeoutMs);
    vec![
        hop(1, None, "orders", 0, 100, Some(800)),
        call(2, 1, "orders", 10, 90, 790, Some(700)),
        span(3, Some(2), "envoy", SpanKind::Server, 11, 89),
        span(4, Some(3), "envoy", SpanKind::Client, 12, 89),
        inventory,
    ]
}

#[test]
fn budget_reset_by_a_proxy_in_between_is_found_on_the_hop_that_received_too_much() {
    let a = analyse(through_proxy(15_000));
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetReset, sid(5)));
    assert_eq!(
        f.message,
        "received 15000 ms but orders forwarded only 700 ms upstream"
    );
    assert_eq!((f.received_ms, f.forwarded_ms), (Some(15_000), Some(700)));
    let edges: Vec<(&str, &str, u64)> = a
        .edges
        .iter()
        .map(|e| (&*e.caller, &*e.callee, e.count(FindingKind::BudgetReset)))
        .collect();
    assert_eq!(
        edges,
        vec![("orders", "envoy", 0), ("envoy", "inventory", 1)]
    );
    // A proxy that passes the budget on is invisible.
    assert_eq!(kinds(&analyse(through_proxy(690))), vec![]);
}
