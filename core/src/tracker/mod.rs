//! The tracker port: everything Beckon reads from or says back to GitHub and Linear.
//!
//! The worker (dynamic tools, fallback reply) and the edge acknowledgement see only
//! [`TrackerClient`] and the plain domain types here; the adapters ([`github`], [`linear`], behind
//! the features of the same names) own the wire shapes and the only credentials in the system.
//! This module owns the one mapping from HTTP statuses to [`TrackerError`] and the reply rules
//! ([`reply`]): the idempotency marker and the body cap. It must not read configuration or the
//! environment; binaries build the clients once and lend them out.
//! Choice where DESIGN is silent: a reply goes to the thread of the task's *latest* trigger.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::event::{Placement, Subject, Tracker};
use crate::task::{Task, TaskId};

pub mod reply;

#[cfg(any(feature = "github", feature = "linear"))]
pub mod retry;

#[cfg(feature = "github")]
pub mod github;

#[cfg(feature = "linear")]
pub mod linear;

/// An issue or pull request as the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Title.
    pub title: String,
    /// Body or description (markdown); empty when the tracker has none.
    pub body: String,
    /// Open or closed, as Beckon reasons about it.
    pub state: IssueState,
    /// The tracker's own word for the state (`open`, `closed`, Linear's workflow state name).
    pub state_label: String,
    /// Link for people.
    pub url: Option<String>,
}

/// Whether work on an issue is still expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueState {
    /// GitHub `open`; Linear states of type `triage`, `backlog`, `unstarted`, `started`.
    Open,
    /// GitHub `closed`; Linear states of type `completed` or `canceled`.
    Closed,
}

/// Who wrote a comment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommentAuthor {
    /// Stable id: GitHub numeric user id as text, Linear user UUID (empty when the tracker hid it).
    pub id: String,
    /// GitHub login or Linear display name.
    pub name: String,
    /// True for bots and apps (GitHub `type: "Bot"`, Linear `botActor`).
    pub is_bot: bool,
}

/// One comment of a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadComment {
    /// Tracker comment id (GitHub integer as text, Linear UUID).
    pub id: String,
    /// The author.
    pub author: CommentAuthor,
    /// Markdown body, verbatim (including any Beckon marker).
    pub body: String,
    /// Creation time as the tracker wrote it (RFC 3339).
    pub created_at: Option<String>,
    /// Link for people.
    pub url: Option<String>,
}

/// A comment Beckon refers to: the trigger to react to, or the anchor of a thread.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommentRef {
    /// Tracker comment id.
    pub id: String,
    /// Where it sits, which decides the endpoints (issue comment vs review comment, Linear parent).
    pub placement: Placement,
}

/// The conversation a task answers in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ThreadRef {
    /// The issue or pull request.
    pub subject: Subject,
    /// The trigger comment; `None` for an assignment, whose replies are top-level comments.
    pub trigger: Option<CommentRef>,
}

impl ThreadRef {
    /// The thread of `task`'s latest trigger comment (later comments coalesce into a queued task, and
    /// the newest one is what the asker is looking at).
    pub fn for_task(task: &Task) -> ThreadRef {
        // A Linear agent session that asked wins: its replies are session activities.
        let session = task.triggers.iter().rev().find_map(|t| match &t.placement {
            Placement::AgentSession { session_id, root_id } => Some(CommentRef {
                id: root_id.clone().unwrap_or_else(|| session_id.clone()),
                placement: t.placement.clone(),
            }),
            Placement::TopLevel | Placement::ReviewThread { .. } | Placement::Reply { .. } => None,
        });
        let trigger = session.or_else(|| {
            task.triggers.iter().rev().find_map(|t| {
                t.comment_id.as_ref().map(|id| CommentRef { id: id.clone(), placement: t.placement.clone() })
            })
        });
        ThreadRef { subject: task.subject.clone(), trigger }
    }
}

/// A reply Beckon wants to post, identified by task and sequence so a retry can find it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The task the reply belongs to.
    pub task_id: TaskId,
    /// The reply's sequence within the task (0, 1, …); one (task, seq) is posted at most once.
    pub seq: u32,
    /// Markdown body, without the marker (the client adds it).
    pub body: String,
}

/// Whether [`TrackerClient::post_reply`] created the comment or found it already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyDelivery {
    /// A new comment was created.
    Posted,
    /// A comment with this reply's marker existed (an earlier attempt posted it); nothing was sent.
    AlreadyPosted,
}

/// A reply as it stands in the tracker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedReply {
    /// Tracker comment id.
    pub comment_id: String,
    /// Link for people.
    pub url: Option<String>,
    /// Created now or found.
    pub delivery: ReplyDelivery,
}

/// A reaction Beckon leaves on a comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reaction {
    /// 👀: "seen, working on it" (the edge acknowledgement).
    Eyes,
}

impl Reaction {
    /// The name both GitHub (`content`) and Linear (`emoji`) accept.
    pub fn name(self) -> &'static str {
        match self {
            Reaction::Eyes => "eyes",
        }
    }
}

/// The tracker port. Object safe: the worker holds an `Arc<dyn TrackerClient>` per tracker.
///
/// Every call retries transient failures and rate limits internally (bounded, see
/// [`retry::RetryPolicy`]); an error that comes out has exhausted that policy or is permanent.
#[async_trait]
pub trait TrackerClient: Send + Sync + fmt::Debug {
    /// The tracker this client talks to.
    fn tracker(&self) -> Tracker;

    /// Reads the issue or pull request.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] for a subject of another tracker; otherwise the HTTP failures
    /// described on [`TrackerError`].
    async fn issue(&self, subject: &Subject) -> Result<Issue, TrackerError>;

    /// Reads the conversation oldest first: a GitHub issue/PR conversation, a GitHub review thread
    /// (its root and replies), a Linear comment thread (its root and children), or, with no
    /// trigger, the issue's top-level comments. Follows pagination to the end.
    ///
    /// # Errors
    /// As [`TrackerClient::issue`].
    async fn thread(&self, thread: &ThreadRef) -> Result<Vec<ThreadComment>, TrackerError>;

    /// Posts `reply` in `thread`, at most once per (task, seq): the body carries
    /// [`reply::marker`], and when a comment with that marker is already in the thread it is
    /// returned as [`ReplyDelivery::AlreadyPosted`] and nothing is sent. Bodies are capped
    /// ([`reply::render`]).
    ///
    /// # Errors
    /// As [`TrackerClient::issue`]. After an error the reply may or may not exist; calling again
    /// is always safe.
    async fn post_reply(&self, thread: &ThreadRef, reply: &Reply) -> Result<PostedReply, TrackerError>;

    /// Leaves `reaction` on `comment`. Idempotent: an existing reaction counts as success.
    ///
    /// # Errors
    /// As [`TrackerClient::issue`].
    async fn react(&self, subject: &Subject, comment: &CommentRef, reaction: Reaction) -> Result<(), TrackerError>;
}

/// What can go wrong talking to a tracker. Returned by every [`TrackerClient`] method and by the
/// adapters' own calls. Never carries credentials or request headers: only statuses, the
/// tracker's error message, and our own descriptions.
#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    /// A 5xx, a timeout or a connection failure that outlasted the retries. Retryable later.
    #[error("tracker unavailable: {detail}")]
    Transient {
        /// The HTTP status, when a response arrived.
        status: Option<u16>,
        /// What failed (status line, `timeout`, `connect`).
        detail: String,
    },
    /// Rate limited for longer than the client was willing to wait. Retryable after `retry_after`.
    #[error("rate limited; retry in {}s", retry_after.as_secs())]
    RateLimited {
        /// How long the tracker asked us to wait.
        retry_after: Duration,
    },
    /// 401: the credential is wrong, expired or revoked. Not retryable with the same credential.
    #[error("credentials rejected (HTTP {status}): {message}")]
    Unauthorized {
        /// The HTTP status.
        status: u16,
        /// The tracker's message.
        message: String,
    },
    /// 404 (or 410): the issue, comment or installation does not exist or is not visible. Permanent.
    #[error("not found (HTTP {status}): {message}")]
    NotFound {
        /// The HTTP status.
        status: u16,
        /// The tracker's message.
        message: String,
    },
    /// Any other 4xx (403 without a rate limit, 422 validation, …). Permanent: never retried.
    #[error("request rejected (HTTP {status}): {message}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The tracker's message.
        message: String,
    },
    /// Linear answered with GraphQL `errors` (often inside HTTP 200). Permanent.
    #[error("GraphQL error ({}): {message}", code.as_deref().unwrap_or("no code"))]
    GraphQl {
        /// `extensions.code`, when present.
        code: Option<String>,
        /// The first error's message.
        message: String,
    },
    /// A success response we could not read. Permanent (a contract mismatch, not a blip).
    #[error("unexpected tracker response: {detail}")]
    Decode {
        /// What did not parse.
        detail: String,
    },
    /// The call cannot be made as asked: a subject or placement of another tracker, a task-scoped
    /// client asked about another repository, a GitHub App call without an installation id, an
    /// unreadable private key. Permanent; a bug or a configuration problem.
    #[error("invalid tracker call: {detail}")]
    Invalid {
        /// Why.
        detail: String,
    },
}

impl TrackerError {
    /// The one mapping from an HTTP error status to a variant. `rate_limit_wait` is the wait the
    /// adapter read from the response when it recognised a rate limit (GitHub 403/429 headers,
    /// Linear `RATELIMITED`); it wins over the status.
    pub fn from_status(status: u16, rate_limit_wait: Option<Duration>, message: String) -> TrackerError {
        if let Some(retry_after) = rate_limit_wait {
            return TrackerError::RateLimited { retry_after };
        }
        match status {
            401 => TrackerError::Unauthorized { status, message },
            404 | 410 => TrackerError::NotFound { status, message },
            429 => TrackerError::RateLimited { retry_after: DEFAULT_RATE_LIMIT_WAIT },
            500..=599 => TrackerError::Transient { status: Some(status), detail: format!("HTTP {status}: {message}") },
            _ => TrackerError::Rejected { status, message },
        }
    }

    /// True when the same call may succeed later (transient failures and rate limits).
    pub fn is_retryable(&self) -> bool {
        match self {
            TrackerError::Transient { .. } | TrackerError::RateLimited { .. } => true,
            TrackerError::Unauthorized { .. }
            | TrackerError::NotFound { .. }
            | TrackerError::Rejected { .. }
            | TrackerError::GraphQl { .. }
            | TrackerError::Decode { .. }
            | TrackerError::Invalid { .. } => false,
        }
    }

    /// How long to wait before retrying a rate-limited call.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            TrackerError::RateLimited { retry_after } => Some(*retry_after),
            TrackerError::Transient { .. }
            | TrackerError::Unauthorized { .. }
            | TrackerError::NotFound { .. }
            | TrackerError::Rejected { .. }
            | TrackerError::GraphQl { .. }
            | TrackerError::Decode { .. }
            | TrackerError::Invalid { .. } => None,
        }
    }

    /// The error for a subject or placement that belongs to another tracker.
    pub fn wrong_tracker(expected: Tracker, what: &str) -> TrackerError {
        TrackerError::Invalid { detail: format!("{what} does not belong to {expected}") }
    }
}

/// The wait for a rate limit that names no time (GitHub's secondary limits without headers: "wait
/// at least one minute").
pub const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_one_variant_each() {
        let cases: [(u16, Option<Duration>, bool, &str); 8] = [
            (401, None, false, "Unauthorized"),
            (404, None, false, "NotFound"),
            (403, None, false, "Rejected"),
            (422, None, false, "Rejected"),
            (429, None, true, "RateLimited"),
            (403, Some(Duration::from_secs(5)), true, "RateLimited"),
            (500, None, true, "Transient"),
            (503, None, true, "Transient"),
        ];
        for (status, wait, retryable, name) in cases {
            let err = TrackerError::from_status(status, wait, "m".to_owned());
            assert_eq!(err.is_retryable(), retryable, "{status}");
            assert!(format!("{err:?}").starts_with(name), "{status}: {err:?}");
        }
        let limited = TrackerError::from_status(403, Some(Duration::from_secs(5)), String::new());
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(5)));
    }
}
