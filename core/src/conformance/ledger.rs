//! Ledger conformance cases: delivery dedupe and TTL, coalescing and follow-ups, leases and the
//! one-active-task rule, cancellation and retraction, the thread snapshot, listings, and races.
//!
//! Each case takes a fresh [`Backend`] and moves time only with its [`ManualClock`](crate::clock::ManualClock);
//! tasks created in one case are a clock millisecond apart wherever their order is asserted, so no
//! backend needs a tie-breaker beyond `created_at`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Backend;
use crate::clock::Clock;
use crate::decision::{Effect, IgnoreReason, NewTrigger, ReasonCode};
use crate::event::{GithubSubject, Placement, Subject, Tracker};
use crate::ledger::{Applied, Decide, LedgerError, NewDelivery, TaskFilter, ThreadQuery, ThreadSnapshot, DELIVERY_TTL};
use crate::task::{
    CancelReason, Permission, Task, TaskId, TaskOutcome, TaskState, ThreadKey, Transition, TransitionError, Trigger,
    TriggerKind, MAX_TRIGGERS,
};

const LEASE: Duration = Duration::from_secs(60);
const TICK: Duration = Duration::from_millis(1);

fn subject(issue: u64) -> Subject {
    Subject::Github(GithubSubject {
        owner: "acme".into(),
        repo: "app".into(),
        repository_id: 42,
        number: issue,
        is_pull_request: false,
        title: Some(format!("Issue {issue}")),
        installation_id: Some(7),
    })
}

fn key(issue: u64) -> ThreadKey {
    ThreadKey::new(&subject(issue), "agent")
}

fn delivery(id: &str, issue: u64, reason: ReasonCode) -> NewDelivery {
    NewDelivery {
        id: id.into(),
        tracker: Tracker::Github,
        event: "issue_comment.created".into(),
        thread_key: Some(key(issue)),
        reason,
    }
}

fn new_trigger(b: &Backend, issue: u64, delivery_id: &str, comment_id: &str) -> NewTrigger {
    NewTrigger {
        thread_key: key(issue),
        subject: subject(issue),
        trigger: Trigger {
            delivery_id: delivery_id.into(),
            comment_id: Some(comment_id.into()),
            kind: TriggerKind::Mention,
            author: "alice".into(),
            body: format!("@agent please fix ({comment_id})"),
            placement: Placement::TopLevel,
            at: b.clock.now(),
        },
        permission: Permission::Trusted,
        participates_in: None,
        marks_assigned: false,
    }
}

/// Applies a trigger for `comment_id` on `issue`, carried by delivery `d-{comment_id}`.
async fn trigger(b: &Backend, issue: u64, comment_id: &str) -> Applied {
    let id = format!("d-{comment_id}");
    let effect = Effect::Trigger(new_trigger(b, issue, &id, comment_id));
    b.ledger.apply(&delivery(&id, issue, ReasonCode::Enqueued), &effect).await.expect("apply trigger")
}

async fn enqueue(b: &Backend, issue: u64, comment_id: &str) -> Task {
    match trigger(b, issue, comment_id).await {
        Applied::Enqueued(t) => t,
        other @ (Applied::Duplicate
        | Applied::Recorded
        | Applied::Coalesced(_)
        | Applied::Cancelled(_)
        | Applied::KnownComment(_)
        | Applied::TaskFull(_)
        | Applied::NothingToCancel) => panic!("expected Enqueued for {comment_id}, got {other:?}"),
    }
}

async fn coalesce(b: &Backend, issue: u64, comment_id: &str) -> Task {
    match trigger(b, issue, comment_id).await {
        Applied::Coalesced(t) => t,
        other @ (Applied::Duplicate
        | Applied::Recorded
        | Applied::Enqueued(_)
        | Applied::Cancelled(_)
        | Applied::KnownComment(_)
        | Applied::TaskFull(_)
        | Applied::NothingToCancel) => panic!("expected Coalesced for {comment_id}, got {other:?}"),
    }
}

async fn step(b: &Backend, id: &TaskId, t: Transition) -> Task {
    b.ledger.transition(id, &t).await.unwrap_or_else(|e| panic!("{t:?} on {id}: {e}"))
}

/// Claims and starts `id`; returns the running task.
async fn run(b: &Backend, id: &TaskId) -> Task {
    let claimed = step(b, id, Transition::Claim { lease: LEASE }).await;
    step(b, id, Transition::Start { lease_gen: claimed.lease_gen }).await
}

async fn complete(b: &Backend, task: &Task) -> Task {
    let outcome = TaskOutcome::Completed { summary: Some("done".into()) };
    step(b, &task.id, Transition::Finish { lease_gen: task.lease_gen, outcome }).await
}

async fn stored(b: &Backend, id: &TaskId) -> Task {
    b.ledger.task(id).await.expect("read task").expect("task exists")
}

fn refused(r: Result<Task, LedgerError>) -> TransitionError {
    match r {
        Err(LedgerError::Transition(e)) => e,
        other => panic!("expected a refused transition, got {other:?}"),
    }
}

/// The same delivery 20 times: one task, 19 duplicates, and the duplicates change nothing.
pub async fn delivery_dedupe(b: Backend) {
    let first = enqueue(&b, 1, "c1").await;
    for _ in 0..19 {
        b.clock.advance(TICK);
        assert_eq!(trigger(&b, 1, "c1").await, Applied::Duplicate);
    }
    assert_eq!(stored(&b, &first.id).await, first, "duplicates must not touch the task");
    assert_eq!(b.ledger.tasks(&TaskFilter::default()).await.unwrap(), vec![first.clone()]);
    let record = b.ledger.delivery("d-c1").await.unwrap().expect("delivery recorded");
    assert_eq!((record.reason, record.task_id), (ReasonCode::Enqueued, Some(first.id)));
    assert_eq!(b.ledger.deliveries(100).await.unwrap().len(), 1);
}

/// An ignored delivery is recorded with its reason, nothing else, and listed newest first.
pub async fn ignored_delivery_is_recorded(b: Backend) {
    let ignored = delivery("d-ignored", 1, ReasonCode::Ignored(IgnoreReason::NoMention));
    assert_eq!(b.ledger.apply(&ignored, &Effect::Nothing).await.unwrap(), Applied::Recorded);
    b.clock.advance(TICK);
    let bot = NewDelivery { thread_key: None, ..delivery("d-bot", 1, ReasonCode::Ignored(IgnoreReason::Bot)) };
    assert_eq!(b.ledger.apply(&bot, &Effect::Nothing).await.unwrap(), Applied::Recorded);

    let record = b.ledger.delivery("d-ignored").await.unwrap().expect("recorded");
    assert_eq!(record.reason, ReasonCode::Ignored(IgnoreReason::NoMention));
    assert_eq!((record.tracker, record.event.as_str()), (Tracker::Github, "issue_comment.created"));
    assert_eq!((record.thread_key, record.task_id), (Some(key(1)), None));
    assert_eq!(record.received_at, super::START);
    assert!(record.expires_at >= super::START.plus(DELIVERY_TTL), "kept at least DELIVERY_TTL");
    assert!(b.ledger.tasks(&TaskFilter::default()).await.unwrap().is_empty());
    assert_eq!(b.ledger.delivery("d-unknown").await.unwrap(), None);

    let listed: Vec<String> = b.ledger.deliveries(10).await.unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(listed, ["d-bot", "d-ignored"]);
    let newest: Vec<String> = b.ledger.deliveries(1).await.unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(newest, ["d-bot"]);
}

/// A delivery is remembered for DELIVERY_TTL and then forgotten: redelivery is new again.
pub async fn delivery_is_forgotten_after_ttl(b: Backend) {
    let d = delivery("d-ttl", 1, ReasonCode::Ignored(IgnoreReason::NoMention));
    assert_eq!(b.ledger.apply(&d, &Effect::Nothing).await.unwrap(), Applied::Recorded);
    b.clock.advance(DELIVERY_TTL - Duration::from_secs(1));
    assert_eq!(b.ledger.apply(&d, &Effect::Nothing).await.unwrap(), Applied::Duplicate);
    b.clock.advance(Duration::from_secs(2));
    assert_eq!(b.ledger.delivery("d-ttl").await.unwrap(), None, "expired records are not returned");
    assert_eq!(b.ledger.apply(&d, &Effect::Nothing).await.unwrap(), Applied::Recorded);
    let record = b.ledger.delivery("d-ttl").await.unwrap().expect("recorded again");
    assert_eq!(record.received_at, b.clock.now());
}

/// The first trigger on a thread creates one queued task carrying it.
pub async fn first_trigger_enqueues(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    assert_eq!((task.state, task.thread_key.clone(), task.subject.clone()), (TaskState::Queued, key(1), subject(1)));
    assert_eq!((task.attempt, task.lease_gen, task.created_at), (0, 0, super::START));
    assert_eq!(task.comment_ids(), ["c1"]);
    assert_eq!(stored(&b, &task.id).await, task);
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active, snap.runs_in_window), (Some(task.id.clone()), None, 1));
    let record = b.ledger.delivery("d-c1").await.unwrap().unwrap();
    assert_eq!((record.reason, record.task_id), (ReasonCode::Enqueued, Some(task.id)));
}

/// A second trigger while the task is queued joins it, in order; a repeated comment id adds nothing.
pub async fn trigger_coalesces_into_queued_task(b: Backend) {
    let first = enqueue(&b, 1, "c1").await;
    b.clock.advance(TICK);
    let joined = coalesce(&b, 1, "c2").await;
    assert_eq!(joined.id, first.id);
    assert_eq!(joined.comment_ids(), ["c1", "c2"]);
    assert!(joined.version > first.version, "coalescing is a write");
    assert_eq!(stored(&b, &first.id).await, joined);
    let record = b.ledger.delivery("d-c2").await.unwrap().unwrap();
    assert_eq!((record.reason, record.task_id), (ReasonCode::Coalesced, Some(first.id.clone())));

    // The same comment again under a new delivery (an edit): known, and not added twice.
    let again = Effect::Trigger(new_trigger(&b, 1, "d-edit", "c2"));
    let applied = b.ledger.apply(&delivery("d-edit", 1, ReasonCode::Enqueued), &again).await.unwrap();
    assert_eq!(applied, Applied::KnownComment(first.id.clone()));
    assert_eq!(stored(&b, &first.id).await, joined, "nothing changed");
    assert_eq!(b.ledger.tasks(&TaskFilter::default()).await.unwrap().len(), 1);
}

/// A trigger while a task runs creates one follow-up; the next trigger joins that follow-up.
pub async fn trigger_while_running_queues_one_follow_up(b: Backend) {
    let first = enqueue(&b, 1, "c1").await;
    run(&b, &first.id).await;
    b.clock.advance(TICK);
    let follow = enqueue(&b, 1, "c2").await;
    assert_ne!(follow.id, first.id);
    b.clock.advance(TICK);
    let joined = coalesce(&b, 1, "c3").await;
    assert_eq!((&joined.id, joined.comment_ids()), (&follow.id, vec!["c2", "c3"]));
    assert_eq!(stored(&b, &first.id).await.comment_ids(), ["c1"], "the running task is untouched");
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active), (Some(follow.id), Some(first.id)));
}

/// Triggers on different threads make independent tasks.
pub async fn threads_are_independent(b: Backend) {
    let one = enqueue(&b, 1, "c1").await;
    let two = enqueue(&b, 2, "c2").await;
    assert_ne!(one.id, two.id);
    assert_eq!(two.thread_key, key(2));
    run(&b, &one.id).await;
    // Thread 1 being busy does not hold thread 2 back.
    let claimed = step(&b, &two.id, Transition::Claim { lease: LEASE }).await;
    assert_eq!(claimed.state, TaskState::Dispatched);
    let snap = b.ledger.thread(&key(2), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active, snap.runs_in_window), (None, Some(two.id), 1));
}

/// A claim dispatches with lease generation 1; a second claim while the lease holds is refused.
pub async fn claim_takes_a_lease(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    let claimed = step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    assert_eq!((claimed.state, claimed.attempt, claimed.lease_gen), (TaskState::Dispatched, 1, 1));
    assert_eq!(claimed.lease_until, Some(b.clock.now().plus(LEASE)));
    assert_eq!(stored(&b, &task.id).await, claimed);
    b.clock.advance(LEASE - TICK);
    let again = refused(b.ledger.transition(&task.id, &Transition::Claim { lease: LEASE }).await);
    assert!(matches!(again, TransitionError::NotAllowed { .. }), "{again:?}");
    assert_eq!(stored(&b, &task.id).await, claimed, "a refused claim writes nothing");
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active), (None, Some(task.id)));
}

/// After the lease runs out another claim wins (attempt 2, generation 2); the first worker's
/// Start and Finish are refused as stale.
pub async fn expired_lease_is_reclaimed_and_old_generation_refused(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    b.clock.advance(LEASE + TICK);
    let reclaimed = step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    assert_eq!((reclaimed.state, reclaimed.attempt, reclaimed.lease_gen), (TaskState::Dispatched, 2, 2));
    let start = refused(b.ledger.transition(&task.id, &Transition::Start { lease_gen: 1 }).await);
    assert!(matches!(start, TransitionError::StaleLease { held: 1, current: 2, .. }), "{start:?}");
    let outcome = TaskOutcome::Completed { summary: None };
    let finish = refused(b.ledger.transition(&task.id, &Transition::Finish { lease_gen: 1, outcome }).await);
    assert!(matches!(finish, TransitionError::StaleLease { held: 1, current: 2, .. }), "{finish:?}");
    assert_eq!(stored(&b, &task.id).await, reclaimed);
    // The new holder is unaffected.
    let running = step(&b, &task.id, Transition::Start { lease_gen: 2 }).await;
    assert_eq!(running.state, TaskState::Running);
}

/// The follow-up cannot be claimed while the thread's active task holds its lease; it can once
/// that task finishes.
pub async fn follow_up_waits_for_active_task(b: Backend) {
    let first = enqueue(&b, 1, "c1").await;
    let running = run(&b, &first.id).await;
    b.clock.advance(TICK);
    let follow = enqueue(&b, 1, "c2").await;
    let early = refused(b.ledger.transition(&follow.id, &Transition::Claim { lease: LEASE }).await);
    assert!(matches!(early, TransitionError::NotAllowed { .. }), "{early:?}");
    assert_eq!(stored(&b, &follow.id).await, follow, "a refused claim writes nothing");
    complete(&b, &running).await;
    let claimed = step(&b, &follow.id, Transition::Claim { lease: LEASE }).await;
    assert_eq!((claimed.state, claimed.lease_gen), (TaskState::Dispatched, 1));
}

/// queued → dispatched → running → completed, with the outcome stored and the lease cleared.
pub async fn happy_path_completes(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    let running = run(&b, &task.id).await;
    assert_eq!(running.state, TaskState::Running);
    let beat = step(&b, &task.id, Transition::Heartbeat { lease_gen: 1, lease: LEASE * 2 }).await;
    assert_eq!(beat.lease_until, Some(b.clock.now().plus(LEASE * 2)));
    b.clock.advance(Duration::from_secs(5));
    let done = complete(&b, &beat).await;
    assert_eq!((done.state, done.lease_until), (TaskState::Completed, None));
    assert_eq!(done.outcome, Some(TaskOutcome::Completed { summary: Some("done".into()) }));
    assert_eq!(done.updated_at, b.clock.now());
    assert_eq!(stored(&b, &task.id).await, done);
    let again = refused(b.ledger.transition(&task.id, &Transition::Claim { lease: LEASE }).await);
    assert!(matches!(again, TransitionError::NotAllowed { state: TaskState::Completed, .. }), "{again:?}");
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active), (None, None));
}

/// Release gives the task back: queued again, and the next claim is attempt 2.
pub async fn release_requeues(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    let released = step(&b, &task.id, Transition::Release { lease_gen: 1 }).await;
    assert_eq!((released.state, released.lease_until), (TaskState::Queued, None));
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!((snap.queued, snap.active), (Some(task.id.clone()), None));
    let again = step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    assert_eq!((again.attempt, again.lease_gen), (2, 2));
}

/// Transitions on an id the ledger never saw are `NotFound`.
pub async fn unknown_task_is_not_found(b: Backend) {
    let id = TaskId::generate();
    let r = b.ledger.transition(&id, &Transition::Claim { lease: LEASE }).await;
    assert!(matches!(&r, Err(LedgerError::NotFound(missing)) if *missing == id), "{r:?}");
    assert_eq!(b.ledger.task(&id).await.unwrap(), None);
}

/// `@agent stop`: a queued task is cancelled, a running one is asked to stop; an idle thread has
/// nothing to cancel.
pub async fn cancel_thread(b: Backend) {
    let stop = |issue| Effect::CancelThread { thread_key: key(issue), reason: CancelReason::StopCommand };
    let stop_delivery = |id: &str, issue| delivery(id, issue, ReasonCode::Cancelled);

    let queued = enqueue(&b, 1, "c1").await;
    let applied = b.ledger.apply(&stop_delivery("d-stop1", 1), &stop(1)).await.unwrap();
    assert_eq!(applied, Applied::Cancelled(vec![queued.id.clone()]));
    let cancelled = stored(&b, &queued.id).await;
    assert_eq!(cancelled.state, TaskState::Cancelled);
    assert_eq!(cancelled.outcome, Some(TaskOutcome::Cancelled { reason: CancelReason::StopCommand }));
    let record = b.ledger.delivery("d-stop1").await.unwrap().unwrap();
    assert_eq!((record.reason, record.task_id), (ReasonCode::Cancelled, Some(queued.id)));

    let running = enqueue(&b, 2, "c2").await;
    run(&b, &running.id).await;
    b.clock.advance(TICK);
    let follow = enqueue(&b, 2, "c3").await;
    let applied = b.ledger.apply(&stop_delivery("d-stop2", 2), &stop(2)).await.unwrap();
    let Applied::Cancelled(ids) = applied else { panic!("expected Cancelled, got {applied:?}") };
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), BTreeSet::from([running.id.clone(), follow.id.clone()]));
    let asked = stored(&b, &running.id).await;
    assert_eq!((asked.state, asked.cancel_requested), (TaskState::Running, Some(CancelReason::StopCommand)));
    assert_eq!(stored(&b, &follow.id).await.state, TaskState::Cancelled);

    let applied = b.ledger.apply(&stop_delivery("d-stop3", 3), &stop(3)).await.unwrap();
    assert_eq!(applied, Applied::NothingToCancel);
    let record = b.ledger.delivery("d-stop3").await.unwrap().unwrap();
    assert_eq!(record.reason, ReasonCode::Ignored(IgnoreReason::NothingToCancel));
}

/// A deleted trigger comment: the sole trigger cancels its task; one of two is dropped and the
/// task stays queued (`Recorded`); an unknown comment has nothing to cancel.
pub async fn retract_comment(b: Backend) {
    let retract = |issue, comment: &str| Effect::RetractComment { thread_key: key(issue), comment_id: comment.into() };
    let deleted = |id: &str, issue| NewDelivery {
        event: "issue_comment.deleted".into(),
        ..delivery(id, issue, ReasonCode::Cancelled)
    };

    let sole = enqueue(&b, 1, "c1").await;
    let applied = b.ledger.apply(&deleted("d-del1", 1), &retract(1, "c1")).await.unwrap();
    assert_eq!(applied, Applied::Cancelled(vec![sole.id.clone()]));
    let cancelled = stored(&b, &sole.id).await;
    assert_eq!(cancelled.state, TaskState::Cancelled);
    assert_eq!(cancelled.outcome, Some(TaskOutcome::Cancelled { reason: CancelReason::TriggerDeleted }));

    let two = enqueue(&b, 2, "c2").await;
    b.clock.advance(TICK);
    trigger(&b, 2, "c3").await;
    let applied = b.ledger.apply(&deleted("d-del2", 2), &retract(2, "c2")).await.unwrap();
    assert_eq!(applied, Applied::Recorded);
    let kept = stored(&b, &two.id).await;
    assert_eq!((kept.state, kept.comment_ids()), (TaskState::Queued, vec!["c3"]));
    assert_eq!(b.ledger.delivery("d-del2").await.unwrap().unwrap().task_id, Some(two.id.clone()));

    let applied = b.ledger.apply(&deleted("d-del3", 2), &retract(2, "c-unknown")).await.unwrap();
    assert_eq!(applied, Applied::NothingToCancel);
    assert_eq!(stored(&b, &two.id).await, kept, "nothing changed");
}

/// `runs_in_window` counts tasks created since the window start, not coalesced triggers.
pub async fn run_budget_counts_created_tasks(b: Backend) {
    let first = enqueue(&b, 1, "c1").await;
    trigger(&b, 1, "c2").await;
    let snap = b.ledger.thread(&key(1), None, super::START).await.unwrap();
    assert_eq!(snap.runs_in_window, 1, "a coalesced trigger is not a run");
    let running = run(&b, &first.id).await;
    complete(&b, &running).await;
    b.clock.advance(Duration::from_secs(60));
    let later = b.clock.now();
    enqueue(&b, 1, "c3").await;
    assert_eq!(b.ledger.thread(&key(1), None, super::START).await.unwrap().runs_in_window, 2);
    assert_eq!(b.ledger.thread(&key(1), None, later).await.unwrap().runs_in_window, 1, "window start is inclusive");
    assert_eq!(b.ledger.thread(&key(1), None, later.plus(TICK)).await.unwrap().runs_in_window, 0);
    assert_eq!(b.ledger.thread(&key(2), None, super::START).await.unwrap().runs_in_window, 0);
}

/// A trigger's `participates_in` root makes `participates` true for that root of that thread only.
pub async fn participation_is_per_root(b: Backend) {
    let mut nt = new_trigger(&b, 1, "d-p", "c1");
    nt.participates_in = Some("root-1".into());
    b.ledger.apply(&delivery("d-p", 1, ReasonCode::Enqueued), &Effect::Trigger(nt)).await.unwrap();
    let participates = |issue, root: Option<&'static str>| {
        let ledger = b.ledger.clone();
        async move { ledger.thread(&key(issue), root, super::START).await.unwrap().participates }
    };
    assert!(participates(1, Some("root-1")).await);
    assert!(!participates(1, Some("root-2")).await);
    assert!(!participates(1, None).await);
    assert!(!participates(2, Some("root-1")).await);
}

/// `marks_assigned` sets the thread's flag; `Unassign` clears it (and is `Recorded`).
pub async fn assigned_flag(b: Backend) {
    let assigned = |issue| {
        let ledger = b.ledger.clone();
        async move { ledger.thread(&key(issue), None, super::START).await.unwrap().assigned_to_agent }
    };
    assert!(!assigned(1).await);
    let mut nt = new_trigger(&b, 1, "d-assign", "c1");
    nt.trigger.kind = TriggerKind::Assignment;
    nt.marks_assigned = true;
    b.ledger.apply(&delivery("d-assign", 1, ReasonCode::Enqueued), &Effect::Trigger(nt)).await.unwrap();
    assert!(assigned(1).await);
    assert!(!assigned(2).await, "per thread");
    let unassign = Effect::Unassign { thread_key: key(1) };
    let applied = b
        .ledger
        .apply(&delivery("d-unassign", 1, ReasonCode::Ignored(IgnoreReason::NotForAgent)), &unassign)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Recorded);
    assert!(!assigned(1).await);
}

/// `tasks` lists newest first and filters by state, thread and limit.
pub async fn task_listing_filters_and_order(b: Backend) {
    let a = enqueue(&b, 1, "c1").await;
    b.clock.advance(TICK);
    let c = enqueue(&b, 2, "c2").await;
    b.clock.advance(TICK);
    let d = enqueue(&b, 3, "c3").await;
    let running = run(&b, &a.id).await;
    complete(&b, &running).await;
    b.clock.advance(TICK);
    let e = enqueue(&b, 1, "c4").await;
    let ids = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();

    let all = b.ledger.tasks(&TaskFilter::default()).await.unwrap();
    assert_eq!(ids(all), [e.id.clone(), d.id.clone(), c.id.clone(), a.id.clone()]);
    let queued = TaskFilter { states: vec![TaskState::Queued], ..TaskFilter::default() };
    assert_eq!(ids(b.ledger.tasks(&queued).await.unwrap()), [e.id.clone(), d.id.clone(), c.id.clone()]);
    let done = TaskFilter { states: vec![TaskState::Completed, TaskState::Failed], ..TaskFilter::default() };
    assert_eq!(ids(b.ledger.tasks(&done).await.unwrap()), std::slice::from_ref(&a.id));
    let thread = TaskFilter { thread_key: Some(key(1)), ..TaskFilter::default() };
    assert_eq!(ids(b.ledger.tasks(&thread).await.unwrap()), [e.id.clone(), a.id.clone()]);
    let both = TaskFilter { states: vec![TaskState::Queued], thread_key: Some(key(1)), limit: None };
    assert_eq!(ids(b.ledger.tasks(&both).await.unwrap()), std::slice::from_ref(&e.id));
    let limited = TaskFilter { limit: Some(2), ..TaskFilter::default() };
    assert_eq!(ids(b.ledger.tasks(&limited).await.unwrap()), [e.id, d.id]);
    let none = TaskFilter { states: vec![TaskState::Cancelled], ..TaskFilter::default() };
    assert!(b.ledger.tasks(&none).await.unwrap().is_empty());
}

/// 16 concurrent triggers (distinct deliveries) on one thread: one queued task holding all 16.
pub async fn concurrent_triggers_coalesce(b: Backend) {
    let mut joins = Vec::new();
    for i in 0..16 {
        let ledger = b.ledger.clone();
        let id = format!("d-race-{i}");
        let effect = Effect::Trigger(new_trigger(&b, 1, &id, &format!("c{i}")));
        joins.push(tokio::spawn(async move {
            ledger.apply(&delivery(&id, 1, ReasonCode::Enqueued), &effect).await.expect("apply")
        }));
    }
    let mut enqueued = 0;
    for join in joins {
        match join.await.expect("apply task") {
            Applied::Enqueued(_) => enqueued += 1,
            Applied::Coalesced(_) => {}
            other @ (Applied::Duplicate
            | Applied::Recorded
            | Applied::Cancelled(_)
            | Applied::KnownComment(_)
            | Applied::TaskFull(_)
            | Applied::NothingToCancel) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(enqueued, 1, "exactly one task created");
    let tasks = b.ledger.tasks(&TaskFilter { thread_key: Some(key(1)), ..TaskFilter::default() }).await.unwrap();
    assert_eq!(tasks.len(), 1, "no second queued task");
    let comments: BTreeSet<String> = tasks[0].comment_ids().into_iter().map(str::to_owned).collect();
    assert_eq!(comments, (0..16).map(|i| format!("c{i}")).collect::<BTreeSet<_>>(), "no lost trigger");
    assert_eq!(tasks[0].triggers.len(), 16);
}

/// 8 concurrent claims of one task: exactly one wins; the others are refused.
pub async fn concurrent_claims_have_one_winner(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    let mut joins = Vec::new();
    for _ in 0..8 {
        let ledger = b.ledger.clone();
        let id = task.id.clone();
        joins.push(tokio::spawn(async move { ledger.transition(&id, &Transition::Claim { lease: LEASE }).await }));
    }
    let mut winners = Vec::new();
    for join in joins {
        match join.await.expect("claim task") {
            Ok(t) => winners.push(t),
            Err(LedgerError::Transition(TransitionError::NotAllowed { .. })) => {}
            Err(e) => panic!("a losing claim must be refused, got {e:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one winner");
    assert_eq!((winners[0].attempt, winners[0].lease_gen), (1, 1));
    assert_eq!(stored(&b, &task.id).await, winners[0]);
}

/// The same delivery applied 8 times at once: exactly one is not a duplicate.
pub async fn concurrent_duplicate_deliveries(b: Backend) {
    let effect = Effect::Trigger(new_trigger(&b, 1, "d-same", "c1"));
    let mut joins = Vec::new();
    for _ in 0..8 {
        let ledger = b.ledger.clone();
        let effect = effect.clone();
        joins.push(tokio::spawn(async move {
            ledger.apply(&delivery("d-same", 1, ReasonCode::Enqueued), &effect).await.expect("apply")
        }));
    }
    let mut originals = 0;
    for join in joins {
        match join.await.expect("apply task") {
            Applied::Duplicate => {}
            Applied::Enqueued(t) => {
                originals += 1;
                assert_eq!(t.comment_ids(), ["c1"]);
            }
            other @ (Applied::Recorded
            | Applied::Coalesced(_)
            | Applied::Cancelled(_)
            | Applied::KnownComment(_)
            | Applied::TaskFull(_)
            | Applied::NothingToCancel) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(originals, 1);
    assert_eq!(b.ledger.tasks(&TaskFilter::default()).await.unwrap().len(), 1);
}

/// The outbox: a staged reply survives a lost lease, and only one reply is ever staged.
pub async fn outbox_survives_reclaim(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    let running = run(&b, &task.id).await;
    let gen = running.lease_gen;
    let staged = step(&b, &task.id, Transition::StageReply { lease_gen: gen, body: "the fix".into() }).await;
    assert_eq!(staged.reply.as_ref().map(|r| (r.seq, r.body.as_str())), Some((1, "the fix")));
    // The worker dies before posting; its lease runs out and another worker claims the task.
    b.clock.advance(LEASE + TICK);
    let reclaimed = step(&b, &task.id, Transition::Claim { lease: LEASE }).await;
    let reply = reclaimed.reply.clone().expect("the staged reply is still there");
    assert_eq!((reply.body.as_str(), reply.posted_comment_id), ("the fix", None));
    let again = Transition::StageReply { lease_gen: reclaimed.lease_gen, body: "x".into() };
    assert!(matches!(refused(b.ledger.transition(&task.id, &again).await), TransitionError::ReplyExists { .. }));
    let stale = Transition::ReplyPosted { lease_gen: gen, comment_id: "1".into() };
    assert!(matches!(refused(b.ledger.transition(&task.id, &stale).await), TransitionError::StaleLease { .. }));
    let posted =
        step(&b, &task.id, Transition::ReplyPosted { lease_gen: reclaimed.lease_gen, comment_id: "77".into() }).await;
    assert_eq!(stored(&b, &task.id).await.reply, posted.reply);
    assert_eq!(posted.reply.and_then(|r| r.posted_comment_id).as_deref(), Some("77"));
}

/// Transcript entries come back in sequence order, and re-appending a sequence stores it once.
pub async fn transcript_is_ordered_and_idempotent(b: Backend) {
    use crate::transcript::{EntryKind, TranscriptEntry};
    let task = enqueue(&b, 1, "c1").await;
    let other = enqueue(&b, 2, "c2").await;
    let entry = |seq: u64, kind: EntryKind, text: &str| TranscriptEntry {
        seq,
        attempt: 1,
        at: b.clock.now(),
        kind,
        tool: matches!(kind, EntryKind::ToolUse | EntryKind::ToolResult).then(|| "shell".to_owned()),
        text: text.into(),
    };
    let first = vec![entry(1, EntryKind::ToolUse, "ls"), entry(2, EntryKind::ToolResult, "README.md")];
    b.ledger.append_transcript(&task.id, &first).await.expect("append");
    // A retried append of the same batch plus one new entry; out of order on purpose.
    let second =
        vec![entry(3, EntryKind::Text, "done"), entry(2, EntryKind::ToolResult, "README.md"), first[0].clone()];
    b.ledger.append_transcript(&task.id, &second).await.expect("append again");
    b.ledger.append_transcript(&other.id, &[entry(1, EntryKind::Error, "boom")]).await.expect("append other");
    let got = b.ledger.transcript(&task.id).await.expect("read");
    assert_eq!(got, vec![first[0].clone(), first[1].clone(), second[0].clone()]);
    assert_eq!(b.ledger.transcript(&other.id).await.expect("read other").len(), 1);
    assert!(b.ledger.transcript(&TaskId("t_missing".into())).await.expect("read missing").is_empty());
}

/// The Codex thread a conversation continues on is per thread key, and the latest wins.
pub async fn codex_thread_is_remembered_per_thread(b: Backend) {
    let start = b.clock.now();
    assert_eq!(b.ledger.thread(&key(1), None, start).await.expect("snapshot").codex_thread_id, None);
    b.ledger.set_codex_thread(&key(1), "th-1").await.expect("set");
    b.ledger.set_codex_thread(&key(1), "th-2").await.expect("set again");
    b.ledger.set_codex_thread(&key(2), "th-9").await.expect("set other");
    // The assignment flag and the Codex thread share a thread record: neither clobbers the other.
    let effect = Effect::Unassign { thread_key: key(1) };
    b.ledger.apply(&delivery("d-u", 1, ReasonCode::Ignored(IgnoreReason::NotForAgent)), &effect).await.expect("apply");
    let one = b.ledger.thread(&key(1), None, start).await.expect("snapshot");
    assert_eq!((one.codex_thread_id.as_deref(), one.assigned_to_agent), (Some("th-2"), false));
    assert_eq!(b.ledger.thread(&key(2), None, start).await.expect("snapshot").codex_thread_id.as_deref(), Some("th-9"));
}

/// The sweeper's list: queued tasks never marked enqueued, created at or before the cut-off.
pub async fn stranded_lists_unenqueued_queued_tasks(b: Backend) {
    let old = enqueue(&b, 1, "c1").await;
    b.clock.advance(TICK);
    let sent = enqueue(&b, 2, "c2").await;
    step(&b, &sent.id, Transition::Enqueued).await;
    b.clock.advance(TICK);
    let running = enqueue(&b, 3, "c3").await;
    run(&b, &running.id).await;
    b.clock.advance(TICK);
    let cutoff = b.clock.now();
    b.clock.advance(TICK);
    let young = enqueue(&b, 4, "c4").await;
    let ids = |tasks: Vec<Task>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(b.ledger.stranded(cutoff, 10).await.expect("stranded")), vec![old.id.clone()]);
    assert_eq!(ids(b.ledger.stranded(b.clock.now(), 10).await.expect("stranded")), vec![old.id.clone(), young.id]);
    assert_eq!(ids(b.ledger.stranded(b.clock.now(), 1).await.expect("stranded")).len(), 1);
    step(&b, &old.id, Transition::Enqueued).await;
    assert!(b.ledger.stranded(cutoff, 10).await.expect("stranded").is_empty());
}

/// A queued task takes at most `MAX_TRIGGERS` triggers: the next request on the thread is
/// recorded as `ignored:task_full` and changes nothing; once the task is claimed, a new request
/// queues a follow-up as usual.
pub async fn a_full_task_takes_no_more_triggers(b: Backend) {
    let task = enqueue(&b, 1, "c0").await;
    for i in 1..MAX_TRIGGERS {
        coalesce(&b, 1, &format!("c{i}")).await;
    }
    let full = trigger(&b, 1, "c-over").await;
    assert_eq!(full, Applied::TaskFull(task.id.clone()));
    let recorded = b.ledger.delivery("d-c-over").await.expect("read").expect("recorded");
    assert_eq!(
        (recorded.reason, recorded.task_id),
        (ReasonCode::Ignored(IgnoreReason::TaskFull), Some(task.id.clone()))
    );
    let stored = b.ledger.task(&task.id).await.expect("read").expect("task");
    assert_eq!(stored.triggers.len(), MAX_TRIGGERS);
    assert!(!stored.comment_ids().contains(&"c-over"));
    assert_eq!(trigger(&b, 1, "c-over").await, Applied::Duplicate, "the refusal is recorded once");
    run(&b, &task.id).await;
    let follow_up = enqueue(&b, 1, "c-next").await;
    assert_ne!(follow_up.id, task.id);
}

/// One task per triggering comment: the same comment under a new delivery id, once its task was
/// claimed (or finished), starts nothing; while the task is queued it adds nothing.
pub async fn a_known_comment_never_starts_a_second_task(b: Backend) {
    let task = enqueue(&b, 1, "c1").await;
    let apply = |delivery_id: &'static str| {
        let effect = Effect::Trigger(new_trigger(&b, 1, delivery_id, "c1"));
        let ledger = b.ledger.clone();
        async move { ledger.apply(&delivery(delivery_id, 1, ReasonCode::Enqueued), &effect).await.expect("apply") }
    };
    // Queued: the same comment is known and joins nothing.
    assert_eq!(apply("d-second-hook").await, Applied::KnownComment(task.id.clone()));
    let stored = b.ledger.task(&task.id).await.expect("read").expect("task");
    assert_eq!((stored.comment_ids(), stored.version), (vec!["c1"], task.version));
    // Claimed, then finished: the same comment is known, under any delivery id.
    let running = run(&b, &task.id).await;
    assert_eq!(apply("d-third-hook").await, Applied::KnownComment(task.id.clone()));
    complete(&b, &running).await;
    b.clock.advance(TICK);
    assert_eq!(apply("d-fourth-hook").await, Applied::KnownComment(task.id.clone()));
    let tasks = b.ledger.tasks(&TaskFilter::default()).await.expect("list");
    assert_eq!(tasks.len(), 1, "still one task: {tasks:#?}");
    let recorded = b.ledger.delivery("d-fourth-hook").await.expect("read").expect("recorded");
    assert_eq!(
        (recorded.reason, recorded.task_id),
        (ReasonCode::Ignored(IgnoreReason::KnownComment), Some(task.id.clone()))
    );
    // Another comment on the thread still starts a follow-up.
    b.clock.advance(TICK);
    enqueue(&b, 1, "c2").await;
}

/// `decide_and_apply` hands the rules the snapshot of the thread asked about (an empty one when
/// none was), applies what they return, and reports the rules' reason beside what was applied;
/// the stored reason is the refined one, and a repeated delivery id changes nothing.
pub async fn decide_and_apply_runs_the_rules_on_the_thread(b: Backend) {
    let seen = Arc::new(Mutex::new(Vec::<ThreadSnapshot>::new()));
    let decide_trigger = |delivery_id: &'static str, comment_id: &'static str| -> Decide {
        let seen = Arc::clone(&seen);
        let nt = new_trigger(&b, 1, delivery_id, comment_id);
        Box::new(move |snapshot: &ThreadSnapshot| {
            seen.lock().unwrap().push(snapshot.clone());
            (delivery(delivery_id, 1, ReasonCode::Enqueued), Effect::Trigger(nt))
        })
    };
    let query = || Some(ThreadQuery { key: key(1), root_id: None, window_start: super::START });

    let (first, reason) = b.ledger.decide_and_apply(query(), decide_trigger("d-1", "c1")).await.expect("first");
    let Applied::Enqueued(task) = first else { panic!("expected Enqueued, got {first:?}") };
    assert_eq!(reason, ReasonCode::Enqueued);
    b.clock.advance(TICK);
    let (second, reason) = b.ledger.decide_and_apply(query(), decide_trigger("d-2", "c2")).await.expect("second");
    assert!(matches!(&second, Applied::Coalesced(t) if t.id == task.id), "{second:?}");
    assert_eq!((reason, second.reason(reason)), (ReasonCode::Enqueued, ReasonCode::Coalesced));
    let recorded = b.ledger.delivery("d-2").await.expect("read").expect("recorded");
    assert_eq!((recorded.reason, recorded.task_id), (ReasonCode::Coalesced, Some(task.id.clone())));
    let (again, _) = b.ledger.decide_and_apply(query(), decide_trigger("d-2", "c2")).await.expect("again");
    assert_eq!(again, Applied::Duplicate);
    assert_eq!(stored(&b, &task.id).await.comment_ids(), vec!["c1", "c2"], "the repeat added nothing");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0], ThreadSnapshot::default(), "an empty thread");
        assert_eq!((seen[1].queued.as_ref(), seen[1].runs_in_window), (Some(&task.id), 1));
    }

    // No thread: the rules see an empty snapshot and their reason is stored as given.
    let ignored = ReasonCode::Ignored(IgnoreReason::Unrouted);
    let saw = Arc::new(Mutex::new(None));
    let saw_in = Arc::clone(&saw);
    let decide: Decide = Box::new(move |snapshot: &ThreadSnapshot| {
        *saw_in.lock().unwrap() = Some(snapshot.clone());
        let d = NewDelivery { thread_key: None, ..delivery("d-unrouted", 1, ignored) };
        (d, Effect::Nothing)
    });
    let (applied, reason) = b.ledger.decide_and_apply(None, decide).await.expect("unrouted");
    assert_eq!((applied, reason), (Applied::Recorded, ignored));
    assert_eq!(saw.lock().unwrap().clone(), Some(ThreadSnapshot::default()));
    assert_eq!(b.ledger.delivery("d-unrouted").await.expect("read").expect("recorded").reason, ignored);
}
