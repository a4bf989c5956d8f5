//! Drives the real `github-webhook` binary through a minimal Lambda Runtime API served here
//! (`/2018-06-01/runtime/invocation/next`, `…/{id}/response`, `…/{id}/error`, `…/init/error`), with
//! the table and queue on the moto emulator and the GitHub double for the 👀 acknowledgement:
//! signed function-URL events (JSON and base64 bodies) in, HTTP responses and ledger effects out,
//! and a duplicate-delivery storm across three function processes. Needs moto (`scripts/test`).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

#[path = "../../../core/tests/support/github_double.rs"]
mod github_double;
#[path = "../../../core/tests/support/moto.rs"]
mod moto;
#[path = "../../support/runtime_api.rs"]
mod runtime_api;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use beckon_core::aws::DynamoLedger;
use beckon_core::clock::SystemClock;
use beckon_core::ledger::{Ledger, TaskFilter};
use beckon_core::task::TaskId;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use runtime_api::Runtime;

const SECRET: &str = "gh-secret";

/// Starts one function process against `runtime`, the table/queue and the GitHub double.
fn spawn_function(runtime: &Runtime, table: &str, queue_url: &str, github_api: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_github-webhook"))
        .env_clear()
        .envs([
            ("AWS_LAMBDA_RUNTIME_API", runtime.addr.as_str()),
            ("AWS_LAMBDA_FUNCTION_NAME", "github-webhook"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
            ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/github-webhook"),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "test"),
            ("AWS_LAMBDA_LOG_LEVEL", "warn"),
            ("AWS_REGION", moto::REGION),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_ENDPOINT_URL", &moto::endpoint()),
            ("BECKON_BACKEND", "aws"),
            ("BECKON_TABLE_NAME", table),
            ("BECKON_QUEUE_URL", queue_url),
            ("BECKON_GITHUB_WEBHOOK_SECRET", SECRET),
            ("BECKON_GITHUB_TOKEN", "ghp-test-token"),
            ("BECKON_GITHUB_API_URL", github_api),
        ])
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn github-webhook")
}

fn payload(comment_id: u64) -> Vec<u8> {
    let mut p: Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/github/issue_comment.created.json")).unwrap();
    p["comment"]["id"] = json!(comment_id);
    p["comment"]["body"] = json!("@agent please fix the flaky test");
    serde_json::to_vec(&p).unwrap()
}

/// A function-URL event for `body`, signed with `secret`, the body base64-encoded when asked.
fn event(delivery: &str, body: &[u8], secret: &str, base64: bool) -> Value {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let body = if base64 {
        base64::engine::general_purpose::STANDARD.encode(body)
    } else {
        String::from_utf8(body.to_vec()).unwrap()
    };
    json!({
        "version": "2.0",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "x-github-event": "issue_comment",
            "x-github-delivery": delivery,
            "x-hub-signature-256": signature,
            "user-agent": "GitHub-Hookshot/test"
        },
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefgh",
            "domainName": "abcdefgh.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefgh",
            "requestId": uuid::Uuid::new_v4().to_string(),
            "time": "21/Nov/2026:10:00:00 +0000",
            "timeEpoch": 1_795_000_000_000_i64,
            "http": { "method": "POST", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "192.30.252.1", "userAgent": "GitHub-Hookshot/test" }
        },
        "body": body,
        "isBase64Encoded": base64
    })
}

fn outcome(response: &Value) -> (i64, Value) {
    let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    (response["statusCode"].as_i64().unwrap(), body)
}

async fn queue_depth(config: &aws_config::SdkConfig, url: &str) -> (u64, u64) {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let attrs = aws_sdk_sqs::Client::new(config)
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    let get = |k: A| attrs.get(&k).unwrap().parse().unwrap();
    (get(A::ApproximateNumberOfMessages), get(A::ApproximateNumberOfMessagesNotVisible))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs moto: run scripts/test"]
async fn function_url_events_become_tasks_and_acknowledgements() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let github = github_double::GithubDouble::start(Some("ghp-test-token")).await;
    let runtime = Runtime::start().await;
    let started = Instant::now();
    let _function = spawn_function(&runtime, &made.table_name, &made.queue_url, &github.base);
    let (c1, c2) =
        (github.add_comment(1, "@agent please fix", "octocat"), github.add_comment(1, "@agent also", "octocat"));

    let first = runtime.invoke(event("d-1", &payload(c1), SECRET, false)).await.expect("a response, not an error");
    eprintln!("time from process start to first event handled: {:?}", started.elapsed());
    let (status, body) = outcome(&first);
    assert_eq!((status, body["outcome"].as_str()), (200, Some("enqueued")), "{body}");
    let task_id = TaskId(body["task_id"].as_str().unwrap().to_owned());

    // A base64 body (as function URLs deliver binary-ish content types) is verified over its bytes.
    let second = runtime.invoke(event("d-2", &payload(c2), SECRET, true)).await.unwrap();
    let (status, body) = outcome(&second);
    assert_eq!(
        (status, body["outcome"].as_str(), body["task_id"].as_str()),
        (200, Some("coalesced"), Some(task_id.as_str()))
    );

    let duplicate = runtime.invoke(event("d-2", &payload(c2), SECRET, true)).await.unwrap();
    // GitHub refuses the 👀 (the comment is gone): logged, and the delivery still succeeds.
    let unacknowledged = runtime.invoke(event("d-5", &payload(999_999), SECRET, false)).await.unwrap();
    assert_eq!(outcome(&unacknowledged).1["outcome"], "coalesced");
    assert_eq!(outcome(&duplicate), (200, json!({ "outcome": "duplicate" })));
    let forged = runtime.invoke(event("d-3", &payload(103), "wrong-secret", false)).await.unwrap();
    assert_eq!(outcome(&forged), (401, json!({ "outcome": "unauthorized" })));
    let mut garbage = event("d-4", &payload(104), SECRET, true);
    garbage["body"] = json!("%%% not base64 %%%");
    assert_eq!(outcome(&runtime.invoke(garbage).await.unwrap()).0, 400);

    let ledger = DynamoLedger::new(&config, &made.table_name, Arc::new(SystemClock));
    let task = ledger.task(&task_id).await.unwrap().expect("task recorded");
    assert_eq!(task.comment_ids(), [c1.to_string(), c2.to_string(), "999999".to_owned()]);
    assert!(task.enqueued_at.is_some(), "marked enqueued after the send");
    assert_eq!(ledger.delivery("github:d-3").await.unwrap(), None, "a rejected delivery records nothing");
    assert_eq!(queue_depth(&config, &made.queue_url).await, (1, 0), "one message for the task");
    let mut reactions = github.reactions();
    reactions.sort();
    assert_eq!(reactions, [(c1, "eyes".to_owned()), (c2, "eyes".to_owned())], "👀 on both trigger comments");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs moto: run scripts/test"]
async fn duplicate_delivery_storm_makes_one_task_and_one_message() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let github = github_double::GithubDouble::start(Some("ghp-test-token")).await;
    let runtime = Arc::new(Runtime::start().await);
    let _functions: Vec<_> =
        (0..3).map(|_| spawn_function(&runtime, &made.table_name, &made.queue_url, &github.base)).collect();
    let body = payload(201);
    let mut joins = Vec::new();
    for _ in 0..200 {
        let runtime = Arc::clone(&runtime);
        let event = event("storm-1", &body, SECRET, false);
        joins.push(tokio::spawn(async move { runtime.invoke(event).await.unwrap() }));
    }
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for join in joins {
        let (status, body) = outcome(&join.await.unwrap());
        assert_eq!(status, 200, "{body}");
        *outcomes.entry(body["outcome"].as_str().unwrap().to_owned()).or_default() += 1;
    }
    assert_eq!(outcomes, HashMap::from([("enqueued".to_owned(), 1), ("duplicate".to_owned(), 199)]));
    let ledger = DynamoLedger::new(&config, &made.table_name, Arc::new(SystemClock));
    let tasks = ledger.tasks(&TaskFilter::default()).await.unwrap();
    assert_eq!(tasks.len(), 1, "exactly one task");
    assert_eq!(queue_depth(&config, &made.queue_url).await, (1, 0), "exactly one queue message");
}
