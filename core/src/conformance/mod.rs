//! The port conformance suite: the behaviour every ledger and queue backend must show, written
//! once and run unchanged against SQLite now and DynamoDB + SQS later.
//!
//! A backend's test file builds a fresh [`Backend`] per case and calls [`conformance_tests!`](crate::conformance_tests),
//! which expands to one `#[tokio::test]` per case (so failures name the case), or iterates [`CASES`].
//! Ledger cases move time only through the injected [`ManualClock`] (leases, budget window, TTL).
//! Queue cases use real time, as SQS does, in whole seconds (SQS's unit), at most ~2 s each, and
//! keep queues a few messages deep (the SQS emulator slows with depth).
//! This is test code compiled as a library (so other crates can run it): it panics on failure,
//! hence `unwrap`/`expect` are allowed here and nowhere else outside tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod ledger;
pub mod queue;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::clock::{ManualClock, Millis};
use crate::ledger::Ledger;
use crate::queue::Queue;

/// Where every case's [`ManualClock`] starts (2023-11-14), far from zero so "before" is representable.
pub const START: Millis = Millis(1_700_000_000_000);

/// The backend under test, fresh for each case (empty ledger, empty queue).
pub struct Backend {
    /// The ledger; it must read "now" from `clock`.
    pub ledger: Arc<dyn Ledger>,
    /// The queue; it uses real time.
    pub queue: Arc<dyn Queue>,
    /// The clock the ledger was built with.
    pub clock: Arc<ManualClock>,
    /// Whatever must live as long as the case (a temporary directory, a table to drop).
    guard: Option<Box<dyn Any + Send + Sync>>,
}

impl Backend {
    /// A backend from its ports and the clock the ledger reads.
    pub fn new(ledger: Arc<dyn Ledger>, queue: Arc<dyn Queue>, clock: Arc<ManualClock>) -> Backend {
        Backend { ledger, queue, clock, guard: None }
    }

    /// Keeps `guard` alive until the case ends (e.g. the `tempfile::TempDir` holding the database).
    #[must_use]
    pub fn keeping(mut self, guard: impl Any + Send + Sync) -> Backend {
        self.guard = Some(Box::new(guard));
        self
    }
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("ledger", &self.ledger)
            .field("queue", &self.queue)
            .field("clock", &self.clock)
            .field("guard", &self.guard.is_some())
            .finish()
    }
}

/// A case's future: it panics when the backend misbehaves.
pub type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One conformance case.
pub type Case = fn(Backend) -> CaseFuture;

/// Every case, named `ledger::…` / `queue::…`, in the order [`conformance_tests!`](crate::conformance_tests) generates them.
pub const CASES: &[(&str, Case)] = &[
    ("ledger::delivery_dedupe", |b| Box::pin(ledger::delivery_dedupe(b))),
    ("ledger::ignored_delivery_is_recorded", |b| Box::pin(ledger::ignored_delivery_is_recorded(b))),
    ("ledger::delivery_is_forgotten_after_ttl", |b| Box::pin(ledger::delivery_is_forgotten_after_ttl(b))),
    ("ledger::first_trigger_enqueues", |b| Box::pin(ledger::first_trigger_enqueues(b))),
    ("ledger::trigger_coalesces_into_queued_task", |b| Box::pin(ledger::trigger_coalesces_into_queued_task(b))),
    ("ledger::trigger_while_running_queues_one_follow_up", |b| {
        Box::pin(ledger::trigger_while_running_queues_one_follow_up(b))
    }),
    ("ledger::threads_are_independent", |b| Box::pin(ledger::threads_are_independent(b))),
    ("ledger::claim_takes_a_lease", |b| Box::pin(ledger::claim_takes_a_lease(b))),
    ("ledger::expired_lease_is_reclaimed_and_old_generation_refused", |b| {
        Box::pin(ledger::expired_lease_is_reclaimed_and_old_generation_refused(b))
    }),
    ("ledger::follow_up_waits_for_active_task", |b| Box::pin(ledger::follow_up_waits_for_active_task(b))),
    ("ledger::happy_path_completes", |b| Box::pin(ledger::happy_path_completes(b))),
    ("ledger::release_requeues", |b| Box::pin(ledger::release_requeues(b))),
    ("ledger::unknown_task_is_not_found", |b| Box::pin(ledger::unknown_task_is_not_found(b))),
    ("ledger::cancel_thread", |b| Box::pin(ledger::cancel_thread(b))),
    ("ledger::retract_comment", |b| Box::pin(ledger::retract_comment(b))),
    ("ledger::run_budget_counts_created_tasks", |b| Box::pin(ledger::run_budget_counts_created_tasks(b))),
    ("ledger::participation_is_per_root", |b| Box::pin(ledger::participation_is_per_root(b))),
    ("ledger::assigned_flag", |b| Box::pin(ledger::assigned_flag(b))),
    ("ledger::task_listing_filters_and_order", |b| Box::pin(ledger::task_listing_filters_and_order(b))),
    ("ledger::concurrent_triggers_coalesce", |b| Box::pin(ledger::concurrent_triggers_coalesce(b))),
    ("ledger::concurrent_claims_have_one_winner", |b| Box::pin(ledger::concurrent_claims_have_one_winner(b))),
    ("ledger::concurrent_duplicate_deliveries", |b| Box::pin(ledger::concurrent_duplicate_deliveries(b))),
    ("ledger::outbox_survives_reclaim", |b| Box::pin(ledger::outbox_survives_reclaim(b))),
    ("ledger::transcript_is_ordered_and_idempotent", |b| Box::pin(ledger::transcript_is_ordered_and_idempotent(b))),
    ("ledger::codex_thread_is_remembered_per_thread", |b| Box::pin(ledger::codex_thread_is_remembered_per_thread(b))),
    ("ledger::stranded_lists_unenqueued_queued_tasks", |b| Box::pin(ledger::stranded_lists_unenqueued_queued_tasks(b))),
    ("ledger::a_known_comment_never_starts_a_second_task", |b| {
        Box::pin(ledger::a_known_comment_never_starts_a_second_task(b))
    }),
    ("ledger::a_full_task_takes_no_more_triggers", |b| Box::pin(ledger::a_full_task_takes_no_more_triggers(b))),
    ("ledger::decide_and_apply_runs_the_rules_on_the_thread", |b| {
        Box::pin(ledger::decide_and_apply_runs_the_rules_on_the_thread(b))
    }),
    ("queue::send_receive_delete", |b| Box::pin(queue::send_receive_delete(b))),
    ("queue::send_dedupes_by_task_id", |b| Box::pin(queue::send_dedupes_by_task_id(b))),
    ("queue::group_order_and_blocking", |b| Box::pin(queue::group_order_and_blocking(b))),
    ("queue::groups_run_in_parallel", |b| Box::pin(queue::groups_run_in_parallel(b))),
    ("queue::visibility_timeout_redelivers", |b| Box::pin(queue::visibility_timeout_redelivers(b))),
    ("queue::extend_keeps_hidden", |b| Box::pin(queue::extend_keeps_hidden(b))),
    ("queue::long_poll_wakes_on_send", |b| Box::pin(queue::long_poll_wakes_on_send(b))),
    ("queue::empty_receive_waits", |b| Box::pin(queue::empty_receive_waits(b))),
];

/// Expands to one `#[tokio::test]` per conformance case, each on a fresh backend from `$make`, an
/// `async fn(Arc<ManualClock>) -> Backend` in scope at the call site, plus a test that the generated
/// list matches [`CASES`]. The calling crate needs `tokio` with `macros` and `rt-multi-thread`.
///
/// ```text
/// async fn sqlite_backend(clock: Arc<ManualClock>) -> Backend { /* fresh database */ }
/// beckon_core::conformance_tests!(sqlite_backend);
/// // A backend that needs infrastructure: every case is #[ignore = "…"] (run with --include-ignored).
/// beckon_core::conformance_tests!(aws_backend, ignore = "needs moto: run scripts/test");
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($make:path) => {
        $crate::conformance_tests!(@cases $make; []);
    };
    ($make:path, ignore = $why:literal) => {
        $crate::conformance_tests!(@cases $make; [#[ignore = $why]]);
    };
    (@cases $make:path; [$($attr:tt)*]) => {
        $crate::__conformance_tests! { $make; [$($attr)*];
            ledger: delivery_dedupe, ignored_delivery_is_recorded, delivery_is_forgotten_after_ttl,
                first_trigger_enqueues, trigger_coalesces_into_queued_task,
                trigger_while_running_queues_one_follow_up, threads_are_independent, claim_takes_a_lease,
                expired_lease_is_reclaimed_and_old_generation_refused, follow_up_waits_for_active_task,
                happy_path_completes, release_requeues, unknown_task_is_not_found, cancel_thread, retract_comment,
                run_budget_counts_created_tasks, participation_is_per_root, assigned_flag,
                task_listing_filters_and_order, concurrent_triggers_coalesce, concurrent_claims_have_one_winner,
                concurrent_duplicate_deliveries, outbox_survives_reclaim, transcript_is_ordered_and_idempotent,
                codex_thread_is_remembered_per_thread, stranded_lists_unenqueued_queued_tasks,
                a_known_comment_never_starts_a_second_task, a_full_task_takes_no_more_triggers,
                decide_and_apply_runs_the_rules_on_the_thread;
            queue: send_receive_delete, send_dedupes_by_task_id, group_order_and_blocking, groups_run_in_parallel,
                visibility_timeout_redelivers, extend_keeps_hidden, long_poll_wakes_on_send, empty_receive_waits
        }
    };
}

/// The expansion behind [`conformance_tests!`](crate::conformance_tests).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($make:path; $attrs:tt; ledger: $($l:ident),+; queue: $($q:ident),+) => {
        mod ledger_conformance {
            use super::*;
            $(
                $crate::__with_attrs! { $attrs
                    #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                    async fn $l() {
                        let clock = ::std::sync::Arc::new($crate::clock::ManualClock::new($crate::conformance::START));
                        $crate::conformance::ledger::$l($make(clock).await).await;
                    }
                }
            )+
        }
        mod queue_conformance {
            use super::*;
            $(
                $crate::__with_attrs! { $attrs
                    #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
                    async fn $q() {
                        let clock = ::std::sync::Arc::new($crate::clock::ManualClock::new($crate::conformance::START));
                        $crate::conformance::queue::$q($make(clock).await).await;
                    }
                }
            )+
        }
        #[test]
        fn conformance_runs_every_case() {
            let generated: &[&str] = &[$(concat!("ledger::", stringify!($l)),)+ $(concat!("queue::", stringify!($q)),)+];
            let listed: ::std::vec::Vec<&str> = $crate::conformance::CASES.iter().map(|(name, _)| *name).collect();
            assert_eq!(generated, listed.as_slice());
        }
    };
}

/// Emits an item with extra attributes (`[#[ignore = "…"]]`) in front: a macro helper, because
/// a repetition inside the per-case repetition cannot be expanded directly.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_attrs {
    ([$($attr:tt)*] $($item:tt)*) => {
        $($attr)* $($item)*
    };
}
