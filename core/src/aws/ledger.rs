//! [`DynamoLedger`]: the [`Ledger`] port on one DynamoDB table (`pk`/`sk`, GSI `gsi1pk`/`gsi1sk`).
//!
//! | item | `pk` | `sk` | `gsi1pk` / `gsi1sk` |
//! |---|---|---|---|
//! | thread record: `tv` (thread version), `assigned`, `codex_thread_id` | `THREAD#{key}` | `THREAD` | – |
//! | task: `body` (the task as JSON, the record), `state`, `version`, `created_at` | `THREAD#{key}` | `TASK#{created:020}#{id}` | `TASKS#{state}` (`queued-unsent` until enqueued) / `{created:020}#{id}` |
//! | participation root | `THREAD#{key}` | `ROOT#{root_id}` | – |
//! | task reference: `thread_pk`, `task_sk` (immutable) | `TASK#{id}` | `REF` | – |
//! | transcript entry: `body` | `TASK#{id}` | `SEQ#{seq:020}` | – |
//! | delivery: fields, `expires_at` (TTL, epoch s), `expires_at_ms` | `DELIVERY#{id}` | `DELIVERY` | `DELIVERIES` / `{received:020}#{id}` |
//!
//! Access patterns: [`Ledger::thread`] and every decision read one consistent `Query` of the
//! thread's partition (record, tasks, roots); [`Ledger::decide_and_apply`] reads it once for the
//! rules and the write's first attempt together; a task by id is two consistent `GetItem`s
//! (reference, then task); transcripts are a consistent `Query` of the task's partition; operator listings
//! (`tasks` without a thread, `deliveries`) and the sweeper's list read the GSI (eventually
//! consistent; the sweeper re-reads each task consistently before trusting it). Expired deliveries
//! are filtered on every read (TTL deletion is lazy) and may be overwritten by a redelivery.
//!
//! Every change is one `TransactWriteItems` whose first item is the delivery put (`apply`) and
//! whose task writes are conditional on the task's `version`. Creating a task, claiming and
//! releasing also bump the thread record's `tv` conditionally, so "one queued task per thread" and
//! "one live lease per thread" hold under concurrent Lambdas and workers without a lock. A lost race
//! re-reads and retries with jittered backoff ([`APPLY_ATTEMPTS`], [`TRANSITION_ATTEMPTS`]), then
//! gives [`LedgerError::Contention`]. Same choices as SQLite where the contract is open
//! (coalescing into the oldest queued task, deferred permission wins, retract semantics).
//! Within one process, writers of one thread (apply) or one task (transition) also take an
//! in-process async lock first: a worker process holds many tasks, and losing races against
//! itself only burns requests. It is an optimization; across processes the conditions decide.
//! (It also keeps the moto emulator honest: moto restores whole-table snapshots when a
//! transaction fails, which is not isolated under concurrency, unlike DynamoDB.)
//! Known limit: a task item holds all its triggers, so DynamoDB's 400 KB item cap bounds how many
//! large comments can coalesce into one task.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;

use super::items::{self, n, s, Item};
use super::{ledger_error, GSI1};
use crate::clock::{Clock, Millis};
use crate::decision::{Effect, NewTrigger, ReasonCode};
use crate::ledger::{
    Applied, Decide, DeliveryRecord, Ledger, LedgerError, NewDelivery, TaskFilter, ThreadQuery, ThreadSnapshot,
    DELIVERY_TTL,
};
use crate::task::{CancelReason, Coalesce, Task, TaskId, TaskState, ThreadKey, Transition, TransitionError};
use crate::transcript::TranscriptEntry;

/// How often `apply` re-reads and retries after losing a race. Generous, because a burst of
/// triggers on one thread serializes on the thread record: with N concurrent writers the last one
/// may lose N − 1 times (the conformance suite races 16).
pub const APPLY_ATTEMPTS: usize = 24;

/// How often `transition` re-reads and retries after losing a conditional write.
pub const TRANSITION_ATTEMPTS: usize = 6;

/// Above this many idle in-process locks, the idle ones are dropped.
const MAX_IDLE_LOCKS: usize = 4096;

const UNFINISHED: [TaskState; 3] = [TaskState::Queued, TaskState::Dispatched, TaskState::Running];

/// The DynamoDB ledger. Cheap to clone (the SDK client is shared).
#[derive(Debug, Clone)]
pub struct DynamoLedger {
    client: Client,
    table: String,
    clock: Arc<dyn Clock>,
    /// In-process serialization per thread key / task id (see the module docs).
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// The thread partition, read consistently.
#[derive(Debug, Default)]
struct ThreadView {
    /// The thread record's version (0 when absent).
    tv: i64,
    assigned: bool,
    codex_thread_id: Option<String>,
    /// The thread's tasks, oldest first.
    tasks: Vec<Task>,
    roots: BTreeSet<String>,
}

impl ThreadView {
    fn in_states<'a>(&'a self, states: &'a [TaskState]) -> impl Iterator<Item = &'a Task> + 'a {
        self.tasks.iter().filter(move |t| states.contains(&t.state))
    }

    /// What the trigger rules see of this thread (see [`Ledger::thread`]).
    fn snapshot(&self, root_id: Option<&str>, window_start: Millis) -> ThreadSnapshot {
        let runs = self.tasks.iter().filter(|t| t.created_at >= window_start).count();
        ThreadSnapshot {
            queued: self.in_states(&[TaskState::Queued]).next().map(|t| t.id.clone()),
            active: self.in_states(&[TaskState::Dispatched, TaskState::Running]).last().map(|t| t.id.clone()),
            runs_in_window: u32::try_from(runs).unwrap_or(u32::MAX),
            participates: root_id.is_some_and(|r| self.roots.contains(r)),
            assigned_to_agent: self.assigned,
            codex_thread_id: self.codex_thread_id.clone(),
        }
    }
}

/// What a planned `apply` writes and reports.
struct Plan {
    applied: Applied,
    task_id: Option<TaskId>,
    writes: Vec<TransactWriteItem>,
}

/// Why a transaction did not commit.
enum Lost {
    /// The delivery record already exists (and has not expired).
    Duplicate,
    /// Another writer changed something the plan read: re-read and retry.
    Race,
}

impl DynamoLedger {
    /// A ledger on `table`, reading "now" from `clock`.
    pub fn new(config: &aws_config::SdkConfig, table: impl Into<String>, clock: Arc<dyn Clock>) -> DynamoLedger {
        DynamoLedger::from_client(Client::new(config), table, clock)
    }

    /// A ledger over an existing client.
    pub fn from_client(client: Client, table: impl Into<String>, clock: Arc<dyn Clock>) -> DynamoLedger {
        DynamoLedger { client, table: table.into(), clock, locks: Arc::default() }
    }

    /// The in-process lock for `key`, created on first use.
    fn lock_for(&self, key: String) -> Arc<tokio::sync::Mutex<()>> {
        let Ok(mut locks) = self.locks.lock() else {
            // A poisoned map only loses the optimization: the conditional writes still decide.
            return Arc::default();
        };
        if locks.len() > MAX_IDLE_LOCKS {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key).or_default())
    }

    /// The table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    async fn query_all(&self, query: QueryFluentBuilder, max: Option<usize>) -> Result<Vec<Item>, LedgerError> {
        let mut stream = query.into_paginator().items().send();
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            out.push(item.map_err(|e| ledger_error("query", e))?);
            if max.is_some_and(|m| out.len() >= m) {
                break;
            }
        }
        Ok(out)
    }

    async fn read_thread(&self, key: &ThreadKey) -> Result<ThreadView, LedgerError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(items::thread_pk(key)));
        let mut view = ThreadView::default();
        for item in self.query_all(query, None).await? {
            let sk = items::get_s(&item, "sk").unwrap_or_default();
            if sk == items::THREAD_SK {
                view.tv = items::get_n(&item, "tv").unwrap_or(0);
                view.assigned = items::get_bool(&item, "assigned").unwrap_or(false);
                view.codex_thread_id = items::get_s(&item, "codex_thread_id").map(str::to_owned);
            } else if sk.starts_with(items::TASK_SK_PREFIX) {
                view.tasks.push(items::decode_task(&item)?);
            } else if let Some(root) = sk.strip_prefix(items::ROOT_SK_PREFIX) {
                view.roots.insert(root.to_owned());
            }
        }
        Ok(view)
    }

    async fn get(&self, key: Item) -> Result<Option<Item>, LedgerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| ledger_error("get_item", e))?;
        Ok(out.item)
    }

    async fn load_task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError> {
        let Some(reference) = self.get(items::key(items::task_pk(id), items::REF_SK)).await? else {
            return Ok(None);
        };
        let (Some(pk), Some(sk)) = (items::get_s(&reference, "thread_pk"), items::get_s(&reference, "task_sk")) else {
            return Err(LedgerError::Corrupt(format!("task {id}: reference without location")));
        };
        let task = self.get(items::key(pk.to_owned(), sk)).await?;
        task.as_ref().map(items::decode_task).transpose()
    }

    async fn live_delivery(&self, id: &str, now: Millis) -> Result<Option<DeliveryRecord>, LedgerError> {
        let item = self.get(items::key(items::delivery_pk(id), items::DELIVERY_SK)).await?;
        Ok(item.as_ref().map(items::decode_delivery).transpose()?.filter(|r| r.expires_at > now))
    }

    /// Commits `writes` atomically; the first write's failed condition means [`Lost::Duplicate`]
    /// when `first_is_delivery`.
    async fn commit(
        &self,
        writes: Vec<TransactWriteItem>,
        first_is_delivery: bool,
    ) -> Result<Option<Lost>, LedgerError> {
        let result = self.client.transact_write_items().set_transact_items(Some(writes)).send().await;
        let err = match result {
            Ok(_) => return Ok(None),
            Err(e) => e,
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) = err.as_service_error() {
            let codes: Vec<&str> =
                cancelled.cancellation_reasons().iter().map(|r| r.code().unwrap_or("None")).collect();
            if first_is_delivery && codes.first() == Some(&"ConditionalCheckFailed") {
                return Ok(Some(Lost::Duplicate));
            }
            if codes.iter().all(|c| matches!(*c, "None" | "ConditionalCheckFailed" | "TransactionConflict")) {
                return Ok(Some(Lost::Race));
            }
        }
        if err
            .as_service_error()
            .and_then(ProvideErrorMetadata::code)
            .is_some_and(|c| matches!(c, "TransactionConflictException" | "TransactionInProgressException"))
        {
            return Ok(Some(Lost::Race));
        }
        Err(ledger_error("transact_write_items", err))
    }

    fn put(
        &self,
        item: Item,
        condition: Option<(&str, Vec<(&str, aws_sdk_dynamodb::types::AttributeValue)>)>,
    ) -> Result<TransactWriteItem, LedgerError> {
        let mut put = Put::builder().table_name(&self.table).set_item(Some(item));
        if let Some((expr, values)) = condition {
            put = put.condition_expression(expr).expression_attribute_names("#v", "version");
            for (name, value) in values {
                put = put.expression_attribute_values(name, value);
            }
        }
        let put = put.build().map_err(|e| LedgerError::Corrupt(format!("building put: {e}")))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// Writes `task` (a new one when `expected` is `None`, else only over that stored version).
    fn put_task(&self, task: &Task, expected: Option<u64>) -> Result<TransactWriteItem, LedgerError> {
        let item = items::task_item(task)?;
        match expected {
            None => {
                let put = Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(item))
                    .condition_expression("attribute_not_exists(pk)")
                    .build()
                    .map_err(|e| LedgerError::Corrupt(format!("building put: {e}")))?;
                Ok(TransactWriteItem::builder().put(put).build())
            }
            Some(v) => self.put(item, Some(("#v = :v", vec![(":v", n(v))]))),
        }
    }

    /// Updates the thread record: bumps `tv` from `seen` (conditionally) when `bump`, and sets
    /// `assigned` when given.
    fn update_thread(
        &self,
        key: &ThreadKey,
        bump: Option<i64>,
        assigned: Option<bool>,
    ) -> Result<TransactWriteItem, LedgerError> {
        let mut sets = Vec::new();
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(items::key(items::thread_pk(key), items::THREAD_SK)));
        if let Some(seen) = bump {
            sets.push("#tv = :next");
            update = update
                .expression_attribute_names("#tv", "tv")
                .expression_attribute_values(":next", n(seen + 1))
                .expression_attribute_values(":seen", n(seen))
                .condition_expression(if seen == 0 {
                    "attribute_not_exists(#tv) OR #tv = :seen"
                } else {
                    "#tv = :seen"
                });
        }
        if let Some(a) = assigned {
            sets.push("#assigned = :assigned");
            update = update
                .expression_attribute_names("#assigned", "assigned")
                .expression_attribute_values(":assigned", aws_sdk_dynamodb::types::AttributeValue::Bool(a));
        }
        let update = update
            .update_expression(format!("SET {}", sets.join(", ")))
            .build()
            .map_err(|e| LedgerError::Corrupt(format!("building update: {e}")))?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    fn put_delivery(&self, record: &DeliveryRecord, now: Millis) -> Result<TransactWriteItem, LedgerError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(items::delivery_item(record)))
            // An expired record TTL has not deleted yet counts as forgotten.
            .condition_expression("attribute_not_exists(pk) OR #exp <= :now")
            .expression_attribute_names("#exp", "expires_at_ms")
            .expression_attribute_values(":now", n(now.0))
            .build()
            .map_err(|e| LedgerError::Corrupt(format!("building put: {e}")))?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    fn plan(&self, view: &ThreadView, effect: &Effect, now: Millis) -> Result<Plan, LedgerError> {
        match effect {
            Effect::Nothing => Ok(Plan { applied: Applied::Recorded, task_id: None, writes: Vec::new() }),
            Effect::Trigger(nt) => self.plan_trigger(view, nt, now),
            Effect::CancelThread { reason, .. } => self.plan_cancel(view, *reason, now),
            Effect::RetractComment { comment_id, .. } => self.plan_retract(view, comment_id, now),
            Effect::Unassign { thread_key } => Ok(Plan {
                applied: Applied::Recorded,
                task_id: None,
                writes: vec![self.update_thread(thread_key, None, Some(false))?],
            }),
        }
    }

    fn plan_trigger(&self, view: &ThreadView, nt: &NewTrigger, now: Millis) -> Result<Plan, LedgerError> {
        // One task per triggering comment: a comment that already asked for a task no longer
        // queued starts nothing. A concurrent create bumps the thread version, so a racing apply
        // retries with a view that holds it.
        if let Some(comment) = &nt.trigger.comment_id {
            let holder = view.tasks.iter().find(|t| {
                t.state != TaskState::Queued && t.triggers.iter().any(|tr| tr.comment_id.as_ref() == Some(comment))
            });
            if let Some(task) = holder {
                let writes = vec![self.update_thread(&nt.thread_key, Some(view.tv), None)?];
                return Ok(Plan {
                    applied: Applied::KnownComment(task.id.clone()),
                    task_id: Some(task.id.clone()),
                    writes,
                });
            }
        }
        let mut writes = Vec::new();
        let assigned = nt.marks_assigned.then_some(true);
        let applied = match view.in_states(&[TaskState::Queued]).next() {
            Some(queued) => {
                let mut task = queued.clone();
                let coalesce = task.coalesce(&nt.trigger, &nt.permission, now);
                if coalesce == Coalesce::Joined {
                    writes.push(self.put_task(&task, Some(queued.version))?);
                }
                if assigned.is_some() {
                    writes.push(self.update_thread(&nt.thread_key, None, assigned)?);
                }
                match coalesce {
                    Coalesce::Joined => Applied::Coalesced(task),
                    // A comment delivered again (a redelivered edit) adds nothing.
                    Coalesce::Known => Applied::KnownComment(task.id),
                    Coalesce::Full => Applied::TaskFull(task.id),
                }
            }
            None => {
                let task = Task::new(
                    nt.thread_key.clone(),
                    nt.subject.clone(),
                    nt.trigger.clone(),
                    nt.permission.clone(),
                    now,
                );
                writes.push(self.put_task(&task, None)?);
                writes.push(self.put(items::ref_item(&task), None)?);
                writes.push(self.update_thread(&nt.thread_key, Some(view.tv), assigned)?);
                Applied::Enqueued(task)
            }
        };
        if let Some(root) = nt.participates_in.as_ref().filter(|r| !view.roots.contains(*r)) {
            let item = items::key(items::thread_pk(&nt.thread_key), format!("{}{root}", items::ROOT_SK_PREFIX));
            writes.push(self.put(item, None)?);
        }
        let task_id = match &applied {
            Applied::Coalesced(t) | Applied::Enqueued(t) => Some(t.id.clone()),
            Applied::KnownComment(id) | Applied::TaskFull(id) => Some(id.clone()),
            Applied::Duplicate | Applied::Recorded | Applied::Cancelled(_) | Applied::NothingToCancel => None,
        };
        Ok(Plan { applied, task_id, writes })
    }

    fn plan_cancel(&self, view: &ThreadView, reason: CancelReason, now: Millis) -> Result<Plan, LedgerError> {
        let mut writes = Vec::new();
        let mut ids = Vec::new();
        for task in view.in_states(&UNFINISHED) {
            let next = task.apply(&Transition::Cancel { reason }, now)?;
            writes.push(self.put_task(&next, Some(task.version))?);
            ids.push(task.id.clone());
        }
        if ids.is_empty() {
            return Ok(Plan { applied: Applied::NothingToCancel, task_id: None, writes });
        }
        let first = ids.first().cloned();
        Ok(Plan { applied: Applied::Cancelled(ids), task_id: first, writes })
    }

    fn plan_retract(&self, view: &ThreadView, comment_id: &str, now: Millis) -> Result<Plan, LedgerError> {
        let mut writes = Vec::new();
        let mut cancelled = Vec::new();
        let mut trimmed = None;
        for task in view.in_states(&UNFINISHED) {
            if !task.comment_ids().contains(&comment_id) {
                continue;
            }
            let next = if task.triggers.iter().all(|t| t.comment_id.as_deref() == Some(comment_id)) {
                cancelled.push(task.id.clone());
                task.apply(&Transition::Cancel { reason: CancelReason::TriggerDeleted }, now)?
            } else {
                let mut next = task.clone();
                next.triggers.retain(|t| t.comment_id.as_deref() != Some(comment_id));
                next.updated_at = now;
                next.version += 1;
                trimmed = Some(task.id.clone());
                next
            };
            writes.push(self.put_task(&next, Some(task.version))?);
        }
        if let Some(first) = cancelled.first().cloned() {
            return Ok(Plan { applied: Applied::Cancelled(cancelled), task_id: Some(first), writes });
        }
        Ok(match trimmed {
            Some(id) => Plan { applied: Applied::Recorded, task_id: Some(id), writes },
            None => Plan { applied: Applied::NothingToCancel, task_id: None, writes },
        })
    }

    /// The in-process lock of `key`'s writers (see the module doc).
    fn thread_lock(&self, key: &ThreadKey) -> Arc<tokio::sync::Mutex<()>> {
        self.lock_for(format!("thread:{key}"))
    }

    /// [`Ledger::apply`] with the effect's thread lock held by the caller. The first attempt plans
    /// on `first` when given (a view of the effect's thread read under that lock); every retry reads
    /// the thread again.
    async fn apply_locked(
        &self,
        delivery: &NewDelivery,
        effect: &Effect,
        mut first: Option<ThreadView>,
    ) -> Result<Applied, LedgerError> {
        let now = self.clock.now();
        for attempt in 0..APPLY_ATTEMPTS {
            // Cheap short-circuit for redeliveries; the conditional put below is the real guard.
            if self.live_delivery(&delivery.id, now).await?.is_some() {
                return Ok(Applied::Duplicate);
            }
            let view = match (thread_of(effect), first.take()) {
                (Some(_), Some(view)) => view,
                (Some(key), None) => self.read_thread(key).await?,
                (None, _) => ThreadView::default(),
            };
            let plan = self.plan(&view, effect, now)?;
            let record = DeliveryRecord {
                id: delivery.id.clone(),
                tracker: delivery.tracker,
                event: delivery.event.clone(),
                thread_key: delivery.thread_key.clone(),
                reason: plan.applied.reason(delivery.reason),
                task_id: plan.task_id.clone(),
                received_at: now,
                expires_at: now.plus(DELIVERY_TTL),
            };
            let mut writes = vec![self.put_delivery(&record, now)?];
            writes.extend(plan.writes);
            match self.commit(writes, true).await? {
                None => return Ok(plan.applied),
                Some(Lost::Duplicate) => return Ok(Applied::Duplicate),
                Some(Lost::Race) => backoff(attempt).await,
            }
        }
        Err(LedgerError::Contention(format!("delivery {}", delivery.id)))
    }

    /// Lists one GSI partition of tasks, newest first, up to `limit`.
    async fn tasks_tagged(&self, tag: &str, limit: Option<usize>) -> Result<Vec<Task>, LedgerError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :pk")
            .expression_attribute_values(":pk", s(items::tasks_gsi_pk(tag)))
            .scan_index_forward(false);
        self.query_all(query, limit).await?.iter().map(items::decode_task).collect()
    }
}

fn thread_of(effect: &Effect) -> Option<&ThreadKey> {
    match effect {
        Effect::Nothing => None,
        Effect::Trigger(nt) => Some(&nt.thread_key),
        Effect::CancelThread { thread_key, .. }
        | Effect::RetractComment { thread_key, .. }
        | Effect::Unassign { thread_key } => Some(thread_key),
    }
}

/// Sleeps a jittered, growing interval before retrying a lost race, so racing writers spread out.
async fn backoff(attempt: usize) {
    let jitter = u64::try_from(uuid::Uuid::new_v4().as_u128() % 1000).unwrap_or(0);
    let base = 4u64 << attempt.min(4);
    tokio::time::sleep(Duration::from_millis(base + base * jitter / 1000)).await;
}

#[async_trait]
impl Ledger for DynamoLedger {
    async fn thread(
        &self,
        thread_key: &ThreadKey,
        root_id: Option<&str>,
        window_start: Millis,
    ) -> Result<ThreadSnapshot, LedgerError> {
        Ok(self.read_thread(thread_key).await?.snapshot(root_id, window_start))
    }

    async fn apply(&self, delivery: &NewDelivery, effect: &Effect) -> Result<Applied, LedgerError> {
        let lock = thread_of(effect).map(|k| self.thread_lock(k));
        let _guard = match &lock {
            Some(l) => Some(l.lock().await),
            None => None,
        };
        self.apply_locked(delivery, effect, None).await
    }

    /// One `Query` of the thread, under its lock, serves both the rules and the write's first
    /// attempt (the trait's default reads it twice: once for the rules, once inside `apply`).
    async fn decide_and_apply(
        &self,
        thread: Option<ThreadQuery>,
        decide: Decide,
    ) -> Result<(Applied, ReasonCode), LedgerError> {
        let Some(q) = thread else {
            let (delivery, effect) = decide(&ThreadSnapshot::default());
            return Ok((self.apply(&delivery, &effect).await?, delivery.reason));
        };
        let lock = self.thread_lock(&q.key);
        let guard = lock.lock().await;
        let view = self.read_thread(&q.key).await?;
        let (delivery, effect) = decide(&view.snapshot(q.root_id.as_deref(), q.window_start));
        let applied = if thread_of(&effect) == Some(&q.key) {
            self.apply_locked(&delivery, &effect, Some(view)).await?
        } else {
            // The rules chose an effect on another thread (or none): apply it as `apply` would.
            drop(guard);
            self.apply(&delivery, &effect).await?
        };
        Ok((applied, delivery.reason))
    }

    async fn transition(&self, id: &TaskId, transition: &Transition) -> Result<Task, LedgerError> {
        let lock = self.lock_for(format!("task:{id}"));
        let _guard = lock.lock().await;
        let now = self.clock.now();
        for attempt in 0..TRANSITION_ATTEMPTS {
            let task = self.load_task(id).await?.ok_or_else(|| LedgerError::NotFound(id.clone()))?;
            let next = task.apply(transition, now)?;
            let mut writes = vec![self.put_task(&next, Some(task.version))?];
            // Claims and releases change which task of the thread is live or queued: they bump the
            // thread version, so they serialize with each other and with task creation.
            if matches!(transition, Transition::Claim { .. } | Transition::Release { .. }) {
                let view = self.read_thread(&task.thread_key).await?;
                if matches!(transition, Transition::Claim { .. }) {
                    let busy = view
                        .in_states(&[TaskState::Dispatched, TaskState::Running])
                        .any(|other| other.id != task.id && !other.is_claimable(now));
                    if busy {
                        return Err(TransitionError::NotAllowed {
                            task: task.id,
                            transition: "claim",
                            state: task.state,
                        }
                        .into());
                    }
                }
                writes.push(self.update_thread(&task.thread_key, Some(view.tv), None)?);
            }
            match self.commit(writes, false).await? {
                None => return Ok(next),
                Some(Lost::Duplicate | Lost::Race) => backoff(attempt).await,
            }
        }
        Err(LedgerError::Contention(format!("task {id}")))
    }

    async fn task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError> {
        self.load_task(id).await
    }

    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>, LedgerError> {
        let states: Vec<TaskState> =
            if filter.states.is_empty() { TaskState::ALL.to_vec() } else { filter.states.clone() };
        let mut tasks: Vec<Task> = match &filter.thread_key {
            Some(key) => self.read_thread(key).await?.tasks.into_iter().filter(|t| states.contains(&t.state)).collect(),
            None => {
                let mut all = Vec::new();
                for state in &states {
                    let tags: &[&str] =
                        if *state == TaskState::Queued { &[items::UNSENT, "queued"] } else { &[state.as_str()] };
                    for tag in tags {
                        all.extend(self.tasks_tagged(tag, filter.limit).await?);
                    }
                }
                all
            }
        };
        tasks.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        if let Some(limit) = filter.limit {
            tasks.truncate(limit);
        }
        Ok(tasks)
    }

    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, LedgerError> {
        self.live_delivery(id, self.clock.now()).await
    }

    async fn deliveries(&self, limit: usize) -> Result<Vec<DeliveryRecord>, LedgerError> {
        let now = self.clock.now();
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :pk")
            .filter_expression("#exp > :now")
            .expression_attribute_names("#exp", "expires_at_ms")
            .expression_attribute_values(":pk", s(items::DELIVERIES_GSI_PK))
            .expression_attribute_values(":now", n(now.0))
            .scan_index_forward(false);
        self.query_all(query, Some(limit)).await?.iter().take(limit).map(items::decode_delivery).collect()
    }

    async fn set_codex_thread(&self, thread_key: &ThreadKey, codex_thread_id: &str) -> Result<(), LedgerError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::key(items::thread_pk(thread_key), items::THREAD_SK)))
            .update_expression("SET codex_thread_id = :c")
            .expression_attribute_values(":c", s(codex_thread_id))
            .send()
            .await
            .map_err(|e| ledger_error("update_item", e))?;
        Ok(())
    }

    async fn append_transcript(&self, id: &TaskId, entries: &[TranscriptEntry]) -> Result<(), LedgerError> {
        for entry in entries {
            let result = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(items::transcript_item(id, entry)?))
                .condition_expression("attribute_not_exists(pk)")
                .send()
                .await;
            match result {
                Ok(_) => {}
                // Already stored: appends are idempotent per (task, seq).
                Err(e) if e.as_service_error().is_some_and(|se| se.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(ledger_error("put_item", e)),
            }
        }
        Ok(())
    }

    async fn transcript(&self, id: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("pk = :pk AND begins_with(sk, :seq)")
            .expression_attribute_values(":pk", s(items::task_pk(id)))
            .expression_attribute_values(":seq", s(items::SEQ_SK_PREFIX));
        self.query_all(query, None).await?.iter().map(items::decode_transcript).collect()
    }

    async fn stranded(&self, created_before: Millis, limit: usize) -> Result<Vec<Task>, LedgerError> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(GSI1)
            .key_condition_expression("gsi1pk = :pk AND gsi1sk <= :cut")
            .expression_attribute_values(":pk", s(items::tasks_gsi_pk(items::UNSENT)))
            // '~' sorts after every task id character, so tasks created exactly at the cut-off count.
            .expression_attribute_values(":cut", s(format!("{}#~", items::time_key(created_before))));
        let mut out = Vec::new();
        for item in self.query_all(query, None).await? {
            let listed = items::decode_task(&item)?;
            // The index lags: trust only a consistent read of the task itself.
            if let Some(task) = self.load_task(&listed.id).await? {
                if task.state == TaskState::Queued && task.enqueued_at.is_none() {
                    out.push(task);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}
