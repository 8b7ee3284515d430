//! The spans of one request as received, for `serve --forward` (CONVENTIONS §7): each valid
//! span's protobuf encoding, byte for byte, and what it came under (its `ResourceSpans`'
//! resource and schema URL, its `ScopeSpans`' scope and schema URL), so that a chain kept can be
//! sent on whole, as its services sent it, and not as the store packs it.
//!
//! Enters: built by the decoders (the request's own bytes when it was read in place, the spans
//! encoded again when prost decoded it). Leaves: into the store, which copies each span into
//! its chain's record until the chain is judged (`store::received`).

use std::sync::Arc;

use bytes::Bytes;
use prost::encoding::{WireType, encode_key, encode_varint};

use crate::ingest::decode::protobuf_wire::{self, ProtobufError};

/// What one request's valid spans were, as received.
#[derive(Clone, Debug, Default)]
pub struct Received {
    /// The bytes the spans are in: the request's body, or the spans encoded one after another.
    pub bytes: Bytes,
    /// One per valid span, in the order of `Batch::spans`.
    pub spans: Vec<ReceivedSpan>,
    /// The resources and scopes the spans came under.
    pub scopes: Vec<Arc<Scope>>,
}

/// Where one span is in [`Received::bytes`], and the index of its [`Scope`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedSpan {
    /// Its first byte.
    pub start: u32,
    /// Its length.
    pub len: u32,
    /// Its scope in [`Received::scopes`].
    pub scope: u32,
}

/// What spans came under: the `ResourceSpans`' fields but its scopes, and the `ScopeSpans`'
/// fields but its spans, each as encoded.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    /// `resource` and `schema_url` of the `ResourceSpans` (shared by its scopes).
    pub resource: Arc<[u8]>,
    /// `scope` and `schema_url` of the `ScopeSpans`.
    pub scope: Box<[u8]>,
}

impl Scope {
    /// Bytes it holds (counted once per request that brought it).
    pub fn bytes(&self) -> usize {
        self.resource.len() + self.scope.len() + std::mem::size_of::<Scope>()
    }
}

impl Received {
    /// Span `i`'s bytes and scope.
    pub fn span(&self, i: usize) -> Option<(&[u8], &Arc<Scope>)> {
        let s = self.spans.get(i)?;
        let start = s.start as usize;
        let bytes = self.bytes.get(start..start + s.len as usize)?;
        Some((bytes, self.scopes.get(s.scope as usize)?))
    }

    /// Records span `span` (a slice of `body`, the bytes this will hold) under the last scope.
    pub(crate) fn push_slice(&mut self, body: &[u8], span: &[u8]) {
        let start = (span.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
        self.spans.push(ReceivedSpan {
            start: start as u32,
            len: span.len() as u32,
            scope: self.scopes.len().saturating_sub(1) as u32,
        });
    }
}

/// Builds a [`Received`] from spans encoded anew (a request prost decoded).
#[derive(Debug, Default)]
pub(crate) struct ReceivedBuilder {
    bytes: Vec<u8>,
    received: Received,
}

impl ReceivedBuilder {
    /// The next spans come under `scope`.
    pub(crate) fn scope(&mut self, scope: Arc<Scope>) {
        self.received.scopes.push(scope);
    }

    /// Records one span (under the last scope).
    pub(crate) fn span(&mut self, span: &impl prost::Message) {
        let start = self.bytes.len();
        span.encode_raw(&mut self.bytes);
        self.received.spans.push(ReceivedSpan {
            start: start as u32,
            len: (self.bytes.len() - start) as u32,
            scope: self.received.scopes.len().saturating_sub(1) as u32,
        });
    }

    pub(crate) fn finish(mut self) -> Received {
        self.received.bytes = Bytes::from(self.bytes);
        self.received
    }
}

/// The length-delimited fields of `message` but those numbered `but`, encoded again as they
/// were (every field of a `ResourceSpans` and a `ScopeSpans` is length-delimited; a field of
/// another wire type there is not in OTLP and is left out).
pub(crate) fn fields_but(message: &[u8], but: u32) -> Result<Vec<u8>, ProtobufError> {
    let mut out = Vec::new();
    for field in protobuf_wire::fields(message) {
        if let (number, protobuf_wire::Field::Len(bytes)) = field?
            && number != but
        {
            encode_key(number, WireType::LengthDelimited, &mut out);
            encode_varint(bytes.len() as u64, &mut out);
            out.extend_from_slice(bytes);
        }
    }
    Ok(out)
}
