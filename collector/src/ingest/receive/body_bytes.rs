//! The bytes of request bodies being read, both receivers together, bounded.
//!
//! What costs memory while requests are read is the bytes their bodies have brought, not the
//! number of requests: a request counts against [`IngestConfig::max_inflight_bytes`] only for
//! what it has received so far. Many slow small bodies can then be read at once (under
//! overload a client's accepted bodies arrive slowly, and a count of requests sized for the
//! largest body left the receiver idle while they did), and the memory they hold stays within
//! the same bound a count of `max_body`-sized requests gave.
//!
//! A body that would go past the bound is cut off where it is (what it held is freed at once)
//! and its request gets OTLP's throttling answer, counted as refused unread: its spans were
//! never seen. The bound is never below `max_body`, so a request alone always fits.
//!
//! [`IngestConfig::max_inflight_bytes`]: crate::ingest::IngestConfig::max_inflight_bytes

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bound on body bytes held, shared by every request.
#[derive(Debug, Clone)]
pub(in crate::ingest) struct BodyBytes(Arc<Semaphore>);

impl BodyBytes {
    /// At most `max` bytes held at once (at least `max_body`: a request alone always fits).
    pub(in crate::ingest) fn new(max: usize, max_body: usize) -> Self {
        Self(Arc::new(Semaphore::new(
            max.max(max_body).clamp(1, Semaphore::MAX_PERMITS),
        )))
    }

    /// Bytes not held by any body now.
    #[cfg(test)]
    fn available(&self) -> usize {
        self.0.available_permits()
    }

    /// `body`, counted against the bound as its data arrives; `Held` says what became of it.
    pub(in crate::ingest) fn meter<B>(&self, body: B) -> (Metered<B>, Held) {
        let held = Held::default();
        let metered = Metered {
            body: Box::pin(body),
            bytes: self.clone(),
            held: held.clone(),
        };
        (metered, held)
    }
}

/// What one request's body holds of the bound. The body and the request's handler share it;
/// the bytes go back when both are gone, so a body read whole still counts while it is
/// decoded.
#[derive(Debug, Default, Clone)]
pub(in crate::ingest) struct Held(Arc<HeldInner>);

#[derive(Debug, Default)]
struct HeldInner {
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    over: AtomicBool,
}

impl Held {
    /// True when the body was cut off because the bound was reached.
    pub(in crate::ingest) fn over(&self) -> bool {
        self.0.over.load(Ordering::Relaxed)
    }

    /// Takes `n` more bytes of the bound, without waiting; false (and nothing taken) when they
    /// are not free.
    fn take(&self, bytes: &BodyBytes, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        let Ok(permit) = bytes.0.clone().try_acquire_many_owned(n) else {
            return false;
        };
        let mut slot = match self.0.permit.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        match slot.as_mut() {
            Some(held) => held.merge(permit),
            None => *slot = Some(permit),
        }
        true
    }

    /// Gives every byte back at once (the body was cut off).
    fn release(&self) {
        let mut slot = match self.0.permit.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        slot.take();
    }
}

/// The error a cut-off body ends with (its request is answered as throttled).
#[derive(Debug, thiserror::Error)]
#[error("budget-top is reading as many request bytes as it holds (--max-inflight-bytes)")]
pub(in crate::ingest) struct OverBound;

/// A request body whose data frames are counted against [`BodyBytes`].
pub(in crate::ingest) struct Metered<B> {
    body: Pin<Box<B>>,
    bytes: BodyBytes,
    held: Held,
}

impl<B> Body for Metered<B>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.held.over() {
            return Poll::Ready(Some(Err(OverBound.into())));
        }
        match ready!(this.body.as_mut().poll_frame(cx)) {
            Some(Ok(frame)) => {
                let n = frame.data_ref().map_or(0, Buf::remaining);
                if this.held.take(&this.bytes, n) {
                    Poll::Ready(Some(Ok(frame)))
                } else {
                    this.held.0.over.store(true, Ordering::Relaxed);
                    this.held.release();
                    Poll::Ready(Some(Err(OverBound.into())))
                }
            }
            Some(Err(error)) => Poll::Ready(Some(Err(error.into()))),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.over() || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt as _, Full, StreamBody};

    fn chunks(sizes: &[usize]) -> impl Body<Data = Bytes, Error = std::convert::Infallible> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = sizes
            .iter()
            .map(|&n| Ok(Frame::data(Bytes::from(vec![0u8; n]))))
            .collect();
        StreamBody::new(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn a_body_holds_what_it_received_until_its_request_is_done() {
        let bytes = BodyBytes::new(1000, 100);
        let (body, held) = bytes.meter(chunks(&[300, 200]));
        let read = body.collect().await.map(|c| c.to_bytes().len());
        assert_eq!(read.ok(), Some(500));
        assert!(!held.over());
        assert_eq!(
            bytes.available(),
            500,
            "still held while the request is handled"
        );
        drop(held);
        assert_eq!(
            bytes.available(),
            1000,
            "given back when the request is done"
        );
    }

    #[tokio::test]
    async fn a_body_past_the_bound_is_cut_off_and_gives_back_what_it_held() {
        let bytes = BodyBytes::new(1000, 100);
        let (first, first_held) = bytes.meter(Full::new(Bytes::from(vec![1u8; 700])));
        let first = first.collect().await.map(|c| c.to_bytes().len());
        assert_eq!(first.ok(), Some(700));
        let (second, second_held) = bytes.meter(chunks(&[200, 200]));
        let error = second.collect().await.err().map(|e| e.to_string());
        assert!(
            error.is_some_and(|e| e.contains("--max-inflight-bytes")),
            "the second body goes past 1000 bytes with the first's 700"
        );
        assert!(second_held.over());
        assert!(!first_held.over());
        assert_eq!(
            bytes.available(),
            300,
            "the cut-off body's 200 bytes are back"
        );
        drop(first_held);
        assert_eq!(bytes.available(), 1000);
    }

    #[test]
    fn the_bound_is_never_below_the_largest_body() {
        assert_eq!(BodyBytes::new(10, 4096).available(), 4096);
        assert_eq!(BodyBytes::new(0, 0).available(), 1);
    }
}
