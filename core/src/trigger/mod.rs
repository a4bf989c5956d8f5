//! The trigger rules (DESIGN §4): one normalized [`Event`] plus the thread's state in, one
//! [`Decision`] out. Deterministic and pure: no I/O, no clock but the `now` argument, no lookups.
//!
//! Order: unrouted and agent-session events are set aside; the loop guard runs before anything
//! else, deletions included (Beckon's own and unlisted bots' comments never planned work, so there
//! is nothing for their deletion to retract); deletions retract; edits count only when they add
//! the first mention; `@handle stop` cancels; then mention, reply and assigned-comment routing,
//! and the run budget. Permission is never refused here: authors the payload cannot vouch for are
//! `deferred` to the worker's lookup. Unassignments clear the thread's flag whoever made them
//! (except Beckon), since they state a fact rather than ask for work.
//!
//! Most deliveries are settled before the thread's state matters (a comment that mentions no one,
//! a bot's comment, a deletion): [`decide_unread`] gives those decisions without a snapshot, so
//! ingest reads the thread only for the rest. It is the same code as [`decide_read`], stopped
//! where the snapshot would first be read, so the two cannot disagree.

mod mention;

#[cfg(test)]
mod tests;

use std::convert::Infallible;
use std::time::Duration;

pub use mention::{find as find_mention, Mention};

use crate::clock::Millis;
use crate::decision::{Decision, Effect, IgnoreReason, NewTrigger, ReasonCode};
use crate::event::{
    Actor, ActorKind, AgentSessionEvent, AssignmentChange, AssignmentEvent, CommentAction, CommentEvent, Event,
    EventKind, Membership, Placement, Tracker,
};
use crate::ledger::ThreadSnapshot;
use crate::task::{CancelReason, Permission, ThreadKey, Trigger, TriggerKind};

/// Appended to a trigger body cut at [`Rules::max_body_chars`], so the agent knows text is missing.
pub const TRUNCATION_NOTE: &str = "\n\n…[truncated by Beckon]";

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
    /// The run budget's window. The ledger counts [`ThreadSnapshot::runs_in_window`] over it; the
    /// rules only compare the count with `max_runs_per_window`.
    pub budget_window: Duration,
    /// Trigger bodies are stored up to this many characters (plus [`TRUNCATION_NOTE`] when cut).
    pub max_body_chars: usize,
}

impl Rules {
    /// True when `actor` is Beckon itself: one of its GitHub logins, its GitHub App, or its Linear
    /// app user.
    fn is_own(&self, tracker: Tracker, actor: &Actor) -> bool {
        match tracker {
            Tracker::Github => {
                contains_ignore_case(&self.own_logins, &actor.name)
                    || self.own_app_id.is_some_and(|id| actor.via_app_id == Some(id))
            }
            Tracker::Linear => self.own_linear_user_ids.contains(&actor.id),
        }
    }

    /// The loop guard: Beckon's own writes and bots not on the allow-list never trigger.
    fn guard(&self, tracker: Tracker, actor: &Actor) -> Option<IgnoreReason> {
        if self.is_own(tracker, actor) {
            return Some(IgnoreReason::OwnComment);
        }
        let listed = contains_ignore_case(&self.bot_allow_list, &actor.name);
        match actor.kind {
            ActorKind::Bot if !listed => Some(IgnoreReason::Bot),
            ActorKind::Bot | ActorKind::Human | ActorKind::External => None,
        }
    }

    /// `body` cut to [`Rules::max_body_chars`] characters, with [`TRUNCATION_NOTE`] when cut.
    fn cap(&self, body: &str) -> String {
        // A body of no more bytes than the cap has no more characters either: skip the walk.
        if body.len() <= self.max_body_chars {
            return body.to_owned();
        }
        match body.char_indices().nth(self.max_body_chars) {
            Some((cut, _)) => format!("{}{TRUNCATION_NOTE}", &body[..cut]),
            None => body.to_owned(),
        }
    }
}

/// The thread an event concerns, and the comment-thread root (if any) whose participation the
/// rules need to know. `None` for events about no thread (unrouted).
pub fn thread_of(event: &Event, handle: &str) -> Option<(ThreadKey, Option<String>)> {
    match &event.kind {
        EventKind::Comment(c) => {
            Some((ThreadKey::new(&c.subject, handle), c.comment.placement.root_id().map(str::to_owned)))
        }
        EventKind::Assignment(a) => Some((ThreadKey::new(&a.subject, handle), None)),
        EventKind::AgentSession(s) => Some((ThreadKey::new(&s.subject, handle), None)),
        EventKind::Unrouted(_) => None,
    }
}

/// What the rules read from an event's text alone: the markdown scans for the handle. They are
/// the costly part of [`decide`] and do not depend on the thread, so ingest runs [`read`] before
/// the ledger step and [`decide_read`] inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// A comment's first mention of the handle.
    mention: Option<Mention>,
    /// An edited comment's previous body mentioned the handle too (or is unknown, which counts as
    /// yes: an edit that cannot be shown to add the mention asks for nothing).
    had_mention: bool,
}

/// Scans `event`'s comment text for the handle (nothing for other events).
pub fn read(event: &Event, rules: &Rules) -> Reading {
    match &event.kind {
        EventKind::Comment(c) => Reading {
            mention: mention::find(&c.comment.body, &rules.handle, event.tracker),
            had_mention: match &c.action {
                CommentAction::Edited { previous_body } => previous_body
                    .as_deref()
                    .is_none_or(|prev| mention::find(prev, &rules.handle, event.tracker).is_some()),
                CommentAction::Created | CommentAction::Deleted => false,
            },
        },
        EventKind::Assignment(_) | EventKind::AgentSession(_) | EventKind::Unrouted(_) => Reading::default(),
    }
}

/// Decides what `event` means given the thread's current state (`thread`, read for the root that
/// [`thread_of`] named). `now` stamps the trigger. The ledger may refine `enqueued` into `coalesced`.
/// The same as [`decide_read`] over [`read`].
pub fn decide(event: &Event, rules: &Rules, thread: &ThreadSnapshot, now: Millis) -> Decision {
    decide_read(event, rules, &read(event, rules), thread, now)
}

/// [`decide`], given what [`read`] found in `event` (under the same `rules`).
pub fn decide_read(event: &Event, rules: &Rules, reading: &Reading, thread: &ThreadSnapshot, now: Millis) -> Decision {
    match decide_with(event, rules, reading, thread, now) {
        Ok(decision) => decision,
        Err(never) => match never {},
    }
}

/// The decision for `event` when it does not depend on the thread's state, so that
/// [`decide_read`] would give it for every snapshot; `None` when it does.
pub fn decide_unread(event: &Event, rules: &Rules, reading: &Reading, now: Millis) -> Option<Decision> {
    decide_with(event, rules, reading, &Unread, now).ok()
}

/// Where the rules find the thread's state: a [`ThreadSnapshot`], or [`Unread`].
trait ThreadState {
    /// Why the state is not there: [`Infallible`] for a snapshot.
    type Missing;
    fn get(&self) -> Result<&ThreadSnapshot, Self::Missing>;
}

impl ThreadState for ThreadSnapshot {
    type Missing = Infallible;
    fn get(&self) -> Result<&ThreadSnapshot, Infallible> {
        Ok(self)
    }
}

/// No snapshot: deciding stops where the rules would first look at the thread.
struct Unread;

impl ThreadState for Unread {
    type Missing = Unread;
    fn get(&self) -> Result<&ThreadSnapshot, Unread> {
        Err(Unread)
    }
}

fn decide_with<T: ThreadState>(
    event: &Event,
    rules: &Rules,
    reading: &Reading,
    thread: &T,
    now: Millis,
) -> Result<Decision, T::Missing> {
    match &event.kind {
        EventKind::Comment(c) => decide_comment(event, c, rules, reading, thread, now),
        EventKind::Assignment(a) => decide_assignment(event, a, rules, thread, now),
        EventKind::AgentSession(s) => decide_agent_session(event, s, rules, thread, now),
        EventKind::Unrouted(_) => Ok(Decision::ignore(IgnoreReason::Unrouted)),
    }
}

fn decide_comment<T: ThreadState>(
    event: &Event,
    c: &CommentEvent,
    rules: &Rules,
    reading: &Reading,
    thread: &T,
    now: Millis,
) -> Result<Decision, T::Missing> {
    let comment = &c.comment;
    if let Some(why) = rules.guard(event.tracker, &comment.author) {
        return Ok(Decision::ignore(why));
    }
    let thread_key = ThreadKey::new(&c.subject, &rules.handle);
    let mention = &reading.mention;
    match &c.action {
        CommentAction::Created => {}
        CommentAction::Deleted => {
            let effect = Effect::RetractComment { thread_key, comment_id: comment.id.clone() };
            return Ok(Decision { reason: ReasonCode::Cancelled, effect });
        }
        CommentAction::Edited { .. } => {
            // Only an edit that adds the first mention asks for anything (so it can only route
            // as a mention): fixing a typo in a comment that already triggered, or editing a
            // reply, must not run the agent again.
            if reading.had_mention || mention.is_none() {
                return Ok(Decision::ignore(IgnoreReason::MentionNotNew));
            }
        }
    }
    let trusted = is_trusted(comment.author.kind, &comment.membership);

    if mention.as_ref().is_some_and(Mention::is_stop) {
        if !trusted {
            return Ok(Decision::ignore(IgnoreReason::Untrusted));
        }
        let thread = thread.get()?;
        if thread.queued.is_none() && thread.active.is_none() {
            return Ok(Decision::ignore(IgnoreReason::NothingToCancel));
        }
        let effect = Effect::CancelThread { thread_key, reason: CancelReason::StopCommand };
        return Ok(Decision { reason: ReasonCode::Cancelled, effect });
    }

    let root = comment.placement.root_id();
    let kind = if mention.is_some() {
        TriggerKind::Mention
    } else if root.is_some_and(|root| root != comment.id) && thread.get()?.participates {
        TriggerKind::Reply
    } else if root.is_none() && assigned_to_agent(c, rules, thread)? {
        TriggerKind::AssignedComment
    } else {
        return Ok(Decision::ignore(IgnoreReason::NoMention));
    };
    if over_budget(rules, thread.get()?) {
        return Ok(Decision::ignore(IgnoreReason::RunBudget));
    }

    let (permission, reason) = if trusted {
        (Permission::Trusted, ReasonCode::Enqueued)
    } else {
        (Permission::Deferred { login: comment.author.name.clone() }, ReasonCode::Deferred)
    };
    // The agent answers under the comment-thread root; a Linear top-level comment becomes one.
    // GitHub issue conversations are flat, so there is no root to join.
    let participates_in = match (&comment.placement, event.tracker) {
        (Placement::ReviewThread { root_id } | Placement::Reply { root_id }, _) => Some(root_id.clone()),
        (Placement::AgentSession { root_id, .. }, _) => root_id.clone(),
        (Placement::TopLevel, Tracker::Linear) => Some(comment.id.clone()),
        (Placement::TopLevel, Tracker::Github) => None,
    };
    let trigger = Trigger {
        delivery_id: event.delivery_id.clone(),
        comment_id: Some(comment.id.clone()),
        kind,
        author: comment.author.name.clone(),
        body: rules.cap(&comment.body),
        placement: comment.placement.clone(),
        at: now,
    };
    let effect = Effect::Trigger(NewTrigger {
        thread_key,
        subject: c.subject.clone(),
        trigger,
        permission,
        participates_in,
        marks_assigned: false,
    });
    Ok(Decision { reason, effect })
}

fn decide_assignment<T: ThreadState>(
    event: &Event,
    a: &AssignmentEvent,
    rules: &Rules,
    thread: &T,
    now: Millis,
) -> Result<Decision, T::Missing> {
    if rules.is_own(event.tracker, &a.actor) {
        return Ok(Decision::ignore(IgnoreReason::OwnComment));
    }
    let is_ours = |id: &Option<String>| id.as_ref().is_some_and(|id| rules.own_linear_user_ids.contains(id));
    let to_agent = match &a.change {
        AssignmentChange::Assigned { login } => contains_ignore_case(&rules.agent_logins, login),
        AssignmentChange::Delegated { delegate_id, .. } => is_ours(delegate_id),
        AssignmentChange::Unassigned { login } => {
            return Ok(unassign_if(contains_ignore_case(&rules.agent_logins, login), a, rules));
        }
        AssignmentChange::Assignee { .. } => false,
    };
    if !to_agent {
        return Ok(match &a.change {
            AssignmentChange::Delegated { previous_id, .. } => unassign_if(is_ours(previous_id), a, rules),
            AssignmentChange::Assigned { .. }
            | AssignmentChange::Unassigned { .. }
            | AssignmentChange::Assignee { .. } => Decision::ignore(IgnoreReason::NotForAgent),
        });
    }
    if let Some(why) = rules.guard(event.tracker, &a.actor) {
        return Ok(Decision::ignore(why));
    }
    if over_budget(rules, thread.get()?) {
        return Ok(Decision::ignore(IgnoreReason::RunBudget));
    }
    let trigger = Trigger {
        delivery_id: event.delivery_id.clone(),
        comment_id: None,
        kind: TriggerKind::Assignment,
        author: a.actor.name.clone(),
        body: rules.cap(a.description.as_deref().unwrap_or_default()),
        placement: Placement::TopLevel,
        at: now,
    };
    // Only users with write access can assign on GitHub, and only workspace members delegate on
    // Linear, so the actor's permission is settled by the event itself.
    let effect = Effect::Trigger(NewTrigger {
        thread_key: ThreadKey::new(&a.subject, &rules.handle),
        subject: a.subject.clone(),
        trigger,
        permission: Permission::Trusted,
        participates_in: None,
        marks_assigned: true,
    });
    Ok(Decision { reason: ReasonCode::Enqueued, effect })
}

/// `Unassign` (reason `ignored:not_for_agent`: no work follows) when the agent lost the issue.
fn unassign_if(was_agent: bool, a: &AssignmentEvent, rules: &Rules) -> Decision {
    if !was_agent {
        return Decision::ignore(IgnoreReason::NotForAgent);
    }
    let effect = Effect::Unassign { thread_key: ThreadKey::new(&a.subject, &rules.handle) };
    Decision { reason: ReasonCode::Ignored(IgnoreReason::NotForAgent), effect }
}

/// Whether the payload vouches for the author. Anyone else is deferred, never refused: GitHub
/// reports private org members as `CONTRIBUTOR`/`NONE`.
fn is_trusted(kind: ActorKind, membership: &Membership) -> bool {
    let member = match membership {
        Membership::Owner | Membership::Member | Membership::Collaborator | Membership::WorkspaceMember => true,
        Membership::Other(_) | Membership::Unknown => false,
    };
    let relayed = match kind {
        ActorKind::External => true,
        ActorKind::Human | ActorKind::Bot => false,
    };
    member && !relayed
}

/// The payload's assignee list when it has one, else the ledger's memory of the last assignment.
fn assigned_to_agent<T: ThreadState>(c: &CommentEvent, rules: &Rules, thread: &T) -> Result<bool, T::Missing> {
    Ok(match &c.assignees {
        Some(logins) => logins.iter().any(|login| contains_ignore_case(&rules.agent_logins, login)),
        None => thread.get()?.assigned_to_agent,
    })
}

/// A new task would exceed the thread's budget; joining a queued task costs no extra run.
/// A Linear Agent API session: `created` and `prompted` ask for work, answered with activities in
/// the session; `prompted` with the `stop` signal cancels. The session's creator is a workspace
/// member (or an automation, which the run budget keeps in check). Other actions are ignored.
fn decide_agent_session<T: ThreadState>(
    event: &Event,
    s: &AgentSessionEvent,
    rules: &Rules,
    thread: &T,
    now: Millis,
) -> Result<Decision, T::Missing> {
    let thread_key = ThreadKey::new(&s.subject, &rules.handle);
    Ok(match (s.action.as_str(), s.signal.as_deref()) {
        ("prompted", Some("stop")) => {
            let thread = thread.get()?;
            if thread.queued.is_none() && thread.active.is_none() {
                return Ok(Decision::ignore(IgnoreReason::NothingToCancel));
            }
            let effect = Effect::CancelThread { thread_key, reason: CancelReason::StopCommand };
            Decision { reason: ReasonCode::Cancelled, effect }
        }
        ("created" | "prompted", _) => {
            if over_budget(rules, thread.get()?) {
                return Ok(Decision::ignore(IgnoreReason::RunBudget));
            }
            // No comment id: the session's root comment may also arrive as a Comment webhook and
            // coalesce into the same task; the session placement then decides where replies go.
            let trigger = Trigger {
                delivery_id: event.delivery_id.clone(),
                comment_id: None,
                kind: TriggerKind::AgentSession,
                author: "Linear agent session".to_owned(),
                body: rules.cap(s.body.as_deref().unwrap_or_default()),
                placement: Placement::AgentSession { session_id: s.session_id.clone(), root_id: s.comment_id.clone() },
                at: now,
            };
            let effect = Effect::Trigger(NewTrigger {
                thread_key,
                subject: s.subject.clone(),
                trigger,
                permission: Permission::Trusted,
                participates_in: s.comment_id.clone(),
                marks_assigned: false,
            });
            Decision { reason: ReasonCode::Enqueued, effect }
        }
        (_, _) => Decision::ignore(IgnoreReason::AgentSession),
    })
}

fn over_budget(rules: &Rules, thread: &ThreadSnapshot) -> bool {
    thread.queued.is_none() && thread.runs_in_window >= rules.max_runs_per_window
}

fn contains_ignore_case(list: &[String], name: &str) -> bool {
    list.iter().any(|l| l.eq_ignore_ascii_case(name))
}
