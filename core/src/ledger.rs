//! The ledger port: the durable truth about deliveries, threads and tasks.
//!
//! The queue only carries task ids; the ledger decides. Its contract (DESIGN §3), which every
//! backend proves by passing [`crate::conformance`]:
//! - **Delivery dedupe**: [`Ledger::apply`] records the delivery and applies its effect in one
//!   atomic step; a second `apply` with the same delivery id changes nothing and says
//!   [`Applied::Duplicate`]. Delivery records live at least [`DELIVERY_TTL`].
//! - **One active task per thread**: at most one task per thread key is `dispatched`/`running`,
//!   and at most one is `queued`. A trigger coalesces into the queued task if there is one,
//!   otherwise creates it (a follow-up, when one is running).
//! - **One task per triggering comment**: a trigger whose comment id already asked for a task of
//!   the thread, in any state, creates nothing ([`Applied::KnownComment`]), whatever its delivery
//!   id (two webhooks on one repository deliver the same comment under two ids).
//! - **Decide, then apply**: [`Ledger::decide_and_apply`] hands the rules (a closure from ingest)
//!   the thread's snapshot and applies what they return, as `apply` would; a backend may do both in
//!   one transaction (SQLite does), so the decision is taken on the state it changes, or read the
//!   thread once for both (DynamoDB does).
//! - **Conditional transitions**: [`Ledger::transition`] reads the task, runs the pure
//!   [`Task::apply`], and writes only if the task's `version` is unchanged; lost races are retried
//!   internally, rule violations come back as [`LedgerError::Transition`].
//!
//! What it must not do: decide anything the trigger rules decide, or talk to the queue.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::decision::{Effect, ReasonCode};
use crate::event::Tracker;
use crate::task::{Task, TaskId, TaskState, ThreadKey, Transition, TransitionError};
use crate::transcript::TranscriptEntry;

/// How long a delivery id is remembered: GitHub allows redelivery for 3 days; a day of margin.
pub const DELIVERY_TTL: Duration = Duration::from_secs(4 * 24 * 3600);

/// What the trigger rules need to know about a thread, read just before deciding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadSnapshot {
    /// The queued task, if any (a new trigger coalesces into it).
    pub queued: Option<TaskId>,
    /// The dispatched or running task, if any.
    pub active: Option<TaskId>,
    /// Tasks created for this thread since the budget window began.
    pub runs_in_window: u32,
    /// True when the comment-thread root asked about takes part in an agent conversation.
    pub participates: bool,
    /// True when the last assignment event assigned or delegated the issue to the agent.
    pub assigned_to_agent: bool,
    /// The Codex thread this conversation continues (`thread/resume`), once a task has run.
    pub codex_thread_id: Option<String>,
}

/// The thread a delivery concerns, as [`Ledger::decide_and_apply`] reads it for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadQuery {
    /// The thread.
    pub key: ThreadKey,
    /// The comment-thread root whose participation the rules need, if any.
    pub root_id: Option<String>,
    /// Runs created at or after this count against the budget.
    pub window_start: Millis,
}

/// The trigger rules as [`Ledger::decide_and_apply`] runs them: a thread snapshot in, the delivery
/// to record and the effect to apply out. Pure; it may run on the store's own thread.
pub type Decide = Box<dyn FnOnce(&ThreadSnapshot) -> (NewDelivery, Effect) + Send>;

/// A delivery, as handed to [`Ledger::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// The tracker's delivery id.
    pub id: String,
    /// The tracker.
    pub tracker: Tracker,
    /// Event name and action, e.g. `issue_comment.created` (for operators).
    pub event: String,
    /// The thread it concerns, if any.
    pub thread_key: Option<ThreadKey>,
    /// The rules' reason (the ledger may refine it, see [`Applied`]).
    pub reason: ReasonCode,
}

/// A stored delivery record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The tracker's delivery id.
    pub id: String,
    /// The tracker.
    pub tracker: Tracker,
    /// Event name and action.
    pub event: String,
    /// The thread it concerned, if any.
    pub thread_key: Option<ThreadKey>,
    /// The final reason code.
    pub reason: ReasonCode,
    /// The task it created, joined or cancelled, if any.
    pub task_id: Option<TaskId>,
    /// When it was recorded.
    pub received_at: Millis,
    /// When it may be forgotten.
    pub expires_at: Millis,
}

/// What [`Ledger::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The delivery id was already recorded: nothing changed.
    Duplicate,
    /// Recorded with its reason; nothing else changed.
    Recorded,
    /// A new queued task: the caller must put it on the queue.
    Enqueued(Task),
    /// The trigger joined this still-queued task (already on the queue).
    Coalesced(Task),
    /// The trigger's comment already asked for this task (queued or not): nothing changed (one task
    /// per triggering comment, whatever the delivery id).
    KnownComment(TaskId),
    /// The thread's queued task is full ([`crate::task::Coalesce::Full`]): the trigger was not added.
    TaskFull(TaskId),
    /// These tasks were cancelled or asked to stop.
    Cancelled(Vec<TaskId>),
    /// The retraction or stop found nothing unfinished to act on.
    NothingToCancel,
}

impl Applied {
    /// The reason code to store and log for `rules_reason` given this result.
    pub fn reason(&self, rules_reason: ReasonCode) -> ReasonCode {
        use crate::decision::IgnoreReason;
        match self {
            Applied::Enqueued(_) | Applied::Coalesced(_) if rules_reason == ReasonCode::Deferred => {
                ReasonCode::Deferred
            }
            Applied::Enqueued(_) => ReasonCode::Enqueued,
            Applied::Coalesced(_) => ReasonCode::Coalesced,
            Applied::Cancelled(_) => ReasonCode::Cancelled,
            Applied::KnownComment(_) => ReasonCode::Ignored(IgnoreReason::KnownComment),
            Applied::TaskFull(_) => ReasonCode::Ignored(IgnoreReason::TaskFull),
            Applied::NothingToCancel => ReasonCode::Ignored(IgnoreReason::NothingToCancel),
            Applied::Duplicate | Applied::Recorded => rules_reason,
        }
    }
}

/// Which tasks to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only these states (all when empty).
    pub states: Vec<TaskState>,
    /// Only this thread.
    pub thread_key: Option<ThreadKey>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<usize>,
}

/// Ledger failures.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The transition is not allowed (returned by [`Ledger::transition`]). Not retryable.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// No task with that id (returned by [`Ledger::transition`]). Not retryable.
    #[error("task {0} not found")]
    NotFound(TaskId),
    /// Concurrent writers kept winning past the internal retries. Retryable.
    #[error("contention on {0}: gave up after retries")]
    Contention(String),
    /// The store is unreachable, throttled or failing. Retryable.
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
    /// Stored data could not be read back (a bug or a manual edit). Not retryable.
    #[error("ledger data corrupt: {0}")]
    Corrupt(String),
}

impl LedgerError {
    /// True when trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            LedgerError::Contention(_) | LedgerError::Unavailable(_) => true,
            LedgerError::Transition(_) | LedgerError::NotFound(_) | LedgerError::Corrupt(_) => false,
        }
    }
}

/// The ledger port. Implementations: `sqlite::SqliteLedger` (feature `sqlite`), DynamoDB (later).
#[async_trait]
pub trait Ledger: Send + Sync + fmt::Debug {
    /// What the rules need to know about `thread_key`: its queued and active tasks, the runs
    /// created since `window_start`, whether `root_id` (a comment-thread root) takes part in an
    /// agent conversation, and whether the issue is assigned to the agent.
    ///
    /// # Errors
    /// [`LedgerError::Unavailable`] when the store cannot be read.
    async fn thread(
        &self,
        thread_key: &ThreadKey,
        root_id: Option<&str>,
        window_start: Millis,
    ) -> Result<ThreadSnapshot, LedgerError>;

    /// Records `delivery` and applies `effect`, atomically. Idempotent per delivery id: a repeat
    /// returns [`Applied::Duplicate`] and changes nothing. The stored reason is
    /// `Applied::reason(delivery.reason)`.
    ///
    /// # Errors
    /// [`LedgerError::Unavailable`] / [`LedgerError::Contention`] (retryable; nothing was written).
    async fn apply(&self, delivery: &NewDelivery, effect: &Effect) -> Result<Applied, LedgerError>;

    /// Reads the snapshot of `thread` (an empty one for `None`), lets `decide` turn it into a
    /// delivery and an effect, and applies them as [`Ledger::apply`] does. Returns what was
    /// applied and the delivery's reason as `decide` gave it (the final reason is
    /// [`Applied::reason`] of it).
    ///
    /// The default reads, then applies: between the two another writer may change the thread,
    /// and `apply` copes with that as it does for any caller (its writes are conditional), but
    /// the decision itself was taken on the older snapshot. A backend that can run all three in
    /// one transaction overrides this, so the decision is taken on the state it is applied to
    /// (SQLite); one that reads the thread inside `apply` anyway may override it to read once
    /// (DynamoDB).
    ///
    /// # Errors
    /// As [`Ledger::thread`] and [`Ledger::apply`]; nothing was written.
    async fn decide_and_apply(
        &self,
        thread: Option<ThreadQuery>,
        decide: Decide,
    ) -> Result<(Applied, ReasonCode), LedgerError> {
        let snapshot = match &thread {
            Some(q) => self.thread(&q.key, q.root_id.as_deref(), q.window_start).await?,
            None => ThreadSnapshot::default(),
        };
        let (delivery, effect) = decide(&snapshot);
        let applied = self.apply(&delivery, &effect).await?;
        Ok((applied, delivery.reason))
    }

    /// Applies `transition` to task `id` conditionally (see the module docs) and returns the new task.
    ///
    /// # Errors
    /// [`LedgerError::NotFound`], [`LedgerError::Transition`], or a retryable store error.
    async fn transition(&self, id: &TaskId, transition: &Transition) -> Result<Task, LedgerError>;

    /// One task.
    ///
    /// # Errors
    /// A store error.
    async fn task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError>;

    /// Tasks matching `filter`, newest first.
    ///
    /// # Errors
    /// A store error.
    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>, LedgerError>;

    /// One delivery record.
    ///
    /// # Errors
    /// A store error.
    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, LedgerError>;

    /// The newest `limit` delivery records, newest first.
    ///
    /// # Errors
    /// A store error.
    async fn deliveries(&self, limit: usize) -> Result<Vec<DeliveryRecord>, LedgerError>;

    /// Remembers that `thread_key`'s conversation continues on Codex thread `codex_thread_id`
    /// (the latest wins); [`Ledger::thread`] reports it.
    ///
    /// # Errors
    /// A store error.
    async fn set_codex_thread(&self, thread_key: &ThreadKey, codex_thread_id: &str) -> Result<(), LedgerError>;

    /// Appends transcript entries to task `id`. Idempotent per `(id, seq)`: an entry whose
    /// sequence is already stored is skipped, not duplicated.
    ///
    /// # Errors
    /// A store error.
    async fn append_transcript(&self, id: &TaskId, entries: &[TranscriptEntry]) -> Result<(), LedgerError>;

    /// Task `id`'s transcript, in sequence order.
    ///
    /// # Errors
    /// A store error.
    async fn transcript(&self, id: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError>;

    /// Queued tasks that never reached the queue ([`Task::enqueued_at`] unset) and were created at
    /// or before `created_before`, oldest first, at most `limit`: the sweeper's work list.
    ///
    /// # Errors
    /// A store error.
    async fn stranded(&self, created_before: Millis, limit: usize) -> Result<Vec<Task>, LedgerError>;
}
