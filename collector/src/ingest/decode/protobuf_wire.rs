//! Just enough of the protobuf wire format to walk a message's fields in place, without
//! building the message: the receivers read export requests straight off the wire with it
//! (`ingest::decode::protobuf`), and [`RawAttributes`](crate::batch::RawAttributes) holds a span's
//! attributes as their encoding and walks them when the detail view opens the span.
//!
//! Enters: the bytes of a message. Leaves: its fields in order, `(field number, payload)`, or
//! the first framing error.

/// Why a protobuf request body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protobuf ExportTraceServiceRequest: {0}")]
pub struct ProtobufError(pub(crate) &'static str);

/// One field's payload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32,
    /// A group (protobuf's deprecated encoding, wire types 3 and 4): OTLP has none, so
    /// it is an unknown field, skipped whole as prost skips it.
    Group,
}

/// Wire type of a varint field.
pub const VARINT: u8 = 0;
/// Wire type of a length-delimited field.
pub const LEN: u8 = 2;

/// The one-byte key of field `number` (below 16) of wire type `wire_type`.
pub const fn tag(number: u8, wire_type: u8) -> u8 {
    number << 3 | wire_type
}

/// A length-delimited field with this one-byte `tag` and a one-byte length (below 128) at
/// the start of `buf`: its payload and the bytes after it. Nearly every string OTLP sends
/// has this shape, which is read here without the general [`fields`] walk.
#[inline(always)]
pub fn short_len_field(buf: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let [key, len, rest @ ..] = buf else {
        return None;
    };
    let len = usize::from(*len);
    (*key == tag && len < 0x80 && len <= rest.len()).then(|| rest.split_at(len))
}

/// The varint that `bytes` hold, all of them and nothing else (at most 9 bytes, so no
/// overflow to think about), as [`fields`] would read it; `None` for anything else.
#[inline(always)]
pub fn whole_varint(bytes: &[u8]) -> Option<u64> {
    let (last, init) = bytes.split_last()?;
    if bytes.len() > 9 || *last >= 0x80 || init.iter().any(|b| *b < 0x80) {
        return None;
    }
    Some(bytes.iter().enumerate().fold(0, |value, (i, byte)| {
        value | u64::from(byte & 0x7f) << (7 * i)
    }))
}

/// How deep groups may nest, as prost allows.
const MAX_GROUP_DEPTH: usize = 100;

/// Skip the fields of a group whose start tag (field `number`) was just read, up to and
/// including its matching end tag; nested groups must close in order.
fn skip_group(buf: &mut &[u8], number: u64) -> Result<(), ProtobufError> {
    let mut open = vec![number];
    while let Some(&innermost) = open.last() {
        if buf.is_empty() {
            return Err(ProtobufError("truncated group"));
        }
        let key = varint(buf)?;
        let inner = key >> 3;
        if inner == 0 {
            return Err(ProtobufError("invalid field number"));
        }
        match key & 7 {
            0 => {
                varint(buf)?;
            }
            1 => {
                take(buf, 8)?;
            }
            2 => {
                let len =
                    usize::try_from(varint(buf)?).map_err(|_| ProtobufError("length too large"))?;
                take(buf, len)?;
            }
            3 if open.len() >= MAX_GROUP_DEPTH => {
                return Err(ProtobufError("recursion limit reached"));
            }
            3 => open.push(inner),
            4 if inner == innermost => {
                open.pop();
            }
            4 => return Err(ProtobufError("unexpected end group tag")),
            5 => {
                take(buf, 4)?;
            }
            _ => return Err(ProtobufError("unsupported wire type")),
        }
    }
    Ok(())
}

/// The fields of a message, in order: `(field number, payload)`.
pub fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, failed: false }
}

#[derive(Debug)]
pub struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

/// A varint: one byte (tags, most lengths and small numbers) inline, longer ones out of
/// line; every field of a request goes through here (docs/performance.md, "The decoder's hot
/// paths").
#[inline(always)]
fn varint(buf: &mut &[u8]) -> Result<u64, ProtobufError> {
    if let Some((&byte, rest)) = buf.split_first()
        && byte < 0x80
    {
        *buf = rest;
        return Ok(u64::from(byte));
    }
    long_varint(buf)
}

#[inline(never)]
fn long_varint(buf: &mut &[u8]) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for i in 0..10 {
        let Some((&byte, rest)) = buf.split_first() else {
            return Err(ProtobufError("truncated varint"));
        };
        *buf = rest;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err(ProtobufError("varint longer than 10 bytes"))
}

#[inline]
fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], ProtobufError> {
    if buf.len() < n {
        return Err(ProtobufError("truncated field"));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

impl<'a> Fields<'a> {
    /// What is left to read: the bytes after the fields read so far.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    #[inline(always)]
    fn field(&mut self) -> Result<(u32, Field<'a>), ProtobufError> {
        let key = varint(&mut self.buf)?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .ok_or(ProtobufError("invalid field number"))?;
        let field = match key & 7 {
            0 => Field::Varint(varint(&mut self.buf)?),
            1 => {
                let bytes = take(&mut self.buf, 8)?;
                let mut le = [0u8; 8];
                le.copy_from_slice(bytes);
                Field::Fixed64(u64::from_le_bytes(le))
            }
            2 => {
                let len = usize::try_from(varint(&mut self.buf)?)
                    .map_err(|_| ProtobufError("length too large"))?;
                Field::Len(take(&mut self.buf, len)?)
            }
            5 => {
                take(&mut self.buf, 4)?;
                Field::Fixed32
            }
            3 => {
                skip_group(&mut self.buf, key >> 3)?;
                Field::Group
            }
            4 => return Err(ProtobufError("unexpected end group tag")),
            _ => return Err(ProtobufError("unsupported wire type")),
        };
        Ok((number, field))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Field<'a>), ProtobufError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}
