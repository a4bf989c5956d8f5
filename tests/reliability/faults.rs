//! Fault injection through the real binary: SIGKILL at each stage a crash can hit, the tracker
//! failing and recovering, Codex dying or hanging, duplicate and out-of-order deliveries, and the
//! trigger comment edited or deleted while the task is being claimed. Each ends with
//! [`check_invariants`].

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use crate::github_double::{Failure, GithubDouble};
use crate::support::{client, fixture, github, Beckon};
use crate::world::{check_invariants, comment, finished, replies_of, wait_until, world, World, TURN_TIMEOUT};

/// Polls `beckon tasks list` as fast as the CLI answers until `pred` holds on the only task.
fn poll_task(b: &Beckon, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + TURN_TIMEOUT;
    loop {
        if let Some(t) = b.tasks().into_iter().next().filter(|t| pred(t)) {
            return t;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {:#?}", b.tasks());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL and restart on the same data dir; the rest of the world stays up.
fn crash(w: World) -> World {
    let World { dir, github, mock, beckon } = w;
    World { dir, github, mock, beckon: beckon.crash_and_restart() }
}

fn staged_not_posted(t: &Value) -> bool {
    t["reply"].is_object() && t["reply"]["posted_comment_id"].is_null()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn killed_right_after_the_claim_the_task_is_reclaimed_and_answers_once() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    github(&client(), &w.beckon.base, "issue_comment", "k-claim", &comment("@agent quick one [[stall:2]]", 1001)).await;
    // `dispatched`: claimed, the workspace being prepared, Codex not started yet.
    let t = poll_task(&w.beckon, "the claim", |t| t["state"] != "queued");
    let stage = t["state"].as_str().unwrap().to_owned();
    let w = crash(w);
    let beckon = &w.beckon;
    let tasks = beckon.wait_for_tasks(TURN_TIMEOUT, "the task after the restart", finished);
    assert_eq!(tasks[0]["state"], "completed", "killed at {stage}; logs:\n{}", beckon.logs().join("\n"));
    assert_eq!(tasks[0]["attempt"], 2);
    check_invariants(beckon, &w.github, &[1001]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn killed_mid_turn_the_turn_reruns_and_answers_once() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    github(&client(), &w.beckon.base, "issue_comment", "k-turn", &comment("@agent slow one [[stall:4]]", 1002)).await;
    poll_task(&w.beckon, "the turn", |t| t["state"] == "running");
    let w = crash(w);
    let beckon = &w.beckon;
    let tasks = beckon.wait_for_tasks(TURN_TIMEOUT, "the task after the restart", finished);
    assert_eq!(tasks[0]["state"], "completed", "logs:\n{}", beckon.logs().join("\n"));
    check_invariants(beckon, &w.github, &[1002]);
}

/// The tracker answers the reply with 429 and asks for 30 s: the reply is staged in the outbox
/// and the worker is waiting to post it when it dies. The next attempt posts the staged reply
/// (Codex does not run again) exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn killed_after_the_reply_was_staged_but_before_it_was_posted_the_outbox_posts_it_once() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    w.github.fail_next(rate_limited(30));
    github(&client(), &w.beckon.base, "issue_comment", "k-outbox", &comment("@agent answer me", 1003)).await;
    poll_task(&w.beckon, "the staged reply", staged_not_posted);
    wait_until(TURN_TIMEOUT, "the refused POST", || !w.github.requests_to("POST", "/issues/1/comments").is_empty());
    let w = crash(w);
    let beckon = &w.beckon;
    let tasks = beckon.wait_for_tasks(TURN_TIMEOUT, "the task after the restart", finished);
    assert_eq!(tasks[0]["state"], "completed", "logs:\n{}", beckon.logs().join("\n"));
    assert_eq!(tasks[0]["outcome"]["summary"], "recovered from outbox", "{:#}", tasks[0]);
    check_invariants(beckon, &w.github, &[1003]);
}

/// GitHub accepted the reply but the answer was lost (a timeout after the write): the comment
/// exists, the outbox still says "not posted", and the worker dies. The retry finds the marker
/// in the thread and does not post a second copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_reply_posted_but_not_marked_is_found_by_its_marker_and_not_posted_again() {
    let w = world(&[("BECKON_LEASE_SECS", "3")]).await;
    w.github.fail_next(rate_limited(30));
    github(&client(), &w.beckon.base, "issue_comment", "k-lost", &comment("@agent answer me", 1004)).await;
    let t = poll_task(&w.beckon, "the staged reply", staged_not_posted);
    // The reply is staged before it is posted: wait for the refused POST, so the crash lands in
    // the window this test is about (posted by the tracker's reckoning, not marked by ours).
    wait_until(TURN_TIMEOUT, "the refused POST", || w.github.requests_to("POST", "/issues/1/comments").len() == 1);
    let marker = format!("<!-- beckon:task={};seq={} -->", t["id"].as_str().unwrap(), t["reply"]["seq"]);
    w.github.add_comment(1, &format!("{marker}\n{}", t["reply"]["body"].as_str().unwrap()), "beckon[bot]");
    let w = crash(w);
    let beckon = &w.beckon;
    let tasks = beckon.wait_for_tasks(TURN_TIMEOUT, "the task after the restart", finished);
    assert_eq!(tasks[0]["state"], "completed", "logs:\n{}", beckon.logs().join("\n"));
    check_invariants(beckon, &w.github, &[1004]);
    assert_eq!(replies_of(&w.github, t["id"].as_str().unwrap()), 1);
    assert_eq!(w.github.requests_to("POST", "/issues/1/comments").len(), 1, "only the refused POST");
}

fn rate_limited(secs: u64) -> Failure {
    Failure {
        method: "POST",
        path: "/issues/1/comments",
        status: 429,
        headers: vec![("retry-after", secs.to_string())],
        message: "You have exceeded a secondary rate limit",
    }
}

fn server_error() -> Failure {
    Failure { method: "POST", path: "/issues/1/comments", status: 500, headers: vec![], message: "boom" }
}

/// 500 then 429 on the reply: the client backs off and posts once. Then five 500s, more than the
/// client retries: the attempt is released with its reply staged and the next attempt posts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn the_tracker_failing_then_recovering_loses_no_reply_and_posts_none_twice() {
    let w = world(&[]).await;
    let c = client();
    w.github.fail_next(server_error());
    w.github.fail_next(rate_limited(1));
    w.github.fail_next(Failure { method: "GET", path: "/issues/1/comments", ..server_error() });
    github(&c, &w.beckon.base, "issue_comment", "t-1", &comment("@agent first", 1101)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the first task", finished);
    assert_eq!(tasks[0]["state"], "completed", "logs:\n{}", w.beckon.logs().join("\n"));
    assert_eq!(tasks[0]["attempt"], 1, "recovered inside the attempt");

    for _ in 0..5 {
        w.github.fail_next(server_error());
    }
    github(&c, &w.beckon.base, "issue_comment", "t-2", &comment("@agent second", 1102)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the second task", |t| t.len() == 2 && finished(t));
    let second = tasks.iter().find(|t| t["triggers"][0]["comment_id"] == "1102").unwrap();
    assert_eq!(second["state"], "completed", "logs:\n{}", w.beckon.logs().join("\n"));
    assert_eq!(second["attempt"], 2, "released with the reply staged, posted by the next attempt");
    check_invariants(&w.beckon, &w.github, &[1101, 1102]);
}

/// Codex whose model answers 500: the turn fails, the task fails with one reply saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_model_that_answers_500_fails_the_task_with_one_reply() {
    let w = world(&[]).await;
    github(&client(), &w.beckon.base, "issue_comment", "m-500", &comment("@agent go [[http:500]]", 1201)).await;
    let tasks = w.beckon.wait_for_tasks(Duration::from_secs(240), "the failure", finished);
    assert_eq!(tasks[0]["state"], "failed", "{:#}", tasks[0]);
    check_invariants(&w.beckon, &w.github, &[1201]);
    assert_eq!(replies_of(&w.github, tasks[0]["id"].as_str().unwrap()), 1, "the failure is said once");
}

/// Codex that stops producing events (the model stream stalls): the no-progress watchdog ends
/// the turn and the task fails with a reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn codex_that_stops_producing_events_is_stopped_by_the_watchdog() {
    let w = world(&[("BECKON_NO_PROGRESS_SECS", "4")]).await;
    github(&client(), &w.beckon.base, "issue_comment", "m-stall", &comment("@agent go [[stall:90]]", 1202)).await;
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the watchdog", finished);
    assert_eq!(tasks[0]["state"], "failed", "{:#}", tasks[0]);
    assert_eq!(tasks[0]["outcome"]["reason"], "timeout", "{:#}", tasks[0]);
    check_invariants(&w.beckon, &w.github, &[1202]);
}

/// A "codex" that exits at once, and one that never answers the handshake: each attempt fails
/// fast (exit, or the run deadline), the task is retried up to its attempts and then fails with
/// one reply. Nothing stays `dispatched`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn a_codex_that_dies_at_once_or_hangs_at_the_handshake_fails_the_task_after_its_attempts() {
    let scripts = tempfile::tempdir().unwrap();
    for (name, body) in [("exits", "#!/bin/sh\nexit 3\n"), ("hangs", "#!/bin/sh\nexec sleep 600\n")] {
        let path = scripts.path().join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = path.display().to_string();
        let w = world(&[("BECKON_CODEX_BIN", &bin), ("BECKON_MAX_ATTEMPTS", "2"), ("BECKON_TURN_DEADLINE_SECS", "3")])
            .await;
        github(&client(), &w.beckon.base, "issue_comment", "dead", &comment("@agent go", 1203)).await;
        let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT, "the failure", finished);
        assert_eq!(tasks[0]["state"], "failed", "{name}: {:#}", tasks[0]);
        assert_eq!(tasks[0]["outcome"]["reason"], "codex_startup", "{name}: {:#}", tasks[0]);
        assert_eq!(tasks[0]["attempt"], 2, "{name}: retried once");
        check_invariants(&w.beckon, &w.github, &[1203]);
        assert_eq!(replies_of(&w.github, tasks[0]["id"].as_str().unwrap()), 1, "{name}");
    }
}

pub fn edited(comment_id: u64, body: &str, from: &str) -> Value {
    let mut p = fixture("github/issue_comment.edited.json");
    p["comment"]["id"] = json!(comment_id);
    p["comment"]["body"] = json!(body);
    p["changes"] = json!({"body": {"from": from}});
    p
}

pub fn deleted(comment_id: u64, body: &str) -> Value {
    let mut p = fixture("github/issue_comment.deleted.json");
    p["comment"]["id"] = json!(comment_id);
    p["comment"]["body"] = json!(body);
    p
}

pub fn on_issue(mut p: Value, number: u64) -> Value {
    p["issue"]["number"] = json!(number);
    p
}

/// No worker (no Codex configured), so every task stays visibly queued: the same comment
/// delivered five times with one id and under three different ids, concurrently; an edit that
/// arrives before its `created`; a delete that arrives before its `created`. Each comment ends
/// in exactly one task.
#[tokio::test]
async fn duplicate_and_out_of_order_deliveries_give_one_task_per_comment() {
    let b = Beckon::start(&[]);
    let gh = GithubDouble::start(None).await;
    let c = client();
    let created = on_issue(comment("@agent fix it", 1301), 11);
    let ids: Vec<String> =
        std::iter::repeat_n("dup-same".to_owned(), 5).chain((0..3).map(|i| format!("dup-other-{i}"))).collect();
    let mut sends = tokio::task::JoinSet::new();
    for id in ids {
        let (c, base, payload) = (c.clone(), b.base.clone(), created.clone());
        sends.spawn(async move { github(&c, &base, "issue_comment", &id, &payload).await });
    }
    while let Some(r) = sends.join_next().await {
        let r = r.unwrap();
        assert_eq!(r.status, 200, "{r:?}");
    }

    // Edit (adding the mention) before its create, on another thread.
    let edit = on_issue(edited(1302, "@agent please fix", "please fix"), 12);
    github(&c, &b.base, "issue_comment", "ooo-edit", &edit).await;
    github(&c, &b.base, "issue_comment", "ooo-create", &on_issue(comment("@agent please fix", 1302), 12)).await;
    // Delete before its create, on a third thread: the comment is gone, so at most one task,
    // and if there is one it must not be left running.
    github(&c, &b.base, "issue_comment", "ooo-del", &on_issue(deleted(1303, "@agent x"), 13)).await;
    github(&c, &b.base, "issue_comment", "ooo-create2", &on_issue(comment("@agent x", 1303), 13)).await;

    let tasks = check_invariants(&b, &gh, &[1301, 1302]);
    let with_1303 =
        tasks.iter().filter(|t| t["triggers"].as_array().unwrap().iter().any(|tr| tr["comment_id"] == "1303")).count();
    assert!(with_1303 <= 1, "{tasks:#?}");
    let deliveries = b.deliveries();
    assert_eq!(deliveries.len(), 4 + 4, "one record per distinct delivery id: {deliveries:#?}");
}

/// The trigger comment deleted, or edited, at several moments around the claim (before it, while
/// the workspace is prepared, mid-turn): the task ends terminal, never answers twice, and a
/// deleted trigger gets no answer once its deletion was seen before the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn an_edit_or_a_delete_racing_the_claim_leaves_one_terminal_task_and_at_most_one_reply() {
    let w = world(&[("BECKON_LEASE_SECS", "3"), ("BECKON_WORKER_SLOTS", "4")]).await;
    let c = client();
    let delays = [0u64, 150, 600, 2500];
    let mut triggering = vec![];
    for (i, delay) in delays.iter().enumerate() {
        let (del_issue, edit_issue) = (20 + i as u64, 30 + i as u64);
        let (del_id, edit_id) = (1400 + i as u64, 1500 + i as u64);
        let body = "@agent do it [[stall:2]]";
        github(&c, &w.beckon.base, "issue_comment", &format!("rd-{i}"), &on_issue(comment(body, del_id), del_issue))
            .await;
        github(&c, &w.beckon.base, "issue_comment", &format!("re-{i}"), &on_issue(comment(body, edit_id), edit_issue))
            .await;
        tokio::time::sleep(Duration::from_millis(*delay)).await;
        let r = github(
            &c,
            &w.beckon.base,
            "issue_comment",
            &format!("rd-x-{i}"),
            &on_issue(deleted(del_id, body), del_issue),
        )
        .await;
        assert_eq!(r.status, 200);
        let new_body = "@agent do it, and add a test [[stall:1]]";
        let r = github(
            &c,
            &w.beckon.base,
            "issue_comment",
            &format!("re-x-{i}"),
            &on_issue(edited(edit_id, new_body, body), edit_issue),
        )
        .await;
        assert_eq!(r.status, 200);
        triggering.extend([del_id, edit_id]);
    }
    let tasks = w.beckon.wait_for_tasks(TURN_TIMEOUT * 2, "every racing task to end", |t| t.len() >= 8 && finished(t));
    check_invariants(&w.beckon, &w.github, &triggering);
    for t in &tasks {
        let deleted_trigger = t["triggers"][0]["comment_id"].as_str().unwrap().starts_with("14");
        if deleted_trigger && t["state"] == "cancelled" {
            assert_eq!(
                replies_of(&w.github, t["id"].as_str().unwrap()),
                0,
                "a cancelled delete answers nothing: {t:#}"
            );
        }
    }
}
