//! Why a receiver refuses an export request: one type for both transports, which knows its
//! answer on each (the HTTP status and the `google.rpc.Status` code of the body, the gRPC code,
//! the wait before a retry), so that no answer is chosen by matching an error's text.
//!
//! The policy (`docs/architecture.md`, "Ingest's admission control"): a request the store has
//! no room for is told to retry later; one that can never succeed gets an answer no SDK retries
//! (HTTP 4xx, gRPC `INVALID_ARGUMENT`) and is counted as rejected.

use std::time::Duration;

use axum::http::StatusCode;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt as _};

use super::RETRY_AFTER;

/// A refused export request, and what the client is told.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum IngestError {
    /// The store is behind: OTLP's throttling answer, retried after [`RETRY_AFTER`].
    #[error("budget-top is behind: retry later")]
    Throttled,
    /// No bearer token, or the wrong one (`--bearer-token-file`); `send` says where it goes.
    #[error(
        "missing or wrong bearer token: send {send}: Bearer <the token in budget-top's --bearer-token-file>"
    )]
    Unauthenticated { send: &'static str },
    /// An HTTP path that is not an OTLP endpoint.
    #[error(
        "no OTLP endpoint at {path}: POST /v1/traces (or /v1/metrics, /v1/logs, which are dropped)"
    )]
    NoEndpoint { path: String },
    /// An HTTP method other than POST.
    #[error("OTLP/HTTP export is a POST")]
    NotPost,
    /// A gRPC method other than the service's `Export`.
    #[error("only {served} is served")]
    NoMethod { served: &'static str },
    /// A body of a media type the receiver does not read; `accepted` names those it does.
    #[error("unsupported content type {content_type:?}: send {accepted}")]
    UnsupportedContentType {
        content_type: String,
        accepted: String,
    },
    /// A content encoding [`super::gzip::decode_capped`] does not know.
    #[error(
        "unsupported content encoding {encoding:?}: send {}",
        crate::ingest::receive::gzip::ACCEPTED
    )]
    UnsupportedEncoding { encoding: String },
    /// The body did not arrive in time.
    #[error("request body not received within {0:?}")]
    BodyTimeout(Duration),
    /// The body on the wire is over `--max-body`.
    #[error("request body is over the limit of {max} bytes (--max-body)")]
    BodyTooLarge { max: usize },
    /// The body, decompressed, is over `--max-body`.
    #[error("decompressed body is over the limit of {max} bytes (--max-body)")]
    DecompressedTooLarge { max: usize },
    /// A gRPC message over `--max-body` before or after decompression, as tonic said.
    #[error(
        "request message is over the limit of {max} bytes (--max-body), before or after decompression: {said}"
    )]
    MessageTooLarge { max: usize, said: String },
    /// The body could not be read.
    #[error("could not read the request body: {0}")]
    UnreadableBody(String),
    /// A gRPC message tonic could not read, as it said.
    #[error("could not read the request message: {0}")]
    UnreadableMessage(String),
    /// A body its content encoding cannot undo.
    #[error("invalid {encoding} body: {error}")]
    CorruptBody { encoding: String, error: String },
    /// Not an export request: the decoder's message.
    #[error("{0}")]
    Malformed(String),
}

impl IngestError {
    /// The OTLP/HTTP status.
    pub(super) fn http_status(&self) -> StatusCode {
        match self {
            Self::Throttled => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            Self::NoEndpoint { .. } | Self::NoMethod { .. } => StatusCode::NOT_FOUND,
            Self::NotPost => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnsupportedContentType { .. } | Self::UnsupportedEncoding { .. } => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::BodyTooLarge { .. }
            | Self::DecompressedTooLarge { .. }
            | Self::MessageTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnreadableBody(_)
            | Self::UnreadableMessage(_)
            | Self::CorruptBody { .. }
            | Self::Malformed(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The code in the `google.rpc.Status` an OTLP/HTTP error body carries: `UNAVAILABLE` for
    /// "retry later", `RESOURCE_EXHAUSTED` for too large, else as on gRPC.
    pub(super) fn http_body_code(&self) -> Code {
        match self {
            Self::Throttled => Code::Unavailable,
            Self::BodyTooLarge { .. }
            | Self::DecompressedTooLarge { .. }
            | Self::MessageTooLarge { .. } => Code::ResourceExhausted,
            _ => self.grpc_code(),
        }
    }

    /// The OTLP/gRPC code: `RESOURCE_EXHAUSTED` for "retry later", and `INVALID_ARGUMENT`, which
    /// no SDK retries, for a request that can never succeed (too large included).
    pub(super) fn grpc_code(&self) -> Code {
        match self {
            Self::Throttled => Code::ResourceExhausted,
            Self::Unauthenticated { .. } => Code::Unauthenticated,
            Self::NoEndpoint { .. } | Self::NoMethod { .. } | Self::NotPost => Code::Unimplemented,
            _ => Code::InvalidArgument,
        }
    }

    /// How long the client should wait before sending the request again, when it should.
    pub(super) fn retry_after(&self) -> Option<Duration> {
        matches!(self, Self::Throttled).then_some(RETRY_AFTER)
    }

    /// Whether the request is counted as rejected (it can never succeed). "Retry later" is
    /// counted as refused, a missing token as unauthenticated, where they are decided.
    pub(super) fn is_rejected(&self) -> bool {
        !matches!(self, Self::Throttled | Self::Unauthenticated { .. })
    }

    /// The OTLP/gRPC answer: the code and message, with `RetryInfo` when it should be retried.
    pub(super) fn grpc_status(&self) -> tonic::Status {
        let message = self.to_string();
        match self.retry_after() {
            Some(wait) => tonic::Status::with_error_details(
                self.grpc_code(),
                message,
                ErrorDetails::with_retry_info(Some(wait)),
            ),
            None => tonic::Status::new(self.grpc_code(), message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_answer_on_both_transports() {
        let too_large = IngestError::BodyTooLarge { max: 10 };
        let malformed = IngestError::Malformed("invalid".into());
        let cases = [
            (
                IngestError::Throttled,
                503,
                Code::Unavailable,
                Code::ResourceExhausted,
            ),
            (
                too_large,
                413,
                Code::ResourceExhausted,
                Code::InvalidArgument,
            ),
            (malformed, 400, Code::InvalidArgument, Code::InvalidArgument),
            (
                IngestError::Unauthenticated { send: "it" },
                401,
                Code::Unauthenticated,
                Code::Unauthenticated,
            ),
            (
                IngestError::NoMethod { served: "Export" },
                404,
                Code::Unimplemented,
                Code::Unimplemented,
            ),
        ];
        for (error, http, body, grpc) in cases {
            assert_eq!(error.http_status().as_u16(), http, "{error}");
            assert_eq!(error.http_body_code(), body, "{error}");
            assert_eq!(error.grpc_code(), grpc, "{error}");
            assert_eq!(error.grpc_status().code(), grpc, "{error}");
            assert_eq!(error.grpc_status().message(), error.to_string());
        }
    }

    #[test]
    fn only_retry_later_is_retried_and_only_what_can_never_succeed_is_rejected() {
        assert_eq!(IngestError::Throttled.retry_after(), Some(RETRY_AFTER));
        assert!(!IngestError::Throttled.is_rejected());
        let unauthenticated = IngestError::Unauthenticated { send: "it" };
        assert!(!unauthenticated.is_rejected());
        assert_eq!(unauthenticated.retry_after(), None);
        let unreadable = IngestError::UnreadableMessage("cut".into());
        assert!(unreadable.is_rejected());
        assert_eq!(unreadable.retry_after(), None);
    }
}
