//! Strings that came from a span (service and span names, attribute values, messages), made
//! safe to show: a hostile or careless service must not move the cursor, reorder text or break
//! a layout. Both ways out remove the same characters ([`is_unsafe_char`]); they differ in what
//! a control character becomes, and why:
//!
//! - [`for_screen`] removes it: the screen's cells are fitted to columns, and a value is
//!   clipped to its column when drawn.
//! - [`for_report`] turns it into a space and cuts long values: a report line keeps words
//!   apart and stays readable in a CI log.

use std::borrow::Cow;

/// For the screen: every [`is_unsafe_char`] removed (borrowed when there is none, as for most
/// names).
pub fn for_screen(s: &str) -> Cow<'_, str> {
    if s.chars().any(is_unsafe_char) {
        Cow::Owned(s.chars().filter(|c| !is_unsafe_char(*c)).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// For a line of a report (the text report, and the HTML report before escaping): control
/// characters (escape sequences, newlines, tabs) become spaces, so words stay apart;
/// [`hidden`] characters are removed (a span name cannot reorder or hide the text around it);
/// values longer than 200 characters are cut, with `…`.
pub fn for_report(s: &str) -> String {
    let mut out: String = s
        .chars()
        .filter(|&c| !hidden(c))
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().filter(|&c| !hidden(c)).nth(200).is_some() {
        out.push('…');
    }
    out
}

/// Characters that change how the text around them reads without showing themselves: the
/// bidirectional embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069), and
/// the zero-width and other invisible format characters (U+200B-U+200F, U+2060-U+206F, U+FEFF,
/// the soft hyphen, variation selectors, tags...), which take no cell: they misalign columns
/// and make one name look like another.
pub fn hidden(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{034f}'
            | '\u{061c}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{3164}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Whether a character from a span must not reach a terminal as it is: a control character
/// (escape sequences, newlines, tabs move the cursor) or a [`hidden`] one.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control() || hidden(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_screen_removes_control_characters() {
        assert_eq!(for_screen("ok"), "ok");
        assert_eq!(for_screen("evil\x1b[2Jname\n\t"), "evil[2Jname");
        assert_eq!(for_screen("a\u{7f}b\u{9b}c"), "abc");
        // Bidirectional overrides and zero-width characters would reorder or misalign a title.
        assert_eq!(
            for_screen("pay\u{202e}lanoitan\u{202c}\u{200b}-\u{2066}x\u{2069}\u{feff}"),
            "paylanoitan-x"
        );
    }

    #[test]
    fn the_screen_removes_what_the_report_turns_into_spaces() {
        assert_eq!(for_screen("a\x1b[2Jb\nc"), "a[2Jbc");
        assert_eq!(for_screen("or\u{200b}ders"), "orders");
        assert!(matches!(for_screen("orders"), Cow::Borrowed("orders")));
        // No cut: the screen fits values to their column itself.
        assert_eq!(for_screen(&"x".repeat(300)).chars().count(), 300);
    }

    #[test]
    fn span_strings_cannot_reach_the_terminal_as_escapes() {
        assert_eq!(for_report("a\x1b[2Jb\nc"), "a [2Jb c");
        assert_eq!(for_report(&"x".repeat(300)).chars().count(), 201);
    }

    #[test]
    fn span_strings_cannot_reorder_or_hide_text() {
        // RIGHT-TO-LEFT OVERRIDE would show "gpj.exe" as "exe.jpg"; zero-width characters make
        // two names look the same.
        assert_eq!(for_report("a\u{202e}gpj.exe\u{202c}"), "agpj.exe");
        assert_eq!(for_report("or\u{200b}ders\u{2066}\u{feff}"), "orders");
        assert_eq!(for_report("ملف"), "ملف");
        assert_eq!(
            for_report(
                "svc\u{202e}nimda\u{202c}\u{200b}x\u{feff}\u{2066}y\u{2069}\u{e0041}\u{00ad}"
            ),
            "svcnimdaxy"
        );
        // Every kept character takes the cells its width says.
        for c in [
            '\u{200d}',
            '\u{2060}',
            '\u{00ad}',
            '\u{e0041}',
            '\u{061c}',
            '\u{1b}',
        ] {
            assert!(is_unsafe_char(c), "{c:?}");
        }
        for c in ['é', '→', '日', ' ', '-', 'م'] {
            assert!(!is_unsafe_char(c), "{c:?}");
        }
    }
}
