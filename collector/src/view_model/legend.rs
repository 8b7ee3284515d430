//! The words every picture of a chain shares: what each mark of a waterfall stands for, what the
//! figures beside a row say, and a span's budget facts by name. The screen (its legend, its
//! detail popup) and the HTML report read them from here, so the page and the terminal never
//! explain one thing two ways. What a finding kind means (`FindingKind::meaning`) and a
//! carrier's tag (`BudgetSource::tag`) are the library's, beside the kind and the carrier.
//!
//! Strings here may carry what a span sent ([`facts`]' `error.type`): each picture cleans them
//! as it cleans any span string.

use deadline_budget::analysis::Span;
use deadline_budget::semconv;

/// What a mark draws, so each picture can give it its own style (a colour on the screen, a
/// colour and a pattern on the page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkRole {
    /// The budget a hop received or a call forwarded.
    Budget,
    /// Queue wait, what remained at a call, a shed.
    Queue,
    /// Work inside the budget.
    Work,
    /// Work done for nobody, a budget forwarded that did not exist.
    Late,
    /// A hop waiting on its calls for nobody.
    Waiting,
    /// A call.
    Call,
    /// Secondary marks (the original caller's deadline).
    Dim,
}

/// One mark of the waterfall: its glyph on the screen, its role, and what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The screen's glyph (the page draws the same shape and prints the glyph in its legend).
    pub glyph: &'static str,
    /// What it draws.
    pub role: MarkRole,
    /// What it means, in words.
    pub text: &'static str,
}

/// Every mark of the waterfall, in the legend's order.
pub const MARKS: [Mark; 11] = [
    Mark {
        glyph: "╌┃",
        role: MarkRole::Budget,
        text: "the budget a hop received, up to its deadline",
    },
    Mark {
        glyph: "░",
        role: MarkRole::Queue,
        text: "time the request waited in the hop's queue",
    },
    Mark {
        glyph: "█",
        role: MarkRole::Work,
        text: "work inside the budget",
    },
    Mark {
        glyph: "▓",
        role: MarkRole::Late,
        text: "dead work: done after everyone above had stopped waiting",
    },
    Mark {
        glyph: "▒",
        role: MarkRole::Waiting,
        text: "waiting on its calls after everyone above had stopped: counted in the callee",
    },
    Mark {
        glyph: "━",
        role: MarkRole::Call,
        text: "a call to the next service",
    },
    Mark {
        glyph: "┄",
        role: MarkRole::Budget,
        text: "the budget the call forwarded (red: more than remained)",
    },
    Mark {
        glyph: "│",
        role: MarkRole::Queue,
        text: "what remained when the call was sent",
    },
    Mark {
        glyph: "✕",
        role: MarkRole::Late,
        text: "the call forwarded no budget (dropped)",
    },
    Mark {
        glyph: "⊘",
        role: MarkRole::Queue,
        text: "shed or refused: the request was turned away on purpose",
    },
    Mark {
        glyph: "┊",
        role: MarkRole::Dim,
        text: "the original caller's deadline",
    },
];

/// What the map's marks and words mean, in the legend's order (the screen's legend and the
/// page's map both list them).
pub const MAP_MARKS: [(&str, &str); 8] = [
    (
        "╭─╮",
        "a service: its name, λ (its arrivals per second) and the share of its work done for nobody",
    ),
    (
        "▓",
        "a service that works for nobody: a quarter or more of its work came after everyone above had stopped waiting",
    ),
    (
        "▒",
        "a service that waits for nobody: a quarter or more of its time it held requests, waiting on its calls, after everyone above had stopped waiting (what it waited for is dead work below it)",
    ),
    (
        "┌╌┐",
        "a callee that sends no spans (a database, a third-party API), drawn below the others",
    ),
    (
        "─▶",
        "calls from a caller to its callee, left to right (◀ a call back to the left); ━ when the edge's worst finding is an error",
    ),
    (
        "✖ ▲ ●",
        "the worst finding on the edge: error, warning, info",
    ),
    (
        "2.0/s fwd 3000>938 tmo ~900 waste 625/s",
        "calls per second, the budget forwarded p50 (a reset: more than the 938 ms that remained; no budget when none is sent), the edge's timeout (~ inferred from calls that got no answer), the work done for nobody in the callee per second. Short of room the words shorten, then the calls/s go, the timeout, and the waste or a budget that was fine, then fwd",
    ),
    (
        "other (11)",
        "past 50 boxes, the quieter services folded into one",
    ),
];

/// What the figures beside each row say.
pub const ROW_FIGURES: &str = "rcv 400: the budget a hop received (own: its own default), with grpc, conn, abs, envoy or hdr when it came in grpc-timeout, connect-timeout-ms, an absolute deadline, Envoy's header or a --budget-header; q 150: how long it waited in a queue; fwd 300: what a call forwarded (fwd 3000>938: more than the 938 ms that remained)";

/// The span's budget facts that are present, under the contract's attribute names, as the
/// analysis read them.
pub fn facts(span: &Span) -> Vec<(&'static str, String)> {
    let b = &span.budget;
    let mut out = Vec::new();
    let mut num = |k: &'static str, v: Option<i64>| {
        if let Some(v) = v {
            out.push((k, format!("{v} ms")));
        }
    };
    num(semconv::RECEIVED_MS, b.received_ms);
    num(semconv::DEFAULT_MS, b.default_ms);
    num(semconv::QUEUE_WAIT_MS, b.queue_wait_ms);
    num(semconv::REMAINING_AT_START_MS, b.remaining_at_start_ms);
    num(semconv::REMAINING_MS, b.remaining_ms);
    num(semconv::FORWARDED_MS, b.forwarded_ms);
    num(semconv::TIMEOUT_MS, b.timeout_ms);
    num(semconv::SLA_MS, b.sla_ms);
    if let Some(s) = b.source {
        out.push((semconv::SOURCE, s.as_str().to_string()));
    }
    if let Some(o) = b.outcome {
        out.push((semconv::OUTCOME, o.as_str().to_string()));
    }
    if let Some(a) = b.attempt {
        out.push((semconv::ATTEMPT, a.to_string()));
    }
    if let Some(d) = b.deadline_unix_ms {
        out.push(("deadline (absolute, Unix ms)", d.to_string()));
    }
    if let Some(v) = b.http_status {
        out.push(("http.response.status_code", v.to_string()));
    }
    if let Some(v) = b.rpc_status {
        out.push(("rpc status code", v.to_string()));
    }
    if let Some(v) = &b.error_type {
        out.push(("error.type", v.to_string()));
    }
    out
}
