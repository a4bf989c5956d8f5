//! [`SqliteQueue`]: the [`Queue`] port over the `queue_messages` table, with SQS FIFO semantics.
//!
//! A task id is stored once while its message is live, and after the delete for the rest of
//! SQS's five-minute window from the send (the row stays as a tombstone, purged by later sends), so
//! a repeated delete is Ok. (SQS would accept a duplicate of a live message older than five minutes.)
//! Only the oldest live message of a group is receivable, and only when visible, so a group waits
//! while its head is in flight. Visibility uses the system clock, like SQS, not the ledger's clock.
//! A receipt is `{seq}:{random}`; each receive issues a new one and invalidates the previous one.
//! Deleting with a receipt whose message is gone (tombstone purged) is Ok: it cannot be told apart
//! from a long-deleted message. Long polling wakes on a send through this handle's `Notify` and
//! re-checks every [`POLL_INTERVAL`] for other processes and re-appearing messages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::Notify;

use crate::clock::{Clock, Millis, SystemClock};
use crate::queue::{Queue, QueueError, QueueMessage, Receipt, Received};
use crate::task::{TaskId, ThreadKey};

use super::writer::Writer;

/// SQS FIFO's deduplication interval: a task id sent again within it is stored once.
const DEDUPE_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How often a long poll re-checks the file when no send in this process woke it: short enough
/// that another process's send or an expired visibility is seen quickly, long enough to stay idle.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// The SQLite queue. Cheap to clone; clones share the writer (with the ledger of the same
/// [`super::open`]) and one wake-up signal. Build it with [`super::open`].
#[derive(Debug, Clone)]
pub struct SqliteQueue {
    writer: Arc<Writer>,
    sent: Arc<Notify>,
}

impl SqliteQueue {
    pub(super) fn new(writer: Arc<Writer>) -> SqliteQueue {
        SqliteQueue { writer, sent: Arc::new(Notify::new()) }
    }

    /// Runs `f` in the writer's next group transaction, with the wall-clock "now" read when it
    /// runs. Every queue call writes (a receive takes a receipt), so all of them go this way.
    async fn run<T, F>(&self, f: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, Millis) -> Result<T, QueueError> + Send + 'static,
    {
        self.writer.write(move |conn| f(conn, SystemClock.now())).await
    }

    /// One non-waiting receive: the visible heads of up to `max` groups, oldest first.
    async fn receive_now(&self, max: usize, visibility: Duration) -> Result<Vec<Received>, QueueError> {
        self.run(move |tx, now| {
            let heads = {
                let mut stmt = tx.prepare_cached(
                    "SELECT seq, task_id, grp, receive_count FROM queue_messages AS m
                     WHERE m.deleted_at IS NULL AND m.visible_at <= ?1
                       AND NOT EXISTS (SELECT 1 FROM queue_messages AS o
                                       WHERE o.grp = m.grp AND o.deleted_at IS NULL AND o.seq < m.seq)
                     ORDER BY m.seq LIMIT ?2",
                )?;
                let rows = stmt.query_map(params![now.0, i64::try_from(max).unwrap_or(i64::MAX)], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, u32>(3)?))
                })?;
                rows.collect::<Result<Vec<_>, _>>()?
            };
            let mut received = Vec::with_capacity(heads.len());
            for (seq, task_id, group, count) in heads {
                let receipt = format!("{seq}:{}", uuid::Uuid::new_v4().simple());
                tx.prepare_cached(
                    "UPDATE queue_messages SET receipt = ?1, visible_at = ?2, receive_count = ?3 WHERE seq = ?4",
                )?
                .execute(params![receipt, now.plus(visibility).0, count + 1, seq])?;
                received.push(Received {
                    task_id: TaskId(task_id),
                    group: ThreadKey(group),
                    receipt: Receipt(receipt),
                    receive_count: count + 1,
                });
            }
            Ok(received)
        })
        .await
    }
}

/// A receipt's message: its `seq`, or `None` when the text was never a receipt of ours.
fn receipt_seq(receipt: &Receipt) -> Option<i64> {
    receipt.0.split_once(':').and_then(|(seq, _)| seq.parse().ok())
}

/// The stored state of the message a receipt names: `(current receipt, deleted)`.
fn message_of(conn: &Connection, seq: i64) -> Result<Option<(Option<String>, bool)>, QueueError> {
    Ok(conn
        .prepare_cached("SELECT receipt, deleted_at IS NOT NULL FROM queue_messages WHERE seq = ?1")?
        .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

#[async_trait]
impl Queue for SqliteQueue {
    async fn send(&self, msg: &QueueMessage) -> Result<(), QueueError> {
        let msg = msg.clone();
        self.run(move |tx, now| {
            // Forget tombstones whose dedupe window has passed, so their task ids may be sent again.
            tx.prepare_cached("DELETE FROM queue_messages WHERE deleted_at IS NOT NULL AND sent_at <= ?1")?
                .execute([now.minus(DEDUPE_WINDOW).0])?;
            tx.prepare_cached(
                "INSERT INTO queue_messages (task_id, grp, sent_at, visible_at, receipt, receive_count)
                 VALUES (?1, ?2, ?3, ?3, NULL, 0) ON CONFLICT (task_id) DO NOTHING",
            )?
            .execute(params![msg.task_id.as_str(), msg.group.as_str(), now.0])?;
            Ok(())
        })
        .await?;
        self.sent.notify_waiters();
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration, visibility: Duration) -> Result<Vec<Received>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + wait;
        loop {
            // Registered before looking, so a send between the look and the wait still wakes us.
            let woken = self.sent.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let received = self.receive_now(max, visibility).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !received.is_empty() || left.is_zero() {
                return Ok(received);
            }
            // Either outcome (woken or the nap ran out) means "look again".
            let _nap = tokio::time::timeout(left.min(POLL_INTERVAL), woken).await;
        }
    }

    async fn extend(&self, receipt: &Receipt, visibility: Duration) -> Result<(), QueueError> {
        let receipt = receipt.clone();
        self.run(move |tx, now| {
            let seq = receipt_seq(&receipt).ok_or(QueueError::InvalidReceipt)?;
            match message_of(tx, seq)? {
                Some((Some(current), false)) if current == receipt.0 => {
                    tx.execute(
                        "UPDATE queue_messages SET visible_at = ?1 WHERE seq = ?2",
                        params![now.plus(visibility).0, seq],
                    )?;
                    Ok(())
                }
                Some(_) | None => Err(QueueError::InvalidReceipt),
            }
        })
        .await
    }

    async fn delete(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let receipt = receipt.clone();
        self.run(move |tx, now| {
            let seq = receipt_seq(&receipt).ok_or(QueueError::InvalidReceipt)?;
            match message_of(tx, seq)? {
                None | Some((_, true)) => Ok(()),
                Some((Some(current), false)) if current == receipt.0 => {
                    tx.execute("UPDATE queue_messages SET deleted_at = ?1 WHERE seq = ?2", params![now.0, seq])?;
                    Ok(())
                }
                // Re-delivered to someone else since: this holder lost the message.
                Some((_, false)) => Err(QueueError::InvalidReceipt),
            }
        })
        .await
    }
}

impl From<super::writer::WriteError> for QueueError {
    fn from(e: super::writer::WriteError) -> Self {
        QueueError::Unavailable(e.0)
    }
}

/// The one place a SQLite error becomes a queue error: all of them are [`QueueError::Unavailable`]
/// (the queue holds no data a caller could repair).
impl From<rusqlite::Error> for QueueError {
    fn from(e: rusqlite::Error) -> Self {
        QueueError::Unavailable(e.to_string())
    }
}
