//! PLACEHOLDER: the trigger rules (being written on branch `trigger`).

use std::time::Duration;

use crate::clock::Millis;
use crate::decision::Decision;
use crate::event::Event;
use crate::ledger::ThreadSnapshot;
use crate::task::ThreadKey;

/// The rules' configuration: who the agent is and which limits apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The mention handle without `@` (`agent` → `@agent`).
    pub handle: String,
    /// GitHub logins Beckon writes as (its App's `slug[bot]`, a machine user): never trigger.
    pub own_logins: Vec<String>,
    /// Beckon's GitHub App id: comments `performed_via_github_app` with it never trigger.
    pub own_app_id: Option<u64>,
    /// Linear app user ids Beckon writes as (one per workspace): never trigger, and a delegation
    /// to one of them is a delegation to the agent.
    pub own_linear_user_ids: Vec<String>,
    /// Bot logins/names allowed to trigger despite being bots.
    pub bot_allow_list: Vec<String>,
    /// GitHub logins whose assignment means "assigned to the agent" (a machine user).
    pub agent_logins: Vec<String>,
    /// At most this many tasks per thread per `budget_window` (loop guard).
    pub max_runs_per_window: u32,
    /// The run budget's window.
    pub budget_window: Duration,
    /// Trigger bodies are stored up to this many characters.
    pub max_body_chars: usize,
}

/// The thread an event concerns, and the comment-thread root (if any) whose participation the
/// rules need to know. `None` for events about no thread (unrouted).
pub fn thread_of(event: &Event, handle: &str) -> Option<(ThreadKey, Option<String>)> {
    let _ = (event, handle);
    todo!("trigger branch")
}

/// Decides what `event` means given the thread's current state.
pub fn decide(event: &Event, rules: &Rules, thread: &ThreadSnapshot, now: Millis) -> Decision {
    let _ = (event, rules, thread, now);
    todo!("trigger branch")
}
