//! The AWS path under faults, on the moto emulator: the ingest core (what the `github-webhook`
//! function runs) records and enqueues on DynamoDB + SQS FIFO, and `beckon worker` processes run
//! there with short leases (`BECKON_LEASE_SECS=3`; the SQS visibility is the lease, and moto hides
//! and re-delivers in-flight FIFO messages as SQS does). A worker SIGKILLed mid-turn is replaced
//! and the task completes at attempt 2 with one reply; then a duplicate-delivery burst and edits
//! and deletes of triggers racing the claim, with the invariants read back from DynamoDB.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use beckon_core::aws::{DynamoLedger, SqsQueue};
use beckon_core::clock::SystemClock;
use beckon_core::ledger::Ledger;
use beckon_core::task::TaskState;
use pretty_assertions::assert_eq;

use crate::faults::{deleted, edited, on_issue};
use crate::github_double::GithubDouble;
use crate::ports::{check_invariants, deliver, done, ingest, wait_tasks, with_comment};
use crate::world::{comment, model, remote, replies_of, KillOnDrop, NEEDS, TOKEN, TURN_TIMEOUT};

const NEEDS_MOTO: &str = "needs the moto emulator: run scripts/test (it exports BECKON_TEST_AWS_ENDPOINT)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the moto emulator and the codex binary: run scripts/test"]
async fn on_dynamodb_and_sqs_a_killed_worker_duplicates_and_racing_edits_keep_the_invariants() {
    let endpoint = std::env::var("BECKON_TEST_AWS_ENDPOINT").expect(NEEDS_MOTO);
    let codex = std::env::var("BECKON_TEST_CODEX_BIN").expect(NEEDS);
    let dir = tempfile::tempdir().unwrap();
    let remotes = remote(dir.path());
    let (_mock, codex_config) = model(dir.path());
    let gh = GithubDouble::start(Some(TOKEN)).await;
    let name = format!("beckon-rel-{}-{}", std::process::id(), uuid_ish());
    let path = std::env::var("PATH").unwrap();
    let aws_env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("PATH", path.as_str()),
    ];
    let bin = env!("CARGO_BIN_EXE_beckon");
    let init =
        Command::new(bin).args(["aws", "init", "--table", &name, "--queue", &name]).env_clear().envs(aws_env).output();
    let init = init.unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let stdout = String::from_utf8_lossy(&init.stdout).to_string();
    let queue_url = stdout.lines().find_map(|l| l.strip_prefix("BECKON_QUEUE_URL=")).unwrap().to_owned();

    let sdk = beckon_core::aws::config_loader()
        .endpoint_url(&endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .test_credentials()
        .load()
        .await;
    let clock = Arc::new(SystemClock);
    let ledger: Arc<dyn Ledger> = Arc::new(DynamoLedger::new(&sdk, name.clone(), clock));
    let ingest = Arc::new(ingest(Arc::clone(&ledger), Arc::new(SqsQueue::new(&sdk, queue_url.clone()))));

    let data = dir.path().join("data");
    let base_url = format!("file://{}/", remotes.display());
    let worker = |n: u32| {
        let log = std::fs::File::create(dir.path().join(format!("worker-{n}.log"))).unwrap();
        let child = Command::new(bin)
            .arg("worker")
            .env_clear()
            .envs(aws_env)
            .envs([
                ("BECKON_TABLE_NAME", name.as_str()),
                ("BECKON_QUEUE_URL", queue_url.as_str()),
                ("BECKON_DATA_DIR", data.to_str().unwrap()),
                ("BECKON_CODEX_BIN", codex.as_str()),
                ("BECKON_CODEX_CONFIG", codex_config.to_str().unwrap()),
                ("BECKON_GIT_BASE_URL", base_url.as_str()),
                ("BECKON_GITHUB_API_URL", gh.base.as_str()),
                ("BECKON_GITHUB_TOKEN", TOKEN),
                ("BECKON_LEASE_SECS", "3"),
                ("BECKON_WORKER_SLOTS", "3"),
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        KillOnDrop(child)
    };
    let logs = || {
        (1..=2)
            .map(|n| std::fs::read_to_string(dir.path().join(format!("worker-{n}.log"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n---\n")
    };

    // 1. Before any worker runs: one comment delivered five times under one id and under three
    //    more ids, at once (concurrent conditional writes on DynamoDB). Only one creates a task.
    let created = on_issue(comment("@agent fix it", 2101), 11);
    let ids: Vec<String> =
        std::iter::repeat_n("aws-dup-same".to_owned(), 5).chain((0..3).map(|i| format!("aws-dup-{i}"))).collect();
    let mut sends = tokio::task::JoinSet::new();
    for id in ids {
        let (ingest, payload) = (Arc::clone(&ingest), created.clone());
        sends.spawn(async move { deliver(&ingest, &id, &payload).await });
    }
    let mut codes = vec![];
    while let Some(code) = sends.join_next().await {
        codes.push(code.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| *c == "enqueued").count(), 1, "{codes:?}");

    // 2. SIGKILL mid-turn; a new worker takes the task over once lease and visibility run out.
    let code = deliver(&ingest, "aws-kill", &comment("@agent slow one [[stall:4]]", 2001)).await;
    assert_eq!(code, "enqueued");
    let mut first = worker(1);
    wait_tasks(&*ledger, TURN_TIMEOUT, "the turn on DynamoDB", |t| {
        with_comment(t, 2001).is_some_and(|t| t.state == TaskState::Running)
    })
    .await;
    first.0.kill().unwrap(); // SIGKILL
    first.0.wait().unwrap();
    let mut second = worker(2);
    let all = wait_tasks(&*ledger, TURN_TIMEOUT, "the task after the restart", |t| done(t, 2001)).await;
    let t = with_comment(&all, 2001).unwrap();
    assert_eq!(t.state, TaskState::Completed, "{t:#?}\n{}", logs());
    assert_eq!(t.attempt, 2, "{t:#?}");
    // The same comment again under new delivery ids once its task ran (a second webhook on the
    // repository): it is known, and starts nothing.
    for i in 0..3 {
        let code = deliver(&ingest, &format!("aws-late-{i}"), &comment("@agent slow one [[stall:4]]", 2001)).await;
        assert_eq!(code, "ignored:known_comment");
    }
    assert_eq!(replies_of(&gh, &t.id.0), 1, "{:#?}", gh.comments());

    // 3. The trigger deleted or edited at once and after the claim.
    let mut triggering = vec![2001, 2101];
    for (i, delay) in [0u64, 1500].into_iter().enumerate() {
        let (del_issue, edit_issue) = (20 + i as u64, 30 + i as u64);
        let (del_id, edit_id) = (2200 + i as u64, 2300 + i as u64);
        let body = "@agent do it [[stall:2]]";
        assert_eq!(
            deliver(&ingest, &format!("ard-{i}"), &on_issue(comment(body, del_id), del_issue)).await,
            "enqueued"
        );
        assert_eq!(
            deliver(&ingest, &format!("are-{i}"), &on_issue(comment(body, edit_id), edit_issue)).await,
            "enqueued"
        );
        tokio::time::sleep(Duration::from_millis(delay)).await;
        deliver(&ingest, &format!("ard-x-{i}"), &on_issue(deleted(del_id, body), del_issue)).await;
        let new_body = "@agent do it, and add a test [[stall:1]]";
        deliver(&ingest, &format!("are-x-{i}"), &on_issue(edited(edit_id, new_body, body), edit_issue)).await;
        triggering.extend([del_id, edit_id]);
    }
    let all =
        wait_tasks(&*ledger, TURN_TIMEOUT * 2, "every task to end", |t| triggering.iter().all(|id| done(t, *id))).await;
    for id in [2101, 2300, 2301] {
        let t = with_comment(&all, id).unwrap();
        assert_eq!(t.state, TaskState::Completed, "{t:#?}\n{}", logs());
    }
    for id in [2200, 2201] {
        let t = with_comment(&all, id).unwrap();
        if t.state == TaskState::Cancelled {
            assert_eq!(replies_of(&gh, &t.id.0), 0, "a cancelled delete answers nothing: {t:#?}");
        }
    }
    check_invariants(&*ledger, &gh, &triggering).await;
    let _ = Command::new("kill").args(["-TERM", &second.0.id().to_string()]).status();
    let _ = second.0.wait();
}

/// A name part no other run shares (nanoseconds since the epoch).
fn uuid_ish() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}
