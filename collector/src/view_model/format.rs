//! Numbers and text as every picture writes them: milliseconds (compact for narrow columns and
//! axes, grouped for prose), counts, rates, clock times, the severity marks, axis steps, an OTLP
//! attribute value, and text fitted or wrapped to terminal cells. One formatter for each, so the
//! screen and the page never write one figure two ways.

use std::borrow::Cow;
use std::fmt::Write as _;

use deadline_budget::analysis::Severity;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use unicode_width::UnicodeWidthStr as _;

/// Milliseconds for a narrow column or an axis: `850ms`, `12.5s`, `3m20s`, `2h05m`.
pub fn ms(v: i64) -> String {
    let a = v.unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    if a < 10_000 {
        format!("{v}ms")
    } else if a < 100_000 {
        format!("{sign}{}.{}s", a / 1000, (a % 1000) / 100)
    } else if a < 3_600_000 {
        format!("{sign}{}m{:02}s", a / 60_000, (a % 60_000) / 1000)
    } else {
        format!("{sign}{}h{:02}m", a / 3_600_000, (a % 3_600_000) / 60_000)
    }
}

/// Milliseconds for a column whose head already says `ms`: plain digits (`938`), unless they
/// are large (`3m20s`).
pub fn ms_digits(v: i64) -> String {
    if v.abs() < 100_000 {
        v.to_string()
    } else {
        ms(v)
    }
}

/// Milliseconds in prose, with separators: `1,254 ms`, `-40 ms`.
pub fn ms_grouped(v: i64) -> String {
    format!("{} ms", grouped(v))
}

/// An optional [`ms_grouped`] value, `-` when absent.
pub fn opt_ms_grouped(v: Option<i64>) -> String {
    v.map(ms_grouped).unwrap_or_else(|| "-".into())
}

/// An optional millisecond value, `-` when absent.
pub fn opt_ms(v: Option<i64>) -> String {
    v.map(ms).unwrap_or_else(|| "-".into())
}

/// Time of day (UTC) of a Unix-ns instant: `17:42:05.120`.
pub fn clock(unix_nano: u64) -> String {
    let ms_total = unix_nano / 1_000_000;
    let ms = ms_total % 1000;
    let s = (ms_total / 1000) % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        ms
    )
}

/// A count with thousands separators: `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed number with thousands separators: `-1,254`.
pub fn grouped(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "" };
    format!("{sign}{}", count(v.unsigned_abs()))
}

/// `n` and a noun, plural unless one: `1 hop`, `3 findings`.
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", count(n))
    }
}

/// A rate with one decimal when small: `0.4`, `12.5`, `1,234`.
pub fn rate(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        count(v.round() as u64)
    }
}

/// A severity's one-cell glyph, readable without colour.
pub fn severity_glyph(s: Severity) -> &'static str {
    match s {
        Severity::Error => "✖",
        Severity::Warning => "▲",
        Severity::Info => "●",
    }
}

/// A round step for a time axis (1, 2, 5 × 10^n ms) that puts about `ticks` ticks on it.
pub fn axis_step(horizon_ms: i64, ticks: i64) -> i64 {
    let raw = (horizon_ms / ticks.max(1)).max(1);
    let mut p: i64 = 1;
    while p <= raw / 10 {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

/// How much of a nested attribute value [`any_value`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueLimits {
    /// Lists and maps nested deeper than this are `…`.
    pub depth: u32,
    /// Items of a list or map written, then `, …`.
    pub items: usize,
    /// Once the text is longer than this (bytes), nothing more is written.
    pub longest: usize,
    /// Characters of a map's key.
    pub key_chars: usize,
}

impl ValueLimits {
    /// Everything: the screen clips a value to its column when it draws it.
    pub const NONE: ValueLimits = ValueLimits {
        depth: u32::MAX,
        items: usize::MAX,
        longest: usize::MAX,
        key_chars: usize::MAX,
    };
    /// The page's: three levels deep, sixteen items a list, about 400 bytes (more than the 200
    /// characters `span_text::for_report` keeps anyway).
    pub const PAGE: ValueLimits = ValueLimits {
        depth: 3,
        items: 16,
        longest: 400,
        key_chars: 64,
    };
}

/// An OTLP attribute value as text, appended to `out` within `limits`: strings as they are,
/// lists `[a, b]`, maps `{k=v}`, bytes as their length.
pub fn any_value(out: &mut String, v: Option<&AnyValue>, limits: ValueLimits) {
    any_value_at(out, v, limits, 0);
}

fn any_value_at(out: &mut String, v: Option<&AnyValue>, limits: ValueLimits, depth: u32) {
    if out.len() > limits.longest {
        return;
    }
    match v.and_then(|v| v.value.as_ref()) {
        None => {}
        Some(Value::StringValue(s)) => {
            let room = limits.longest.saturating_sub(out.len());
            let mut cut = s.len().min(room);
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&s[..cut]);
        }
        Some(Value::BoolValue(b)) => {
            let _ = write!(out, "{b}");
        }
        Some(Value::IntValue(i)) => {
            let _ = write!(out, "{i}");
        }
        Some(Value::DoubleValue(d)) => {
            let _ = write!(out, "{d}");
        }
        Some(Value::BytesValue(b)) => {
            let _ = write!(out, "{} bytes", b.len());
        }
        Some(Value::ArrayValue(_) | Value::KvlistValue(_)) if depth >= limits.depth => {
            out.push('…')
        }
        Some(Value::ArrayValue(a)) => {
            out.push('[');
            for (i, item) in a.values.iter().take(limits.items).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                any_value_at(out, Some(item), limits, depth + 1);
            }
            if a.values.len() > limits.items {
                out.push_str(", …");
            }
            out.push(']');
        }
        Some(Value::KvlistValue(l)) => {
            out.push('{');
            for (i, kv) in l.values.iter().take(limits.items).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.extend(kv.key.chars().take(limits.key_chars));
                out.push('=');
                any_value_at(out, kv.value.as_ref(), limits, depth + 1);
            }
            if l.values.len() > limits.items {
                out.push_str(", …");
            }
            out.push('}');
        }
        #[allow(unreachable_patterns)]
        Some(_) => out.push('?'),
    }
}

/// The cells `s` takes on a terminal.
pub fn unicode_width(s: &str) -> usize {
    s.width()
}

/// `s` cut to `width` cells, its last cell a `…` when it did not fit.
pub fn fit(s: &str, width: usize) -> Cow<'_, str> {
    if unicode_width(s) <= width {
        return Cow::Borrowed(s);
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = unicode_width(c.encode_utf8(&mut [0; 4]));
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    Cow::Owned(out)
}

/// Word-wrap `s` into lines of at most `width` cells, at most `max_lines` of them: a word longer
/// than a line is cut across lines, and text that does not fit ends the last line with `…`.
pub fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let cell = |c: char| unicode_width(c.encode_utf8(&mut [0; 4]));
    let mut lines: Vec<String> = Vec::new();
    if width == 0 || max_lines == 0 {
        return lines;
    }
    let (mut line, mut used) = (String::new(), 0usize);
    let mut overflow = false;
    // Breaks only at ASCII spaces: a no-break space (U+00A0) keeps its neighbours together.
    'words: for word in s.split_ascii_whitespace() {
        let w = unicode_width(word);
        let gap = usize::from(used > 0);
        if used + gap + w <= width {
            if gap == 1 {
                line.push(' ');
            }
            line.push_str(word);
            used += gap + w;
            continue;
        }
        // Start a new line for the word (cutting it when it is longer than a line).
        let mut rest = word;
        loop {
            if used > 0 {
                if lines.len() + 1 == max_lines {
                    overflow = true;
                    break 'words;
                }
                lines.push(std::mem::take(&mut line));
                used = 0;
            }
            if unicode_width(rest) <= width {
                line.push_str(rest);
                used = unicode_width(rest);
                break;
            }
            let mut cut = 0;
            let mut cells = 0;
            for (i, c) in rest.char_indices() {
                if cells + cell(c) > width {
                    break;
                }
                cells += cell(c);
                cut = i + c.len_utf8();
            }
            if cut == 0 {
                // A character wider than the line: nothing can show it.
                break;
            }
            line.push_str(&rest[..cut]);
            used = cells;
            rest = &rest[cut..];
        }
    }
    if overflow {
        // Make room for the ellipsis at the end of the last line.
        while used + 1 > width {
            match line.pop() {
                Some(c) => used -= cell(c),
                None => break,
            }
        }
        let trimmed = line.trim_end().len();
        used -= line.len() - trimmed;
        line.truncate(trimmed);
        line.push('…');
    }
    if used > 0 || overflow {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fit_narrow_columns() {
        assert_eq!(ms(700), "700ms");
        assert_eq!(ms(-40), "-40ms");
        assert_eq!(ms(12_500), "12.5s");
        assert_eq!(ms(200_000), "3m20s");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(counted(1, "hop"), "1 hop");
        assert_eq!(counted(0, "finding"), "0 findings");
        assert_eq!(counted(1200, "finding"), "1,200 findings");
        assert_eq!(clock(1_764_430_925_120_000_000), "15:42:05.120");
        assert_eq!(ms(7_500_000), "2h05m");
        assert_eq!(ms_digits(938), "938");
        assert_eq!(ms_digits(200_000), "3m20s");
        assert_eq!(ms_grouped(-1254), "-1,254 ms");
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(axis_step(1000, 8), 200);
        assert_eq!(axis_step(1613, 8), 500);
        assert_eq!(axis_step(0, 8), 1);
        assert_eq!(axis_step(i64::MAX, 8), 2_000_000_000_000_000_000);
        assert_eq!(axis_step(i64::MAX, 1), i64::MAX);
    }

    #[test]
    fn fit_marks_a_cut_with_an_ellipsis() {
        assert_eq!(fit("orders GET /orders", 18), "orders GET /orders");
        assert_eq!(fit("orders GET /orders", 10), "orders GE…");
        assert_eq!(fit("→ café", 4), "→ c…");
        assert_eq!(fit("abc", 0), "");
    }

    #[test]
    fn wrap_breaks_at_spaces_cuts_long_words_and_marks_what_is_left_out() {
        assert_eq!(wrap("one two three", 7, 3), ["one two", "three"]);
        assert_eq!(wrap("  one   two  ", 20, 3), ["one two"]);
        assert_eq!(wrap("", 20, 3), Vec::<String>::new());
        assert_eq!(wrap("abcdefghij", 4, 3), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a b c d e f g h", 3, 2), ["a b", "c…"]);
        assert_eq!(wrap("aaaa bbbb cccc", 4, 2), ["aaaa", "bbb…"]);
        assert_eq!(wrap("→ café ✖ ok", 6, 3), ["→ café", "✖ ok"]);
        assert_eq!(wrap("after 600\u{a0}ms", 9, 3), ["after", "600\u{a0}ms"]);
        for line in wrap(&"word ".repeat(100), 30, 3) {
            assert!(super::unicode_width(&line) <= 30, "{line}");
        }
    }
}
