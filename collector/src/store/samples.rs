//! A chain's edge samples, packed: what the store keeps of [`ChainAnalysis::edges`] to take
//! them out of the edge aggregates again when the chain is analysed anew or evicted.
//!
//! An [`EdgeSample`] is 192 bytes (two service names, eight optional figures, the call's span
//! id, its findings); a chain of four hops has three, in a vector with room for four: ~590
//! bytes a chain, more than the chain's waterfall rows. Packed, a service is named by the
//! position of a span of the chain that has it (the caller and the callee are services of the
//! chain's spans) and each sample is a few varints: ~20 bytes. [`EdgeSamples::unpack`] gives
//! the samples back exactly as the analysis made them.
//!
//! [`ChainAnalysis::edges`]: deadline_budget::analysis::ChainAnalysis::edges

use std::sync::Arc;

use deadline_budget::analysis::{
    Chain, EdgeSample, FindingKind, KindCounts, RootLeft, SpanId, WaitSlack,
};
use prost::encoding::{decode_varint, encode_varint};

/// Which optional parts a packed sample has.
const RECEIVED: u64 = 1;
const FORWARDED: u64 = 1 << 1;
const LATENCY: u64 = 1 << 2;
const TIMEOUT: u64 = 1 << 3;
const UNANSWERED: u64 = 1 << 4;
const CALL: u64 = 1 << 5;
const FINDINGS: u64 = 1 << 6;
const SLACK: u64 = 1 << 7;
const HOP_BUDGET: u64 = 1 << 8;
const ATTEMPT: u64 = 1 << 9;
const CALLER_BUDGET: u64 = 1 << 10;
const UNTRACED: u64 = 1 << 11;
const FOR_NOBODY: u64 = 1 << 12;
const ROOT_LEFT: u64 = 1 << 13;
const ROOT_ANSWERED: u64 = 1 << 14;
const REMAINING: u64 = 1 << 15;

/// The packed samples of one chain. See the module documentation.
#[derive(Debug, Default)]
pub struct EdgeSamples {
    /// Services named by no span of the chain (never, for what the analysis makes; empty
    /// takes no allocation).
    services: Box<[Arc<str>]>,
    /// The samples, one after the other.
    packed: Box<[u8]>,
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

impl EdgeSamples {
    /// Packs `samples` of `chain`'s analysis, naming services by its spans' positions.
    pub fn pack(samples: &[EdgeSample], chain: &Chain) -> Self {
        Self::pack_naming(samples, Some(chain))
    }

    /// The same samples with every service named in full: what to hold while a span of the
    /// chain is replaced by a copy that may have another service.
    pub fn detach(&self, chain: &Chain) -> Self {
        Self::pack_naming(&self.unpack(chain), None)
    }

    fn pack_naming(samples: &[EdgeSample], chain: Option<&Chain>) -> Self {
        if samples.is_empty() {
            return EdgeSamples::default();
        }
        // Each service once: (name, position of a span with it), found in one pass.
        let mut named: Vec<(Arc<str>, Option<u64>)> = Vec::new();
        for s in samples {
            for name in [&s.caller, &s.callee] {
                if !named.iter().any(|(n, _)| n == name) {
                    named.push((name.clone(), None));
                }
            }
        }
        let services_by_position = chain
            .into_iter()
            .flat_map(|c| (0..c.len()).filter_map(|i| c.service(i)));
        for (position, service) in services_by_position.enumerate() {
            for (name, at) in named.iter_mut() {
                if at.is_none() && name == service {
                    *at = Some(position as u64);
                }
            }
            if named.iter().all(|(_, at)| at.is_some()) {
                break;
            }
        }
        let mut services: Vec<Arc<str>> = Vec::new();
        // A span's position `p` as `p << 1`, a name of `services` at `i` as `i << 1 | 1`.
        let mut index = |name: &Arc<str>| -> u64 {
            match named
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, at)| *at)
            {
                Some(position) => position << 1,
                None => {
                    let i = match services.iter().position(|s| s == name) {
                        Some(i) => i,
                        None => {
                            services.push(name.clone());
                            services.len() - 1
                        }
                    };
                    (i as u64) << 1 | 1
                }
            }
        };
        let mut out = Vec::with_capacity(samples.len() * 24);
        for s in samples {
            encode_varint(index(&s.caller), &mut out);
            encode_varint(index(&s.callee), &mut out);
            let mut present = 0;
            for (bit, on) in [
                (RECEIVED, s.received_ms.is_some()),
                (FORWARDED, s.forwarded_ms.is_some()),
                (LATENCY, s.latency_ms.is_some()),
                (TIMEOUT, s.timeout_ms.is_some()),
                (UNANSWERED, s.unanswered_ms.is_some()),
                (ATTEMPT, s.attempt.is_some()),
                (CALLER_BUDGET, s.caller_budget_ms.is_some()),
                (REMAINING, s.remaining_ms.is_some()),
                (CALL, s.call.is_some()),
                (FINDINGS, s.findings.is_some()),
                (SLACK, s.wait_slack.is_some()),
                (
                    HOP_BUDGET,
                    s.wait_slack.is_some_and(|w| w.hop_budget_ms.is_some()),
                ),
                (UNTRACED, s.untraced),
                (FOR_NOBODY, s.answered_for_nobody),
                (ROOT_LEFT, s.root_left.is_some()),
                (ROOT_ANSWERED, s.root_left.is_some_and(|r| r.answered)),
            ] {
                if on {
                    present |= bit;
                }
            }
            encode_varint(present, &mut out);
            for v in [
                s.received_ms,
                s.forwarded_ms,
                s.latency_ms,
                s.timeout_ms,
                s.unanswered_ms,
                s.attempt,
                s.caller_budget_ms,
                s.remaining_ms,
            ]
            .into_iter()
            .flatten()
            {
                encode_varint(zigzag(v), &mut out);
            }
            encode_varint(zigzag(s.wasted_ms), &mut out);
            if let Some(call) = s.call {
                out.extend_from_slice(&call.0);
            }
            if let Some(findings) = &s.findings {
                for n in findings.0 {
                    encode_varint(n, &mut out);
                }
            }
            if let Some(w) = s.wait_slack {
                encode_varint(zigzag(w.slack_ms), &mut out);
                encode_varint(zigzag(w.left_ms), &mut out);
                if let Some(b) = w.hop_budget_ms {
                    encode_varint(zigzag(b), &mut out);
                }
            }
            if let Some(r) = s.root_left {
                encode_varint(zigzag(r.after_ms), &mut out);
            }
        }
        EdgeSamples {
            services: services.into_boxed_slice(),
            packed: out.into_boxed_slice(),
        }
    }

    /// Whether there is no sample.
    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// The samples, as [`EdgeSamples::pack`] was given them (`chain`: the chain they were
    /// packed with).
    pub fn unpack(&self, chain: &Chain) -> Vec<EdgeSample> {
        let mut out = Vec::new();
        let mut buf: &[u8] = &self.packed;
        while !buf.is_empty() {
            match self.next(&mut buf, chain) {
                Some(sample) => out.push(sample),
                // Never the case for what `pack` wrote.
                None => break,
            }
        }
        out
    }

    fn service(&self, token: u64, chain: &Chain) -> Option<Arc<str>> {
        let i = usize::try_from(token >> 1).ok()?;
        if token & 1 == 1 {
            return self.services.get(i).cloned();
        }
        chain.service(i).cloned()
    }

    fn next(&self, buf: &mut &[u8], chain: &Chain) -> Option<EdgeSample> {
        let caller = self.service(decode_varint(buf).ok()?, chain)?;
        let callee = self.service(decode_varint(buf).ok()?, chain)?;
        let present = decode_varint(buf).ok()?;
        let mut figure = |bit: u64| -> Option<Option<i64>> {
            if present & bit == 0 {
                return Some(None);
            }
            Some(Some(unzigzag(decode_varint(buf).ok()?)))
        };
        let received_ms = figure(RECEIVED)?;
        let forwarded_ms = figure(FORWARDED)?;
        let latency_ms = figure(LATENCY)?;
        let timeout_ms = figure(TIMEOUT)?;
        let unanswered_ms = figure(UNANSWERED)?;
        let attempt = figure(ATTEMPT)?;
        let caller_budget_ms = figure(CALLER_BUDGET)?;
        let remaining_ms = figure(REMAINING)?;
        let wasted_ms = unzigzag(decode_varint(buf).ok()?);
        let call = if present & CALL != 0 {
            let (id, rest) = buf.split_first_chunk::<8>()?;
            *buf = rest;
            Some(SpanId(*id))
        } else {
            None
        };
        let findings = if present & FINDINGS != 0 {
            let mut counts = KindCounts::default();
            for n in counts.0.iter_mut().take(FindingKind::COUNT) {
                *n = decode_varint(buf).ok()?;
            }
            Some(Box::new(counts))
        } else {
            None
        };
        let wait_slack = if present & SLACK != 0 {
            let slack_ms = unzigzag(decode_varint(buf).ok()?);
            let left_ms = unzigzag(decode_varint(buf).ok()?);
            let hop_budget_ms = if present & HOP_BUDGET != 0 {
                Some(unzigzag(decode_varint(buf).ok()?))
            } else {
                None
            };
            Some(WaitSlack {
                slack_ms,
                left_ms,
                hop_budget_ms,
            })
        } else {
            None
        };
        let root_left = if present & ROOT_LEFT != 0 {
            Some(RootLeft {
                after_ms: unzigzag(decode_varint(buf).ok()?),
                answered: present & ROOT_ANSWERED != 0,
            })
        } else {
            None
        };
        Some(EdgeSample {
            caller,
            callee,
            received_ms,
            forwarded_ms,
            findings,
            wasted_ms,
            latency_ms,
            timeout_ms,
            unanswered_ms,
            call,
            wait_slack,
            attempt,
            caller_budget_ms,
            untraced: present & UNTRACED != 0,
            answered_for_nobody: present & FOR_NOBODY != 0,
            root_left,
            remaining_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadline_budget::analysis::{BudgetFacts, Span, SpanKind, SpanStatus, TraceId};

    fn sample(caller: &str, callee: &str) -> EdgeSample {
        EdgeSample {
            caller: Arc::from(caller),
            callee: Arc::from(callee),
            received_ms: None,
            forwarded_ms: None,
            findings: None,
            wasted_ms: 0,
            latency_ms: None,
            timeout_ms: None,
            unanswered_ms: None,
            call: None,
            wait_slack: None,
            attempt: None,
            caller_budget_ms: None,
            untraced: false,
            answered_for_nobody: false,
            root_left: None,
            remaining_ms: None,
        }
    }

    #[test]
    fn samples_come_back_as_they_went_in_whatever_their_figures() {
        let mut full = sample("bff", "orders");
        full.received_ms = Some(-7);
        full.forwarded_ms = Some(i64::MAX);
        full.latency_ms = Some(i64::MIN);
        full.timeout_ms = Some(0);
        full.unanswered_ms = Some(1234);
        full.attempt = Some(3);
        full.caller_budget_ms = Some(1000);
        full.untraced = true;
        full.answered_for_nobody = true;
        full.root_left = Some(RootLeft {
            after_ms: 1001,
            answered: true,
        });
        full.remaining_ms = Some(938);
        full.wasted_ms = -1;
        full.call = Some(SpanId([9; 8]));
        let mut counts = KindCounts::default();
        counts.bump(FindingKind::BudgetReset);
        counts.bump(FindingKind::BudgetReset);
        counts.bump(FindingKind::OrphanedWork);
        full.findings = Some(Box::new(counts));
        let mut only_wasted = sample("orders", "inventory");
        only_wasted.wasted_ms = 630;
        let samples = vec![
            sample("frontend", "bff"),
            full,
            only_wasted,
            sample("frontend", "bff"),
            sample("nowhere", "frontend"),
        ];
        let trace_id = TraceId([1; 16]);
        let mut chain = Chain::new(trace_id);
        for (i, service) in ["frontend", "bff", "orders", "inventory"]
            .iter()
            .enumerate()
        {
            chain.insert(Span {
                trace_id,
                span_id: SpanId([i as u8 + 1; 8]),
                parent_span_id: None,
                service: Arc::from(*service),
                name: Arc::from("op"),
                kind: SpanKind::Server,
                start_unix_nano: 1,
                end_unix_nano: 2,
                status: SpanStatus::Unset,
                budget: BudgetFacts::default(),
            });
        }
        let packed = EdgeSamples::pack(&samples, &chain);
        assert_eq!(packed.unpack(&chain), samples);
        // Only the service no span of the chain has is named in full.
        assert_eq!(&*packed.services, &[Arc::<str>::from("nowhere")]);
        assert!(packed.packed.len() < 80, "{}", packed.packed.len());
        assert_eq!(EdgeSamples::pack(&[], &chain).unpack(&chain), vec![]);
        // Detached, they no longer depend on the chain's spans.
        let detached = packed.detach(&chain);
        assert_eq!(detached.services.len(), 5);
        assert_eq!(detached.unpack(&Chain::new(trace_id)), samples);
    }
}
