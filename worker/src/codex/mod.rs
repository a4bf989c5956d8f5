//! The Codex client (DESIGN §5): runs the real OpenAI Codex (`codex app-server`, JSON-RPC over
//! stdio, version pinned in `codex.version`) for one turn of a task.
//!
//! - [`protocol`]: the typed subset of the wire protocol (no I/O).
//! - `client`: one child process, its pipes and the pending-request table.
//! - `turn`: [`run_turn`], handshake → thread resume/start → turn → events, with watchdogs.
//! - `config`: the task's `CODEX_HOME/config.toml`.
//! - `error`: [`CodexError`].

mod client;
mod config;
mod error;
pub mod protocol;
mod turn;

pub use client::{
    allowed_env, CodexProcess, Incoming, SpawnSpec, DEFAULT_ENV_ALLOW_LIST, EXIT_GRACE, KILL_TIMEOUT,
    TASK_JOIN_TIMEOUT, WRITE_TIMEOUT,
};
pub use config::{config_toml, write_config, CodexSettings};
pub use error::CodexError;
pub use turn::{
    run_turn, CodexConfig, EventSink, InterruptReason, Timeouts, ToolHandler, ToolResult, TurnEvent, TurnOutcome,
    TurnRequest, TurnStatus, TurnUsage, HANDSHAKE_TIMEOUT, INTERRUPT_GRACE, NO_PROGRESS_TIMEOUT, REQUEST_TIMEOUT,
    TOOL_CALL_TIMEOUT, TURN_DEADLINE,
};
