//! End to end with the real worker: a signed webhook into `beckon serve` → a task → a real Codex
//! turn (the pinned `codex` binary against the scripted model server) in a sandboxed worktree of a
//! local git remote → the reply on the GitHub double → the task `completed` with its transcript.
//! Also: a second comment resumes the same Codex thread; `@agent stop` interrupts a running turn;
//! a worker killed mid-turn and restarted finishes the task with exactly one reply.
//!
//! The scripted model reads markers in the last user message (`[[shell:CMD]]`,
//! `[[call:TOOL:{json}]]`, `[[stall:N]]`): the trigger comment carries them into the prompt.

// A test crate: helpers panic on unexpected shapes, which fails the test with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../core/tests/support/github_double.rs"]
mod github_double;
#[path = "../core/tests/support/linear_double.rs"]
mod linear_double;
#[path = "reliability/world.rs"]
mod world;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use github_double::GithubDouble;
use linear_double::LinearDouble;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{client, fixture, github, linear, now_ms, Beckon};
use world::{comment, finished, model, remote, world, World, NEEDS, TOKEN, TURN_TIMEOUT};

fn transcript(b: &Beckon, task_id: &str) -> Vec<Value> {
    serde_json::from_str(&b.cli(&["tasks", "transcript", task_id, "--json"])).unwrap()
}

/// Comments Beckon posted on issue #1 of the double.
fn replies(w: &World) -> Vec<String> {
    w.github.comments().into_iter().filter(|c| c.number == 1).map(|c| c.body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_mention_runs_codex_in_a_sandboxed_worktree_and_answers_once() {
    let w = world(&[]).await;
    let body = "@agent please fix the readme [[shell:echo fixed >> README.md && git commit -qam fix && cat README.md]]";
    let trigger = w.github.add_comment(1, body, "Codertocat");
    let r = github(&client(), &w.beckon.base, "issue_comment", "e2e-1", &comment(body, trigger)).await;
    assert_eq!(r.body["outcome"], "enqueued");
    // Acknowledged at the edge, right after the answer: 👀 on the trigger comment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.github.reactions().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(w.github.reactions(), vec![(trigger, "eyes".to_owned())]);
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the task to finish", finished);
    let task = &tasks[0];
    assert_eq!(task["state"], "completed", "{task:#}\nlogs:\n{}", w.beckon.logs().join("\n"));

    // One reply: the agent's final message (it ran the command, which committed inside the sandbox).
    let posted: Vec<String> = replies(&w).into_iter().filter(|b| b != body).collect();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert!(posted[0].contains("done (exit 0): Hello World") && posted[0].contains("fixed"), "{}", posted[0]);
    assert!(posted[0].contains(&format!("beckon:task={}", task["id"].as_str().unwrap())), "idempotency marker");
    assert!(task["reply"]["posted_comment_id"].is_string());
    assert!(task["usage"]["total_tokens"].as_u64().unwrap() > 0, "usage recorded: {task:#}");
    assert!(task["codex_thread_id"].is_string());

    // The transcript has the command and its output, in order.
    let entries = transcript(&w.beckon, task["id"].as_str().unwrap());
    let kinds: Vec<&str> = entries.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert!(kinds.windows(2).any(|k| k == ["tool_use", "tool_result"]), "{kinds:?}");
    assert!(entries.iter().any(|e| e["text"].as_str().unwrap().contains("fixed")), "{entries:#?}");
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    // The commit was published to the remote on the task's branch; the workspace is gone.
    let remote = w.dir.path().join("remotes/Codertocat/Hello-World.git");
    let log = Command::new("git").args(["log", "--format=%s", "beckon/issue-1"]).current_dir(&remote).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout).lines().next(),
        Some("fix"),
        "{}",
        String::from_utf8_lossy(&log.stderr)
    );
    assert!(!w.beckon.data_dir.path().join("work").join(task["id"].as_str().unwrap()).exists());
    // Nothing secret reached the logs or the agent's view.
    let logs = w.beckon.logs().join("\n");
    assert!(!logs.contains(TOKEN) && !posted[0].contains(TOKEN));
    assert!(!entries.iter().any(|e| e["text"].as_str().unwrap().contains(TOKEN)));

    // The next comment continues on that branch and opens a pull request from it.
    let open = r#"@agent open a PR please [[call:pull_request_open:{"title":"Fix the readme","body":"Adds a line."}]]"#;
    github(&client(), &w.beckon.base, "issue_comment", "e2e-2", &comment(open, 502)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the PR task", |t| t.len() == 2 && finished(t));
    assert!(tasks.iter().all(|t| t["state"] == "completed"), "{tasks:#?}");
    let pulls = w.github.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!((pulls[0].head.as_str(), pulls[0].base.as_str()), ("beckon/issue-1", "main"));
    assert_eq!(pulls[0].title, "Fix the readme");
    assert!(pulls[0].body.contains("Requested in #1"));
    let posted: Vec<String> = replies(&w).into_iter().filter(|b| b != body).collect();
    assert_eq!(posted.len(), 2, "{posted:#?}");
    assert!(posted[1].contains("Opened pull request #100"), "{}", posted[1]);
    drop(w.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn the_reply_tool_posts_under_the_trigger_and_a_second_comment_resumes_the_thread() {
    let w = world(&[]).await;
    let c = client();
    let first = r#"@agent look [[call:comment_reply:{"body":"On it: the toast is fixed."}]]"#;
    github(&c, &w.beckon.base, "issue_comment", "e2e-a", &comment(first, 601)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the first task", finished);
    assert_eq!(tasks[0]["state"], "completed");
    assert_eq!(replies(&w).len(), 1);
    assert!(replies(&w)[0].contains("On it: the toast is fixed."));

    let second = "@agent and now the tests please";
    github(&c, &w.beckon.base, "issue_comment", "e2e-b", &comment(second, 602)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the second task", |t| t.len() == 2 && finished(t));
    let threads: Vec<&str> = tasks.iter().map(|t| t["codex_thread_id"].as_str().unwrap()).collect();
    assert_eq!(threads[0], threads[1], "the second comment continues the same Codex thread");
    assert_eq!(replies(&w).len(), 2, "one reply per task");
    // A scoped tool refuses to be aimed elsewhere.
    let reply_calls = w.github.requests_to("POST", "/issues/1/comments");
    assert_eq!(reply_calls.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn stop_interrupts_a_running_turn() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    let c = client();
    github(&c, &w.beckon.base, "issue_comment", "e2e-s1", &comment("@agent think hard [[stall:60]]", 701)).await;
    w.beckon.wait_for_tasks(TURN_TIMEOUT, "the task to run", |t| t.len() == 1 && t[0]["state"] == "running");
    let r = github(&c, &w.beckon.base, "issue_comment", "e2e-s2", &comment("@agent stop", 702)).await;
    assert_eq!(r.body["outcome"], "cancelled");
    let started = Instant::now();
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the task to stop", finished);
    assert_eq!(tasks[0]["state"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(20), "stopped within a few cancel polls");
    let posted = replies(&w);
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert!(posted[0].contains("Stopped, as asked."), "{}", posted[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_worker_killed_mid_turn_is_replaced_and_the_task_answers_exactly_once() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    let c = client();
    github(&c, &w.beckon.base, "issue_comment", "e2e-k", &comment("@agent slow one [[stall:4]]", 801)).await;
    w.beckon.wait_for_tasks(TURN_TIMEOUT, "the task to run", |t| t.len() == 1 && t[0]["state"] == "running");
    let World { dir, github: gh, mock: _mock, beckon } = w;
    let beckon = beckon.crash_and_restart();
    let tasks = beckon.wait_for_tasks(TURN_TIMEOUT, "the task to finish after the restart", finished);
    assert_eq!(tasks[0]["state"], "completed", "logs:\n{}", beckon.logs().join("\n"));
    assert_eq!(tasks[0]["attempt"], 2, "the second worker reclaimed it after the lease expired");
    let posted: Vec<String> = gh.comments().into_iter().filter(|c| c.number == 1).map(|c| c.body).collect();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_deferred_author_without_write_access_is_refused_before_codex_runs() {
    let w = world(&[]).await;
    w.github.set_role("mallory", "read", Some("read"));
    let mut payload = comment("@agent run [[shell:cat /etc/passwd]]", 901);
    payload["comment"]["user"]["login"] = json!("mallory");
    payload["comment"]["author_association"] = json!("CONTRIBUTOR");
    let r = github(&client(), &w.beckon.base, "issue_comment", "e2e-p", &payload).await;
    assert_eq!(r.body["outcome"], "deferred");
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the refusal", finished);
    assert_eq!(tasks[0]["state"], "failed");
    assert_eq!(tasks[0]["outcome"]["reason"], "permission_denied");
    assert!(tasks[0]["codex_thread_id"].is_null(), "Codex never ran");
    let posted = replies(&w);
    assert_eq!(posted.len(), 1);
    assert!(posted[0].contains("Sorry @mallory"), "{}", posted[0]);
    assert_eq!(w.github.requests_to("GET", "/collaborators/mallory/permission").len(), 1);
}

const LINEAR_KEY: &str = "lin_api_test_key_7d1e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_linear_agent_session_is_answered_with_activities_and_can_be_stopped() {
    let lin = LinearDouble::start(LINEAR_KEY).await;
    let w = world(&[
        ("BECKON_LINEAR_API_URL", lin.url.as_str()),
        ("BECKON_LINEAR_API_KEY", LINEAR_KEY),
        ("BECKON_LINEAR_REPOSITORY", "Codertocat/Hello-World"),
    ])
    .await;
    let c = client();
    let mut created = fixture("linear/AgentSessionEvent.created.json");
    let issue_id = created["agentSession"]["issueId"].as_str().unwrap().to_owned();
    let root = lin.add_comment(&issue_id, "@agent please", None);
    created["agentSession"]["commentId"] = json!(root);
    created["agentSession"]["comment"]["id"] = json!(root);
    created["agentSession"]["comment"]["body"] = json!("@agent list the files [[shell:ls]]");
    created["webhookTimestamp"] = json!(now_ms());
    let r = linear(&c, &w.beckon.base, "lin-s1", &created).await;
    assert_eq!(r.body["outcome"], "enqueued", "{:?}", r.body);
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the session task", finished);
    assert_eq!(tasks[0]["state"], "completed", "{:#}\nlogs:\n{}", tasks[0], w.beckon.logs().join("\n"));

    let session = created["agentSession"]["id"].as_str().unwrap();
    let activities = lin.activities();
    assert!(activities.iter().all(|a| a["agentSessionId"] == session), "{activities:#?}");
    let types: Vec<&str> = activities.iter().map(|a| a["content"]["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"thought"), "{types:?}");
    assert!(types.contains(&"action"), "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "response").count(), 1, "one answer: {types:?}");
    let response = activities.iter().find(|a| a["content"]["type"] == "response").unwrap();
    assert!(response["content"]["body"].as_str().unwrap().contains("README.md"), "{response:#}");
    assert!(response["id"].is_string(), "a client-chosen id makes the response idempotent");
    assert!(lin.comments().iter().all(|c| c.id == root), "answers go to the session, not new comments");

    // A stop signal while the next prompt runs interrupts it.
    let mut prompted = fixture("linear/AgentSessionEvent.prompted.json");
    prompted["agentSession"]["id"] = json!(session);
    prompted["agentSession"]["commentId"] = json!(root);
    prompted["agentActivity"]["content"]["body"] = json!("and think about it [[stall:60]]");
    prompted["webhookTimestamp"] = json!(now_ms());
    linear(&c, &w.beckon.base, "lin-s2", &prompted).await;
    w.beckon.wait_for_tasks(TURN_TIMEOUT, "the prompt to run", |t| t.len() == 2 && t[0]["state"] == "running");
    let mut stop = prompted.clone();
    stop["agentActivity"]["signal"] = json!("stop");
    stop["webhookTimestamp"] = json!(now_ms());
    let r = linear(&c, &w.beckon.base, "lin-s3", &stop).await;
    assert_eq!(r.body["outcome"], "cancelled");
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the stop", finished);
    assert_eq!(tasks[0]["state"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn on_a_pull_request_the_agent_works_on_and_pushes_its_head_branch() {
    let w = world(&[]).await;
    let mut payload = fixture("github/pull_request_review_comment.created.json");
    let root = w.github.add_review_comment(2, "@agent apply it", None);
    payload["comment"]["id"] = json!(root);
    payload["comment"]["body"] =
        json!("@agent apply it [[shell:echo applied >> README.md && git commit -qam 'apply review' && git branch --show-current]]");
    let r = github(&client(), &w.beckon.base, "pull_request_review_comment", "e2e-pr", &payload).await;
    assert_eq!(r.body["outcome"], "enqueued");
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the PR task", finished);
    assert_eq!(tasks[0]["state"], "completed", "{:#}\nlogs:\n{}", tasks[0], w.beckon.logs().join("\n"));
    // The agent ran on the PR's head branch, and its commit is on that branch at the remote.
    let replies: Vec<String> =
        w.github.comments().into_iter().filter(|c| c.review && c.in_reply_to == Some(root)).map(|c| c.body).collect();
    assert_eq!(replies.len(), 1, "one reply, in the review thread: {replies:#?}");
    let reply = &replies[0];
    assert!(reply.contains("feature"), "the agent's checkout: {reply}");
    let remote = w.dir.path().join("remotes/Codertocat/Hello-World.git");
    let log = Command::new("git").args(["log", "--format=%s", "-1", "feature"]).current_dir(&remote).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "apply review");
    let head_lookups =
        w.github.requests_to("GET", "/pulls/2").into_iter().filter(|r| r.path.ends_with("/pulls/2")).count();
    assert_eq!(head_lookups, 1, "asked GitHub for the head branch");
}

/// `beckon worker` on DynamoDB + SQS (moto): the ingest function records and enqueues a signed
/// delivery on the AWS backend, the worker process claims it there, runs Codex, answers once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the moto emulator and the codex binary: run scripts/test"]
async fn beckon_worker_runs_tasks_from_dynamodb_and_sqs() {
    use beckon_core::aws::{DynamoLedger, SqsQueue};
    use beckon_core::clock::SystemClock;
    use beckon_core::config::Settings;
    use beckon_core::ingest::{Headers, Ingest, IngestConfig, WebhookRequest, LINEAR_REPLAY_WINDOW};
    use beckon_core::ledger::{Ledger, TaskFilter};
    use secrecy::SecretString;
    use std::sync::Arc;

    let endpoint = std::env::var("BECKON_TEST_AWS_ENDPOINT").expect("needs moto: run scripts/test");
    let codex = std::env::var("BECKON_TEST_CODEX_BIN").expect(NEEDS);
    let dir = tempfile::tempdir().unwrap();
    let remotes = remote(dir.path());
    let (_mock, codex_config) = model(dir.path());
    let gh = GithubDouble::start(Some(TOKEN)).await;
    let name = format!("beckon-e2e-{}", std::process::id());
    let aws_env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("PATH", &std::env::var("PATH").unwrap()),
    ];
    let bin = env!("CARGO_BIN_EXE_beckon");
    let init = Command::new(bin)
        .args(["aws", "init", "--table", &name, "--queue", &name])
        .env_clear()
        .envs(aws_env)
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let stdout = String::from_utf8_lossy(&init.stdout).to_string();
    let queue_url = stdout.lines().find_map(|l| l.strip_prefix("BECKON_QUEUE_URL=")).unwrap().to_owned();

    // Record and enqueue a signed delivery through the ingest function, on the AWS backend.
    let sdk = beckon_core::aws::config_loader()
        .endpoint_url(&endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .test_credentials()
        .load()
        .await;
    let clock = Arc::new(SystemClock);
    let ledger: Arc<dyn Ledger> = Arc::new(DynamoLedger::new(&sdk, name.clone(), clock.clone()));
    let queue = Arc::new(SqsQueue::new(&sdk, queue_url.clone()));
    let settings = Settings::load(|_| None, None).unwrap();
    let ingest = Ingest::new(
        IngestConfig {
            github_secrets: vec![SecretString::from(support::GITHUB_SECRET)],
            linear_secrets: vec![],
            rules: settings.rules,
            max_body_bytes: 1 << 20,
            linear_replay_window: LINEAR_REPLAY_WINDOW,
        },
        ledger.clone(),
        queue,
        clock,
    );
    let body = serde_json::to_vec(&comment("@agent run it [[shell:echo from-aws]]", 991)).unwrap();
    let headers = Headers::new([
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-github-event".to_owned(), "issue_comment".to_owned()),
        ("x-github-delivery".to_owned(), format!("aws-{name}")),
        ("x-hub-signature-256".to_owned(), support::github_signature(support::GITHUB_SECRET, &body)),
    ]);
    let outcome = ingest
        .handle(WebhookRequest { tracker: beckon_core::event::Tracker::Github, headers, body: body.into() })
        .await;
    assert_eq!(outcome.code(), "enqueued");

    // The worker process, on its default backend (aws).
    let data = dir.path().join("data");
    let base_url = format!("file://{}/", remotes.display());
    let mut worker = Command::new(bin)
        .arg("worker")
        .env_clear()
        .envs(aws_env)
        .envs([
            ("BECKON_TABLE_NAME", name.as_str()),
            ("BECKON_QUEUE_URL", queue_url.as_str()),
            ("BECKON_DATA_DIR", data.to_str().unwrap()),
            ("BECKON_CODEX_BIN", codex.as_str()),
            ("BECKON_CODEX_CONFIG", codex_config.to_str().unwrap()),
            ("BECKON_GIT_BASE_URL", base_url.as_str()),
            ("BECKON_GITHUB_API_URL", gh.base.as_str()),
            ("BECKON_GITHUB_TOKEN", TOKEN),
            ("BECKON_LOG_FORMAT", "json"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TURN_TIMEOUT;
    let task = loop {
        let tasks = ledger.tasks(&TaskFilter::default()).await.unwrap();
        if let Some(t) = tasks.iter().find(|t| t.state.is_terminal()) {
            break t.clone();
        }
        assert!(Instant::now() < deadline, "the worker did not finish the task: {tasks:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = Command::new("kill").args(["-TERM", &worker.id().to_string()]).status();
    let _ = worker.wait();
    assert_eq!(task.state, beckon_core::task::TaskState::Completed, "{task:#?}");
    let posted: Vec<String> = gh.comments().into_iter().filter(|c| c.number == 1).map(|c| c.body).collect();
    assert_eq!(posted.len(), 1, "{posted:#?}");
    assert!(posted[0].contains("from-aws"), "{}", posted[0]);
    assert!(!ledger.transcript(&task.id).await.unwrap().is_empty());
}
