//! Admission: what a request read whole must pass before its spans reach the store, and the
//! queue they wait in.
//!
//! Enters: from the receivers, a request about to be read ([`Shared::begin`]: a slot to read
//! it in, and room in the queue for one the size of the last) and then its body, decoded
//! (`admit_protobuf`, `admit_json`) and offered to the queue without waiting (`offer`).
//! Leaves: a [`Batch`] on the bounded channel to the owner loop, and an [`Admission`] for the
//! transport to answer. The queue counts the spans and bytes of the batches still in the
//! channel; the gates and why they count what they count: `docs/architecture.md`, "Ingest's
//! admission control".

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::decode::{self, interner::Interner, otlp_json, utf8};
use super::receive::auth::BearerToken;
use super::receive::body_bytes::BodyBytes;
use super::{ADMISSION_WAIT, IngestConfig, IngestStats};
use crate::batch::Batch;

/// What a queued span costs beyond its raw attributes: the `Span` it is decoded into.
const QUEUED_SPAN_BYTES: u64 = std::mem::size_of::<deadline_budget::analysis::Span>() as u64;
/// How often the one waiter looks for room in the queue (the owner loop takes batches
/// without telling anyone).
const ADMISSION_POLL: Duration = Duration::from_millis(1);
/// How many name interners the receivers share (see `Shared::interner`): as many as requests
/// are decoded at once, one on each of the runtime's workers (a thread per core), each
/// interner holding its own copy of the names (at most 16 copies).
fn interners() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16))
}

/// What the receivers share: the queue to the owner loop, the admission limits, the counters
/// and the name interner.
#[derive(Debug)]
pub(super) struct Shared {
    queue: Mutex<Queue>,
    max_queued_spans: u64,
    max_queued_bytes: u64,
    max_queued_attribute_bytes: u64,
    /// One permit per request being read and decoded.
    inflight: Arc<Semaphore>,
    /// The turn to wait for room in the queue: one waiter polls, the others queue behind it.
    room: tokio::sync::Mutex<()>,
    /// The bytes the bodies being read hold between them.
    pub(super) body_bytes: BodyBytes,
    stats: Arc<IngestStats>,
    /// Name interners (see [`interners`]): a request is decoded with whichever is free.
    interners: Vec<Mutex<Interner>>,
    keep_attributes: bool,
    keep_raw: bool,
    keep_received: bool,
    /// The token every request must carry, when `--bearer-token-file` is given.
    bearer: Option<BearerToken>,
}

/// How a request was handled, for the transport to answer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// Accepted; `rejected` spans were invalid (partial success) for the reason given.
    Accepted { rejected: u64, message: String },
    /// The store is behind: retry later.
    Throttled,
}

/// The channel to the owner loop, and the spans of the batches still in it.
///
/// The channel counts batches; what costs memory is spans. `waiting` holds the span count of
/// each batch sent, oldest first. The owner loop takes batches in that same order, so when the
/// channel holds `k` batches, they are the last `k` of `waiting`: the older entries have been
/// taken and are dropped. This needs nothing from the owner loop (it keeps a plain
/// `mpsc::Receiver`). It is exact because every send happens under the lock and no permit is
/// ever reserved ahead.
#[derive(Debug)]
struct Queue {
    tx: mpsc::Sender<Batch>,
    /// Spans and raw attribute bytes of each batch sent, oldest first.
    waiting: VecDeque<(u64, u64)>,
    /// The sum of `waiting`'s spans.
    spans: u64,
    /// The sum of `waiting`'s attribute bytes.
    attribute_bytes: u64,
    /// Spans of the last batch sent: what the next request probably holds.
    last: u64,
    /// What the last batch sent holds in bytes ([`Queue::bytes_waiting`]).
    last_bytes: u64,
}

impl Queue {
    /// Forgets the batches the owner loop has taken.
    fn forget_taken(&mut self) {
        let in_channel = self.tx.max_capacity() - self.tx.capacity();
        while self.waiting.len() > in_channel {
            if let Some((spans, bytes)) = self.waiting.pop_front() {
                self.spans -= spans;
                self.attribute_bytes -= bytes;
            }
        }
    }

    /// Spans in batches the owner loop has not taken yet.
    fn spans_waiting(&mut self) -> u64 {
        self.forget_taken();
        self.spans
    }

    /// The bytes the batches not taken yet hold: their spans as decoded, and their raw
    /// attributes (call after [`Queue::spans_waiting`]).
    fn bytes_waiting(&self) -> u64 {
        self.spans * QUEUED_SPAN_BYTES + self.attribute_bytes
    }

    /// Sends the batch if the queue has room for it (it stays within `max` spans and
    /// `max_bytes`, or the queue is empty: a request larger than the limit alone is still
    /// taken) and the channel has a free slot. Its raw attributes go with it only while the
    /// queue holds fewer than `max_attribute_bytes` of them (or none): past that, each span
    /// says its attributes were not kept.
    fn try_send(
        &mut self,
        mut batch: Batch,
        max: u64,
        max_bytes: u64,
        max_attribute_bytes: u64,
    ) -> Result<(), Batch> {
        let spans = batch.spans.len() as u64;
        let waiting = self.spans_waiting();
        let mut bytes: u64 = batch.attributes.iter().map(|a| a.bytes_held() as u64).sum();
        if waiting > 0
            && (waiting + spans > max
                || self.bytes_waiting() + spans * QUEUED_SPAN_BYTES + bytes > max_bytes)
        {
            return Err(batch);
        }
        if bytes > 0
            && self.attribute_bytes > 0
            && self.attribute_bytes + bytes > max_attribute_bytes
        {
            for attributes in &mut batch.attributes {
                *attributes = attributes.without_values();
            }
            bytes = 0;
        }
        match self.tx.try_send(batch) {
            Ok(()) => {
                self.waiting.push_back((spans, bytes));
                self.spans += spans;
                self.attribute_bytes += bytes;
                self.last = spans;
                self.last_bytes = spans * QUEUED_SPAN_BYTES + bytes;
                Ok(())
            }
            Err(error) => Err(error.into_inner()),
        }
    }
}

impl Shared {
    /// The receivers' shared state for `config`, and the end of the channel the owner loop
    /// takes batches from.
    pub(super) fn new(
        config: &IngestConfig,
        bearer: Option<BearerToken>,
        stats: Arc<IngestStats>,
    ) -> (Self, mpsc::Receiver<Batch>) {
        let (tx, receiver) = mpsc::channel(config.channel_capacity.max(1));
        let shared = Self {
            queue: Mutex::new(Queue {
                tx,
                waiting: VecDeque::new(),
                spans: 0,
                attribute_bytes: 0,
                last: 0,
                last_bytes: 0,
            }),
            max_queued_spans: config.max_queued_spans as u64,
            max_queued_bytes: config.max_queued_bytes,
            max_queued_attribute_bytes: config.max_queued_attribute_bytes as u64,
            inflight: Arc::new(Semaphore::new(config.max_inflight.max(1))),
            room: tokio::sync::Mutex::new(()),
            body_bytes: BodyBytes::new(config.max_inflight_bytes, config.max_body),
            stats,
            interners: (0..interners())
                .map(|_| Mutex::new(Interner::with_carriers(config.carriers.clone())))
                .collect(),
            keep_attributes: config.keep_attributes,
            keep_raw: config.keep_raw,
            keep_received: config.keep_received,
            bearer,
        };
        (shared, receiver)
    }

    /// Whether a request may be served: no token is required, or its `Authorization` header
    /// carries it. A request refused here is counted (its body is never read).
    pub(super) fn authenticated(&self, headers: &::http::HeaderMap) -> bool {
        let Some(token) = &self.bearer else {
            return true;
        };
        let value = headers
            .get(::http::header::AUTHORIZATION)
            .map(::http::HeaderValue::as_bytes);
        if token.accepts(value) {
            return true;
        }
        self.stats
            .requests_unauthenticated
            .fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The cheap first gate, before a request's body is read: a permit to read and decode it,
    /// once one is free and the queue has room for a request the size of the last one taken,
    /// waited for up to [`ADMISSION_WAIT`]; `None` past that. A refusal is counted here (its
    /// spans are unknown: the body is never read).
    pub(super) async fn begin(&self) -> Option<OwnedSemaphorePermit> {
        let deadline = tokio::time::Instant::now() + ADMISSION_WAIT;
        let room = !self.queue_full() || self.wait_for_room(deadline).await;
        let permit = if room {
            tokio::time::timeout_at(deadline, self.inflight.clone().acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            None
        };
        if permit.is_none() {
            self.refuse_unread();
        }
        permit
    }

    /// Whether the queue has no room for a request the size of the last one taken (or the
    /// channel no free slot).
    fn queue_full(&self) -> bool {
        let mut queue = self.queue();
        let waiting = queue.spans_waiting();
        queue.tx.capacity() == 0
            || waiting > 0
                && (waiting + queue.last > self.max_queued_spans
                    || queue.bytes_waiting() + queue.last_bytes > self.max_queued_bytes)
    }

    /// Waits, in arrival order, until the queue has room or `deadline` passes; whether it has.
    async fn wait_for_room(&self, deadline: tokio::time::Instant) -> bool {
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.room.lock()).await else {
            return false;
        };
        loop {
            if !self.queue_full() {
                return true;
            }
            if tokio::time::Instant::now() + ADMISSION_POLL > deadline {
                return false;
            }
            tokio::time::sleep(ADMISSION_POLL).await;
        }
    }

    /// Counts a request refused before its spans were read (throttled).
    pub(super) fn refuse_unread(&self) {
        self.stats.requests_refused.fetch_add(1, Ordering::Relaxed);
        self.stats
            .requests_refused_unread
            .fetch_add(1, Ordering::Relaxed);
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        match self.queue.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Decodes a request and offers it to the store without waiting; `repaired` counts the
    /// strings made valid UTF-8 before it was decoded.
    fn admit(
        &self,
        mut request: ExportTraceServiceRequest,
        repaired: utf8::Utf8Repairs,
    ) -> Admission {
        let total = decode::count_spans(&request);
        let keep = decode::Keep {
            attributes: self.keep_attributes && !self.keep_raw,
            received: self.keep_received,
        };
        let mut decoded = decode::decode_request_keeping(&mut request, &mut self.interner(), keep);
        decoded.repaired.merge(repaired);
        self.offer(decoded, self.keep_raw.then_some(request), total)
    }

    /// An OTLP/JSON body: invalid UTF-8 repaired, then read as the Collector reads it.
    /// The error is a message for the client.
    pub(super) fn admit_json(&self, body: &[u8]) -> Result<Admission, String> {
        let (body, repaired) = utf8::repair_json(body);
        otlp_json::parse_request(&body)
            .map(|request| self.admit(request, repaired))
            .map_err(|e| format!("invalid OTLP/JSON ExportTraceServiceRequest: {e}"))
    }

    /// The same for a protobuf body, read in place (the hot path: no request tree is built
    /// unless `record` wants the request itself).
    /// The error is a message for the client.
    pub(super) fn admit_protobuf(&self, body: &bytes::Bytes) -> Result<Admission, String> {
        if self.keep_raw {
            use prost::Message as _;
            let invalid =
                |e: prost::DecodeError| format!("invalid protobuf ExportTraceServiceRequest: {e}");
            return match ExportTraceServiceRequest::decode(body.as_ref()) {
                Ok(request) => Ok(self.admit(request, utf8::Utf8Repairs::default())),
                // prost refuses invalid UTF-8: repair the strings, as the in-place path reads
                // them, and try again.
                Err(error) => {
                    let Some(repaired) =
                        utf8::repair(body.as_ref(), utf8::Message::Request).filter(|r| r.count > 0)
                    else {
                        return Err(invalid(error));
                    };
                    let request = ExportTraceServiceRequest::decode(repaired.bytes.as_slice())
                        .map_err(invalid)?;
                    let mut repairs = utf8::Utf8Repairs::default();
                    for _ in 0..repaired.count {
                        repairs
                            .add(|| "a string of the request (record repairs every field)".into());
                    }
                    Ok(self.admit(request, repairs))
                }
            };
        }
        let keep = decode::Keep {
            attributes: self.keep_attributes,
            received: self.keep_received,
        };
        let mut decoded = decode::decode_protobuf_keeping(body, &mut self.interner(), keep)
            .map_err(|e| e.to_string())?;
        if let Some(received) = decoded.received.as_mut() {
            // A copy of its own: the body is a slice of the connection's read buffer, and
            // holding it (until its chains are judged) would hold that whole buffer.
            received.bytes = bytes::Bytes::copy_from_slice(body);
        }
        let total = decoded.total();
        Ok(self.offer(decoded, None, total))
    }

    /// A free interner for one request's decoding, or the first one once it is free: the
    /// runtime's workers decode requests side by side (one interner held by each request
    /// for its whole decoding made the other worker sleep on it, and wake again).
    fn interner(&self) -> std::sync::MutexGuard<'_, Interner> {
        for interner in &self.interners {
            match interner.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        match self.interners[0].lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn offer(
        &self,
        decoded: decode::decoded_request::DecodedRequest,
        raw: Option<ExportTraceServiceRequest>,
        total: u64,
    ) -> Admission {
        let accepted = decoded.spans.len() as u64;
        let message = decoded.message();
        let batch = Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw,
            received: decoded.received,
        };
        // Full or closed: either way the store cannot take it now.
        if (accepted > 0 || batch.raw.is_some())
            && self
                .queue()
                .try_send(
                    batch,
                    self.max_queued_spans,
                    self.max_queued_bytes,
                    self.max_queued_attribute_bytes,
                )
                .is_err()
        {
            self.stats.requests_refused.fetch_add(1, Ordering::Relaxed);
            self.stats.spans_refused.fetch_add(total, Ordering::Relaxed);
            return Admission::Throttled;
        }
        self.stats.requests_accepted.fetch_add(1, Ordering::Relaxed);
        self.stats
            .spans_accepted
            .fetch_add(accepted, Ordering::Relaxed);
        self.stats
            .spans_rejected
            .fetch_add(decoded.rejected, Ordering::Relaxed);
        Admission::Accepted {
            rejected: decoded.rejected,
            message,
        }
    }

    pub(super) fn reject_request(&self) {
        self.stats.requests_rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn ignore_request(&self) {
        self.stats.requests_ignored.fetch_add(1, Ordering::Relaxed);
    }
}
