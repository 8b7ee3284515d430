//! Every chain counted once (`CONVENTIONS.md` section 6): totals that fold, unfold and merge,
//! and the bounded findings list.

use proptest::prelude::*;

use super::*;

/// Chain `t` of a varied set: healthy, a reset below orders, a slow inventory, a hop with no
/// budget, an unanswered call; each with its own trace id and latencies.
fn chain(t: u8, variant: u8, slow: u64) -> Vec<Span> {
    let mut spans = healthy();
    match variant % 5 {
        1 => {
            spans[3].budget.forwarded_ms = Some(5000);
            spans[4].budget.received_ms = Some(5000);
            spans[4].end_unix_nano = (T0 + 400 + slow) * 1_000_000;
        }
        2 => spans[6].end_unix_nano = (T0 + 279 + slow) * 1_000_000,
        3 => {
            spans[4].budget.received_ms = None;
            spans[4].budget.source = Some(BudgetSource::None);
        }
        4 => {
            spans[5].status = SpanStatus::Error;
            spans[5].budget.error_type = Some(Arc::from("ReadTimeout"));
        }
        _ => spans[4].end_unix_nano = (T0 + 31 + slow.min(80)) * 1_000_000,
    }
    for s in &mut spans {
        s.trace_id = TraceId([t; 16]);
    }
    spans
}

/// What must be equal between the report of one instance and the merge of shards: every
/// count and figure; the findings list as a set (its order within a trace follows the fold).
fn comparable(mut r: Report) -> Report {
    r.findings.sort_by_key(|f| (f.trace_id, f.span_id, f.kind));
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_split_into_shards_merges_to_the_report_of_one_instance(
        chains in prop::collection::vec((0u8..5, 0u64..3000, 0usize..4), 1..40),
    ) {
        let mut all = Vec::new();
        let mut shards: Vec<Vec<Span>> = vec![Vec::new(); 4];
        for (t, &(variant, slow, shard)) in chains.iter().enumerate() {
            let spans = chain(t as u8 + 1, variant, slow);
            all.extend(spans.clone());
            shards[shard].extend(spans);
        }
        let one = Report::from_spans(all, &Options::default());
        // Through JSON, as `budget-top merge` reads the shards' files.
        let read: Vec<Report> = shards
            .into_iter()
            .map(|s| {
                let r = Report::from_spans(s, &Options::default());
                serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap()
            })
            .collect();
        let merged = Report::merge(&read, DEFAULT_MAX_FINDINGS);
        prop_assert_eq!(comparable(merged), comparable(one));
    }

    #[test]
    fn a_capped_list_keeps_exact_counts_and_the_worst_of_each_kind(
        chains in prop::collection::vec((0u8..5, 0u64..3000), 1..40),
        max in 1usize..8,
    ) {
        let mut totals = Totals::new();
        let mut list = FindingList::new(max);
        let mut uncapped = FindingList::new(usize::MAX);
        for (t, &(variant, slow)) in chains.iter().enumerate() {
            let c = chains_from_spans(chain(t as u8 + 1, variant, slow));
            let a = c[0].analyse(&Options::default());
            totals.fold(&a, &a.edges, &HopSample::of(&a, &c[0]));
            list.offer(&a.findings, t as u64);
            uncapped.offer(&a.findings, t as u64);
        }
        let capped = totals.report(&list, []);
        let full = totals.report(&uncapped, []);
        prop_assert_eq!(&capped.summary.findings, &full.summary.findings);
        prop_assert_eq!(&capped.summary.findings_by_kind, &full.summary.findings_by_kind);
        prop_assert_eq!(capped.edges.len(), full.edges.len());
        let chain_listed = capped.findings.iter().filter(|f| f.count.is_none()).count();
        prop_assert!(chain_listed <= max);
        prop_assert_eq!(
            capped.summary.findings_listed + capped.summary.findings_omitted,
            full.summary.findings_listed + full.summary.findings_omitted
        );
        // Each kind listed keeps its findings with the most dead work.
        for kind in FindingKind::ALL {
            let most = full.findings.iter().filter(|f| f.kind == kind && f.count.is_none())
                .map(|f| f.wasted_ms.unwrap_or(0)).max();
            let kept: Vec<i64> = capped.findings.iter().filter(|f| f.kind == kind && f.count.is_none())
                .map(|f| f.wasted_ms.unwrap_or(0)).collect();
            if let (Some(most), false) = (most, kept.is_empty()) {
                prop_assert_eq!(kept.iter().copied().max(), Some(most));
            }
        }
    }
}

#[test]
fn a_chain_judged_again_replaces_its_contribution() {
    let first = chains_from_spans(chain(1, 0, 10));
    let again = chains_from_spans(chain(1, 1, 900));
    let (a, b) = (
        first[0].analyse(&Options::default()),
        again[0].analyse(&Options::default()),
    );
    let mut totals = Totals::new();
    let mut list = FindingList::default();
    totals.fold(&a, &a.edges, &HopSample::of(&a, &first[0]));
    list.offer(&a.findings, 0);
    totals.unfold(&a, &a.edges, &HopSample::of(&a, &first[0]));
    list.withdraw(&a.findings, 0);
    totals.fold(&b, &b.edges, &HopSample::of(&b, &again[0]));
    list.offer(&b.findings, 1);
    let direct = Report::from_spans(chain(1, 1, 900), &Options::default());
    assert_eq!(comparable(totals.report(&list, [])), comparable(direct));
    assert_eq!(totals.traces, 1);
}

/// `edge` (budget 500 ms, or none) calls `worker` with no timeout of its own; the call ends
/// unanswered at 2000 ms (what inferred timeouts are read from) and hangs under a budget.
fn unanswered_under_budget(t: u8, budget: Option<i64>) -> Vec<Span> {
    let mut root = hop(1, None, "edge", 0, 2010, budget);
    root.budget.source = Some(if budget.is_some() {
        BudgetSource::XBudgetMs
    } else {
        BudgetSource::None
    });
    let mut c = span(2, Some(1), "edge", SpanKind::Client, 10, 2010);
    c.status = SpanStatus::Error;
    c.budget.error_type = Some(Arc::from("ReadTimeout"));
    let mut spans = vec![
        root,
        c,
        span(3, Some(2), "worker", SpanKind::Server, 11, 1900),
    ];
    for s in &mut spans {
        s.trace_id = TraceId([t; 16]);
    }
    spans
}

#[test]
fn an_inferred_timeout_is_judged_per_edge_on_every_call_held_or_not() {
    // Three unanswered calls at 2000 ms give the edge its timeout; the four under a 500 ms
    // budget are timeout_inverted against it, the three without a budget are not.
    let mut spans = Vec::new();
    for t in 1..=3 {
        spans.extend(unanswered_under_budget(t, None));
    }
    for t in 4..=7 {
        spans.extend(unanswered_under_budget(t, Some(500)));
    }
    let one = Report::from_spans(spans.clone(), &Options::default());
    assert_eq!(one.count(FindingKind::TimeoutInverted), 4);
    let listed: Vec<&Finding> = one
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::TimeoutInverted)
        .collect();
    assert_eq!(listed.len(), 4, "one per call held: {listed:#?}");
    assert!(
        listed
            .iter()
            .all(|f| f.span_id == sid(2) && f.count == Some(1))
    );
    assert_eq!(
        listed[0].message,
        "edge would wait 2000 ms for worker (inferred timeout) when everyone above stops waiting within 490 ms"
    );
    assert_eq!(listed[0].remaining_ms, Some(490));
    assert_eq!(one.edges[0].timeout_ms, Some(2000));
    assert!(one.edges[0].timeout_inferred);
    assert_eq!(
        one.edges[0].findings.get(&FindingKind::TimeoutInverted),
        Some(&4)
    );

    // Chains no longer held: the same count, one finding that names the edge.
    let mut totals = Totals::new();
    let mut list = FindingList::default();
    for (seq, chain) in chains_from_spans(spans).iter().enumerate() {
        let a = chain.analyse(&Options::default());
        totals.fold(&a, &a.edges, &HopSample::of(&a, chain));
        list.offer(&a.findings, seq as u64);
    }
    let evicted = totals.report(&list, []);
    assert_eq!(evicted.count(FindingKind::TimeoutInverted), 4);
    let entry: Vec<&Finding> = evicted
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::TimeoutInverted)
        .collect();
    assert_eq!(entry.len(), 1);
    assert_eq!(entry[0].count, Some(4));
    assert_eq!(entry[0].trace_id, TraceId::default());
    assert_eq!(evicted.summary.findings, one.summary.findings);
    assert_eq!(evicted.summary.findings_omitted, 0);
}

/// The totals' own size is bounded (`CONVENTIONS.md` section 6): past the cap, a new edge is
/// counted on `other -> other` and a new service as `other`, the calls and hops so counted are
/// said, every other figure stays exact, and a chain judged again is taken out of where it
/// went; merged shards are capped alike.
#[test]
fn edges_and_services_past_the_cap_are_counted_as_other() {
    // 200 chains, each with services of their own names: 200 x 4 services, 200 x 3 edges.
    let renamed = |t: u8| {
        let mut spans = chain(t, 0, 0);
        for s in &mut spans {
            s.service = Arc::from(format!("{}-{t}", s.service));
        }
        spans
    };
    let cap = 10;
    let mut capped = Totals::new().with_max_keys(cap);
    let mut whole = Totals::new();
    let mut folded = Vec::new();
    for t in 1..=200u8 {
        let c = chains_from_spans(renamed(t));
        let a = c[0].analyse(&Options::default());
        let hops = HopSample::of(&a, &c[0]);
        capped.fold(&a, &a.edges, &hops);
        whole.fold(&a, &a.edges, &hops);
        folded.push((a, hops));
    }
    // At most the cap apart, plus `other`.
    assert!(capped.edges.len() <= cap + 1, "{}", capped.edges.len());
    assert!(capped.services().count() <= cap + 1);
    let report = capped.report(&FindingList::new(100), []);
    let full = whole.report(&FindingList::new(100), []);
    let other_edge = report
        .edges
        .iter()
        .find(|e| &*e.caller == OTHER && &*e.callee == OTHER)
        .expect("an other edge");
    assert_eq!(report.summary.edge_calls_folded, other_edge.calls);
    let other_service = report
        .services
        .iter()
        .find(|s| &*s.service == OTHER)
        .unwrap();
    assert_eq!(report.summary.service_hops_folded, other_service.hops);
    // Every call and hop is still counted, once.
    let calls = |r: &Report| r.edges.iter().map(|e| e.calls).sum::<u64>();
    let hops = |r: &Report| r.services.iter().map(|s| s.hops).sum::<u64>();
    assert_eq!(calls(&report), calls(&full));
    assert_eq!(hops(&report), hops(&full));
    assert_eq!(report.summary.traces, full.summary.traces);
    assert_eq!(report.summary.findings, full.summary.findings);
    assert_eq!(report.summary.wasted_ms, full.summary.wasted_ms);
    assert_eq!(full.summary.edge_calls_folded, 0);
    // Judged again, a chain counted as `other` is taken out of `other`, one kept apart out of
    // its own edge: unfolding everything leaves nothing.
    for (a, h) in &folded {
        capped.unfold(a, &a.edges, h);
    }
    let empty = capped.report(&FindingList::new(100), []);
    assert_eq!(calls(&empty), 0);
    assert_eq!(hops(&empty), 0);
    assert_eq!(empty.summary.edge_calls_folded, 0);
    assert_eq!(empty.summary.service_hops_folded, 0);
    // Merged reports are capped again, and say how many calls and hops went to `other`.
    let through_json: Report =
        serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
    let (back, _) = Totals::from_report(&through_json, 100);
    let mut merged = Totals::new().with_max_keys(cap);
    merged.merge(&back);
    let m = merged.report(&FindingList::new(100), []);
    assert!(m.edges.len() <= cap + 1);
    assert_eq!(calls(&m), calls(&full));
    assert_eq!(hops(&m), hops(&full));
    let apart: u64 = m
        .edges
        .iter()
        .filter(|e| &*e.caller != OTHER)
        .map(|e| e.calls)
        .sum();
    assert_eq!(m.summary.edge_calls_folded, calls(&full) - apart);
}

#[test]
fn counts_of_kinds_read_their_worst_severity() {
    let mut counts = KindCounts::default();
    assert_eq!(counts.worst(), None);
    counts.bump(FindingKind::ShedFull);
    assert_eq!(counts.worst(), Some(Severity::Info));
    counts.bump(FindingKind::RetryAmplified);
    assert_eq!(counts.worst(), Some(Severity::Warning));
    counts.bump(FindingKind::OrphanedWork);
    assert_eq!(counts.worst(), Some(Severity::Error));
}
