//! The JSON scanner under [`decode_line`](super::decode_line): a cursor over one line's text
//! that reads objects, arrays, strings (borrowed when they hold no escape), numbers, hex ids on
//! the stack, and skips what the analysis does not read; `None` for anything it leaves to the
//! general reader.

use super::MAX_DEPTH;

/// The fields of one object already read: a field given twice is an error for the general
/// reader (serde's "duplicate field"), so it is left to it.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    pub(super) fn once(&mut self, field: u32) -> Option<()> {
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

/// A trace or span id, decoded from hex (up to 32 bytes: longer is left to the general reader,
/// whose rejection says how long it was).
#[derive(Clone, Copy)]
pub(super) struct Id {
    pub(super) bytes: [u8; 32],
    pub(super) len: usize,
}

impl Id {
    pub(super) const EMPTY: Id = Id {
        bytes: [0; 32],
        len: 0,
    };

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A string read in place: its text, or only that it was valid and held an escape.
#[derive(Clone, Copy)]
pub(super) enum Text<'a> {
    Plain(&'a str),
    Escaped,
}

/// A cursor over the line. Every reader returns `None` for what it leaves to the general
/// reader, and reads no further.
pub(super) struct Scan<'a> {
    pub(super) text: &'a str,
    pub(super) bytes: &'a [u8],
    pub(super) at: usize,
    pub(super) depth: u32,
}

impl<'a> Scan<'a> {
    /// Skips JSON's whitespace.
    #[inline]
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte that is not whitespace, not taken.
    #[inline]
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.at).copied()
    }

    #[inline]
    pub(super) fn byte(&mut self, b: u8) -> Option<()> {
        if self.peek()? != b {
            return None;
        }
        self.at += 1;
        Some(())
    }

    /// Only whitespace is left.
    pub(super) fn end(&mut self) -> Option<()> {
        self.ws();
        (self.at == self.bytes.len()).then_some(())
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        if !self.bytes[self.at..].starts_with(word) {
            return None;
        }
        self.at += word.len();
        Some(())
    }

    /// Takes a `null` if one is next.
    #[inline]
    pub(super) fn null(&mut self) -> bool {
        self.literal(b"null").is_some()
    }

    pub(super) fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            _ => None,
        }
    }

    /// An object, each field given to `field` with its key (an escaped key: `None`).
    #[inline]
    pub(super) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.delimited(b'{', b'}', |scan| {
            let Text::Plain(key) = scan.text()? else {
                return None;
            };
            scan.byte(b':')?;
            field(scan, key)
        })
    }

    /// An array, each element given to `element`.
    #[inline]
    pub(super) fn array(&mut self, element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.delimited(b'[', b']', element)
    }

    /// `open`, items read by `item` and separated by commas, `close`: what an object and an
    /// array share (nesting past [`MAX_DEPTH`]: `None`).
    #[inline]
    fn delimited(
        &mut self,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.byte(open)?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        if self.peek()? == close {
            self.at += 1;
        } else {
            loop {
                item(self)?;
                match self.peek()? {
                    b',' => self.at += 1,
                    c if c == close => {
                        self.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// An array or `null` (none).
    #[inline]
    pub(super) fn nullable_array(
        &mut self,
        element: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        if self.null() {
            return Some(());
        }
        self.array(element)
    }

    /// A string. Its text is given when it has no escape; one with an escape is checked as
    /// serde_json checks a string it decodes, except that a surrogate escape (valid only in
    /// pairs) is left to the general reader.
    #[inline]
    pub(super) fn text(&mut self) -> Option<Text<'a>> {
        self.byte(b'"')?;
        let start = self.at;
        let bytes = self.bytes;
        let mut i = start;
        let mut escaped = false;
        loop {
            i = skip_plain(bytes, i);
            match *bytes.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match *bytes.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let hex = bytes.get(i + 2..i + 6)?;
                            let mut code = 0u32;
                            for &digit in hex {
                                code = code << 4 | u32::from(hex_digit(digit)?);
                            }
                            if (0xD800..=0xDFFF).contains(&code) {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                }
                // A control character: not allowed in a JSON string.
                _ => return None,
            }
        }
        self.at = i + 1;
        if escaped {
            return Some(Text::Escaped);
        }
        // Both ends are at a `"`, so on character boundaries.
        self.text.get(start..i).map(Text::Plain)
    }

    /// A string without escapes, or `null` (none): text the analysis reads.
    #[inline]
    pub(super) fn nullable_str(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        match self.text()? {
            Text::Plain(s) => Some(Some(s)),
            Text::Escaped => None,
        }
    }

    /// A string or `null`, its text as written between its quotes (escapes left as they
    /// are): what a failure's words are looked for in.
    pub(super) fn nullable_raw_str(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        self.ws();
        let open = self.at;
        self.text()?;
        Some(self.text.get(open + 1..self.at - 1))
    }

    /// A string or `null`, checked and skipped.
    #[inline]
    pub(super) fn nullable_string(&mut self) -> Option<()> {
        if self.null() {
            return Some(());
        }
        self.text().map(drop)
    }

    /// A JSON number, checked against JSON's grammar; its text.
    pub(super) fn number(&mut self) -> Option<&'a str> {
        self.ws();
        let bytes = self.bytes;
        let start = self.at;
        let mut i = start;
        let digits = |mut i: usize| {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => i = digits(i),
            _ => return None,
        }
        if bytes.get(i) == Some(&b'.') {
            let after = digits(i + 1);
            if after == i + 1 {
                return None;
            }
            i = after;
        }
        if let Some(b'e' | b'E') = bytes.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = bytes.get(i) {
                i += 1;
            }
            let after = digits(i);
            if after == i {
                return None;
            }
            i = after;
        }
        self.at = i;
        self.text.get(start..i)
    }

    /// An integer in `min..=max` as a number or a decimal string (`null`: 0), as
    /// `otlp_json::Integer` reads one; at most 20 digits, no sign but `-`, no spaces.
    #[inline]
    pub(super) fn int(&mut self, min: i128, max: i128) -> Option<i128> {
        let digits = match self.peek()? {
            b'"' => match self.text()? {
                Text::Plain(s) => s,
                Text::Escaped => return None,
            },
            b'n' => return self.literal(b"null").map(|()| 0),
            _ => self.number()?,
        };
        let (negative, magnitude) = match digits.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, digits),
        };
        if magnitude.is_empty() || magnitude.len() > 20 {
            return None;
        }
        // Up to 19 digits fit a `u64` (a timestamp in ns has 19): summed there, one multiply a
        // digit instead of `i128`'s two.
        let n = if magnitude.len() <= 19 {
            let mut n = 0u64;
            for b in magnitude.bytes() {
                if !b.is_ascii_digit() {
                    return None;
                }
                n = n * 10 + u64::from(b - b'0');
            }
            i128::from(n)
        } else {
            let mut n = 0i128;
            for b in magnitude.bytes() {
                if !b.is_ascii_digit() {
                    return None;
                }
                n = n * 10 + i128::from(b - b'0');
            }
            n
        };
        let n = if negative { -n } else { n };
        (min..=max).contains(&n).then_some(n)
    }

    /// An unsigned integer up to `max` (see [`Scan::int`]).
    #[inline]
    pub(super) fn uint(&mut self, max: u64) -> Option<u64> {
        u64::try_from(self.int(0, max.into())?).ok()
    }

    /// An enum: its number, or its name from `names` (index = number); `null` is 0.
    pub(super) fn enumeration(&mut self, names: &[&str]) -> Option<i32> {
        match self.peek()? {
            b'"' => match self.text()? {
                Text::Plain(s) => names.iter().position(|n| *n == s).map(|i| i as i32),
                Text::Escaped => None,
            },
            b'n' => self.literal(b"null").map(|()| 0),
            _ => {
                let digits = self.number()?;
                if !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 9 {
                    return None;
                }
                digits.parse().ok()
            }
        }
    }

    /// A double: a number, a numeric string, or `"NaN"`, `"Infinity"`, `"-Infinity"`, read as
    /// `otlp_json::some_double` reads it.
    pub(super) fn double(&mut self) -> Option<f64> {
        if self.peek()? == b'"' {
            let Text::Plain(s) = self.text()? else {
                return None;
            };
            return match s {
                "NaN" => Some(f64::NAN),
                "Infinity" => Some(f64::INFINITY),
                "-Infinity" => Some(f64::NEG_INFINITY),
                _ => s.trim().parse().ok(),
            };
        }
        let number = self.number()?;
        let magnitude = number.strip_prefix('-').unwrap_or(number);
        if magnitude.bytes().all(|b| b.is_ascii_digit()) {
            // An integer: serde_json gives it as one, and it is converted as such (but `-0`,
            // which it reads as a double).
            if magnitude.len() > 18 || number == "-0" {
                return None;
            }
            let n: i64 = number.parse().ok()?;
            return Some(if number.starts_with('-') {
                n as f64
            } else {
                n as u64 as f64
            });
        }
        // serde_json's own reading of the number, as it reads it inside the request.
        serde_json::from_str(number).ok()
    }

    /// A trace or span id in hex (either case); `""` or `null` for none.
    pub(super) fn hex_id(&mut self) -> Option<Id> {
        if self.null() {
            return Some(Id::EMPTY);
        }
        let Text::Plain(hex) = self.text()? else {
            return None;
        };
        let hex = hex.as_bytes();
        if hex.len() % 2 != 0 || hex.len() > 64 {
            return None;
        }
        let mut id = Id::EMPTY;
        // Without a branch a digit: any byte that is not one sets the high bit of `bad`.
        let mut bad = 0;
        for (byte, pair) in id.bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let (high, low) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
            bad |= high | low;
            *byte = high << 4 | low;
        }
        if bad & NOT_HEX != 0 {
            return None;
        }
        id.len = hex.len() / 2;
        Some(id)
    }

    /// Any JSON value, checked (as strictly as serde_json checks what it skips, or more) and
    /// skipped.
    pub(super) fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|scan, _| scan.skip_value()),
            b'[' => self.array(Self::skip_value),
            b'"' => self.text().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }
}

/// [`HEX`]'s mark for a byte that is not a hex digit.
const NOT_HEX: u8 = 0x80;

/// Each byte's value as a hex digit (either case), or [`NOT_HEX`].
const HEX: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut c = 0;
    while c < 256 {
        table[c] = match c as u8 {
            b'0'..=b'9' => c as u8 - b'0',
            b'a'..=b'f' => c as u8 - b'a' + 10,
            b'A'..=b'F' => c as u8 - b'A' + 10,
            _ => NOT_HEX,
        };
        c += 1;
    }
    table
};

pub(super) fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The first byte from `i` on that ends a plain run of a string: `"`, `\` or a control
/// character (or the end). Eight bytes at a time, as serde_json's `skip_to_escape` does.
#[inline]
pub(super) fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let chars = u64::from_le_bytes(word);
        let control = chars.wrapping_sub(ONES * 0x20) & !chars;
        let quote = (chars ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES)
            & !(chars ^ (ONES * u64::from(b'"')));
        let backslash = (chars ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES)
            & !(chars ^ (ONES * u64::from(b'\\')));
        let found = (control | quote | backslash) & HIGH;
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}
