//! Tasks: the work order, its state machine, and the thread key that groups tasks.
//!
//! A task is not the prompt: it records which thread it belongs to, which comments asked for it,
//! where its lease stands and how it ended. Every state change is a pure function here
//! ([`Task::apply`]) that backends run between a read and a conditional write on [`Task::version`],
//! so SQLite and DynamoDB share one definition of what is allowed.
//!
//! ```text
//! queued ──claim──▶ dispatched ──start──▶ running ──finish──▶ completed | failed
//!   ▲                  │  (lease expired: claimable again, attempt + 1)  │
//!   └───── release ────┴──────────────────────────────────────────────┘
//! any non-terminal ──cancel──▶ cancelled (queued/dispatched at once; running: cancel_requested,
//!                                          then the worker finishes it as cancelled)
//! ```
//!
//! Besides its state, a task carries what a retry must not redo: its **outbox** (the one reply it
//! posts: staged before the tracker call, marked posted after, so a crash between the two posts
//! exactly once), the Codex thread it ran on, its token usage, and when it reached the queue (so
//! the sweeper can find tasks recorded but never enqueued).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::event::{Placement, Subject, Tracker};

/// The durable identity of one conversation between a tracker thread and one agent:
/// `github:{owner}/{repo}#{number}:{agent}` or `linear:{workspace}/{issue-id}:{agent}`.
/// It is the SQS FIFO message group, and it maps to the Codex thread id used for `thread/resume`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ThreadKey(pub String);

impl ThreadKey {
    /// The key for `subject` and the agent `handle` (without `@`).
    pub fn new(subject: &Subject, handle: &str) -> ThreadKey {
        match subject {
            Subject::Github(s) => ThreadKey(format!("github:{}/{}#{}:{handle}", s.owner, s.repo, s.number)),
            Subject::Linear(s) => ThreadKey(format!("linear:{}/{}:{handle}", s.organization_id, s.issue_id)),
        }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ThreadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A task id: `t_` and a random UUID (opaque; also the SQS deduplication id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub String);

impl TaskId {
    /// A fresh random id.
    pub fn generate() -> TaskId {
        TaskId(format!("t_{}", uuid::Uuid::new_v4().simple()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Recorded and on the queue; later comments coalesce into it.
    Queued,
    /// Claimed by a worker holding a lease; Codex has not accepted a turn yet.
    Dispatched,
    /// Codex accepted the turn.
    Running,
    /// Finished with an answer.
    Completed,
    /// Finished without one; see the failure reason.
    Failed,
    /// Stopped by `@agent stop`, a deleted trigger, or an operator.
    Cancelled,
}

impl TaskState {
    /// Every state, for operators' filters and exhaustive tests.
    pub const ALL: [TaskState; 6] = [
        TaskState::Queued,
        TaskState::Dispatched,
        TaskState::Running,
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Cancelled,
    ];

    /// True once nothing more will happen to the task.
    pub fn is_terminal(self) -> bool {
        match self {
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled => true,
            TaskState::Queued | TaskState::Dispatched | TaskState::Running => false,
        }
    }

    /// True while a worker holds (or held) a lease on it.
    pub fn is_leased(self) -> bool {
        match self {
            TaskState::Dispatched | TaskState::Running => true,
            TaskState::Queued | TaskState::Completed | TaskState::Failed | TaskState::Cancelled => false,
        }
    }

    /// The lowercase name used in storage and output.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Dispatched => "dispatched",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Parses [`TaskState::as_str`] output.
    pub fn parse(s: &str) -> Option<TaskState> {
        TaskState::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a task was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// An `@handle` mention.
    Mention,
    /// A reply in a thread the agent takes part in.
    Reply,
    /// A top-level comment on an issue assigned or delegated to the agent.
    AssignedComment,
    /// The issue was assigned or delegated to the agent.
    Assignment,
    /// A Linear Agent API session was created or prompted.
    AgentSession,
}

/// One comment (or assignment) that asked for a task. The first trigger created the task; later
/// ones coalesced into it while it was still queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// The delivery that carried it.
    pub delivery_id: String,
    /// The comment id; `None` for an assignment.
    pub comment_id: Option<String>,
    /// Why it triggered.
    pub kind: TriggerKind,
    /// Author login or name (for the prompt and operators).
    pub author: String,
    /// The comment body verbatim (or the issue description for an assignment), capped by ingest.
    pub body: String,
    /// Where the comment sits: decides where the reply goes.
    pub placement: Placement,
    /// When ingest accepted it.
    pub at: Millis,
}

/// Whether the author's permission is settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Permission {
    /// The payload proved it (GitHub `OWNER`/`MEMBER`/`COLLABORATOR`, a Linear workspace user).
    Trusted,
    /// The worker must look up the author's repository permission before running.
    Deferred {
        /// The login to look up.
        login: String,
    },
}

/// How a task ended. Failure reasons are a taxonomy, not prose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TaskOutcome {
    /// The agent answered.
    Completed {
        /// A short summary of the answer, for operators.
        summary: Option<String>,
    },
    /// The task could not be done.
    Failed {
        /// Which kind of failure.
        reason: FailureReason,
        /// Operator-facing detail (never secrets or user text).
        detail: Option<String>,
    },
    /// The task was stopped.
    Cancelled {
        /// Who or what stopped it.
        reason: CancelReason,
    },
}

impl TaskOutcome {
    /// The terminal state this outcome leads to.
    pub fn state(&self) -> TaskState {
        match self {
            TaskOutcome::Completed { .. } => TaskState::Completed,
            TaskOutcome::Failed { .. } => TaskState::Failed,
            TaskOutcome::Cancelled { .. } => TaskState::Cancelled,
        }
    }
}

/// Why a task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The deferred permission check said no.
    PermissionDenied,
    /// The workspace (mirror, worktree, Codex home) could not be prepared.
    WorkspaceSetup,
    /// Codex did not start or finish its handshake.
    CodexStartup,
    /// Codex ran the turn and reported failure.
    TurnFailed,
    /// A watchdog fired (no progress, overall deadline).
    Timeout,
    /// The tracker API refused or was unavailable past retries.
    TrackerUnavailable,
    /// Retries were exhausted.
    AttemptsExhausted,
    /// A bug or an unexpected state; see the logs.
    Internal,
}

/// Why a task was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// `@handle stop` in the thread.
    StopCommand,
    /// Every comment that asked for it was deleted.
    TriggerDeleted,
    /// An operator cancelled it.
    Operator,
}

/// The one reply a task posts, as recorded in its outbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxReply {
    /// The reply's sequence within the task (1 for the first); part of the idempotency marker.
    pub seq: u32,
    /// The body as staged (before the tracker's size cap and marker are applied).
    pub body: String,
    /// Set once the tracker confirmed it: the comment id there.
    pub posted_comment_id: Option<String>,
}

/// Token usage, as Codex reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Input tokens (including cached).
    pub input_tokens: u64,
    /// Of which served from cache.
    pub cached_input_tokens: u64,
    /// Output tokens (including reasoning).
    pub output_tokens: u64,
    /// Input plus output.
    pub total_tokens: u64,
}

/// A work order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Its id.
    pub id: TaskId,
    /// The conversation it belongs to.
    pub thread_key: ThreadKey,
    /// Where it was asked and where replies go.
    pub subject: Subject,
    /// Where it is in its life.
    pub state: TaskState,
    /// The comments that asked for it, oldest first.
    pub triggers: Vec<Trigger>,
    /// Whether the worker must check the author's permission first.
    pub permission: Permission,
    /// How many times a worker has claimed it (1 on the first claim).
    pub attempt: u32,
    /// Bumped on every claim; a worker's writes must name the generation it claimed.
    pub lease_gen: u64,
    /// Until when the current lease holds.
    pub lease_until: Option<Millis>,
    /// Set on a running task when it must stop; the worker interrupts and finishes it.
    pub cancel_requested: Option<CancelReason>,
    /// How it ended.
    pub outcome: Option<TaskOutcome>,
    /// The task's reply: written here before any tracker call (the outbox), then marked posted.
    #[serde(default)]
    pub reply: Option<OutboxReply>,
    /// The Codex thread the task ran on (for operators; the thread record maps keys to it).
    #[serde(default)]
    pub codex_thread_id: Option<String>,
    /// Token usage of the task's Codex turn(s).
    #[serde(default)]
    pub usage: Option<TokenUsage>,
    /// When the task's message reached the queue; `None` while it is only recorded.
    #[serde(default)]
    pub enqueued_at: Option<Millis>,
    /// When it was created.
    pub created_at: Millis,
    /// When it last changed.
    pub updated_at: Millis,
    /// Optimistic-concurrency counter: bumped on every write, every write is conditional on it.
    pub version: u64,
}

/// The most triggers one queued task takes. Later requests while it still waits are refused
/// ([`Coalesce::Full`]) rather than grow one prompt, and one stored record, without bound.
pub const MAX_TRIGGERS: usize = 20;

/// The most trigger-body bytes a coalesced task holds: well under DynamoDB's 400 KB item limit
/// with the rest of the task. A first trigger is always taken (ingest caps each body).
pub const MAX_TRIGGER_BYTES: usize = 256 * 1024;

/// True when a task holding `count` triggers of `bytes` body bytes cannot take one more of
/// `incoming` bytes. The one statement of the limits; backends may check it without decoding a task.
pub fn is_full(count: usize, bytes: usize, incoming: usize) -> bool {
    count >= MAX_TRIGGERS || bytes + incoming > MAX_TRIGGER_BYTES
}

/// What [`Task::coalesce`] did with a trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coalesce {
    /// It joined the task (version bumped): write the task back.
    Joined,
    /// Its comment already asked for this task (a redelivered edit): nothing changed.
    Known,
    /// The task holds [`MAX_TRIGGERS`] triggers or [`MAX_TRIGGER_BYTES`]: nothing changed.
    Full,
}

impl Task {
    /// A new queued task for its first trigger.
    pub fn new(thread_key: ThreadKey, subject: Subject, trigger: Trigger, permission: Permission, now: Millis) -> Task {
        Task {
            id: TaskId::generate(),
            thread_key,
            subject,
            state: TaskState::Queued,
            triggers: vec![trigger],
            permission,
            attempt: 0,
            lease_gen: 0,
            lease_until: None,
            cancel_requested: None,
            outcome: None,
            reply: None,
            codex_thread_id: None,
            usage: None,
            enqueued_at: None,
            created_at: now,
            updated_at: now,
            version: 0,
        }
    }

    /// Adds `trigger` to this still-queued task at `now`, unless its comment is already there or
    /// the task is full. A deferred permission wins over a trusted one, so an untrusted comment
    /// never rides along unchecked in a trusted task (two deferred authors keep the first login).
    /// Pure: backends persist a [`Coalesce::Joined`] task with a write conditional on the old version.
    pub fn coalesce(&mut self, trigger: &Trigger, permission: &Permission, now: Millis) -> Coalesce {
        if trigger.comment_id.is_some() && self.triggers.iter().any(|t| t.comment_id == trigger.comment_id) {
            return Coalesce::Known;
        }
        if is_full(self.triggers.len(), self.trigger_bytes(), trigger.body.len()) {
            return Coalesce::Full;
        }
        self.triggers.push(trigger.clone());
        if matches!(permission, Permission::Deferred { .. }) && self.permission == Permission::Trusted {
            self.permission = permission.clone();
        }
        self.updated_at = now;
        self.version += 1;
        Coalesce::Joined
    }

    /// The bytes of all trigger bodies (what [`MAX_TRIGGER_BYTES`] bounds).
    pub fn trigger_bytes(&self) -> usize {
        self.triggers.iter().map(|t| t.body.len()).sum()
    }

    /// The tracker the task lives on.
    pub fn tracker(&self) -> Tracker {
        self.subject.tracker()
    }

    /// Trigger comment ids, oldest first.
    pub fn comment_ids(&self) -> Vec<&str> {
        self.triggers.iter().filter_map(|t| t.comment_id.as_deref()).collect()
    }

    /// True when a worker may claim it now: queued, or leased with the lease run out.
    pub fn is_claimable(&self, now: Millis) -> bool {
        match self.state {
            TaskState::Queued => true,
            TaskState::Dispatched | TaskState::Running => self.lease_until.is_none_or(|until| until <= now),
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled => false,
        }
    }

    /// Applies `t` at `now` and returns the new task (version bumped), or why it is not allowed.
    /// Pure: backends persist the result with a write conditional on the old `version`.
    ///
    /// # Errors
    /// [`TransitionError`] when the task's state or lease generation does not allow `t`.
    pub fn apply(&self, t: &Transition, now: Millis) -> Result<Task, TransitionError> {
        let mut next = self.clone();
        match t {
            Transition::Claim { lease } => {
                if !self.is_claimable(now) {
                    return Err(self.refuse("claim"));
                }
                next.state = TaskState::Dispatched;
                next.attempt += 1;
                next.lease_gen += 1;
                next.lease_until = Some(now.plus(*lease));
            }
            Transition::Start { lease_gen } => {
                self.check_lease(*lease_gen, now, "start")?;
                if self.state != TaskState::Dispatched {
                    return Err(self.refuse("start"));
                }
                next.state = TaskState::Running;
            }
            Transition::Heartbeat { lease_gen, lease } => {
                self.check_lease(*lease_gen, now, "heartbeat")?;
                next.lease_until = Some(now.plus(*lease));
            }
            Transition::Finish { lease_gen, outcome } => {
                self.check_lease(*lease_gen, now, "finish")?;
                next.state = outcome.state();
                next.outcome = Some(outcome.clone());
                next.lease_until = None;
            }
            Transition::Release { lease_gen } => {
                self.check_lease(*lease_gen, now, "release")?;
                next.state = TaskState::Queued;
                next.lease_until = None;
            }
            Transition::Enqueued => {
                if self.state.is_terminal() {
                    return Err(self.refuse("enqueued"));
                }
                next.enqueued_at = Some(self.enqueued_at.unwrap_or(now));
            }
            Transition::Progress { lease_gen, codex_thread_id, usage } => {
                self.check_lease(*lease_gen, now, "progress")?;
                if let Some(id) = codex_thread_id {
                    next.codex_thread_id = Some(id.clone());
                }
                if let Some(u) = usage {
                    next.usage = Some(*u);
                }
            }
            Transition::StageReply { lease_gen, body } => {
                self.check_lease(*lease_gen, now, "stage reply")?;
                if self.reply.is_some() {
                    return Err(TransitionError::ReplyExists { task: self.id.clone() });
                }
                next.reply = Some(OutboxReply { seq: 1, body: body.clone(), posted_comment_id: None });
            }
            Transition::ReplyPosted { lease_gen, comment_id } => {
                self.check_lease(*lease_gen, now, "mark reply posted")?;
                match &mut next.reply {
                    Some(reply) => reply.posted_comment_id = Some(comment_id.clone()),
                    None => return Err(self.refuse("mark reply posted")),
                }
            }
            Transition::Cancel { reason } => match self.state {
                TaskState::Queued | TaskState::Dispatched => {
                    next.state = TaskState::Cancelled;
                    next.outcome = Some(TaskOutcome::Cancelled { reason: *reason });
                    next.lease_until = None;
                }
                TaskState::Running => next.cancel_requested = Some(*reason),
                TaskState::Completed | TaskState::Failed | TaskState::Cancelled => {
                    return Err(self.refuse("cancel"));
                }
            },
        }
        next.updated_at = now;
        next.version += 1;
        Ok(next)
    }

    fn check_lease(&self, lease_gen: u64, now: Millis, what: &'static str) -> Result<(), TransitionError> {
        if !self.state.is_leased() {
            return Err(self.refuse(what));
        }
        if self.lease_gen != lease_gen {
            return Err(TransitionError::StaleLease {
                task: self.id.clone(),
                held: lease_gen,
                current: self.lease_gen,
            });
        }
        // An expired lease is still ours until someone else claims it (which bumps the
        // generation); refusing here would turn a slow heartbeat into a lost result.
        let _ = now;
        Ok(())
    }

    fn refuse(&self, what: &'static str) -> TransitionError {
        TransitionError::NotAllowed { task: self.id.clone(), transition: what, state: self.state }
    }
}

/// A requested state change (see the diagram in the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// A worker takes the task: `queued` (or lease expired) → `dispatched`, new lease generation.
    Claim {
        /// How long the lease lasts before another worker may take it.
        lease: Duration,
    },
    /// Codex accepted the turn: `dispatched` → `running`.
    Start {
        /// The generation the worker claimed.
        lease_gen: u64,
    },
    /// Extends the lease.
    Heartbeat {
        /// The generation the worker claimed.
        lease_gen: u64,
        /// New lease length from now.
        lease: Duration,
    },
    /// Records the outcome: → `completed` | `failed` | `cancelled`.
    Finish {
        /// The generation the worker claimed.
        lease_gen: u64,
        /// How it ended.
        outcome: TaskOutcome,
    },
    /// Gives the task back for a retry: → `queued`.
    Release {
        /// The generation the worker claimed.
        lease_gen: u64,
    },
    /// Its message reached the queue (idempotent; any unfinished state).
    Enqueued,
    /// Records facts learned while running: the Codex thread id, token usage.
    Progress {
        /// The generation the worker claimed.
        lease_gen: u64,
        /// The Codex thread the turn runs on.
        codex_thread_id: Option<String>,
        /// Usage so far.
        usage: Option<TokenUsage>,
    },
    /// Writes the task's reply to its outbox, before any tracker call. Refused when one exists:
    /// a task answers once.
    StageReply {
        /// The generation the worker claimed.
        lease_gen: u64,
        /// The reply body.
        body: String,
    },
    /// The tracker confirmed the staged reply.
    ReplyPosted {
        /// The generation the worker claimed.
        lease_gen: u64,
        /// The tracker's comment id.
        comment_id: String,
    },
    /// Stops it (see module docs for running tasks).
    Cancel {
        /// Why.
        reason: CancelReason,
    },
}

/// A transition the task's current state does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The state does not allow it (e.g. claiming a running task whose lease holds). Not retryable.
    #[error("task {task}: cannot {transition} in state {state}")]
    NotAllowed {
        /// The task.
        task: TaskId,
        /// What was asked.
        transition: &'static str,
        /// The state it is in.
        state: TaskState,
    },
    /// The task already has a reply in its outbox; a task answers once. Not retryable.
    #[error("task {task}: a reply is already staged")]
    ReplyExists {
        /// The task.
        task: TaskId,
    },
    /// Another worker claimed the task since; this worker must stop touching it. Not retryable.
    #[error("task {task}: lease generation {held} is stale (now {current})")]
    StaleLease {
        /// The task.
        task: TaskId,
        /// The generation the caller holds.
        held: u64,
        /// The task's generation.
        current: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::GithubSubject;

    const LEASE: Duration = Duration::from_secs(60);

    fn task() -> Task {
        let subject = Subject::Github(GithubSubject {
            owner: "o".into(),
            repo: "r".into(),
            repository_id: 1,
            number: 7,
            is_pull_request: false,
            title: None,
            installation_id: None,
        });
        let trigger = Trigger {
            delivery_id: "d1".into(),
            comment_id: Some("c1".into()),
            kind: TriggerKind::Mention,
            author: "alice".into(),
            body: "@agent hi".into(),
            placement: Placement::TopLevel,
            at: Millis(0),
        };
        Task::new(ThreadKey::new(&subject, "agent"), subject, trigger, Permission::Trusted, Millis(0))
    }

    fn comment(id: &str, body: &str) -> Trigger {
        Trigger { comment_id: Some(id.into()), body: body.into(), ..task().triggers[0].clone() }
    }

    #[test]
    fn coalesce_joins_until_full_and_knows_its_comments() {
        let mut t = task();
        assert_eq!(t.coalesce(&comment("c1", "again"), &Permission::Trusted, Millis(5)), Coalesce::Known);
        assert_eq!(t.version, 0, "a known comment changes nothing");
        for i in 2..=MAX_TRIGGERS {
            assert_eq!(
                t.coalesce(&comment(&format!("c{i}"), "more"), &Permission::Trusted, Millis(9)),
                Coalesce::Joined
            );
        }
        assert_eq!((t.triggers.len(), t.version, t.updated_at), (MAX_TRIGGERS, MAX_TRIGGERS as u64 - 1, Millis(9)));
        let before = t.clone();
        assert_eq!(t.coalesce(&comment("c-late", "one more"), &Permission::Trusted, Millis(10)), Coalesce::Full);
        assert_eq!(t, before, "a full task is left as it was");
    }

    #[test]
    fn coalesce_caps_the_bytes_of_all_triggers() {
        let mut t = task();
        let big = "x".repeat(MAX_TRIGGER_BYTES / 2);
        assert_eq!(t.coalesce(&comment("c2", &big), &Permission::Trusted, Millis(1)), Coalesce::Joined);
        assert_eq!(t.coalesce(&comment("c3", &big), &Permission::Trusted, Millis(2)), Coalesce::Full);
        assert_eq!(t.coalesce(&comment("c4", "small"), &Permission::Trusted, Millis(3)), Coalesce::Joined);
    }

    #[test]
    fn coalesce_keeps_the_stricter_permission() {
        let deferred = |login: &str| Permission::Deferred { login: login.into() };
        let mut t = task();
        t.coalesce(&comment("c2", "x"), &deferred("mallory"), Millis(1));
        assert_eq!(t.permission, deferred("mallory"), "an untrusted comment makes the task deferred");
        t.coalesce(&comment("c3", "x"), &Permission::Trusted, Millis(2));
        t.coalesce(&comment("c4", "x"), &deferred("eve"), Millis(3));
        assert_eq!(t.permission, deferred("mallory"), "the first deferred login stays");
    }

    #[test]
    fn thread_keys_follow_the_contract() {
        assert_eq!(task().thread_key.as_str(), "github:o/r#7:agent");
        let linear = Subject::Linear(crate::event::LinearSubject {
            organization_id: "org".into(),
            issue_id: "iss".into(),
            identifier: Some("ENG-1".into()),
            title: None,
        });
        assert_eq!(ThreadKey::new(&linear, "agent").as_str(), "linear:org/iss:agent");
    }

    #[test]
    fn happy_path_bumps_generation_and_version() {
        let t = task();
        let claimed = t.apply(&Transition::Claim { lease: LEASE }, Millis(10)).unwrap();
        assert_eq!(
            (claimed.state, claimed.attempt, claimed.lease_gen, claimed.version),
            (TaskState::Dispatched, 1, 1, 1)
        );
        assert_eq!(claimed.lease_until, Some(Millis(60_010)));
        let running = claimed.apply(&Transition::Start { lease_gen: 1 }, Millis(20)).unwrap();
        assert_eq!(running.state, TaskState::Running);
        let done = running
            .apply(&Transition::Finish { lease_gen: 1, outcome: TaskOutcome::Completed { summary: None } }, Millis(30))
            .unwrap();
        assert_eq!((done.state, done.lease_until, done.version), (TaskState::Completed, None, 3));
    }

    #[test]
    fn a_held_lease_cannot_be_claimed_until_it_expires() {
        let claimed = task().apply(&Transition::Claim { lease: LEASE }, Millis(0)).unwrap();
        assert!(matches!(
            claimed.apply(&Transition::Claim { lease: LEASE }, Millis(59_999)),
            Err(TransitionError::NotAllowed { .. })
        ));
        let reclaimed = claimed.apply(&Transition::Claim { lease: LEASE }, Millis(60_000)).unwrap();
        assert_eq!((reclaimed.attempt, reclaimed.lease_gen), (2, 2));
        // The first worker's writes are now refused.
        assert!(matches!(
            reclaimed.apply(&Transition::Start { lease_gen: 1 }, Millis(60_001)),
            Err(TransitionError::StaleLease { held: 1, current: 2, .. })
        ));
    }

    #[test]
    fn cancel_stops_queued_at_once_and_asks_running_to_stop() {
        let t = task();
        let c = t.apply(&Transition::Cancel { reason: CancelReason::StopCommand }, Millis(1)).unwrap();
        assert_eq!(c.state, TaskState::Cancelled);
        let running = t
            .apply(&Transition::Claim { lease: LEASE }, Millis(0))
            .and_then(|t| t.apply(&Transition::Start { lease_gen: 1 }, Millis(0)))
            .unwrap();
        let asked = running.apply(&Transition::Cancel { reason: CancelReason::StopCommand }, Millis(1)).unwrap();
        assert_eq!((asked.state, asked.cancel_requested), (TaskState::Running, Some(CancelReason::StopCommand)));
        assert!(c.apply(&Transition::Cancel { reason: CancelReason::Operator }, Millis(2)).is_err());
    }

    #[test]
    fn the_outbox_holds_one_reply_staged_before_it_is_posted() {
        let running = task()
            .apply(&Transition::Claim { lease: LEASE }, Millis(0))
            .and_then(|t| t.apply(&Transition::Start { lease_gen: 1 }, Millis(0)))
            .unwrap();
        assert!(running.apply(&Transition::ReplyPosted { lease_gen: 1, comment_id: "9".into() }, Millis(1)).is_err());
        let staged = running.apply(&Transition::StageReply { lease_gen: 1, body: "done".into() }, Millis(1)).unwrap();
        assert_eq!(staged.reply, Some(OutboxReply { seq: 1, body: "done".into(), posted_comment_id: None }));
        assert!(matches!(
            staged.apply(&Transition::StageReply { lease_gen: 1, body: "again".into() }, Millis(2)),
            Err(TransitionError::ReplyExists { .. })
        ));
        let posted =
            staged.apply(&Transition::ReplyPosted { lease_gen: 1, comment_id: "9".into() }, Millis(3)).unwrap();
        assert_eq!(posted.reply.and_then(|r| r.posted_comment_id), Some("9".into()));
        // A retry (new lease) still sees the staged reply: it must post that, not run again.
        let retried = staged.apply(&Transition::Claim { lease: LEASE }, Millis(60_000)).unwrap();
        assert_eq!(retried.reply.map(|r| r.body), Some("done".into()));
    }

    #[test]
    fn progress_and_enqueued_record_facts_without_moving_state() {
        let t = task();
        let e = t.apply(&Transition::Enqueued, Millis(5)).unwrap();
        assert_eq!((e.state, e.enqueued_at), (TaskState::Queued, Some(Millis(5))));
        assert_eq!(e.apply(&Transition::Enqueued, Millis(9)).unwrap().enqueued_at, Some(Millis(5)));
        let running = e.apply(&Transition::Claim { lease: LEASE }, Millis(6)).unwrap();
        let usage = TokenUsage { input_tokens: 100, cached_input_tokens: 10, output_tokens: 20, total_tokens: 120 };
        let p = running
            .apply(
                &Transition::Progress { lease_gen: 1, codex_thread_id: Some("th".into()), usage: Some(usage) },
                Millis(7),
            )
            .unwrap();
        assert_eq!((p.state, p.codex_thread_id.as_deref(), p.usage), (TaskState::Dispatched, Some("th"), Some(usage)));
        assert!(p
            .apply(&Transition::Progress { lease_gen: 0, codex_thread_id: None, usage: None }, Millis(8))
            .is_err());
    }

    #[test]
    fn terminal_tasks_refuse_everything_but_reads() {
        let c = task().apply(&Transition::Cancel { reason: CancelReason::Operator }, Millis(1)).unwrap();
        for t in [
            Transition::Claim { lease: LEASE },
            Transition::Start { lease_gen: 0 },
            Transition::Heartbeat { lease_gen: 0, lease: LEASE },
            Transition::Release { lease_gen: 0 },
            Transition::Enqueued,
            Transition::StageReply { lease_gen: 0, body: String::new() },
        ] {
            assert!(c.apply(&t, Millis(2)).is_err(), "{t:?} must be refused");
        }
    }
}
