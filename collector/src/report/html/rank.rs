//! Which chains the page draws for each finding kind: every chain with a finding of the kind,
//! worst first (the most work for nobody, then chains whose user got no answer, then the
//! chain's wasted ms, then the most findings of the kind).

use deadline_budget::analysis::{Finding, FindingKind, Report, TraceId};
use foldhash::{HashMap, HashMapExt as _};

use crate::store::Store;

/// The report's findings of `kind` about chain `trace` (the chain's own and the edges').
pub(super) fn report_findings(report: &Report, trace: TraceId, kind: FindingKind) -> Vec<&Finding> {
    report
        .findings
        .iter()
        .filter(|f| f.trace_id == trace && f.kind == kind)
        .collect()
}

/// How bad one chain is for one finding kind.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ranked {
    pub trace: TraceId,
    /// The largest wasted ms among its findings of the kind.
    wasted: i64,
    /// Its findings of the kind.
    pub count: u32,
    /// Whether its user got no answer they could use.
    failed: bool,
    /// The chain's wasted ms.
    chain_wasted: i64,
}

/// For each kind with findings, in the contract's order, every chain with a finding of it,
/// worst first.
pub(super) fn rank(store: &Store, report: &Report) -> Vec<(FindingKind, Vec<Ranked>)> {
    let mut per_kind: Vec<HashMap<TraceId, Ranked>> =
        (0..FindingKind::COUNT).map(|_| HashMap::new()).collect();
    for f in &report.findings {
        let Some(by_trace) = per_kind.get_mut(f.kind as usize) else {
            continue;
        };
        let r = by_trace.entry(f.trace_id).or_insert(Ranked {
            trace: f.trace_id,
            wasted: 0,
            count: 0,
            failed: false,
            chain_wasted: 0,
        });
        r.wasted = r.wasted.max(f.wasted_ms.unwrap_or(0));
        r.count = r.count.saturating_add(1);
    }
    let mut out = Vec::new();
    for (kind, by_trace) in FindingKind::ALL.into_iter().zip(per_kind) {
        if by_trace.is_empty() {
            continue;
        }
        let mut ranked: Vec<Ranked> = by_trace
            .into_values()
            .map(|mut r| {
                if let Some(s) = store.summary(r.trace) {
                    r.failed = s.outcome.failed();
                    r.chain_wasted = s.wasted_ms;
                }
                r
            })
            .collect();
        ranked.sort_unstable_by(|a, b| {
            b.wasted
                .cmp(&a.wasted)
                .then(b.failed.cmp(&a.failed))
                .then(b.chain_wasted.cmp(&a.chain_wasted))
                .then(b.count.cmp(&a.count))
                .then(a.trace.cmp(&b.trace))
        });
        out.push((kind, ranked));
    }
    out
}
