//! The span attribute keys and values of the budget contract (`CONVENTIONS.md` section 2).
//!
//! The library writes these keys on the spans it creates, and the collector reads the same
//! constants back: both halves of the contract live here so they cannot drift apart.

/// SERVER/CONSUMER: the decoded remaining budget at arrival, in ms.
pub const RECEIVED_MS: &str = "budget.received_ms";
/// SERVER/CONSUMER: where the budget came from (see [`source`]).
pub const SOURCE: &str = "budget.source";
/// SERVER/CONSUMER: the edge budget a hop assigned itself, when `budget.source = "default"`.
pub const DEFAULT_MS: &str = "budget.default_ms";
/// SERVER/CONSUMER: time from arrival to start of work, in ms.
pub const QUEUE_WAIT_MS: &str = "budget.queue_wait_ms";
/// SERVER/CONSUMER: budget left when work started; zero or less means it ran after expiry.
pub const REMAINING_AT_START_MS: &str = "budget.remaining_at_start_ms";
/// SERVER/CONSUMER and CLIENT/PRODUCER: how the work or the call ended (see [`outcome`]).
pub const OUTCOME: &str = "budget.outcome";
/// SERVER/CONSUMER: the raw header value that could not be decoded, when `source = "invalid"`.
pub const INVALID_VALUE: &str = "budget.invalid_value";

/// CLIENT/PRODUCER: what remained of the hop's deadline when the call was sent, in ms.
pub const REMAINING_MS: &str = "budget.remaining_ms";
/// CLIENT/PRODUCER: the value written into the outgoing request, in ms.
pub const FORWARDED_MS: &str = "budget.forwarded_ms";
/// CLIENT/PRODUCER: the local timeout applied to this call, in ms.
pub const TIMEOUT_MS: &str = "budget.timeout_ms";
/// CLIENT/PRODUCER: the per-call cap, when one exists.
pub const SLA_MS: &str = "budget.sla_ms";
/// CLIENT/PRODUCER: the attempt number, 1 for the first.
pub const ATTEMPT: &str = "budget.attempt";

/// Headers captured by stock OpenTelemetry instrumentation, read when `budget.*` is absent.
pub const HTTP_HEADER_BUDGET_MS: &str = "http.request.header.x-budget-ms";
/// gRPC timeout captured as an HTTP request header.
pub const HTTP_HEADER_GRPC_TIMEOUT: &str = "http.request.header.grpc-timeout";
/// Absolute deadline captured as an HTTP request header.
pub const HTTP_HEADER_REQUEST_DEADLINE: &str = "http.request.header.x-request-deadline";
/// gRPC timeout captured as RPC metadata.
pub const RPC_METADATA_GRPC_TIMEOUT: &str = "rpc.request.metadata.grpc-timeout";
/// Prefix of a request header captured by stock instrumentation (`http.request.header.<name>`,
/// the name lowercase, `-` kept or turned into `_`).
pub const HTTP_REQUEST_HEADER_PREFIX: &str = "http.request.header.";
/// Prefix of gRPC request metadata captured by stock instrumentation.
pub const RPC_REQUEST_METADATA_PREFIX: &str = "rpc.request.metadata.";
/// The same, as the gRPC semantic conventions (and the Java agent) write it.
pub const RPC_GRPC_REQUEST_METADATA_PREFIX: &str = "rpc.grpc.request.metadata.";
/// The older HTTP status key, still the default of several SDKs (Python's among them).
pub const HTTP_STATUS_CODE: &str = "http.status_code";
/// The name of the span event an SDK records for an exception.
pub const EXCEPTION_EVENT: &str = "exception";
/// HTTP response status code.
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// gRPC status code (current convention).
pub const RPC_GRPC_STATUS_CODE: &str = "rpc.grpc.status_code";
/// RPC status code (newer convention).
pub const RPC_STATUS_CODE: &str = "rpc.status_code";
/// RPC status of the newest conventions: a code's name (`DEADLINE_EXCEEDED`) or its number.
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// The class of error.
pub const ERROR_TYPE: &str = "error.type";
/// An exception event's type (`error.type` when the span sets none).
pub const EXCEPTION_TYPE: &str = "exception.type";
/// An exception event's message: read for what it says of the failure's cause.
pub const EXCEPTION_MESSAGE: &str = "exception.message";

/// The keys that name a call's callee when no hop of it is in the chain (a database, a
/// third-party API, a service without tracing), in the contract's order: the first present wins.
/// A URL's key names the callee by the URL's host, as `server.address` would have: stock HTTP
/// clients of the older conventions (Python's `requests`) set only `http.url`.
pub const CALLEE_NAME_KEYS: [&str; 7] = [
    "peer.service",
    "server.address",
    "net.peer.name",
    "url.full",
    "http.url",
    "db.system.name",
    "db.system",
];

/// Values of `budget.source`: the carrier a budget was read from.
pub mod source {
    // A built-in carrier's source is its header's name: one constant, in `carrier`.
    // The other values belong to `BudgetSource`, which lives beside the carriers.
    pub use crate::carrier::{
        CONNECT_TIMEOUT_MS, GRPC_TIMEOUT, SOURCE_DEFAULT as DEFAULT,
        SOURCE_HEADER_PREFIX as HEADER_PREFIX, SOURCE_INVALID as INVALID, SOURCE_NONE as NONE,
        X_BUDGET_MS, X_ENVOY_EXPECTED_RQ_TIMEOUT_MS, X_REQUEST_DEADLINE,
    };
}

/// Values of `budget.outcome`.
pub mod outcome {
    /// The work or call completed.
    pub const OK: &str = "ok";
    /// 503: the queue was full.
    pub const SHED_FULL: &str = "shed_full";
    /// 504: expired before work started.
    pub const SHED_EXPIRED: &str = "shed_expired";
    /// The deadline passed while working or waiting.
    pub const DEADLINE_EXCEEDED: &str = "deadline_exceeded";
    /// The caller went away.
    pub const CANCELLED: &str = "cancelled";
    /// Any other failure.
    pub const ERROR: &str = "error";
    /// CLIENT only: the call was not made, no budget left.
    pub const REFUSED: &str = "refused";
}
