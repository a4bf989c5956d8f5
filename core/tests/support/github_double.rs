//! A GitHub REST double: an axum server on 127.0.0.1:0 that speaks the shapes of platforms.md A3.
//!
//! It keeps issues, issue comments, review comments, reactions, collaborator roles and issued
//! installation tokens; checks `Authorization` (a personal token, a live issued token, or a JWT for
//! `/app/…`; revoked tokens get 401); paginates with `Link` headers that point at
//! `/repositories/{id}/…` so a client that builds page URLs by hand fails; refuses bodies over
//! 65,536 characters with 422; and can answer the next matching request with an injected failure.
//! Every request is recorded (method, path and query, lowercased headers, body, paused-clock time).

// Test code: a panic in the double is a failed test, which is what we want.
// Each test binary that includes this double uses a different part of it.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::time::Instant;

/// One request as the double saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: String,
    pub at: Instant,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A canned failure for the next request whose method matches and whose path contains `path`.
#[derive(Debug, Clone)]
pub struct Failure {
    pub method: &'static str,
    pub path: &'static str,
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub message: &'static str,
}

#[derive(Debug, Clone)]
pub struct IssuedToken {
    pub token: String,
    pub installation: u64,
    pub request: Value,
    pub revoked: bool,
}

#[derive(Debug, Clone)]
pub struct StoredComment {
    pub id: u64,
    pub number: u64,
    pub body: String,
    pub login: String,
    /// Review comments only.
    pub in_reply_to: Option<u64>,
    pub review: bool,
}

/// A pull request the double holds.
#[derive(Debug, Clone)]
pub struct StoredPull {
    pub number: u64,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
}

#[derive(Debug, Default)]
struct DoubleState {
    pulls: Vec<StoredPull>,
    base: String,
    personal_token: Option<String>,
    tokens: Vec<IssuedToken>,
    token_expires_at: String,
    page_size: Option<usize>,
    comments: Vec<StoredComment>,
    reactions: Vec<(u64, String)>,
    roles: HashMap<String, (String, Option<String>)>,
    failures: VecDeque<Failure>,
    requests: Vec<Recorded>,
    next_id: u64,
}

type Shared = Arc<Mutex<DoubleState>>;

pub struct GithubDouble {
    pub base: String,
    state: Shared,
}

impl GithubDouble {
    /// Starts the double; `personal_token` is accepted as a bearer besides issued tokens.
    pub async fn start(personal_token: Option<&str>) -> GithubDouble {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(DoubleState {
            base: base.clone(),
            personal_token: personal_token.map(str::to_owned),
            token_expires_at: "2099-01-01T00:00:00Z".to_owned(),
            next_id: 1000,
            ..DoubleState::default()
        }));
        let app = Router::new().fallback(handle).with_state(Arc::clone(&state));
        tokio::spawn(async move { axum::serve(listener, app).await });
        GithubDouble { base, state }
    }

    fn with<T>(&self, f: impl FnOnce(&mut DoubleState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.with(|s| s.requests.clone())
    }

    pub fn requests_to(&self, method: &str, path_fragment: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.method == method && r.path.contains(path_fragment)).collect()
    }

    pub fn fail_next(&self, failure: Failure) {
        self.with(|s| s.failures.push_back(failure));
    }

    pub fn set_token_expires_at(&self, at: &str) {
        self.with(|s| s.token_expires_at = at.to_owned());
    }

    pub fn set_page_size(&self, size: usize) {
        self.with(|s| s.page_size = Some(size));
    }

    pub fn set_role(&self, login: &str, permission: &str, role_name: Option<&str>) {
        self.with(|s| s.roles.insert(login.to_owned(), (permission.to_owned(), role_name.map(str::to_owned))));
    }

    pub fn add_comment(&self, number: u64, body: &str, login: &str) -> u64 {
        self.with(|s| insert_comment(s, number, body, login, false, None))
    }

    pub fn add_review_comment(&self, number: u64, body: &str, in_reply_to: Option<u64>) -> u64 {
        self.with(|s| insert_comment(s, number, body, "reviewer", true, in_reply_to))
    }

    pub fn pulls(&self) -> Vec<StoredPull> {
        self.with(|s| s.pulls.clone())
    }

    pub fn comments(&self) -> Vec<StoredComment> {
        self.with(|s| s.comments.clone())
    }

    pub fn tokens(&self) -> Vec<IssuedToken> {
        self.with(|s| s.tokens.clone())
    }

    pub fn reactions(&self) -> Vec<(u64, String)> {
        self.with(|s| s.reactions.clone())
    }
}

fn insert_comment(s: &mut DoubleState, number: u64, body: &str, login: &str, review: bool, reply: Option<u64>) -> u64 {
    s.next_id += 1;
    let id = s.next_id;
    s.comments.push(StoredComment {
        id,
        number,
        body: body.to_owned(),
        login: login.to_owned(),
        in_reply_to: reply,
        review,
    });
    id
}

fn comment_json(base: &str, c: &StoredComment) -> Value {
    let user_type = if c.login.ends_with("[bot]") { "Bot" } else { "User" };
    let mut v = json!({
        "id": c.id,
        "body": c.body,
        "user": {"login": c.login, "id": 7, "type": user_type},
        "created_at": "2026-03-19T01:26:57Z",
        "html_url": format!("{base}/o/r/issues/{}#issuecomment-{}", c.number, c.id),
    });
    if c.review {
        v["in_reply_to_id"] = json!(c.in_reply_to);
    }
    v
}

fn reply(status: u16, headers: Vec<(&'static str, String)>, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    for (k, v) in headers {
        response.headers_mut().insert(k, v.parse().unwrap());
    }
    response
}

fn error(status: u16, message: &str) -> Response {
    reply(status, vec![], json!({"message": message, "documentation_url": "https://docs.github.com/rest"}))
}

async fn handle(State(state): State<Shared>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path_and_query = uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let mut s = state.lock().unwrap();
    s.requests.push(Recorded {
        method: method.to_string(),
        path: path_and_query.clone(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: body.clone(),
        at: Instant::now(),
    });
    if let Some(i) = s.failures.iter().position(|f| f.method == method.as_str() && uri.path().contains(f.path)) {
        let f = s.failures.remove(i).unwrap();
        return reply(f.status, f.headers, json!({"message": f.message}));
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let segments: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let is_app = segments.first() == Some(&"app");
    let authorized = if is_app {
        bearer.split('.').count() == 3
    } else {
        s.personal_token.as_deref() == Some(bearer.as_str()) || s.tokens.iter().any(|t| t.token == bearer && !t.revoked)
    };
    if !authorized {
        return error(401, "Bad credentials");
    }
    let json_body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let text = json_body["body"].as_str().unwrap_or_default().to_owned();
    if text.chars().count() > 65_536 {
        return error(422, "Validation Failed: Body is too long (maximum is 65536 characters)");
    }
    let query: HashMap<String, String> =
        uri.query().map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    let base = s.base.clone();
    let m = method.as_str();
    match segments.as_slice() {
        ["app", "installations", id, "access_tokens"] if m == "POST" => {
            let installation: u64 = id.parse().unwrap();
            let token = format!("ghs_minted{}", s.tokens.len() + 1);
            s.tokens.push(IssuedToken {
                token: token.clone(),
                installation,
                request: json_body.clone(),
                revoked: false,
            });
            let narrowed = json_body.get("repository_ids").is_some();
            let mut out = json!({
                "token": token,
                "expires_at": s.token_expires_at,
                "permissions": json_body.get("permissions").cloned().unwrap_or(json!({"issues": "write", "metadata": "read"})),
                "repository_selection": if narrowed { "selected" } else { "all" },
            });
            if narrowed {
                out["repositories"] = json!([{"id": json_body["repository_ids"][0]}]);
            }
            reply(201, vec![], out)
        }
        ["installation", "token"] if m == "DELETE" => {
            if let Some(t) = s.tokens.iter_mut().find(|t| t.token == bearer) {
                t.revoked = true;
            }
            StatusCode::NO_CONTENT.into_response()
        }
        ["repos", o, r] if m == "GET" => {
            reply(200, vec![], json!({"full_name": format!("{o}/{r}"), "default_branch": "main"}))
        }
        ["repos", o, _, "pulls"] if m == "POST" => {
            let head = json_body["head"].as_str().unwrap_or_default().to_owned();
            if s.pulls.iter().any(|p| p.head == head) {
                let msg = format!("A pull request already exists for {o}:{head}.");
                return reply(422, vec![], json!({"message": "Validation Failed", "errors": [{"message": msg}]}));
            }
            let number = 100 + s.pulls.len() as u64;
            s.pulls.push(StoredPull {
                number,
                head,
                base: json_body["base"].as_str().unwrap_or_default().to_owned(),
                title: json_body["title"].as_str().unwrap_or_default().to_owned(),
                body: text,
            });
            reply(201, vec![], json!({"number": number, "html_url": format!("{base}/o/r/pull/{number}")}))
        }
        ["repos", o, _, "pulls"] if m == "GET" => {
            let wanted = query.get("head").cloned().unwrap_or_default();
            let items: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| wanted.is_empty() || wanted == format!("{o}:{}", p.head))
                .map(|p| json!({"number": p.number, "html_url": format!("{base}/o/r/pull/{}", p.number)}))
                .collect();
            reply(200, vec![], Value::Array(items))
        }
        ["repos", _, _, "pulls", n] if m == "GET" => {
            let n: u64 = n.parse().unwrap();
            let head = s.pulls.iter().find(|p| p.number == n).map_or("feature".to_owned(), |p| p.head.clone());
            reply(
                200,
                vec![],
                json!({"number": n, "head": {"ref": head, "repo": {"id": 186853002}}, "base": {"ref": "main"}}),
            )
        }
        ["repos", _, _, "pulls", n] if m == "PATCH" => {
            let n: u64 = n.parse().unwrap();
            match s.pulls.iter_mut().find(|p| p.number == n) {
                Some(p) => {
                    p.title = json_body["title"].as_str().unwrap_or_default().to_owned();
                    p.body = text;
                    reply(200, vec![], json!({"number": n, "html_url": format!("{base}/o/r/pull/{n}")}))
                }
                None => error(404, "Not Found"),
            }
        }
        ["repos", _, _, "issues", n] if m == "GET" => {
            let n: u64 = n.parse().unwrap();
            reply(
                200,
                vec![],
                json!({"number": n, "title": "Toast missing", "body": "When TOKEN_EXPIRED comes back", "state": "open",
                       "html_url": format!("{base}/o/r/issues/{n}")}),
            )
        }
        ["repos", _, _, "issues", n, "comments"] | ["repositories", _, "issues", n, "comments"] if m == "GET" => {
            let n: u64 = n.parse().unwrap();
            let per_page =
                s.page_size.unwrap_or_else(|| query.get("per_page").and_then(|p| p.parse().ok()).unwrap_or(30));
            let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
            let all: Vec<&StoredComment> = s.comments.iter().filter(|c| c.number == n && !c.review).collect();
            let items: Vec<Value> =
                all.iter().skip((page - 1) * per_page).take(per_page).map(|c| comment_json(&base, c)).collect();
            let mut link = vec![];
            if page * per_page < all.len() {
                link.push((
                    "link",
                    format!(
                        "<{base}/repositories/1/issues/{n}/comments?per_page={per_page}&page={}>; rel=\"next\", \
                         <{base}/repositories/1/issues/{n}/comments?per_page={per_page}&page=99>; rel=\"last\"",
                        page + 1
                    ),
                ));
            }
            reply(200, link, Value::Array(items))
        }
        ["repos", _, _, "issues", n, "comments"] if m == "POST" => {
            let n: u64 = n.parse().unwrap();
            let id = insert_comment(&mut s, n, &text, "beckon[bot]", false, None);
            let c = s.comments.iter().find(|c| c.id == id).unwrap().clone();
            reply(201, vec![], comment_json(&base, &c))
        }
        ["repos", _, _, kind @ ("issues" | "pulls"), "comments", id] if m == "PATCH" => {
            let id: u64 = id.parse().unwrap();
            let review = *kind == "pulls";
            match s.comments.iter_mut().find(|c| c.id == id && c.review == review) {
                Some(c) => {
                    c.body = text;
                    let c = c.clone();
                    reply(200, vec![], comment_json(&base, &c))
                }
                None => error(404, "Not Found"),
            }
        }
        ["repos", _, _, kind @ ("issues" | "pulls"), "comments", id, "reactions"] if m == "POST" => {
            let id: u64 = id.parse().unwrap();
            let review = *kind == "pulls";
            if !s.comments.iter().any(|c| c.id == id && c.review == review) {
                return error(404, "Not Found");
            }
            let content = json_body["content"].as_str().unwrap_or_default().to_owned();
            let exists = s.reactions.contains(&(id, content.clone()));
            if !exists {
                s.reactions.push((id, content.clone()));
            }
            let out = json!({"id": 1, "content": content, "user": {"login": "beckon[bot]", "type": "Bot"}});
            reply(if exists { 200 } else { 201 }, vec![], out)
        }
        ["repos", _, _, "pulls", n, "comments"] if m == "GET" => {
            let n: u64 = n.parse().unwrap();
            let items: Vec<Value> =
                s.comments.iter().filter(|c| c.number == n && c.review).map(|c| comment_json(&base, c)).collect();
            reply(200, vec![], Value::Array(items))
        }
        ["repos", _, _, "pulls", n, "comments", root, "replies"] if m == "POST" => {
            let n: u64 = n.parse().unwrap();
            let root: u64 = root.parse().unwrap();
            match s.comments.iter().find(|c| c.id == root && c.review) {
                None => error(404, "Not Found"),
                Some(c) if c.in_reply_to.is_some() => error(422, "Validation Failed: replies to replies"),
                Some(_) => {
                    let id = insert_comment(&mut s, n, &text, "beckon[bot]", true, Some(root));
                    let c = s.comments.iter().find(|c| c.id == id).unwrap().clone();
                    reply(201, vec![], comment_json(&base, &c))
                }
            }
        }
        ["repos", _, _, "collaborators", login, "permission"] if m == "GET" => match s.roles.get(*login) {
            Some((permission, role)) => {
                reply(200, vec![], json!({"permission": permission, "role_name": role, "user": {"login": login}}))
            }
            None => error(404, "Not Found"),
        },
        _ => error(404, "Not Found"),
    }
}
