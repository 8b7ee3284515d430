//! A real Java HTTP chain (`tests/java/src/budget/Chain.java` on `Budget.java`, the code
//! docs/instrumenting.md quotes): the JDK's HttpServer and HttpClient, an absolute
//! `X-Request-Deadline` in Unix ms, `min(remaining - margin, cap)` as the HttpClient timeout,
//! and the OpenTelemetry Java SDK exporting OTLP/HTTP to `budget-top check`. The test fetches
//! the SDK's jars with Maven (into `~/.m2`, copied under the target dir) and compiles with plain
//! javac; it skips (loudly) only when java, javac or mvn is missing entirely. A failed download
//! or build fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;

use crate::support::{
    Builds, Finished, assert_nothing_beyond_noise, assert_success, finding_names,
    findings_beyond_noise, listen, orphan_with_all_the_waste, output_within, tool_present,
};

/// The classpath of the compiled chain, built once per test run; the jars are fetched again
/// only when the pom changes.
fn classpath_or_skip(test: &str) -> Option<String> {
    static BUILT: Builds<String> = Builds::new();
    for (tool, flag) in [("java", "-version"), ("javac", "-version"), ("mvn", "-v")] {
        if !tool_present(tool, flag) {
            eprintln!("\n*** SKIPPED {test}: {tool} is not installed ***\n");
            return None;
        }
    }
    Some(BUILT.once("tests/java", build_classpath))
}

/// Fetches the jars (again only when the pom changed) and compiles the chain: its classpath.
fn build_classpath() -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("java-chain");
    let lib = dir.join("lib");
    let marker = dir.join("budget-top-pom.xml");
    let pom = std::fs::read_to_string(src.join("pom.xml")).unwrap();
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(pom.as_str()) {
        let _ = std::fs::remove_dir_all(&dir);
        let out = output_within(
            Command::new("mvn")
                .args(["-B", "-q", "--no-transfer-progress", "-f"])
                .arg(src.join("pom.xml"))
                .arg("dependency:copy-dependencies")
                .arg(format!("-DoutputDirectory={}", lib.display())),
            Duration::from_secs(900),
        );
        assert_success(
            "mvn dependency:copy-dependencies (tests/java/pom.xml)",
            &out,
        );
        std::fs::write(&marker, &pom).unwrap();
    }
    let classes = dir.join("classes");
    let _ = std::fs::remove_dir_all(&classes);
    let sources: Vec<PathBuf> = std::fs::read_dir(src.join("src/budget"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "java"))
        .collect();
    let out = output_within(
        Command::new("javac")
            .args(["-Xlint:all", "-Werror", "-d"])
            .arg(&classes)
            .arg("-cp")
            .arg(format!("{}/*", lib.display()))
            .args(&sources),
        Duration::from_secs(300),
    );
    assert_success("javac of tests/java", &out);
    format!("{}:{}/*", classes.display(), lib.display())
}

/// Runs the chain's `variant` against a fresh `check`; returns what the user saw and the report.
fn run_variant(classpath: &str, variant: &str) -> (Json, Finished) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let out = output_within(
        Command::new("java")
            .args(["-cp", classpath, "budget.Chain", variant])
            .arg(check.http.to_string()),
        Duration::from_secs(120),
    );
    assert_success(&format!("the Java chain ({variant})"), &out);
    let seen: Json = serde_json::from_slice(&out.stdout).unwrap();
    // Only "late" answers the slow checkout (late): every other variant cuts it at 504.
    let late = variant == "late";
    let slow = if late { 200 } else { 504 };
    assert_eq!(
        seen,
        serde_json::json!({"warm-up": 200, "fast-1": 200, "fast-2": 200, "slow": slow}),
        "what the user saw ({variant})"
    );
    let finished = check.wait(Duration::from_secs(60));
    let report = finished.json();
    // Four chains of frontend -> orders -> inventory, five spans each, one trace each; the slow
    // one ended `deadline_exceeded` at the root (`late`: its 200 came after the deadline).
    let summary = &report["summary"];
    assert_eq!(summary["traces"], 4, "{report:#}");
    assert_eq!(summary["spans"], 20, "{report:#}");
    assert_eq!(
        summary["outcomes"],
        serde_json::json!({"ok": 3, "late": u64::from(late), "deadline_exceeded": u64::from(!late),
            "shed": 0, "cancelled": 0, "error": 0, "in_flight": 0}),
        "{report:#}"
    );
    (report, finished)
}

#[test]
fn java_chain_forwarding_min_of_remaining_and_cap_has_nothing_to_report() {
    let test = "java_chain_forwarding_min_of_remaining_and_cap_has_nothing_to_report";
    let Some(classpath) = classpath_or_skip(test) else {
        return;
    };
    let (report, finished) = run_variant(&classpath, "propagate");
    // Each callee gives up 10 ms before its caller's timeout; only scheduling noise can show.
    assert_nothing_beyond_noise(&report, &finished);
    assert_eq!(report["summary"]["coverage"]["hops_with_budget"], 12);
    // The slow checkout's 504 comes a few ms after the user's deadline: the deadline being
    // enforced, not a late answer, however late the scheduler makes it.
    let findings = report["findings"].as_array().unwrap();
    assert!(
        findings.iter().all(|f| f["kind"] != "late_answer"),
        "{report:#}"
    );
}

#[test]
fn java_chain_answering_200_after_the_deadline_is_a_late_answer() {
    let test = "java_chain_answering_200_after_the_deadline_is_a_late_answer";
    let Some(classpath) = classpath_or_skip(test) else {
        return;
    };
    let (report, finished) = run_variant(&classpath, "late");
    // A warning: the default --fail-on error passes.
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let late: Vec<&Json> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "late_answer")
        .collect();
    assert_eq!(late.len(), 1, "{report:#}");
    assert_eq!(late[0]["service"], "java-late-frontend", "{report:#}");
    let message = late[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("java-late-frontend answered (status 200) "),
        "{message}"
    );
    // Rendering 1200 ms of the 1000 ms budget after a 5 ms call: ~200 ms late.
    let by = -late[0]["remaining_ms"].as_i64().unwrap();
    assert!((150..=700).contains(&by), "{report:#}");
}

#[test]
fn java_chain_with_a_fixed_timeout_drops_the_deadline_inverts_it_and_orphans_work() {
    let test = "java_chain_with_a_fixed_timeout_drops_the_deadline_inverts_it_and_orphans_work";
    let Some(classpath) = classpath_or_skip(test) else {
        return;
    };
    let (report, finished) = run_variant(&classpath, "fixed");
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let call = |kind: &str| {
        (
            kind.to_string(),
            "java-fixed-orders".to_string(),
            "GET inventory".to_string(),
        )
    };
    let mut expected = vec![call("budget_dropped"); 4];
    expected.push((
        "orphaned_work".into(),
        "java-fixed-orders".into(),
        "GET /place/1500".into(),
    ));
    // The fixed 2 s reaches past orders' 1 s deadline (the warm-up chain's orders had 3 s).
    expected.extend(vec![call("timeout_inverted"); 3]);
    let names = finding_names(&serde_json::json!({"findings": findings_beyond_noise(&report)}));
    assert_eq!(names, expected, "{report:#}");

    let summary = &report["summary"];
    // The slow chain: inventory worked about 510 ms after frontend gave up, while orders only
    // waited for it: that once, not twice.
    let wasted = summary["wasted_ms"].as_i64().unwrap();
    assert!((300..=1500).contains(&wasted), "{report:#}");
    assert_eq!(summary["coverage"]["hops_with_budget"], 8, "{report:#}");
    assert_eq!(summary["coverage"]["hops_without_budget"], 4, "{report:#}");
    assert_eq!(
        summary["coverage"]["services_without_budget"],
        serde_json::json!(["java-fixed-inventory"]),
        "{report:#}"
    );
    let findings = report["findings"].as_array().unwrap();
    let orphan = orphan_with_all_the_waste(&report);
    let slow_drop = findings
        .iter()
        .find(|f| f["kind"] == "budget_dropped" && f["trace_id"] == orphan["trace_id"])
        .unwrap();
    let below = slow_drop["wasted_ms"].as_i64().unwrap();
    assert!(
        (300..=1500).contains(&below),
        "inventory's dead work: {slow_drop}"
    );
}

/// inventory's whole clock runs 1500 ms behind (its `Deadline` reading and its SDK's span
/// clock, `SdkTracerProvider.builder().setClock(..)`): it believes 1.5 s more than orders
/// forwarded. budget-top measures the offset from the absolute deadline, moves inventory's
/// spans onto orders' clock, and then finds the dead work as it would without the skew: on the
/// slow chain, inventory works its whole 1500 ms while orders' call gave up well before.
#[test]
fn java_chain_with_a_clock_behind_is_corrected_and_its_dead_work_found() {
    let test = "java_chain_with_a_clock_behind_is_corrected_and_its_dead_work_found";
    let Some(classpath) = classpath_or_skip(test) else {
        return;
    };
    let (report, finished) = run_variant(&classpath, "skewed");
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let findings = &findings_beyond_noise(&report);
    let mut kinds: Vec<&str> = findings
        .iter()
        .map(|f| {
            assert_eq!(f["service"], "java-skewed-inventory", "{report:#}");
            f["kind"].as_str().unwrap()
        })
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(
        kinds,
        ["budget_reset", "clock_skew", "orphaned_work"],
        "{report:#}"
    );
    // Every inventory hop (one per chain) read the deadline 1.5 s late: one reset each, and a
    // clock_skew that says which way and that its spans were moved.
    let mut traces: Vec<&str> = findings
        .iter()
        .filter(|f| f["kind"] == "budget_reset")
        .map(|f| {
            let believed = f["received_ms"].as_i64().unwrap() - f["forwarded_ms"].as_i64().unwrap();
            assert!((1300..=1700).contains(&believed), "{f}");
            f["trace_id"].as_str().unwrap()
        })
        .collect();
    traces.sort_unstable();
    traces.dedup();
    assert_eq!(traces.len(), 4, "{report:#}");
    for trace in traces {
        let skew = findings
            .iter()
            .find(|f| f["kind"] == "clock_skew" && f["trace_id"] == trace)
            .unwrap_or_else(|| panic!("no clock_skew in {trace}: {report:#}"));
        let message = skew["message"].as_str().unwrap();
        assert!(
            message.contains("(java-skewed-inventory's is behind); its spans were moved"),
            "{skew}"
        );
    }
    // The slow chain only: inventory worked 1500 ms, orders' call gave up after its latency;
    // without the skew the dead work is what is left of the 1500 ms past that call's end.
    let orphans: Vec<&Json> = findings
        .iter()
        .filter(|f| f["kind"] == "orphaned_work")
        .collect();
    assert_eq!(orphans.len(), 1, "{report:#}");
    let edge = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["callee"] == "java-skewed-inventory")
        .unwrap();
    let slow_call = edge["latency_p99_ms"].as_i64().unwrap();
    let expected = 1500 - slow_call;
    let wasted = report["summary"]["wasted_ms"].as_i64().unwrap();
    assert!(
        (wasted - expected).abs() * 100 <= 15 * expected,
        "dead work {wasted} ms, expected about {expected} ms: {report:#}"
    );
    // The reset on that chain carries it: it only shows once the clock is corrected.
    let reset = findings
        .iter()
        .find(|f| f["kind"] == "budget_reset" && f["trace_id"] == orphans[0]["trace_id"])
        .unwrap();
    assert_eq!(reset["wasted_ms"].as_i64(), Some(wasted), "{reset}");
    eprintln!(
        "java skewed: dead work {wasted} ms, expected about {expected} ms (1500 - {slow_call})"
    );
}
