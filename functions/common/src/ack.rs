//! Acknowledge at the edge: after ingest recorded a trigger, say "seen" where the asker looks
//! (👀 on the GitHub comment; a first `thought` in a Linear agent session, which Linear requires
//! within 10 s). A port ([`Acknowledge`]) so the handler is testable against doubles; [`TrackerAck`]
//! is the real one over the tracker clients. An acknowledgement is best effort: its failure is
//! logged by the caller and never fails the delivery. It must not write to the ledger.

use async_trait::async_trait;
use beckon_core::event::{GithubSubject, Subject};
use beckon_core::tracker::github::GithubClient;
use beckon_core::tracker::linear::{ActivityContent, LinearClient};
use beckon_core::tracker::{Reaction, TrackerError};

/// What to acknowledge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    /// React 👀 to a GitHub comment (`review`: a pull request review comment).
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

/// The first thought Beckon posts in a Linear agent session.
pub const FIRST_THOUGHT: &str = "On it: the task is queued and a worker will pick it up shortly.";

/// The acknowledgement port.
#[async_trait]
pub trait Acknowledge: Send + Sync + std::fmt::Debug {
    /// Acknowledges `ack`.
    ///
    /// # Errors
    /// The tracker's error; the caller logs it and answers the delivery regardless.
    async fn acknowledge(&self, ack: &Ack) -> Result<(), TrackerError>;
}

/// Acknowledges through the tracker clients; a tracker without a client is skipped (Ok).
#[derive(Debug, Default)]
pub struct TrackerAck {
    /// The GitHub client (App or token), if configured.
    pub github: Option<GithubClient>,
    /// The Linear client, if configured.
    pub linear: Option<LinearClient>,
}

#[async_trait]
impl Acknowledge for TrackerAck {
    async fn acknowledge(&self, ack: &Ack) -> Result<(), TrackerError> {
        match ack {
            Ack::GithubComment { subject, comment_id, review } => {
                let Some(client) = &self.github else { return Ok(()) };
                // Narrowed to the one repository (an App mints an installation token for it).
                let scoped = client.for_task(&Subject::Github(subject.clone())).await?;
                scoped.react_to_comment(subject, comment_id, *review, Reaction::Eyes).await
            }
            Ack::LinearSession { session_id } => {
                let Some(client) = &self.linear else { return Ok(()) };
                let thought = ActivityContent::Thought { body: FIRST_THOUGHT.to_owned() };
                client.agent_activity_create(session_id, &thought, false).await.map(drop)
            }
        }
    }
}
