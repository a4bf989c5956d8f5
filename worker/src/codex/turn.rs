//! One Codex turn, end to end: the operation the worker calls per task run.
//!
//! spawn → `initialize`/`initialized` → `thread/resume` (falling back to `thread/start` with the
//! dynamic tools when Codex rejects the resume) → `turn/start` → stream events until
//! `turn/completed`, answering tool calls through [`ToolHandler`] and declining approvals.
//! Watchdogs: handshake timeout, no-progress timeout (no message from Codex), overall deadline;
//! they and the [`CancellationToken`] send `turn/interrupt`, wait a grace period for
//! `turn/completed`, and kill the process group otherwise. A turn that started always ends in a
//! [`TurnOutcome`] (so the caller keeps the thread id); [`CodexError`] means no turn result.
//! The process never outlives this call.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{CodexProcess, Incoming, SpawnSpec, EXIT_GRACE};
use super::error::CodexError;
use super::protocol::{
    self as wire, ApprovalDecision, ApprovalPolicy, ApprovalResponse, ClientInfo, DynamicToolCallResponse,
    DynamicToolSpec, InitializeCapabilities, InitializeParams, JsonRpcError, SandboxMode, SandboxPolicy,
    ServerNotification, ServerRequest, ThreadItem, ThreadResumeParams, ThreadStartParams, TokenUsageBreakdown,
    ToolContentItem, TurnInterruptParams, TurnStartParams, UserInput, METHOD_NOT_FOUND,
};

/// Default for [`Timeouts::handshake`]: `initialize` takes 0.05–0.3 s on a 2-core VM.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default for [`Timeouts::request`] (`thread/*`, `turn/start`: ~20–150 ms observed).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default for [`Timeouts::no_progress`]: silence from Codex this long means it is stuck.
pub const NO_PROGRESS_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Default for [`Timeouts::deadline`]: a whole run, handshake to `turn/completed`.
pub const TURN_DEADLINE: Duration = Duration::from_secs(60 * 60);
/// Default for [`Timeouts::tool_call`]: one dynamic tool call (a tracker API call or two).
pub const TOOL_CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Default for [`Timeouts::interrupt_grace`]: `turn/interrupt` → `turn/completed` takes ~20 ms.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// Every wait of a run, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Spawn to `initialize` result.
    pub handshake: Duration,
    /// Any other request's response.
    pub request: Duration,
    /// Longest silence from Codex during a turn (our own tool calls don't count).
    pub no_progress: Duration,
    /// The whole run.
    pub deadline: Duration,
    /// One [`ToolHandler::call`].
    pub tool_call: Duration,
    /// From `turn/interrupt` to giving up and killing the process group.
    pub interrupt_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            handshake: HANDSHAKE_TIMEOUT,
            request: REQUEST_TIMEOUT,
            no_progress: NO_PROGRESS_TIMEOUT,
            deadline: TURN_DEADLINE,
            tool_call: TOOL_CALL_TIMEOUT,
            interrupt_grace: INTERRUPT_GRACE,
        }
    }
}

/// How to run Codex for one task.
#[derive(Debug, Clone)]
pub struct CodexConfig {
    /// The native binary (`scripts/install-codex` prints it; `BECKON_CODEX_BIN`).
    pub bin: PathBuf,
    /// The task's `CODEX_HOME` (with `config.toml`, see [`write_config`](super::write_config)).
    pub codex_home: PathBuf,
    /// The task's workdir (a git worktree).
    pub cwd: PathBuf,
    /// The child's whole environment besides `CODEX_HOME` (see [`allowed_env`](super::allowed_env)).
    pub env: Vec<(String, String)>,
    /// Watchdogs.
    pub timeouts: Timeouts,
    /// Default [`ApprovalPolicy::Never`]: nobody is there to approve.
    pub approval_policy: ApprovalPolicy,
    /// Default [`SandboxMode::WorkspaceWrite`] (network off).
    pub sandbox: SandboxMode,
    /// Extra writable roots under workspace-write: the repository's git dir(s), since `.git` is
    /// read-only otherwise (for a worktree: its gitdir and the common dir).
    pub writable_roots: Vec<PathBuf>,
}

impl CodexConfig {
    /// A config with the worker defaults.
    #[must_use]
    pub fn new(bin: PathBuf, codex_home: PathBuf, cwd: PathBuf, env: Vec<(String, String)>) -> Self {
        Self {
            bin,
            codex_home,
            cwd,
            env,
            timeouts: Timeouts::default(),
            approval_policy: ApprovalPolicy::Never,
            sandbox: SandboxMode::WorkspaceWrite,
            writable_roots: Vec::new(),
        }
    }

    fn sandbox_policy(&self) -> SandboxPolicy {
        match self.sandbox {
            SandboxMode::ReadOnly => SandboxPolicy::ReadOnly { network_access: false },
            SandboxMode::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
                writable_roots: self.writable_roots.clone(),
                network_access: false,
                exclude_tmpdir_env_var: false,
                exclude_slash_tmp: false,
            },
            SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        }
    }
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct TurnRequest {
    /// Continue this thread (from an earlier [`TurnOutcome::thread_id`]); `None` starts one.
    pub resume_thread_id: Option<String>,
    /// Offered at `thread/start` (stored with the thread, so resumes keep them).
    pub dynamic_tools: Vec<DynamicToolSpec>,
    /// The user input of the turn.
    pub prompt: String,
    /// Developer instructions at `thread/start`.
    pub developer_instructions: Option<String>,
    /// Prepended to the prompt (blank line between) when the resume fell back to a new thread,
    /// e.g. "Earlier conversation on this issue could not be restored; read the thread first."
    pub continuity_note: Option<String>,
}

/// A dynamic tool's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// What the model reads.
    pub text: String,
    /// `false` tells the model the call failed or was refused.
    pub success: bool,
}

/// Runs the dynamic tools (`comment_reply`, …) for a task.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    /// Performs `tool` with the model's `arguments`. Failures are results with `success: false`;
    /// the run bounds the call with [`Timeouts::tool_call`].
    async fn call(&self, tool: &str, arguments: Value) -> ToolResult;
}

/// Usage of a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// Sum over this turn's model calls.
    pub turn: TokenUsageBreakdown,
    /// Cumulative for the thread, as last reported.
    pub thread_total: TokenUsageBreakdown,
    /// The model's usable context window.
    pub model_context_window: Option<u64>,
}

/// The transcript of a run, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// The thread is loaded; `resumed: false` with `resume_error` means a requested resume fell back.
    ThreadReady {
        /// Thread id.
        thread_id: String,
        /// True when the requested thread was resumed.
        resumed: bool,
        /// Why the resume was rejected.
        resume_error: Option<String>,
    },
    /// Codex accepted `turn/start`: the task is now running.
    TurnStarted {
        /// The turn id.
        turn_id: String,
    },
    /// A complete agent message.
    Text {
        /// Item id.
        id: String,
        /// The text.
        text: String,
    },
    /// A reasoning summary.
    Reasoning {
        /// Item id.
        id: String,
        /// Summary text.
        text: String,
    },
    /// The agent started a tool: a dynamic tool (`name` = tool), `shell` or `apply_patch`.
    ToolUse {
        /// Item / call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments (dynamic tools), `{"command","cwd"}` (shell) or `{"changes"}` (apply_patch).
        input: Value,
    },
    /// A tool finished.
    ToolResult {
        /// Same id as the [`TurnEvent::ToolUse`].
        id: String,
        /// Output text (command output, our tool answer, the diff).
        output: String,
        /// Completed successfully.
        success: bool,
    },
    /// An approval request was declined.
    ApprovalDeclined {
        /// The command or file change item.
        item_id: String,
        /// The command, when known.
        detail: Option<String>,
    },
    /// Codex reported an error (`will_retry` while it retries a connection).
    Error {
        /// Message.
        message: String,
        /// Codex retries by itself.
        will_retry: bool,
    },
    /// Codex warned (e.g. unknown model metadata).
    Warning {
        /// Message.
        message: String,
    },
    /// Usage after a model call.
    Usage(TurnUsage),
}

/// Receives [`TurnEvent`]s; must not block.
pub trait EventSink: Send + Sync {
    /// Records one event.
    fn emit(&self, event: TurnEvent);
}

impl EventSink for mpsc::UnboundedSender<TurnEvent> {
    fn emit(&self, event: TurnEvent) {
        if self.send(event).is_err() {
            tracing::debug!("turn event receiver gone");
        }
    }
}

/// Why a turn was interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptReason {
    /// The caller's token fired.
    Cancelled,
    /// Watchdog: Codex was silent for [`Timeouts::no_progress`].
    NoProgress,
    /// Watchdog: [`Timeouts::deadline`] passed.
    Deadline,
    /// Codex reported the turn interrupted without us asking.
    Codex,
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnStatus {
    /// The agent finished.
    Completed,
    /// The model or Codex failed the turn (e.g. model HTTP 500); the thread stays usable.
    Failed {
        /// Codex's message.
        message: String,
    },
    /// Stopped before the end.
    Interrupted {
        /// Who stopped it.
        reason: InterruptReason,
    },
}

impl TurnStatus {
    /// Whether running the task again can help (watchdogs and model failures: yes; cancel: no).
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Completed => false,
            Self::Failed { .. } => true,
            Self::Interrupted { reason } => match reason {
                InterruptReason::Cancelled => false,
                InterruptReason::NoProgress | InterruptReason::Deadline | InterruptReason::Codex => true,
            },
        }
    }
}

/// The result of [`run_turn`].
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Persist it: the next run resumes it.
    pub thread_id: String,
    /// The turn.
    pub turn_id: String,
    /// How it ended.
    pub status: TurnStatus,
    /// The last agent message.
    pub final_message: Option<String>,
    /// Token usage.
    pub usage: TurnUsage,
    /// True when `resume_thread_id` was resumed; false for a new thread (incl. a fallback).
    pub resumed: bool,
    /// Set when a requested resume was rejected and a new thread started instead.
    pub resume_error: Option<String>,
    /// True when Codex did not confirm an interrupt in time and its process group was killed.
    pub forced_kill: bool,
    /// Spawn to end.
    pub elapsed: Duration,
}

/// Runs one turn of Codex on `config.cwd`. The process is always gone when this returns.
///
/// # Errors
/// [`CodexError`] when no turn outcome exists: spawn failure, handshake/request timeouts, Codex
/// rejecting `thread/start`/`turn/start`, the process exiting mid-turn, or cancellation/deadline
/// before the turn started.
pub async fn run_turn(
    config: &CodexConfig,
    request: TurnRequest,
    tools: &dyn ToolHandler,
    events: &dyn EventSink,
    cancel: CancellationToken,
) -> Result<TurnOutcome, CodexError> {
    let started = Instant::now();
    let spec = SpawnSpec {
        bin: config.bin.clone(),
        codex_home: config.codex_home.clone(),
        cwd: config.cwd.clone(),
        env: config.env.clone(),
    };
    let (process, mut incoming) = CodexProcess::spawn(&spec)?;
    let deadline = tokio::time::Instant::from_std(started + config.timeouts.deadline);
    let mut run = Run { process, config, tools, events, cancel, deadline };
    let result = run.drive(request, &mut incoming, started).await;
    let Run { mut process, .. } = run;
    if matches!(&result, Ok(outcome) if outcome.forced_kill) {
        process.kill().await;
    }
    let exit = process.shutdown(EXIT_GRACE).await;
    tracing::debug!(?exit, elapsed_ms = started.elapsed().as_millis(), "codex run finished");
    result
}

/// What a message did to the turn.
enum Step {
    Continue,
    Completed(wire::Turn),
    Stop(InterruptReason),
}

/// Collected while streaming.
#[derive(Default)]
struct TurnState {
    final_message: Option<String>,
    usage: TurnUsage,
    last_error: Option<String>,
}

struct Run<'a> {
    process: CodexProcess,
    config: &'a CodexConfig,
    tools: &'a dyn ToolHandler,
    events: &'a dyn EventSink,
    cancel: CancellationToken,
    deadline: tokio::time::Instant,
}

impl Run<'_> {
    async fn drive(
        &mut self,
        request: TurnRequest,
        incoming: &mut mpsc::Receiver<Incoming>,
        started: Instant,
    ) -> Result<TurnOutcome, CodexError> {
        let timeouts = self.config.timeouts;
        let init = InitializeParams {
            client_info: ClientInfo {
                name: "beckon".into(),
                title: Some("Beckon".into()),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            capabilities: InitializeCapabilities { experimental_api: true },
        };
        let info = self.guard(self.process.request(&init, timeouts.handshake)).await.map_err(|e| {
            if matches!(e, CodexError::RequestTimeout { .. }) {
                CodexError::HandshakeTimeout(timeouts.handshake)
            } else {
                e
            }
        })?;
        tracing::debug!(user_agent = %info.user_agent, "codex initialized");
        self.guard(self.process.notify(wire::INITIALIZED, json!({}))).await?;

        let (thread_id, resumed, resume_error) = self.open_thread(&request).await?;
        self.events.emit(TurnEvent::ThreadReady {
            thread_id: thread_id.clone(),
            resumed,
            resume_error: resume_error.clone(),
        });
        let prompt = match (&resume_error, &request.continuity_note) {
            (Some(_), Some(note)) => format!("{note}\n\n{}", request.prompt),
            _ => request.prompt,
        };
        let turn_start = TurnStartParams {
            thread_id: thread_id.clone(),
            input: vec![UserInput::Text { text: prompt }],
            sandbox_policy: Some(self.config.sandbox_policy()),
        };
        let turn = self.guard(self.process.request(&turn_start, timeouts.request)).await?.turn;
        tracing::info!(%thread_id, turn_id = %turn.id, resumed, "codex turn started");
        self.events.emit(TurnEvent::TurnStarted { turn_id: turn.id.clone() });

        let mut state = TurnState::default();
        let (end, reason) = self.stream(incoming, &turn.id, &mut state).await?;
        let (end, forced_kill) = match (end, reason) {
            (Some(end), _) => (Some(end), false),
            (None, Some(reason)) => {
                tracing::info!(?reason, turn_id = %turn.id, "interrupting codex turn");
                let end = self.interrupt(incoming, &thread_id, &turn.id, &mut state).await;
                let forced = end.is_none();
                (end, forced)
            }
            (None, None) => (None, false),
        };
        let status = match (&end, reason) {
            (Some(end), reason) => match end.status {
                wire::TurnStatus::Completed => TurnStatus::Completed,
                wire::TurnStatus::Failed => TurnStatus::Failed {
                    message: end
                        .error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .or_else(|| state.last_error.clone())
                        .unwrap_or_else(|| "turn failed without a message".into()),
                },
                wire::TurnStatus::Interrupted => {
                    TurnStatus::Interrupted { reason: reason.unwrap_or(InterruptReason::Codex) }
                }
                wire::TurnStatus::InProgress => {
                    return Err(CodexError::Protocol("turn/completed reported status inProgress".into()))
                }
            },
            (None, Some(reason)) => TurnStatus::Interrupted { reason },
            (None, None) => return Err(CodexError::Protocol("turn ended without turn/completed".into())),
        };
        let final_message = state.final_message.or_else(|| {
            end.as_ref().and_then(|t| {
                t.items.iter().rev().find_map(|item| match item {
                    ThreadItem::AgentMessage { text, .. } => Some(text.clone()),
                    ThreadItem::UserMessage { .. }
                    | ThreadItem::Reasoning { .. }
                    | ThreadItem::CommandExecution { .. }
                    | ThreadItem::FileChange { .. }
                    | ThreadItem::DynamicToolCall { .. }
                    | ThreadItem::Other(_) => None,
                })
            })
        });
        let outcome = TurnOutcome {
            thread_id,
            turn_id: turn.id,
            status,
            final_message,
            usage: state.usage,
            resumed,
            resume_error,
            forced_kill,
            elapsed: started.elapsed(),
        };
        tracing::info!(status = ?outcome.status, elapsed_ms = outcome.elapsed.as_millis(), "codex turn ended");
        Ok(outcome)
    }

    /// `thread/resume`, or `thread/start` when there is nothing to resume or Codex rejects it.
    async fn open_thread(&self, request: &TurnRequest) -> Result<(String, bool, Option<String>), CodexError> {
        let cfg = self.config;
        let mut resume_error = None;
        if let Some(thread_id) = &request.resume_thread_id {
            let resume = ThreadResumeParams {
                thread_id: thread_id.clone(),
                cwd: cfg.cwd.clone(),
                approval_policy: cfg.approval_policy,
                sandbox: cfg.sandbox,
                exclude_turns: true,
            };
            match self.guard(self.process.request(&resume, cfg.timeouts.request)).await {
                Ok(response) => return Ok((response.thread.id, true, None)),
                Err(CodexError::Rpc { error, .. }) => {
                    tracing::warn!(%thread_id, error = %error.message, "thread/resume rejected; starting a new thread");
                    resume_error = Some(error.message);
                }
                Err(e) => return Err(e),
            }
        }
        let start = ThreadStartParams {
            cwd: cfg.cwd.clone(),
            approval_policy: cfg.approval_policy,
            sandbox: cfg.sandbox,
            dynamic_tools: request.dynamic_tools.clone(),
            developer_instructions: request.developer_instructions.clone(),
        };
        let response = self.guard(self.process.request(&start, cfg.timeouts.request)).await?;
        Ok((response.thread.id, false, resume_error))
    }

    /// Races a setup step against cancellation and the deadline.
    async fn guard<T>(&self, step: impl std::future::Future<Output = Result<T, CodexError>>) -> Result<T, CodexError> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(CodexError::Cancelled),
            () = tokio::time::sleep_until(self.deadline) => Err(CodexError::Deadline(self.config.timeouts.deadline)),
            result = step => result,
        }
    }

    /// Streams until `turn/completed` (returned) or a reason to interrupt.
    async fn stream(
        &self,
        incoming: &mut mpsc::Receiver<Incoming>,
        turn_id: &str,
        state: &mut TurnState,
    ) -> Result<(Option<wire::Turn>, Option<InterruptReason>), CodexError> {
        let no_progress = self.config.timeouts.no_progress;
        let mut idle_until = tokio::time::Instant::now() + no_progress;
        loop {
            let message = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Ok((None, Some(InterruptReason::Cancelled))),
                () = tokio::time::sleep_until(self.deadline) => return Ok((None, Some(InterruptReason::Deadline))),
                () = tokio::time::sleep_until(idle_until) => return Ok((None, Some(InterruptReason::NoProgress))),
                message = incoming.recv() => message,
            };
            let Some(message) = message else {
                return Err(CodexError::ProcessExited("stdout closed during the turn".into()));
            };
            match self.handle(message, turn_id, state, false).await? {
                Step::Continue => {}
                Step::Completed(turn) => return Ok((Some(turn), None)),
                Step::Stop(reason) => return Ok((None, Some(reason))),
            }
            // Reset after handling: time spent in our own tool calls is not Codex's silence.
            idle_until = tokio::time::Instant::now() + no_progress;
        }
    }

    /// Sends `turn/interrupt` and waits up to the grace period for `turn/completed`.
    async fn interrupt(
        &self,
        incoming: &mut mpsc::Receiver<Incoming>,
        thread_id: &str,
        turn_id: &str,
        state: &mut TurnState,
    ) -> Option<wire::Turn> {
        let grace = self.config.timeouts.interrupt_grace;
        let until = tokio::time::Instant::now() + grace;
        let params = TurnInterruptParams { thread_id: thread_id.into(), turn_id: turn_id.into() };
        let request = self.process.request(&params, grace);
        tokio::pin!(request);
        let mut requested = false;
        loop {
            tokio::select! {
                result = &mut request, if !requested => {
                    requested = true;
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "turn/interrupt failed");
                    }
                }
                () = tokio::time::sleep_until(until) => {
                    tracing::warn!("no turn/completed within {grace:?} of turn/interrupt; killing codex");
                    return None;
                }
                message = incoming.recv() => {
                    let message = message?;
                    match self.handle(message, turn_id, state, true).await {
                        Ok(Step::Completed(turn)) => return Some(turn),
                        Ok(Step::Continue | Step::Stop(_)) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "while interrupting");
                            return None;
                        }
                    }
                }
            }
        }
    }

    async fn handle(
        &self,
        message: Incoming,
        turn_id: &str,
        state: &mut TurnState,
        interrupting: bool,
    ) -> Result<Step, CodexError> {
        match message {
            Incoming::Notification(notification) => Ok(self.on_notification(notification, turn_id, state)),
            Incoming::Request { id, request } => match request {
                ServerRequest::DynamicToolCall(call) => {
                    let (result, step) = if interrupting {
                        (ToolResult { text: "the turn is being interrupted".into(), success: false }, Step::Continue)
                    } else {
                        self.call_tool(&call.tool, call.arguments).await
                    };
                    let response = DynamicToolCallResponse {
                        content_items: vec![ToolContentItem::InputText { text: result.text }],
                        success: result.success,
                    };
                    self.process.respond(id, &response).await?;
                    Ok(step)
                }
                ServerRequest::CommandApproval(params) => {
                    tracing::info!(item_id = %params.item_id, command = ?params.command, "declining command approval");
                    self.events.emit(TurnEvent::ApprovalDeclined { item_id: params.item_id, detail: params.command });
                    self.process.respond(id, &ApprovalResponse { decision: ApprovalDecision::Decline }).await?;
                    Ok(Step::Continue)
                }
                ServerRequest::FileChangeApproval(params) => {
                    tracing::info!(item_id = %params.item_id, "declining file change approval");
                    self.events.emit(TurnEvent::ApprovalDeclined { item_id: params.item_id, detail: params.reason });
                    self.process.respond(id, &ApprovalResponse { decision: ApprovalDecision::Decline }).await?;
                    Ok(Step::Continue)
                }
                ServerRequest::Unsupported { method, .. } => {
                    tracing::debug!(%method, "refusing unsupported server request");
                    let error = JsonRpcError {
                        code: METHOD_NOT_FOUND,
                        message: format!("beckon does not support {method}"),
                        data: None,
                    };
                    self.process.respond_error(id, error).await?;
                    Ok(Step::Continue)
                }
            },
        }
    }

    /// Runs a dynamic tool, bounded by the tool timeout, cancellation and the deadline.
    async fn call_tool(&self, tool: &str, arguments: Value) -> (ToolResult, Step) {
        let limit = self.config.timeouts.tool_call;
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => (
                ToolResult { text: "cancelled".into(), success: false },
                Step::Stop(InterruptReason::Cancelled),
            ),
            () = tokio::time::sleep_until(self.deadline) => (
                ToolResult { text: "deadline reached".into(), success: false },
                Step::Stop(InterruptReason::Deadline),
            ),
            result = tokio::time::timeout(limit, self.tools.call(tool, arguments)) => match result {
                Ok(result) => (result, Step::Continue),
                Err(_) => {
                    tracing::warn!(tool, "dynamic tool timed out after {limit:?}");
                    (ToolResult { text: format!("{tool} timed out after {limit:?}"), success: false }, Step::Continue)
                }
            },
        }
    }

    fn on_notification(&self, notification: ServerNotification, turn_id: &str, state: &mut TurnState) -> Step {
        match notification {
            ServerNotification::TurnCompleted(done) => {
                if done.turn.id == turn_id {
                    return Step::Completed(done.turn);
                }
                tracing::debug!(other = %done.turn.id, "turn/completed for another turn");
            }
            ServerNotification::ItemStarted(started) => {
                if let Some(event) = tool_use(started.item) {
                    self.events.emit(event);
                }
            }
            ServerNotification::ItemCompleted(completed) => match completed.item {
                ThreadItem::AgentMessage { id, text } => {
                    state.final_message = Some(text.clone());
                    self.events.emit(TurnEvent::Text { id, text });
                }
                ThreadItem::Reasoning { id, summary, .. } => {
                    self.events.emit(TurnEvent::Reasoning { id, text: summary.join("\n") });
                }
                item @ (ThreadItem::CommandExecution { .. }
                | ThreadItem::FileChange { .. }
                | ThreadItem::DynamicToolCall { .. }) => {
                    if let Some(event) = tool_result(item) {
                        self.events.emit(event);
                    }
                }
                ThreadItem::UserMessage { .. } => {}
                ThreadItem::Other(raw) => tracing::debug!(item = %raw, "unmodelled item completed"),
            },
            ServerNotification::TokenUsageUpdated(update) => {
                if update.turn_id == turn_id {
                    let usage = &mut state.usage;
                    usage.turn = usage.turn + update.token_usage.last;
                    usage.thread_total = update.token_usage.total;
                    usage.model_context_window = update.token_usage.model_context_window;
                    self.events.emit(TurnEvent::Usage(*usage));
                }
            }
            ServerNotification::Error(error) => {
                tracing::warn!(message = %error.error.message, will_retry = error.will_retry, "codex error");
                state.last_error = Some(error.error.message.clone());
                self.events.emit(TurnEvent::Error { message: error.error.message, will_retry: error.will_retry });
            }
            ServerNotification::Warning(warning) => {
                tracing::info!(message = %warning.message, "codex warning");
                self.events.emit(TurnEvent::Warning { message: warning.message });
            }
            ServerNotification::TurnStarted(_) | ServerNotification::AgentMessageDelta(_) => {}
            ServerNotification::Unknown { method, params } => {
                tracing::debug!(%method, %params, "unhandled codex notification");
            }
        }
        Step::Continue
    }
}

/// The `ToolUse` event for a started tool-like item.
fn tool_use(item: ThreadItem) -> Option<TurnEvent> {
    match item {
        ThreadItem::CommandExecution { id, command, cwd, .. } => {
            Some(TurnEvent::ToolUse { id, name: "shell".into(), input: json!({ "command": command, "cwd": cwd }) })
        }
        ThreadItem::FileChange { id, changes, .. } => {
            let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
            Some(TurnEvent::ToolUse { id, name: "apply_patch".into(), input: json!({ "paths": paths }) })
        }
        ThreadItem::DynamicToolCall { id, tool, arguments, .. } => {
            Some(TurnEvent::ToolUse { id, name: tool, input: arguments })
        }
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::Other(_) => None,
    }
}

/// The `ToolResult` event for a completed tool-like item.
fn tool_result(item: ThreadItem) -> Option<TurnEvent> {
    match item {
        ThreadItem::CommandExecution { id, status, aggregated_output, exit_code, .. } => Some(TurnEvent::ToolResult {
            id,
            output: aggregated_output.unwrap_or_default(),
            success: status == wire::ItemStatus::Completed && exit_code == Some(0),
        }),
        ThreadItem::FileChange { id, changes, status } => Some(TurnEvent::ToolResult {
            id,
            output: changes.iter().map(|c| c.diff.as_str()).collect::<Vec<_>>().join("\n"),
            success: status == wire::ItemStatus::Completed,
        }),
        ThreadItem::DynamicToolCall { id, content_items, success, status, .. } => Some(TurnEvent::ToolResult {
            id,
            output: content_items
                .unwrap_or_default()
                .into_iter()
                .filter_map(|c| match c {
                    ToolContentItem::InputText { text } => Some(text),
                    ToolContentItem::InputImage { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
            success: success.unwrap_or(status == wire::ItemStatus::Completed),
        }),
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::Other(_) => None,
    }
}
