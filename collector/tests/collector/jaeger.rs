//! A real Jaeger v2 for the tests (`scripts/jaeger.sh`, built once and cached): memory storage,
//! its OTLP receiver and its query API on loopback ports picked free (`tests/jaeger/config.yaml`).
//! The tests that read traces from Jaeger or forward chains to it start one each. Skips (loudly)
//! only when there is no `go` at all; a failed build fails the test.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::otelcol_tier1::{Collector, free_port};
use crate::support::go_tool_or_skip;

/// `scripts/jaeger.sh`'s binary, or `None` (said on stderr) without Go.
pub fn jaeger_or_skip(test: &str) -> Option<String> {
    go_tool_or_skip(test, "Jaeger", Duration::from_secs(1800))
}

/// A running Jaeger: where to send OTLP, and its query API.
pub struct Jaeger {
    collector: Collector,
    /// `http://127.0.0.1:PORT`: the query API (`/api/v3/...`) and the UI's links.
    pub query: String,
    pub otlp_grpc: SocketAddr,
    /// The query API's port.
    pub query_port: u16,
    pub otlp_http: SocketAddr,
    ports: Ports,
}

/// The ports a Jaeger listens on: kept to start it again on the same ones (an outage).
#[derive(Clone, Copy, Debug)]
pub struct Ports {
    query: SocketAddr,
    query_grpc: SocketAddr,
    otlp_grpc: SocketAddr,
    otlp_http: SocketAddr,
}

impl Ports {
    /// Four free loopback ports.
    pub fn free() -> Ports {
        Ports {
            query: free_port(),
            query_grpc: free_port(),
            otlp_grpc: free_port(),
            otlp_http: free_port(),
        }
    }
}

/// TLS on Jaeger's OTLP receivers (`tests/jaeger/tls.yaml`): its certificate and key, and the
/// CA its clients must present a certificate of (mTLS), when given.
#[allow(dead_code)] // the forwarding tests
pub struct JaegerTls<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
    pub client_ca: Option<&'a Path>,
}

impl Jaeger {
    /// Starts `bin` with the tests' config and waits until it is ready.
    #[track_caller]
    pub fn start(bin: &str) -> Jaeger {
        Self::start_with(bin, None)
    }

    /// The same with `overlay` merged over the tests' config (as the Collector merges its
    /// `--config` files), e.g. TLS on the query API.
    #[track_caller]
    pub fn start_with(bin: &str, overlay: Option<&Path>) -> Jaeger {
        Self::launch(bin, Ports::free(), None, overlay)
    }

    /// The same on `ports`, with TLS on its OTLP receivers when `tls` is given.
    #[track_caller]
    pub fn start_on(bin: &str, ports: Ports, tls: Option<&JaegerTls<'_>>) -> Jaeger {
        Self::launch(bin, ports, tls, None)
    }

    #[track_caller]
    fn launch(
        bin: &str,
        ports: Ports,
        tls: Option<&JaegerTls<'_>>,
        overlay: Option<&Path>,
    ) -> Jaeger {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jaeger");
        let mut env = vec![
            ("JAEGER_QUERY_HTTP_PORT", ports.query.port().to_string()),
            (
                "JAEGER_QUERY_GRPC_PORT",
                ports.query_grpc.port().to_string(),
            ),
            ("JAEGER_OTLP_GRPC_PORT", ports.otlp_grpc.port().to_string()),
            ("JAEGER_OTLP_HTTP_PORT", ports.otlp_http.port().to_string()),
            ("JAEGER_MAX_TRACES", "1000000".to_string()),
        ];
        let mut configs = vec![dir.join("config.yaml")];
        if let Some(tls) = tls {
            env.push(("JAEGER_TLS_CERT", tls.cert.display().to_string()));
            env.push(("JAEGER_TLS_KEY", tls.key.display().to_string()));
            configs.push(dir.join("tls.yaml"));
            if let Some(ca) = tls.client_ca {
                env.push(("JAEGER_CLIENT_CA", ca.display().to_string()));
                configs.push(dir.join("mtls.yaml"));
            }
        }
        configs.extend(overlay.map(Path::to_path_buf));
        let configs: Vec<&Path> = configs.iter().map(|p| p.as_path()).collect();
        let collector = Collector::start(bin, &configs, &env);
        Jaeger {
            collector,
            query: format!("http://{}", ports.query),
            query_port: ports.query.port(),
            otlp_grpc: ports.otlp_grpc,
            otlp_http: ports.otlp_http,
            ports,
        }
    }

    /// Its ports, to start it again on them.
    #[allow(dead_code)] // the forwarding tests
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// GET `path` (e.g. `/api/v3/services`) on the query API: the status and the body.
    pub fn get(&self, path: &str) -> (u16, String) {
        let runtime = crate::support::runtime();
        runtime.block_on(async {
            let response = reqwest::get(format!("{}{path}", self.query)).await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap())
        })
    }

    /// POSTs one OTLP/JSON export request to the OTLP/HTTP receiver; it must be accepted.
    #[track_caller]
    pub fn send(&self, line: &str) {
        let runtime = crate::support::runtime();
        let status = runtime.block_on(async {
            reqwest::Client::new()
                .post(format!("http://{}/v1/traces", self.otlp_http))
                .header("content-type", "application/json")
                .body(line.to_owned())
                .send()
                .await
                .unwrap()
                .status()
        });
        assert!(status.is_success(), "Jaeger's OTLP/HTTP answered {status}");
    }

    /// Waits until a search of `service` over all time finds `traces` traces (spans are
    /// stored a batch later than sent).
    #[track_caller]
    pub fn wait_for_traces(&self, service: &str, traces: usize, limit: Duration) {
        let until = Instant::now() + limit;
        loop {
            let (status, body) = self.get(&format!(
                "/api/v3/traces?query.service_name={service}&query.start_time_min=2000-01-01T00:00:00Z&query.start_time_max=2100-01-01T00:00:00Z&query.num_traces=100000&query.raw_traces=true"
            ));
            let mut ids = std::collections::HashSet::new();
            if status == 200 {
                let answer: Json = serde_json::from_str(&body).unwrap_or(Json::Null);
                for resource in answer["result"]["resourceSpans"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                        for span in scope["spans"].as_array().into_iter().flatten() {
                            ids.insert(span["traceId"].as_str().unwrap_or_default().to_owned());
                        }
                    }
                }
            }
            if ids.len() >= traces {
                return;
            }
            assert!(
                Instant::now() < until,
                "Jaeger did not hold {traces} traces of {service} within {limit:?}: {} ({status})",
                ids.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the query API lists `services` (spans are stored a batch later than sent).
    #[track_caller]
    pub fn wait_for_services(&self, services: &[&str], limit: Duration) {
        let until = Instant::now() + limit;
        loop {
            let (status, body) = self.get("/api/v3/services");
            let listed: Json = serde_json::from_str(&body).unwrap_or(Json::Null);
            let names = listed["services"].as_array().cloned().unwrap_or_default();
            if status == 200 && services.iter().all(|s| names.iter().any(|n| n == s)) {
                return;
            }
            assert!(
                Instant::now() < until,
                "Jaeger did not list {services:?} within {limit:?}: {status} {body}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, a clean exit, and everything it logged.
    #[track_caller]
    pub fn stop(self) -> String {
        self.collector.stop()
    }
}

/// The harness itself: a span sent to Jaeger's OTLP/HTTP port comes back from its query API as
/// OTLP JSON (`{"result": {"resourceSpans": ...}}`).
#[test]
fn jaeger_stores_what_it_is_sent_and_answers_it_as_otlp_json() {
    let Some(bin) = jaeger_or_skip("jaeger_stores_what_it_is_sent_and_answers_it_as_otlp_json")
    else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let request = crate::support::reset_chain(7);
    let line = crate::support::json_line(&request);
    let runtime = crate::support::runtime();
    let status = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{}/v1/traces", jaeger.otlp_http))
            .header("content-type", "application/json")
            .body(line)
            .send()
            .await
            .unwrap()
            .status()
    });
    assert!(status.is_success(), "Jaeger's OTLP/HTTP answered {status}");
    jaeger.wait_for_services(&["orders"], Duration::from_secs(30));
    let trace_id = hex(&request.resource_spans[0].scope_spans[0].spans[0].trace_id);
    let (status, body) = jaeger.get(&format!("/api/v3/traces/{trace_id}"));
    assert_eq!(status, 200, "{body}");
    let answer: Json = serde_json::from_str(&body).unwrap();
    let spans: usize = answer["result"]["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().unwrap())
        .map(|s| s["spans"].as_array().unwrap().len())
        .sum();
    let sent: usize = request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len())
        .sum();
    assert_eq!(spans, sent, "{body}");
    jaeger.stop();
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
