//! The demo's gRPC hop: `antifraud` as a tonic service (`budget.demo.Antifraud/Check`, messages
//! of `demo/proto/antifraud.proto`), and the client pix-api calls it with.
//!
//! No `protoc` on the build machine: the messages are prost derives and the service is written
//! by hand the way `tonic-build` would generate it (a `NamedService` that hands each call to
//! `tonic::server::Grpc::unary` with a `ProstCodec`). The budget enters through the server's
//! `BudgetLayer` (from `grpc-timeout`) and leaves pix-api through `BudgetChannelLayer`.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use deadline_budget::{BudgetChannel, Deadline, HopBudget};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::server::NamedService;
use tonic_prost::ProstCodec;

use crate::hop::Hop;

/// The gRPC service name.
pub const SERVICE: &str = "budget.demo.Antifraud";
/// The one method's path.
pub const CHECK_PATH: &str = "/budget.demo.Antifraud/Check";

/// `CheckRequest`: one payment to check.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckRequest {
    /// The payment's id.
    #[prost(string, tag = "1")]
    pub payment_id: String,
    /// Its amount.
    #[prost(int64, tag = "2")]
    pub amount_cents: i64,
}

/// `CheckReply`: the verdict, and the budget antifraud had to reach it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CheckReply {
    /// Let the payment through.
    #[prost(bool, tag = "1")]
    pub approved: bool,
    /// Where antifraud's budget came from (`budget.source`).
    #[prost(string, tag = "2")]
    pub budget_source: String,
    /// The budget left when its work started, in ms; -1 without one.
    #[prost(int64, tag = "3")]
    pub budget_ms: i64,
}

/// The server side: each call does antifraud's local work under the budget it received.
#[derive(Clone, Debug)]
pub(crate) struct AntifraudServer {
    hop: Hop,
}

impl AntifraudServer {
    pub(crate) fn new(hop: Hop) -> Self {
        Self { hop }
    }

    async fn check(
        self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckReply>, tonic::Status> {
        let budget_source = request
            .extensions()
            .get::<HopBudget>()
            .map(|hop| hop.source.as_str().to_owned())
            .unwrap_or_default();
        let budget_ms = Deadline::current().map_or(-1, |d| d.remaining_ms());
        match self.hop.work().await {
            Ok(_) => Ok(tonic::Response::new(CheckReply {
                approved: true,
                budget_source,
                budget_ms,
            })),
            Err((StatusCode::GATEWAY_TIMEOUT, why)) => Err(tonic::Status::deadline_exceeded(why)),
            Err((_, why)) => Err(tonic::Status::internal(why)),
        }
    }
}

impl NamedService for AntifraudServer {
    const NAME: &'static str = SERVICE;
}

impl tower::Service<http::Request<tonic::body::Body>> for AntifraudServer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let server = self.clone();
        Box::pin(async move {
            if request.uri().path() != CHECK_PATH {
                return Ok(
                    tonic::Status::unimplemented(request.uri().path().to_owned()).into_http(),
                );
            }
            let mut grpc =
                tonic::server::Grpc::new(ProstCodec::<CheckReply, CheckRequest>::default());
            let check = tower::service_fn(move |r| server.clone().check(r));
            Ok(grpc.unary(check, request).await)
        })
    }
}

/// The client side, over a channel with the budget layer.
#[derive(Clone, Debug)]
pub(crate) struct AntifraudClient {
    grpc: tonic::client::Grpc<BudgetChannel<tonic::transport::Channel>>,
}

impl AntifraudClient {
    pub(crate) fn new(channel: BudgetChannel<tonic::transport::Channel>) -> Self {
        Self {
            grpc: tonic::client::Grpc::new(channel),
        }
    }

    /// One `Check` call; `request`'s extensions may carry the call's own `CallOptions`.
    pub(crate) async fn check(
        &mut self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<CheckReply, tonic::Status> {
        self.grpc
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        self.grpc
            .unary(
                request,
                PathAndQuery::from_static(CHECK_PATH),
                ProstCodec::<CheckRequest, CheckReply>::default(),
            )
            .await
            .map(tonic::Response::into_inner)
    }
}
