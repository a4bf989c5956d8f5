//! The normalized event model: what every verified webhook becomes before the trigger rules see it.
//!
//! GitHub and Linear describe the same few things (a comment was written, edited or deleted; an issue
//! was assigned or delegated) in different shapes. The decoders in [`crate::ingest`] turn each wire
//! payload into one [`Event`]; from here on nothing looks at tracker JSON. These are domain types:
//! no serde renames for wire names, no optional fields that a decoder could have resolved.
//! Payloads we verified but do not route (`ping`, installation events, unknown actions) are
//! [`EventKind::Unrouted`], a value and not an error, so they are acknowledged with 200.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which tracker a delivery came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tracker {
    /// GitHub (github.com or GitHub Enterprise Server).
    Github,
    /// Linear.
    Linear,
}

impl Tracker {
    /// The lowercase name used in thread keys, delivery ids and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Tracker::Github => "github",
            Tracker::Linear => "linear",
        }
    }
}

impl fmt::Display for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One verified, decoded webhook delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The tracker's delivery id (`X-GitHub-Delivery`, `Linear-Delivery`); the dedupe key.
    pub delivery_id: String,
    /// The tracker it came from.
    pub tracker: Tracker,
    /// What happened.
    pub kind: EventKind,
}

/// What a delivery says happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// A comment was created, edited or deleted on an issue, a pull request or a Linear issue.
    Comment(CommentEvent),
    /// An issue was assigned to (GitHub) or delegated to (Linear) someone, or that was undone.
    Assignment(AssignmentEvent),
    /// A Linear Agent API session event (`created`, `prompted`). Parsed now, routed by a later stage.
    AgentSession(AgentSessionEvent),
    /// A verified delivery Beckon does not act on (`ping`, installation events, unknown event
    /// types or actions). Acknowledged and recorded as `ignored:unrouted`.
    Unrouted(Unrouted),
}

/// The issue, pull request or Linear issue an event is about: where work happens and replies go.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "tracker", rename_all = "lowercase")]
pub enum Subject {
    /// A GitHub issue or pull request.
    Github(GithubSubject),
    /// A Linear issue.
    Linear(LinearSubject),
}

/// A GitHub issue or pull request (they share one number sequence per repository).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GithubSubject {
    /// Repository owner login.
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// `repository.id`: feeds `repository_ids` when minting a task-scoped token.
    pub repository_id: u64,
    /// Issue or pull request number.
    pub number: u64,
    /// True when the number names a pull request.
    pub is_pull_request: bool,
    /// Issue or pull request title, when the payload has it.
    pub title: Option<String>,
    /// `installation.id` when the delivery came through a GitHub App.
    pub installation_id: Option<u64>,
}

/// A Linear issue.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinearSubject {
    /// `organizationId`: the workspace.
    pub organization_id: String,
    /// The issue's UUID (stable; identifiers change when an issue moves teams).
    pub issue_id: String,
    /// Human identifier such as `ENG-123`, when the payload has it.
    pub identifier: Option<String>,
    /// Issue title, when the payload has it.
    pub title: Option<String>,
}

impl Subject {
    /// The tracker this subject lives on.
    pub fn tracker(&self) -> Tracker {
        match self {
            Subject::Github(_) => Tracker::Github,
            Subject::Linear(_) => Tracker::Linear,
        }
    }

    /// A short human label for logs and operators: `owner/repo#12` or `ENG-123`.
    pub fn label(&self) -> String {
        match self {
            Subject::Github(s) => format!("{}/{}#{}", s.owner, s.repo, s.number),
            Subject::Linear(s) => s.identifier.clone().unwrap_or_else(|| s.issue_id.clone()),
        }
    }
}

/// Who did something.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// Stable id: GitHub numeric user id as text, Linear user UUID.
    pub id: String,
    /// GitHub login or Linear display name.
    pub name: String,
    /// Human, bot or external.
    pub kind: ActorKind,
    /// GitHub: `performed_via_github_app.id` when an App wrote this on the actor's behalf.
    pub via_app_id: Option<u64>,
}

/// What kind of account an [`Actor`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A person with an account in the tracker.
    Human,
    /// A bot or integration: GitHub `type: "Bot"`, Linear `botActor` set.
    Bot,
    /// Linear: a comment relayed from Slack, Intercom and the like (`externalUser`).
    External,
}

/// What the tracker says about the author's standing, before any API lookup.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Membership {
    /// GitHub `author_association: OWNER`.
    Owner,
    /// GitHub `MEMBER`.
    Member,
    /// GitHub `COLLABORATOR`.
    Collaborator,
    /// A Linear workspace user (Linear only delivers members' comments as `user`).
    WorkspaceMember,
    /// Any other GitHub association (`CONTRIBUTOR`, `NONE`, …), kept verbatim. Private org members
    /// show up here too, which is why this means "look it up", never "refuse".
    Other(String),
    /// The payload says nothing about standing.
    Unknown,
}

/// Where a comment sits in its issue's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Placement {
    /// A top-level comment: a GitHub issue or PR conversation comment, a Linear top-level comment.
    TopLevel,
    /// A GitHub pull request review (line) comment. `root_id` is the thread's first comment
    /// (`in_reply_to_id`, or the comment itself when it starts the thread).
    ReviewThread {
        /// The review thread's top-level comment id: the target of `/replies`.
        root_id: String,
    },
    /// A Linear reply under a top-level comment (`parentId`).
    Reply {
        /// The top-level comment the thread hangs from.
        root_id: String,
    },
    /// A Linear Agent API session: the agent answers with activities in the session (Linear
    /// renders them, and turns the final `response` into a comment in the session's thread).
    AgentSession {
        /// `agentSession.id`.
        session_id: String,
        /// The root comment of the session's thread, when it has one.
        root_id: Option<String>,
    },
}

impl Placement {
    /// The thread root this comment belongs to, if the tracker threads it.
    pub fn root_id(&self) -> Option<&str> {
        match self {
            Placement::TopLevel => None,
            Placement::ReviewThread { root_id } | Placement::Reply { root_id } => Some(root_id),
            Placement::AgentSession { root_id, .. } => root_id.as_deref(),
        }
    }
}

/// A comment as Beckon sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// Tracker comment id (GitHub integer as text, Linear UUID).
    pub id: String,
    /// Markdown body, verbatim.
    pub body: String,
    /// The author.
    pub author: Actor,
    /// The author's standing as the payload states it.
    pub membership: Membership,
    /// Where the comment sits.
    pub placement: Placement,
    /// Link for operators.
    pub url: Option<String>,
}

/// What happened to a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CommentAction {
    /// A new comment.
    Created,
    /// An edit. `previous_body` is the body before the edit when the payload carries it
    /// (GitHub `changes.body.from`, Linear `updatedFrom.body`); `None` means the body did not change
    /// or the tracker did not say.
    Edited {
        /// The body before the edit.
        previous_body: Option<String>,
    },
    /// The comment was deleted (Linear: removed).
    Deleted,
}

/// A comment was created, edited or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommentEvent {
    /// Created, edited or deleted.
    pub action: CommentAction,
    /// The issue or pull request it is on.
    pub subject: Subject,
    /// The comment itself.
    pub comment: Comment,
    /// Logins currently assigned to the issue, when the payload lists them (GitHub). `None` when the
    /// payload cannot say (Linear comments carry no assignee or delegate); the ledger's record of
    /// the last assignment event answers then.
    pub assignees: Option<Vec<String>>,
}

/// An issue's assignee (GitHub) or delegate (Linear) changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentEvent {
    /// The issue.
    pub subject: Subject,
    /// Who made the change.
    pub actor: Actor,
    /// What changed.
    pub change: AssignmentChange,
    /// Issue body or description, when the payload has it (the work order for an assignment).
    pub description: Option<String>,
}

/// The change an [`AssignmentEvent`] reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssignmentChange {
    /// GitHub `issues.assigned`: `login` was assigned.
    Assigned {
        /// The assignee's login.
        login: String,
    },
    /// GitHub `issues.unassigned`: `login` was unassigned.
    Unassigned {
        /// The former assignee's login.
        login: String,
    },
    /// Linear: the delegate changed (`updatedFrom` has `delegateId`). `None` means no delegate now.
    Delegated {
        /// The new delegate's user id.
        delegate_id: Option<String>,
        /// The previous delegate's user id.
        previous_id: Option<String>,
    },
    /// Linear: the (human) assignee changed. Recorded for operators; assignment to an app sets
    /// the delegate instead.
    Assignee {
        /// The new assignee's user id.
        assignee_id: Option<String>,
    },
}

/// A Linear Agent API session event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSessionEvent {
    /// `created`, `prompted`, or anything newer kept verbatim.
    pub action: String,
    /// `agentSession.id`: the key for `agentActivityCreate`.
    pub session_id: String,
    /// The issue the session lives on.
    pub subject: Subject,
    /// The root comment of the session's thread.
    pub comment_id: Option<String>,
    /// The prompt text (`agentActivity.content.body`, else `agentActivity.body`, else the root comment).
    pub body: Option<String>,
    /// `agentActivity.signal` (`stop`, …).
    pub signal: Option<String>,
    /// Our app user id in that workspace.
    pub app_user_id: Option<String>,
}

/// A verified delivery Beckon does not route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unrouted {
    /// The event name (`X-GitHub-Event`, Linear `type`).
    pub event: String,
    /// The `action`, if any.
    pub action: Option<String>,
}
