//! Helpers for the library tests: an in-process "network" that routes a `BudgetClient`'s
//! requests to axum routers by host name (so paused time covers whole chains), requests with
//! budget headers, and small recorders.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use deadline_budget::BudgetClient;
use deadline_budget::client::BoxError;
use http_body_util::BodyExt;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

/// Makes `subscriber` this thread's default until the guard drops, so that only this test's
/// spans reach it. While a single dispatcher is registered, tracing-core (0.1.36) computes a
/// new callsite's interest from the registering thread's default alone, without its lock: a
/// callsite of the library first hit by a test running without a subscriber would be cached as
/// "never", and this test's spans of it lost (2 runs in 60 lost them). A second dispatcher kept
/// for the whole process makes every registration ask every dispatcher, under the lock.
pub fn record_on_this_thread(
    subscriber: impl tracing::Subscriber + Send + Sync + 'static,
) -> tracing::subscriber::DefaultGuard {
    static KEEP: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    KEEP.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    tracing::subscriber::set_default(subscriber)
}

/// A client transport that never touches a socket.
pub type InProcess = BoxCloneSyncService<reqwest::Request, reqwest::Response, BoxError>;

/// A `BudgetClient` whose requests to `http://HOST/...` are served by the router named HOST.
#[track_caller]
pub fn in_process(hosts: Vec<(&'static str, Router)>) -> BudgetClient<InProcess> {
    let hosts: Arc<HashMap<&'static str, Router>> = Arc::new(hosts.into_iter().collect());
    let service = tower::service_fn(move |request: reqwest::Request| {
        let hosts = Arc::clone(&hosts);
        async move {
            let host = request.url().host_str().unwrap_or_default().to_owned();
            let router = hosts
                .get(host.as_str())
                .cloned()
                .ok_or_else(|| format!("no router for host {host}"))?;
            let request: http::Request<reqwest::Body> = request.try_into()?;
            let response = router.oneshot(request).await?;
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await?.to_bytes();
            Ok::<_, BoxError>(reqwest::Response::from(http::Response::from_parts(
                parts, bytes,
            )))
        }
    });
    BudgetClient::with_service(BoxCloneSyncService::new(service))
}

/// A GET request to `path` with the given headers.
#[track_caller]
pub fn get(path: &str, headers: &[(&str, &str)]) -> http::Request<Body> {
    let mut builder = http::Request::get(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.body(Body::empty()).unwrap()
}

/// The body of a response as text.
pub async fn text(response: http::Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A shared log of what handlers saw.
#[derive(Clone, Debug, Default)]
pub struct Log<T>(Arc<Mutex<Vec<T>>>);

impl<T: Clone> Log<T> {
    /// Append one entry.
    pub fn push(&self, item: T) {
        self.0.lock().unwrap().push(item);
    }
    /// Everything so far.
    pub fn all(&self) -> Vec<T> {
        self.0.lock().unwrap().clone()
    }
    /// How many entries so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// Milliseconds as a `Duration`.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Yield to the runtime until `done()` holds; a bounded number of turns (paused time makes
/// every turn instantaneous).
pub async fn settle(mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached after 1000 turns");
}
