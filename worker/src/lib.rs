//! The `beckon` binary's library: the process-level stages that sit on top of `beckon-core`.
//!
//! | module | what |
//! |---|---|
//! | [`serve`] | `beckon serve`: the HTTP edge and a worker over the embedded SQLite store |
//! | [`worker`] | the worker loop: claim, lease, run one Codex turn, answer, finish |
//! | [`execenv`] | a task's workspace: worktree from a cached mirror, CODEX_HOME, scrubbed env |
//! | [`codex`] | drives the real OpenAI Codex (`codex app-server`, JSON-RPC over stdio) for one turn |
//! | [`tools`] | the dynamic tools the agent calls, scoped to its task |
//! | [`report`] | how an attempt ends: the terminal record, failure and stop replies, retries |
//! | [`events`] | Codex events → the task transcript |
//! | [`activities`] | Codex events → Linear agent-session activities |
//! | [`setup`] | builds a worker from settings |
//! | [`operator`] | `beckon tasks …`, `beckon deliveries …` |
//! | [`backend`] | which ledger an operator command reads (SQLite or DynamoDB) |
//! | [`aws_init`] | `beckon aws init`: the table and queues, for development and tests |
//! | [`logging`] | the process's one tracing subscriber |
//!
//! `main.rs` only parses the command line and calls into these.

pub mod activities;
pub mod aws_init;
pub mod backend;
pub mod codex;
pub mod events;
pub mod execenv;
pub mod logging;
pub mod operator;
pub mod report;
pub mod serve;
pub mod setup;
pub mod tools;
pub mod worker;
