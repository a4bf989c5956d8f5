//! The reliability and security suite (issue 7; RELIABILITY.md has the scenarios and the last
//! figures). It proves, against the real `beckon serve` and the real Codex, that nothing is lost,
//! nothing runs twice and no one gets in:
//! - `faults`: SIGKILL at each stage, tracker 500/429, Codex dying or hanging, duplicate and
//!   out-of-order deliveries, edits and deletes racing the claim;
//! - `loops`: Beckon's own replies, and an echoing second instance, against the run budget;
//! - `bad_input`: property tests over decoders, signatures, the JSON-RPC reader and the prompt;
//!   a corpus of bad requests;
//! - `scope`: tool scope, task tokens narrowed and revoked, no secret anywhere the run wrote;
//! - `aws`: the AWS path (DynamoDB + SQS on moto) with `beckon worker` SIGKILLed mid-turn,
//!   duplicate deliveries and edits/deletes racing the claim;
//! - `outage`: the ledger or the queue unavailable for a while under an in-process worker;
//! - `load`: a burst of deliveries over many threads (`BECKON_LONG_TESTS=1` for the full size).
//!
//! Every scenario ends by checking the invariants ([`world::check_invariants`]).

// A test crate: helpers panic on unexpected shapes, which fails the test with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[path = "../core/tests/support/github_double.rs"]
mod github_double;

#[path = "reliability/aws.rs"]
mod aws;
#[path = "reliability/bad_input.rs"]
mod bad_input;
#[path = "reliability/faults.rs"]
mod faults;
#[path = "reliability/load.rs"]
mod load;
#[path = "reliability/loops.rs"]
mod loops;
#[path = "reliability/outage.rs"]
mod outage;
#[path = "reliability/ports.rs"]
mod ports;
#[path = "reliability/scope.rs"]
mod scope;
#[path = "reliability/world.rs"]
mod world;
