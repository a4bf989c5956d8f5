//! Events → transcript (Nodes 5–7): what Codex reports during a turn, recorded in the ledger.
//!
//! The Codex client hands events to an [`EventSink`] synchronously; [`Recorder`] queues them and
//! one task per turn writes them in order: transcript entries (`tool_use`, `tool_result`, `text`,
//! `error`), the `running` transition when Codex accepts the turn, the Codex thread id (on the task
//! and on the thread record, at once, so even a crashed turn can be resumed), and token usage.
//! Losing the lease while recording cancels the turn: someone else owns the task now.
//! Reasoning deltas and warnings are logged, not stored.

use std::sync::Arc;

use beckon_core::clock::Clock;
use beckon_core::ledger::{Ledger, LedgerError};
use beckon_core::task::{TaskId, ThreadKey, TokenUsage, Transition};
use beckon_core::transcript::{EntryKind, TranscriptEntry};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::codex::{EventSink, TurnEvent, TurnUsage};

/// Tool outputs are stored up to this many characters; the agent saw all of it.
pub const MAX_ENTRY_CHARS: usize = 8_000;

/// The sink handed to the Codex client for one turn.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::UnboundedSender<TurnEvent>,
}

impl EventSink for Recorder {
    fn emit(&self, event: TurnEvent) {
        if self.tx.send(event).is_err() {
            debug!("recorder closed; event dropped");
        }
    }
}

/// Where and as whom a [`Recorder`] writes.
#[derive(Debug, Clone)]
pub struct RecordTarget {
    /// The task.
    pub task_id: TaskId,
    /// Its thread (for the Codex thread id).
    pub thread_key: ThreadKey,
    /// The attempt writing.
    pub attempt: u32,
    /// The lease generation it holds.
    pub lease_gen: u64,
    /// The next transcript sequence number (continuing earlier attempts).
    pub next_seq: u64,
}

/// Starts a recorder for one turn. Drop every clone of the returned [`Recorder`], then await the
/// handle: it resolves once everything is written, with the last usage seen.
pub fn start(
    target: RecordTarget,
    ledger: Arc<dyn Ledger>,
    clock: Arc<dyn Clock>,
    lost_lease: CancellationToken,
) -> (Recorder, JoinHandle<Option<TokenUsage>>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<TurnEvent>();
    let handle = tokio::spawn(async move {
        let mut seq = target.next_seq;
        let mut usage = None;
        while let Some(event) = rx.recv().await {
            let mut entry = |kind: EntryKind, tool: Option<String>, text: String| {
                let e = TranscriptEntry { seq, attempt: target.attempt, at: clock.now(), kind, tool, text: cap(text) };
                seq += 1;
                e
            };
            let result = match event {
                TurnEvent::ThreadReady { thread_id, resumed, resume_error } => {
                    if let Some(err) = resume_error {
                        debug!(%err, "codex thread could not be resumed; a new one was started");
                    }
                    debug!(%thread_id, resumed, "codex thread ready");
                    let progress = Transition::Progress {
                        lease_gen: target.lease_gen,
                        codex_thread_id: Some(thread_id.clone()),
                        usage: None,
                    };
                    match ledger.transition(&target.task_id, &progress).await {
                        Ok(_) => ledger.set_codex_thread(&target.thread_key, &thread_id).await,
                        Err(e) => Err(e),
                    }
                }
                TurnEvent::TurnStarted { .. } => {
                    let start = Transition::Start { lease_gen: target.lease_gen };
                    ledger.transition(&target.task_id, &start).await.map(|_| ())
                }
                TurnEvent::Text { text, .. } => {
                    append(&*ledger, &target.task_id, entry(EntryKind::Text, None, text)).await
                }
                TurnEvent::ToolUse { name, input, .. } => {
                    append(&*ledger, &target.task_id, entry(EntryKind::ToolUse, Some(name), input.to_string())).await
                }
                TurnEvent::ToolResult { output, success, .. } => {
                    let kind = if success { EntryKind::ToolResult } else { EntryKind::Error };
                    append(&*ledger, &target.task_id, entry(kind, None, output)).await
                }
                TurnEvent::ApprovalDeclined { detail, .. } => {
                    let text = format!("approval declined: {}", detail.unwrap_or_default());
                    append(&*ledger, &target.task_id, entry(EntryKind::Error, None, text)).await
                }
                TurnEvent::Error { message, will_retry } => {
                    let text = if will_retry { format!("{message} (codex retries)") } else { message };
                    append(&*ledger, &target.task_id, entry(EntryKind::Error, None, text)).await
                }
                TurnEvent::Usage(u) => {
                    let u = token_usage(&u);
                    usage = Some(u);
                    let progress =
                        Transition::Progress { lease_gen: target.lease_gen, codex_thread_id: None, usage: Some(u) };
                    ledger.transition(&target.task_id, &progress).await.map(|_| ())
                }
                TurnEvent::Reasoning { .. } => Ok(()),
                TurnEvent::Warning { message } => {
                    debug!(%message, "codex warning");
                    Ok(())
                }
            };
            match result {
                Ok(()) => {}
                Err(LedgerError::Transition(e)) => {
                    warn!(task_id = %target.task_id, error = %e, "lease lost while recording; stopping the turn");
                    lost_lease.cancel();
                }
                Err(e) => warn!(task_id = %target.task_id, error = %e, "could not record a turn event"),
            }
        }
        usage
    });
    (Recorder { tx }, handle)
}

async fn append(ledger: &dyn Ledger, task: &TaskId, entry: TranscriptEntry) -> Result<(), LedgerError> {
    ledger.append_transcript(task, std::slice::from_ref(&entry)).await
}

/// Codex's per-turn usage as the task's usage.
pub fn token_usage(u: &TurnUsage) -> TokenUsage {
    TokenUsage {
        input_tokens: u.turn.input_tokens,
        cached_input_tokens: u.turn.cached_input_tokens,
        output_tokens: u.turn.output_tokens,
        total_tokens: u.turn.total_tokens,
    }
}

fn cap(text: String) -> String {
    match text.char_indices().nth(MAX_ENTRY_CHARS) {
        Some((cut, _)) => format!("{}…[truncated]", &text[..cut]),
        None => text,
    }
}
