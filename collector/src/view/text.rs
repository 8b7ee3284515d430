//! Small text helpers: making span-provided strings safe to draw, and formatting numbers.

use std::borrow::Cow;

/// Remove control characters (escape sequences, newlines, tabs) from a string that came from a
/// span, so a hostile or careless service cannot move the cursor or break the layout.
pub fn clean(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_control) {
        Cow::Owned(s.chars().filter(|c| !c.is_control()).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// Milliseconds for a narrow column: `850ms`, `12.5s`, `3m20s`.
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

/// A rate with one decimal when small: `0.4`, `12.5`, `1,234`.
pub fn rate(v: f64) -> String {
    if v < 100.0 {
        format!("{v:.1}")
    } else {
        count(v.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_removed() {
        assert_eq!(clean("ok"), "ok");
        assert_eq!(clean("evil\x1b[2Jname\n\t"), "evil[2Jname");
        assert_eq!(clean("a\u{7f}b\u{9b}c"), "abc");
    }

    #[test]
    fn numbers_fit_narrow_columns() {
        assert_eq!(ms(700), "700ms");
        assert_eq!(ms(-40), "-40ms");
        assert_eq!(ms(12_500), "12.5s");
        assert_eq!(ms(200_000), "3m20s");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(clock(1_764_430_925_120_000_000), "15:42:05.120");
    }
}
