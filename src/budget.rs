//! The budget itself: a [`Deadline`] on tokio's monotonic clock, the call rule
//! `timeout = min(sla, remaining - margin)`, and the task-local "current deadline" that the
//! server layer sets and outgoing calls read.
//!
//! Enters as a decoded header (see [`crate::carrier`]) or an edge default; leaves as the
//! timeout and forwarded value of each outgoing call (see [`crate::client`]).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

tokio::task_local! {
    static CURRENT: Deadline;
}

/// The instant by which the original caller stops waiting, on tokio's monotonic clock (so it
/// follows paused time in tests and never jumps with the wall clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// A deadline at the given instant.
    pub fn at(at: Instant) -> Self {
        Deadline { at }
    }

    /// A deadline `budget` from now.
    pub fn after(budget: Duration) -> Self {
        Deadline::at(Instant::now() + budget)
    }

    /// A deadline `budget_ms` from now; a negative value gives a deadline already in the past.
    pub fn after_ms(budget_ms: i64) -> Self {
        let now = Instant::now();
        let magnitude = Duration::from_millis(budget_ms.unsigned_abs());
        if budget_ms >= 0 {
            Deadline::at(now + magnitude)
        } else {
            Deadline::at(now.checked_sub(magnitude).unwrap_or(now))
        }
    }

    /// The instant itself.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// What is left now; zero once expired.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// What was left at `when`, in whole ms, negative after expiry (the sign is what
    /// `budget.remaining_at_start_ms` reports). A positive remainder rounds up, so that work
    /// started with 0.4 ms left reads 1 and not 0 ("ran after expiry"); zero or less means the
    /// deadline had passed, exactly as [`Deadline::is_expired`] says.
    pub fn remaining_ms_at(&self, when: Instant) -> i64 {
        if self.at > when {
            let left = self.at - when;
            let whole = saturating_ms(left);
            if Duration::from_millis(whole.unsigned_abs()) < left {
                whole.saturating_add(1)
            } else {
                whole
            }
        } else if self.at == when {
            0
        } else {
            -saturating_ms(when - self.at)
        }
    }

    /// What is left now in whole ms, negative after expiry.
    pub fn remaining_ms(&self) -> i64 {
        self.remaining_ms_at(Instant::now())
    }

    /// Whether the deadline has passed (nothing remains).
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// The call rule of the contract: `min(sla, remaining - margin)`, zero when nothing positive
    /// remains. The value forwarded to the callee is this same timeout.
    pub fn call_timeout(&self, sla: Option<Duration>, margin: Duration) -> Duration {
        call_timeout(self.remaining(), sla, margin)
    }

    /// The deadline of the request this task is serving, when the server layer (or
    /// [`Deadline::scope`]) set one. Task-locals do not cross `tokio::spawn`: pass the deadline
    /// explicitly to spawned tasks (or `scope` them again).
    pub fn current() -> Option<Deadline> {
        CURRENT.try_with(|d| *d).ok()
    }

    /// Run `future` with this deadline as [`Deadline::current`].
    pub fn scope<F: Future>(self, future: F) -> tokio::task::futures::TaskLocalFuture<Deadline, F> {
        CURRENT.scope(self, future)
    }

    /// Run the closure `f` with this deadline as [`Deadline::current`].
    pub fn sync_scope<R>(self, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self, f)
    }
}

/// The call rule on plain durations: `min(sla, remaining - margin)`, saturating at zero.
///
/// ```
/// use std::time::Duration;
/// use deadline_budget::budget::call_timeout;
/// let ms = Duration::from_millis;
/// // 820 ms left, a 1 s SLA, 20 ms margin: the callee gets 800 ms, not its SLA.
/// assert_eq!(call_timeout(ms(820), Some(ms(1000)), ms(20)), ms(800));
/// assert_eq!(call_timeout(ms(820), Some(ms(400)), ms(20)), ms(400));
/// assert_eq!(call_timeout(ms(10), None, ms(20)), Duration::ZERO);
/// ```
pub fn call_timeout(remaining: Duration, sla: Option<Duration>, margin: Duration) -> Duration {
    let left = remaining.saturating_sub(margin);
    match sla {
        Some(sla) => left.min(sla),
        None => left,
    }
}

/// Whole milliseconds of a duration as `i64`, saturating.
pub(crate) fn saturating_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn budget_shrinks_by_exactly_the_time_spent() {
        let deadline = Deadline::after(ms(1200));
        assert_eq!(deadline.remaining(), ms(1200));
        tokio::time::sleep(ms(380)).await;
        assert_eq!(deadline.remaining(), ms(820));
        assert_eq!(deadline.remaining_ms(), 820);
        assert!(!deadline.is_expired());
        tokio::time::sleep(ms(820)).await;
        assert!(deadline.is_expired());
        assert_eq!(deadline.remaining(), Duration::ZERO);
        tokio::time::sleep(ms(30)).await;
        assert_eq!(deadline.remaining_ms(), -30);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fraction_of_a_millisecond_left_is_not_expiry() {
        let deadline = Deadline::after(Duration::from_micros(1400));
        let now = Instant::now();
        // 1.4 ms left reads 2: positive remainders round up, so only expiry reads <= 0.
        assert_eq!(deadline.remaining_ms_at(now), 2);
        assert_eq!(
            deadline.remaining_ms_at(now + Duration::from_micros(1000)),
            1
        );
        assert_eq!(
            deadline.remaining_ms_at(now + Duration::from_micros(1400)),
            0
        );
        assert_eq!(
            deadline.remaining_ms_at(now + Duration::from_micros(2500)),
            -1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn negative_budget_is_already_expired() {
        let deadline = Deadline::after_ms(-250);
        assert!(deadline.is_expired());
        assert_eq!(deadline.remaining_ms(), -250);
        assert_eq!(deadline.call_timeout(None, Duration::ZERO), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn task_local_is_visible_inside_the_scope_only() {
        assert_eq!(Deadline::current(), None);
        let deadline = Deadline::after(ms(500));
        let seen = deadline
            .scope(async {
                tokio::time::sleep(ms(100)).await;
                Deadline::current().map(|d| d.remaining())
            })
            .await;
        assert_eq!(seen, Some(ms(400)));
        assert_eq!(deadline.sync_scope(Deadline::current), Some(deadline));
        assert_eq!(Deadline::current(), None);
    }
}
