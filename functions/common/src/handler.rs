//! One function-URL event in, one HTTP response out: headers (lowercased) and the raw body
//! (base64-decoded when `isBase64Encoded`) go to [`Ingest::handle`], the same call `beckon serve`
//! makes, and its [`Outcome`] becomes the response (status and the small JSON body). After a
//! trigger is recorded the asker is acknowledged ([`crate::ack`]), bounded by [`ACK_TIMEOUT`] so
//! the answer stays inside Linear's 5 s; a failed acknowledgement is logged, never returned.

use std::time::Duration;

use aws_lambda_events::event::lambda_function_urls::{LambdaFunctionUrlRequest, LambdaFunctionUrlResponse};
use aws_lambda_events::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use beckon_core::event::{CommentAction, EventKind, Placement, Subject, Tracker};
use beckon_core::ingest::{self, Headers, Outcome, Rejection, WebhookRequest};
use tracing::warn;

use crate::ack::Ack;
use crate::setup::App;

/// How long the acknowledgement may take: GitHub waits 10 s and Linear 5 s for the answer, and
/// ingest itself takes tens of milliseconds.
pub const ACK_TIMEOUT: Duration = Duration::from_millis(2500);

/// Handles one invocation. Never fails: every outcome is an HTTP response.
pub async fn handle(app: &App, event: LambdaFunctionUrlRequest) -> LambdaFunctionUrlResponse {
    let headers = Headers::new(
        event
            .headers
            .iter()
            .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_ascii_lowercase(), v.to_owned()))),
    );
    let Some(body) = raw_body(&event) else {
        return response(&app.ingest.refuse(app.tracker, &headers, Rejection::BodyUnreadable));
    };
    let req = WebhookRequest { tracker: app.tracker, headers: headers.clone(), body: body.clone() };
    let outcome = app.ingest.handle(req).await;
    if let Outcome::Accepted { reason, .. } = &outcome {
        if reason.is_work() {
            if let Some(ack) = ack_for(app.tracker, &headers, &body) {
                match tokio::time::timeout(ACK_TIMEOUT, app.ack.acknowledge(&ack)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!(error = %e, "acknowledgement failed; the delivery is recorded regardless"),
                    Err(_) => {
                        warn!(timeout = ?ACK_TIMEOUT, "acknowledgement timed out; the delivery is recorded regardless")
                    }
                }
            }
        }
    }
    response(&outcome)
}

/// The exact bytes the signature covers: the body, base64-decoded when the event says so.
fn raw_body(event: &LambdaFunctionUrlRequest) -> Option<Vec<u8>> {
    let body = event.body.as_deref().unwrap_or_default();
    if event.is_base64_encoded {
        base64::engine::general_purpose::STANDARD.decode(body).ok()
    } else {
        Some(body.as_bytes().to_vec())
    }
}

/// What to acknowledge for a verified delivery that led to work: the GitHub trigger comment, or
/// the Linear agent session. Re-decodes the (already verified) body; `None` when there is no such
/// target (an assignment, a plain Linear comment).
pub fn ack_for(tracker: Tracker, headers: &Headers, body: &[u8]) -> Option<Ack> {
    match tracker {
        Tracker::Github => {
            let json = ingest::github::payload_bytes(headers.get("content-type"), body).ok()?;
            let event =
                ingest::github::decode(headers.get("x-github-event")?, headers.get("x-github-delivery")?, &json)
                    .ok()?;
            let EventKind::Comment(c) = event.kind else { return None };
            if matches!(c.action, CommentAction::Deleted) {
                return None;
            }
            let Subject::Github(subject) = c.subject else { return None };
            let review = matches!(c.comment.placement, Placement::ReviewThread { .. });
            Some(Ack::GithubComment { subject, comment_id: c.comment.id, review })
        }
        Tracker::Linear => {
            let decoded = ingest::linear::decode(headers.get("linear-delivery")?, body).ok()?;
            let EventKind::AgentSession(s) = decoded.event.kind else { return None };
            Some(Ack::LinearSession { session_id: s.session_id })
        }
    }
}

/// The outcome as a function-URL response: [`Outcome::status`] and [`Outcome::body`] as JSON.
pub fn response(outcome: &Outcome) -> LambdaFunctionUrlResponse {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let mut r = LambdaFunctionUrlResponse::default();
    r.status_code = i64::from(outcome.status());
    r.headers = headers;
    r.body = Some(serde_json::to_string(&outcome.body()).unwrap_or_else(|_| "{}".to_owned()));
    r.is_base64_encoded = false;
    r
}
