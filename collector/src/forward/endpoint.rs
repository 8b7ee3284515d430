//! Where `--forward` sends, and how: the URL (`grpc://HOST:PORT`, `grpcs://`, a bare
//! `HOST:PORT` for gRPC; `http://HOST[:PORT]/PATH`, `https://` for OTLP/HTTP protobuf), the TLS
//! client configuration (`--forward-ca`, `--forward-cert`, `--forward-key`) and the token
//! (`--forward-token-file`). Everything is read and checked at start: a bad URL, a file that
//! cannot be read, a certificate expired, an empty token: a sentence naming the flag (exit 2).
//! A backend that does not answer is not an error at start: the exporter retries it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{PrivateKeyDer, ServerName};

use crate::ingest::receive::auth::BearerToken;
use crate::ingest::receive::tls::{
    certificates, check_validity, client_roots, pem_error, provider,
};

/// The OTLP transport of the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// OTLP/gRPC (`TraceService/Export`).
    Grpc,
    /// OTLP/HTTP protobuf (`POST` to the URL's path).
    Http,
}

/// A parsed `--forward` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// gRPC or HTTP.
    pub transport: Transport,
    /// Whether it speaks TLS (`grpcs://`, `https://`).
    pub tls: bool,
    /// The host name or address, as written (without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// For HTTP, the path requests are posted to (`/v1/traces` when the URL has none).
    pub path: String,
}

/// The default path of OTLP/HTTP traces.
pub const TRACES_PATH: &str = "/v1/traces";

impl Endpoint {
    /// Reads a `--forward` URL.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let text = text.trim();
        let hint = "give grpc://HOST:PORT (or HOST:PORT), grpcs://HOST:PORT for TLS, or http(s)://HOST[:PORT]/v1/traces";
        let (scheme, rest) = match text.split_once("://") {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None => ("grpc".to_owned(), text),
        };
        let (transport, tls) = match scheme.as_str() {
            "grpc" => (Transport::Grpc, false),
            "grpcs" => (Transport::Grpc, true),
            "http" => (Transport::Http, false),
            "https" => (Transport::Http, true),
            other => {
                return Err(format!(
                    "--forward {text:?}: unknown scheme {other:?}: {hint}"
                ));
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.contains('@') || path.contains(['?', '#']) {
            return Err(format!(
                "--forward {text:?}: no user, query or fragment in the URL: {hint}"
            ));
        }
        let uri: http::uri::Authority = authority
            .parse()
            .map_err(|_| format!("--forward {text:?}: {authority:?} is not HOST:PORT: {hint}"))?;
        let host = uri.host().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("--forward {text:?}: no host: {hint}"));
        }
        let port = match (uri.port_u16(), transport, tls) {
            (Some(0), ..) => return Err(format!("--forward {text:?}: port 0 is no port: {hint}")),
            (Some(port), ..) => port,
            (None, Transport::Http, false) => 80,
            (None, Transport::Http, true) => 443,
            (None, Transport::Grpc, _) => {
                return Err(format!(
                    "--forward {text:?}: a gRPC endpoint needs its port (4317 is OTLP's): {hint}"
                ));
            }
        };
        let path = match transport {
            Transport::Grpc if !path.is_empty() && path != "/" => {
                return Err(format!(
                    "--forward {text:?}: a gRPC endpoint has no path ({path:?}); for OTLP/HTTP write http://HOST:PORT{path}"
                ));
            }
            Transport::Grpc => String::new(),
            Transport::Http if path.is_empty() || path == "/" => TRACES_PATH.to_owned(),
            Transport::Http => path.to_owned(),
        };
        ServerName::try_from(host.to_owned())
            .map_err(|_| format!("--forward {text:?}: {host:?} is not a host name or address"))?;
        Ok(Endpoint {
            transport,
            tls,
            host: host.to_owned(),
            port,
            path,
        })
    }

    /// The URL as budget-top reads it (`grpc://127.0.0.1:4317`, `https://tempo:443/v1/traces`).
    pub fn url(&self) -> String {
        let scheme = match (self.transport, self.tls) {
            (Transport::Grpc, false) => "grpc",
            (Transport::Grpc, true) => "grpcs",
            (Transport::Http, false) => "http",
            (Transport::Http, true) => "https",
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}{}", self.port, self.path)
    }

    /// `host:port`, the `Host` header and the gRPC authority.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The files of the `--forward-*` flags.
#[derive(Clone, Debug, Default)]
pub struct ForwardFiles {
    /// `--forward-ca`: the roots the backend's certificate must chain to (else the system's).
    pub ca: Option<PathBuf>,
    /// `--forward-cert`: budget-top's client certificate (mTLS).
    pub cert: Option<PathBuf>,
    /// `--forward-key`: its private key.
    pub key: Option<PathBuf>,
    /// `--forward-token-file`: `Authorization: Bearer <token>` on every request.
    pub token: Option<PathBuf>,
}

/// How to reach the endpoint: its TLS client configuration and the token, read at start.
#[derive(Clone)]
pub struct Security {
    /// The TLS configuration, when the endpoint speaks TLS (its ALPN set for the transport).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The `Authorization` header value.
    pub authorization: Option<http::HeaderValue>,
    /// A warning for the start-up lines (a token file others can read).
    pub warning: Option<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("token", &self.authorization.is_some())
            .finish()
    }
}

impl Security {
    /// Reads and checks every file for `endpoint`.
    pub fn load(endpoint: &Endpoint, files: &ForwardFiles) -> anyhow::Result<Security> {
        if !endpoint.tls
            && let Some(flag) = [
                (files.ca.is_some(), "--forward-ca"),
                (files.cert.is_some(), "--forward-cert"),
            ]
            .iter()
            .find_map(|(given, flag)| given.then_some(*flag))
        {
            anyhow::bail!(
                "{flag} is for TLS, and --forward {} is plain: write grpcs:// or https:// to forward over TLS",
                endpoint.url()
            );
        }
        let tls = if endpoint.tls {
            Some(Arc::new(client_config(endpoint, files)?))
        } else {
            None
        };
        let (authorization, warning) = match &files.token {
            Some(path) => {
                let loaded = BearerToken::load_for(path, "--forward-token-file")?;
                let value = loaded
                    .token
                    .authorization()
                    .context("the token of --forward-token-file cannot be sent in a header")?;
                let warning = loaded.readable_by_others.map(|mode| {
                    crate::ingest::receive::auth::open_file_warning(path, mode)
                        .replace("the bearer token file", "the --forward-token-file")
                });
                (Some(value), warning)
            }
            None => (None, None),
        };
        Ok(Security {
            tls,
            authorization,
            warning,
        })
    }

    /// "TLS, token", "mTLS, no token", "plain, no token"... for the start-up line.
    pub fn describe(&self, files: &ForwardFiles) -> &'static str {
        crate::ingest::receive::auth::protection(
            self.tls.is_some(),
            files.cert.is_some(),
            self.authorization.is_some(),
        )
    }
}

fn client_config(
    endpoint: &Endpoint,
    files: &ForwardFiles,
) -> anyhow::Result<rustls::ClientConfig> {
    let url = format!("--forward {}", endpoint.url());
    let roots = client_roots(files.ca.as_deref(), "--forward-ca", &url, "the backend's")?;
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("the TLS provider offers no protocol version")?
        .with_root_certificates(roots);
    let mut config = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "--forward-cert")?;
            check_validity(&chain[0], cert, "--forward-cert")?;
            let key = private_key(key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                anyhow::anyhow!(
                    "{} (--forward-key) is not the key of {} (--forward-cert): {e}",
                    files.key.as_deref().unwrap_or(Path::new("")).display(),
                    cert.display()
                )
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => anyhow::bail!("--forward-cert needs its key: add --forward-key FILE"),
        (None, Some(_)) => {
            anyhow::bail!("--forward-key needs its certificate: add --forward-cert FILE")
        }
    };
    config.alpn_protocols = match endpoint.transport {
        Transport::Grpc => vec![b"h2".to_vec()],
        Transport::Http => vec![b"http/1.1".to_vec()],
    };
    Ok(config)
}

fn private_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read a private key from {} (--forward-key): {}",
            path.display(),
            pem_error(&e)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_transport_and_refuse_what_cannot_be_sent_to() {
        let grpc = Endpoint::parse("127.0.0.1:4317").unwrap();
        assert_eq!(
            (grpc.transport, grpc.tls, grpc.url()),
            (Transport::Grpc, false, "grpc://127.0.0.1:4317".to_owned())
        );
        let grpcs = Endpoint::parse("grpcs://tempo.example:443").unwrap();
        assert_eq!((grpcs.transport, grpcs.tls), (Transport::Grpc, true));
        let http = Endpoint::parse("http://localhost:4318").unwrap();
        assert_eq!(http.url(), "http://localhost:4318/v1/traces");
        let https = Endpoint::parse("https://otlp.example/otlp/v1/traces").unwrap();
        assert_eq!(https.url(), "https://otlp.example:443/otlp/v1/traces");
        let v6 = Endpoint::parse("grpc://[::1]:4317").unwrap();
        assert_eq!(
            (v6.host.as_str(), v6.authority()),
            ("::1", "[::1]:4317".to_owned())
        );
        for bad in [
            "ftp://x:1",
            "grpc://x",
            "grpc://x:0",
            "grpc://x:4317/v1/traces",
            "http://user@x/v1/traces",
            "http://x/v1/traces?a=b",
            "http://:80/",
            "",
            "x:notaport",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
