//! The sweeper: puts back on the queue what the ledger recorded but the queue never got.
//!
//! Ingest writes the task first and enqueues second (DESIGN §3); when the send fails it still
//! answers 2xx, because GitHub never retries. Such a task stays `queued` with no
//! [`Task::enqueued_at`](crate::task::Task::enqueued_at), and [`sweep`] finds it once it is older
//! than a threshold (so a send still in flight is not raced), sends it, and marks it enqueued. The
//! worker runs it on a timer; it can equally run as a scheduled Lambda. A duplicate send is
//! harmless: the queue dedupes by task id, and a claim is conditional on the ledger anyway.

use std::time::Duration;

use tracing::{info, warn};

use crate::clock::Millis;
use crate::ledger::{Ledger, LedgerError};
use crate::queue::{Queue, QueueMessage};
use crate::task::Transition;

/// A task recorded this long ago and still not on the queue is stranded: ingest's own send takes
/// milliseconds, so a minute leaves a wide margin for one still in flight.
pub const STRANDED_AFTER: Duration = Duration::from_secs(60);

/// How many stranded tasks one sweep handles; the next sweep takes the rest.
pub const SWEEP_BATCH: usize = 100;

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Stranded tasks found.
    pub found: usize,
    /// Of those, sent and marked enqueued.
    pub enqueued: usize,
    /// Of those, whose send failed (left for the next sweep).
    pub failed: usize,
}

/// Re-enqueues tasks recorded at or before `now - older_than` that never reached the queue.
///
/// # Errors
/// A ledger error reading the work list. Send failures are counted, not returned: the next sweep
/// retries them.
pub async fn sweep(
    ledger: &dyn Ledger,
    queue: &dyn Queue,
    now: Millis,
    older_than: Duration,
) -> Result<SweepReport, LedgerError> {
    let stranded = ledger.stranded(now.minus(older_than), SWEEP_BATCH).await?;
    let mut report = SweepReport { found: stranded.len(), ..SweepReport::default() };
    for task in stranded {
        let msg = QueueMessage { task_id: task.id.clone(), group: task.thread_key.clone() };
        if let Err(e) = queue.send(&msg).await {
            warn!(task_id = %task.id, error = %e, "sweeper: enqueue failed; will retry");
            report.failed += 1;
            continue;
        }
        match ledger.transition(&task.id, &Transition::Enqueued).await {
            Ok(_) => {}
            // Claimed or cancelled since it was listed: it is on its way regardless.
            Err(LedgerError::Transition(e)) => info!(task_id = %task.id, reason = %e, "sweeper: task moved on"),
            Err(e) => warn!(task_id = %task.id, error = %e, "sweeper: sent but not marked; next sweep resends"),
        }
        info!(task_id = %task.id, thread_key = %task.thread_key, "sweeper: re-enqueued a stranded task");
        report.enqueued += 1;
    }
    Ok(report)
}
