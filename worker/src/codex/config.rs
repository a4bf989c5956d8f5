//! A task's `$CODEX_HOME/config.toml`: Beckon's base settings (model provider, no unbounded
//! retries, plugins/apps/analytics and shell snapshot off, no login shell, optional model catalog) with the
//! operator's `BECKON_CODEX_CONFIG` table merged on top.
//!
//! [`config_toml`] is pure; [`write_config`] only writes the file. Codex appends project trust
//! entries to this file itself, so it is regenerated for every run. Merge rule: tables merge key by
//! key, recursively; any other value from the override replaces the base value.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

/// The settings Beckon controls. Defaults match the template verified with codex-cli 0.169.0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexSettings {
    /// Model slug, e.g. `gpt-5-codex` or the mock's `mock-model`.
    pub model: String,
    /// Key under `[model_providers]`.
    pub provider_id: String,
    /// Display name of the provider.
    pub provider_name: String,
    /// Responses API base URL; Codex POSTs `{base_url}/responses`.
    pub base_url: String,
    /// `model_providers.<id>.request_max_retries`.
    pub request_max_retries: u32,
    /// `model_providers.<id>.stream_max_retries`.
    pub stream_max_retries: u32,
    /// `model_providers.<id>.stream_idle_timeout_ms`.
    pub stream_idle_timeout_ms: u64,
    /// `model_catalog_json`: metadata for slugs Codex does not know (absolute path).
    pub model_catalog_json: Option<PathBuf>,
}

impl CodexSettings {
    /// Settings for a Responses-API provider at `base_url` serving `model`.
    #[must_use]
    pub fn new(model: impl Into<String>, provider_id: impl Into<String>, base_url: impl Into<String>) -> Self {
        let provider_id = provider_id.into();
        Self {
            model: model.into(),
            provider_name: provider_id.clone(),
            provider_id,
            base_url: base_url.into(),
            request_max_retries: 0,
            stream_max_retries: 0,
            stream_idle_timeout_ms: 60_000,
            model_catalog_json: None,
        }
    }
}

fn table(entries: impl IntoIterator<Item = (&'static str, Value)>) -> Table {
    entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// Beckon's base config as a TOML table.
fn base_table(base: &CodexSettings) -> Table {
    let provider = table([
        ("name", Value::from(base.provider_name.as_str())),
        ("base_url", Value::from(base.base_url.as_str())),
        // `chat` is rejected by 0.169.0.
        ("wire_api", Value::from("responses")),
        ("request_max_retries", Value::from(i64::from(base.request_max_retries))),
        ("stream_max_retries", Value::from(i64::from(base.stream_max_retries))),
        ("stream_idle_timeout_ms", Value::from(i64::try_from(base.stream_idle_timeout_ms).unwrap_or(i64::MAX))),
    ]);
    let mut root = table([
        ("model", Value::from(base.model.as_str())),
        ("model_provider", Value::from(base.provider_id.as_str())),
        ("approval_policy", Value::from("never")),
        ("sandbox_mode", Value::from("workspace-write")),
        ("check_for_update_on_startup", Value::from(false)),
        // `bash -c` instead of `bash -lc`: no profile noise in command output.
        ("allow_login_shell", Value::from(false)),
        ("analytics", Value::Table(table([("enabled", Value::from(false))]))),
        (
            "features",
            Value::Table(table([
                // No curated-plugin sync to github.com / chatgpt.com at startup.
                ("plugins", Value::from(false)),
                ("apps", Value::from(false)),
                // Otherwise an unreachable model server is retried forever.
                ("unbounded_connection_retries", Value::from(false)),
                // The startup shell snapshot runs the user's shell profile, which may leave
                // background jobs outside Codex's process group (pyenv rehash here) and leaks
                // profile state into the agent's commands.
                ("shell_snapshot", Value::from(false)),
            ])),
        ),
    ]);
    root.insert(
        "model_providers".into(),
        Value::Table([(base.provider_id.clone(), Value::Table(provider))].into_iter().collect()),
    );
    if let Some(catalog) = &base.model_catalog_json {
        root.insert("model_catalog_json".into(), Value::from(catalog.display().to_string()));
    }
    root
}

/// Merges `over` into `base`: tables recursively, other values replaced.
fn merge(base: &mut Table, over: &Table) {
    for (key, value) in over {
        match (base.get_mut(key), value) {
            (Some(Value::Table(base_table)), Value::Table(over_table)) => merge(base_table, over_table),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The text of `config.toml`: `base`, with `overrides` (the operator's file) merged on top.
#[must_use]
pub fn config_toml(base: &CodexSettings, overrides: Option<&Table>) -> String {
    let mut root = base_table(base);
    if let Some(overrides) = overrides {
        merge(&mut root, overrides);
    }
    format!("# Written by Beckon for one task run; regenerated every run.\n{root}")
}

/// Writes `codex_home/config.toml` (creating `codex_home`) and returns its path.
///
/// # Errors
/// I/O errors creating the directory or writing the file.
pub fn write_config(codex_home: &Path, base: &CodexSettings, overrides: Option<&Table>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(codex_home)?;
    let path = codex_home.join("config.toml");
    std::fs::write(&path, config_toml(base, overrides))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn base_config_with_operator_overrides() {
        let mut base = CodexSettings::new("mock-model", "mock", "http://127.0.0.1:4000/v1");
        base.model_catalog_json = Some("/home/catalog.json".into());
        let overrides: Table = toml::from_str(
            "model = \"gpt-5-codex\"\n[features]\napps = true\n[model_providers.mock]\nrequest_max_retries = 2\n",
        )
        .unwrap();
        let text = config_toml(&base, Some(&overrides));
        let parsed: Table = toml::from_str(&text).unwrap();
        let expected: Table = toml::from_str(
            r#"
model = "gpt-5-codex"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
allow_login_shell = false
model_catalog_json = "/home/catalog.json"
[analytics]
enabled = false
[features]
plugins = false
apps = true
unbounded_connection_retries = false
shell_snapshot = false
[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:4000/v1"
wire_api = "responses"
request_max_retries = 2
stream_max_retries = 0
stream_idle_timeout_ms = 60000
"#,
        )
        .unwrap();
        assert_eq!(parsed, expected);
        assert!(text.starts_with("# Written by Beckon"));
    }

    #[test]
    fn no_overrides_no_catalog() {
        let text = config_toml(&CodexSettings::new("m", "p", "http://x/v1"), None);
        let parsed: Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed.get("model_catalog_json"), None);
        assert_eq!(parsed["features"]["unbounded_connection_retries"], Value::Boolean(false));
    }
}
