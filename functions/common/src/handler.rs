//! One function-URL event in, one HTTP response out: headers (lowercased) and the raw body
//! (base64-decoded when `isBase64Encoded`) go to [`Ingest::handle`], the same call `beckon serve`
//! makes, and its [`Outcome`] becomes the response (status and the small JSON body). Ingest also
//! acknowledges a recorded trigger (`beckon_core::ingest::ack`), bounded so the answer stays
//! inside Linear's 5 s; a failed acknowledgement is logged, never returned.

use aws_lambda_events::event::lambda_function_urls::{LambdaFunctionUrlRequest, LambdaFunctionUrlResponse};
use aws_lambda_events::http::{HeaderMap, HeaderValue};
use base64::Engine as _;
use beckon_core::ingest::{Headers, Outcome, Rejection, WebhookRequest};

use crate::setup::App;

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
    let outcome = app.ingest.handle(WebhookRequest { tracker: app.tracker, headers, body: body.into() }).await;
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
