//! `beckon serve`: the embedded default. Webhooks over HTTP into the same ingest function the
//! Lambda functions call, with the SQLite ledger and queue in one file under the data dir.
//!
//! Owns the HTTP edge only: routes, the body cap (enforced while reading, so an over-long body is
//! refused without reading further), the mapping of an ingest [`Outcome`] to a response, and
//! graceful shutdown on SIGINT/SIGTERM. A tracker without a secret has its endpoint switched off
//! (404), and start-up says so. The worker runs in the same process over the same store when
//! `BECKON_CODEX_BIN` and a tracker credential are set; otherwise tasks wait, `queued`, and
//! start-up says why.

use std::future::Future;
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use beckon_core::clock::{Clock, SystemClock};
use beckon_core::config::{Backend, Settings};
use beckon_core::event::Tracker;
use beckon_core::ingest::{
    AckMode, Headers, Ingest, IngestConfig, Outcome, Rejection, WebhookRequest, LINEAR_REPLAY_WINDOW,
};
use beckon_core::sqlite;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::setup::{self, NoWorker};
use tracing::{info, warn};

/// Runs `beckon serve` until SIGINT/SIGTERM. `base_env` is the process environment (the worker
/// takes the agent's allow-listed variables from it).
pub async fn main(settings: Settings, base_env: Vec<(String, String)>) -> anyhow::Result<()> {
    match settings.backend {
        None | Some(Backend::Sqlite) => {}
        Some(Backend::Aws) => {
            bail!("`beckon serve` runs on the embedded SQLite store; unset BECKON_BACKEND or set it to `sqlite`")
        }
    }
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("while creating the data dir {}", settings.data_dir.display()))?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let path = settings.sqlite_path();
    let (ledger, queue) =
        sqlite::open(&path, clock.clone()).with_context(|| format!("while opening {}", path.display()))?;
    let ledger: Arc<dyn beckon_core::ledger::Ledger> = Arc::new(ledger);
    let queue: Arc<dyn beckon_core::queue::Queue> = Arc::new(queue);
    let ingest = Ingest::new(
        IngestConfig {
            github_secrets: settings.github_secrets.clone(),
            linear_secrets: settings.linear_secrets.clone(),
            rules: settings.rules.clone(),
            max_body_bytes: settings.max_body_bytes,
            linear_replay_window: LINEAR_REPLAY_WINDOW,
        },
        Arc::clone(&ledger),
        Arc::clone(&queue),
        Arc::clone(&clock),
    );
    let ingest = match setup::acknowledger(&settings, Arc::clone(&clock))? {
        // After the answer: GitHub's write pacing must never hold a webhook (see AckMode).
        Some(ack) => ingest.with_ack(Arc::new(ack), AckMode::Background),
        None => ingest,
    };
    for tracker in [Tracker::Github, Tracker::Linear] {
        let path = format!("/webhooks/{tracker}");
        if ingest.enabled(tracker) {
            info!(%tracker, path, "webhook endpoint enabled");
        } else {
            let var = match tracker {
                Tracker::Github => beckon_core::config::vars::GITHUB_WEBHOOK_SECRET,
                Tracker::Linear => beckon_core::config::vars::LINEAR_WEBHOOK_SECRET,
            };
            warn!(%tracker, path, "webhook endpoint disabled (404): set {var} to enable it");
        }
    }
    let shutdown = CancellationToken::new();
    let worker = match setup::build(&settings, base_env, ledger, queue, clock)? {
        Ok(worker) => Some(tokio::spawn(Arc::new(worker).run(shutdown.child_token()))),
        Err(why) => {
            let hint = match why {
                NoWorker::NoCodex => "set BECKON_CODEX_BIN (scripts/install-codex prints it)",
                NoWorker::NoTracker => "set BECKON_GITHUB_TOKEN (or a GitHub App) or a Linear credential",
            };
            warn!("worker disabled: tasks stay queued; {hint}");
            None
        }
    };
    let listener =
        TcpListener::bind(settings.listen).await.with_context(|| format!("while binding {}", settings.listen))?;
    let addr = listener.local_addr().context("while reading the bound address")?;
    info!(%addr, handle = %settings.rules.handle, db = %path.display(), "beckon serve listening");
    let http_stop = shutdown.clone();
    let signal = async move {
        shutdown_signal().await;
        http_stop.cancel();
    };
    let served = run(listener, Arc::new(ingest), signal).await.context("while serving HTTP");
    shutdown.cancel();
    if let Some(worker) = worker {
        if let Err(e) = worker.await {
            warn!(error = %e, "the worker ended abnormally");
        }
    }
    served?;
    info!("beckon serve stopped");
    Ok(())
}

/// Serves the routes on `listener` until `shutdown` completes, then lets in-flight requests finish.
pub async fn run(
    listener: TcpListener,
    ingest: Arc<Ingest>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/webhooks/github", post(github))
        .route("/webhooks/linear", post(linear))
        .route("/healthz", get(healthz))
        .with_state(ingest);
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

// The request whole (not the `HeaderMap` extractor, which clones the headers): its parts are moved.
async fn github(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    webhook(&ingest, Tracker::Github, parts.headers, body).await
}

async fn linear(State(ingest): State<Arc<Ingest>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    webhook(&ingest, Tracker::Linear, parts.headers, body).await
}

async fn healthz() -> Response {
    Json(serde_json::json!({ "status": "ok" })).into_response()
}

async fn webhook(ingest: &Ingest, tracker: Tracker, header_map: HeaderMap, body: Body) -> Response {
    let headers =
        Headers::new(header_map.iter().filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned()))));
    if !ingest.enabled(tracker) {
        return respond(ingest.refuse(tracker, &headers, Rejection::Disabled));
    }
    let limit = ingest.config().max_body_bytes;
    let declared = headers.get("content-length").and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return respond(ingest.refuse(tracker, &headers, Rejection::TooLarge { limit }));
    }
    let body = match read_body(body, limit).await {
        Ok(body) => body,
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return respond(ingest.refuse(tracker, &headers, Rejection::TooLarge { limit }));
        }
        Err(_) => return respond(ingest.refuse(tracker, &headers, Rejection::BodyUnreadable)),
    };
    respond(ingest.handle(WebhookRequest { tracker, headers, body }).await)
}

/// The whole body, at most `limit` bytes. A body that arrived in one piece (the common case: it
/// fits hyper's read buffer) is handed on as that buffer, uncopied; one in several pieces is
/// copied once into a buffer of its real size. Nothing is reserved from the declared length, so a
/// stalled request holds only what it has sent.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, axum::BoxError> {
    Ok(Limited::new(body, limit).collect().await?.to_bytes())
}

fn respond(outcome: Outcome) -> Response {
    let status = StatusCode::from_u16(outcome.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(outcome.body())).into_response()
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = ctrl_c => info!(signal = "SIGINT", "shutting down"),
        () = term => info!(signal = "SIGTERM", "shutting down"),
    }
}
