//! The queue port: how task ids travel from ingest to workers.
//!
//! Semantics are SQS FIFO's, so the embedded queue and SQS behave alike:
//! - a message carries a task id only (the ledger is the truth) and belongs to a **group** (the
//!   thread key): messages of one group are delivered in order, and while one is in flight the
//!   rest of its group waits; different groups go in parallel;
//! - sending the same task id twice within the dedupe window stores it once;
//! - a received message is invisible for the visibility timeout, which the holder may extend
//!   ([`Queue::extend`]); if it is not deleted in time it becomes receivable again (and its
//!   receive count grows);
//! - the worker deletes a message only after the task's terminal state is recorded.
//!
//! What it must not do: look inside tasks or decide anything about them.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::task::{TaskId, ThreadKey};

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueMessage {
    /// The task to run (also the deduplication id).
    pub task_id: TaskId,
    /// The ordering group: the task's thread key.
    pub group: ThreadKey,
}

/// An opaque handle for one receipt of a message; valid until the message is deleted or its
/// visibility runs out and someone else receives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Receipt(pub String);

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The task to run.
    pub task_id: TaskId,
    /// Its group.
    pub group: ThreadKey,
    /// The handle for extend and delete.
    pub receipt: Receipt,
    /// How many times this message has been received, this time included.
    pub receive_count: u32,
}

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The receipt is unknown or no longer valid (the message was deleted, or re-delivered to
    /// someone else). Not retryable: the holder lost the message.
    #[error("receipt is no longer valid")]
    InvalidReceipt,
    /// The queue is unreachable, throttled or failing. Retryable.
    #[error("queue unavailable: {0}")]
    Unavailable(String),
}

impl QueueError {
    /// True when trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            QueueError::Unavailable(_) => true,
            QueueError::InvalidReceipt => false,
        }
    }
}

/// The queue port. Implementations: `sqlite::SqliteQueue` (feature `sqlite`), SQS FIFO (later).
#[async_trait]
pub trait Queue: Send + Sync + fmt::Debug {
    /// Puts `msg` on the queue. Idempotent per task id within the dedupe window.
    ///
    /// # Errors
    /// [`QueueError::Unavailable`]; the caller keeps the task `queued` for the sweeper.
    async fn send(&self, msg: &QueueMessage) -> Result<(), QueueError>;

    /// Receives up to `max` messages, waiting up to `wait` for the first one (long polling), and
    /// hides them for `visibility`. Returns an empty list when nothing arrived in time.
    ///
    /// # Errors
    /// [`QueueError::Unavailable`].
    async fn receive(&self, max: usize, wait: Duration, visibility: Duration) -> Result<Vec<Received>, QueueError>;

    /// Keeps the message hidden for `visibility` from now (the worker's heartbeat).
    ///
    /// # Errors
    /// [`QueueError::InvalidReceipt`] when the holder lost the message.
    async fn extend(&self, receipt: &Receipt, visibility: Duration) -> Result<(), QueueError>;

    /// Removes the message for good. Deleting an already deleted message is not an error.
    ///
    /// # Errors
    /// [`QueueError::InvalidReceipt`] for a receipt that was never issued; a store error.
    async fn delete(&self, receipt: &Receipt) -> Result<(), QueueError>;
}
