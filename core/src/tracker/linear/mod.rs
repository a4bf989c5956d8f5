//! The Linear adapter of the tracker port: a GraphQL client (platforms.md B3).
//!
//! It owns the Linear credential (an API key sent bare, or an OAuth app token sent as `Bearer`),
//! the one place a GraphQL response becomes a [`TrackerError`] (an `errors[]` array fails the call
//! even in HTTP 200; `RATELIMITED`, usually HTTP 400, is a retryable rate limit), and the calls the
//! worker needs, including Agent API activities and session updates. Linear has no per-task token
//! narrowing; the worker enforces the task's issue. It must not log queries' variables or bodies.
//! Choices where the docs are silent: replies nest under the trigger comment (or its root);
//! `commentCreate` passes a deterministic `id` ([`reply::linear_comment_id`]) besides the marker.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::clock::Clock;
use crate::event::{LinearSubject, Placement, Subject, Tracker};
use crate::tracker::retry::RetryPolicy;
use crate::tracker::{
    reply, CommentRef, Issue, PostedReply, Reaction, Reply, ReplyDelivery, ThreadComment, ThreadRef, TrackerClient,
    TrackerError, DEFAULT_RATE_LIMIT_WAIT,
};

mod wire;

/// Linear's GraphQL endpoint (`BECKON_LINEAR_API_URL` overrides it for test doubles).
pub const DEFAULT_API_URL: &str = "https://api.linear.app/graphql";

/// How the client authenticates.
#[derive(Debug)]
pub enum LinearAuth {
    /// A personal API key (`lin_api_…`), sent as `Authorization: <key>` with no `Bearer`.
    ApiKey(SecretString),
    /// An OAuth access token (`actor=app` for the agent), sent as `Authorization: Bearer <token>`.
    OAuth(SecretString),
}

/// Knobs of a [`LinearClient`]; [`LinearConfig::new`] has production defaults.
#[derive(Debug, Clone)]
pub struct LinearConfig {
    /// The GraphQL endpoint.
    pub api_url: String,
    /// Sent as `User-Agent`.
    pub user_agent: String,
    /// Deadline for one HTTP request.
    pub request_timeout: Duration,
    /// Retries of transient failures and rate limits.
    pub retry: RetryPolicy,
}

impl LinearConfig {
    /// Defaults: 30 s request timeout, [`RetryPolicy::default`], `User-Agent: beckon/<version>`.
    pub fn new(api_url: impl Into<String>) -> LinearConfig {
        LinearConfig {
            api_url: api_url.into(),
            user_agent: format!("beckon/{}", env!("CARGO_PKG_VERSION")),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
        }
    }
}

/// A comment Linear just created or updated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearComment {
    /// The comment's UUID.
    pub id: String,
    /// Link for people.
    pub url: Option<String>,
}

/// The content of an agent activity (Linear validates these shapes server-side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ActivityContent {
    /// Progress narration. May be ephemeral.
    Thought {
        /// Markdown.
        body: String,
    },
    /// A tool use: `action` is the verb ("Searching"), `parameter` its object, `result` optional
    /// markdown. May be ephemeral.
    Action {
        /// The verb.
        action: String,
        /// What it acts on.
        parameter: String,
        /// The outcome, once known.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
    /// A question to the user; the session waits for input. Linear also posts it as a comment.
    Elicitation {
        /// Markdown.
        body: String,
    },
    /// The final answer; completes the session. Linear also posts it as a comment.
    Response {
        /// Markdown.
        body: String,
    },
    /// A failure report. Linear also posts it as a comment.
    Error {
        /// Markdown.
        body: String,
    },
}

impl ActivityContent {
    /// Only thoughts and actions may be ephemeral.
    fn may_be_ephemeral(&self) -> bool {
        match self {
            ActivityContent::Thought { .. } | ActivityContent::Action { .. } => true,
            ActivityContent::Elicitation { .. } | ActivityContent::Response { .. } | ActivityContent::Error { .. } => {
                false
            }
        }
    }
}

/// A link shown on an agent session (task status page, pull request).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalUrl {
    /// Link text.
    pub label: String,
    /// Target.
    pub url: String,
}

/// `AgentSessionUpdateInput`: fields left `None` are not sent; a list sent replaces the stored one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessionUpdate {
    /// Replaces the session's links (also keeps a new session from being marked unresponsive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_urls: Option<Vec<ExternalUrl>>,
    /// Replaces the session's plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<PlanStep>>,
}

/// One step of an agent session plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    /// What the step does.
    pub content: String,
    /// Where it stands.
    pub status: PlanStatus,
}

/// A plan step's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Under way.
    InProgress,
    /// Done.
    Completed,
    /// Dropped.
    Canceled,
}

/// A Linear GraphQL client. Cheap to clone.
#[derive(Clone)]
pub struct LinearClient {
    shared: Arc<Shared>,
}

struct Shared {
    http: reqwest::Client,
    config: LinearConfig,
    auth: LinearAuth,
    clock: Arc<dyn Clock>,
    viewer_id: tokio::sync::OnceCell<String>,
}

impl fmt::Debug for LinearClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinearClient")
            .field("api_url", &self.shared.config.api_url)
            .field("auth", &self.shared.auth)
            .finish()
    }
}

impl LinearClient {
    /// A client for `config` authenticating with `auth`; `clock` turns rate-limit resets into waits.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] when the HTTP client cannot be built or the user agent is invalid.
    pub fn new(config: LinearConfig, auth: LinearAuth, clock: Arc<dyn Clock>) -> Result<LinearClient, TrackerError> {
        let http = crate::tracker::retry::http_client(&config.user_agent, HeaderMap::new(), config.request_timeout)?;
        let shared = Shared { http, config, auth, clock, viewer_id: tokio::sync::OnceCell::new() };
        Ok(LinearClient { shared: Arc::new(shared) })
    }

    /// The app user's id in this workspace (`viewer { id }`), asked once and remembered: the
    /// delegate id the trigger rules and loop guards compare against.
    ///
    /// # Errors
    /// The call's [`TrackerError`].
    pub async fn viewer_id(&self) -> Result<String, TrackerError> {
        let id = self
            .shared
            .viewer_id
            .get_or_try_init(|| async {
                let data: wire::ViewerData = self.graphql(wire::VIEWER, json!({})).await?;
                Ok::<_, TrackerError>(data.viewer.id)
            })
            .await?;
        Ok(id.clone())
    }

    /// `issue(id)`: `id` is the UUID or an identifier such as `ENG-123`.
    ///
    /// # Errors
    /// The call's [`TrackerError`].
    pub async fn get_issue(&self, id: &str) -> Result<Issue, TrackerError> {
        let data: wire::IssueData = self.graphql(wire::ISSUE, json!({ "id": id })).await?;
        Ok(data.issue.into())
    }

    /// The issue's top-level comments (`parent: null`), oldest first, every page.
    ///
    /// # Errors
    /// The call's [`TrackerError`].
    pub async fn top_level_comments(&self, issue_id: &str) -> Result<Vec<ThreadComment>, TrackerError> {
        let query = wire::top_level_comments_query();
        let mut comments = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let data: wire::TopLevelData = self.graphql(&query, json!({ "id": issue_id, "after": after })).await?;
            let page = data.issue.comments;
            comments.extend(page.nodes.into_iter().map(ThreadComment::from));
            match (page.page_info.has_next_page, page.page_info.end_cursor) {
                (true, Some(cursor)) => after = Some(cursor),
                (true, None) | (false, _) => return Ok(comments),
            }
        }
    }

    /// A comment thread: the root comment `root_id`, then its children (`parentId = root_id`),
    /// oldest first, every page.
    ///
    /// # Errors
    /// The call's [`TrackerError`].
    pub async fn comment_thread(&self, root_id: &str) -> Result<Vec<ThreadComment>, TrackerError> {
        let query = wire::comment_thread_query();
        let mut comments = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let data: wire::ThreadData = self.graphql(&query, json!({ "id": root_id, "after": after })).await?;
            let thread = data.comment;
            if after.is_none() {
                comments.push(ThreadComment::from(thread.root));
            }
            comments.extend(thread.children.nodes.into_iter().map(ThreadComment::from));
            match (thread.children.page_info.has_next_page, thread.children.page_info.end_cursor) {
                (true, Some(cursor)) => after = Some(cursor),
                (true, None) | (false, _) => return Ok(comments),
            }
        }
    }

    /// `commentCreate` on `issue_id`, nested under `parent_id` when given, with an optional
    /// client-chosen `id` (a retry with the same id names the same comment).
    ///
    /// # Errors
    /// The call's [`TrackerError`]; `GraphQl` when Linear answers `success: false`.
    pub async fn comment_create(
        &self,
        issue_id: &str,
        body: &str,
        parent_id: Option<&str>,
        id: Option<&str>,
    ) -> Result<LinearComment, TrackerError> {
        let mut input = json!({ "issueId": issue_id, "body": body });
        if let Some(parent) = parent_id {
            input["parentId"] = json!(parent);
        }
        if let Some(id) = id {
            input["id"] = json!(id);
        }
        let data: wire::CommentCreateData = self.graphql(wire::COMMENT_CREATE, json!({ "input": input })).await?;
        created(data.comment_create, "commentCreate")
    }

    /// `commentUpdate`: replaces the body of comment `id`.
    ///
    /// # Errors
    /// As [`LinearClient::comment_create`].
    pub async fn comment_update(&self, id: &str, body: &str) -> Result<LinearComment, TrackerError> {
        let variables = json!({ "id": id, "input": { "body": body } });
        let data: wire::CommentUpdateData = self.graphql(wire::COMMENT_UPDATE, variables).await?;
        created(data.comment_update, "commentUpdate")
    }

    /// `reactionCreate` with `emoji` on comment `comment_id`.
    ///
    /// # Errors
    /// As [`LinearClient::comment_create`].
    pub async fn reaction_create(&self, comment_id: &str, emoji: &str) -> Result<(), TrackerError> {
        let variables = json!({ "input": { "commentId": comment_id, "emoji": emoji } });
        let data: wire::ReactionCreateData = self.graphql(wire::REACTION_CREATE, variables).await?;
        succeeded(data.reaction_create.success, "reactionCreate")
    }

    /// `agentActivityCreate` in session `session_id`; `ephemeral` is sent only for thoughts and
    /// actions (Linear refuses it on the others). Returns the activity id.
    ///
    /// # Errors
    /// As [`LinearClient::comment_create`].
    pub async fn agent_activity_create(
        &self,
        session_id: &str,
        content: &ActivityContent,
        ephemeral: bool,
    ) -> Result<String, TrackerError> {
        self.agent_activity_create_with_id(session_id, content, ephemeral, None).await
    }

    /// [`LinearClient::agent_activity_create`] with a client-chosen activity `id` (a UUID), so a
    /// retry after a crash cannot create the activity twice.
    ///
    /// # Errors
    /// As [`LinearClient::comment_create`].
    pub async fn agent_activity_create_with_id(
        &self,
        session_id: &str,
        content: &ActivityContent,
        ephemeral: bool,
        id: Option<&str>,
    ) -> Result<String, TrackerError> {
        let mut input = json!({ "agentSessionId": session_id, "content": content });
        if ephemeral && content.may_be_ephemeral() {
            input["ephemeral"] = json!(true);
        }
        if let Some(id) = id {
            input["id"] = json!(id);
        }
        let data: wire::AgentActivityCreateData =
            self.graphql(wire::AGENT_ACTIVITY_CREATE, json!({ "input": input })).await?;
        let payload = data.agent_activity_create;
        succeeded(payload.success, "agentActivityCreate")?;
        payload.agent_activity.map(|a| a.id).ok_or_else(|| TrackerError::Decode {
            detail: "agentActivityCreate succeeded without an activity".to_owned(),
        })
    }

    /// `agentSessionUpdate` of session `session_id`.
    ///
    /// # Errors
    /// As [`LinearClient::comment_create`].
    pub async fn agent_session_update(
        &self,
        session_id: &str,
        update: &AgentSessionUpdate,
    ) -> Result<(), TrackerError> {
        let variables = json!({ "id": session_id, "input": update });
        let data: wire::AgentSessionUpdateData = self.graphql(wire::AGENT_SESSION_UPDATE, variables).await?;
        succeeded(data.agent_session_update.success, "agentSessionUpdate")
    }

    /// One GraphQL operation with retries.
    async fn graphql<T: DeserializeOwned>(&self, query: &str, variables: Value) -> Result<T, TrackerError> {
        let data = self.shared.config.retry.run(|_| self.graphql_once(query, &variables)).await?;
        serde_json::from_value(data).map_err(|e| TrackerError::Decode { detail: format!("Linear data: {e}") })
    }

    /// One HTTP exchange, and the one place a Linear response becomes a [`TrackerError`].
    async fn graphql_once(&self, query: &str, variables: &Value) -> Result<Value, TrackerError> {
        let mut authorization = HeaderValue::from_str(&match &self.shared.auth {
            LinearAuth::ApiKey(key) => key.expose_secret().to_owned(),
            LinearAuth::OAuth(token) => format!("Bearer {}", token.expose_secret()),
        })
        .map_err(|_| TrackerError::Invalid {
            detail: "the Linear credential is not a valid header value".to_owned(),
        })?;
        authorization.set_sensitive(true);
        let response = self
            .shared
            .http
            .post(&self.shared.config.api_url)
            .header(AUTHORIZATION, authorization)
            .json(&wire::GraphQlRequest { query, variables })
            .send()
            .await
            .map_err(crate::tracker::retry::transport_error)?;
        let status = response.status().as_u16();
        let reset_ms = response
            .headers()
            .get("x-ratelimit-requests-reset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok());
        let text = response.text().await.map_err(crate::tracker::retry::transport_error)?;
        let envelope = serde_json::from_str::<wire::GraphQlResponse>(&text).ok();
        let (data, errors) = match envelope {
            Some(e) => (e.data, e.errors),
            None => (None, Vec::new()),
        };
        if let Some(first) = errors.first() {
            let message = first.message.clone();
            if errors.iter().any(|e| e.code() == Some("RATELIMITED")) {
                let wait = match reset_ms {
                    Some(reset) => {
                        Duration::from_millis(reset.saturating_sub(self.shared.clock.now().0).max(0).unsigned_abs())
                    }
                    None => DEFAULT_RATE_LIMIT_WAIT,
                };
                return Err(TrackerError::from_status(status, Some(wait), message));
            }
            if !(200..300).contains(&status) {
                return Err(TrackerError::from_status(status, None, message));
            }
            return Err(TrackerError::GraphQl { code: first.code().map(str::to_owned), message });
        }
        if !(200..300).contains(&status) {
            return Err(TrackerError::from_status(status, None, format!("HTTP {status}")));
        }
        data.filter(|d| !d.is_null())
            .ok_or_else(|| TrackerError::Decode { detail: "a Linear response without data or errors".to_owned() })
    }
}

fn created(payload: wire::CommentPayload, operation: &str) -> Result<LinearComment, TrackerError> {
    succeeded(payload.success, operation)?;
    let comment = payload
        .comment
        .ok_or_else(|| TrackerError::Decode { detail: format!("{operation} succeeded without a comment") })?;
    Ok(LinearComment { id: comment.id, url: comment.url })
}

fn succeeded(success: bool, operation: &str) -> Result<(), TrackerError> {
    if success {
        Ok(())
    } else {
        Err(TrackerError::GraphQl { code: None, message: format!("{operation} returned success: false") })
    }
}

fn linear_subject(subject: &Subject) -> Result<&LinearSubject, TrackerError> {
    match subject {
        Subject::Linear(s) => Ok(s),
        Subject::Github(_) => Err(TrackerError::wrong_tracker(Tracker::Linear, "a GitHub subject")),
    }
}

/// The comment a thread hangs from: the trigger itself when top-level, else its root.
fn thread_root(trigger: Option<&CommentRef>) -> Result<Option<&str>, TrackerError> {
    match trigger {
        None => Ok(None),
        Some(CommentRef { id, placement: Placement::TopLevel }) => Ok(Some(id)),
        Some(CommentRef { placement: Placement::Reply { root_id }, .. }) => Ok(Some(root_id)),
        Some(CommentRef { placement: Placement::AgentSession { root_id, .. }, .. }) => Ok(root_id.as_deref()),
        Some(CommentRef { placement: Placement::ReviewThread { .. }, .. }) => {
            Err(TrackerError::wrong_tracker(Tracker::Linear, "a GitHub review thread"))
        }
    }
}

#[async_trait]
impl TrackerClient for LinearClient {
    fn tracker(&self) -> Tracker {
        Tracker::Linear
    }

    async fn issue(&self, subject: &Subject) -> Result<Issue, TrackerError> {
        self.get_issue(&linear_subject(subject)?.issue_id).await
    }

    async fn thread(&self, thread: &ThreadRef) -> Result<Vec<ThreadComment>, TrackerError> {
        let s = linear_subject(&thread.subject)?;
        match thread_root(thread.trigger.as_ref())? {
            None => self.top_level_comments(&s.issue_id).await,
            Some(root) => self.comment_thread(root).await,
        }
    }

    async fn post_reply(&self, thread: &ThreadRef, reply: &Reply) -> Result<PostedReply, TrackerError> {
        let s = linear_subject(&thread.subject)?;
        let root = thread_root(thread.trigger.as_ref())?;
        let existing = self.thread(thread).await?;
        if let Some(found) = existing.into_iter().find(|c| reply::carries_marker(&c.body, reply)) {
            return Ok(PostedReply { comment_id: found.id, url: found.url, delivery: ReplyDelivery::AlreadyPosted });
        }
        let id = reply::linear_comment_id(reply);
        // In an agent session the reply is the session's `response` activity; Linear turns it into
        // a comment in the session's thread, where the marker check above finds it next time.
        if let Some(CommentRef { placement: Placement::AgentSession { session_id, .. }, .. }) = &thread.trigger {
            let content = ActivityContent::Response { body: reply::render(reply) };
            let activity = self.agent_activity_create_with_id(session_id, &content, false, Some(&id)).await?;
            return Ok(PostedReply { comment_id: activity, url: None, delivery: ReplyDelivery::Posted });
        }
        let created = self.comment_create(&s.issue_id, &reply::render(reply), root, Some(&id)).await?;
        Ok(PostedReply { comment_id: created.id, url: created.url, delivery: ReplyDelivery::Posted })
    }

    async fn react(&self, subject: &Subject, comment: &CommentRef, reaction: Reaction) -> Result<(), TrackerError> {
        linear_subject(subject)?;
        self.reaction_create(&comment.id, reaction.name()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_content_has_linears_shapes() {
        let cases = [
            (ActivityContent::Thought { body: "t".to_owned() }, json!({"type": "thought", "body": "t"})),
            (
                ActivityContent::Action { action: "Searching".to_owned(), parameter: "src/".to_owned(), result: None },
                json!({"type": "action", "action": "Searching", "parameter": "src/"}),
            ),
            (
                ActivityContent::Action {
                    action: "Ran".to_owned(),
                    parameter: "tests".to_owned(),
                    result: Some("ok".to_owned()),
                },
                json!({"type": "action", "action": "Ran", "parameter": "tests", "result": "ok"}),
            ),
            (ActivityContent::Elicitation { body: "?".to_owned() }, json!({"type": "elicitation", "body": "?"})),
            (ActivityContent::Response { body: "r".to_owned() }, json!({"type": "response", "body": "r"})),
            (ActivityContent::Error { body: "e".to_owned() }, json!({"type": "error", "body": "e"})),
        ];
        for (content, want) in cases {
            assert_eq!(serde_json::to_value(&content).unwrap(), want);
        }
    }

    #[test]
    fn session_update_sends_only_what_is_set() {
        let update = AgentSessionUpdate {
            external_urls: Some(vec![ExternalUrl { label: "PR".to_owned(), url: "https://x/pr/1".to_owned() }]),
            plan: Some(vec![PlanStep { content: "fix".to_owned(), status: PlanStatus::InProgress }]),
        };
        assert_eq!(
            serde_json::to_value(&update).unwrap(),
            json!({"externalUrls": [{"label": "PR", "url": "https://x/pr/1"}],
                   "plan": [{"content": "fix", "status": "inProgress"}]})
        );
        assert_eq!(serde_json::to_value(AgentSessionUpdate::default()).unwrap(), json!({}));
    }
}
