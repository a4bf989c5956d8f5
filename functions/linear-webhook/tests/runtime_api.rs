//! Drives the real `linear-webhook` binary through the test Lambda Runtime API, with the table and
//! queue on the moto emulator, the signing secret read from Secrets Manager (on moto) by ARN at
//! cold start, and the Linear double receiving the first `thought` of an agent session.
//! Needs moto (`scripts/test`).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

#[path = "../../../core/tests/support/linear_double.rs"]
mod linear_double;
#[path = "../../../core/tests/support/moto.rs"]
mod moto;
#[path = "../../support/runtime_api.rs"]
mod runtime_api;

use std::process::Stdio;
use std::sync::Arc;

use beckon_core::aws::DynamoLedger;
use beckon_core::clock::SystemClock;
use beckon_core::ingest::ack::FIRST_THOUGHT;
use beckon_core::ledger::{Ledger, TaskFilter};
use hmac::{Hmac, Mac};
use linear_double::LinearDouble;
use serde_json::{json, Value};
use sha2::Sha256;

use runtime_api::Runtime;

const SECRET: &str = "lin-signing-secret-from-secrets-manager";
const TOKEN: &str = "lin_oauth_test_token";

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A function-URL event for a Linear delivery signed with `secret`.
fn event(delivery: &str, body: &[u8], secret: &str) -> Value {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    json!({
        "version": "2.0",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json; charset=utf-8",
            "linear-delivery": delivery,
            "linear-event": "AgentSessionEvent",
            "linear-signature": hex::encode(mac.finalize().into_bytes()),
            "user-agent": "Linear-Webhook"
        },
        "requestContext": {
            "accountId": "anonymous", "apiId": "abcdefgh", "domainName": "abcdefgh.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefgh", "requestId": uuid::Uuid::new_v4().to_string(),
            "time": "21/Nov/2026:10:00:00 +0000", "timeEpoch": 1_795_000_000_000_i64,
            "http": { "method": "POST", "path": "/", "protocol": "HTTP/1.1", "sourceIp": "35.231.147.226", "userAgent": "Linear-Webhook" }
        },
        "body": String::from_utf8(body.to_vec()).unwrap(),
        "isBase64Encoded": false
    })
}

fn outcome(response: &Value) -> (i64, Value) {
    let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    (response["statusCode"].as_i64().unwrap(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs moto: run scripts/test"]
async fn agent_sessions_are_recorded_and_get_their_first_thought_with_the_secret_read_by_arn() {
    let config = moto::sdk_config(&moto::endpoint());
    let aws = moto::fresh(&config, 3).await;
    let secret = aws_sdk_secretsmanager::Client::new(&config)
        .create_secret()
        .name(moto::unique("beckon-linear-webhook-secret"))
        .secret_string(SECRET)
        .send()
        .await
        .unwrap();
    let arn = secret.arn.unwrap();
    let linear = LinearDouble::start(&format!("Bearer {TOKEN}")).await;
    let runtime = Runtime::start().await;
    let mut function = tokio::process::Command::new(env!("CARGO_BIN_EXE_linear-webhook"))
        .env_clear()
        .envs([
            ("AWS_LAMBDA_RUNTIME_API", runtime.addr.as_str()),
            ("AWS_LAMBDA_FUNCTION_NAME", "linear-webhook"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
            ("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/linear-webhook"),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "test"),
            ("AWS_LAMBDA_LOG_LEVEL", "warn"),
            ("AWS_REGION", moto::REGION),
            ("AWS_ACCESS_KEY_ID", "test"),
            ("AWS_SECRET_ACCESS_KEY", "test"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_ENDPOINT_URL", &moto::endpoint()),
            ("BECKON_BACKEND", "aws"),
            ("BECKON_TABLE_NAME", aws.table_name.as_str()),
            ("BECKON_QUEUE_URL", aws.queue_url.as_str()),
            ("BECKON_LINEAR_WEBHOOK_SECRET_ARN", arn.as_str()),
            ("BECKON_LINEAR_OAUTH_TOKEN", TOKEN),
            ("BECKON_LINEAR_API_URL", linear.url.as_str()),
        ])
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn linear-webhook");

    let mut created: Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/linear/AgentSessionEvent.created.json")).unwrap();
    created["webhookTimestamp"] = json!(now_ms());
    let body = serde_json::to_vec(&created).unwrap();
    let response = runtime.invoke(event("lin-d1", &body, SECRET)).await.expect("a response, not an error");
    let (status, reply) = outcome(&response);
    assert_eq!((status, reply["outcome"].as_str()), (200, Some("enqueued")), "{reply}");

    // The first thought reached the session, inside the invocation.
    let session = created["agentSession"]["id"].as_str().unwrap();
    let activities = linear.activities();
    assert_eq!(activities.len(), 1, "{activities:#?}");
    assert_eq!(activities[0]["agentSessionId"], session);
    assert_eq!(activities[0]["content"], json!({"type": "thought", "body": FIRST_THOUGHT}));

    // The task is in DynamoDB; the same delivery again is a duplicate; a replay outside the
    // window and a wrong signature are refused and record nothing.
    let ledger = DynamoLedger::new(&config, aws.table_name.clone(), Arc::new(SystemClock));
    assert_eq!(ledger.tasks(&TaskFilter::default()).await.unwrap().len(), 1);
    let again = runtime.invoke(event("lin-d1", &body, SECRET)).await.unwrap();
    assert_eq!(outcome(&again).1["outcome"], "duplicate");
    let mut stale = created.clone();
    stale["webhookTimestamp"] = json!(now_ms() - 5 * 60 * 1000);
    let stale = serde_json::to_vec(&stale).unwrap();
    assert_eq!(outcome(&runtime.invoke(event("lin-d2", &stale, SECRET)).await.unwrap()).0, 401);
    assert_eq!(outcome(&runtime.invoke(event("lin-d3", &body, "wrong-secret")).await.unwrap()).0, 401);
    assert_eq!(ledger.deliveries(10).await.unwrap().len(), 1);
    assert_eq!(linear.activities().len(), 1, "no acknowledgement for refused or duplicate deliveries");
    function.kill().await.unwrap();
}
