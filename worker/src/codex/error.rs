//! `CodexError`: why running a Codex turn produced no [`TurnOutcome`](super::TurnOutcome).
//!
//! A turn that ran and ended (completed, failed on the model side, interrupted by cancellation or
//! a watchdog) is an outcome, not an error. Errors are for when the process or the protocol broke
//! before or during the turn. Each variant says whether retrying the task can help
//! ([`CodexError::is_retryable`]); the worker maps that to a task failure reason in one place.

use std::time::Duration;

use super::protocol::JsonRpcError;

/// Errors of the Codex client. Returned by [`CodexProcess`](super::CodexProcess) methods and
/// [`run_turn`](super::run_turn).
#[derive(Debug, thiserror::Error)]
pub enum CodexError {
    /// The binary could not be started (missing, not executable). Not retryable: fix the install.
    #[error("failed to spawn {bin}: {source}")]
    Spawn {
        /// The binary.
        bin: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// `initialize` got no answer in time. Retryable (a loaded machine).
    #[error("codex did not answer initialize within {0:?}")]
    HandshakeTimeout(Duration),
    /// A request got no answer in time. Retryable.
    #[error("codex did not answer {method} within {timeout:?}")]
    RequestTimeout {
        /// Wire method.
        method: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// Codex answered a request with a JSON-RPC error (bad params, thread not found, active
    /// writer elsewhere…). Retryable only for "already has an active writer" (another process
    /// still holds the thread).
    #[error("codex rejected {method}: {} (code {})", error.message, error.code)]
    Rpc {
        /// Wire method.
        method: &'static str,
        /// The error.
        error: JsonRpcError,
    },
    /// Codex sent something we cannot decode where an answer was required. Not retryable.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The process exited (or closed stdout) before the turn ended. Retryable.
    #[error("codex exited before the turn ended ({0})")]
    ProcessExited(String),
    /// Watchdog: no message from Codex for this long before the turn started. Retryable.
    #[error("no progress from codex for {0:?}")]
    NoProgress(Duration),
    /// Watchdog: the overall deadline passed before the turn started. Retryable.
    #[error("codex run exceeded its deadline of {0:?}")]
    Deadline(Duration),
    /// The cancellation token fired before the turn started. Not retryable (someone asked to stop).
    #[error("cancelled before the turn started")]
    Cancelled,
    /// I/O on the child's pipes or the config file. Retryable.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl CodexError {
    /// Whether running the task again can reasonably succeed.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Spawn { .. } | Self::Protocol(_) | Self::Cancelled => false,
            Self::Rpc { error, .. } => error.message.contains("active writer"),
            Self::HandshakeTimeout(_)
            | Self::RequestTimeout { .. }
            | Self::ProcessExited(_)
            | Self::NoProgress(_)
            | Self::Deadline(_)
            | Self::Io(_) => true,
        }
    }
}
