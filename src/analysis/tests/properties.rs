//! Property tests: a chain gives back the spans it was given; any chain, however malformed, is
//! analysed without a panic, one row per span, the same whatever the arrival order; correct
//! propagation in any shape gives no finding.

use proptest::prelude::*;

use super::*;

fn any_facts() -> impl Strategy<Value = BudgetFacts> {
    let n = || {
        prop_oneof![
            Just(None),
            (-2_000i64..5_000).prop_map(Some),
            prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0)].prop_map(Some)
        ]
    };
    let source = prop::option::of(prop::sample::select(vec![
        BudgetSource::XBudgetMs,
        BudgetSource::GrpcTimeout,
        BudgetSource::XRequestDeadline,
        BudgetSource::Default,
        BudgetSource::Invalid,
        BudgetSource::None,
    ]));
    let outcome = prop::option::of(prop::sample::select(vec![
        Outcome::Ok,
        Outcome::ShedFull,
        Outcome::ShedExpired,
        Outcome::Refused,
        Outcome::Error,
    ]));
    let error_type = prop::option::of(prop::sample::select(vec!["timeout", "503"]));
    let callee_name = prop::option::of(prop::sample::select(vec!["postgresql", "api.example"]));
    (
        (n(), n(), n(), n(), n()),
        (n(), n(), n(), n()),
        (n(), n(), n(), error_type),
        source,
        outcome,
        (callee_name, any::<bool>()),
    )
        .prop_map(
            |(
                (received, default, queue, at_start, remaining),
                (forwarded, timeout, attempt, deadline),
                (sla, http, rpc, error_type),
                source,
                outcome,
                (callee_name, other_cause),
            )| {
                BudgetFacts {
                    received_ms: received,
                    source,
                    default_ms: default,
                    queue_wait_ms: queue,
                    remaining_at_start_ms: at_start,
                    outcome,
                    remaining_ms: remaining,
                    forwarded_ms: forwarded,
                    timeout_ms: timeout,
                    attempt,
                    deadline_unix_ms: deadline,
                    sla_ms: sla,
                    http_status: http,
                    rpc_status: rpc,
                    error_type: error_type.map(Arc::from),
                    exception_event: false,
                    other_cause,
                    callee_name: callee_name.map(Arc::from),
                }
            },
        )
}

fn any_span() -> impl Strategy<Value = Span> {
    let kind = prop::sample::select(vec![
        SpanKind::Internal,
        SpanKind::Server,
        SpanKind::Client,
        SpanKind::Producer,
        SpanKind::Consumer,
    ]);
    let time = prop_oneof![0u64..2_000_000_000, Just(0), Just(u64::MAX)];
    (
        0u64..24,
        prop::option::of(0u64..28),
        prop::sample::select(vec!["a", "b", "c"]),
        kind,
        time.clone(),
        time,
        any_facts(),
    )
        .prop_map(|(id, parent, service, kind, start, end, budget)| Span {
            trace_id: trace(),
            span_id: sid(id),
            parent_span_id: parent.map(sid),
            service: Arc::from(service),
            name: Arc::from(if id % 2 == 0 { "GET x" } else { "work" }),
            kind,
            start_unix_nano: start,
            end_unix_nano: end,
            status: SpanStatus::Unset,
            budget,
        })
}

proptest! {
    #[test]
    fn a_chain_gives_back_exactly_the_spans_it_was_given(
        spans in prop::collection::vec(any_span(), 0..60),
    ) {
        // Packed storage, replacement of duplicates (with more or fewer facts than the copy
        // they replace) and the compaction that follows must all be invisible.
        let mut chain = Chain::new(trace());
        let mut expected: Vec<Span> = Vec::new();
        // The copy a chain keeps of a span id (Inserted::Conflicting): the one that ends
        // later, then the one with more facts, then the greater by its contents.
        let rank = |s: &Span| {
            let b = &s.budget;
            let facts = [
                b.received_ms, b.default_ms, b.queue_wait_ms, b.remaining_at_start_ms,
                b.remaining_ms, b.forwarded_ms, b.timeout_ms, b.sla_ms, b.attempt,
                b.deadline_unix_ms, b.http_status, b.rpc_status,
            ]
            .iter()
            .flatten()
            .count()
                + usize::from(b.source.is_some())
                + usize::from(b.outcome.is_some())
                + usize::from(b.error_type.is_some())
                + usize::from(b.callee_name.is_some());
            (s.end_unix_nano, facts)
        };
        for s in spans {
            chain.insert(s.clone());
            match expected.iter_mut().find(|e| e.span_id == s.span_id) {
                Some(e) => {
                    let new_wins = match rank(&s).cmp(&rank(e)) {
                        std::cmp::Ordering::Equal => format!("{s:?}") > format!("{e:?}"),
                        order => order == std::cmp::Ordering::Greater,
                    };
                    if new_wins {
                        *e = s;
                    }
                }
                None => expected.push(s),
            }
        }
        prop_assert_eq!(chain.spans().collect::<Vec<_>>(), expected.clone());
        for e in &expected {
            prop_assert_eq!(chain.get(e.span_id), Some(e.clone()));
        }
        chain.shrink_to_fit();
        prop_assert_eq!(chain.spans().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn arbitrary_spans_never_panic_and_every_span_gets_one_row(
        spans in prop::collection::vec(any_span(), 0..40),
    ) {
        let mut chain = Chain::new(trace());
        for s in spans {
            chain.insert(s);
        }
        let a = chain.analyse(&Options::default());
        prop_assert_eq!(a.rows.len(), chain.len());
        let mut ids: Vec<SpanId> = a.rows.iter().map(|r| chain.span(r.span as usize).unwrap().span_id).collect();
        ids.sort();
        ids.dedup();
        prop_assert_eq!(ids.len(), chain.len());
        for (r, row) in a.rows.iter().enumerate() {
            if let Some(p) = row.parent_row {
                prop_assert!((p as usize) < r);
                prop_assert_eq!(a.rows[p as usize].depth + 1, row.depth);
            }
        }
        let mut stats = EdgeStats::new();
        stats.add(&a);
        stats.remove(&a);
        prop_assert!(stats.is_empty());
        let report = Report::from_analyses([&a]);
        prop_assert!(serde_json::to_string(&report).is_ok());
    }

    #[test]
    fn arrival_order_does_not_change_the_analysis(
        spans in prop::collection::vec(any_span(), 0..30),
    ) {
        let mut unique: Vec<Span> = Vec::new();
        for s in spans {
            if !unique.iter().any(|u| u.span_id == s.span_id) {
                unique.push(s);
            }
        }
        let forward = analyse(unique.clone());
        unique.reverse();
        prop_assert_eq!(analyse(unique), forward);
    }

    #[test]
    fn correct_propagation_in_any_shape_gives_no_finding(
        picks in prop::collection::vec((any::<prop::sample::Index>(), 0u64..3, any::<bool>()), 0..40),
    ) {
        let spans = well_behaved(&picks);
        let a = analyse(spans);
        prop_assert_eq!(&a.findings, &vec![]);
    }
}

/// A tree of hops where every call forwards a little less than remained and every callee
/// finishes inside its caller's wait: each pick adds a call (and its callee hop, unless the
/// call is refused for lack of budget) under an earlier hop.
fn well_behaved(picks: &[(prop::sample::Index, u64, bool)]) -> Vec<Span> {
    // (span id, depth, received budget) of each hop.
    // The edge received as much as it takes: 1000 ms.
    let mut hops = vec![(1u64, 0u64, 1000i64)];
    let mut spans = vec![hop(1, None, "s0", 0, 1000, Some(1000))];
    let mut next = 2;
    for (pick, service, refuse) in picks {
        let (parent, depth, received) = hops[pick.index(hops.len())];
        let (start, end) = (2 * depth + 1, 1000 - 2 * depth - 1);
        let remaining = received - start as i64 + 2 * depth as i64;
        let name = format!("call s{service}");
        let (c, h) = (next, next + 1);
        next += 2;
        if remaining <= 10 || *refuse && remaining < 50 {
            let mut refused = call(c, parent, "caller", start, start, remaining, None);
            refused.name = Arc::from(name);
            refused.budget.outcome = Some(Outcome::Refused);
            spans.push(refused);
            continue;
        }
        let forwarded = remaining - 10;
        let mut out = call(c, parent, "caller", start, end, remaining, Some(forwarded));
        out.name = Arc::from(name);
        spans.push(out);
        let service = format!("s{service}");
        spans.push(hop(
            h,
            Some(c),
            &service,
            start + 1,
            end - 1,
            Some(forwarded),
        ));
        hops.push((h, depth + 1, forwarded));
    }
    // Callers are named after the hop that makes the call.
    let names: std::collections::HashMap<SpanId, Arc<str>> = spans
        .iter()
        .filter(|s| s.kind.is_hop())
        .map(|s| (s.span_id, s.service.clone()))
        .collect();
    for s in &mut spans {
        if s.kind.is_call() {
            s.service = names[&s.parent_span_id.unwrap()].clone();
        }
    }
    spans
}
