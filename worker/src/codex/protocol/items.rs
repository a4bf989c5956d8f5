//! Turns and thread items as Codex reports them in notifications (`Turn`, `ThreadItem`,
//! `TurnError`, token usage), the subset Beckon reads.
//!
//! Item types we don't model (`webSearch`, `mcpToolCall`, …) are kept whole as
//! [`ThreadItem::Other`] raw JSON, so a new item kind never breaks a turn. Statuses carry an
//! `Unknown` case for the same reason.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A turn (the parts we read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// UUIDv7.
    pub id: String,
    /// Lifecycle status.
    pub status: TurnStatus,
    /// Set when `status` is `failed`.
    #[serde(default)]
    pub error: Option<TurnError>,
    /// Only a summary in `turn/completed` (the final agent message); collect `item/completed` instead.
    #[serde(default)]
    pub items: Vec<ThreadItem>,
    /// Wall time, once completed.
    #[serde(default)]
    pub duration_ms: Option<i64>,
}

/// `TurnStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    /// Finished normally.
    Completed,
    /// Stopped by `turn/interrupt`.
    Interrupted,
    /// Model or runtime error, see `error`.
    Failed,
    /// Running.
    InProgress,
}

/// `TurnError` (also the `error` of the `error` notification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    /// e.g. "We’re currently experiencing high demand, …" for a model HTTP 500.
    pub message: String,
    /// Machine-readable category: a string (`"internalServerError"`) or an object
    /// (`{"httpConnectionFailed":{"httpStatusCode":401}}`); kept raw.
    #[serde(default)]
    pub codex_error_info: Option<Value>,
    /// Extra detail.
    #[serde(default)]
    pub additional_details: Option<String>,
}

/// Status of a command, file change or dynamic tool call item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemStatus {
    /// Running (interrupted turns leave items in this state: no `item/completed` follows).
    InProgress,
    /// Done.
    Completed,
    /// Ran and failed.
    Failed,
    /// An approval was declined.
    Declined,
    /// A status this client does not know.
    #[serde(other)]
    Unknown,
}

/// One output item of a dynamic tool call (`DynamicToolCallOutputContentItem`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToolContentItem {
    /// Text for the model.
    #[serde(rename_all = "camelCase")]
    InputText {
        /// The text.
        text: String,
    },
    /// An image by URL (never produced by Beckon; decoded for completeness).
    #[serde(rename_all = "camelCase")]
    InputImage {
        /// Data or http URL.
        image_url: String,
    },
}

/// One file of a `fileChange` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    /// Absolute path.
    pub path: String,
    /// `{"type":"add"}`, `{"type":"update","move_path":…}`, …; kept raw.
    pub kind: Value,
    /// Unified diff (or content for adds).
    #[serde(default)]
    pub diff: String,
}

/// `ThreadItem`: what the agent did, as reported by `item/started` / `item/completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ThreadItem {
    /// The prompt as Codex recorded it.
    #[serde(rename_all = "camelCase")]
    UserMessage {
        /// Item id.
        id: String,
        /// `UserInput` values, kept raw.
        #[serde(default)]
        content: Vec<Value>,
    },
    /// Text from the model; the last one of a turn is its answer.
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        /// Item id.
        id: String,
        /// Empty in `item/started`, complete in `item/completed`.
        text: String,
    },
    /// Reasoning summary.
    #[serde(rename_all = "camelCase")]
    Reasoning {
        /// Item id.
        id: String,
        /// Summary parts (markdown).
        #[serde(default)]
        summary: Vec<String>,
        /// Raw reasoning parts, usually empty.
        #[serde(default)]
        content: Vec<String>,
    },
    /// A shell command the agent ran.
    #[serde(rename_all = "camelCase")]
    CommandExecution {
        /// Item id (the model's call id).
        id: String,
        /// As run, e.g. `/bin/bash -c 'ls'`.
        command: String,
        /// Working directory.
        cwd: String,
        /// `declined` when an approval was refused.
        status: ItemStatus,
        /// stdout+stderr, set on completion.
        #[serde(default)]
        aggregated_output: Option<String>,
        /// Set on completion.
        #[serde(default)]
        exit_code: Option<i32>,
    },
    /// An `apply_patch` edit.
    #[serde(rename_all = "camelCase")]
    FileChange {
        /// Item id.
        id: String,
        /// Files touched.
        changes: Vec<FileChange>,
        /// Outcome.
        status: ItemStatus,
    },
    /// A call of one of our dynamic tools (the `item/tool/call` request carries the same call id).
    #[serde(rename_all = "camelCase")]
    DynamicToolCall {
        /// Call id.
        id: String,
        /// Namespace for namespaced tools.
        #[serde(default)]
        namespace: Option<String>,
        /// Tool name.
        tool: String,
        /// Arguments the model passed.
        arguments: Value,
        /// Outcome.
        status: ItemStatus,
        /// Our answer, on completion.
        #[serde(default)]
        content_items: Option<Vec<ToolContentItem>>,
        /// Our `success`, on completion.
        #[serde(default)]
        success: Option<bool>,
    },
    /// Any other item kind, kept as raw JSON.
    #[serde(untagged)]
    Other(Value),
}

/// Token counts (`TokenUsageBreakdown`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageBreakdown {
    /// Sum of the others.
    pub total_tokens: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Of which cached.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Of which reasoning.
    #[serde(default)]
    pub reasoning_output_tokens: u64,
}

/// Field-wise sum (used to total a turn's model calls).
impl std::ops::Add for TokenUsageBreakdown {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            total_tokens: self.total_tokens + other.total_tokens,
            input_tokens: self.input_tokens + other.input_tokens,
            cached_input_tokens: self.cached_input_tokens + other.cached_input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            reasoning_output_tokens: self.reasoning_output_tokens + other.reasoning_output_tokens,
        }
    }
}

/// `ThreadTokenUsage`: `total` is cumulative for the thread, `last` is the last model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    /// Whole thread so far.
    pub total: TokenUsageBreakdown,
    /// Last model response.
    pub last: TokenUsageBreakdown,
    /// 95 % of the catalog's context window.
    #[serde(default)]
    pub model_context_window: Option<u64>,
}
