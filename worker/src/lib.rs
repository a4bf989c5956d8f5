//! The `beckon` binary's library: the process-level stages that sit on top of `beckon-core`.
//!
//! | module | what |
//! |---|---|
//! | [`serve`] | `beckon serve`: the HTTP edge over the embedded SQLite store |
//! | [`operator`] | `beckon tasks …`, `beckon deliveries …` |
//! | [`codex`] | drives the real OpenAI Codex (`codex app-server`, JSON-RPC over stdio) for one turn |
//! | [`logging`] | the process's one tracing subscriber |
//!
//! `main.rs` only parses the command line and calls into these.

pub mod aws_init;
pub mod backend;
pub mod codex;
pub mod logging;
pub mod operator;
pub mod serve;
