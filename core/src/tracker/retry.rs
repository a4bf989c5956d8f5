//! The retry policy both adapters share: which failures are retried, how long to wait, when to stop.
//!
//! Transient failures (5xx, timeouts, connection errors) back off exponentially from
//! [`RetryPolicy::base_backoff`], capped at [`RetryPolicy::max_backoff`]. Rate limits wait exactly as
//! long as the tracker asked, unless that exceeds [`RetryPolicy::max_rate_limit_wait`], in which case
//! the error goes back to the caller (the task can be retried later instead of holding a worker).
//! Permanent errors are never retried. Every wait is a `tokio::time::sleep`, so tests drive it with
//! a paused clock. No jitter: each installation has one write in flight, so there is no herd.

use std::future::Future;
use std::time::Duration;

use crate::tracker::TrackerError;

/// The HTTP client both adapters use: `user_agent` and `extra` headers on every request, one
/// timeout for connecting and for the whole request.
///
/// # Errors
/// [`TrackerError::Invalid`] when the user agent is not a valid header value or the client (TLS
/// setup) cannot be built.
pub(crate) fn http_client(
    user_agent: &str,
    mut extra: reqwest::header::HeaderMap,
    timeout: std::time::Duration,
) -> Result<reqwest::Client, TrackerError> {
    let agent = reqwest::header::HeaderValue::from_str(user_agent)
        .map_err(|_| TrackerError::Invalid { detail: "the user agent is not a valid header value".to_owned() })?;
    extra.insert(reqwest::header::USER_AGENT, agent);
    reqwest::Client::builder()
        .default_headers(extra)
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .map_err(|_| TrackerError::Invalid { detail: "could not build the HTTP client".to_owned() })
}

/// A failure of the HTTP client itself (no response) as a transient error, naming the kind only:
/// never the URL, which could carry query details, and never headers.
pub(crate) fn transport_error(err: reqwest::Error) -> TrackerError {
    let detail = if err.is_timeout() {
        "timeout"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_body() || err.is_decode() {
        "response body interrupted"
    } else {
        "request failed"
    };
    TrackerError::Transient { status: None, detail: detail.to_owned() }
}

/// How hard a client tries before giving up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first (at least 1).
    pub max_attempts: u32,
    /// The first transient backoff; doubles per attempt.
    pub base_backoff: Duration,
    /// The longest transient backoff.
    pub max_backoff: Duration,
    /// The longest rate-limit wait the client sits out itself.
    pub max_rate_limit_wait: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, 1 s → 2 s → 4 s backoff (30 s cap), and rate-limit waits up to 15 minutes
    /// (GitHub's primary limit resets hourly; a longer wait is better spent re-queueing the task).
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_rate_limit_wait: Duration::from_secs(15 * 60),
        }
    }
}

impl RetryPolicy {
    /// How long to wait before attempt `attempt + 1` after `err` failed attempt `attempt` (1-based);
    /// `None` means give up and return `err`.
    pub fn wait_after(&self, attempt: u32, err: &TrackerError) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        match err {
            TrackerError::RateLimited { retry_after } => {
                (*retry_after <= self.max_rate_limit_wait).then_some(*retry_after)
            }
            TrackerError::Transient { .. } => {
                let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
                Some(self.base_backoff.saturating_mul(factor).min(self.max_backoff))
            }
            TrackerError::Unauthorized { .. }
            | TrackerError::NotFound { .. }
            | TrackerError::Rejected { .. }
            | TrackerError::GraphQl { .. }
            | TrackerError::Decode { .. }
            | TrackerError::Invalid { .. } => None,
        }
    }

    /// Runs `attempt` (given the 1-based attempt number) until it succeeds or [`Self::wait_after`]
    /// says stop, sleeping in between.
    ///
    /// # Errors
    /// The last attempt's error.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, TrackerError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, TrackerError>>,
    {
        let mut n = 1;
        loop {
            match attempt(n).await {
                Ok(value) => return Ok(value),
                Err(err) => match self.wait_after(n, &err) {
                    Some(wait) => {
                        tracing::debug!(attempt = n, wait_ms = wait.as_millis(), error = %err, "tracker call will be retried");
                        tokio::time::sleep(wait).await;
                        n += 1;
                    }
                    None => return Err(err),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient() -> TrackerError {
        TrackerError::Transient { status: Some(502), detail: "bad gateway".to_owned() }
    }

    #[test]
    fn transient_backoff_doubles_then_stops() {
        let p = RetryPolicy::default();
        let waits: Vec<_> = (1..=4).map(|n| p.wait_after(n, &transient())).collect();
        assert_eq!(
            waits,
            [Some(Duration::from_secs(1)), Some(Duration::from_secs(2)), Some(Duration::from_secs(4)), None]
        );
    }

    #[test]
    fn backoff_is_capped() {
        let p = RetryPolicy { max_attempts: 20, ..RetryPolicy::default() };
        assert_eq!(p.wait_after(10, &transient()), Some(Duration::from_secs(30)));
    }

    #[test]
    fn rate_limits_wait_as_asked_within_the_bound() {
        let p = RetryPolicy::default();
        let short = TrackerError::RateLimited { retry_after: Duration::from_secs(7) };
        assert_eq!(p.wait_after(1, &short), Some(Duration::from_secs(7)));
        let long = TrackerError::RateLimited { retry_after: Duration::from_secs(3600) };
        assert_eq!(p.wait_after(1, &long), None);
    }

    #[test]
    fn permanent_errors_are_never_retried() {
        let p = RetryPolicy::default();
        let rejected = TrackerError::Rejected { status: 422, message: "Validation Failed".to_owned() };
        assert_eq!(p.wait_after(1, &rejected), None);
        let unauthorized = TrackerError::Unauthorized { status: 401, message: "Bad credentials".to_owned() };
        assert_eq!(p.wait_after(1, &unauthorized), None);
    }
}
