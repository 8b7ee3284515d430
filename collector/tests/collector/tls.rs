//! Who may send (CONVENTIONS §7): `--tls-cert/--tls-key` and `--client-ca` on real sockets,
//! with certificates made here (rcgen, on ring like the receivers). Both receivers serve TLS
//! clients; plain clients, handshakes that never finish and (under mTLS) clients without a
//! certificate the CA signed are dropped without holding a slot; bad files are refused at start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use budget_top::ingest::receive::tls::TlsFiles;
use budget_top::ingest::{self, Ingest, IngestConfig};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::support::{RECEIVERS_ON_PORT_0, listen, reset_chain, run, scratch};

/// A CA and what it signed, written as PEM files.
struct Pki {
    dir: PathBuf,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client: (String, String),
    stranger: (String, String),
}

pub fn ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// (certificate PEM, key PEM) signed by `issuer`.
pub fn issue(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    expired: bool,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn pki(name: &str) -> Pki {
    let dir = scratch(name);
    let authority = ca();
    let (server_cert, server_key) = issue(&authority, &["localhost"], false);
    let client = issue(&authority, &["client"], false);
    let stranger = issue(&ca(), &["client"], false);
    let write = |file: &str, text: &str| {
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    };
    Pki {
        ca: write("ca.pem", &authority.pem()),
        server_cert: write("server.pem", &server_cert),
        server_key: write("server.key", &server_key),
        client,
        stranger,
        dir,
    }
}

impl Pki {
    fn files(&self, client_ca: bool) -> TlsFiles {
        TlsFiles {
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
            client_ca: client_ca.then(|| self.ca.clone()),
        }
    }

    /// A client that trusts the CA, presenting `identity` when given, offering `alpn`.
    fn client(
        &self,
        identity: Option<&(String, String)>,
        alpn: &[&[u8]],
    ) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&self.ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(
                    vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

async fn start(files: TlsFiles, header_timeout: Duration) -> Ingest {
    ingest::start(IngestConfig {
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        http: Some("127.0.0.1:0".parse().unwrap()),
        tls: Some(files),
        header_timeout,
        max_connections: 4,
        ..IngestConfig::default()
    })
    .await
    .unwrap()
}

/// POST /v1/traces over TLS (HTTP/1.1); the status line, or the error of the way there.
async fn post_tls(
    ingest: &Ingest,
    connector: &tokio_rustls::TlsConnector,
    t: u8,
) -> std::io::Result<String> {
    let tcp = tokio::net::TcpStream::connect(ingest.http_addr.unwrap()).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    let body = reset_chain(t).encode_to_vec();
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-protobuf\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await?;
    tls.write_all(&body).await?;
    let mut answer = Vec::new();
    // Under TLS 1.3 a refused client certificate shows on the first read.
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    match answer.lines().next() {
        Some(line) if !line.is_empty() => Ok(line.to_string()),
        _ => Err(std::io::Error::other("no answer")),
    }
}

/// The gRPC client over TLS (ALPN h2).
async fn grpc_tls(
    ingest: &Ingest,
    connector: tokio_rustls::TlsConnector,
) -> Result<TraceServiceClient<tonic::transport::Channel>, tonic::transport::Error> {
    let addr = ingest.grpc_addr.unwrap();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_uri| {
            let connector = connector.clone();
            async move {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                let name = ServerName::try_from("localhost").unwrap();
                let tls = connector.connect(name, tcp).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
            }
        }))
        .await?;
    Ok(TraceServiceClient::new(channel))
}

async fn next_spans(ingest: &mut Ingest) -> usize {
    tokio::time::timeout(Duration::from_secs(10), ingest.receiver.recv())
        .await
        .unwrap()
        .unwrap()
        .spans
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_receivers_serve_tls_clients_and_drop_plain_ones_without_holding_a_slot() {
    let pki = pki("tls_serve");
    let mut ingest = start(pki.files(false), Duration::from_secs(10)).await;
    assert_eq!(ingest.protection(), "TLS, no token");
    let http1 = pki.client(None, &[]);
    assert_eq!(
        post_tls(&ingest, &http1, 1).await.unwrap(),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(next_spans(&mut ingest).await, 5);
    let mut grpc = grpc_tls(&ingest, pki.client(None, &[b"h2"])).await.unwrap();
    grpc.export(reset_chain(2)).await.unwrap();
    assert_eq!(next_spans(&mut ingest).await, 5);

    // Plain clients on the TLS ports, more of them than there are slots: each fails cleanly.
    let body = reset_chain(3).encode_to_vec();
    for _ in 0..6 {
        let plain = reqwest::Client::new()
            .post(format!("http://{}/v1/traces", ingest.http_addr.unwrap()))
            .header("content-type", "application/x-protobuf")
            .body(body.clone())
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        assert!(plain.is_err(), "{plain:?}");
        let plain_grpc = async {
            TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
                .await?
                .export(reset_chain(3))
                .await
                .map_err(Into::into)
        };
        let plain_grpc: Result<_, Box<dyn std::error::Error>> =
            tokio::time::timeout(Duration::from_secs(10), plain_grpc)
                .await
                .unwrap();
        assert!(plain_grpc.is_err());
    }
    // Still served: the plain connections gave their slots back.
    assert_eq!(
        post_tls(&ingest, &http1, 4).await.unwrap(),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(next_spans(&mut ingest).await, 5);
    grpc.export(reset_chain(5)).await.unwrap();
    assert_eq!(next_spans(&mut ingest).await, 5);
    let counts = ingest.stats.snapshot();
    assert_eq!(counts.requests_accepted, 4);
    assert_eq!(counts.spans_accepted, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_that_never_finishes_is_cut_off() {
    let pki = pki("tls_slow_handshake");
    let mut ingest = start(pki.files(false), Duration::from_millis(500)).await;
    for addr in [ingest.http_addr.unwrap(), ingest.grpc_addr.unwrap()] {
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Half a ClientHello's record header, then nothing.
        silent.write_all(&[0x16, 0x03]).await.unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
            .await
            .expect("the server gave up on the handshake");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    let client = pki.client(None, &[]);
    assert_eq!(
        post_tls(&ingest, &client, 1).await.unwrap(),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(next_spans(&mut ingest).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_mtls_only_clients_the_ca_signed_are_served() {
    let pki = pki("tls_mtls");
    let mut ingest = start(pki.files(true), Duration::from_secs(10)).await;
    assert_eq!(ingest.protection(), "mTLS, no token");
    let anonymous = pki.client(None, &[]);
    assert!(post_tls(&ingest, &anonymous, 1).await.is_err());
    let stranger = pki.client(Some(&pki.stranger), &[]);
    assert!(post_tls(&ingest, &stranger, 1).await.is_err());
    let known = pki.client(Some(&pki.client), &[]);
    assert_eq!(
        post_tls(&ingest, &known, 1).await.unwrap(),
        "HTTP/1.1 200 OK"
    );
    assert_eq!(next_spans(&mut ingest).await, 5);
    // gRPC too.
    let refused = async {
        grpc_tls(&ingest, pki.client(None, &[b"h2"]))
            .await
            .map_err(|e| e.to_string())?
            .export(reset_chain(2))
            .await
            .map_err(|e| e.to_string())
    };
    assert!(refused.await.is_err());
    let mut grpc = grpc_tls(&ingest, pki.client(Some(&pki.client), &[b"h2"]))
        .await
        .unwrap();
    grpc.export(reset_chain(3)).await.unwrap();
    assert_eq!(next_spans(&mut ingest).await, 5);
    assert_eq!(ingest.stats.snapshot().requests_accepted, 2);
}

#[tokio::test]
async fn bad_tls_files_are_refused_at_start_naming_them() {
    let pki = pki("tls_bad_files");
    let authority = ca();
    let (expired_cert, expired_key) = issue(&authority, &["localhost"], true);
    let (_, other_key) = issue(&authority, &["localhost"], false);
    let write = |file: &str, text: &str| {
        let path = pki.dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    };
    let expired = write("expired.pem", &expired_cert);
    let expired_key = write("expired.key", &expired_key);
    let other_key = write("other.key", &other_key);
    let garbage = write("garbage.pem", "not a certificate\n");
    let missing = pki.dir.join("missing.pem");
    let good = pki.files(false);
    let cases = [
        (
            TlsFiles {
                cert: missing.clone(),
                ..good.clone()
            },
            "missing.pem",
        ),
        (
            TlsFiles {
                cert: garbage.clone(),
                ..good.clone()
            },
            "holds no PEM certificate",
        ),
        (
            TlsFiles {
                key: garbage.clone(),
                ..good.clone()
            },
            "cannot read a private key from",
        ),
        (
            TlsFiles {
                key: other_key,
                ..good.clone()
            },
            "does not fit the certificate",
        ),
        (
            TlsFiles {
                cert: expired.clone(),
                key: expired_key.clone(),
                client_ca: None,
            },
            "expired on 2021-01-01",
        ),
        (
            TlsFiles {
                client_ca: Some(missing.clone()),
                ..good.clone()
            },
            "(--client-ca)",
        ),
    ];
    for (files, says) in cases {
        let error = ingest::start(IngestConfig {
            grpc: Some("127.0.0.1:0".parse().unwrap()),
            http: Some("127.0.0.1:0".parse().unwrap()),
            tls: Some(files.clone()),
            ..IngestConfig::default()
        })
        .await
        .unwrap_err();
        let error = format!("{error:#}");
        assert!(error.contains(says), "{files:?}: {error}");
    }
    // The command line: exit 2 and the sentence.
    let (cert, key) = (expired.to_string_lossy(), expired_key.to_string_lossy());
    let tls = ["--for", "1s", "--tls-cert", &cert, "--tls-key", &key];
    let out = run(&[&["check"][..], &RECEIVERS_ON_PORT_0, &tls].concat());
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("expired on 2021-01-01"), "{out:?}");
    // --tls-key is needed with --tls-cert.
    let out = run(&["check", "--tls-cert", &expired.to_string_lossy()]);
    assert_eq!(out.code, Some(2), "{out:?}");
}

#[test]
fn check_says_its_receivers_speak_tls() {
    let pki = pki("tls_check_line");
    let check = listen(&[
        "check",
        "--for",
        "300ms",
        "--tls-cert",
        &pki.server_cert.to_string_lossy(),
        "--tls-key",
        &pki.server_key.to_string_lossy(),
        "--client-ca",
        &pki.ca.to_string_lossy(),
    ]);
    let finished = check.wait(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    assert!(
        finished.stderr.contains("receivers: mTLS, no token"),
        "{finished:?}"
    );
}

/// GET `path` over TLS (HTTP/1.1) at `addr`; the whole answer, or the error of the way there.
async fn get_tls(
    addr: std::net::SocketAddr,
    connector: &tokio_rustls::TlsConnector,
    path: &str,
) -> std::io::Result<String> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await?;
    let head = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    tls.write_all(head.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// `serve`'s API is served with the receivers' TLS configuration: a TLS client gets the probes
/// and the metrics, a plain one gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_speaks_the_receivers_tls() {
    let pki = pki("tls_api");
    let config = IngestConfig {
        tls: Some(pki.files(false)),
        ..IngestConfig::default()
    };
    let stats = Arc::new(ingest::IngestStats::default());
    let api = budget_top::api::start("127.0.0.1:0".parse().unwrap(), &config, stats, 10, None)
        .await
        .unwrap();
    api.readiness.ready();
    let addr = api.addr;
    let (mut asks, mut answers) = (api.asks, api.answers);
    // The loop that owns the store, as `serve` runs it.
    tokio::spawn(async move {
        let store = budget_top::store::Store::new(10);
        while let Some(ask) = asks.recv().await {
            answers.answer(ask, &store);
        }
    });
    let client = pki.client(None, &[b"http/1.1"]);
    let ready = get_tls(addr, &client, "/readyz").await.unwrap();
    assert!(ready.starts_with("HTTP/1.1 200 OK"), "{ready}");
    let metrics = get_tls(addr, &client, "/metrics").await.unwrap();
    assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
    assert!(
        metrics.contains("budget_top_spans_total{result=\"accepted\"} 0"),
        "{metrics}"
    );
    // Plain HTTP to the TLS port: no answer in plain text.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), plain.read_to_end(&mut answer)).await;
    assert!(
        !String::from_utf8_lossy(&answer).contains("200 OK"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// `budget-demo load --tls-ca --bearer-token-file` (its flood, as the command runs it) delivers
/// over TLS, gRPC and HTTP, to `budget-top serve --tls-cert --tls-key --bearer-token-file`:
/// every span it was told was accepted is in the final report. Without the token nothing is
/// accepted; trusting another CA, it cannot connect.
#[test]
fn budget_demo_load_delivers_over_tls_with_a_token_to_serve() {
    use budget_demo::otlp_load::{FloodPlan, Pacing, Security, Target, flood_with};
    let pki = pki("tls_load");
    let token = pki.dir.join("token");
    std::fs::write(&token, "tok3n\n").unwrap();
    let report = pki.dir.join("report.json");
    let serving = crate::support::serve(&[
        "--tls-cert",
        pki.server_cert.to_str().unwrap(),
        "--tls-key",
        pki.server_key.to_str().unwrap(),
        "--bearer-token-file",
        token.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let plan = |target| FloodPlan {
        target,
        spans: 2048,
        batch: 512,
        depth: 4,
        connections: 2,
        rate: None,
        max_time: Some(Duration::from_secs(60)),
        pacing: Pacing::Closed,
    };
    let trusted = Security::from_files(Some(&pki.ca), Some(&token)).unwrap();
    let no_token = Security::from_files(Some(&pki.ca), None).unwrap();
    let stranger_ca = pki.dir.join("stranger-ca.pem");
    std::fs::write(&stranger_ca, ca().pem()).unwrap();
    let stranger = Security::from_files(Some(&stranger_ca), Some(&token)).unwrap();
    let mut sent = 0;
    crate::support::runtime().block_on(async {
        for target in [Target::Grpc(serving.grpc), Target::Http(serving.http)] {
            let r = flood_with(plan(target), &trusted).await.unwrap();
            assert_eq!(
                (r.spans_sent, r.requests_failed, r.requests_throttled),
                (2048, 0, 0),
                "{target:?}: {r:?}"
            );
            sent += r.spans_sent;
            let r = flood_with(plan(target), &no_token).await.unwrap();
            assert_eq!(
                (r.spans_sent, r.requests_failed),
                (0, 4),
                "{target:?} without the token: {r:?}"
            );
            let refused = flood_with(plan(target), &stranger).await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("certificate")),
                "{target:?} trusting another CA: {refused:?}"
            );
        }
    });
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(written["ingest"]["spans_accepted"], sent, "{written}");
    assert_eq!(
        written["ingest"]["requests_unauthenticated"], 8,
        "{written}"
    );
    assert_eq!(written["summary"]["spans"], sent, "{written}");
}
