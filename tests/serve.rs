//! End to end through `beckon serve`: signed webhooks (real GitHub example payloads from
//! `@octokit/webhooks-examples`, Linear payloads from the documented shapes) go into the real
//! binary over HTTP; what it decided is read back with `beckon tasks list --json` and
//! `beckon deliveries list --json`, the way an operator would.

// A test crate: helpers panic on unexpected shapes, which fails the test with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{client, fixture, github, linear, now_ms, Beckon};

fn with_body(mut payload: Value, body: &str) -> Value {
    payload["comment"]["body"] = json!(body);
    payload
}

fn reasons(b: &Beckon) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> = b
        .deliveries()
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_owned(), d["reason"].as_str().unwrap().to_owned()))
        .collect();
    r.sort();
    r
}

fn comment_ids(task: &Value) -> Vec<String> {
    task["triggers"].as_array().unwrap().iter().map(|t| t["comment_id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn real_github_examples_create_exactly_the_tasks_the_rules_say() {
    let b = Beckon::start(&[]);
    let c = client();
    let issue = fixture("github/issue_comment.created.json");
    let review = fixture("github/pull_request_review_comment.created.json");
    // The derived PR-conversation example reuses issue #1's number and comment id; put it on the
    // pull request the review-comment example belongs to, as a distinct comment.
    let mut pr = fixture("github/issue_comment.created.pull_request.derived.json");
    pr["issue"]["number"] = review["pull_request"]["number"].clone();
    pr["comment"]["id"] = json!(492_700_401);
    assert!(issue["issue"].get("pull_request").is_none() && pr["issue"].get("pull_request").is_some());

    let mut sends = vec![
        ("d-issue", "issue_comment", with_body(issue.clone(), "@agent the toast is missing, please fix")),
        ("d-pr", "issue_comment", with_body(pr.clone(), "Could you rebase this? @agent")),
        ("d-review", "pull_request_review_comment", with_body(review.clone(), "@agent apply this suggestion")),
        ("d-plain", "issue_comment", with_body(issue.clone(), "I think @agents are overrated")),
        ("d-code", "issue_comment", with_body(issue.clone(), "Run `@agent fix` to summon it:\n\n```\n@agent fix\n```")),
        ("d-quote", "issue_comment", with_body(issue.clone(), "> @agent please fix\n\nThat's what they said.")),
        ("d-email", "issue_comment", with_body(issue.clone(), "mail me at dev@agent.example")),
        ("d-ping", "ping", fixture("github/ping.json")),
    ];
    let mut bot = with_body(issue.clone(), "@agent please fix");
    bot["comment"]["user"]["type"] = json!("Bot");
    bot["comment"]["user"]["login"] = json!("renovate[bot]");
    sends.push(("d-bot", "issue_comment", bot));
    let mut stranger = with_body(issue.clone(), "@agent please fix this too");
    stranger["issue"]["number"] = json!(4242);
    stranger["comment"]["id"] = json!(99_000_001);
    stranger["comment"]["author_association"] = json!("CONTRIBUTOR");
    sends.push(("d-stranger", "issue_comment", stranger));

    for (delivery, event, payload) in &sends {
        let r = github(&c, &b.base, event, delivery, payload).await;
        assert_eq!(r.status, 200, "{delivery}: {:?}", r.body);
    }

    assert_eq!(
        reasons(&b),
        vec![
            ("github:d-bot".to_owned(), "ignored:bot".to_owned()),
            ("github:d-code".to_owned(), "ignored:no_mention".to_owned()),
            ("github:d-email".to_owned(), "ignored:no_mention".to_owned()),
            ("github:d-issue".to_owned(), "enqueued".to_owned()),
            ("github:d-ping".to_owned(), "ignored:unrouted".to_owned()),
            ("github:d-plain".to_owned(), "ignored:no_mention".to_owned()),
            ("github:d-pr".to_owned(), "enqueued".to_owned()),
            ("github:d-quote".to_owned(), "ignored:no_mention".to_owned()),
            ("github:d-review".to_owned(), "coalesced".to_owned()),
            ("github:d-stranger".to_owned(), "deferred".to_owned()),
        ]
    );

    let repo = issue["repository"]["full_name"].as_str().unwrap();
    let mut tasks: Vec<(String, String, Vec<String>, String)> = b
        .tasks()
        .iter()
        .map(|t| {
            (
                t["thread_key"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
                comment_ids(t),
                t["permission"]["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    tasks.sort();
    let id = |v: &Value| v["comment"]["id"].to_string();
    let mut expected = vec![
        (
            format!("github:{repo}#{}:agent", issue["issue"]["number"]),
            "queued".to_owned(),
            vec![id(&issue)],
            "trusted".to_owned(),
        ),
        (
            format!("github:{repo}#{}:agent", pr["issue"]["number"]),
            "queued".to_owned(),
            vec![id(&pr), id(&review)],
            "trusted".to_owned(),
        ),
        (format!("github:{repo}#4242:agent"), "queued".to_owned(), vec!["99000001".to_owned()], "deferred".to_owned()),
    ];
    expected.sort();
    assert_eq!(tasks, expected);
}

#[tokio::test]
async fn the_same_delivery_twenty_times_creates_one_task() {
    let b = Beckon::start(&[]);
    let c = client();
    let payload = with_body(fixture("github/issue_comment.created.json"), "@agent please fix");
    let mut outcomes = Vec::new();
    for _ in 0..20 {
        let r = github(&c, &b.base, "issue_comment", "same-guid", &payload).await;
        assert_eq!(r.status, 200);
        outcomes.push(r.body["outcome"].as_str().unwrap().to_owned());
    }
    assert_eq!(outcomes[0], "enqueued");
    assert!(outcomes[1..].iter().all(|o| o == "duplicate"), "{outcomes:?}");
    assert_eq!(b.tasks().len(), 1);
    assert_eq!(b.deliveries().len(), 1);
}

#[tokio::test]
async fn bad_requests_get_the_right_status_change_nothing_and_say_why_in_the_log() {
    let b = Beckon::start(&[("BECKON_MAX_BODY_BYTES", "65536")]);
    let c = client();
    let url = format!("{}/webhooks/github", b.base);
    let good = serde_json::to_vec(&with_body(fixture("github/issue_comment.created.json"), "@agent fix")).unwrap();
    let sig = support::github_signature(support::GITHUB_SECRET, &good);
    let base_headers = |sig: &str, ct: &str| {
        vec![
            ("content-type", ct.to_owned()),
            ("x-github-event", "issue_comment".to_owned()),
            ("x-github-delivery", format!("bad-{}", sig.len())),
            ("x-hub-signature-256", sig.to_owned()),
        ]
    };
    let wrong = support::github_signature("not-the-secret", &good);
    type Headers = Vec<(&'static str, String)>;
    let cases: Vec<(&str, Headers, Vec<u8>, u16, &str)> = vec![
        ("wrong signature", base_headers(&wrong, "application/json"), good.clone(), 401, "unauthorized"),
        (
            "missing signature",
            base_headers(&sig, "application/json").into_iter().filter(|(k, _)| *k != "x-hub-signature-256").collect(),
            good.clone(),
            401,
            "unauthorized",
        ),
        ("signature of another body", base_headers(&sig, "application/json"), b"{}".to_vec(), 401, "unauthorized"),
        ("text/plain", base_headers(&sig, "text/plain"), good.clone(), 415, "unsupported_media_type"),
        (
            "malformed json",
            base_headers(&support::github_signature(support::GITHUB_SECRET, b"{\"action\":"), "application/json"),
            b"{\"action\":".to_vec(),
            400,
            "malformed",
        ),
        (
            "missing event header",
            base_headers(&sig, "application/json").into_iter().filter(|(k, _)| *k != "x-github-event").collect(),
            good.clone(),
            400,
            "missing_header",
        ),
        ("too large", base_headers(&sig, "application/json"), vec![b' '; 70_000], 413, "too_large"),
    ];
    for (name, headers, body, status, code) in cases {
        let r = support::post(&c, &url, &headers, body).await;
        assert_eq!((r.status, r.body["outcome"].as_str().unwrap_or("")), (status, code), "{name}");
    }
    assert_eq!(b.deliveries(), Vec::<Value>::new());
    assert_eq!(b.tasks(), Vec::<Value>::new());

    let logs = b.logs();
    let rejected: Vec<Value> = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "delivery rejected")
        .collect();
    assert_eq!(rejected.len(), 7, "one structured line per refusal");
    assert!(rejected.iter().all(|v| v["level"] == "WARN" && v["reason"].is_string() && v["status"].is_number()));
    let all = logs.join("\n");
    assert!(!all.contains(support::GITHUB_SECRET) && !all.contains(support::LINEAR_SECRET), "a secret leaked");
    assert!(!all.contains("the toast") && !all.contains("@agent fix"), "a body leaked into the logs");
}

#[tokio::test]
async fn form_encoded_deliveries_are_verified_over_the_raw_bytes() {
    let b = Beckon::start(&[]);
    let json = serde_json::to_string(&with_body(fixture("github/issue_comment.created.json"), "@agent fix")).unwrap();
    let body: String = url_encode_form("payload", &json);
    let headers = vec![
        ("content-type", "application/x-www-form-urlencoded".to_owned()),
        ("x-github-event", "issue_comment".to_owned()),
        ("x-github-delivery", "form-1".to_owned()),
        ("x-hub-signature-256", support::github_signature(support::GITHUB_SECRET, body.as_bytes())),
    ];
    let r = support::post(&client(), &format!("{}/webhooks/github", b.base), &headers, body.into_bytes()).await;
    assert_eq!((r.status, r.body["outcome"].as_str().unwrap()), (200, "enqueued"));
    assert_eq!(b.tasks().len(), 1);
}

fn url_encode_form(key: &str, value: &str) -> String {
    let mut out = format!("{key}=");
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(byte as char),
            b' ' => out.push('+'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[tokio::test]
async fn linear_mentions_enqueue_and_stale_timestamps_are_refused() {
    let b = Beckon::start(&[]);
    let c = client();
    let mut fresh = fixture("linear/Comment.create.json");
    fresh["webhookTimestamp"] = json!(now_ms());
    fresh["data"]["body"] = json!("https://linear.app/acme/profiles/agent can you take this one?");
    let r = linear(&c, &b.base, "lin-1", &fresh).await;
    assert_eq!((r.status, r.body["outcome"].as_str().unwrap()), (200, "enqueued"));

    let mut stale = fresh.clone();
    stale["webhookTimestamp"] = json!(now_ms() - 5 * 60 * 1000);
    stale["data"]["id"] = json!("0f0f0f0f-0000-4000-8000-000000000001");
    let r = linear(&c, &b.base, "lin-2", &stale).await;
    assert_eq!((r.status, r.body["outcome"].as_str().unwrap()), (401, "unauthorized"));

    let tasks = b.tasks();
    assert_eq!(tasks.len(), 1);
    let org = fresh["organizationId"].as_str().unwrap();
    let issue = fresh["data"]["issueId"].as_str().unwrap();
    assert_eq!(tasks[0]["thread_key"], json!(format!("linear:{org}/{issue}:agent")));
    assert_eq!(b.deliveries().len(), 1);
}

#[tokio::test]
async fn stop_cancels_the_queued_task_of_the_thread() {
    let b = Beckon::start(&[]);
    let c = client();
    let issue = fixture("github/issue_comment.created.json");
    let r = github(&c, &b.base, "issue_comment", "s-1", &with_body(issue.clone(), "@agent please fix")).await;
    assert_eq!(r.body["outcome"], "enqueued");
    let mut stop = with_body(issue, "@agent stop");
    stop["comment"]["id"] = json!(1);
    let r = github(&c, &b.base, "issue_comment", "s-2", &stop).await;
    assert_eq!(r.body["outcome"], "cancelled");
    let tasks = b.tasks();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["state"], "cancelled");
}

#[tokio::test]
async fn an_endpoint_without_a_secret_is_off_and_start_up_says_so() {
    let b = Beckon::start_with(&[("BECKON_GITHUB_WEBHOOK_SECRET", support::GITHUB_SECRET)]);
    let mut payload = fixture("linear/Comment.create.json");
    payload["webhookTimestamp"] = json!(now_ms());
    let r = linear(&client(), &b.base, "lin-off", &payload).await;
    assert_eq!((r.status, r.body["outcome"].as_str().unwrap()), (404, "disabled"));
    let said = b.logs().iter().any(|l| l.contains("webhook endpoint disabled") && l.contains("linear"));
    assert!(said, "start-up must say the Linear endpoint is off");
}

#[tokio::test]
async fn healthz_answers_and_sigterm_stops_cleanly() {
    let b = Beckon::start(&[]);
    let resp = client().get(format!("{}/healthz", b.base)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let status = b.stop();
    assert!(status.success(), "exit status {status}");
}
