//! Linear GraphQL wire shapes (platforms.md B3): the documents Beckon sends and the fields it reads.
//!
//! Every query passes an explicit `first:` (Linear's complexity budget multiplies by page size).
//! Responses are `{data, errors}` envelopes; `errors` is checked on every response, even HTTP 200.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tracker::{CommentAuthor, Issue, IssueState, ThreadComment};

pub(crate) const VIEWER: &str = "query Viewer { viewer { id } }";

pub(crate) const ISSUE: &str =
    "query Issue($id: String!) { issue(id: $id) { id identifier title description url state { name type } } }";

const COMMENT_FIELDS: &str = "id body createdAt url user { id name } botActor { name }";

pub(crate) fn top_level_comments_query() -> String {
    format!(
        "query TopLevelComments($id: String!, $after: String) {{ issue(id: $id) {{ comments(first: 100, after: $after, \
         filter: {{ parent: {{ null: true }} }}) {{ nodes {{ {COMMENT_FIELDS} }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
    )
}

pub(crate) fn comment_thread_query() -> String {
    format!(
        "query CommentThread($id: String!, $after: String) {{ comment(id: $id) {{ {COMMENT_FIELDS} \
         children(first: 100, after: $after) {{ nodes {{ {COMMENT_FIELDS} }} pageInfo {{ hasNextPage endCursor }} }} }} }}"
    )
}

pub(crate) const COMMENT_CREATE: &str = "mutation CommentCreate($input: CommentCreateInput!) { \
     commentCreate(input: $input) { success comment { id url } } }";

pub(crate) const COMMENT_UPDATE: &str = "mutation CommentUpdate($id: String!, $input: CommentUpdateInput!) { \
     commentUpdate(id: $id, input: $input) { success comment { id url } } }";

pub(crate) const REACTION_CREATE: &str = "mutation ReactionCreate($input: ReactionCreateInput!) { \
     reactionCreate(input: $input) { success } }";

pub(crate) const AGENT_ACTIVITY_CREATE: &str = "mutation AgentActivityCreate($input: AgentActivityCreateInput!) { \
     agentActivityCreate(input: $input) { success agentActivity { id } } }";

pub(crate) const AGENT_SESSION_UPDATE: &str =
    "mutation AgentSessionUpdate($id: String!, $input: AgentSessionUpdateInput!) { \
     agentSessionUpdate(id: $id, input: $input) { success } }";

/// The request envelope.
#[derive(Debug, Serialize)]
pub(crate) struct GraphQlRequest<'a> {
    pub query: &'a str,
    pub variables: &'a Value,
}

/// The response envelope; `data` is decoded per operation once `errors` is known to be empty.
#[derive(Debug, Deserialize)]
pub(crate) struct GraphQlResponse {
    pub data: Option<Value>,
    #[serde(default)]
    pub errors: Vec<GraphQlError>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GraphQlError {
    pub message: String,
    pub extensions: Option<GraphQlErrorExtensions>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GraphQlErrorExtensions {
    pub code: Option<String>,
}

impl GraphQlError {
    pub(crate) fn code(&self) -> Option<&str> {
        self.extensions.as_ref().and_then(|e| e.code.as_deref())
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ViewerData {
    pub viewer: IdNode,
}

#[derive(Debug, Deserialize)]
pub(crate) struct IdNode {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct IssueData {
    pub issue: IssueNode,
}

#[derive(Debug, Deserialize)]
pub(crate) struct IssueNode {
    pub title: String,
    pub description: Option<String>,
    pub url: Option<String>,
    pub state: Option<StateNode>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct StateNode {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
}

impl From<IssueNode> for Issue {
    fn from(w: IssueNode) -> Issue {
        let (state, state_label) = match w.state {
            Some(s) => {
                let closed = s.kind == "completed" || s.kind == "canceled";
                (if closed { IssueState::Closed } else { IssueState::Open }, s.name)
            }
            None => (IssueState::Open, String::new()),
        };
        Issue { title: w.title, body: w.description.unwrap_or_default(), state, state_label, url: w.url }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct TopLevelData {
    pub issue: TopLevelIssue,
}

#[derive(Debug, Deserialize)]
pub(crate) struct TopLevelIssue {
    pub comments: Connection,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ThreadData {
    pub comment: ThreadRoot,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ThreadRoot {
    #[serde(flatten)]
    pub root: CommentNode,
    pub children: Connection,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Connection {
    pub nodes: Vec<CommentNode>,
    pub page_info: PageInfo,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageInfo {
    pub has_next_page: bool,
    pub end_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommentNode {
    pub id: String,
    pub body: String,
    pub created_at: Option<String>,
    pub url: Option<String>,
    pub user: Option<UserNode>,
    pub bot_actor: Option<BotActorNode>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct UserNode {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BotActorNode {
    pub name: Option<String>,
}

impl From<CommentNode> for ThreadComment {
    fn from(w: CommentNode) -> ThreadComment {
        let author = match (w.user, w.bot_actor) {
            (_, Some(bot)) => {
                CommentAuthor { id: String::new(), name: bot.name.unwrap_or_else(|| "bot".to_owned()), is_bot: true }
            }
            (Some(user), None) => CommentAuthor { id: user.id, name: user.name, is_bot: false },
            (None, None) => CommentAuthor { id: String::new(), name: "unknown".to_owned(), is_bot: false },
        };
        ThreadComment { id: w.id, author, body: w.body, created_at: w.created_at, url: w.url }
    }
}

/// `commentCreate` / `commentUpdate` payload.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommentCreateData {
    pub comment_create: CommentPayload,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommentUpdateData {
    pub comment_update: CommentPayload,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CommentPayload {
    pub success: bool,
    pub comment: Option<CreatedNode>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreatedNode {
    pub id: String,
    pub url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReactionCreateData {
    pub reaction_create: SuccessPayload,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentSessionUpdateData {
    pub agent_session_update: SuccessPayload,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SuccessPayload {
    pub success: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentActivityCreateData {
    pub agent_activity_create: AgentActivityPayload,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentActivityPayload {
    pub success: bool,
    pub agent_activity: Option<IdNode>,
}
