//! Every carrier parser of `deadline_budget::carrier`, fed arbitrary bytes, plus the round trip
//! `parse(format(parse(x))) == parse(x)`, and `read_headers` on a `HeaderMap` built from the
//! same bytes.
//!
//! Input: the whole input is one header value for the single-value parsers. For `read_headers`
//! it is read as lines `NAME:VALUE`; a NAME of one digit `0`..`4` stands for the carrier of that
//! index (so the fuzzer reaches them without guessing the names).
#![no_main]

use std::time::Duration;

use deadline_budget::analysis::BudgetSource;
use deadline_budget::carrier::{
    self, CONNECT_TIMEOUT_MS, GRPC_TIMEOUT, Received, X_BUDGET_MS, X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
    X_REQUEST_DEADLINE,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

const CARRIERS: [&str; 5] = [
    X_BUDGET_MS,
    GRPC_TIMEOUT,
    CONNECT_TIMEOUT_MS,
    X_REQUEST_DEADLINE,
    X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
];

/// Wall clocks to read `x-request-deadline` against: today, the epoch, and the extremes.
const NOWS: [i64; 5] = [1_764_430_000_000, 0, -1, i64::MIN, i64::MAX];

fn single_values(value: &str) {
    if let Ok(d) = carrier::parse_x_budget_ms(value) {
        assert!(d <= Duration::from_millis(carrier::MAX_BUDGET_MS));
        let text = carrier::format_x_budget_ms(d);
        assert_eq!(
            carrier::parse_x_budget_ms(&text),
            Ok(d),
            "x-budget-ms {value:?} -> {text:?}"
        );
    }
    if let Ok(d) = carrier::parse_grpc_timeout(value) {
        // A parsed value is whole units of one unit, and every finer unit divides it: the
        // formatter's pick is exact.
        let text = carrier::format_grpc_timeout(d);
        assert!(
            (2..=9).contains(&text.len()),
            "grpc-timeout {d:?} -> {text:?}"
        );
        assert_eq!(
            carrier::parse_grpc_timeout(&text),
            Ok(d),
            "grpc-timeout {value:?} -> {text:?}"
        );
    }
    if let Ok(d) = carrier::parse_connect_timeout_ms(value) {
        let text = carrier::format_connect_timeout_ms(d);
        assert_eq!(
            carrier::parse_connect_timeout_ms(&text),
            Ok(d),
            "connect {value:?} -> {text:?}"
        );
    }
    if let Ok(d) = carrier::parse_envoy_expected_rq_timeout_ms(value) {
        let text = carrier::format_envoy_expected_rq_timeout_ms(d);
        assert_eq!(
            carrier::parse_envoy_expected_rq_timeout_ms(&text),
            Ok(d),
            "envoy {value:?} -> {text:?}"
        );
    }
    let unix_ms = carrier::parse_request_deadline_unix_ms(value);
    if let Ok(ms) = unix_ms {
        assert!(ms >= 0);
        let text = carrier::format_request_deadline(ms);
        assert_eq!(carrier::parse_request_deadline_unix_ms(&text), Ok(ms));
    }
    // Today, the extremes, and a clock right next to the deadline itself (so the 24 h window
    // accepts it and the relative arithmetic runs).
    let near = unix_ms
        .clone()
        .ok()
        .map(|ms| ms.wrapping_sub(i64::from(value.len() as u8) * 1000));
    for now in NOWS.into_iter().chain(near) {
        match carrier::parse_request_deadline(value, now) {
            Ok(d) => {
                assert_eq!(Ok(d.unix_ms), unix_ms);
                assert!(d.remaining_ms.abs() <= carrier::MAX_DEADLINE_DISTANCE_MS);
                assert_eq!(d.remaining_ms, d.unix_ms - now);
                let text = carrier::format_request_deadline(d.unix_ms);
                assert_eq!(carrier::parse_request_deadline(&text, now), Ok(d));
            }
            Err(carrier::CarrierError::TooFarAway { .. }) => assert!(unix_ms.is_ok()),
            Err(e) => assert_eq!(Err(e), unix_ms.clone().map(|_| ())),
        }
    }
}

fn header_map(data: &[u8]) -> (HeaderMap, bool) {
    let mut map = HeaderMap::new();
    let mut has_carrier = false;
    for line in data.split(|&b| b == b'\n').take(16) {
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &b""[..]),
        };
        let name = match name {
            [d @ b'0'..=b'4'] => HeaderName::from_static(CARRIERS[usize::from(d - b'0')]),
            _ => match HeaderName::from_bytes(name) {
                Ok(n) => n,
                Err(_) => continue,
            },
        };
        let Ok(value) = HeaderValue::from_bytes(value) else {
            continue;
        };
        has_carrier |= CARRIERS.contains(&name.as_str());
        map.append(name, value);
    }
    (map, has_carrier)
}

fn check_headers(data: &[u8]) {
    let (map, has_carrier) = header_map(data);
    for now in NOWS {
        let got = carrier::read_headers(&map, now);
        assert_eq!(got == Received::None, !has_carrier, "{map:?} -> {got:?}");
        match &got {
            Received::Budget {
                budget,
                source,
                deadline_unix_ms,
            } => {
                assert!(source.has_budget());
                assert_eq!(
                    deadline_unix_ms.is_some(),
                    *source == BudgetSource::XRequestDeadline
                );
                // The budget is what the carrier's own parser says about the (first) value.
                let name = CARRIERS
                    .iter()
                    .find(|n| carrier_source(n) == *source)
                    .expect("a budget names one of the carriers");
                let text = map
                    .get(*name)
                    .and_then(|v| v.to_str().ok())
                    .expect("present and text");
                let again = match source {
                    BudgetSource::XRequestDeadline => {
                        carrier::parse_request_deadline(text, now).map(|d| d.remaining())
                    }
                    _ => parse_relative(*source, text),
                };
                assert_eq!(again, Ok(*budget));
            }
            Received::Invalid { header, .. } => assert!(CARRIERS.contains(&&**header)),
            Received::None => {}
        }
    }
}

fn carrier_source(name: &str) -> BudgetSource {
    match name {
        X_BUDGET_MS => BudgetSource::XBudgetMs,
        GRPC_TIMEOUT => BudgetSource::GrpcTimeout,
        CONNECT_TIMEOUT_MS => BudgetSource::ConnectTimeoutMs,
        X_REQUEST_DEADLINE => BudgetSource::XRequestDeadline,
        _ => BudgetSource::XEnvoyExpectedRqTimeoutMs,
    }
}

fn parse_relative(source: BudgetSource, text: &str) -> Result<Duration, carrier::CarrierError> {
    match source {
        BudgetSource::XBudgetMs => carrier::parse_x_budget_ms(text),
        BudgetSource::GrpcTimeout => carrier::parse_grpc_timeout(text),
        BudgetSource::ConnectTimeoutMs => carrier::parse_connect_timeout_ms(text),
        _ => carrier::parse_envoy_expected_rq_timeout_ms(text),
    }
}

fuzz_target!(|data: &[u8]| {
    single_values(&String::from_utf8_lossy(data));
    check_headers(data);
});
