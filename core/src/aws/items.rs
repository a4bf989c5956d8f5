//! The DynamoDB item shapes of the ledger: key builders and encode/decode, nothing else (no I/O).
//!
//! Tasks are stored as their whole JSON (`body`, the record, as in SQLite) next to the few
//! attributes that keys, conditions and filters need. Numbers are DynamoDB `N`; sort keys embed
//! times as 20-digit zero-padded milliseconds so that string order is time order.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::clock::Millis;
use crate::event::Tracker;
use crate::ledger::{DeliveryRecord, LedgerError};
use crate::task::{Task, TaskId, TaskState, ThreadKey};
use crate::transcript::TranscriptEntry;

/// One DynamoDB item.
pub(super) type Item = HashMap<String, AttributeValue>;

/// The thread record's sort key (in the thread's partition).
pub(super) const THREAD_SK: &str = "THREAD";
/// Sort-key prefix of tasks in their thread's partition.
pub(super) const TASK_SK_PREFIX: &str = "TASK#";
/// Sort-key prefix of participation roots in their thread's partition.
pub(super) const ROOT_SK_PREFIX: &str = "ROOT#";
/// Sort key of a task's reference item (in the task's own partition).
pub(super) const REF_SK: &str = "REF";
/// Sort-key prefix of transcript entries (in the task's own partition).
pub(super) const SEQ_SK_PREFIX: &str = "SEQ#";
/// Sort key of a delivery record.
pub(super) const DELIVERY_SK: &str = "DELIVERY";
/// The GSI partition of every delivery (newest-first listing).
pub(super) const DELIVERIES_GSI_PK: &str = "DELIVERIES";
/// The GSI partition tag of queued tasks that never reached the queue (the sweeper's list).
pub(super) const UNSENT: &str = "queued-unsent";

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn thread_pk(key: &ThreadKey) -> String {
    format!("THREAD#{key}")
}

pub(super) fn task_pk(id: &TaskId) -> String {
    format!("TASK#{id}")
}

pub(super) fn delivery_pk(id: &str) -> String {
    format!("DELIVERY#{id}")
}

/// A time as a sortable key fragment.
pub(super) fn time_key(t: Millis) -> String {
    format!("{:020}", t.0.max(0))
}

pub(super) fn task_sk(task: &Task) -> String {
    format!("{TASK_SK_PREFIX}{}#{}", time_key(task.created_at), task.id)
}

/// The GSI partition a task is listed under: its state, with queued tasks that never reached the
/// queue apart (so the sweeper reads only those).
pub(super) fn state_tag(state: TaskState, enqueued: bool) -> &'static str {
    match state {
        TaskState::Queued if !enqueued => UNSENT,
        TaskState::Queued
        | TaskState::Dispatched
        | TaskState::Running
        | TaskState::Completed
        | TaskState::Failed
        | TaskState::Cancelled => state.as_str(),
    }
}

pub(super) fn tasks_gsi_pk(tag: &str) -> String {
    format!("TASKS#{tag}")
}

pub(super) fn key(pk: String, sk: impl Into<String>) -> Item {
    HashMap::from([("pk".to_owned(), s(pk)), ("sk".to_owned(), s(sk))])
}

pub(super) fn get_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

pub(super) fn get_n(item: &Item, name: &str) -> Option<i64> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

pub(super) fn get_bool(item: &Item, name: &str) -> Option<bool> {
    item.get(name).and_then(|v| v.as_bool().ok()).copied()
}

/// A task item (in its thread's partition).
pub(super) fn task_item(task: &Task) -> Result<Item, LedgerError> {
    let body = serde_json::to_string(task).map_err(|e| LedgerError::Corrupt(format!("task {}: {e}", task.id)))?;
    let mut item = key(thread_pk(&task.thread_key), task_sk(task));
    item.insert("id".into(), s(task.id.as_str()));
    item.insert("state".into(), s(task.state.as_str()));
    item.insert("version".into(), n(task.version));
    item.insert("created_at".into(), n(task.created_at.0));
    item.insert("body".into(), s(body));
    item.insert("gsi1pk".into(), s(tasks_gsi_pk(state_tag(task.state, task.enqueued_at.is_some()))));
    item.insert("gsi1sk".into(), s(format!("{}#{}", time_key(task.created_at), task.id)));
    Ok(item)
}

/// The task's reference item: where the task lives (its thread partition and sort key). Written
/// once with the task and never changed, so a consistent read of it always finds the task.
pub(super) fn ref_item(task: &Task) -> Item {
    let mut item = key(task_pk(&task.id), REF_SK);
    item.insert("thread_pk".into(), s(thread_pk(&task.thread_key)));
    item.insert("task_sk".into(), s(task_sk(task)));
    item
}

pub(super) fn decode_task(item: &Item) -> Result<Task, LedgerError> {
    let body = get_s(item, "body").ok_or_else(|| LedgerError::Corrupt("task item without body".into()))?;
    serde_json::from_str(body).map_err(|e| LedgerError::Corrupt(format!("stored task: {e}")))
}

/// A delivery record item; `expires_at` is the TTL attribute (seconds), `expires_at_ms` the exact value.
pub(super) fn delivery_item(record: &DeliveryRecord) -> Item {
    let mut item = key(delivery_pk(&record.id), DELIVERY_SK);
    item.insert("id".into(), s(record.id.as_str()));
    item.insert("tracker".into(), s(record.tracker.as_str()));
    item.insert("event".into(), s(record.event.as_str()));
    if let Some(k) = &record.thread_key {
        item.insert("thread_key".into(), s(k.as_str()));
    }
    item.insert("reason".into(), s(record.reason.to_string()));
    if let Some(t) = &record.task_id {
        item.insert("task_id".into(), s(t.as_str()));
    }
    item.insert("received_at".into(), n(record.received_at.0));
    item.insert("expires_at_ms".into(), n(record.expires_at.0));
    item.insert(super::TTL_ATTRIBUTE.into(), n(record.expires_at.0.div_euclid(1000) + 1));
    item.insert("gsi1pk".into(), s(DELIVERIES_GSI_PK));
    item.insert("gsi1sk".into(), s(format!("{}#{}", time_key(record.received_at), record.id)));
    item
}

pub(super) fn decode_delivery(item: &Item) -> Result<DeliveryRecord, LedgerError> {
    let id = get_s(item, "id").ok_or_else(|| LedgerError::Corrupt("delivery item without id".into()))?.to_owned();
    let corrupt = |what: &str| LedgerError::Corrupt(format!("delivery {id}: {what}"));
    let tracker = match get_s(item, "tracker") {
        Some("github") => Tracker::Github,
        Some("linear") => Tracker::Linear,
        Some(_) | None => return Err(corrupt("unknown tracker")),
    };
    let reason =
        get_s(item, "reason").and_then(crate::decision::ReasonCode::parse).ok_or_else(|| corrupt("unknown reason"))?;
    Ok(DeliveryRecord {
        tracker,
        event: get_s(item, "event").ok_or_else(|| corrupt("no event"))?.to_owned(),
        thread_key: get_s(item, "thread_key").map(|k| ThreadKey(k.to_owned())),
        reason,
        task_id: get_s(item, "task_id").map(|t| TaskId(t.to_owned())),
        received_at: Millis(get_n(item, "received_at").ok_or_else(|| corrupt("no received_at"))?),
        expires_at: Millis(get_n(item, "expires_at_ms").ok_or_else(|| corrupt("no expires_at_ms"))?),
        id,
    })
}

pub(super) fn transcript_item(id: &TaskId, entry: &TranscriptEntry) -> Result<Item, LedgerError> {
    let body = serde_json::to_string(entry).map_err(|e| LedgerError::Corrupt(format!("encode entry: {e}")))?;
    let mut item = key(task_pk(id), format!("{SEQ_SK_PREFIX}{:020}", entry.seq));
    item.insert("body".into(), s(body));
    Ok(item)
}

pub(super) fn decode_transcript(item: &Item) -> Result<TranscriptEntry, LedgerError> {
    let body = get_s(item, "body").ok_or_else(|| LedgerError::Corrupt("transcript item without body".into()))?;
    serde_json::from_str(body).map_err(|e| LedgerError::Corrupt(format!("transcript entry: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_keys_sort_like_times() {
        let times = [Millis(0), Millis(9), Millis(10), Millis(1_700_000_000_000), Millis(i64::MAX)];
        let keys: Vec<String> = times.iter().map(|t| time_key(*t)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
        assert!(keys.iter().all(|k| k.len() == 20));
    }

    #[test]
    fn unsent_queued_tasks_are_listed_apart() {
        assert_eq!(state_tag(TaskState::Queued, false), "queued-unsent");
        assert_eq!(state_tag(TaskState::Queued, true), "queued");
        assert_eq!(state_tag(TaskState::Running, false), "running");
    }
}
