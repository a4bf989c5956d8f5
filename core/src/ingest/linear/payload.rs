//! Linear webhook wire types: the subset of `EntityWebhookPayload`, `CommentWebhookPayload`,
//! `IssueWebhookPayload` and `AgentSessionEventWebhookPayload` (SDK `schema.graphql`) Beckon reads.
//!
//! These mirror Linear's camelCase JSON and nothing else; [`super`] converts them into domain types.
//! Unknown fields are ignored. `type` and `action` stay strings. `updatedFrom` stays a JSON map,
//! because what matters is which *keys* it has (a key with `null` means "was unset"), which a struct
//! of `Option`s cannot tell apart from an absent key. `botActor` and activity `content` are loose
//! JSON: the schema types them as JSON objects whose shape Linear does not promise.

use serde::Deserialize;
use serde_json::{Map, Number, Value};

/// The part of every delivery read before routing.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// `Comment`, `Issue`, `AgentSessionEvent`, … (the same as the `Linear-Event` header).
    #[serde(rename = "type")]
    pub kind: String,
    /// `create`, `update`, `remove`, or an agent session action such as `created`.
    #[serde(default)]
    pub action: Option<String>,
    /// When Linear sent the delivery, epoch ms; integer or float. Inside the signed body.
    #[serde(default)]
    pub webhook_timestamp: Option<Number>,
}

/// A `Comment` delivery.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentPayload {
    /// The comment.
    pub data: CommentData,
    /// The workspace.
    pub organization_id: String,
    /// Entity URL (the comment's link).
    #[serde(default)]
    pub url: Option<String>,
    /// On `update`: previous values of the changed fields.
    #[serde(default)]
    pub updated_from: Option<Map<String, Value>>,
}

/// `CommentWebhookPayload`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentData {
    /// Comment UUID.
    pub id: String,
    /// Markdown body.
    #[serde(default)]
    pub body: Option<String>,
    /// The issue; null for comments on project updates, documents and the like.
    #[serde(default)]
    pub issue_id: Option<String>,
    /// The issue, summarized.
    #[serde(default)]
    pub issue: Option<IssueRef>,
    /// The top-level comment this replies to; null for a top-level comment.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// Author's user id.
    #[serde(default)]
    pub user_id: Option<String>,
    /// Author.
    #[serde(default)]
    pub user: Option<UserRef>,
    /// Set when a bot or integration wrote the comment.
    #[serde(default)]
    pub bot_actor: Option<Value>,
    /// Author relayed from Slack, Intercom, …
    #[serde(default)]
    pub external_user_id: Option<String>,
    /// Author relayed from Slack, Intercom, …
    #[serde(default)]
    pub external_user: Option<UserRef>,
    /// Comment link, when the entity carries one.
    #[serde(default)]
    pub url: Option<String>,
}

/// An `Issue` delivery.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuePayload {
    /// The issue after the change.
    pub data: IssueData,
    /// The workspace.
    pub organization_id: String,
    /// Who made the change; absent for some automation.
    #[serde(default)]
    pub actor: Option<EnvelopeActor>,
    /// On `update`: previous values of the changed fields.
    #[serde(default)]
    pub updated_from: Option<Map<String, Value>>,
}

/// `IssueWebhookPayload`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueData {
    /// Issue UUID.
    pub id: String,
    /// `ENG-123`.
    #[serde(default)]
    pub identifier: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Markdown description.
    #[serde(default)]
    pub description: Option<String>,
    /// The human owner.
    #[serde(default)]
    pub assignee_id: Option<String>,
    /// The agent (app user) the issue is delegated to.
    #[serde(default)]
    pub delegate_id: Option<String>,
}

/// The envelope's `actor`: a user, OAuth client, integration or external user.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeActor {
    /// Actor id.
    #[serde(default)]
    pub id: Option<String>,
    /// `user`, `OauthClient`, `Integration`, `ExternalUser`, …
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
}

/// An `AgentSessionEvent` delivery.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessionPayload {
    /// The workspace.
    pub organization_id: String,
    /// Our agent's user id in this workspace.
    #[serde(default)]
    pub app_user_id: Option<String>,
    /// The session.
    pub agent_session: AgentSession,
    /// On `prompted`: the user's new activity.
    #[serde(default)]
    pub agent_activity: Option<AgentActivity>,
}

/// `AgentSessionWebhookPayload`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSession {
    /// Session id: the key for `agentActivityCreate`.
    pub id: String,
    /// Our agent's user id.
    #[serde(default)]
    pub app_user_id: Option<String>,
    /// The issue the session lives on.
    #[serde(default)]
    pub issue_id: Option<String>,
    /// The issue, summarized.
    #[serde(default)]
    pub issue: Option<IssueRef>,
    /// The root comment of the session's thread.
    #[serde(default)]
    pub comment_id: Option<String>,
    /// The root comment, summarized.
    #[serde(default)]
    pub comment: Option<CommentRef>,
}

/// An agent activity, as carried by `prompted`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentActivity {
    /// Activity content (`{"type":"prompt","body":…}` for a user prompt).
    #[serde(default)]
    pub content: Option<Value>,
    /// Where the agent-interaction docs put the prompt text; absent from the schema.
    #[serde(default)]
    pub body: Option<String>,
    /// `stop`, …
    #[serde(default)]
    pub signal: Option<String>,
}

/// A nested issue summary.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueRef {
    /// Issue UUID.
    #[serde(default)]
    pub id: Option<String>,
    /// `ENG-123`.
    #[serde(default)]
    pub identifier: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
}

/// A nested user summary.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRef {
    /// User id.
    #[serde(default)]
    pub id: Option<String>,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A nested comment summary.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentRef {
    /// Comment UUID.
    #[serde(default)]
    pub id: Option<String>,
    /// Markdown body.
    #[serde(default)]
    pub body: Option<String>,
}
