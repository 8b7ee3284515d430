//! Each scenario against an in-test OTLP receiver and the library's analysis: the services
//! export real OTLP over gRPC, each request is one trace across services, and the analysis finds
//! exactly what the scenario teaches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::sink::{Sink, SinkSpan, to_analysis};
use budget_demo::{Demo, DemoConfig, LoadCounts, LoadPlan, Scenario, Timing};
use deadline_budget::analysis::{FindingKind, Options, Report};

/// Scheduling noise tolerated on a loaded test machine, in ms.
const NOISE_MS: i64 = 25;

struct Run {
    spans: Vec<SinkSpan>,
    report: Report,
    counts: LoadCounts,
}

impl Run {
    /// The kinds found, leaving out scheduling noise: work that started within 1 ms of its
    /// deadline (recorded as 0 ms left) and wasted no more than the noise, and orphaned work no
    /// longer than the hop's transit plus the noise.
    fn kinds(&self) -> BTreeSet<FindingKind> {
        self.report
            .findings
            .iter()
            .filter(|f| !is_noise(self, f))
            .map(|f| f.kind)
            .collect()
    }

    fn dump(&self) -> String {
        self.report
            .findings
            .iter()
            .map(|f| format!("{} {} {}: {}", f.kind, f.service, f.span_name, f.message))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

async fn run(scenario: Scenario, scale: f64, requests: u64, rate: f64) -> Run {
    run_cured(scenario, false, scale, requests, rate).await
}

async fn run_cured(scenario: Scenario, cure: bool, scale: f64, requests: u64, rate: f64) -> Run {
    let sink = Sink::start().await;
    let mut config = DemoConfig::new(scenario, sink.endpoint());
    config.cure = cure;
    config.timing = Timing::new(scale);
    config.load = LoadPlan {
        rate,
        jitter: 0.0,
        requests: Some(requests),
        ..LoadPlan::default()
    };
    let demo = Demo::start(config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), demo.load_finished())
        .await
        .expect("the load finishes");
    let counts = demo.load_counts();
    // Shutdown lets work that outlived its caller end, then flushes every exporter.
    tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
        .await
        .expect("the demo shuts down");
    let spans = sink.spans();
    // The scenarios' effects are hundreds of ms; on a loaded 2-core box a hanging-up caller is
    // noticed, and a request crosses loopback, tens of ms late. The contract's 5 ms would
    // report that noise as orphaned work.
    let options = Options {
        tolerance_ms: NOISE_MS,
        ..Options::default()
    };
    let report = Report::from_spans(spans.iter().map(to_analysis), &options);
    Run {
        spans,
        report,
        counts,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propagate_is_one_trace_per_request_across_three_services_and_finds_nothing() {
    let run = run(Scenario::Propagate, 0.5, 3, 10.0).await;
    assert_eq!(run.counts.ok, 3, "{:?}", run.counts);
    let services: BTreeSet<&str> = run.spans.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(
        services,
        BTreeSet::from(["antifraud", "pix-api", "settlement"])
    );
    let traces: BTreeSet<&[u8]> = run.spans.iter().map(|s| s.trace_id.as_slice()).collect();
    assert_eq!(traces.len(), 3, "one trace per request");
    for trace in traces {
        let in_trace: BTreeSet<&str> = run
            .spans
            .iter()
            .filter(|s| s.trace_id == trace)
            .map(|s| s.service.as_str())
            .collect();
        assert_eq!(in_trace.len(), 3, "every service in each trace");
    }
    assert!(run.kinds().is_empty(), "{}", run.dump());
    // Each service's spans went through its own pipeline: no span under another's name.
    const SERVER: i32 = 2;
    const CLIENT: i32 = 3;
    for (span_name, kind, service) in [
        ("GET /pay", SERVER, "pix-api"),
        ("budget.demo.Antifraud/Check", SERVER, "antifraud"),
        ("GET /settle", SERVER, "settlement"),
        ("budget.demo.Antifraud/Check", CLIENT, "pix-api"),
        ("GET settlement /settle", CLIENT, "pix-api"),
    ] {
        let owners: BTreeSet<&str> = run
            .spans
            .iter()
            .filter(|s| s.name == span_name && s.kind == kind)
            .map(|s| s.service.as_str())
            .collect();
        assert_eq!(owners, BTreeSet::from([service]), "{span_name}");
    }
    // antifraud is a gRPC hop: its budget came in gRPC's own grpc-timeout, the value pix-api
    // forwarded (HTTP → gRPC → HTTP), and it answered OK in gRPC's terms.
    let hops: Vec<&SinkSpan> = run
        .spans
        .iter()
        .filter(|s| s.service == "antifraud" && s.kind == SERVER)
        .collect();
    assert_eq!(hops.len(), 3);
    for hop in hops {
        assert_eq!(hop.attr("budget.source"), Some("grpc-timeout"));
        assert_eq!(hop.attr("rpc.system"), Some("grpc"));
        let caller = run
            .spans
            .iter()
            .find(|s| s.span_id == hop.parent_span_id)
            .expect("antifraud's caller");
        assert_eq!(
            caller.attr("budget.forwarded_ms"),
            Some("200"),
            "400 ms SLA at half scale"
        );
        assert_eq!(hop.attr("budget.received_ms"), Some("200"));
    }
}

fn kinds(list: &[FindingKind]) -> BTreeSet<FindingKind> {
    list.iter().copied().collect()
}

fn is_noise(run: &Run, f: &deadline_budget::analysis::Finding) -> bool {
    let wasted = f.wasted_ms.unwrap_or(0);
    match f.kind {
        FindingKind::OrphanedWork => wasted <= transit_ms(run, f),
        FindingKind::RanAfterExpiry => wasted <= NOISE_MS,
        _ => false,
    }
}

/// The error findings that are not noise.
fn errors_beyond_transit(run: &Run) -> BTreeSet<FindingKind> {
    run.kinds()
        .into_iter()
        .filter(|k| k.severity() == deadline_budget::analysis::Severity::Error)
        .collect()
}

/// How long after its CLIENT span started the hop of `finding` started, plus the tolerance.
fn transit_ms(run: &Run, finding: &deadline_budget::analysis::Finding) -> i64 {
    let hop = run
        .spans
        .iter()
        .find(|s| s.span_id == finding.span_id.0)
        .expect("the finding's span");
    let client = run
        .spans
        .iter()
        .find(|s| s.span_id == hop.parent_span_id)
        .expect("the hop's caller");
    (hop.start_unix_nano.saturating_sub(client.start_unix_nano) / 1_000_000) as i64 + NOISE_MS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_timeout_resets_the_budget_and_orders_works_for_nobody() {
    let run = run(Scenario::FixedTimeout, 0.5, 3, 10.0).await;
    assert_eq!(run.counts.timed_out, 3, "{:?}", run.counts);
    assert_eq!(
        run.kinds(),
        kinds(&[FindingKind::BudgetReset, FindingKind::OrphanedWork]),
        "{}",
        run.dump()
    );
    let reset = run
        .report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::BudgetReset)
        .unwrap();
    assert_eq!(&*reset.service, "bff");
    assert_eq!(reset.forwarded_ms, Some(1500), "3 s at half scale");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_header_is_budget_dropped_at_bff() {
    let run = run(Scenario::DropHeader, 0.5, 3, 10.0).await;
    assert_eq!(run.counts.ok, 3, "{:?}", run.counts);
    assert_eq!(
        run.kinds(),
        kinds(&[FindingKind::BudgetDropped]),
        "{}",
        run.dump()
    );
    assert!(
        run.report.findings.iter().all(|f| &*f.service == "bff"),
        "{}",
        run.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cancel_is_orphaned_work_in_settlement() {
    let run = run(Scenario::NoCancel, 0.5, 3, 10.0).await;
    assert_eq!(run.counts.timed_out, 3, "{:?}", run.counts);
    assert_eq!(
        run.kinds(),
        kinds(&[FindingKind::OrphanedWork]),
        "{}",
        run.dump()
    );
    for finding in &run.report.findings {
        assert_eq!(&*finding.service, "settlement");
        // settlement works 750 ms; pix-api gives up after about 450.
        assert!(finding.wasted_ms.unwrap() >= 200, "{}", finding.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_storm_is_retry_over_budget_and_nothing_worse() {
    let run = run(Scenario::RetryStorm, 0.5, 3, 10.0).await;
    assert_eq!(run.counts.timed_out, 3, "{:?}", run.counts);
    assert_eq!(
        run.kinds(),
        kinds(&[FindingKind::RetryOverBudget]),
        "{}",
        run.dump()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_sheds_what_does_not_fit_and_never_runs_an_expired_item() {
    let run = run(Scenario::Burst, 0.5, 40, 10.0).await;
    // 4 run, 20 queue, 16 get 503 at once.
    assert_eq!(run.counts.sent, 40);
    assert_eq!(run.counts.shed_full, 16, "{:?}", run.counts);
    assert_eq!(run.counts.ok + run.counts.timed_out, 24, "{:?}", run.counts);
    let all = run.kinds();
    assert!(all.contains(&FindingKind::ShedFull), "{}", run.dump());
    assert!(
        !all.contains(&FindingKind::RanAfterExpiry),
        "{}",
        run.dump()
    );
    assert!(errors_beyond_transit(&run).is_empty(), "{}", run.dump());
    // The items at orders: 16 shed at once, 12 done (3 rounds of 175 ms in a ~690 ms budget),
    // and the last 12 either shed at dequeue (expired while queued) or cut at their deadline
    // (started with time left): the 4th round is cut, the 6th shed, and the 5th either, as its
    // deadline and a free worker come within ms of each other.
    let orders: Vec<&SinkSpan> = run
        .spans
        .iter()
        .filter(|s| s.service == "orders" && s.kind == 2)
        .collect();
    assert_eq!(orders.len(), 40);
    let outcome = |o: &str| {
        orders
            .iter()
            .filter(|s| s.attr("budget.outcome") == Some(o))
            .count()
    };
    assert_eq!(outcome("shed_full"), 16);
    // 12 when the 40 land together; more when a loaded machine spreads them out.
    assert!(outcome("ok") >= 12, "{}", outcome("ok"));
    // The 6th round waits ~185 ms past its deadline: the dequeue check drops at least some of it.
    assert!(outcome("shed_expired") >= 1, "{}", outcome("shed_expired"));
    assert_eq!(
        outcome("ok") + outcome("shed_expired") + outcome("deadline_exceeded"),
        24
    );
    for span in &orders {
        match span.attr("budget.remaining_at_start_ms") {
            // 0: less than 1 ms left, rounded down; the deadline had not passed.
            Some(left) => assert!(left.parse::<i64>().unwrap() >= 0, "an item started expired"),
            None => assert!(
                matches!(
                    span.attr("budget.outcome"),
                    Some("shed_full" | "shed_expired")
                ),
                "only a shed item never starts"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dequeue_check_runs_expired_items() {
    let run = run(Scenario::NoDequeueCheck, 0.5, 40, 10.0).await;
    assert_eq!(run.counts.shed_full, 16, "{:?}", run.counts);
    let all = run.kinds();
    assert!(all.contains(&FindingKind::RanAfterExpiry), "{}", run.dump());
    assert!(!all.contains(&FindingKind::ShedExpired), "{}", run.dump());
    let errors = errors_beyond_transit(&run);
    assert_eq!(
        errors,
        kinds(&[FindingKind::RanAfterExpiry, FindingKind::OrphanedWork]),
        "{}",
        run.dump()
    );
    let wasted = run
        .report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::RanAfterExpiry)
        .filter_map(|f| f.wasted_ms)
        .max()
        .unwrap();
    assert!(wasted >= 100, "an expired item runs its 175 ms: {wasted}");
}

/// Jobs carry their deadline through a queue: the spans are PRODUCER (`jobs publish`, in api)
/// and CONSUMER (`jobs process`, in worker), one trace per job. Ten jobs at once, 200 ms each at
/// half scale, about 1 s to live: the last ones run after their deadline, on CONSUMER spans;
/// cured, the worker drops them instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_deadline_runs_expired_jobs_on_consumer_spans_and_the_cure_drops_them() {
    const PRODUCER: i32 = 4;
    const CONSUMER: i32 = 5;
    for cure in [false, true] {
        let run = run_cured(Scenario::MessageDeadline, cure, 0.5, 10, 10.0).await;
        assert_eq!(run.counts.ok, 10, "api accepts every job: {:?}", run.counts);
        let of_kind =
            |kind: i32| -> Vec<&SinkSpan> { run.spans.iter().filter(|s| s.kind == kind).collect() };
        let (producers, consumers) = (of_kind(PRODUCER), of_kind(CONSUMER));
        assert_eq!(producers.len(), 10);
        assert_eq!(consumers.len(), 10);
        for consumer in &consumers {
            assert_eq!(consumer.service, "worker");
            assert_eq!(consumer.name, "jobs process");
            assert_eq!(consumer.attr("budget.source"), Some("x-request-deadline"));
            let producer = producers
                .iter()
                .find(|p| p.span_id == consumer.parent_span_id)
                .expect("each job's CONSUMER span is the child of its PRODUCER span");
            assert_eq!(producer.service, "api");
            assert_eq!(producer.name, "jobs publish");
        }
        let on_consumers = |kind: FindingKind| {
            run.report
                .findings
                .iter()
                .filter(|f| f.kind == kind)
                .inspect(|f| {
                    assert!(
                        consumers.iter().any(|c| c.span_id == f.span_id.0),
                        "{kind} on a CONSUMER span: {}",
                        f.message
                    )
                })
                .count()
        };
        let (late, shed) = (
            on_consumers(FindingKind::RanAfterExpiry),
            on_consumers(FindingKind::ShedExpired),
        );
        if cure {
            assert_eq!(late, 0, "{}", run.dump());
            // The check when a job is taken is exact: the worker's deadline is arrival plus a
            // whole-ms budget and the wait is the whole ms since arrival, so a job is expired
            // when taken exactly when its wait reaches its budget. Which of the backlog's jobs
            // that is depends on their deadlines' ms rounding: a job whose deadline is a
            // millisecond after the one before's starts with that millisecond left and is
            // stopped at its deadline.
            let ms = |s: &SinkSpan, key: &str| -> i64 {
                s.attr(key)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{key} on every job: {:?}", s.attributes))
            };
            let mut unfinished = 0;
            for consumer in &consumers {
                let expired =
                    ms(consumer, "budget.queue_wait_ms") >= ms(consumer, "budget.received_ms");
                let outcome = consumer.attr("budget.outcome");
                assert_eq!(
                    outcome == Some("shed_expired"),
                    expired,
                    "dropped exactly when expired: {:?}\n{}",
                    consumer.attributes,
                    run.dump()
                );
                unfinished += usize::from(outcome != Some("ok"));
            }
            assert!(
                unfinished >= 3,
                "the backlog past the deadline is dropped or stopped at it: {}",
                run.dump()
            );
        } else {
            assert!(late >= 3, "the last jobs run expired: {}", run.dump());
            assert_eq!(shed, 0, "{}", run.dump());
        }
    }
}

/// slow-dependency at a tenth of the workshop's figures: payments turns from 8 ms to 4 s
/// 300 ms in, the gateway gives 100 ms, orders' cure times out at 10 ms.
const SLOW_DEPENDENCY_SCALE: f64 = 0.1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_dependency_queues_the_catalog_behind_workers_waiting_on_payments() {
    let run = run(Scenario::SlowDependency, SLOW_DEPENDENCY_SCALE, 30, 10.0).await;
    let kinds = run.kinds();
    assert!(kinds.contains(&FindingKind::OrphanedWork), "{}", run.dump());
    // Queue waits on chains that never call payments: the catalog's.
    let catalog_waits: Vec<_> = run
        .report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::QueuePressure && &*f.span_name == "GET /catalog")
        .collect();
    assert!(!catalog_waits.is_empty(), "{}", run.dump());
    for f in &catalog_waits {
        assert_eq!(&*f.service, "orders", "{}", f.message);
    }
    for f in run.report.findings.iter().filter(|f| !is_noise(&run, f)) {
        if f.kind == FindingKind::OrphanedWork {
            assert_eq!(
                (&*f.service, &*f.span_name),
                ("orders", "GET /checkout"),
                "{}",
                f.message
            );
        }
    }
    let cured = run_cured(
        Scenario::SlowDependency,
        true,
        SLOW_DEPENDENCY_SCALE,
        30,
        10.0,
    )
    .await;
    let kinds = cured.kinds();
    for kind in [FindingKind::QueuePressure, FindingKind::OrphanedWork] {
        assert!(!kinds.contains(&kind), "cured: {}", cured.dump());
    }
    assert!(
        cured.counts.ok >= 15,
        "every catalog answered: {:?}",
        cured.counts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_layers_multiply_the_calls_on_inventory_and_the_cure_retries_in_one_layer() {
    // bff goes on retrying after the gateway gave up: the requests sent last may lose their
    // last attempt to the shutdown (orders no longer listens); the first ones end whole.
    let run = run(Scenario::RetryLayers, 0.5, 4, 1.0).await;
    let kinds = run.kinds();
    assert!(
        kinds.contains(&FindingKind::RetryAmplified),
        "{}",
        run.dump()
    );
    assert!(
        kinds.contains(&FindingKind::RetryOverBudget),
        "{}",
        run.dump()
    );
    let amplified: Vec<_> = run
        .report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::RetryAmplified)
        .collect();
    // At most one a request; every request but the last one ends whole.
    assert!((3..=4).contains(&amplified.len()), "{}", run.dump());
    for f in &amplified {
        assert_eq!(&*f.service, "orders");
        assert!(
            f.message.ends_with(", orders tried inventory 2 times each"),
            "{}",
            f.message
        );
    }
    let whole = amplified
        .iter()
        .filter(|f| {
            f.message
                == "inventory was called 6 times for one request: bff tried orders 3 times, orders tried inventory 2 times each"
        })
        .count();
    assert!(
        whole >= 3,
        "3 attempts at bff × 2 at orders: {}",
        run.dump()
    );
    let cured = run_cured(Scenario::RetryLayers, true, 0.5, 3, 10.0).await;
    assert!(cured.kinds().is_empty(), "cured: {}", cured.dump());
}
