//! One `codex app-server` child process and the JSON-RPC plumbing around it.
//!
//! Owns: spawning the native binary (own process group, `kill_on_drop`, `env_clear()` plus the
//! caller's allow-list, so no AWS/GitHub/Linear secret is inherited), a writer task that owns
//! stdin, a reader task that routes responses through the pending-request table and forwards
//! notifications and server requests on a channel, and a stderr task logging at debug. It does
//! not know what a turn is (see `turn.rs`). Every request has a timeout; pending entries are
//! removed on response, on timeout and when stdout closes. `unsafe` is forbidden in this
//! workspace, so the process group is killed with `kill -KILL -- -PGID`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::error::CodexError;
use super::protocol::{
    ClientRequest, IncomingMessage, JsonRpcError, OutgoingNotification, OutgoingRequest, OutgoingResponse, RequestId,
    ServerNotification, ServerRequest, INVALID_REQUEST,
};

/// How long a write to the child's stdin may wait for the writer task's queue.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `shutdown` waits for the process to exit after stdin is closed (it exits in ~30 ms).
pub const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long `kill -KILL` and reaping the child may take.
pub const KILL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the pipe tasks may take to see EOF once the process group is dead.
pub const TASK_JOIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Lines queued for stdin; small, since a request waits for its answer anyway.
const WRITE_QUEUE: usize = 64;
/// Messages queued for the consumer; the reader blocks (backpressure on Codex) when full.
const INCOMING_QUEUE: usize = 1024;

/// What the caller needs to start `codex app-server`.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The native `codex` binary (not the npm JS launcher).
    pub bin: PathBuf,
    /// Set as `CODEX_HOME` (always: even `--version` writes there, default `~/.codex`).
    pub codex_home: PathBuf,
    /// Working directory of the process.
    pub cwd: PathBuf,
    /// The complete environment besides `CODEX_HOME`: nothing else is inherited.
    pub env: Vec<(String, String)>,
}

/// A message from Codex that is not a response to one of our requests.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A notification.
    Notification(ServerNotification),
    /// A request we must answer with [`CodexProcess::respond`] or [`CodexProcess::respond_error`].
    Request {
        /// Answer with this id.
        id: RequestId,
        /// The decoded request.
        request: ServerRequest,
    },
}

type Reply = Result<Value, JsonRpcError>;
type PendingTable = Arc<Mutex<HashMap<RequestId, oneshot::Sender<Reply>>>>;

/// A running `codex app-server`. Call [`CodexProcess::shutdown`] when done; dropping it kills the
/// leader (`kill_on_drop`) and detaches the pipe tasks, which end at EOF.
#[derive(Debug)]
pub struct CodexProcess {
    child: Child,
    pid: Option<u32>,
    /// `None` once stdin was closed by `shutdown`.
    writer: Option<mpsc::Sender<String>>,
    pending: PendingTable,
    next_id: AtomicI64,
    tasks: Vec<JoinHandle<()>>,
}

impl CodexProcess {
    /// Starts `codex app-server` (stdio transport) and its pipe tasks. Returns the process and the
    /// channel of notifications and server requests; the channel closes when stdout does.
    ///
    /// # Errors
    /// [`CodexError::Spawn`] when the binary cannot be started.
    pub fn spawn(spec: &SpawnSpec) -> Result<(Self, mpsc::Receiver<Incoming>), CodexError> {
        let mut command = Command::new(&spec.bin);
        command
            .arg("app-server")
            .current_dir(&spec.cwd)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("CODEX_HOME", &spec.codex_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child =
            command.spawn().map_err(|source| CodexError::Spawn { bin: spec.bin.display().to_string(), source })?;
        let pid = child.id();
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            (i, o, e) => {
                return Err(CodexError::Protocol(format!(
                    "child pipes missing (stdin {}, stdout {}, stderr {})",
                    i.is_some(),
                    o.is_some(),
                    e.is_some()
                )))
            }
        };
        tracing::debug!(pid, bin = %spec.bin.display(), "spawned codex app-server");

        let pending: PendingTable = Arc::default();
        let (writer_tx, writer_rx) = mpsc::channel(WRITE_QUEUE);
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_QUEUE);
        let tasks = vec![
            tokio::spawn(write_lines(stdin, writer_rx)),
            // Weak: only `CodexProcess` keeps stdin open; dropping it (shutdown) closes stdin.
            tokio::spawn(read_stdout(stdout, Arc::clone(&pending), incoming_tx, writer_tx.downgrade())),
            tokio::spawn(log_stderr(stderr, pid)),
        ];
        let process = Self { child, pid, writer: Some(writer_tx), pending, next_id: AtomicI64::new(1), tasks };
        Ok((process, incoming_rx))
    }

    /// OS pid of `codex app-server` (also its process group id), while it runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Sends a request and waits for its response, at most `timeout`.
    ///
    /// # Errors
    /// [`CodexError::RequestTimeout`] (the pending entry is removed), [`CodexError::Rpc`] when Codex
    /// answers with an error, [`CodexError::ProcessExited`] when stdout closes first,
    /// [`CodexError::Protocol`] when the result does not decode.
    pub async fn request<R: ClientRequest>(&self, params: &R, timeout: Duration) -> Result<R::Response, CodexError> {
        let id = RequestId::Integer(self.next_id.fetch_add(1, Ordering::Relaxed));
        let params =
            serde_json::to_value(params).map_err(|e| CodexError::Protocol(format!("encode {}: {e}", R::METHOD)))?;
        let line = encode(&OutgoingRequest { id: id.clone(), method: R::METHOD, params })?;
        let (tx, rx) = oneshot::channel();
        self.lock_pending().insert(id.clone(), tx);
        let exchange = async {
            self.send_line(line).await?;
            rx.await.map_err(|_| CodexError::ProcessExited(format!("stdout closed while waiting for {}", R::METHOD)))
        };
        let reply = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                self.lock_pending().remove(&id);
                return Err(e);
            }
            Err(_) => {
                self.lock_pending().remove(&id);
                return Err(CodexError::RequestTimeout { method: R::METHOD, timeout });
            }
        };
        let result = reply.map_err(|error| CodexError::Rpc { method: R::METHOD, error })?;
        serde_json::from_value(result).map_err(|e| CodexError::Protocol(format!("decode {} result: {e}", R::METHOD)))
    }

    /// Sends a notification (`params` is always present).
    ///
    /// # Errors
    /// [`CodexError::ProcessExited`] / [`CodexError::RequestTimeout`] when stdin is gone or stuck.
    pub async fn notify(&self, method: &'static str, params: Value) -> Result<(), CodexError> {
        let line = encode(&OutgoingNotification { method, params })?;
        self.send_line_timeout(line, method).await
    }

    /// Answers a server request with a result.
    ///
    /// # Errors
    /// As [`CodexProcess::notify`]; [`CodexError::Protocol`] if `result` does not serialize.
    pub async fn respond(&self, id: RequestId, result: &impl Serialize) -> Result<(), CodexError> {
        let result = serde_json::to_value(result).map_err(|e| CodexError::Protocol(format!("encode response: {e}")))?;
        let line = encode(&OutgoingResponse::Result { id, result })?;
        self.send_line_timeout(line, "response").await
    }

    /// Answers a server request with a JSON-RPC error.
    ///
    /// # Errors
    /// As [`CodexProcess::notify`].
    pub async fn respond_error(&self, id: RequestId, error: JsonRpcError) -> Result<(), CodexError> {
        let line = encode(&OutgoingResponse::Error { id, error })?;
        self.send_line_timeout(line, "error response").await
    }

    /// SIGKILLs the whole process group (Codex and any command it runs) and reaps the leader.
    pub async fn kill(&mut self) {
        kill_group(self.pid).await;
        if let Err(e) = self.child.start_kill() {
            tracing::debug!(error = %e, "start_kill");
        }
        match tokio::time::timeout(KILL_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) => tracing::debug!(%status, "codex killed"),
            Ok(Err(e)) => tracing::warn!(error = %e, "waiting for killed codex"),
            Err(_) => tracing::warn!(pid = self.pid, "codex did not die within {KILL_TIMEOUT:?}"),
        }
    }

    /// Ends the process: closes stdin (Codex exits on EOF), waits up to `grace`, then kills the
    /// process group (always, to reap stray commands), fails every pending request and joins the
    /// pipe tasks. Returns the exit status when Codex exited by itself.
    pub async fn shutdown(mut self, grace: Duration) -> Option<ExitStatus> {
        self.writer = None;
        let exited = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "waiting for codex to exit");
                None
            }
            Err(_) => None,
        };
        if exited.is_none() {
            tracing::debug!(pid = self.pid, "codex still running after {grace:?}; killing its process group");
        }
        // Also after a clean exit: commands Codex started may linger in the group.
        self.kill().await;
        self.lock_pending().clear();
        for task in std::mem::take(&mut self.tasks) {
            let abort = task.abort_handle();
            if tokio::time::timeout(TASK_JOIN_TIMEOUT, task).await.is_err() {
                tracing::warn!("codex pipe task still running after {TASK_JOIN_TIMEOUT:?}; aborting");
                abort.abort();
            }
        }
        exited
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn send_line(&self, line: String) -> Result<(), CodexError> {
        let writer = self.writer.as_ref().ok_or_else(|| CodexError::ProcessExited("stdin already closed".into()))?;
        writer.send(line).await.map_err(|_| CodexError::ProcessExited("stdin writer stopped".into()))
    }

    async fn send_line_timeout(&self, line: String, what: &'static str) -> Result<(), CodexError> {
        tokio::time::timeout(WRITE_TIMEOUT, self.send_line(line))
            .await
            .map_err(|_| CodexError::RequestTimeout { method: what, timeout: WRITE_TIMEOUT })?
    }
}

impl Drop for CodexProcess {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Keeps only the allowed variables of `vars` (e.g. `std::env::vars()` read by the binary's config).
#[must_use]
pub fn allowed_env(vars: impl IntoIterator<Item = (String, String)>, allow: &[&str]) -> Vec<(String, String)> {
    vars.into_iter().filter(|(k, _)| allow.contains(&k.as_str())).collect()
}

/// The variables Codex needs to run commands sensibly; never credentials.
pub const DEFAULT_ENV_ALLOW_LIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TERM", "USER", "TMPDIR"];

fn encode(message: &impl Serialize) -> Result<String, CodexError> {
    serde_json::to_string(message).map_err(|e| CodexError::Protocol(format!("encode: {e}")))
}

/// SIGKILL to the group `pgid` (= the leader's pid, thanks to `process_group(0)`).
async fn kill_group(pid: Option<u32>) {
    let Some(pgid) = pid else { return };
    let run = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match tokio::time::timeout(KILL_TIMEOUT, run).await {
        Ok(Ok(status)) => tracing::debug!(pgid, %status, "kill -KILL process group"),
        Ok(Err(e)) => tracing::warn!(pgid, error = %e, "could not run kill"),
        Err(_) => tracing::warn!(pgid, "kill did not finish within {KILL_TIMEOUT:?}"),
    }
}

/// Writer task: owns stdin; ends when every sender is gone (closing stdin) or on a write error.
async fn write_lines(mut stdin: ChildStdin, mut lines: mpsc::Receiver<String>) {
    while let Some(mut line) = lines.recv().await {
        tracing::trace!(target: "beckon::codex::wire", ">> {line}");
        line.push('\n');
        if let Err(e) = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        }
        .await
        {
            tracing::debug!(error = %e, "codex stdin closed");
            break;
        }
    }
}

/// Reader task: ends at EOF; then fails every pending request and closes the incoming channel.
async fn read_stdout(
    stdout: ChildStdout,
    pending: PendingTable,
    incoming: mpsc::Sender<Incoming>,
    writer: mpsc::WeakSender<String>,
) {
    let mut lines = BufReader::new(stdout).lines();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "reading codex stdout");
                break;
            }
        };
        tracing::trace!(target: "beckon::codex::wire", "<< {line}");
        let message = match IncomingMessage::parse(&line) {
            Ok(message) => message,
            Err(e) => {
                tracing::debug!(error = %e, "ignoring non-JSON-RPC line from codex");
                continue;
            }
        };
        let forward = match message {
            IncomingMessage::Response { id, result } => {
                complete(&pending, &id, Ok(result));
                None
            }
            IncomingMessage::Error { id: Some(id), error } => {
                complete(&pending, &id, Err(error));
                None
            }
            IncomingMessage::Error { id: None, error } => {
                tracing::warn!(code = error.code, message = %error.message, "codex error without id");
                None
            }
            IncomingMessage::Notification { method, params } => Some(Incoming::Notification(
                ServerNotification::decode(method.clone(), params.clone()).unwrap_or_else(|e| {
                    tracing::warn!(%method, error = %e, "undecodable notification; kept raw");
                    ServerNotification::Unknown { method, params }
                }),
            )),
            IncomingMessage::Request { id, method, params } => match ServerRequest::decode(method.clone(), params) {
                Ok(request) => Some(Incoming::Request { id, request }),
                Err(e) => {
                    tracing::warn!(%method, error = %e, "undecodable server request; answering with an error");
                    let error =
                        JsonRpcError { code: INVALID_REQUEST, message: format!("beckon: bad params: {e}"), data: None };
                    // The writer is gone during shutdown; nothing else to do then.
                    let sent = match (encode(&OutgoingResponse::Error { id, error }), writer.upgrade()) {
                        (Ok(line), Some(writer)) => writer.send(line).await.is_ok(),
                        (Ok(_) | Err(_), None) | (Err(_), Some(_)) => false,
                    };
                    if !sent {
                        tracing::debug!("could not answer an undecodable request");
                    }
                    None
                }
            },
        };
        // A consumer that went away still needs responses routed, so keep reading.
        if let Some(message) = forward {
            if incoming.send(message).await.is_err() {
                tracing::debug!("incoming consumer gone; dropping message");
            }
        }
    }
    pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
    tracing::debug!("codex stdout closed");
}

fn complete(pending: &PendingTable, id: &RequestId, reply: Reply) {
    let waiter = pending.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    match waiter {
        Some(tx) => {
            if tx.send(reply).is_err() {
                tracing::debug!(%id, "response arrived after its waiter gave up");
            }
        }
        None => tracing::debug!(%id, "response to an unknown or timed-out request"),
    }
}

/// Stderr task: forwards each line to tracing at debug; ends at EOF.
async fn log_stderr(stderr: tokio::process::ChildStderr, pid: Option<u32>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "beckon::codex::stderr", pid, "{line}");
    }
}
