//! The codecs' cases and property tests, and the built-in carriers' table.

use super::*;
use proptest::prelude::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn x_budget_ms_accepts_the_contract_range_only() {
    assert_eq!(parse_x_budget_ms("0"), Ok(ms(0)));
    assert_eq!(parse_x_budget_ms(" 820 "), Ok(ms(820)));
    assert_eq!(parse_x_budget_ms("2147483648"), Ok(ms(1 << 31)));
    assert_eq!(
        parse_x_budget_ms("2147483649"),
        Err(CarrierError::OutOfRange { max: MAX_BUDGET_MS })
    );
    assert_eq!(
        parse_x_budget_ms("99999999999999999999999"),
        Err(CarrierError::OutOfRange { max: MAX_BUDGET_MS })
    );
    assert_eq!(parse_x_budget_ms("-1"), Err(CarrierError::NotANumber));
    assert_eq!(parse_x_budget_ms("+1"), Err(CarrierError::NotANumber));
    assert_eq!(parse_x_budget_ms("1.5"), Err(CarrierError::NotANumber));
    assert_eq!(parse_x_budget_ms(""), Err(CarrierError::Empty));
}

#[test]
fn grpc_timeout_follows_the_grammar() {
    assert_eq!(parse_grpc_timeout("1H"), Ok(Duration::from_secs(3600)));
    assert_eq!(parse_grpc_timeout("2M"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_grpc_timeout("3S"), Ok(Duration::from_secs(3)));
    assert_eq!(parse_grpc_timeout("400m"), Ok(ms(400)));
    assert_eq!(parse_grpc_timeout("5u"), Ok(Duration::from_micros(5)));
    assert_eq!(parse_grpc_timeout("6n"), Ok(Duration::from_nanos(6)));
    assert_eq!(
        parse_grpc_timeout("99999999H"),
        Ok(Duration::from_secs(99_999_999 * 3600))
    );
    assert_eq!(
        parse_grpc_timeout("123456789m"),
        Err(CarrierError::TooManyDigits { max: 8 })
    );
    assert_eq!(parse_grpc_timeout("100"), Err(CarrierError::BadUnit));
    assert_eq!(parse_grpc_timeout("100s"), Err(CarrierError::BadUnit));
    assert_eq!(parse_grpc_timeout("m"), Err(CarrierError::Empty));
    assert_eq!(parse_grpc_timeout("-1m"), Err(CarrierError::NotANumber));
    assert_eq!(parse_grpc_timeout("1é"), Err(CarrierError::BadUnit));
}

#[test]
fn grpc_timeout_formats_with_the_finest_unit_that_fits() {
    // 820 ms is 820000000 ns: 9 digits, so microseconds is the finest unit that fits.
    assert_eq!(format_grpc_timeout(ms(820)), "820000u");
    assert_eq!(format_grpc_timeout(ms(99)), "99000000n");
    assert_eq!(format_grpc_timeout(ms(100)), "100000u");
    assert_eq!(format_grpc_timeout(Duration::from_secs(1000)), "1000000m");
    assert_eq!(format_grpc_timeout(Duration::from_secs(200_000)), "200000S");
    assert_eq!(format_grpc_timeout(Duration::ZERO), "0n");
    assert_eq!(format_grpc_timeout(Duration::MAX), "99999999H");
}

#[test]
fn connect_and_envoy_limit_digits() {
    assert_eq!(
        parse_connect_timeout_ms("9999999999"),
        Ok(ms(9_999_999_999))
    );
    assert_eq!(
        parse_connect_timeout_ms("10000000000"),
        Err(CarrierError::TooManyDigits { max: 10 })
    );
    assert_eq!(parse_envoy_expected_rq_timeout_ms("15000"), Ok(ms(15000)));
    assert_eq!(
        parse_envoy_expected_rq_timeout_ms("15s"),
        Err(CarrierError::NotANumber)
    );
}

#[test]
fn request_deadline_reads_ms_and_fractional_seconds() {
    let now = 1_764_430_000_000;
    let d = parse_request_deadline("1764430001500", now).unwrap();
    assert_eq!((d.unix_ms, d.remaining_ms), (1_764_430_001_500, 1500));
    let d = parse_request_deadline("1764430000.2", now).unwrap();
    assert_eq!(d.remaining_ms, 200);
    let d = parse_request_deadline("1764430000.123456", now).unwrap();
    assert_eq!(d.remaining_ms, 123);
    let past = parse_request_deadline("1764429999000", now).unwrap();
    assert_eq!(
        (past.remaining_ms, past.remaining()),
        (-1000, Duration::ZERO)
    );
    assert!(matches!(
        parse_request_deadline("1764530000000", now),
        Err(CarrierError::TooFarAway { .. })
    ));
    assert!(matches!(
        parse_request_deadline("1", now),
        Err(CarrierError::TooFarAway { .. })
    ));
    assert_eq!(
        parse_request_deadline("1764430000.", now),
        Err(CarrierError::NotANumber)
    );
    assert_eq!(
        parse_request_deadline("1764430000.2.5", now),
        Err(CarrierError::NotANumber)
    );
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.insert(*k, v.parse().unwrap());
    }
    map
}

#[test]
fn headers_are_read_in_the_contract_order() {
    let got = read_headers(
        &headers(&[("grpc-timeout", "2S"), ("x-budget-ms", "700")]),
        0,
    );
    assert_eq!(got.source(), BudgetSource::XBudgetMs);
    assert_eq!(got.budget(), Some(ms(700)));

    // An invalid first carrier falls through to the next valid one.
    let got = read_headers(
        &headers(&[("x-budget-ms", "lots"), ("connect-timeout-ms", "300")]),
        0,
    );
    assert_eq!(got.source(), BudgetSource::ConnectTimeoutMs);
    assert_eq!(got.budget(), Some(ms(300)));

    let got = read_headers(&headers(&[("x-request-deadline", "10250")]), 10_000);
    assert_eq!(
        got,
        Received::Budget {
            budget: ms(250),
            source: BudgetSource::XRequestDeadline,
            deadline_unix_ms: Some(10_250)
        }
    );
    let got = read_headers(&headers(&[("x-envoy-expected-rq-timeout-ms", "1500")]), 0);
    assert_eq!(got.source(), BudgetSource::XEnvoyExpectedRqTimeoutMs);
    assert_eq!(read_headers(&HeaderMap::new(), 0), Received::None);
}

#[test]
fn only_invalid_carriers_report_the_first_raw_value() {
    let got = read_headers(
        &headers(&[("grpc-timeout", "123456789S"), ("x-budget-ms", "-3")]),
        0,
    );
    assert_eq!(
        got,
        Received::Invalid {
            header: X_BUDGET_MS.into(),
            value: "-3".into(),
            error: CarrierError::NotANumber
        }
    );
    assert_eq!(got.source(), BudgetSource::Invalid);
    let mut map = HeaderMap::new();
    map.insert(
        "x-budget-ms",
        http::HeaderValue::from_bytes(b"12\xff").unwrap(),
    );
    assert!(matches!(
        read_headers(&map, 0),
        Received::Invalid {
            error: CarrierError::NotText,
            ..
        }
    ));
}

proptest! {
    #[test]
    fn x_budget_ms_round_trips(n in 0u64..=MAX_BUDGET_MS) {
        prop_assert_eq!(parse_x_budget_ms(&format_x_budget_ms(ms(n))), Ok(ms(n)));
    }

    #[test]
    fn x_budget_ms_rounds_down(nanos in 0u64..u64::MAX) {
        let d = Duration::from_nanos(nanos);
        let back = parse_x_budget_ms(&format_x_budget_ms(d)).unwrap();
        prop_assert!(back <= d);
    }

    #[test]
    fn grpc_timeout_round_trips_within_one_unit(secs in 0u64..400_000_000_000, sub in 0u32..1_000_000_000) {
        let d = Duration::new(secs, sub);
        let text = format_grpc_timeout(d);
        let digits = text.len() - 1;
        prop_assert!((1..=8).contains(&digits), "{}", text);
        let back = parse_grpc_timeout(&text).unwrap();
        prop_assert!(back <= d);
        // The unit picked is the finest that fits, so the value keeps more than a million
        // units: the loss is below one part in a million, unless capped at 99999999H.
        if secs < 99_999_999 * 3600 {
            prop_assert!((d - back).as_nanos() * 1_000_000 <= d.as_nanos(), "{:?} -> {}", d, text);
        }
    }

    #[test]
    fn grpc_timeout_is_exact_below_100ms(nanos in 0u64..100_000_000) {
        let d = Duration::from_nanos(nanos);
        prop_assert_eq!(parse_grpc_timeout(&format_grpc_timeout(d)), Ok(d));
    }

    #[test]
    fn connect_timeout_round_trips(n in 0u64..=9_999_999_999) {
        prop_assert_eq!(parse_connect_timeout_ms(&format_connect_timeout_ms(ms(n))), Ok(ms(n)));
        prop_assert_eq!(parse_envoy_expected_rq_timeout_ms(&format_envoy_expected_rq_timeout_ms(ms(n))), Ok(ms(n)));
    }

    #[test]
    fn request_deadline_round_trips(now in 0i64..4_000_000_000_000, ahead in -86_400_000i64..=86_400_000) {
        let unix_ms = now + ahead;
        prop_assume!(unix_ms >= 0);
        let d = parse_request_deadline(&format_request_deadline(unix_ms), now).unwrap();
        prop_assert_eq!((d.unix_ms, d.remaining_ms), (unix_ms, ahead));
    }

    #[test]
    fn arbitrary_text_never_panics(s in ".*") {
        let _ = parse_x_budget_ms(&s);
        let _ = parse_grpc_timeout(&s);
        let _ = parse_connect_timeout_ms(&s);
        let _ = parse_envoy_expected_rq_timeout_ms(&s);
        let _ = parse_request_deadline(&s, 1_764_430_000_000);
        let _ = parse_request_deadline(&s, i64::MIN);
        let _ = parse_request_deadline(&s, i64::MAX);
    }

    #[test]
    fn arbitrary_header_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(value) = http::HeaderValue::from_bytes(&bytes) {
            for name in [X_BUDGET_MS, GRPC_TIMEOUT, CONNECT_TIMEOUT_MS, X_REQUEST_DEADLINE, X_ENVOY_EXPECTED_RQ_TIMEOUT_MS] {
                let mut map = HeaderMap::new();
                map.insert(name, value.clone());
                let got = read_headers(&map, 1_764_430_000_000);
                prop_assert!(got != Received::None);
            }
        }
    }

    #[test]
    fn digit_like_strings_never_panic(s in "[0-9.HMSmun+ -]{0,30}") {
        let _ = parse_grpc_timeout(&s);
        let _ = parse_request_deadline(&s, 0);
        let _ = parse_x_budget_ms(&s);
    }
}

#[test]
fn each_builtin_source_names_its_own_entry() {
    for (i, entry) in BUILTIN.iter().enumerate() {
        let back = entry.source.builtin().map(|c| c.name);
        assert_eq!(back, Some(entry.name), "entry {i}");
        assert_eq!(entry.source.as_str(), entry.name);
        assert_eq!(BudgetSource::parse(entry.name), Some(entry.source));
        assert_eq!(entry.source.tag(), entry.tag);
        assert_eq!(
            Carriers::builtin().get(i).map(Carrier::name),
            Some(entry.name)
        );
    }
    for other in [
        BudgetSource::Default,
        BudgetSource::Invalid,
        BudgetSource::None,
        BudgetSource::Header(Form::Ms),
    ] {
        assert!(other.builtin().is_none(), "{other:?}");
    }
    assert_eq!(
        BudgetSource::parse("header:x-team"),
        Some(BudgetSource::Header(Form::Ms))
    );
    assert_eq!(BudgetSource::parse("default"), Some(BudgetSource::Default));
    assert_eq!(BudgetSource::parse("x-nothing"), None);
}
