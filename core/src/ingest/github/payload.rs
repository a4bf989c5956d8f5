//! GitHub webhook wire types: the subset of the octokit/webhooks payload schemas Beckon reads.
//!
//! These mirror GitHub's JSON names and shapes and nothing else; [`super`] converts them into
//! domain types. Unknown fields are ignored (GitHub adds fields often). `action` is always a plain
//! string, never a closed enum, so a new GitHub action decodes and is then routed or left unrouted
//! by a `match` on its text. Fields GitHub documents as nullable or sometimes absent are `Option`.

use serde::Deserialize;

/// The part of a delivery read when its typed payload did not parse (or there is none for its
/// event name): only `action`, which `ping` lacks.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    /// `created`, `edited`, `assigned`, …; absent on `ping`.
    #[serde(default)]
    pub action: Option<String>,
}

/// `issue_comment` (`created`, `edited`, `deleted`).
#[derive(Debug, Deserialize)]
pub struct IssueCommentPayload {
    /// What happened; routes the delivery (see [`super::decode`]).
    #[serde(default)]
    pub action: Option<String>,
    /// The issue or pull request the comment is on.
    pub issue: Issue,
    /// The comment.
    pub comment: IssueComment,
    /// On `edited`: the previous values of what changed.
    #[serde(default)]
    pub changes: Option<Changes>,
    /// The repository.
    pub repository: Repository,
    /// Present when the delivery belongs to a GitHub App installation.
    #[serde(default)]
    pub installation: Option<Installation>,
}

/// `pull_request_review_comment` (`created`, `edited`, `deleted`).
#[derive(Debug, Deserialize)]
pub struct ReviewCommentPayload {
    /// What happened; routes the delivery (see [`super::decode`]).
    #[serde(default)]
    pub action: Option<String>,
    /// The review (line) comment.
    pub comment: ReviewComment,
    /// The pull request it is on.
    pub pull_request: PullRequest,
    /// On `edited`: the previous values of what changed.
    #[serde(default)]
    pub changes: Option<Changes>,
    /// The repository.
    pub repository: Repository,
    /// Present when the delivery belongs to a GitHub App installation.
    #[serde(default)]
    pub installation: Option<Installation>,
}

/// `issues` (`assigned`, `unassigned`; other actions are not decoded past the envelope).
#[derive(Debug, Deserialize)]
pub struct IssuesPayload {
    /// What happened; routes the delivery (see [`super::decode`]).
    #[serde(default)]
    pub action: Option<String>,
    /// The issue, with `assignees` as they are after the change.
    pub issue: Issue,
    /// The user just assigned or unassigned (nullable in the schema).
    #[serde(default)]
    pub assignee: Option<User>,
    /// Who made the change.
    pub sender: User,
    /// The repository.
    pub repository: Repository,
    /// Present when the delivery belongs to a GitHub App installation.
    #[serde(default)]
    pub installation: Option<Installation>,
}

/// An issue; pull requests appear as issues too, with `pull_request` set.
#[derive(Debug, Deserialize)]
pub struct Issue {
    /// Issue or pull request number.
    pub number: u64,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Markdown body (null when empty).
    #[serde(default)]
    pub body: Option<String>,
    /// Present (an object of links) only when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
    /// Users assigned now.
    #[serde(default)]
    pub assignees: Option<Vec<User>>,
}

/// A pull request, as carried by review-comment deliveries.
#[derive(Debug, Deserialize)]
pub struct PullRequest {
    /// Pull request number.
    pub number: u64,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Users assigned now.
    #[serde(default)]
    pub assignees: Option<Vec<User>>,
}

/// A comment on an issue or pull request conversation.
#[derive(Debug, Deserialize)]
pub struct IssueComment {
    /// Comment id.
    pub id: u64,
    /// Markdown body.
    pub body: String,
    /// Author.
    pub user: User,
    /// `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …
    #[serde(default)]
    pub author_association: Option<String>,
    /// The App that wrote this on the user's behalf, if any.
    #[serde(default)]
    pub performed_via_github_app: Option<App>,
    /// Browser link.
    #[serde(default)]
    pub html_url: Option<String>,
}

/// A pull request review (line) comment.
#[derive(Debug, Deserialize)]
pub struct ReviewComment {
    /// Comment id.
    pub id: u64,
    /// The comment this one replies to; absent on a thread's first comment.
    #[serde(default)]
    pub in_reply_to_id: Option<u64>,
    /// Markdown body.
    pub body: String,
    /// Author.
    pub user: User,
    /// `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, `NONE`, …
    #[serde(default)]
    pub author_association: Option<String>,
    /// The App that wrote this on the user's behalf, if any.
    #[serde(default)]
    pub performed_via_github_app: Option<App>,
    /// Browser link.
    #[serde(default)]
    pub html_url: Option<String>,
}

/// A user, bot or organization account.
#[derive(Debug, Deserialize)]
pub struct User {
    /// Login (`name[bot]` for App bots).
    pub login: String,
    /// Numeric id.
    pub id: u64,
    /// `User`, `Bot` or `Organization`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// A GitHub App reference.
#[derive(Debug, Deserialize)]
pub struct App {
    /// App id.
    pub id: u64,
}

/// The `changes` object of an `edited` delivery.
#[derive(Debug, Deserialize)]
pub struct Changes {
    /// Present when the body changed.
    #[serde(default)]
    pub body: Option<ChangedText>,
}

/// A previous text value.
#[derive(Debug, Deserialize)]
pub struct ChangedText {
    /// The value before the edit.
    pub from: String,
}

/// A repository.
#[derive(Debug, Deserialize)]
pub struct Repository {
    /// Numeric id.
    pub id: u64,
    /// Name without owner.
    #[serde(default)]
    pub name: Option<String>,
    /// `owner/name`.
    pub full_name: String,
    /// Owner account.
    #[serde(default)]
    pub owner: Option<Owner>,
}

/// A repository owner; only the login is read.
#[derive(Debug, Deserialize)]
pub struct Owner {
    /// Owner login.
    #[serde(default)]
    pub login: Option<String>,
}

/// A GitHub App installation reference.
#[derive(Debug, Deserialize)]
pub struct Installation {
    /// Installation id: needed to mint an installation token.
    pub id: u64,
}
