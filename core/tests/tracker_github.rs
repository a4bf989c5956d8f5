//! The GitHub tracker client against the local REST double: auth, task tokens, pagination,
//! politeness, retries, the body cap and idempotent replies. Waits run on a paused tokio clock.
#![cfg(feature = "github")]
// Helpers outside #[test] fns panic on purpose: a failed setup is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/github_double.rs"]
mod github_double;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use beckon_core::clock::{Clock, ManualClock, Millis};
use beckon_core::event::{GithubSubject, Placement, Subject};
use beckon_core::task::TaskId;
use beckon_core::tracker::github::{GithubApp, GithubAuth, GithubClient, GithubConfig, RepoPermission};
use beckon_core::tracker::reply::{MAX_BODY_CHARS, TRUNCATION_NOTE};
use beckon_core::tracker::{CommentRef, Reaction, Reply, ReplyDelivery, ThreadRef, TrackerClient, TrackerError};
use github_double::{Failure, GithubDouble};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use pretty_assertions::assert_eq;
use secrecy::SecretString;
use serde_json::json;
use tokio::time::timeout;

const KEY_PEM: &str = include_str!("fixtures/github-app-test-key.pem");
const PUBLIC_PEM: &str = include_str!("fixtures/github-app-test-key.pub.pem");
const PAT: &str = "ghp_personal_secret_123";
/// Every test's overall deadline (paused-clock tests auto-advance, so this is virtual time there).
const TEST_TIMEOUT: Duration = Duration::from_secs(3600);

fn wall_now() -> Millis {
    Millis(i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap())
}

fn subject() -> GithubSubject {
    GithubSubject {
        owner: "octo-org".to_owned(),
        repo: "app".to_owned(),
        repository_id: 42,
        number: 7,
        is_pull_request: false,
        title: None,
        installation_id: Some(99),
    }
}

fn app_client(double: &GithubDouble, clock: Arc<dyn Clock>) -> GithubClient {
    let app = GithubApp::from_pem("12345", &SecretString::from(KEY_PEM)).unwrap();
    GithubClient::new(GithubConfig::new(&double.base), GithubAuth::App(app), clock).unwrap()
}

fn pat_client(double: &GithubDouble) -> GithubClient {
    let auth = GithubAuth::Token(SecretString::from(PAT));
    GithubClient::new(GithubConfig::new(&double.base), auth, Arc::new(ManualClock::new(wall_now()))).unwrap()
}

fn reply(seq: u32, body: &str) -> Reply {
    Reply { task_id: TaskId("t_0123".to_owned()), seq, body: body.to_owned() }
}

#[tokio::test]
async fn app_jwt_is_rs256_backdated_and_short_lived() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(None).await;
        let now = wall_now();
        let client = app_client(&double, Arc::new(ManualClock::new(now)));
        client.get_issue(&subject()).await.unwrap();

        let mint = &double.requests_to("POST", "/app/installations/99/access_tokens")[0];
        let jwt = mint.headers["authorization"].strip_prefix("Bearer ").unwrap();
        let key = DecodingKey::from_rsa_pem(PUBLIC_PEM.as_bytes()).unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_required_spec_claims(&["exp", "iat", "iss"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(jwt, &key, &validation).unwrap().claims;
        let now_s = now.0 / 1000;
        assert_eq!(claims, json!({"iat": now_s - 60, "exp": now_s + 540, "iss": "12345"}));
        assert_eq!(mint.headers["accept"], "application/vnd.github+json");
        assert_eq!(mint.headers["x-github-api-version"], "2022-11-28");
        assert!(mint.headers["user-agent"].starts_with("beckon/"));
        // The installation-wide token is unnarrowed: no body at all.
        assert_eq!(mint.body, "");
        let get = &double.requests_to("GET", "/repos/octo-org/app/issues/7")[0];
        assert_eq!(get.headers["authorization"], "Bearer ghs_minted1");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn task_token_is_narrowed_used_and_revoked() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(None).await;
        let client = app_client(&double, Arc::new(ManualClock::new(wall_now())));
        let task = client.for_task(&Subject::Github(subject())).await.unwrap();

        let minted = double.tokens();
        assert_eq!((minted.len(), minted[0].installation), (1, 99));
        assert_eq!(
            minted[0].request,
            json!({"repository_ids": [42], "permissions": {"contents": "write", "issues": "write", "pull_requests": "write"}})
        );
        task.create_issue_comment(&subject(), "hello").await.unwrap();
        let post = &double.requests_to("POST", "/issues/7/comments")[0];
        assert_eq!(post.headers["authorization"], format!("Bearer {}", minted[0].token));

        let other_repo = GithubSubject { repository_id: 43, repo: "other".to_owned(), ..subject() };
        assert!(matches!(task.get_issue(&other_repo).await, Err(TrackerError::Invalid { .. })));

        task.revoke().await.unwrap();
        let delete = &double.requests_to("DELETE", "/installation/token")[0];
        assert_eq!(delete.headers["authorization"], format!("Bearer {}", minted[0].token));
        assert!(double.tokens()[0].revoked);
        // A revoked token is refused once, without retries; revoking again is fine.
        let before = double.requests().len();
        let err = task.get_issue(&subject()).await.unwrap_err();
        assert!(matches!(err, TrackerError::Unauthorized { status: 401, .. }), "{err:?}");
        assert_eq!(double.requests().len(), before + 1);
        task.revoke().await.unwrap();
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn installation_token_is_cached_until_shortly_before_expiry() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(None).await;
        double.set_token_expires_at("2030-01-01T01:00:00Z");
        let clock = Arc::new(ManualClock::new(Millis(1_893_456_000_000))); // 2030-01-01T00:00:00Z
        let client = app_client(&double, clock.clone());
        client.get_issue(&subject()).await.unwrap();
        client.get_issue(&subject()).await.unwrap();
        assert_eq!(double.tokens().len(), 1);
        clock.advance(Duration::from_secs(54 * 60));
        client.get_issue(&subject()).await.unwrap();
        assert_eq!(double.tokens().len(), 1, "still more than the margin away");
        clock.advance(Duration::from_secs(2 * 60));
        client.get_issue(&subject()).await.unwrap();
        assert_eq!(double.tokens().len(), 2, "within 5 minutes of expiry: re-minted");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn comments_follow_link_pagination_across_three_pages() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        double.set_page_size(2);
        let ids: Vec<String> = (0..5).map(|i| double.add_comment(7, &format!("c{i}"), "alice").to_string()).collect();
        let comments = pat_client(&double).issue_comments(&subject()).await.unwrap();
        assert_eq!(comments.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids);
        assert_eq!(comments[0].author.name, "alice");
        let gets: Vec<String> = double.requests_to("GET", "comments").into_iter().map(|r| r.path).collect();
        assert_eq!(
            gets,
            [
                "/repos/octo-org/app/issues/7/comments?per_page=100",
                "/repositories/1/issues/7/comments?per_page=2&page=2",
                "/repositories/1/issues/7/comments?per_page=2&page=3",
            ]
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn retry_after_is_honoured_before_retrying() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        double.fail_next(Failure {
            method: "POST",
            path: "/issues/7/comments",
            status: 429,
            headers: vec![("retry-after", "7".to_owned())],
            message: "You have exceeded a secondary rate limit",
        });
        pat_client(&double).create_issue_comment(&subject(), "hi").await.unwrap();
        let posts = double.requests_to("POST", "/issues/7/comments");
        assert_eq!(posts.len(), 2);
        let gap = posts[1].at - posts[0].at;
        assert!(gap >= Duration::from_secs(7) && gap < Duration::from_secs(8), "{gap:?}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn primary_limit_waits_until_reset() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
        let client =
            GithubClient::new(GithubConfig::new(&double.base), GithubAuth::Token(SecretString::from(PAT)), clock)
                .unwrap();
        double.fail_next(Failure {
            method: "GET",
            path: "/issues/7",
            status: 403,
            headers: vec![("x-ratelimit-remaining", "0".to_owned()), ("x-ratelimit-reset", "1700000030".to_owned())],
            message: "API rate limit exceeded",
        });
        client.get_issue(&subject()).await.unwrap();
        let gets = double.requests_to("GET", "/issues/7");
        let gap = gets[1].at - gets[0].at;
        assert!(gap >= Duration::from_secs(30) && gap < Duration::from_secs(31), "{gap:?}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        for _ in 0..2 {
            double.fail_next(Failure {
                method: "GET",
                path: "/issues/7",
                status: 502,
                headers: vec![],
                message: "Server Error",
            });
        }
        let issue = pat_client(&double).get_issue(&subject()).await.unwrap();
        assert_eq!(issue.title, "Toast missing");
        let gets = double.requests_to("GET", "/issues/7");
        assert_eq!(gets.len(), 3);
        assert!(gets[1].at - gets[0].at >= Duration::from_secs(1));
        assert!(gets[2].at - gets[1].at >= Duration::from_secs(2));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn permanent_client_errors_are_not_retried() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        double.fail_next(Failure {
            method: "POST",
            path: "/issues/7/comments",
            status: 422,
            headers: vec![],
            message: "Validation Failed",
        });
        let err = pat_client(&double).create_issue_comment(&subject(), "x").await.unwrap_err();
        assert!(matches!(&err, TrackerError::Rejected { status: 422, message } if message == "Validation Failed"));
        assert!(!err.is_retryable());
        assert_eq!(double.requests_to("POST", "/issues/7/comments").len(), 1);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn writes_are_paced_one_second_apart() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        let client = pat_client(&double);
        let s = subject();
        let (a, b) = tokio::join!(client.create_issue_comment(&s, "one"), client.create_issue_comment(&s, "two"));
        a.unwrap();
        b.unwrap();
        let posts = double.requests_to("POST", "/issues/7/comments");
        assert!(posts[1].at - posts[0].at >= Duration::from_secs(1));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn bodies_are_capped_at_65536_characters() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        pat_client(&double).create_issue_comment(&subject(), &"ü".repeat(70_000)).await.unwrap();
        let stored = &double.comments()[0].body;
        assert_eq!(stored.chars().count(), MAX_BODY_CHARS);
        assert!(stored.ends_with(TRUNCATION_NOTE));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_existing_reaction_is_success() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        let id = double.add_comment(7, "@agent please fix", "alice");
        let review = double.add_review_comment(7, "@agent here", None);
        let client = pat_client(&double);
        let s = Subject::Github(subject());
        let comment = CommentRef { id: id.to_string(), placement: Placement::TopLevel };
        client.react(&s, &comment, Reaction::Eyes).await.unwrap();
        client.react(&s, &comment, Reaction::Eyes).await.unwrap();
        let on_review =
            CommentRef { id: review.to_string(), placement: Placement::ReviewThread { root_id: review.to_string() } };
        client.react(&s, &on_review, Reaction::Eyes).await.unwrap();
        assert_eq!(double.reactions(), [(id, "eyes".to_owned()), (review, "eyes".to_owned())]);
        assert_eq!(
            double.requests_to("POST", &format!("/issues/comments/{id}/reactions"))[0].json(),
            json!({"content": "eyes"})
        );
        assert_eq!(double.requests_to("POST", &format!("/pulls/comments/{review}/reactions")).len(), 1);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_reply_after_a_crash_is_found_not_reposted() {
    tokio::time::pause();
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        let trigger = double.add_comment(7, "@agent please fix", "alice");
        let thread = ThreadRef {
            subject: Subject::Github(subject()),
            trigger: Some(CommentRef { id: trigger.to_string(), placement: Placement::TopLevel }),
        };
        let client = pat_client(&double);
        // The post reaches GitHub, then the worker "crashes" before recording the comment id.
        let first = client.post_reply(&thread, &reply(0, "Fixed in #8")).await.unwrap();
        assert_eq!(first.delivery, ReplyDelivery::Posted);
        drop(first);
        // The retried task posts the same reply again: found by its marker, nothing sent.
        let again = client.post_reply(&thread, &reply(0, "Fixed in #8")).await.unwrap();
        assert_eq!(again.delivery, ReplyDelivery::AlreadyPosted);
        assert_eq!(double.requests_to("POST", "/issues/7/comments").len(), 1);
        let bodies: Vec<String> = double.comments().into_iter().map(|c| c.body).collect();
        assert_eq!(bodies, ["@agent please fix", "<!-- beckon:task=t_0123;seq=0 -->\nFixed in #8"]);
        assert_eq!(again.comment_id, double.comments()[1].id.to_string());
        // The next reply of the same task is a new comment.
        let next = client.post_reply(&thread, &reply(1, "Also updated the docs")).await.unwrap();
        assert_eq!(next.delivery, ReplyDelivery::Posted);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn review_thread_replies_go_to_the_root() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        let root = double.add_review_comment(7, "nit: rename", None);
        let trigger = double.add_review_comment(7, "@agent do it", Some(root));
        double.add_review_comment(7, "unrelated thread", None);
        let thread = ThreadRef {
            subject: Subject::Github(subject()),
            trigger: Some(CommentRef {
                id: trigger.to_string(),
                placement: Placement::ReviewThread { root_id: root.to_string() },
            }),
        };
        let client = pat_client(&double);
        let read = client.thread(&thread).await.unwrap();
        assert_eq!(read.iter().map(|c| c.body.as_str()).collect::<Vec<_>>(), ["nit: rename", "@agent do it"]);
        client.post_reply(&thread, &reply(0, "Renamed")).await.unwrap();
        assert_eq!(double.requests_to("POST", &format!("/pulls/7/comments/{root}/replies")).len(), 1);
        assert_eq!(client.thread(&thread).await.unwrap().len(), 3);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn collaborator_permission_is_read_once_and_cached() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some(PAT)).await;
        double.set_role("carol", "write", Some("maintain"));
        double.set_role("dave", "read", Some("triage"));
        let client = pat_client(&double);
        assert_eq!(client.collaborator_permission(&subject(), "carol").await.unwrap(), RepoPermission::Maintain);
        assert_eq!(client.collaborator_permission(&subject(), "Carol").await.unwrap(), RepoPermission::Maintain);
        assert!(!client.collaborator_permission(&subject(), "dave").await.unwrap().allows_agent());
        assert_eq!(double.requests_to("GET", "/collaborators/").len(), 2);
        assert!(client.collaborator_permission(&subject(), "../admin").await.is_err());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn secrets_stay_out_of_debug_and_errors() {
    timeout(TEST_TIMEOUT, async {
        let double = GithubDouble::start(Some("a-different-token")).await;
        let client = pat_client(&double);
        let err = client.get_issue(&subject()).await.unwrap_err();
        assert!(matches!(err, TrackerError::Unauthorized { .. }));
        let app = app_client(&double, Arc::new(ManualClock::new(wall_now())));
        let task = app.for_task(&Subject::Github(subject())).await.unwrap();
        let minted = double.tokens()[0].token.clone();
        let shown = format!("{client:?} {err} {err:?} {app:?} {task:?}");
        for secret in [PAT, minted.as_str(), "PRIVATE KEY"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
    })
    .await
    .unwrap();
}
