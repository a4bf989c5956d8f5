//! Runs the port conformance suite against the SQLite backend, one fresh database file per case,
//! plus what only a file-backed store can show: two handles on one file (as two `beckon`
//! processes would have) racing for one thread still make one queued task.
// A test binary: the backend factory is not a `#[test]` fn, but a failure there is a test failure.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use beckon_core::clock::{Clock, ManualClock};
use beckon_core::conformance::{Backend, START};
use beckon_core::decision::{Effect, NewTrigger, ReasonCode};
use beckon_core::event::{GithubSubject, Placement, Subject, Tracker};
use beckon_core::ledger::{Applied, Ledger, NewDelivery, TaskFilter};
use beckon_core::sqlite;
use beckon_core::task::{Permission, ThreadKey, Trigger, TriggerKind, MAX_TRIGGERS};

async fn sqlite_backend(clock: Arc<ManualClock>) -> Backend {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ledger, queue) = sqlite::open(&dir.path().join(sqlite::DB_FILE_NAME), clock.clone()).expect("open");
    Backend::new(Arc::new(ledger), Arc::new(queue), clock).keeping(dir)
}

beckon_core::conformance_tests!(sqlite_backend);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_handles_on_one_file_make_one_queued_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join(sqlite::DB_FILE_NAME);
    let clock = Arc::new(ManualClock::new(START));
    let (one, _) = sqlite::open(&path, clock.clone()).expect("open one");
    let (two, _) = sqlite::open(&path, clock.clone()).expect("open two");
    let subject = Subject::Github(GithubSubject {
        owner: "acme".into(),
        repo: "app".into(),
        repository_id: 1,
        number: 9,
        is_pull_request: false,
        title: None,
        installation_id: None,
    });
    let key = ThreadKey::new(&subject, "agent");
    let mut joins = Vec::new();
    // As many as one task takes (MAX_TRIGGERS), so every one must land.
    for i in 0..MAX_TRIGGERS {
        let ledger: Arc<dyn Ledger> = if i % 2 == 0 { Arc::new(one.clone()) } else { Arc::new(two.clone()) };
        let delivery = NewDelivery {
            id: format!("d{i}"),
            tracker: Tracker::Github,
            event: "issue_comment.created".into(),
            thread_key: Some(key.clone()),
            reason: ReasonCode::Enqueued,
        };
        let effect = Effect::Trigger(NewTrigger {
            thread_key: key.clone(),
            subject: subject.clone(),
            trigger: Trigger {
                delivery_id: format!("d{i}"),
                comment_id: Some(format!("c{i}")),
                kind: TriggerKind::Mention,
                author: "alice".into(),
                body: "@agent go".into(),
                placement: Placement::TopLevel,
                at: clock.now(),
            },
            permission: Permission::Trusted,
            participates_in: None,
            marks_assigned: false,
        });
        joins.push(tokio::spawn(async move { ledger.apply(&delivery, &effect).await.expect("apply") }));
    }
    let mut enqueued = 0;
    for join in joins {
        if let Applied::Enqueued(_) = join.await.expect("join") {
            enqueued += 1;
        }
    }
    assert_eq!(enqueued, 1);
    let tasks = two.tasks(&TaskFilter::default()).await.expect("tasks");
    assert_eq!(tasks.len(), 1);
    let comments: BTreeSet<&str> = tasks[0].comment_ids().into_iter().collect();
    assert_eq!(comments.len(), MAX_TRIGGERS, "no trigger lost across handles");
}
