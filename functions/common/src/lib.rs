//! The glue both Lambda webhook functions share, so each binary is one line: [`run`] a tracker.
//!
//! [`setup`] does everything once per cold start (tracing, config, SDK clients, secrets from env or
//! Secrets Manager, the edge acknowledger); [`handler`] turns one function-URL event into one
//! `core::ingest` call (which also acknowledges: 👀 / a first thought) and its HTTP response. Errors in
//! setup become a Lambda `Diagnostic` in one place ([`setup::SetupError`]); every expected
//! outcome of a delivery (bad signature, duplicate, ignored) is an HTTP response, never `Err`.

pub mod handler;
pub mod setup;

use beckon_core::event::Tracker;
use lambda_runtime::{service_fn, Diagnostic, LambdaEvent};

/// Runs the function for `tracker` until the Lambda runtime stops it. A failed cold start is
/// reported as a `Diagnostic` on every invocation (the function URL answers 502) and logged once.
///
/// # Errors
/// When the Lambda Runtime API cannot be reached.
pub async fn run(tracker: Tracker) -> Result<(), lambda_runtime::Error> {
    setup::init_tracing();
    match setup::App::from_env(tracker).await {
        Ok(app) => {
            let app = &app;
            lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
                Ok::<_, Diagnostic>(handler::handle(app, event.payload).await)
            }))
            .await
        }
        Err(e) => {
            tracing::error!(error = %e, "cold start failed; every invocation will report it");
            let diagnostic = Diagnostic::from(e);
            lambda_runtime::run(service_fn(
                move |_: LambdaEvent<aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlRequest>| {
                    let d = diagnostic.clone();
                    async move { Err::<aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlResponse, _>(d) }
                },
            ))
            .await
        }
    }
}
