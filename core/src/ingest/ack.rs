//! Acknowledge at the edge: once ingest recorded a request for work, say "seen" where the asker
//! looks (👀 on the GitHub comment; a first `thought` in a Linear agent session, which Linear
//! requires within 10 s), inside the webhook's own request so it lands within a second.
//!
//! [`ack_for`] picks the target from the decoded event (pure); [`Acknowledge`] is the port;
//! [`TrackerAck`] is the real one over the tracker clients. An acknowledgement is best effort and
//! bounded: inline before the answer on Lambda ([`ACK_TIMEOUT`]), after it in `beckon serve`
//! ([`BACKGROUND_ACK_TIMEOUT`]); a failure is logged and the delivery is answered regardless. It
//! never writes to the ledger.

use std::time::Duration;

use async_trait::async_trait;

use crate::event::{CommentAction, Event, EventKind, GithubSubject, Placement, Subject};
use crate::tracker::TrackerError;

/// The longest an acknowledgement may hold the webhook's answer: Linear wants its 200 within
/// 5 s, so this leaves room for the ledger write before it.
pub const ACK_TIMEOUT: Duration = Duration::from_millis(2500);

/// The longest a background acknowledgement (a long-running server) may wait, mostly for GitHub's
/// one-write-per-second pacing during a burst of comments.
pub const BACKGROUND_ACK_TIMEOUT: Duration = Duration::from_secs(60);

/// The first thought Beckon posts in a Linear agent session.
pub const FIRST_THOUGHT: &str = "On it: the task is queued and a worker will pick it up shortly.";

/// What to acknowledge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    /// React 👀 to a GitHub comment.
    GithubComment {
        /// Its issue or pull request.
        subject: GithubSubject,
        /// The comment id.
        comment_id: String,
        /// True for a review (line) comment.
        review: bool,
    },
    /// Post the first `thought` in a Linear agent session.
    LinearSession {
        /// `agentSession.id`.
        session_id: String,
    },
}

/// The acknowledgement for `event`, if it has one: a created or edited GitHub comment, or a
/// Linear agent session. (Plain Linear comments get their answer in the thread.)
pub fn ack_for(event: &Event) -> Option<Ack> {
    match &event.kind {
        EventKind::Comment(c) => {
            let (CommentAction::Created | CommentAction::Edited { .. }) = c.action else { return None };
            let Subject::Github(subject) = &c.subject else { return None };
            let review = match c.comment.placement {
                Placement::ReviewThread { .. } => true,
                Placement::TopLevel | Placement::Reply { .. } | Placement::AgentSession { .. } => false,
            };
            Some(Ack::GithubComment { subject: subject.clone(), comment_id: c.comment.id.clone(), review })
        }
        EventKind::AgentSession(s) => Some(Ack::LinearSession { session_id: s.session_id.clone() }),
        EventKind::Assignment(_) | EventKind::Unrouted(_) => None,
    }
}

/// The acknowledgement port.
#[async_trait]
pub trait Acknowledge: Send + Sync + std::fmt::Debug {
    /// Acknowledges `ack`.
    ///
    /// # Errors
    /// The tracker's error; the caller logs it and answers the delivery regardless.
    async fn acknowledge(&self, ack: &Ack) -> Result<(), TrackerError>;
}

/// Acknowledges through the tracker clients; a tracker without a client is skipped (Ok), and so is
/// a tracker whose feature (`github`, `linear`) this build leaves out: each Lambda function links
/// only its own tracker's client.
#[derive(Debug, Default)]
pub struct TrackerAck {
    /// The GitHub client (App or token), if configured.
    #[cfg(feature = "github")]
    pub github: Option<crate::tracker::github::GithubClient>,
    /// The Linear client, if configured.
    #[cfg(feature = "linear")]
    pub linear: Option<crate::tracker::linear::LinearClient>,
}

#[async_trait]
impl Acknowledge for TrackerAck {
    async fn acknowledge(&self, ack: &Ack) -> Result<(), TrackerError> {
        match ack {
            Ack::GithubComment { subject, comment_id, review } => self.github_eyes(subject, comment_id, *review).await,
            Ack::LinearSession { session_id } => self.linear_thought(session_id).await,
        }
    }
}

impl TrackerAck {
    /// 👀 on the comment, through a token narrowed to its repository.
    #[cfg(feature = "github")]
    async fn github_eyes(&self, subject: &GithubSubject, comment_id: &str, review: bool) -> Result<(), TrackerError> {
        use crate::tracker::Reaction;
        let Some(client) = &self.github else { return Ok(()) };
        // Narrowed to the one repository (an App mints an installation token for it).
        let scoped = client.for_task(&Subject::Github(subject.clone())).await?;
        let reacted = scoped.react_to_comment(subject, comment_id, review, Reaction::Eyes).await;
        if let Err(e) = scoped.revoke().await {
            tracing::debug!(error = %e, "could not revoke the acknowledgement's token");
        }
        reacted
    }

    #[cfg(not(feature = "github"))]
    async fn github_eyes(&self, _: &GithubSubject, _: &str, _: bool) -> Result<(), TrackerError> {
        Ok(())
    }

    /// The first thought in the agent session.
    #[cfg(feature = "linear")]
    async fn linear_thought(&self, session_id: &str) -> Result<(), TrackerError> {
        use crate::tracker::linear::ActivityContent;
        let Some(client) = &self.linear else { return Ok(()) };
        let thought = ActivityContent::Thought { body: FIRST_THOUGHT.to_owned() };
        client.agent_activity_create(session_id, &thought, false).await.map(drop)
    }

    #[cfg(not(feature = "linear"))]
    async fn linear_thought(&self, _: &str) -> Result<(), TrackerError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Actor, ActorKind, Comment, CommentEvent, Membership, Tracker};

    fn comment(action: CommentAction, placement: Placement) -> Event {
        let subject = GithubSubject {
            owner: "o".into(),
            repo: "r".into(),
            repository_id: 1,
            number: 2,
            is_pull_request: true,
            title: None,
            installation_id: Some(3),
        };
        let author = Actor { id: "9".into(), name: "alice".into(), kind: ActorKind::Human, via_app_id: None };
        Event {
            delivery_id: "d".into(),
            tracker: Tracker::Github,
            kind: EventKind::Comment(CommentEvent {
                action,
                subject: Subject::Github(subject),
                comment: Comment {
                    id: "77".into(),
                    body: "@agent".into(),
                    author,
                    membership: Membership::Owner,
                    placement,
                    url: None,
                },
                assignees: None,
            }),
        }
    }

    #[test]
    fn acknowledgements_target_the_trigger_comment() {
        let review = ack_for(&comment(CommentAction::Created, Placement::ReviewThread { root_id: "70".into() }));
        assert!(matches!(review, Some(Ack::GithubComment { ref comment_id, review: true, .. }) if comment_id == "77"));
        let top = ack_for(&comment(CommentAction::Edited { previous_body: None }, Placement::TopLevel));
        assert!(matches!(top, Some(Ack::GithubComment { review: false, .. })));
        assert_eq!(ack_for(&comment(CommentAction::Deleted, Placement::TopLevel)), None);
    }
}
