//! Queue conformance cases: SQS FIFO semantics as [`crate::queue`] states them.
//!
//! Real time, whole seconds for waits and visibility (SQS's unit), each case under ~2.5 s and a
//! few messages deep. Cases assert only what SQS FIFO guarantees: a receive of `max > 1` may
//! return several messages of one group, so ordering and group blocking are checked with `max = 1`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::Backend;
use crate::queue::{QueueError, QueueMessage, Receipt, Received};
use crate::task::{TaskId, ThreadKey};

const SECOND: Duration = Duration::from_secs(1);
const LONG: Duration = Duration::from_secs(30);
const NO_WAIT: Duration = Duration::ZERO;

fn message(group: &str) -> QueueMessage {
    QueueMessage { task_id: TaskId::generate(), group: ThreadKey(format!("github:acme/app#{group}:agent")) }
}

async fn send(b: &Backend, msg: &QueueMessage) {
    b.queue.send(msg).await.expect("send");
}

async fn receive(b: &Backend, max: usize, wait: Duration, visibility: Duration) -> Vec<Received> {
    b.queue.receive(max, wait, visibility).await.expect("receive")
}

/// Receives exactly one message (waiting up to a second) and checks it is `msg`.
async fn receive_one(b: &Backend, msg: &QueueMessage, visibility: Duration) -> Received {
    let got = receive(b, 1, SECOND, visibility).await;
    assert_eq!(got.len(), 1, "expected {} , got {got:?}", msg.task_id);
    let r = got.into_iter().next().expect("one message");
    assert_eq!((&r.task_id, &r.group), (&msg.task_id, &msg.group));
    r
}

/// Send, receive (count 1, its group), delete, delete again; the message does not come back;
/// receipts that were never issued are refused.
pub async fn send_receive_delete(b: Backend) {
    let msg = message("1");
    send(&b, &msg).await;
    let r = receive_one(&b, &msg, SECOND).await;
    assert_eq!(r.receive_count, 1);
    b.queue.delete(&r.receipt).await.expect("delete");
    b.queue.delete(&r.receipt).await.expect("deleting twice is not an error");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(receive(&b, 10, NO_WAIT, SECOND).await, vec![], "a deleted message never returns");
    let garbage = Receipt("not-a-receipt".into());
    assert!(matches!(b.queue.extend(&garbage, SECOND).await, Err(QueueError::InvalidReceipt)));
    assert!(matches!(b.queue.delete(&garbage).await, Err(QueueError::InvalidReceipt)));
}

/// Sending one task id twice stores it once.
pub async fn send_dedupes_by_task_id(b: Backend) {
    let msg = message("1");
    send(&b, &msg).await;
    send(&b, &msg).await;
    let got = receive(&b, 10, SECOND, LONG).await;
    assert_eq!(got.len(), 1, "{got:?}");
    b.queue.delete(&got[0].receipt).await.expect("delete");
    // A second copy would now be the group's head.
    assert_eq!(receive(&b, 10, SECOND, LONG).await, vec![]);
}

/// One group delivers oldest first and waits while its head is in flight; after the delete the
/// next message of the group is delivered.
pub async fn group_order_and_blocking(b: Backend) {
    let (a1, a2, b1) = (message("a"), message("a"), message("b"));
    for m in [&a1, &a2, &b1] {
        send(&b, m).await;
    }
    let mut got = Vec::new();
    for _ in 0..2 {
        got.extend(receive(&b, 1, SECOND, LONG).await);
    }
    let ids: BTreeSet<TaskId> = got.iter().map(|r| r.task_id.clone()).collect();
    assert_eq!(ids, BTreeSet::from([a1.task_id.clone(), b1.task_id.clone()]), "heads of both groups, a1 first");
    assert_eq!(receive(&b, 1, NO_WAIT, LONG).await, vec![], "group a is blocked while a1 is in flight");
    let a1_receipt = &got.iter().find(|r| r.task_id == a1.task_id).expect("a1").receipt;
    b.queue.delete(a1_receipt).await.expect("delete a1");
    receive_one(&b, &a2, LONG).await;
}

/// Different groups are delivered without waiting for each other.
pub async fn groups_run_in_parallel(b: Backend) {
    let msgs = [message("1"), message("2"), message("3")];
    for m in &msgs {
        send(&b, m).await;
    }
    let mut got = BTreeSet::new();
    for _ in 0..3 {
        got.extend(receive(&b, 10, SECOND, LONG).await.into_iter().map(|r| r.task_id));
        if got.len() == msgs.len() {
            break;
        }
    }
    assert_eq!(got, msgs.iter().map(|m| m.task_id.clone()).collect::<BTreeSet<_>>(), "none deleted, all in flight");
}

/// A message not deleted within its visibility comes back with receive count 2 and a new receipt;
/// the old receipt can no longer extend it.
pub async fn visibility_timeout_redelivers(b: Backend) {
    let msg = message("1");
    send(&b, &msg).await;
    let first = receive_one(&b, &msg, SECOND).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = receive_one(&b, &msg, LONG).await;
    assert_eq!(second.receive_count, 2);
    assert_ne!(second.receipt, first.receipt);
    assert!(matches!(b.queue.extend(&first.receipt, LONG).await, Err(QueueError::InvalidReceipt)));
    b.queue.extend(&second.receipt, LONG).await.expect("the current receipt extends");
    b.queue.delete(&second.receipt).await.expect("delete");
}

/// Extending the visibility keeps the message hidden past its first timeout.
pub async fn extend_keeps_hidden(b: Backend) {
    let msg = message("1");
    send(&b, &msg).await;
    let r = receive_one(&b, &msg, SECOND).await;
    b.queue.extend(&r.receipt, Duration::from_secs(5)).await.expect("extend");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(receive(&b, 10, NO_WAIT, LONG).await, vec![], "still hidden");
    b.queue.delete(&r.receipt).await.expect("the receipt is still valid");
}

/// A long poll on an empty queue returns soon after a send, well before its wait is over.
pub async fn long_poll_wakes_on_send(b: Backend) {
    let msg = message("1");
    let queue = b.queue.clone();
    let started = Instant::now();
    let poll = tokio::spawn(async move { queue.receive(1, Duration::from_secs(2), LONG).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    send(&b, &msg).await;
    let got = poll.await.expect("poll task").expect("receive");
    let elapsed = started.elapsed();
    assert_eq!(got.iter().map(|r| &r.task_id).collect::<Vec<_>>(), [&msg.task_id]);
    assert!(elapsed < Duration::from_millis(1900), "woke after {elapsed:?}");
}

/// A receive on an empty queue waits about `wait` and returns nothing.
pub async fn empty_receive_waits(b: Backend) {
    let started = Instant::now();
    assert_eq!(receive(&b, 10, SECOND, LONG).await, vec![]);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "returned after {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "returned after {elapsed:?}");
}
