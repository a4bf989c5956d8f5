//! Being a good API citizen (platforms.md A3 "Rate limits"): write pacing and rate-limit reading.
//!
//! Writes are serialised per installation (a personal token counts as one installation) through a
//! `tokio::sync::Mutex` that holds the instant of the last write, with at least
//! [`super::GithubConfig::min_write_interval`] between writes. The lock is held across retries and
//! rate-limit waits, so a limited installation sends nothing else meanwhile. Reads are not paced.
//! All waits are `tokio::time` waits, so a paused test clock drives them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{HeaderMap, LINK, RETRY_AFTER};
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use crate::clock::Millis;
use crate::tracker::DEFAULT_RATE_LIMIT_WAIT;

/// One write gate per installation.
#[derive(Debug, Default)]
pub(crate) struct WriteGates {
    gates: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<Option<Instant>>>>>,
}

impl WriteGates {
    /// Waits for the installation's gate; the permit paces and records the writes made under it.
    pub(crate) async fn acquire(&self, installation: u64, min_interval: Duration) -> WritePermit {
        let gate = {
            let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(gates.entry(installation).or_default())
        };
        WritePermit { last_write: gate.lock_owned().await, min_interval }
    }
}

/// The right to write for one installation, held for one call (all its attempts).
#[derive(Debug)]
pub(crate) struct WritePermit {
    last_write: OwnedMutexGuard<Option<Instant>>,
    min_interval: Duration,
}

impl WritePermit {
    /// Sleeps until `min_interval` has passed since the installation's previous write.
    pub(crate) async fn pace(&self) {
        if let Some(last) = *self.last_write {
            tokio::time::sleep_until(last + self.min_interval).await;
        }
    }

    /// Records that a write was just sent.
    pub(crate) fn mark(&mut self) {
        *self.last_write = Some(Instant::now());
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

/// The wait a 403/429 response asks for, or `None` when it is not a rate limit (a 403 for missing
/// permissions). In GitHub's order: `retry-after` seconds; else `x-ratelimit-remaining: 0` until
/// `x-ratelimit-reset` (epoch seconds, against `now`); else a secondary limit (429, or a 403 whose
/// message says "rate limit") waits [`DEFAULT_RATE_LIMIT_WAIT`].
pub(crate) fn rate_limit_wait(status: u16, headers: &HeaderMap, message: &str, now: Millis) -> Option<Duration> {
    if status != 403 && status != 429 {
        return None;
    }
    if let Some(secs) = header(headers, RETRY_AFTER.as_str()).and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(secs));
    }
    if header(headers, "x-ratelimit-remaining") == Some("0") {
        if let Some(reset) = header(headers, "x-ratelimit-reset").and_then(|v| v.parse::<i64>().ok()) {
            let wait_ms = reset.saturating_mul(1000).saturating_sub(now.0).max(0);
            return Some(Duration::from_millis(wait_ms.unsigned_abs()));
        }
    }
    if status == 429 || message.to_ascii_lowercase().contains("rate limit") {
        return Some(DEFAULT_RATE_LIMIT_WAIT);
    }
    None
}

/// The `rel="next"` target of a `Link` header, verbatim (page URLs are never built by hand).
pub(crate) fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = header(headers, LINK.as_str())?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params.split(';').any(|p| {
            p.trim()
                .strip_prefix("rel=")
                .is_some_and(|rel| rel.trim_matches('"').split_whitespace().any(|r| r == "next"))
        });
        let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| url.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    const NOW: Millis = Millis(1_700_000_000_000);

    #[test]
    fn rate_limit_waits_follow_githubs_order() {
        let cases: [(u16, HeaderMap, &str, Option<Duration>); 7] = [
            (429, headers(&[("retry-after", "7")]), "", Some(Duration::from_secs(7))),
            (
                403,
                headers(&[("retry-after", "3"), ("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1700000100")]),
                "",
                Some(Duration::from_secs(3)),
            ),
            (
                403,
                headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1700000030")]),
                "API rate limit exceeded",
                Some(Duration::from_secs(30)),
            ),
            (403, headers(&[]), "You have exceeded a secondary rate limit", Some(DEFAULT_RATE_LIMIT_WAIT)),
            (429, headers(&[]), "", Some(DEFAULT_RATE_LIMIT_WAIT)),
            (403, headers(&[("x-ratelimit-remaining", "12")]), "Resource not accessible by integration", None),
            (500, headers(&[("retry-after", "7")]), "", None),
        ];
        for (status, h, message, want) in cases {
            assert_eq!(rate_limit_wait(status, &h, message, NOW), want, "{status} {message}");
        }
    }

    #[test]
    fn reset_in_the_past_waits_nothing() {
        let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1699999000")]);
        assert_eq!(rate_limit_wait(403, &h, "", NOW), Some(Duration::ZERO));
    }

    #[test]
    fn next_link_is_taken_verbatim() {
        let h = headers(&[(
            "link",
            "<https://api.github.com/repositories/1/issues/2/comments?page=3&per_page=100>; rel=\"next\", \
             <https://api.github.com/repositories/1/issues/2/comments?page=9&per_page=100>; rel=\"last\"",
        )]);
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://api.github.com/repositories/1/issues/2/comments?page=3&per_page=100")
        );
        let last_page = headers(&[("link", "<https://x/?page=1>; rel=\"prev\", <https://x/?page=1>; rel=\"first\"")]);
        assert_eq!(next_link(&last_page), None);
        assert_eq!(next_link(&headers(&[])), None);
    }
}
