//! A minimal Lambda Runtime API for tests (`/2018-06-01/runtime/invocation/next`, `…/{id}/response`,
//! `…/{id}/error`, `/2018-06-01/runtime/init/error`): the test hands events to the real function
//! binary through it and waits for each answer, with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// How long one invocation may take.
pub const WAIT: Duration = Duration::from_secs(30);

type Results = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>>;

/// The Runtime API: a queue of events for `next`, and a waiter per request id.
#[derive(Clone)]
pub struct Api {
    events: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value)>>>,
    results: Results,
    init_errors: Arc<Mutex<Vec<Value>>>,
}

pub struct Runtime {
    pub addr: String,
    send: mpsc::UnboundedSender<(String, Value)>,
    results: Results,
}

impl Runtime {
    pub async fn start() -> Runtime {
        let (send, recv) = mpsc::unbounded_channel();
        let api = Api {
            events: Arc::new(tokio::sync::Mutex::new(recv)),
            results: Arc::default(),
            init_errors: Arc::default(),
        };
        let results = api.results.clone();
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route("/2018-06-01/runtime/invocation/{id}/response", post(respond))
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(api);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Runtime { addr, send, results }
    }

    /// Hands `event` to the next `next` call and waits for the function's answer.
    pub async fn invoke(&self, event: Value) -> Result<Value, Value> {
        let id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = oneshot::channel();
        self.results.lock().unwrap().insert(id.clone(), tx);
        self.send.send((id, event)).unwrap();
        tokio::time::timeout(WAIT, rx).await.expect("the function answered in time").unwrap()
    }
}

async fn next(State(api): State<Api>) -> Response {
    let Some((id, event)) = api.events.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let deadline = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap() + WAIT;
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert("lambda-runtime-deadline-ms", deadline.as_millis().to_string().parse().unwrap());
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:github-webhook".parse().unwrap(),
    );
    headers.insert("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".parse().unwrap());
    (headers, event.to_string()).into_response()
}

async fn respond(State(api): State<Api>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    if let Some(tx) = api.results.lock().unwrap().remove(&id) {
        let _ = tx.send(Ok(serde_json::from_slice(&body).unwrap()));
    }
    StatusCode::ACCEPTED
}

async fn error(State(api): State<Api>, Path(id): Path<String>, body: Bytes) -> StatusCode {
    if let Some(tx) = api.results.lock().unwrap().remove(&id) {
        let _ = tx.send(Err(serde_json::from_slice(&body).unwrap_or(Value::Null)));
    }
    StatusCode::ACCEPTED
}

async fn init_error(State(api): State<Api>, body: Bytes) -> StatusCode {
    api.init_errors.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or(Value::Null));
    StatusCode::ACCEPTED
}
