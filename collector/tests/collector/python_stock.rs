//! Python services that never heard of budget-top (issue 13's Python pair,
//! `tests/python/stock/`): WSGI apps on the stdlib's threading `wsgiref` server, an edge that
//! reads its team's own budget header (`x-prazo-restante-ms`) and calls a worker with
//! `requests`; a worker with 4 workers, a queue of 20, 503 when full and 504 when an item leaves
//! the queue too late. Only the stock OpenTelemetry Python SDK, the WSGI middleware and the
//! requests instrumentation, capturing that header the stock way
//! (`OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST` / `…_CLIENT_REQUEST`), and the
//! OTLP/HTTP exporter set up by `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_SERVICE_NAME`. A burst of
//! 40 requests runs against each variant and `budget-top check --budget-header
//! x-prazo-restante-ms=ms` must tell them apart, and agree with what the client and the services
//! saw:
//!
//! - `fixed`: a fixed 2 s timeout and no header: the budget is dropped on every call; the edge
//!   (its WSGI span ends when it answers) answers past the user's 1000 ms: its 200s then are
//!   `late_answer` and `late` (no dead work: the user's leaving is not in the spans), its 504s
//!   the deadline enforced late; the worker's hops carry no budget (coverage says so).
//! - `propagated`: what remains minus a margin, as timeout and header: no drop, every hop's
//!   budget known, the same kinds of sheds, far less work for nobody.
//! - `tight` (propagated, the client gives 500 ms): the worker's first items work 600 ms, past
//!   the edge's timeout: `requests` raises `ReadTimeout` (no response status), those calls become
//!   the edge's inferred timeout, and the work done for nobody is counted.
//!
//! Timing is real: the assertions compare counts of events both sides saw, with room only where
//! two timers race. The work takes 600 ms: every boundary relied on is ≥ 150 ms from a timer.

use std::path::Path;
use std::process::Command;

use crate::python_sdk::venv_python_or_skip;
use crate::support::{Service, StockRun, one_burst_at_a_time};

const REQUESTS: u64 = 40;
const WORK_MS: i64 = 600;
const HEADER: &str = "x-prazo-restante-ms";

/// A Python service of `tests/python/stock`, configured the stock way by its environment.
#[track_caller]
fn service(python: &Path, endpoint: &str, name: &str, args: &[String]) -> Service {
    Service::start(stock_python(python, endpoint, name, name, args), name)
}

/// The command that runs `tests/python/stock/{script}.py` as the service `name`, exporting to
/// `endpoint` and capturing the team's header, as a team's deployment configures it.
pub fn stock_python(
    python: &Path,
    endpoint: &str,
    script: &str,
    name: &str,
    args: &[String],
) -> Command {
    let mut command = Command::new(python);
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/python/stock/{script}.py")))
        .args(args)
        .env("OTEL_SERVICE_NAME", name)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .env(
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST",
            HEADER,
        )
        .env(
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_REQUEST",
            HEADER,
        )
        // The defaults a team has: the old HTTP keys (`http.status_code`), no other exporter.
        .env_remove("OTEL_SEMCONV_STABILITY_OPT_IN")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env("PYTHONUNBUFFERED", "1")
        // No __pycache__ beside the sources in the repository.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// How many times the edge answered `status`.
fn edge_answered(run: &StockRun, status: &str) -> u64 {
    run.edge["answered"][status].as_u64().unwrap_or(0)
}

#[track_caller]
/// A burst against `variant`: each user sends `budget_ms` in the header and waits `patience_ms`
/// for the answer (a patient user reads an answer that comes after its budget: "late 200").
fn run(python: &Path, variant: &str, budget_ms: u64, patience_ms: u64) -> StockRun {
    let run = StockRun::burst(
        HEADER,
        |endpoint| {
            let worker = service(python, endpoint, "worker", &[WORK_MS.to_string()]);
            let edge = service(
                python,
                endpoint,
                "edge",
                &[
                    format!("http://127.0.0.1:{}/reserve", worker.port),
                    variant.to_owned(),
                ],
            );
            (worker, edge)
        },
        |edge| {
            let mut client = Command::new(python);
            client
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/stock/client.py"))
                .args([
                    format!("http://127.0.0.1:{edge}/order"),
                    REQUESTS.to_string(),
                    budget_ms.to_string(),
                    patience_ms.to_string(),
                ])
                .env("PYTHONDONTWRITEBYTECODE", "1");
            client
        },
    );
    // The same 40 requests on every side, each one answered or given up on by its user.
    assert_eq!(run.client.values().sum::<u64>(), REQUESTS, "{}", run.dump());
    assert_eq!(run.client("failed"), 0, "{}", run.dump());
    assert_eq!(run.report["summary"]["traces"], REQUESTS, "{}", run.dump());
    assert_eq!(
        run.report["summary"]["hops"],
        2 * REQUESTS,
        "{}",
        run.dump()
    );
    assert_eq!(run.edge["requests"], REQUESTS, "{}", run.dump());
    assert_eq!(run.worker("requests"), REQUESTS, "{}", run.dump());
    assert_eq!(run.edge_figures()["calls"], REQUESTS, "{}", run.dump());
    // Every variant sheds, and the report reads every refusal from the bare statuses (Python's
    // old `http.status_code`): 503 as shed_full, a 504 answered before any work as
    // shed_expired. The worker's WSGI span records the 504 it wrote whether or not the edge was
    // still there to read it, so every expired item counts.
    assert!(run.worker("full") > 0, "{}", run.dump());
    assert!(run.worker("expired") > 0, "{}", run.dump());
    assert_eq!(
        run.count("shed_full", "worker"),
        run.worker("full"),
        "{}",
        run.dump()
    );
    assert_eq!(
        run.count("shed_expired", "worker"),
        run.worker("expired"),
        "{}",
        run.dump()
    );
    // The edge relays the worker's 503: the chain was shed, and the edge did not shed it.
    assert_eq!(run.outcome("shed"), run.worker("full"), "{}", run.dump());
    assert_eq!(run.count("shed_full", "edge"), 0, "{}", run.dump());
    // The worker's hops that went on after the edge had stopped waiting are the ones the
    // worker saw finish with nobody on the line.
    assert_eq!(
        run.count("orphaned_work", "worker"),
        run.worker("worked_for_nobody"),
        "{}",
        run.dump()
    );
    // The outcomes agree with what the user saw. A chain reads ok only when the edge answered
    // 200 in time.
    run.assert_outcomes_match_the_client();
    // Every 200 the edge sent is an answer: in time (ok) or after the budget ran out (late).
    assert_eq!(
        run.outcome("ok") + run.outcome("late"),
        edge_answered(&run, "200"),
        "{}",
        run.dump()
    );
    // A root's lateness is a warning, never dead work nor orphaned work: no span shows its
    // user gone.
    assert_eq!(run.count("orphaned_work", "edge"), 0, "{}", run.dump());
    assert!(
        run.count("late_answer", "edge") >= run.outcome("late"),
        "{}",
        run.dump()
    );
    run
}

#[test]
fn python_services_that_never_heard_of_budget_top_are_judged_by_what_they_did() {
    let Some(python) = venv_python_or_skip("python_services_that_never_heard_of_budget_top") else {
        return;
    };
    let _burst = one_burst_at_a_time();

    let fixed = run(&python, "fixed", 1000, 1000);
    // The edge had its own budget and passed none on: every call drops it.
    assert_eq!(
        fixed.count("budget_dropped", "edge"),
        REQUESTS,
        "{}",
        fixed.dump()
    );
    assert_eq!(fixed.count("budget_reset", "edge"), 0, "{}", fixed.dump());
    // Coverage: the worker never got a budget, and the report says so.
    assert_eq!(
        fixed.coverage("hops_with_budget"),
        REQUESTS,
        "{}",
        fixed.dump()
    );
    assert_eq!(
        fixed.coverage("hops_without_budget"),
        REQUESTS,
        "{}",
        fixed.dump()
    );
    assert_eq!(
        fixed.coverage("services_without_budget"),
        &serde_json::json!(["worker"])
    );
    // The users gave up at 1000 ms; the edge waited on for the worker and answered after the
    // budget its user sent. Its 200s then are late answers (one more or less where the
    // client's timer and the edge's answer cross); its 504s the deadline enforced late, no
    // finding. Only the 200s that reached a user in time read ok.
    assert!(fixed.client("gave up") > 0, "{}", fixed.dump());
    assert!(fixed.outcome("late") > 0, "{}", fixed.dump());
    assert_eq!(
        fixed.count("late_answer", "edge"),
        fixed.outcome("late"),
        "{}",
        fixed.dump()
    );
    assert!(
        fixed.outcome("late") <= fixed.client("gave up") + 2,
        "{}",
        fixed.dump()
    );
    assert!(
        fixed.outcome("ok") <= fixed.client("200") + 2,
        "{}",
        fixed.dump()
    );
    // The edge waited longer than any work took: nobody worked with the edge gone, and no
    // dead work is counted (the user's patience is not in the spans).
    assert_eq!(fixed.worker("worked_for_nobody"), 0, "{}", fixed.dump());
    assert_eq!(fixed.wasted(), 0, "{}", fixed.dump());

    let propagated = run(&python, "propagated", 1000, 1000);
    propagated.assert_budget_passed_on("edge");
    assert_eq!(
        propagated.coverage("hops_with_budget"),
        2 * REQUESTS,
        "{}",
        propagated.dump()
    );
    assert_eq!(
        propagated.coverage("hops_without_budget"),
        0,
        "{}",
        propagated.dump()
    );
    // A request goes out some milliseconds after its budget was computed when 40 threads want
    // the GIL at once: a reset can show, and then it is that small.
    for f in propagated.findings() {
        if f["kind"] == "budget_reset" {
            let excess = f["forwarded_ms"].as_i64().unwrap() - f["remaining_ms"].as_i64().unwrap();
            assert!(excess < 150, "{f}");
        }
    }
    // Propagation cut the answers that came after the user's budget.
    assert!(
        propagated.count("late_answer", "edge") * 4 < fixed.count("late_answer", "edge"),
        "propagated {} vs fixed {}",
        propagated.count("late_answer", "edge"),
        fixed.count("late_answer", "edge")
    );

    let tight = run(&python, "propagated", 500, 500);
    // The edge's calls that got no answer (requests' ReadTimeout: status ERROR, an exception
    // event, no response status) ended at its budget less the margin: the edge's timeout,
    // inferred from them.
    assert!(
        tight.edge["timed_out"].as_u64().unwrap() >= 3,
        "{}",
        tight.dump()
    );
    let edge = tight.edge_figures();
    assert_eq!(edge["timeout_inferred"], true, "{}", tight.dump());
    let timeout = edge["timeout_ms"].as_i64().unwrap();
    // (Never earlier than that; later by as much as the machine's timers run late under load.)
    assert!((400..2000).contains(&timeout), "{}", tight.dump());
    // 600 ms of work never fits in 500: no user got a 200, and no chain reads ok.
    assert_eq!(tight.outcome("ok"), 0, "{}", tight.dump());
    assert_eq!(tight.client("200"), 0, "{}", tight.dump());
    // The worker's first items worked on after the edge gave up: counted, in ms, on the edge
    // into the worker, and never more than the work itself.
    let nobody = tight.worker("worked_for_nobody");
    assert!(nobody > 0, "{}", tight.dump());
    let wasted = edge["wasted_ms"].as_i64().unwrap();
    assert!(wasted > 0, "{}", tight.dump());
    assert!(wasted <= nobody as i64 * WORK_MS, "{}", tight.dump());
    assert!(tight.wasted() >= wasted, "{}", tight.dump());
}

/// The same WSGI root, its user patient: it sends 1000 ms in the header but reads the answer
/// whenever it comes. The root answers 200 after its budget ran out to a user who is still
/// there: `late` (an answer, not a failure), `late_answer` on the edge, no `orphaned_work` on a
/// root and no dead work that no span proves; the chains answered in time read `ok`. Against
/// the impatient burst of the test above, the same spans: only the user's log tells them apart,
/// and budget-top says no more than the spans prove.
#[test]
fn a_wsgi_root_answering_a_patient_user_late_is_late_not_dead_work() {
    let Some(python) = venv_python_or_skip("a_wsgi_root_answering_a_patient_user_late") else {
        return;
    };
    let _burst = one_burst_at_a_time();
    let patient = run(&python, "fixed", 1000, 5000);
    assert_eq!(patient.client("gave up"), 0, "{}", patient.dump());
    // Every answer came, in time or late: the late ones are the chains read late (the user's
    // clock starts before the edge's span, so it sees a few more late than the spans prove).
    let late_read = patient.client("late 200");
    assert!(late_read > 0, "{}", patient.dump());
    assert!(patient.outcome("late") <= late_read, "{}", patient.dump());
    assert!(
        late_read <= patient.outcome("late") + 4,
        "{}",
        patient.dump()
    );
    assert_eq!(
        patient.count("orphaned_work", "edge"),
        0,
        "{}",
        patient.dump()
    );
    // The edge's work is not dead work: its user was there; only the worker's hops that went
    // on after the edge's own call gave up (which the worker logged) are.
    assert_eq!(
        patient.count("orphaned_work", "worker"),
        patient.worker("worked_for_nobody"),
        "{}",
        patient.dump()
    );
    if patient.worker("worked_for_nobody") == 0 {
        assert_eq!(patient.wasted(), 0, "{}", patient.dump());
    }
    eprintln!(
        "patient: {} late 200 read by the user, {} late chains, {} late_answer, {} ok, wasted {} ms",
        late_read,
        patient.outcome("late"),
        patient.count("late_answer", "edge"),
        patient.outcome("ok"),
        patient.wasted()
    );
}
