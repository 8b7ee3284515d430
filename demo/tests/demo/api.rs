//! The steering API the screen uses: latency knobs while running, the edge's answer naming the
//! step that ran out, switching scenarios, and a shutdown that leaves no port behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::sink::Sink;
use budget_demo::{Demo, DemoConfig, DemoError, DemoHandle, LoadPlan, Scenario, Timing};

/// A demo with no load: the test sends its own requests.
async fn quiet(scenario: Scenario, sink: &Sink) -> DemoHandle {
    let mut config = DemoConfig::new(scenario, sink.endpoint());
    config.timing = Timing::new(0.5);
    config.load = LoadPlan {
        requests: Some(0),
        ..LoadPlan::default()
    };
    Demo::start(config).await.unwrap()
}

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// pix-api's CLIENT span of the settlement call that did not end well, once exported.
async fn settlement_call_cut(sink: &Sink) -> crate::support::sink::SinkSpan {
    for _ in 0..100 {
        let found = sink
            .spans()
            .into_iter()
            .find(|s| s.name == "GET settlement /settle" && s.attr("budget.outcome").is_some());
        if let Some(span) = found {
            return span;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the cut settlement call was not exported");
}

fn refused(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_knobs_apply_at_once_and_the_edge_names_the_step_that_ran_out() {
    let sink = Sink::start().await;
    let demo = quiet(Scenario::Propagate, &sink).await;
    assert_eq!(
        demo.services().iter().map(|s| s.name).collect::<Vec<_>>(),
        ["pix-api", "antifraud", "settlement"],
        "edge first"
    );
    assert_eq!(
        get(&demo.edge_url()).await,
        (200, "pix-api done".to_owned())
    );

    // antifraud slower than its SLA (400 ms, 200 at half scale): cut at the SLA. Whichever
    // notices first answers (pix-api's timeout, or antifraud's own deadline): both name it.
    demo.set_latency("antifraud", 600).unwrap();
    let (status, body) = get(&demo.edge_url()).await;
    assert_eq!(status, 504, "{body}");
    assert!(body.starts_with("antifraud: "), "{body}");

    // settlement slower than what remains: cut by the budget (about 600 - 15 - 125 ms), not by
    // its 500 ms SLA.
    demo.set_latency("antifraud", 125).unwrap();
    demo.set_latency("settlement", 1500).unwrap();
    let (status, body) = get(&demo.edge_url()).await;
    assert_eq!(status, 504, "{body}");
    assert!(body.starts_with("settlement: "), "{body}");
    let call = settlement_call_cut(&sink).await;
    let timeout: i64 = call.attr("budget.timeout_ms").unwrap().parse().unwrap();
    let sla: i64 = call.attr("budget.sla_ms").unwrap().parse().unwrap();
    assert_eq!(sla, 500);
    assert!(
        timeout < sla,
        "cut by what remained ({timeout} ms), not by the SLA"
    );
    assert_eq!(
        call.attr("budget.forwarded_ms"),
        call.attr("budget.timeout_ms")
    );

    let err = demo.set_latency("inventory", 10).unwrap_err();
    assert!(matches!(err, DemoError::UnknownService { .. }));
    assert!(
        err.to_string().contains("settlement"),
        "the message lists the real ones: {err}"
    );
    demo.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_switching_leave_no_port_behind() {
    let sink = Sink::start().await;
    let mut demo = quiet(Scenario::Propagate, &sink).await;
    let first: Vec<_> = demo.services().iter().map(|s| s.addr).collect();
    assert!(first.iter().all(|&a| !refused(a)));

    demo.switch_scenario(Scenario::Burst).await.unwrap();
    assert_eq!(demo.scenario(), Scenario::Burst);
    assert_eq!(demo.lesson(), Scenario::Burst.lesson());
    assert_eq!(
        demo.services().iter().map(|s| s.name).collect::<Vec<_>>(),
        ["gateway", "orders"]
    );
    assert!(
        first.iter().all(|&a| refused(a)),
        "the old services are gone"
    );
    let second: Vec<_> = demo.services().iter().map(|s| s.addr).collect();

    tokio::time::timeout(Duration::from_secs(20), demo.shutdown())
        .await
        .expect("shutdown is bounded");
    assert!(second.iter().all(|&a| refused(a)), "every listener closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_does_not_stop_the_demo() {
    // Nothing listens there: spans are lost, requests are still served and shutdown is bounded.
    let mut config = DemoConfig::new(Scenario::Propagate, "http://127.0.0.1:9");
    config.timing = Timing::new(0.25);
    config.load = LoadPlan {
        rate: 20.0,
        requests: Some(2),
        ..LoadPlan::default()
    };
    let demo = Demo::start(config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), demo.load_finished())
        .await
        .unwrap();
    assert_eq!(demo.load_counts().ok, 2);
    tokio::time::timeout(Duration::from_secs(30), demo.shutdown())
        .await
        .expect("shutdown is bounded even when exports fail");
}
