//! The ledger, or the queue, unavailable for a while under a worker built in-process
//! (`beckon::setup::build`) with the real Codex and the GitHub double. Decorators wrap the real
//! SQLite ledger and queue and fail every gated call with `Unavailable` while their switch is on:
//! switched on for a time, or tripped by a given call (the reply being staged, marked posted, the
//! task finishing, the message being deleted) and then on for a time. Ingest writes through the
//! undecorated ports, so only the worker sees the outage. Each phase ends terminal with one reply,
//! and every message the worker received is eventually deleted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use beckon_core::clock::{Clock, Millis, SystemClock};
use beckon_core::config::Settings;
use beckon_core::decision::Effect;
use beckon_core::ledger::{Applied, DeliveryRecord, Ledger, LedgerError, NewDelivery, TaskFilter, ThreadSnapshot};
use beckon_core::queue::{Queue, QueueError, QueueMessage, Receipt, Received};
use beckon_core::task::{Task, TaskId, TaskState, ThreadKey, Transition};
use beckon_core::transcript::TranscriptEntry;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use crate::faults::on_issue;
use crate::github_double::GithubDouble;
use crate::ports::{check_invariants, deliver, done, ingest, wait_tasks, with_comment};
use crate::world::{comment, model, remote, replies_of, KillOnDrop, NEEDS, TOKEN, TURN_TIMEOUT};

/// An outage switch: on for a while from now, or tripped by the first matching call.
#[derive(Debug, Default)]
pub struct Switch {
    down: AtomicBool,
    /// Bumped on every outage, so an earlier outage's timer cannot end a later one.
    epoch: AtomicU64,
    /// Calls refused so far.
    pub refused: AtomicU64,
    trip: Mutex<Option<(&'static str, Duration)>>,
}

impl Switch {
    /// Refuses every gated call for `d` from now.
    pub fn down_for(self: &Arc<Self>, d: Duration) {
        let epoch = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        self.down.store(true, Ordering::SeqCst);
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            std::thread::sleep(d);
            if me.epoch.load(Ordering::SeqCst) == epoch {
                me.down.store(false, Ordering::SeqCst);
            }
        });
    }

    /// The first call named `what` switches the outage on for `d` (and is refused).
    pub fn trip_on(&self, what: &'static str, d: Duration) {
        *self.trip.lock().unwrap() = Some((what, d));
    }

    fn tripped(&self) -> bool {
        self.trip.lock().unwrap().is_none()
    }

    /// `Err(why)` when the call named `what` must fail.
    fn gate(self: &Arc<Self>, what: &'static str) -> Result<(), String> {
        let fire = {
            let mut trip = self.trip.lock().unwrap();
            match *trip {
                Some((name, d)) if name == what => {
                    *trip = None;
                    Some(d)
                }
                _ => None,
            }
        };
        if let Some(d) = fire {
            self.down_for(d);
        }
        if self.down.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(format!("injected outage ({what})"));
        }
        Ok(())
    }
}

fn transition_name(t: &Transition) -> &'static str {
    match t {
        Transition::Claim { .. } => "claim",
        Transition::Start { .. } => "start",
        Transition::Heartbeat { .. } => "heartbeat",
        Transition::Finish { .. } => "finish",
        Transition::Release { .. } => "release",
        Transition::Enqueued => "enqueued",
        Transition::Progress { .. } => "progress",
        Transition::StageReply { .. } => "stage_reply",
        Transition::ReplyPosted { .. } => "reply_posted",
        Transition::Cancel { .. } => "cancel",
    }
}

/// The ledger port over a real ledger, failing every call while the switch is on.
#[derive(Debug)]
pub struct FlakyLedger {
    inner: Arc<dyn Ledger>,
    switch: Arc<Switch>,
}

impl FlakyLedger {
    fn gate(&self, what: &'static str) -> Result<(), LedgerError> {
        self.switch.gate(what).map_err(LedgerError::Unavailable)
    }
}

#[async_trait]
impl Ledger for FlakyLedger {
    async fn thread(&self, key: &ThreadKey, root: Option<&str>, since: Millis) -> Result<ThreadSnapshot, LedgerError> {
        self.gate("thread")?;
        self.inner.thread(key, root, since).await
    }
    async fn apply(&self, delivery: &NewDelivery, effect: &Effect) -> Result<Applied, LedgerError> {
        self.gate("apply")?;
        self.inner.apply(delivery, effect).await
    }
    async fn transition(&self, id: &TaskId, t: &Transition) -> Result<Task, LedgerError> {
        self.gate(transition_name(t))?;
        self.inner.transition(id, t).await
    }
    async fn task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError> {
        self.gate("task")?;
        self.inner.task(id).await
    }
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>, LedgerError> {
        self.gate("tasks")?;
        self.inner.tasks(filter).await
    }
    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, LedgerError> {
        self.gate("delivery")?;
        self.inner.delivery(id).await
    }
    async fn deliveries(&self, limit: usize) -> Result<Vec<DeliveryRecord>, LedgerError> {
        self.gate("deliveries")?;
        self.inner.deliveries(limit).await
    }
    async fn set_codex_thread(&self, key: &ThreadKey, codex_thread_id: &str) -> Result<(), LedgerError> {
        self.gate("set_codex_thread")?;
        self.inner.set_codex_thread(key, codex_thread_id).await
    }
    async fn append_transcript(&self, id: &TaskId, entries: &[TranscriptEntry]) -> Result<(), LedgerError> {
        self.gate("append_transcript")?;
        self.inner.append_transcript(id, entries).await
    }
    async fn transcript(&self, id: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError> {
        self.gate("transcript")?;
        self.inner.transcript(id).await
    }
    async fn stranded(&self, before: Millis, limit: usize) -> Result<Vec<Task>, LedgerError> {
        self.gate("stranded")?;
        self.inner.stranded(before, limit).await
    }
}

/// The queue port over a real queue: receive, extend and delete fail while the switch is on
/// (send, which only ingest and the sweeper use, passes). It remembers which task each receipt
/// was for, and which tasks' messages were deleted.
#[derive(Debug)]
pub struct FlakyQueue {
    inner: Arc<dyn Queue>,
    switch: Arc<Switch>,
    receipts: Mutex<HashMap<Receipt, TaskId>>,
    deleted: Mutex<HashSet<TaskId>>,
}

impl FlakyQueue {
    fn gate(&self, what: &'static str) -> Result<(), QueueError> {
        self.switch.gate(what).map_err(QueueError::Unavailable)
    }

    fn deleted(&self, id: &TaskId) -> bool {
        self.deleted.lock().unwrap().contains(id)
    }
}

#[async_trait]
impl Queue for FlakyQueue {
    async fn send(&self, msg: &QueueMessage) -> Result<(), QueueError> {
        self.inner.send(msg).await
    }
    async fn receive(&self, max: usize, wait: Duration, visibility: Duration) -> Result<Vec<Received>, QueueError> {
        self.gate("receive")?;
        let got = self.inner.receive(max, wait, visibility).await?;
        let mut receipts = self.receipts.lock().unwrap();
        for m in &got {
            receipts.insert(m.receipt.clone(), m.task_id.clone());
        }
        Ok(got)
    }
    async fn extend(&self, receipt: &Receipt, visibility: Duration) -> Result<(), QueueError> {
        self.gate("extend")?;
        self.inner.extend(receipt, visibility).await
    }
    async fn delete(&self, receipt: &Receipt) -> Result<(), QueueError> {
        self.gate("delete")?;
        self.inner.delete(receipt).await?;
        if let Some(id) = self.receipts.lock().unwrap().get(receipt) {
            self.deleted.lock().unwrap().insert(id.clone());
        }
        Ok(())
    }
}

/// An in-process worker over the decorated SQLite ledger and queue, with ingest on the real ones.
struct Rig {
    _dir: tempfile::TempDir,
    _mock: KillOnDrop,
    github: GithubDouble,
    ledger: Arc<dyn Ledger>,
    ingest: beckon_core::ingest::Ingest,
    ledger_switch: Arc<Switch>,
    queue_switch: Arc<Switch>,
    queue: Arc<FlakyQueue>,
    shutdown: CancellationToken,
    running: tokio::task::JoinHandle<()>,
}

async fn rig() -> Rig {
    let codex = std::env::var("BECKON_TEST_CODEX_BIN").expect(NEEDS);
    let dir = tempfile::tempdir().unwrap();
    let remotes = remote(dir.path());
    let (mock, codex_config) = model(dir.path());
    let github = GithubDouble::start(Some(TOKEN)).await;
    let data = dir.path().join("data");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (l, q) = beckon_core::sqlite::open(&data.join("beckon.db"), Arc::clone(&clock)).unwrap();
    let (ledger, queue): (Arc<dyn Ledger>, Arc<dyn Queue>) = (Arc::new(l), Arc::new(q));
    let (ledger_switch, queue_switch) = (Arc::new(Switch::default()), Arc::new(Switch::default()));
    let flaky_ledger = Arc::new(FlakyLedger { inner: Arc::clone(&ledger), switch: Arc::clone(&ledger_switch) });
    let flaky_queue = Arc::new(FlakyQueue {
        inner: Arc::clone(&queue),
        switch: Arc::clone(&queue_switch),
        receipts: Mutex::default(),
        deleted: Mutex::default(),
    });
    let vars: HashMap<&str, String> = HashMap::from([
        ("BECKON_DATA_DIR", data.display().to_string()),
        ("BECKON_CODEX_BIN", codex),
        ("BECKON_CODEX_CONFIG", codex_config.display().to_string()),
        ("BECKON_GIT_BASE_URL", format!("file://{}/", remotes.display())),
        ("BECKON_GITHUB_API_URL", github.base.clone()),
        ("BECKON_GITHUB_TOKEN", TOKEN.to_owned()),
        ("BECKON_LEASE_SECS", "3".to_owned()),
        ("BECKON_WORKER_SLOTS", "2".to_owned()),
    ]);
    let settings = Settings::load(|k| vars.get(k).cloned(), None).unwrap();
    let base_env: Vec<(String, String)> = std::env::vars().collect();
    let worker =
        beckon::setup::build(&settings, base_env, flaky_ledger, Arc::clone(&flaky_queue) as Arc<dyn Queue>, clock)
            .unwrap()
            .unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(Arc::new(worker).run(shutdown.clone()));
    Rig {
        ingest: ingest(Arc::clone(&ledger), queue),
        _dir: dir,
        _mock: mock,
        github,
        ledger,
        ledger_switch,
        queue_switch,
        queue: flaky_queue,
        shutdown,
        running,
    }
}

impl Rig {
    /// Delivers `@agent <body>` as comment `id` on issue `issue`.
    async fn ask(&self, body: &str, id: u64, issue: u64) {
        let code = deliver(&self.ingest, &format!("d-{id}"), &on_issue(comment(body, id), issue)).await;
        assert_eq!(code, "enqueued");
    }

    /// Waits for comment `id`'s task to end; asserts it completed with one reply and returns it.
    async fn completed(&self, id: u64, what: &str) -> Task {
        let all = wait_tasks(&*self.ledger, TURN_TIMEOUT, what, |t| done(t, id)).await;
        let t = with_comment(&all, id).unwrap().clone();
        assert_eq!(t.state, TaskState::Completed, "{what}: {t:#?}");
        assert_eq!(replies_of(&self.github, &t.id.0), 1, "{what}: {:#?}", self.github.comments());
        t
    }

    async fn running(&self, id: u64) {
        wait_tasks(&*self.ledger, TURN_TIMEOUT, "the turn", |t| {
            with_comment(t, id).is_some_and(|t| t.state == TaskState::Running)
        })
        .await;
    }

    /// Checks the invariants, waits until every task's message left the queue, stops the worker.
    async fn end(self, triggering: &[u64]) {
        let all = check_invariants(&*self.ledger, &self.github, triggering).await;
        let deadline = Instant::now() + TURN_TIMEOUT;
        while !all.iter().all(|t| self.queue.deleted(&t.id)) {
            assert!(Instant::now() < deadline, "a finished task's message was never deleted: {all:#?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.running).await.unwrap().unwrap();
    }
}

/// Waits until the switch's trip fired and its outage is over.
async fn tripped_and_over(s: &Switch, what: &str) {
    let deadline = Instant::now() + TURN_TIMEOUT;
    while !s.tripped() || s.down.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ledger unavailable (a) before the claim, (b) mid-turn for longer than the lease (heartbeats,
/// progress and transcript writes fail), (c) around the finish: from the reply being staged, from
/// it being marked posted, from the finish. Each task completes with exactly one reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn the_ledger_unavailable_for_a_while_under_the_worker_loses_nothing_and_answers_once() {
    let r = rig().await;
    let s = Arc::clone(&r.ledger_switch);
    let outage = Duration::from_secs(4);

    // (a) Before the claim: the worker cannot read the task it received.
    s.down_for(outage);
    r.ask("@agent first", 3001, 41).await;
    let t = r.completed(3001, "(a) before the claim").await;
    assert!(s.refused.load(Ordering::SeqCst) > 0, "the outage was never hit");
    assert_eq!(t.attempt, 1, "never claimed during the outage: {t:#?}");

    // (b) Mid-turn, longer than the lease.
    r.ask("@agent slow [[stall:3]]", 3002, 42).await;
    r.running(3002).await;
    s.down_for(Duration::from_secs(5));
    r.completed(3002, "(b) mid-turn").await;

    // (c) Around the finish.
    for (i, what) in ["stage_reply", "reply_posted", "finish"].into_iter().enumerate() {
        let id = 3003 + i as u64;
        s.trip_on(what, outage);
        r.ask("@agent answer me", id, 43 + i as u64).await;
        tripped_and_over(&s, what).await;
        let t = r.completed(id, what).await;
        assert_eq!(t.attempt, 2, "{what}: the attempt that hit the outage is retried: {t:#?}");
    }
    assert_eq!(
        r.github.requests_to("POST", "/issues/44/comments").len(),
        1,
        "a reply posted but not marked is found by its marker, not posted again"
    );
    r.end(&[3001, 3002, 3003, 3004, 3005]).await;
}

/// The queue unavailable (a) for receives, (b) mid-turn for longer than the visibility (extends
/// fail, so the message is received again while the turn runs), (c) from the delete of a finished
/// task's message. Each task completes once, with one reply, and its message is deleted in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn the_queue_unavailable_for_a_while_under_the_worker_loses_nothing_and_runs_nothing_twice() {
    let r = rig().await;
    let s = Arc::clone(&r.queue_switch);

    // (a) Receives fail.
    s.down_for(Duration::from_secs(4));
    r.ask("@agent first", 3101, 51).await;
    let t = r.completed(3101, "(a) receive").await;
    assert!(s.refused.load(Ordering::SeqCst) > 0, "the outage was never hit");
    assert_eq!(t.attempt, 1);

    // (b) Extends fail mid-turn, past the visibility: the message comes back while the task runs.
    r.ask("@agent slow [[stall:6]]", 3102, 52).await;
    r.running(3102).await;
    s.down_for(Duration::from_secs(5));
    let t = r.completed(3102, "(b) mid-turn").await;
    assert_eq!(t.attempt, 1, "the redelivered message must not reclaim a task whose lease holds: {t:#?}");

    // (c) The delete after the finish fails.
    s.trip_on("delete", Duration::from_secs(4));
    r.ask("@agent answer me", 3103, 53).await;
    tripped_and_over(&s, "the delete").await;
    let t = r.completed(3103, "(c) delete").await;
    assert_eq!(t.attempt, 1);
    r.end(&[3101, 3102, 3103]).await;
}
