//! The execution-environment stage (DESIGN §5): everything on disk a task needs before Codex
//! starts, and its removal. It owns the repository mirrors and the per-task workspaces under the
//! data dir; it does not push, open pull requests or hold any credential (the tools stage does).
//!
//! ```text
//! <root>/mirrors/<owner>/<repo>.git          bare mirror, shared by tasks, one lock per mirror
//! <root>/work/<task id>/workdir              `git worktree` of the mirror on the task's branch
//! <root>/work/<task id>/home                 the agent's HOME
//! <root>/codex-homes/<thread hash>           CODEX_HOME: config.toml + AGENTS.md (the runtime
//!                                            brief, rewritten every run) and Codex's sessions
//!                                            for the conversation, which `thread/resume` needs
//!                                            on the next comment, so it outlives the task
//! ```
//!
//! Files: `names` (pure naming rules), `runtime` (agent env, `AGENTS.md`), `git` (the git runner
//! and its timeouts); this file does the I/O.
//!
//! Choices where DESIGN is silent:
//! - The mirror is `git init --bare` + `remote add origin` (fetch refspec
//!   `refs/heads/*:refs/remotes/origin/*`), not `clone --mirror`: a mirror refspec would let
//!   `fetch --prune` delete the agent's unpushed branches and clobber checked-out ones. Local
//!   branches are scratch: each prepare resets the task's branch from the remote (its own remote
//!   branch when it exists, else the default branch). A new mirror is built under `*.tmp` and
//!   renamed, so a crash never leaves a half-made mirror in place.
//! - Writable roots for the sandbox are the worktree's gitdir and the mirror's `objects/`,
//!   `refs/heads/` and `logs/refs/heads/`, not the whole mirror: `git commit` works (git prints a
//!   harmless `packed-refs.lock` error), while the mirror's `config` and `hooks/` stay read-only,
//!   so nothing the agent writes runs later as the worker.
//! - Cleanup deletes the workdir and runs `git worktree prune` instead of `git worktree remove`,
//!   which would run git against files the agent controlled.
//! - Locks are per process (`tokio::sync::Mutex` per mirror path): one worker process per data dir.

mod git;
mod names;
mod runtime;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use beckon_core::event::Subject;
use beckon_core::task::Task;

use crate::codex::{write_config, CodexSettings, DEFAULT_ENV_ALLOW_LIST};
use git::{redact_userinfo, GitEnv};
pub use git::{GitStep, GIT_FETCH_TIMEOUT, GIT_LOCAL_TIMEOUT};
pub use names::{branch_for, clone_url, validate_branch, validate_repo_part};
pub use runtime::{agent_env, agents_md, is_secret_name};

/// Name of the git identity the agent commits with.
pub const AGENT_GIT_NAME: &str = "Beckon agent";
/// Email of the git identity the agent commits with (a reserved `.invalid` domain on purpose).
pub const AGENT_GIT_EMAIL: &str = "agent@beckon.invalid";
/// Prefix of every branch Beckon creates; the tools stage scopes pushes to it.
pub const BRANCH_PREFIX: &str = "beckon/";

/// What this stage needs from the worker's configuration, built once at startup.
#[derive(Clone)]
pub struct ExecEnvConfig {
    /// The data dir (`BECKON_DATA_DIR`): mirrors and workspaces live under it.
    pub root: PathBuf,
    /// `BECKON_GIT_BASE_URL`: the clone URL is `{git_base_url}{owner}/{repo}.git`.
    pub git_base_url: String,
    /// Beckon's Codex settings for every task's `config.toml`.
    pub codex: CodexSettings,
    /// The operator's `BECKON_CODEX_CONFIG` table, merged on top.
    pub codex_overrides: Option<toml::Table>,
    /// Names of the worker's variables the agent may see. Secret-looking names (see
    /// [`is_secret_name`]) are dropped even when listed.
    pub env_allow_list: Vec<String>,
    /// `BECKON_LINEAR_REPOSITORY` as `(owner, repo)`: Linear events name no repository.
    pub linear_repository: Option<(String, String)>,
    /// The worker's environment as read once by config (`std::env::vars()`). Only `PATH` and
    /// `HOME` reach our git commands; only allow-listed names reach the agent.
    pub base_env: Vec<(String, String)>,
}

impl ExecEnvConfig {
    /// A config with the default allow list ([`DEFAULT_ENV_ALLOW_LIST`]) and no Linear repository.
    #[must_use]
    pub fn new(
        root: PathBuf,
        git_base_url: impl Into<String>,
        codex: CodexSettings,
        base_env: Vec<(String, String)>,
    ) -> Self {
        Self {
            root,
            git_base_url: git_base_url.into(),
            codex,
            codex_overrides: None,
            env_allow_list: DEFAULT_ENV_ALLOW_LIST.iter().map(|s| (*s).to_owned()).collect(),
            linear_repository: None,
            base_env,
        }
    }
}

impl fmt::Debug for ExecEnvConfig {
    /// Values of `base_env` and the overrides may hold secrets: only names and sizes are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecEnvConfig")
            .field("root", &self.root)
            .field("git_base_url", &redact_userinfo(&self.git_base_url))
            .field("codex", &self.codex)
            .field("codex_overrides", &self.codex_overrides.as_ref().map(|t| format!("<{} keys>", t.len())))
            .field("env_allow_list", &self.env_allow_list)
            .field("linear_repository", &self.linear_repository)
            .field("base_env", &self.base_env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

/// Which branch the workdir is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkout {
    /// `beckon/<slug of the thread>` ([`branch_for`]): from the remote's branch of that name if
    /// an earlier task pushed it, else from the default branch.
    NewBranch,
    /// A pull request: its head branch when the repository has it, else `refs/pull/<n>/head`
    /// (a fork or a deleted branch) on the local branch `beckon/pull-<n>`.
    PullRequestHead {
        /// The pull request number.
        number: u64,
        /// `head.ref` from the pull request.
        head_ref: String,
    },
}

/// Where the workdir's branch came from: tells the push stage what pushing it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// A Beckon branch; `existed` when the remote already had it (an earlier task pushed it).
    NewBranch {
        /// True when started from `origin/<branch>` rather than the default branch.
        existed: bool,
    },
    /// The pull request's head branch in this repository: pushing the branch updates the PR.
    PullRequestBranch,
    /// The head came from `refs/pull/<n>/head` (fork or deleted branch): pushing `branch` to
    /// this repository would not update the pull request.
    PullRequestRef {
        /// The pull request number.
        number: u64,
    },
}

/// The directory name for a conversation's CODEX_HOME: a hash of the thread key, whose own text
/// has `/`, `#` and `:` in it.
fn thread_dir_name(key: &beckon_core::task::ThreadKey) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(key.as_str().as_bytes())[..12])
}

/// A prepared workspace. Hand `workdir`, `codex_home`, `env` and `writable_roots` to
/// [`CodexConfig`](crate::codex::CodexConfig); give it back to [`cleanup`] when the task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `<root>/work/<task id>`: everything of this task.
    pub dir: PathBuf,
    /// The checkout (Codex's cwd).
    pub workdir: PathBuf,
    /// `CODEX_HOME`, with `config.toml` and `AGENTS.md`.
    pub codex_home: PathBuf,
    /// The agent's `HOME`.
    pub home: PathBuf,
    /// The bare mirror the worktree belongs to (push from here, never from inside `workdir`).
    pub mirror: PathBuf,
    /// The repository as `(owner, repo)`.
    pub repository: (String, String),
    /// The branch checked out in `workdir`.
    pub branch: String,
    /// Where `branch` came from.
    pub upstream: Upstream,
    /// Extra sandbox writable roots so `git commit` works: the worktree's gitdir and the mirror's
    /// `objects/`, `refs/heads/`, `logs/refs/heads/`.
    pub writable_roots: Vec<PathBuf>,
    /// The agent's whole environment (see [`agent_env`]).
    pub env: Vec<(String, String)>,
    /// True when this prepare created the mirror (first task of the repository).
    pub mirror_created: bool,
}

/// Errors of [`prepare`] and [`cleanup`]; [`ExecEnvError::is_retryable`] tells the worker
/// whether the task may be retried.
#[derive(Debug, thiserror::Error)]
pub enum ExecEnvError {
    /// An owner or repository name from the event or config is not `[A-Za-z0-9._-]+`. Not retryable.
    #[error("invalid repository {what} {value:?}: {reason}")]
    InvalidRepository {
        /// `owner` or `repo`.
        what: &'static str,
        /// The rejected value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// A branch name (a PR's `head_ref`) is not a safe ref name. Not retryable.
    #[error("invalid branch name {0:?}")]
    InvalidBranch(String),
    /// The task id cannot be a directory name. Not retryable.
    #[error("invalid task id {0:?}")]
    InvalidTaskId(String),
    /// A Linear task with no `BECKON_LINEAR_REPOSITORY` configured. Not retryable.
    #[error("no repository for this Linear issue: set BECKON_LINEAR_REPOSITORY to owner/repo")]
    NoRepository,
    /// The remote has no default branch (empty repository). Not retryable.
    #[error("the repository {0} has no default branch")]
    NoDefaultBranch(String),
    /// The pull request's head is neither a branch of the repository nor `refs/pull/<n>/head`.
    /// Not retryable.
    #[error("pull request #{number} has no fetchable head ({stderr})")]
    PullRequestHeadMissing {
        /// The pull request number.
        number: u64,
        /// git's stderr, trimmed.
        stderr: String,
    },
    /// A git step exited unsuccessfully. Retryable when the step talks to the remote
    /// ([`GitStep::is_remote`]); a local failure (disk, broken mirror) is not.
    #[error("git {step} failed ({status}): {stderr}")]
    Git {
        /// The step.
        step: GitStep,
        /// Its exit status.
        status: String,
        /// Its stderr, trimmed, capped, credentials removed.
        stderr: String,
    },
    /// A git step exceeded its limit and was killed. Retryable.
    #[error("git {step} timed out after {timeout:?}")]
    GitTimeout {
        /// The step.
        step: GitStep,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// `git` could not be started. Not retryable: fix the install.
    #[error("failed to run git for {step}: {source}")]
    GitSpawn {
        /// The step.
        step: GitStep,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file-system operation failed. Retryable (disk full, transient permission trouble).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ExecEnvError {
    /// Whether a retry of the task can help.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            ExecEnvError::Git { step, .. } => step.is_remote(),
            ExecEnvError::GitTimeout { .. } | ExecEnvError::Io { .. } => true,
            ExecEnvError::InvalidRepository { .. }
            | ExecEnvError::InvalidBranch(_)
            | ExecEnvError::InvalidTaskId(_)
            | ExecEnvError::NoRepository
            | ExecEnvError::NoDefaultBranch(_)
            | ExecEnvError::PullRequestHeadMissing { .. }
            | ExecEnvError::GitSpawn { .. } => false,
        }
    }
}

fn io_err(context: impl fmt::Display, path: &Path) -> impl FnOnce(std::io::Error) -> ExecEnvError {
    let context = format!("{context} {}", path.display());
    move |source| ExecEnvError::Io { context, source }
}

/// One lock per mirror path for this process: fetches, worktree changes and prunes of a mirror
/// never overlap.
static MIRROR_LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = LazyLock::new(Mutex::default);

fn mirror_lock(mirror: &Path) -> Arc<tokio::sync::Mutex<()>> {
    let mut locks = MIRROR_LOCKS.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(locks.entry(mirror.to_path_buf()).or_default())
}

/// The repository a task works on: the GitHub event's, or the configured one for Linear.
fn repository(cfg: &ExecEnvConfig, subject: &Subject) -> Result<(String, String), ExecEnvError> {
    let (owner, repo) = match subject {
        Subject::Github(s) => (s.owner.clone(), s.repo.clone()),
        Subject::Linear(_) => cfg.linear_repository.clone().ok_or(ExecEnvError::NoRepository)?,
    };
    validate_repo_part("owner", &owner)?;
    validate_repo_part("repo", &repo)?;
    Ok((owner, repo))
}

/// Prepares the task's workspace: updates (or creates) the repository's mirror, checks out the
/// branch `checkout` asks for in `work/<task id>/workdir`, writes `codex-home/config.toml` and
/// `AGENTS.md`, and builds the agent's environment. A leftover `work/<task id>` (a crashed
/// earlier attempt) is removed first, so prepare is safe to repeat.
///
/// # Errors
/// Not retryable: [`ExecEnvError::InvalidRepository`], [`ExecEnvError::NoRepository`],
/// [`ExecEnvError::InvalidBranch`], [`ExecEnvError::InvalidTaskId`],
/// [`ExecEnvError::NoDefaultBranch`], [`ExecEnvError::PullRequestHeadMissing`],
/// [`ExecEnvError::GitSpawn`]. Retryable: fetch failures and timeouts, I/O errors. See
/// [`ExecEnvError::is_retryable`].
#[tracing::instrument(skip_all, fields(task_id = %task.id, thread_key = %task.thread_key))]
pub async fn prepare(cfg: &ExecEnvConfig, task: &Task, checkout: Checkout) -> Result<Workspace, ExecEnvError> {
    let id = task.id.as_str();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')) {
        return Err(ExecEnvError::InvalidTaskId(id.to_owned()));
    }
    let (owner, repo) = repository(cfg, &task.subject)?;
    let url = clone_url(&cfg.git_base_url, &owner, &repo)?;
    if let Checkout::PullRequestHead { head_ref, .. } = &checkout {
        validate_branch(head_ref)?;
    }
    let git = GitEnv::from_vars(&cfg.base_env);
    // git resolves relative paths against `-C`, and sandbox roots must be absolute.
    let root = std::path::absolute(&cfg.root).map_err(io_err("resolve", &cfg.root))?;
    let mirror = root.join("mirrors").join(&owner).join(format!("{repo}.git"));
    let work_root = root.join("work");
    let dir = work_root.join(id);
    let workdir = dir.join("workdir");

    let lock = mirror_lock(&mirror);
    let guard = lock.lock().await;
    remove_workspace(&git, &mirror, &dir).await?;
    let mirror_created = update_mirror(&git, &mirror, &url, &format!("{owner}/{repo}")).await?;
    let (branch, start, upstream) = match checkout {
        Checkout::NewBranch => {
            let branch = branch_for(&task.subject);
            let remote = format!("refs/remotes/origin/{branch}");
            if ref_exists(&git, &mirror, &remote).await? {
                (branch, remote, Upstream::NewBranch { existed: true })
            } else if ref_exists(&git, &mirror, "refs/remotes/origin/HEAD").await? {
                (branch, "refs/remotes/origin/HEAD".to_owned(), Upstream::NewBranch { existed: false })
            } else {
                return Err(ExecEnvError::NoDefaultBranch(format!("{owner}/{repo}")));
            }
        }
        Checkout::PullRequestHead { number, head_ref } => {
            let remote = format!("refs/remotes/origin/{head_ref}");
            if ref_exists(&git, &mirror, &remote).await? {
                (head_ref, remote, Upstream::PullRequestBranch)
            } else {
                let local = format!("refs/beckon/pull/{number}/head");
                let spec = format!("+refs/pull/{number}/head:{local}");
                match git.run(&mirror, GitStep::FetchPullRequest, ["fetch", "--no-tags", "origin", &spec]).await {
                    Ok(_) => {}
                    Err(ExecEnvError::Git { stderr, .. }) if stderr.contains("couldn't find remote ref") => {
                        return Err(ExecEnvError::PullRequestHeadMissing { number, stderr });
                    }
                    Err(e) => return Err(e),
                }
                (format!("{BRANCH_PREFIX}pull-{number}"), local, Upstream::PullRequestRef { number })
            }
        }
    };
    release_branch(&git, &mirror, &work_root, &branch).await?;
    tokio::fs::create_dir_all(&dir).await.map_err(io_err("create", &dir))?;
    // `-B` resets the scratch branch to `start`; `--force` lets a worktree entry whose directory
    // vanished without a prune stand aside.
    let workdir_arg = workdir.as_os_str();
    git.run(
        &mirror,
        GitStep::WorktreeAdd,
        [
            "worktree".as_ref(),
            "add".as_ref(),
            "--force".as_ref(),
            "--no-track".as_ref(),
            "-B".as_ref(),
            branch.as_ref(),
            workdir_arg,
            start.as_ref(),
        ],
    )
    .await?;
    let dirs = git.run(&workdir, GitStep::RevParse, ["rev-parse", "--path-format=absolute", "--git-dir"]).await?;
    let gitdir = PathBuf::from(dirs);
    let reflogs = mirror.join("logs/refs/heads");
    tokio::fs::create_dir_all(&reflogs).await.map_err(io_err("create", &reflogs))?;
    drop(guard);

    let codex_home = root.join("codex-homes").join(thread_dir_name(&task.thread_key));
    let home = dir.join("home");
    tokio::fs::create_dir_all(&home).await.map_err(io_err("create", &home))?;
    write_config(&codex_home, &cfg.codex, cfg.codex_overrides.as_ref())
        .map_err(io_err("write config.toml in", &codex_home))?;
    let agents = codex_home.join("AGENTS.md");
    tokio::fs::write(&agents, agents_md(&task.subject.label(), &branch, &upstream))
        .await
        .map_err(io_err("write", &agents))?;
    let env = agent_env(cfg.base_env.iter().cloned(), &cfg.env_allow_list, &home, &codex_home);
    let writable_roots = vec![gitdir, mirror.join("objects"), mirror.join("refs/heads"), reflogs];
    tracing::info!(branch = %branch, mirror_created, "workspace prepared");
    Ok(Workspace {
        dir,
        workdir,
        codex_home,
        home,
        mirror,
        repository: (owner, repo),
        branch,
        upstream,
        writable_roots,
        env,
        mirror_created,
    })
}

/// Pushes the workspace's branch from the mirror to `origin` (never running git in the workdir,
/// which the agent controlled). `credential` is sent as an HTTP `Authorization` header through
/// `GIT_CONFIG_*` variables, so it is neither in the command line nor in any file; for `file://`
/// remotes (tests) it is unused.
///
/// # Errors
/// [`ExecEnvError::Git`] (retryable) when the push is refused or the remote is unreachable.
#[tracing::instrument(skip_all, fields(branch = %ws.branch))]
pub async fn publish(
    cfg: &ExecEnvConfig,
    ws: &Workspace,
    credential: Option<&secrecy::SecretString>,
) -> Result<(), ExecEnvError> {
    use base64::Engine as _;
    use secrecy::ExposeSecret as _;
    let mut git = GitEnv::from_vars(&cfg.base_env);
    if let Some(token) = credential {
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{}", token.expose_secret()));
        git.extra = vec![
            ("GIT_CONFIG_COUNT".to_owned(), "1".to_owned()),
            ("GIT_CONFIG_KEY_0".to_owned(), "http.extraHeader".to_owned()),
            ("GIT_CONFIG_VALUE_0".to_owned(), format!("Authorization: Basic {basic}")),
        ];
    }
    let refspec = format!("refs/heads/{0}:refs/heads/{0}", ws.branch);
    let lock = mirror_lock(&ws.mirror);
    let _guard = lock.lock().await;
    git.run(&ws.mirror, GitStep::Push, ["push", "--porcelain", "origin", &refspec]).await?;
    // Record what the remote now has, so the next prepare starts the branch from it.
    let tracking = format!("refs/remotes/origin/{}", ws.branch);
    let head = format!("refs/heads/{}", ws.branch);
    git.extra.clear();
    git.run(&ws.mirror, GitStep::RevParse, ["update-ref", &tracking, &head]).await?;
    Ok(())
}

/// True when the workspace's branch has commits its remote counterpart (or, for a branch the
/// remote does not have yet, the default branch) lacks: work that [`publish`] would push. Always
/// false for a pull request from a fork, which cannot be pushed.
///
/// # Errors
/// Git errors of the lookup.
pub async fn has_unpublished_commits(cfg: &ExecEnvConfig, ws: &Workspace) -> Result<bool, ExecEnvError> {
    if let Upstream::PullRequestRef { .. } = ws.upstream {
        return Ok(false);
    }
    let git = GitEnv::from_vars(&cfg.base_env);
    let remote = format!("refs/remotes/origin/{}", ws.branch);
    let base =
        if ref_exists(&git, &ws.mirror, &remote).await? { remote } else { "refs/remotes/origin/HEAD".to_owned() };
    let range = format!("{base}..refs/heads/{}", ws.branch);
    let count = git.run(&ws.mirror, GitStep::RevParse, ["rev-list", "--count", &range]).await?;
    Ok(count.trim().parse::<u64>().unwrap_or(0) > 0)
}

/// Removes the task's workspace: the workdir, its worktree entry in the mirror, the task dir.
/// The mirror and the task's branch in it stay (the next prepare resets the branch). Idempotent:
/// a second call, or a call on a half-made workspace, succeeds.
///
/// # Errors
/// [`ExecEnvError::Io`] when the directory cannot be removed; git errors of `worktree prune`.
#[tracing::instrument(skip_all, fields(dir = %ws.dir.display()))]
pub async fn cleanup(cfg: &ExecEnvConfig, ws: &Workspace) -> Result<(), ExecEnvError> {
    let git = GitEnv::from_vars(&cfg.base_env);
    let lock = mirror_lock(&ws.mirror);
    let _guard = lock.lock().await;
    remove_workspace(&git, &ws.mirror, &ws.dir).await
}

/// Deletes `dir` (if present) and prunes the mirror's worktree entries whose directory is gone.
/// Call with the mirror's lock held.
async fn remove_workspace(git: &GitEnv, mirror: &Path, dir: &Path) -> Result<(), ExecEnvError> {
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", dir)(e)),
    }
    if tokio::fs::try_exists(mirror.join("HEAD")).await.map_err(io_err("stat", mirror))? {
        git.run(mirror, GitStep::WorktreePrune, ["worktree", "prune"]).await?;
    }
    Ok(())
}

/// Fetches into the mirror, creating it first when missing. Returns true when it was created.
/// Call with the mirror's lock held.
async fn update_mirror(git: &GitEnv, mirror: &Path, url: &str, name: &str) -> Result<bool, ExecEnvError> {
    let exists = tokio::fs::try_exists(mirror.join("HEAD")).await.map_err(io_err("stat", mirror))?;
    if exists {
        git.run(mirror, GitStep::Fetch, ["fetch", "--prune", "--no-tags", "origin"]).await?;
        if !ref_exists(git, mirror, "refs/remotes/origin/HEAD").await? {
            set_head(git, mirror, name).await?;
        }
        return Ok(false);
    }
    let parent = mirror.parent().unwrap_or(mirror);
    let mut tmp = mirror.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    match tokio::fs::remove_dir_all(&tmp).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove", &tmp)(e)),
    }
    tokio::fs::create_dir_all(&tmp).await.map_err(io_err("create", &tmp))?;
    git.run(&tmp, GitStep::Init, ["init", "--quiet", "--bare"]).await?;
    git.run(&tmp, GitStep::RemoteAdd, ["remote", "add", "origin", url]).await?;
    git.run(&tmp, GitStep::Fetch, ["fetch", "--prune", "--no-tags", "origin"]).await?;
    set_head(git, &tmp, name).await?;
    tokio::fs::rename(&tmp, mirror).await.map_err(io_err(format!("rename into {}", parent.display()), &tmp))?;
    Ok(true)
}

/// Removes the workspaces under `work_root` whose worktree has `branch` checked out: a crashed
/// earlier task of the same thread left them, since tasks of one thread never run concurrently
/// (one FIFO group, one lease). Worktrees elsewhere are left alone (`worktree add` then fails).
/// Call with the mirror's lock held.
async fn release_branch(git: &GitEnv, mirror: &Path, work_root: &Path, branch: &str) -> Result<(), ExecEnvError> {
    let list = git.run(mirror, GitStep::WorktreeList, ["worktree", "list", "--porcelain"]).await?;
    let wanted = format!("branch refs/heads/{branch}");
    let work_root = tokio::fs::canonicalize(work_root).await.unwrap_or_else(|_| work_root.to_path_buf());
    for entry in list.split("\n\n") {
        let path = entry.lines().find_map(|l| l.strip_prefix("worktree ")).map(PathBuf::from);
        let holds = entry.lines().any(|l| l == wanted);
        let Some(task_dir) = path.as_deref().and_then(Path::parent).filter(|_| holds) else { continue };
        let task_dir = tokio::fs::canonicalize(task_dir).await.unwrap_or_else(|_| task_dir.to_path_buf());
        if task_dir.parent() == Some(work_root.as_path()) {
            tracing::warn!(branch, stale = %task_dir.display(), "removing a stale workspace that holds the branch");
            remove_workspace(git, mirror, &task_dir).await?;
        }
    }
    Ok(())
}

async fn set_head(git: &GitEnv, mirror: &Path, name: &str) -> Result<(), ExecEnvError> {
    match git.run(mirror, GitStep::SetHead, ["remote", "set-head", "origin", "--auto"]).await {
        Ok(_) => Ok(()),
        // An empty remote has no HEAD to follow; a task on it cannot start from the default branch.
        Err(ExecEnvError::Git { stderr, .. }) if stderr.contains("Cannot determine remote HEAD") => {
            Err(ExecEnvError::NoDefaultBranch(name.to_owned()))
        }
        Err(e) => Err(e),
    }
}

async fn ref_exists(git: &GitEnv, mirror: &Path, name: &str) -> Result<bool, ExecEnvError> {
    let spec = format!("{name}^{{commit}}");
    Ok(git.probe(mirror, GitStep::RevParse, ["rev-parse", "--verify", "--quiet", &spec]).await?.is_some())
}
