//! The task transcript: what the agent did, as ordered messages (DESIGN §3, Node 6–7).
//!
//! The worker turns Codex events into [`TranscriptEntry`]s and appends them to the ledger as they
//! happen, so an operator can follow a running task and a crashed one leaves its trail. Entries are
//! keyed by `(task, seq)`: appending the same sequence twice stores it once, which makes a retried
//! append harmless. Text is stored as the agent produced it; tool outputs are capped by the worker.
//! What it must not hold: credentials. The worker never puts a token into a tool result, and the
//! agent's environment has none to echo.

use serde::{Deserialize, Serialize};

use crate::clock::Millis;

/// One transcript message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Position in the task's transcript, from 1, continuing across attempts.
    pub seq: u64,
    /// The attempt that wrote it.
    pub attempt: u32,
    /// When it was recorded.
    pub at: Millis,
    /// What kind of message.
    pub kind: EntryKind,
    /// The tool involved, for `tool_use` and `tool_result`.
    pub tool: Option<String>,
    /// The text: agent prose, tool arguments (JSON), tool output, or an error.
    pub text: String,
}

/// The kind of a [`TranscriptEntry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// The agent called a tool (shell, patch, or one of Beckon's dynamic tools).
    ToolUse,
    /// What the tool returned.
    ToolResult,
    /// Agent prose.
    Text,
    /// Something failed.
    Error,
}
