//! Wire-shape tests: Linear payloads built from platforms.md (tests/fixtures/linear), compared whole.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const DELIVERY: &str = "234d1a4e-b617-4388-90fe-adc3633d6b72";

const COMMENT_CREATE: &str = include_str!("../../../../tests/fixtures/linear/Comment.create.json");
const COMMENT_CREATE_REPLY: &str = include_str!("../../../../tests/fixtures/linear/Comment.create.reply.json");
const COMMENT_UPDATE: &str = include_str!("../../../../tests/fixtures/linear/Comment.update.json");
const COMMENT_REMOVE: &str = include_str!("../../../../tests/fixtures/linear/Comment.remove.json");
const ISSUE_UPDATE_DELEGATE: &str = include_str!("../../../../tests/fixtures/linear/Issue.update.delegate.json");
const SESSION_CREATED: &str = include_str!("../../../../tests/fixtures/linear/AgentSessionEvent.created.json");
const SESSION_PROMPTED: &str = include_str!("../../../../tests/fixtures/linear/AgentSessionEvent.prompted.json");

const ACME: &str = "dc844923-f9a4-40a3-825c-dea7747e57d6";
const AGENT_ORG: &str = "bc6842cc-8fb8-4380-ab5a-a0733a6f4601";
const ENG_123: &str = "539068e2-ae88-4d09-bd75-22eb4a59612f";
const JANE: &str = "aacdca22-6266-4c0a-ab3c-8fa70a26765c";
const AGENT_USER: &str = "48a91e15-a5e1-4c91-b105-30ee7bb22878";
const ROOT_COMMENT: &str = "77217de3-fb52-4dad-bb9a-b356beb93de8";
const ROOT_BODY: &str = "https://linear.app/acme/profiles/agent can you take this one?";
const ROOT_URL: &str = "https://linear.app/acme/issue/ENG-123/fix-accessibility-on-checkout-page#comment-77217de3";

fn decoded(fixture: &str) -> LinearDecoded {
    decode(DELIVERY, fixture.as_bytes()).expect("fixture decodes")
}

fn linear(kind: EventKind, webhook_timestamp: i64) -> LinearDecoded {
    LinearDecoded {
        event: Event { delivery_id: DELIVERY.to_owned(), tracker: Tracker::Linear, kind },
        webhook_timestamp: Some(Millis(webhook_timestamp)),
    }
}

fn eng_123(organization_id: &str, with_summary: bool) -> Subject {
    Subject::Linear(LinearSubject {
        organization_id: organization_id.to_owned(),
        issue_id: ENG_123.to_owned(),
        identifier: with_summary.then(|| "ENG-123".to_owned()),
        title: with_summary.then(|| "Fix accessibility on checkout page".to_owned()),
    })
}

fn jane() -> Actor {
    Actor { id: JANE.to_owned(), name: "Jane Doe".to_owned(), kind: ActorKind::Human, via_app_id: None }
}

fn jane_comment(action: CommentAction, id: &str, body: &str, placement: Placement, url: &str) -> EventKind {
    EventKind::Comment(CommentEvent {
        action,
        subject: eng_123(ACME, true),
        comment: Comment {
            id: id.to_owned(),
            body: body.to_owned(),
            author: jane(),
            membership: Membership::WorkspaceMember,
            placement,
            url: Some(url.to_owned()),
        },
        assignees: None,
    })
}

#[test]
fn comment_create_top_level() {
    assert_eq!(
        decoded(COMMENT_CREATE),
        linear(
            jane_comment(CommentAction::Created, ROOT_COMMENT, ROOT_BODY, Placement::TopLevel, ROOT_URL),
            1_773_883_617_700
        )
    );
}

#[test]
fn comment_create_reply_with_float_timestamp() {
    assert_eq!(
        decoded(COMMENT_CREATE_REPLY),
        linear(
            jane_comment(
                CommentAction::Created,
                "c3b1e0a2-5d7f-4e8a-9b6c-1f2e3d4c5b6a",
                "@agent also check the focus order please",
                Placement::Reply { root_id: ROOT_COMMENT.to_owned() },
                "https://linear.app/acme/issue/ENG-123/fix-accessibility-on-checkout-page#comment-c3b1e0a2",
            ),
            1_773_883_800_250
        )
    );
}

#[test]
fn comment_update_keeps_the_previous_body() {
    assert_eq!(
        decoded(COMMENT_UPDATE),
        linear(
            jane_comment(
                CommentAction::Edited { previous_body: Some(ROOT_BODY.to_owned()) },
                ROOT_COMMENT,
                "https://linear.app/acme/profiles/agent can you take this one? Start with the form labels.",
                Placement::TopLevel,
                ROOT_URL,
            ),
            1_773_884_100_000
        )
    );
}

#[test]
fn comment_update_without_body_change_has_no_previous_body() {
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_UPDATE).expect("fixture is JSON");
    payload["updatedFrom"] = json!({ "resolvedAt": null });
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Comment(comment) = got.event.kind else { panic!("expected a comment") };
    assert_eq!(comment.action, CommentAction::Edited { previous_body: None });
}

#[test]
fn comment_remove() {
    assert_eq!(
        decoded(COMMENT_REMOVE),
        linear(
            jane_comment(CommentAction::Deleted, ROOT_COMMENT, ROOT_BODY, Placement::TopLevel, ROOT_URL),
            1_773_884_400_000
        )
    );
}

#[test]
fn comment_authors_bot_and_external() {
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    payload["data"]["botActor"] = json!({ "id": "bot-1", "type": "integration", "name": "GitHub" });
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Comment(comment) = got.event.kind else { panic!("expected a comment") };
    assert_eq!(
        (comment.comment.author, comment.comment.membership),
        (
            Actor { id: JANE.to_owned(), name: "Jane Doe".to_owned(), kind: ActorKind::Bot, via_app_id: None },
            Membership::Unknown
        )
    );

    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    let data = payload["data"].as_object_mut().expect("data is an object");
    data.remove("user");
    data.insert("userId".to_owned(), json!(null));
    data.insert("externalUserId".to_owned(), json!("ext-9"));
    data.insert("externalUser".to_owned(), json!({ "id": "ext-9", "name": "Sam (Slack)" }));
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Comment(comment) = got.event.kind else { panic!("expected a comment") };
    assert_eq!(
        (comment.comment.author, comment.comment.membership),
        (
            Actor {
                id: "ext-9".to_owned(),
                name: "Sam (Slack)".to_owned(),
                kind: ActorKind::External,
                via_app_id: None
            },
            Membership::Unknown
        )
    );
}

#[test]
fn comment_without_any_author_is_malformed() {
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    let data = payload["data"].as_object_mut().expect("data is an object");
    data.remove("user");
    data.remove("userId");
    assert_eq!(
        decode(DELIVERY, payload.to_string().as_bytes()),
        Err(DecodeError::Malformed { detail: "data.userId: missing field".to_owned() })
    );
}

#[test]
fn comment_without_issue_is_unrouted() {
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    let data = payload["data"].as_object_mut().expect("data is an object");
    data.insert("issueId".to_owned(), json!(null));
    data.remove("issue");
    data.insert("projectUpdateId".to_owned(), json!("pu-1"));
    assert_eq!(
        decode(DELIVERY, payload.to_string().as_bytes()),
        Ok(linear(
            EventKind::Unrouted(Unrouted { event: "Comment".to_owned(), action: Some("create".to_owned()) }),
            1_773_883_617_700
        ))
    );
}

#[test]
fn issue_update_delegate() {
    assert_eq!(
        decoded(ISSUE_UPDATE_DELEGATE),
        linear(
            EventKind::Assignment(AssignmentEvent {
                subject: eng_123(ACME, true),
                actor: jane(),
                change: AssignmentChange::Delegated { delegate_id: Some(AGENT_USER.to_owned()), previous_id: None },
                description: Some("Make it screen-reader friendly".to_owned()),
            }),
            1_773_883_200_100
        )
    );
}

#[test]
fn issue_update_assignee_and_other_updates() {
    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_UPDATE_DELEGATE).expect("fixture is JSON");
    payload["updatedFrom"] = json!({ "assigneeId": "someone-else" });
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Assignment(assignment) = got.event.kind else { panic!("expected an assignment") };
    assert_eq!(assignment.change, AssignmentChange::Assignee { assignee_id: Some(JANE.to_owned()) });

    payload["updatedFrom"] = json!({ "title": "Old title" });
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    assert_eq!(
        got.event.kind,
        EventKind::Unrouted(Unrouted { event: "Issue".to_owned(), action: Some("update".to_owned()) })
    );

    payload["action"] = json!("create");
    payload["updatedFrom"] = json!({ "delegateId": null });
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    assert_eq!(
        got.event.kind,
        EventKind::Unrouted(Unrouted { event: "Issue".to_owned(), action: Some("create".to_owned()) })
    );
}

#[test]
fn agent_session_created() {
    assert_eq!(
        decoded(SESSION_CREATED),
        linear(
            EventKind::AgentSession(AgentSessionEvent {
                action: "created".to_owned(),
                session_id: "4d23d4ad-b4bb-4ef1-853f-c9c03439d37d".to_owned(),
                subject: eng_123(AGENT_ORG, true),
                comment_id: Some("34f7a7e0-b3dc-4c88-9383-07cbf06b186f".to_owned()),
                body: Some("https://linear.app/acme/profiles/agent Please implement this".to_owned()),
                signal: None,
                app_user_id: Some(AGENT_USER.to_owned()),
            }),
            1_773_883_618_500
        )
    );
}

#[test]
fn agent_session_prompted() {
    assert_eq!(
        decoded(SESSION_PROMPTED),
        linear(
            EventKind::AgentSession(AgentSessionEvent {
                action: "prompted".to_owned(),
                session_id: "4d23d4ad-b4bb-4ef1-853f-c9c03439d37d".to_owned(),
                subject: eng_123(AGENT_ORG, false),
                comment_id: Some("34f7a7e0-b3dc-4c88-9383-07cbf06b186f".to_owned()),
                body: Some("Also update the tests please".to_owned()),
                signal: None,
                app_user_id: Some(AGENT_USER.to_owned()),
            }),
            1_773_883_900_000
        )
    );
}

#[test]
fn agent_session_stop_signal_body_fallback_and_new_actions() {
    let mut payload: serde_json::Value = serde_json::from_str(SESSION_PROMPTED).expect("fixture is JSON");
    payload["action"] = json!("someFutureAction");
    payload["agentActivity"]["content"] = json!({ "type": "prompt" });
    payload["agentActivity"]["body"] = json!("stop please");
    payload["agentActivity"]["signal"] = json!("stop");
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::AgentSession(session) = got.event.kind else { panic!("expected an agent session") };
    assert_eq!(
        (session.action.as_str(), session.body.as_deref(), session.signal.as_deref()),
        ("someFutureAction", Some("stop please"), Some("stop"))
    );
}

#[test]
fn other_types_are_unrouted_and_keep_the_timestamp() {
    let body = br#"{"type":"Reaction","action":"create","webhookTimestamp":1773883617700,"data":{}}"#;
    assert_eq!(
        decode(DELIVERY, body),
        Ok(linear(
            EventKind::Unrouted(Unrouted { event: "Reaction".to_owned(), action: Some("create".to_owned()) }),
            1_773_883_617_700
        ))
    );
    let got = decode(DELIVERY, br#"{"type":"OAuthApp","action":"revoked"}"#).expect("decodes");
    assert_eq!(got.webhook_timestamp, None);
}

fn malformed_detail(json: &[u8]) -> String {
    match decode(DELIVERY, json) {
        Err(DecodeError::Malformed { detail }) => detail,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn malformed_bodies_are_refused() {
    for body in [&b""[..], b"[]", b"{", b"{\"action\":\"create\"}", b"{\"type\":1}", b"\xff\xfe"] {
        malformed_detail(body);
    }
    let detail = malformed_detail(br#"{"type":"Comment","webhookTimestamp":"soon"}"#);
    assert!(detail.starts_with("webhookTimestamp: "), "{detail}");
}

#[test]
fn missing_required_field_names_the_path() {
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    payload.as_object_mut().expect("object").remove("organizationId");
    let detail = malformed_detail(payload.to_string().as_bytes());
    assert!(detail.starts_with(".: missing field `organizationId`"), "{detail}");

    let mut payload: serde_json::Value = serde_json::from_str(SESSION_PROMPTED).expect("fixture is JSON");
    payload["agentSession"].as_object_mut().expect("object").remove("id");
    let detail = malformed_detail(payload.to_string().as_bytes());
    assert!(detail.starts_with("agentSession: missing field `id`"), "{detail}");

    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_UPDATE_DELEGATE).expect("fixture is JSON");
    payload["updatedFrom"]["delegateId"] = json!(42);
    assert_eq!(malformed_detail(payload.to_string().as_bytes()), "updatedFrom.delegateId: expected a string or null");
}

#[test]
fn truncated_and_huge_bodies_do_not_panic() {
    let bytes = COMMENT_CREATE.as_bytes();
    for cut in (0..bytes.len()).step_by(53) {
        malformed_detail(&bytes[..cut]);
    }
    let mut payload: serde_json::Value = serde_json::from_str(COMMENT_CREATE).expect("fixture is JSON");
    payload["data"]["body"] = json!("x".repeat(8_000_000));
    let got = decode(DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Comment(comment) = got.event.kind else { panic!("expected a comment") };
    assert_eq!(comment.comment.body.len(), 8_000_000);
}

#[test]
fn timestamps_integer_float_and_out_of_range() {
    let ts = |raw: &str| {
        decode(DELIVERY, format!(r#"{{"type":"X","webhookTimestamp":{raw}}}"#).as_bytes()).map(|d| d.webhook_timestamp)
    };
    assert_eq!(ts("1773883617700"), Ok(Some(Millis(1_773_883_617_700))));
    assert_eq!(ts("1773883617700.9"), Ok(Some(Millis(1_773_883_617_700))));
    assert_eq!(ts("1.7738836177e12"), Ok(Some(Millis(1_773_883_617_700))));
    assert_eq!(ts("18446744073709551615"), Ok(Some(Millis(i64::MAX))));
    assert!(ts("1e400").is_err());
}
