//! GETs on Jaeger's query API: hyper's HTTP/1.1 client over plain TCP or tokio-rustls (ring),
//! one connection kept open and used again, a bearer token when given (`--jaeger-token-file`),
//! the system's roots or `--jaeger-ca` for an https URL. Every failure is a [`JaegerError`]
//! naming the URL.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

use super::JaegerError;
use crate::ingest::receive::auth::BearerToken;

/// How long a connection may take to open (TCP and TLS).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one answer may take, whole (a search of many traces is one answer).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest answer read, after decompression.
pub const MAX_ANSWER_BYTES: usize = 1 << 30;

/// Where the query API is: `--jaeger URL`.
#[derive(Clone, Debug)]
pub struct Base {
    /// The URL as given, without a trailing `/`: the start of every link and message.
    pub url: String,
    tls: bool,
    host: String,
    port: u16,
    /// The path the API sits under (`/jaeger` behind a proxy), without a trailing `/`.
    path: String,
    /// The `Host` header.
    authority: String,
}

impl Base {
    /// Reads `--jaeger`: `http://HOST:PORT` or `https://...`, perhaps with a path the query
    /// API sits under; no query string.
    pub fn parse(url: &str) -> Result<Base, String> {
        let example = "e.g. http://127.0.0.1:16686 (the query service's HTTP port)";
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("{url:?} is not a URL ({e}): {example}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "{url:?} must start with http:// or https://: {example}"
                ));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("{url:?} names no host: {example}"))?;
        if authority.as_str().contains('@') {
            return Err(format!(
                "{url:?} holds credentials: give a token with --jaeger-token-file instead"
            ));
        }
        if uri.query().is_some() || url.contains('#') {
            return Err(format!(
                "{url:?} holds a query or fragment: give the API's address alone, {example}"
            ));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Base {
            url: url.trim_end_matches('/').to_owned(),
            tls,
            host,
            port,
            path: uri.path().trim_end_matches('/').to_owned(),
            authority: authority.as_str().to_owned(),
        })
    }
}

/// An answer: its status and its body, decompressed.
#[derive(Debug)]
pub struct Answer {
    pub status: http::StatusCode,
    pub body: Bytes,
}

/// The client: see the module doc.
pub struct Client {
    base: Base,
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    authorization: Option<http::HeaderValue>,
    connection: Option<SendRequest<Empty<Bytes>>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never printed.
        f.debug_struct("Client")
            .field("base", &self.base.url)
            .field("tls", &self.tls.is_some())
            .field("token", &self.authorization.is_some())
            .finish()
    }
}

impl Client {
    /// A client of `base`, presenting the token in `token_file`, trusting `ca` (PEM) or else
    /// the system's roots for https. The files are read now: a missing or bad one is an error.
    pub fn new(base: Base, token_file: Option<&Path>, ca: Option<&Path>) -> anyhow::Result<Self> {
        let authorization = match token_file {
            Some(path) => {
                let loaded = BearerToken::load_for(path, "--jaeger-token-file")?;
                Some(loaded.token.authorization().ok_or_else(|| {
                    anyhow::anyhow!(
                        "the token in {} (--jaeger-token-file) cannot be sent in a header",
                        path.display()
                    )
                })?)
            }
            None => None,
        };
        let tls = if base.tls {
            let roots = crate::ingest::receive::tls::client_roots(
                ca,
                "--jaeger-ca",
                "an https:// --jaeger URL",
                "Jaeger's",
            )?;
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| anyhow::anyhow!("the TLS provider offers no protocol version: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let name = ServerName::try_from(base.host.clone())
                .map_err(|e| anyhow::anyhow!("{} has no valid host name for TLS: {e}", base.url))?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
        } else {
            if ca.is_some() {
                anyhow::bail!(
                    "--jaeger-ca is for an https:// URL; {} is plain http",
                    base.url
                );
            }
            None
        };
        Ok(Client {
            base,
            tls,
            authorization,
            connection: None,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &Base {
        &self.base
    }

    /// The URL of `path_and_query` (from `/api/...`), as messages name it.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.base.url)
    }

    /// GET `path_and_query` under the base path; the answer whatever its status.
    pub async fn get(&mut self, path_and_query: &str) -> Result<Answer, JaegerError> {
        let url = self.url(path_and_query);
        match tokio::time::timeout(ANSWER_TIMEOUT, self.get_once(path_and_query, &url)).await {
            Ok(answer) => answer,
            Err(_) => {
                self.connection = None;
                Err(JaegerError::Timeout { url })
            }
        }
    }

    async fn get_once(&mut self, path_and_query: &str, url: &str) -> Result<Answer, JaegerError> {
        // A connection Jaeger closed since (idle, or after an error) is opened again, once.
        let reused = self.connection.as_ref().is_some_and(|c| !c.is_closed());
        let mut sender = match self.connection.take().filter(|_| reused) {
            Some(sender) => sender,
            None => self.connect(url).await?,
        };
        let request = self.request(path_and_query, url)?;
        let response =
            match sender.send_request(request).await {
                Ok(response) => response,
                Err(_) if reused => {
                    let mut fresh = self.connect(url).await?;
                    let request = self.request(path_and_query, url)?;
                    let response = fresh.send_request(request).await.map_err(|e| {
                        JaegerError::Unreachable {
                            url: url.to_owned(),
                            reason: e.to_string(),
                        }
                    })?;
                    sender = fresh;
                    response
                }
                Err(e) => {
                    return Err(JaegerError::Unreachable {
                        url: url.to_owned(),
                        reason: e.to_string(),
                    });
                }
            };
        let (parts, body) = response.into_parts();
        let gzip = parts
            .headers
            .get(http::header::CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let body = Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| JaegerError::Unreachable {
                url: url.to_owned(),
                reason: format!(
                    "the answer broke off or passed {} MiB: {e}",
                    MAX_ANSWER_BYTES >> 20
                ),
            })?
            .to_bytes();
        let body = if gzip { gunzip(&body, url)? } else { body };
        self.connection = Some(sender);
        Ok(Answer {
            status: parts.status,
            body,
        })
    }

    fn request(
        &self,
        path_and_query: &str,
        url: &str,
    ) -> Result<http::Request<Empty<Bytes>>, JaegerError> {
        let mut request = http::Request::get(format!("{}{path_and_query}", self.base.path))
            .header(http::header::HOST, &self.base.authority)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::ACCEPT_ENCODING, "gzip")
            .header(
                http::header::USER_AGENT,
                concat!("budget-top/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(authorization) = &self.authorization {
            request = request.header(http::header::AUTHORIZATION, authorization.clone());
        }
        request
            .body(Empty::new())
            .map_err(|e| JaegerError::Unreachable {
                url: url.to_owned(),
                reason: format!("the request cannot be made: {e}"),
            })
    }

    /// A new connection: TCP, then TLS when the URL is https, then HTTP/1.1's handshake.
    async fn connect(&self, url: &str) -> Result<SendRequest<Empty<Bytes>>, JaegerError> {
        let unreachable = |reason: String| JaegerError::Unreachable {
            url: url.to_owned(),
            reason,
        };
        let address = (self.base.host.as_str(), self.base.port);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address))
            .await
            .map_err(|_| unreachable(format!("no connection within {CONNECT_TIMEOUT:?}")))?
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(TokioIo::new(tcp), url).await,
            Some((connector, name)) => {
                let stream =
                    tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name.clone(), tcp))
                        .await
                        .map_err(|_| {
                            unreachable(format!("no TLS handshake within {CONNECT_TIMEOUT:?}"))
                        })?
                        .map_err(|e| JaegerError::Tls {
                            url: url.to_owned(),
                            reason: e.to_string(),
                        })?;
                handshake(TokioIo::new(stream), url).await
            }
        }
    }
}

async fn handshake<T>(io: TokioIo<T>, url: &str) -> Result<SendRequest<Empty<Bytes>>, JaegerError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| JaegerError::Unreachable {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
    // The connection's own task: it ends when the sender is dropped or Jaeger closes it.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// A gzip body inflated, at most [`MAX_ANSWER_BYTES`].
fn gunzip(body: &[u8], url: &str) -> Result<Bytes, JaegerError> {
    use std::io::Read as _;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(MAX_ANSWER_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| JaegerError::NotOtlp {
            url: url.to_owned(),
            reason: format!("its gzip body does not inflate: {e}"),
        })?;
    if out.len() > MAX_ANSWER_BYTES {
        return Err(JaegerError::Unreachable {
            url: url.to_owned(),
            reason: format!("the answer passed {} MiB", MAX_ANSWER_BYTES >> 20),
        });
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_a_scheme_a_host_and_perhaps_a_path() {
        let base = Base::parse("http://127.0.0.1:16686/").unwrap();
        assert_eq!(
            (
                base.url.as_str(),
                base.host.as_str(),
                base.port,
                base.path.as_str(),
                base.tls
            ),
            ("http://127.0.0.1:16686", "127.0.0.1", 16686, "", false)
        );
        let base = Base::parse("https://tracing.example/jaeger").unwrap();
        assert_eq!(
            (base.port, base.path.as_str(), base.tls),
            (443, "/jaeger", true)
        );
        let base = Base::parse("http://[::1]:16686").unwrap();
        assert_eq!(base.host, "::1");
        for bad in [
            "127.0.0.1:16686",
            "ftp://x",
            "http://",
            "http://u:p@host:16686",
            "http://host:16686/?x=1",
            "not a url",
        ] {
            assert!(Base::parse(bad).is_err(), "{bad}");
        }
    }
}
