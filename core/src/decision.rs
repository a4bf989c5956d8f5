//! Decisions: what the trigger rules conclude about one event, and the reason codes operators see.
//!
//! The rules ([`crate::trigger`]) return a [`Decision`]: a preliminary [`ReasonCode`] plus the
//! [`Effect`] the ledger must apply atomically with the delivery record. The ledger may refine the
//! reason (a trigger becomes `coalesced` when a queued task already exists); the final code is
//! stored on the delivery record and logged. Reason codes are stable strings (`enqueued`,
//! `coalesced`, `deferred`, `cancelled`, `ignored:<why>`): dashboards and tests match on them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::event::Subject;
use crate::task::{CancelReason, Permission, ThreadKey, Trigger};

/// The outcome of the trigger rules for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Why, as operators will see it (the ledger may refine `enqueued` into `coalesced`).
    pub reason: ReasonCode,
    /// What the ledger must do.
    pub effect: Effect,
}

impl Decision {
    /// A decision to do nothing, for `why`.
    pub fn ignore(why: IgnoreReason) -> Decision {
        Decision { reason: ReasonCode::Ignored(why), effect: Effect::Nothing }
    }
}

/// What the ledger applies, atomically with recording the delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "one short-lived value per delivery, never stored in bulk; boxing would only add an allocation"
)]
pub enum Effect {
    /// Record the delivery and its reason; change nothing else.
    Nothing,
    /// Work was asked for: coalesce into the thread's queued task, or create a queued task
    /// (a follow-up when one is already running).
    Trigger(NewTrigger),
    /// `@handle stop`: cancel the thread's queued task and stop its running one.
    CancelThread {
        /// The thread.
        thread_key: ThreadKey,
        /// Why.
        reason: CancelReason,
    },
    /// A comment that asked for work was deleted: drop it from its unfinished task; cancel the
    /// task when no trigger is left.
    RetractComment {
        /// The thread.
        thread_key: ThreadKey,
        /// The deleted comment.
        comment_id: String,
    },
    /// The issue is no longer assigned or delegated to the agent: clear the thread's flag.
    Unassign {
        /// The thread.
        thread_key: ThreadKey,
    },
}

/// A request for work, as the rules shaped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTrigger {
    /// The thread it belongs to.
    pub thread_key: ThreadKey,
    /// Where it was asked.
    pub subject: Subject,
    /// The trigger itself.
    pub trigger: Trigger,
    /// Whether the author's permission is settled.
    pub permission: Permission,
    /// A comment-thread root the agent now takes part in (replies there route to it without a
    /// mention): the review thread, or the Linear comment the agent will answer under.
    pub participates_in: Option<String>,
    /// True when this trigger is an assignment/delegation: the ledger remembers the thread as
    /// assigned to the agent (Linear comments cannot say so themselves).
    pub marks_assigned: bool,
}

/// Why a delivery did or did not lead to work. Displayed as `enqueued`, `ignored:no_mention`, …
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum ReasonCode {
    /// A new queued task was created.
    Enqueued,
    /// The trigger joined a task that was still queued.
    Coalesced,
    /// Work was recorded, but the author's permission must be checked by the worker first.
    Deferred,
    /// Tasks were cancelled or asked to stop.
    Cancelled,
    /// Nothing to do, and why.
    Ignored(IgnoreReason),
}

/// Why an event was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IgnoreReason {
    /// An event type or action Beckon does not route (`ping`, installation events, …).
    Unrouted,
    /// Written by Beckon itself (loop guard).
    OwnComment,
    /// Written by a bot that is not on the allow-list.
    Bot,
    /// No mention, no reply in an agent thread, not assigned to the agent.
    NoMention,
    /// An edit that did not add a new mention.
    MentionNotNew,
    /// An assignment of someone else, or an unassignment.
    NotForAgent,
    /// The thread spent its run budget for the window (loop guard).
    RunBudget,
    /// A stop or a deletion found no unfinished task to cancel.
    NothingToCancel,
    /// A stop command from an author whose permission is not settled.
    Untrusted,
    /// A Linear comment not attached to an issue (project updates, documents, …).
    NoIssue,
    /// A Linear Agent API session event; handled by a later stage.
    AgentSession,
    /// An empty mention (`@agent` with nothing else) on a thread with nothing to do.
    EmptyRequest,
    /// The comment already asked for a task of this thread (the same comment delivered again
    /// under another delivery id, e.g. by a second webhook): it starts nothing new.
    KnownComment,
    /// The thread's queued task already holds as many requests as one task takes
    /// ([`crate::task::MAX_TRIGGERS`] or [`crate::task::MAX_TRIGGER_BYTES`]).
    TaskFull,
}

impl IgnoreReason {
    /// Every reason, for exhaustive tests and operator docs.
    pub const ALL: [IgnoreReason; 14] = [
        IgnoreReason::Unrouted,
        IgnoreReason::OwnComment,
        IgnoreReason::Bot,
        IgnoreReason::NoMention,
        IgnoreReason::MentionNotNew,
        IgnoreReason::NotForAgent,
        IgnoreReason::RunBudget,
        IgnoreReason::NothingToCancel,
        IgnoreReason::Untrusted,
        IgnoreReason::NoIssue,
        IgnoreReason::AgentSession,
        IgnoreReason::EmptyRequest,
        IgnoreReason::KnownComment,
        IgnoreReason::TaskFull,
    ];

    /// The code after `ignored:`.
    pub fn as_str(self) -> &'static str {
        match self {
            IgnoreReason::Unrouted => "unrouted",
            IgnoreReason::OwnComment => "own_comment",
            IgnoreReason::Bot => "bot",
            IgnoreReason::NoMention => "no_mention",
            IgnoreReason::MentionNotNew => "mention_not_new",
            IgnoreReason::NotForAgent => "not_for_agent",
            IgnoreReason::RunBudget => "run_budget",
            IgnoreReason::NothingToCancel => "nothing_to_cancel",
            IgnoreReason::Untrusted => "untrusted",
            IgnoreReason::NoIssue => "no_issue",
            IgnoreReason::AgentSession => "agent_session",
            IgnoreReason::EmptyRequest => "empty_request",
            IgnoreReason::KnownComment => "known_comment",
            IgnoreReason::TaskFull => "task_full",
        }
    }
}

impl ReasonCode {
    /// True when work was (or will be) done for the delivery.
    pub fn is_work(self) -> bool {
        match self {
            ReasonCode::Enqueued | ReasonCode::Coalesced | ReasonCode::Deferred => true,
            ReasonCode::Cancelled | ReasonCode::Ignored(_) => false,
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReasonCode::Enqueued => f.write_str("enqueued"),
            ReasonCode::Coalesced => f.write_str("coalesced"),
            ReasonCode::Deferred => f.write_str("deferred"),
            ReasonCode::Cancelled => f.write_str("cancelled"),
            ReasonCode::Ignored(why) => write!(f, "ignored:{}", why.as_str()),
        }
    }
}

impl From<ReasonCode> for String {
    fn from(r: ReasonCode) -> String {
        r.to_string()
    }
}

impl TryFrom<String> for ReasonCode {
    type Error = String;

    fn try_from(s: String) -> Result<ReasonCode, String> {
        ReasonCode::parse(&s).ok_or_else(|| format!("unknown reason code {s:?}"))
    }
}

impl ReasonCode {
    /// Parses the [`Display`](fmt::Display) form.
    pub fn parse(s: &str) -> Option<ReasonCode> {
        match s {
            "enqueued" => Some(ReasonCode::Enqueued),
            "coalesced" => Some(ReasonCode::Coalesced),
            "deferred" => Some(ReasonCode::Deferred),
            "cancelled" => Some(ReasonCode::Cancelled),
            other => {
                let why = other.strip_prefix("ignored:")?;
                IgnoreReason::ALL.into_iter().find(|r| r.as_str() == why).map(ReasonCode::Ignored)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_code_round_trips_through_text() {
        let mut all = vec![ReasonCode::Enqueued, ReasonCode::Coalesced, ReasonCode::Deferred, ReasonCode::Cancelled];
        all.extend(IgnoreReason::ALL.map(ReasonCode::Ignored));
        for r in all {
            assert_eq!(ReasonCode::parse(&r.to_string()), Some(r), "{r}");
        }
        assert_eq!(ReasonCode::Ignored(IgnoreReason::OwnComment).to_string(), "ignored:own_comment");
        assert_eq!(ReasonCode::parse("ignored:nope"), None);
    }
}
