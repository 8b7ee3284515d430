//! Who may send (CONVENTIONS §7): `--bearer-token-file`. Every OTLP request must carry
//! `Authorization: Bearer <token>` (the scheme in any case, the token exact); otherwise it is
//! answered HTTP 401 / gRPC `UNAUTHENTICATED` before its body is read, never retried, and
//! counted in [`IngestStats::requests_unauthenticated`](crate::ingest::IngestStats).

use std::path::Path;

use anyhow::Context as _;

/// The token every request must present. Its `Debug` never shows it.
#[derive(Clone)]
pub struct BearerToken {
    token: Vec<u8>,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

/// A token file and what was found about it at start.
#[derive(Clone, Debug)]
pub struct LoadedToken {
    /// The token.
    pub token: BearerToken,
    /// Set when others than its owner may read the file (a warning, not a refusal:
    /// Kubernetes mounts secrets 0644).
    pub readable_by_others: Option<u32>,
}

impl BearerToken {
    /// A token from its text (for tests and callers that hold it already); `None` when empty.
    pub fn new(token: impl Into<Vec<u8>>) -> Option<Self> {
        let token = token.into();
        (!token.is_empty()).then_some(BearerToken { token })
    }

    /// Reads `--bearer-token-file`: the file's trailing newlines (LF or CRLF) trimmed. A
    /// missing, unreadable or empty file, or one with more than one line or control
    /// characters a header cannot carry, is an error naming the file.
    pub fn load(path: &Path) -> anyhow::Result<LoadedToken> {
        Self::load_for(path, "--bearer-token-file")
    }

    /// The same for the token file of another flag (`--jaeger-token-file`: the token budget-top
    /// presents), named in the errors.
    pub fn load_for(path: &Path, flag: &str) -> anyhow::Result<LoadedToken> {
        let shown = path.display();
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read the bearer token file {shown} ({flag})"))?;
        let mut end = bytes.len();
        while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let token = &bytes[..end];
        if token.is_empty() {
            anyhow::bail!("the bearer token file {shown} is empty ({flag}): put the token in it");
        }
        if token.iter().any(|&b| b < 0x20 || b == 0x7f) {
            anyhow::bail!(
                "the bearer token file {shown} holds more than one line or control characters, which no Authorization header can carry ({flag})"
            );
        }
        Ok(LoadedToken {
            token: BearerToken {
                token: token.to_vec(),
            },
            readable_by_others: mode_open_to_others(path),
        })
    }

    /// The `Authorization` header that presents this token (`Bearer <token>`), marked
    /// sensitive; `None` when the token is not a valid header value.
    pub fn authorization(&self) -> Option<http::HeaderValue> {
        let mut value = b"Bearer ".to_vec();
        value.extend_from_slice(&self.token);
        let mut value = http::HeaderValue::from_bytes(&value).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// Whether an `Authorization` header value carries this token: `Bearer` in any case, one
    /// or more spaces, then exactly the token (compared in constant time over its length).
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some(space) = value.iter().position(|&b| b == b' ') else {
            return false;
        };
        let (scheme, rest) = value.split_at(space);
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return false;
        }
        let start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        constant_time_eq(&rest[start..], &self.token)
    }
}

/// Equal bytes, in a time that depends only on the lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The file's permission bits when group or others may read or write it.
#[cfg(unix)]
fn mode_open_to_others(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn mode_open_to_others(_path: &Path) -> Option<u32> {
    None
}

/// The warning printed at start for a token file others can read.
pub fn open_file_warning(path: &Path, mode: u32) -> String {
    format!(
        "warning: the bearer token file {} can be read by other users (mode {mode:04o}); accepted, as Kubernetes mounts secrets that way, but `chmod 600` it otherwise",
        path.display()
    )
}

/// What protects the receivers, for the start-up line and the screen's header: "TLS, token",
/// "mTLS, no token", "plain, token", "plain, no token".
pub fn protection(tls: bool, client_ca: bool, token: bool) -> &'static str {
    match (tls, client_ca, token) {
        (true, true, true) => "mTLS, token",
        (true, true, false) => "mTLS, no token",
        (true, false, true) => "TLS, token",
        (true, false, false) => "TLS, no token",
        (false, _, true) => "plain, token",
        (false, _, false) => "plain, no token",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn token(text: &str) -> BearerToken {
        BearerToken::new(text).unwrap()
    }

    #[test]
    fn the_scheme_is_read_in_any_case_and_the_token_exactly() {
        let t = token("s3cret-token");
        assert!(t.accepts(Some(b"Bearer s3cret-token")));
        assert!(t.accepts(Some(b"bearer s3cret-token")));
        assert!(t.accepts(Some(b"BEARER  s3cret-token")));
        assert!(!t.accepts(None));
        assert!(!t.accepts(Some(b"")));
        assert!(!t.accepts(Some(b"Bearer")));
        assert!(!t.accepts(Some(b"Bearer ")));
        assert!(!t.accepts(Some(b"s3cret-token")));
        assert!(!t.accepts(Some(b"Basic s3cret-token")));
        assert!(!t.accepts(Some(b"Bearer S3CRET-TOKEN")));
        assert!(!t.accepts(Some(b"Bearer s3cret-toke")));
        assert!(!t.accepts(Some(b"Bearer s3cret-token2")));
        assert!(!t.accepts(Some(b"Bearers3cret-token")));
    }

    fn file(name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("budget-top-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let _ = mode;
        path
    }

    #[test]
    fn a_token_file_is_trimmed_of_its_newline_and_refused_when_missing_or_empty() {
        let lf = file("lf", b"abc\n", 0o600);
        let loaded = BearerToken::load(&lf).unwrap();
        assert!(loaded.token.accepts(Some(b"Bearer abc")));
        assert_eq!(loaded.readable_by_others, None);
        let crlf = file("crlf", b"abc\r\n", 0o644);
        let loaded = BearerToken::load(&crlf).unwrap();
        assert!(loaded.token.accepts(Some(b"Bearer abc")));
        #[cfg(unix)]
        assert_eq!(loaded.readable_by_others, Some(0o644));
        for (name, bytes) in [
            ("empty", &b""[..]),
            ("newline", b"\n"),
            ("crlf-only", b"\r\n"),
        ] {
            let path = file(name, bytes, 0o600);
            let error = format!("{:#}", BearerToken::load(&path).unwrap_err());
            assert!(error.contains("is empty"), "{error}");
            assert!(error.contains(&path.display().to_string()), "{error}");
        }
        let two = file("two-lines", b"abc\ndef\n", 0o600);
        assert!(BearerToken::load(&two).is_err());
        let missing = lf.with_file_name("missing");
        let error = format!("{:#}", BearerToken::load(&missing).unwrap_err());
        assert!(
            error.contains("cannot read the bearer token file") && error.contains("missing"),
            "{error}"
        );
    }

    #[test]
    fn debug_never_shows_the_token() {
        assert_eq!(format!("{:?}", token("abc")), "BearerToken(..)");
    }
}
