//! The rules as a table: every rule with the cases that must and must not fire it, then a few
//! whole-[`Decision`] comparisons for the exact shape of what the ledger receives.

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;
use crate::event::{AgentSessionEvent, Comment, GithubSubject, LinearSubject, Subject, Unrouted};
use crate::task::TaskId;

const NOW: Millis = Millis(1_700_000_000_000);

fn rules() -> Rules {
    Rules {
        handle: "agent".into(),
        own_logins: vec!["beckon[bot]".into()],
        own_app_id: Some(42),
        own_linear_user_ids: vec!["app-user".into()],
        bot_allow_list: vec!["dependabot[bot]".into()],
        agent_logins: vec!["agent-bot-user".into()],
        max_runs_per_window: 3,
        budget_window: Duration::from_secs(3600),
        max_body_chars: 200,
    }
}

fn github_subject() -> Subject {
    Subject::Github(GithubSubject {
        owner: "acme".into(),
        repo: "shop".into(),
        repository_id: 9,
        number: 7,
        is_pull_request: true,
        title: None,
        installation_id: Some(1),
    })
}

fn linear_subject() -> Subject {
    Subject::Linear(LinearSubject {
        organization_id: "org".into(),
        issue_id: "iss".into(),
        identifier: Some("ENG-1".into()),
        title: None,
    })
}

fn actor(name: &str, kind: ActorKind) -> Actor {
    Actor { id: format!("id-{name}"), name: name.into(), kind, via_app_id: None }
}

/// Small in-place edits for builders, so each table row states only what differs.
trait With: Sized {
    fn with(mut self, edit: impl FnOnce(&mut Self)) -> Self {
        edit(&mut self);
        self
    }
}
impl With for CommentEvent {}
impl With for AssignmentEvent {}
impl With for ThreadSnapshot {}

/// A new top-level GitHub comment `c1` by `alice`, an org member, on an unassigned PR.
fn github(body: &str) -> CommentEvent {
    CommentEvent {
        action: CommentAction::Created,
        subject: github_subject(),
        comment: Comment {
            id: "c1".into(),
            body: body.into(),
            author: actor("alice", ActorKind::Human),
            membership: Membership::Member,
            placement: Placement::TopLevel,
            url: None,
        },
        assignees: Some(vec![]),
    }
}

/// A new top-level Linear comment `c1` by workspace member `Jane`.
fn linear(body: &str) -> CommentEvent {
    github(body).with(|c| {
        c.subject = linear_subject();
        c.comment.author = actor("Jane", ActorKind::Human);
        c.comment.membership = Membership::WorkspaceMember;
        c.assignees = None;
    })
}

fn edited(previous: Option<&str>) -> impl FnOnce(&mut CommentEvent) {
    let previous_body = previous.map(str::to_owned);
    move |c| c.action = CommentAction::Edited { previous_body }
}

fn in_review_thread(root: &str) -> impl FnOnce(&mut CommentEvent) {
    let root_id = root.to_owned();
    move |c| c.comment.placement = Placement::ReviewThread { root_id }
}

fn assigned(change: AssignmentChange) -> AssignmentEvent {
    AssignmentEvent {
        subject: github_subject(),
        actor: actor("alice", ActorKind::Human),
        change,
        description: Some("Make checkout screen-reader friendly".into()),
    }
}

fn delegated(delegate_id: Option<&str>, previous_id: Option<&str>) -> AssignmentEvent {
    let change = AssignmentChange::Delegated {
        delegate_id: delegate_id.map(str::to_owned),
        previous_id: previous_id.map(str::to_owned),
    };
    assigned(change).with(|a| {
        a.subject = linear_subject();
        a.actor = actor("Jane", ActorKind::Human);
    })
}

fn event(kind: EventKind) -> Event {
    let tracker = match &kind {
        EventKind::Comment(c) => c.subject.tracker(),
        EventKind::Assignment(a) => a.subject.tracker(),
        EventKind::AgentSession(s) => s.subject.tracker(),
        EventKind::Unrouted(_) => Tracker::Github,
    };
    Event { delivery_id: "d1".into(), tracker, kind }
}

impl From<CommentEvent> for Event {
    fn from(c: CommentEvent) -> Event {
        event(EventKind::Comment(c))
    }
}

impl From<AssignmentEvent> for Event {
    fn from(a: AssignmentEvent) -> Event {
        event(EventKind::Assignment(a))
    }
}

fn idle() -> ThreadSnapshot {
    ThreadSnapshot::default()
}

fn queued() -> ThreadSnapshot {
    idle().with(|t| t.queued = Some(TaskId("t_q".into())))
}

fn running() -> ThreadSnapshot {
    idle().with(|t| t.active = Some(TaskId("t_r".into())))
}

fn participating() -> ThreadSnapshot {
    idle().with(|t| t.participates = true)
}

fn spent() -> ThreadSnapshot {
    idle().with(|t| t.runs_in_window = 3)
}

/// The parts of an [`Effect`] a table row pins; the full values are pinned further down.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Shape {
    Nothing,
    Trigger { kind: TriggerKind, permission: Permission, participates_in: Option<String>, marks_assigned: bool },
    Cancel,
    Retract,
    Unassign,
}

impl From<&Effect> for Shape {
    fn from(effect: &Effect) -> Shape {
        match effect {
            Effect::Nothing => Shape::Nothing,
            Effect::Trigger(t) => Shape::Trigger {
                kind: t.trigger.kind,
                permission: t.permission.clone(),
                participates_in: t.participates_in.clone(),
                marks_assigned: t.marks_assigned,
            },
            Effect::CancelThread { reason, .. } => {
                assert_eq!(*reason, CancelReason::StopCommand);
                Shape::Cancel
            }
            Effect::RetractComment { .. } => Shape::Retract,
            Effect::Unassign { .. } => Shape::Unassign,
        }
    }
}

fn trusted(kind: TriggerKind) -> Shape {
    Shape::Trigger { kind, permission: Permission::Trusted, participates_in: None, marks_assigned: false }
}

fn deferred(kind: TriggerKind, login: &str) -> Shape {
    let permission = Permission::Deferred { login: login.into() };
    Shape::Trigger { kind, permission, participates_in: None, marks_assigned: false }
}

fn joining(root: &str, shape: Shape) -> Shape {
    match shape {
        Shape::Trigger { kind, permission, marks_assigned, .. } => {
            Shape::Trigger { kind, permission, participates_in: Some(root.into()), marks_assigned }
        }
        other @ (Shape::Nothing | Shape::Cancel | Shape::Retract | Shape::Unassign) => other,
    }
}

fn assignment() -> Shape {
    Shape::Trigger {
        kind: TriggerKind::Assignment,
        permission: Permission::Trusted,
        participates_in: None,
        marks_assigned: true,
    }
}

#[test]
fn every_rule_fires_when_it_should_and_only_then() {
    use TriggerKind::{AssignedComment, Mention, Reply};
    let unrouted = event(EventKind::Unrouted(Unrouted { event: "ping".into(), action: None }));
    let session = event(EventKind::AgentSession(AgentSessionEvent {
        action: "created".into(),
        session_id: "s1".into(),
        subject: linear_subject(),
        comment_id: None,
        body: Some("fix it".into()),
        signal: None,
        app_user_id: Some("app-user".into()),
    }));
    let session_with = |action: &str, signal: Option<&str>, comment_id: Option<&str>| {
        event(EventKind::AgentSession(AgentSessionEvent {
            action: action.into(),
            session_id: "s1".into(),
            subject: linear_subject(),
            comment_id: comment_id.map(str::to_owned),
            body: Some("fix it".into()),
            signal: signal.map(str::to_owned),
            app_user_id: Some("app-user".into()),
        }))
    };
    let session_trigger = |root: Option<&str>| Shape::Trigger {
        kind: TriggerKind::AgentSession,
        permission: Permission::Trusted,
        participates_in: root.map(str::to_owned),
        marks_assigned: false,
    };
    let deleted = |c: &mut CommentEvent| c.action = CommentAction::Deleted;
    let by = |name: &'static str, kind: ActorKind| move |c: &mut CommentEvent| c.comment.author = actor(name, kind);
    let member = |m: Membership| move |c: &mut CommentEvent| c.comment.membership = m;
    let assignees = |logins: &[&str]| {
        let logins: Vec<String> = logins.iter().copied().map(String::from).collect();
        move |c: &mut CommentEvent| c.assignees = Some(logins)
    };
    let by_actor = |name: &'static str, kind: ActorKind| move |a: &mut AssignmentEvent| a.actor = actor(name, kind);

    let cases: Vec<(&str, Event, ThreadSnapshot, &str, Shape)> = vec![
        // 1. Events that are not comments or assignments.
        ("unrouted", unrouted, idle(), "ignored:unrouted", Shape::Nothing),
        // Linear agent sessions: created/prompted ask for work; the stop signal cancels.
        ("agent session created", session, idle(), "enqueued", session_trigger(None)),
        (
            "agent session created in a comment thread",
            session_with("created", None, Some("root-1")),
            running(),
            "enqueued",
            session_trigger(Some("root-1")),
        ),
        ("agent session prompted", session_with("prompted", None, None), queued(), "enqueued", session_trigger(None)),
        (
            "agent session over budget",
            session_with("created", None, None),
            spent(),
            "ignored:run_budget",
            Shape::Nothing,
        ),
        ("agent session stop", session_with("prompted", Some("stop"), None), running(), "cancelled", Shape::Cancel),
        (
            "agent session stop with nothing running",
            session_with("prompted", Some("stop"), None),
            idle(),
            "ignored:nothing_to_cancel",
            Shape::Nothing,
        ),
        (
            "agent session: other actions",
            session_with("archived", None, None),
            running(),
            "ignored:agent_session",
            Shape::Nothing,
        ),
        // 2. Deletions retract, whatever the body says; the ledger knows whether it planned work.
        ("deleted mention", github("@agent fix").with(deleted).into(), queued(), "cancelled", Shape::Retract),
        ("deleted plain comment", github("thanks").with(deleted).into(), idle(), "cancelled", Shape::Retract),
        (
            "deleted own comment",
            github("done").with(deleted).with(by("beckon[bot]", ActorKind::Bot)).into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        // 3. Loop guard.
        (
            "own login, any case",
            github("@agent fix").with(by("Beckon[BOT]", ActorKind::Bot)).into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        (
            "written via our app",
            github("@agent fix").with(|c| c.comment.author.via_app_id = Some(42)).into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        (
            "written via another app",
            github("@agent fix").with(|c| c.comment.author.via_app_id = Some(7)).into(),
            idle(),
            "enqueued",
            trusted(Mention),
        ),
        (
            "our Linear app user",
            linear("@agent fix").with(|c| c.comment.author.id = "app-user".into()).into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        (
            "Linear human sharing our GitHub login",
            linear("@agent fix").with(by("beckon[bot]", ActorKind::Human)).into(),
            idle(),
            "enqueued",
            joining("c1", trusted(Mention)),
        ),
        (
            "unlisted bot",
            github("@agent fix").with(by("renovate[bot]", ActorKind::Bot)).into(),
            idle(),
            "ignored:bot",
            Shape::Nothing,
        ),
        (
            "allow-listed bot, any case",
            github("@agent fix")
                .with(by("Dependabot[bot]", ActorKind::Bot))
                .with(member(Membership::Other("NONE".into())))
                .into(),
            idle(),
            "deferred",
            deferred(Mention, "Dependabot[bot]"),
        ),
        // 4. Edits.
        (
            "edit, body unchanged",
            github("@agent fix").with(edited(None)).into(),
            idle(),
            "ignored:mention_not_new",
            Shape::Nothing,
        ),
        (
            "edit of a mention",
            github("@agent fix it now").with(edited(Some("@agent fix it"))).into(),
            idle(),
            "ignored:mention_not_new",
            Shape::Nothing,
        ),
        (
            "edit adding a mention",
            github("@agent fix it").with(edited(Some("fix it"))).into(),
            idle(),
            "enqueued",
            trusted(Mention),
        ),
        (
            "edit un-quoting a mention",
            github("@agent fix it").with(edited(Some("> @agent fix it"))).into(),
            idle(),
            "enqueued",
            trusted(Mention),
        ),
        (
            "edit adding a mention in code",
            github("run `@agent`").with(edited(Some("run"))).into(),
            idle(),
            "ignored:mention_not_new",
            Shape::Nothing,
        ),
        (
            "edited reply without a mention",
            github("actually, also X").with(edited(Some("also X"))).with(in_review_thread("r1")).into(),
            participating(),
            "ignored:mention_not_new",
            Shape::Nothing,
        ),
        (
            "edited comment on an assigned issue",
            github("also X").with(edited(Some("X"))).with(assignees(&["agent-bot-user"])).into(),
            idle(),
            "ignored:mention_not_new",
            Shape::Nothing,
        ),
        (
            "edit adding a stop",
            github("@agent stop").with(edited(Some("hmm"))).into(),
            running(),
            "cancelled",
            Shape::Cancel,
        ),
        // 5. Mentions.
        ("mention", github("@agent fix the toast").into(), idle(), "enqueued", trusted(Mention)),
        ("bare mention", github("@agent").into(), idle(), "enqueued", trusted(Mention)),
        ("two mentions", github("@agent fix, @agent!").into(), idle(), "enqueued", trusted(Mention)),
        ("no mention", github("looks good").into(), idle(), "ignored:no_mention", Shape::Nothing),
        ("e-mail", github("mail me@agent.com").into(), idle(), "ignored:no_mention", Shape::Nothing),
        ("mention in code", github("`@agent fix`").into(), idle(), "ignored:no_mention", Shape::Nothing),
        ("mention quoted", github("> @agent fix").into(), idle(), "ignored:no_mention", Shape::Nothing),
        (
            "Linear profile mention",
            linear("https://linear.app/acme/profiles/agent fix").into(),
            idle(),
            "enqueued",
            joining("c1", trusted(Mention)),
        ),
        // 6. Stop.
        ("stop, queued", github("@agent stop").into(), queued(), "cancelled", Shape::Cancel),
        ("stop, running", github("@agent STOP!").into(), running(), "cancelled", Shape::Cancel),
        (
            "stop, spent budget",
            github("@agent stop.").into(),
            running().with(|t| t.runs_in_window = 9),
            "cancelled",
            Shape::Cancel,
        ),
        ("stop, nothing running", github("@agent stop").into(), idle(), "ignored:nothing_to_cancel", Shape::Nothing),
        (
            "stop, untrusted",
            github("@agent stop").with(member(Membership::Other("CONTRIBUTOR".into()))).into(),
            running(),
            "ignored:untrusted",
            Shape::Nothing,
        ),
        (
            "stop as a request",
            github("@agent stop the server from crashing").into(),
            running(),
            "enqueued",
            trusted(Mention),
        ),
        (
            "stop, Linear",
            linear("https://linear.app/acme/profiles/agent stop").into(),
            queued(),
            "cancelled",
            Shape::Cancel,
        ),
        // 7. Permission.
        ("owner", github("@agent fix").with(member(Membership::Owner)).into(), idle(), "enqueued", trusted(Mention)),
        (
            "collaborator",
            github("@agent fix").with(member(Membership::Collaborator)).into(),
            idle(),
            "enqueued",
            trusted(Mention),
        ),
        (
            "contributor",
            github("@agent fix").with(member(Membership::Other("CONTRIBUTOR".into()))).into(),
            idle(),
            "deferred",
            deferred(Mention, "alice"),
        ),
        (
            "standing unknown",
            github("@agent fix").with(member(Membership::Unknown)).into(),
            idle(),
            "deferred",
            deferred(Mention, "alice"),
        ),
        (
            "Linear external user",
            linear("@agent fix").with(by("slack-user", ActorKind::External)).into(),
            idle(),
            "deferred",
            joining("c1", deferred(Mention, "slack-user")),
        ),
        // 8. Routing without a mention.
        (
            "reply in an agent review thread",
            github("also rename it").with(in_review_thread("r1")).into(),
            participating(),
            "enqueued",
            joining("r1", trusted(Reply)),
        ),
        (
            "reply in someone else's thread",
            github("also rename it").with(in_review_thread("r1")).into(),
            idle(),
            "ignored:no_mention",
            Shape::Nothing,
        ),
        (
            "review thread root itself",
            github("hmm").with(in_review_thread("c1")).into(),
            participating(),
            "ignored:no_mention",
            Shape::Nothing,
        ),
        (
            "Linear reply in an agent thread",
            linear("and the footer").with(|c| c.comment.placement = Placement::Reply { root_id: "p1".into() }).into(),
            participating(),
            "enqueued",
            joining("p1", trusted(Reply)),
        ),
        (
            "untrusted reply",
            github("pls").with(in_review_thread("r1")).with(member(Membership::Unknown)).into(),
            participating(),
            "deferred",
            joining("r1", deferred(Reply, "alice")),
        ),
        (
            "top-level on an assigned issue, any case",
            github("also X").with(assignees(&["bob", "Agent-Bot-User"])).into(),
            idle(),
            "enqueued",
            trusted(AssignedComment),
        ),
        (
            "top-level on someone else's issue",
            github("also X").with(assignees(&["bob"])).into(),
            idle(),
            "ignored:no_mention",
            Shape::Nothing,
        ),
        (
            "payload's assignees win over the ledger",
            github("also X").into(),
            idle().with(|t| t.assigned_to_agent = true),
            "ignored:no_mention",
            Shape::Nothing,
        ),
        (
            "Linear top-level on a delegated issue",
            linear("also X").into(),
            idle().with(|t| t.assigned_to_agent = true),
            "enqueued",
            joining("c1", trusted(AssignedComment)),
        ),
        ("Linear top-level, not delegated", linear("also X").into(), idle(), "ignored:no_mention", Shape::Nothing),
        (
            "review comment on an assigned PR",
            github("also X").with(in_review_thread("r1")).with(assignees(&["agent-bot-user"])).into(),
            idle(),
            "ignored:no_mention",
            Shape::Nothing,
        ),
        (
            "mention beats reply routing",
            github("@agent go").with(in_review_thread("r1")).into(),
            participating(),
            "enqueued",
            joining("r1", trusted(Mention)),
        ),
        // 9. Run budget.
        ("budget spent", github("@agent fix").into(), spent(), "ignored:run_budget", Shape::Nothing),
        (
            "budget spent, joins the queued task",
            github("@agent fix").into(),
            spent().with(|t| t.queued = Some(TaskId("t_q".into()))),
            "enqueued",
            trusted(Mention),
        ),
        (
            "budget nearly spent",
            github("@agent fix").into(),
            idle().with(|t| t.runs_in_window = 2),
            "enqueued",
            trusted(Mention),
        ),
        (
            "budget spent, reply",
            github("more").with(in_review_thread("r1")).into(),
            spent().with(|t| t.participates = true),
            "ignored:run_budget",
            Shape::Nothing,
        ),
        // 11. Assignments and delegations.
        (
            "assigned to the agent, any case",
            assigned(AssignmentChange::Assigned { login: "AGENT-bot-user".into() }).into(),
            idle(),
            "enqueued",
            assignment(),
        ),
        (
            "assigned to someone else",
            assigned(AssignmentChange::Assigned { login: "bob".into() }).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Nothing,
        ),
        (
            "assigned, budget spent",
            assigned(AssignmentChange::Assigned { login: "agent-bot-user".into() }).into(),
            spent(),
            "ignored:run_budget",
            Shape::Nothing,
        ),
        (
            "assigned by Beckon",
            assigned(AssignmentChange::Assigned { login: "agent-bot-user".into() })
                .with(by_actor("beckon[bot]", ActorKind::Bot))
                .into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        (
            "assigned by an unlisted bot",
            assigned(AssignmentChange::Assigned { login: "agent-bot-user".into() })
                .with(by_actor("triage[bot]", ActorKind::Bot))
                .into(),
            idle(),
            "ignored:bot",
            Shape::Nothing,
        ),
        (
            "unassigned from the agent",
            assigned(AssignmentChange::Unassigned { login: "agent-bot-user".into() }).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Unassign,
        ),
        (
            "unassigned by a bot",
            assigned(AssignmentChange::Unassigned { login: "agent-bot-user".into() })
                .with(by_actor("triage[bot]", ActorKind::Bot))
                .into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Unassign,
        ),
        (
            "unassigned someone else",
            assigned(AssignmentChange::Unassigned { login: "bob".into() }).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Nothing,
        ),
        ("delegated to us", delegated(Some("app-user"), None).into(), idle(), "enqueued", assignment()),
        (
            "delegated by our app user",
            delegated(Some("app-user"), None).with(|a| a.actor.id = "app-user".into()).into(),
            idle(),
            "ignored:own_comment",
            Shape::Nothing,
        ),
        (
            "delegated to another agent",
            delegated(Some("other-app"), None).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Nothing,
        ),
        (
            "delegated away from us",
            delegated(Some("other-app"), Some("app-user")).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Unassign,
        ),
        (
            "delegation removed",
            delegated(None, Some("app-user")).into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Unassign,
        ),
        (
            "Linear assignee changed",
            delegated(None, None)
                .with(|a| a.change = AssignmentChange::Assignee { assignee_id: Some("app-user".into()) })
                .into(),
            idle(),
            "ignored:not_for_agent",
            Shape::Nothing,
        ),
    ];

    let rules = rules();
    let mut failures = Vec::new();
    for (name, event, thread, reason, shape) in cases {
        let decision = decide(&event, &rules, &thread, NOW);
        let got = (decision.reason.to_string(), Shape::from(&decision.effect));
        if got != (reason.to_owned(), shape.clone()) {
            failures.push(format!("{name}: expected {reason} {shape:?}, got {} {:?}", got.0, got.1));
        }
        // A decision taken without the thread must be the one taken on any thread at all.
        if let Some(settled) = decide_unread(&event, &rules, &read(&event, &rules), NOW) {
            for other in every_kind_of_thread() {
                if decide(&event, &rules, &other, NOW) != settled {
                    failures.push(format!("{name}: settled without the thread, but {other:?} decides otherwise"));
                }
            }
        }
    }
    assert_eq!(failures, Vec::<String>::new());
}

/// One snapshot for each thing the rules read from a thread, and all of them at once.
fn every_kind_of_thread() -> Vec<ThreadSnapshot> {
    let everything = ThreadSnapshot {
        queued: Some(TaskId("t_q".into())),
        active: Some(TaskId("t_r".into())),
        runs_in_window: 3,
        participates: true,
        assigned_to_agent: true,
        codex_thread_id: Some("th_1".into()),
    };
    let assigned = idle().with(|t| t.assigned_to_agent = true);
    vec![idle(), queued(), running(), participating(), spent(), assigned, everything]
}

/// The thread is read only for what depends on it: the everyday deliveries (a comment that
/// mentions no one, a bot's comment, a deletion, an edit) are settled without it.
#[test]
fn the_thread_is_read_only_when_the_decision_depends_on_it() {
    let rules = rules();
    let settled =
        |event: Event| decide_unread(&event, &rules, &read(&event, &rules), NOW).map(|d| d.reason.to_string());
    let bot = github("@agent fix").with(|c| c.comment.author = actor("ci[bot]", ActorKind::Bot));
    let cases: Vec<(&str, Event, Option<&str>)> = vec![
        ("no mention, assignees in the payload", github("looks good").into(), Some("ignored:no_mention")),
        ("a bot's mention", bot.into(), Some("ignored:bot")),
        ("a deletion", github("@agent fix").with(|c| c.action = CommentAction::Deleted).into(), Some("cancelled")),
        (
            "an edit keeping its mention",
            github("@agent fix").with(edited(Some("@agent fx"))).into(),
            Some("ignored:mention_not_new"),
        ),
        (
            "a stop by an outsider",
            github("@agent stop").with(|c| c.comment.membership = Membership::Other("NONE".into())).into(),
            Some("ignored:untrusted"),
        ),
        ("a mention: the run budget", github("@agent fix").into(), None),
        ("a stop: is there anything to cancel", github("@agent stop").into(), None),
        ("no mention in a review thread: participation", github("ok").with(in_review_thread("r1")).into(), None),
        ("no mention, no assignees in the payload: the thread's", linear("ok").into(), None),
        (
            "an assignment to the agent: the run budget",
            assigned(AssignmentChange::Assigned { login: "agent-bot-user".into() }).into(),
            None,
        ),
        (
            "an assignment to someone else",
            assigned(AssignmentChange::Assigned { login: "bob".into() }).into(),
            Some("ignored:not_for_agent"),
        ),
    ];
    let mut failures = Vec::new();
    for (name, event, expected) in cases {
        let got = settled(event);
        if got.as_deref() != expected {
            failures.push(format!("{name}: expected {expected:?}, got {got:?}"));
        }
    }
    assert_eq!(failures, Vec::<String>::new());
}

#[test]
fn a_mention_becomes_a_whole_trigger() {
    let event: Event = github("@agent the toast is missing").into();
    let expected = Decision {
        reason: ReasonCode::Enqueued,
        effect: Effect::Trigger(NewTrigger {
            thread_key: ThreadKey("github:acme/shop#7:agent".into()),
            subject: github_subject(),
            trigger: Trigger {
                delivery_id: "d1".into(),
                comment_id: Some("c1".into()),
                kind: TriggerKind::Mention,
                author: "alice".into(),
                body: "@agent the toast is missing".into(),
                placement: Placement::TopLevel,
                at: NOW,
            },
            permission: Permission::Trusted,
            participates_in: None,
            marks_assigned: false,
        }),
    };
    assert_eq!(decide(&event, &rules(), &idle(), NOW), expected);
}

#[test]
fn a_delegation_becomes_a_whole_trigger() {
    let event: Event = delegated(Some("app-user"), None).into();
    let expected = Decision {
        reason: ReasonCode::Enqueued,
        effect: Effect::Trigger(NewTrigger {
            thread_key: ThreadKey("linear:org/iss:agent".into()),
            subject: linear_subject(),
            trigger: Trigger {
                delivery_id: "d1".into(),
                comment_id: None,
                kind: TriggerKind::Assignment,
                author: "Jane".into(),
                body: "Make checkout screen-reader friendly".into(),
                placement: Placement::TopLevel,
                at: NOW,
            },
            permission: Permission::Trusted,
            participates_in: None,
            marks_assigned: true,
        }),
    };
    assert_eq!(decide(&event, &rules(), &idle(), NOW), expected);
}

#[test]
fn stops_deletions_and_unassignments_name_the_thread() {
    let key = ThreadKey("github:acme/shop#7:agent".into());
    let cases: Vec<(Event, Decision)> = vec![
        (
            github("@agent stop").into(),
            Decision {
                reason: ReasonCode::Cancelled,
                effect: Effect::CancelThread { thread_key: key.clone(), reason: CancelReason::StopCommand },
            },
        ),
        (
            github("@agent fix").with(|c| c.action = CommentAction::Deleted).into(),
            Decision {
                reason: ReasonCode::Cancelled,
                effect: Effect::RetractComment { thread_key: key.clone(), comment_id: "c1".into() },
            },
        ),
        (
            assigned(AssignmentChange::Unassigned { login: "agent-bot-user".into() }).into(),
            Decision {
                reason: ReasonCode::Ignored(IgnoreReason::NotForAgent),
                effect: Effect::Unassign { thread_key: key },
            },
        ),
    ];
    for (event, expected) in cases {
        assert_eq!(decide(&event, &rules(), &running(), NOW), expected);
    }
}

#[test]
fn bodies_are_capped_in_characters() {
    let body_of = |body: &str, max_body_chars: usize| {
        let rules = Rules { max_body_chars, ..rules() };
        match decide(&github(body).into(), &rules, &idle(), NOW).effect {
            Effect::Trigger(t) => t.trigger.body,
            other @ (Effect::Nothing
            | Effect::CancelThread { .. }
            | Effect::RetractComment { .. }
            | Effect::Unassign { .. }) => panic!("expected a trigger, got {other:?}"),
        }
    };
    // Multi-byte characters: a byte cap would split `é` or keep fewer characters.
    assert_eq!(body_of("@agent éé", 9), "@agent éé");
    assert_eq!(body_of("@agent ééé", 9), format!("@agent éé{TRUNCATION_NOTE}"));
    assert_eq!(body_of("@agent", 0), TRUNCATION_NOTE);
}

#[test]
fn threads_and_roots_follow_placement() {
    let unrouted = event(EventKind::Unrouted(Unrouted { event: "ping".into(), action: None }));
    let review = github("x").with(in_review_thread("r1")).into();
    let reply = linear("x").with(|c| c.comment.placement = Placement::Reply { root_id: "p1".into() }).into();
    type Thread = Option<(ThreadKey, Option<String>)>;
    let cases: Vec<(Event, Thread)> = vec![
        (github("x").into(), Some((ThreadKey("github:acme/shop#7:agent".into()), None))),
        (review, Some((ThreadKey("github:acme/shop#7:agent".into()), Some("r1".into())))),
        (linear("x").into(), Some((ThreadKey("linear:org/iss:agent".into()), None))),
        (reply, Some((ThreadKey("linear:org/iss:agent".into()), Some("p1".into())))),
        (delegated(Some("app-user"), None).into(), Some((ThreadKey("linear:org/iss:agent".into()), None))),
        (unrouted, None),
    ];
    for (event, expected) in cases {
        assert_eq!(thread_of(&event, "agent"), expected, "{event:?}");
    }
}
