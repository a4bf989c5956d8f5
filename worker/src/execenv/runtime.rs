//! What the agent gets besides the checkout: its environment (an allow list, never secrets) and
//! the runtime brief (`AGENTS.md`). Pure functions.

use std::path::Path;

use super::{Upstream, AGENT_GIT_EMAIL, AGENT_GIT_NAME};

/// True for names that must never reach the agent, whatever the allow list says: `AWS_*`,
/// `BECKON_*`, `GITHUB_*`, `LINEAR_*`, `OPENAI_*`, `*_TOKEN`, `*_KEY`, `*_SECRET`, `*_PASSWORD`
/// (case-insensitive).
#[must_use]
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["AWS_", "BECKON_", "GITHUB_", "LINEAR_", "OPENAI_"].iter().any(|p| upper.starts_with(p))
        || ["_TOKEN", "_KEY", "_SECRET", "_PASSWORD"].iter().any(|s| upper.ends_with(s))
}

/// The agent's environment: the allow-listed, non-secret variables of `vars` (in their order),
/// then `HOME`, `CODEX_HOME`, `GIT_TERMINAL_PROMPT=0` and the agent's git identity, which replace
/// any inherited values of those names.
#[must_use]
pub fn agent_env(
    vars: impl IntoIterator<Item = (String, String)>,
    allow: &[String],
    home: &Path,
    codex_home: &Path,
) -> Vec<(String, String)> {
    let ours = [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("GIT_TERMINAL_PROMPT", "0".to_owned()),
        ("GIT_AUTHOR_NAME", AGENT_GIT_NAME.to_owned()),
        ("GIT_AUTHOR_EMAIL", AGENT_GIT_EMAIL.to_owned()),
        ("GIT_COMMITTER_NAME", AGENT_GIT_NAME.to_owned()),
        ("GIT_COMMITTER_EMAIL", AGENT_GIT_EMAIL.to_owned()),
    ];
    let mut env: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(k, _)| allow.iter().any(|a| a == k))
        .filter(|(k, _)| {
            let secret = is_secret_name(k);
            if secret {
                tracing::warn!(name = %k, "allow-listed variable looks like a secret; not passed to the agent");
            }
            !secret
        })
        .filter(|(k, _)| !ours.iter().any(|(name, _)| name == k))
        .collect();
    env.extend(ours.into_iter().map(|(k, v)| (k.to_owned(), v)));
    env
}

/// The runtime brief written to `CODEX_HOME/AGENTS.md`.
#[must_use]
pub fn agents_md(subject_label: &str, branch: &str, upstream: &Upstream) -> String {
    let push_note = match upstream {
        Upstream::NewBranch { .. } => "To propose code, commit on this branch and call `pull_request_open`.",
        Upstream::PullRequestBranch => {
            "This is the pull request's head branch: commit on it and call `pull_request_open` to push your commits \
             to the pull request."
        }
        Upstream::PullRequestRef { .. } => {
            "This pull request's head is not a branch of this repository (a fork): your commits cannot be pushed to \
             it. Describe the change in your reply, with the patch (`git format-patch` or `git diff`)."
        }
    };
    format!(
        "# Beckon runtime brief\n\n\
         You are Beckon's agent, working on {subject_label}.\n\n\
         - The repository is checked out in the current directory on branch `{branch}`.\n\
         - Read the thread first with the `thread_read` tool (and `issue_read` for the issue itself).\n\
         - Reply to the person with the `comment_reply` tool; that reply is what they see.\n\
         - {push_note}\n\
         - You have no network access and no credentials: the tools act for you. Do not try to push, \
           fetch or call APIs yourself.\n\
         - Never print, write or commit secrets, tokens or environment values.\n\
         - `git commit` may print an error about `packed-refs.lock`; it is harmless: check `git log`.\n"
    )
}
