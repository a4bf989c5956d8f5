//! The AWS backend (feature `aws`): the [`Ledger`](crate::ledger::Ledger) port on one DynamoDB
//! table ([`DynamoLedger`]) and the [`Queue`](crate::queue::Queue) port on an SQS FIFO queue
//! ([`SqsQueue`]), both on the real AWS SDK, plus [`provision`] (what `beckon aws init` creates).
//! Same contracts as the embedded SQLite backend, proven by the same [`crate::conformance`] suite.
//!
//! This module owns the one mapping from SDK errors to [`LedgerError`] / [`QueueError`]
//! ([`ledger_error`], [`queue_error`]): throttling, 5xx, timeouts and transport failures are the
//! retryable `Unavailable`; nothing here retries an SDK call itself (the SDK's standard retry
//! policy already does). It must not read the environment: binaries build the `SdkConfig`, from
//! [`config_loader`] (or with [`https_client`]), since the SDK is built without its default client.

mod items;
mod ledger;
pub mod provision;
mod queue;
pub mod secrets;

use std::fmt::Debug;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use crate::ledger::LedgerError;
use crate::queue::QueueError;

pub use ledger::DynamoLedger;
pub use queue::{message_group_id, SqsQueue};

/// The SDK's HTTP client: hyper and rustls on *ring*, the crypto library the tracker clients
/// (reqwest, jsonwebtoken) already link, with the platform's root certificates. The SDK's
/// `default-https-client` would be the same client on aws-lc-rs, a second crypto library (2.8 MB
/// of the github-webhook binary, 15% of its release build), so the workspace builds the SDK without
/// it and every `SdkConfig` gets this client instead: one without an HTTP client fails every call.
pub fn https_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https()
}

/// `aws_config::defaults` (the standard chain: environment, profile, container or instance
/// credentials) with [`https_client`]. The binary calls `.load()`; nothing is read before that.
pub fn config_loader() -> aws_config::ConfigLoader {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(https_client())
}

/// The table's secondary index (as `infra/template.yaml` defines it).
pub const GSI1: &str = "gsi1";

/// The DynamoDB TTL attribute: epoch **seconds**, as DynamoDB's TTL requires.
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// The one place a DynamoDB SDK error becomes a ledger error. Everything the store says (throttled,
/// 5xx, timeouts, a missing table) is [`LedgerError::Unavailable`] with the service's code;
/// conditional-check failures never reach here (the ledger handles them as lost races).
pub(crate) fn ledger_error<E, R>(op: &str, e: SdkError<E, R>) -> LedgerError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: Debug,
{
    LedgerError::Unavailable(format!("dynamodb {op}: {}", DisplayErrorContext(&e)))
}

/// The one place an SQS SDK error becomes a queue error: a receipt SQS does not (or no longer)
/// accept is [`QueueError::InvalidReceipt`]; everything else is [`QueueError::Unavailable`].
pub(crate) fn queue_error<E, R>(op: &str, e: SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: Debug,
{
    let lost_receipt = e.as_service_error().and_then(ProvideErrorMetadata::code).is_some_and(|code| {
        matches!(
            code,
            "ReceiptHandleIsInvalid"
                | "AWS.SimpleQueueService.ReceiptHandleIsInvalid"
                | "MessageNotInflight"
                | "AWS.SimpleQueueService.MessageNotInflight"
        )
    }) || e
        .as_service_error()
        .and_then(ProvideErrorMetadata::message)
        // Real SQS answers InvalidParameterValue "…the receipt handle has expired" for a receipt
        // whose visibility ran out.
        .is_some_and(|m| m.contains("receipt handle has expired"));
    if lost_receipt {
        QueueError::InvalidReceipt
    } else {
        QueueError::Unavailable(format!("sqs {op}: {}", DisplayErrorContext(&e)))
    }
}
