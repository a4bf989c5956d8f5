//! Tests against a real local "remote" (a bare repository in a tempdir, `file://` URLs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use beckon_core::clock::Millis;
use beckon_core::event::{GithubSubject, LinearSubject, Placement, Subject};
use beckon_core::task::{Permission, Task, ThreadKey, Trigger, TriggerKind};
use pretty_assertions::assert_eq;

use super::*;

/// Every prepare/cleanup and every git call in the tests is bounded by this.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

const SECRETS: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "fake-secret-ghp"),
    ("AWS_SECRET_ACCESS_KEY", "fake-secret-aws"),
    ("AWS_SESSION_TOKEN", "fake-secret-aws-session"),
    ("BECKON_GITHUB_WEBHOOK_SECRET", "fake-secret-webhook"),
    ("LINEAR_API_KEY", "fake-secret-linear"),
    ("OPENAI_API_KEY", "fake-secret-openai"),
    ("MY_SERVICE_TOKEN", "fake-secret-service"),
    ("DEPLOY_KEY", "fake-secret-deploy"),
    ("SOME_SECRET", "fake-secret-some"),
];

/// Runs git in `dir` with exactly `env`, asserting success; returns trimmed stdout.
async fn git_in(dir: &Path, env: &[(String, String)], args: &[&str]) -> String {
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        tokio::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("git timed out")
    .expect("git spawn");
    assert!(out.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn tool_env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), home.display().to_string()),
        ("GIT_AUTHOR_NAME".into(), "Remote Dev".into()),
        ("GIT_AUTHOR_EMAIL".into(), "dev@example.com".into()),
        ("GIT_COMMITTER_NAME".into(), "Remote Dev".into()),
        ("GIT_COMMITTER_EMAIL".into(), "dev@example.com".into()),
    ]
}

struct Fixture {
    tmp: tempfile::TempDir,
    cfg: ExecEnvConfig,
    /// The bare remote `acme/widgets`.
    remote: PathBuf,
    env: Vec<(String, String)>,
}

/// A remote `acme/widgets` with `README.md` on `main`, a `feature` branch (PR 3's head) and a
/// fork-only commit at `refs/pull/4/head`.
async fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("worker-home");
    std::fs::create_dir_all(&home).unwrap();
    let env = tool_env(&home);
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    git_in(&scratch, &env, &["init", "-q", "-b", "main"]).await;
    std::fs::write(scratch.join("README.md"), "hello\n").unwrap();
    git_in(&scratch, &env, &["add", "README.md"]).await;
    git_in(&scratch, &env, &["commit", "-qm", "init"]).await;
    git_in(&scratch, &env, &["checkout", "-qb", "feature"]).await;
    std::fs::write(scratch.join("feature.txt"), "feature\n").unwrap();
    git_in(&scratch, &env, &["add", "feature.txt"]).await;
    git_in(&scratch, &env, &["commit", "-qm", "feature"]).await;
    git_in(&scratch, &env, &["checkout", "-q", "main"]).await;
    let remotes = tmp.path().join("remotes");
    let remote = remotes.join("acme/widgets.git");
    std::fs::create_dir_all(remotes.join("acme")).unwrap();
    git_in(tmp.path(), &env, &["clone", "-q", "--bare", scratch.to_str().unwrap(), remote.to_str().unwrap()]).await;
    git_in(&remote, &env, &["update-ref", "refs/pull/3/head", "refs/heads/feature"]).await;
    let fork = git_in(&remote, &env, &["commit-tree", "main^{tree}", "-p", "main", "-m", "from a fork"]).await;
    git_in(&remote, &env, &["update-ref", "refs/pull/4/head", &fork]).await;

    let mut base_env = env[..2].to_vec();
    base_env.extend(SECRETS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    base_env.push(("LANG".into(), "C.UTF-8".into()));
    let mut cfg = ExecEnvConfig::new(
        tmp.path().join("data"),
        format!("file://{}/", remotes.display()),
        CodexSettings::new("mock-model", "mock", "http://127.0.0.1:9/v1"),
        base_env,
    );
    // Operators may list secrets by mistake; they must still be dropped.
    cfg.env_allow_list.extend(["GITHUB_TOKEN".to_owned(), "DEPLOY_KEY".to_owned()]);
    Fixture { tmp, cfg, remote, env }
}

fn github_task(owner: &str, repo: &str, number: u64) -> Task {
    let subject = Subject::Github(GithubSubject {
        owner: owner.into(),
        repo: repo.into(),
        repository_id: 1,
        number,
        is_pull_request: false,
        title: Some("Fix it".into()),
        installation_id: None,
    });
    task_for(subject)
}

fn task_for(subject: Subject) -> Task {
    let trigger = Trigger {
        delivery_id: "d1".into(),
        comment_id: Some("c1".into()),
        kind: TriggerKind::Mention,
        author: "octocat".into(),
        body: "@agent please fix".into(),
        placement: Placement::TopLevel,
        at: Millis(0),
    };
    Task::new(ThreadKey::new(&subject, "agent"), subject, trigger, Permission::Trusted, Millis(0))
}

async fn prepare_t(cfg: &ExecEnvConfig, task: &Task, checkout: Checkout) -> Result<Workspace, ExecEnvError> {
    tokio::time::timeout(TEST_TIMEOUT, prepare(cfg, task, checkout)).await.expect("prepare timed out")
}

async fn cleanup_t(cfg: &ExecEnvConfig, ws: &Workspace) {
    tokio::time::timeout(TEST_TIMEOUT, cleanup(cfg, ws)).await.expect("cleanup timed out").unwrap();
}

#[tokio::test]
async fn new_branch_workspace_commits_into_the_mirror() {
    let fx = fixture().await;
    let task = github_task("acme", "widgets", 7);
    let ws = prepare_t(&fx.cfg, &task, Checkout::NewBranch).await.unwrap();

    assert!(ws.mirror_created);
    assert_eq!(ws.branch, "beckon/issue-7");
    assert_eq!(ws.upstream, Upstream::NewBranch { existed: false });
    assert_eq!(ws.dir, fx.cfg.root.join("work").join(task.id.as_str()));
    assert_eq!(ws.mirror, fx.cfg.root.join("mirrors/acme/widgets.git"));
    assert_eq!(std::fs::read_to_string(ws.workdir.join("README.md")).unwrap(), "hello\n");
    assert_eq!(git_in(&ws.workdir, &fx.env, &["rev-parse", "--abbrev-ref", "HEAD"]).await, "beckon/issue-7");
    let gitdir =
        PathBuf::from(git_in(&ws.workdir, &fx.env, &["rev-parse", "--path-format=absolute", "--git-dir"]).await);
    assert!(gitdir.starts_with(ws.mirror.join("worktrees")), "{gitdir:?}");
    assert_eq!(
        ws.writable_roots,
        vec![gitdir, ws.mirror.join("objects"), ws.mirror.join("refs/heads"), ws.mirror.join("logs/refs/heads")]
    );
    assert!(ws.writable_roots.iter().all(|p| p.is_dir()));

    let config = std::fs::read_to_string(ws.codex_home.join("config.toml")).unwrap();
    assert!(config.contains("model = \"mock-model\""), "{config}");
    let brief = std::fs::read_to_string(ws.codex_home.join("AGENTS.md")).unwrap();
    assert!(brief.contains("acme/widgets#7") && brief.contains("`beckon/issue-7`"), "{brief}");
    assert!(brief.contains("comment_reply") && brief.contains("thread_read") && brief.contains("pull_request_open"));

    // The agent commits with exactly the workspace's environment.
    std::fs::write(ws.workdir.join("fix.txt"), "fixed\n").unwrap();
    git_in(&ws.workdir, &ws.env, &["add", "fix.txt"]).await;
    git_in(&ws.workdir, &ws.env, &["commit", "-qm", "agent fix"]).await;
    let head = git_in(&ws.workdir, &ws.env, &["rev-parse", "HEAD"]).await;
    assert_eq!(git_in(&ws.mirror, &fx.env, &["rev-parse", "refs/heads/beckon/issue-7"]).await, head);
    assert_eq!(
        git_in(&ws.mirror, &fx.env, &["log", "-1", "--format=%an <%ae>|%cn", "beckon/issue-7"]).await,
        format!("{AGENT_GIT_NAME} <{AGENT_GIT_EMAIL}>|{AGENT_GIT_NAME}")
    );
    cleanup_t(&fx.cfg, &ws).await;
}

#[tokio::test]
async fn second_task_reuses_the_mirror_and_picks_up_new_commits() {
    let fx = fixture().await;
    let started = Instant::now();
    let first = prepare_t(&fx.cfg, &github_task("acme", "widgets", 1), Checkout::NewBranch).await.unwrap();
    let first_took = started.elapsed();
    assert!(first.mirror_created);
    let marker = first.mirror.join("beckon-test-marker");
    std::fs::write(&marker, "").unwrap();

    // A new commit on the remote's main after the mirror was made.
    let fork_tip = git_in(&fx.remote, &fx.env, &["commit-tree", "main^{tree}", "-p", "main", "-m", "later"]).await;
    git_in(&fx.remote, &fx.env, &["update-ref", "refs/heads/main", &fork_tip]).await;

    let started = Instant::now();
    let second = prepare_t(&fx.cfg, &github_task("acme", "widgets", 2), Checkout::NewBranch).await.unwrap();
    let second_took = started.elapsed();
    eprintln!("prepare with mirror creation: {first_took:?}; with fetch + worktree: {second_took:?}");
    assert!(!second.mirror_created);
    assert!(marker.exists(), "the mirror was rebuilt");
    assert_eq!(second.mirror, first.mirror);
    assert_eq!(git_in(&second.workdir, &fx.env, &["rev-parse", "HEAD"]).await, fork_tip);
    // Both worktrees are live at once.
    assert!(first.workdir.join("README.md").exists());
    cleanup_t(&fx.cfg, &first).await;
    cleanup_t(&fx.cfg, &second).await;
}

#[tokio::test]
async fn pull_request_heads() {
    let fx = fixture().await;
    let feature = git_in(&fx.remote, &fx.env, &["rev-parse", "refs/heads/feature"]).await;
    let pr = Checkout::PullRequestHead { number: 3, head_ref: "feature".into() };
    let ws = prepare_t(&fx.cfg, &github_task("acme", "widgets", 3), pr).await.unwrap();
    assert_eq!(ws.branch, "feature");
    assert_eq!(ws.upstream, Upstream::PullRequestBranch);
    assert_eq!(git_in(&ws.workdir, &fx.env, &["rev-parse", "HEAD"]).await, feature);
    assert!(ws.workdir.join("feature.txt").exists());

    // A fork's head: the branch is not in the repository, so refs/pull/4/head is fetched.
    let fork = git_in(&fx.remote, &fx.env, &["rev-parse", "refs/pull/4/head"]).await;
    let pr = Checkout::PullRequestHead { number: 4, head_ref: "patch-1".into() };
    let ws4 = prepare_t(&fx.cfg, &github_task("acme", "widgets", 4), pr).await.unwrap();
    assert_eq!(ws4.branch, "beckon/pull-4");
    assert_eq!(ws4.upstream, Upstream::PullRequestRef { number: 4 });
    assert_eq!(git_in(&ws4.workdir, &fx.env, &["rev-parse", "HEAD"]).await, fork);
    assert!(std::fs::read_to_string(ws4.codex_home.join("AGENTS.md")).unwrap().contains("fork"));

    let pr = Checkout::PullRequestHead { number: 5, head_ref: "gone".into() };
    let err = prepare_t(&fx.cfg, &github_task("acme", "widgets", 5), pr).await.unwrap_err();
    assert!(matches!(err, ExecEnvError::PullRequestHeadMissing { number: 5, .. }), "{err}");
    assert!(!err.is_retryable());

    let pr = Checkout::PullRequestHead { number: 6, head_ref: "--upload-pack=evil".into() };
    let err = prepare_t(&fx.cfg, &github_task("acme", "widgets", 6), pr).await.unwrap_err();
    assert!(matches!(err, ExecEnvError::InvalidBranch(_)), "{err}");
    cleanup_t(&fx.cfg, &ws).await;
    cleanup_t(&fx.cfg, &ws4).await;
}

#[tokio::test]
async fn new_branch_continues_a_pushed_beckon_branch() {
    let fx = fixture().await;
    let pushed = git_in(&fx.remote, &fx.env, &["commit-tree", "main^{tree}", "-p", "main", "-m", "earlier task"]).await;
    git_in(&fx.remote, &fx.env, &["update-ref", "refs/heads/beckon/issue-9", &pushed]).await;
    let ws = prepare_t(&fx.cfg, &github_task("acme", "widgets", 9), Checkout::NewBranch).await.unwrap();
    assert_eq!(ws.upstream, Upstream::NewBranch { existed: true });
    assert_eq!(git_in(&ws.workdir, &fx.env, &["rev-parse", "HEAD"]).await, pushed);
    cleanup_t(&fx.cfg, &ws).await;
}

#[tokio::test]
async fn agent_env_has_no_secrets() {
    let fx = fixture().await;
    let ws = prepare_t(&fx.cfg, &github_task("acme", "widgets", 7), Checkout::NewBranch).await.unwrap();
    let names: Vec<&str> = ws.env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "PATH",
            "LANG",
            "HOME",
            "CODEX_HOME",
            "GIT_TERMINAL_PROMPT",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL"
        ]
    );
    for (name, value) in SECRETS {
        assert!(!ws.env.iter().any(|(k, v)| k == name || v == value), "{name} leaked");
    }
    let get = |name: &str| ws.env.iter().find(|(k, _)| k == name).map(|(_, v)| PathBuf::from(v));
    assert_eq!(get("HOME"), Some(ws.home.clone()));
    assert_eq!(get("CODEX_HOME"), Some(ws.codex_home.clone()));
    assert!(ws.home.is_dir());
    let debug = format!("{:?}", fx.cfg);
    assert!(!SECRETS.iter().any(|(_, v)| debug.contains(v)), "{debug}");
    cleanup_t(&fx.cfg, &ws).await;
}

#[tokio::test]
async fn cleanup_removes_the_worktree_and_is_idempotent() {
    let fx = fixture().await;
    let ws = prepare_t(&fx.cfg, &github_task("acme", "widgets", 7), Checkout::NewBranch).await.unwrap();
    cleanup_t(&fx.cfg, &ws).await;
    assert!(!ws.dir.exists());
    let list = git_in(&ws.mirror, &fx.env, &["worktree", "list", "--porcelain"]).await;
    assert!(!list.contains("workdir"), "{list}");
    assert!(
        !ws.mirror.join("worktrees").exists() || std::fs::read_dir(ws.mirror.join("worktrees")).unwrap().count() == 0
    );
    cleanup_t(&fx.cfg, &ws).await;
    // The branch stays for the next task of the thread.
    git_in(&ws.mirror, &fx.env, &["rev-parse", "--verify", "refs/heads/beckon/issue-7"]).await;
}

#[tokio::test]
async fn prepare_over_a_half_made_workspace() {
    let fx = fixture().await;
    let task = github_task("acme", "widgets", 7);
    let ws = prepare_t(&fx.cfg, &task, Checkout::NewBranch).await.unwrap();
    // A crashed attempt: a commit, a dirty file, the codex home gone, junk in the task dir.
    std::fs::write(ws.workdir.join("wip.txt"), "wip\n").unwrap();
    git_in(&ws.workdir, &ws.env, &["add", "wip.txt"]).await;
    git_in(&ws.workdir, &ws.env, &["commit", "-qm", "wip"]).await;
    std::fs::write(ws.workdir.join("README.md"), "dirty\n").unwrap();
    std::fs::remove_dir_all(&ws.codex_home).unwrap();
    std::fs::write(ws.dir.join("junk"), "").unwrap();

    let again = prepare_t(&fx.cfg, &task, Checkout::NewBranch).await.unwrap();
    assert_eq!(again.dir, ws.dir);
    assert!(!again.dir.join("junk").exists());
    assert!(!again.workdir.join("wip.txt").exists(), "the branch is reset from the remote");
    assert_eq!(std::fs::read_to_string(again.workdir.join("README.md")).unwrap(), "hello\n");
    assert!(again.codex_home.join("config.toml").exists());
    let list = git_in(&again.mirror, &fx.env, &["worktree", "list", "--porcelain"]).await;
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");

    // A task dir without any worktree (crash before `worktree add`).
    let other = github_task("acme", "widgets", 8);
    std::fs::create_dir_all(fx.cfg.root.join("work").join(other.id.as_str()).join("workdir")).unwrap();
    let ws8 = prepare_t(&fx.cfg, &other, Checkout::NewBranch).await.unwrap();
    assert!(ws8.workdir.join("README.md").exists());

    // A stale worktree of an earlier task of the same thread still holds the branch.
    let later = github_task("acme", "widgets", 7);
    let ws_later = prepare_t(&fx.cfg, &later, Checkout::NewBranch).await.unwrap();
    assert_eq!(ws_later.branch, "beckon/issue-7");
    assert!(!again.dir.exists(), "the stale workspace holding the branch was removed");
    for w in [&again, &ws8, &ws_later] {
        cleanup_t(&fx.cfg, w).await;
    }
    drop(fx.tmp);
}

#[tokio::test]
async fn bad_repositories_are_refused() {
    let fx = fixture().await;
    for (owner, repo) in [("..", "widgets"), ("acme", "../x"), ("acme", "a b"), ("-acme", "w"), ("acme", "")] {
        let err = prepare_t(&fx.cfg, &github_task(owner, repo, 1), Checkout::NewBranch).await.unwrap_err();
        assert!(matches!(err, ExecEnvError::InvalidRepository { .. }), "{owner}/{repo}: {err}");
        assert!(!err.is_retryable());
    }
    assert!(!fx.cfg.root.join("mirrors").exists());

    // A valid name that the remote does not have: the fetch fails, retryably.
    let err = prepare_t(&fx.cfg, &github_task("acme", "nothing", 1), Checkout::NewBranch).await.unwrap_err();
    assert!(matches!(err, ExecEnvError::Git { step: GitStep::Fetch, .. }), "{err}");
    assert!(err.is_retryable());
    assert!(!fx.cfg.root.join("mirrors/acme/nothing.git").exists());
}

#[tokio::test]
async fn linear_tasks_need_a_configured_repository() {
    let mut fx = fixture().await;
    let task = task_for(Subject::Linear(LinearSubject {
        organization_id: "org".into(),
        issue_id: "6f1c".into(),
        identifier: Some("ENG-123".into()),
        title: None,
    }));
    let err = prepare_t(&fx.cfg, &task, Checkout::NewBranch).await.unwrap_err();
    assert!(matches!(err, ExecEnvError::NoRepository), "{err}");
    assert!(!err.is_retryable());

    fx.cfg.linear_repository = Some(("acme".into(), "widgets".into()));
    let ws = prepare_t(&fx.cfg, &task, Checkout::NewBranch).await.unwrap();
    assert_eq!(ws.branch, "beckon/eng-123");
    assert!(std::fs::read_to_string(ws.codex_home.join("AGENTS.md")).unwrap().contains("ENG-123"));
    cleanup_t(&fx.cfg, &ws).await;
}

#[test]
fn names_and_branches() {
    for ok in ["acme", "a.b_c-d", ".github", "A1"] {
        assert!(validate_repo_part("repo", ok).is_ok(), "{ok}");
    }
    for bad in ["", ".", "..", "a..b", "-x", "a/b", "a b", "ä", &"x".repeat(101)] {
        assert!(validate_repo_part("repo", bad).is_err(), "{bad}");
    }
    for ok in ["feature", "user/fix-1", "v1.2", "beckon/issue-7"] {
        assert!(validate_branch(ok).is_ok(), "{ok}");
    }
    for bad in ["", "-x", "/x", "x/", "x.", "a..b", "a//b", "x.lock", ".hidden", "a/.b", "a@{b", "a b", "a~1", "a:b"] {
        assert!(validate_branch(bad).is_err(), "{bad}");
    }
    assert_eq!(clone_url("https://github.com/", "acme", "widgets").unwrap(), "https://github.com/acme/widgets.git");

    let linear = |identifier: Option<&str>| {
        Subject::Linear(LinearSubject {
            organization_id: "o".into(),
            issue_id: "9F3A-77".into(),
            identifier: identifier.map(str::to_owned),
            title: None,
        })
    };
    assert_eq!(branch_for(&linear(Some("ENG-123"))), "beckon/eng-123");
    assert_eq!(branch_for(&linear(Some("Ä Ö!!"))), "beckon/9f3a-77");
    assert_eq!(branch_for(&linear(None)), "beckon/9f3a-77");
    assert_eq!(branch_for(&github_task("a", "b", 12).subject), "beckon/issue-12");
}

#[test]
fn env_builder_and_redaction() {
    let vars =
        [("PATH", "/bin"), ("HOME", "/root"), ("GITHUB_TOKEN", "x"), ("CODEX_HOME", "/elsewhere"), ("TERM", "xterm")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let allow: Vec<String> = ["PATH", "HOME", "GITHUB_TOKEN", "CODEX_HOME"].map(str::to_owned).to_vec();
    let env = agent_env(vars, &allow, Path::new("/w/home"), Path::new("/w/codex-home"));
    let expected: Vec<(String, String)> = [
        ("PATH", "/bin"),
        ("HOME", "/w/home"),
        ("CODEX_HOME", "/w/codex-home"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_AUTHOR_NAME", AGENT_GIT_NAME),
        ("GIT_AUTHOR_EMAIL", AGENT_GIT_EMAIL),
        ("GIT_COMMITTER_NAME", AGENT_GIT_NAME),
        ("GIT_COMMITTER_EMAIL", AGENT_GIT_EMAIL),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec();
    assert_eq!(env, expected);
    for name in ["aws_region", "BECKON_X", "X_TOKEN", "x_key", "DB_PASSWORD", "LINEAR_URL"] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["PATH", "LANG", "KEYBOARD", "TOKENIZER"] {
        assert!(!is_secret_name(name), "{name}");
    }
    assert_eq!(
        redact_userinfo("fatal: https://x:tok@github.com/a/b.git and file:///tmp/r/ ssh://git@h/x"),
        "fatal: https://github.com/a/b.git and file:///tmp/r/ ssh://h/x"
    );
}
