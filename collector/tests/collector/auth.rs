//! Who may send (CONVENTIONS §7): `--bearer-token-file` on real sockets. A request without the
//! token is answered 401 / `UNAUTHENTICATED` before its body is read, never with a retry hint,
//! and counted; the right token in any scheme case (`Bearer`, `bearer`, `BEARER`) is served.

use std::path::{Path, PathBuf};
use std::time::Duration;

use budget_top::ingest::{self, Ingest, IngestConfig};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;
use reqwest::StatusCode;

use crate::support::receivers::{POST_PROTOBUF, receivers, sent};
use crate::support::{listen, reset_chain, run, scratch};

const TOKEN: &str = "s3cret-Token_42";

fn token_file(name: &str, contents: &str, mode: u32) -> PathBuf {
    let path = scratch(name).join("token");
    std::fs::write(&path, contents).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let _ = mode;
    path
}

async fn start(token: &Path) -> Ingest {
    receivers(IngestConfig {
        bearer_token_file: Some(token.to_path_buf()),
        ..IngestConfig::default()
    })
    .await
}

/// The `Authorization` values tried, and whether each is let in.
const CASES: [(Option<&str>, bool); 7] = [
    (None, false),
    (Some("Bearer wrong-token"), false),
    (Some("Basic s3cret-Token_42"), false),
    (Some("Bearer s3cret-token_42"), false),
    (Some("bearer s3cret-Token_42"), true),
    (Some("BEARER s3cret-Token_42"), true),
    (Some("Bearer s3cret-Token_42"), true),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_requests_without_the_token_get_401_unread_and_counted() {
    let path = token_file("auth_http", &format!("{TOKEN}\r\n"), 0o600);
    let mut ingest = start(&path).await;
    assert!(ingest.token_required);
    assert_eq!(ingest.protection(), "plain, token");
    let base = format!("http://{}", ingest.http_addr.unwrap());
    let client = reqwest::Client::new();
    let body = reset_chain(1).encode_to_vec();
    for (path, content_type) in [
        ("/v1/traces", "application/x-protobuf"),
        ("/v1/traces", "application/json"),
        ("/v1/metrics", "application/x-protobuf"),
        ("/v1/logs", "application/json"),
    ] {
        for (authorization, served) in CASES {
            let mut request = client
                .post(format!("{base}{path}"))
                .header("content-type", content_type)
                .body(if path == "/v1/traces" && content_type.ends_with("json") {
                    crate::support::json_line(&reset_chain(1)).into_bytes()
                } else if path == "/v1/traces" {
                    body.clone()
                } else {
                    Vec::new()
                });
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let response = request.send().await.unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let text = response.text().await.unwrap();
            if served {
                assert_eq!(status, StatusCode::OK, "{path} {authorization:?}: {text}");
                if path == "/v1/traces" {
                    let batch =
                        tokio::time::timeout(Duration::from_secs(10), ingest.receiver.recv())
                            .await
                            .unwrap()
                            .unwrap();
                    assert_eq!(batch.spans.len(), 5);
                }
            } else {
                assert_eq!(
                    status,
                    StatusCode::UNAUTHORIZED,
                    "{path} {authorization:?}: {text}"
                );
                assert_eq!(headers["www-authenticate"], "Bearer");
                assert!(headers.get("retry-after").is_none(), "never retried");
                assert!(text.contains("bearer token"), "{text}");
            }
        }
    }
    // Another path without the token: 401 too, nothing is said about what is served.
    let status = client
        .get(format!("{base}/anything"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let counts = ingest.stats.snapshot();
    assert_eq!(counts.requests_unauthenticated, 4 * 4 + 1);
    assert_eq!(counts.requests_accepted, 2 * 3);
    assert_eq!(counts.requests_ignored, 2 * 3);
    assert_eq!(counts.spans_accepted, 2 * 3 * 5);
    assert_eq!(
        (counts.requests_rejected, counts.requests_refused),
        (0, 0),
        "an unauthenticated request is neither rejected nor refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_body_with_a_wrong_token_is_answered_before_it_is_sent() {
    use tokio::io::AsyncReadExt as _;
    let path = token_file("auth_unread", TOKEN, 0o600);
    let ingest = start(&path).await;
    // Headers announcing 1 GB, and not one byte of it: the answer cannot wait for the body.
    let head =
        format!("{POST_PROTOBUF}authorization: Bearer wrong\r\ncontent-length: 1000000000\r\n\r\n");
    let mut stream = sent(ingest.http_addr.unwrap(), head).await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(5), async {
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("401 before the body is sent");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{answer}"
    );
    assert_eq!(ingest.stats.snapshot().requests_unauthenticated, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_requests_without_the_token_get_unauthenticated_and_are_counted() {
    let path = token_file("auth_grpc", &format!("{TOKEN}\n"), 0o600);
    let mut ingest = start(&path).await;
    let endpoint = format!("http://{}", ingest.grpc_addr.unwrap());
    let mut traces = TraceServiceClient::connect(endpoint.clone()).await.unwrap();
    let mut metrics = MetricsServiceClient::connect(endpoint).await.unwrap();
    for (authorization, served) in CASES {
        let mut request = tonic::Request::new(reset_chain(1));
        let mut metrics_request = tonic::Request::new(ExportMetricsServiceRequest::default());
        if let Some(value) = authorization {
            request
                .metadata_mut()
                .insert("authorization", value.parse().unwrap());
            metrics_request
                .metadata_mut()
                .insert("authorization", value.parse().unwrap());
        }
        let answer = traces.export(request).await;
        let metrics_answer = metrics.export(metrics_request).await;
        if served {
            answer.unwrap();
            metrics_answer.unwrap();
            let batch = tokio::time::timeout(Duration::from_secs(10), ingest.receiver.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(batch.spans.len(), 5);
        } else {
            for status in [answer.unwrap_err(), metrics_answer.unwrap_err()] {
                assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
                assert!(status.message().contains("bearer token"), "{status:?}");
                assert!(
                    status.metadata().get("grpc-status-details-bin").is_none(),
                    "no retry info: {status:?}"
                );
            }
        }
    }
    // A message far past --max-body with a wrong token: UNAUTHENTICATED, not a size error,
    // because it is never read.
    let mut big = reset_chain(2);
    big.resource_spans[0].scope_spans[0].spans[0].name = "x".repeat(2 * ingest::DEFAULT_MAX_BODY);
    let mut request = tonic::Request::new(big);
    request
        .metadata_mut()
        .insert("authorization", "Bearer nope".parse().unwrap());
    let status = traces.export(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let counts = ingest.stats.snapshot();
    assert_eq!(counts.requests_unauthenticated, 4 * 2 + 1);
    assert_eq!(counts.requests_accepted, 3);
    assert_eq!(counts.requests_ignored, 3);
    assert_eq!((counts.requests_rejected, counts.spans_refused), (0, 0));
}

#[test]
fn a_missing_or_empty_token_file_is_refused_at_start_naming_it() {
    let dir = scratch("auth_refused");
    let missing = dir.join("no-such-token");
    let empty = dir.join("empty-token");
    std::fs::write(&empty, "\n").unwrap();
    let output = dir.join("recording.jsonl");
    let output = output.to_string_lossy();
    for (path, says) in [(&missing, "cannot read"), (&empty, "is empty")] {
        let path = path.to_string_lossy();
        for command in [&["check", "--for", "1s"][..], &["record", "-o", &output]] {
            let mut args = command.to_vec();
            args.extend([
                "--grpc",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--bearer-token-file",
                &path,
            ]);
            let out = run(&args);
            assert_eq!(out.code, Some(2), "{out:?}");
            assert!(
                out.stderr.contains(path.as_ref()) && out.stderr.contains(says),
                "{out:?}"
            );
            assert!(!out.stderr.contains("listening"), "{out:?}");
        }
    }
}

#[test]
fn check_with_a_token_file_others_can_read_warns_serves_and_counts() {
    let path = token_file("auth_check", &format!("{TOKEN}\n"), 0o644);
    let check = listen(&[
        "check",
        "--for",
        "3s",
        "--format",
        "json",
        "--bearer-token-file",
        &path.to_string_lossy(),
    ]);
    let http = check.http;
    let runtime = crate::support::runtime();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        for (t, authorization) in [(1u8, None), (2, Some("Bearer s3cret-Token_42"))] {
            let mut request = client
                .post(format!("http://{http}/v1/traces"))
                .header("content-type", "application/x-protobuf")
                .body(reset_chain(t).encode_to_vec());
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let status = request.send().await.unwrap().status();
            let expected = if authorization.is_some() {
                StatusCode::OK
            } else {
                StatusCode::UNAUTHORIZED
            };
            assert_eq!(status, expected);
        }
    });
    let finished = check.wait(Duration::from_secs(30));
    assert_eq!(
        finished.code,
        Some(1),
        "the reset is an error: {finished:?}"
    );
    assert!(
        finished.stderr.contains("receivers: plain, token"),
        "{finished:?}"
    );
    assert!(
        finished
            .stderr
            .contains("can be read by other users (mode 0644)"),
        "{finished:?}"
    );
    let report = finished.json();
    assert_eq!(report["summary"]["traces"], 1, "{report}");
    assert_eq!(report["ingest"]["requests_unauthenticated"], 1, "{report}");
    assert_eq!(report["ingest"]["spans_accepted"], 5, "{report}");
}

#[test]
fn allow_remote_without_a_token_says_loudly_that_anyone_can_send() {
    let check = listen(&["check", "--for", "300ms", "--allow-remote"]);
    let finished = check.wait(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    assert!(
        finished.stderr.contains("receivers: plain, no token"),
        "{finished:?}"
    );
    assert!(
        finished
            .stderr
            .contains("ANYONE ON THE NETWORK CAN SEND SPANS"),
        "{finished:?}"
    );
    let check = listen(&["check", "--for", "300ms"]);
    let finished = check.wait(Duration::from_secs(30));
    assert!(!finished.stderr.contains("ANYONE"), "{finished:?}");
}
