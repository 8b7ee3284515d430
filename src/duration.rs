//! Durations as people write them on a command line (`15s`, `500ms`, `2m`, `1h`, or a bare
//! number of seconds): one parser for every flag of `budget-top` and `budget-demo` that takes a
//! duration (`--idle`, `--for`), so the two tools read the same text the same way.

use std::time::Duration;

/// Parse a duration like `15s`, `500ms`, `2m`, `1h` or a bare number of seconds (fractions
/// allowed). The error says what was expected, for clap to show.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("expected a duration like 15s or 500ms, got {text:?}"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?}: {e}"))
}

/// A duration as a person reads it, in the largest unit that says it whole: `1h`, `1h 30m`,
/// `2m`, `90s`, `1.5s`, `500ms` (each but `1h 30m` also what [`parse_duration`] reads). Every duration `budget-top` and `budget-demo` print to a
/// person goes through here, so `--for 1h` is never echoed as `60m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".to_owned()
    } else if ms.is_multiple_of(60_000) {
        let minutes = ms / 60_000;
        match (minutes / 60, minutes % 60) {
            (0, m) => format!("{m}m"),
            (h, 0) => format!("{h}h"),
            (h, m) => format!("{h}h {m}m"),
        }
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        format!("{}s", ms as f64 / 1000.0)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_the_usual_units() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn durations_print_as_they_are_written() {
        let cases = [
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(5400), "1h 30m"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::ZERO, "0s"),
        ];
        for (d, text) in cases {
            assert_eq!(format_duration(d), text, "{d:?}");
            if !text.contains(' ') {
                assert_eq!(parse_duration(text), Ok(d), "{text} reads back");
            }
        }
    }
}
