//! Comment to work, and worker scale: the real `beckon serve` (release) with its worker, the
//! pinned Codex binary against the scripted model (`tests/codex/mock_responses.py`), a local git
//! remote (`file://`) and the GitHub double from `core/tests/support`, all on loopback.
//!
//! Latency: one warm-up task fills the repository mirror; then tasks run one at a time (each on
//! its own issue, so its own thread), and each stage is read from the JSON log timestamps of the
//! lines that task produced (`delivery accepted`, `task claimed`, `workspace prepared`, `spawned
//! codex app-server`, `codex initialized`, `codex turn started`, `task finished`), measured from
//! the moment the webhook request was sent. The comment's 👀 reaction request is timed with the
//! tracker double's own clock.
//!
//! Scale: `slots` concurrent tasks (`BECKON_WORKER_SLOTS`), as many tasks sent at once.
//!
//! The acknowledgement bench (`ack`) starts the same world without Codex, and with the Linear
//! double beside the GitHub one ([`World::start_with_linear`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use serde_json::Value;

use crate::payloads;
use crate::stats::{children_cpu_time, cpu_time, ms, peak_rss_mib, quantile};

#[path = "../../../core/tests/support/github_double.rs"]
pub mod github_double;
#[path = "../../../core/tests/support/linear_double.rs"]
pub mod linear_double;

use github_double::GithubDouble;
use linear_double::LinearDouble;

const TOKEN: &str = "ghp_bench_token_not_a_real_one_77aa";
/// The Linear API key `beckon serve` is given and the Linear double accepts.
const LINEAR_KEY: &str = "lin_api_bench_key_not_a_real_one_31c9";
/// The Linear webhook signing secret.
const LINEAR_SECRET: &str = "bench-linear-secret-8e2d51";
/// How long one task may take before the run is abandoned.
const TASK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long `beckon serve` may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `beckon serve` may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The stages read from the log, in order, with the log message that marks each.
pub const STAGES: [(&str, &str); 6] = [
    ("webhook answered (ingest)", "delivery accepted"),
    ("task claimed (queue receive)", "task claimed"),
    ("workspace prepared", "workspace prepared"),
    ("codex spawned", "spawned codex app-server"),
    ("codex initialized (handshake)", "codex initialized"),
    ("turn/start accepted", "codex turn started"),
];

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running world: the scripted model, the GitHub double and `beckon serve` with a worker.
pub struct World {
    _dir: tempfile::TempDir,
    _mock: Option<KillOnDrop>,
    beckon: KillOnDrop,
    pub double: GithubDouble,
    /// The Linear double, when the world was started with Linear on.
    pub linear: Option<LinearDouble>,
    base: String,
    logs: Arc<Mutex<Vec<String>>>,
    client: reqwest::Client,
    next_comment: u64,
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .with_context(|| format!("while running git {args:?}"))?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Starts the scripted model and writes a Codex config pointing at it.
async fn start_model(dir: &Path) -> anyhow::Result<(KillOnDrop, PathBuf)> {
    let port_file = dir.join("mock-port.txt");
    let mock = Command::new("python3")
        .arg(repo_root().join("tests/codex/mock_responses.py"))
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .arg("--log")
        .arg(dir.join("mock-requests.jsonl"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("while starting the scripted model")?;
    let mock = KillOnDrop(mock);
    let deadline = Instant::now() + START_TIMEOUT;
    let port: u16 = loop {
        if let Some(p) = std::fs::read_to_string(&port_file).ok().and_then(|t| t.trim().parse().ok()) {
            break p;
        }
        anyhow::ensure!(Instant::now() < deadline, "the scripted model did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let catalog = repo_root().join("tests/codex/mock_model_catalog.json");
    let codex_config = dir.join("codex.toml");
    std::fs::write(
        &codex_config,
        format!(
            "model = \"mock-model\"\nmodel_provider = \"mock\"\nmodel_catalog_json = \"{}\"\n\n\
                 [model_providers.mock]\nname = \"Mock\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n",
            catalog.display()
        ),
    )?;
    Ok((mock, codex_config))
}

impl World {
    /// Starts everything; `beckon` is the release binary, `codex` the pinned Codex binary (without
    /// it, `beckon serve` runs with no worker: ingest and its acknowledgement only).
    pub async fn start(beckon: &Path, codex: Option<&Path>, slots: usize) -> anyhow::Result<World> {
        World::start_inner(beckon, codex, slots, false).await
    }

    /// `beckon serve` with no worker, and with Linear's webhook secret and API key (pointing at a
    /// Linear double) beside GitHub's: ingest and its acknowledgements on both trackers.
    pub async fn start_with_linear(beckon: &Path) -> anyhow::Result<World> {
        World::start_inner(beckon, None, 1, true).await
    }

    async fn start_inner(beckon: &Path, codex: Option<&Path>, slots: usize, linear: bool) -> anyhow::Result<World> {
        let dir = tempfile::tempdir().context("while creating a tempdir")?;
        let seed = dir.path().join("seed");
        std::fs::create_dir_all(&seed)?;
        git(&seed, &["init", "-q", "-b", "main"])?;
        std::fs::write(seed.join("README.md"), "Hello World\n")?;
        git(&seed, &["add", "."])?;
        git(&seed, &["commit", "-q", "-m", "initial"])?;
        let bare = dir.path().join("remotes/Codertocat/Hello-World.git");
        std::fs::create_dir_all(bare.parent().context("no parent")?)?;
        let seed_str = seed.to_str().context("non-UTF-8 tempdir")?;
        let bare_str = bare.to_str().context("non-UTF-8 tempdir")?;
        git(dir.path(), &["clone", "-q", "--bare", seed_str, bare_str])?;

        let (mock, codex_config) = match codex {
            Some(_) => {
                let (mock, config) = start_model(dir.path()).await?;
                (Some(mock), Some(config))
            }
            None => (None, None),
        };
        let double = GithubDouble::start(Some(TOKEN)).await;
        let data_dir = dir.path().join("data");
        let remotes = dir.path().join("remotes");
        let mut cmd = Command::new(beckon);
        cmd.arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BECKON_DATA_DIR", &data_dir)
            .env("BECKON_LISTEN", "127.0.0.1:0")
            .env("BECKON_LOG_FORMAT", "json")
            .env("RUST_LOG", "info,beckon::codex::client=debug,beckon::codex::turn=debug")
            .env("BECKON_GITHUB_WEBHOOK_SECRET", payloads::SECRET)
            .env("BECKON_GIT_BASE_URL", format!("file://{}/", remotes.display()))
            .env("BECKON_GITHUB_API_URL", &double.base)
            .env("BECKON_GITHUB_TOKEN", TOKEN)
            .env("BECKON_WORKER_SLOTS", slots.to_string())
            .env("BECKON_MAX_RUNS_PER_HOUR", "1000")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let (Some(codex), Some(config)) = (codex, &codex_config) {
            cmd.env("BECKON_CODEX_BIN", codex).env("BECKON_CODEX_CONFIG", config);
        }
        let linear = if linear { Some(LinearDouble::start(LINEAR_KEY).await) } else { None };
        if let Some(double) = &linear {
            cmd.env("BECKON_LINEAR_WEBHOOK_SECRET", LINEAR_SECRET)
                .env("BECKON_LINEAR_API_URL", &double.url)
                .env("BECKON_LINEAR_API_KEY", LINEAR_KEY);
        }
        let mut child = cmd.spawn().context("while starting beckon serve")?;
        let stderr = child.stderr.take().context("stderr not piped")?;
        let beckon = KillOnDrop(child);
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut l) = sink.lock() {
                    l.push(line);
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = loop {
            let found = lines(&logs).iter().find_map(|v| {
                (v["message"] == "beckon serve listening").then(|| v["addr"].as_str().map(str::to_owned)).flatten()
            });
            if let Some(addr) = found {
                break addr;
            }
            anyhow::ensure!(Instant::now() < deadline, "beckon serve did not listen");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build()?;
        Ok(World {
            _dir: dir,
            _mock: mock,
            beckon,
            double,
            linear,
            base: format!("http://{addr}"),
            logs,
            client,
            next_comment: 5_000_000,
        })
    }

    /// The `beckon serve` process id.
    pub fn pid(&self) -> u32 {
        self.beckon.0.id()
    }

    /// Sends an `@agent` comment on issue `number`.
    pub async fn comment(&mut self, number: u64) -> anyhow::Result<()> {
        self.next_comment += 1;
        let resp = self.request(number, self.next_comment)?.send().await.context("while sending a webhook")?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        anyhow::ensure!(status.is_success() && text.contains("enqueued"), "webhook answered {status}: {text}");
        Ok(())
    }

    /// The signed webhook request for an owner's `@agent` comment `comment_id` on issue `number`,
    /// ready to send (several may be in flight at once).
    pub fn request(&self, number: u64, comment_id: u64) -> anyhow::Result<reqwest::RequestBuilder> {
        let payload = payloads::comment("@agent please fix the readme", "OWNER", number, comment_id)?;
        let body = serde_json::to_vec(&payload)?;
        Ok(self
            .client
            .post(format!("{}/webhooks/github", self.base))
            .header("content-type", "application/json")
            .header("x-github-event", "issue_comment")
            .header("x-github-delivery", format!("work-{comment_id}"))
            .header("x-hub-signature-256", payloads::sign(&body)?)
            .body(body))
    }

    /// The signed Linear webhook request opening agent session `n` (on its own issue), ready to
    /// send; the world must have been started with Linear on.
    pub fn linear_request(&self, n: u64) -> anyhow::Result<reqwest::RequestBuilder> {
        let now_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
        let body = serde_json::to_vec(&payloads::linear_session(n, now_ms)?)?;
        Ok(self
            .client
            .post(format!("{}/webhooks/linear", self.base))
            .header("content-type", "application/json; charset=utf-8")
            .header("linear-delivery", format!("ack-{n}"))
            .header("linear-event", "AgentSessionEvent")
            .header("linear-signature", payloads::hmac_hex(LINEAR_SECRET, &body)?)
            .body(body))
    }

    /// Parsed JSON log lines from index `from` on.
    pub fn log_since(&self, from: usize) -> Vec<Value> {
        lines(&self.logs).into_iter().skip(from).collect()
    }

    pub fn log_len(&self) -> usize {
        self.logs.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Waits until `count` tasks have logged `task finished` since log index `from`.
    pub async fn wait_finished(&self, from: usize, count: usize, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let done = self.log_since(from).iter().filter(|v| v["message"] == "task finished").count();
            if done >= count {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let tail: Vec<String> = self.log_since(from).iter().rev().take(20).map(Value::to_string).collect();
                bail!("{done}/{count} tasks finished within {timeout:?}; last log lines:\n{}", tail.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for World {
    /// Stops `beckon serve` with SIGTERM first, so it hands running tasks back and its Codex
    /// children exit with it; the field's own drop SIGKILLs it if it is still there.
    fn drop(&mut self) {
        let pid = self.beckon.0.id().to_string();
        if Command::new("kill").args(["-TERM", &pid]).status().is_ok_and(|s| s.success()) {
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline && matches!(self.beckon.0.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn lines(logs: &Arc<Mutex<Vec<String>>>) -> Vec<Value> {
    logs.lock().map(|l| l.iter().filter_map(|s| serde_json::from_str(s).ok()).collect()).unwrap_or_default()
}

fn timestamp(v: &Value) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(v["timestamp"].as_str()?).ok()
}

/// Per stage, the delays from request sent, over all tasks; plus the first tracker request and
/// `task finished`.
pub struct Latency {
    pub stages: Vec<(&'static str, Vec<Duration>)>,
    /// Per task, each stage's delay from the request (None when its log line was missing).
    pub per_task: Vec<Vec<Option<Duration>>>,
    /// Request sent → the double receives this comment's 👀 (`POST …/reactions`).
    pub reaction: Vec<Duration>,
    pub finished: Vec<Duration>,
}

/// Runs one warm-up task, then `tasks` tasks one at a time.
pub async fn latency(beckon: &Path, codex: &Path, tasks: usize) -> anyhow::Result<Latency> {
    let mut world = World::start(beckon, Some(codex), 2).await?;
    let from = world.log_len();
    world.comment(1).await?;
    world.wait_finished(from, 1, TASK_TIMEOUT).await.context("the warm-up task")?;
    let mut stages: Vec<(&'static str, Vec<Duration>)> = STAGES.iter().map(|(name, _)| (*name, Vec::new())).collect();
    let mut reaction = Vec::new();
    let mut finished = Vec::new();
    let mut per_task = Vec::new();
    for k in 0..tasks {
        let from = world.log_len();
        let sent_wall = SystemTime::now();
        let sent = tokio::time::Instant::now();
        world.comment(100 + k as u64).await?;
        world.wait_finished(from, 1, TASK_TIMEOUT).await?;
        let log = world.log_since(from);
        let at = |message: &str| -> Option<Duration> {
            let line = log.iter().find(|v| v["message"] == message)?;
            timestamp(line)?.duration_since(sent_wall).ok()
        };
        let mut this = Vec::new();
        for ((_, message), (_, samples)) in STAGES.iter().zip(stages.iter_mut()) {
            let d = at(message);
            samples.extend(d);
            this.push(d);
        }
        per_task.push(this);
        if let Some(d) = at("task finished") {
            finished.push(d);
        }
        let reacted = world.double.requests_to("POST", "/reactions").into_iter().filter(|r| r.at >= sent);
        if let Some(first) = reacted.min_by_key(|r| r.at) {
            reaction.push(first.at - sent);
        }
    }
    Ok(Latency { stages, per_task, reaction, finished })
}

impl Latency {
    /// Markdown table rows.
    pub fn rows(&self) -> Vec<String> {
        let mut out = Vec::new();
        let row = |name: &str, s: &[Duration]| {
            format!(
                "| comment → {name} | p50 {} / p99 {} (n={}) |",
                ms(quantile(s, 0.5)),
                ms(quantile(s, 0.99)),
                s.len()
            )
        };
        for (name, samples) in &self.stages {
            out.push(row(name, samples));
        }
        out.push(format!(
            "| comment → 👀 reaction request at the GitHub double, worker running | p50 {} / p99 {} (n={}): sent right after ingest answers, through the same 1 s per-installation write pacing as the previous task's reply |",
            ms(quantile(&self.reaction, 0.5)),
            ms(quantile(&self.reaction, 0.99)),
            self.reaction.len()
        ));
        out.push(row("task finished (scripted one-message turn)", &self.finished));
        // Where the time goes: each step's own duration (this stage minus the previous), per task.
        let mut steps = Vec::new();
        for (i, (name, _)) in STAGES.iter().enumerate() {
            let own: Vec<Duration> = self
                .per_task
                .iter()
                .filter_map(|t| {
                    let this = (*t.get(i)?)?;
                    let before = if i == 0 { Some(Duration::ZERO) } else { *t.get(i - 1)? };
                    Some(this.saturating_sub(before?))
                })
                .collect();
            steps.push(format!("{name} {}", ms(quantile(&own, 0.5))));
        }
        out.push(format!("| where the time goes (p50 of each step) | {} |", steps.join("; ")));
        out
    }
}

/// Scale figures for one slot count.
pub struct Scale {
    pub slots: usize,
    pub tasks: usize,
    pub per_minute: f64,
    pub cpu_per_task: Duration,
    /// Codex's CPU per task (the reaped children of `beckon serve`).
    pub codex_cpu_per_task: Duration,
    pub rss_mib: f64,
}

/// Sends `slots` tasks at once to a worker with `slots` slots and times them all.
pub async fn scale(beckon: &Path, codex: &Path, slots: usize) -> anyhow::Result<Scale> {
    let mut world = World::start(beckon, Some(codex), slots).await?;
    let from = world.log_len();
    world.comment(1).await?;
    world.wait_finished(from, 1, TASK_TIMEOUT).await.context("the warm-up task")?;
    let tasks = slots;
    let from = world.log_len();
    let cpu_before = cpu_time(world.pid())?;
    let children_before = children_cpu_time(world.pid())?;
    let started = Instant::now();
    for k in 0..tasks {
        world.comment(1000 + k as u64).await?;
    }
    world.wait_finished(from, tasks, TASK_TIMEOUT * 4).await?;
    let elapsed = started.elapsed();
    let cpu = cpu_time(world.pid())?.saturating_sub(cpu_before);
    // Codex children of the last tasks may still be exiting; give them a moment to be reaped.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let children = children_cpu_time(world.pid())?.saturating_sub(children_before);
    Ok(Scale {
        slots,
        tasks,
        per_minute: tasks as f64 / elapsed.as_secs_f64() * 60.0,
        cpu_per_task: cpu / u32::try_from(tasks).unwrap_or(1),
        codex_cpu_per_task: children / u32::try_from(tasks).unwrap_or(1),
        rss_mib: peak_rss_mib(world.pid())?,
    })
}

impl Scale {
    pub fn row(&self) -> String {
        format!(
            "| worker, {} slots ({} tasks at once) | {:.0} tasks/min; beckon CPU {} per task (Codex excluded); Codex CPU {} per task; beckon peak RSS {:.1} MiB |",
            self.slots,
            self.tasks,
            self.per_minute,
            ms(self.cpu_per_task),
            ms(self.codex_cpu_per_task),
            self.rss_mib
        )
    }
}
