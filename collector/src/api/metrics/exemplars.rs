//! The exemplars of the OpenMetrics text: the chain behind a series' latest rise, kept by
//! serve's store ([`crate::store::exemplars`]). The counters carry theirs as
//! `CounterWithExemplar` ([`exemplar_parts`]); the histogram's are written after its bucket
//! lines ([`with_bucket_exemplars`]). The text format has none.

use foldhash::HashMap;

use super::labels::{EdgeLabels, TraceLabel};
use crate::store::exemplars::{Exemplar, LATENCY_BUCKETS};

/// The later of two exemplars (by when their chains were judged).
pub(super) fn latest(a: Option<Exemplar>, b: Option<Exemplar>) -> Option<Exemplar> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.judged_unix_nano >= a.judged_unix_nano {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// The exemplar's labels and time, for prometheus-client.
pub(super) fn exemplar_parts(e: &Exemplar) -> (TraceLabel, Option<std::time::SystemTime>) {
    let at = (e.judged_unix_nano > 0)
        .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(e.judged_unix_nano));
    (
        TraceLabel {
            trace_id: e.trace.to_string(),
        },
        at,
    )
}

/// The histogram's OpenMetrics text (`latency`) into `out`, each bucket line followed by its
/// exemplar when `exemplars` has one: ` # {trace_id="…"} <seconds> <judged at>`. A bucket line
/// names its series as prometheus-client writes labels (`\\`, `\"` and `\n` escaped, `le`
/// beside them), and a series' buckets come in order, `+Inf` last.
pub(super) fn with_bucket_exemplars(
    latency: &str,
    exemplars: &HashMap<EdgeLabels, [Option<Exemplar>; LATENCY_BUCKETS]>,
    out: &mut String,
) {
    const BUCKET: &str = "budget_top_edge_latency_seconds_bucket{";
    if exemplars.is_empty() {
        out.push_str(latency);
        return;
    }
    let by_text: HashMap<String, &[Option<Exemplar>; LATENCY_BUCKETS]> = exemplars
        .iter()
        .map(|(labels, slots)| {
            let text = format!(
                "caller=\"{}\",callee=\"{}\"",
                escape_label(&labels.caller),
                escape_label(&labels.callee)
            );
            (text, slots)
        })
        .collect();
    let mut bucket_of: HashMap<&str, usize> = HashMap::default();
    for line in latency.split_inclusive('\n') {
        let series = line.strip_prefix(BUCKET).and_then(|rest| {
            // `{le="0.5",caller=…}` (OpenMetrics: le first) or `{caller=…,le="0.5"}`.
            match rest.strip_prefix("le=\"") {
                Some(after) => {
                    let start = after.find("\",")? + 2;
                    Some(&after[start..after.rfind("} ")?])
                }
                None => rest.rfind(",le=\"").map(|at| &rest[..at]),
            }
        });
        let Some(series) = series else {
            out.push_str(line);
            continue;
        };
        let bucket = bucket_of.entry(series).or_insert(0);
        let exemplar = by_text
            .get(series)
            .and_then(|slots| slots.get(*bucket).copied().flatten());
        *bucket += 1;
        match exemplar {
            Some(e) => {
                let _ = std::fmt::Write::write_fmt(
                    out,
                    format_args!(
                        "{} # {{trace_id=\"{}\"}} {} {}\n",
                        line.trim_end_matches('\n'),
                        e.trace,
                        e.value / 1000.0,
                        e.judged_unix_nano as f64 / 1e9
                    ),
                );
            }
            None => out.push_str(line),
        }
    }
}

/// A label value as the text formats escape it.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use deadline_budget::analysis::FindingKind;

    use crate::api::metrics::Metrics;
    use crate::api::metrics::test_chains::hop;

    /// A chain whose callee works on after its caller's call ended: an `orphaned_work` on
    /// `db`, dead work on frontend → db, and a call of 490 ms. The OpenMetrics text carries its
    /// trace as the exemplar of each series it raised; the text format carries none.
    #[test]
    fn the_series_a_chain_raised_carry_its_trace_as_exemplar() {
        use deadline_budget::analysis::{SpanKind, SpanStatus};
        let trace = [7u8; 16];
        let at = |mut span: deadline_budget::analysis::Span, kind, start_ms: u64, end_ms: u64| {
            span.kind = kind;
            span.start_unix_nano = start_ms * 1_000_000;
            span.end_unix_nano = end_ms * 1_000_000;
            span
        };
        let mut store = crate::store::Store::new(100).with_exemplars();
        store.set_clock(1_700_000_000_000_000_000);
        store.insert_spans([
            at(
                hop(trace, 1, None, "frontend", SpanStatus::Unset),
                SpanKind::Server,
                1,
                1000,
            ),
            at(
                hop(trace, 2, Some(1), "frontend", SpanStatus::Error),
                SpanKind::Client,
                10,
                500,
            ),
            at(
                hop(trace, 3, Some(2), "db", SpanStatus::Unset),
                SpanKind::Server,
                20,
                900,
            ),
        ]);
        store.judge_all();
        let report = store.report_of_judged();
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.kind == FindingKind::OrphanedWork && &*f.service == "db"),
            "{:?}",
            report.findings
        );
        let metrics = Metrics::new(10);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        metrics.encode_published();
        let (text, _) = metrics.encode(true);
        let exemplar = format!(" # {{trace_id=\"{}\"}}", "07".repeat(16));
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_owned()
        };
        let findings = line(
            "budget_top_findings_total{kind=\"orphaned_work\",severity=\"error\",service=\"db\"}",
        );
        assert!(
            findings.ends_with(&format!("{exemplar} 1.0 1700000000.0")),
            "{findings}"
        );
        let wasted = line("budget_top_wasted_seconds_total{caller=\"frontend\",callee=\"db\"}");
        assert!(wasted.contains(&exemplar), "{wasted}");
        // 490 ms: the bucket up to 0.5 s, and no other.
        let bucket = line(
            "budget_top_edge_latency_seconds_bucket{le=\"0.5\",caller=\"frontend\",callee=\"db\"}",
        );
        assert!(
            bucket.ends_with(&format!("{exemplar} 0.49 1700000000")),
            "{bucket}"
        );
        let others = text
            .lines()
            .filter(|l| {
                l.starts_with("budget_top_edge_latency_seconds_bucket") && l.contains(" # ")
            })
            .count();
        assert_eq!(others, 1, "{text}");
        let (plain, _) = metrics.encode(false);
        assert!(!plain.contains("trace_id"), "{plain}");
    }
}
