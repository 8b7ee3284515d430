//! The analysis of arbitrary span sets: colliding ids, self-parents and parent cycles, deep
//! chains, spans of several traces mixed, times from 1970 to 2300 and beyond, end before start,
//! and extreme budget facts. `Report::from_spans` and `Chain::insert` + `analyse` must never
//! panic or hang (run with `-timeout=10`).
#![no_main]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Chain, EdgeStats, Inserted, Options, Outcome, Report, Span, SpanId,
    SpanKind, SpanStatus, TraceId,
};
use libfuzzer_sys::fuzz_target;

/// Most spans one input builds (a deep chain adds up to `MAX_DEPTH` more).
const MAX_SPANS: usize = 256;
/// Longest linear parent chain one input may ask for.
const MAX_DEPTH: usize = 5_000;
/// Input bytes looked at; the rest is ignored (run with `-max_len=1024` so libFuzzer does not
/// grow inputs past it). A span takes 20 to 40 bytes, so this is still up to about 50 spans in
/// a few traces, which is where the rules' interactions are; more bytes only made each input
/// slower (every span is cloned, inserted twice and analysed twice).
const MAX_INPUT: usize = 1024;
/// One input in this many adds a deep chain (up to `MAX_DEPTH` hops, a few ms to analyse).
const DEEP_CHAIN_ONE_IN: u8 = 64;

const SERVICES: [&str; 5] = [
    "edge",
    "checkout",
    "payments",
    "",
    "a-very-long-service-name-x",
];
const NAMES: [&str; 3] = ["GET /checkout", "charge", ""];
const SOURCES: [BudgetSource; 8] = [
    BudgetSource::XBudgetMs,
    BudgetSource::GrpcTimeout,
    BudgetSource::ConnectTimeoutMs,
    BudgetSource::XRequestDeadline,
    BudgetSource::XEnvoyExpectedRqTimeoutMs,
    BudgetSource::Default,
    BudgetSource::Invalid,
    BudgetSource::None,
];
const OUTCOMES: [Outcome; 7] = [
    Outcome::Ok,
    Outcome::ShedFull,
    Outcome::ShedExpired,
    Outcome::DeadlineExceeded,
    Outcome::Cancelled,
    Outcome::Error,
    Outcome::Refused,
];
const KINDS: [SpanKind; 5] = [
    SpanKind::Internal,
    SpanKind::Server,
    SpanKind::Client,
    SpanKind::Producer,
    SpanKind::Consumer,
];
/// 1970, 2026, 2300 (in ns), and the ends of the range.
const TIMES: [u64; 6] = [
    0,
    1,
    1_764_430_000_000_000_000,
    10_413_792_000_000_000_000,
    u64::MAX - 1,
    u64::MAX,
];

fn time(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => *u.choose(&TIMES)?,
        // Near today, a few seconds apart: the region where the rules compare numbers.
        1 | 2 => TIMES[2] + u64::from(u.arbitrary::<u32>()?) * 1_000,
        _ => u.arbitrary()?,
    })
}

fn ms(u: &mut Unstructured) -> Result<Option<i64>> {
    Ok(match u.int_in_range(0u8..=5)? {
        0 | 1 => None,
        2 => Some(*u.choose(&[i64::MIN, i64::MAX, -1, 0, 1, i64::MIN + 1, i64::MAX - 1])?),
        3 | 4 => Some(i64::from(u.arbitrary::<i16>()?) * 10),
        _ => Some(u.arbitrary()?),
    })
}

fn span_id(u: &mut Unstructured) -> Result<SpanId> {
    // Mostly from a pool of 8 ids, so parents, duplicates and cycles happen.
    Ok(if u.ratio(7u8, 8u8)? {
        SpanId([u.int_in_range(0u8..=7)?; 8])
    } else {
        SpanId(u.arbitrary()?)
    })
}

fn facts(u: &mut Unstructured) -> Result<BudgetFacts> {
    Ok(BudgetFacts {
        received_ms: ms(u)?,
        source: if u.arbitrary()? {
            Some(*u.choose(&SOURCES)?)
        } else {
            None
        },
        default_ms: ms(u)?,
        queue_wait_ms: ms(u)?,
        remaining_at_start_ms: ms(u)?,
        outcome: if u.arbitrary()? {
            Some(*u.choose(&OUTCOMES)?)
        } else {
            None
        },
        remaining_ms: ms(u)?,
        forwarded_ms: ms(u)?,
        timeout_ms: ms(u)?,
        sla_ms: ms(u)?,
        attempt: ms(u)?,
        deadline_unix_ms: ms(u)?,
        http_status: ms(u)?,
        rpc_status: ms(u)?,
        error_type: if u.arbitrary()? {
            Some(Arc::from("timeout"))
        } else {
            None
        },
        exception_event: u.arbitrary()?,
    })
}

fn span(u: &mut Unstructured, traces: &[TraceId]) -> Result<Span> {
    let span_id = span_id(u)?;
    let parent_span_id = match u.int_in_range(0u8..=4)? {
        0 => None,
        1 => Some(span_id),
        _ => Some(self::span_id(u)?),
    };
    let start = time(u)?;
    let end = match u.int_in_range(0u8..=3)? {
        0 => time(u)?,
        _ => start.saturating_add(u64::from(u.arbitrary::<u32>()?) * 1_000),
    };
    Ok(Span {
        trace_id: *u.choose(traces)?,
        span_id,
        parent_span_id,
        service: Arc::from(*u.choose(&SERVICES)?),
        name: Arc::from(*u.choose(&NAMES)?),
        kind: *u.choose(&KINDS)?,
        start_unix_nano: start,
        end_unix_nano: end,
        status: *u.choose(&[SpanStatus::Unset, SpanStatus::Ok, SpanStatus::Error])?,
        budget: facts(u)?,
    })
}

fn spans(u: &mut Unstructured) -> Result<Vec<Span>> {
    let traces = [TraceId([1; 16]), TraceId([2; 16]), TraceId([0; 16])];
    let n_traces = u.int_in_range(1..=traces.len())?;
    let traces = &traces[..n_traces];
    let mut out = Vec::new();
    u.arbitrary_loop(None, Some(MAX_SPANS as u32), |u| {
        out.push(span(u, traces)?);
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    // Sometimes (rarely: it is slow) a linear chain, hop calling hop, as deep as asked: the walks
    // must be iterative.
    if !out.is_empty() && u.ratio(1u8, DEEP_CHAIN_ONE_IN)? {
        let depth = u.int_in_range(0..=MAX_DEPTH)?;
        let template = out[0].clone();
        let loop_back = u.arbitrary::<bool>()?;
        for i in 0..depth {
            let mut s = template.clone();
            s.span_id = SpanId((i as u64 + 1_000).to_be_bytes());
            s.parent_span_id = Some(if i == 0 {
                if loop_back {
                    SpanId(((depth - 1) as u64 + 1_000).to_be_bytes())
                } else {
                    template.span_id
                }
            } else {
                SpanId((i as u64 - 1 + 1_000).to_be_bytes())
            });
            s.kind = if i % 2 == 0 {
                SpanKind::Client
            } else {
                SpanKind::Server
            };
            s.start_unix_nano = template.start_unix_nano.saturating_add(i as u64 * 1_000);
            out.push(s);
        }
    }
    Ok(out)
}

fn check(spans: Vec<Span>) {
    let options = Options::default();

    // What the check command does.
    let report = Report::from_spans(spans.clone(), &options);
    let _ = serde_json::to_string(&report).expect("a report always serialises");

    // What the store does: chains fed span by span, analysed, edges summed and taken back out.
    let mut chains: HashMap<TraceId, Chain> = HashMap::new();
    let mut distinct: HashMap<TraceId, HashSet<SpanId>> = HashMap::new();
    for s in &spans {
        let chain = chains
            .entry(s.trace_id)
            .or_insert_with(|| Chain::new(s.trace_id));
        let fresh = distinct.entry(s.trace_id).or_default().insert(s.span_id);
        let held = chain.get(s.span_id);
        let got = chain.insert(s.clone());
        assert_eq!(
            got,
            if fresh {
                Inserted::New
            } else if held.as_ref() == Some(s) {
                Inserted::Replaced
            } else {
                Inserted::Conflicting
            }
        );
        // The copy kept does not depend on the order copies arrive in.
        if let Some(held) = held.filter(|h| h != s) {
            let mut reverse = Chain::new(s.trace_id);
            reverse.insert(s.clone());
            reverse.insert(held);
            assert_eq!(reverse.get(s.span_id), chain.get(s.span_id));
        }
        // A span of another trace is ignored.
        let mut other = s.clone();
        other.trace_id = TraceId([9; 16]);
        assert_eq!(chain.insert(other), Inserted::OtherTrace);
    }
    let mut edges = EdgeStats::new();
    let mut analyses = Vec::new();
    for (trace, chain) in &chains {
        assert_eq!(chain.len(), distinct[trace].len());
        let a = chain.analyse(&options);
        assert_eq!(a.rows.len(), chain.len(), "every span gets exactly one row");
        assert_eq!(a.summary.spans as usize, chain.len());
        let rows: HashSet<SpanId> = a
            .rows
            .iter()
            .map(|r| chain.span(r.span as usize).expect("a row names a span of its chain").span_id)
            .collect();
        assert_eq!(rows.len(), chain.len(), "no span drawn twice");
        for f in &a.findings {
            assert_eq!(f.severity, f.kind.severity());
            assert!(rows.contains(&f.span_id));
        }
        // Analysing twice gives the same answer.
        assert_eq!(chain.analyse(&options), a);
        edges.add(&a);
        analyses.push(a);
    }
    // As `check` and the store do: each chain judged once, inferred timeouts judged per edge
    // from the totals. The report's counts are exact (every chain's own findings, and the
    // edges' and lost contexts' on top), its list capped and saying how many it left out.
    let s = &report.summary;
    let counted: u64 = s.findings_by_kind.values().sum();
    assert_eq!(counted, s.findings.total(), "kinds and severities agree");
    let own: usize = analyses.iter().map(|a| a.findings.len()).sum();
    assert!(counted as usize >= own, "every chain's own findings are counted");
    assert_eq!(report.findings.len() as u64, s.findings_listed);
    assert!(s.findings_listed + s.findings_omitted <= counted + report.findings.len() as u64);
    assert_eq!(report.summary.traces as usize, chains.len());
    for a in &analyses {
        edges.remove(a);
    }
    assert!(
        edges.is_empty(),
        "adding then removing every chain leaves no edge"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(&data[..data.len().min(MAX_INPUT)]);
    if let Ok(spans) = spans(&mut u) {
        check(spans);
    }
});
