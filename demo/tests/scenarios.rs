//! Each scenario against an in-test OTLP receiver and the library's analysis: the services
//! export real OTLP over gRPC, each request is one trace across services, and the analysis finds
//! exactly what the scenario teaches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use budget_demo::{Demo, DemoConfig, LoadCounts, LoadPlan, Scenario, Timing};
use deadline_budget::analysis::{FindingKind, Options, Report};
use support::sink::{Sink, SinkSpan, to_analysis};

struct Run {
    spans: Vec<SinkSpan>,
    report: Report,
    counts: LoadCounts,
}

impl Run {
    fn kinds(&self) -> BTreeSet<FindingKind> {
        self.report.findings.iter().map(|f| f.kind).collect()
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
    let sink = Sink::start().await;
    let mut config = DemoConfig::new(scenario, sink.endpoint());
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
    // Let work that outlives its caller (the broken variants) end before the spans are flushed.
    tokio::time::sleep(Timing::new(scale).duration(1000)).await;
    tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
        .await
        .expect("the demo shuts down");
    let spans = sink.spans();
    let report = Report::from_spans(spans.iter().map(to_analysis), &Options::default());
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
}
