//! Scenarios that drive the ports directly rather than `beckon serve`: the ingest core in-process
//! (the same code the Lambda functions run) over a given ledger and queue, and the invariants
//! read through the [`Ledger`] port, so they hold for SQLite and DynamoDB alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use beckon_core::clock::SystemClock;
use beckon_core::config::Settings;
use beckon_core::decision::ReasonCode;
use beckon_core::event::Tracker;
use beckon_core::ingest::{Headers, Ingest, IngestConfig, WebhookRequest, LINEAR_REPLAY_WINDOW};
use beckon_core::ledger::{Ledger, TaskFilter};
use beckon_core::queue::Queue;
use beckon_core::task::{Task, TaskState};
use secrecy::SecretString;
use serde_json::Value;

use crate::github_double::GithubDouble;
use crate::support::{github_signature, GITHUB_SECRET};
use crate::world::replies_of;

/// The ingest core over `ledger` and `queue`, with the test webhook secret and default rules.
pub fn ingest(ledger: Arc<dyn Ledger>, queue: Arc<dyn Queue>) -> Ingest {
    let settings = Settings::load(|_| None, None).unwrap();
    Ingest::new(
        IngestConfig {
            github_secrets: vec![SecretString::from(GITHUB_SECRET)],
            linear_secrets: vec![],
            rules: settings.rules,
            max_body_bytes: 1 << 20,
            linear_replay_window: LINEAR_REPLAY_WINDOW,
        },
        ledger,
        queue,
        Arc::new(SystemClock),
    )
}

/// One signed `issue_comment` delivery through `ingest`; returns the outcome code.
pub async fn deliver(ingest: &Ingest, delivery: &str, payload: &Value) -> String {
    let body = serde_json::to_vec(payload).unwrap();
    let headers = Headers::new([
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-github-event".to_owned(), "issue_comment".to_owned()),
        ("x-github-delivery".to_owned(), delivery.to_owned()),
        ("x-hub-signature-256".to_owned(), github_signature(GITHUB_SECRET, &body)),
    ]);
    ingest.handle(WebhookRequest { tracker: Tracker::Github, headers, body: body.into() }).await.code().to_string()
}

/// Every task, through the port.
pub async fn tasks(ledger: &dyn Ledger) -> Vec<Task> {
    ledger.tasks(&TaskFilter::default()).await.unwrap()
}

/// Polls the ledger until `pred` holds over all tasks, or panics after `timeout`.
pub async fn wait_tasks(
    ledger: &dyn Ledger,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&[Task]) -> bool,
) -> Vec<Task> {
    let deadline = Instant::now() + timeout;
    loop {
        let all = tasks(ledger).await;
        if pred(&all) {
            return all;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {all:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The task holding comment `comment_id`, if any.
pub fn with_comment(tasks: &[Task], comment_id: u64) -> Option<&Task> {
    let id = comment_id.to_string();
    tasks.iter().find(|t| t.triggers.iter().any(|tr| tr.comment_id.as_deref() == Some(id.as_str())))
}

/// True when the task holding `comment_id` exists and is terminal.
pub fn done(tasks: &[Task], comment_id: u64) -> bool {
    with_comment(tasks, comment_id).is_some_and(|t| t.state.is_terminal())
}

/// The three invariants of `world::check_invariants`, read through the ledger port: every comment
/// in `triggering` is in exactly one task; every task posted at most one reply (a completed one
/// exactly one); every accepted delivery points at a task that is terminal or still queued.
pub async fn check_invariants(ledger: &dyn Ledger, github: &GithubDouble, triggering: &[u64]) -> Vec<Task> {
    let all = tasks(ledger).await;
    for id in triggering {
        let id = id.to_string();
        let owners: Vec<&str> = all
            .iter()
            .filter(|t| t.triggers.iter().any(|tr| tr.comment_id.as_deref() == Some(id.as_str())))
            .map(|t| t.id.0.as_str())
            .collect();
        assert_eq!(owners.len(), 1, "comment {id} must be in exactly one task: {owners:?}\n{all:#?}");
    }
    for t in &all {
        let n = replies_of(github, &t.id.0);
        assert!(n <= 1, "task {} replied {n} times: {:#?}", t.id, github.comments());
        if t.state == TaskState::Completed {
            assert_eq!(n, 1, "completed task {} has no reply: {t:#?}", t.id);
        }
    }
    for d in ledger.deliveries(10_000).await.unwrap() {
        if !matches!(d.reason, ReasonCode::Enqueued | ReasonCode::Coalesced | ReasonCode::Deferred) {
            continue;
        }
        let task_id = d.task_id.as_ref().unwrap_or_else(|| panic!("accepted without a task: {d:#?}"));
        let task = all.iter().find(|t| &t.id == task_id).unwrap_or_else(|| panic!("{task_id} missing: {d:#?}"));
        assert!(
            task.state.is_terminal() || task.state == TaskState::Queued,
            "delivery {d:#?} left task {task:#?} stuck"
        );
    }
    all
}
