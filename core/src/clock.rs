//! Time, injected.
//!
//! Everything in `core` that compares against "now" (lease expiry, the run budget window, Linear's
//! replay window, delivery TTLs) asks a [`Clock`] instead of reading the system time, so tests can
//! move time by hand and every backend agrees on one notion of it. Timestamps are Unix epoch
//! milliseconds ([`Millis`]): the unit Linear uses on the wire, exact in SQLite and DynamoDB numbers.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time as Unix epoch milliseconds (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub i64);

impl Millis {
    /// This time plus `d` (saturating; durations beyond `i64` milliseconds are not meaningful here).
    pub fn plus(self, d: Duration) -> Millis {
        Millis(self.0.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    /// This time minus `d` (saturating).
    pub fn minus(self, d: Duration) -> Millis {
        Millis(self.0.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    /// The absolute distance between two times.
    pub fn abs_diff(self, other: Millis) -> Duration {
        Duration::from_millis(self.0.abs_diff(other.0))
    }

    /// RFC 3339 text (second precision, `Z`), for operators and logs.
    pub fn to_rfc3339(self) -> String {
        let t = if self.0 >= 0 { UNIX_EPOCH + Duration::from_millis(self.0.unsigned_abs()) } else { UNIX_EPOCH };
        humantime::format_rfc3339_seconds(t).to_string()
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

/// A source of "now". Implementations must be cheap and thread-safe.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Millis;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Millis(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A clock that only moves when told to: for tests and for replaying recorded deliveries.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Millis) -> Self {
        ManualClock(AtomicI64::new(start.0))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Millis) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        Millis(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_second_precision_utc() {
        assert_eq!(Millis(1_773_883_617_700).to_rfc3339(), "2026-03-19T01:26:57Z");
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Millis(1_000));
        assert_eq!(c.now(), Millis(1_000));
        c.advance(Duration::from_secs(2));
        assert_eq!(c.now(), Millis(3_000));
    }
}
