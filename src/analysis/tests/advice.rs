//! Advice from known latency distributions (`CONVENTIONS.md` section 4, "Advice"): the exact
//! p99.9 boundary, the 100-call floor, the cap by the callee's budget, the retry fit.

use super::*;

/// An edge orders -> inventory whose answered calls took `latencies` (value, count).
fn edge(latencies: &[(i64, u64)]) -> EdgeAggregate {
    let mut e = EdgeAggregate {
        caller: Arc::from("orders"),
        callee: Arc::from("inventory"),
        ..EdgeAggregate::default()
    };
    for &(v, n) in latencies {
        e.latency.add_n(v, n);
        e.calls += n;
    }
    e
}

#[test]
fn two_significant_figures_round_up() {
    assert_eq!(round_up_two_figures(1520), 1600);
    assert_eq!(round_up_two_figures(1500), 1500);
    assert_eq!(round_up_two_figures(95), 95);
    assert_eq!(round_up_two_figures(100), 100);
    assert_eq!(round_up_two_figures(101), 110);
    assert_eq!(round_up_two_figures(999), 1000);
    assert_eq!(round_up_two_figures(0), 1);
}

#[test]
fn the_p999_boundary_is_exact() {
    // 1,000 calls: the 999th slowest sets the p99.9. One slow call is the 0.1 % cut...
    let a = edge(&[(80, 999), (5000, 1)]).advice();
    assert_eq!(a.p999_ms, Some(80));
    assert_eq!(a.timeout_ms, Some(80));
    assert_eq!((a.calls, a.would_cut), (1000, 1));
    assert_eq!(a.would_cut_share, Share(0.001));
    // ... two are more than it: the p99.9 is the slow one.
    let a = edge(&[(80, 998), (5000, 2)]).advice();
    assert_eq!(a.p999_ms, Some(5000));
    assert_eq!(a.timeout_ms, Some(5000));
    assert_eq!(a.would_cut, 0);
}

#[test]
fn the_contracts_sentence() {
    let mut e = edge(&[(400, 408), (1520, 4)]);
    e.declared_timeouts.add(3000);
    e.received.add(2500);
    let a = e.advice();
    assert_eq!(a.p999_ms, Some(1520));
    assert_eq!(a.timeout_ms, Some(1600));
    assert_eq!(a.current_timeout_ms, Some(3000));
    assert!(!a.current_timeout_inferred);
    assert!(a.budget_flows);
    assert_eq!(
        a.sentence,
        "orders → inventory: 3,000 ms declared, p99.9 1,520 ms over 412 calls: time out at min(remaining, 1,600 ms)"
    );
}

#[test]
fn no_advice_under_100_answered_calls() {
    let a = edge(&[(80, 99)]).advice();
    assert_eq!((a.timeout_ms, a.p999_ms), (None, None));
    assert_eq!((a.calls, a.calls_needed), (99, 1));
    assert_eq!(
        a.sentence,
        "orders → inventory: no timeout, 99 answered call(s): advice after 1 more"
    );
    // Unanswered calls are not answered ones: 100 calls, 1 of them timed out at 3000.
    let mut e = edge(&[(80, 99), (3000, 1)]);
    e.unanswered.add(3000);
    let a = e.advice();
    assert_eq!((a.timeout_ms, a.calls_needed), (None, 1));
    assert_eq!(a.current_timeout_ms, None);
    e.latency.add(80);
    e.calls += 1;
    let a = e.advice();
    assert_eq!((a.timeout_ms, a.calls, a.calls_needed), (Some(80), 100, 0));
}

#[test]
fn the_callee_budget_caps_the_timeout() {
    let mut e = edge(&[(700, 500), (1520, 500)]);
    for _ in 0..3 {
        e.received.add(900);
    }
    let a = e.advice();
    // Within the sketch's 1 %.
    assert!(a.p999_ms.is_some_and(|p| (1520..=1536).contains(&p)));
    assert_eq!(a.timeout_ms, Some(900));
    assert_eq!(a.capped_by_budget_ms, Some(900));
    assert_eq!(a.would_cut, 500);
    assert!(
        a.sentence.ends_with(
            "time out at min(remaining, 900 ms) (capped by the callee's budget p50, 900 ms)"
        ),
        "{}",
        a.sentence
    );
    // A budget above the suggestion does not cap it.
    let mut e = edge(&[(95, 200)]);
    e.received.add(1000);
    let a = e.advice();
    assert_eq!((a.timeout_ms, a.capped_by_budget_ms), (Some(95), None));
}

#[test]
fn retries_must_fit_the_callers_budget() {
    // bff tries orders 3 times with 800 ms each, in a budget of 1000 ms: 1 attempt fits.
    let mut e = edge(&[(300, 200)]);
    e.caller = Arc::from("bff");
    e.callee = Arc::from("orders");
    for attempt in [1, 2, 3] {
        e.attempts.add(attempt);
    }
    e.declared_timeouts.add(800);
    e.caller_budget.add_n(1000, 3);
    let a = e.advice();
    assert_eq!(
        a.retry,
        Some(RetryCheck {
            attempts: 3,
            attempt_timeout_ms: 800,
            caller_budget_ms: 1000,
            fits: false,
            attempts_that_fit: 1,
        })
    );
    assert!(
        a.sentence
            .ends_with("; 3 attempts × 800 ms do not fit bff's 1,000 ms: 1 attempt does"),
        "{}",
        a.sentence
    );
    // 3 × 300 ms fit: said so.
    e.declared_timeouts = Distribution::default();
    e.declared_timeouts.add(300);
    let r = e.advice().retry.expect("retries");
    assert!(r.fits);
    assert_eq!(r.attempts_that_fit, 3);
    // An edge that never retries has no retry check.
    e.attempts = Distribution::default();
    for _ in 0..200 {
        e.attempts.add(1);
    }
    assert_eq!(e.advice().retry, None);
}

#[test]
fn merged_and_read_back_edges_advise_alike() {
    // Two shards of one edge that retries: the merge advises what one instance would have,
    // and a report read back (what `budget-top merge` reads) advises the same.
    let shard = |slow: u64| {
        let mut e = edge(&[(120, 300), (900, slow)]);
        e.received.add_n(2000, 300 + slow);
        e.caller_budget.add_n(2500, 300 + slow);
        e.attempts.add(1);
        e.attempts.add(2);
        e.declared_timeouts.add(1000);
        e.unanswered.add(1000);
        e.latency.add(1000);
        e
    };
    let (a, b) = (shard(1), shard(2));
    let mut merged = a.clone();
    merged.merge(&b);
    let mut whole = edge(&[(120, 600), (900, 3), (1000, 2)]);
    whole.received.add_n(2000, 603);
    whole.caller_budget.add_n(2500, 603);
    for n in [1, 2, 1, 2] {
        whole.attempts.add(n);
    }
    whole.declared_timeouts.add(1000);
    whole.declared_timeouts.add(1000);
    whole.unanswered.add(1000);
    whole.unanswered.add(1000);
    let advice = whole.advice();
    assert_eq!(merged.advice(), advice);
    assert_eq!(advice.calls, 603);
    assert!(advice.retry.as_ref().is_some_and(|r| r.fits));
    let read_back = EdgeAggregate::from_report(&merged.to_report());
    assert_eq!(read_back.to_report().advice, advice);
    assert_eq!(merged.to_report().advice, advice);
}
