//! Scope and secrets: tool calls aimed at another issue or branch are refused; with a GitHub App
//! the task's installation token is narrowed to the task's repository and revoked when the task
//! ends; after a full run no secret the run used appears anywhere the run wrote, nor in the
//! environment Codex saw.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::support::{client, github, GITHUB_SECRET, LINEAR_SECRET};
use crate::world::{check_invariants, comment, finished, world_with, TURN_TIMEOUT};

const AWS_SECRET: &str = "aws-secret-wJalrXUtnFEMI-K7MDENG-bPxRfiCY";
const LINEAR_KEY: &str = "lin_api_reliability_0b7c4e2a9f";
const APP_ID: &str = "4242";

fn every_file(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map_while(Result::ok) {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            every_file(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the codex binary: run scripts/test, or set BECKON_TEST_CODEX_BIN"]
async fn tools_stay_in_scope_the_task_token_is_narrowed_and_revoked_and_no_secret_leaks() {
    let key_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/github-app-test-key.pem");
    let pem = std::fs::read_to_string(&key_path).unwrap();
    let w = world_with(
        None,
        &[
            ("BECKON_GITHUB_APP_ID", APP_ID),
            ("BECKON_GITHUB_APP_PRIVATE_KEY", &pem),
            ("BECKON_GITHUB_BOT_LOGINS", "beckon[bot]"),
            ("AWS_SECRET_ACCESS_KEY", AWS_SECRET),
            ("LINEAR_API_KEY", LINEAR_KEY),
            // Asking for secrets to be passed through must not work either.
            ("BECKON_CODEX_ENV", "AWS_SECRET_ACCESS_KEY,LINEAR_API_KEY,BECKON_GITHUB_APP_PRIVATE_KEY"),
        ],
    )
    .await;
    let c = client();
    let asks = [
        // Exit 0, so Codex reports the command as an item and its whole output lands in the
        // transcript (a failing command can look like a sandbox denial and produce no item).
        (5001, "@agent what do you see [[shell:env; git config -l; ls -la ~ .git; cat .git/config; true]]"),
        (5002, r#"@agent reply elsewhere [[call:comment_reply:{"body":"x","issue":2}]]"#),
        (5003, r#"@agent push to main [[call:pull_request_open:{"title":"t","body":"b","head":"main"}]]"#),
    ];
    for (i, (id, body)) in asks.iter().enumerate() {
        github(&c, &w.beckon.base, "issue_comment", &format!("scope-{id}"), &comment(body, *id)).await;
        w.beckon.wait_for_tasks(TURN_TIMEOUT, "the task", |t| t.len() == i + 1 && finished(t));
    }
    let tasks = check_invariants(&w.beckon, &w.github, &asks.map(|(id, _)| id));
    assert!(tasks.iter().all(|t| t["state"] == "completed"), "{tasks:#?}");

    // Scope: nothing on issue #2, no pull request at all (the head is the task's branch only).
    let elsewhere: Vec<_> = w.github.comments().into_iter().filter(|c| c.number != 1).collect();
    assert!(elsewhere.is_empty(), "{elsewhere:#?}");
    assert!(w.github.requests_to("POST", "/issues/2/").is_empty());
    for p in w.github.pulls() {
        assert_eq!(p.head, "beckon/issue-1", "a pull request from another head: {p:#?}");
    }

    // Tokens: each minted for the task's repository only, and revoked by the end.
    let tokens = w.github.tokens();
    assert!(!tokens.is_empty(), "the App minted task tokens");
    for t in &tokens {
        assert_eq!(t.request["repository_ids"], serde_json::json!([186_853_002]), "narrowed: {t:#?}");
        assert!(t.revoked, "revoked when its task ended: {t:#?}");
    }

    // Secrets: the logs, every transcript, every file in the data dir (SQLite, mirrors,
    // CODEX_HOMEs), and what Codex sent to the model (which includes the `env` output).
    let pem_line = pem.lines().nth(5).unwrap().to_owned();
    let mut secrets = vec![
        GITHUB_SECRET.to_owned(),
        LINEAR_SECRET.to_owned(),
        AWS_SECRET.to_owned(),
        LINEAR_KEY.to_owned(),
        pem_line,
    ];
    secrets.extend(tokens.iter().map(|t| t.token.clone()));
    let mut places: Vec<(String, Vec<u8>)> = vec![("logs".into(), w.beckon.logs().join("\n").into_bytes())];
    for t in &tasks {
        let id = t["id"].as_str().unwrap();
        places.push((format!("transcript {id}"), w.beckon.cli(&["tasks", "transcript", id, "--json"]).into_bytes()));
    }
    let env_seen = places.iter().any(|(_, text)| String::from_utf8_lossy(text).contains("CODEX_HOME="));
    assert!(env_seen, "the `env` output reached the transcript");
    let mut files = vec![];
    every_file(w.beckon.data_dir.path(), &mut files);
    every_file(w.dir.path(), &mut files);
    for f in files {
        if let Ok(bytes) = std::fs::read(&f) {
            places.push((f.display().to_string(), bytes));
        }
    }
    let comments: Vec<Value> = w.github.comments().iter().map(|c| Value::String(c.body.clone())).collect();
    places.push(("comments on the double".into(), serde_json::to_vec(&comments).unwrap()));
    let mut hits = vec![];
    for (place, bytes) in &places {
        for s in &secrets {
            if bytes.windows(s.len()).any(|w| w == s.as_bytes()) {
                hits.push(format!("{s:.12}… in {place}"));
            }
        }
        let text = String::from_utf8_lossy(bytes);
        if place.starts_with("transcript") && (text.contains("AWS_SECRET_ACCESS_KEY") || text.contains("BECKON_")) {
            hits.push(format!("a secret-looking variable name in {place}"));
        }
    }
    assert!(hits.is_empty(), "{} secret hit(s) in {} places searched:\n{}", hits.len(), places.len(), hits.join("\n"));
}
