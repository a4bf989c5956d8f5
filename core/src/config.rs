//! Settings: the operating interface of DESIGN §7, parsed once into one typed value.
//!
//! Every Beckon binary (`beckon serve`, `beckon worker`, the Lambda functions) reads the same
//! variable names, so they live here as constants ([`vars`]) and the infra template can be checked
//! against them. This module never touches `std::env` itself: binaries pass a lookup function
//! (`|k| std::env::var(k).ok()`), tests pass a map. An optional `beckon.toml` may supply the same
//! keys (lowercase, without the `BECKON_` prefix); the environment wins over the file.
//! Secrets are [`SecretString`]s: `Debug` redacts them and nothing here logs them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;

use crate::trigger::Rules;

/// The variable names (a contract: docs, tests and deploy scripts rely on them).
pub mod vars {
    /// `beckon serve` listen address.
    pub const LISTEN: &str = "BECKON_LISTEN";
    /// Embedded state directory (SQLite file, mirrors, workdirs).
    pub const DATA_DIR: &str = "BECKON_DATA_DIR";
    /// `sqlite` or `aws`.
    pub const BACKEND: &str = "BECKON_BACKEND";
    /// The mention handle without `@`.
    pub const AGENT_HANDLE: &str = "BECKON_AGENT_HANDLE";
    /// GitHub webhook secret.
    pub const GITHUB_WEBHOOK_SECRET: &str = "BECKON_GITHUB_WEBHOOK_SECRET";
    /// A second GitHub webhook secret accepted during rotation.
    pub const GITHUB_WEBHOOK_SECRET_PREVIOUS: &str = "BECKON_GITHUB_WEBHOOK_SECRET_PREVIOUS";
    /// Linear webhook signing secret.
    pub const LINEAR_WEBHOOK_SECRET: &str = "BECKON_LINEAR_WEBHOOK_SECRET";
    /// A second Linear signing secret accepted during rotation.
    pub const LINEAR_WEBHOOK_SECRET_PREVIOUS: &str = "BECKON_LINEAR_WEBHOOK_SECRET_PREVIOUS";
    /// `json` for JSON log lines; anything else is human-readable text.
    pub const LOG_FORMAT: &str = "BECKON_LOG_FORMAT";
    /// Webhook bodies larger than this many bytes get 413.
    pub const MAX_BODY_BYTES: &str = "BECKON_MAX_BODY_BYTES";
    /// Comma-separated GitHub logins Beckon writes as (e.g. `beckon[bot]`): loop guard.
    pub const GITHUB_BOT_LOGINS: &str = "BECKON_GITHUB_BOT_LOGINS";
    /// Beckon's GitHub App id (also the loop guard's `performed_via_github_app.id`).
    pub const GITHUB_APP_ID: &str = "BECKON_GITHUB_APP_ID";
    /// Comma-separated GitHub logins whose assignment means "assigned to the agent".
    pub const GITHUB_AGENT_LOGINS: &str = "BECKON_GITHUB_AGENT_LOGINS";
    /// Comma-separated Linear app user ids (one per workspace): loop guard and delegation.
    pub const LINEAR_APP_USER_IDS: &str = "BECKON_LINEAR_APP_USER_IDS";
    /// Comma-separated bot logins allowed to trigger.
    pub const BOT_ALLOW_LIST: &str = "BECKON_BOT_ALLOW_LIST";
    /// Runs per thread per hour before the loop guard stops new tasks.
    pub const MAX_RUNS_PER_HOUR: &str = "BECKON_MAX_RUNS_PER_HOUR";
    /// Path of the optional `beckon.toml`.
    pub const CONFIG_FILE: &str = "BECKON_CONFIG";
    /// DynamoDB table of the ledger (aws backend).
    pub const TABLE_NAME: &str = "BECKON_TABLE_NAME";
    /// SQS FIFO task queue URL (aws backend).
    pub const QUEUE_URL: &str = "BECKON_QUEUE_URL";
    /// Secrets Manager ARN holding the GitHub webhook secret (instead of the value).
    pub const GITHUB_WEBHOOK_SECRET_ARN: &str = "BECKON_GITHUB_WEBHOOK_SECRET_ARN";
    /// Secrets Manager ARN holding the Linear webhook signing secret (instead of the value).
    pub const LINEAR_WEBHOOK_SECRET_ARN: &str = "BECKON_LINEAR_WEBHOOK_SECRET_ARN";
    /// GitHub REST API base URL, default `https://api.github.com`.
    pub const GITHUB_API_URL: &str = "BECKON_GITHUB_API_URL";
    /// Secrets Manager ARN holding the GitHub App private key (PEM).
    pub const GITHUB_APP_PRIVATE_KEY_ARN: &str = "BECKON_GITHUB_APP_PRIVATE_KEY_ARN";
    /// Linear GraphQL endpoint, default `https://api.linear.app/graphql`.
    pub const LINEAR_API_URL: &str = "BECKON_LINEAR_API_URL";
    /// Secrets Manager ARN holding the Linear app-actor OAuth token.
    pub const LINEAR_OAUTH_TOKEN_ARN: &str = "BECKON_LINEAR_OAUTH_TOKEN_ARN";
    /// Where repositories are cloned from: `{base}{owner}/{repo}.git`.
    pub const GIT_BASE_URL: &str = "BECKON_GIT_BASE_URL";
    /// The native `codex` binary.
    pub const CODEX_BIN: &str = "BECKON_CODEX_BIN";
    /// A TOML file merged into every task's Codex `config.toml`.
    pub const CODEX_CONFIG: &str = "BECKON_CODEX_CONFIG";
    /// Comma-separated names of variables passed through to the Codex process (e.g. the model
    /// provider's API key); Codex keeps them out of the agent's commands.
    pub const CODEX_ENV: &str = "BECKON_CODEX_ENV";
    /// A GitHub personal access token (for `beckon serve` on a laptop; production uses the App).
    pub const GITHUB_TOKEN: &str = "BECKON_GITHUB_TOKEN";
    /// The GitHub App private key (PEM), as a value.
    pub const GITHUB_APP_PRIVATE_KEY: &str = "BECKON_GITHUB_APP_PRIVATE_KEY";
    /// A Linear personal API key.
    pub const LINEAR_API_KEY: &str = "BECKON_LINEAR_API_KEY";
    /// A Linear OAuth (app actor) token.
    pub const LINEAR_OAUTH_TOKEN: &str = "BECKON_LINEAR_OAUTH_TOKEN";
    /// `owner/repo` the agent works on for Linear issues (Linear issues name no repository).
    pub const LINEAR_REPOSITORY: &str = "BECKON_LINEAR_REPOSITORY";
    /// How many tasks one worker runs at once.
    pub const WORKER_SLOTS: &str = "BECKON_WORKER_SLOTS";
    /// Lease (and queue visibility) length in seconds; heartbeats renew it.
    pub const LEASE_SECS: &str = "BECKON_LEASE_SECS";
    /// Claims per task before it fails as `attempts_exhausted`.
    pub const MAX_ATTEMPTS: &str = "BECKON_MAX_ATTEMPTS";
    /// Overall deadline of one Codex turn, in seconds.
    pub const TURN_DEADLINE_SECS: &str = "BECKON_TURN_DEADLINE_SECS";
    /// Seconds without any Codex event before the turn is interrupted.
    pub const NO_PROGRESS_SECS: &str = "BECKON_NO_PROGRESS_SECS";

    /// Every name above, for consistency checks against deploy templates.
    pub const ALL: [&str; 39] = [
        LISTEN,
        DATA_DIR,
        BACKEND,
        AGENT_HANDLE,
        GITHUB_WEBHOOK_SECRET,
        GITHUB_WEBHOOK_SECRET_PREVIOUS,
        LINEAR_WEBHOOK_SECRET,
        LINEAR_WEBHOOK_SECRET_PREVIOUS,
        LOG_FORMAT,
        MAX_BODY_BYTES,
        GITHUB_BOT_LOGINS,
        GITHUB_APP_ID,
        GITHUB_AGENT_LOGINS,
        LINEAR_APP_USER_IDS,
        BOT_ALLOW_LIST,
        MAX_RUNS_PER_HOUR,
        CONFIG_FILE,
        TABLE_NAME,
        QUEUE_URL,
        GITHUB_WEBHOOK_SECRET_ARN,
        LINEAR_WEBHOOK_SECRET_ARN,
        GITHUB_API_URL,
        GITHUB_APP_PRIVATE_KEY_ARN,
        LINEAR_API_URL,
        LINEAR_OAUTH_TOKEN_ARN,
        GIT_BASE_URL,
        CODEX_BIN,
        CODEX_CONFIG,
        CODEX_ENV,
        GITHUB_TOKEN,
        GITHUB_APP_PRIVATE_KEY,
        LINEAR_API_KEY,
        LINEAR_OAUTH_TOKEN,
        LINEAR_REPOSITORY,
        WORKER_SLOTS,
        LEASE_SECS,
        MAX_ATTEMPTS,
        TURN_DEADLINE_SECS,
        NO_PROGRESS_SECS,
    ];
}

/// Default `beckon serve` address: loopback, so a fresh install exposes nothing.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// Default body cap: comment webhooks are a few KiB; GitHub caps at 25 MB and a Lambda function
/// URL at 6 MB, so 5 MiB refuses nothing real and bounds memory per request.
pub const DEFAULT_MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// Default run budget per thread per hour: enough for a busy human conversation, few enough that
/// two bots mentioning each other stop within minutes.
pub const DEFAULT_MAX_RUNS_PER_HOUR: u32 = 10;
/// Trigger bodies are stored up to this many characters: GitHub's own comment limit.
pub const MAX_TRIGGER_BODY_CHARS: usize = 65_536;

/// Which ledger and queue to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite file under the data dir (the embedded default).
    Sqlite,
    /// DynamoDB + SQS.
    Aws,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

/// Everything a Beckon process is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `beckon serve` address.
    pub listen: SocketAddr,
    /// Embedded state directory.
    pub data_dir: PathBuf,
    /// Explicit backend choice, if any (each command has its own default).
    pub backend: Option<Backend>,
    /// Log format.
    pub log_format: LogFormat,
    /// GitHub webhook secrets (current first); empty disables the GitHub endpoint.
    pub github_secrets: Vec<SecretString>,
    /// Linear signing secrets (current first); empty disables the Linear endpoint.
    pub linear_secrets: Vec<SecretString>,
    /// Body cap in bytes.
    pub max_body_bytes: usize,
    /// The trigger rules' configuration.
    pub rules: Rules,
    /// What the worker needs: Codex, git, tracker credentials, limits.
    pub worker: WorkerSettings,
}

/// The worker's settings (`beckon worker`, and the worker inside `beckon serve`).
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The native `codex` binary; `None` means no worker can run here.
    pub codex_bin: Option<PathBuf>,
    /// A TOML file merged into every task's Codex `config.toml`.
    pub codex_config: Option<PathBuf>,
    /// Variables passed through to the Codex process.
    pub codex_env: Vec<String>,
    /// Clone base: `{base}{owner}/{repo}.git`.
    pub git_base_url: String,
    /// GitHub REST API base.
    pub github_api_url: String,
    /// A personal access token.
    pub github_token: Option<SecretString>,
    /// The GitHub App private key (PEM), with `rules.own_app_id` as the App id.
    pub github_app_private_key: Option<SecretString>,
    /// Linear GraphQL endpoint.
    pub linear_api_url: String,
    /// A Linear API key.
    pub linear_api_key: Option<SecretString>,
    /// A Linear OAuth token.
    pub linear_oauth_token: Option<SecretString>,
    /// The repository Linear tasks work on.
    pub linear_repository: Option<(String, String)>,
    /// Tasks run at once; `None` lets the worker pick from memory.
    pub slots: Option<usize>,
    /// Lease and visibility length.
    pub lease: Duration,
    /// Claims per task before giving up.
    pub max_attempts: u32,
    /// Overall deadline of one Codex turn.
    pub turn_deadline: Duration,
    /// Silence from Codex after which the turn is interrupted.
    pub no_progress: Duration,
}

/// Default lease: heartbeats renew it every third of it, so a crashed worker's task is picked up
/// again within a minute.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// Default claims per task: one retry after a crash or a transient failure, then one more.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// A setting that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value did not parse. Fix the variable (or `beckon.toml` key) it names.
    #[error("{name}: {reason}")]
    Invalid {
        /// The variable name.
        name: &'static str,
        /// What is wrong (never the value itself: it may be a secret).
        reason: String,
    },
    /// `beckon.toml` could not be read or parsed.
    #[error("config file {path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl Settings {
    /// Parses settings from `lookup` (the environment) and, if given, the text of a `beckon.toml`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first bad variable or the file.
    pub fn load(
        lookup: impl Fn(&str) -> Option<String>,
        file: Option<(PathBuf, String)>,
    ) -> Result<Settings, ConfigError> {
        let file_values = match file {
            Some((path, text)) => parse_file(&text).map_err(|reason| ConfigError::File { path, reason })?,
            None => BTreeMap::new(),
        };
        let get = |name: &str| -> Option<String> {
            lookup(name).or_else(|| {
                let key = name.trim_start_matches("BECKON_").to_ascii_lowercase();
                file_values.get(&key).cloned()
            })
        };
        let handle = get(vars::AGENT_HANDLE).unwrap_or_else(|| "agent".to_owned());
        let handle = handle.trim().trim_start_matches('@').to_owned();
        if handle.is_empty() || !handle.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(invalid(vars::AGENT_HANDLE, "must be letters, digits, '-' or '_'"));
        }
        let listen = get(vars::LISTEN).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen.parse().map_err(|e| invalid(vars::LISTEN, format!("not a socket address: {e}")))?;
        let backend = match get(vars::BACKEND).as_deref().map(str::trim) {
            None | Some("") => None,
            Some("sqlite") => Some(Backend::Sqlite),
            Some("aws") => Some(Backend::Aws),
            Some(_) => return Err(invalid(vars::BACKEND, "must be `sqlite` or `aws`")),
        };
        let log_format = match get(vars::LOG_FORMAT).as_deref() {
            Some("json") => LogFormat::Json,
            Some(_) | None => LogFormat::Text,
        };
        let secrets = |current: &str, previous: &str| -> Vec<SecretString> {
            [get(current), get(previous)]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .map(SecretString::from)
                .collect()
        };
        let agent_logins = list(get(vars::GITHUB_AGENT_LOGINS));
        let secret = |name: &str| get(name).filter(|s| !s.is_empty()).map(SecretString::from);
        let linear_repository = match get(vars::LINEAR_REPOSITORY) {
            None => None,
            Some(v) => match v.trim().split_once('/') {
                Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() && !repo.contains('/') => {
                    Some((owner.to_owned(), repo.to_owned()))
                }
                Some(_) | None => return Err(invalid(vars::LINEAR_REPOSITORY, "must be `owner/repo`")),
            },
        };
        let secs = |name: &'static str, default: Duration| -> Result<Duration, ConfigError> {
            Ok(Duration::from_secs(number(get(name), name, default.as_secs())?))
        };
        let worker = WorkerSettings {
            codex_bin: get(vars::CODEX_BIN).filter(|s| !s.is_empty()).map(PathBuf::from),
            codex_config: get(vars::CODEX_CONFIG).filter(|s| !s.is_empty()).map(PathBuf::from),
            codex_env: list(get(vars::CODEX_ENV)),
            git_base_url: get(vars::GIT_BASE_URL).unwrap_or_else(|| "https://github.com/".to_owned()),
            github_api_url: get(vars::GITHUB_API_URL).unwrap_or_else(|| "https://api.github.com".to_owned()),
            github_token: secret(vars::GITHUB_TOKEN),
            github_app_private_key: secret(vars::GITHUB_APP_PRIVATE_KEY),
            linear_api_url: get(vars::LINEAR_API_URL).unwrap_or_else(|| "https://api.linear.app/graphql".to_owned()),
            linear_api_key: secret(vars::LINEAR_API_KEY),
            linear_oauth_token: secret(vars::LINEAR_OAUTH_TOKEN),
            linear_repository,
            slots: get(vars::WORKER_SLOTS).map(|v| number(Some(v), vars::WORKER_SLOTS, 1usize)).transpose()?,
            lease: secs(vars::LEASE_SECS, DEFAULT_LEASE)?,
            max_attempts: number(get(vars::MAX_ATTEMPTS), vars::MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS)?,
            turn_deadline: secs(vars::TURN_DEADLINE_SECS, Duration::from_secs(3600))?,
            no_progress: secs(vars::NO_PROGRESS_SECS, Duration::from_secs(600))?,
        };
        Ok(Settings {
            listen,
            data_dir: PathBuf::from(get(vars::DATA_DIR).unwrap_or_else(|| "./.beckon".to_owned())),
            backend,
            log_format,
            github_secrets: secrets(vars::GITHUB_WEBHOOK_SECRET, vars::GITHUB_WEBHOOK_SECRET_PREVIOUS),
            linear_secrets: secrets(vars::LINEAR_WEBHOOK_SECRET, vars::LINEAR_WEBHOOK_SECRET_PREVIOUS),
            max_body_bytes: number(get(vars::MAX_BODY_BYTES), vars::MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES)?,
            worker,
            rules: Rules {
                own_logins: list(get(vars::GITHUB_BOT_LOGINS)),
                own_app_id: get(vars::GITHUB_APP_ID)
                    .map(|v| v.trim().parse().map_err(|_| invalid(vars::GITHUB_APP_ID, "must be a number")))
                    .transpose()?,
                own_linear_user_ids: list(get(vars::LINEAR_APP_USER_IDS)),
                bot_allow_list: list(get(vars::BOT_ALLOW_LIST)),
                agent_logins: if agent_logins.is_empty() { vec![handle.clone()] } else { agent_logins },
                max_runs_per_window: number(
                    get(vars::MAX_RUNS_PER_HOUR),
                    vars::MAX_RUNS_PER_HOUR,
                    DEFAULT_MAX_RUNS_PER_HOUR,
                )?,
                budget_window: Duration::from_secs(3600),
                max_body_chars: MAX_TRIGGER_BODY_CHARS,
                handle,
            },
        })
    }

    /// The SQLite file under the data dir (`sqlite::DB_FILE_NAME`).
    pub fn sqlite_path(&self) -> PathBuf {
        self.data_dir.join("beckon.sqlite3")
    }
}

/// What the AWS backend and the Lambda functions read besides [`Settings`] (DESIGN §7 names).
/// Secrets given by ARN are fetched by the binary once per cold start; values win over ARNs.
#[derive(Debug, Clone, Default)]
pub struct AwsSettings {
    /// `BECKON_TABLE_NAME`.
    pub table_name: Option<String>,
    /// `BECKON_QUEUE_URL`.
    pub queue_url: Option<String>,
    /// `BECKON_GITHUB_WEBHOOK_SECRET_ARN`.
    pub github_webhook_secret_arn: Option<String>,
    /// `BECKON_LINEAR_WEBHOOK_SECRET_ARN`.
    pub linear_webhook_secret_arn: Option<String>,
    /// `BECKON_GITHUB_API_URL`.
    pub github_api_url: Option<String>,
    /// `BECKON_GITHUB_APP_ID`.
    pub github_app_id: Option<String>,
    /// `BECKON_GITHUB_APP_PRIVATE_KEY_ARN`.
    pub github_app_private_key_arn: Option<String>,
    /// `BECKON_GITHUB_TOKEN`.
    pub github_token: Option<SecretString>,
    /// `BECKON_LINEAR_API_URL`.
    pub linear_api_url: Option<String>,
    /// `BECKON_LINEAR_OAUTH_TOKEN_ARN`.
    pub linear_oauth_token_arn: Option<String>,
    /// `BECKON_LINEAR_OAUTH_TOKEN`.
    pub linear_oauth_token: Option<SecretString>,
}

impl AwsSettings {
    /// Reads the AWS names from `lookup` (the environment); empty values count as unset.
    pub fn load(lookup: impl Fn(&str) -> Option<String>) -> AwsSettings {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        AwsSettings {
            table_name: get(vars::TABLE_NAME),
            queue_url: get(vars::QUEUE_URL),
            github_webhook_secret_arn: get(vars::GITHUB_WEBHOOK_SECRET_ARN),
            linear_webhook_secret_arn: get(vars::LINEAR_WEBHOOK_SECRET_ARN),
            github_api_url: get(vars::GITHUB_API_URL),
            github_app_id: get(vars::GITHUB_APP_ID),
            github_app_private_key_arn: get(vars::GITHUB_APP_PRIVATE_KEY_ARN),
            github_token: get(vars::GITHUB_TOKEN).map(SecretString::from),
            linear_api_url: get(vars::LINEAR_API_URL),
            linear_oauth_token_arn: get(vars::LINEAR_OAUTH_TOKEN_ARN),
            linear_oauth_token: get(vars::LINEAR_OAUTH_TOKEN).map(SecretString::from),
        }
    }

    /// The table and queue of the AWS backend.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the missing variable.
    pub fn backend(&self) -> Result<(&str, &str), ConfigError> {
        let table =
            self.table_name.as_deref().ok_or_else(|| invalid(vars::TABLE_NAME, "required with the aws backend"))?;
        let queue =
            self.queue_url.as_deref().ok_or_else(|| invalid(vars::QUEUE_URL, "required with the aws backend"))?;
        Ok((table, queue))
    }
}

fn invalid(name: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { name, reason: reason.into() }
}

fn list(value: Option<String>) -> Vec<String> {
    value
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn number<T: std::str::FromStr>(value: Option<String>, name: &'static str, default: T) -> Result<T, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| invalid(name, "must be a non-negative integer")),
    }
}

/// Reads a flat `beckon.toml` (string, integer or boolean values; arrays of strings become lists).
fn parse_file(text: &str) -> Result<BTreeMap<String, String>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut out = BTreeMap::new();
    for (key, value) in table {
        let text = if let Some(s) = value.as_str() {
            s.to_owned()
        } else if let Some(i) = value.as_integer() {
            i.to_string()
        } else if let Some(b) = value.as_bool() {
            b.to_string()
        } else if let Some(items) = value.as_array() {
            let parts: Option<Vec<&str>> = items.iter().map(toml::Value::as_str).collect();
            parts.ok_or_else(|| format!("{key}: list items must be strings"))?.join(",")
        } else {
            return Err(format!("{key}: unsupported value type {}", value.type_str()));
        };
        out.insert(key, text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn load(pairs: &[(&str, &str)], file: Option<&str>) -> Result<Settings, ConfigError> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Settings::load(|k| map.get(k).cloned(), file.map(|t| (PathBuf::from("beckon.toml"), t.to_owned())))
    }

    #[test]
    fn defaults_follow_the_operating_interface() {
        let s = load(&[], None).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:8787");
        assert_eq!(s.data_dir, PathBuf::from("./.beckon"));
        assert_eq!(s.rules.handle, "agent");
        assert_eq!(s.rules.agent_logins, vec!["agent".to_owned()]);
        assert!(s.github_secrets.is_empty() && s.linear_secrets.is_empty());
        assert_eq!(s.backend, None);
    }

    #[test]
    fn environment_wins_over_the_file_and_lists_split() {
        let file = "agent_handle = \"bot\"\nmax_runs_per_hour = 3\ngithub_bot_logins = [\"beckon[bot]\", \"ci\"]\n";
        let s =
            load(&[("BECKON_AGENT_HANDLE", "@helper"), ("BECKON_GITHUB_WEBHOOK_SECRET", "s3")], Some(file)).unwrap();
        assert_eq!(s.rules.handle, "helper");
        assert_eq!(s.rules.max_runs_per_window, 3);
        assert_eq!(s.rules.own_logins, vec!["beckon[bot]".to_owned(), "ci".to_owned()]);
        assert_eq!(s.github_secrets.len(), 1);
        assert_eq!(s.github_secrets[0].expose_secret(), "s3");
    }

    #[test]
    fn bad_values_name_the_variable_but_not_the_value() {
        let err = load(&[("BECKON_LISTEN", "nowhere")], None).unwrap_err().to_string();
        assert!(err.starts_with("BECKON_LISTEN:"), "{err}");
        let err = load(&[("BECKON_BACKEND", "postgres")], None).unwrap_err().to_string();
        assert!(err.contains("BECKON_BACKEND") && !err.contains("postgres"), "{err}");
        assert!(load(&[("BECKON_AGENT_HANDLE", "a b")], None).is_err());
        assert!(load(&[], Some("x = [")).is_err());
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let s = load(&[("BECKON_LINEAR_WEBHOOK_SECRET", "hunter2-very-secret")], None).unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
