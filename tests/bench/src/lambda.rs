//! Lambda function cost: the `github-webhook` binary as deployed (profile `release-lambda`), and
//! beside it the same handler logic on Node.js (`tests/bench/peer/lambda.mjs`), each driven through
//! a minimal Lambda Runtime API served here (`/2018-06-01/runtime/invocation/next`,
//! `…/{id}/response`, `…/{id}/error`), the protocol `functions/support/runtime_api.rs` serves in
//! the function's tests. Each configuration records in a DynamoDB table and an SQS FIFO queue of
//! its own on moto (started by `tests/bench/run`): moto's DynamoDB slows as a table fills, so
//! sharing one would charge whichever ran last for the items of those before.
//!
//! Cold start: a fresh process per sample, its event queued before the spawn; the time from just
//! before the spawn to the response arriving. Warm: one process, a few warm-up invocations, then
//! the time from `next` handing out each event to its response arriving.
//!
//! The bare function (and the peer) read the webhook secret from the environment and acknowledge
//! nothing. The function as deployed (`infra/template.yaml`) does more before its first answer:
//! it fetches the webhook secret and the GitHub App's private key from Secrets Manager (on moto),
//! and it reacts 👀 inline, which for an App means signing a JWT and minting an installation token
//! first; those requests go to the GitHub double from `core/tests/support`. Its cold start is
//! measured too ([`cold_as_deployed`]). Not its warm handler time: an inline 👀 waits for GitHub's
//! one-write-per-second pacing behind the previous invocation's, so back-to-back invocations would
//! time the pacing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::payloads;
use crate::stats::{cpu_time, ms, quantile};
use crate::work::github_double::GithubDouble;

/// How long one invocation may take, cold start included.
const WAIT: Duration = Duration::from_secs(30);
/// Warm-up invocations before the warm samples.
const WARM_UP: usize = 5;

/// One invocation's answer, with when it was handed out and when it came back.
struct Answer {
    handed: Instant,
    answered: Instant,
    body: String,
}

struct Waiter {
    handed: Option<Instant>,
    tx: oneshot::Sender<Answer>,
}

#[derive(Clone)]
struct Api {
    events: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value)>>>,
    waiters: Arc<Mutex<HashMap<String, Waiter>>>,
}

/// A Runtime API on an ephemeral loopback port.
struct Runtime {
    addr: String,
    send: mpsc::UnboundedSender<(String, Value)>,
    waiters: Arc<Mutex<HashMap<String, Waiter>>>,
    next_id: u64,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Runtime {
    async fn start() -> anyhow::Result<Runtime> {
        let (send, recv) = mpsc::unbounded_channel();
        let api = Api { events: Arc::new(tokio::sync::Mutex::new(recv)), waiters: Arc::default() };
        let waiters = Arc::clone(&api.waiters);
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(respond))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(respond))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(api);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("while binding the Runtime API")?;
        let addr = listener.local_addr()?.to_string();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Runtime { addr, send, waiters, next_id: 0, server })
    }

    /// Queues `event` for the next `next` call; the receiver gets its answer.
    fn submit(&mut self, event: Value) -> anyhow::Result<oneshot::Receiver<Answer>> {
        self.next_id += 1;
        let id = format!("bench-{:08}", self.next_id);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.insert(id.clone(), Waiter { handed: None, tx });
        self.send.send((id, event)).map_err(|_| anyhow::anyhow!("the Runtime API stopped"))?;
        Ok(rx)
    }
}

async fn next(State(api): State<Api>) -> Response {
    let Some((id, event)) = api.events.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    if let Ok(mut w) = api.waiters.lock() {
        if let Some(waiter) = w.get_mut(&id) {
            waiter.handed = Some(Instant::now());
        }
    }
    let deadline = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default() + WAIT;
    let mut headers = HeaderMap::new();
    let mut put = |k: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            headers.insert(k, v);
        }
    };
    put("lambda-runtime-aws-request-id", id);
    put("lambda-runtime-deadline-ms", deadline.as_millis().to_string());
    put("lambda-runtime-invoked-function-arn", "arn:aws:lambda:us-east-1:123456789012:function:github-webhook".into());
    put("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".into());
    (headers, event.to_string()).into_response()
}

async fn respond(State(api): State<Api>, UrlPath(id): UrlPath<String>, body: Bytes) -> StatusCode {
    let answered = Instant::now();
    let waiter = api.waiters.lock().ok().and_then(|mut w| w.remove(&id));
    if let Some(w) = waiter {
        let body = String::from_utf8_lossy(&body).into_owned();
        let _ = w.tx.send(Answer { handed: w.handed.unwrap_or(answered), answered, body });
    }
    StatusCode::ACCEPTED
}

async fn init_error(body: Bytes) -> StatusCode {
    eprintln!("lambda: init error reported: {}", String::from_utf8_lossy(&body));
    StatusCode::ACCEPTED
}

/// A signed function-URL event for an owner's `@agent` comment `comment_id` on its own issue `n`.
fn event(n: u64, comment_id: u64) -> anyhow::Result<Value> {
    let body = serde_json::to_vec(&payloads::comment("@agent please fix the flaky test", "OWNER", n, comment_id)?)?;
    let signature = payloads::sign(&body)?;
    Ok(json!({
        "version": "2.0",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "x-github-event": "issue_comment",
            "x-github-delivery": format!("lambda-bench-{n}"),
            "x-hub-signature-256": signature,
            "user-agent": "GitHub-Hookshot/bench"
        },
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefgh",
            "domainName": "abcdefgh.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefgh",
            "requestId": format!("req-{n}"),
            "time": "21/Nov/2026:10:00:00 +0000",
            "timeEpoch": 1_795_000_000_000_i64,
            "http": { "method": "POST", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "192.30.252.1", "userAgent": "GitHub-Hookshot/bench" }
        },
        "body": String::from_utf8(body)?,
        "isBase64Encoded": false
    }))
}

/// What to start, and where the AWS doubles are.
pub struct Target {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Its configuration beyond the Lambda and AWS variables every target gets: the webhook
    /// secret (or its ARN), and the acknowledgement's credentials.
    pub env: Vec<(String, String)>,
}

impl Target {
    /// The bare configuration: the webhook secret in the environment, no acknowledgement.
    pub fn bare(name: &'static str, program: PathBuf, args: Vec<String>) -> Target {
        let env = vec![("BECKON_GITHUB_WEBHOOK_SECRET".to_owned(), payloads::SECRET.to_owned())];
        Target { name, program, args, env }
    }
}

/// The GitHub App the deployed configuration acknowledges as: its id, and the ARNs of the secrets
/// (on moto) holding the webhook secret and the App's private key.
pub struct Deployed {
    pub app_id: String,
    pub webhook_secret_arn: String,
    pub app_key_arn: String,
}

/// Where one configuration records: moto's endpoint, and its own table and queue.
pub struct Aws {
    pub endpoint: String,
    pub table: String,
    pub queue_url: String,
}

impl Aws {
    /// One [`Aws`] per configuration, from parallel lists of tables and queue URLs.
    pub fn each<const N: usize>(endpoint: &str, tables: &[String], queue_urls: &[String]) -> anyhow::Result<[Aws; N]> {
        anyhow::ensure!(tables.len() == N && queue_urls.len() == N, "expected {N} tables and {N} queue URLs");
        Ok(std::array::from_fn(|i| Aws {
            endpoint: endpoint.to_owned(),
            table: tables[i].clone(),
            queue_url: queue_urls[i].clone(),
        }))
    }
}

fn spawn(target: &Target, runtime: &Runtime, aws: &Aws) -> anyhow::Result<tokio::process::Child> {
    tokio::process::Command::new(&target.program)
        .args(&target.args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .env_clear()
        .envs([
            ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
            ("AWS_LAMBDA_RUNTIME_API", runtime.addr.as_str()),
            ("AWS_LAMBDA_FUNCTION_NAME", "github-webhook"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
            ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/github-webhook"),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "bench"),
            ("AWS_LAMBDA_LOG_LEVEL", "warn"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_ENDPOINT_URL", aws.endpoint.as_str()),
            ("BECKON_BACKEND", "aws"),
            ("BECKON_TABLE_NAME", aws.table.as_str()),
            ("BECKON_QUEUE_URL", aws.queue_url.as_str()),
        ])
        .envs(target.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("while starting {}", target.program.display()))
}

async fn answer(rx: oneshot::Receiver<Answer>, what: &str) -> anyhow::Result<Answer> {
    let a = tokio::time::timeout(WAIT, rx)
        .await
        .with_context(|| format!("{what}: no answer within {WAIT:?}"))?
        .with_context(|| format!("{what}: the Runtime API dropped the invocation"))?;
    anyhow::ensure!(a.body.contains("enqueued"), "{what}: expected an enqueued outcome, got {}", a.body);
    Ok(a)
}

/// Cold start `i` of `target`: a fresh Runtime API with `event` queued, then a fresh process; the
/// time from just before its spawn to its answer. The process is killed after it answers.
async fn cold_start(target: &Target, aws: &Aws, event: Value, i: usize) -> anyhow::Result<Duration> {
    let mut runtime = Runtime::start().await?;
    let rx = runtime.submit(event)?;
    let started = Instant::now();
    let mut child = spawn(target, &runtime, aws)?;
    let a = answer(rx, &format!("{} cold start {i}", target.name)).await?;
    let _ = child.kill().await;
    Ok(a.answered.saturating_duration_since(started))
}

/// Figures for one implementation.
pub struct Cost {
    pub name: &'static str,
    pub cold: Vec<Duration>,
    pub warm: Vec<Duration>,
    /// The warm process's own CPU (user + system) per warm invocation: the handler's cost apart
    /// from waiting on moto.
    pub warm_cpu: Duration,
}

/// `cold` fresh processes to their first answer, then `warm` invocations in one process.
pub async fn measure(target: &Target, aws: &Aws, cold: usize, warm: usize, first_n: u64) -> anyhow::Result<Cost> {
    let mut n = first_n;
    let mut cold_samples = Vec::new();
    for i in 0..cold {
        n += 1;
        cold_samples.push(cold_start(target, aws, event(n, n)?, i).await?);
    }
    let mut runtime = Runtime::start().await?;
    let mut child = spawn(target, &runtime, aws)?;
    let pid = child.id().context("the warm process has no pid")?;
    let mut warm_samples = Vec::new();
    let mut cpu_before = Duration::ZERO;
    for i in 0..WARM_UP + warm {
        if i == WARM_UP {
            cpu_before = cpu_time(pid)?;
        }
        n += 1;
        let rx = runtime.submit(event(n, n)?)?;
        let a = answer(rx, &format!("{} warm invocation {i}", target.name)).await?;
        if i >= WARM_UP {
            warm_samples.push(a.answered.saturating_duration_since(a.handed));
        }
    }
    let warm_cpu = cpu_time(pid)?.saturating_sub(cpu_before) / u32::try_from(warm.max(1)).unwrap_or(1);
    let _ = child.kill().await;
    Ok(Cost { name: target.name, cold: cold_samples, warm: warm_samples, warm_cpu })
}

/// The deployed configuration's cold starts (see the module doc): `cold` fresh processes of
/// `function`, each answering one comment that exists on a fresh GitHub double; the time to the
/// first answer, and how many of the comments got their 👀 before it.
pub async fn cold_as_deployed(
    function: &Path,
    aws: &Aws,
    deployed: &Deployed,
    cold: usize,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let double = GithubDouble::start(None).await;
    let target = Target {
        name: "Rust (github-webhook), as deployed",
        program: function.to_owned(),
        args: Vec::new(),
        env: vec![
            ("BECKON_GITHUB_WEBHOOK_SECRET_ARN".to_owned(), deployed.webhook_secret_arn.clone()),
            ("BECKON_GITHUB_APP_ID".to_owned(), deployed.app_id.clone()),
            ("BECKON_GITHUB_APP_PRIVATE_KEY_ARN".to_owned(), deployed.app_key_arn.clone()),
            ("BECKON_GITHUB_API_URL".to_owned(), double.base.clone()),
        ],
    };
    let mut samples = Vec::new();
    for i in 0..cold {
        let n = 3_000_000 + i as u64;
        let comment_id = double.add_comment(n, "@agent please fix the flaky test", "octocat");
        samples.push(cold_start(&target, aws, event(n, comment_id)?, i).await?);
    }
    // Inline: a reaction the function made is on the double before its answer was sent.
    let reacted = double.reactions().iter().filter(|(_, content)| content == "eyes").count();
    Ok((samples, reacted))
}

/// The row for [`cold_as_deployed`].
pub fn deployed_row(cold: &[Duration], reacted: usize) -> String {
    format!(
        "| Lambda cold start, Rust (github-webhook) as deployed: webhook secret and App key from Secrets Manager, 👀 inline (JWT, installation token, reaction at the GitHub double) | p50 {} / p90 {} / max {} (n={}; {reacted} of {} reacted) |",
        ms(quantile(cold, 0.5)),
        ms(quantile(cold, 0.9)),
        ms(quantile(cold, 1.0)),
        cold.len(),
        cold.len()
    )
}

/// The table rows: size, both implementations, and the cold-start ratio.
pub fn rows(binary: &Path, rust: &Cost, node: &Cost) -> anyhow::Result<Vec<String>> {
    let size = std::fs::metadata(binary).with_context(|| format!("while reading {}", binary.display()))?.len();
    let mut out = vec![format!(
        "| Lambda github-webhook binary (profile `release-lambda`, stripped, x86_64-unknown-linux-gnu; the deployed build is arm64) | {:.1} MiB ({size} B) (target < 10 MB) |",
        size as f64 / 1048576.0
    )];
    for c in [rust, node] {
        out.push(format!(
            "| Lambda cold start, {}: process start → first invocation answered (Runtime API served by the bench; DynamoDB + SQS on moto) | p50 {} / p90 {} / max {} (n={}) |",
            c.name,
            ms(quantile(&c.cold, 0.5)),
            ms(quantile(&c.cold, 0.9)),
            ms(quantile(&c.cold, 1.0)),
            c.cold.len()
        ));
        out.push(format!(
            "| Lambda warm handler time, {}: event handed out → response received, one process | p50 {} / p99 {} (n={}); the process's own CPU {:.2} ms per invocation (the rest is waiting on moto) |",
            c.name,
            ms(quantile(&c.warm, 0.5)),
            ms(quantile(&c.warm, 0.99)),
            c.warm.len(),
            c.warm_cpu.as_secs_f64() * 1e3
        ));
    }
    let ratio = |q: f64| {
        let r = quantile(&rust.cold, q).as_secs_f64();
        if r > 0.0 {
            format!("{:.1}×", quantile(&node.cold, q).as_secs_f64() / r)
        } else {
            "n/a".to_owned()
        }
    };
    out.push(format!(
        "| Lambda cold start, Node.js / Rust | {} at p50, {} at p90 (target: Rust < 50 ms) |",
        ratio(0.5),
        ratio(0.9)
    ));
    Ok(out)
}
