//! Linear agent sessions: the turn, streamed as session activities.
//!
//! When a task came from a Linear Agent API session, people watch the session, not a comment
//! thread. [`start`] returns an [`EventSink`] that turns Codex events into activities: a `thought`
//! when the turn starts, an `action` for each tool call (what ran, not its output). Activities are
//! paced ([`MIN_INTERVAL`]) to stay well inside Linear's rate limit; calls that come faster are
//! dropped (the transcript keeps everything). The final answer is the session's `response`,
//! posted through the outbox like any reply (see `tracker::linear`). Failures to post are logged:
//! they never fail the task.

use std::sync::Arc;
use std::time::Duration;

use beckon_core::tracker::linear::{ActivityContent, LinearClient};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::codex::{EventSink, TurnEvent};

/// At most one activity per this interval; in between, only the latest waits to be posted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1000);
/// Action parameters are cut to this many characters.
const MAX_PARAMETER_CHARS: usize = 200;

/// Forwards events to the recorder and to the session stream.
#[derive(Debug, Clone)]
pub struct Tee<A, B> {
    /// The first sink (the transcript recorder).
    pub first: A,
    /// The second sink (the session stream).
    pub second: B,
}

impl<A: EventSink, B: EventSink> EventSink for Tee<A, B> {
    fn emit(&self, event: TurnEvent) {
        self.second.emit(event.clone());
        self.first.emit(event);
    }
}

/// No second sink: events go nowhere.
impl<T: EventSink> EventSink for Option<T> {
    fn emit(&self, event: TurnEvent) {
        if let Some(sink) = self {
            sink.emit(event);
        }
    }
}

/// The session sink for one turn.
#[derive(Debug, Clone)]
pub struct SessionStream {
    tx: mpsc::UnboundedSender<TurnEvent>,
}

impl EventSink for SessionStream {
    fn emit(&self, event: TurnEvent) {
        if self.tx.send(event).is_err() {
            debug!("session stream closed; event dropped");
        }
    }
}

/// Starts streaming into session `session_id`. Drop the sink, then await the handle.
pub fn start(linear: Arc<LinearClient>, session_id: String) -> (SessionStream, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<TurnEvent>();
    let handle = tokio::spawn(async move {
        let mut last: Option<Instant> = None;
        while let Some(event) = rx.recv().await {
            let Some(mut next) = activity(event) else { continue };
            if let Some(at) = last {
                tokio::time::sleep_until(at + MIN_INTERVAL).await;
            }
            // Whatever arrived while waiting: keep only the latest.
            while let Ok(event) = rx.try_recv() {
                if let Some(newer) = activity(event) {
                    debug!("activity skipped: pacing");
                    next = newer;
                }
            }
            last = Some(Instant::now());
            let (content, ephemeral) = next;
            if let Err(e) = linear.agent_activity_create(&session_id, &content, ephemeral).await {
                warn!(error = %e, "could not post a session activity");
            }
        }
    });
    (SessionStream { tx }, handle)
}

/// The activity an event becomes, if any, and whether it may be ephemeral.
fn activity(event: TurnEvent) -> Option<(ActivityContent, bool)> {
    match event {
        TurnEvent::TurnStarted { .. } => {
            Some((ActivityContent::Thought { body: "Reading the thread and getting to work.".into() }, true))
        }
        TurnEvent::ToolUse { name, input, .. } => {
            let parameter = describe(&name, &input);
            Some((ActivityContent::Action { action: verb(&name).into(), parameter, result: None }, true))
        }
        TurnEvent::ThreadReady { .. }
        | TurnEvent::Text { .. }
        | TurnEvent::Reasoning { .. }
        | TurnEvent::ToolResult { .. }
        | TurnEvent::ApprovalDeclined { .. }
        | TurnEvent::Error { .. }
        | TurnEvent::Warning { .. }
        | TurnEvent::Usage(_) => None,
    }
}

fn verb(tool: &str) -> &'static str {
    match tool {
        "shell" => "Running",
        "apply_patch" => "Editing",
        "thread_read" | "issue_read" => "Reading",
        "comment_reply" => "Answering",
        "pull_request_open" => "Opening a pull request",
        _ => "Using",
    }
}

fn describe(tool: &str, input: &serde_json::Value) -> String {
    let text = match tool {
        "shell" => input
            .get("command")
            .or_else(|| input.get("cmd"))
            .map_or_else(|| input.to_string(), |c| c.as_str().map_or_else(|| c.to_string(), str::to_owned)),
        _ => tool.to_owned(),
    };
    match text.char_indices().nth(MAX_PARAMETER_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}
