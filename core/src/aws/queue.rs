//! [`SqsQueue`]: the [`Queue`] port on an SQS FIFO queue.
//!
//! `MessageGroupId` is the thread key when it fits SQS's rules (≤ 128 printable ASCII characters),
//! else `h:` + its SHA-256 ([`message_group_id`]); `MessageDeduplicationId` is the task id. The body
//! is `{"task_id", "thread_key"}`: the id and the real key, never task data (the ledger is the
//! truth). Receives long-poll (`WaitTimeSeconds` ≤ 20, re-issued for longer waits) and read the
//! receive count from `ApproximateReceiveCount`. Visibility is whole seconds, rounded up.
//! A [`Receipt`] is `{message id} {SQS receipt handle}`: this handle refuses to extend with a
//! receipt it has since seen superseded by a newer receive of the same message (real SQS refuses
//! an expired handle; the emulator does not), and SQS refuses what it does not know.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use aws_sdk_sqs::Client;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::queue_error;
use crate::queue::{Queue, QueueError, QueueMessage, Receipt, Received};
use crate::task::{TaskId, ThreadKey};

/// SQS's longest long poll per call.
const MAX_WAIT_PER_CALL: Duration = Duration::from_secs(20);

/// SQS's largest batch per receive.
const MAX_PER_RECEIVE: usize = 10;

/// How many superseded receipts a handle remembers (a worker holds a handful of messages at once).
const TRACKED_RECEIPTS: usize = 1024;

/// The message body: the task id and its real thread key (the group id may be a hash).
#[derive(Debug, Serialize, Deserialize)]
struct Body {
    task_id: TaskId,
    thread_key: ThreadKey,
}

/// The SQS FIFO queue. Cheap to clone; clones share the client and the receipt tracker.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    url: String,
    /// Message id → the newest receipt handle this handle received for it.
    latest: Arc<Mutex<HashMap<String, String>>>,
}

/// The FIFO `MessageGroupId` for a thread key: the key itself when SQS accepts it (1–128
/// characters of `!`..`~`), else `h:` and the hex SHA-256 of the key.
pub fn message_group_id(key: &ThreadKey) -> String {
    let k = key.as_str();
    if !k.is_empty() && k.len() <= 128 && k.bytes().all(|b| b.is_ascii_graphic()) {
        k.to_owned()
    } else {
        format!("h:{}", hex::encode(Sha256::digest(k.as_bytes())))
    }
}

fn whole_seconds(d: Duration) -> i32 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

impl SqsQueue {
    /// A queue handle on `queue_url`.
    pub fn new(config: &aws_config::SdkConfig, queue_url: impl Into<String>) -> SqsQueue {
        SqsQueue::from_client(Client::new(config), queue_url)
    }

    /// A queue handle over an existing client.
    pub fn from_client(client: Client, queue_url: impl Into<String>) -> SqsQueue {
        SqsQueue { client, url: queue_url.into(), latest: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn remember(&self, message_id: &str, handle: &str) {
        if let Ok(mut latest) = self.latest.lock() {
            if latest.len() >= TRACKED_RECEIPTS {
                latest.clear();
            }
            latest.insert(message_id.to_owned(), handle.to_owned());
        }
    }

    fn superseded(&self, message_id: &str, handle: &str) -> bool {
        self.latest.lock().is_ok_and(|latest| latest.get(message_id).is_some_and(|newest| newest != handle))
    }

    fn forget(&self, message_id: &str) {
        if let Ok(mut latest) = self.latest.lock() {
            latest.remove(message_id);
        }
    }

    async fn receive_once(
        &self,
        max: usize,
        wait: Duration,
        visibility: Duration,
    ) -> Result<Vec<Received>, QueueError> {
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(i32::try_from(max.min(MAX_PER_RECEIVE)).unwrap_or(1))
            .wait_time_seconds(whole_seconds(wait))
            .visibility_timeout(whole_seconds(visibility))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| queue_error("receive_message", e))?;
        let mut received = Vec::new();
        for m in out.messages.unwrap_or_default() {
            let (Some(id), Some(handle), Some(body)) = (m.message_id(), m.receipt_handle(), m.body()) else {
                return Err(QueueError::Unavailable("sqs receive_message: message without id, handle or body".into()));
            };
            let body: Body = serde_json::from_str(body)
                .map_err(|e| QueueError::Unavailable(format!("sqs message {id}: unreadable body: {e}")))?;
            let count = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            self.remember(id, handle);
            received.push(Received {
                task_id: body.task_id,
                group: body.thread_key,
                receipt: Receipt(format!("{id} {handle}")),
                receive_count: count,
            });
        }
        Ok(received)
    }
}

/// A receipt's `(message id, SQS handle)`, or `None` when it was never one of ours.
fn split(receipt: &Receipt) -> Option<(&str, &str)> {
    receipt.0.split_once(' ').filter(|(id, handle)| !id.is_empty() && !handle.is_empty())
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, msg: &QueueMessage) -> Result<(), QueueError> {
        let body = serde_json::to_string(&Body { task_id: msg.task_id.clone(), thread_key: msg.group.clone() })
            .map_err(|e| QueueError::Unavailable(format!("encoding message: {e}")))?;
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .message_group_id(message_group_id(&msg.group))
            .message_deduplication_id(msg.task_id.as_str())
            .send()
            .await
            .map_err(|e| queue_error("send_message", e))?;
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration, visibility: Duration) -> Result<Vec<Received>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let got = self.receive_once(max, left.min(MAX_WAIT_PER_CALL), visibility).await?;
            if !got.is_empty() || left <= MAX_WAIT_PER_CALL {
                return Ok(got);
            }
        }
    }

    async fn extend(&self, receipt: &Receipt, visibility: Duration) -> Result<(), QueueError> {
        let (id, handle) = split(receipt).ok_or(QueueError::InvalidReceipt)?;
        if self.superseded(id, handle) {
            return Err(QueueError::InvalidReceipt);
        }
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(handle)
            .visibility_timeout(whole_seconds(visibility))
            .send()
            .await
            .map_err(|e| queue_error("change_message_visibility", e))?;
        Ok(())
    }

    async fn delete(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let (id, handle) = split(receipt).ok_or(QueueError::InvalidReceipt)?;
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(handle)
            .send()
            .await
            .map_err(|e| queue_error("delete_message", e))?;
        self.forget(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_ids_keep_readable_keys_and_hash_the_rest() {
        let plain = ThreadKey("github:acme/app#12:agent".into());
        assert_eq!(message_group_id(&plain), "github:acme/app#12:agent");
        let spaced = ThreadKey("linear:org/issue with space:agent".into());
        let long = ThreadKey(format!("github:{}/r#1:agent", "o".repeat(200)));
        for key in [spaced, long] {
            let id = message_group_id(&key);
            assert!(id.starts_with("h:") && id.len() == 66, "{id}");
        }
    }

    #[test]
    fn visibility_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(30)), 30);
    }
}
