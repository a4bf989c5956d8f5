//! Beckon's domain: from a tracker webhook to a queued task, as plain data and pure functions,
//! plus the ports (and embedded adapters) that make it durable.
//!
//! The flow, one module per stage (DESIGN §1):
//!
//! | module | stage |
//! |---|---|
//! | [`verify`] | HMAC signatures and Linear's replay window: pure, constant time |
//! | [`ingest`] | one webhook in, one HTTP outcome out: verify → decode → normalize → rules → ledger → queue. Shared by `beckon serve` and the Lambda functions |
//! | [`event`] | the normalized event model every decoder produces |
//! | [`trigger`] | the deterministic trigger rules, returning a [`decision::Decision`] with a reason code |
//! | [`task`] | tasks, thread keys and the pure task state machine |
//! | [`ledger`], [`queue`] | the ports (traits) for durable state and for handing task ids to workers |
//! | `sqlite` | the embedded ledger and queue (feature `sqlite`) |
//! | `aws` | the DynamoDB ledger and SQS FIFO queue, and what `beckon aws init` creates (feature `aws`) |
//! | `conformance` | the port conformance suite every backend runs (feature `conformance`) |
//! | [`tracker`] | the tracker port and its GitHub and Linear clients (features `github`, `linear`): every reply, reaction and token |
//! | [`clock`] | injected time |
//!
//! No module here reads environment variables or starts a runtime; binaries own configuration.

pub mod clock;
pub mod config;
pub mod decision;
pub mod event;
pub mod ingest;
pub mod ledger;
pub mod prompt;
pub mod queue;
pub mod sweep;
pub mod task;
pub mod tracker;
pub mod transcript;
pub mod trigger;
pub mod verify;

#[cfg(feature = "sqlite")]
pub mod sqlite;

#[cfg(feature = "aws")]
pub mod aws;

#[cfg(feature = "conformance")]
pub mod conformance;
