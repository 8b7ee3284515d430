//! Who may send (CONVENTIONS §7): `--tls-cert FILE --tls-key FILE` (PEM) on both receivers,
//! and `--client-ca FILE` (mTLS: every client must present a certificate it signed). rustls on
//! ring: no OpenSSL.
//!
//! Every file is read and checked when the receivers start (a missing or unreadable file, no
//! certificate or key in it, a key that is not the certificate's, a certificate expired or not
//! valid yet): refused with a sentence naming the file. Handshakes run beside the accept loop,
//! each within the header timeout, so a client that never finishes one (or speaks plain HTTP or
//! gRPC to the TLS port) is dropped and its connection slot freed without holding up others.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connections::{ConnectionTag, LimitedListener, LimitedStream};

/// The TLS files of the command line.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// `--tls-cert`: the server's certificate chain, PEM.
    pub cert: PathBuf,
    /// `--tls-key`: its private key, PEM.
    pub key: PathBuf,
    /// `--client-ca`: clients must present a certificate this CA signed.
    pub client_ca: Option<PathBuf>,
}

/// The server configurations built from [`TlsFiles`]: one per receiver, as their ALPN differ.
#[derive(Clone, Debug)]
pub(super) struct Tls {
    /// gRPC: HTTP/2 only.
    pub grpc: Arc<rustls::ServerConfig>,
    /// OTLP/HTTP: HTTP/2 or HTTP/1.1.
    pub http: Arc<rustls::ServerConfig>,
}

pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl Tls {
    /// Reads and checks every file (see the module doc).
    pub(super) fn load(files: &TlsFiles) -> anyhow::Result<Tls> {
        let certs = certificates(&files.cert, "--tls-cert")?;
        check_validity(&certs[0], &files.cert, "--tls-cert")?;
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
            anyhow::anyhow!(
                "cannot read a private key from {} (--tls-key): {}",
                files.key.display(),
                pem_error(&e)
            )
        })?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("the TLS provider offers no protocol version")?;
        let builder = match &files.client_ca {
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in certificates(path, "--client-ca")? {
                    roots.add(cert).map_err(|e| {
                        anyhow::anyhow!(
                            "{} (--client-ca) holds a certificate that cannot be a CA: {e}",
                            path.display()
                        )
                    })?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot verify clients with {} (--client-ca): {e}",
                        path.display()
                    )
                })?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder.with_single_cert(certs, key).map_err(|e| {
            anyhow::anyhow!(
                "the key in {} (--tls-key) does not fit the certificate in {} (--tls-cert): {e}",
                files.key.display(),
                files.cert.display()
            )
        })?;
        let mut grpc = config.clone();
        grpc.alpn_protocols = vec![b"h2".to_vec()];
        let mut http = config;
        http.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Tls {
            grpc: Arc::new(grpc),
            http: Arc::new(http),
        })
    }
}

pub(crate) fn pem_error(error: &rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::NoItemsFound => "no PEM item of that kind in it".into(),
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        other => format!("{other:?}"),
    }
}

/// The roots a client checks a server's certificate against: the certificates of `ca` (the
/// file of flag `flag`), else the system's. `what` names the URL and `whose` the server in the
/// sentence that says none was found.
pub(crate) fn client_roots(
    ca: Option<&Path>,
    flag: &str,
    what: &str,
    whose: &str,
) -> anyhow::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            for cert in certificates(path, flag)? {
                roots.add(cert).map_err(|e| {
                    anyhow::anyhow!(
                        "{} ({flag}) holds a certificate that cannot be a CA: {e}",
                        path.display()
                    )
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                anyhow::bail!(
                    "no trusted certificate found on this system for {what}: give the CA that signed {whose} certificate with {flag}"
                );
            }
        }
    }
    Ok(roots)
}

/// The certificates of a PEM file, at least one.
pub(crate) fn certificates(
    path: &Path,
    flag: &str,
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("cannot read {shown} ({flag}): {}", pem_error(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot read the certificates in {shown} ({flag}): {}",
                pem_error(&e)
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!("{shown} ({flag}) holds no PEM certificate");
    }
    Ok(certs)
}

/// Refuses a certificate that has expired or is not valid yet (`flag` names the file's flag).
pub(crate) fn check_validity(
    cert: &CertificateDer<'_>,
    path: &Path,
    flag: &str,
) -> anyhow::Result<()> {
    let Some((not_before, not_after)) = validity(cert) else {
        anyhow::bail!(
            "{} ({flag}) is not an X.509 certificate budget-top can read",
            path.display()
        );
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if now > not_after {
        anyhow::bail!(
            "the certificate in {} ({flag}) expired on {} UTC",
            path.display(),
            date(not_after)
        );
    }
    if now < not_before {
        anyhow::bail!(
            "the certificate in {} ({flag}) is not valid before {} UTC",
            path.display(),
            date(not_before)
        );
    }
    Ok(())
}

/// A DER element: (tag, contents, the rest after it).
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The certificate's validity (notBefore, notAfter) in Unix seconds.
fn validity(cert: &[u8]) -> Option<(i64, i64)> {
    let (0x30, certificate, _) = element(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = element(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer, then validity.
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..3 {
        rest = element(rest)?.2;
    }
    let (0x30, validity, _) = element(rest)? else {
        return None;
    };
    let (tag_before, before, rest) = element(validity)?;
    let (tag_after, after, _) = element(rest)?;
    Some((time(tag_before, before)?, time(tag_after, after)?))
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) in Unix seconds.
fn time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 if text.len() == 12 => {
            let yy: i64 = text[..2].parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &text[2..])
        }
        0x18 if text.len() == 14 => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |i: usize| -> Option<i64> { rest.get(i..i + 2)?.parse().ok() };
    let (month, day, hour, minute, second) =
        (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD` of Unix seconds.
fn date(unix: i64) -> String {
    let z = unix.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A receiver's listener: plain, or TLS with the handshakes done beside the accept loop.
#[derive(Debug)]
pub(super) enum Listener {
    Plain(LimitedListener),
    Tls {
        accepted: mpsc::Receiver<(Io, SocketAddr)>,
        local: SocketAddr,
    },
}

impl Listener {
    /// `listener` as is, or behind TLS: a task accepts connections and runs each handshake
    /// (within `handshake_timeout`) on its own task until `token` is cancelled.
    pub(super) fn new(
        listener: LimitedListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        handshake_timeout: Duration,
        token: CancellationToken,
    ) -> io::Result<Listener> {
        let Some(config) = tls else {
            return Ok(Listener::Plain(listener));
        };
        let local = axum::serve::Listener::local_addr(&listener)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        // Handshaken connections wait here for the server: few, since the server takes them
        // as they come, and each holds a connection slot.
        let (tx, accepted) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut listener = listener;
            loop {
                let (stream, addr) = tokio::select! {
                    () = token.cancelled() => break,
                    accepted = axum::serve::Listener::accept(&mut listener) => accepted,
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(handshake_timeout, acceptor.accept(stream));
                    match handshake.await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((Io::Tls(Box::new(tls)), addr)).await;
                        }
                        // A plain client, a bad certificate, a handshake too slow: the
                        // connection is dropped and its slot freed.
                        Ok(Err(error)) => tracing::debug!(%addr, %error, "TLS handshake failed"),
                        Err(_elapsed) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Listener::Tls { accepted, local })
    }
}

impl axum::serve::Listener for Listener {
    type Io = Io;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Io, SocketAddr) {
        match self {
            Listener::Plain(listener) => {
                let (stream, addr) = axum::serve::Listener::accept(listener).await;
                (Io::Plain(stream), addr)
            }
            Listener::Tls { accepted, .. } => match accepted.recv().await {
                Some(accepted) => accepted,
                // Shutting down: no more connections.
                None => std::future::pending().await,
            },
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Plain(listener) => axum::serve::Listener::local_addr(listener),
            Listener::Tls { local, .. } => Ok(*local),
        }
    }
}

/// A connection of a receiver, plain or TLS.
#[derive(Debug)]
pub(super) enum Io {
    Plain(LimitedStream),
    Tls(Box<tokio_rustls::server::TlsStream<LimitedStream>>),
}

impl Io {
    fn tag(&self) -> ConnectionTag {
        match self {
            Io::Plain(stream) => stream.tag(),
            Io::Tls(stream) => stream.get_ref().0.tag(),
        }
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Listener>>
    for ConnectionTag
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, Listener>) -> Self {
        stream.io().tag()
    }
}

impl tonic::transport::server::Connected for Io {
    type ConnectInfo = ConnectionTag;

    fn connect_info(&self) -> ConnectionTag {
        self.tag()
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_der_times_are_read() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(days_from_civil(2026, 12, 1) * 86_400), "2026-12-01");
        assert_eq!(
            date(days_from_civil(2000, 2, 29) * 86_400 + 5),
            "2000-02-29"
        );
        assert_eq!(
            time(0x17, b"260101000000Z"),
            Some(days_from_civil(2026, 1, 1) * 86_400)
        );
        assert_eq!(
            time(0x17, b"991231235959Z"),
            Some(days_from_civil(2000, 1, 1) * 86_400 - 1)
        );
        assert_eq!(
            time(0x18, b"20500101000000Z"),
            Some(days_from_civil(2050, 1, 1) * 86_400)
        );
        assert_eq!(time(0x17, b"2601010000Z"), None);
        assert_eq!(validity(b"\x30\x00"), None);
        assert_eq!(validity(b""), None);
    }
}
