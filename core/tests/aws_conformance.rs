//! Runs the port conformance suite against DynamoDB + SQS FIFO on the moto emulator, one fresh
//! table and queue per case (unique names), plus what only the AWS backend can show: the
//! dead-letter redrive, receive counts across visibility timeouts, one read of the thread per
//! decision (`decide_and_apply`), the sweeper healing a failed enqueue, `aws init` being
//! idempotent, and tracker secrets read by ARN (an unfilled one is "not configured"). Every test
//! needs moto (`scripts/test` starts it).
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/moto.rs"]
mod moto;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_sdk_dynamodb::error::BoxError;
use aws_sdk_dynamodb::operation::query::QueryInput;
use aws_sdk_sqs::types::QueueAttributeName;
use beckon_core::aws::provision::{self, Plan};
use beckon_core::aws::secrets::Secrets;
use beckon_core::aws::{DynamoLedger, SqsQueue};
use beckon_core::clock::{Clock, ManualClock};
use beckon_core::conformance::{Backend, START};
use beckon_core::decision::{Effect, NewTrigger, ReasonCode};
use beckon_core::event::{GithubSubject, Placement, Subject, Tracker};
use beckon_core::ledger::{Applied, Decide, Ledger, NewDelivery, ThreadQuery, ThreadSnapshot};
use beckon_core::queue::{Queue, QueueError, QueueMessage};
use beckon_core::sweep::{sweep, STRANDED_AFTER};
use beckon_core::task::{Permission, TaskId, ThreadKey, Trigger, TriggerKind};
use secrecy::ExposeSecret;

async fn aws_backend(clock: Arc<ManualClock>) -> Backend {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let ledger = DynamoLedger::new(&config, made.table_name, clock.clone());
    let queue = SqsQueue::new(&config, made.queue_url);
    Backend::new(Arc::new(ledger), Arc::new(queue), clock)
}

mod conformance {
    use super::aws_backend;
    beckon_core::conformance_tests!(aws_backend, ignore = "needs moto: run scripts/test");
}

fn subject() -> Subject {
    Subject::Github(GithubSubject {
        owner: "acme".into(),
        repo: "app".into(),
        repository_id: 1,
        number: 9,
        is_pull_request: false,
        title: None,
        installation_id: None,
    })
}

fn trigger(clock: &ManualClock, n: u32) -> (NewDelivery, Effect) {
    let subject = subject();
    let key = ThreadKey::new(&subject, "agent");
    let delivery = NewDelivery {
        id: format!("github:d{n}"),
        tracker: Tracker::Github,
        event: "comment.created".into(),
        thread_key: Some(key.clone()),
        reason: ReasonCode::Enqueued,
    };
    let effect = Effect::Trigger(NewTrigger {
        thread_key: key,
        subject,
        trigger: Trigger {
            delivery_id: format!("d{n}"),
            comment_id: Some(format!("c{n}")),
            kind: TriggerKind::Mention,
            author: "alice".into(),
            body: "@agent please fix".into(),
            placement: Placement::TopLevel,
            at: clock.now(),
        },
        permission: Permission::Trusted,
        participates_in: None,
        marks_assigned: false,
    });
    (delivery, effect)
}

/// Counts the DynamoDB `Query` calls a client makes.
#[derive(Debug)]
struct CountQueries(Arc<AtomicUsize>);

impl Intercept for CountQueries {
    fn name(&self) -> &'static str {
        "CountQueries"
    }

    fn read_before_execution(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.input().downcast_ref::<QueryInput>().is_some() {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn decide_and_apply_reads_the_thread_once() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let queries = Arc::new(AtomicUsize::new(0));
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&config).interceptor(CountQueries(Arc::clone(&queries))).build(),
    );
    let clock = Arc::new(ManualClock::new(START));
    let ledger = DynamoLedger::from_client(client, made.table_name, clock.clone());
    let query = || {
        let key = ThreadKey::new(&subject(), "agent");
        Some(ThreadQuery { key, root_id: None, window_start: START })
    };
    for (n, expected) in [(1, "enqueued"), (2, "coalesced")] {
        let (delivery, effect) = trigger(&clock, n);
        let decide: Decide = Box::new(move |_: &ThreadSnapshot| (delivery, effect));
        let before = queries.load(Ordering::SeqCst);
        let (applied, reason) = ledger.decide_and_apply(query(), decide).await.unwrap();
        assert_eq!(applied.reason(reason).to_string(), expected);
        assert_eq!(
            queries.load(Ordering::SeqCst) - before,
            1,
            "delivery {n}: one read of the thread for rules and write"
        );
    }
}

#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn dead_letter_queue_takes_a_message_after_max_receive_count() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 2).await;
    let queue = SqsQueue::new(&config, &made.queue_url);
    let dlq = SqsQueue::new(&config, &made.dlq_url);
    let msg = QueueMessage { task_id: TaskId::generate(), group: ThreadKey("github:acme/app#1:agent".into()) };
    queue.send(&msg).await.unwrap();
    for expected in 1..=2 {
        let got = queue.receive(1, Duration::from_secs(1), Duration::from_secs(1)).await.unwrap();
        assert_eq!(got.len(), 1, "receive {expected}");
        assert_eq!((got[0].receive_count, &got[0].task_id), (expected, &msg.task_id));
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    assert_eq!(queue.receive(1, Duration::ZERO, Duration::from_secs(1)).await.unwrap(), vec![], "moved on receive 3");
    let dead = dlq.receive(10, Duration::from_secs(1), Duration::from_secs(30)).await.unwrap();
    assert_eq!(dead.iter().map(|r| (&r.task_id, &r.group)).collect::<Vec<_>>(), [(&msg.task_id, &msg.group)]);
}

#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn hashed_groups_keep_the_real_thread_key() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let queue = SqsQueue::new(&config, &made.queue_url);
    let msg =
        QueueMessage { task_id: TaskId::generate(), group: ThreadKey("linear:org/issue with spaces:agent".into()) };
    queue.send(&msg).await.unwrap();
    let got = queue.receive(1, Duration::from_secs(1), Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.iter().map(|r| &r.group).collect::<Vec<_>>(), [&msg.group]);
}

#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn sweeper_heals_a_failed_enqueue() {
    let config = moto::sdk_config(&moto::endpoint());
    let made = moto::fresh(&config, 5).await;
    let clock = Arc::new(ManualClock::new(START));
    let ledger = DynamoLedger::new(&config, &made.table_name, clock.clone());
    let queue = SqsQueue::new(&config, &made.queue_url);
    // Ingest's order: the task is recorded, then the send fails (a queue that does not exist).
    let (delivery, effect) = trigger(&clock, 1);
    let Applied::Enqueued(task) = ledger.apply(&delivery, &effect).await.unwrap() else { panic!("not enqueued") };
    let missing = SqsQueue::new(&config, format!("{}/beckon-missing.fifo", moto::endpoint()));
    let msg = QueueMessage { task_id: task.id.clone(), group: task.thread_key.clone() };
    assert!(matches!(missing.send(&msg).await, Err(QueueError::Unavailable(_))));
    // Too young to be stranded: a send may still be in flight.
    let report = sweep(&ledger, &queue, clock.now(), STRANDED_AFTER).await.unwrap();
    assert_eq!(report.found, 0);
    clock.advance(STRANDED_AFTER + Duration::from_secs(1));
    let report = sweep(&ledger, &queue, clock.now(), STRANDED_AFTER).await.unwrap();
    assert_eq!((report.found, report.enqueued, report.failed), (1, 1, 0));
    assert!(ledger.task(&task.id).await.unwrap().unwrap().enqueued_at.is_some(), "marked enqueued");
    let got = queue.receive(10, Duration::from_secs(1), Duration::from_secs(30)).await.unwrap();
    assert_eq!(got.iter().map(|r| &r.task_id).collect::<Vec<_>>(), [&task.id], "on the queue once");
    let report = sweep(&ledger, &queue, clock.now(), STRANDED_AFTER).await.unwrap();
    assert_eq!(report.found, 0, "healed tasks are not swept again");
}

#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn init_is_idempotent_and_configures_ttl_and_redrive() {
    let config = moto::sdk_config(&moto::endpoint());
    let base = moto::unique("beckon-init");
    let plan = Plan {
        table_name: base.clone(),
        queue_name: format!("{base}.fifo"),
        dlq_name: format!("{base}-dlq.fifo"),
        max_receive_count: 3,
        visibility_timeout_secs: 45,
    };
    let first = provision::ensure(&config, &plan).await.unwrap();
    let second = provision::ensure(&config, &plan).await.unwrap();
    assert!(first.table_created && !second.table_created);
    assert_eq!((&first.queue_url, &first.dlq_url), (&second.queue_url, &second.dlq_url));
    let ddb = aws_sdk_dynamodb::Client::new(&config);
    let ttl = ddb.describe_time_to_live().table_name(&base).send().await.unwrap();
    let ttl = ttl.time_to_live_description.unwrap();
    assert_eq!(ttl.attribute_name(), Some(beckon_core::aws::TTL_ATTRIBUTE));
    let table = ddb.describe_table().table_name(&base).send().await.unwrap().table.unwrap();
    assert_eq!(table.global_secondary_indexes()[0].index_name(), Some(beckon_core::aws::GSI1));
    let sqs = aws_sdk_sqs::Client::new(&config);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&first.queue_url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap();
    assert_eq!(attrs.get(&QueueAttributeName::FifoQueue).map(String::as_str), Some("true"));
    assert_eq!(attrs.get(&QueueAttributeName::VisibilityTimeout).map(String::as_str), Some("45"));
    let redrive: serde_json::Value =
        serde_json::from_str(attrs.get(&QueueAttributeName::RedrivePolicy).unwrap()).unwrap();
    assert_eq!(redrive["maxReceiveCount"].to_string().trim_matches('"'), "3");
    assert!(redrive["deadLetterTargetArn"].as_str().unwrap().ends_with("-dlq.fifo"));
}

/// Secrets Manager by ARN: a tracker secret the deployment created but nobody filled reads as "not
/// configured"; a filled one reads back exactly.
#[tokio::test]
#[ignore = "needs moto: run scripts/test"]
async fn an_empty_secret_is_none_and_a_filled_one_is_read() {
    let config = moto::sdk_config(&moto::endpoint());
    let client = aws_sdk_secretsmanager::Client::new(&config);
    let secrets = Secrets::new(&config);

    let filled = client.create_secret().name(moto::unique("filled")).secret_string("s3cret").send().await.unwrap();
    let got = secrets.fetch_optional(filled.arn().unwrap()).await.unwrap();
    assert_eq!(got.as_ref().map(|s| s.expose_secret()), Some("s3cret"));

    // Created as the template does for the tracker credentials: no value until an operator puts one.
    let unfilled = client.create_secret().name(moto::unique("unfilled")).send().await.unwrap();
    assert!(secrets.fetch_optional(unfilled.arn().unwrap()).await.unwrap().is_none());
    assert!(secrets.fetch(unfilled.arn().unwrap()).await.is_err(), "the strict read still refuses it");

    let blank = client.create_secret().name(moto::unique("blank")).secret_string("\n").send().await.unwrap();
    assert!(secrets.fetch_optional(blank.arn().unwrap()).await.unwrap().is_none());
}
