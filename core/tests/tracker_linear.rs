//! The Linear tracker client against the local GraphQL double: auth header forms, errors inside
//! HTTP 200, RATELIMITED, threads, idempotent replies and the Agent API calls.
#![cfg(feature = "linear")]
// Helpers outside #[test] fns panic on purpose: a failed setup is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/linear_double.rs"]
mod linear_double;

use std::sync::Arc;
use std::time::Duration;

use beckon_core::clock::{ManualClock, Millis};
use beckon_core::event::{LinearSubject, Placement, Subject};
use beckon_core::task::TaskId;
use beckon_core::tracker::linear::{
    ActivityContent, AgentSessionUpdate, ExternalUrl, LinearAuth, LinearClient, LinearConfig,
};
use beckon_core::tracker::reply::linear_comment_id;
use beckon_core::tracker::{
    CommentRef, IssueState, Reaction, Reply, ReplyDelivery, ThreadRef, TrackerClient, TrackerError,
};
use linear_double::{Failure, LinearDouble, APP_USER_ID};
use pretty_assertions::assert_eq;
use secrecy::SecretString;
use serde_json::json;
use tokio::time::timeout;

const API_KEY: &str = "lin_api_secret_key_1";
const OAUTH: &str = "lin_oauth_secret_token_2";
const NOW: Millis = Millis(1_700_000_000_000);
const TEST_TIMEOUT: Duration = Duration::from_secs(3600);

fn client(double: &LinearDouble, auth: LinearAuth) -> LinearClient {
    LinearClient::new(LinearConfig::new(&double.url), auth, Arc::new(ManualClock::new(NOW))).unwrap()
}

fn key_client(double: &LinearDouble) -> LinearClient {
    client(double, LinearAuth::ApiKey(SecretString::from(API_KEY)))
}

fn subject() -> Subject {
    Subject::Linear(LinearSubject {
        organization_id: "org-1".to_owned(),
        issue_id: "issue-uuid-1".to_owned(),
        identifier: Some("ENG-1".to_owned()),
        title: None,
    })
}

fn reply(seq: u32, body: &str) -> Reply {
    Reply { task_id: TaskId("t_lin".to_owned()), seq, body: body.to_owned() }
}

#[tokio::test]
async fn api_key_is_sent_bare_and_oauth_as_bearer() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        assert_eq!(key_client(&double).viewer_id().await.unwrap(), APP_USER_ID);
        assert_eq!(double.requests()[0].headers["authorization"], API_KEY);

        let double = LinearDouble::start(&format!("Bearer {OAUTH}")).await;
        let oauth = client(&double, LinearAuth::OAuth(SecretString::from(OAUTH)));
        assert_eq!(oauth.viewer_id().await.unwrap(), APP_USER_ID);
        assert_eq!(oauth.viewer_id().await.unwrap(), APP_USER_ID);
        assert_eq!(double.requests_for("viewer").len(), 1, "the viewer id is asked once");
        assert_eq!(double.requests()[0].headers["authorization"], format!("Bearer {OAUTH}"));
        assert_eq!(double.requests()[0].headers["content-type"], "application/json");

        // The wrong form is refused as unauthorized, and neither secret shows in errors or Debug.
        let wrong = client(&double, LinearAuth::ApiKey(SecretString::from(OAUTH)));
        let err = wrong.viewer_id().await.unwrap_err();
        assert!(matches!(err, TrackerError::Unauthorized { status: 401, .. }), "{err:?}");
        let shown = format!("{err} {err:?} {wrong:?} {oauth:?}");
        assert!(!shown.contains(OAUTH) && !shown.contains(API_KEY), "{shown}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn graphql_errors_in_http_200_fail_without_retry() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        double.fail_next(Failure {
            operation: "issue(id",
            status: 200,
            headers: vec![],
            body: json!({"data": null, "errors": [{"message": "Entity not found: Issue", "path": ["issue"],
                                                  "extensions": {"code": "INVALID_INPUT"}}]}),
        });
        let err = key_client(&double).issue(&subject()).await.unwrap_err();
        let TrackerError::GraphQl { code, message } = &err else {
            panic!("expected a GraphQL error, got {err:?}");
        };
        assert_eq!((code.as_deref(), message.as_str()), (Some("INVALID_INPUT"), "Entity not found: Issue"));
        assert!(!err.is_retryable());
        assert_eq!(double.requests().len(), 1);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn ratelimited_waits_until_the_reset_then_retries() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        double.fail_next(Failure {
            operation: "issue(id",
            status: 400,
            headers: vec![("x-ratelimit-requests-reset", (NOW.0 + 5_000).to_string())],
            body: json!({"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]}),
        });
        let issue = key_client(&double).issue(&subject()).await.unwrap();
        assert_eq!(
            (issue.title.as_str(), issue.state, issue.state_label.as_str()),
            ("Toast missing", IssueState::Open, "In Progress")
        );
        let calls = double.requests_for("issue(id");
        assert_eq!(calls.len(), 2);
        let gap = calls[1].at - calls[0].at;
        assert!(gap >= Duration::from_secs(5) && gap < Duration::from_secs(6), "{gap:?}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn ratelimited_beyond_the_bound_is_returned_as_retryable() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        double.fail_next(Failure {
            operation: "viewer",
            status: 400,
            headers: vec![("x-ratelimit-requests-reset", (NOW.0 + 3_600_000).to_string())],
            body: json!({"errors": [{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}]}),
        });
        let err = key_client(&double).viewer_id().await.unwrap_err();
        assert_eq!(err.retry_after(), Some(Duration::from_secs(3600)));
        assert!(err.is_retryable());
        assert_eq!(double.requests().len(), 1);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn server_errors_are_retried() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        double.fail_next(Failure { operation: "viewer", status: 503, headers: vec![], body: json!({}) });
        assert_eq!(key_client(&double).viewer_id().await.unwrap(), APP_USER_ID);
        assert_eq!(double.requests().len(), 2);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_reply_after_a_crash_is_found_not_reposted() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        let root = double.add_comment("issue-uuid-1", "@agent please fix", None);
        let thread = ThreadRef {
            subject: subject(),
            trigger: Some(CommentRef { id: root.clone(), placement: Placement::TopLevel }),
        };
        let client = key_client(&double);
        let first = client.post_reply(&thread, &reply(0, "Fixed")).await.unwrap();
        assert_eq!(first.delivery, ReplyDelivery::Posted);
        let create = &double.requests_for("commentCreate")[0];
        assert_eq!(
            create.variables,
            json!({"input": {"issueId": "issue-uuid-1", "parentId": root, "id": linear_comment_id(&reply(0, "")),
                             "body": "<!-- beckon:task=t_lin;seq=0 -->\nFixed"}})
        );
        // "Crash" before recording; the retry finds the marker in the thread and sends nothing.
        let again = client.post_reply(&thread, &reply(0, "Fixed")).await.unwrap();
        assert_eq!(
            (again.delivery, again.comment_id.as_str()),
            (ReplyDelivery::AlreadyPosted, first.comment_id.as_str())
        );
        assert_eq!(double.requests_for("commentCreate").len(), 1);
        let read = client.thread(&thread).await.unwrap();
        assert_eq!(read.iter().map(|c| c.author.name.as_str()).collect::<Vec<_>>(), ["Alice", "Beckon"]);
        // A reply placed under a root replies to that root too.
        let nested = ThreadRef {
            subject: subject(),
            trigger: Some(CommentRef { id: read[1].id.clone(), placement: Placement::Reply { root_id: root.clone() } }),
        };
        assert_eq!(
            client.post_reply(&nested, &reply(0, "Fixed")).await.unwrap().delivery,
            ReplyDelivery::AlreadyPosted
        );
        assert_eq!(double.comments().len(), 2);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn top_level_reads_reactions_and_updates() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        let root = double.add_comment("issue-uuid-1", "first", None);
        double.add_comment("issue-uuid-1", "child", Some(&root));
        double.add_comment("issue-uuid-1", "second", None);
        let client = key_client(&double);
        let top = client.thread(&ThreadRef { subject: subject(), trigger: None }).await.unwrap();
        assert_eq!(top.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(), ["first", "second"]);
        let comment = CommentRef { id: root.clone(), placement: Placement::TopLevel };
        client.react(&subject(), &comment, Reaction::Eyes).await.unwrap();
        assert_eq!(double.reactions(), [(root.clone(), "eyes".to_owned())]);
        client.comment_update(&root, "edited").await.unwrap();
        assert_eq!(double.comments()[0].body, "edited");
        let err = client.comment_update("missing", "x").await.unwrap_err();
        assert!(matches!(err, TrackerError::GraphQl { .. }), "{err:?}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn agent_activities_and_session_updates_use_linears_shapes() {
    timeout(TEST_TIMEOUT, async {
        let double = LinearDouble::start(API_KEY).await;
        let client = key_client(&double);
        let thought = ActivityContent::Thought { body: "Reading the thread".to_owned() };
        assert_eq!(client.agent_activity_create("sess-1", &thought, true).await.unwrap(), "act-1");
        let response = ActivityContent::Response { body: "Done".to_owned() };
        client.agent_activity_create("sess-1", &response, true).await.unwrap();
        assert_eq!(
            double.activities(),
            [
                json!({"agentSessionId": "sess-1", "content": {"type": "thought", "body": "Reading the thread"}, "ephemeral": true}),
                json!({"agentSessionId": "sess-1", "content": {"type": "response", "body": "Done"}}),
            ]
        );
        let update = AgentSessionUpdate {
            external_urls: Some(vec![ExternalUrl { label: "Task".to_owned(), url: "https://beckon/t/1".to_owned() }]),
            plan: None,
        };
        client.agent_session_update("sess-1", &update).await.unwrap();
        assert_eq!(
            double.session_updates(),
            [json!({"id": "sess-1", "input": {"externalUrls": [{"label": "Task", "url": "https://beckon/t/1"}]}})]
        );
    })
    .await
    .unwrap();
}
