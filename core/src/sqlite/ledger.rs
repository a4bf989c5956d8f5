//! [`SqliteLedger`]: the [`Ledger`] port over the `tasks`, `deliveries`, `threads` and
//! `participations` tables.
//!
//! Every write (`apply`, `transition`, …) is one job of the [`Writer`]'s group transaction, so it
//! runs alone against the file and is answered only once committed; the version check in
//! `UPDATE … WHERE version = ?` can then only fail if the file was edited outside Beckon, and is
//! kept so the write path has the same shape as DynamoDB's conditional writes. Reads use their own
//! connection (WAL: they never wait for a writer). State rules live in [`Task::apply`], never
//! here. Choices the contract leaves open:
//! - expired deliveries are purged by a write at most once per [`PURGE_EVERY`] (not by every
//!   write: the purge is a statement of its own), and until then neither reads nor the dedupe
//!   count them: a redelivery of an expired id is new and replaces the old record;
//! - a coalesced trigger from an author whose permission is deferred makes the task deferred;
//! - retracting one of several triggers drops it and reports [`Applied::Recorded`] (nothing was
//!   cancelled); retracting the last one cancels the task but keeps its trigger list for operators;
//! - a claim while another task of the thread holds a live lease is refused as
//!   [`TransitionError::NotAllowed`] (`cannot claim in state queued`).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::clock::{Clock, Millis};
use crate::decision::{Effect, NewTrigger, ReasonCode};
use crate::event::Tracker;
use crate::ledger::{
    Applied, Decide, DeliveryRecord, Ledger, LedgerError, NewDelivery, TaskFilter, ThreadQuery, ThreadSnapshot,
    DELIVERY_TTL,
};
use crate::task::{
    self, CancelReason, Coalesce, Task, TaskId, TaskState, ThreadKey, Transition, TransitionError, Trigger,
};
use crate::transcript::TranscriptEntry;

use super::writer::Writer;

const UNFINISHED: [TaskState; 3] = [TaskState::Queued, TaskState::Dispatched, TaskState::Running];
const ACTIVE: [TaskState; 2] = [TaskState::Dispatched, TaskState::Running];

/// At most how often a handle's writes purge expired delivery records.
pub(super) const PURGE_EVERY: Duration = Duration::from_secs(1);

/// The SQLite ledger. Cheap to clone; clones share the writer and the read connection. Build it
/// with [`super::open`].
#[derive(Debug, Clone)]
pub struct SqliteLedger {
    writer: Arc<Writer>,
    reader: Arc<Mutex<Connection>>,
    clock: Arc<dyn Clock>,
    /// When this handle's writes last purged expired deliveries (epoch ms; `i64::MIN`: never).
    purged_at: Arc<AtomicI64>,
}

impl SqliteLedger {
    pub(super) fn new(writer: Arc<Writer>, reader: Connection, clock: Arc<dyn Clock>) -> SqliteLedger {
        SqliteLedger {
            writer,
            reader: Arc::new(Mutex::new(reader)),
            clock,
            purged_at: Arc::new(AtomicI64::new(i64::MIN)),
        }
    }

    /// Runs the write `f` in the writer's next group transaction, with "now" read when it runs.
    async fn write<T, F>(&self, f: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, Millis) -> Result<T, LedgerError> + Send + 'static,
    {
        let clock = Arc::clone(&self.clock);
        self.writer.write(move |conn| f(conn, clock.now())).await
    }

    /// Runs the read `f` on the read connection, off the async runtime.
    async fn read<T, F>(&self, f: F) -> Result<T, LedgerError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, Millis) -> Result<T, LedgerError> + Send + 'static,
    {
        let conn = Arc::clone(&self.reader);
        let clock = Arc::clone(&self.clock);
        tokio::task::spawn_blocking(move || {
            let mut guard =
                conn.lock().map_err(|_| LedgerError::Unavailable("ledger connection lock poisoned".into()))?;
            f(&mut guard, clock.now())
        })
        .await
        .map_err(|e| LedgerError::Unavailable(format!("ledger call did not finish: {e}")))?
    }
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn thread(
        &self,
        thread_key: &ThreadKey,
        root_id: Option<&str>,
        window_start: Millis,
    ) -> Result<ThreadSnapshot, LedgerError> {
        let key = thread_key.clone();
        let root = root_id.map(str::to_owned);
        self.read(move |conn, _now| snapshot(conn, &key, root.as_deref(), window_start)).await
    }

    async fn apply(&self, delivery: &NewDelivery, effect: &Effect) -> Result<Applied, LedgerError> {
        let delivery = delivery.clone();
        let effect = effect.clone();
        let purged_at = Arc::clone(&self.purged_at);
        self.write(move |tx, now| apply(tx, &delivery, &effect, now, purge_due(&purged_at, now))).await
    }

    /// One job of the group commit: the snapshot, the rules and the apply see the same state, so
    /// two deliveries racing on one thread are decided one after the other (the run budget, for
    /// one, cannot be overshot by deliveries decided side by side).
    async fn decide_and_apply(
        &self,
        thread: Option<ThreadQuery>,
        decide: Decide,
    ) -> Result<(Applied, ReasonCode), LedgerError> {
        let purged_at = Arc::clone(&self.purged_at);
        self.write(move |tx, now| {
            let snapshot = match &thread {
                Some(q) => snapshot(tx, &q.key, q.root_id.as_deref(), q.window_start)?,
                None => ThreadSnapshot::default(),
            };
            let (delivery, effect) = decide(&snapshot);
            Ok((apply(tx, &delivery, &effect, now, purge_due(&purged_at, now))?, delivery.reason))
        })
        .await
    }

    async fn transition(&self, id: &TaskId, transition: &Transition) -> Result<Task, LedgerError> {
        let id = id.clone();
        let transition = transition.clone();
        self.write(move |tx, now| {
            let task = read_task(tx, &id)?.ok_or_else(|| LedgerError::NotFound(id.clone()))?;
            let next = task.apply(&transition, now)?;
            if matches!(transition, Transition::Claim { .. }) {
                let busy = tasks_in(tx, &task.thread_key, &ACTIVE)?
                    .into_iter()
                    .any(|other| other.id != task.id && !other.is_claimable(now));
                if busy {
                    return Err(
                        TransitionError::NotAllowed { task: task.id, transition: "claim", state: task.state }.into()
                    );
                }
            }
            if update_task(tx, &next, task.version)? {
                Ok(next)
            } else {
                Err(LedgerError::Contention(format!("task {id}")))
            }
        })
        .await
    }

    async fn task(&self, id: &TaskId) -> Result<Option<Task>, LedgerError> {
        let id = id.clone();
        self.read(move |conn, _now| read_task(conn, &id)).await
    }

    async fn tasks(&self, filter: &TaskFilter) -> Result<Vec<Task>, LedgerError> {
        let filter = filter.clone();
        self.read(move |conn, _now| {
            let mut sql = String::from("SELECT body FROM tasks WHERE 1 = 1");
            let mut args: Vec<Value> = Vec::new();
            if !filter.states.is_empty() {
                sql.push_str(&format!(" AND state IN ({})", placeholders(filter.states.len())));
                args.extend(filter.states.iter().map(|s| Value::Text(s.as_str().to_owned())));
            }
            if let Some(key) = &filter.thread_key {
                sql.push_str(" AND thread_key = ?");
                args.push(Value::Text(key.0.clone()));
            }
            sql.push_str(" ORDER BY created_at DESC, rowid DESC LIMIT ?");
            args.push(Value::Integer(filter.limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX))));
            let mut stmt = conn.prepare(&sql)?;
            let bodies = stmt.query_map(params_from_iter(args), |r| r.get::<_, String>(0))?;
            bodies.map(|b| decode_task(&b?)).collect()
        })
        .await
    }

    async fn delivery(&self, id: &str) -> Result<Option<DeliveryRecord>, LedgerError> {
        let id = id.to_owned();
        self.read(move |conn, now| {
            let mut found = deliveries_where(conn, "id = ?1 AND expires_at > ?2", params![id, now.0])?;
            Ok(found.pop())
        })
        .await
    }

    async fn deliveries(&self, limit: usize) -> Result<Vec<DeliveryRecord>, LedgerError> {
        self.read(move |conn, now| {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            deliveries_where(
                conn,
                "expires_at > ?1 ORDER BY received_at DESC, rowid DESC LIMIT ?2",
                params![now.0, limit],
            )
        })
        .await
    }

    async fn set_codex_thread(&self, thread_key: &ThreadKey, codex_thread_id: &str) -> Result<(), LedgerError> {
        let key = thread_key.clone();
        let id = codex_thread_id.to_owned();
        self.write(move |conn, _now| {
            conn.execute(
                "INSERT INTO threads (thread_key, assigned, codex_thread_id) VALUES (?1, 0, ?2)
                 ON CONFLICT (thread_key) DO UPDATE SET codex_thread_id = excluded.codex_thread_id",
                params![key.as_str(), id],
            )?;
            Ok(())
        })
        .await
    }

    async fn append_transcript(&self, id: &TaskId, entries: &[TranscriptEntry]) -> Result<(), LedgerError> {
        let id = id.clone();
        let rows = entries
            .iter()
            .map(|e| {
                let seq = i64::try_from(e.seq).map_err(|_| LedgerError::Corrupt(format!("seq {} too large", e.seq)))?;
                let body = serde_json::to_string(e).map_err(|e| LedgerError::Corrupt(format!("encode entry: {e}")))?;
                Ok((seq, body))
            })
            .collect::<Result<Vec<_>, LedgerError>>()?;
        self.write(move |tx, _now| {
            let mut insert = tx.prepare_cached(
                "INSERT INTO transcript (task_id, seq, body) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
            )?;
            for (seq, body) in rows {
                insert.execute(params![id.as_str(), seq, body])?;
            }
            Ok(())
        })
        .await
    }

    async fn transcript(&self, id: &TaskId) -> Result<Vec<TranscriptEntry>, LedgerError> {
        let id = id.clone();
        self.read(move |conn, _now| {
            let mut stmt = conn.prepare_cached("SELECT body FROM transcript WHERE task_id = ?1 ORDER BY seq")?;
            let bodies = stmt.query_map([id.as_str()], |r| r.get::<_, String>(0))?;
            bodies
                .map(|b| serde_json::from_str(&b?).map_err(|e| LedgerError::Corrupt(format!("transcript entry: {e}"))))
                .collect()
        })
        .await
    }

    async fn stranded(&self, created_before: Millis, limit: usize) -> Result<Vec<Task>, LedgerError> {
        self.read(move |conn, _now| {
            let mut stmt = conn.prepare_cached(
                "SELECT body FROM tasks WHERE state = 'queued' AND created_at <= ?1 ORDER BY created_at, rowid",
            )?;
            let bodies = stmt.query_map([created_before.0], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for body in bodies {
                let task = decode_task(&body?)?;
                if task.enqueued_at.is_none() {
                    out.push(task);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
            Ok(out)
        })
        .await
    }
}

/// What the rules need to know about `key` (see [`Ledger::thread`]), read on `conn` (the read
/// connection, or the writer's transaction) in one statement, so one consistent view.
fn snapshot(
    conn: &Connection,
    key: &ThreadKey,
    root: Option<&str>,
    window_start: Millis,
) -> Result<ThreadSnapshot, LedgerError> {
    // One statement: the oldest queued task, the newest active one, the runs in the window, the
    // root's participation (never, for no root: `= NULL` is not true), and the thread's record.
    let (queued, active, runs, participates, assigned, codex_thread_id) = conn
        .prepare_cached(
            "SELECT
               (SELECT id FROM tasks WHERE thread_key = ?1 AND state = 'queued' ORDER BY created_at, rowid LIMIT 1),
               (SELECT id FROM tasks WHERE thread_key = ?1 AND state IN ('dispatched', 'running')
                ORDER BY created_at DESC, rowid DESC LIMIT 1),
               (SELECT COUNT(*) FROM tasks WHERE thread_key = ?1 AND created_at >= ?2),
               EXISTS (SELECT 1 FROM participations WHERE thread_key = ?1 AND root_id = ?3),
               (SELECT assigned FROM threads WHERE thread_key = ?1),
               (SELECT codex_thread_id FROM threads WHERE thread_key = ?1)",
        )?
        .query_row(params![key.as_str(), window_start.0, root], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, bool>(3)?,
                r.get::<_, Option<bool>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
    Ok(ThreadSnapshot {
        queued: queued.map(TaskId),
        active: active.map(TaskId),
        runs_in_window: u32::try_from(runs).unwrap_or(u32::MAX),
        participates,
        assigned_to_agent: assigned.unwrap_or(false),
        codex_thread_id,
    })
}

/// Forgets the delivery records past their time: `?1` is now minus [`DELIVERY_TTL`], `?2` now.
/// Every record expires `DELIVERY_TTL` after receipt, so the expired ones are found on the
/// `received_at` index (schema v4); `expires_at` still has the last word.
pub(super) const PURGE_EXPIRED: &str = "DELETE FROM deliveries WHERE received_at <= ?1 AND expires_at <= ?2";

/// True when a write at `now` should purge: [`PURGE_EVERY`] or more since the last purge (by this
/// clock: a clock set back counts as due), which it then records as now. Writes run one at a time
/// on the writer thread, so the load and store need no stronger ordering.
fn purge_due(purged_at: &AtomicI64, now: Millis) -> bool {
    let last = purged_at.load(Ordering::Relaxed);
    let due = last == i64::MIN || now.0 < last || now.minus(PURGE_EVERY).0 >= last;
    if due {
        purged_at.store(now.0, Ordering::Relaxed);
    }
    due
}

/// Records `delivery` and applies `effect` inside the writer's transaction (see [`Ledger::apply`]),
/// first purging expired delivery records when `purge` says so.
fn apply(
    tx: &Connection,
    delivery: &NewDelivery,
    effect: &Effect,
    now: Millis,
    purge: bool,
) -> Result<Applied, LedgerError> {
    if purge {
        tx.prepare_cached(PURGE_EXPIRED)?.execute([now.minus(DELIVERY_TTL).0, now.0])?;
    }
    // An expired record not purged yet does not count: the id is new again.
    let seen: bool = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = ?1 AND expires_at > ?2)")?
        .query_row(params![delivery.id, now.0], |r| r.get(0))?;
    if seen {
        return Ok(Applied::Duplicate);
    }
    let (applied, task_id) = match effect {
        Effect::Nothing => (Applied::Recorded, None),
        Effect::Trigger(nt) => trigger(tx, nt, now)?,
        Effect::CancelThread { thread_key, reason } => cancel_thread(tx, thread_key, *reason, now)?,
        Effect::RetractComment { thread_key, comment_id } => retract(tx, thread_key, comment_id, now)?,
        Effect::Unassign { thread_key } => {
            set_assigned(tx, thread_key, false)?;
            (Applied::Recorded, None)
        }
    };
    // REPLACE: only an expired record of this id can be there (the check above), and it goes.
    tx.prepare_cached(
        "INSERT OR REPLACE INTO deliveries (id, tracker, event, thread_key, reason, task_id, received_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        delivery.id,
        delivery.tracker.as_str(),
        delivery.event,
        delivery.thread_key.as_ref().map(ThreadKey::as_str),
        applied.reason(delivery.reason).to_string(),
        task_id.as_ref().map(TaskId::as_str),
        now.0,
        now.plus(DELIVERY_TTL).0,
    ])?;
    Ok(applied)
}

/// Coalesces `nt` into the thread's queued task, or creates one; records participation and
/// assignment. Decides from the v3 index columns (`trigger_comments`, `trigger_count`,
/// `trigger_bytes`) and decodes only the queued task it must change.
fn trigger(tx: &Connection, nt: &NewTrigger, now: Millis) -> Result<(Applied, Option<TaskId>), LedgerError> {
    let key = nt.thread_key.as_str();
    // One task per triggering comment: a comment that already asked for a task of this thread, in
    // any state, changes nothing, whatever delivery carried it this time (a task no longer queued
    // is named first, should an old file hold the comment twice).
    if let Some(comment) = &nt.trigger.comment_id {
        let holder: Option<String> = tx
            .prepare_cached(
                "SELECT t.id FROM trigger_comments AS c JOIN tasks AS t ON t.id = c.task_id
                 WHERE c.thread_key = ?1 AND c.comment_id = ?2
                 ORDER BY t.state = 'queued', t.created_at, t.rowid LIMIT 1",
            )?
            .query_row([key, comment], |r| r.get(0))
            .optional()?;
        if let Some(id) = holder {
            let id = TaskId(id);
            return Ok((Applied::KnownComment(id.clone()), Some(id)));
        }
    }
    let queued: Option<(String, i64, i64)> = tx
        .prepare_cached(
            "SELECT id, trigger_count, trigger_bytes FROM tasks WHERE thread_key = ?1 AND state = 'queued'
             ORDER BY created_at, rowid LIMIT 1",
        )?
        .query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let applied = match queued {
        // A busy thread's full task is refused from the index, without reading the task.
        Some((id, count, bytes))
            if task::is_full(
                usize::try_from(count).unwrap_or(0),
                usize::try_from(bytes).unwrap_or(0),
                nt.trigger.body.len(),
            ) =>
        {
            Applied::TaskFull(TaskId(id))
        }
        Some((id, _, _)) => {
            let id = TaskId(id);
            let mut task = read_task(tx, &id)?.ok_or_else(|| LedgerError::NotFound(id.clone()))?;
            let expected = task.version;
            match task.coalesce(&nt.trigger, &nt.permission, now) {
                Coalesce::Joined => {
                    if !update_task(tx, &task, expected)? {
                        return Err(LedgerError::Contention(format!("task {}", task.id)));
                    }
                    index_comment(tx, &task.thread_key, &nt.trigger, &task.id)?;
                    Applied::Coalesced(task)
                }
                Coalesce::Known => Applied::KnownComment(task.id),
                Coalesce::Full => Applied::TaskFull(task.id),
            }
        }
        None => {
            let task =
                Task::new(nt.thread_key.clone(), nt.subject.clone(), nt.trigger.clone(), nt.permission.clone(), now);
            tx.prepare_cached(
                "INSERT INTO tasks (id, thread_key, state, created_at, version, body, trigger_count, trigger_bytes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                task.id.as_str(),
                task.thread_key.as_str(),
                task.state.as_str(),
                task.created_at.0,
                version_column(task.version)?,
                encode_task(&task)?,
                count_column(task.triggers.len())?,
                count_column(task.trigger_bytes())?,
            ])?;
            index_comment(tx, &task.thread_key, &nt.trigger, &task.id)?;
            Applied::Enqueued(task)
        }
    };
    if let Some(root) = &nt.participates_in {
        tx.prepare_cached("INSERT OR IGNORE INTO participations (thread_key, root_id) VALUES (?1, ?2)")?
            .execute(params![nt.thread_key.as_str(), root])?;
    }
    if nt.marks_assigned {
        set_assigned(tx, &nt.thread_key, true)?;
    }
    let id = match &applied {
        Applied::Coalesced(t) | Applied::Enqueued(t) => Some(t.id.clone()),
        Applied::KnownComment(id) | Applied::TaskFull(id) => Some(id.clone()),
        Applied::Duplicate | Applied::Recorded | Applied::Cancelled(_) | Applied::NothingToCancel => None,
    };
    Ok((applied, id))
}

fn cancel_thread(
    tx: &Connection,
    key: &ThreadKey,
    reason: CancelReason,
    now: Millis,
) -> Result<(Applied, Option<TaskId>), LedgerError> {
    let mut ids = Vec::new();
    for task in tasks_in(tx, key, &UNFINISHED)? {
        let next = task.apply(&Transition::Cancel { reason }, now)?;
        if !update_task(tx, &next, task.version)? {
            return Err(LedgerError::Contention(format!("task {}", task.id)));
        }
        ids.push(task.id);
    }
    if ids.is_empty() {
        return Ok((Applied::NothingToCancel, None));
    }
    let first = ids.first().cloned();
    Ok((Applied::Cancelled(ids), first))
}

fn retract(
    tx: &Connection,
    key: &ThreadKey,
    comment_id: &str,
    now: Millis,
) -> Result<(Applied, Option<TaskId>), LedgerError> {
    let mut cancelled = Vec::new();
    let mut trimmed = None;
    for mut task in tasks_in(tx, key, &UNFINISHED)? {
        if !task.comment_ids().contains(&comment_id) {
            continue;
        }
        let expected = task.version;
        let next = if task.triggers.iter().all(|t| t.comment_id.as_deref() == Some(comment_id)) {
            cancelled.push(task.id.clone());
            task.apply(&Transition::Cancel { reason: CancelReason::TriggerDeleted }, now)?
        } else {
            task.triggers.retain(|t| t.comment_id.as_deref() != Some(comment_id));
            task.updated_at = now;
            task.version += 1;
            trimmed = Some(task.id.clone());
            task
        };
        if !update_task(tx, &next, expected)? {
            return Err(LedgerError::Contention(format!("task {}", next.id)));
        }
        if trimmed.as_ref() == Some(&next.id) {
            tx.prepare_cached(
                "DELETE FROM trigger_comments WHERE thread_key = ?1 AND comment_id = ?2 AND task_id = ?3",
            )?
            .execute(params![key.as_str(), comment_id, next.id.as_str()])?;
        }
    }
    if let Some(first) = cancelled.first().cloned() {
        return Ok((Applied::Cancelled(cancelled), Some(first)));
    }
    match trimmed {
        Some(id) => Ok((Applied::Recorded, Some(id))),
        None => Ok((Applied::NothingToCancel, None)),
    }
}

fn set_assigned(tx: &Connection, key: &ThreadKey, assigned: bool) -> Result<(), LedgerError> {
    tx.prepare_cached(
        "INSERT INTO threads (thread_key, assigned) VALUES (?1, ?2)
         ON CONFLICT (thread_key) DO UPDATE SET assigned = excluded.assigned",
    )?
    .execute(params![key.as_str(), assigned])?;
    Ok(())
}

/// The thread's tasks in `states`, oldest first.
fn tasks_in(tx: &Connection, key: &ThreadKey, states: &[TaskState]) -> Result<Vec<Task>, LedgerError> {
    let sql = format!(
        "SELECT body FROM tasks WHERE thread_key = ? AND state IN ({}) ORDER BY created_at, rowid",
        placeholders(states.len())
    );
    let args = std::iter::once(key.as_str()).chain(states.iter().map(|s| s.as_str()));
    let mut stmt = tx.prepare_cached(&sql)?;
    let bodies = stmt.query_map(params_from_iter(args), |r| r.get::<_, String>(0))?;
    bodies.map(|b| decode_task(&b?)).collect()
}

fn read_task(tx: &Connection, id: &TaskId) -> Result<Option<Task>, LedgerError> {
    let body: Option<String> =
        tx.prepare_cached("SELECT body FROM tasks WHERE id = ?1")?.query_row([id.as_str()], |r| r.get(0)).optional()?;
    body.as_deref().map(decode_task).transpose()
}

/// Writes `task` if its stored version is still `expected`; false when someone else wrote first.
fn update_task(tx: &Connection, task: &Task, expected: u64) -> Result<bool, LedgerError> {
    let rows = tx
        .prepare_cached(
            "UPDATE tasks SET state = ?1, version = ?2, body = ?3, trigger_count = ?4, trigger_bytes = ?5
             WHERE id = ?6 AND version = ?7",
        )?
        .execute(params![
            task.state.as_str(),
            version_column(task.version)?,
            encode_task(task)?,
            count_column(task.triggers.len())?,
            count_column(task.trigger_bytes())?,
            task.id.as_str(),
            version_column(expected)?,
        ])?;
    Ok(rows == 1)
}

fn deliveries_where(
    conn: &Connection,
    condition: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<DeliveryRecord>, LedgerError> {
    type Row = (String, String, String, Option<String>, String, Option<String>, i64, i64);
    let sql = format!(
        "SELECT id, tracker, event, thread_key, reason, task_id, received_at, expires_at FROM deliveries WHERE {condition}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(args, |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
    })?;
    rows.map(|row| {
        let (id, tracker, event, thread_key, reason, task_id, received_at, expires_at): Row = row?;
        let tracker = match tracker.as_str() {
            "github" => Tracker::Github,
            "linear" => Tracker::Linear,
            other => return Err(LedgerError::Corrupt(format!("delivery {id}: unknown tracker {other:?}"))),
        };
        let reason = crate::decision::ReasonCode::parse(&reason)
            .ok_or_else(|| LedgerError::Corrupt(format!("delivery {id}: unknown reason {reason:?}")))?;
        Ok(DeliveryRecord {
            id,
            tracker,
            event,
            thread_key: thread_key.map(ThreadKey),
            reason,
            task_id: task_id.map(TaskId),
            received_at: Millis(received_at),
            expires_at: Millis(expires_at),
        })
    })
    .collect()
}

/// Records that `trigger`'s comment (if any) asked for `task`.
fn index_comment(tx: &Connection, key: &ThreadKey, trigger: &Trigger, task: &TaskId) -> Result<(), LedgerError> {
    if let Some(comment) = &trigger.comment_id {
        tx.prepare_cached(
            "INSERT OR IGNORE INTO trigger_comments (thread_key, comment_id, task_id) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![key.as_str(), comment, task.as_str()])?;
    }
    Ok(())
}

/// Fills the v3 index (trigger counts and bytes, `trigger_comments`) from the stored tasks: the
/// schema upgrade from v2, inside the migration's transaction.
/// Pages through the tasks by rowid, so a large file is never held in memory at once.
pub(super) fn index_stored_tasks(tx: &Connection) -> Result<(), LedgerError> {
    const PAGE: i64 = 1000;
    let mut after = 0_i64;
    loop {
        let page = {
            let mut stmt =
                tx.prepare_cached("SELECT rowid, body FROM tasks WHERE rowid > ?1 ORDER BY rowid LIMIT ?2")?;
            let rows = stmt.query_map([after, PAGE], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
            rows.collect::<Result<Vec<_>, _>>()?
        };
        let Some(&(last, _)) = page.last() else { return Ok(()) };
        for (_, body) in page {
            let task = decode_task(&body)?;
            tx.execute(
                "UPDATE tasks SET trigger_count = ?1, trigger_bytes = ?2 WHERE id = ?3",
                params![count_column(task.triggers.len())?, count_column(task.trigger_bytes())?, task.id.as_str()],
            )?;
            for trigger in &task.triggers {
                index_comment(tx, &task.thread_key, trigger, &task.id)?;
            }
        }
        after = last;
    }
}

fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

fn count_column(n: usize) -> Result<i64, LedgerError> {
    i64::try_from(n).map_err(|_| LedgerError::Corrupt(format!("count {n} overflows")))
}

fn version_column(version: u64) -> Result<i64, LedgerError> {
    i64::try_from(version).map_err(|_| LedgerError::Corrupt(format!("task version {version} overflows")))
}

fn encode_task(task: &Task) -> Result<String, LedgerError> {
    serde_json::to_string(task).map_err(|e| LedgerError::Corrupt(format!("task {}: {e}", task.id)))
}

fn decode_task(body: &str) -> Result<Task, LedgerError> {
    serde_json::from_str(body).map_err(|e| LedgerError::Corrupt(format!("stored task: {e}")))
}
