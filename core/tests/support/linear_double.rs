//! A Linear GraphQL double: an axum server on 127.0.0.1:0 answering `POST /graphql` with the
//! shapes of platforms.md B3.
//!
//! It keeps comments (with `parentId`), reactions, agent activities and session updates; checks
//! `Authorization` in the mode it was started with (bare API key or `Bearer` OAuth token);
//! dispatches on the operation in the query text; can answer the next matching operation with an
//! injected failure (HTTP status, `errors[]`, rate-limit headers); and records every request.

// Test code: a panic in the double is a failed test, which is what we want.
// Each test binary that includes this double uses a different part of it.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub headers: HashMap<String, String>,
    pub query: String,
    pub variables: Value,
    pub at: Instant,
}

/// A canned answer for the next request whose query contains `operation`.
#[derive(Debug, Clone)]
pub struct Failure {
    pub operation: &'static str,
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct StoredComment {
    pub id: String,
    pub issue_id: String,
    pub body: String,
    pub parent_id: Option<String>,
    pub user: String,
}

#[derive(Debug, Default)]
struct DoubleState {
    authorization: String,
    comments: Vec<StoredComment>,
    reactions: Vec<(String, String)>,
    activities: Vec<Value>,
    session_updates: Vec<Value>,
    failures: VecDeque<Failure>,
    requests: Vec<Recorded>,
    next_id: u64,
}

type Shared = Arc<Mutex<DoubleState>>;

pub struct LinearDouble {
    pub url: String,
    state: Shared,
}

pub const APP_USER_ID: &str = "a1b2c3d4-0000-4000-8000-00000000app1";

impl LinearDouble {
    /// Starts the double accepting exactly `authorization` as the `Authorization` header value.
    pub async fn start(authorization: &str) -> LinearDouble {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/graphql", listener.local_addr().unwrap());
        let state =
            Arc::new(Mutex::new(DoubleState { authorization: authorization.to_owned(), ..DoubleState::default() }));
        let app = Router::new().route("/graphql", post(handle)).with_state(Arc::clone(&state));
        tokio::spawn(async move { axum::serve(listener, app).await });
        LinearDouble { url, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut DoubleState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.with(|s| s.requests.clone())
    }

    pub fn requests_for(&self, operation: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.query.contains(operation)).collect()
    }

    pub fn fail_next(&self, failure: Failure) {
        self.with(|s| s.failures.push_back(failure));
    }

    pub fn add_comment(&self, issue_id: &str, body: &str, parent_id: Option<&str>) -> String {
        self.with(|s| insert(s, None, issue_id, body, parent_id, "Alice"))
    }

    pub fn comments(&self) -> Vec<StoredComment> {
        self.with(|s| s.comments.clone())
    }

    pub fn reactions(&self) -> Vec<(String, String)> {
        self.with(|s| s.reactions.clone())
    }

    pub fn activities(&self) -> Vec<Value> {
        self.with(|s| s.activities.clone())
    }

    pub fn session_updates(&self) -> Vec<Value> {
        self.with(|s| s.session_updates.clone())
    }
}

fn insert(s: &mut DoubleState, id: Option<&str>, issue: &str, body: &str, parent: Option<&str>, user: &str) -> String {
    s.next_id += 1;
    let id = id.map_or_else(|| format!("c0000000-0000-4000-8000-{:012}", s.next_id), str::to_owned);
    s.comments.push(StoredComment {
        id: id.clone(),
        issue_id: issue.to_owned(),
        body: body.to_owned(),
        parent_id: parent.map(str::to_owned),
        user: user.to_owned(),
    });
    id
}

fn node(c: &StoredComment) -> Value {
    json!({"id": c.id, "body": c.body, "createdAt": "2026-03-19T01:26:57.000Z",
           "url": format!("https://linear.app/acme/issue/ENG-1#comment-{}", c.id),
           "user": {"id": format!("u-{}", c.user), "name": c.user}, "botActor": null})
}

fn page(nodes: Vec<Value>) -> Value {
    json!({"nodes": nodes, "pageInfo": {"hasNextPage": false, "endCursor": null}})
}

fn answer(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    for (k, v) in headers {
        response.headers_mut().insert(k, v.parse().unwrap());
    }
    response
}

fn data(value: Value) -> Response {
    answer(200, vec![], json!({ "data": value }))
}

async fn handle(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let query = request["query"].as_str().unwrap_or_default().to_owned();
    let vars = request["variables"].clone();
    let mut s = state.lock().unwrap();
    let header_map: HashMap<String, String> =
        headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned())).collect();
    s.requests.push(Recorded {
        headers: header_map.clone(),
        query: query.clone(),
        variables: vars.clone(),
        at: Instant::now(),
    });
    if let Some(i) = s.failures.iter().position(|f| query.contains(f.operation)) {
        let f = s.failures.remove(i).unwrap();
        return answer(f.status, f.headers, f.body);
    }
    if header_map.get("authorization") != Some(&s.authorization) {
        let body = json!({"errors": [{"message": "Authentication required, not authenticated",
                                      "extensions": {"code": "AUTHENTICATION_ERROR"}}]});
        return answer(401, vec![], body);
    }
    let input = &vars["input"];
    if query.contains("commentCreate") {
        let parent = input["parentId"].as_str();
        let id = insert(
            &mut s,
            input["id"].as_str(),
            input["issueId"].as_str().unwrap(),
            input["body"].as_str().unwrap(),
            parent,
            "Beckon",
        );
        data(
            json!({"commentCreate": {"success": true, "comment": {"id": id, "url": format!("https://linear.app/c/{id}")}}}),
        )
    } else if query.contains("commentUpdate") {
        let id = vars["id"].as_str().unwrap_or_default().to_owned();
        match s.comments.iter_mut().find(|c| c.id == id) {
            Some(c) => {
                c.body = input["body"].as_str().unwrap_or_default().to_owned();
                data(json!({"commentUpdate": {"success": true, "comment": {"id": id, "url": null}}}))
            }
            None => data_error("Entity not found: Comment", "INVALID_INPUT"),
        }
    } else if query.contains("reactionCreate") {
        let pair = (
            input["commentId"].as_str().unwrap_or_default().to_owned(),
            input["emoji"].as_str().unwrap_or_default().to_owned(),
        );
        s.reactions.push(pair);
        data(json!({"reactionCreate": {"success": true}}))
    } else if query.contains("agentActivityCreate") {
        s.activities.push(input.clone());
        data(
            json!({"agentActivityCreate": {"success": true, "agentActivity": {"id": format!("act-{}", s.activities.len())}}}),
        )
    } else if query.contains("agentSessionUpdate") {
        s.session_updates.push(vars.clone());
        data(json!({"agentSessionUpdate": {"success": true}}))
    } else if query.contains("viewer") {
        data(json!({"viewer": {"id": APP_USER_ID}}))
    } else if query.contains("comments(") {
        let issue = vars["id"].as_str().unwrap_or_default();
        let nodes = s.comments.iter().filter(|c| c.issue_id == issue && c.parent_id.is_none()).map(node).collect();
        data(json!({"issue": {"comments": page(nodes)}}))
    } else if query.contains("comment(id") {
        let id = vars["id"].as_str().unwrap_or_default();
        let Some(root) = s.comments.iter().find(|c| c.id == id) else {
            return data_error("Entity not found: Comment", "INVALID_INPUT");
        };
        let children = s.comments.iter().filter(|c| c.parent_id.as_deref() == Some(id)).map(node).collect();
        let mut out = node(root);
        out["children"] = page(children);
        data(json!({"comment": out}))
    } else if query.contains("issue(id") {
        data(json!({"issue": {"id": vars["id"], "identifier": "ENG-1", "title": "Toast missing",
                               "description": "TOKEN_EXPIRED", "url": "https://linear.app/acme/issue/ENG-1",
                               "state": {"name": "In Progress", "type": "started"}}}))
    } else {
        data_error("Unknown operation", "GRAPHQL_VALIDATION_FAILED")
    }
}

/// GraphQL's way: HTTP 200, `data: null`, and an `errors[]` array.
fn data_error(message: &str, code: &str) -> Response {
    answer(200, vec![], json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}))
}
