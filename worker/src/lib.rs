//! Beckon's worker library: the stages the `beckon` binary wires together.
//!
//! - [`codex`]: drives the real OpenAI Codex (`codex app-server`, JSON-RPC over stdio) for one turn.

pub mod codex;
