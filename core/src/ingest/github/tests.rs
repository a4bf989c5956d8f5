//! Wire-shape tests: octokit example payloads (tests/fixtures/github) decoded and compared whole.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

const ISSUE_COMMENT_CREATED: &str = include_str!("../../../../tests/fixtures/github/issue_comment.created.json");
const ISSUE_COMMENT_CREATED_PR: &str =
    include_str!("../../../../tests/fixtures/github/issue_comment.created.pull_request.derived.json");
const ISSUE_COMMENT_EDITED: &str = include_str!("../../../../tests/fixtures/github/issue_comment.edited.json");
const ISSUE_COMMENT_DELETED: &str = include_str!("../../../../tests/fixtures/github/issue_comment.deleted.json");
const REVIEW_COMMENT_CREATED: &str =
    include_str!("../../../../tests/fixtures/github/pull_request_review_comment.created.json");
const REVIEW_COMMENT_REPLY: &str =
    include_str!("../../../../tests/fixtures/github/pull_request_review_comment.created.reply.derived.json");
const REVIEW_COMMENT_EDITED: &str =
    include_str!("../../../../tests/fixtures/github/pull_request_review_comment.edited.json");
const REVIEW_COMMENT_DELETED: &str =
    include_str!("../../../../tests/fixtures/github/pull_request_review_comment.deleted.json");
const ISSUES_ASSIGNED: &str = include_str!("../../../../tests/fixtures/github/issues.assigned.json");
const ISSUES_UNASSIGNED: &str = include_str!("../../../../tests/fixtures/github/issues.unassigned.json");
const PING: &str = include_str!("../../../../tests/fixtures/github/ping.json");
const INSTALLATION_CREATED: &str = include_str!("../../../../tests/fixtures/github/installation.created.json");

const ISSUE_COMMENT_URL: &str = "https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400";

fn decoded(event_name: &str, fixture: &str) -> Event {
    decode(event_name, DELIVERY, fixture.as_bytes()).expect("fixture decodes")
}

fn event(kind: EventKind) -> Event {
    Event { delivery_id: DELIVERY.to_owned(), tracker: Tracker::Github, kind }
}

fn hello_world(number: u64, is_pull_request: bool, title: &str, installation_id: Option<u64>) -> Subject {
    Subject::Github(GithubSubject {
        owner: "Codertocat".to_owned(),
        repo: "Hello-World".to_owned(),
        repository_id: 186_853_002,
        number,
        is_pull_request,
        title: Some(title.to_owned()),
        installation_id,
    })
}

fn issue_1(installation_id: Option<u64>) -> Subject {
    hello_world(1, false, "Spelling error in the README file", installation_id)
}

fn pull_2(installation_id: Option<u64>) -> Subject {
    hello_world(2, true, "Update the README with new information.", installation_id)
}

fn codertocat() -> Actor {
    Actor { id: "21031067".to_owned(), name: "Codertocat".to_owned(), kind: ActorKind::Human, via_app_id: None }
}

fn issue_comment(action: CommentAction, subject: Subject, body: &str) -> Event {
    event(EventKind::Comment(CommentEvent {
        action,
        subject,
        comment: Comment {
            id: "492700400".to_owned(),
            body: body.to_owned(),
            author: codertocat(),
            membership: Membership::Owner,
            placement: Placement::TopLevel,
            url: Some(ISSUE_COMMENT_URL.to_owned()),
        },
        assignees: Some(vec!["Codertocat".to_owned()]),
    }))
}

fn review_comment(action: CommentAction, id: u64, root_id: u64, body: &str) -> Event {
    event(EventKind::Comment(CommentEvent {
        action,
        subject: pull_2(Some(1)),
        comment: Comment {
            id: id.to_string(),
            body: body.to_owned(),
            author: codertocat(),
            membership: Membership::Owner,
            placement: Placement::ReviewThread { root_id: root_id.to_string() },
            url: Some(format!("https://github.com/Codertocat/Hello-World/pull/2#discussion_r{id}")),
        },
        assignees: Some(vec!["Codertocat".to_owned()]),
    }))
}

#[test]
fn issue_comment_created_on_an_issue() {
    let body = "You are totally right! I'll get this fixed right away.";
    assert_eq!(
        decoded("issue_comment", ISSUE_COMMENT_CREATED),
        issue_comment(CommentAction::Created, issue_1(Some(1)), body)
    );
}

#[test]
fn issue_comment_created_on_a_pull_request() {
    let body = "You are totally right! I'll get this fixed right away.";
    let subject = hello_world(1, true, "Spelling error in the README file", Some(1));
    assert_eq!(
        decoded("issue_comment", ISSUE_COMMENT_CREATED_PR),
        issue_comment(CommentAction::Created, subject, body)
    );
}

#[test]
fn issue_comment_edited_keeps_the_previous_body() {
    let previous = "You are totally right! I'll get this fixed right away.";
    assert_eq!(
        decoded("issue_comment", ISSUE_COMMENT_EDITED),
        issue_comment(
            CommentAction::Edited { previous_body: Some(previous.to_owned()) },
            issue_1(None),
            "You are totally right! I'll get this fixed today."
        )
    );
}

#[test]
fn issue_comment_deleted() {
    assert_eq!(
        decoded("issue_comment", ISSUE_COMMENT_DELETED),
        issue_comment(CommentAction::Deleted, issue_1(None), "You are totally right! I'll get this fixed today.")
    );
}

#[test]
fn review_comment_created_starts_its_own_thread() {
    let body = "Maybe you should use more emoji on this line.";
    assert_eq!(
        decoded("pull_request_review_comment", REVIEW_COMMENT_CREATED),
        review_comment(CommentAction::Created, 284_312_630, 284_312_630, body)
    );
}

#[test]
fn review_comment_reply_points_at_the_thread_root() {
    let body = "@agent can you apply this suggestion?";
    assert_eq!(
        decoded("pull_request_review_comment", REVIEW_COMMENT_REPLY),
        review_comment(CommentAction::Created, 284_312_631, 284_312_630, body)
    );
}

#[test]
fn review_comment_edited_and_deleted() {
    let body = "Maybe you should use more emoji on this line.";
    assert_eq!(
        decoded("pull_request_review_comment", REVIEW_COMMENT_EDITED),
        review_comment(CommentAction::Edited { previous_body: Some(String::new()) }, 284_312_630, 284_312_630, body)
    );
    assert_eq!(
        decoded("pull_request_review_comment", REVIEW_COMMENT_DELETED),
        review_comment(CommentAction::Deleted, 284_312_630, 284_312_630, body)
    );
}

#[test]
fn issues_assigned_and_unassigned() {
    let description = Some("It looks like you accidently spelled 'commit' with two 't's.".to_owned());
    assert_eq!(
        decoded("issues", ISSUES_ASSIGNED),
        event(EventKind::Assignment(AssignmentEvent {
            subject: issue_1(Some(1)),
            actor: codertocat(),
            change: AssignmentChange::Assigned { login: "Codertocat".to_owned() },
            description: description.clone(),
        }))
    );
    assert_eq!(
        decoded("issues", ISSUES_UNASSIGNED),
        event(EventKind::Assignment(AssignmentEvent {
            subject: issue_1(None),
            actor: codertocat(),
            change: AssignmentChange::Unassigned { login: "Codertocat".to_owned() },
            description,
        }))
    );
}

#[test]
fn ping_and_installation_are_unrouted() {
    assert_eq!(decoded("ping", PING), event(EventKind::Unrouted(Unrouted { event: "ping".to_owned(), action: None })));
    assert_eq!(
        decoded("installation", INSTALLATION_CREATED),
        event(EventKind::Unrouted(Unrouted { event: "installation".to_owned(), action: Some("created".to_owned()) }))
    );
    assert_eq!(
        decoded("installation_repositories", r#"{"action":"added"}"#),
        event(EventKind::Unrouted(Unrouted {
            event: "installation_repositories".to_owned(),
            action: Some("added".to_owned())
        }))
    );
}

#[test]
fn unknown_actions_and_events_are_unrouted_even_with_other_shapes() {
    // A routed event name with a new action must not be parsed as a comment.
    assert_eq!(
        decoded("issue_comment", r#"{"action":"pinned","something":"new"}"#),
        event(EventKind::Unrouted(Unrouted { event: "issue_comment".to_owned(), action: Some("pinned".to_owned()) }))
    );
    assert_eq!(
        decoded("issues", r#"{"action":"labeled"}"#),
        event(EventKind::Unrouted(Unrouted { event: "issues".to_owned(), action: Some("labeled".to_owned()) }))
    );
    assert_eq!(
        decoded("pull_request", r#"{"action":"created"}"#),
        event(EventKind::Unrouted(Unrouted { event: "pull_request".to_owned(), action: Some("created".to_owned()) }))
    );
}

#[test]
fn bot_author_app_and_association_map_through() {
    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_COMMENT_CREATED).expect("fixture is JSON");
    payload["comment"]["user"] = json!({ "login": "beckon[bot]", "id": 41898282, "type": "Bot" });
    payload["comment"]["performed_via_github_app"] = json!({ "id": 1234, "slug": "beckon" });
    payload["comment"]["author_association"] = json!("NONE");
    payload["repository"]["owner"] = json!(null);
    payload["repository"]["name"] = json!(null);
    payload["issue"]["assignees"] = json!([]);
    let got = decode("issue_comment", DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    assert_eq!(
        got,
        event(EventKind::Comment(CommentEvent {
            action: CommentAction::Created,
            subject: issue_1(Some(1)),
            comment: Comment {
                id: "492700400".to_owned(),
                body: "You are totally right! I'll get this fixed right away.".to_owned(),
                author: Actor {
                    id: "41898282".to_owned(),
                    name: "beckon[bot]".to_owned(),
                    kind: ActorKind::Bot,
                    via_app_id: Some(1234),
                },
                membership: Membership::Other("NONE".to_owned()),
                placement: Placement::TopLevel,
                url: Some(ISSUE_COMMENT_URL.to_owned()),
            },
            assignees: Some(vec![]),
        }))
    );
}

#[test]
fn absent_association_is_unknown() {
    assert_eq!(membership(None), Membership::Unknown);
    assert_eq!(membership(Some("COLLABORATOR".to_owned())), Membership::Collaborator);
    assert_eq!(membership(Some("MEMBER".to_owned())), Membership::Member);
}

#[test]
fn payload_bytes_json_passes_through() {
    for content_type in ["application/json", "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8"] {
        assert_eq!(payload_bytes(Some(content_type), b"{}"), Ok(Cow::Borrowed(&b"{}"[..])), "{content_type}");
    }
}

#[test]
fn payload_bytes_form_decodes_the_payload_field() {
    let form: String = form_urlencoded::Serializer::new(String::new()).append_pair("payload", PING).finish();
    let json = payload_bytes(Some("application/x-www-form-urlencoded"), form.as_bytes()).expect("form decodes");
    assert_eq!(json.as_ref(), PING.as_bytes());
    assert_eq!(
        decode("ping", DELIVERY, &json),
        Ok(event(EventKind::Unrouted(Unrouted { event: "ping".to_owned(), action: None })))
    );
}

#[test]
fn payload_bytes_form_without_payload_is_malformed() {
    let got = payload_bytes(Some("application/x-www-form-urlencoded"), b"other=%7B%7D");
    assert!(matches!(got, Err(DecodeError::Malformed { .. })), "{got:?}");
}

#[test]
fn payload_bytes_refuses_other_content_types() {
    assert_eq!(payload_bytes(None, b"{}"), Err(DecodeError::UnsupportedMediaType { content_type: None }));
    for content_type in ["text/plain", "application/xml", "multipart/form-data; boundary=x", "", "json"] {
        assert!(
            matches!(payload_bytes(Some(content_type), b"{}"), Err(DecodeError::UnsupportedMediaType { .. })),
            "{content_type}"
        );
    }
}

fn malformed_detail(event_name: &str, json: &[u8]) -> String {
    match decode(event_name, DELIVERY, json) {
        Err(DecodeError::Malformed { detail }) => detail,
        other => panic!("expected Malformed, got {other:?}"),
    }
}

#[test]
fn malformed_json_is_refused() {
    for body in [&b""[..], b"not json", b"[]", b"null", b"{\"action\":\"created\"} trailing", b"{\"action\": 7}"] {
        malformed_detail("issue_comment", body);
        malformed_detail("ping", body);
    }
}

#[test]
fn missing_required_field_names_the_path() {
    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_COMMENT_CREATED).expect("fixture is JSON");
    if let Some(user) = payload["comment"]["user"].as_object_mut() {
        user.remove("login");
    }
    let detail = malformed_detail("issue_comment", payload.to_string().as_bytes());
    assert!(detail.starts_with("comment.user: missing field `login`"), "{detail}");

    payload["comment"]["user"]["login"] = json!("Codertocat");
    payload["issue"]["number"] = json!("one");
    let detail = malformed_detail("issue_comment", payload.to_string().as_bytes());
    assert!(detail.starts_with("issue.number: invalid type"), "{detail}");
}

#[test]
fn assignment_without_assignee_is_malformed() {
    let mut payload: serde_json::Value = serde_json::from_str(ISSUES_ASSIGNED).expect("fixture is JSON");
    payload["assignee"] = json!(null);
    assert_eq!(malformed_detail("issues", payload.to_string().as_bytes()), "assignee: missing field");
}

#[test]
fn error_detail_does_not_quote_the_body() {
    let secret_text = "PRIVATE-REPO-CONTENT ".repeat(50);
    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_COMMENT_CREATED).expect("fixture is JSON");
    payload["comment"]["id"] = json!(secret_text);
    let detail = malformed_detail("issue_comment", payload.to_string().as_bytes());
    assert!(detail.starts_with("comment.id: invalid type"), "{detail}");
    assert!(detail.len() < 300, "{detail}");
}

#[test]
fn truncated_body_is_malformed_not_a_panic() {
    let bytes = ISSUE_COMMENT_CREATED.as_bytes();
    for cut in (0..bytes.len()).step_by(97) {
        malformed_detail("issue_comment", &bytes[..cut]);
    }
}

#[test]
fn non_utf8_body_is_malformed() {
    let mut bytes = ISSUE_COMMENT_CREATED.as_bytes().to_vec();
    let at = ISSUE_COMMENT_CREATED.find("totally").expect("fixture text");
    bytes[at] = 0xff;
    malformed_detail("issue_comment", &bytes);
    malformed_detail("issue_comment", &[0xff, 0xfe, 0x00]);
}

#[test]
fn huge_but_valid_body_decodes() {
    let mut payload: serde_json::Value = serde_json::from_str(ISSUE_COMMENT_CREATED).expect("fixture is JSON");
    let body = "@agent ".repeat(1_000_000);
    payload["comment"]["body"] = json!(body);
    let got = decode("issue_comment", DELIVERY, payload.to_string().as_bytes()).expect("decodes");
    let EventKind::Comment(comment) = got.kind else { panic!("expected a comment") };
    assert_eq!(comment.comment.body.len(), body.len());
}

#[test]
fn deeply_nested_json_is_malformed_not_a_stack_overflow() {
    let nested = format!("{{\"action\":\"created\",\"x\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    malformed_detail("issue_comment", nested.as_bytes());
}
