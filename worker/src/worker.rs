//! The worker (Nodes 2–13): receive a task id, claim the task, run one Codex turn, answer, finish.
//!
//! One loop per process with N slots: it long-polls the queue only when a slot is free, and each
//! received message becomes one owned task (a `JoinSet`) that:
//! 1. reads the task and claims it (a conditional `queued → dispatched` with a new lease
//!    generation); a heartbeat then renews the lease and the message's visibility together, and
//!    turns a `cancel_requested` into an interrupt;
//! 2. finishes at once what an earlier attempt left half-done: a reply already posted, or staged
//!    in the outbox but not posted (posted now; the tracker client's marker check makes that
//!    idempotent); so a crash at any point never produces a second reply;
//! 3. checks a deferred author's permission, prepares the workspace, builds the prompt and runs the
//!    turn with the task's tools, recording events as they come;
//! 4. records the outcome (posting the final message as the reply if the agent did not reply), and
//!    deletes the queue message only after the terminal state is written.
//!
//! Retries: transient failures (Codex did not start, the workspace fetch failed, the tracker was
//! down) release the task for another attempt, up to `max_attempts`; everything else fails with a
//! reason from the taxonomy and a short reply saying so (both in [`crate::report`]). Shutdown interrupts running turns and
//! hands their leases back, so a restart picks them up at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use beckon_core::clock::Clock;
use beckon_core::event::Placement;
use beckon_core::event::Subject;
use beckon_core::ledger::{Ledger, LedgerError};
use beckon_core::prompt::{self, PromptInput};
use beckon_core::queue::{Queue, Receipt, Received};
use beckon_core::sweep;
use beckon_core::task::{
    CancelReason, FailureReason, Permission, Task, TaskId, TaskOutcome, Transition, TransitionError,
};
use beckon_core::tracker::github::{GithubClient, PullHeadBranch};
use beckon_core::tracker::linear::LinearClient;
use beckon_core::tracker::{CommentRef, ThreadRef, TrackerClient};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::activities::{self, Tee};
use crate::codex::{self, CodexConfig, InterruptReason, Timeouts, TurnRequest, TurnStatus};
use crate::events::{self, RecordTarget};
use crate::execenv::{self, Checkout, ExecEnvConfig};
use crate::report::footer;
use crate::tools::{self, TaskTools};

/// How long one receive waits for a message (long polling).
pub const POLL_WAIT: Duration = Duration::from_secs(5);
/// How often the sweeper looks for tasks recorded but never enqueued.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// When a task cannot be claimed yet (its thread is busy), the message comes back after this.
pub const BUSY_RETRY: Duration = Duration::from_secs(10);
/// Backoff before a released task is tried again, per attempt.
pub const RETRY_BACKOFF: Duration = Duration::from_secs(5);
/// How often a running task checks for `cancel_requested` between lease renewals.
pub const CANCEL_POLL: Duration = Duration::from_secs(2);
/// How long shutdown waits for running tasks to hand their leases back.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// The tracker clients the worker acts through.
#[derive(Debug, Clone, Default)]
pub struct Trackers {
    /// GitHub (a personal token, or an App that mints task-scoped tokens).
    pub github: Option<Arc<GithubClient>>,
    /// Linear (concrete: agent sessions need its activity calls).
    pub linear: Option<Arc<LinearClient>>,
}

/// How the worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Tasks at once.
    pub slots: usize,
    /// Lease and visibility length.
    pub lease: Duration,
    /// Claims per task before it fails.
    pub max_attempts: u32,
    /// The agent's handle.
    pub handle: String,
    /// The native `codex` binary.
    pub codex_bin: std::path::PathBuf,
    /// Codex watchdogs.
    pub timeouts: Timeouts,
    /// Workspaces.
    pub execenv: ExecEnvConfig,
}

/// A worker over one ledger and queue.
#[derive(Debug)]
pub struct Worker {
    pub(crate) config: WorkerConfig,
    pub(crate) ledger: Arc<dyn Ledger>,
    queue: Arc<dyn Queue>,
    clock: Arc<dyn Clock>,
    trackers: Trackers,
}

/// Why a running turn was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopCause {
    /// `@agent stop`, a deleted trigger, an operator.
    Cancel(CancelReason),
    /// Another worker owns the task now.
    LostLease,
    /// This process is stopping.
    Shutdown,
}

/// What to do with the queue message once a task's attempt is over.
#[derive(Debug)]
pub(crate) enum Disposition {
    /// The task is terminal (or gone): delete the message.
    Done,
    /// Make the message visible again after this delay (a retry, or a busy thread).
    Retry(Duration),
    /// Touch nothing: the lease is someone else's.
    Leave,
}

impl Worker {
    /// A worker with its dependencies.
    pub fn new(
        config: WorkerConfig,
        ledger: Arc<dyn Ledger>,
        queue: Arc<dyn Queue>,
        clock: Arc<dyn Clock>,
        trackers: Trackers,
    ) -> Worker {
        Worker { config, ledger, queue, clock, trackers }
    }

    /// Runs until `shutdown` fires, then interrupts running turns, hands their leases back and
    /// returns once they are done (or after [`SHUTDOWN_GRACE`]).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        info!(slots = self.config.slots, "worker started");
        let slots = Arc::new(tokio::sync::Semaphore::new(self.config.slots.max(1)));
        let mut running = JoinSet::new();
        let mut sweep_timer = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = sweep_timer.tick() => self.sweep().await,
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    if let Err(e) = joined {
                        error!(error = %e, "a task runner panicked or was aborted");
                    }
                }
                permit = slots.clone().acquire_owned() => {
                    let Ok(permit) = permit else { break };
                    let received = tokio::select! {
                        r = self.queue.receive(1, POLL_WAIT, self.config.lease) => r,
                        () = shutdown.cancelled() => break,
                    };
                    match received {
                        // One message per free slot: the permit travels with it.
                        Ok(messages) => {
                            if let Some(msg) = messages.into_iter().next() {
                                let worker = Arc::clone(&self);
                                let stop = shutdown.child_token();
                                let span = tracing::info_span!("task", task_id = %msg.task_id, thread_key = %msg.group);
                                running.spawn(async move {
                                    worker.process(msg, stop).await;
                                    drop(permit);
                                }.instrument(span));
                            }
                        }
                        Err(e) => {
                            warn!(error = %e, "queue receive failed; backing off");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        }
        info!(running = running.len(), "worker stopping; handing running tasks back");
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while let Some(joined) = running.join_next().await {
                if let Err(e) = joined {
                    error!(error = %e, "a task runner panicked during shutdown");
                }
            }
        })
        .await;
        if drained.is_err() {
            warn!("shutdown grace over; aborting the remaining task runners");
            running.abort_all();
        }
        info!("worker stopped");
    }

    async fn sweep(&self) {
        match sweep::sweep(&*self.ledger, &*self.queue, self.clock.now(), sweep::STRANDED_AFTER).await {
            Ok(r) if r.found > 0 => info!(found = r.found, enqueued = r.enqueued, failed = r.failed, "swept"),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "sweep failed"),
        }
    }

    /// One message: run the task's attempt, then settle the message.
    async fn process(&self, msg: Received, shutdown: CancellationToken) {
        let disposition = self.attempt(&msg, shutdown).await;
        let settled = match &disposition {
            Disposition::Done => self.queue.delete(&msg.receipt).await,
            Disposition::Retry(delay) => self.queue.extend(&msg.receipt, *delay).await,
            Disposition::Leave => Ok(()),
        };
        if let Err(e) = settled {
            warn!(error = %e, ?disposition, "could not settle the queue message; it will come back");
        }
    }

    async fn attempt(&self, msg: &Received, shutdown: CancellationToken) -> Disposition {
        let task = match self.ledger.task(&msg.task_id).await {
            Ok(Some(task)) => task,
            Ok(None) => {
                warn!("message for an unknown task; dropping it");
                return Disposition::Done;
            }
            Err(e) => return self.transient("read task", &e),
        };
        if task.state.is_terminal() {
            info!(state = %task.state, "task already finished; dropping its message");
            return Disposition::Done;
        }
        let task = match self.ledger.transition(&task.id, &Transition::Claim { lease: self.config.lease }).await {
            Ok(task) => task,
            Err(LedgerError::Transition(e)) => {
                info!(reason = %e, "not claimable now; retrying later");
                return Disposition::Retry(BUSY_RETRY);
            }
            Err(e) => return self.transient("claim", &e),
        };
        let gen = task.lease_gen;
        info!(attempt = task.attempt, lease_gen = gen, "task claimed");

        let cause = Arc::new(Mutex::new(None::<StopCause>));
        let stop = CancellationToken::new();
        let heartbeat = self.heartbeat(task.id.clone(), gen, msg.receipt.clone(), Arc::clone(&cause), stop.clone());
        // On shutdown the turn is interrupted and the task handed back; `work` still finishes.
        let on_shutdown = {
            let (cause, stop) = (Arc::clone(&cause), stop.clone());
            async move {
                shutdown.cancelled().await;
                set_cause(&cause, StopCause::Shutdown);
                stop.cancel();
                std::future::pending::<()>().await;
            }
        };
        let work = self.run_claimed(task, Arc::clone(&cause), stop.clone());
        // Only `work` completes: the other two wait forever once their job is done.
        let disposition = tokio::select! {
            d = work => d,
            () = heartbeat => Disposition::Leave,
            () = on_shutdown => Disposition::Leave,
        };
        stop.cancel();
        disposition
    }

    /// Renews the lease and the message visibility every third of the lease, checks for a
    /// `cancel_requested` every [`CANCEL_POLL`], and turns either that or a lost lease into a stop.
    /// Never returns on its own.
    async fn heartbeat(
        &self,
        task_id: TaskId,
        lease_gen: u64,
        receipt: Receipt,
        cause: Arc<Mutex<Option<StopCause>>>,
        stop: CancellationToken,
    ) {
        let renew_every = self.config.lease / 3;
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = stop.cancelled() => return std::future::pending().await,
                () = tokio::time::sleep(CANCEL_POLL.min(renew_every)) => {}
            }
            let renew = last_renewal.elapsed() >= renew_every;
            let seen = if renew {
                let beat = Transition::Heartbeat { lease_gen, lease: self.config.lease };
                self.ledger.transition(&task_id, &beat).await
            } else {
                // A cheap read between renewals, so a stop lands within seconds.
                match self.ledger.task(&task_id).await {
                    Ok(Some(t)) if t.lease_gen == lease_gen => Ok(t),
                    Ok(Some(t)) => Err(LedgerError::Transition(TransitionError::StaleLease {
                        task: task_id.clone(),
                        held: lease_gen,
                        current: t.lease_gen,
                    })),
                    Ok(None) => Err(LedgerError::NotFound(task_id.clone())),
                    Err(e) => Err(e),
                }
            };
            match seen {
                Ok(t) => {
                    if let Some(reason) = t.cancel_requested {
                        info!(?reason, "cancel requested; interrupting the turn");
                        set_cause(&cause, StopCause::Cancel(reason));
                        stop.cancel();
                    }
                }
                Err(LedgerError::Transition(e)) => {
                    warn!(reason = %e, "lease lost; stopping");
                    set_cause(&cause, StopCause::LostLease);
                    stop.cancel();
                }
                Err(e) => warn!(error = %e, "heartbeat failed; will try again"),
            }
            if renew {
                last_renewal = tokio::time::Instant::now();
                if let Err(e) = self.queue.extend(&receipt, self.config.lease).await {
                    warn!(error = %e, "could not extend the message's visibility");
                }
            }
        }
    }

    /// Everything after the claim, with the task's tracker credential: minted for the task and
    /// revoked when the attempt ends, whatever the outcome.
    async fn run_claimed(
        &self,
        task: Task,
        cause: Arc<Mutex<Option<StopCause>>>,
        stop: CancellationToken,
    ) -> Disposition {
        let Some((tracker, scoped)) = self.tracker_for(&task).await else {
            return self
                .fail(&task, None, FailureReason::TrackerUnavailable, "no tracker credentials configured")
                .await;
        };
        let disposition = self.run_with_tracker(task, tracker, scoped.clone(), cause, stop).await;
        if let Some(scoped) = scoped {
            if let Err(e) = scoped.revoke().await {
                warn!(error = %e, "could not revoke the task's GitHub token (it expires within the hour)");
            }
        }
        disposition
    }

    async fn run_with_tracker(
        &self,
        task: Task,
        tracker: Arc<dyn TrackerClient>,
        scoped_github: Option<Arc<GithubClient>>,
        cause: Arc<Mutex<Option<StopCause>>>,
        stop: CancellationToken,
    ) -> Disposition {
        let gen = task.lease_gen;
        let tools = TaskTools::new(&task, gen, Arc::clone(&self.ledger), Arc::clone(&tracker));

        // What an earlier attempt left: a posted reply means the work is done; a staged one is
        // posted now rather than asking the agent again.
        if let Some(reply) = &task.reply {
            if reply.posted_comment_id.is_none() {
                if let Err(why) = tools.post_reply(&reply.body).await {
                    return self.reply_failed(&task, &why).await;
                }
            }
            info!("reply already recorded by an earlier attempt; finishing");
            return self.finish(&task, TaskOutcome::Completed { summary: Some("recovered from outbox".into()) }).await;
        }
        if task.attempt > self.config.max_attempts {
            return self.fail(&task, Some(&tools), FailureReason::AttemptsExhausted, "too many attempts").await;
        }
        if let Permission::Deferred { login } = &task.permission {
            match self.permitted(&task, login).await {
                Ok(true) => {}
                Ok(false) => {
                    let body = format!(
                        "Sorry @{login}, I only take requests from people with write access to this repository."
                    );
                    if let Err(why) = tools.post_reply(&body).await {
                        warn!(%why, "could not post the refusal");
                    }
                    let outcome = TaskOutcome::Failed { reason: FailureReason::PermissionDenied, detail: None };
                    return self.finish(&task, outcome).await;
                }
                Err(why) => {
                    return self.retry_or_fail(&task, FailureReason::TrackerUnavailable, &why, Some(&tools)).await
                }
            }
        }

        let checkout = match (&task.subject, scoped_github.as_deref()) {
            // The comment event does not name the PR's head branch: ask. A head elsewhere (a fork)
            // is checked out from `refs/pull/N/head` and cannot be pushed.
            (Subject::Github(s), Some(github)) if s.is_pull_request => match github.pull_request_head(s).await {
                Ok(PullHeadBranch::SameRepository(branch)) => {
                    Checkout::PullRequestHead { number: s.number, head_ref: branch }
                }
                Ok(PullHeadBranch::Elsewhere(_)) => {
                    Checkout::PullRequestHead { number: s.number, head_ref: format!("beckon/pull-{}", s.number) }
                }
                Err(e) => {
                    return self
                        .retry_or_fail(&task, FailureReason::TrackerUnavailable, &e.to_string(), Some(&tools))
                        .await;
                }
            },
            (Subject::Github(_) | Subject::Linear(_), _) => Checkout::NewBranch,
        };
        let ws = match execenv::prepare(&self.config.execenv, &task, checkout).await {
            Ok(ws) => ws,
            Err(e) if e.is_retryable() => {
                return self.retry_or_fail(&task, FailureReason::WorkspaceSetup, &e.to_string(), Some(&tools)).await;
            }
            Err(e) => return self.fail(&task, Some(&tools), FailureReason::WorkspaceSetup, &e.to_string()).await,
        };
        if let (Subject::Github(subject), Some(github)) = (&task.subject, scoped_github.as_ref()) {
            tools.set_publisher(tools::Publisher {
                github: Arc::clone(github),
                subject: subject.clone(),
                execenv: self.config.execenv.clone(),
                workspace: ws.clone(),
            });
        }
        let disposition = self.run_turn(&task, &tools, &ws, cause, stop).await;
        if let Err(e) = execenv::cleanup(&self.config.execenv, &ws).await {
            warn!(error = %e, "could not clean the workspace up; the next prepare of this task replaces it");
        }
        disposition
    }

    async fn run_turn(
        &self,
        task: &Task,
        tools: &TaskTools,
        ws: &execenv::Workspace,
        cause: Arc<Mutex<Option<StopCause>>>,
        stop: CancellationToken,
    ) -> Disposition {
        let started = Instant::now();
        let snapshot = match self.ledger.thread(&task.thread_key, None, self.clock.now()).await {
            Ok(s) => s,
            Err(e) => return self.transient("read thread", &e),
        };
        let next_seq = match self.ledger.transcript(&task.id).await {
            Ok(entries) => entries.last().map_or(1, |e| e.seq + 1),
            Err(e) => return self.transient("read transcript", &e),
        };
        let nonce = prompt::fresh_nonce();
        let p = prompt::build(&PromptInput { task, handle: &self.config.handle, branch: &ws.branch, nonce: &nonce });
        let mut config =
            CodexConfig::new(self.config.codex_bin.clone(), ws.codex_home.clone(), ws.workdir.clone(), ws.env.clone());
        config.writable_roots = ws.writable_roots.clone();
        config.timeouts = self.config.timeouts;
        let request = TurnRequest {
            resume_thread_id: snapshot.codex_thread_id.clone(),
            dynamic_tools: tools::specs(),
            prompt: p.text,
            developer_instructions: Some(p.developer_instructions),
            continuity_note: Some(prompt::CONTINUITY_NOTE.to_owned()),
        };
        let target = RecordTarget {
            task_id: task.id.clone(),
            thread_key: task.thread_key.clone(),
            attempt: task.attempt,
            lease_gen: task.lease_gen,
            next_seq,
        };
        let lost = CancellationToken::new();
        let (recorder, recording) =
            events::start(target, Arc::clone(&self.ledger), Arc::clone(&self.clock), lost.clone());
        // A Linear agent session watches the turn as activities.
        let session = match (ThreadRef::for_task(task).trigger, &self.trackers.linear) {
            (Some(CommentRef { placement: Placement::AgentSession { session_id, .. }, .. }), Some(linear)) => {
                Some(activities::start(Arc::clone(linear), session_id))
            }
            (Some(_) | None, _) => None,
        };
        let (stream, streaming) = match session {
            Some((stream, handle)) => (Some(stream), Some(handle)),
            None => (None, None),
        };
        let sink = Tee { first: recorder.clone(), second: stream };
        let turn_cancel = CancellationToken::new();
        let watcher = {
            let (turn_cancel, cause) = (turn_cancel.clone(), Arc::clone(&cause));
            tokio::spawn(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = lost.cancelled() => set_cause(&cause, StopCause::LostLease),
                }
                turn_cancel.cancel();
            })
        };
        let result = codex::run_turn(&config, request, tools, &sink, turn_cancel).await;
        watcher.abort();
        drop(sink);
        drop(recorder);
        if let Some(streaming) = streaming {
            if let Err(e) = streaming.await {
                warn!(error = %e, "the session stream ended abnormally");
            }
        }
        let usage = recording.await.unwrap_or(None);
        let stopped = cause.lock().map(|c| *c).unwrap_or(None);
        // Before anything is recorded as finished, and only while this worker still owns the task.
        if stopped != Some(StopCause::LostLease) {
            self.keep_commits(ws, tools).await;
        }
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                let why = e.to_string();
                return match stopped {
                    Some(StopCause::LostLease) => Disposition::Leave,
                    Some(StopCause::Shutdown) => self.release(task).await,
                    Some(StopCause::Cancel(reason)) => self.cancelled(task, tools, reason).await,
                    None if e.is_retryable() => {
                        self.retry_or_fail(task, FailureReason::CodexStartup, &why, Some(tools)).await
                    }
                    None => self.fail(task, Some(tools), FailureReason::CodexStartup, &why).await,
                };
            }
        };
        info!(status = ?outcome.status, elapsed_ms = outcome.elapsed.as_millis() as u64, "codex turn ended");
        match (&outcome.status, stopped) {
            (_, Some(StopCause::LostLease)) => Disposition::Leave,
            (TurnStatus::Completed, _) => {
                if tools.replied().is_none() {
                    let answer = outcome.final_message.clone().unwrap_or_else(|| "(The agent gave no answer.)".into());
                    let body = format!("{answer}{}", footer(task, started.elapsed(), usage));
                    if let Err(why) = tools.post_reply(&body).await {
                        return self.reply_failed(task, &why).await;
                    }
                }
                let summary = outcome.final_message.as_deref().map(|m| m.chars().take(200).collect());
                self.finish(task, TaskOutcome::Completed { summary }).await
            }
            (TurnStatus::Interrupted { .. }, Some(StopCause::Shutdown)) => self.release(task).await,
            (TurnStatus::Interrupted { .. }, Some(StopCause::Cancel(reason))) => {
                self.cancelled(task, tools, reason).await
            }
            (TurnStatus::Interrupted { reason }, None) => {
                let why = match reason {
                    InterruptReason::NoProgress => "Codex stopped making progress",
                    InterruptReason::Deadline => "the run took longer than its deadline",
                    InterruptReason::Codex | InterruptReason::Cancelled => "the run was interrupted",
                };
                self.fail(task, Some(tools), FailureReason::Timeout, why).await
            }
            (TurnStatus::Failed { message }, _) => {
                warn!(%message, "codex turn failed");
                self.fail(task, Some(tools), FailureReason::TurnFailed, "the model run failed").await
            }
        }
    }

    /// Publishes the branch when the run left commits the remote lacks, so work is never lost and
    /// the next comment on the thread continues from it. Failures are logged: the reply already
    /// told the person what was done.
    async fn keep_commits(&self, ws: &execenv::Workspace, tools: &TaskTools) {
        match execenv::has_unpublished_commits(&self.config.execenv, ws).await {
            Ok(false) => {}
            Ok(true) => {
                let credential = match tools.publisher() {
                    Some(p) => p.github.push_credential(&p.subject).await.ok(),
                    None => None,
                };
                match execenv::publish(&self.config.execenv, ws, credential.as_ref()).await {
                    Ok(()) => info!(branch = %ws.branch, "published the agent's commits"),
                    Err(e) => warn!(branch = %ws.branch, error = %e, "could not publish the agent's commits"),
                }
            }
            Err(e) => warn!(error = %e, "could not tell whether the branch has new commits"),
        }
    }

    /// The tracker client for `task`: on GitHub, a client scoped to the task's repository (also
    /// returned on its own, to be revoked when the attempt ends).
    async fn tracker_for(&self, task: &Task) -> Option<(Arc<dyn TrackerClient>, Option<Arc<GithubClient>>)> {
        match &task.subject {
            Subject::Github(_) => {
                let github = self.trackers.github.as_ref()?;
                match github.for_task(&task.subject).await {
                    Ok(scoped) => {
                        let scoped = Arc::new(scoped);
                        Some((Arc::clone(&scoped) as Arc<dyn TrackerClient>, Some(scoped)))
                    }
                    Err(e) => {
                        warn!(error = %e, "could not mint a task-scoped GitHub token");
                        None
                    }
                }
            }
            Subject::Linear(_) => self.trackers.linear.clone().map(|l| (l as Arc<dyn TrackerClient>, None)),
        }
    }

    /// The deferred permission check: write access (GitHub); Linear authors without a workspace
    /// account are refused.
    async fn permitted(&self, task: &Task, login: &str) -> Result<bool, String> {
        match (&task.subject, &self.trackers.github) {
            (Subject::Github(s), Some(github)) => github
                .collaborator_permission(s, login)
                .await
                .map(|p| p.allows_agent())
                .map_err(|e| format!("permission lookup failed: {e}")),
            (Subject::Github(_), None) => Err("no GitHub credentials".into()),
            (Subject::Linear(_), _) => Ok(false),
        }
    }
}

fn set_cause(cause: &Mutex<Option<StopCause>>, c: StopCause) {
    if let Ok(mut slot) = cause.lock() {
        slot.get_or_insert(c);
    }
}
