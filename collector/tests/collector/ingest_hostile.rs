//! The receivers against bad input and overload: the right status with a message, and the
//! next good request still served. `bodies`: what a request carries; `connections`: the
//! listener, slow and idle clients and the connection cap; `overload`: a full queue and the
//! limits on what is in flight.

use std::time::Duration;

use budget_top::ingest::{Ingest, IngestConfig};
use prost::Message as _;
use reqwest::StatusCode;

use crate::support::receivers::{next_batch, receivers, traces_url};
use crate::support::reset_chain;

mod bodies;
mod connections;
mod overload;

/// Both receivers, with `max_body` and a span queue of `channel_capacity` batches.
async fn start(max_body: usize, channel_capacity: usize) -> Ingest {
    receivers(IngestConfig {
        max_body,
        channel_capacity,
        ..IngestConfig::default()
    })
    .await
}

/// Posts `body` to the traces of `ingest` as `content_type` (and `encoding`); the status, the
/// headers and the body of the answer.
async fn post(
    ingest: &Ingest,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    post_to(&traces_url(ingest), content_type, encoding, body).await
}

/// [`post`] to another `url`.
async fn post_to(
    url: &str,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body);
    if let Some(encoding) = encoding {
        request = request.header("content-encoding", encoding);
    }
    let response = tokio::time::timeout(Duration::from_secs(30), request.send())
        .await
        .unwrap()
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// Posts `body` as protobuf.
async fn post_protobuf(
    ingest: &Ingest,
    body: Vec<u8>,
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    post(ingest, "application/x-protobuf", None, body).await
}

/// A good protobuf request answers 200 with an empty protobuf response and delivers 5 spans.
async fn assert_good_request_served(ingest: &mut Ingest, t: u8) {
    let (status, headers, body) = post_protobuf(ingest, reset_chain(t).encode_to_vec()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers["content-type"], "application/x-protobuf");
    assert_eq!(next_batch(ingest).await.spans.len(), 5);
}
