//! GitHub REST wire shapes (platforms.md A3): only the fields Beckon reads or sends.
//!
//! Responses are lenient (`Option` where GitHub may omit or null a field); requests are exact.
//! Conversion to the domain types of [`crate::tracker`] happens here, at the edge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tracker::{CommentAuthor, Issue, IssueState, ThreadComment};

/// `GET /repos/{o}/{r}/issues/{n}` (also answers for pull requests).
#[derive(Debug, Deserialize)]
pub(crate) struct IssueResponse {
    pub title: String,
    pub body: Option<String>,
    pub state: String,
    pub html_url: Option<String>,
}

impl From<IssueResponse> for Issue {
    fn from(w: IssueResponse) -> Issue {
        let state = if w.state == "closed" { IssueState::Closed } else { IssueState::Open };
        Issue { title: w.title, body: w.body.unwrap_or_default(), state, state_label: w.state, url: w.html_url }
    }
}

/// A comment's `user`.
#[derive(Debug, Deserialize)]
pub(crate) struct UserResponse {
    pub id: u64,
    pub login: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

/// An issue comment or a pull request review comment (the fields both share, plus `in_reply_to_id`).
#[derive(Debug, Deserialize)]
pub(crate) struct CommentResponse {
    pub id: u64,
    pub body: Option<String>,
    pub user: Option<UserResponse>,
    pub created_at: Option<String>,
    pub html_url: Option<String>,
    /// Review comments only: the thread's top-level comment when this is a reply.
    pub in_reply_to_id: Option<u64>,
}

impl From<CommentResponse> for ThreadComment {
    fn from(w: CommentResponse) -> ThreadComment {
        let author = match w.user {
            Some(u) => CommentAuthor { id: u.id.to_string(), name: u.login, is_bot: u.kind.as_deref() == Some("Bot") },
            // GitHub nulls `user` for deleted accounts ("ghost").
            None => CommentAuthor { id: String::new(), name: "ghost".to_owned(), is_bot: false },
        };
        ThreadComment {
            id: w.id.to_string(),
            author,
            body: w.body.unwrap_or_default(),
            created_at: w.created_at,
            url: w.html_url,
        }
    }
}

/// `POST /app/installations/{id}/access_tokens` → 201.
#[derive(Deserialize)]
pub(crate) struct InstallationTokenResponse {
    pub token: String,
    pub expires_at: String,
}

/// `GET /repos/{o}/{r}/collaborators/{u}/permission`.
#[derive(Debug, Deserialize)]
pub(crate) struct PermissionResponse {
    /// Legacy coarse value: `admin`, `write`, `read`, `none`.
    pub permission: String,
    /// The role: also `maintain`, `triage`, or a custom role name.
    pub role_name: Option<String>,
}

/// Any error body: `{"message": "...", "documentation_url": "..."}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorResponse {
    pub message: Option<String>,
}

/// `{"body": "..."}` for create, edit and reply.
#[derive(Debug, Serialize)]
pub(crate) struct BodyRequest<'a> {
    pub body: &'a str,
}

/// `{"content": "eyes"}` for reactions.
#[derive(Debug, Serialize)]
pub(crate) struct ReactionRequest<'a> {
    pub content: &'a str,
}

/// The narrowing body of a task-scoped installation token.
#[derive(Debug, Serialize)]
pub(crate) struct TokenRequest {
    pub repository_ids: Vec<u64>,
    pub permissions: BTreeMap<&'static str, &'static str>,
}

/// `GET /repos/{o}/{r}`, the fields we read.
#[derive(Debug, Deserialize)]
pub(crate) struct RepoResponse {
    pub default_branch: String,
}

/// A pull request, the fields we read.
#[derive(Debug, Deserialize)]
pub(crate) struct PullResponse {
    pub number: u64,
    pub html_url: Option<String>,
}

/// `POST /repos/{o}/{r}/pulls`.
#[derive(Debug, Serialize)]
pub(crate) struct PullCreateRequest<'a> {
    pub title: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub body: &'a str,
}

/// `PATCH /repos/{o}/{r}/pulls/{n}`.
#[derive(Debug, Serialize)]
pub(crate) struct PullUpdateRequest<'a> {
    pub title: &'a str,
    pub body: &'a str,
}

/// `GET /repos/{o}/{r}/pulls/{n}`, the head we read.
#[derive(Debug, Deserialize)]
pub(crate) struct PullDetailResponse {
    pub head: PullHead,
}

/// A pull request's head.
#[derive(Debug, Deserialize)]
pub(crate) struct PullHead {
    #[serde(rename = "ref")]
    pub branch: String,
    /// `null` when the head repository was deleted.
    pub repo: Option<PullHeadRepo>,
}

/// The repository a head branch lives in.
#[derive(Debug, Deserialize)]
pub(crate) struct PullHeadRepo {
    pub id: u64,
}
