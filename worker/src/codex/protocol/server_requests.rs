//! Codex → client requests Beckon answers: dynamic tool calls (`item/tool/call`) and approvals
//! (`item/commandExecution/requestApproval`, `item/fileChange/requestApproval`).
//!
//! Anything else (`item/tool/requestUserInput`, `mcpServer/elicitation/request`, …) decodes to
//! [`ServerRequest::Unsupported`]; the caller answers it with a JSON-RPC error so Codex never waits.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::items::ToolContentItem;

/// `item/tool/call` params (`DynamicToolCallParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallParams {
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
    /// Same as the `dynamicToolCall` item id.
    pub call_id: String,
    /// Namespace for namespaced tools.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Tool name.
    pub tool: String,
    /// Arguments from the model (any JSON).
    pub arguments: Value,
}

/// Our answer to `item/tool/call` (`DynamicToolCallResponse`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallResponse {
    /// What the model sees.
    pub content_items: Vec<ToolContentItem>,
    /// `false` with a text explains a refusal to the model.
    pub success: bool,
}

/// `item/commandExecution/requestApproval` params (the parts we log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandApprovalParams {
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
    /// The command item.
    pub item_id: String,
    /// The command, when it is one.
    #[serde(default)]
    pub command: Option<String>,
    /// Why the model wants it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `item/fileChange/requestApproval` params (the parts we log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeApprovalParams {
    /// Thread.
    pub thread_id: String,
    /// Turn.
    pub turn_id: String,
    /// The fileChange item.
    pub item_id: String,
    /// Why the model wants it.
    #[serde(default)]
    pub reason: Option<String>,
}

/// An approval decision (shared subset of `CommandExecutionApprovalDecision` and
/// `FileChangeApprovalDecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Run it.
    Accept,
    /// Refuse; the turn continues (Beckon's answer: nobody is there to approve).
    Decline,
    /// Refuse and interrupt the turn.
    Cancel,
}

/// Answer to either approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalResponse {
    /// The decision.
    pub decision: ApprovalDecision,
}

/// A decoded server request.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerRequest {
    /// `item/tool/call`.
    DynamicToolCall(DynamicToolCallParams),
    /// `item/commandExecution/requestApproval`.
    CommandApproval(CommandApprovalParams),
    /// `item/fileChange/requestApproval`.
    FileChangeApproval(FileChangeApprovalParams),
    /// Anything else: answered with a JSON-RPC error.
    Unsupported {
        /// Wire method.
        method: String,
        /// Raw params.
        params: Value,
    },
}

impl ServerRequest {
    /// Types a server request by its method.
    ///
    /// # Errors
    /// A known method whose params don't match its type.
    pub fn decode(method: String, params: Value) -> Result<Self, serde_json::Error> {
        Ok(match method.as_str() {
            "item/tool/call" => Self::DynamicToolCall(serde_json::from_value(params)?),
            "item/commandExecution/requestApproval" => Self::CommandApproval(serde_json::from_value(params)?),
            "item/fileChange/requestApproval" => Self::FileChangeApproval(serde_json::from_value(params)?),
            _ => Self::Unsupported { method, params },
        })
    }
}
