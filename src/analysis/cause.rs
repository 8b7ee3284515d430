//! What the words of a failure say of its cause (`CONVENTIONS.md` section 3, "Timeouts that
//! nobody declared"). A call that failed without a response status got no answer (a client
//! timeout or abort) unless its words name another cause: a refused connection, a DNS failure,
//! a database constraint or syntax error was answered by that failure, and three refused
//! connections at 1 ms are not a 1 ms timeout. Words of a timeout or a cancellation
//! (`QueryCanceled`, `statement timeout`, `context deadline exceeded`) win over the others.
//!
//! In: an `error.type`, an exception's type or message, a span's status message. Out: a
//! [`Cause`], or `None` when the words name neither.

/// What a failure's words name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A timeout, a cancellation, an abort: the call got no answer.
    NoAnswer,
    /// Another cause: the failure was the call's answer.
    Other,
}

/// Words of a call that got no answer (lowercase).
const NO_ANSWER: [&str; 6] = [
    "timeout",
    "timed out",
    "deadline",
    "cancel",
    "abort",
    "time out",
];

/// Words of a failure that was an answer (lowercase): refused connections, DNS, unreachable
/// hosts, a database's constraint, syntax and schema errors.
const OTHER: [&str; 19] = [
    "refused",
    "dns",
    "enotfound",
    "eai_again",
    "gaierror",
    "no such host",
    "name resolution",
    "nameresolution",
    "name or service not known",
    "unknownhost",
    "unreachable",
    "violation",
    "constraint",
    "integrity",
    "syntax",
    "undefinedtable",
    "undefinedcolumn",
    "undefinedfunction",
    // What budget-top writes back for such a failure when it exports a chain.
    "another cause",
];

/// The cause `text` names, if any: [`Cause::NoAnswer`] when it names a timeout or a
/// cancellation (whatever else it names), else [`Cause::Other`] when it names another cause.
pub fn cause_named(text: &str) -> Option<Cause> {
    let lower = text.to_ascii_lowercase();
    if NO_ANSWER.iter().any(|w| lower.contains(w)) {
        Some(Cause::NoAnswer)
    } else if OTHER.iter().any(|w| lower.contains(w)) {
        Some(Cause::Other)
    } else {
        None
    }
}

/// What a span's failure names: its `error.type`'s words first (a timeout there wins), else
/// [`Cause::Other`] when the words the collector read elsewhere named another cause
/// (`other_cause`: an exception's message, the status message).
pub fn failure_cause(error_type: Option<&str>, other_cause: bool) -> Option<Cause> {
    error_type
        .and_then(cause_named)
        .or(other_cause.then_some(Cause::Other))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_cancellations_got_no_answer_and_refusals_were_answers() {
        for t in [
            "ReadTimeout",
            "QueryCanceled",
            "canceling statement due to statement timeout",
            "context.deadlineExceededError",
            "AbortError",
            "Get \"http://x\": context deadline exceeded (Client.Timeout exceeded)",
        ] {
            assert_eq!(cause_named(t), Some(Cause::NoAnswer), "{t}");
        }
        for t in [
            "ConnectionRefusedError",
            "UniqueViolation",
            "duplicate key value violates unique constraint \"items_pkey\"",
            "dial tcp 127.0.0.1:1: connect: connection refused",
            "socket.gaierror",
            "lookup nowhere.invalid: no such host",
            "ECONNREFUSED",
            "SyntaxError",
            "IntegrityError",
        ] {
            assert_eq!(cause_named(t), Some(Cause::Other), "{t}");
        }
        for t in ["*url.Error", "503", "ConnectionError", ""] {
            assert_eq!(cause_named(t), None, "{t}");
        }
    }
}
