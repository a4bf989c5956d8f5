//! JSON-RPC envelopes as `codex app-server` speaks them: one JSON object per line, no `"jsonrpc"`
//! field, ids that are integers or strings, `params` always present (`{}` when empty).
//!
//! Owns only framing: classifying a decoded line into request / notification / response / error,
//! and the outgoing shapes. It knows no method names; `requests`, `notifications` and
//! `server_requests` give the params their types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A JSON-RPC id. Codex numbers its own server requests from 0; we number ours from 1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// The form both sides use in practice.
    Integer(i64),
    /// Accepted by Codex and kept for completeness.
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Integer(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `error` member of an error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonRpcError {
    /// Codex uses -32600 for every error observed (not initialized, unknown method, thread not found…).
    pub code: i64,
    /// Human-readable reason, e.g. `thread <id> already has an active writer`.
    pub message: String,
    /// Optional structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Error code we answer server requests we do not support with (Codex's own "invalid request").
pub const INVALID_REQUEST: i64 = -32600;
/// Error code for a method we do not implement.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// A request we send.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutgoingRequest {
    /// Matches the response.
    pub id: RequestId,
    /// Wire method, e.g. `turn/start`.
    pub method: &'static str,
    /// Always serialized, `{}` when empty (Codex rejects a missing `params`).
    pub params: Value,
}

/// A notification we send (only `initialized`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutgoingNotification {
    /// Wire method.
    pub method: &'static str,
    /// Always serialized, `{}` when empty.
    pub params: Value,
}

/// Our answer to a server request: exactly one of `result` or `error`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OutgoingResponse {
    /// Success.
    Result {
        /// The id of the server request.
        id: RequestId,
        /// The typed response, serialized.
        result: Value,
    },
    /// Refusal.
    Error {
        /// The id of the server request.
        id: RequestId,
        /// Why.
        error: JsonRpcError,
    },
}

/// Anything Codex writes on stdout, classified by which members are present.
#[derive(Debug, Clone, PartialEq)]
pub enum IncomingMessage {
    /// `{"id","method","params"}`: Codex asks us something (tool call, approval).
    Request {
        /// Answer with this id.
        id: RequestId,
        /// Wire method.
        method: String,
        /// Raw params (typed by `server_requests`).
        params: Value,
    },
    /// `{"method","params","emittedAtMs"}`.
    Notification {
        /// Wire method.
        method: String,
        /// Raw params (typed by `notifications`).
        params: Value,
    },
    /// `{"id","result"}`.
    Response {
        /// The id of our request.
        id: RequestId,
        /// Raw result (typed by the request's `Response`).
        result: Value,
    },
    /// `{"id","error"}`.
    Error {
        /// The id of our request (`null` ids are reported as `None`).
        id: Option<RequestId>,
        /// The error.
        error: JsonRpcError,
    },
}

/// Union of the members of every envelope; classification happens in [`IncomingMessage::parse`].
#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<JsonRpcError>,
}

/// Why a line is not a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Not JSON (Codex itself ignores such lines; so do we, at debug level).
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    /// JSON, but no envelope fits.
    #[error("not a JSON-RPC message: {0}")]
    NotJsonRpc(String),
}

impl IncomingMessage {
    /// Decodes one stdout line.
    ///
    /// # Errors
    /// [`FrameError`] when the line is not JSON or matches no envelope.
    pub fn parse(line: &str) -> Result<Self, FrameError> {
        let raw: RawMessage = serde_json::from_str(line)?;
        match (raw.id, raw.method, raw.result, raw.error) {
            (Some(id), Some(method), None, None) => {
                Ok(Self::Request { id, method, params: raw.params.unwrap_or(Value::Null) })
            }
            (None, Some(method), None, None) => {
                Ok(Self::Notification { method, params: raw.params.unwrap_or(Value::Null) })
            }
            (Some(id), None, Some(result), None) => Ok(Self::Response { id, result }),
            (id, None, None, Some(error)) => Ok(Self::Error { id, error }),
            (id, method, result, error) => Err(FrameError::NotJsonRpc(format!(
                "id={id:?} method={method:?} result={} error={}",
                result.is_some(),
                error.is_some()
            ))),
        }
    }
}
