//! The rules of `CONVENTIONS.md` section 3 that judge a chain from its user's point of view (give-up
//! time, dead work at any depth, blame with the cause, the chain outcome) and the ones that read
//! services that never heard of budget-top (statuses as outcomes, spans that outlive their
//! server span, unanswered calls, inferred timeouts, `timeout_inverted`, `timeout_oversized`,
//! coverage).

use super::*;

/// A hop with no budget attributes at all, as stock instrumentation writes it.
fn stock_hop(id: u64, parent: Option<u64>, service: &str, start: u64, end: u64) -> Span {
    span(id, parent, service, SpanKind::Server, start, end)
}

/// A CLIENT span with no budget attributes.
fn stock_call(id: u64, parent: u64, service: &str, start: u64, end: u64) -> Span {
    span(id, Some(parent), service, SpanKind::Client, start, end)
}

fn chain_of(spans: Vec<Span>) -> Chain {
    let mut chain = Chain::new(spans.first().map_or(trace(), |s| s.trace_id));
    for s in spans {
        chain.insert(s);
    }
    chain
}

fn analyse_with(spans: Vec<Span>, timeouts: &EdgeTimeouts) -> ChainAnalysis {
    let mut chain = Chain::new(trace());
    for s in spans {
        chain.insert(s);
    }
    chain.analyse_with(&Options::default(), timeouts)
}

/// fixed-timeout's shape: the user's gateway gives up at 1000 ms with a 504; bff forwards
/// 3000 ms with 938 left; orders and inventory go on working for nobody.
fn fixed_timeout() -> Vec<Span> {
    let mut gateway = hop(1, None, "gateway", 0, 1000, Some(1000));
    gateway.budget.outcome = Some(Outcome::DeadlineExceeded);
    gateway.budget.http_status = Some(504);
    let mut bff = hop(3, Some(2), "bff", 6, 1003, Some(963));
    bff.budget.outcome = Some(Outcome::Cancelled);
    vec![
        gateway,
        call(2, 1, "gateway", 5, 1000, 995, Some(963)),
        bff,
        call(4, 3, "bff", 30, 1002, 938, Some(3000)),
        hop(5, Some(4), "orders", 31, 1655, Some(3000)),
        call(6, 5, "orders", 40, 1650, 2990, Some(2985)),
        hop(7, Some(6), "inventory", 41, 1640, Some(2985)),
    ]
}

#[test]
fn a_reset_names_the_dead_work_below_it_at_every_depth() {
    let a = analyse(fixed_timeout());
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetReset, sid(4)),
            (FindingKind::OrphanedWork, sid(5))
        ]
    );
    // After the user's give-up (1000) inventory worked to 1640 while orders waited for it (its
    // call ends at 1650): each instant once, orders' own dead work is its last 5 ms.
    assert_eq!(
        dead_by_service(&a),
        vec![("orders".to_owned(), 5), ("inventory".to_owned(), 640)]
    );
    let reset = &a.findings[0];
    assert_eq!(reset.wasted_ms, Some(645));
    assert_eq!(
        reset.message,
        "forwarded 3000 ms with only 938 ms left; 645 ms of work below it for nobody: orders 5, inventory 640"
    );
    // orders keeps its own finding: its own caller stopped waiting at 1002 and it went on,
    // waiting for inventory; what inventory did for nobody is named below it.
    let orphaned = &a.findings[1];
    assert_eq!(orphaned.wasted_ms, Some(5 + 640));
    assert_eq!(
        orphaned.message,
        "orders went on 653 ms (5 ms of its own work) after bff stopped waiting; 640 ms of work below it for nobody: inventory 640"
    );
    // The waterfall draws orders' 645 ms past the give-up as waiting, then 5 ms of work.
    let orders = a
        .rows
        .iter()
        .zip(&a.row_spans)
        .find(|(_, s)| s.span_id == sid(5))
        .unwrap()
        .0;
    assert_eq!((orders.waiting_ms, orders.late_ms), (650, 5));
    // All of it on inventory, a callee hop of the chain: the request held for nobody.
    assert_eq!(orders.held_ms, 650);
    // inventory gets no finding of its own, but its dead work counts everywhere.
    assert_eq!(a.findings_on(sid(7)).count(), 0);
    assert_eq!(a.summary.wasted_ms, 645);
    let edges: Vec<(&str, i64)> = a.edges.iter().map(|e| (&*e.callee, e.wasted_ms)).collect();
    assert_eq!(edges, vec![("bff", 0), ("orders", 5), ("inventory", 640)]);
    assert_eq!(a.summary.outcome, ChainOutcome::DeadlineExceeded);
    // orders honours the 3000 ms it was given: the reset above explains its long wait, so no
    // timeout_inverted on its call to inventory, nor on bff's reset call itself.
    assert!(
        !a.findings
            .iter()
            .any(|f| f.kind == FindingKind::TimeoutInverted)
    );
}

/// The same chain in the per-service totals: orders held its request for nobody while it
/// waited (its `held_ms`), inventory worked for nobody (its dead work); each instant once.
#[test]
fn a_service_that_only_waits_for_nobody_is_told_from_one_that_works() {
    let chain = chain_of(fixed_timeout());
    let a = chain.analyse(&Options::default());
    let mut totals = Totals::new();
    totals.fold(&a, &a.edges, &HopSample::of(&a, &chain));
    let service = |totals: &Totals, name: &str| {
        totals
            .services()
            .find(|(n, _)| &***n == name)
            .map(|(_, t)| (t.wasted_ms, t.held_ms))
    };
    assert_eq!(service(&totals, "orders"), Some((5, 650)));
    assert_eq!(service(&totals, "inventory"), Some((640, 0)));
    assert_eq!(service(&totals, "bff"), Some((0, 0)));
    let orders = totals
        .services()
        .find(|(n, _)| &***n == "orders")
        .unwrap()
        .1;
    assert!(orders.held_share() > 0.25 && orders.dead_share() < 0.01);
    // Taken back out exactly, and carried through a report (as `merge` reads one).
    let report = totals.report(&FindingList::new(10), []);
    let svc = report
        .services
        .iter()
        .find(|s| &*s.service == "orders")
        .unwrap();
    assert_eq!(svc.held_ms, 650);
    let (read, _) = Totals::from_report(&report, 10);
    let back = read.services().find(|(n, _)| &***n == "orders").unwrap().1;
    assert_eq!(back.held_ms, 650);
    totals.unfold(&a, &a.edges, &HopSample::of(&a, &chain));
    assert_eq!(service(&totals, "orders").unwrap_or_default(), (0, 0));
}

#[test]
fn a_consumer_inherits_no_give_up_time_through_a_producer() {
    let mut consumer = hop(3, Some(2), "worker", 100, 900, Some(500));
    consumer.kind = SpanKind::Consumer;
    let mut producer = call(2, 1, "api", 10, 12, 990, Some(500));
    producer.kind = SpanKind::Producer;
    let spans = vec![hop(1, None, "api", 0, 20, Some(1000)), producer, consumer];
    let a = analyse(spans.clone());
    // The producer and the api are long gone; the message's own deadline (100 + 500) is all
    // that bounds the consumer: 300 ms of its work came after it.
    assert_eq!(dead_by_service(&a), vec![("worker".to_owned(), 300)]);
    assert_eq!(kinds(&a), vec![]);
    // Without a deadline of its own nobody is waiting for it, and nothing is dead.
    let mut open = spans;
    open[2].budget.received_ms = None;
    open[2].budget.remaining_at_start_ms = None;
    open[2].budget.source = None;
    assert_eq!(analyse(open).summary.wasted_ms, 0);
}

#[test]
fn a_chain_whose_root_has_not_arrived_is_in_flight() {
    // orders' span arrived; the gateway's SERVER span (its parent) has not.
    let spans = fixed_timeout();
    let a = analyse(spans[3..].to_vec());
    assert_eq!(a.summary.outcome, ChainOutcome::InFlight);
    assert!(!a.summary.outcome.failed());
    assert_eq!(analyse(Vec::new()).summary.outcome, ChainOutcome::InFlight);
    // Once it arrives, the outcome is the user's.
    assert_eq!(
        analyse(spans).summary.outcome,
        ChainOutcome::DeadlineExceeded
    );
}

#[test]
fn the_chain_outcome_is_read_from_the_root_hop() {
    let outcome = |edit: &dyn Fn(&mut Span)| {
        let mut root = stock_hop(1, None, "edge", 0, 100);
        edit(&mut root);
        analyse([root, stock_hop(2, Some(1), "other", 10, 20)])
            .summary
            .outcome
    };
    assert_eq!(outcome(&|_| {}), ChainOutcome::Ok);
    assert_eq!(
        outcome(&|s| s.budget.http_status = Some(200)),
        ChainOutcome::Ok
    );
    assert_eq!(
        outcome(&|s| s.budget.http_status = Some(404)),
        ChainOutcome::Ok
    );
    assert_eq!(
        outcome(&|s| s.budget.http_status = Some(504)),
        ChainOutcome::DeadlineExceeded
    );
    assert_eq!(
        outcome(&|s| s.budget.http_status = Some(503)),
        ChainOutcome::Shed
    );
    assert_eq!(
        outcome(&|s| s.budget.http_status = Some(500)),
        ChainOutcome::Error
    );
    assert_eq!(
        outcome(&|s| s.status = SpanStatus::Error),
        ChainOutcome::Error
    );
    assert_eq!(
        outcome(&|s| s.budget.rpc_status = Some(4)),
        ChainOutcome::DeadlineExceeded
    );
    assert_eq!(
        outcome(&|s| s.budget.rpc_status = Some(8)),
        ChainOutcome::Shed
    );
    assert_eq!(
        outcome(&|s| s.budget.rpc_status = Some(1)),
        ChainOutcome::Cancelled
    );
    assert_eq!(
        outcome(&|s| s.budget.rpc_status = Some(0)),
        ChainOutcome::Ok
    );
    // A generic error gives way to what the status says: a gateway relaying a 503.
    assert_eq!(
        outcome(&|s| {
            s.budget.http_status = Some(503);
            s.budget.outcome = Some(Outcome::Error);
        }),
        ChainOutcome::Shed
    );
    assert_eq!(
        outcome(&|s| {
            s.budget.http_status = Some(500);
            s.budget.outcome = Some(Outcome::Error);
        }),
        ChainOutcome::Error
    );
    // budget.outcome wins over the status.
    assert_eq!(
        outcome(&|s| {
            s.budget.http_status = Some(200);
            s.budget.outcome = Some(Outcome::ShedExpired);
        }),
        ChainOutcome::Shed
    );
}

/// A worker with a queue, answered with bare statuses as any HTTP server does.
fn worker_answering(status: i64, worked: bool) -> Vec<Span> {
    let mut call = stock_call(2, 1, "edge", 10, 100);
    call.budget.http_status = Some(status);
    let mut worker = stock_hop(3, Some(2), "worker", 11, 99);
    worker.budget.http_status = Some(status);
    let mut edge = stock_hop(1, None, "edge", 0, 110);
    edge.budget.http_status = Some(status);
    let mut spans = vec![edge, call, worker];
    if worked {
        spans.push(span(4, Some(3), "worker", SpanKind::Internal, 20, 90));
    }
    spans
}

#[test]
fn bare_503_and_504_are_sheds_on_the_hop_that_answered_them_not_on_the_one_relaying() {
    let a = analyse(worker_answering(503, false));
    assert_eq!(kinds(&a), vec![(FindingKind::ShedFull, sid(3))]);
    assert_eq!(a.summary.outcome, ChainOutcome::Shed);
    // A 504 before any work started: dropped at dequeue.
    let a = analyse(worker_answering(504, false));
    assert_eq!(kinds(&a), vec![(FindingKind::ShedExpired, sid(3))]);
    assert_eq!(a.findings[0].severity, Severity::Info);
    assert_eq!(a.summary.outcome, ChainOutcome::DeadlineExceeded);
    // A 504 after the work started is a deadline exceeded, not a shed.
    let a = analyse(worker_answering(504, true));
    assert_eq!(kinds(&a), vec![]);
    // gRPC's RESOURCE_EXHAUSTED is a shed too.
    let mut grpc = worker_answering(200, false);
    for s in &mut grpc {
        s.budget.http_status = None;
        s.budget.rpc_status = Some(8);
    }
    assert_eq!(kinds(&analyse(grpc)), vec![(FindingKind::ShedFull, sid(3))]);
}

/// Node.js's shape: the edge's SERVER span ends when its client hangs up at 500 ms (status
/// 200), but its `fetch` to the worker goes on until its own 2000 ms timeout fires; the
/// worker's SERVER span ends when the edge aborts, and its traced work goes on to 2500 ms.
fn hung_up(edge_budget: Option<i64>) -> Vec<Span> {
    let mut edge = stock_hop(1, None, "edge", 0, 500);
    edge.budget.http_status = Some(200);
    if let Some(b) = edge_budget {
        edge.budget.received_ms = Some(b);
        edge.budget.source = Some(BudgetSource::Header(crate::carrier::Form::Ms));
    }
    let mut fetch = stock_call(2, 1, "edge", 10, 2010);
    fetch.status = SpanStatus::Error;
    fetch.budget.error_type = Some(Arc::from("23"));
    let mut worker = stock_hop(3, Some(2), "worker", 12, 2010);
    worker.budget.http_status = Some(200);
    let work = span(4, Some(3), "worker", SpanKind::Internal, 300, 2500);
    vec![edge, fetch, worker, work]
}

#[test]
fn work_that_outlives_its_server_span_is_dead_work_and_a_call_left_open_is_not() {
    let a = analyse(hung_up(None));
    // The edge's user was gone at 500. The edge's fetch waited on to 2010: waiting, not work,
    // and what it waited for is counted in the worker, which worked to 2500 for nobody.
    assert_eq!(kinds(&a), vec![(FindingKind::OrphanedWork, sid(3))]);
    assert_eq!(dead_by_service(&a), vec![("worker".to_owned(), 2000)]);
    assert_eq!(a.summary.wasted_ms, 2000);
    // The edge's span ended at 500 with its call still open: it left the call open, and the
    // worker is blamed from then on (not only from the moment the fetch gave up).
    let worker = &a.findings[0];
    assert_eq!(worker.wasted_ms, Some(2000));
    assert_eq!(
        worker.message,
        "edge answered at 500 ms and left its call open: worker worked 2,000 ms for nobody"
    );
    // The waterfall paints no late bar on the edge's open call.
    let fetch = a.rows.iter().find(|r| r.span == 1).unwrap();
    assert_eq!((fetch.dead_ms, fetch.late_ms), (0, 0));
    // "Answered" 200 while its own call was still waiting: its caller hung up.
    assert_eq!(a.summary.outcome, ChainOutcome::Cancelled);
    assert_eq!(a.edges[0].wasted_ms, 2000);

    // Elysia's shape: the edge's own internal span goes on after its SERVER span ended with
    // ERROR "Request aborted": that is work, dead past its give-up time, and orphaned.
    let mut spans = hung_up(None);
    spans[0].status = SpanStatus::Error;
    spans[0].budget.http_status = None;
    spans.push(span(5, Some(1), "edge", SpanKind::Internal, 400, 700));
    let a = analyse(spans);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::OrphanedWork, sid(1)),
            (FindingKind::OrphanedWork, sid(3))
        ]
    );
    assert_eq!(
        dead_by_service(&a),
        vec![("edge".to_owned(), 200), ("worker".to_owned(), 2000)]
    );
    assert!(
        a.findings[0]
            .message
            .starts_with("edge kept working 200 ms after it answered or its caller hung up"),
        "{}",
        a.findings[0].message
    );
    assert_eq!(a.findings[0].wasted_ms, Some(200 + 2000));
}

#[test]
fn a_dropped_budget_carries_the_dead_work_it_caused() {
    // The edge read its own header (500 ms) and called the worker with a fixed timeout and no
    // header: a drop, and everything the worker did past 500 ms is for nobody.
    let a = analyse(hung_up(Some(500)));
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetDropped, sid(2)),
            (FindingKind::OrphanedWork, sid(3))
        ]
    );
    let dropped = &a.findings[0];
    assert_eq!(dropped.wasted_ms, Some(2000));
    assert_eq!(
        dropped.message,
        "edge had 490 ms left but forwarded no budget on this call; 2,000 ms of work below it for nobody: worker 2,000"
    );
    assert_eq!((a.summary.hops, a.summary.hops_with_budget), (2, 1));
    assert_eq!(a.services_without_budget, vec![Arc::from("worker")]);
}

#[test]
fn calls_that_got_no_answer_make_an_inferred_timeout_and_answered_ones_never_do() {
    let mut stats = EdgeStats::new();
    for (k, ms) in [1998u64, 2003, 2000].into_iter().enumerate() {
        let mut spans = hung_up(None);
        spans[1].end_unix_nano = (T0 + 10 + ms) * 1_000_000;
        for s in &mut spans {
            s.trace_id = TraceId([k as u8 + 1; 16]);
        }
        stats.add(&chain_of(spans).analyse(&Options::default()));
    }
    // Two answered calls far from the cluster do not move it.
    for (k, status) in [(10u8, 503), (11, 504)] {
        let mut spans = worker_answering(status, false);
        spans[1].end_unix_nano = (T0 + 4000) * 1_000_000;
        for s in &mut spans {
            s.trace_id = TraceId([k; 16]);
        }
        stats.add(&chain_of(spans).analyse(&Options::default()));
    }
    let edge = stats.get("edge", "worker").unwrap();
    assert_eq!(edge.timeout(), Some((2000, true)));
    assert_eq!(edge.unanswered.len(), 3);
    assert_eq!(stats.inferred_timeouts().get("edge", "worker"), Some(2000));
    let report = edge.to_report();
    assert_eq!(
        (report.timeout_ms, report.timeout_inferred),
        (Some(2000), true)
    );
    // Two unanswered calls are not enough to say.
    let mut two = EdgeStats::new();
    for k in 0..2u8 {
        let mut spans = hung_up(None);
        for s in &mut spans {
            s.trace_id = TraceId([k + 1; 16]);
        }
        two.add(&chain_of(spans).analyse(&Options::default()));
    }
    assert_eq!(two.get("edge", "worker").unwrap().timeout(), None);
}

/// Go's otelhttp names a client timeout by its error type, never with "timeout" in it: a call
/// cut by its context (`context.deadlineExceededError`) or by `http.Client.Timeout` (`*url.Error`,
/// status ERROR, no HTTP status) got no answer; the same types beside an HTTP status did.
#[test]
fn go_error_types_are_calls_that_got_no_answer() {
    let edge_of = |error_type: &str, status: SpanStatus, http: Option<i64>| {
        let mut stats = EdgeStats::new();
        for (k, ms) in [799u64, 800, 802].into_iter().enumerate() {
            let mut spans = hung_up(None);
            spans[1].end_unix_nano = (T0 + 10 + ms) * 1_000_000;
            spans[1].status = status;
            spans[1].budget.error_type = Some(Arc::from(error_type));
            spans[1].budget.http_status = http;
            for s in &mut spans {
                s.trace_id = TraceId([k as u8 + 1; 16]);
            }
            stats.add(&chain_of(spans).analyse(&Options::default()));
        }
        stats.get("edge", "worker").unwrap().timeout()
    };
    assert_eq!(
        edge_of("context.deadlineExceededError", SpanStatus::Error, None),
        Some((800, true))
    );
    assert_eq!(
        edge_of("context.deadlineExceededError", SpanStatus::Unset, None),
        Some((800, true))
    );
    assert_eq!(
        edge_of("*url.Error", SpanStatus::Error, None),
        Some((800, true))
    );
    // Answered: a status came back, whatever the error type says.
    assert_eq!(edge_of("*url.Error", SpanStatus::Error, Some(502)), None);
    assert_eq!(edge_of("500", SpanStatus::Error, Some(500)), None);
}

#[test]
fn an_inferred_timeout_past_the_budget_is_timeout_inverted() {
    let timeouts = {
        let mut stats = EdgeStats::new();
        for k in 0..3u8 {
            let mut spans = hung_up(Some(500));
            for s in &mut spans {
                s.trace_id = TraceId([k + 1; 16]);
            }
            stats.add(&chain_of(spans).analyse(&Options::default()));
        }
        stats.inferred_timeouts()
    };
    let a = analyse_with(hung_up(Some(500)), &timeouts);
    let inverted: Vec<&Finding> = a
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::TimeoutInverted)
        .collect();
    assert_eq!(inverted.len(), 1);
    assert_eq!(inverted[0].span_id, sid(2));
    assert_eq!(inverted[0].severity, Severity::Warning);
    assert_eq!(inverted[0].remaining_ms, Some(490));
    assert_eq!(
        inverted[0].message,
        "edge would wait 2000 ms for worker (inferred timeout) when everyone above stops waiting within 490 ms"
    );
    // Without a budget nobody above is known to stop waiting: no wait limit, no finding.
    let a = analyse_with(hung_up(None), &timeouts);
    assert!(
        !a.findings
            .iter()
            .any(|f| f.kind == FindingKind::TimeoutInverted)
    );
}

#[test]
fn layered_fixed_timeouts_are_timeout_inverted_where_the_inner_one_reaches_past_the_outer() {
    // nginx (10 s to the app) -> rails: 9.5 s in the database, then an 8 s call out.
    let mut to_app = stock_call(2, 1, "proxy", 5, 10_005);
    to_app.budget.timeout_ms = Some(10_000);
    to_app.budget.http_status = Some(504);
    let mut out = stock_call(5, 3, "app", 9_520, 17_520);
    out.budget.timeout_ms = Some(8_000);
    out.status = SpanStatus::Error;
    let spans = vec![
        stock_hop(1, None, "proxy", 0, 10_010),
        to_app,
        stock_hop(3, Some(2), "app", 6, 17_530),
        span(4, Some(3), "app", SpanKind::Client, 10, 9_510),
        out,
        stock_hop(6, Some(5), "payments", 9_521, 17_600),
    ];
    let a = analyse(spans);
    let inverted: Vec<(SpanId, Option<i64>)> = a
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::TimeoutInverted)
        .map(|f| (f.span_id, f.remaining_ms))
        .collect();
    // From 9520 ms the app could wait 8 s; the proxy stops waiting at 10 005 ms.
    assert_eq!(inverted, vec![(sid(5), Some(485))]);
    assert!(a.summary.wasted_ms > 7000);
}

#[test]
fn a_timeout_ten_times_the_p99_is_oversized_unless_the_edge_forwards_a_budget() {
    let mut stats = EdgeStats::new();
    let mut forwarding = EdgeStats::new();
    for k in 0..25u8 {
        let mut call = stock_call(2, 1, "api", 10, 50 + u64::from(k));
        call.budget.timeout_ms = Some(5000);
        let spans = vec![
            stock_hop(1, None, "api", 0, 100),
            call,
            stock_hop(3, Some(2), "db", 11, 49),
        ];
        let mut spans: Vec<Span> = spans
            .into_iter()
            .map(|mut s| {
                s.trace_id = TraceId([k + 1; 16]);
                s
            })
            .collect();
        stats.add(&chain_of(spans.clone()).analyse(&Options::default()));
        spans[1].budget.forwarded_ms = Some(900);
        forwarding.add(&chain_of(spans).analyse(&Options::default()));
    }
    let findings = stats.findings();
    assert_eq!(findings.len(), 1);
    let f = &findings[0];
    assert_eq!(
        (f.kind, f.severity),
        (FindingKind::TimeoutOversized, Severity::Info)
    );
    // On the slowest call: 40 + 24 = 64 ms.
    assert_eq!((f.trace_id, f.span_id), (TraceId([25; 16]), sid(2)));
    assert!(
        f.message
            .contains("waits up to 5000 ms for db, whose p99 is 64 ms over 25 calls")
    );
    assert!(forwarding.findings().is_empty());
    let report = Report::from_analyses(&[]);
    assert!(report.findings.is_empty());
}

#[test]
fn coverage_counts_hops_without_a_budget_and_names_their_services() {
    let report = Report::from_spans(hung_up(None), &Options::default());
    let c = &report.summary.coverage;
    assert_eq!((c.hops_with_budget, c.hops_without_budget), (0, 2));
    assert_eq!(
        c.services_without_budget,
        vec![Arc::from("edge"), Arc::from("worker")]
    );
    assert_eq!(
        c.warning().as_deref(),
        Some(
            "budget known on 0 of 2 hops: add a carrier with --budget-header, or the contract's attributes (no budget: edge, worker)"
        )
    );
    let healthy = Report::from_spans(healthy(), &Options::default());
    assert_eq!(healthy.summary.coverage.warning(), None);
    assert_eq!(healthy.summary.coverage.hops_with_budget, 4);
}

#[test]
fn a_span_that_lasts_centuries_is_a_broken_clock_not_waste() {
    let mut spans = fixed_timeout();
    spans[4].end_unix_nano = u64::MAX;
    let a = analyse(spans);
    assert!(a.findings.iter().any(|f| f.kind == FindingKind::ClockSkew
        && f.span_id == sid(5)
        && f.message.contains("a clock or an exporter is wrong")));
    assert!(a.summary.wasted_ms < 24 * 3_600_000);
    assert!(
        a.findings
            .iter()
            .all(|f| f.wasted_ms.unwrap_or(0) < 24 * 3_600_000)
    );
}

#[test]
fn every_carrier_gets_one_tolerance_plus_its_rounding() {
    let o = Options::default();
    use crate::carrier::Form;
    // Absolute carriers get no special slack: a wrong clock is measured, not absorbed.
    for (source, rounding) in [
        (BudgetSource::XBudgetMs, 0),
        (BudgetSource::ConnectTimeoutMs, 0),
        (BudgetSource::XEnvoyExpectedRqTimeoutMs, 0),
        (BudgetSource::GrpcTimeout, 1),
        (BudgetSource::XRequestDeadline, 1),
        (BudgetSource::Header(Form::Ms), 0),
        (BudgetSource::Header(Form::DeadlineMs), 0),
        (BudgetSource::Header(Form::Seconds), 1),
        (BudgetSource::Header(Form::DeadlineSeconds), 1),
    ] {
        assert_eq!(o.tolerance_for(Some(source)), 5 + rounding, "{source:?}");
    }
    assert!(BudgetSource::Header(Form::DeadlineMs).is_absolute());
}

/// The TypeScript PIX API's shape: an absolute deadline arrives with 818 ms left, and the hop
/// calls settlement with a fixed 1000 ms timeout. Read as a relative budget or an absolute one,
/// the same figures give the same `timeout_inverted`.
#[test]
fn an_absolute_deadline_buys_no_slack_for_timeout_inverted() {
    for source in [
        BudgetSource::XBudgetMs,
        BudgetSource::XRequestDeadline,
        BudgetSource::Header(crate::carrier::Form::DeadlineMs),
    ] {
        let mut api = stock_hop(1, None, "api", 0, 900);
        api.budget.received_ms = Some(818);
        api.budget.source = Some(source);
        let mut call = stock_call(2, 1, "api", 2, 890);
        call.budget.timeout_ms = Some(1000);
        let settlement = stock_hop(3, Some(2), "settlement", 3, 880);
        let a = analyse([api, call, settlement]);
        assert!(
            a.findings
                .iter()
                .any(|f| f.kind == FindingKind::TimeoutInverted && f.span_id == sid(2)),
            "{source:?}: {:#?}",
            a.findings
        );
    }
}

mod totals {
    use proptest::prelude::*;

    use super::*;

    /// A random tree of hops and calls with random timing: a hop's own spans stay inside it,
    /// a callee may outlive its call (and its caller), a hop may have internal spans.
    fn chain(picks: &[(prop::sample::Index, u64, u64, u64, bool)]) -> Vec<Span> {
        // The root's user waits for it to end (no budget of its own to run out): a root's
        // dead work has no edge into it, and here it has none.
        let mut spans = vec![stock_hop(1, None, "s0", 0, 5000)];
        let mut hops: Vec<(u64, u64, u64)> = vec![(1, 0, 5000)];
        let mut next = 2;
        for (pick, start, len, service, internal) in picks {
            let (parent, p0, p1) = hops[pick.index(hops.len())];
            let service_name = format!("s{service}");
            let start = p0 + start % (p1 - p0).max(1);
            let end = (start + len).min(p1);
            let caller = spans
                .iter()
                .find(|s| u64::from_be_bytes(s.span_id.0) == parent)
                .map(|s| s.service.to_string())
                .unwrap_or_default();
            if *internal {
                spans.push(span(
                    next,
                    Some(parent),
                    &caller,
                    SpanKind::Internal,
                    start,
                    end,
                ));
                next += 1;
                continue;
            }
            spans.push(stock_call(next, parent, &caller, start, end));
            let callee_end = start + 1 + (len * 3) / 2;
            spans.push(stock_hop(
                next + 1,
                Some(next),
                &service_name,
                start + 1,
                callee_end,
            ));
            hops.push((next + 1, start + 1, callee_end));
            next += 2;
        }
        spans
    }

    proptest! {
        #[test]
        fn the_chain_the_edges_and_the_services_count_the_same_dead_work(
            picks in prop::collection::vec(
                (any::<prop::sample::Index>(), 0u64..3000, 1u64..3000, 0u64..4, any::<bool>()),
                0..30,
            ),
        ) {
            let a = analyse(chain(&picks));
            let rows: i64 = a.rows.iter().map(|r| i64::from(r.dead_ms)).sum();
            let edges: i64 = a.edges.iter().map(|e| e.wasted_ms).sum();
            let mut services: std::collections::HashMap<String, i64> = Default::default();
            for (r, s) in a.rows.iter().zip(&a.row_spans) {
                *services.entry(s.service.to_string()).or_default() += i64::from(r.dead_ms);
            }
            prop_assert_eq!(a.summary.wasted_ms, rows);
            prop_assert_eq!(a.summary.wasted_ms, edges);
            prop_assert_eq!(a.summary.wasted_ms, services.values().sum::<i64>());
            let mut stats = EdgeStats::new();
            stats.add(&a);
            prop_assert_eq!(stats.sorted().iter().map(|e| e.wasted_ms).sum::<i64>(), edges);
            let report = Report::from_analyses([&a.analysis]);
            prop_assert_eq!(report.summary.wasted_ms, a.summary.wasted_ms);
            prop_assert_eq!(report.edges.iter().map(|e| e.wasted_ms).sum::<i64>(), edges);
            for (r, s) in a.rows.iter().zip(&a.row_spans) {
                prop_assert!(i64::from(r.dead_ms) <= s.duration_ms(), "{r:?} {s:?}");
            }
        }
    }
}

/// Python's WSGI shape: the edge's SERVER span ends when the app returns, whether its user is
/// still there or not. The user sent 1000 ms (captured header); the edge waited on its fixed 2 s
/// timeout, and the worker answered at 1790 ms after working from 1200 ms. Nothing in the spans
/// says whether the user still waited: only the budget it sent, which ran out 800 ms before the
/// answer.
fn wsgi_late(status: i64) -> Vec<Span> {
    let mut edge = stock_hop(1, None, "edge", 0, 1800);
    edge.budget.http_status = Some(status);
    edge.budget.received_ms = Some(1000);
    edge.budget.source = Some(BudgetSource::Header(crate::carrier::Form::Ms));
    let mut get = stock_call(2, 1, "edge", 5, 1795);
    get.budget.http_status = Some(status);
    let mut worker = stock_hop(3, Some(2), "worker", 6, 1790);
    worker.budget.http_status = Some(status);
    let work = span(4, Some(3), "worker", SpanKind::Internal, 1200, 1790);
    vec![edge, get, worker, work]
}

#[test]
fn a_root_that_answers_after_the_budget_it_received_is_a_late_answer_not_dead_work() {
    let a = analyse(wsgi_late(200));
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::LateAnswer, sid(1)),
            (FindingKind::BudgetDropped, sid(2))
        ]
    );
    let late = &a.findings[0];
    assert_eq!(late.severity, Severity::Warning);
    assert_eq!(
        late.message,
        "edge answered (status 200) 800 ms after the 1000 ms budget it received ran out"
    );
    assert_eq!(
        (late.received_ms, late.remaining_ms, late.wasted_ms),
        (Some(1000), Some(-800), None)
    );
    // No span shows anyone gone before the answer: no dead work anywhere.
    assert_eq!(dead_by_service(&a), vec![]);
    assert_eq!(a.summary.wasted_ms, 0);
    // Its 200 is an answer, late.
    assert_eq!(a.summary.outcome, ChainOutcome::Late);
    assert!(!a.summary.outcome.failed());
    // A failure answered after the deadline is the deadline being enforced, a moment late: its
    // outcome says it failed, and there is no late_answer.
    for (status, outcome) in [
        (503, ChainOutcome::Shed),
        (504, ChainOutcome::DeadlineExceeded),
        (500, ChainOutcome::Error),
    ] {
        let a = analyse(wsgi_late(status));
        assert_eq!(a.summary.outcome, outcome, "{status}");
        assert!(
            a.findings.iter().all(|f| f.kind != FindingKind::LateAnswer),
            "{status}"
        );
    }
    // So is a span that says ERROR with no status, or a declared failure.
    let mut errored = wsgi_late(200);
    errored[0].budget.http_status = None;
    errored[0].status = SpanStatus::Error;
    assert!(
        analyse(errored)
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::LateAnswer)
    );
    let mut declared = wsgi_late(200);
    declared[0].budget.outcome = Some(Outcome::DeadlineExceeded);
    assert!(
        analyse(declared)
            .findings
            .iter()
            .all(|f| f.kind != FindingKind::LateAnswer)
    );
    // A declared `ok` is an answer too: late all the same.
    let mut declared = wsgi_late(200);
    declared[0].budget.outcome = Some(Outcome::Ok);
    assert_eq!(analyse(declared).summary.outcome, ChainOutcome::Late);

    // Answered within the budget (the tolerance is a threshold): fine.
    let mut in_time = wsgi_late(200);
    for s in &mut in_time {
        s.end_unix_nano -= 795 * 1_000_000;
    }
    in_time[3].start_unix_nano -= 900 * 1_000_000;
    let a = analyse(in_time);
    assert_eq!(kinds(&a), vec![(FindingKind::BudgetDropped, sid(2))]);
    assert_eq!(a.summary.outcome, ChainOutcome::Ok);
    assert_eq!(a.summary.wasted_ms, 0);
    // 6 ms late is past the 5 ms tolerance.
    let mut just_late = wsgi_late(200);
    for s in &mut just_late {
        s.end_unix_nano -= 794 * 1_000_000;
    }
    just_late[3].start_unix_nano -= 900 * 1_000_000;
    assert_eq!(analyse(just_late).summary.outcome, ChainOutcome::Late);
}

#[test]
fn a_root_without_a_received_budget_or_under_a_caller_is_never_late() {
    // Its own default is not a caller's patience.
    let mut spans = wsgi_late(200);
    spans[0].budget.received_ms = None;
    spans[0].budget.default_ms = Some(1000);
    spans[0].budget.source = Some(BudgetSource::Default);
    let a = analyse(spans);
    assert!(a.findings.iter().all(|f| f.kind != FindingKind::LateAnswer));
    assert_eq!(a.summary.outcome, ChainOutcome::Ok);
    // A hop whose caller's span is missing is not the root: its caller may still arrive.
    let mut spans = wsgi_late(200);
    spans[0].parent_span_id = Some(sid(99));
    let a = analyse(spans);
    assert!(a.findings.iter().all(|f| f.kind != FindingKind::LateAnswer));
    assert_eq!(a.summary.outcome, ChainOutcome::InFlight);
}

#[test]
fn a_root_that_works_past_its_budget_is_late_and_its_callee_is_judged_by_its_call() {
    // The edge received 500 ms from a client that writes no span, and took 900. Nothing shows
    // the client gone: the worker, whose call was still open, worked for somebody.
    let mut edge = stock_hop(1, None, "edge", 0, 900);
    edge.budget.received_ms = Some(500);
    edge.budget.source = Some(BudgetSource::Header(crate::carrier::Form::Ms));
    edge.budget.http_status = Some(200);
    let mut call = stock_call(2, 1, "edge", 10, 880);
    call.budget.forwarded_ms = Some(480);
    let mut worker = stock_hop(3, Some(2), "worker", 12, 870);
    worker.budget.received_ms = Some(480);
    worker.budget.source = Some(BudgetSource::Header(crate::carrier::Form::Ms));
    let a = analyse([edge.clone(), call.clone(), worker.clone()]);
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::LateAnswer, sid(1)));
    assert_eq!(
        f.message,
        "edge answered (status 200) 400 ms after the 500 ms budget it received ran out"
    );
    assert_eq!(a.summary.wasted_ms, 0);
    assert_eq!(a.summary.outcome, ChainOutcome::Late);
    // The worker's own call ended at 880 and it went on to 960: that span proves it.
    worker.end_unix_nano += 90 * 1_000_000;
    let a = analyse([edge, call, worker]);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::LateAnswer, sid(1)),
            (FindingKind::OrphanedWork, sid(3))
        ]
    );
    assert_eq!(a.summary.wasted_ms, 80);
}
