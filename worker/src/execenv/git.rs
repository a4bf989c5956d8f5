//! Running `git` for the execution environment: one child per step, an explicit minimal
//! environment, a named timeout, and errors that name the step with its trimmed stderr.
//!
//! Every command gets `-c core.hooksPath=/dev/null -c core.fsmonitor=false`: the agent can write
//! into the mirror's `objects/` and `refs/heads/`, and nothing it writes should ever run as the
//! worker (hooks and config stay outside its writable roots as well; this is the second fence).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::ExecEnvError;

/// Limit for steps that talk to the remote (`fetch`, `remote set-head`): a first fetch of a large
/// repository takes minutes; beyond ten something is stuck.
pub const GIT_FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// Limit for local steps (`init`, `worktree add` with its checkout, `rev-parse`, `prune`).
pub const GIT_LOCAL_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of git's stderr an error keeps.
const STDERR_CAP: usize = 2_000;

/// The git step that failed. Remote steps fail retryably (network, remote busy); local ones
/// usually mean a broken disk or mirror, which a retry that rebuilds the workspace may fix too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitStep {
    /// `git init --bare` of a new mirror.
    Init,
    /// `git remote add origin <url>`.
    RemoteAdd,
    /// `git fetch --prune origin` (first fill or update of the mirror).
    Fetch,
    /// `git remote set-head origin --auto`: learn the default branch.
    SetHead,
    /// `git fetch origin refs/pull/<n>/head`.
    FetchPullRequest,
    /// `git rev-parse` / `git for-each-ref` lookups.
    RevParse,
    /// `git worktree list`.
    WorktreeList,
    /// `git worktree add`.
    WorktreeAdd,
    /// `git worktree prune`.
    WorktreePrune,
    /// `git push origin <branch>` (the `pull_request_open` tool).
    Push,
}

impl GitStep {
    /// The step's name in errors and logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            GitStep::Init => "init",
            GitStep::RemoteAdd => "remote add",
            GitStep::Fetch => "fetch",
            GitStep::SetHead => "remote set-head",
            GitStep::FetchPullRequest => "fetch pull request head",
            GitStep::RevParse => "rev-parse",
            GitStep::WorktreeList => "worktree list",
            GitStep::WorktreeAdd => "worktree add",
            GitStep::WorktreePrune => "worktree prune",
            GitStep::Push => "push",
        }
    }

    /// True for steps that talk to the remote.
    #[must_use]
    pub fn is_remote(self) -> bool {
        match self {
            GitStep::Fetch | GitStep::SetHead | GitStep::FetchPullRequest | GitStep::Push => true,
            GitStep::Init
            | GitStep::RemoteAdd
            | GitStep::RevParse
            | GitStep::WorktreeList
            | GitStep::WorktreeAdd
            | GitStep::WorktreePrune => false,
        }
    }

    fn timeout(self) -> Duration {
        if self.is_remote() {
            GIT_FETCH_TIMEOUT
        } else {
            GIT_LOCAL_TIMEOUT
        }
    }
}

impl std::fmt::Display for GitStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The environment our own git commands run with: the worker's `PATH` and `HOME` (so an
/// operator's `~/.gitconfig`, e.g. `url.insteadOf` or a proxy, applies) and nothing else.
#[derive(Debug, Clone, Default)]
pub(super) struct GitEnv {
    pub path: Option<String>,
    pub home: Option<String>,
    /// Extra variables for one command (the push credential as `GIT_CONFIG_*`, which keeps it
    /// out of the command line).
    pub extra: Vec<(String, String)>,
}

impl GitEnv {
    pub(super) fn from_vars<'a>(vars: impl IntoIterator<Item = &'a (String, String)>) -> Self {
        let mut env = GitEnv::default();
        for (key, value) in vars {
            match key.as_str() {
                "PATH" => env.path = Some(value.clone()),
                "HOME" => env.home = Some(value.clone()),
                _ => {}
            }
        }
        env
    }

    /// Runs `git -C dir <args>` and returns its stdout, trimmed.
    pub(super) async fn run<I, S>(&self, dir: &Path, step: GitStep, args: I) -> Result<String, ExecEnvError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = self.output(dir, step, args).await?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(ExecEnvError::Git { step, status: output.status.to_string(), stderr: clean_stderr(&output.stderr) })
        }
    }

    /// Like [`GitEnv::run`] but an exit status of 1 (what `rev-parse --verify --quiet` returns
    /// for a missing ref) is `Ok(None)`.
    pub(super) async fn probe<I, S>(&self, dir: &Path, step: GitStep, args: I) -> Result<Option<String>, ExecEnvError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let output = self.output(dir, step, args).await?;
        match output.status.code() {
            Some(0) => Ok(Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())),
            Some(1) => Ok(None),
            Some(_) | None => {
                Err(ExecEnvError::Git { step, status: output.status.to_string(), stderr: clean_stderr(&output.stderr) })
            }
        }
    }

    async fn output<I, S>(&self, dir: &Path, step: GitStep, args: I) -> Result<std::process::Output, ExecEnvError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(dir)
            .args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"])
            .args(args)
            .env_clear()
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(path) = &self.path {
            command.env("PATH", path);
        }
        if let Some(home) = &self.home {
            command.env("HOME", home);
        }
        command.envs(self.extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let timeout = step.timeout();
        tracing::debug!(step = step.as_str(), dir = %dir.display(), "git");
        match tokio::time::timeout(timeout, command.output()).await {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(source)) => Err(ExecEnvError::GitSpawn { step, source }),
            // Dropping the future drops the child, which `kill_on_drop` kills.
            Err(_) => Err(ExecEnvError::GitTimeout { step, timeout }),
        }
    }
}

/// git's stderr, trimmed, capped, with any `scheme://user:pass@` userinfo removed.
fn clean_stderr(stderr: &[u8]) -> String {
    let text = redact_userinfo(String::from_utf8_lossy(stderr).trim());
    match text.char_indices().nth(STDERR_CAP) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Removes the userinfo of every URL in `text` (`https://x:tok@host/` → `https://host/`). This
/// stage never puts credentials in a URL; this guards against an operator who did.
pub(super) fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = tail.find(|c: char| c == '/' || c.is_whitespace()).unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(at) => rest = &tail[at + 1..],
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}
