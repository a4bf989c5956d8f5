//! Report (Nodes 11–13): how a task attempt ends, written to the ledger and told to the thread.
//!
//! Owns the terminal writes (`finish`: completed, failed, cancelled), the short replies that
//! explain a failure or confirm a stop (at most one reply per task: skipped when the agent
//! already answered), and the hand-back of a task for another attempt (`release`, bounded by
//! `max_attempts`, never for permanent failures). Each returns what the caller does with the
//! queue message ([`Disposition`]). It must not run Codex or touch the workspace.

use std::time::Duration;

use beckon_core::ledger::LedgerError;
use beckon_core::task::{CancelReason, FailureReason, Task, TaskOutcome, TokenUsage, Transition, TransitionError};
use tracing::{info, warn};

use crate::tools::{self, TaskTools};
use crate::worker::{Disposition, Worker, RETRY_BACKOFF};

impl Worker {
    pub(crate) async fn finish(&self, task: &Task, outcome: TaskOutcome) -> Disposition {
        let state = outcome.state();
        match self.ledger.transition(&task.id, &Transition::Finish { lease_gen: task.lease_gen, outcome }).await {
            Ok(_) => {
                info!(%state, "task finished");
                Disposition::Done
            }
            Err(LedgerError::Transition(TransitionError::StaleLease { .. })) => Disposition::Leave,
            Err(e) => self.transient("finish", &e),
        }
    }

    pub(crate) async fn fail(
        &self,
        task: &Task,
        tools: Option<&TaskTools>,
        reason: FailureReason,
        why: &str,
    ) -> Disposition {
        warn!(?reason, %why, "task failed");
        if let Some(tools) = tools {
            if tools.replied().is_none() {
                let code = serde_json::to_value(reason).ok().and_then(|v| v.as_str().map(str::to_owned));
                let body = format!(
                    "I could not finish this ({}): {why}. Mention me again to retry.",
                    code.as_deref().unwrap_or("failed")
                );
                if let Err(e) = tools.post_reply(&body).await {
                    warn!(error = %e, "could not post the failure reply");
                }
            }
        }
        self.finish(task, TaskOutcome::Failed { reason, detail: Some(why.chars().take(300).collect()) }).await
    }

    pub(crate) async fn cancelled(&self, task: &Task, tools: &TaskTools, reason: CancelReason) -> Disposition {
        if reason == CancelReason::StopCommand && tools.replied().is_none() {
            if let Err(e) = tools.post_reply("Stopped, as asked.").await {
                warn!(error = %e, "could not post the stop confirmation");
            }
        }
        self.finish(task, TaskOutcome::Cancelled { reason }).await
    }

    pub(crate) async fn retry_or_fail(
        &self,
        task: &Task,
        reason: FailureReason,
        why: &str,
        tools: Option<&TaskTools>,
    ) -> Disposition {
        if task.attempt < self.config.max_attempts {
            warn!(?reason, %why, attempt = task.attempt, "transient failure; releasing for a retry");
            return match self.release(task).await {
                Disposition::Retry(_) => Disposition::Retry(RETRY_BACKOFF * task.attempt),
                other @ (Disposition::Done | Disposition::Leave) => other,
            };
        }
        self.fail(task, tools, reason, why).await
    }

    /// The reply could not be posted: try again later when that may help, else fail (without a
    /// second attempt at replying, which would fail the same way).
    pub(crate) async fn reply_failed(&self, task: &Task, why: &tools::ReplyFailure) -> Disposition {
        if why.retryable {
            self.retry_or_fail(task, FailureReason::TrackerUnavailable, &why.message, None).await
        } else {
            self.fail(task, None, FailureReason::TrackerUnavailable, &why.message).await
        }
    }

    pub(crate) async fn release(&self, task: &Task) -> Disposition {
        match self.ledger.transition(&task.id, &Transition::Release { lease_gen: task.lease_gen }).await {
            Ok(_) => Disposition::Retry(Duration::ZERO),
            Err(LedgerError::Transition(_)) => Disposition::Leave,
            Err(e) => self.transient("release", &e),
        }
    }

    pub(crate) fn transient(&self, what: &str, e: &LedgerError) -> Disposition {
        warn!(error = %e, "{what} failed; the message comes back for a retry");
        Disposition::Retry(RETRY_BACKOFF)
    }
}

/// A short status line under the fallback reply.
pub(crate) fn footer(task: &Task, elapsed: Duration, usage: Option<TokenUsage>) -> String {
    let tokens = usage.map(|u| format!(" · {} tokens", u.total_tokens)).unwrap_or_default();
    format!("\n\n<sub>Beckon · task `{}` · {}s{tokens}</sub>", task.id, elapsed.as_secs())
}
