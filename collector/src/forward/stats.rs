//! The forwarding's counts (CONVENTIONS §7), shared by the stage, the exporter task, the
//! metrics and the reports: every span kept ends in one of sent, dropped or failed (queued
//! meanwhile), and [`ForwardCounts`] is their copy as the report's `forward` object holds them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The forwarding counts, shared by the stage, the exporter, the metrics and the reports.
/// Every span of a kept chain ends in one of sent, dropped or failed (queued meanwhile).
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// Chains kept for a finding.
    pub chains_finding: AtomicU64,
    /// Chains kept as the sampled share of the others.
    pub chains_sample: AtomicU64,
    /// Spans of the chains kept, and late spans of kept chains.
    pub spans_kept: AtomicU64,
    /// Spans the backend accepted.
    pub spans_sent: AtomicU64,
    /// Spans sent again after an answer worth retrying (each time).
    pub spans_retried: AtomicU64,
    /// Spans not sent: see the three `dropped_*`.
    pub spans_dropped: AtomicU64,
    /// Spans the backend refused for good, or that ran out of retries.
    pub spans_failed: AtomicU64,
    /// Of the dropped: spans that did not fit `--forward-buffer` while their chain waited to
    /// be judged.
    pub dropped_buffer: AtomicU64,
    /// Of the dropped: spans of chains the full queue could not take.
    pub dropped_queue: AtomicU64,
    /// Of the dropped: spans still queued or retrying when serve stopped.
    pub dropped_stopped: AtomicU64,
    /// Late spans sent on (they are in `spans_kept` too).
    pub late_spans: AtomicU64,
    /// Spans queued or being sent now.
    pub queued_spans: AtomicU64,
    /// Bytes queued or being sent now.
    pub queued_bytes: AtomicU64,
    /// Export requests the backend accepted.
    pub requests_sent: AtomicU64,
    /// Export requests given up (refused, or out of retries).
    pub requests_failed: AtomicU64,
    /// The backend's last refusal or failure, for the reports.
    last_error: Mutex<Option<String>>,
}

impl ForwardStats {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A batch out of the queue.
    pub(super) fn dequeue(&self, spans: u64, bytes: usize) {
        self.queued_spans.fetch_sub(spans, Ordering::Relaxed);
        self.queued_bytes.fetch_sub(bytes as u64, Ordering::Relaxed);
    }

    /// `spans` given up (of a batch holding `bytes` in the queue, 0 when it was answered).
    pub(super) fn failed(&self, spans: u64, bytes: usize, why: String) {
        Self::add(&self.spans_failed, spans);
        Self::add(&self.requests_failed, 1);
        if bytes > 0 {
            self.dequeue(spans, bytes);
        }
        self.note(&why);
    }

    /// `spans` left when serve stopped.
    pub(super) fn stopped(&self, spans: u64, bytes: usize) {
        Self::add(&self.spans_dropped, spans);
        Self::add(&self.dropped_stopped, spans);
        self.dequeue(spans, bytes);
    }

    pub(super) fn note(&self, why: &str) {
        let mut last = match self.last_error.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        *last = Some(why.to_owned());
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> ForwardCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ForwardCounts {
            chains: ChainCounts {
                finding: get(&self.chains_finding),
                sample: get(&self.chains_sample),
            },
            spans: SpanCounts {
                kept: get(&self.spans_kept),
                sent: get(&self.spans_sent),
                retried: get(&self.spans_retried),
                dropped: get(&self.spans_dropped),
                failed: get(&self.spans_failed),
                queued: get(&self.queued_spans),
            },
            dropped: DroppedCounts {
                buffer: get(&self.dropped_buffer),
                queue: get(&self.dropped_queue),
                stopped: get(&self.dropped_stopped),
            },
            late_spans: get(&self.late_spans),
            requests: RequestCounts {
                sent: get(&self.requests_sent),
                failed: get(&self.requests_failed),
            },
            queued_bytes: get(&self.queued_bytes),
            last_error: match self.last_error.lock() {
                Ok(guard) => guard.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
        }
    }
}

/// A plain copy of [`ForwardStats`]: the report's `forward` object (with its where and what,
/// [`super::json`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ForwardCounts {
    /// Chains kept, by why.
    pub chains: ChainCounts,
    /// Spans kept and what became of them.
    pub spans: SpanCounts,
    /// The dropped spans, by why.
    pub dropped: DroppedCounts,
    /// Late spans sent on.
    pub late_spans: u64,
    /// Export requests.
    pub requests: RequestCounts,
    /// Bytes queued or being sent now.
    pub queued_bytes: u64,
    /// The backend's last refusal or failure.
    pub last_error: Option<String>,
}

/// Chains kept, by why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChainCounts {
    /// For a finding at or above `--forward-on`.
    pub finding: u64,
    /// As the `--forward-sample` share of the others.
    pub sample: u64,
}

/// Spans kept, and what became of them: `sent + dropped + failed + queued = kept`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpanCounts {
    /// Of the kept chains, and late spans of them.
    pub kept: u64,
    /// Accepted by the backend.
    pub sent: u64,
    /// Sent again after an answer worth retrying (each time; not in the sum).
    pub retried: u64,
    /// Not sent: no room, or serve stopped first.
    pub dropped: u64,
    /// Refused for good, or out of retries.
    pub failed: u64,
    /// Queued or being sent now.
    pub queued: u64,
}

/// The dropped spans, by why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DroppedCounts {
    /// Did not fit `--forward-buffer` while their chain waited to be judged.
    pub buffer: u64,
    /// Their chain found the queue full.
    pub queue: u64,
    /// Still queued or retrying when serve stopped (the drain's limit passed).
    pub stopped: u64,
}

/// Export requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestCounts {
    /// Accepted.
    pub sent: u64,
    /// Given up.
    pub failed: u64,
}
