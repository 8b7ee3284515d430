//! The exposition: the families as text, Prometheus's (0.0.4) or OpenMetrics when the scraper
//! asks for it ([`wants_openmetrics`]). The receivers' few lines are encoded on every scrape; the
//! totals' once per publish, off the request path ([`keep_encoded`], on a blocking thread), their
//! text kept until the next: a scrape copies the text last encoded (it encodes only the first of
//! its format), however many chains are being judged. A publish and an encoding of the totals
//! never overlap, so a text is always one publish whole.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use prometheus_client::encoding::{prometheus_text, text};

use super::Metrics;
use super::exemplars::with_bucket_exemplars;
use super::lock;
use crate::api::encoding::{self, Deflated};

/// The content type of the OpenMetrics text format.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The totals' text as encoded after a publish, and compressed when a scraper asked for gzip.
#[derive(Debug)]
pub(super) struct Encoded {
    /// The publish's number.
    version: u64,
    text: Bytes,
    deflated: Option<Deflated>,
}

/// The totals' part of a body: as text, or compressed ([`encoding`]).
#[derive(Debug)]
enum TotalsPart {
    Text(Bytes),
    Deflated(Deflated),
}

impl Metrics {
    /// The exposition: OpenMetrics text when `openmetrics`, else the Prometheus text format
    /// (0.0.4), in three parts a body sends one after the other (the receivers' lines, the
    /// totals' text as kept, shared and not copied, and the end), or, when `gzip`, one gzip
    /// member made of them (the totals' part compressed when it was encoded). Returns the body's
    /// pieces and the content type.
    pub fn encode_parts(&self, openmetrics: bool, gzip: bool) -> (Vec<Bytes>, &'static str) {
        let totals = self.totals_part(openmetrics, gzip);
        let mut head = String::with_capacity(4096);
        let mut end = String::new();
        // Writing into a String cannot fail.
        let content_type = if openmetrics {
            let _ = text::encode_registry(&mut head, &self.ingest_registry);
            let _ = text::encode_eof(&mut end);
            OPENMETRICS
        } else {
            let _ = prometheus_text::encode(&mut head, &self.ingest_registry);
            prometheus_text::CONTENT_TYPE
        };
        let pieces = match totals {
            TotalsPart::Text(totals) => vec![head.into(), totals, end.into()],
            TotalsPart::Deflated(totals) => encoding::member(&[
                Deflated::part(head.as_bytes(), false),
                totals,
                Deflated::part(end.as_bytes(), true),
            ]),
        };
        (pieces, content_type)
    }

    /// [`Metrics::encode_parts`] as one text (the tests read it).
    #[cfg(test)]
    pub fn encode(&self, openmetrics: bool) -> (String, &'static str) {
        let (parts, content_type) = self.encode_parts(openmetrics, false);
        let text = parts
            .iter()
            .map(|part| String::from_utf8_lossy(part))
            .collect();
        (text, content_type)
    }

    /// The totals' families as text, or compressed when `gzip`: as last encoded for this
    /// format, whatever was published since ([`keep_encoded`] brings it up to date); encoded
    /// (or compressed) here only the first time a format (or gzip) is asked for.
    fn totals_part(&self, openmetrics: bool, gzip: bool) -> TotalsPart {
        let format = usize::from(openmetrics);
        self.wanted[format].store(true, Ordering::Relaxed);
        if gzip {
            self.wanted_gzip[format].store(true, Ordering::Relaxed);
        }
        if let Some(encoded) = lock(&self.encoded[format]).as_ref() {
            match (&encoded.deflated, gzip) {
                (_, false) => return TotalsPart::Text(encoded.text.clone()),
                (Some(deflated), true) => return TotalsPart::Deflated(deflated.clone()),
                (None, true) => {}
            }
        }
        let _busy = lock(&self.totals_busy);
        let encoded = self.encode_totals(openmetrics);
        match (encoded.deflated, gzip) {
            (Some(deflated), true) => TotalsPart::Deflated(deflated),
            _ => TotalsPart::Text(encoded.text),
        }
    }

    /// Encodes the totals' families in `openmetrics` or the text format, compresses them too
    /// when a scraper asked for gzip, and keeps both (the caller holds `totals_busy`).
    fn encode_totals(&self, openmetrics: bool) -> Encoded {
        let format = usize::from(openmetrics);
        let version = self.version.load(Ordering::Relaxed);
        let mut out = String::new();
        if openmetrics {
            let _ = text::encode_registry(&mut out, &self.totals_registry);
            let mut latency = String::new();
            let _ = text::encode_registry(&mut latency, &self.latency_registry);
            with_bucket_exemplars(&latency, &lock(&self.latency_exemplars), &mut out);
        } else {
            let _ = prometheus_text::encode(&mut out, &self.totals_registry);
            let _ = prometheus_text::encode(&mut out, &self.latency_registry);
        }
        let deflated = self.wanted_gzip[format]
            .load(Ordering::Relaxed)
            .then(|| Deflated::part(out.as_bytes(), false));
        let text = Bytes::from(out);
        *lock(&self.encoded[format]) = Some(Encoded {
            version,
            text: text.clone(),
            deflated: deflated.clone(),
        });
        Encoded {
            version,
            text,
            deflated,
        }
    }

    /// Encodes anew, for each format a scraper has asked for, the totals' families published
    /// since its text was last encoded (and compresses them, when gzip was asked for).
    pub fn encode_published(&self) {
        let _busy = lock(&self.totals_busy);
        let version = self.version.load(Ordering::Relaxed);
        for openmetrics in [false, true] {
            let format = usize::from(openmetrics);
            if !self.wanted[format].load(Ordering::Relaxed) {
                continue;
            }
            let current = lock(&self.encoded[format])
                .as_ref()
                .map(|e| (e.version, e.deflated.is_some()));
            let gzip = self.wanted_gzip[format].load(Ordering::Relaxed);
            if current.is_none_or(|(v, deflated)| v != version || (gzip && !deflated)) {
                self.encode_totals(openmetrics);
            }
        }
    }
}

/// Keeps the totals' text up to date off the request path: after each publish, encodes it
/// again on a blocking thread (one encoding at a time; publishes during one are taken by the
/// next), until `stop`.
pub async fn keep_encoded(metrics: Arc<Metrics>, stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            () = metrics.published.notified() => {}
            () = stop.cancelled() => return,
        }
        let encoding = metrics.clone();
        if tokio::task::spawn_blocking(move || encoding.encode_published())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// What the scraper asked for: OpenMetrics when its `Accept` header names
/// `application/openmetrics-text` (Prometheus does, first), else the classic text format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    encoding::accepts(accept, |media| {
        media.eq_ignore_ascii_case("application/openmetrics-text")
    })
}

#[cfg(test)]
mod tests {
    use deadline_budget::analysis::Totals;

    use super::*;
    use crate::api::metrics::test_chains::{edge_chains, hop};

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0, text/plain"
        )));
    }

    /// A scrape copies the text last encoded (it never encodes a publish itself: that is
    /// `encode_published`'s, off the request path), and a publish waits for no encoding.
    #[test]
    fn a_scrape_reads_the_text_last_encoded_and_a_publish_skips_a_running_encoding() {
        use deadline_budget::analysis::SpanStatus;
        let mut store = crate::store::Store::new(100);
        store.insert_spans([hop([1; 16], 1, None, "frontend", SpanStatus::Unset)]);
        store.judge_all();
        let metrics = Metrics::new(10);
        let chains = |text: &str| {
            text.lines()
                .filter(|l| l.starts_with("budget_top_chains_total{"))
                .map(|l| {
                    l.rsplit_once(' ')
                        .map_or(0, |(_, v)| v.parse::<u64>().unwrap_or(0))
                })
                .sum::<u64>()
        };
        // The first scrape of a format encodes it (nothing was kept yet).
        assert_eq!(chains(&metrics.encode(false).0), 0);
        let busy = lock(&metrics.totals_busy);
        assert!(
            !metrics.try_publish_totals(store.totals(), store.exemplars()),
            "published during an encoding"
        );
        drop(busy);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        assert_eq!(
            chains(&metrics.encode(false).0),
            0,
            "a scrape encoded the publish"
        );
        metrics.encode_published();
        assert_eq!(chains(&metrics.encode(false).0), 1);
        // OpenMetrics was never asked for: not encoded by the publish, but on its first scrape.
        assert!(lock(&metrics.encoded[1]).is_none());
        assert_eq!(chains(&metrics.encode(true).0), 1);
    }

    #[test]
    fn a_gzip_scrape_is_the_same_text_compressed_and_follows_each_publish() {
        use std::io::Read as _;
        let gunzip = |pieces: Vec<Bytes>| {
            let body: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
            let mut text = String::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_string(&mut text)
                .expect("one valid gzip member");
            (text, body.len())
        };
        let metrics = Metrics::new(10_000);
        let mut totals = Totals::new();
        let mut store = crate::store::Store::new(1000);
        for openmetrics in [false, true] {
            // Before any publish, then after one with many edges: the same text either way.
            for round in 0..2 {
                let (text, content_type) = metrics.encode(openmetrics);
                let (pieces, gzip_type) = metrics.encode_parts(openmetrics, true);
                let (unzipped, compressed) = gunzip(pieces);
                assert_eq!(unzipped, text, "openmetrics {openmetrics}, round {round}");
                assert_eq!(content_type, gzip_type);
                if round == 1 {
                    assert!(text.contains("budget_top_edge_calls_total{caller=\"svc-999\""));
                    assert!(
                        compressed * 5 < text.len(),
                        "{compressed} of {}",
                        text.len()
                    );
                }
                if round == 0 && !openmetrics {
                    store.insert_spans(edge_chains(1000));
                    store.judge_all();
                    totals = store.totals().clone();
                }
                assert!(metrics.try_publish_totals(&totals, None));
                metrics.encode_published();
            }
        }
    }
}
