//! The world the end-to-end scenarios run in (`tests/worker.rs` and the reliability suite): a
//! local bare git remote, the scripted model server, the GitHub double and `beckon serve` with the
//! real Codex; plus the invariants each scenario checks when it is over.

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::github_double::GithubDouble;
use crate::support::{fixture, Beckon};

/// Why the Codex scenarios are ignored by a bare `cargo test`.
pub const NEEDS: &str = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN";
/// The personal token the worker uses against the double.
pub const TOKEN: &str = "ghp_reliability_token_not_real_8d2e";
/// Generous: the machine is small and loaded.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(120);

pub struct World {
    pub dir: tempfile::TempDir,
    pub github: GithubDouble,
    pub mock: KillOnDrop,
    pub beckon: Beckon,
}

pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A bare "remote" at `<dir>/remotes/Codertocat/Hello-World.git` with one commit on `main`.
pub fn remote(dir: &Path) -> PathBuf {
    let seed = dir.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("README.md"), "Hello World\n").unwrap();
    git(&seed, &["add", "."]);
    git(&seed, &["commit", "-q", "-m", "initial"]);
    // The head branch of pull request #2 (the review-comment example's PR).
    git(&seed, &["branch", "feature"]);
    let bare = dir.join("remotes/Codertocat/Hello-World.git");
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(dir, &["clone", "-q", "--bare", seed.to_str().unwrap(), bare.to_str().unwrap()]);
    dir.join("remotes")
}

pub fn mock_model(dir: &Path) -> (KillOnDrop, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/codex/mock_responses.py");
    let port_file = dir.join("mock-port.txt");
    let child = Command::new("python3")
        .arg(&script)
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .arg("--log")
        .arg(dir.join("mock-requests.jsonl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(port) = std::fs::read_to_string(&port_file).ok().and_then(|t| t.trim().parse().ok()) {
            return (guard, port);
        }
        assert!(Instant::now() < deadline, "the mock model did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The scripted model server and a Codex config file (in `dir`) that points Codex at it.
pub fn model(dir: &Path) -> (KillOnDrop, PathBuf) {
    let (mock, port) = mock_model(dir);
    let catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/codex/mock_model_catalog.json");
    let codex_config = dir.join("codex.toml");
    std::fs::write(
        &codex_config,
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\nmodel_catalog_json = \"{}\"\n\n\
             [model_providers.mock]\nname = \"Mock\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n",
            catalog.display()
        ),
    )
    .unwrap();
    (mock, codex_config)
}

/// The world with the personal token; `extra` variables win over the defaults.
pub async fn world(extra: &[(&str, &str)]) -> World {
    world_with(Some(TOKEN), extra).await
}

/// The world; `personal_token: None` leaves the worker's GitHub credential to `extra` (an App).
pub async fn world_with(personal_token: Option<&str>, extra: &[(&str, &str)]) -> World {
    let codex = std::env::var("BECKON_TEST_CODEX_BIN").expect(NEEDS);
    let dir = tempfile::tempdir().unwrap();
    let remotes = remote(dir.path());
    let (mock, codex_config) = model(dir.path());
    let github = GithubDouble::start(personal_token).await;
    let base_url = format!("file://{}/", remotes.display());
    let codex_config = codex_config.display().to_string();
    let mut env: Vec<(&str, &str)> = vec![
        ("BECKON_CODEX_BIN", codex.as_str()),
        ("BECKON_CODEX_CONFIG", codex_config.as_str()),
        ("BECKON_GIT_BASE_URL", base_url.as_str()),
        ("BECKON_GITHUB_API_URL", github.base.as_str()),
        ("BECKON_WORKER_SLOTS", "2"),
    ];
    if let Some(token) = personal_token {
        env.push(("BECKON_GITHUB_TOKEN", token));
    }
    for (k, v) in extra {
        env.retain(|(key, _)| key != k);
        env.push((k, v));
    }
    let beckon = Beckon::start(&env);
    World { dir, github, mock, beckon }
}

/// An `issue_comment.created` on issue #1 with `body` and comment id `comment_id`.
pub fn comment(body: &str, comment_id: u64) -> Value {
    let mut payload = fixture("github/issue_comment.created.json");
    payload["comment"]["body"] = json!(body);
    payload["comment"]["id"] = json!(comment_id);
    payload
}

pub fn is_terminal(task: &Value) -> bool {
    ["completed", "failed", "cancelled"].contains(&task["state"].as_str().unwrap())
}

pub fn finished(tasks: &[Value]) -> bool {
    !tasks.is_empty() && tasks.iter().all(is_terminal)
}

/// Waits for `pred` over the double, or panics after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Comments the double holds that carry task `id`'s reply marker.
pub fn replies_of(github: &GithubDouble, task_id: &str) -> usize {
    let marker = format!("beckon:task={task_id};");
    github.comments().iter().filter(|c| c.body.contains(&marker)).count()
}

/// The three invariants, after a scenario: every comment in `triggering` is in exactly one task;
/// every task posted at most one reply (and a completed one exactly one); every accepted delivery
/// points at a task that is terminal or still visibly queued. Returns the tasks.
pub fn check_invariants(beckon: &Beckon, github: &GithubDouble, triggering: &[u64]) -> Vec<Value> {
    let tasks: Vec<Value> =
        serde_json::from_str(&beckon.cli(&["tasks", "list", "--json", "--limit", "10000"])).unwrap();
    for id in triggering {
        let owners: Vec<&str> = tasks
            .iter()
            .filter(|t| t["triggers"].as_array().unwrap().iter().any(|tr| tr["comment_id"] == json!(id.to_string())))
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(owners.len(), 1, "comment {id} must be in exactly one task: {owners:?}\n{tasks:#?}");
    }
    for t in &tasks {
        let id = t["id"].as_str().unwrap();
        let n = replies_of(github, id);
        assert!(n <= 1, "task {id} replied {n} times: {:#?}", github.comments());
        if t["state"] == "completed" {
            assert_eq!(n, 1, "completed task {id} has no reply: {t:#}");
        }
    }
    let deliveries: Vec<Value> =
        serde_json::from_str(&beckon.cli(&["deliveries", "list", "--json", "--limit", "10000"])).unwrap();
    for d in &deliveries {
        let reason = d["reason"].as_str().unwrap();
        if !["enqueued", "coalesced", "deferred"].contains(&reason) {
            continue;
        }
        let task_id = d["task_id"].as_str().unwrap_or_else(|| panic!("accepted without a task: {d:#}"));
        let task = tasks.iter().find(|t| t["id"] == task_id).unwrap_or_else(|| panic!("{task_id} missing: {d:#}"));
        assert!(is_terminal(task) || task["state"] == "queued", "delivery {d:#} left task {task:#} stuck");
    }
    tasks
}
