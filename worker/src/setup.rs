//! Builds a [`Worker`] from [`Settings`]: tracker clients, Codex settings, workspaces, limits.
//!
//! Shared by `beckon worker` and the worker inside `beckon serve`, so both run the same code. A
//! worker needs the Codex binary and at least one tracker credential; without them there is no
//! worker (and the caller says so), never a worker that fails every task.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use beckon_core::clock::Clock;
use beckon_core::config::Settings;
use beckon_core::ingest::ack::TrackerAck;
use beckon_core::ledger::Ledger;
use beckon_core::queue::Queue;
use beckon_core::tracker::github::{GithubApp, GithubAuth, GithubClient, GithubConfig};
use beckon_core::tracker::linear::{LinearAuth, LinearClient, LinearConfig};

use crate::codex::{CodexSettings, Timeouts, DEFAULT_ENV_ALLOW_LIST};
use crate::execenv::ExecEnvConfig;
use crate::worker::{Trackers, Worker, WorkerConfig};

/// Default model settings, for a deployment that sets nothing: OpenAI's Responses API. Real
/// deployments set their model and provider in `BECKON_CODEX_CONFIG` (see README).
const DEFAULT_MODEL: &str = "gpt-5-codex";
/// Not `openai`: Codex reserves its built-in provider ids.
const DEFAULT_PROVIDER: &str = "beckon-openai";
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Memory one task may take: Codex's app-server peaks near 155 MB; the agent's commands (builds,
/// tests) need room beside it.
const MEMORY_PER_SLOT: u64 = 1024 * 1024 * 1024;
/// Never more slots than this by default, however large the machine.
const MAX_DEFAULT_SLOTS: usize = 8;

/// Why no worker was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoWorker {
    /// `BECKON_CODEX_BIN` is unset.
    NoCodex,
    /// No GitHub or Linear credential is set.
    NoTracker,
}

/// The worker for `settings` over `ledger` and `queue`, or why there is none. `base_env` is the
/// process environment, from which the agent's allow-listed variables are taken.
///
/// # Errors
/// A credential or file that is set but unusable (a bad PEM, an unreadable `BECKON_CODEX_CONFIG`).
pub fn build(
    settings: &Settings,
    base_env: Vec<(String, String)>,
    ledger: Arc<dyn Ledger>,
    queue: Arc<dyn Queue>,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Result<Worker, NoWorker>> {
    let w = &settings.worker;
    let Some(codex_bin) = w.codex_bin.clone() else { return Ok(Err(NoWorker::NoCodex)) };
    let trackers = trackers(settings, Arc::clone(&clock))?;
    if trackers.github.is_none() && trackers.linear.is_none() {
        return Ok(Err(NoWorker::NoTracker));
    }
    let codex_overrides = match &w.codex_config {
        Some(path) => Some(read_toml(path)?),
        None => None,
    };
    let mut env_allow_list: Vec<String> = DEFAULT_ENV_ALLOW_LIST.iter().map(|s| (*s).to_owned()).collect();
    env_allow_list.extend(w.codex_env.iter().cloned());
    let mut execenv = ExecEnvConfig::new(
        settings.data_dir.clone(),
        w.git_base_url.clone(),
        CodexSettings::new(DEFAULT_MODEL, DEFAULT_PROVIDER, DEFAULT_BASE_URL),
        base_env,
    );
    execenv.codex_overrides = codex_overrides;
    execenv.env_allow_list = env_allow_list;
    execenv.linear_repository = w.linear_repository.clone();
    let timeouts = Timeouts { deadline: w.turn_deadline, no_progress: w.no_progress, ..Timeouts::default() };
    let config = WorkerConfig {
        slots: w.slots.unwrap_or_else(default_slots),
        lease: w.lease,
        max_attempts: w.max_attempts,
        handle: settings.rules.handle.clone(),
        codex_bin,
        timeouts,
        execenv,
    };
    Ok(Ok(Worker::new(config, ledger, queue, clock, trackers)))
}

/// The edge acknowledger for `beckon serve` (👀 on GitHub comments, a first thought in Linear
/// agent sessions), over the same credentials as the worker; `None` without any.
///
/// # Errors
/// A credential that is set but unusable.
pub fn acknowledger(settings: &Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Option<TrackerAck>> {
    let t = trackers(settings, clock)?;
    if t.github.is_none() && t.linear.is_none() {
        return Ok(None);
    }
    Ok(Some(TrackerAck { github: t.github.map(|g| (*g).clone()), linear: t.linear.map(|l| (*l).clone()) }))
}

fn trackers(settings: &Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Trackers> {
    let w = &settings.worker;
    let github_auth = match (&w.github_token, &w.github_app_private_key, settings.rules.own_app_id) {
        (Some(token), _, _) => Some(GithubAuth::Token(token.clone())),
        (None, Some(pem), Some(app_id)) => Some(GithubAuth::App(
            GithubApp::from_pem(app_id.to_string(), pem).context("while reading BECKON_GITHUB_APP_PRIVATE_KEY")?,
        )),
        (None, Some(_), None) => bail!("BECKON_GITHUB_APP_PRIVATE_KEY is set but BECKON_GITHUB_APP_ID is not"),
        (None, None, _) => None,
    };
    let github = match github_auth {
        Some(auth) => Some(Arc::new(
            GithubClient::new(GithubConfig::new(w.github_api_url.clone()), auth, Arc::clone(&clock))
                .context("while building the GitHub client")?,
        )),
        None => None,
    };
    let linear_auth = match (&w.linear_oauth_token, &w.linear_api_key) {
        (Some(token), _) => Some(LinearAuth::OAuth(token.clone())),
        (None, Some(key)) => Some(LinearAuth::ApiKey(key.clone())),
        (None, None) => None,
    };
    let linear = match linear_auth {
        Some(auth) => {
            let client = LinearClient::new(LinearConfig::new(w.linear_api_url.clone()), auth, clock)
                .context("while building the Linear client")?;
            Some(Arc::new(client))
        }
        None => None,
    };
    Ok(Trackers { github, linear })
}

fn read_toml(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("while reading {}", path.display()))?;
    text.parse::<toml::Table>().with_context(|| format!("while parsing {}", path.display()))
}

/// One slot per GiB of memory, between 1 and [`MAX_DEFAULT_SLOTS`].
fn default_slots() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(MEMORY_PER_SLOT, |kb| kb * 1024);
    usize::try_from(total / MEMORY_PER_SLOT).unwrap_or(1).clamp(1, MAX_DEFAULT_SLOTS)
}
