//! The wire carriers of a budget (`CONVENTIONS.md` section 1): parse and format each header,
//! and read a whole [`HeaderMap`] in the contract's order.
//!
//! Each built-in carrier is one entry of [`BUILTIN`]: its header name (which is also its
//! `budget.source` value), its form and parser, its [`BudgetSource`] and the tag a waterfall
//! writes beside a budget it brought. Reading headers ([`Carriers::builtin`]), the collector's
//! decoder, [`BudgetSource::as_str`], [`BudgetSource::parse_with`] and [`BudgetSource::tag`]
//! all read that table: a new built-in carrier is a variant of [`BudgetSource`], its parser and
//! its entry, all in this file.
//!
//! Every parser takes the header value as `&str` and returns a typed [`CarrierError`] for
//! anything malformed, negative or absurd; none of them panics, whatever the bytes. The collector
//! uses the same functions to decode headers captured by other SDKs
//! (`http.request.header.grpc-timeout`...).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName};
use thiserror::Error;

/// Header name of our own relative budget, in integer milliseconds.
pub const X_BUDGET_MS: &str = "x-budget-ms";
/// Header name of gRPC's timeout (`1-8 digits` + unit).
pub const GRPC_TIMEOUT: &str = "grpc-timeout";
/// Header name of the Connect protocol's timeout, in integer milliseconds.
pub const CONNECT_TIMEOUT_MS: &str = "connect-timeout-ms";
/// Header name of an absolute deadline (Unix ms, or Unix seconds with a fraction).
pub const X_REQUEST_DEADLINE: &str = "x-request-deadline";
/// Header name of the timeout Envoy expects, in integer milliseconds.
pub const X_ENVOY_EXPECTED_RQ_TIMEOUT_MS: &str = "x-envoy-expected-rq-timeout-ms";

/// The largest `x-budget-ms` value the contract accepts: 2^31 ms (about 24.8 days).
pub const MAX_BUDGET_MS: u64 = 1 << 31;
/// The most digits a `grpc-timeout` value may have (gRPC's grammar).
pub const MAX_GRPC_DIGITS: usize = 8;
/// The most digits a `connect-timeout-ms` value may have (Connect's grammar).
pub const MAX_CONNECT_DIGITS: usize = 10;
/// The most digits an `x-envoy-expected-rq-timeout-ms` value may have.
pub const MAX_ENVOY_DIGITS: usize = 10;
/// An absolute deadline further than this from the receiver's clock (either way) is absurd.
pub const MAX_DEADLINE_DISTANCE_MS: i64 = 24 * 60 * 60 * 1000;

/// `budget.source` of a hop that set its own budget (`semconv::source::DEFAULT`).
pub const SOURCE_DEFAULT: &str = "default";
/// `budget.source` when a carrier was present but its value could not be trusted
/// (`semconv::source::INVALID`).
pub const SOURCE_INVALID: &str = "invalid";
/// `budget.source` when there was no budget at all (`semconv::source::NONE`).
pub const SOURCE_NONE: &str = "none";
/// `budget.source` of a team's own carrier: `header:<name>` (`semconv::source::HEADER_PREFIX`).
pub const SOURCE_HEADER_PREFIX: &str = "header:";

/// Why a carrier value was rejected. The value is then treated as absent and reported as
/// `budget.source = "invalid"`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CarrierError {
    /// The value is empty (after trimming surrounding spaces).
    #[error("empty value")]
    Empty,
    /// The value has a character that is not a decimal digit where one is required.
    #[error("not a decimal number")]
    NotANumber,
    /// The value has more digits than its carrier allows.
    #[error("more than {max} digits")]
    TooManyDigits {
        /// The carrier's limit.
        max: usize,
    },
    /// The number does not fit the carrier's range.
    #[error("out of range (at most {max})")]
    OutOfRange {
        /// The carrier's largest value.
        max: u64,
    },
    /// A `grpc-timeout` without one of the units `H M S m u n`.
    #[error("missing or unknown grpc-timeout unit (expected one of H M S m u n)")]
    BadUnit,
    /// An absolute deadline more than 24 h away from the receiver's clock.
    #[error("deadline {distance_ms} ms away from now (more than 24 h)")]
    TooFarAway {
        /// Deadline minus now, in ms.
        distance_ms: i64,
    },
    /// The header value is not visible ASCII text.
    #[error("not visible ASCII text")]
    NotText,
}

/// Strip the optional whitespace HTTP allows around a field value.
fn trim(value: &str) -> &str {
    value.trim_matches(|c| c == ' ' || c == '\t')
}

/// Parse an all-digits string of at most `max_digits` digits (leading zeros count).
fn parse_digits(value: &str, max_digits: usize) -> Result<u64, CarrierError> {
    if value.is_empty() {
        return Err(CarrierError::Empty);
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CarrierError::NotANumber);
    }
    if value.len() > max_digits {
        return Err(CarrierError::TooManyDigits { max: max_digits });
    }
    // At most 19 digits always fit in a u64; callers pass limits below that.
    value
        .bytes()
        .try_fold(0u64, |acc, b| {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
        .ok_or(CarrierError::OutOfRange { max: u64::MAX })
}

/// Parse `x-budget-ms`: integer milliseconds, `0..=2^31`.
///
/// ```
/// use std::time::Duration;
/// use deadline_budget::carrier::parse_x_budget_ms;
/// assert_eq!(parse_x_budget_ms("1200"), Ok(Duration::from_millis(1200)));
/// assert!(parse_x_budget_ms("-5").is_err());
/// ```
pub fn parse_x_budget_ms(value: &str) -> Result<Duration, CarrierError> {
    let value = trim(value);
    // 2^31 has 10 digits; allow leading zeros up to 19 digits before the range check.
    let ms = parse_digits(value, 19).map_err(|e| match e {
        CarrierError::TooManyDigits { .. } => CarrierError::OutOfRange { max: MAX_BUDGET_MS },
        other => other,
    })?;
    if ms > MAX_BUDGET_MS {
        return Err(CarrierError::OutOfRange { max: MAX_BUDGET_MS });
    }
    Ok(Duration::from_millis(ms))
}

/// Format `x-budget-ms`: whole milliseconds, rounded down (the callee must never believe it has
/// longer than its caller will wait), capped at 2^31.
pub fn format_x_budget_ms(budget: Duration) -> String {
    let ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
    ms.min(MAX_BUDGET_MS).to_string()
}

/// Parse `grpc-timeout` exactly as gRPC's grammar says: 1 to 8 ASCII digits followed by one unit,
/// `H` (hours), `M` (minutes), `S` (seconds), `m` (ms), `u` (µs) or `n` (ns).
///
/// ```
/// use std::time::Duration;
/// use deadline_budget::carrier::parse_grpc_timeout;
/// assert_eq!(parse_grpc_timeout("820m"), Ok(Duration::from_millis(820)));
/// assert!(parse_grpc_timeout("123456789m").is_err());
/// ```
pub fn parse_grpc_timeout(value: &str) -> Result<Duration, CarrierError> {
    let value = trim(value);
    let Some(unit) = value.chars().last() else {
        return Err(CarrierError::Empty);
    };
    let digits = &value[..value.len() - unit.len_utf8()];
    if unit.is_ascii_digit() {
        return Err(CarrierError::BadUnit);
    }
    let nanos_per_unit: u64 = match unit {
        'H' => 3_600_000_000_000,
        'M' => 60_000_000_000,
        'S' => 1_000_000_000,
        'm' => 1_000_000,
        'u' => 1_000,
        'n' => 1,
        _ => return Err(CarrierError::BadUnit),
    };
    let n = parse_digits(digits, MAX_GRPC_DIGITS)?;
    // 99_999_999 H in ns overflows u64; build the Duration in wide arithmetic instead.
    let nanos = u128::from(n) * u128::from(nanos_per_unit);
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder is below 10^9 so it fits in u32.
    let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, sub))
}

/// Format `grpc-timeout` with the finest unit whose value fits in 8 digits, rounding down.
/// Durations beyond `99999999H` are capped there.
pub fn format_grpc_timeout(timeout: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let nanos = timeout.as_nanos();
    for (unit, per) in [
        ('n', 1u128),
        ('u', 1_000),
        ('m', 1_000_000),
        ('S', 1_000_000_000),
        ('M', 60_000_000_000),
        ('H', 3_600_000_000_000),
    ] {
        let n = nanos / per;
        if n <= MAX {
            return format!("{n}{unit}");
        }
    }
    format!("{MAX}H")
}

/// Parse `connect-timeout-ms`: integer milliseconds, at most 10 digits.
pub fn parse_connect_timeout_ms(value: &str) -> Result<Duration, CarrierError> {
    parse_digits(trim(value), MAX_CONNECT_DIGITS).map(Duration::from_millis)
}

/// Format `connect-timeout-ms`: whole milliseconds rounded down, capped at 10 digits.
pub fn format_connect_timeout_ms(timeout: Duration) -> String {
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    ms.min(9_999_999_999).to_string()
}

/// Parse `x-envoy-expected-rq-timeout-ms`: integer milliseconds, at most 10 digits.
pub fn parse_envoy_expected_rq_timeout_ms(value: &str) -> Result<Duration, CarrierError> {
    parse_digits(trim(value), MAX_ENVOY_DIGITS).map(Duration::from_millis)
}

/// Format `x-envoy-expected-rq-timeout-ms`: whole milliseconds rounded down, capped at 10 digits.
pub fn format_envoy_expected_rq_timeout_ms(timeout: Duration) -> String {
    format_connect_timeout_ms(timeout)
}

/// An absolute deadline read from `x-request-deadline`, seen from the receiver's wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestDeadline {
    /// The deadline as Unix milliseconds (fractions of a millisecond dropped).
    pub unix_ms: i64,
    /// `unix_ms - now`: the relative budget at arrival; negative when already past.
    pub remaining_ms: i64,
}

impl RequestDeadline {
    /// The relative budget at arrival; zero when the deadline is already past.
    pub fn remaining(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.remaining_ms).unwrap_or(0))
    }
}

/// Parse the absolute `x-request-deadline` alone, without a clock: integer Unix milliseconds
/// (`1764430000250`) or Unix seconds with a fraction (`1764430000.25`). Returns Unix ms.
pub fn parse_request_deadline_unix_ms(value: &str) -> Result<i64, CarrierError> {
    let value = trim(value);
    let ms = match value.split_once('.') {
        None => parse_digits(value, 18)?,
        Some((secs, frac)) => {
            let secs = parse_digits(secs, 15)?;
            if frac.is_empty() {
                return Err(CarrierError::NotANumber);
            }
            if !frac.bytes().all(|b| b.is_ascii_digit()) {
                return Err(CarrierError::NotANumber);
            }
            // Milliseconds: the first three fraction digits, padded with zeros.
            let mut frac_ms = 0u64;
            for i in 0..3 {
                let d = frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
                frac_ms = frac_ms * 10 + d;
            }
            secs * 1000 + frac_ms
        }
    };
    i64::try_from(ms).map_err(|_| CarrierError::OutOfRange {
        max: i64::MAX as u64,
    })
}

/// Parse `x-request-deadline` and turn it into a relative budget against the receiver's wall
/// clock `now_unix_ms`. A deadline more than 24 h away (in either direction) is rejected.
///
/// ```
/// use deadline_budget::carrier::parse_request_deadline;
/// let d = parse_request_deadline("1764430000.25", 1_764_430_000_000).unwrap();
/// assert_eq!((d.unix_ms, d.remaining_ms), (1_764_430_000_250, 250));
/// ```
pub fn parse_request_deadline(
    value: &str,
    now_unix_ms: i64,
) -> Result<RequestDeadline, CarrierError> {
    let unix_ms = parse_request_deadline_unix_ms(value)?;
    let remaining_ms = unix_ms.saturating_sub(now_unix_ms);
    if remaining_ms.saturating_abs() > MAX_DEADLINE_DISTANCE_MS {
        return Err(CarrierError::TooFarAway {
            distance_ms: remaining_ms,
        });
    }
    Ok(RequestDeadline {
        unix_ms,
        remaining_ms,
    })
}

/// Format `x-request-deadline` as integer Unix milliseconds.
pub fn format_request_deadline(unix_ms: i64) -> String {
    unix_ms.to_string()
}

/// The wall clock as Unix milliseconds (zero before 1970, which does not happen).
pub fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How a carrier writes its value (`--budget-header NAME=FORM`, `CONVENTIONS.md` section 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// `ms`: relative integer milliseconds, `0..=2^31`.
    Ms,
    /// `s`: relative seconds, a fraction allowed (`1.5`).
    Seconds,
    /// `deadline-ms`: an absolute Unix time in integer milliseconds.
    DeadlineMs,
    /// `deadline-s`: an absolute Unix time in seconds, a fraction allowed.
    DeadlineSeconds,
    /// `grpc`: gRPC's grammar (1 to 8 digits and a unit `H M S m u n`).
    Grpc,
}

impl Form {
    /// Every form, in the order `--help` lists them.
    pub const ALL: [Form; 5] = [
        Form::Ms,
        Form::Seconds,
        Form::DeadlineMs,
        Form::DeadlineSeconds,
        Form::Grpc,
    ];

    /// The name `--budget-header NAME=FORM` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Ms => "ms",
            Form::Seconds => "s",
            Form::DeadlineMs => "deadline-ms",
            Form::DeadlineSeconds => "deadline-s",
            Form::Grpc => "grpc",
        }
    }

    /// The form named `name`, if any.
    pub fn parse(name: &str) -> Option<Form> {
        Form::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// Whether the value is an absolute time: read on the receiver's clock, so skew-prone.
    pub fn is_absolute(self) -> bool {
        matches!(self, Form::DeadlineMs | Form::DeadlineSeconds)
    }

    /// The carrier's own rounding, in ms, added to the tolerance of the rules that compare it.
    pub fn rounding_ms(self) -> i64 {
        match self {
            Form::Ms | Form::DeadlineMs => 0,
            Form::Seconds | Form::DeadlineSeconds | Form::Grpc => 1,
        }
    }
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a hop's budget came from (`budget.source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetSource {
    /// `x-budget-ms`
    XBudgetMs,
    /// `grpc-timeout`
    GrpcTimeout,
    /// `connect-timeout-ms`
    ConnectTimeoutMs,
    /// `x-request-deadline` (absolute, skew-prone)
    XRequestDeadline,
    /// `x-envoy-expected-rq-timeout-ms`
    XEnvoyExpectedRqTimeoutMs,
    /// A team's own carrier (`header:<name>`, `--budget-header NAME=FORM`), read in this form.
    Header(Form),
    /// The edge set its own budget.
    Default,
    /// A carrier was present but invalid.
    Invalid,
    /// No budget.
    None,
}

impl BudgetSource {
    /// The built-in carrier this source names, if it names one: its entry in [`BUILTIN`].
    pub fn builtin(self) -> Option<&'static BuiltinCarrier> {
        // The position of each built-in carrier's entry (a test checks they agree).
        let index = match self {
            BudgetSource::XBudgetMs => 0,
            BudgetSource::GrpcTimeout => 1,
            BudgetSource::ConnectTimeoutMs => 2,
            BudgetSource::XRequestDeadline => 3,
            BudgetSource::XEnvoyExpectedRqTimeoutMs => 4,
            BudgetSource::Header(_)
            | BudgetSource::Default
            | BudgetSource::Invalid
            | BudgetSource::None => return None,
        };
        BUILTIN.get(index)
    }

    /// The contract's string for this source.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetSource::Header(_) => "header",
            BudgetSource::Default => SOURCE_DEFAULT,
            BudgetSource::Invalid => SOURCE_INVALID,
            BudgetSource::None => SOURCE_NONE,
            builtin => builtin.builtin().map_or("", |c| c.name),
        }
    }

    /// The tag a waterfall writes beside a budget from this source (`grpc`, `abs`...): empty
    /// for the contract's own `x-budget-ms` and for sources that are not a carrier.
    pub fn tag(self) -> &'static str {
        match self {
            BudgetSource::Header(_) => "hdr",
            BudgetSource::Default | BudgetSource::Invalid | BudgetSource::None => "",
            builtin => builtin.builtin().map_or("", |c| c.tag),
        }
    }

    /// Parse the contract's string; unknown strings give `None`. A team's own carrier
    /// (`header:<name>`) is read as relative milliseconds; [`BudgetSource::parse_with`] knows
    /// the forms of the carriers it was told about.
    pub fn parse(value: &str) -> Option<Self> {
        Self::parse_with(value, Carriers::builtin())
    }

    /// [`BudgetSource::parse`], taking the form of a team's own carrier from `carriers`.
    pub fn parse_with(value: &str, carriers: &Carriers) -> Option<Self> {
        if let Some(name) = value.strip_prefix(SOURCE_HEADER_PREFIX) {
            return Some(BudgetSource::Header(
                carriers.own_form(name).unwrap_or(Form::Ms),
            ));
        }
        if let Some(c) = BUILTIN.iter().find(|c| c.name == value) {
            return Some(c.source);
        }
        Some(match value {
            SOURCE_DEFAULT => BudgetSource::Default,
            SOURCE_INVALID => BudgetSource::Invalid,
            SOURCE_NONE => BudgetSource::None,
            _ => return None,
        })
    }

    /// Whether the hop had a budget it could work to (received or its own default).
    pub fn has_budget(self) -> bool {
        !matches!(self, BudgetSource::Invalid | BudgetSource::None)
    }

    /// The form of the carrier this source names, if it names one.
    pub fn form(self) -> Option<Form> {
        match self {
            BudgetSource::Header(form) => Some(form),
            builtin => builtin.builtin().map(|c| c.form),
        }
    }

    /// Whether the budget came as an absolute time, read on the receiver's clock (skew-prone).
    pub fn is_absolute(self) -> bool {
        self.form().is_some_and(Form::is_absolute)
    }
}

/// Parse a relative number of seconds with an optional fraction (`2`, `1.5`, `0.250`), capped
/// like `x-budget-ms` at 2^31 ms.
pub fn parse_seconds(value: &str) -> Result<Duration, CarrierError> {
    let value = trim(value);
    let (secs, frac) = value.split_once('.').unwrap_or((value, ""));
    let secs = parse_digits(secs, 10).map_err(|e| match e {
        CarrierError::TooManyDigits { .. } => CarrierError::OutOfRange { max: MAX_BUDGET_MS },
        other => other,
    })?;
    if value.contains('.') && (frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit())) {
        return Err(CarrierError::NotANumber);
    }
    // Nanoseconds from the first nine fraction digits; the rest cannot matter.
    let mut nanos = 0u32;
    for i in 0..9 {
        let d = frac.as_bytes().get(i).map_or(0, |b| u32::from(b - b'0'));
        nanos = nanos * 10 + d;
    }
    let budget = Duration::new(secs, nanos);
    if budget > Duration::from_millis(MAX_BUDGET_MS) {
        return Err(CarrierError::OutOfRange { max: MAX_BUDGET_MS });
    }
    Ok(budget)
}

/// Parse an absolute Unix time in seconds with an optional fraction; returns Unix ms.
pub fn parse_unix_seconds(value: &str) -> Result<i64, CarrierError> {
    let value = trim(value);
    if value.contains('.') {
        // `x-request-deadline`'s seconds-with-a-fraction form.
        return parse_request_deadline_unix_ms(value);
    }
    let secs = parse_digits(value, 15)?;
    i64::try_from(secs * 1000).map_err(|_| CarrierError::OutOfRange {
        max: i64::MAX as u64,
    })
}

/// Parse an absolute Unix time in integer milliseconds.
pub fn parse_unix_ms(value: &str) -> Result<i64, CarrierError> {
    let ms = parse_digits(trim(value), 18)?;
    i64::try_from(ms).map_err(|_| CarrierError::OutOfRange {
        max: i64::MAX as u64,
    })
}

/// A decoded carrier value: the relative budget at `now`, and the absolute deadline (Unix ms)
/// when the carrier holds one.
type Decoded = (Duration, Option<i64>);

fn absolute(unix_ms: i64, now_unix_ms: i64) -> Result<Decoded, CarrierError> {
    let remaining_ms = unix_ms.saturating_sub(now_unix_ms);
    if remaining_ms.saturating_abs() > MAX_DEADLINE_DISTANCE_MS {
        return Err(CarrierError::TooFarAway {
            distance_ms: remaining_ms,
        });
    }
    let budget = Duration::from_millis(u64::try_from(remaining_ms).unwrap_or(0));
    Ok((budget, Some(unix_ms)))
}

/// Reads one carrier value against the receiver's wall clock (Unix ms; only absolute forms use
/// it).
type Parser = fn(&str, i64) -> Result<Decoded, CarrierError>;

/// One of the contract's built-in carriers: everything the crate and the collector know of it.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinCarrier {
    /// The header name, lowercase; also the `budget.source` a budget read from it is reported as.
    pub name: &'static str,
    /// How its value is written.
    pub form: Form,
    /// Its [`BudgetSource`] (whose [`BudgetSource::builtin`] gives this entry back).
    pub source: BudgetSource,
    /// The tag a waterfall writes beside a budget it brought (empty for `x-budget-ms`, the
    /// contract's own carrier).
    pub tag: &'static str,
    parse: Parser,
}

/// The contract's built-in carriers, in the order a hop reads them (`CONVENTIONS.md`
/// section 1): the one table of them.
pub static BUILTIN: [BuiltinCarrier; 5] = [
    BuiltinCarrier {
        name: X_BUDGET_MS,
        form: Form::Ms,
        source: BudgetSource::XBudgetMs,
        tag: "",
        parse: |v, _| parse_x_budget_ms(v).map(|b| (b, None)),
    },
    BuiltinCarrier {
        name: GRPC_TIMEOUT,
        form: Form::Grpc,
        source: BudgetSource::GrpcTimeout,
        tag: "grpc",
        parse: |v, _| parse_grpc_timeout(v).map(|b| (b, None)),
    },
    BuiltinCarrier {
        name: CONNECT_TIMEOUT_MS,
        form: Form::Ms,
        source: BudgetSource::ConnectTimeoutMs,
        tag: "conn",
        parse: |v, _| parse_connect_timeout_ms(v).map(|b| (b, None)),
    },
    BuiltinCarrier {
        name: X_REQUEST_DEADLINE,
        form: Form::DeadlineMs,
        source: BudgetSource::XRequestDeadline,
        tag: "abs",
        parse: |v, now| absolute(parse_request_deadline_unix_ms(v)?, now),
    },
    BuiltinCarrier {
        name: X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
        form: Form::Ms,
        source: BudgetSource::XEnvoyExpectedRqTimeoutMs,
        tag: "envoy",
        parse: |v, _| parse_envoy_expected_rq_timeout_ms(v).map(|b| (b, None)),
    },
];

/// One carrier of a budget: a header name, how its value is written, and the `budget.source`
/// it is reported as.
#[derive(Clone, Debug)]
pub struct Carrier {
    name: Box<str>,
    header: HeaderName,
    form: Form,
    source: BudgetSource,
    parse: Parser,
}

impl Carrier {
    /// A team's own carrier (`--budget-header NAME=FORM`). The name is matched without regard
    /// to case; it must be a valid HTTP header name.
    pub fn own(name: &str, form: Form) -> Result<Carrier, CarrierError> {
        let header =
            HeaderName::from_bytes(trim(name).as_bytes()).map_err(|_| CarrierError::NotText)?;
        let parse: Parser = match form {
            Form::Ms => |v, _| parse_x_budget_ms(v).map(|b| (b, None)),
            Form::Seconds => |v, _| parse_seconds(v).map(|b| (b, None)),
            Form::DeadlineMs => |v, now| absolute(parse_unix_ms(v)?, now),
            Form::DeadlineSeconds => |v, now| absolute(parse_unix_seconds(v)?, now),
            Form::Grpc => |v, _| parse_grpc_timeout(v).map(|b| (b, None)),
        };
        Ok(Carrier {
            name: header.as_str().into(),
            header,
            form,
            source: BudgetSource::Header(form),
            parse,
        })
    }

    fn builtin(entry: &BuiltinCarrier) -> Carrier {
        Carrier {
            name: entry.name.into(),
            header: HeaderName::from_static(entry.name),
            form: entry.form,
            source: entry.source,
            parse: entry.parse,
        }
    }

    /// The header name, lowercase.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How its value is written.
    pub fn form(&self) -> Form {
        self.form
    }

    /// The `budget.source` a budget read from it is reported as.
    pub fn source(&self) -> BudgetSource {
        self.source
    }

    /// The `budget.source` value a service writes: the built-in carrier's name, or
    /// `header:<name>` for a team's own.
    pub fn label(&self) -> String {
        match self.source {
            BudgetSource::Header(_) => {
                format!("{SOURCE_HEADER_PREFIX}{}", self.name)
            }
            other => other.as_str().to_owned(),
        }
    }

    /// Decode one value of this carrier against the wall clock `now_unix_ms` (used only by
    /// absolute forms).
    pub fn decode(
        &self,
        value: &str,
        now_unix_ms: i64,
    ) -> Result<(Duration, Option<i64>), CarrierError> {
        (self.parse)(value, now_unix_ms)
    }

    /// Whether `name` names this carrier, as captured-header attributes write it: any case, and
    /// `_` standing for `-`.
    pub fn is_named(&self, name: &str) -> bool {
        name.len() == self.name.len()
            && name.bytes().zip(self.name.bytes()).all(|(a, b)| {
                let a = if a == b'_' {
                    b'-'
                } else {
                    a.to_ascii_lowercase()
                };
                let b = if b == b'_' { b'-' } else { b };
                a == b
            })
    }
}

/// The carriers a hop reads, in order: a team's own first (in the order given), then the
/// contract's built-in ones ([`Carriers::builtin`], section 1 of CONVENTIONS.md). The one table
/// both a service ([`read_headers`]) and the collector (captured headers) read.
#[derive(Clone, Debug)]
pub struct Carriers {
    list: Vec<Carrier>,
}

impl Default for Carriers {
    fn default() -> Self {
        Carriers::builtin().clone()
    }
}

impl Carriers {
    /// The contract's built-in carriers ([`BUILTIN`]), in the contract's order.
    pub fn builtin() -> &'static Carriers {
        static CARRIERS: std::sync::LazyLock<Carriers> = std::sync::LazyLock::new(|| Carriers {
            list: BUILTIN.iter().map(Carrier::builtin).collect(),
        });
        &CARRIERS
    }

    /// A team's own carriers first, in the order given, then the built-in ones. A name given
    /// twice, or the name of a built-in carrier, is read once, in its first place.
    pub fn with_own(own: impl IntoIterator<Item = Carrier>) -> Carriers {
        let mut list: Vec<Carrier> = Vec::new();
        for c in own
            .into_iter()
            .chain(Carriers::builtin().list.iter().cloned())
        {
            if !list.iter().any(|x| x.name == c.name) {
                list.push(c);
            }
        }
        Carriers { list }
    }

    /// The carriers in the order they are read.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Carrier> {
        self.list.iter()
    }

    /// How many carriers.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there is none (never, for a table built here).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The position of the carrier `name` names (see [`Carrier::is_named`]).
    pub fn position(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|c| c.is_named(name))
    }

    /// The carrier at `index`.
    pub fn get(&self, index: usize) -> Option<&Carrier> {
        self.list.get(index)
    }

    /// The form of a team's own carrier reported as `budget.source = "header:<name>"`.
    pub fn own_form(&self, name: &str) -> Option<Form> {
        self.list
            .iter()
            .find(|c| matches!(c.source, BudgetSource::Header(_)) && c.is_named(name))
            .map(|c| c.form)
    }

    /// Read the carriers in order and return the first present and valid one. `value(i, c)`
    /// gives carrier `c`'s raw value (at position `i`), if present (`Err` when it is not text).
    /// `now_unix_ms` is the wall clock at arrival, used only for absolute forms.
    pub fn read<'a>(
        &self,
        mut value: impl FnMut(usize, &Carrier) -> Option<Result<&'a str, &'a [u8]>>,
        now_unix_ms: i64,
    ) -> Received {
        let mut first_invalid: Option<Received> = None;
        for (i, carrier) in self.list.iter().enumerate() {
            let Some(raw) = value(i, carrier) else {
                continue;
            };
            let parsed = match raw {
                Ok(text) => carrier.decode(text, now_unix_ms),
                Err(_) => Err(CarrierError::NotText),
            };
            match parsed {
                Ok((budget, deadline_unix_ms)) => {
                    return Received::Budget {
                        budget,
                        source: carrier.source,
                        deadline_unix_ms,
                    };
                }
                Err(error) => {
                    if first_invalid.is_none() {
                        let value = match raw {
                            Ok(text) => text.to_owned(),
                            Err(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                        };
                        first_invalid = Some(Received::Invalid {
                            header: carrier.name.clone(),
                            value,
                            error,
                        });
                    }
                }
            }
        }
        first_invalid.unwrap_or(Received::None)
    }

    /// [`Carriers::read`] over a request's headers.
    pub fn read_headers(&self, headers: &HeaderMap, now_unix_ms: i64) -> Received {
        if headers.is_empty() {
            return Received::None;
        }
        self.read(
            |_, c| {
                let raw = headers.get(&c.header)?;
                Some(raw.to_str().map_err(|_| raw.as_bytes()))
            },
            now_unix_ms,
        )
    }
}

/// What a hop found in a request's headers, after reading the carriers in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// A valid budget from the first carrier present and valid.
    Budget {
        /// The relative budget at arrival (zero when an absolute deadline was already past).
        budget: Duration,
        /// The carrier it came from.
        source: BudgetSource,
        /// For an absolute carrier: the deadline, Unix ms.
        deadline_unix_ms: Option<i64>,
    },
    /// At least one carrier was present, none was valid.
    Invalid {
        /// The first invalid carrier's header name.
        header: Box<str>,
        /// Its raw value (lossily decoded when not UTF-8).
        value: String,
        /// Why it was rejected.
        error: CarrierError,
    },
    /// No carrier at all.
    None,
}

impl Received {
    /// The `budget.source` this result is reported as.
    pub fn source(&self) -> BudgetSource {
        match self {
            Received::Budget { source, .. } => *source,
            Received::Invalid { .. } => BudgetSource::Invalid,
            Received::None => BudgetSource::None,
        }
    }

    /// The budget, when a valid one was received.
    pub fn budget(&self) -> Option<Duration> {
        match self {
            Received::Budget { budget, .. } => Some(*budget),
            _ => None,
        }
    }
}

/// Read the contract's built-in carriers in order (`x-budget-ms`, `grpc-timeout`,
/// `connect-timeout-ms`, `x-request-deadline`, `x-envoy-expected-rq-timeout-ms`) and return the
/// first present and valid one. `now_unix_ms` is the wall clock at arrival, used only for
/// `x-request-deadline`. A team's own carriers: [`Carriers::with_own`] and
/// [`Carriers::read_headers`].
pub fn read_headers(headers: &HeaderMap, now_unix_ms: i64) -> Received {
    Carriers::builtin().read_headers(headers, now_unix_ms)
}

#[cfg(test)]
mod tests;
