//! The typed subset of the `codex app-server` protocol (codex-cli 0.169.0, pinned in
//! `codex.version`) that Beckon uses: envelopes, our requests, the notifications we consume and
//! the server requests we answer. One type per message, hand-written and checked against
//! `schema/json-experimental`; no I/O here. Wire-shape tests in `tests.rs` use JSON captured
//! from the real binary.

pub mod items;
pub mod jsonrpc;
pub mod notifications;
pub mod requests;
pub mod server_requests;

#[cfg(test)]
mod tests;

pub use items::*;
pub use jsonrpc::*;
pub use notifications::*;
pub use requests::*;
pub use server_requests::*;
