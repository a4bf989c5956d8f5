//! Loops and budgets: Beckon's own reply never triggers it, and an agent that mentions `@agent` in
//! its reply, echoed back by a second Beckon (an allow-listed bot), stops at the thread's run budget.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{client, github, Beckon};
use crate::world::{check_invariants, comment, finished, world, TURN_TIMEOUT};

/// Without a worker: Beckon's own comments (its login in any case, its GitHub App) mentioning
/// `@agent` are recorded as `ignored:own_comment` and create nothing.
#[tokio::test]
async fn beckons_own_comments_never_trigger() {
    let b = Beckon::start(&[("BECKON_GITHUB_BOT_LOGINS", "beckon[bot]"), ("BECKON_GITHUB_APP_ID", "4242")]);
    let c = client();
    let mut own = comment("<!-- beckon:task=t_1;seq=1 -->\n@agent done, @agent please review", 2001);
    own["comment"]["user"]["login"] = json!("beckon[bot]");
    own["comment"]["user"]["type"] = json!("Bot");
    let mut cased = own.clone();
    cased["comment"]["id"] = json!(2002);
    cased["comment"]["user"]["login"] = json!("Beckon[bot]");
    let mut via_app = comment("@agent again", 2003);
    via_app["comment"]["performed_via_github_app"] = json!({"id": 4242, "slug": "beckon"});
    via_app["comment"]["user"]["login"] = json!("someone-else[bot]");
    via_app["comment"]["user"]["type"] = json!("Bot");
    for (id, p) in [("own-1", &own), ("own-2", &cased), ("own-3", &via_app)] {
        let r = github(&c, &b.base, "issue_comment", id, p).await;
        assert_eq!((r.status, r.body["outcome"].as_str().unwrap()), (200, "ignored:own_comment"), "{id}: {r:?}");
    }
    assert!(b.tasks().is_empty());
}

/// The agent mentions `@agent` in its own reply (through `comment_reply`), and a second
/// "instance" (an allow-listed bot whose agent always mentions `@agent` back) forwards every reply
/// Beckon posts as a new signed webhook. The ping-pong stops after `BECKON_MAX_RUNS_PER_HOUR`
/// runs, with `ignored:run_budget`; Beckon's own reply delivered back as is never triggers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn an_agent_echoed_back_by_another_instance_stops_at_the_run_budget() {
    const BUDGET: usize = 3;
    let w = world(&[
        ("BECKON_MAX_RUNS_PER_HOUR", "3"),
        ("BECKON_GITHUB_BOT_LOGINS", "beckon[bot]"),
        ("BECKON_BOT_ALLOW_LIST", "other-beckon[bot]"),
    ])
    .await;
    let c = client();
    let first = r#"@agent say it back [[call:comment_reply:{"body":"@agent please continue"}]]"#;
    github(&c, &w.beckon.base, "issue_comment", "loop-0", &comment(first, 2101)).await;
    let mut forwarded = HashSet::new();
    let mut quiet_since = Instant::now();
    let deadline = Instant::now() + TURN_TIMEOUT * 3;
    // Forward until nothing new was posted for a while and every task is over.
    while quiet_since.elapsed() < Duration::from_secs(15) || !finished(&w.beckon.tasks()) {
        assert!(Instant::now() < deadline, "the loop did not stop: {:#?}", w.beckon.tasks());
        for reply in w.github.comments() {
            if reply.login != "beckon[bot]" || !forwarded.insert(reply.id) {
                continue;
            }
            let body =
                if reply.body.contains("@agent") { reply.body.clone() } else { format!("@agent {}", reply.body) };
            let mut echo = comment(&body, 3000 + reply.id);
            echo["comment"]["user"]["login"] = json!("other-beckon[bot]");
            echo["comment"]["user"]["type"] = json!("Bot");
            let r = github(&c, &w.beckon.base, "issue_comment", &format!("echo-{}", reply.id), &echo).await;
            assert_eq!(r.status, 200);
            // Beckon's own reply delivered back as is: never a trigger.
            let r = github(
                &c,
                &w.beckon.base,
                "issue_comment",
                &format!("self-{}", reply.id),
                &comment_from_bot(&reply.body, reply.id),
            )
            .await;
            assert_eq!(r.body["outcome"], "ignored:own_comment");
            quiet_since = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let tasks = w.beckon.tasks();
    assert_eq!(tasks.len(), BUDGET, "{tasks:#?}");
    let reasons: Vec<String> = w.beckon.deliveries().iter().map(|d| d["reason"].as_str().unwrap().to_owned()).collect();
    assert!(reasons.iter().any(|r| r == "ignored:run_budget"), "{reasons:?}");
    assert_eq!(forwarded.len(), BUDGET, "one reply per run");
    check_invariants(&w.beckon, &w.github, &[2101]);
}

fn comment_from_bot(body: &str, id: u64) -> serde_json::Value {
    let mut p = comment(body, id);
    p["comment"]["user"]["login"] = json!("beckon[bot]");
    p["comment"]["user"]["type"] = json!("Bot");
    p
}
