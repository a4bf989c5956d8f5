//! Codex → client notifications Beckon consumes, one params type per method.
//!
//! [`ServerNotification::decode`] maps a method name to its type; any other method (Codex 0.169.0
//! sends ~86 kinds: `thread/status/changed`, `account/rateLimits/updated`, …) becomes
//! [`ServerNotification::Unknown`] with its raw params, logged at debug by the caller, never fatal.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::items::{ThreadItem, ThreadTokenUsage, Turn, TurnError};

/// `turn/started` and `turn/completed` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnNotification {
    /// Thread of the turn.
    pub thread_id: String,
    /// The turn; in `turn/completed` its `status` is final.
    pub turn: Turn,
}

/// `item/started` and `item/completed` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemNotification {
    /// The item.
    pub item: ThreadItem,
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
}

/// `item/agentMessage/delta` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessageDeltaNotification {
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
    /// The `agentMessage` item growing.
    pub item_id: String,
    /// Next chunk of text.
    pub delta: String,
}

/// `thread/tokenUsage/updated` params (one per model response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageNotification {
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
    /// Usage.
    pub token_usage: ThreadTokenUsage,
}

/// `error` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    /// Same object as the failed turn's `error`.
    pub error: TurnError,
    /// True while Codex is still retrying (connection failures).
    pub will_retry: bool,
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
}

/// `warning` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WarningNotification {
    /// Thread, when thread-scoped.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// e.g. "Model metadata for `mock-model` not found…".
    pub message: String,
}

/// A decoded notification.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerNotification {
    /// `turn/started`.
    TurnStarted(TurnNotification),
    /// `turn/completed`: the end of a turn, whatever its status; closes all open items.
    TurnCompleted(TurnNotification),
    /// `item/started`.
    ItemStarted(ItemNotification),
    /// `item/completed`.
    ItemCompleted(ItemNotification),
    /// `item/agentMessage/delta`.
    AgentMessageDelta(AgentMessageDeltaNotification),
    /// `thread/tokenUsage/updated`.
    TokenUsageUpdated(TokenUsageNotification),
    /// `error`.
    Error(ErrorNotification),
    /// `warning`.
    Warning(WarningNotification),
    /// Any other method, kept raw.
    Unknown {
        /// Wire method.
        method: String,
        /// Raw params.
        params: Value,
    },
}

impl ServerNotification {
    /// Types a notification by its method.
    ///
    /// # Errors
    /// A known method whose params don't match its type (a protocol drift worth a warning).
    pub fn decode(method: String, params: Value) -> Result<Self, serde_json::Error> {
        Ok(match method.as_str() {
            "turn/started" => Self::TurnStarted(serde_json::from_value(params)?),
            "turn/completed" => Self::TurnCompleted(serde_json::from_value(params)?),
            "item/started" => Self::ItemStarted(serde_json::from_value(params)?),
            "item/completed" => Self::ItemCompleted(serde_json::from_value(params)?),
            "item/agentMessage/delta" => Self::AgentMessageDelta(serde_json::from_value(params)?),
            "thread/tokenUsage/updated" => Self::TokenUsageUpdated(serde_json::from_value(params)?),
            "error" => Self::Error(serde_json::from_value(params)?),
            "warning" => Self::Warning(serde_json::from_value(params)?),
            _ => Self::Unknown { method, params },
        })
    }
}
