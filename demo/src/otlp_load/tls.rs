//! The load over TLS, with a bearer token ([`Security`]): rustls trusting the roots given with
//! `--tls-ca` (as the receivers, on ring), the handshake for gRPC and for hyper's HTTP client.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::FloodError;

/// The name the receiver's certificate must hold: the load only sends to this machine.
pub const TLS_SERVER_NAME: &str = "localhost";

/// How the load reaches a receiver that wants TLS or a token: [`flood_with`](super::flood_with).
#[derive(Clone, Default)]
pub struct Security {
    /// TLS, trusting these roots; `None`: plain TCP.
    pub(super) tls: Option<Arc<rustls::RootCertStore>>,
    /// `Bearer <token>`, sent with every request.
    pub(super) authorization: Option<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never printed.
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("token", &self.authorization.is_some())
            .finish()
    }
}

impl Security {
    /// TLS trusting the certificates in `ca` (PEM: the receiver's own certificate or the CA
    /// that signed it, which must name [`TLS_SERVER_NAME`]) when given, and the token in
    /// `token` (its trailing newline or CRLF trimmed, as budget-top reads it) when given.
    pub fn from_files(ca: Option<&Path>, token: Option<&Path>) -> Result<Self, FloodError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let tls = match ca {
            Some(path) => {
                let shown = path.display();
                let mut roots = rustls::RootCertStore::empty();
                let certificates = CertificateDer::pem_file_iter(path).map_err(|e| {
                    FloodError::Security(format!("cannot read {shown} (--tls-ca): {e}"))
                })?;
                for certificate in certificates {
                    let certificate = certificate.map_err(|e| {
                        FloodError::Security(format!("{shown} (--tls-ca) is not PEM: {e}"))
                    })?;
                    roots.add(certificate).map_err(|e| {
                        FloodError::Security(format!(
                            "{shown} (--tls-ca) holds a certificate rustls refuses: {e}"
                        ))
                    })?;
                }
                if roots.is_empty() {
                    return Err(FloodError::Security(format!(
                        "{shown} (--tls-ca) holds no certificate (PEM, -----BEGIN CERTIFICATE-----)"
                    )));
                }
                Some(Arc::new(roots))
            }
            None => None,
        };
        let authorization = match token {
            Some(path) => {
                let shown = path.display();
                let text = std::fs::read_to_string(path).map_err(|e| {
                    FloodError::Security(format!("cannot read {shown} (--bearer-token-file): {e}"))
                })?;
                let token = text
                    .strip_suffix('\n')
                    .map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
                if token.is_empty() {
                    return Err(FloodError::Security(format!(
                        "{shown} (--bearer-token-file) is empty"
                    )));
                }
                Some(format!("Bearer {token}"))
            }
            None => None,
        };
        Ok(Security { tls, authorization })
    }

    /// A TLS connector offering `alpn`, when TLS is asked for.
    pub(super) fn connector(&self, alpn: &[u8]) -> Option<tokio_rustls::TlsConnector> {
        let roots = self.tls.as_ref()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // The ring provider's defaults are always a valid set.
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?;
        let mut config = builder
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
    }
}

/// A TCP connection to `addr` and the TLS handshake over it.
pub(super) async fn dial(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> std::io::Result<hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>>
{
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name =
        rustls::pki_types::ServerName::try_from(TLS_SERVER_NAME).map_err(std::io::Error::other)?;
    let stream = tls.connect(name, tcp).await?;
    Ok(hyper_util::rt::TokioIo::new(stream))
}

/// Dials the receiver over TLS for hyper's pooled client (which asks with the request's URI:
/// the address is the load's own).
#[derive(Clone)]
pub(super) struct TlsDial {
    pub(super) addr: SocketAddr,
    pub(super) tls: tokio_rustls::TlsConnector,
}

impl tower::Service<http::Uri> for TlsDial {
    type Response = TlsIo;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<TlsIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let (addr, tls) = (self.addr, self.tls.clone());
        Box::pin(async move { dial(addr, &tls).await.map(TlsIo) })
    }
}

/// A TLS connection as hyper's client wants it.
pub(super) struct TlsIo(
    hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>,
);

impl hyper::rt::Read for TlsIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for TlsIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

impl hyper_util::client::legacy::connect::Connection for TlsIo {
    fn connected(&self) -> hyper_util::client::legacy::connect::Connected {
        hyper_util::client::legacy::connect::Connected::new()
    }
}
