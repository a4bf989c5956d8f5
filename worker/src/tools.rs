//! The agent's hands on the tracker: Codex dynamic tools, answered by the worker (DESIGN §5).
//!
//! The agent holds no credential; when the model calls a tool, `codex app-server` asks the worker
//! (`item/tool/call`) and [`TaskTools`] acts for *this task only*. No tool takes an argument that
//! names an issue, repository, comment or branch: the worker fixes all of them from the task, so a
//! prompt-injected "reply on issue #1" has nothing to aim with. Unknown arguments are refused with
//! a reason the model can read. `comment_reply` goes through the task's outbox: staged in the
//! ledger, posted with an idempotency marker, marked posted; a task answers once.
//! Tool results never contain credentials (the tracker clients keep them), only tracker text.

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use beckon_core::event::GithubSubject;
use beckon_core::ledger::{Ledger, LedgerError};
use beckon_core::task::{Task, TaskId, Transition, TransitionError};
use beckon_core::tracker::github::GithubClient;
use beckon_core::tracker::{Reply, ThreadRef, TrackerClient};
use serde_json::{json, Map, Value};
use tracing::{info, warn};

use crate::codex::protocol::DynamicToolSpec;
use crate::codex::{ToolHandler, ToolResult};
use crate::execenv::{self, ExecEnvConfig, Upstream, Workspace};

/// Tool output longer than this is cut (with a note): a huge thread should not flood the turn.
pub const MAX_TOOL_OUTPUT_CHARS: usize = 60_000;

/// The tools offered to the agent, with their JSON Schemas (DESIGN §7).
pub fn specs() -> Vec<DynamicToolSpec> {
    let none = json!({ "type": "object", "properties": {}, "additionalProperties": false });
    vec![
        DynamicToolSpec::Function {
            name: "issue_read".into(),
            description: "Read the issue or pull request you were summoned on: title, state and description.".into(),
            input_schema: none.clone(),
        },
        DynamicToolSpec::Function {
            name: "thread_read".into(),
            description: "Read the conversation you were summoned from, oldest comment first, with authors.".into(),
            input_schema: none,
        },
        DynamicToolSpec::Function {
            name: "comment_reply".into(),
            description: "Answer the person who summoned you, in the conversation you were summoned from. Markdown. \
                          Call it once, with your complete answer."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": { "body": { "type": "string", "description": "The reply, in Markdown." } },
                "required": ["body"],
                "additionalProperties": false
            }),
        },
        DynamicToolSpec::Function {
            name: "pull_request_open".into(),
            description: "Publish the commits on your current branch and open a pull request for them (or update \
                          the one this branch already has). Commit first. On a pull request, this pushes to its \
                          branch."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "title": { "type": "string", "description": "The pull request title." },
                    "body": { "type": "string", "description": "The description, in Markdown." }
                },
                "required": ["title", "body"],
                "additionalProperties": false
            }),
        },
    ]
}

/// Why a reply could not be posted, and whether trying again later may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyFailure {
    /// For the model (a tool result) and the log.
    pub message: String,
    /// True for transient causes (tracker 5xx, rate limits, ledger unavailable); false for
    /// permanent ones (a 4xx, a reply that already exists), which a retry would only repeat.
    pub retryable: bool,
}

impl std::fmt::Display for ReplyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn failure(message: String, retryable: bool) -> ReplyFailure {
    ReplyFailure { message, retryable }
}

/// What `pull_request_open` needs: the task's GitHub client (scoped to its repository), its
/// repository, and its workspace, whose branch is the only one it may push.
#[derive(Debug)]
pub struct Publisher {
    /// The task-scoped client.
    pub github: Arc<GithubClient>,
    /// The repository and issue.
    pub subject: GithubSubject,
    /// Where the workspace lives.
    pub execenv: ExecEnvConfig,
    /// The task's workspace.
    pub workspace: Workspace,
}

/// What the tools act on for one task attempt.
#[derive(Debug)]
pub struct TaskTools {
    task_id: TaskId,
    lease_gen: u64,
    thread: ThreadRef,
    ledger: Arc<dyn Ledger>,
    tracker: Arc<dyn TrackerClient>,
    /// The task's reply once posted (by the tool or recovered from the outbox): its comment id.
    replied: Mutex<Option<String>>,
    /// Set once the workspace exists (GitHub tasks only).
    publisher: OnceLock<Publisher>,
}

impl TaskTools {
    /// Tools for `task` (claimed with `lease_gen`), acting through `tracker`.
    pub fn new(task: &Task, lease_gen: u64, ledger: Arc<dyn Ledger>, tracker: Arc<dyn TrackerClient>) -> TaskTools {
        let replied = task.reply.as_ref().and_then(|r| r.posted_comment_id.clone());
        TaskTools {
            task_id: task.id.clone(),
            lease_gen,
            thread: ThreadRef::for_task(task),
            ledger,
            tracker,
            replied: Mutex::new(replied),
            publisher: OnceLock::new(),
        }
    }

    /// The publisher, once set.
    pub fn publisher(&self) -> Option<&Publisher> {
        self.publisher.get()
    }

    /// Enables `pull_request_open` for this task's workspace.
    pub fn set_publisher(&self, publisher: Publisher) {
        if self.publisher.set(publisher).is_err() {
            warn!(task_id = %self.task_id, "a publisher was already set; keeping the first");
        }
    }

    /// The id of the comment the task posted, if it has replied.
    pub fn replied(&self) -> Option<String> {
        self.replied.lock().map(|r| r.clone()).unwrap_or(None)
    }

    /// Stages `body` in the outbox (unless a reply is already staged), posts it idempotently and
    /// marks it posted. Used by `comment_reply` and by the worker's fallback reply.
    ///
    /// # Errors
    /// [`ReplyFailure`]: why the reply could not be posted (ledger or tracker), and whether a
    /// retry may help.
    pub async fn post_reply(&self, body: &str) -> Result<String, ReplyFailure> {
        if let Some(id) = self.replied() {
            return Err(failure(
                format!("you already replied in this task (comment {id}); a task answers once"),
                false,
            ));
        }
        let stage = Transition::StageReply { lease_gen: self.lease_gen, body: body.to_owned() };
        let task = match self.ledger.transition(&self.task_id, &stage).await {
            Ok(task) => task,
            // Staged by an earlier attempt that crashed before posting: post that one.
            Err(LedgerError::Transition(TransitionError::ReplyExists { .. })) => self
                .ledger
                .task(&self.task_id)
                .await
                .map_err(|e| failure(format!("could not read the task: {e}"), e.is_retryable()))?
                .ok_or_else(|| failure("the task disappeared".to_owned(), false))?,
            Err(e) => return Err(failure(format!("could not record the reply: {e}"), e.is_retryable())),
        };
        let Some(staged) = task.reply else {
            return Err(failure("the reply was not recorded".to_owned(), false));
        };
        if let Some(id) = staged.posted_comment_id {
            self.remember(&id);
            return Err(failure(
                format!("you already replied in this task (comment {id}); a task answers once"),
                false,
            ));
        }
        let reply = Reply { task_id: self.task_id.clone(), seq: staged.seq, body: staged.body };
        let posted = self.tracker.post_reply(&self.thread, &reply).await.map_err(|e| {
            warn!(task_id = %self.task_id, error = %e, "posting the reply failed");
            failure(format!("the tracker refused the reply: {e}"), e.is_retryable())
        })?;
        let mark = Transition::ReplyPosted { lease_gen: self.lease_gen, comment_id: posted.comment_id.clone() };
        if let Err(e) = self.ledger.transition(&self.task_id, &mark).await {
            // Posted but not marked: a retry finds the marker in the thread and does not repost.
            warn!(task_id = %self.task_id, error = %e, "reply posted but not marked in the outbox");
        }
        info!(task_id = %self.task_id, comment_id = %posted.comment_id, delivery = ?posted.delivery, "reply posted");
        self.remember(&posted.comment_id);
        Ok(posted.comment_id)
    }

    fn remember(&self, id: &str) {
        if let Ok(mut r) = self.replied.lock() {
            *r = Some(id.to_owned());
        }
    }

    async fn pull_request_open(&self, title: &str, body: &str) -> ToolResult {
        let Some(p) = self.publisher.get() else {
            return refuse("pull requests are only available for GitHub tasks with a workspace".to_owned());
        };
        if let Upstream::PullRequestRef { number } = &p.workspace.upstream {
            return refuse(format!(
                "pull request #{number} comes from a branch Beckon cannot push to (a fork); \
                 put your change in your reply as a patch (`git diff`) instead"
            ));
        }
        let credential = match p.github.push_credential(&p.subject).await {
            Ok(c) => c,
            Err(e) => return refuse(format!("no credential to push with: {e}")),
        };
        if let Err(e) = execenv::publish(&p.execenv, &p.workspace, Some(&credential)).await {
            return refuse(format!("pushing `{}` failed: {e}", p.workspace.branch));
        }
        let branch = &p.workspace.branch;
        match &p.workspace.upstream {
            Upstream::PullRequestBranch | Upstream::PullRequestRef { .. } => {
                ok(format!("Pushed your commits to the pull request's branch `{branch}`."))
            }
            Upstream::NewBranch { .. } => {
                let base = match p.github.default_branch(&p.subject).await {
                    Ok(b) => b,
                    Err(e) => return refuse(format!("could not read the default branch: {e}")),
                };
                let body =
                    format!("{body}\n\n---\nRequested in #{} (Beckon task `{}`).", p.subject.number, self.task_id);
                match p.github.open_pull_request(&p.subject, branch, &base, title, &body).await {
                    Ok(pr) => {
                        let verb = if pr.created { "Opened" } else { "Updated" };
                        let url = pr.url.unwrap_or_default();
                        info!(task_id = %self.task_id, number = pr.number, created = pr.created, "pull request");
                        ok(format!("{verb} pull request #{} from `{branch}` into `{base}`: {url}", pr.number))
                    }
                    Err(e) => refuse(format!("GitHub refused the pull request: {e}")),
                }
            }
        }
    }

    async fn issue_read(&self) -> ToolResult {
        match self.tracker.issue(&self.thread.subject).await {
            Ok(issue) => ok(format!(
                "Title: {}\nState: {}\nURL: {}\n\n{}",
                issue.title,
                issue.state_label,
                issue.url.as_deref().unwrap_or("-"),
                issue.body
            )),
            Err(e) => refuse(format!("could not read the issue: {e}")),
        }
    }

    async fn thread_read(&self) -> ToolResult {
        match self.tracker.thread(&self.thread).await {
            Ok(comments) if comments.is_empty() => ok("(no comments yet)".to_owned()),
            Ok(comments) => {
                let mut out = String::new();
                for c in comments {
                    let bot = if c.author.is_bot { " (bot)" } else { "" };
                    out.push_str(&format!("--- comment {} by {}{bot}:\n{}\n", c.id, c.author.name, c.body));
                }
                ok(out)
            }
            Err(e) => refuse(format!("could not read the thread: {e}")),
        }
    }
}

#[async_trait]
impl ToolHandler for TaskTools {
    async fn call(&self, tool: &str, arguments: Value) -> ToolResult {
        let args = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other @ (Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_)) => {
                return refuse(format!("arguments must be an object, got {other}"));
            }
        };
        match tool {
            "issue_read" => match only(&args, &[]) {
                Ok(()) => self.issue_read().await,
                Err(r) => r,
            },
            "thread_read" => match only(&args, &[]) {
                Ok(()) => self.thread_read().await,
                Err(r) => r,
            },
            "comment_reply" => {
                if let Err(r) = only(&args, &["body"]) {
                    return r;
                }
                let Some(body) = args.get("body").and_then(Value::as_str).filter(|b| !b.trim().is_empty()) else {
                    return refuse("`body` must be a non-empty string".to_owned());
                };
                match self.post_reply(body).await {
                    Ok(id) => ok(format!("Posted your reply (comment {id}).")),
                    Err(why) => refuse(why.message),
                }
            }
            "pull_request_open" => {
                if let Err(r) = only(&args, &["title", "body"]) {
                    return r;
                }
                let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::trim).filter(|v| !v.is_empty());
                match (text("title"), text("body")) {
                    (Some(title), Some(body)) => self.pull_request_open(title, body).await,
                    (None, _) | (_, None) => refuse("`title` and `body` must be non-empty strings".to_owned()),
                }
            }
            other => refuse(format!("unknown tool `{other}`")),
        }
    }
}

/// Refuses arguments outside `allowed`: the tools act on this task's thread only, so any attempt
/// to aim them elsewhere (`issue`, `repo`, `comment_id`, …) is named and refused.
fn only(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), ToolResult> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(refuse(format!(
            "unexpected argument `{k}`: this tool acts only on the conversation you were summoned from"
        ))),
        None => Ok(()),
    }
}

fn ok(text: String) -> ToolResult {
    ToolResult { text: cap(text), success: true }
}

fn refuse(text: String) -> ToolResult {
    ToolResult { text, success: false }
}

fn cap(text: String) -> String {
    match text.char_indices().nth(MAX_TOOL_OUTPUT_CHARS) {
        Some((cut, _)) => format!("{}\n…[truncated by Beckon]", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beckon_core::clock::{ManualClock, Millis};
    use beckon_core::decision::{Effect, NewTrigger, ReasonCode};
    use beckon_core::event::{GithubSubject, Placement, Subject, Tracker};
    use beckon_core::ledger::{Applied, NewDelivery};
    use beckon_core::task::{Permission, ThreadKey, Trigger, TriggerKind};
    use beckon_core::tracker::{
        CommentAuthor, CommentRef, Issue, IssueState, PostedReply, Reaction, ReplyDelivery, ThreadComment, TrackerError,
    };
    use std::time::Duration;

    /// A tracker port in memory: posts are stored, and a post whose marker already exists is
    /// reported as already posted, as the real clients do.
    #[derive(Debug, Default)]
    struct FakeTracker {
        posts: Mutex<Vec<Reply>>,
        fail_posts: Mutex<bool>,
    }

    #[async_trait]
    impl TrackerClient for FakeTracker {
        fn tracker(&self) -> Tracker {
            Tracker::Github
        }
        async fn issue(&self, _: &Subject) -> Result<Issue, TrackerError> {
            Ok(Issue {
                title: "Toast".into(),
                body: "It is missing".into(),
                state: IssueState::Open,
                state_label: "open".into(),
                url: None,
            })
        }
        async fn thread(&self, _: &ThreadRef) -> Result<Vec<ThreadComment>, TrackerError> {
            let author = CommentAuthor { id: "1".into(), name: "alice".into(), is_bot: false };
            Ok(vec![ThreadComment { id: "11".into(), author, body: "@agent fix".into(), created_at: None, url: None }])
        }
        async fn post_reply(&self, _: &ThreadRef, reply: &Reply) -> Result<PostedReply, TrackerError> {
            if *self.fail_posts.lock().unwrap() {
                return Err(TrackerError::Transient { status: Some(502), detail: "bad gateway".into() });
            }
            let mut posts = self.posts.lock().unwrap();
            if let Some(i) = posts.iter().position(|p| p.task_id == reply.task_id && p.seq == reply.seq) {
                return Ok(PostedReply {
                    comment_id: format!("c{i}"),
                    url: None,
                    delivery: ReplyDelivery::AlreadyPosted,
                });
            }
            posts.push(reply.clone());
            Ok(PostedReply { comment_id: format!("c{}", posts.len() - 1), url: None, delivery: ReplyDelivery::Posted })
        }
        async fn react(&self, _: &Subject, _: &CommentRef, _: Reaction) -> Result<(), TrackerError> {
            Ok(())
        }
    }

    const LEASE: Duration = Duration::from_secs(60);

    async fn claimed_task() -> (Arc<dyn Ledger>, Task, Arc<ManualClock>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(Millis(1_000_000)));
        let (ledger, _queue) = beckon_core::sqlite::open(&dir.path().join("db"), clock.clone()).unwrap();
        let ledger: Arc<dyn Ledger> = Arc::new(ledger);
        let subject = Subject::Github(GithubSubject {
            owner: "acme".into(),
            repo: "app".into(),
            repository_id: 1,
            number: 3,
            is_pull_request: false,
            title: None,
            installation_id: None,
        });
        let key = ThreadKey::new(&subject, "agent");
        let trigger = Trigger {
            delivery_id: "d1".into(),
            comment_id: Some("11".into()),
            kind: TriggerKind::Mention,
            author: "alice".into(),
            body: "@agent fix".into(),
            placement: Placement::TopLevel,
            at: Millis(1_000_000),
        };
        let nt = NewTrigger {
            thread_key: key.clone(),
            subject,
            trigger,
            permission: Permission::Trusted,
            participates_in: None,
            marks_assigned: false,
        };
        let delivery = NewDelivery {
            id: "github:d1".into(),
            tracker: Tracker::Github,
            event: "comment.created".into(),
            thread_key: Some(key),
            reason: ReasonCode::Enqueued,
        };
        let Applied::Enqueued(task) = ledger.apply(&delivery, &Effect::Trigger(nt)).await.unwrap() else { panic!() };
        let task = ledger.transition(&task.id, &Transition::Claim { lease: LEASE }).await.unwrap();
        (ledger, task, clock, dir)
    }

    #[tokio::test]
    async fn tools_cannot_be_aimed_at_another_issue_and_answer_once() {
        let (ledger, task, _clock, _dir) = claimed_task().await;
        let tracker = Arc::new(FakeTracker::default());
        let tools = TaskTools::new(&task, task.lease_gen, ledger.clone(), tracker.clone());

        let aimed = tools.call("comment_reply", json!({"body": "hi", "issue_number": 1})).await;
        assert!(!aimed.success && aimed.text.contains("unexpected argument `issue_number`"), "{aimed:?}");
        let aimed = tools.call("thread_read", json!({"repository": "other/repo"})).await;
        assert!(!aimed.success && aimed.text.contains("`repository`"), "{aimed:?}");
        assert!(!tools.call("delete_repo", json!({})).await.success);
        assert!(!tools.call("comment_reply", json!({"body": "   "})).await.success);
        assert!(tracker.posts.lock().unwrap().is_empty(), "nothing was posted by refused calls");

        let first = tools.call("comment_reply", json!({"body": "Fixed it."})).await;
        assert!(first.success, "{first:?}");
        let second = tools.call("comment_reply", json!({"body": "And again."})).await;
        assert!(!second.success && second.text.contains("already replied"), "{second:?}");
        let posts = tracker.posts.lock().unwrap().clone();
        assert_eq!(posts.len(), 1);
        assert_eq!((posts[0].body.as_str(), posts[0].seq), ("Fixed it.", 1));
        let stored = ledger.task(&task.id).await.unwrap().unwrap();
        assert_eq!(stored.reply.and_then(|r| r.posted_comment_id).as_deref(), Some("c0"));

        let thread = tools.call("thread_read", Value::Null).await;
        assert!(thread.success && thread.text.contains("comment 11 by alice"), "{thread:?}");
    }

    #[tokio::test]
    async fn a_reply_staged_before_a_crash_is_posted_once_by_the_next_attempt() {
        let (ledger, task, clock, _dir) = claimed_task().await;
        let tracker = Arc::new(FakeTracker::default());
        *tracker.fail_posts.lock().unwrap() = true;
        let tools = TaskTools::new(&task, task.lease_gen, ledger.clone(), tracker.clone());
        let failed = tools.call("comment_reply", json!({"body": "The answer."})).await;
        assert!(!failed.success && failed.text.contains("bad gateway"), "{failed:?}");

        // The worker dies; the lease runs out; another attempt claims the task.
        clock.advance(LEASE + Duration::from_secs(1));
        *tracker.fail_posts.lock().unwrap() = false;
        let retried = ledger.transition(&task.id, &Transition::Claim { lease: LEASE }).await.unwrap();
        let staged = retried.reply.clone().unwrap();
        assert_eq!((staged.body.as_str(), staged.posted_comment_id), ("The answer.", None));
        let tools = TaskTools::new(&retried, retried.lease_gen, ledger.clone(), tracker.clone());
        // Whatever the new attempt tries to say, the staged reply is the one that goes out, once.
        assert_eq!(tools.post_reply("A different answer.").await.unwrap(), "c0");
        assert_eq!(
            tools.post_reply("Again.").await.unwrap_err().message,
            "you already replied in this task (comment c0); a task answers once"
        );
        let posts = tracker.posts.lock().unwrap().clone();
        assert_eq!(posts.iter().map(|p| p.body.as_str()).collect::<Vec<_>>(), vec!["The answer."]);
    }
}
