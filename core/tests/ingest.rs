//! The ingest stage over the real SQLite ledger and queue, with the failure paths a real server
//! cannot easily produce: the queue refusing a send after the ledger write, the ledger being
//! unavailable, and Linear's replay window judged against an injected clock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use beckon_core::clock::{Clock, ManualClock, Millis};
use beckon_core::config::{Settings, MAX_TRIGGER_BODY_CHARS};
use beckon_core::decision::{Effect, IgnoreReason, ReasonCode};
use beckon_core::event::Tracker;
use beckon_core::ingest::{Headers, Ingest, IngestConfig, Outcome, WebhookRequest, LINEAR_REPLAY_WINDOW};
use beckon_core::ledger::{Applied, DeliveryRecord, Ledger, LedgerError, NewDelivery, TaskFilter, ThreadSnapshot};
use beckon_core::queue::{Queue, QueueError, QueueMessage, Receipt, Received};
use beckon_core::sqlite;
use beckon_core::sweep;
use beckon_core::task::{Task, TaskId, TaskState, ThreadKey, Transition};
use beckon_core::transcript::TranscriptEntry;
use hmac::{Hmac, Mac};
use pretty_assertions::assert_eq;
use secrecy::SecretString;
use serde_json::{json, Value};
use sha2::Sha256;

const GH_SECRET: &str = "gh-secret";
const LIN_SECRET: &str = "lin-secret";
const NOW: Millis = Millis(1_773_883_617_700);

fn config() -> IngestConfig {
    let settings = Settings::load(|_| None, None).unwrap();
    assert_eq!(settings.rules.max_body_chars, MAX_TRIGGER_BODY_CHARS);
    IngestConfig {
        github_secrets: vec![SecretString::from(GH_SECRET)],
        linear_secrets: vec![SecretString::from(LIN_SECRET)],
        rules: settings.rules,
        max_body_bytes: 64 * 1024,
        linear_replay_window: LINEAR_REPLAY_WINDOW,
    }
}

fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn github_request(delivery: &str, body: &str) -> WebhookRequest {
    let payload: Value =
        serde_json::from_str(include_str!("../../tests/fixtures/github/issue_comment.created.json")).expect("fixture");
    let mut payload = payload;
    payload["comment"]["body"] = json!(body);
    // One comment per delivery id (a redelivery keeps both): the ledger keeps one task per comment.
    let comment_id = delivery.bytes().fold(1_000_u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    payload["comment"]["id"] = json!(comment_id);
    let bytes = serde_json::to_vec(&payload).unwrap();
    let headers = Headers::new([
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("X-GitHub-Event".to_owned(), "issue_comment".to_owned()),
        ("X-GitHub-Delivery".to_owned(), delivery.to_owned()),
        ("X-Hub-Signature-256".to_owned(), format!("sha256={}", hmac_hex(GH_SECRET, &bytes))),
    ]);
    WebhookRequest { tracker: Tracker::Github, headers, body: bytes.into() }
}

fn linear_request(delivery: &str, sent_at: Millis) -> WebhookRequest {
    let mut payload: Value =
        serde_json::from_str(include_str!("../../tests/fixtures/linear/Comment.create.json")).expect("fixture");
    payload["webhookTimestamp"] = json!(sent_at.0);
    payload["data"]["body"] = json!("@agent please look");
    let bytes = serde_json::to_vec(&payload).unwrap();
    let headers = Headers::new([
        ("content-type".to_owned(), "application/json; charset=utf-8".to_owned()),
        ("linear-delivery".to_owned(), delivery.to_owned()),
        ("linear-signature".to_owned(), hmac_hex(LIN_SECRET, &bytes)),
    ]);
    WebhookRequest { tracker: Tracker::Linear, headers, body: bytes.into() }
}

/// A queue whose sends fail, as SQS does when throttled or unreachable.
#[derive(Debug, Default)]
struct RefusingQueue;

#[async_trait]
impl Queue for RefusingQueue {
    async fn send(&self, _msg: &QueueMessage) -> Result<(), QueueError> {
        Err(QueueError::Unavailable("injected: send refused".into()))
    }
    async fn receive(&self, _: usize, _: Duration, _: Duration) -> Result<Vec<Received>, QueueError> {
        Err(QueueError::Unavailable("injected".into()))
    }
    async fn extend(&self, _: &Receipt, _: Duration) -> Result<(), QueueError> {
        Err(QueueError::Unavailable("injected".into()))
    }
    async fn delete(&self, _: &Receipt) -> Result<(), QueueError> {
        Err(QueueError::Unavailable("injected".into()))
    }
}

/// A ledger that is down.
#[derive(Debug, Default)]
struct DownLedger;

fn down() -> LedgerError {
    LedgerError::Unavailable("injected: throttled".into())
}

#[async_trait]
impl Ledger for DownLedger {
    async fn thread(&self, _: &ThreadKey, _: Option<&str>, _: Millis) -> Result<ThreadSnapshot, LedgerError> {
        Err(down())
    }
    async fn apply(&self, _: &NewDelivery, _: &Effect) -> Result<Applied, LedgerError> {
        Err(down())
    }
    async fn transition(&self, _: &TaskId, _: &Transition) -> Result<Task, LedgerError> {
        Err(down())
    }
    async fn task(&self, _: &TaskId) -> Result<Option<Task>, LedgerError> {
        Err(down())
    }
    async fn tasks(&self, _: &TaskFilter) -> Result<Vec<Task>, LedgerError> {
        Err(down())
    }
    async fn delivery(&self, _: &str) -> Result<Option<DeliveryRecord>, LedgerError> {
        Err(down())
    }
    async fn deliveries(&self, _: usize) -> Result<Vec<DeliveryRecord>, LedgerError> {
        Err(down())
    }
    async fn set_codex_thread(&self, _: &ThreadKey, _: &str) -> Result<(), LedgerError> {
        Err(down())
    }
    async fn append_transcript(&self, _: &TaskId, _: &[TranscriptEntry]) -> Result<(), LedgerError> {
        Err(down())
    }
    async fn transcript(&self, _: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError> {
        Err(down())
    }
    async fn stranded(&self, _: Millis, _: usize) -> Result<Vec<Task>, LedgerError> {
        Err(down())
    }
}

struct Fixture {
    ingest: Ingest,
    ledger: Arc<dyn Ledger>,
    queue: Arc<dyn Queue>,
    clock: Arc<ManualClock>,
    _dir: tempfile::TempDir,
}

fn fixture(refuse_sends: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (ledger, queue) = sqlite::open(&dir.path().join(sqlite::DB_FILE_NAME), clock.clone()).unwrap();
    let ledger: Arc<dyn Ledger> = Arc::new(ledger);
    let queue: Arc<dyn Queue> = Arc::new(queue);
    let ingest_queue: Arc<dyn Queue> = if refuse_sends { Arc::new(RefusingQueue) } else { queue.clone() };
    let ingest = Ingest::new(config(), ledger.clone(), ingest_queue, clock.clone());
    Fixture { ingest, ledger, queue, clock, _dir: dir }
}

#[tokio::test]
async fn a_trigger_is_recorded_then_enqueued_with_its_thread_as_group() {
    let f = fixture(false);
    let outcome = f.ingest.handle(github_request("d1", "@agent please fix")).await;
    let Outcome::Accepted { reason: ReasonCode::Enqueued, task_id: Some(task_id) } = &outcome else {
        panic!("unexpected {outcome:?}");
    };
    assert_eq!(outcome.status(), 200);
    let got = f.queue.receive(10, Duration::from_secs(1), Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].task_id, task_id);
    assert_eq!(got[0].group.as_str(), "github:Codertocat/Hello-World#1:agent");
    let task = f.ledger.task(task_id).await.unwrap().unwrap();
    assert_eq!((task.state, task.created_at, task.enqueued_at), (TaskState::Queued, NOW, Some(NOW)));
}

#[tokio::test]
async fn a_failed_enqueue_still_answers_200_and_leaves_the_task_queued_in_the_ledger() {
    let f = fixture(true);
    let outcome = f.ingest.handle(github_request("d1", "@agent please fix")).await;
    assert_eq!((outcome.status(), outcome.code()), (200, "enqueued".to_owned()));
    let tasks = f.ledger.tasks(&TaskFilter::default()).await.unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].state, TaskState::Queued);
    assert_eq!(tasks[0].enqueued_at, None);
    // Nothing reached the real queue.
    assert!(f.queue.receive(10, Duration::ZERO, Duration::from_secs(30)).await.unwrap().is_empty());
    // A redelivery does not create a second task.
    let again = f.ingest.handle(github_request("d1", "@agent please fix")).await;
    assert!(matches!(again, Outcome::Duplicate));
    assert_eq!(f.ledger.tasks(&TaskFilter::default()).await.unwrap().len(), 1);

    // The sweeper leaves it alone while a send could still be in flight, then re-enqueues it once.
    let early = sweep::sweep(&*f.ledger, &*f.queue, f.clock.now(), sweep::STRANDED_AFTER).await.unwrap();
    assert_eq!(early, sweep::SweepReport::default());
    f.clock.advance(sweep::STRANDED_AFTER);
    let swept = sweep::sweep(&*f.ledger, &*f.queue, f.clock.now(), sweep::STRANDED_AFTER).await.unwrap();
    assert_eq!(swept, sweep::SweepReport { found: 1, enqueued: 1, failed: 0 });
    let got = f.queue.receive(10, Duration::from_secs(1), Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.iter().map(|r| &r.task_id).collect::<Vec<_>>(), vec![&tasks[0].id]);
    let again = sweep::sweep(&*f.ledger, &*f.queue, f.clock.now(), sweep::STRANDED_AFTER).await.unwrap();
    assert_eq!(again.found, 0, "a swept task is marked enqueued");
}

#[tokio::test]
async fn a_sweep_whose_send_fails_leaves_the_task_for_the_next_sweep() {
    let f = fixture(true);
    f.ingest.handle(github_request("d1", "@agent please fix")).await;
    f.clock.advance(sweep::STRANDED_AFTER);
    let swept = sweep::sweep(&*f.ledger, &RefusingQueue, f.clock.now(), sweep::STRANDED_AFTER).await.unwrap();
    assert_eq!(swept, sweep::SweepReport { found: 1, enqueued: 0, failed: 1 });
    assert_eq!(f.ledger.stranded(f.clock.now(), 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn an_unavailable_ledger_answers_500_so_linear_retries() {
    let ingest = Ingest::new(config(), Arc::new(DownLedger), Arc::new(RefusingQueue), Arc::new(ManualClock::new(NOW)));
    let outcome = ingest.handle(linear_request("l1", NOW)).await;
    assert_eq!((outcome.status(), outcome.code()), (500, "unavailable".to_owned()));
}

#[tokio::test]
async fn linear_replay_window_is_judged_by_the_injected_clock() {
    let f = fixture(false);
    let ok = f.ingest.handle(linear_request("l1", NOW.minus(Duration::from_secs(59)))).await;
    assert_eq!(ok.code(), "enqueued");
    f.clock.advance(Duration::from_secs(120));
    let stale = f.ingest.handle(linear_request("l2", NOW)).await;
    assert_eq!((stale.status(), stale.code()), (401, "unauthorized".to_owned()));
    let future = f.ingest.handle(linear_request("l3", f.clock.now().plus(Duration::from_secs(61)))).await;
    assert_eq!(future.status(), 401);
    assert_eq!(f.ledger.deliveries(10).await.unwrap().len(), 1, "refusals record nothing");
}

#[tokio::test]
async fn the_run_budget_stops_a_loop_within_the_hour_and_reopens_after() {
    let f = fixture(false);
    let budget = config().rules.max_runs_per_window;
    let mut enqueued = 0;
    for i in 0..(budget + 5) {
        let outcome = f.ingest.handle(github_request(&format!("d{i}"), "@agent again")).await;
        match outcome.code().as_str() {
            "enqueued" => {
                enqueued += 1;
                // Finish the task so the next trigger would create a new one.
                let Outcome::Accepted { task_id: Some(id), .. } = outcome else { panic!() };
                f.ledger
                    .transition(&id, &Transition::Cancel { reason: beckon_core::task::CancelReason::Operator })
                    .await
                    .unwrap();
            }
            "ignored:run_budget" => {}
            other => panic!("unexpected {other}"),
        }
        f.clock.advance(Duration::from_secs(1));
    }
    assert_eq!(enqueued, budget);
    let last = f.ledger.deliveries(1).await.unwrap();
    assert_eq!(last[0].reason, ReasonCode::Ignored(IgnoreReason::RunBudget));
    f.clock.advance(Duration::from_secs(3600));
    assert_eq!(f.ingest.handle(github_request("later", "@agent again")).await.code(), "enqueued");
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_verification_and_records_nothing() {
    let f = fixture(false);
    let mut req = github_request("big", "@agent fix");
    req.body = vec![b' '; 64 * 1024 + 1].into();
    let outcome = f.ingest.handle(req).await;
    assert_eq!((outcome.status(), outcome.code()), (413, "too_large".to_owned()));
    assert!(f.ledger.deliveries(10).await.unwrap().is_empty());
}

/// The SQLite ledger, counting the thread snapshots read through it. It keeps the port's default
/// `decide_and_apply` (read the thread when asked, then apply), so every snapshot ingest asks for
/// passes through `thread`.
#[derive(Debug)]
struct CountingLedger {
    inner: sqlite::SqliteLedger,
    threads_read: std::sync::Mutex<Vec<ThreadKey>>,
}

#[async_trait]
impl Ledger for CountingLedger {
    async fn thread(&self, key: &ThreadKey, root: Option<&str>, since: Millis) -> Result<ThreadSnapshot, LedgerError> {
        self.threads_read.lock().unwrap().push(key.clone());
        self.inner.thread(key, root, since).await
    }
    async fn apply(&self, delivery: &NewDelivery, effect: &Effect) -> Result<Applied, LedgerError> {
        self.inner.apply(delivery, effect).await
    }
    async fn transition(&self, id: &TaskId, t: &Transition) -> Result<Task, LedgerError> {
        self.inner.transition(id, t).await
    }
    async fn task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError> {
        self.inner.task(id).await
    }
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>, LedgerError> {
        self.inner.tasks(filter).await
    }
    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, LedgerError> {
        self.inner.delivery(id).await
    }
    async fn deliveries(&self, limit: usize) -> Result<Vec<DeliveryRecord>, LedgerError> {
        self.inner.deliveries(limit).await
    }
    async fn set_codex_thread(&self, key: &ThreadKey, id: &str) -> Result<(), LedgerError> {
        self.inner.set_codex_thread(key, id).await
    }
    async fn append_transcript(&self, id: &TaskId, entries: &[TranscriptEntry]) -> Result<(), LedgerError> {
        self.inner.append_transcript(id, entries).await
    }
    async fn transcript(&self, id: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError> {
        self.inner.transcript(id).await
    }
    async fn stranded(&self, before: Millis, limit: usize) -> Result<Vec<Task>, LedgerError> {
        self.inner.stranded(before, limit).await
    }
}

/// A comment that asks for nothing is recorded, under its thread, without reading the thread
/// (on DynamoDB, one query fewer for most deliveries); a mention reads it for the run budget.
#[tokio::test]
async fn the_thread_is_read_only_for_deliveries_that_depend_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (inner, queue) = sqlite::open(&dir.path().join(sqlite::DB_FILE_NAME), clock.clone()).unwrap();
    let ledger = Arc::new(CountingLedger { inner, threads_read: std::sync::Mutex::new(Vec::new()) });
    let ingest = Ingest::new(config(), ledger.clone(), Arc::new(queue), clock);
    let thread = "github:Codertocat/Hello-World#1:agent";

    let outcome = ingest.handle(github_request("plain", "thanks, looks good")).await;
    assert_eq!(outcome.code(), "ignored:no_mention");
    assert!(ledger.threads_read.lock().unwrap().is_empty(), "no snapshot for a comment that asks for nothing");
    let record = ledger.delivery("github:plain").await.unwrap().expect("recorded");
    assert_eq!(record.thread_key.as_ref().map(ThreadKey::as_str), Some(thread));

    let outcome = ingest.handle(github_request("asks", "@agent please fix")).await;
    assert_eq!(outcome.code(), "enqueued");
    let read: Vec<String> = ledger.threads_read.lock().unwrap().iter().map(|k| k.as_str().to_owned()).collect();
    assert_eq!(read, [thread]);
}
