//! The store: chains assembled in any order across batches, re-analysed when spans join,
//! judged once and counted once (`CONVENTIONS.md` section 6): bounded retention, and totals
//! that stay exact over what was evicted.

use budget_top::ingest::decode::decode_request;
use budget_top::ingest::decode::interner::Interner;
use budget_top::store::Store;
use deadline_budget::analysis::{Span, TraceId};

use crate::support::reset_chain;

fn spans(t: u8) -> Vec<Span> {
    decode_request(&mut reset_chain(t), &mut Interner::default(), false).spans
}

#[test]
fn a_chain_assembles_in_any_order_and_is_reanalysed_when_spans_join() {
    let mut store = Store::new(100);
    let mut chain = spans(1);
    chain.reverse();
    // Child first: the call with the reset arrives before its parents.
    let rest = chain.split_off(2);
    store.insert_spans(chain);
    assert_eq!(store.analyse_dirty(), 1);
    let id = TraceId([1; 16]);
    assert!(store.chains().next().is_some());
    store.insert_spans(rest.clone());
    assert!(store.chains().next().unwrap().stale);
    assert_eq!(store.analyse_dirty(), 1);
    let analysis = store.analysis(id).unwrap();
    assert_eq!(analysis.summary.spans, 5);
    assert_eq!(&*analysis.summary.root_service, "frontend");
    assert_eq!(analysis.findings.len(), 1);
    // Counted once judged (quiet for --settle, evicted, or at a report), not before.
    assert_eq!(store.finding_counts().error, 0);
    store.judge_all();
    assert_eq!(store.finding_counts().error, 1);
    // The same spans again: duplicates, not new spans; the chain is judged again and its
    // contribution replaced, so the counts do not double.
    store.insert_spans(rest);
    store.analyse_dirty();
    assert_eq!(store.counters().chains_rejudged, 1);
    assert_eq!(store.counters().spans_held, 5);
    assert_eq!(store.counters().spans_duplicate, 3);
    assert_eq!(store.finding_counts().error, 1);
    let edge = store
        .edges()
        .into_iter()
        .find(|e| &*e.caller == "orders")
        .unwrap();
    assert_eq!((edge.calls, &*edge.callee), (1, "inventory"));
}

#[test]
fn retention_is_bounded_and_evicts_the_oldest_chains_first() {
    let mut store = Store::new(12);
    for t in 1..=10u8 {
        store.insert_spans(spans(t));
        store.analyse_dirty();
        assert!(store.counters().spans_held <= 12);
    }
    let held: Vec<TraceId> = store.chains().map(|c| c.trace_id).collect();
    assert_eq!(
        held,
        vec![TraceId([10; 16]), TraceId([9; 16])],
        "newest first, oldest evicted"
    );
    let counters = store.counters();
    assert_eq!(
        (
            counters.chains_evicted,
            counters.spans_evicted,
            counters.chains_held
        ),
        (8, 40, 2)
    );
    // Every chain counted once: the eight evicted were judged as they left and stay in the
    // totals; the two held are judged by the report.
    assert_eq!(store.finding_counts().error, 8);
    let report = store.report();
    assert_eq!(
        (
            report.summary.traces,
            report.summary.spans,
            report.findings.len()
        ),
        (10, 50, 10)
    );
    let edge = store
        .edges()
        .into_iter()
        .find(|e| &*e.caller == "orders")
        .unwrap();
    assert_eq!(edge.calls, 10);
    // The same as holding everything.
    let mut all = Store::new(1000);
    for t in 1..=10u8 {
        all.insert_spans(spans(t));
    }
    assert_eq!(all.report(), report);
}

/// A span for a chain judged and evicted is counted, not judged as a new chain; one for a chain
/// judged and still held judges it again.
#[test]
fn a_span_after_the_verdict_is_counted_or_judges_again() {
    let mut store = Store::new(5);
    store.insert_spans(spans(1));
    store.insert_spans(spans(2)); // evicts chain 1, judged as it goes
    assert_eq!(store.counters().chains_evicted, 1);
    store.insert_spans(spans(1).into_iter().take(2));
    assert_eq!(store.counters().spans_after_verdict, 2);
    assert!(store.chain(TraceId([1; 16])).is_none());
    let report = store.report();
    assert_eq!((report.summary.traces, report.summary.spans), (2, 10));
}

#[test]
fn one_chain_bigger_than_the_limit_is_capped_not_grown() {
    let mut store = Store::new(3);
    store.insert_spans(spans(1));
    assert_eq!(store.counters().spans_held, 3);
    assert_eq!(store.counters().spans_over_limit, 2);
}

#[test]
fn raw_attributes_are_kept_for_the_detail_view() {
    let mut request = reset_chain(1);
    let decoded = decode_request(&mut request, &mut Interner::default(), true);
    let span = decoded.spans[3].clone();
    let mut store = Store::new(100);
    store.insert_batch(budget_top::batch::Batch {
        spans: decoded.spans,
        attributes: decoded.attributes,
        raw: None,
        received: None,
    });
    let attrs = store.attributes(span.trace_id, span.span_id).unwrap();
    assert!(attrs.iter().any(|kv| kv.key == "budget.forwarded_ms"));
}

#[test]
fn a_resent_span_at_capacity_evicts_nothing() {
    let mut store = Store::new(10);
    store.insert_spans(spans(1));
    store.insert_spans(spans(2));
    assert_eq!(store.counters().spans_held, 10);
    // The exporter retries chain 2: same spans, no new room needed, chain 1 stays.
    store.insert_spans(spans(2));
    assert_eq!(store.counters().chains_evicted, 0);
    assert_eq!(store.counters().spans_duplicate, 5);
    assert!(store.chain(TraceId([1; 16])).is_some());
}

/// The screen analyses a burst a slice per frame: a slice with no time left still analyses a
/// few chains, the oldest first; the rest wait their turn, and once all are done the totals are
/// exactly those of one full pass.
#[test]
fn a_burst_is_analysed_a_slice_at_a_time_oldest_first_with_the_same_totals() {
    let mut sliced = Store::new(10_000);
    let mut whole = Store::new(10_000);
    for t in 1..=100u8 {
        sliced.insert_spans(spans(t));
        whole.insert_spans(spans(t));
    }
    assert_eq!(whole.analyse_dirty(), 100);
    let first = sliced.analyse_dirty_for(std::time::Duration::ZERO);
    assert!((1..100).contains(&first), "one slice, not all: {first}");
    assert!(sliced.has_dirty());
    // The oldest chains were analysed; the newest wait.
    assert!(sliced.analysis(TraceId([1; 16])).is_some());
    assert!(sliced.analysis(TraceId([100; 16])).is_none());
    let mut slices = 1;
    while sliced.has_dirty() {
        assert!(sliced.analyse_dirty_for(std::time::Duration::ZERO) > 0);
        slices += 1;
        assert!(slices <= 100, "every slice makes progress");
    }
    assert!(slices > 1);
    assert_eq!(sliced.finding_counts(), whole.finding_counts());
    assert_eq!(sliced.edge_reports(), whole.edge_reports());
    assert_eq!(sliced.report(), whole.report());
}

/// Issue 14, item 1: spans carrying megabyte attributes cost the screen at most what
/// `--max-attribute-bytes` allows. Each value is cut to 4 KiB, each span keeps 16 KiB, and past
/// the budget the oldest chains' attributes go first; the spans themselves stay, and the
/// detail view is told what happened.
#[test]
fn raw_attributes_held_stay_under_the_byte_budget_oldest_chains_dropped_first() {
    use budget_top::batch::Batch;
    use budget_top::ingest::decode::decode_protobuf;
    use deadline_budget::analysis::SpanId;
    use prost::Message as _;

    let budget = 200 * 1024;
    let mut store = Store::new(1_000_000).with_attribute_budget(budget);
    let mut interner = Interner::default();
    for t in 1..=40u8 {
        let mut request = reset_chain(t);
        for resource in &mut request.resource_spans {
            for span in &mut resource.scope_spans[0].spans {
                // ~1 MB a span, in one value and in many small ones.
                span.attributes
                    .push(crate::support::string("blob", &"x".repeat(1 << 20)));
                for i in 0..40 {
                    span.attributes
                        .push(crate::support::string(&format!("k{i}"), &"y".repeat(2000)));
                }
            }
        }
        let decoded = decode_protobuf(&request.encode_to_vec(), &mut interner, true).unwrap();
        store.insert_batch(Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
            received: None,
        });
        let held = store.counters().attribute_bytes;
        assert!(held as usize <= budget, "{held} bytes held after chain {t}");
    }
    assert_eq!(store.counters().spans_held, 200, "every span is kept");
    assert!(store.counters().attribute_chains_dropped > 0);
    let (newest, oldest) = (TraceId([40; 16]), TraceId([1; 16]));
    let kept = store.attributes(newest, SpanId([1; 8])).unwrap();
    assert!(kept.iter().any(|kv| kv.key == "budget.default_ms"));
    let note = store.attribute_note(newest, SpanId([1; 8])).unwrap();
    assert!(
        note.contains("1 value(s) cut to 4 KiB") && note.contains("not kept"),
        "{note}"
    );
    assert!(store.attributes(oldest, SpanId([1; 8])).is_none());
    assert_eq!(
        store.attribute_note(oldest, SpanId([1; 8])).as_deref(),
        Some("attributes dropped to stay under --max-attribute-bytes (oldest chains first)")
    );
}

/// Chain `t` of a varied set, from the reset chain: as it is, its inventory slower by `slow`
/// ms, inventory named per chain (a new edge and service each: `distinct`), or orders with no
/// budget.
fn varied(t: u8, variant: u8, slow: u64) -> Vec<Span> {
    let mut chain = spans(t);
    for s in &mut chain {
        match variant % 4 {
            1 if &*s.service == "inventory" => {
                s.end_unix_nano += slow * 1_000_000;
            }
            2 if &*s.service == "inventory" => {
                s.service = std::sync::Arc::from(format!("inventory-{}", t % 7));
            }
            3 if &*s.service == "orders" && s.kind.is_hop() => {
                s.budget.received_ms = None;
                s.budget.source = None;
            }
            _ => {}
        }
    }
    chain
}

/// What must be equal between two reports of the same traffic: every count and figure, the
/// chains' findings as a set. (The list of a per-edge finding may name calls of chains held
/// or count them on the edge: `findings_listed` and those entries are left out.)
fn figures(mut r: deadline_budget::analysis::Report) -> deadline_budget::analysis::Report {
    r.findings.retain(|f| f.count.is_none());
    r.findings.sort_by_key(|f| (f.trace_id, f.span_id, f.kind));
    r.summary.findings_listed = 0;
    r.summary.findings_omitted = 0;
    r
}

/// The report judges the chains still held as the run ends without keeping their edge samples
/// (nothing is to take them out again); should a span join one after all, its samples are made
/// again first, and the chain is judged again exactly as if they had been kept.
#[test]
fn a_span_after_the_final_report_judges_its_chain_again_exactly() {
    use deadline_budget::analysis::SpanId;
    // A late copy of chain 2's inventory hop, slower, and a new span in chain 3.
    let late = || {
        let mut copy = varied(2, 1, 0)
            .into_iter()
            .find(|s| &*s.service == "inventory" && s.kind.is_hop())
            .unwrap();
        copy.end_unix_nano += 700_000_000;
        let mut extra = varied(3, 0, 0)
            .into_iter()
            .find(|s| !s.kind.is_hop())
            .unwrap();
        extra.span_id = SpanId([99; 8]);
        extra.end_unix_nano += 300_000_000;
        vec![copy, extra]
    };
    let filled = || {
        let mut store = Store::new(1_000);
        for t in 1..=8u8 {
            store.insert_spans(varied(t, t % 4, u64::from(t) * 50));
        }
        store
    };
    let run = |at_the_end: bool| {
        let mut store = filled();
        if at_the_end {
            store.report();
        } else {
            store.judge_all();
        }
        store.insert_spans(late());
        (store.report(), store.counters().chains_rejudged)
    };
    let (after_the_end, rejudged) = run(true);
    let (kept_samples, _) = run(false);
    assert_eq!(rejudged, 2);
    assert_eq!(after_the_end, kept_samples);
    // And what the late spans changed is in it: the slower inventory wasted more.
    let before = filled().report();
    assert!(after_the_end.summary.wasted_ms > before.summary.wasted_ms);
    assert_eq!(after_the_end.summary.spans, before.summary.spans + 1);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// `CONVENTIONS.md` section 6: any split of the chains into held and evicted (a small
    /// `--max-spans`, at least a chain, the settle timer judging some before) gives the figures of holding them
    /// all; and any split into shards, each reported to JSON and merged as `budget-top merge`
    /// does, gives them too.
    #[test]
    fn any_split_into_held_evicted_or_shards_gives_the_same_report(
        chains in proptest::collection::vec((0u8..4, 0u64..400, 0usize..3), 1..30),
        max_spans in 5usize..40,
        settled_every in 1usize..6,
    ) {
        let mut whole = Store::new(1_000_000);
        let mut small = Store::new(max_spans).with_settle(std::time::Duration::ZERO);
        let mut shards: Vec<Store> = (0..3).map(|_| Store::new(1_000_000)).collect();
        for (i, &(variant, slow, shard)) in chains.iter().enumerate() {
            let t = i as u8 + 1;
            let chain = varied(t, variant, slow);
            whole.insert_spans(chain.clone());
            small.set_clock(i as u64 + 1);
            small.insert_spans(chain.clone());
            if i % settled_every == 0 {
                small.judge_settled();
            }
            shards[shard].insert_spans(chain);
        }
        proptest::prop_assert!(small.counters().spans_held as usize <= max_spans);
        let one = whole.report();
        let split = small.report();
        proptest::prop_assert_eq!(figures(split), figures(one.clone()));
        let read: Vec<deadline_budget::analysis::Report> = shards
            .iter_mut()
            .map(|s| serde_json::from_str(&serde_json::to_string(&s.report()).unwrap()).unwrap())
            .collect();
        let merged = deadline_budget::analysis::Report::merge(&read, 10_000);
        proptest::prop_assert_eq!(figures(merged), figures(one));
    }
}

/// The page draws from the chains kept (`CONVENTIONS.md` section 6): past eviction, the chains
/// whose findings explain the most dead work are kept whole, a few per kind, within the bound.
#[test]
fn the_worst_chains_of_each_kind_are_kept_whole_for_the_page() {
    let max_spans = 80;
    let mut store = Store::new(max_spans);
    // 40 reset chains of 5 spans, inventory slower in each: chain 17 wastes the most.
    let slow = |t: u8| if t == 17 { 900 } else { u64::from(t) };
    for t in 1..=40u8 {
        store.insert_spans(varied(t, 1, slow(t)));
        assert!(store.counters().spans_held as usize <= max_spans);
    }
    let worst = TraceId([17; 16]);
    assert!(
        store.chain(worst).is_some(),
        "the worst chain is kept whole"
    );
    let pinned = store.worst_chains();
    assert!(pinned.contains(&worst), "{pinned:?}");
    assert!(pinned.len() <= budget_top::store::WORST_CHAINS_PER_KIND * 2);
    assert!(store.counters().chains_evicted >= 20);
    let report = store.report();
    assert_eq!(report.summary.traces, 40, "every chain counted once");
    // The page draws it first under its kind.
    let page = budget_top::report::html::render(
        &store,
        &report,
        &Default::default(),
        deadline_budget::analysis::Severity::Error,
    );
    assert!(page.contains(&worst.to_string()), "the page draws chain 17");
}

/// `check` listening judges the chains quiet for `--settle` as spans arrive (its totals and
/// memory follow section 6), on tokio's clock: paused here.
#[tokio::test(start_paused = true)]
async fn a_listening_check_judges_chains_once_quiet_for_settle() {
    use budget_top::pump::{self, Pump};
    use std::time::Duration;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let mut store = budget_top::store::Retention {
        settle: Duration::from_secs(5),
        ..Default::default()
    }
    .store();
    // What `listen::pump` makes of the receivers: tokio's clock, a judging tick.
    let mut pump = Pump::new(rx)
        .with_clock(pump::tokio_clock(store.clock()))
        .judging_every(
            budget_top::commands::listen::JUDGE_TICK,
            tokio::time::MissedTickBehavior::Delay,
        );
    // Listening for 3 s, as a check with --for 3s does.
    async fn three_seconds(pump: &mut Pump, store: &mut Store) {
        let stop = tokio::time::sleep(Duration::from_secs(3));
        pump.feed_until(store, None, stop).await.unwrap();
    }
    let batch = |t| budget_top::batch::Batch {
        spans: spans(t),
        attributes: Vec::new(),
        raw: None,
        received: None,
    };
    tx.send(batch(1)).await.unwrap();
    three_seconds(&mut pump, &mut store).await;
    assert_eq!(
        store.totals().traces,
        0,
        "quiet for 3 s of 5: not judged yet"
    );
    tx.send(batch(2)).await.unwrap();
    three_seconds(&mut pump, &mut store).await;
    assert_eq!(store.totals().traces, 1, "chain 1 quiet for 6 s: judged");
    assert_eq!(store.totals().findings.total(), 1);
    three_seconds(&mut pump, &mut store).await;
    assert_eq!(store.totals().traces, 2, "chain 2 too, 6 s after it came");
    drop(tx);
}

/// The totals' own size is bounded (`CONVENTIONS.md` section 6): 100,000 distinct service
/// names, under a small `--max-spans`, keep at most 10,000 edges and services apart; the rest
/// are counted as `other`, the report says how many calls and hops, and no count is lost.
#[test]
fn a_hundred_thousand_service_names_keep_the_totals_bounded() {
    use deadline_budget::analysis::{MAX_TOTALS_KEYS, OTHER};
    let mut store = Store::new(1_000);
    let chains: u32 = 50_000;
    for n in 0..chains {
        let mut chain = spans(1);
        for s in &mut chain {
            let mut id = [0u8; 16];
            id[..4].copy_from_slice(&n.to_be_bytes());
            id[15] = 1;
            s.trace_id = TraceId(id);
            // orders and inventory named per chain: 100,000 names, 100,000 edges.
            if &*s.service != "frontend" {
                s.service = std::sync::Arc::from(format!("{}-{n}", s.service));
            }
        }
        store.insert_spans(chain);
    }
    let totals = store.totals();
    assert!(
        totals.edges.len() <= MAX_TOTALS_KEYS + 1,
        "{}",
        totals.edges.len()
    );
    assert!(totals.services().count() <= MAX_TOTALS_KEYS + 1);
    let report = store.report();
    assert_eq!(report.summary.traces, u64::from(chains));
    let calls: u64 = report.edges.iter().map(|e| e.calls).sum();
    assert_eq!(calls, 2 * u64::from(chains), "every call counted");
    let other = report
        .edges
        .iter()
        .find(|e| &*e.caller == OTHER)
        .expect("an other edge");
    assert_eq!(report.summary.edge_calls_folded, other.calls);
    assert!(other.calls > u64::from(chains), "{}", other.calls);
    let hops: u64 = report.services.iter().map(|s| s.hops).sum();
    assert_eq!(hops, 3 * u64::from(chains));
    assert!(report.summary.service_hops_folded > 0);
}
