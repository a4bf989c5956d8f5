//! Client → Codex requests we send, one params type and one response type per method, checked
//! against `schema/json-experimental/v2/*Params.json` of codex-cli 0.169.0.
//!
//! Only the fields Beckon uses are modelled. Responses ignore unknown fields (Codex adds many), so a
//! newer Codex that adds fields still decodes. Optional params are omitted rather than sent as
//! `null`, so Codex applies its own defaults.

use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::items::Turn;

/// A request type: its wire method and the type of its `result`.
pub trait ClientRequest: Serialize {
    /// Wire method, e.g. `thread/start`.
    const METHOD: &'static str;
    /// What `result` decodes to.
    type Response: DeserializeOwned;
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// Shows up as the `originator` header of model requests.
    pub client_info: ClientInfo,
    /// We need `experimentalApi` for dynamic tools.
    pub capabilities: InitializeCapabilities,
}

/// Who we are.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClientInfo {
    /// Machine name, e.g. `beckon`.
    pub name: String,
    /// Display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Our version.
    pub version: String,
}

/// The capabilities we ask for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    /// Dynamic tools are experimental API in 0.169.0.
    pub experimental_api: bool,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// e.g. `beckon/0.169.0 (Debian 12.0.0; x86_64) …`: carries the Codex version.
    pub user_agent: String,
    /// The `CODEX_HOME` Codex resolved.
    #[serde(default)]
    pub codex_home: Option<String>,
}

impl ClientRequest for InitializeParams {
    const METHOD: &'static str = "initialize";
    type Response = InitializeResponse;
}

/// When Codex asks before running something (`AskForApproval`; the granular form is not used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Ask for anything not known safe.
    Untrusted,
    /// Ask when the model requests escalation.
    OnRequest,
    /// Never ask (the worker default: there is nobody to ask).
    Never,
}

/// Thread-level sandbox mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No writes.
    ReadOnly,
    /// Writes inside cwd and the writable roots; no network (the worker default).
    WorkspaceWrite,
    /// No sandbox.
    DangerFullAccess,
}

/// Per-turn sandbox policy (`SandboxPolicy`, camelCase tag).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum SandboxPolicy {
    /// No sandbox.
    DangerFullAccess,
    /// Read-only filesystem.
    #[serde(rename_all = "camelCase")]
    ReadOnly {
        /// Network allowed.
        #[serde(default)]
        network_access: bool,
    },
    /// Writes in cwd plus `writable_roots`.
    #[serde(rename_all = "camelCase")]
    WorkspaceWrite {
        /// Absolute paths; include the repository's git dir so `git commit` works.
        #[serde(default)]
        writable_roots: Vec<PathBuf>,
        /// Beckon keeps it false: the agent reaches the tracker through dynamic tools only.
        #[serde(default)]
        network_access: bool,
        /// Codex default false.
        #[serde(default)]
        exclude_tmpdir_env_var: bool,
        /// Codex default false.
        #[serde(default)]
        exclude_slash_tmp: bool,
    },
}

/// A tool the client implements (`DynamicToolSpec`, function form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DynamicToolSpec {
    /// `{"type":"function","name","description","inputSchema"}`.
    #[serde(rename_all = "camelCase")]
    Function {
        /// Tool name the model calls, e.g. `comment_reply`.
        name: String,
        /// What the model reads to decide.
        description: String,
        /// JSON Schema of the arguments.
        input_schema: Value,
    },
}

/// `thread/start` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    /// The task's workdir.
    pub cwd: PathBuf,
    /// Sticky for the thread.
    pub approval_policy: ApprovalPolicy,
    /// Sticky for the thread.
    pub sandbox: SandboxMode,
    /// Stored with the thread: still offered after `thread/resume` in a new process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dynamic_tools: Vec<DynamicToolSpec>,
    /// Added as a developer message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub developer_instructions: Option<String>,
}

impl ClientRequest for ThreadStartParams {
    const METHOD: &'static str = "thread/start";
    type Response = ThreadResponse;
}

/// `thread/resume` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    /// The thread to load.
    pub thread_id: String,
    /// The task's workdir (may differ from the original run's).
    pub cwd: PathBuf,
    /// Re-applied on resume.
    pub approval_policy: ApprovalPolicy,
    /// Re-applied on resume.
    pub sandbox: SandboxMode,
    /// Always true: full-history hydration is deprecated and we don't need the turns.
    pub exclude_turns: bool,
}

impl ClientRequest for ThreadResumeParams {
    const METHOD: &'static str = "thread/resume";
    type Response = ThreadResponse;
}

/// `thread/start` and `thread/resume` result (the parts we read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResponse {
    /// The thread.
    pub thread: Thread,
    /// The model the thread uses.
    #[serde(default)]
    pub model: Option<String>,
}

/// A thread (the parts we read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thread {
    /// UUIDv7; what we persist to resume later.
    pub id: String,
    /// Rollout file, `null` for ephemeral threads.
    #[serde(default)]
    pub path: Option<String>,
}

/// One piece of user input (`UserInput`, text form only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    /// Plain text.
    Text {
        /// The prompt.
        text: String,
    },
}

/// `turn/start` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    /// Thread from `thread/start` or `thread/resume`.
    pub thread_id: String,
    /// The prompt.
    pub input: Vec<UserInput>,
    /// Sticky override; we always send it so writable roots match this run's workdir.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_policy: Option<SandboxPolicy>,
}

impl ClientRequest for TurnStartParams {
    const METHOD: &'static str = "turn/start";
    type Response = TurnStartResponse;
}

/// `turn/start` result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TurnStartResponse {
    /// The new turn, `inProgress`.
    pub turn: Turn,
}

/// `turn/interrupt` params.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    /// Thread of the running turn.
    pub thread_id: String,
    /// The running turn.
    pub turn_id: String,
}

/// `turn/interrupt` result: `{}`; `turn/completed` with `interrupted` follows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TurnInterruptResponse {}

impl ClientRequest for TurnInterruptParams {
    const METHOD: &'static str = "turn/interrupt";
    type Response = TurnInterruptResponse;
}

/// The `initialized` client notification method (sent with `params: {}`).
pub const INITIALIZED: &str = "initialized";
